"""UBE Thompson sampling, the count-bonus comparator and the UBE paper's chain (§3.2).

The §3.2 identities (``u1 = u2 = sigma^2 / n``; the compounded count bonus of the chain is
``sqrt((1 + gamma) / (1 - gamma))`` times the stop action's), exact re-planning, the batched
chain runs against the generic loop, runs in the experiments loop, bad input.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from optplan.agents import UBE, CountBonus
from optplan.envs import DeepSea, UBEChain
from optplan.experiments import run
from optplan.experiments.chain_batch import run_chain_batch
from optplan.posteriors import LayeredPosterior, gaussian_mean_posterior
from optplan.sweeps.registry import get_agent, get_env
from optplan.sweeps.sweep import load_sweep

GAMMA = 0.9
#: gamma^(H+1) < 1e-13: the chain's truncation is below the identities' tolerance
LONG = 300
TOL = 1e-12


def agent_on(cls, env, **kw):
    """An agent told what §3.2's agents know: the transitions, the noise sd, the discount."""
    mdp = env.mdp
    L = mdp.horizon if env.layered else None
    shape = mdp.R.shape
    return cls(
        shape[-2],
        shape[-1],
        n_layers=L,
        discount=env.discount,
        sigma=env.reward_sd,
        known_transitions=mdp.P,
        action_mask=mdp.action_mask,
        **kw,
    )


def pulled(agent, env, n: int, rng) -> None:
    """Set the posterior to ``n`` pulls of each root action (every chain pair ``n`` times)."""
    post = agent.posterior
    idx = (0, 0) if env.layered else (0,)
    chain = (slice(None), 0, 1) if env.layered else (slice(0, env.length + 1), 1)
    post.counts[(*idx, 0)] = n
    post.reward_sums[(*idx, 0)] = n * (1.0 + rng.standard_normal())
    post.counts[chain] = n
    post.reward_sums[chain] = n * rng.standard_normal(post.counts[chain].shape)
    agent.plan()


def rel(a, b) -> float:
    return abs(a - b) / abs(b)


# --- the §3.2 identities ----------------------------------------------------------------------


@pytest.mark.parametrize("layered", [True, False], ids=["layered", "continuing"])
@pytest.mark.parametrize("sigma", [1.0, 2.5])
@pytest.mark.parametrize("n", [1, 10, 1000])
def test_ube_equal_uncertainty_of_both_actions(n, sigma, layered):
    """u1 = u2 = sigma^2 / n (uncertainty-bellman-equation §3.2) to 1e-12, relative."""
    env = UBEChain(LONG, sigma=sigma, discount=GAMMA, layered=layered)
    agent = agent_on(UBE, env)
    agent.reset(np.random.default_rng(0))
    pulled(agent, env, n, np.random.default_rng(n))
    u = agent.u[0, 0] if layered else agent.u[0]
    assert rel(u[0], sigma**2 / n) <= TOL
    assert rel(u[1], sigma**2 / n) <= TOL
    # the local term is the reward posterior's variance, sd^2 / n, on the chain too
    nu = agent.local[0, 0] if layered else agent.local[0]
    assert rel(nu[1], sigma**2 * (1 - GAMMA**2) / n) <= TOL


@pytest.mark.parametrize("layered", [True, False], ids=["layered", "continuing"])
@pytest.mark.parametrize("n", [1, 10, 1000])
def test_count_bonus_of_the_chain_is_sqrt_19_times_larger(n, layered):
    """bonus_2 / bonus_1 = sqrt((1 + gamma) / (1 - gamma)) (= sqrt(19)) to 1e-12."""
    env = UBEChain(LONG, discount=GAMMA, layered=layered)
    agent = agent_on(CountBonus, env, beta=0.1)
    agent.reset(np.random.default_rng(0))
    pulled(agent, env, n, np.random.default_rng(n))
    B = agent.compounded_bonus()
    b = B[0, 0] if layered else B[0]
    assert rel(b[0], 1.0 / math.sqrt(n)) <= TOL
    assert rel(b[1] / b[0], math.sqrt((1 + GAMMA) / (1 - GAMMA))) <= TOL
    assert rel(b[1] / b[0], math.sqrt(19.0)) <= TOL
    # the agent's optimistic values are Qhat + beta log(t) bonus
    q = agent.q[0, 0] if layered else agent.q[0]
    Q_hat = agent._QA[0, 0] if layered else None
    if layered:
        np.testing.assert_allclose(q, Q_hat + agent._scale * b, rtol=0, atol=1e-14)


