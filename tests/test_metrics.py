"""Regret metrics and the run loop's bookkeeping, checked against independent computations."""

from __future__ import annotations

from fractions import Fraction

import gymnasium as gym
import numpy as np
import pytest

from optplan import solve_discounted
from optplan.agents import OracleAgent, RandomAgent
from optplan.envs import TabularEnv
from optplan.experiments import metrics, run
from optplan.generators import random_dirichlet, riverswim
from optplan.mdp import FiniteHorizonMDP, TabularMDP

# --- helpers (independent of optplan's planners and metrics) -------------------------------


def layered_mdp(L=4, S=4, A=3, seed=0, initial=None) -> FiniteHorizonMDP:
    rng = np.random.default_rng(seed)
    return FiniteHorizonMDP(
        rng.dirichlet(np.ones(S), size=(L, S, A)), rng.random((L, S, A)), initial=initial
    )


def optimal_values(mdp: FiniteHorizonMDP) -> np.ndarray:
    """``V*_l`` for ``l = 0 .. L-1`` by backward induction, shape (L, S)."""
    L, S, _ = mdp.R.shape
    V = np.zeros((L + 1, S))
    for l in reversed(range(L)):
        Q = np.where(mdp.action_mask[l], mdp.R[l] + mdp.P[l] @ V[l + 1], -np.inf)
        V[l] = Q.max(axis=-1)
    return V[:L]


def policy_values(mdp: FiniteHorizonMDP, policy: np.ndarray) -> np.ndarray:
    """``V^pi_l`` of a deterministic ``policy[l, s]`` by backward induction, shape (L, S)."""
    L, S, _ = mdp.R.shape
    V = np.zeros((L + 1, S))
    for l in reversed(range(L)):
        for s in range(S):
            a = policy[l, s]
            V[l, s] = mdp.R[l, s, a] + mdp.P[l, s, a] @ V[l + 1]
    return V[:L]


def step_rewards_by_powers(mdp: TabularMDP, policy: np.ndarray, steps: int) -> np.ndarray:
    """``initial @ P_pi^t @ r_pi`` with an explicit matrix power for every ``t``."""
    idx = np.arange(mdp.n_states)
    P_pi, r_pi = mdp.P[idx, policy], mdp.R[idx, policy]
    return np.array([mdp.initial @ np.linalg.matrix_power(P_pi, t) @ r_pi for t in range(steps)])


def episode_slices(trace):
    starts = np.concatenate([[0], trace.episode_ends[:-1]])
    return [slice(int(a), int(b)) for a, b in zip(starts, trace.episode_ends, strict=True)]


class NextStateRecorder(gym.Wrapper):
    """Pass everything through; remember every next state the environment returns."""

    def __init__(self, env):
        super().__init__(env)
        self.next_states: list[int] = []

    def step(self, action):
        out = self.env.step(action)
        self.next_states.append(out[0])
        return out


# --- subsample_indices ----------------------------------------------------------------------


@pytest.mark.parametrize("scale", ["log", "linear"])
@pytest.mark.parametrize("n", [3, 10, 11, 100, 1_000, 12_345, 10**6])
@pytest.mark.parametrize("points", [2, 3, 10, 60])
def test_subsample_indices_shape(n, points, scale):
    idx = metrics.subsample_indices(n, points, scale)
    if n <= points:
        np.testing.assert_array_equal(idx, np.arange(n))
        return
    assert np.issubdtype(idx.dtype, np.integer)
    assert idx[0] == 0 and idx[-1] == n - 1
    assert np.all(np.diff(idx) > 0)
    assert 2 <= idx.size <= points
    if scale == "linear":
        # Targets are at least one apart, so rounding never merges two: exactly `points`.
        assert idx.size == points
        targets = np.linspace(0, n - 1, points)
        np.testing.assert_array_less(np.abs(idx - targets), 0.5 + 1e-9)
    else:
        # Every stored time step t = idx + 1 rounds a geometric target.
        targets = np.geomspace(1, n, points)
        dist = np.abs((idx + 1)[:, None] - targets[None, :]).min(axis=1)
        np.testing.assert_array_less(dist, 0.5 + 1e-9)


