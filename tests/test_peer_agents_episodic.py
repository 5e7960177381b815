"""The peers' episodic exploration agents -- UCBVI (Hoeffding and Bernstein bonuses),
Q-learning with UCB-Hoeffding bonuses and tabular RLSVI: their first updates against hand
computations on a two-state, two-action, two-step model, and their use through ``make_agent``,
``optplan run`` and a sweep; environments they cannot serve are refused by name."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from optplan.agents import RLSVI, UCBVI, QLearningUCB, make_agent
from optplan.cli import main
from optplan.experiments import run
from optplan.generators import riverswim
from optplan.mdp import FiniteHorizonMDP
from optplan.sweeps import load_results, registry, run_sweep, sweep_from_dict

NAMES = ("ucbvi", "q-learning-ucb", "rlsvi")


def _env(name, **params):
    comp = registry.get_env(name)
    return comp.build(0, **comp.resolve(params, "test"))


def _play(agent, steps):
    """Feed ``(state, action, reward, next_state, done)`` tuples to ``agent``."""
    for step in steps:
        agent.update(*step)


# Two episodes of H = 2 steps in a two-state, two-action model: step 0 from state 0 by
# action 1 to state 1 (reward 0), then step 1 in state 1 by action 0 (reward 0.25), then by
# action 1 (reward 0.5).
EPISODE_1 = [(0, 1, 0.0, 1, False), (1, 0, 0.25, 0, True)]
EPISODE_2 = [(0, 1, 0.0, 1, False), (1, 1, 0.5, 0, True)]


# --- UCBVI ---------------------------------------------------------------------------------


def test_ucbvi_hoeffding_first_two_plans_by_hand():
    agent = UCBVI(2, 2, n_layers=2, beta_scale=0.001, delta=0.1, episodes=10)
    agent.reset(np.random.default_rng(0))
    # before any data: every pair at its cap H - h
    np.testing.assert_array_equal(agent.q, [[[2, 2], [2, 2]], [[1, 1], [1, 1]]])
    L = math.log(5 * 2 * 2 * (10 * 2) / 0.1)  # ln(5 S A T / delta), T = K H = 20
    b1 = 0.001 * 7 * 2 * L * math.sqrt(1 / 1)  # a pair seen once
    b2 = 0.001 * 7 * 2 * L * math.sqrt(1 / 2)  # seen twice

    _play(agent, EPISODE_1)
    # step 1: Q(1, 0) = min(1, 0.25 + 0 + b1); the rest unvisited at 1. V_1 = (1, 1)
    assert agent.q[1, 1, 0] == pytest.approx(0.25 + b1)
    assert agent.q[1, 1, 1] == 1.0 and agent.values[1].tolist() == [1.0, 1.0]
    # step 0: Q(0, 1) = min(2, 0 + V_1(1) + b1) = 1 + b1
    assert agent.q[0, 0, 1] == pytest.approx(1 + b1)
    assert agent.q[0, 0, 0] == 2.0

    _play(agent, EPISODE_2)
    # step 1: Q(1, 1) = 0.5 + b1, Q(1, 0) unchanged; V_1(1) = 0.5 + b1, V_1(0) = 1
    assert agent.q[1, 1, 1] == pytest.approx(0.5 + b1)
    assert agent.values[1, 1] == pytest.approx(0.5 + b1)
    # step 0: min(previous 1 + b1, 0 + (0.5 + b1) + b2), the latter smaller
    assert agent.q[0, 0, 1] == pytest.approx(0.5 + b1 + b2)
    assert agent.values[0, 0] == 2.0  # action 0 unvisited: still at the cap
    assert agent.bonus_values[0, 0, 1] == pytest.approx(b2)


def test_ucbvi_q_never_increases_min_with_the_last_plan():
    agent = UCBVI(2, 2, n_layers=2, beta_scale=0.001, delta=0.1)  # anytime T = k H
    agent.reset(np.random.default_rng(0))
    _play(agent, EPISODE_1)
    first = agent.q[1, 1, 0]
    _play(agent, [(0, 0, 0.0, 0, False), (0, 0, 0.0, 1, True)])
    # (1, 0) not revisited, but L grew with k: its fresh value is larger, the min keeps first
    assert agent.q[1, 1, 0] == first
    assert agent.log_term() == pytest.approx(math.log(5 * 2 * 2 * 3 * 2 / 0.1))


def test_ucbvi_bernstein_bonus_by_hand():
    agent = UCBVI(2, 2, n_layers=2, bonus="bernstein", delta=0.1, episodes=10)
    agent.reset(np.random.default_rng(0))
    # step 0 goes to state 1, then to state 0: P_hat(. | 0, 1) = (1/2, 1/2)
    _play(agent, EPISODE_1)
    _play(agent, [(0, 1, 0.0, 0, False), (0, 0, 0.5, 1, True)])
    H, S, A, N = 2, 2, 2, 2
    L = math.log(5 * S * A * 20 / 0.1)
    # last step: V_H = 0, no variance, no last term: b = 14 H L / (3 N) (N = 1)
    assert agent.bonus_values[1, 1, 0] == pytest.approx(14 * H * L / 3)
    assert agent.bonus_values[1, 0, 0] == pytest.approx(14 * H * L / 3)
    assert agent.bonus_values[1, 0, 1] == 0.0  # unvisited
    # step 0: V_1 = (1, 1) (both states have an unvisited action at the cap 1): variance 0;
    # N'_1(y) = 1 for both states, so the last term is min(100^2 H^3 S^2 A L^2, H^2) = H^2
    v_var = 0.0
    last = math.sqrt(8 * (0.5 * H**2 + 0.5 * H**2) / N)
    expected = math.sqrt(8 * L * v_var / N) + 14 * H * L / (3 * N) + last
    assert agent.values[1].tolist() == [1.0, 1.0]
    assert agent.bonus_values[0, 0, 1] == pytest.approx(expected)
    # an unseen next-step state also gets H^2: step 1 from state 1 only, (0, 1) -> 1
    fresh = UCBVI(2, 2, n_layers=2, bonus="bernstein", delta=0.1, episodes=10)
    _play(fresh, EPISODE_1)
    assert fresh.bonus_values[0, 0, 1] == pytest.approx(14 * H * L / 3 + math.sqrt(8 * H**2 / 1))


def test_ucbvi_bernstein_variance_term_by_hand():
    # H = 3 so that V_2 is below its cap at both states once step 2 is fully visited
    agent = UCBVI(2, 1, n_layers=3, bonus="bernstein", beta_scale=1e-3, delta=0.1, episodes=5)
    agent.reset(np.random.default_rng(0))
    _play(agent, [(0, 0, 0.0, 0, False), (0, 0, 0.0, 0, False), (0, 0, 0.75, 0, True)])
    _play(agent, [(0, 0, 0.0, 0, False), (0, 0, 0.0, 1, False), (1, 0, 0.25, 0, True)])
    H, S, A = 3, 2, 1
    L = math.log(5 * S * A * 15 / 0.1)
    s = 1e-3
    # step 2 (last): each state seen once, b = s 14 H L / 3, V_2 = r + b below the cap 1
    b_last = s * 14 * H * L / 3
    v2 = np.array([0.75 + b_last, 0.25 + b_last])
    np.testing.assert_allclose(agent.values[2], v2)
    # step 1 from state 0, seen twice, next states 0 and 1: P_hat = (1/2, 1/2)
    pv = v2.mean()
    var = np.mean(v2**2) - pv**2  # = (0.75 - 0.25)^2 / 4
    assert var == pytest.approx(0.0625)
    visits = np.array([1, 1])  # N'_2: each state once at step 2
    w = np.minimum(100**2 * H**3 * S**2 * A * L**2 / visits, H**2)
    b = math.sqrt(8 * L * var / 2) + 14 * H * L / (3 * 2) + math.sqrt(8 * w.mean() / 2)
    assert agent.bonus_values[1, 0, 0] == pytest.approx(s * b)
    # the first plan's value of (step 1, state 0): seen once, to state 0; V_2 = (0.75 + b_last,
    # 1: state 1 unvisited at step 2), N'_2 = (1, 0): the last term's weights are H^2 both
    first = min(2.0, 0.75 + b_last + s * (14 * H * L / 3 + math.sqrt(8 * H**2)))
    assert agent.q[1, 0, 0] == pytest.approx(min(first, 0.0 + pv + s * b))
    assert pv + s * b < first  # the second plan's value is the one kept


def test_ucbvi_stationary_pools_the_steps_and_known_rewards_are_used():
    pooled = UCBVI(2, 2, n_layers=2, beta_scale=0.0, stationary=True)
    _play(pooled, [(0, 1, 0.0, 1, False), (1, 1, 0.5, 0, True)])
    # (1, 1) was seen at step 1 only; pooled, step 0 knows it too: Q_0(1, 1) = 0.5 + V_1(0)
    assert pooled.q[0, 1, 1] == pytest.approx(0.5 + pooled.values[1, 0])
    per_step = UCBVI(2, 2, n_layers=2, beta_scale=0.0)
    _play(per_step, [(0, 1, 0.0, 1, False), (1, 1, 0.5, 0, True)])
    assert per_step.q[0, 1, 1] == 2.0  # unvisited at step 0
    R = np.array([[0.1, 0.2], [0.3, 0.4]])
    known = UCBVI(2, 2, n_layers=2, beta_scale=0.0, rewards=R)
    _play(known, [(0, 1, 0.0, 1, False), (1, 1, 0.5, 0, True)])
    assert known.q[1, 1, 1] == pytest.approx(0.4)  # the given mean, not the observed 0.5


# --- Q-learning with UCB-Hoeffding -----------------------------------------------------------


def test_q_learning_ucb_first_updates_by_hand():
    agent = QLearningUCB(2, 2, n_layers=2, c=0.1, delta=0.1, episodes=10)
    agent.reset(np.random.default_rng(0))
    H = 2
    iota = math.log(2 * 2 * (10 * 2) / 0.1)  # ln(S A T / delta)

    def b(t):
        return 0.1 * math.sqrt(H**3 * iota / t)

    np.testing.assert_array_equal(agent.q, np.full((2, 2, 2), 2.0))
    _play(agent, EPISODE_1)
    # t = 1, alpha = 1: Q_0(0, 1) = 0 + V_1(1) + b(1), V_1(1) = H before the step-1 update
    assert agent.q[0, 0, 1] == pytest.approx(2 + b(1))
    assert agent.values[0, 0] == 2.0  # min(H, max Q)
    assert agent.q[1, 1, 0] == pytest.approx(0.25 + b(1))  # the last step: no future
    assert agent.values[1, 1] == 2.0  # (1, 1) still at H
    _play(agent, EPISODE_2)
    # t = 2, alpha = (H + 1) / (H + 2) = 3/4
    q = (1 - 3 / 4) * (2 + b(1)) + 3 / 4 * (0 + 2.0 + b(2))
    assert agent.q[0, 0, 1] == pytest.approx(q)
    assert agent.q[1, 1, 1] == pytest.approx(0.5 + b(1))
    assert agent.values[1, 1] == pytest.approx(0.5 + b(1))  # below H now
    _play(agent, [(0, 1, 0.0, 1, False)])
    # t = 3, alpha = 3/5, V_1(1) = 0.5 + b(1)
    assert agent.q[0, 0, 1] == pytest.approx(2 / 5 * q + 3 / 5 * (0.5 + b(1) + b(3)))


def test_q_learning_ucb_anytime_iota():
    agent = QLearningUCB(3, 2, n_layers=4, delta=0.05)
    assert agent.iota() == pytest.approx(math.log(3 * 2 * 1 * 4 / 0.05))
    _play(agent, [(0, 0, 0.0, 0, False)] * 3 + [(0, 0, 0.0, 0, True)])
    assert agent.iota() == pytest.approx(math.log(3 * 2 * 2 * 4 / 0.05))
    assert agent.bonus(4) == pytest.approx(math.sqrt(4**3 * agent.iota() / 4))


# --- RLSVI ---------------------------------------------------------------------------------


def test_rlsvi_first_draw_by_hand():
    sigma, prior_var = 0.5, 2.0
    agent = RLSVI(2, 2, n_layers=2, sigma=sigma, prior_var=prior_var)
    agent.reset(np.random.default_rng(7))
    # before any data: the prior N(0, prior_var) everywhere
    np.testing.assert_array_equal(agent.mean, 0.0)
    np.testing.assert_allclose(agent.sd, math.sqrt(prior_var))
    _play(agent, [(0, 1, 0.2, 1, False), (1, 0, 1.0, 0, True)])
    lam, nv = 1 / prior_var, sigma**2
    post_sd = 1 / math.sqrt(1 / nv + lam)
    # step 1: one target y = 1.0 (the episode ended: no continuation)
    assert agent.mean[1, 1, 0] == pytest.approx((1.0 / nv) / (1 / nv + lam))
    assert agent.sd[1, 1, 0] == pytest.approx(post_sd)
    assert agent.mean[1, 0, 0] == 0.0 and agent.sd[1, 0, 0] == pytest.approx(2**0.5)
    # step 0: y = 0.2 + max_a' Q~_1(1, a'), with the Q~_1 drawn in this same plan
    y = 0.2 + agent.q[1, 1].max()
    assert agent.mean[0, 0, 1] == pytest.approx((y / nv) / (1 / nv + lam))
    # the draws: one standard_normal((S, A)) per step, from the last step down, per plan
    rng = np.random.default_rng(7)
    rng.standard_normal((2, 2)), rng.standard_normal((2, 2))  # the plan of reset
    eps1, eps0 = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    np.testing.assert_allclose(agent.q[1], agent.mean[1] + agent.sd[1] * eps1)
    np.testing.assert_allclose(agent.q[0], agent.mean[0] + agent.sd[0] * eps0)
    assert agent.select_action(0) == int(np.argmax(agent.q[0, 0]))


@pytest.mark.parametrize("cls", [UCBVI, QLearningUCB, RLSVI])
def test_masked_actions_are_never_played(cls):
    mask = np.array([[True, False], [True, True]])
    agent = cls(2, 2, n_layers=3, action_mask=mask)
    agent.reset(np.random.default_rng(1))
    assert np.isneginf(agent.q[:, 0, 1]).all()
    for _ in range(4):  # four episodes, always in state 0
        for h in range(3):
            assert agent.select_action(0) == 0
            agent.update(0, 0, 0.5, 0, h == 2)
    assert np.isneginf(agent.q[:, 0, 1]).all()


# --- the registry, optplan run and a sweep --------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_make_agent_builds_from_deepsea_and_runs(name):
    env = _env("deepsea", size=5)
    agent = make_agent(name, env)
    assert agent.n_layers == 5 and agent.n_states == 5 and agent.n_actions == 2
    tr = run(agent, env, episodes=20, seed=0)
    assert tr.steps == 100 and np.isfinite(tr.regret[-1])
    again = run(make_agent(name, env), env, episodes=20, seed=0)
    np.testing.assert_array_equal(again.actions, tr.actions)  # seeded


def test_make_agent_passes_parameters():
    env = _env("deepsea", size=4)
    agent = make_agent("ucbvi", env, bonus="bernstein", beta_scale=0.5, episodes=100)
    assert (agent.bonus, agent.beta_scale, agent.episodes) == ("bernstein", 0.5, 100)
    known = make_agent("ucbvi", env, known_rewards=True)
    np.testing.assert_array_equal(known.rewards, env.unwrapped.mdp.R)
    assert make_agent("q-learning-ucb", env, c=0.3).c == 0.3
    assert make_agent("rlsvi", env, sigma=0.2, prior_var=3.0).sigma == 0.2


@pytest.mark.parametrize("name", NAMES)
def test_optplan_run_cli(name, capsys):
    argv = ["run", "--agent", name, "--env", "deepsea", "--param", "size=4"]
    argv += ["--episodes", "10", "--seeds", "2", "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tasks"]) == 2 and out["tasks"][0]["agent"] == name


def test_a_tiny_sweep_of_the_three(tmp_path):
    sweep = sweep_from_dict(
        {
            "name": "peers-tiny",
            "seeds": 2,
            "episodes": 8,
            "agents": [
                {"name": "ucbvi", "params": {"bonus": ["hoeffding", "bernstein"]}},
                {"name": "q-learning-ucb", "params": {"c": 0.5}},
                {"name": "rlsvi", "params": {"sigma": 0.1}},
            ],
            "envs": [{"name": "deepsea", "params": {"size": 3}}],
        }
    )
    report = run_sweep(sweep, tmp_path, quiet=True)
    assert (report.ran, report.failed) == (8, 0)
    results = load_results(tmp_path)
    assert len(results.groups()) == 4
    for recs in results.groups().values():
        t, Y = results.curve_matrix(recs, "regret")
        assert Y.shape[0] == 2 and np.isfinite(Y).all()


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_continuing_environment_is_refused_naming_the_missing_horizon(name):
    with pytest.raises(ValueError, match=rf"{name} is for episodic.*n_layers=None"):
        make_agent(name, riverswim(4))
    message = r"model 'riverswim' is a continuing TabularMDP with no horizon"
    with pytest.raises(ValueError, match=message):
        make_agent(name, _env("riverswim-resets", n_states=4))


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (UCBVI, {"bonus": "freedman"}, r"bonus must be one of .*'freedman'"),
        (UCBVI, {"beta_scale": -1.0}, r"beta_scale must be a finite number >= 0, got -1"),
        (UCBVI, {"delta": 1.0}, r"delta"),
        (UCBVI, {"episodes": 0}, r"episodes must be a positive integer or None, got 0"),
        (UCBVI, {"stationary": "yes"}, r"stationary must be True or False, got 'yes'"),
        (UCBVI, {"rewards": np.zeros((3, 3))}, r"rewards has shape \(3, 3\)"),
        (QLearningUCB, {"c": -0.5}, r"c must be a finite number >= 0, got -0.5"),
        (QLearningUCB, {"delta": 0.0}, r"delta"),
        (RLSVI, {"sigma": 0.0}, r"sigma must be a finite number > 0, got 0"),
        (RLSVI, {"prior_var": -2.0}, r"prior_var must be a finite number > 0, got -2"),
        (RLSVI, {"action_mask": np.ones((3, 2, 2), bool)}, r"action_mask has 3 layers, n_layers"),
    ],
)
def test_bad_parameters_name_the_field_and_value(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(2, 2, n_layers=2, **kwargs)


@pytest.mark.parametrize("cls", [UCBVI, QLearningUCB, RLSVI])
def test_n_layers_is_required_and_counted(cls):
    with pytest.raises(TypeError, match="n_layers"):
        cls(2, 2)
    with pytest.raises(ValueError, match="n_layers must be a positive integer, got 0"):
        cls(2, 2, n_layers=0)
    with pytest.raises(TypeError, match="n_states must be a positive integer"):
        cls(FiniteHorizonMDP.from_stationary(riverswim(3), 2), 2, n_layers=2)


def test_an_episode_longer_than_the_horizon_is_an_error():
    agent = QLearningUCB(2, 2, n_layers=2)
    _play(agent, [(0, 0, 0.0, 1, False), (1, 0, 0.0, 1, False)])
    with pytest.raises(RuntimeError, match="2 layers"):
        agent.select_action(1)


# --- against loop references of the papers' equations on random layered models -------------


def _random_episodes(rng, H, S, A, n):
    """``n`` episodes of ``H`` steps with random states, actions and rewards in [0, 1]."""
    out = []
    for _ in range(n):
        s = int(rng.integers(S))
        for h in range(H):
            a, s2 = int(rng.integers(A)), int(rng.integers(S))
            out.append((s, a, float(rng.random()), s2, h == H - 1))
            s = s2
    return out


def _ucbvi_reference(steps, H, S, A, bonus, scale, delta, K):
    """UCBVI's plans replayed with loops over every step, state and action (Azar et al.)."""
    counts = np.zeros((H, S, A, S))
    rsum = np.zeros((H, S, A))
    Q = np.array([[[H - h] * A for _ in range(S)] for h in range(H)], dtype=float)
    h = 0
    for s, a, r, s2, done in steps:
        counts[h, s, a, s2] += 1
        rsum[h, s, a] += r
        h = 0 if done else h + 1
        if not done:
            continue
        Lg = math.log(5 * S * A * K * H / delta)
        V = np.zeros((H + 1, S))
        for hh in range(H - 1, -1, -1):
            for x in range(S):
                for b in range(A):
                    n = counts[hh, x, b].sum()
                    if n == 0:
                        Q[hh, x, b] = H - hh
                        continue
                    p = counts[hh, x, b] / n
                    pv = sum(p[y] * V[hh + 1, y] for y in range(S))
                    if bonus == "hoeffding":
                        bon = 7 * H * Lg * math.sqrt(1 / n)
                    else:
                        var = sum(p[y] * (V[hh + 1, y] - pv) ** 2 for y in range(S))
                        bon = math.sqrt(8 * Lg * var / n) + 14 * H * Lg / (3 * n)
                        if hh + 1 < H:
                            tail = 0.0
                            for y in range(S):
                                seen = counts[hh + 1, y].sum()
                                w = (
                                    H**2
                                    if seen == 0
                                    else min(100**2 * H**3 * S**2 * A * Lg**2 / seen, H**2)
                                )
                                tail += p[y] * w
                            bon += math.sqrt(8 * tail / n)
                    fresh = rsum[hh, x, b] / n + pv + scale * bon
                    Q[hh, x, b] = min(Q[hh, x, b], H - hh, fresh)
                V[hh, x] = max(Q[hh, x])
    return Q