def test_identities_from_fed_episodes():
    """The same identities when the posterior learns from n = 10 episodes of each action."""
    n = 10
    env = UBEChain(LONG, discount=GAMMA)
    ube, bonus = agent_on(UBE, env), agent_on(CountBonus, env)
    for agent in (ube, bonus):
        agent.reset(np.random.default_rng(0))
    env.reset(seed=1)
    for action in [0] * n + [1] * n:
        s, _ = env.reset()
        done = False
        while not done:
            s2, r, term, trunc, _ = env.step(action)
            done = term or trunc
            for agent in (ube, bonus):
                agent.update(s, action, r, s2, done)
            s = s2
    assert rel(ube.u[0, 0, 0], 1.0 / n) <= TOL and rel(ube.u[0, 0, 1], 1.0 / n) <= TOL
    b = bonus.compounded_bonus()[0, 0]
    assert rel(b[1] / b[0], math.sqrt(19.0)) <= TOL


def test_chain_truncation_numbers():
    env = UBEChain(50, discount=GAMMA)
    g = GAMMA**51
    assert env.return_variance[1] == pytest.approx(1 - g * g, rel=1e-15)
    assert env.bonus_factor == pytest.approx(math.sqrt(19) * (1 - g), rel=1e-15)
    direct = sum(GAMMA**k * math.sqrt(1 - GAMMA**2) for k in range(51))
    assert env.bonus_factor == pytest.approx(direct, rel=1e-13)
    assert 1 - env.return_variance[1] == pytest.approx(2.1e-5, rel=0.05)
    assert env.bonus_factor / math.sqrt(19) == pytest.approx(1 - 4.6e-3, abs=1e-4)


# --- the environment --------------------------------------------------------------------------


@pytest.mark.parametrize("layered", [True, False])
def test_chain_env_api_and_model(layered):
    env = UBEChain(5, mu1=0.7, mu2=0.2, sigma=2.0, discount=0.8, layered=layered)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env, skip_render_check=True)
    env.reset(seed=3)
    s, r, term, trunc, info = env.step(0)
    assert term and not trunc and info == {"expected_reward": 0.7, "layer": 1}
    env.reset()
    steps = 0
    done = False
    while not done:
        _, _, done, _, info = env.step(1)
        steps += 1
    assert steps == 6 and info["layer"] == 6
    with pytest.raises(RuntimeError, match="reset"):
        env.step(1)
    # the discounted values of the root, from the continuing model's own planner
    if not layered:
        from optplan.problems import solve_discounted

        res = solve_discounted(env.mdp)
        np.testing.assert_allclose(res.q[0], env.root_q, rtol=1e-12)
    sd = env.reward_sd
    assert (sd[0, 0, 0] if layered else sd[0, 0]) == 2.0
    assert (sd[3, 0, 1] if layered else sd[3, 1]) == pytest.approx(2.0 * 0.6)


def test_chain_rewards_and_discounted_return_variance():
    """Chain rewards are N(mu2, sigma^2 (1 - gamma^2)); the discounted return of a chain
    episode has variance sigma^2 (1 - gamma^(2(H+1))) (Monte Carlo, 4000 episodes)."""
    env = UBEChain(20, mu2=0.3, sigma=1.5, discount=GAMMA)
    env.reset(seed=0)
    returns, rewards = [], []
    for _ in range(4000):
        env.reset()
        rs = [env.step(1)[1] for _ in range(21)]
        rewards += rs
        returns.append(np.dot(GAMMA ** np.arange(21), rs))
    se = 5 / math.sqrt(len(rewards))
    assert np.mean(rewards) == pytest.approx(0.3, abs=1.5 * 0.44 * se)
    assert np.var(returns) == pytest.approx(env.return_variance[1], rel=5 * math.sqrt(2 / 4000))