def test_subsample_indices_log_is_dense_early():
    idx = metrics.subsample_indices(10**6, 60, "log")
    lin = metrics.subsample_indices(10**6, 60, "linear")
    assert idx[:5].tolist() == [0, 1, 2, 3, 4]
    assert np.sum(idx < 1_000) > np.sum(lin < 1_000)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_subsample_indices_small_n_is_everything(n):
    for scale in ("log", "linear"):
        np.testing.assert_array_equal(metrics.subsample_indices(n, 5, scale), np.arange(n))
    np.testing.assert_array_equal(metrics.subsample_indices(np.int64(n), np.int32(5)), np.arange(n))


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 10), "^n must"),
        ((-3, 10), "^n must"),
        ((2.5, 10), "^n must"),
        ((True, 10), "^n must"),
        (("10", 10), "^n must"),
        ((10, 1), "^points must"),
        ((10, 0), "^points must"),
        ((10, 2.0), "^points must"),
        ((10, True), "^points must"),
        ((10, 5, "cubic"), "^scale must"),
        ((10, 5, "LOG"), "^scale must"),
    ],
)
def test_subsample_indices_bad_args(args, match):
    with pytest.raises(ValueError, match=match):
        metrics.subsample_indices(*args)


# --- time_to_solve --------------------------------------------------------------------------


def brute_time_to_solve(successes, threshold) -> int | None:
    """First 1-based episode with count / e >= threshold, in exact rational arithmetic; the
    threshold is read as the decimal it is written as (0.1 means 1/10)."""
    thr = Fraction(str(threshold))
    count = 0
    for e, x in enumerate(successes, start=1):
        count += bool(x)
        if Fraction(count, e) >= thr:
            return e
    return None


def test_time_to_solve_hand_examples():
    F, T = False, True
    assert metrics.time_to_solve([F] * 9 + [T]) == 10
    assert metrics.time_to_solve([F] * 10 + [T]) is None  # 1/11 < 0.1
    assert metrics.time_to_solve([T]) == 1
    assert metrics.time_to_solve([F, T]) == 2  # 1/2 >= 0.1
    assert metrics.time_to_solve([F] * 50) is None
    assert metrics.time_to_solve([]) is None
    # Exactly 10%: 3 successes in 30 episodes.
    seq = [F] * 27 + [T, T, T]
    assert metrics.time_to_solve(seq) == 30
    assert metrics.time_to_solve(np.array(seq)) == 30
    # Exactly met although the float product rounds up: 0.28 * 25 == 7.000000000000001 > 7,
    # 0.07 * 100 == 7.000000000000001 > 7.
    assert 0.28 * 25 > 7 and 0.07 * 100 > 7
    assert metrics.time_to_solve([F] * 18 + [T] * 7, threshold=0.28) == 25
    assert metrics.time_to_solve([F] * 93 + [T] * 7, threshold=0.07) == 100
    assert metrics.time_to_solve([F] * 94 + [T] * 6, threshold=0.07) is None
    assert metrics.time_to_solve([T, F, F, F], threshold=1.0) == 1
    assert metrics.time_to_solve([F, T, T, T], threshold=1.0) is None
    assert metrics.time_to_solve([F, T, F, F], threshold=0.5) == 2
    assert metrics.time_to_solve([0, 0, 1], threshold=0.25) == 3  # ints are read as bools


def test_time_to_solve_matches_exact_fractions():
    rng = np.random.default_rng(0)
    found = 0
    for i in range(200):
        n = int(rng.integers(1, 120))
        p = rng.choice([0.0, 0.03, 0.07, 0.1, 0.3, 0.7])
        seq = rng.random(n) < p
        # 0.28, 0.14 and 0.07 times some episode counts round above the exact integer.
        threshold = [0.1, 0.2, 0.28, 0.14, 0.07, 0.3, 0.7, 1.0][i % 8]
        expected = brute_time_to_solve(seq.tolist(), threshold)
        found += expected is not None
        assert metrics.time_to_solve(seq, threshold) == expected, (seq.tolist(), threshold)
        if threshold == metrics.SOLVE_THRESHOLD:
            assert metrics.time_to_solve(seq) == expected
    assert 20 < found < 190  # both outcomes are exercised


