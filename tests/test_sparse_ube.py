"""The uncertainty Bellman equation on sparse transitions: ``mean_transitions`` as CSR rows
``(S·A, S)`` (layered: ``(L·S·A, S)``) gives the same ``u`` and ``y`` as the dense array,
both paths run on it without a dense copy, and bad sparse input is refused naming the pair."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings

import optplan as op
from optplan._checks import OptplanError, OptplanTypeError
from optplan.conic import ube as conic_ube
from optplan.dp import SPARSE_DIRECT_MAX_STATES
from optplan.problems.ube import UncertaintyBellman
from optplan.verification.strategies import ube_instances

TOL = 1e-10


def random_rows(rng, n_rows: int, S: int, k: int):
    """CSR ``(n_rows, S)``, ``k`` distinct successors a row (``k`` capped at ``S``)."""
    k = min(k, S)
    cols = np.argsort(rng.random((n_rows, S)), axis=1)[:, :k]
    vals = rng.dirichlet(np.ones(k), size=n_rows)
    return sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(n_rows + 1) * k), shape=(n_rows, S))


def random_ube(seed: int, layered: bool = False, max_states: int = 30):
    """``(dense problem, sparse problem)``: few successors, a stochastic or deterministic
    policy, local uncertainties with zeros and several scales."""
    rng = np.random.default_rng(seed)
    S = int(rng.integers(1, max_states))
    A = int(rng.integers(1, 4))
    L = int(rng.integers(1, 6)) if layered else None
    lead = (S, A) if L is None else (L, S, A)
    rows = random_rows(rng, int(np.prod(lead)), S, int(rng.integers(1, 6)))
    local = rng.random(lead) * rng.choice([1.0, 1e-6, 1e6])
    local[rng.random(lead) < 0.2] = 0.0
    if rng.random() < 0.5:
        policy = rng.integers(0, A, size=lead[:-1])
    else:
        policy = rng.dirichlet(np.ones(A), size=lead[:-1])
    discount = float(rng.choice([0.0, 0.5, 0.9, 0.99] + ([1.0] if layered else [])))
    dense_P = rows.toarray().reshape(*lead, S)
    dense = UncertaintyBellman(dense_P, policy, local, discount)
    sparse = UncertaintyBellman(rows, policy, local, discount)
    return dense, sparse


def assert_same(dense, sparse, **options):
    a, b = dense.solve(**options), sparse.solve(**options)
    assert a.status == b.status == "optimal", (a.message, b.message)
    su = max(float(np.abs(a.x).max()), 1e-300)
    sy = float(np.abs(a.multiplier).max())
    assert np.abs(a.x - b.x).max() <= TOL * su
    assert np.abs(a.multiplier - b.multiplier).max() <= TOL * sy
    assert abs(a.value - b.value) <= TOL * max(abs(a.value), 1e-300)
    if not dense.layered:
        assert np.abs(a.values - b.values).max() <= TOL * su
    return a, b


def test_sparse_problem_holds_canonical_csr_and_its_operators_agree():
    dense, sparse = random_ube(1)
    assert sparse.sparse and not dense.sparse
    assert sparse.mean_transitions.has_canonical_format
    assert sparse.transition_rows is sparse.mean_transitions
    rng = np.random.default_rng(0)
    u = rng.random(dense.local.shape)
    assert np.abs(dense.apply(u) - sparse.apply(u)).max() <= 1e-14 * np.abs(dense.apply(u)).max()
    assert np.abs(dense.apply_transpose(u) - sparse.apply_transpose(u)).max() <= 1e-13 * (
        np.abs(dense.apply_transpose(u)).max()
    )
    for fmt in (sp.coo_matrix, sp.csc_matrix, sp.csr_array):
        other = UncertaintyBellman(
            fmt(sparse.mean_transitions), dense.policy, dense.local, dense.discount
        )
        assert other.sparse and (other.mean_transitions != sparse.mean_transitions).nnz == 0
    with pytest.raises(ValueError):
        sparse.mean_transitions.data[0] = 2.0
    ld, ls = random_ube(2, layered=True)
    u = rng.random(ld.local.shape)
    assert np.abs(ld.apply(u) - ls.apply(u)).max() <= 1e-14 * np.abs(ld.apply(u)).max()
    assert np.abs(ld.apply_transpose(u) - ls.apply_transpose(u)).max() <= 1e-13 * (
        np.abs(ld.apply_transpose(u)).max()
    )


@pytest.mark.parametrize("seed", range(30))
def test_continuing_dense_and_sparse_agree(seed):
    dense, sparse = random_ube(seed)
    assert_same(dense, sparse)
    assert_same(dense, sparse, algorithm="iteration")


@pytest.mark.parametrize("seed", range(20))
def test_layered_dense_and_sparse_agree(seed):
    assert_same(*random_ube(100 + seed, layered=True))


@pytest.mark.parametrize("seed", range(5))
def test_above_the_direct_limit_the_sparse_solve_is_iterative_and_agrees(seed):
    rng = np.random.default_rng(seed)
    S, A = 3 * SPARSE_DIRECT_MAX_STATES, 3
    rows = random_rows(rng, S * A, S, 5)
    policy = rng.dirichlet(np.ones(A), size=S)
    local = rng.random((S, A))
    discount = [0.5, 0.9, 0.99, 0.999, 0.9999][seed]
    dense = UncertaintyBellman(rows.toarray().reshape(S, A, S), policy, local, discount)
    assert_same(dense, UncertaintyBellman(rows, policy, local, discount))


@settings(max_examples=60, deadline=None)
@given(ube_instances())
def test_dense_and_sparse_agree_on_the_suite_cases(d):
    dense = UncertaintyBellman(d["mean_transitions"], d["policy"], d["local"], d["discount"])
    S, A = dense.local.shape
    rows = sp.csr_matrix(dense.mean_transitions.reshape(S * A, S))
    sparse = UncertaintyBellman(rows, d["policy"], d["local"], d["discount"])
    a, b = dense.solve(), sparse.solve()
    assert a.status == b.status
    if a.status == "optimal":
        su = max(float(np.abs(a.x).max()), 1e-300)
        assert np.abs(a.x - b.x).max() <= TOL * su
        sy = float(np.abs(a.multiplier).max())
        assert np.abs(a.multiplier - b.multiplier).max() <= TOL * sy


def test_sparse_lp_matrix_equals_the_dense_one():
    for layered in (False, True):
        dense, sparse = random_ube(7, layered=layered)
        Md, Ms = conic_ube.bellman_operator(dense), conic_ube.bellman_operator(sparse)
        assert abs(Md - Ms).max() <= 1e-15


@pytest.mark.parametrize("seed", range(8))
def test_cross_check_on_sparse_ube(seed):
    _, sparse = random_ube(200 + seed, layered=seed % 2 == 1)
    check = op.cross_check(sparse)
    assert check.agree, check.message


def local_rows(rng, S: int, A: int, k: int, L: int | None = None):
    """Successors within 8 states of the row's own: a banded LP."""
    n = S * A * (L or 1)
    own = np.repeat(np.tile(np.arange(S), L or 1), A)[:, None]
    cols = (own + rng.choice(np.arange(-8, 9), size=(n, k))) % S
    vals = rng.dirichlet(np.ones(k), size=n)
    return sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(n + 1) * k), shape=(n, S))


