"""OptimisticPlanning on a sparse ``p_hat`` (CSR, rows ``s·A + a``): the same problem dense and
sparse gives the same policy, values, gain / bias, action values and optimistic kernel; the
conic path (which densifies under a size cap) agrees with the sparse fast path; bad sparse
input is refused where it enters, naming ``(s, a)`` and the value; and a model far too large
to hold dense is solved without a dense ``S x S`` array."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from test_optimistic_edges import several_classes

import optplan as op
from optplan._checks import OptplanError, OptplanTypeError
from optplan.fast.optimistic import _SparseBallRows, ball_rows, optimistic_backup, span_residual
from optplan.problems.optimistic import DENSE_P_HAT_MAX_ENTRIES
from optplan.result import MULTICHAIN, OPTIMAL

RADII = ("zero", "small", "mixed", "large")


def sparse_rows(rng, S: int, A: int, k: int, wide: float = 0.0, mask=None) -> sp.csr_matrix:
    """``(S·A, S)`` rows of 1..k successors (a share ``wide`` of rows with every state as a
    successor); rows of masked-out pairs all zero."""
    n = S * A
    count = rng.integers(1, min(k, S) + 1, n)
    count[rng.random(n) < wide] = S
    if mask is not None:
        count[~mask.reshape(-1)] = 0
    row = np.repeat(np.arange(n), count)
    # distinct successors per row: the first `count` of a random permutation (test data)
    col = np.concatenate([rng.permutation(S)[:c] for c in count])
    val = np.concatenate([rng.dirichlet(np.full(c, 0.7)) for c in count])
    return sp.csr_matrix((val, (row, col)), shape=(n, S))


def pair(seed: int, ball: str, criterion: str, S: int | None = None):
    """The same random problem with a sparse and a dense ``p_hat``: supports of 1..k states,
    masks, radius-0 pairs, radii up to 20, reward radii; full-support rows for the L1 ball."""
    rng = np.random.default_rng(seed)
    S = int(rng.integers(1, 40)) if S is None else S
    A = int(rng.integers(1, 4))
    mask = None
    if A > 1 and rng.random() < 0.5:
        mask = rng.random((S, A)) < 0.7
        mask[np.arange(S), rng.integers(0, A, S)] = True
    P = sparse_rows(rng, S, A, int(rng.integers(1, 7)), 0.1 * (ball == "l1"), mask)
    radius = {
        "zero": np.zeros((S, A)),
        "small": rng.uniform(0, 0.05, (S, A)),
        "mixed": rng.choice([0.0, 1e-3, 0.1, 0.5, 2.0, 10.0], size=(S, A)),
        "large": rng.uniform(1.0, 20.0, (S, A)),
    }[RADII[seed % 4]]
    kw = dict(
        r_hat=rng.random((S, A)),
        radius=radius,
        reward_radius=rng.uniform(0, 0.1, (S, A)) * (rng.random() < 0.7),
        ball=ball,
        criterion=criterion,
        discount=float(rng.choice([0.5, 0.9, 0.99])) if criterion == "discounted" else None,
        action_mask=mask,
    )
    sparse = op.OptimisticPlanning(p_hat=P, **kw)
    dense = op.OptimisticPlanning(p_hat=P.toarray().reshape(S, A, S), **kw)
    return sparse, dense


def assert_same(sparse, dense, tol=1e-10):
    """Dense and sparse answers of the fast path: equal status and policy, and values, gain,
    bias, q and kernel within ``tol`` (relative to ``1 + max |V|``)."""
    assert sparse.communication() == dense.communication()
    a, b = dense.solve(), sparse.solve()
    assert a.status == b.status, (a.status, a.message, b.status, b.message)
    if a.status == MULTICHAIN:
        return a.status
    assert a.status == OPTIMAL, a.message
    assert a.message == b.message
    np.testing.assert_array_equal(a.policy, b.policy)
    scale = 1.0 + float(np.abs(a.values).max())
    assert abs(a.value - b.value) <= tol * scale
    assert np.abs(a.values - b.values).max() <= tol * scale
    if dense.criterion == "average":
        assert abs(a.gain - b.gain) <= tol * scale
        assert np.abs(a.bias - b.bias).max() <= tol * scale
    finite = np.isfinite(a.q)
    np.testing.assert_array_equal(finite, np.isfinite(b.q))
    assert np.abs(a.q[finite] - b.q[finite]).max() <= tol * scale
    K = b.info["kernel"]
    S, A = dense.n_states, dense.n_actions
    assert sp.issparse(K) and K.format == "csr" and K.shape == (S * A, S)
    assert np.abs(K.toarray() - a.info["kernel"].reshape(S * A, S)).max() <= tol
    return a.status


@pytest.mark.parametrize("criterion", ["discounted", "average"])
@pytest.mark.parametrize("ball", ["l1", "kl"])
def test_dense_and_sparse_agree(ball, criterion):
    """150 random problems per ball and criterion, S up to 40."""
    statuses = [assert_same(*pair(seed, ball, criterion)) for seed in range(150)]
    assert statuses.count(OPTIMAL) >= 140


@pytest.mark.parametrize("criterion", ["discounted", "average"])
@pytest.mark.parametrize("ball", ["l1", "kl"])
def test_dense_and_sparse_agree_above_the_direct_evaluation(ball, criterion):
    """S = 130: the exact finish evaluates the sparse chain sparse (above
    ``SPARSE_DIRECT_MAX_STATES``), the dense one dense; support classes from csgraph."""
    for seed in range(2):
        assert_same(*pair(1000 + seed, ball, criterion, S=130))


def sparse_copy(prob):
    S, A = prob.n_states, prob.n_actions
    return replace(prob, p_hat=sp.csr_matrix(prob.p_hat.reshape(S * A, S)))


@pytest.mark.parametrize("ball", ["l1", "kl"])
def test_not_weakly_communicating_models_agree(ball):
    """Closed classes of ``p_hat`` that the balls can leave (a constant optimistic gain:
    solved) and a class of known transitions that keeps a higher gain (``multichain``): the
    same verdicts, messages and answers dense and sparse."""
    seen = set()
    for seed in range(6):
        prob = several_classes(seed, 1 + seed % 3, 1 + seed % 3, 1 + seed % 2, ball, 1.0)
        seen.add(assert_same(sparse_copy(prob), prob))
        radius, r_hat = np.array(prob.radius), np.array(prob.r_hat)
        size = 1 + seed % 3
        radius[:size], r_hat[:size], r_hat[-1] = 0.0, 0.9, 0.0
        refused = replace(prob, radius=radius, r_hat=r_hat)
        seen.add(assert_same(sparse_copy(refused), refused))
    assert seen == {OPTIMAL, MULTICHAIN}


def test_trailing_empty_rows_of_masked_pairs_are_accepted():
    """The last pairs masked out with no entries at all (their rows end the CSR matrix)."""
    P = np.zeros((3, 2, 3))
    P[:, 0, 1] = 1.0
    P[0, 1, 2] = 1.0
    mask = np.array([[True, True], [True, False], [True, False]])
    rows = sp.csr_matrix(P.reshape(6, 3))
    prob = op.OptimisticPlanning(
        p_hat=rows, r_hat=np.ones((3, 2)), radius=0.2, discount=0.9, action_mask=mask
    )
    assert prob.solve().status == OPTIMAL
    assert op.TabularMDP(rows, np.ones((3, 2)), discount=0.9, action_mask=mask).sparse


def test_ball_rows_are_grouped_by_support_size():
    """A few full-support rows do not widen the compact rows of a few successors: they get a
    dense block of their own."""
    sparse, _ = pair(3, "l1", "discounted", S=60)
    rows = ball_rows(sparse)
    assert isinstance(rows, _SparseBallRows)
    widths = sorted(b.k for b in rows.blocks)
    compact = [b for b in rows.blocks if b.cols is not None]
    assert widths[-1] == 60 and compact and max(b.k for b in compact) <= 6
    assert sum(b.ids.size for b in rows.blocks) == rows.rows.size


@pytest.mark.parametrize("ball", ["l1", "kl"])
def test_backup_and_span_certificate_agree(ball):
    """The batched backup (values, CSR kernel, statuses) and the span certificate at a random
    ``v`` with ties, on and off the supports."""
    for seed in range(10):
        sparse, dense = pair(200 + seed, ball, "average", S=25)
        rng = np.random.default_rng(seed)
        v = np.round(rng.normal(size=25) * 3) if seed % 2 else rng.normal(size=25)
        sa, ka, sta = optimistic_backup(dense, v)
        sb, kb, stb = optimistic_backup(sparse, v)
        np.testing.assert_allclose(sb, sa, rtol=0, atol=1e-12)
        np.testing.assert_allclose(kb.toarray(), ka.reshape(-1, 25), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(stb, sta)
        np.testing.assert_allclose(np.asarray(kb @ v).reshape(sb.shape), sb, atol=1e-12)
        assert abs(span_residual(sparse, v) - span_residual(dense, v)) <= 1e-12 * 10


@pytest.mark.parametrize("criterion", ["discounted", "average"])
@pytest.mark.parametrize("ball", ["l1", "kl"])
def test_cross_check_on_sparse_problems(ball, criterion):
    """The conic path densifies a sparse ``p_hat`` and agrees with the sparse fast path."""
    agreed = 0
    for seed in range(4):
        sparse, _ = pair(300 + seed, ball, criterion, S=int(3 + 2 * seed))
        chk = op.cross_check(sparse)
        if chk.fast.status == MULTICHAIN:
            assert chk.conic.status == MULTICHAIN
            continue
        assert chk.fast.status == OPTIMAL, chk.fast.message
        if chk.conic.status == OPTIMAL:
            assert chk.agree, chk.message
            assert "kernel" in chk.abs_err or "value" in chk.abs_err
            agreed += 1
    assert agreed >= 2


def test_radius_zero_is_known_model_planning():
    """Every radius 0: the sparse problem is known-model planning on the same sparse model."""
    rng = np.random.default_rng(5)
    S, A = 30, 3
    P = sparse_rows(rng, S, A, 4)
    R = rng.random((S, A))
    mdp = op.TabularMDP(P, R, discount=0.9)
    res = op.OptimisticPlanning(p_hat=P, r_hat=R, radius=0.0, discount=0.9).solve()
    known = op.solve_discounted(mdp)
    np.testing.assert_allclose(res.values, known.values, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(res.policy, known.policy)
    assert (res.info["kernel"] != P).nnz == 0


def test_masked_rows_may_be_empty_and_policy_values_work():
    """Rows of masked-out pairs may be all zero (as dense); restricting the mask (the policy's
    own optimistic value) keeps the validated matrix."""
    sparse, dense = pair(11, "kl", "discounted", S=20)
    assert sparse.action_mask is not None
    res = sparse.solve()
    own = sparse.policy_values(res.policy)
    assert own.status == OPTIMAL and abs(own.value - res.value) <= 1e-10
    assert replace(sparse, action_mask=dense.action_mask).p_hat is sparse.p_hat


def test_sparse_communication_matches_dense():
    """Closed classes and the peeling on the support graph: the messages of a dense model that
    is not weakly communicating, the same on its sparse copy."""
    P = np.zeros((3, 2, 3))
    P[0, :, 0] = P[1, :, 1] = 1.0
    P[2, :, 0] = 1.0
    R = np.arange(6.0).reshape(3, 2)
    rows = sp.csr_matrix(P.reshape(6, 3))
    d = np.zeros((3, 2))
    d[0] = 0.1
    for radius in (0.0, d, d * 20, 0.1):
        for ball in ("l1", "kl"):
            kw = dict(r_hat=R, radius=radius, ball=ball, criterion="average")
            dense = op.OptimisticPlanning(p_hat=P, **kw).communication()
            assert op.OptimisticPlanning(p_hat=rows, **kw).communication() == dense
    assert (
        "2 closed classes"
        in op.OptimisticPlanning(
            p_hat=rows, r_hat=R, radius=0.0, criterion="average"
        ).communication()
    )


def good_inputs(S=3, A=2):
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(S), size=S * A)
    return P, dict(r_hat=rng.random((S, A)), radius=0.1, discount=0.9)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda P: P.__setitem__((3, 1), P[3, 1] + 0.1), r"row p_hat\[\(s, a\) = \(1, 1\)\]"),
        (lambda P: P.__setitem__((3, 1), np.nan), r"p_hat has a non-finite entry nan at \(s, a\)"),
        (
            lambda P: (P.__setitem__((5, 0), -0.25), P.__setitem__((5, 2), P[5, 2] + 0.25)),
            r"p_hat has a negative entry -0\.25 at \(s, a\) = \(2, 1\), s'=0",
        ),
    ],
)
def test_bad_sparse_entries_name_the_pair(edit, match):
    P, kw = good_inputs()
    edit(P)
    with pytest.raises(OptplanError, match=match):
        op.OptimisticPlanning(p_hat=sp.csr_matrix(P), **kw)


def test_bad_sparse_shape_and_type():
    P, kw = good_inputs()
    with pytest.raises(OptplanError, match=r"p_hat \(sparse\) has shape \(6, 2\).*r_hat"):
        op.OptimisticPlanning(p_hat=sp.csr_matrix(P[:, :2]), **kw)
    with pytest.raises(OptplanTypeError, match="p_hat must be a real numeric sparse matrix"):
        op.OptimisticPlanning(p_hat=sp.csr_matrix(P.astype(complex)), **kw)
    with pytest.raises(OptplanError, match="r_hat needs at least one state"):
        op.OptimisticPlanning(
            p_hat=sp.csr_matrix((0, 0)), r_hat=np.zeros((0, 2)), radius=0.0, discount=0.9
        )
    # a row off by round-off only: no normalize hint (the problem has no such option)
    P2 = P.copy()
    P2[0] *= 1 + 1e-8
    with pytest.raises(OptplanError, match="sums to") as info:
        op.OptimisticPlanning(p_hat=sp.csr_matrix(P2), **kw)
    assert "normalize" not in str(info.value)
    # other formats are taken (held as canonical CSR), the caller's matrix is copied
    coo = sp.coo_matrix(P)
    prob = op.OptimisticPlanning(p_hat=coo, **kw)
    assert prob.p_hat.format == "csr" and prob.sparse
    coo.data[:] = 5.0
    assert prob.p_hat.max() < 1.0


def test_conic_path_refuses_a_sparse_p_hat_above_the_dense_cap():
    rng = np.random.default_rng(1)
    S, A = 2_000, 2
    assert S * A * S > DENSE_P_HAT_MAX_ENTRIES
    prob = op.OptimisticPlanning(
        p_hat=sparse_rows(rng, S, A, 3), r_hat=rng.random((S, A)), radius=0.1, discount=0.9
    )
    with pytest.raises(OptplanError, match=r"S\*A\*S = 8,000,000 entries.*method='fast'"):
        prob.solve(method="conic")
    assert prob.solve().status == OPTIMAL


def large(S: int, ball: str, criterion: str, seed: int = 0):
    """``S`` states, 2 actions, 4 successors per pair: a dense ``p_hat`` would take ``16
    S^2`` bytes (6.4 GB at S = 20,000)."""
    rng = np.random.default_rng(seed)
    n, k = 2 * S, 4
    cols = rng.integers(0, S, (n, k))
    vals = rng.dirichlet(np.ones(k), n)
    P = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, S))
    return op.OptimisticPlanning(
        p_hat=P,
        r_hat=rng.random((S, 2)),
        radius=rng.choice([0.0, 0.05, 0.5], (S, 2)),
        ball=ball,
        criterion=criterion,
        discount=0.95 if criterion == "discounted" else None,
    )


def solve_traced(prob):
    """The fast path's answer and its peak of traced (numpy) allocations, in bytes."""
    tracemalloc.start()
    try:
        res = prob.solve()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return res, peak