def test_regret_of_the_layered_chain_is_the_root_gap():
    """mu2 = 0: the finite-horizon regret of the run loop is the discounted root gap."""
    env = UBEChain(10)
    agent = agent_on(CountBonus, env, beta=1.0)
    tr = run(agent, env, episodes=50, seed=2)
    starts = np.r_[0, tr.episode_ends[:-1]]
    root = tr.actions[starts]
    assert tr.regret[-1] == env.root_gaps[root].sum() and root.any()
    assert env.root_gaps.tolist() == [0.0, 1.0]


def test_bad_chain_parameters():
    for kw, name in [
        ({"length": 0}, "length"),
        ({"sigma": 0.0}, "sigma"),
        ({"discount": 1.0}, "discount"),
        ({"mu1": float("nan")}, "mu1"),
        ({"layered": 1}, "layered"),
    ]:
        with pytest.raises((ValueError, TypeError), match=name):
            UBEChain(**kw)
    env = UBEChain(3)
    env.reset(seed=0)
    env.step(1)
    with pytest.raises(ValueError, match="not admissible"):
        env.step(0)


# --- planning ---------------------------------------------------------------------------------


def _fed(agent, env, episodes, seed):
    run(agent, env, episodes=episodes, seed=seed)
    return agent


@pytest.mark.parametrize(
    "make",
    [
        lambda: (UBE, UBEChain(8), {}),
        lambda: (CountBonus, UBEChain(8), {"beta": 0.5}),
        lambda: (UBE, DeepSea(5, variant="k-learning"), {"local": "lemma1", "reward_bound": 1.0}),
        lambda: (CountBonus, DeepSea(5, variant="k-learning"), {"beta": 0.2}),
    ],
    ids=["ube-chain", "bonus-chain", "ube-deepsea", "bonus-deepsea"],
)
def test_incremental_planning_equals_a_full_plan(make):
    cls, env, kw = make()
    mdp = env.mdp
    L, S, A = mdp.R.shape
    known = {"known_transitions": mdp.P} if isinstance(env, UBEChain) else {}
    agent = cls(S, A, n_layers=L, action_mask=mdp.action_mask, **known, **kw)
    _fed(agent, env, 60, seed=4)
    q, policy = agent.q.copy(), agent.policy.copy()
    u = agent.u.copy() if cls is UBE else None
    agent.plan()
    np.testing.assert_array_equal(agent.q, q)
    np.testing.assert_array_equal(agent.policy, policy)
    if u is not None:
        np.testing.assert_array_equal(agent.u, u)


@pytest.mark.slow
def test_ube_u_is_the_problem_solution_and_conic_agrees():
    """The agent's u solves the UBE of its posterior-mean model; method="conic" gives it too."""
    import optplan as op

    env = DeepSea(4, variant="k-learning")
    mdp = env.mdp
    kw = dict(n_layers=4, local="tabular", reward_bound=1.0)
    fast = _fed(UBE(4, 2, **kw), env, 30, seed=1)
    prob = op.UncertaintyBellman(
        mean_transitions=fast.P, policy=fast.policy, local=fast.local, discount=fast.discount
    )
    assert prob.residual(fast.u) <= 1e-12 * (1 + np.abs(fast.u).max())
    conic = _fed(UBE(4, 2, method="conic", **kw), env, 30, seed=1)
    np.testing.assert_allclose(conic.u, fast.u, rtol=1e-6, atol=1e-7)
    assert conic.stats()["plans"] == 31 and mdp.horizon == 4