def test_large_sparse_ube_is_solved_without_a_dense_array(monkeypatch):
    rng = np.random.default_rng(3)
    S, A = 20_000, 3
    problem = UncertaintyBellman(
        random_rows_large(rng, S * A, S, 6),
        rng.dirichlet(np.ones(A), size=S),
        rng.random((S, A)),
        0.9,
    )

    def refuse(*args, **kwargs):
        raise AssertionError("a sparse matrix was densified")

    monkeypatch.setattr(sp.csr_matrix, "toarray", refuse)
    monkeypatch.setattr(sp.csr_matrix, "todense", refuse)
    res = problem.solve()
    assert res.status == "optimal"
    assert problem.residual(res.x) <= 1e-10 * np.abs(res.x).max()
    assert problem.dual_residual(res.multiplier) <= 1e-10 * np.abs(res.multiplier).max()


def random_rows_large(rng, n_rows: int, S: int, k: int):
    """CSR rows with ``k`` successors drawn with replacement (repeats summed), without an
    ``(n_rows, S)`` array of keys."""
    cols = rng.integers(0, S, size=(n_rows, k))
    vals = rng.dirichlet(np.ones(k), size=n_rows)
    return sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(n_rows + 1) * k), shape=(n_rows, S))


@pytest.mark.slow
@pytest.mark.parametrize("layered", [False, True])
def test_cross_check_on_a_sparse_ube_of_ten_thousand_states(layered):
    rng = np.random.default_rng(4)
    S, A = 10_000, 2
    L = 3 if layered else None
    lead = (S, A) if L is None else (L, S, A)
    problem = UncertaintyBellman(
        local_rows(rng, S, A, 4, L), rng.integers(0, A, size=lead[:-1]), rng.random(lead), 0.9
    )
    check = op.cross_check(problem)
    assert check.agree, check.message


