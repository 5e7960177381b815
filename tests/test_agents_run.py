"""Baseline agents and the run loop: reproducibility, regret bookkeeping, honest regret bounds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from optplan.agents import Agent, OracleAgent, RandomAgent
from optplan.envs import TabularEnv
from optplan.experiments import Trace, run
from optplan.mdp import FiniteHorizonMDP, TabularMDP
from optplan.problems import solve_discounted

#: Failure probability allowed to each concentration bound below (the seeds are fixed, so
#: the tests are deterministic; this says how unlucky a correct implementation would be).
DELTA = 1e-6


def ergodic_mdp(S=5, A=3, seed=0, **kwargs) -> TabularMDP:
    """Dirichlet rows with full support: every policy's chain is irreducible and aperiodic."""
    rng = np.random.default_rng(seed)
    return TabularMDP(rng.dirichlet(np.ones(S), size=(S, A)), rng.random((S, A)), **kwargs)


def layered_mdp(L=4, S=4, A=3, seed=0) -> FiniteHorizonMDP:
    rng = np.random.default_rng(seed)
    return FiniteHorizonMDP(rng.dirichlet(np.ones(S), size=(L, S, A)), rng.random((L, S, A)))


def gain_bias(P_pi: np.ndarray, R_pi: np.ndarray) -> tuple[float, np.ndarray]:
    """Gain and bias of an ergodic chain: ``g + h = R_pi + P_pi h``, ``h[0] = 0``."""
    S = len(R_pi)
    A = np.zeros((S + 1, S + 1))
    A[:S, :S] = np.eye(S) - P_pi
    A[:S, S] = 1.0
    A[S, 0] = 1.0
    sol = np.linalg.solve(A, np.append(R_pi, 0.0))
    return float(sol[S]), sol[:S]


def freedman_radius(mdp: TabularMDP, pi: np.ndarray, h: np.ndarray, T: int, n_runs: int = 1):
    """A (1 - DELTA) bound on ``|M|`` for the martingale part of the pseudo-regret.

    For a stationary policy ``pi[s, a]`` with gain ``g`` and bias ``h``, the expected rewards
    satisfy ``sum_t R(s_t, a_t) = T g + h(s_0) - h(s_T) + M_T`` where ``M_T`` sums the
    centred increments ``Y_t - E[Y_t | s_t]``, ``Y_t = R(s_t, a_t) + h(s_{t+1})``. Freedman's
    inequality with increments bounded by ``b = span(R) + span(h)`` and predictable variance
    at most ``V = T max_s Var(Y | s)`` gives ``|M_T| <= c b / 3 + sqrt((c b / 3)^2 + 2 c V)``,
    ``c = log(2 / DELTA)``. ``n_runs`` independent runs concatenate into one martingale.
    """
    Y = mdp.R[:, :, None] + h[None, None, :]  # Y given (s, a, s')
    weight = pi[:, :, None] * mdp.P  # law of (a, s') given s
    mean = (weight * Y).sum(axis=(1, 2))
    var = (weight * (Y - mean[:, None, None]) ** 2).sum(axis=(1, 2))
    b = np.ptp(mdp.R) + np.ptp(h)
    V = n_runs * T * var.max()
    c = np.log(2 / DELTA)
    return c * b / 3 + np.sqrt((c * b / 3) ** 2 + 2 * c * V)


def uniform_policy(mask: np.ndarray) -> np.ndarray:
    return mask / mask.sum(axis=-1, keepdims=True)


def backward_induction(mdp: FiniteHorizonMDP, pi: np.ndarray | None = None):
    """``(Q, V)`` of the optimal policy (``pi`` None) or of ``pi[l, s, a]``; independent of
    optplan's planners."""
    L, S, A = mdp.R.shape
    Q = np.empty((L, S, A))
    V = np.zeros((L + 1, S))
    for l in reversed(range(L)):
        Q[l] = np.where(mdp.action_mask[l], mdp.R[l] + mdp.P[l] @ V[l + 1], -np.inf)
        V[l] = Q[l].max(axis=-1) if pi is None else (pi[l] * np.where(pi[l] > 0, Q[l], 0)).sum(-1)
    return Q, V[:L]


# --- the protocol and the agents -----------------------------------------------------------