def test_large_sparse_problem_is_never_densified():
    """S = 20,000 (a dense p_hat: 6.4 GB; one dense S x S chain: 3.2 GB): solved with a
    peak below 200 MB."""
    res, peak = solve_traced(large(20_000, "kl", "discounted"))
    assert res.status == OPTIMAL, res.message
    assert sp.issparse(res.info["kernel"])
    assert peak < 200 * 2**20, peak


@pytest.mark.slow
@pytest.mark.parametrize("criterion", ["discounted", "average"])
@pytest.mark.parametrize("ball", ["l1", "kl"])
def test_hundred_thousand_states(ball, criterion):
    """S = 100,000 (a dense p_hat: 160 GB): both balls, both criteria, below 1 GB of traced
    allocations, and the answer's Bellman residual at the fixed point."""
    prob = large(100_000, ball, criterion)
    res, peak = solve_traced(prob)
    assert res.status == OPTIMAL, res.message
    assert peak < 2**30, peak
    if criterion == "average":
        assert span_residual(prob, res.bias) <= 1e-6 * (1 + np.abs(prob.r_hat).max())
    else:
        sigma, _, _ = optimistic_backup(prob, res.values)
        T = (prob.r_hat + prob.reward_radius + prob.discount * sigma).max(axis=1)
        assert np.abs(T - res.values).max() <= 1e-9 * (1 + np.abs(res.values).max())