@pytest.mark.parametrize("threshold", [0, 0.0, -0.1, 1.5, float("nan"), float("inf")])
def test_time_to_solve_bad_threshold(threshold):
    with pytest.raises(ValueError, match="threshold"):
        metrics.time_to_solve([True, False], threshold=threshold)


def test_time_to_solve_needs_1d():
    with pytest.raises(ValueError, match="1-D"):
        metrics.time_to_solve([[True, False]])


# --- oracle rewards ---------------------------------------------------------------------------


def _converged_before(mdp, policy, steps) -> int | None:
    """The step after which the propagated distribution stops changing (L1 < 1e-15)."""
    idx = np.arange(mdp.n_states)
    P_pi = mdp.P[idx, policy]
    d = mdp.initial.copy()
    for t in range(steps):
        nxt = d @ P_pi
        if np.abs(nxt - d).sum() < 1e-15:
            return t
        d = nxt
    return None


@pytest.mark.parametrize("initial", [None, [1.0, 0, 0, 0, 0], [0, 0.2, 0, 0.3, 0.5]])
def test_oracle_step_rewards_matches_matrix_powers(initial):
    base = random_dirichlet(5, 3, seed=1)
    mdp = TabularMDP(base.P, base.R, initial=initial)
    policy = np.random.default_rng(2).integers(0, 3, size=5)
    steps = 2_000
    got = metrics.oracle_step_rewards(mdp, policy, steps)
    assert got.shape == (steps,)
    # The early stop (repeat the last value) happens well before the horizon.
    stop = _converged_before(mdp, policy, steps)
    assert stop is not None and stop < 200
    np.testing.assert_allclose(got, step_rewards_by_powers(mdp, policy, steps), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got[stop + 1 :], got[-1])
    assert metrics.oracle_step_rewards(mdp, policy, 0).shape == (0,)
    np.testing.assert_allclose(
        metrics.oracle_step_rewards(mdp, policy, 1), [mdp.initial @ mdp.R[np.arange(5), policy]]
    )


def test_oracle_step_rewards_slowly_mixing_chain():
    eps = 1e-3  # nearly periodic: converges, but slowly
    P = np.array([[[eps, 1 - eps]], [[1 - eps, eps]]])
    mdp = TabularMDP(P, np.array([[1.0], [0.0]]), initial=[1.0, 0.0])
    policy = np.zeros(2, dtype=int)
    got = metrics.oracle_step_rewards(mdp, policy, 3_000)
    np.testing.assert_allclose(got, step_rewards_by_powers(mdp, policy, 3_000), atol=1e-12)
    # Closed form: P(s_t = 0) = (1 + (2 eps - 1)^t) / 2, an alternating decay.
    t = np.arange(3_000)
    np.testing.assert_allclose(got, (1 + (2 * eps - 1) ** t) / 2, atol=1e-12)


