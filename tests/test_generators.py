"""Tests of optplan.generators: RiverSwim structure, random Dirichlet determinism and sparsity."""

from __future__ import annotations

import numpy as np
import pytest

from optplan.generators import GENERATORS, random_dirichlet, riverswim
from optplan.mdp import TabularMDP


def _stationary(P_pi: np.ndarray) -> np.ndarray:
    """Stationary distribution of an irreducible chain (solve mu (I - P) = 0, sum mu = 1)."""
    S = P_pi.shape[0]
    M = np.vstack([(np.eye(S) - P_pi).T, np.ones(S)])
    b = np.zeros(S + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(M, b, rcond=None)[0]


def _n_recurrent_classes(P_pi: np.ndarray) -> int:
    """Multiplicity of eigenvalue 1 of a stochastic matrix = number of recurrent classes."""
    return int(np.sum(np.abs(np.linalg.eigvals(P_pi) - 1.0) < 1e-9))


# --- RiverSwim -----------------------------------------------------------------------------


def test_riverswim_standard_numbers():
    m = riverswim()
    assert isinstance(m, TabularMDP)
    assert m.shape == (6, 2)
    assert m.name == "riverswim"
    assert m.criterion == "average" and m.discount is None
    S = 6
    # action 0 (left): deterministic move towards state 0
    for s in range(S):
        expected = np.zeros(S)
        expected[max(s - 1, 0)] = 1.0
        np.testing.assert_array_equal(m.P[s, 0], expected)
    # action 1 (right): Osband et al. (2013) numbers
    np.testing.assert_allclose(m.P[0, 1], [0.4, 0.6, 0, 0, 0, 0])
    for s in range(1, S - 1):
        expected = np.zeros(S)
        expected[[s - 1, s, s + 1]] = [0.05, 0.6, 0.35]
        np.testing.assert_allclose(m.P[s, 1], expected, atol=1e-15)
    np.testing.assert_allclose(m.P[S - 1, 1], [0, 0, 0, 0, 0.4, 0.6])
    expected_R = np.zeros((S, 2))
    expected_R[0, 0] = 0.005
    expected_R[S - 1, 1] = 1.0
    np.testing.assert_array_equal(m.R, expected_R)
    np.testing.assert_array_equal(m.initial, np.eye(S)[0])
    assert m.action_mask.all()


@pytest.mark.parametrize("n", [2, 3, 12])
def test_riverswim_sizes_rows_sum_to_one(n):
    m = riverswim(n_states=n, discount=0.95)
    assert m.shape == (n, 2)
    assert m.discount == 0.95
    np.testing.assert_allclose(m.P.sum(axis=-1), 1.0, atol=1e-12)


def test_riverswim_swimming_right_beats_the_bank():
    m = riverswim()
    right = m.P[:, 1]
    mu = _stationary(right)
    gain_right = mu @ m.R[:, 1]
    # always-left sits in state 0 collecting r_left forever
    assert gain_right > 0.005 * 10


def test_riverswim_start_states_and_original_parameters():
    m = riverswim(start=[0, 1])
    np.testing.assert_array_equal(m.initial, [0.5, 0.5, 0, 0, 0, 0])
    sl = riverswim(
        p_right=0.3,
        p_stay=0.6,
        p_right_first=0.3,
        p_stay_last=0.3,
        r_left=5,
        r_right=10000,
        start=[0, 1],
    )
    np.testing.assert_allclose(sl.P[0, 1, :2], [0.7, 0.3])
    np.testing.assert_allclose(sl.P[2, 1, 1:4], [0.1, 0.6, 0.3])
    np.testing.assert_allclose(sl.P[5, 1, 4:], [0.7, 0.3])
    assert sl.R[0, 0] == 5 and sl.R[5, 1] == 10000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_states": 1}, r"n_states must be >= 2, got 1"),
        ({"n_states": 2.5}, r"n_states must be an integer, got 2\.5"),
        ({"n_states": True}, r"n_states must be an integer, got True"),
        ({"n_states": "6"}, r"n_states must be an integer, got '6'"),
        ({"p_right": 1.5}, r"p_right must lie in \[0, 1\], got 1\.5"),
        ({"p_stay": -0.1}, r"p_stay must lie in \[0, 1\], got -0\.1"),
        ({"p_right": 0.5, "p_stay": 0.6}, r"p_right \+ p_stay must be <= 1, got 0\.5 \+ 0\.6"),
        ({"p_right_first": 2}, r"p_right_first must lie in \[0, 1\], got 2"),
        ({"r_left": float("nan")}, r"r_left must be finite, got nan"),
        ({"discount": 1.0}, r"discount must lie in \[0, 1\) or be None, got 1\.0"),
        ({"start": 6}, r"start must contain states in \[0, 5\], got 6"),
        ({"start": []}, r"start must be a state index or a non-empty list of them, got \[\]"),
        ({"start": [0, -1]}, r"start must be >= 0, got -1"),
    ],
)
def test_riverswim_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        riverswim(**kwargs)


# --- random Dirichlet ----------------------------------------------------------------------


def test_random_dirichlet_is_deterministic_per_seed():
    a = random_dirichlet(n_states=7, n_actions=4, seed=3)
    b = random_dirichlet(n_states=7, n_actions=4, seed=3)
    c = random_dirichlet(n_states=7, n_actions=4, seed=4)
    assert a == b
    assert not np.array_equal(a.P, c.P)
    assert random_dirichlet(seed=np.random.default_rng(3), n_states=7, n_actions=4) == a
    assert a.shape == (7, 4) and a.name == "random_dirichlet" and a.criterion == "average"
    np.testing.assert_allclose(a.P.sum(axis=-1), 1.0, atol=1e-12)
    assert (a.P > 0).all()
    assert ((a.R >= 0) & (a.R < 1)).all()
    np.testing.assert_array_equal(a.initial, np.full(7, 1 / 7))


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_random_dirichlet_sparse_support_always_contains_state_zero(k):
    m = random_dirichlet(n_states=8, n_actions=3, seed=11, support=k)
    np.testing.assert_array_equal((m.P > 0).sum(axis=-1), np.full((8, 3), k))
    assert (m.P[:, :, 0] > 0).all()
    np.testing.assert_allclose(m.P.sum(axis=-1), 1.0, atol=1e-12)