def test_posterior_pieces():
    """Per-pair sd (zeros included) equals pair-by-pair calls; the flat prior; continuing."""
    rng = np.random.default_rng(0)
    sums, counts = rng.standard_normal((3, 2)), rng.integers(0, 4, (3, 2)).astype(float)
    sd = np.array([[0.0, 1.0], [2.0, 0.0], [0.5, 0.3]])
    mean, var = gaussian_mean_posterior(sums, counts, sd, 2.0)
    for i in np.ndindex(3, 2):
        m, v = gaussian_mean_posterior(sums[i], counts[i], float(sd[i]), 2.0)
        assert mean[i] == m and var[i] == v
    post = LayeredPosterior(None, 3, 2, sigma=sd, prior_var=None)
    post.update(None, 1, 0, 4.0, 2)
    post.update(None, 1, 0, 2.0, 2)
    mean, var = post.reward_posterior()
    assert mean[1, 0] == 3.0 and var[1, 0] == 2.0 and var[0, 1] == 1.0 and mean[0, 1] == 0.0
    assert post.next_counts[1, 0, 2] == 2  # continuing: every transition is recorded
    with pytest.raises(ValueError, match="sigma"):
        LayeredPosterior(2, 3, 2, sigma=np.ones((4, 2)))
    with pytest.raises(ValueError, match="sigma"):
        LayeredPosterior(2, 3, 2, sigma=-np.ones((3, 2)))


# --- in the experiments loop ------------------------------------------------------------------


def _build(agent, agent_params, env, env_params):
    e = get_env(env).build(0, **get_env(env).resolve(env_params, "test"))
    comp = get_agent(agent)
    return comp.build(e, None, **comp.resolve(agent_params, "test")), e


@pytest.mark.parametrize("agent", ["ube", "count-bonus"])
@pytest.mark.parametrize(
    "env, env_params, horizon",
    [
        ("ube-chain", {"length": 10}, {"episodes": 40}),
        ("ube-chain", {"length": 10, "layered": False}, {"episodes": 40}),
        ("deepsea", {"size": 4, "variant": "k-learning"}, {"episodes": 40}),
        ("riverswim", {"n_states": 4}, {"steps": 200}),
    ],
    ids=["chain-episodic", "chain-continuing", "deepsea-episodic", "riverswim-continuing"],
)
@pytest.mark.parametrize("transitions", ["known", "dirichlet"])
def test_agents_run_in_the_loop(agent, env, env_params, horizon, transitions):
    extra = {"update_every": 5} if "steps" in horizon else {}
    a, e = _build(agent, {"transitions": transitions, **extra}, env, env_params)
    assert a.episodic == (env != "riverswim" and env_params.get("layered", True))
    tr = run(a, e, seed=0, **horizon)
    assert np.isfinite(tr.regret).all() and tr.regret[-1] >= -1e-9 * tr.steps


@pytest.mark.slow
def test_ube_finds_the_stop_action():
    """Fixed seeds: UBE Thompson sampling (zeta = 1) stops at the root in >= 90% of episodes
    201-300 on the 50-state chain; the count bonus with beta = 1 walks the chain far more."""
    for seed in range(3):
        a, e = _build("ube", {"transitions": "known"}, "ube-chain", {})
        tr = run(a, e, episodes=300, seed=seed)
        root = tr.actions[np.r_[0, tr.episode_ends[:-1]]]
        assert (root[200:] == 0).mean() >= 0.9
        b, e = _build("count-bonus", {"transitions": "known", "beta": 1.0}, "ube-chain", {})
        tb = run(b, e, episodes=300, seed=seed)
        assert tb.regret[-1] > 5 * tr.regret[-1]


# --- the batched chain runs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "agent, params",
    [
        ("ube", {"zeta": 1.0}),
        ("ube", {"zeta": 0.2}),
        ("count-bonus", {"beta": 1.0}),
        ("count-bonus", {"beta": 0.03}),
    ],
)
def test_batch_reproduces_the_generic_loop(agent, params):
    """Every root action of 4 seeds x 150 episodes equals the generic loop's, bit for bit."""
    comp = get_agent(agent)
    resolved = comp.resolve({**params, "transitions": "known"}, "test")
    env = UBEChain(12)
    seeds = [3, 17, 2**40 + 5, 123456789]
    batch = run_chain_batch(agent, resolved, env, seeds, 150)
    for i, seed in enumerate(seeds):
        tr = run(comp.build(env, None, **resolved), env, episodes=150, seed=seed)
        starts = np.r_[0, tr.episode_ends[:-1]]
        np.testing.assert_array_equal(tr.actions[starts], batch.actions[i])
        np.testing.assert_array_equal(tr.regret[tr.episode_ends - 1], batch.regret[i])