def test_oracle_step_rewards_periodic_chain_never_converges():
    P = np.zeros((2, 2, 2))
    P[0, 0, 1] = P[1, 0, 0] = 1.0  # action 0 swaps the two states
    P[0, 1, 0] = P[1, 1, 1] = 1.0  # action 1 stays
    R = np.array([[1.0, 0.5], [0.0, 0.5]])
    mdp = TabularMDP(P, R, initial=[1.0, 0.0])
    steps = 1_001
    got = metrics.oracle_step_rewards(mdp, np.array([0, 0]), steps)
    np.testing.assert_array_equal(got, np.arange(steps) % 2 == 0)
    np.testing.assert_array_equal(got[-4:], [0.0, 1.0, 0.0, 1.0])
    # Staying put is stationary from the start: constant 1 (state 0, action 1 pays 0.5).
    np.testing.assert_array_equal(metrics.oracle_step_rewards(mdp, np.array([1, 1]), 50), 0.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_layer_rewards_sum_to_policy_value(seed):
    rng = np.random.default_rng(seed)
    initial = rng.dirichlet(np.ones(4))
    mdp = layered_mdp(L=6, S=4, A=3, seed=seed, initial=initial)
    policy = rng.integers(0, 3, size=(6, 4))
    got = metrics.oracle_layer_rewards(mdp, policy)
    assert got.shape == (6,)
    V = policy_values(mdp, policy)
    assert got.sum() == pytest.approx(initial @ V[0], rel=1e-12)
    # Term by term: the state distribution propagated explicitly.
    d = initial.copy()
    for l in range(6):
        r = np.array([mdp.R[l, s, policy[l, s]] for s in range(4)])
        assert got[l] == pytest.approx(d @ r, rel=1e-12)
        d = np.array([sum(d[s] * mdp.P[l, s, policy[l, s], t] for s in range(4)) for t in range(4)])
    # The optimal policy's layer rewards sum to initial @ V*_0.
    Vstar = optimal_values(mdp)
    best = OracleAgent(mdp).policy
    assert metrics.oracle_layer_rewards(mdp, best).sum() == pytest.approx(initial @ Vstar[0])


def test_normalized_and_cumulative_regret():
    out = metrics.normalized_regret([1.0, 2.0, 3.0, 4.0, 5.0], [0.0, -1.0, 2.0, 4.0, np.nan])
    np.testing.assert_array_equal(np.isnan(out), [True, True, False, False, True])
    np.testing.assert_array_equal(out[2:4], [1.5, 1.0])
    np.testing.assert_array_equal(metrics.normalized_regret([2.0, 3.0], 4.0), [0.5, 0.75])
    assert np.isnan(metrics.normalized_regret([1.0], [-1e-300])).all()
    np.testing.assert_array_equal(metrics.cumulative_regret([1, 1, 1], [0, 1, 0.5]), [1, 1, 1.5])


# --- the run loop: discounted ------------------------------------------------------------------


def test_run_discounted_regret_is_oracle_reward_gap():
    mdp = random_dirichlet(6, 3, seed=3, discount=0.9)
    env = TabularEnv(mdp, reward_noise=0.3)
    n = 600
    tr = run(RandomAgent.for_mdp(mdp), env, steps=n, seed=0, criterion="discounted")
    assert tr.criterion == "discounted"
    pi_star = solve_discounted(mdp).policy
    oracle = metrics.oracle_step_rewards(mdp, pi_star, n)
    np.testing.assert_allclose(oracle, step_rewards_by_powers(mdp, pi_star, n), atol=1e-12)
    expected = mdp.R[tr.states, tr.actions]
    np.testing.assert_array_equal(tr.expected_rewards, expected)
    np.testing.assert_allclose(tr.regret, np.cumsum(oracle - expected), rtol=0, atol=1e-9)
    np.testing.assert_allclose(tr.realized_regret, np.cumsum(oracle - tr.rewards), atol=1e-9)
    np.testing.assert_allclose(tr.oracle_cumulative, np.cumsum(oracle), rtol=1e-12)
    assert not np.allclose(tr.realized_regret, tr.regret)  # the reward noise shows
    # optimal_value is initial @ V* of the discounted problem (V* by value iteration here).
    V = np.zeros(mdp.n_states)
    for _ in range(2_000):
        V = (mdp.R + 0.9 * mdp.P @ V).max(axis=1)
    assert tr.optimal_value == pytest.approx(mdp.initial @ V, rel=1e-9)
    # The model's own criterion is the default.
    default = run(RandomAgent.for_mdp(mdp), env, steps=n, seed=0)
    assert default.criterion == "discounted"
    np.testing.assert_array_equal(default.regret, tr.regret)


def test_run_discounted_oracle_regret_near_zero_random_positive():
    mdp = random_dirichlet(6, 3, seed=3, discount=0.9)
    env = TabularEnv(mdp, reward_noise=0.3)
    T, seeds = 2_000, range(20)
    oracle = OracleAgent(mdp, criterion="discounted")
    final = np.array([run(oracle, env, steps=T, seed=s).regret[-1] for s in seeds])
    se = final.std(ddof=1) / np.sqrt(len(final))
    assert abs(final.mean()) < 5 * se
    rand = np.array([run(RandomAgent.for_mdp(mdp), env, steps=T, seed=s).regret[-1] for s in seeds])
    rand_se = rand.std(ddof=1) / np.sqrt(len(rand))
    assert rand.mean() > 5 * rand_se and rand.mean() > 5 * se
    assert rand.min() > final.max()


# --- the run loop: finite horizon ---------------------------------------------------------------


def test_run_finite_horizon_realized_regret_per_episode_deterministic_start():
    mdp = layered_mdp(L=5, S=4, A=3, seed=4, initial=[0.0, 0.0, 1.0, 0.0])
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp, reward_noise=0.3), episodes=40, seed=1)
    V = optimal_values(mdp)
    slices = episode_slices(tr)
    assert len(slices) == 40
    per_episode = [V[0, tr.states[sl.start]] - tr.rewards[sl].sum() for sl in slices]
    ends = tr.episode_ends - 1
    np.testing.assert_allclose(tr.realized_regret[ends], np.cumsum(per_episode), atol=1e-9)
    assert not np.allclose(tr.realized_regret[ends], tr.regret[ends], atol=1e-3)
    assert tr.optimal_value == pytest.approx(V[0, 2])