def test_bad_sparse_transitions_are_refused_naming_the_pair():
    S, A = 4, 2
    rng = np.random.default_rng(9)
    P = rng.dirichlet(np.ones(S), size=S * A)
    local, policy = np.ones((S, A)), np.zeros(S, dtype=int)

    def with_row(row, values):
        Q = P.copy()
        Q[row] = values
        return sp.csr_matrix(Q)

    with pytest.raises(
        OptplanError, match=r"row mean_transitions\[\(s, a\) = \(2, 1\)\] .*sums to 1\.5"
    ):
        UncertaintyBellman(with_row(5, [0.5, 0.5, 0.5, 0.0]), policy, local, 0.9)
    with pytest.raises(
        OptplanError, match=r"mean_transitions has a negative entry -0\.5 at \(s, a\) = \(1, 0\)"
    ):
        UncertaintyBellman(with_row(2, [1.0, -0.5, 0.5, 0.0]), policy, local, 0.9)
    with pytest.raises(OptplanError, match=r"mean_transitions has a non-finite entry nan"):
        UncertaintyBellman(with_row(0, [np.nan, 0.5, 0.5, 0.0]), policy, local, 0.9)
    with pytest.raises(OptplanError, match=r"expected \(S\*A, S\) = \(8, 4\) from local"):
        UncertaintyBellman(sp.csr_matrix(P[:-1]), policy, local, 0.9)
    with pytest.raises(OptplanTypeError, match="real numeric"):
        UncertaintyBellman(sp.csr_matrix(P).astype(complex), policy, local, 0.9)
    with pytest.raises(OptplanError, match=r"local needs at least one state"):
        UncertaintyBellman(sp.csr_matrix((0, 0)), np.zeros(0, dtype=int), np.zeros((0, 2)), 0.9)
    with pytest.raises(OptplanError, match=r"local has 1 dimension|local must have"):
        UncertaintyBellman(sp.csr_matrix(P), policy, np.ones(S), 0.9)
    # the layered form: (l, s, a) named
    L = 2
    Pl = rng.dirichlet(np.ones(S), size=L * S * A)
    Pl[(1 * S + 3) * A + 1] = [0.2, 0.2, 0.2, 0.2]
    with pytest.raises(OptplanError, match=r"\(l, s, a\) = \(1, 3, 1\)\] .*sums to 0\.8"):
        UncertaintyBellman(sp.csr_matrix(Pl), np.zeros((L, S), int), np.ones((L, S, A)), 1.0)
    # gamma = 1 needs the layered form, sparse as dense
    with pytest.raises(OptplanError, match="continuing form"):
        UncertaintyBellman(sp.csr_matrix(P), policy, local, 1.0)
