"""Hitting times and the diameter on sparse models: the same model dense and sparse gives the
same times, both paths run without a dense copy, and bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import optplan as op
from optplan import mdp as mdp_module
from optplan._checks import OptplanError, OptplanTypeError
from optplan.fast.hitting_time import target_times
from optplan.problems.hitting_time import HittingTimes


def random_model(seed: int):
    """A random model with rows of a few successors, sometimes a mask, sometimes an
    absorbing state (so some hitting times are infinite)."""
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(2, 25)), int(rng.integers(1, 4))
    k = int(rng.integers(1, min(S, 4) + 1))
    P = np.zeros((S, A, S))
    for s in range(S):  # test data only
        for a in range(A):
            succ = rng.choice(S, size=k, replace=False)
            P[s, a, succ] = rng.dirichlet(np.ones(k))
    if rng.random() < 0.3:
        P[0] = 0.0
        P[0, :, 0] = 1.0
    mask = None
    if A > 1 and rng.random() < 0.5:
        mask = rng.random((S, A)) < 0.7
        mask[np.arange(S), rng.integers(0, A, S)] = True
    return op.TabularMDP(P, np.zeros((S, A)), action_mask=mask)


def sparse_gridworld(n: int, slip: float = 0.2) -> op.TabularMDP:
    """An ``n x n`` grid, four moves; a move succeeds with ``1 - slip`` and stays otherwise
    (a wall keeps the agent in place), built as CSR rows without a dense array."""
    S, A = n * n, 4
    s = np.arange(S)
    r, c = np.divmod(s, n)
    moves = [(r > 0, -n), (r < n - 1, n), (c > 0, -1), (c < n - 1, 1)]
    nxt = np.stack([np.where(ok, s + d, s) for ok, d in moves], axis=1)  # (S, A)
    row = np.repeat(np.arange(S * A), 2)
    col = np.stack([nxt.ravel(), np.repeat(s, A)], axis=1).ravel()
    val = np.tile([1.0 - slip, slip], S * A)
    P = sp.csr_matrix((val, (row, col)), shape=(S * A, S))  # duplicates (walls) are summed
    return op.TabularMDP(P, np.zeros((S, A)))


def sparse_of(mdp):
    S, A = mdp.shape
    P = sp.csr_matrix(mdp.P.reshape(S * A, S))
    return op.TabularMDP(P, mdp.R, None, mdp.initial, mdp.action_mask)


def same_times(a, b, tol=1e-10):
    fin = np.isfinite(a.values)
    assert np.array_equal(fin, np.isfinite(b.values))
    scale = max(1.0, float(np.abs(a.values[fin]).max(initial=0.0)))
    assert float(np.abs(a.values[fin] - b.values[fin]).max(initial=0.0)) <= tol * scale
    if np.isfinite(a.value):
        assert abs(a.value - b.value) <= tol * scale
    else:
        assert a.value == b.value


@pytest.mark.parametrize("seed", range(25))
def test_dense_and_sparse_give_the_same_hitting_times(seed):
    dense = random_model(seed)
    sparse = sparse_of(dense)
    problem = HittingTimes(sparse)
    assert problem.mdp.sparse  # kept sparse, not converted
    a, b = HittingTimes(dense).solve(), problem.solve()
    assert a.status == b.status == "optimal"
    same_times(a, b)
    assert np.array_equal(problem.reach, HittingTimes(dense).reach)
    assert np.array_equal(problem.stays(), HittingTimes(dense).stays())


def test_gridworld_diameter_dense_and_sparse():
    sparse = sparse_gridworld(6)
    dense = sparse.to_dense()
    a, b = HittingTimes(dense).solve(), HittingTimes(sparse).solve()
    same_times(a, b)
    # corner to corner: 2 (n - 1) moves, each taking 1 / (1 - slip) steps in expectation
    assert abs(b.value - 2 * 5 / 0.8) <= 1e-10 * b.value


@pytest.mark.parametrize("seed", range(6))
def test_cross_check_on_a_sparse_model(seed):
    sparse = sparse_of(random_model(100 + seed))
    report = op.cross_check(HittingTimes(sparse))
    assert report.agree, report.message


def test_cross_check_on_a_sparse_gridworld():
    report = op.cross_check(HittingTimes(sparse_gridworld(4)))
    assert report.agree, report.message


def test_both_paths_run_without_a_dense_copy(monkeypatch):
    sparse = sparse_gridworld(5)
    S, A = sparse.shape
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", 8)  # any dense copy is refused
    problem = HittingTimes(sparse)
    fast, conic = problem.solve(), problem.solve(method="conic")
    assert fast.status == "optimal" and conic.status == "optimal"
    assert abs(fast.value - conic.value) <= 1e-6 * fast.value
    with pytest.raises(OptplanError, match="would take"):
        sparse.dense_P()


def test_one_target_matches_the_all_targets_problem():
    sparse = sparse_of(random_model(3))
    full = HittingTimes(sparse).solve()
    for t in range(sparse.n_states):
        times, policy, _, status, _ = target_times(sparse, t)
        assert status == "optimal"
        assert np.array_equal(np.isfinite(times), np.isfinite(full.values[t]))
        fin = np.isfinite(times)
        assert np.allclose(times[fin], full.values[t][fin], rtol=1e-10, atol=0)
        assert np.array_equal(policy == -1, full.policy[t] == -1)


def test_one_target_on_a_large_random_model_uses_the_iterative_evaluation():
    from optplan.fast import hitting_time as fast_hitting

    rng = np.random.default_rng(5)
    S, A, k = fast_hitting.SPARSE_HIT_DIRECT_MAX + 500, 2, 4
    cols = rng.integers(0, S, size=(S * A, k))
    vals = rng.dirichlet(np.ones(k), size=S * A)
    P = sp.csr_matrix((vals.ravel(), (np.repeat(np.arange(S * A), k), cols.ravel())), (S * A, S))
    mdp = op.TabularMDP(P, np.zeros((S, A)))
    times, policy, _, status, _ = target_times(mdp, 0)
    assert status == "optimal" and times[0] == 0.0
    fin = np.isfinite(times)
    # the Bellman equation holds at every state that reaches the target
    q = 1.0 + (mdp.P_rows @ np.where(fin, times, 0.0)).reshape(S, A)
    N = fin.copy()
    N[0] = False
    best = q[N, policy[N]]
    assert np.abs(best - times[N]).max() <= 1e-8 * times[N].max()


def test_bad_input():
    with pytest.raises(OptplanTypeError, match="mdp must be a TabularMDP"):
        HittingTimes(np.eye(3))
    sparse = sparse_gridworld(3)
    for bad in (-1, 9, 1.5, True):
        with pytest.raises(OptplanError, match="target t"):
            target_times(sparse, bad)
    P = sp.csr_matrix(np.array([[0.5, 0.4], [0.0, 1.0]]))  # row (0, 0) sums to 0.9
    with pytest.raises(OptplanError, match=r"0\.9"):
        HittingTimes(op.TabularMDP(P, np.zeros((2, 1))))