def test_run_finite_horizon_realized_regret_uses_expected_start_value():
    # With a random start the oracle's expected return is initial @ V*_0 (documented: "the
    # oracle's expected cumulative reward minus the rewards received"), not V*_0(s_0).
    mdp = layered_mdp(L=5, S=4, A=3, seed=5)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp, reward_noise=0.3), episodes=40, seed=2)
    V = optimal_values(mdp)
    ends = tr.episode_ends - 1
    per_episode = [mdp.initial @ V[0] - tr.rewards[sl].sum() for sl in episode_slices(tr)]
    np.testing.assert_allclose(tr.realized_regret[ends], np.cumsum(per_episode), atol=1e-9)
    np.testing.assert_allclose(
        tr.oracle_cumulative[ends], (mdp.initial @ V[0]) * np.arange(1, 41), rtol=1e-12
    )


# --- the run loop: horizons ------------------------------------------------------------------


def test_run_episodes_horizon_finite():
    mdp = layered_mdp(L=4)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), episodes=7, seed=0)
    assert tr.episodes == 7 and tr.steps == 28
    np.testing.assert_array_equal(tr.episode_ends, [4, 8, 12, 16, 20, 24, 28])
    np.testing.assert_array_equal(tr.layers, np.arange(28) % 4)
    assert tr.regret.shape == (28,)


def test_run_episodes_horizon_truncated_continuing():
    mdp = random_dirichlet(5, 2, seed=0)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp, max_steps=7), episodes=3, seed=0)
    assert tr.steps == 21 and tr.episodes == 3 and tr.criterion == "average"
    np.testing.assert_array_equal(tr.episode_ends, [7, 14, 21])


@pytest.mark.parametrize("kwargs", [{}, {"steps": 10, "episodes": 2}])
def test_run_needs_exactly_one_horizon(kwargs):
    mdp = random_dirichlet(4, 2, seed=0)
    with pytest.raises(ValueError, match="exactly one of steps and episodes"):
        run(RandomAgent.for_mdp(mdp), TabularEnv(mdp, max_steps=5), **kwargs)


@pytest.mark.parametrize("episodes", [0, -1, 2.5, True])
def test_run_bad_episodes(episodes):
    mdp = layered_mdp()
    with pytest.raises(ValueError, match="episodes"):
        run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), episodes=episodes)


# --- the run loop: goals ---------------------------------------------------------------------


def goal_env(n_states=3, horizon=10):
    mdp = FiniteHorizonMDP.from_stationary(riverswim(n_states), horizon)
    return mdp, TabularEnv(mdp, goal_states=[n_states - 1])


def test_run_goal_successes_match_visits_to_the_goal():
    mdp, env = goal_env(3, 10)
    recorder = NextStateRecorder(env)
    tr = run(RandomAgent.for_mdp(mdp), recorder, episodes=30, seed=0)
    assert tr.successes is not None and tr.successes.dtype == bool
    assert tr.successes.shape == (30,)
    nxt = np.asarray(recorder.next_states)
    assert nxt.size == tr.steps
    np.testing.assert_array_equal(nxt[:-1][tr.layers[1:] > 0], tr.states[1:][tr.layers[1:] > 0])
    expected = [bool(np.any(nxt[sl] == 2)) for sl in episode_slices(tr)]
    np.testing.assert_array_equal(tr.successes, expected)
    assert 0 < tr.successes.sum() < 30  # both outcomes occur
    assert tr.time_to_solve == metrics.time_to_solve(tr.successes)
    assert tr.time_to_solve == brute_time_to_solve(expected, 0.1)
    assert tr.summary()["goal_rate"] == pytest.approx(np.mean(expected))
    assert tr.summary()["time_to_solve"] == tr.time_to_solve