def test_agents_follow_the_protocol():
    mdp = ergodic_mdp()
    assert isinstance(RandomAgent(5, 3), Agent)
    assert isinstance(OracleAgent(mdp), Agent)
    assert not isinstance(object(), Agent)


def test_random_agent_is_uniform_over_admissible_actions():
    mask = np.array([[True, False, True, True], [False, True, False, False]])
    agent = RandomAgent(2, 4, action_mask=mask)
    agent.reset(np.random.default_rng(0))
    draws = np.array([agent.select_action(0) for _ in range(6_000)])
    counts = np.bincount(draws, minlength=4)
    assert counts[1] == 0
    assert stats.chisquare(counts[mask[0]]).pvalue > 1e-3
    assert {agent.select_action(1) for _ in range(50)} == {1}


def test_random_agent_layered_mask():
    mask = np.ones((2, 1, 3), dtype=bool)
    mask[0, 0, :2] = False
    mask[1, 0, 2] = False
    agent = RandomAgent(1, 3, action_mask=mask)
    agent.reset(np.random.default_rng(0))
    for _ in range(20):
        assert agent.select_action(0) == 2
        agent.update(0, 2, 0.0, 0, False)
        assert agent.select_action(0) in (0, 1)
        agent.update(0, 0, 0.0, 0, True)


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0, 2), ValueError, "n_states"),
        ((2, 1.5), ValueError, "n_actions"),
        ((2, 2, np.ones((3, 2), dtype=bool)), ValueError, "shape"),
        ((2, 2, [[True, True], [False, False]]), ValueError, "state 1 with no action"),
        ((2, 2, np.full((2, 2), 0.5)), TypeError, "boolean"),
    ],
)
def test_random_agent_bad_args(args, error, match):
    S, A, *mask = args
    with pytest.raises(error, match=match):
        RandomAgent(S, A, action_mask=mask[0] if mask else None)


def test_random_agent_needs_reset():
    with pytest.raises(RuntimeError, match="reset"):
        RandomAgent(2, 2).select_action(0)


def test_oracle_criteria():
    mdp = ergodic_mdp(discount=0.9)
    oracle = OracleAgent(mdp)
    assert oracle.criterion == "discounted"
    np.testing.assert_array_equal(oracle.policy, solve_discounted(mdp).policy)
    assert OracleAgent(mdp, criterion="average").criterion == "average"
    assert OracleAgent(mdp.with_discount(None)).criterion == "average"
    assert OracleAgent(layered_mdp()).criterion == "finite_horizon"
    with pytest.raises(ValueError, match="discount"):
        OracleAgent(mdp.with_discount(None), criterion="discounted")
    with pytest.raises(ValueError, match="does not apply"):
        OracleAgent(mdp, criterion="finite_horizon")
    with pytest.raises(ValueError, match="does not apply"):
        OracleAgent(layered_mdp(), criterion="average")
    with pytest.raises(ValueError, match="criterion"):
        OracleAgent(mdp, criterion="total")


def test_oracle_counts_layers():
    mdp = layered_mdp(L=2)
    oracle = OracleAgent(mdp)
    oracle.reset(np.random.default_rng(0))
    for l in range(2):
        assert oracle.select_action(1) == oracle.policy[l, 1]
        oracle.update(1, 0, 0.0, 1, done=False)
    with pytest.raises(RuntimeError, match="without done"):
        oracle.select_action(1)
    oracle.update(1, 0, 0.0, 1, done=True)
    assert oracle.select_action(2) == oracle.policy[0, 2]


# --- the run loop --------------------------------------------------------------------------


def test_run_is_reproducible_and_seed_dependent():
    mdp = ergodic_mdp()
    env = TabularEnv(mdp, reward_noise=0.2, max_steps=50)
    agent = RandomAgent.for_mdp(mdp)
    a, b, c = (run(agent, env, steps=500, seed=s) for s in (3, 3, 4))
    for name in ("states", "actions", "rewards", "regret"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.actions, c.actions)
    assert not np.array_equal(a.states, c.states)