def test_batch_refuses_what_it_does_not_reproduce():
    env = UBEChain(5)
    ube = get_agent("ube").resolve({"transitions": "known"}, "t")
    with pytest.raises(ValueError, match="transitions"):
        run_chain_batch("ube", {**ube, "transitions": "dirichlet"}, env, [0], 5)
    with pytest.raises(ValueError, match="prior_var"):
        run_chain_batch("ube", {**ube, "prior_var": 1.0}, env, [0], 5)
    with pytest.raises(ValueError, match="layered"):
        run_chain_batch("ube", ube, UBEChain(5, layered=False), [0], 5)
    with pytest.raises(ValueError, match="zeta"):
        run_chain_batch("ube", {**ube, "zeta": -1.0}, env, [0], 5)


@pytest.mark.slow
def test_fig2_example_quick(tmp_path):
    """examples/ube_chain_fig2.py --quick: batched runs, the generic-loop check, the figure."""
    root = Path(__file__).parents[1]
    out = subprocess.run(
        [sys.executable, str(root / "examples" / "ube_chain_fig2.py"), "--quick"]
        + ["--out", str(tmp_path / "fig2.png")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "root actions equal to the batch's: True" in out.stdout
    assert (tmp_path / "fig2.png").stat().st_size > 10_000


def test_fig2_sweep_file_is_valid():
    sweep = load_sweep(Path(__file__).parents[1] / "models" / "sweeps" / "ube-fig2.toml")
    assert len(sweep.seeds) == 500 and sweep.episodes == 10_000
    names = {a.name for a in sweep.agents}
    assert names == {"ube", "count-bonus"}


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, kw, match",
    [
        (UBE, {"zeta": -0.1}, "zeta"),
        (UBE, {"zeta": float("nan")}, "zeta"),
        (CountBonus, {"beta": -1.0}, "beta"),
        (CountBonus, {"beta": "1"}, "beta"),
        (UBE, {"reward_bound": 0.0}, "reward_bound"),
        (UBE, {"reward_bound": -2.0}, "reward_bound"),
        (UBE, {"reward_bound": float("inf")}, "reward_bound"),
        (UBE, {}, "reward_bound"),
        (UBE, {"reward_bound": 1.0, "local": "nope"}, "local"),
        (UBE, {"local": "tabular", "known_transitions": np.full((3, 2, 3), 1 / 3)}, "local"),
        (UBE, {"known_transitions": np.full((3, 2, 2), 0.5)}, "known_transitions"),
        (CountBonus, {"known_transitions": np.full((3, 2, 3), 0.5)}, "known_transitions"),
        (CountBonus, {"sigma": np.ones((2, 2))}, "sigma"),
        (CountBonus, {"sigma": -1.0}, "sigma"),
        (CountBonus, {"prior_var": 0.0}, "prior_var"),
        (CountBonus, {"action_mask": np.ones((2, 2), bool)}, "action_mask"),
        (CountBonus, {"update_every": 0}, "update_every"),
        (CountBonus, {"discount": 1.0}, "discount"),
        (CountBonus, {"n_layers": 0}, "n_layers"),
        (CountBonus, {"n_layers": 2, "update_every": 3}, "update_every"),
        (CountBonus, {"n_layers": 2, "action_mask": np.ones((3, 3, 2), bool)}, "action_mask"),
    ],
)
def test_bad_agent_input_names_the_field(cls, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        cls(3, 2, **kw)


def test_bad_registry_input():
    for params, env, match in [
        ({"mode": "episodic"}, "riverswim", "episodic"),
        ({"mode": "continuing"}, "ube-chain", "continuing"),
        ({"mode": "sideways"}, "ube-chain", "mode"),
        ({"transitions": "guessed"}, "ube-chain", "transitions"),
        ({"zeta": -1.0}, "ube-chain", "zeta"),
    ]:
        with pytest.raises(ValueError, match=match):
            _build("ube", params, env, {})


def test_agents_without_a_bonus_have_a_zero_one():
    env = UBEChain(5, discount=GAMMA)
    agent = agent_on(UBE, env)
    agent.reset(np.random.default_rng(0))
    assert agent._bonus_scale() == 0.0 and not agent._bonus().any()
    assert agent._bonus().shape == agent.action_mask.shape
