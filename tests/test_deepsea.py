"""DeepSea: bsuite's mapping, dynamics and rewards, the optimum, reward noise, goal tracking."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from optplan.agents import OracleAgent
from optplan.envs.deepsea import DeepSea
from optplan.experiments import run
from optplan.problems import solve_finite_horizon

#: Monte-Carlo means must lie within this many standard errors (fixed seeds: deterministic).
Z = 5.0


def bsuite_mapping(size: int, mapping_seed: int) -> np.ndarray:
    """bsuite's draw, ``deep_sea.py``: ``RandomState(mapping_seed).binomial(1, 0.5, [N, N])``."""
    return np.random.RandomState(mapping_seed).binomial(1, 0.5, [size, size])


def always_right(env: DeepSea):
    """The policy taking "right" everywhere, from bsuite's draw recomputed independently."""
    M = bsuite_mapping(env.size, env.mapping_seed) if env.randomize_actions else None
    return lambda row, col: 1 if M is None else int(M[row, col])


def episode(env: DeepSea, policy):
    """One episode; ``policy(row, col) -> action``. Returns per-step tuples."""
    s, info = env.reset()
    out = []
    row = info["layer"]
    while True:
        a = policy(row, s)
        s2, r, term, trunc, info = env.step(a)
        out.append((row, s, a, s2, r, info))
        assert not trunc
        s, row = s2, info["layer"]
        if term:
            return out


# --- bsuite's action mapping -------------------------------------------------------------------


@pytest.mark.parametrize(("size", "seed"), [(1, 0), (5, 0), (10, 42), (20, 7), (3, 2**32 - 1)])
def test_mapping_is_bsuites_draw(size, seed):
    env = DeepSea(size, mapping_seed=seed)
    np.testing.assert_array_equal(env.mapping, bsuite_mapping(size, seed))
    assert env.mapping.shape == (size, size)
    assert not env.mapping.flags.writeable