def test_trace_bookkeeping_continuing():
    mdp = ergodic_mdp(discount=0.95)  # criterion="average": the discount plays no part
    env = TabularEnv(mdp, max_steps=30)
    tr = run(RandomAgent.for_mdp(mdp), env, steps=301, seed=0, criterion="average")
    assert isinstance(tr, Trace) and tr.criterion == "average" and tr.layers is None
    assert tr.steps == 301 and tr.episodes == 10
    for arr in (tr.states, tr.actions, tr.rewards, tr.expected_rewards, tr.regret):
        assert arr.shape == (301,) and not arr.flags.writeable
    np.testing.assert_array_equal(tr.expected_rewards, mdp.R[tr.states, tr.actions])
    np.testing.assert_array_equal(tr.rewards, tr.expected_rewards)  # no reward noise
    g, _ = gain_bias(*policy_chain(mdp, OracleAgent(mdp, criterion="average").policy))
    assert tr.optimal_value == pytest.approx(g, abs=1e-10)
    np.testing.assert_allclose(tr.regret, np.cumsum(g - tr.expected_rewards), atol=1e-8)
    summary = tr.summary()
    assert summary["regret"] == tr.regret[-1] and summary["episodes"] == 10
    assert 0 <= summary["optimal_rate"] <= 1 and summary["wall_time"] >= 0
    np.testing.assert_array_equal(tr.episode_ends, np.arange(30, 301, 30))
    assert tr.successes is None and tr.time_to_solve is None
    np.testing.assert_array_equal(tr.visits, np.bincount(tr.states, minlength=mdp.n_states))
    np.testing.assert_allclose(tr.oracle_cumulative, g * np.arange(1, 302), rtol=1e-12)
    np.testing.assert_allclose(tr.realized_regret, tr.regret, atol=1e-9)  # noiseless rewards


def test_trace_bookkeeping_finite_horizon():
    mdp = layered_mdp(L=4)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), steps=402, seed=0)
    assert tr.criterion == "finite_horizon" and tr.episodes == 100
    np.testing.assert_array_equal(tr.layers, np.arange(402) % 4)
    Q, V = backward_induction(mdp)
    gaps = V[tr.layers, tr.states] - Q[tr.layers, tr.states, tr.actions]
    np.testing.assert_allclose(tr.regret, np.cumsum(gaps), atol=1e-10)
    np.testing.assert_array_equal(tr.expected_rewards, mdp.R[tr.layers, tr.states, tr.actions])
    assert tr.optimal_value == pytest.approx(mdp.initial @ V[0])
    assert tr.optimal_rate == pytest.approx(np.mean(gaps < 1e-9))


def test_on_episode_end_sees_each_episode_after_the_done_update():
    mdp = layered_mdp(L=4)
    agent = RandomAgent.for_mdp(mdp)
    seen = []
    updates = {"n": 0}
    update = agent.update

    def counting_update(*args):
        updates["n"] += 1
        update(*args)

    agent.update = counting_update

    def hook(n, a):
        assert a is agent
        seen.append((n, updates["n"]))

    tr = run(agent, TabularEnv(mdp), episodes=7, seed=1, on_episode_end=hook)
    # called once per episode, numbered from 1, after the episode's last update
    assert seen == [(n, 4 * n) for n in range(1, 8)]
    assert tr.episodes == 7
    same = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), episodes=7, seed=1)
    np.testing.assert_array_equal(tr.actions, same.actions)  # the hook changes nothing


def test_on_episode_end_must_be_callable():
    mdp = layered_mdp(L=2)
    with pytest.raises(TypeError, match="on_episode_end must be callable, got int"):
        run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), episodes=1, on_episode_end=3)


def test_masked_model_runs():
    mask = np.ones((5, 3), dtype=bool)
    mask[:, 0] = False
    mdp = ergodic_mdp(action_mask=mask)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), steps=300, seed=0)
    assert np.all(tr.actions > 0)


@pytest.mark.parametrize("steps", [0, -5, 2.5, True, None])
def test_run_bad_steps(steps):
    mdp = ergodic_mdp()
    with pytest.raises(ValueError, match="steps"):
        run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), steps=steps, seed=0)


@pytest.mark.parametrize("seed", [-1, 1.0, "0", None, False])
def test_run_bad_seed(seed):
    mdp = ergodic_mdp()
    with pytest.raises(ValueError, match="seed"):
        run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), steps=10, seed=seed)


