"""The peers' continuing exploration agents -- IMED-RL (the index form of MDP-DMED's rate) and
optimistic PSRL (Agrawal & Jia 2017): their first updates against hand computations on a
two-state, two-action model, and their use through ``make_agent``, ``optplan run`` and a sweep;
environments and inputs they cannot serve are refused by name."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from optplan.agents import make_agent
from optplan.agents.index_agents import IMEDRL
from optplan.agents.psrl import OptimisticPSRL
from optplan.cli import main
from optplan.envs import TabularEnv
from optplan.experiments import run
from optplan.generators import riverswim
from optplan.mdp import FiniteHorizonMDP, TabularMDP
from optplan.sweeps import load_results, load_sweep, registry, run_sweep

NAMES = ("imed-rl", "optimistic-psrl")
#: Known mean rewards of the two-state, two-action model of the hand computations.
R = np.array([[0.2, 0.6], [0.9, 0.1]])


def _env(name, **params):
    comp = registry.get_env(name)
    return comp.build(0, **comp.resolve(params, "test"))


def _bernoulli_kl(p1: float, q1: float) -> float:
    """``KL((1 - p1, p1) || (1 - q1, q1))``."""
    return (1 - p1) * math.log((1 - p1) / (1 - q1)) + p1 * math.log(p1 / q1)


def _two_state_gain(r0, r1, up, down):
    """Gain of a two-state chain moving 0 -> 1 with probability ``up`` and 1 -> 0 with
    ``down``: the stationary law is ``(down, up) / (up + down)``."""
    return (down * r0 + up * r1) / (up + down)


# --- IMED-RL ----------------------------------------------------------------------------------


def test_imed_rl_first_indices_by_hand():
    agent = IMEDRL(R)
    agent.reset(np.random.default_rng(0))
    # nothing tried: every index -inf, the lowest action first
    assert agent.select_action(0) == 0
    assert agent.last_indices.tolist() == [-np.inf, -np.inf]
    for x, a, y in [(0, 0, 1), (0, 0, 1), (0, 1, 0), (1, 0, 1), (1, 1, 0)]:
        agent.update(x, a, 0.0, y, False)
    # counts T[0, 0] = (0, 2), T[0, 1] = (1, 0), T[1, 0] = (0, 1), T[1, 1] = (1, 0);
    # p_hat = (T + 1) / (T[x, a] + 2)
    p00, p01, p10, p11 = (0.75, 1 / 3, 2 / 3, 1 / 3)  # probability of moving to state 1
    # good actions: T[x, a] >= (ln T[x])^2: state 0 (ln 3)^2 = 1.21 keeps only action 0;
    # state 1 (ln 2)^2 = 0.48 keeps both. Policies on them: (0, 0) and (0, 1).
    g00 = _two_state_gain(R[0, 0], R[1, 0], p00, 1 - p10)
    g01 = _two_state_gain(R[0, 0], R[1, 1], p00, 1 - p11)
    assert g00 == pytest.approx(8.9 / 13) and g01 < g00
    # bias with h(0) = 0: g + h(0) = r(0, 0) + p00 h(1)
    h1 = (g00 - R[0, 0]) / p00
    e = agent.estimator
    assert e.gain == pytest.approx(g00, rel=1e-12)
    assert e.v[1] - e.v[0] == pytest.approx(h1, rel=1e-12)

    # state 0: L(0, 0) = g00, L(0, 1) = 0.6 + h1 / 3 = 0.815 is larger: action 1 is the
    # empirically optimal one (I = ln 1 = 0), action 0 needs q(1) >= (L* - 0.2) / h1
    L_star = R[0, 1] + p01 * h1
    assert L_star > g00
    K = _bernoulli_kl(p00, (L_star - R[0, 0]) / h1)
    I = agent.indices(0)
    assert I[1] == 0.0
    assert I[0] == pytest.approx(2 * K + math.log(2), rel=1e-9)
    assert agent.last_rates[0] == pytest.approx(K, rel=1e-9) and np.isnan(agent.last_rates[1])
    assert agent.select_action(0) == 1

    # state 1: action 1 would need q(1) > (L(1, 0) - 0.1) / h1 > 1: no law makes it optimal
    L1 = R[1, 0] + p10 * h1
    assert (L1 - R[1, 1]) / h1 > 1
    I = agent.indices(1)
    assert I.tolist() == [0.0, np.inf] and agent.last_rates[1] == np.inf
    assert agent.select_action(1) == 0


# --- optimistic PSRL --------------------------------------------------------------------------


def test_optimistic_psrl_first_epoch_is_the_untried_rows_optimism():
    """Nothing seen: every pair is under-visited with ``p^- = 0``, its value ``r + max u``, so
    the first policy takes the largest known reward in each state."""
    agent = OptimisticPSRL(2, 2, rewards=R)
    agent.reset(np.random.default_rng(0))
    assert agent.epochs == 1 and agent.policy.tolist() == [1, 0]
    assert (agent.chosen == -1).all() and (agent.leftover == 1.0).all()
    u = np.array([0.3, -0.4])
    q, _ = agent.backup(u)
    np.testing.assert_array_equal(q, R + 0.3)


def test_optimistic_psrl_simple_optimistic_sample_by_hand():
    """An under-visited pair seen 32 times (8 to state 0, then 24 to state 1; its 32nd visit
    starts an epoch): ``p^-(y) = (p_hat(y) - sqrt(3 p_hat(y) ln 8 / 32) - 3 ln 8 / 32)^+`` and
    the rest of the mass on the state the backup prefers."""
    agent = OptimisticPSRL(2, 2, rewards=R, min_visits=100)
    agent.reset(np.random.default_rng(1))
    for y in [0] * 8 + [1] * 24:
        agent.update(0, 0, R[0, 0], y, False)
    assert agent.N_k[0, 0] == 32  # the epoch started at the 32nd visit
    c = math.log(8)
    p_minus = [max(0.0, p - math.sqrt(3 * p * c / 32) - 3 * c / 32) for p in (0.25, 0.75)]
    assert p_minus[0] == 0.0 and p_minus[1] == pytest.approx(0.1727, abs=1e-4)
    np.testing.assert_allclose(agent.p_minus[0, 0], p_minus, rtol=1e-12)
    for u in (np.array([0.0, 1.0]), np.array([0.0, -1.0])):
        q, chosen = agent.backup(u)
        hand = R[0, 0] + p_minus[1] * u[1] + (1 - sum(p_minus)) * u.max()
        assert q[0, 0] == pytest.approx(hand, rel=1e-12) and chosen[0, 0] == -1


def test_optimistic_psrl_epochs_double():
    """One pair visited over and over: new epochs at its 1st, 2nd, 4th, 8th, 16th visit."""
    agent = OptimisticPSRL(2, 2, rewards=R)
    agent.reset(np.random.default_rng(2))
    starts = []
    for n in range(1, 21):
        before = agent.epochs
        agent.update(0, 1, R[0, 1], 0, False)
        if agent.epochs > before:
            starts.append(n)
    assert starts == [1, 2, 4, 8, 16] and agent.epochs == 6


def test_optimistic_psrl_second_epoch_plans_the_best_sample_by_hand():
    """With posterior samples for every pair (``min_visits=0``), the second epoch's policy is
    the optimal one of the extended MDP whose actions are (action, sample) pairs: found here by
    enumerating all of them, each a two-state chain of known gain."""
    psi = 3
    agent = OptimisticPSRL(2, 2, psi=psi, min_visits=0, rewards=R)
    agent.reset(np.random.default_rng(3))
    agent.update(0, 1, R[0, 1], 1, False)  # the first visit ends the first epoch
    assert agent.epochs == 2
    samples = agent.samples
    assert samples.shape == (psi, 2, 2, 2)
    np.testing.assert_allclose(samples.sum(-1), 1.0)
    choices = list(itertools.product(range(2), range(psi)))  # (action, sample) per state
    best, argbest = -np.inf, []
    for (a0, j0), (a1, j1) in itertools.product(choices, choices):
        g = _two_state_gain(R[0, a0], R[1, a1], samples[j0, 0, a0, 1], samples[j1, 1, a1, 0])
        if g > best + 1e-12:
            best, argbest = g, [(a0, a1)]
        elif g > best - 1e-12:
            argbest.append((a0, a1))
    assert tuple(agent.policy.tolist()) in argbest
    assert agent.gain_estimate == pytest.approx(best, abs=1e-5)
    assert (agent.chosen >= 0).all()


def test_optimistic_psrl_posterior_parameters():
    """The samples are Dirichlet(transition_prior + counts) draws (their mean, over many) and
    learned rewards the Normal-Gamma posterior's (mean (lam mu0 + n r) / (lam + n)); known
    rewards are used as given."""
    agent = OptimisticPSRL(2, 2, psi=4000, min_visits=0, transition_prior=0.5)
    agent.reset(np.random.default_rng(4))
    for y in [0] * 3 + [1] * 5:  # 8 visits: the epoch restarts at the 8th
        agent.update(1, 0, 0.7, y, False)
    alpha = np.array([0.5 + 3, 0.5 + 5])
    mean, var = (
        alpha / alpha.sum(),
        alpha * (alpha.sum() - alpha) / (alpha.sum() ** 2 * (alpha.sum() + 1)),
    )
    got = agent.samples[:, 1, 0].mean(axis=0)
    assert np.all(np.abs(got - mean) < 4 * np.sqrt(var / 4000))
    mu0, lam = agent.reward_prior[:2]
    post = agent.reward_posterior  # 3 rewards 0.7 seen on (1, 0, 0), 5 on (1, 0, 1)
    assert post.mean[1, 0, 0] == pytest.approx((lam * mu0 + 3 * 0.7) / (lam + 3), rel=1e-12)
    assert post.mean[1, 0, 1] == pytest.approx((lam * mu0 + 5 * 0.7) / (lam + 5), rel=1e-12)
    assert post.mean[0, 1, 1] == mu0 and post.params[1][1, 0, 1] == lam + 5
    # learned rewards enter the backup per next state: max_j sum_y p~_j(y) (mu(y) + u(y))
    u = np.array([0.0, 0.4])
    q, chosen = agent.backup(u)
    values = agent.samples[:, 1, 0] @ (agent.mu[1, 0] + u)
    assert q[1, 0] == pytest.approx(values.max(), rel=1e-12) and chosen[1, 0] == values.argmax()
    known = OptimisticPSRL(2, 2, rewards=R)
    known.reset(np.random.default_rng(0))
    np.testing.assert_array_equal(known.mu[..., 0], R)
    np.testing.assert_array_equal(known.mu[..., 1], R)


def test_optimistic_psrl_default_psi_and_min_visits():
    """Defaults: psi = max(2, min(60, floor(S ln(S A / 0.05)))), min_visits = max(5, 10 S)."""
    six = OptimisticPSRL(6, 2)
    assert (six.psi, six.min_visits) == (int(6 * math.log(12 / 0.05)), 60) == (32, 60)
    assert OptimisticPSRL(3, 2).psi == 14
    assert OptimisticPSRL(1, 1).psi == 2 and OptimisticPSRL(40, 4).psi == 60


# --- through make_agent, optplan run and a sweep ------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_make_agent_builds_from_riverswim_and_runs(name):
    env = _env("riverswim", n_states=4)
    agent = make_agent(name, env)
    assert agent.n_states == 4 and agent.n_actions == 2
    tr = run(agent, env, steps=300, seed=0)
    assert tr.steps == 300 and np.isfinite(tr.regret[-1])
    again = run(make_agent(name, env), env, steps=300, seed=0)
    np.testing.assert_array_equal(again.actions, tr.actions)  # seeded


def test_make_agent_passes_parameters():
    env = _env("riverswim", n_states=4)
    agent = make_agent("optimistic-psrl", env, psi=5, min_visits=3, transition_prior=0.5)
    assert (agent.psi, agent.min_visits, agent.transition_prior) == (5, 3, 0.5)
    assert agent.rewards is None
    known = make_agent("optimistic-psrl", env, known_rewards=True, prior_lam=2.0)
    np.testing.assert_array_equal(known.rewards, env.unwrapped.mdp.R)
    assert known.reward_prior[1] == 2.0
    imed = make_agent("imed-rl", env, method="conic", solver="CLARABEL")
    assert (imed.method, imed.solver) == ("conic", "CLARABEL")
    np.testing.assert_array_equal(imed.estimator.R, env.unwrapped.mdp.R)


@pytest.mark.parametrize("name", NAMES)
def test_optplan_run_cli(name, capsys):
    argv = ["run", "--agent", name, "--env", "riverswim", "--param", "n_states=4"]
    argv += ["--steps", "200", "--seeds", "2", "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tasks"]) == 2 and out["tasks"][0]["agent"] == name


def test_a_tiny_sweep_of_the_two(tmp_path):
    toml = tmp_path / "peers.toml"
    toml.write_text(
        'name = "peers-continuing-tiny"\nseeds = 2\nsteps = 300\n\n'
        '[[agents]]\nname = "imed-rl"\n\n'
        '[[agents]]\nname = "optimistic-psrl"\nparams = { known_rewards = [false, true] }\n\n'
        '[[envs]]\nname = "riverswim"\nparams = { n_states = 4 }\n'
    )
    report = run_sweep(load_sweep(toml), tmp_path / "out", quiet=True)
    assert (report.ran, report.failed) == (6, 0)
    results = load_results(tmp_path / "out")
    assert len(results.groups()) == 3
    for recs in results.groups().values():
        t, Y = results.curve_matrix(recs, "regret")
        assert Y.shape[0] == 2 and np.isfinite(Y).all()


def test_imed_rl_learns_the_optimal_policy_on_riverswim():
    mdp = riverswim(6)
    tr = run(IMEDRL(mdp.R), TabularEnv(mdp), steps=4000, seed=0)
    assert (tr.actions[-500:] == 1).mean() > 0.9  # swim right, the optimal action


def test_optimistic_psrl_learns_the_optimal_policy_on_riverswim():
    mdp = riverswim(6)
    for known in (False, True):
        agent = OptimisticPSRL(6, 2, rewards=mdp.R if known else None)
        tr = run(agent, TabularEnv(mdp), steps=4000, seed=0)
        assert (tr.actions[-500:] == 1).mean() > 0.9
        assert agent.stats()["evi_capped"] == 0


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_an_episodic_environment_is_refused(name):
    with pytest.raises(ValueError, match=rf"{name} is for continuing \(average-reward\)"):
        make_agent(name, _env("deepsea", size=4))
    horizon = FiniteHorizonMDP.from_stationary(riverswim(3), 5)
    with pytest.raises(ValueError, match=rf"{name} is for continuing"):
        make_agent(name, horizon)


@pytest.mark.parametrize("name", NAMES)
def test_an_environment_without_a_model_is_refused(name):
    """Neither agent can be built without the sizes; IMED-RL also needs the mean rewards."""
    with pytest.raises(TypeError, match=r"expose its true model as \.mdp"):
        make_agent(name, object())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"psi": 0}, r"psi must be a positive integer, got 0"),
        ({"psi": 2.5}, r"psi must be an integer, got 2.5"),
        ({"min_visits": -1}, r"min_visits must be a non-negative integer, got -1"),
        ({"rewards": np.zeros((3, 2))}, r"rewards must be a finite \(2, 2\) array.*\(3, 2\)"),
        ({"rewards": [[0.0, np.nan], [0.0, 0.0]]}, r"rewards has a non-finite entry nan"),
        ({"transition_prior": 0.0}, r"transition_prior must be a finite number > 0, got 0"),
        ({"tol": -1.0}, r"tol must be a finite number > 0"),
        ({"reward_prior": (0.0, -1.0, 1.0, 1.0)}, r"lam must be > 0, got -1"),
    ],
)
def test_optimistic_psrl_bad_parameters_name_the_field(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        OptimisticPSRL(2, 2, **kwargs)


def test_sizes_and_reward_matrices_are_checked():
    with pytest.raises(TypeError, match=r"n_states"):
        OptimisticPSRL(riverswim(3), 2)
    with pytest.raises(ValueError, match=r"IMEDRL\(rewards=\.\.\.\) expects the known mean-reward"):
        IMEDRL(3)
    model = TabularMDP(riverswim(3).P, riverswim(3).R)
    with pytest.raises(ValueError, match=r"make_agent\('imed-rl', env\)"):
        IMEDRL(model)