def test_mapping_pinned_values():
    # Literal values of RandomState(0).binomial(1, 0.5, [10, 10]): guards the draw itself.
    env = DeepSea(10, mapping_seed=0)
    np.testing.assert_array_equal(env.mapping[0], [1, 1, 1, 1, 0, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(env.mapping[:, 0], [1, 1, 1, 0, 0, 1, 0, 1, 0, 0])


def test_no_randomization_means_action_one_is_right():
    env = DeepSea(4, randomize_actions=False, mapping_seed=5)
    np.testing.assert_array_equal(env.mapping, np.ones((4, 4)))
    steps = episode(env, lambda row, col: 1)
    assert [s2 for *_, s2, _, _ in steps] == [1, 2, 3, 3]
    assert steps[-1][-1]["goal_reached"]


# --- the model ---------------------------------------------------------------------------------


@pytest.mark.parametrize("deterministic", [True, False])
def test_model_layout_and_rewards(deterministic):
    N, cost = 6, 0.01
    env = DeepSea(N, deterministic=deterministic, mapping_seed=3)
    mdp = env.mdp
    assert (mdp.horizon, mdp.n_states, mdp.n_actions) == (N, N, 2)
    np.testing.assert_array_equal(mdp.initial, np.eye(N)[0])
    np.testing.assert_allclose(mdp.P.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    M = bsuite_mapping(N, 3)
    q = 1.0 if deterministic else 1.0 - 1.0 / N
    for l in range(N):
        for c in range(N):
            r, lft = M[l, c], 1 - M[l, c]
            up = min(c + 1, N - 1)
            assert mdp.P[l, c, r, up] == pytest.approx(q if up != c else 1.0, abs=1e-15)
            if up != c:
                assert mdp.P[l, c, r, c] == pytest.approx(1.0 - q, abs=1e-15)
            assert mdp.P[l, c, lft, max(c - 1, 0)] == 1.0
            assert mdp.R[l, c, lft] == 0.0
            assert mdp.R[l, c, r] == (1.0 if c == N - 1 else 0.0) - cost / N
    assert env.move_cost == cost / N


def test_stochastic_right_probability_matches_steps():
    N, n = 5, 4000
    env = DeepSea(N, deterministic=False, mapping_seed=1)
    a = int(bsuite_mapping(N, 1)[0, 0])
    env.reset(seed=11)
    moved = 0
    for _ in range(n):
        s, _ = env.reset()
        s2, r, *_ = env.step(a)
        moved += s2 == 1
        assert s2 in (0, 1) and r == -0.01 / N
    p = 1 - 1 / N
    assert env.mdp.P[0, 0, a, 1] == pytest.approx(p)
    assert abs(moved / n - p) < Z * math.sqrt(p * (1 - p) / n)


def test_sampled_transitions_are_in_the_model():
    env = DeepSea(5, deterministic=False, mapping_seed=2)
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    for _ in range(200):
        for row, s, a, s2, _r, info in episode(env, lambda row, col: int(rng.integers(2))):
            assert env.mdp.P[row, s, a, s2] > 0
            assert info["expected_reward"] == env.mdp.R[row, s, a]
            assert info["action_right"] == (a == env.mapping[row, s])


# --- the optimal policy ------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "seed"), [(1, 0), (2, 3), (8, 0), (12, 42)])
def test_always_right_reaches_goal_with_return_099(size, seed):
    env = DeepSea(size, mapping_seed=seed)
    go_right = always_right(env)
    env.reset(seed=0)
    for _ in range(3):
        steps = episode(env, go_right)
        assert [s2 for *_, s2, _, _ in steps] == [min(l + 1, size - 1) for l in range(size)]
        goals = [info["goal_reached"] for *_, info in steps]
        assert goals == [False] * (size - 1) + [True]
        assert sum(r for *_, r, _ in steps) == pytest.approx(1 - 0.01, abs=1e-12)


@pytest.mark.parametrize("size", [1, 3, 10])
def test_backward_induction_optimum_is_always_right(size):
    env = DeepSea(size, mapping_seed=size)
    res = solve_finite_horizon(env.mdp)
    assert res.value == pytest.approx(1 - 0.01, abs=1e-12)
    assert env.optimal_return == pytest.approx(res.value, abs=0)
    assert env.bsuite_optimal_return == pytest.approx(0.99, abs=1e-15)
    M = bsuite_mapping(size, size)
    diag = np.arange(size)
    np.testing.assert_array_equal(res.policy[diag, diag], M[diag, diag])  # right on the path
    # Everywhere: right iff the goal column is still reachable (column >= row); else left.
    L, C = np.indices((size, size))
    np.testing.assert_array_equal(res.policy == M, C >= L)


def test_stochastic_optimum_beats_bsuites_always_right_number():
    N, c = 6, 0.01 / 6
    env = DeepSea(N, deterministic=False)
    p = 1 - 1 / N
    # On the diagonal: pay c per right while still on it; off it the goal is lost, go left.
    exact = p ** (N - 1) * (1 - c) - c * sum(p**k for k in range(N - 1))
    assert env.optimal_return == pytest.approx(exact, abs=1e-12)
    assert env.bsuite_optimal_return == pytest.approx(p ** (N - 1) - 0.01, abs=1e-15)
    assert env.optimal_return > env.bsuite_optimal_return


# --- exploration difficulty --------------------------------------------------------------------


def test_random_agent_goal_rate_is_two_to_minus_size():
    N = 10
    env = DeepSea(N)
    mdp = env.mdp
    d = mdp.initial.copy()
    for l in range(N - 1):
        d = d @ (0.5 * mdp.P[l, :, 0] + 0.5 * mdp.P[l, :, 1])
    assert 0.5 * d[N - 1] == pytest.approx(2.0**-N, rel=1e-12)  # exact goal probability

    rng = np.random.default_rng(1)
    env.reset(seed=2)
    n = 3000  # expected hits 2.9; P(Poisson(2.93) > 15) < 1e-7
    hits = sum(
        any(info["goal_reached"] for *_, info in episode(env, lambda r, c: int(rng.integers(2))))
        for _ in range(n)
    )
    assert hits <= 15

    small = DeepSea(4, mapping_seed=9)
    small.reset(seed=4)
    n, p = 2000, 2.0**-4
    hits = sum(
        any(info["goal_reached"] for *_, info in episode(small, lambda r, c: int(rng.integers(2))))
        for _ in range(n)
    )
    assert abs(hits / n - p) < Z * math.sqrt(p * (1 - p) / n)


def test_oracle_run_has_zero_regret_and_solves_at_once():
    env = DeepSea(10, mapping_seed=42)
    trace = run(OracleAgent(env.mdp), env, episodes=20)
    assert trace.regret[-1] == 0.0
    assert trace.time_to_solve == 1
    assert trace.successes.all() and trace.episodes == 20
    assert trace.optimal_value == pytest.approx(0.99, abs=1e-12)
    early = run(OracleAgent(env.mdp), env, episodes=20, stop_when_solved=True)
    assert early.stopped_early and early.episodes == 1


# --- reward noise ------------------------------------------------------------------------------


def test_deterministic_bsuite_rewards_are_noise_free():
    env = DeepSea(5, mapping_seed=1)
    assert env.reward_noise == 0.0
    rng = np.random.default_rng(5)
    env.reset(seed=0)
    for _ in range(50):
        for *_, r, info in episode(env, lambda row, col: int(rng.integers(2))):
            assert r == info["expected_reward"]


def test_stochastic_bsuite_noise_only_at_ends_of_last_row():
    N = 4
    env = DeepSea(N, deterministic=False, mapping_seed=0)
    assert env.reward_noise == 1.0
    rng = np.random.default_rng(6)
    env.reset(seed=1)
    noise = []
    for _ in range(1500):
        for row, s, _a, _s2, r, info in episode(env, lambda row, col: int(rng.integers(2))):
            if row == N - 1 and s in (0, N - 1):
                noise.append(r - info["expected_reward"])
            else:
                assert r == info["expected_reward"]
    noise = np.array(noise)
    assert noise.size > 500
    assert abs(noise.mean()) < Z / math.sqrt(noise.size)
    assert abs(noise.std() - 1.0) < 0.1


def test_k_learning_noise_means_and_scale():
    N, n = 3, 1500
    env = DeepSea(N, variant="k-learning", mapping_seed=4)
    assert env.reward_noise == 1.0
    rng = np.random.default_rng(7)
    go_right = always_right(env)
    env.reset(seed=2)
    left, right, goal = [], [], []
    for _ in range(n):
        for *_, r, info in episode(env, lambda row, col: int(rng.integers(2))):
            if not info["goal_reached"]:
                (right if info["action_right"] else left).append(r)
        for *_, r, info in episode(env, go_right):
            if info["goal_reached"]:
                goal.append(r)
    for samples, mean in [(left, 0.0), (right, -0.01 / N), (goal, 1 - 0.01 / N)]:
        x = np.array(samples)
        assert x.size >= n
        assert abs(x.mean() - mean) < Z * x.std(ddof=1) / math.sqrt(x.size)
        assert abs(x.std() - 1.0) < 0.1
    quiet = DeepSea(N, variant="k-learning", reward_noise=0.0)
    quiet.reset(seed=0)
    assert all(r == i["expected_reward"] for *_, r, i in episode(quiet, lambda row, col: 0))
    # Same expected model in both variants.
    assert DeepSea(N, variant="k-learning").mdp == DeepSea(N).mdp


def test_stochastic_goal_pays_even_when_the_move_fails():
    # bsuite pays the 1 before the transition: "right" in the last column always pays.
    env = DeepSea(2, deterministic=False, randomize_actions=False, reward_noise=0.0)
    env.reset(seed=0)
    for _ in range(40):
        steps = episode(env, lambda row, col: 1)
        reached = steps[0][3] == 1
        assert steps[-1][-1]["goal_reached"] == reached
        assert steps[-1][4] == pytest.approx(1 - 0.005 if reached else -0.005, abs=1e-15)


# --- API ---------------------------------------------------------------------------------------


def test_gymnasium_contract_and_errors():
    env = DeepSea(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env, skip_render_check=True)
    env = DeepSea(3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    assert env.reset(seed=0) == (0, {"layer": 0})
    with pytest.raises(ValueError, match="action 2"):
        env.step(2)
    with pytest.raises(ValueError, match="action must be an integer"):
        env.step(0.5)
    for _ in range(3):
        *_, term, trunc, info = env.step(0)
    assert term and not trunc and info["layer"] == 3
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    assert env.observation_space.n == 3 and env.action_space.n == 2


def test_repr():
    assert repr(DeepSea(5)) == "DeepSea(size=5, mapping_seed=0, reward_noise=0.0)"
    assert repr(DeepSea(5, deterministic=False, variant="k-learning", mapping_seed=3)) == (
        "DeepSea(size=5, mapping_seed=3, deterministic=False, variant='k-learning', "
        "reward_noise=1.0)"
    )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"size": 0}, "size"),
        ({"size": -3}, "size"),
        ({"size": 2.0}, "size"),
        ({"size": True}, "size"),
        ({"mapping_seed": -1}, "mapping_seed"),
        ({"mapping_seed": 2**32}, "mapping_seed"),
        ({"mapping_seed": None}, "mapping_seed"),
        ({"mapping_seed": 1.5}, "mapping_seed"),
        ({"variant": "gym"}, "variant"),
        ({"variant": None}, "variant"),
        ({"reward_noise": -0.1}, "reward_noise"),
        ({"reward_noise": float("nan")}, "reward_noise"),
        ({"reward_noise": "1"}, "reward_noise"),
        ({"unscaled_move_cost": -0.01}, "unscaled_move_cost"),
        ({"unscaled_move_cost": float("inf")}, "unscaled_move_cost"),
        ({"deterministic": 1}, "deterministic"),
        ({"randomize_actions": "no"}, "randomize_actions"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs, name):
    kwargs = {"size": 4, **kwargs}
    with pytest.raises(ValueError, match=name):
        DeepSea(**kwargs)