@pytest.mark.parametrize("bonus", ["hoeffding", "bernstein"])
@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_ucbvi_matches_a_loop_reference(bonus, scale):
    rng = np.random.default_rng(11)
    H, S, A, K = 3, 4, 3, 40
    steps = _random_episodes(rng, H, S, A, 25)
    agent = UCBVI(S, A, n_layers=H, bonus=bonus, beta_scale=scale, delta=0.2, episodes=K)
    _play(agent, steps)
    ref = _ucbvi_reference(steps, H, S, A, bonus, scale, 0.2, K)
    np.testing.assert_allclose(agent.q, ref, rtol=1e-12, atol=1e-12)


def test_rlsvi_means_match_a_loop_reference():
    rng = np.random.default_rng(5)
    H, S, A = 3, 3, 2
    steps = _random_episodes(rng, H, S, A, 12)
    agent = RLSVI(S, A, n_layers=H, sigma=0.7, prior_var=1.5)
    _play(agent, steps)
    # each pair's observed (reward, next state, done) at each step
    data = {}
    h = 0
    for s, a, r, s2, done in steps:
        data.setdefault((h, s, a), []).append((r, s2, done))
        h = 0 if done else h + 1
    lam, nv = 1 / 1.5, 0.49
    for (hh, s, a), obs in data.items():
        y = sum(r + (0.0 if done else agent.q[hh + 1, s2].max()) for r, s2, done in obs)
        n = len(obs)
        assert agent.mean[hh, s, a] == pytest.approx((y / nv) / (n / nv + lam), abs=1e-12)
        assert agent.sd[hh, s, a] == pytest.approx(1 / math.sqrt(n / nv + lam))