@pytest.mark.parametrize("n_states, seed", [(3, 1), (4, 4)])
def test_run_stop_when_solved(n_states, seed):
    mdp, env = goal_env(n_states, 10)
    full = run(RandomAgent.for_mdp(mdp), env, episodes=40, seed=seed)
    tts = full.time_to_solve
    assert tts is not None and tts > 1  # a case where the first episodes fail
    assert not full.stopped_early
    stopped = run(RandomAgent.for_mdp(mdp), env, episodes=40, seed=seed, stop_when_solved=True)
    assert stopped.stopped_early
    assert stopped.episodes == tts == stopped.time_to_solve
    assert stopped.steps == 10 * tts
    np.testing.assert_array_equal(stopped.successes, full.successes[:tts])
    np.testing.assert_array_equal(stopped.states, full.states[: 10 * tts])
    # The same with a steps horizon.
    by_steps = run(RandomAgent.for_mdp(mdp), env, steps=400, seed=seed, stop_when_solved=True)
    assert by_steps.stopped_early and by_steps.episodes == tts


def test_run_stop_when_solved_never_solved_or_no_goal():
    # From state 0 the goal (state 2) is two moves away: unreachable in one-step episodes.
    mdp, env = goal_env(3, 1)
    tr = run(RandomAgent.for_mdp(mdp), env, episodes=25, seed=0, stop_when_solved=True)
    assert not tr.stopped_early and tr.episodes == 25
    assert not tr.successes.any() and tr.time_to_solve is None
    # No goal states: nothing to solve, the run goes to the end.
    plain = TabularEnv(mdp)
    tr = run(RandomAgent.for_mdp(mdp), plain, episodes=25, seed=0, stop_when_solved=True)
    assert not tr.stopped_early and tr.episodes == 25 and tr.successes is None


@pytest.mark.parametrize("goals", [[3], [-1], [True], [1.0], [0, 7]])
def test_tabular_env_goal_states_out_of_range(goals):
    mdp = FiniteHorizonMDP.from_stationary(riverswim(3), 10)
    with pytest.raises(ValueError, match="goal_states"):
        TabularEnv(mdp, goal_states=goals)


# --- the run loop: visits --------------------------------------------------------------------


def test_visits_continuing():
    mdp = random_dirichlet(6, 2, seed=7)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp, max_steps=13), steps=503, seed=0)
    assert tr.visits.shape == (6,) and tr.visits.sum() == tr.steps == 503
    np.testing.assert_array_equal(tr.visits, np.bincount(tr.states, minlength=6))


def test_visits_finite_horizon():
    mdp = layered_mdp(L=5, S=4, A=3, seed=8)
    tr = run(RandomAgent.for_mdp(mdp), TabularEnv(mdp), steps=503, seed=0)
    assert tr.visits.shape == (5, 4) and tr.visits.sum() == tr.steps == 503
    counts = np.zeros((5, 4), dtype=int)
    for t, s in enumerate(tr.states):
        counts[t % 5, s] += 1  # no truncation: the layer is the step index mod L
    np.testing.assert_array_equal(tr.visits, counts)
    np.testing.assert_array_equal(tr.visits.sum(axis=1), [101, 101, 101, 100, 100])


def test_discounted_oracle_restarts_with_the_episode():
    """With truncated episodes the oracle reference restarts from the initial distribution,
    so an optimal agent's discounted pseudo-regret stays near 0 (it grew linearly before)."""
    mdp = riverswim(6, discount=0.95)
    finals = [
        run(
            OracleAgent(mdp, criterion="discounted"),
            TabularEnv(mdp, max_steps=10),
            2000,
            seed=s,
            criterion="discounted",
        ).regret[-1]
        for s in range(10)
    ]
    assert abs(np.mean(finals)) < 5 * np.std(finals, ddof=1) / np.sqrt(10) + 1e-9
    random_final = run(
        RandomAgent.for_mdp(mdp),
        TabularEnv(mdp, max_steps=10),
        2000,
        seed=0,
        criterion="discounted",
    ).regret[-1]
    assert random_final > 30  # about 0.03 per step below the oracle
