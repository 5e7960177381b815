"""The compiled passes of the sparse discounted policy iteration against the NumPy code they
replace: the improvement step (backup, greedy with the incumbent kept on ties, the two
residuals and the next chain gathered in the same pass), the evaluation's fixed point on a
policy's chain and on its transpose, and value iteration's first sweep from 0. Each is
compared bit for bit (the same floating-point operations in the same order), on random
models with masks, ties, repeated successors and NaN, and on slowly mixing chains that
leave the fixed point for the fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.bench.planning import random_sparse_mdp
from optplan.dp import _linear as L
from optplan.dp import discounted as D
from optplan.dp._common import backup, greedy, masked, policy_model
from optplan.dp._sweeps import sweeps

pytestmark = pytest.mark.skipif(sweeps() is None, reason="needs numba (optplan[jit])")


def _model(seed: int, S: int, A: int, K: int, masked_out: float = 0.0):
    """A random sparse model (``K`` successors, repeats merged), with a random mask keeping
    at least one action a state when ``masked_out > 0``."""
    rng = np.random.default_rng(seed)
    mdp = random_sparse_mdp(rng, S, A, K)
    mask = rng.random((S, A)) >= masked_out
    mask[np.arange(S), rng.integers(0, A, S)] = True
    return mdp.P_rows.tocsr(), np.ascontiguousarray(mdp.R), mask


def _numpy_improvement(rows, R, mask, discount, V, policy):
    """The NumPy improvement step of :func:`optplan.dp.discounted_policy_iteration`."""
    q = backup(rows, R, V, discount)
    qm = masked(q, mask)
    new = greedy(qm, policy, tol=1e-12)
    top = qm.max(axis=1)
    own = q[np.arange(R.shape[0]), policy]
    return q, new, float(np.abs(top - V).max()), float(np.abs(own - V).max())


def _compiled_improvement(rows, R, mask, discount, V, policy):
    S, A = R.shape
    q, new = np.empty((S, A)), np.empty(S, dtype=np.intp)
    c_ptr, c_idx, c_data = L._chain_buffers(rows, S, A)
    bellman, own, same = sweeps()["_policy_backup"](
        (rows.indptr, rows.indices, rows.data), R, np.ascontiguousarray(mask), bool(mask.all()),
        discount, V, policy, q, new, (c_ptr, c_idx, c_data),
    )  # fmt: skip
    nnz = int(c_ptr[S])
    chain = L._csr((c_data[:nnz], c_idx[:nnz], c_ptr), rows)
    return q, new, bellman, own, same, chain


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    S=st.integers(1, 60),
    A=st.integers(1, 5),
    K=st.integers(1, 8),
    masked_out=st.sampled_from([0.0, 0.5]),
    discount=st.sampled_from([0.0, 0.5, 0.95, 0.999]),
    ties=st.booleans(),
)
def test_improvement_step_equals_numpy_bit_for_bit(seed, S, A, K, masked_out, discount, ties):
    rows, R, mask = _model(seed, S, A, K, masked_out)
    rng = np.random.default_rng(seed + 1)
    if ties:  # equal rewards and rows: every admissible action ties, the incumbent stays
        R = np.ascontiguousarray(np.repeat(R[:, :1], A, axis=1))
        rows = sp.csr_matrix(np.repeat(rows.toarray()[::A], A, axis=0))
    V = rng.normal(size=S) * 10.0
    policy = np.array([rng.choice(np.flatnonzero(m)) for m in mask], dtype=np.intp)
    q0, new0, b0, o0 = _numpy_improvement(rows, R, mask, discount, V, policy)
    q1, new1, b1, o1, same, chain = _compiled_improvement(rows, R, mask, discount, V, policy)
    assert np.array_equal(q0, q1)
    assert np.array_equal(new0, new1)
    assert (b0, o0) == (b1, o1)
    assert same == bool((new0 == policy).all())
    if ties:
        assert np.array_equal(new1, policy)
    expected, _ = policy_model(rows, R, new1)
    assert np.array_equal(chain.indptr, expected.indptr)
    assert np.array_equal(chain.indices, expected.indices)
    assert np.array_equal(chain.data, expected.data)


def test_improvement_step_reports_nan_values():
    rows, R, mask = _model(3, 40, 3, 4)
    V = np.random.default_rng(0).normal(size=40)
    V[7] = np.nan
    policy = np.zeros(40, dtype=np.intp)
    _, _, bellman, own, _, _ = _compiled_improvement(rows, R, mask, 0.9, V, policy)
    assert np.isnan(bellman) and np.isnan(own)


def _chain(seed, S, K):
    rows, R, _ = _model(seed, S, 3, K)
    policy = np.random.default_rng(seed).integers(0, 3, S)
    return policy_model(rows, R, policy)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("seed, S, K", [(0, 50, 3), (1, 400, 10), (2, 2000, 2), (3, 7, 1)])
@pytest.mark.parametrize("discount", [0.5, 0.95, 0.99])
def test_compiled_and_numpy_solves_meet_the_residual_and_the_exact_answer(
    transposed, seed, S, K, discount
):
    P_pi, r_pi = _chain(seed, S, K)
    chain = L.SparseChain(P_pi, sweeps())
    if transposed:
        b = (1.0 - discount) * np.full(S, 1.0 / S)
        x0, M0, M1 = np.full(S, 1.0 / S), P_pi.T, chain.T
    else:
        b, x0, M0, M1 = r_pi, np.zeros(S), P_pi, chain
    tol = 1e-13
    exact = np.linalg.solve(np.eye(S) - discount * M0.toarray(), b)
    for x in (
        L._krylov(M0, b, discount, x0, tol, "test", not transposed),  # the NumPy loop
        L._krylov(M1, b, discount, x0.copy(), tol, "test", not transposed),  # compiled
    ):
        residual = b + discount * (M0 @ x) - x
        scale = max(1.0, float(np.abs(x).max()))
        assert np.abs(residual).max() <= tol + 1e-14 * scale
        # ||x - exact|| <= ||residual|| ||(I - discount M)^{-1}||_inf, at most 1 / (1 -
        # discount) for the chain and S / (1 - discount) for its transpose (the 1-norm)
        inverse = (S if transposed else 1) / (1.0 - discount)
        assert np.abs(x - exact).max() <= (tol + 1e-14 * scale) * inverse


@pytest.mark.parametrize("transposed", [False, True])
def test_slowly_mixing_chain_leaves_the_compiled_fixed_point_for_the_fallbacks(transposed):
    """A cycle with a small leak mixes slowly: the fixed point gives up (the same iterate
    as NumPy's) and the gathered chain's fallbacks solve it to the tolerance."""
    S, discount = 300, 0.999
    P = sp.csr_matrix((np.ones(S), (np.arange(S), (np.arange(S) + 1) % S)), shape=(S, S))
    r = np.random.default_rng(0).random(S)
    chain = L.SparseChain(P, sweeps())
    if transposed:
        b, x0, M0, M1 = (1.0 - discount) * np.full(S, 1.0 / S), np.full(S, 1.0 / S), P.T, chain.T
    else:
        b, x0, M0, M1 = r, np.zeros(S), P, chain
    exact = np.linalg.solve(np.eye(S) - discount * M0.toarray(), b)
    out = L._krylov(M1, b, discount, x0, 1e-12, "test", not transposed)
    assert np.abs(out - exact).max() <= 1e-9 * max(1.0, float(np.abs(exact).max()))
    assert np.array_equal(out, L._krylov(M0, b, discount, x0, 1e-12, "test", not transposed))


def test_fixed_point_stops_on_nan():
    P_pi, r_pi = _chain(5, 30, 3)
    r_pi = r_pi.copy()
    r_pi[4] = np.nan
    x = np.zeros(30)
    assert not L.SparseChain(P_pi, sweeps()).fixed_point(r_pi, 0.9, x, 1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_first_sweep_from_zero_reads_no_p_and_changes_nothing(seed, monkeypatch):
    """Value iteration's warm start from 0: the compiled loop (whose first sweep is the
    reward's max) and the NumPy loop give the same policy, values and stop."""
    rows, R, mask = _model(seed, 500, 4, 6, masked_out=0.3 if seed % 2 else 0.0)
    compiled = D._warm_start(rows, R, mask, 0.95, 12, 1e-9)
    monkeypatch.setattr(D, "compiled_sweeps", lambda: None)
    numpy = D._warm_start(rows, R, mask, 0.95, 12, 1e-9)
    assert np.array_equal(compiled[0], numpy[0])
    assert np.array_equal(compiled[1], numpy[1])
    assert compiled[2] == numpy[2]


def _masked_model(seed, S, discount):
    mdp = random_sparse_mdp(np.random.default_rng(seed), S, 4, 10)
    mask = np.random.default_rng(seed + 1).random((S, 4)) >= 0.3
    mask[:, 0] = True
    return op.TabularMDP(mdp.P_rows, mdp.R, discount, action_mask=mask)


@pytest.mark.parametrize(
    "mdp",
    [
        random_sparse_mdp(np.random.default_rng(7), 3000, 4, 10).with_discount(0.99),
        random_sparse_mdp(np.random.default_rng(8), 20000, 3, 5).with_discount(0.95),
        _masked_model(9, 5000, 0.99),
    ],
    ids=["random-3000", "random-20000", "masked-5000"],
)
def test_solve_equals_the_numpy_passes(mdp, monkeypatch):
    """The whole fast solve with the compiled passes and with NumPy's (numba's kernels
    switched off: value iteration's warm start, the evaluations, the improvement steps and
    the occupancy all in NumPy): the same values, policy, q and occupancy, bit for bit (on
    random models, whose warm start is the same Jacobi value iteration either way)."""
    fast = op.DiscountedPlanning(mdp).solve(method="fast")
    monkeypatch.setattr(D, "compiled_sweeps", lambda: None)
    slow = op.DiscountedPlanning(mdp).solve(method="fast")
    for name in ("values", "policy", "q", "occupancy"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert fast.status == slow.status == "optimal"
    assert fast.message == slow.message