def test_run_bad_agent_or_env():
    mdp = ergodic_mdp()
    with pytest.raises(TypeError, match="agent"):
        run(object(), TabularEnv(mdp), steps=10)
    with pytest.raises(TypeError, match="model"):
        run(RandomAgent.for_mdp(mdp), object(), steps=10)


def test_run_refuses_a_multichain_model():
    # Two absorbing states: the optimal gain depends on the start, there is no scalar g*.
    P = np.zeros((2, 1, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    mdp = TabularMDP(P, np.array([[1.0], [0.0]]))
    with pytest.raises(RuntimeError, match="status"):
        run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), steps=10)


# --- regret: oracle bounded, random linear -------------------------------------------------


def policy_chain(mdp: TabularMDP, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(mdp.n_states)
    return mdp.P[idx, policy], mdp.R[idx, policy]


def test_average_reward_regret_oracle_bounded_random_linear():
    mdp = ergodic_mdp(S=5, A=3, seed=1)
    env = TabularEnv(mdp, reward_noise=0.5)  # noise must not enter pseudo-regret
    T, seeds = 5_000, range(5)

    oracle = OracleAgent(mdp)
    g_star, h_star = gain_bias(*policy_chain(mdp, oracle.policy))
    pi_star = np.eye(mdp.n_actions)[oracle.policy]
    pi_rand = uniform_policy(mdp.action_mask)
    g_rand, h_rand = gain_bias(
        np.einsum("sa,sat->st", pi_rand, mdp.P), (pi_rand * mdp.R).sum(axis=1)
    )
    assert g_star - g_rand > 0.05  # the model separates the two agents

    # Oracle: regret_T = h(s_0) - h(s_T) + M_T with |M_T| below the Freedman radius.
    oracle_final = np.array([run(oracle, env, T, seed=s).regret[-1] for s in seeds])
    radius = freedman_radius(mdp, pi_star, h_star, T)
    assert np.all(np.abs(oracle_final) <= np.ptp(h_star) + radius)
    mean_radius = freedman_radius(mdp, pi_star, h_star, T, n_runs=len(seeds)) / len(seeds)
    assert abs(oracle_final.mean()) <= np.ptp(h_star) + mean_radius

    # Random: regret_T = T (g* - g_rand) + h_rand(s_0) - h_rand(s_T) - M_T, linear in T.
    random_traces = [run(RandomAgent.for_mdp(mdp), env, T, seed=s) for s in seeds]
    radius = freedman_radius(mdp, pi_rand, h_rand, T)
    for tr in random_traces:
        assert abs(tr.regret[-1] - T * (g_star - g_rand)) <= np.ptp(h_rand) + radius
        slope = np.polyfit(np.arange(T), tr.regret, 1)[0]
        assert slope > 0
    assert np.min([tr.regret[-1] for tr in random_traces]) > np.max(np.abs(oracle_final))


def test_finite_horizon_regret_oracle_zero_random_positive():
    mdp = layered_mdp(L=4, S=4, A=3, seed=2)
    env = TabularEnv(mdp, reward_noise=0.5)
    oracle_tr = run(OracleAgent(mdp), env, steps=2_000, seed=0)
    np.testing.assert_array_equal(oracle_tr.regret, 0.0)  # every gap is exactly 0
    assert oracle_tr.optimal_rate == 1.0

    # Random: the mean episode regret estimates initial @ (V*_0 - V^rand_0) (performance-
    # difference lemma); episodes are i.i.d., so compare within 5 standard errors.
    L, n_episodes = mdp.horizon, 2_000
    tr = run(RandomAgent.for_mdp(mdp), env, steps=L * n_episodes, seed=0)
    assert tr.episodes == n_episodes and tr.regret[-1] > 0
    per_episode = np.diff(tr.regret[L - 1 :: L], prepend=0.0)
    _, V_star = backward_induction(mdp)
    _, V_rand = backward_induction(mdp, uniform_policy(mdp.action_mask))
    expected = mdp.initial @ (V_star[0] - V_rand[0])
    se = per_episode.std(ddof=1) / np.sqrt(n_episodes)
    assert abs(per_episode.mean() - expected) <= 5 * se