def test_random_dirichlet_sparse_is_unichain():
    m = random_dirichlet(n_states=12, n_actions=3, seed=5, support=2, alpha=0.3)
    rng = np.random.default_rng(0)
    states = np.arange(m.n_states)
    for _ in range(20):
        policy = rng.integers(m.n_actions, size=m.n_states)
        assert _n_recurrent_classes(m.P[states, policy]) == 1


def test_random_dirichlet_sparse_support_is_spread_over_states():
    m = random_dirichlet(n_states=6, n_actions=50, seed=1, support=3)
    used = (m.P[:, :, 1:] > 0).any(axis=(0, 1))
    assert used.all()


def test_random_dirichlet_options():
    m = random_dirichlet(n_states=4, n_actions=2, seed=0, reward="sparse", discount=0.9)
    assert m.discount == 0.9
    assert np.count_nonzero(m.R) == 1 and m.R.max() == 1.0
    single = random_dirichlet(n_states=1, n_actions=1)
    np.testing.assert_array_equal(single.P, [[[1.0]]])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_states": 0}, r"n_states must be >= 1, got 0"),
        ({"n_actions": 1.0}, r"n_actions must be an integer, got 1\.0"),
        ({"seed": -1}, r"seed must be >= 0, got -1"),
        ({"seed": "x"}, r"seed must be an integer, got 'x'"),
        ({"alpha": 0.0}, r"alpha must be > 0, got 0\.0"),
        ({"alpha": float("inf")}, r"alpha must be finite, got inf"),
        ({"support": 0}, r"support must be >= 1, got 0"),
        ({"support": 11}, r"support must lie in \[1, n_states=10\], got 11"),
        ({"discount": -0.5}, r"discount must lie in \[0, 1\) or be None, got -0\.5"),
        ({"reward": "gaussian"}, r"reward must be one of .*, got 'gaussian'"),
    ],
)
def test_random_dirichlet_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        random_dirichlet(**kwargs)


def test_registry():
    assert GENERATORS["riverswim"] is riverswim
    assert GENERATORS["random_dirichlet"] is random_dirichlet
    for generator in GENERATORS.values():
        assert isinstance(generator(), TabularMDP)


# --- sparse goal Dirichlet -------------------------------------------------------------------


def _greedy_loss(mdp) -> float:
    """``<mu* - mu^greedy, r>``: the per-step loss of the reward-greedy policy."""
    from optplan.experiments.metrics import occupancy_gaps

    greedy = np.eye(mdp.n_actions)[mdp.R.argmax(axis=1)]
    return float(occupancy_gaps(mdp, greedy)[0])


def test_sparse_goal_dirichlet_structure_and_determinism():
    from optplan.generators import sparse_goal_dirichlet

    m = sparse_goal_dirichlet(30, 4, seed=7, discount=0.9)
    assert m.name == "sparse_goal_dirichlet" and m.shape == (30, 4) and m.discount == 0.9
    np.testing.assert_allclose(m.P.sum(axis=-1), 1.0)
    goals = np.argwhere(m.R == 1.0)
    assert len(goals) == 3 and len(set(goals[:, 0])) == 3  # S // 10 goal states, one action each
    others = m.R[m.R != 1.0]
    assert others.min() >= 0.0 and others.max() < 0.1  # distractors in [0, 0.1)
    # alpha = 0.1: peaked rows (the largest three entries hold most of each row's mass)
    top3 = np.sort(m.P, axis=-1)[..., -3:].sum(axis=-1)
    assert np.median(top3) > 0.7
    again = sparse_goal_dirichlet(30, 4, seed=7, discount=0.9)
    np.testing.assert_array_equal(m.P, again.P)
    np.testing.assert_array_equal(m.R, again.R)
    assert not np.array_equal(m.R, sparse_goal_dirichlet(30, 4, seed=8).R)
    assert GENERATORS["sparse_goal_dirichlet"] is sparse_goal_dirichlet


def test_sparse_goal_dirichlet_defeats_the_reward_greedy_policy():
    """Where learning matters: the reward-greedy policy loses >= 0.05 per step on average over
    model seeds (gamma = 0.9), against about 0.002 on dense uniform-reward Dirichlet models."""
    from optplan.generators import sparse_goal_dirichlet

    for S, A in ((20, 3), (50, 4)):
        losses = [
            _greedy_loss(sparse_goal_dirichlet(S, A, seed=s, discount=0.9)) for s in range(10)
        ]
        assert np.mean(losses) >= 0.05 and min(losses) > 0.0
    dense = [_greedy_loss(random_dirichlet(20, 3, seed=s, discount=0.9)) for s in range(10)]
    assert np.mean(dense) < 0.01


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"n_goals": 0}, "n_goals"),
        ({"n_states": 5, "n_goals": 6}, "n_goals"),
        ({"distractor": 1.0}, "distractor"),
        ({"discount": 1.0}, "discount"),
        ({"seed": -1}, "seed"),
    ],
)
def test_sparse_goal_dirichlet_refuses_bad_parameters(kwargs, match):
    from optplan.generators import sparse_goal_dirichlet

    with pytest.raises(ValueError, match=match):
        sparse_goal_dirichlet(**kwargs)
