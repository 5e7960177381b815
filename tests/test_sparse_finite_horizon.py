"""Sparse finite-horizon models: ``FiniteHorizonMDP`` with ``P`` a CSR matrix of shape
``(L·S·A, S)`` gives the same plans as the dense model, its paths never densify, model files
hold it compactly, and bad sparse input is refused where it enters with ``(l, s, a)`` named."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings

import optplan as op
from optplan import mdp as mdp_module
from optplan._checks import OptplanError, OptplanTypeError
from optplan.dp import backward_induction, evaluate_layered, forward_occupancy, layer_block
from optplan.problems.finite_horizon import FiniteHorizonPlanning
from optplan.verification.strategies import layered_mdps

TOL = 1e-10


def random_sparse_rows(rng, n_rows: int, S: int, k: int):
    """A CSR ``(n_rows, S)`` matrix with ``k`` distinct successors per row (Dirichlet
    probabilities), built from index arrays only."""
    k = min(k, S)
    keys = rng.random((n_rows, S)) if S * n_rows <= 4_000_000 else None
    if keys is not None:
        cols = np.argsort(keys, axis=1)[:, :k]
    else:  # large S: k draws with rejection of repeats is not needed for a test of planning
        cols = (rng.integers(0, S, n_rows)[:, None] + np.arange(k)[None, :] * 7919) % S
    vals = rng.dirichlet(np.ones(k), size=n_rows)
    indptr = np.arange(n_rows + 1) * k
    return sp.csr_matrix((vals.ravel(), cols.ravel(), indptr), shape=(n_rows, S))


def random_layered(seed: int, max_states: int = 30, masks: bool = True):
    """A random layered model, dense: a few successors per row, sometimes a mask, sometimes
    an explicit start distribution."""
    rng = np.random.default_rng(seed)
    L = int(rng.integers(1, 7))
    S = int(rng.integers(1, max_states))
    A = int(rng.integers(1, 5))
    k = int(rng.integers(1, S + 1))
    P = random_sparse_rows(rng, L * S * A, S, k).toarray().reshape(L, S, A, S)
    R = rng.normal(size=(L, S, A)) * rng.choice([1.0, 1e-3, 1e3])
    mask = None
    if masks and A > 1 and rng.random() < 0.6:
        mask = rng.random((L, S, A)) < 0.6
        mask[np.arange(L)[:, None], np.arange(S)[None, :], rng.integers(0, A, (L, S))] = True
        if rng.random() < 0.3:
            mask = mask[0]  # a 2-D mask for every layer
    initial = rng.dirichlet(np.ones(S)) if rng.random() < 0.5 else None
    return op.FiniteHorizonMDP(P, R, initial=initial, action_mask=mask)


def assert_same_plans(dense, sparse):
    """Values, q, policy (up to ties within TOL) and occupancy agree to TOL."""
    a = FiniteHorizonPlanning(dense).solve()
    b = FiniteHorizonPlanning(sparse).solve()
    assert a.status == b.status == "optimal"
    scale = max(1.0, float(np.abs(a.values).max()))
    assert abs(a.value - b.value) <= TOL * scale
    assert np.abs(a.values - b.values).max() <= TOL * scale
    fin = np.isfinite(a.q)
    assert np.array_equal(fin, np.isfinite(b.q))
    assert np.abs(a.q[fin] - b.q[fin]).max() <= TOL * scale
    same = a.policy == b.policy
    if not same.all():  # only where two actions tie to round-off
        L, S = a.policy.shape
        li, si = np.nonzero(~same)
        assert np.abs(a.q[li, si, a.policy[li, si]] - a.q[li, si, b.policy[li, si]]).max() <= (
            TOL * scale
        )
    else:
        assert np.abs(a.occupancy - b.occupancy).max() <= TOL
    # each policy evaluated in the other format: the same values
    assert (
        np.abs(
            evaluate_layered(dense.P, dense.R, b.policy)
            - evaluate_layered(sparse.P, sparse.R, b.policy)
        ).max()
        <= TOL * scale
    )
    assert (
        np.abs(
            forward_occupancy(dense.P, dense.initial, b.policy)
            - forward_occupancy(sparse.P, sparse.initial, b.policy)
        ).max()
        <= TOL
    )
    return a, b


# -- the model ------------------------------------------------------------------------------


def test_sparse_layered_model_interface():
    dense = random_layered(3)
    sparse = dense.to_sparse()
    L, S, A = dense.shape
    assert (dense.P_format, sparse.P_format) == ("dense", "csr")
    assert sparse.sparse and not dense.sparse
    assert sparse.P.shape == (L * S * A, S) and sparse.nnz == np.count_nonzero(dense.P)
    assert dense.nnz == dense.P.size
    assert np.array_equal(sparse.dense_P(), dense.P)
    assert np.array_equal(dense.P_rows, dense.P.reshape(L * S * A, S))
    assert sparse == dense and dense == sparse
    assert sparse.to_dense() == dense and dense.to_sparse() == sparse
    assert sparse.to_sparse() is sparse and dense.to_dense() is dense
    assert "sparse nnz" in repr(sparse) and "sparse" not in repr(dense)
    for l in range(L):
        block = sparse.layer_rows(l)
        assert np.array_equal(block.toarray(), dense.P[l].reshape(S * A, S))
        assert np.array_equal(dense.layer_rows(l), dense.P[l].reshape(S * A, S))
        # the block shares the model's arrays: no copy per layer
        assert np.shares_memory(block.data, sparse.P.data) or block.nnz == 0
        assert np.array_equal(layer_block(sparse.P, l, S, A).toarray(), block.toarray())
    with pytest.raises(OptplanError, match=rf"layer must lie in 0..{L - 1}, got {L}"):
        sparse.layer_rows(L)
    with pytest.raises(ValueError):
        sparse.P.data[0] = 2.0  # read-only


def test_a_different_sparse_model_is_not_equal():
    rng = np.random.default_rng(4)
    L, S, A = 2, 5, 2
    P = rng.dirichlet(np.ones(S), size=(L, S, A))
    R = rng.normal(size=(L, S, A))
    Q = P.copy()
    Q[-1, 0, 0] = np.roll(Q[-1, 0, 0], 1)
    dense = op.FiniteHorizonMDP(P, R)
    other = op.FiniteHorizonMDP(sp.csr_matrix(Q.reshape(-1, S)), R)
    assert other != dense.to_sparse() and other != dense and dense != other


def test_from_stationary_keeps_a_sparse_model_sparse():
    rng = np.random.default_rng(5)
    S, A, L = 12, 3, 4
    rows = random_sparse_rows(rng, S * A, S, 3)
    mask = rng.random((S, A)) < 0.7
    mask[:, 0] = True
    stat = op.TabularMDP(rows, rng.normal(size=(S, A)), action_mask=mask)
    fh = op.FiniteHorizonMDP.from_stationary(stat, L)
    assert fh.sparse and fh.nnz == L * stat.nnz and fh.shape == (L, S, A)
    assert fh == op.FiniteHorizonMDP.from_stationary(stat.to_dense(), L)
    for l in range(L):
        assert (fh.layer_rows(l) != stat.P).nnz == 0
    assert_same_plans(op.FiniteHorizonMDP.from_stationary(stat.to_dense(), L), fh)


def test_any_sparse_format_is_held_as_canonical_csr():
    dense = random_layered(6, masks=False)
    rows = dense.P_rows
    for fmt in (sp.coo_matrix, sp.csc_matrix, sp.lil_matrix, sp.csr_array):
        m = op.FiniteHorizonMDP(fmt(rows), dense.R, dense.initial)
        assert m.P_format == "csr" and m.P.has_canonical_format and m == dense


def test_normalize_rescales_sparse_layered_rows():
    dense = random_layered(7, masks=False)
    rows = dense.P_rows.astype(np.float32)
    with pytest.raises(OptplanError, match="normalize=True"):
        op.FiniteHorizonMDP(sp.csr_matrix(rows), dense.R)
    m = op.FiniteHorizonMDP(sp.csr_matrix(rows), dense.R, normalize=True)
    sums = np.asarray(m.P.sum(axis=1)).ravel()
    assert np.abs(sums - 1.0).max() <= 1e-12


def test_bad_sparse_layered_input_is_refused_naming_l_s_a():
    L, S, A = 3, 4, 2
    rng = np.random.default_rng(8)
    P = rng.dirichlet(np.ones(S), size=(L, S, A))
    R = np.zeros((L, S, A))
    row = (2 * S + 1) * A + 1  # (l, s, a) = (2, 1, 1)

    def with_row(values):
        Q = P.reshape(L * S * A, S).copy()
        Q[row] = values
        return sp.csr_matrix(Q)

    with pytest.raises(OptplanError, match=r"row P\[\(l, s, a\) = \(2, 1, 1\)\] .*sums to 1\.5"):
        op.FiniteHorizonMDP(with_row([0.5, 0.5, 0.5, 0.0]), R)
    with pytest.raises(
        OptplanError, match=r"negative entry -0\.5 at \(l, s, a\) = \(2, 1, 1\), s'=1"
    ):
        op.FiniteHorizonMDP(with_row([1.0, -0.5, 0.5, 0.0]), R)
    with pytest.raises(
        OptplanError, match=r"non-finite entry nan at \(l, s, a\) = \(2, 1, 1\), s'=2"
    ):
        op.FiniteHorizonMDP(with_row([0.5, 0.0, np.nan, 0.5]), R)
    good = sp.csr_matrix(P.reshape(L * S * A, S))
    with pytest.raises(OptplanError, match=r"expected \(L\*S\*A, S\) = \(24, 4\) .*\(3, 4, 2\)"):
        op.FiniteHorizonMDP(good[:-1], R)
    with pytest.raises(OptplanError, match=r"row l\*S\*A \+ s\*A \+ a holds P\[l, s, a, :\]"):
        op.FiniteHorizonMDP(good.T.tocsr(), R)
    with pytest.raises(OptplanTypeError, match="real numeric"):
        op.FiniteHorizonMDP(good.astype(complex), R)
    mask = np.ones((L, S, A), bool)
    mask[1, 3] = False
    with pytest.raises(OptplanError, match=r"leaves state \(1, 3\) with no action"):
        op.FiniteHorizonMDP(good, R, action_mask=mask)
    # a masked-out row may be empty or off; an admissible one may not
    mask = np.ones((L, S, A), bool)
    mask[2, 1, 1] = False
    m = op.FiniteHorizonMDP(with_row([0.0, 0.0, 0.0, 0.0]), R, action_mask=mask)
    assert m.nnz == L * S * A * S - S
    assert np.isneginf(FiniteHorizonPlanning(m).solve().q[2, 1, 1])


def test_dense_copy_is_refused_above_the_limit_and_the_paths_do_not_ask(monkeypatch):
    sparse = random_layered(9, masks=True).to_sparse()
    L, S, A = sparse.shape
    nbytes = L * S * A * S * 8
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", nbytes - 1)
    with pytest.raises(OptplanError, match=rf"L={L}, S={S}, A={A}\) would take {nbytes:,} bytes"):
        sparse.dense_P()
    with pytest.raises(OptplanError, match="would take"):
        sparse.to_dense()
    from optplan.envs import TabularEnv

    with pytest.raises(OptplanError, match="would take"):
        TabularEnv(sparse)  # the environment samples from dense rows
    problem = FiniteHorizonPlanning(sparse)
    assert problem.solve().status == "optimal"
    assert problem.solve(method="conic").status == "optimal"
    from optplan.experiments import metrics

    policy = problem.solve().policy
    layer = metrics.oracle_layer_rewards(sparse, policy)
    assert abs(layer.sum() - problem.solve().value) <= 1e-10 * max(1.0, abs(layer.sum()))


# -- planning: dense = sparse ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_dense_and_sparse_layered_models_agree(seed):
    dense = random_layered(seed)
    assert_same_plans(dense, dense.to_sparse())


@settings(max_examples=80, deadline=None)
@given(layered_mdps(masks=True))
def test_dense_and_sparse_agree_on_the_suite_cases(d):
    dense = op.FiniteHorizonMDP(d["P"], d["R"], action_mask=d.get("action_mask"))
    assert_same_plans(dense, dense.to_sparse())


def test_edge_cases_agree():
    # one layer, one state, one action; deterministic rows; identical actions (ties)
    cases = [
        op.FiniteHorizonMDP(np.ones((1, 1, 1, 1)), np.array([[[2.5]]])),
        op.FiniteHorizonMDP(np.ones((5, 1, 3, 1)), np.arange(15.0).reshape(5, 1, 3)),
    ]
    L, S, A = 4, 6, 3
    det = np.zeros((L, S, A, S))
    det[..., 0] = 1.0
    cases.append(op.FiniteHorizonMDP(det, np.ones((L, S, A))))  # every action ties
    nxt = np.zeros((L, S, A, S))
    nxt[:, np.arange(S), :, (np.arange(S) + 1) % S] = 1.0
    cases.append(op.FiniteHorizonMDP(nxt, np.random.default_rng(0).normal(size=(L, S, A))))
    for dense in cases:
        a, b = assert_same_plans(dense, dense.to_sparse())
        c = FiniteHorizonPlanning(dense.to_sparse()).solve(method="conic")
        assert c.success and abs(c.value - a.value) <= 1e-6 * max(1.0, abs(a.value))


def test_dp_functions_take_the_row_matrix_dense_or_sparse():
    dense = random_layered(11)
    L, S, A = dense.shape
    Qd, Vd = backward_induction(dense.P, dense.R, dense.action_mask)
    for P in (dense.P_rows, dense.to_sparse().P):
        Q, V = backward_induction(P, dense.R, dense.action_mask)
        fin = np.isfinite(Qd)
        assert np.abs(Q[fin] - Qd[fin]).max() <= TOL * max(1.0, np.abs(Vd).max())
        pol = Qd.argmax(axis=-1)
        assert np.abs(
            evaluate_layered(P, dense.R, pol) - evaluate_layered(dense.P, dense.R, pol)
        ).max() <= TOL * max(1.0, np.abs(Vd).max())
        occ = forward_occupancy(P, dense.initial, pol)
        assert np.abs(occ - forward_occupancy(dense.P, dense.initial, pol)).max() <= TOL
        assert np.abs(occ.sum(axis=(1, 2)) - 1.0).max() <= 1e-12


# -- the conic path -------------------------------------------------------------------------


def test_sparse_lp_has_the_same_constraint_matrix():
    from optplan.conic import finite_horizon as conic_fh

    dense = random_layered(12)
    a = conic_fh.formulate(FiniteHorizonPlanning(dense))
    b = conic_fh.formulate(FiniteHorizonPlanning(dense.to_sparse()))
    data_a = a.get_problem_data("CLARABEL")[0]
    data_b = b.get_problem_data("CLARABEL")[0]
    assert (abs(data_a["A"] - data_b["A"]) > 1e-15).nnz == 0
    assert np.array_equal(data_a["b"], data_b["b"]) and np.array_equal(data_a["c"], data_b["c"])


@pytest.mark.parametrize("seed", range(12))
def test_cross_check_on_sparse_layered_models(seed):
    sparse = random_layered(100 + seed).to_sparse()
    check = op.cross_check(FiniteHorizonPlanning(sparse))
    assert check.agree, check.message
    assert check.fast.policy.shape == sparse.shape[:2]


def large_sparse_layered(S: int, L: int, A: int, k: int, seed: int, local: bool = False):
    """A large sparse layered model with ``k`` successors per row: anywhere, or (``local``)
    within 8 states of the row's own (a banded LP: a direct factorization stays sparse)."""
    rng = np.random.default_rng(seed)
    if local:
        own = np.repeat(np.tile(np.arange(S), L), A)[:, None]
        cols = (own + rng.choice(np.arange(-8, 9), size=(own.size, k))) % S
        vals = rng.dirichlet(np.ones(k), size=own.size)
        rows = sp.csr_matrix(
            (vals.ravel(), cols.ravel(), np.arange(own.size + 1) * k), shape=(L * S * A, S)
        )  # repeated successors are summed
    else:
        rows = random_sparse_rows(rng, L * S * A, S, k)
    mask = rng.random((L, S, A)) < 0.8
    mask[:, :, 0] = True
    return op.FiniteHorizonMDP(rows, rng.normal(size=(L, S, A)), action_mask=mask)


def test_large_sparse_model_plans_without_a_dense_copy(monkeypatch):
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", 8)  # any dense copy is refused
    m = large_sparse_layered(20_000, 5, 3, 4, seed=1)
    res = FiniteHorizonPlanning(m).solve()
    assert res.status == "optimal" and res.values.shape == (5, 20_000)
    V = evaluate_layered(m.P, m.R, res.policy)
    assert np.abs(V - res.values).max() <= 1e-10 * max(1.0, np.abs(V).max())
    assert np.abs(res.occupancy.sum(axis=(1, 2)) - 1.0).max() <= 1e-12


@pytest.mark.slow
def test_cross_check_on_a_sparse_layered_model_of_ten_thousand_states():
    m = large_sparse_layered(10_000, 3, 3, 4, seed=2, local=True)
    check = op.cross_check(FiniteHorizonPlanning(m))
    assert check.agree, check.message


# -- model files ----------------------------------------------------------------------------


def test_model_file_round_trip_keeps_a_sparse_layered_model(tmp_path):
    sparse = random_layered(13).to_sparse()
    path = op.save_model(sparse, tmp_path / "m.toml")
    text = path.read_text()
    assert "P_csr" in text and "\nP = " not in text
    back = op.load_model(path)
    assert back.sparse and back == sparse and back.criterion == "finite_horizon"


def test_model_file_checks_a_layered_p_csr(tmp_path):
    sparse = random_layered(14, masks=False).to_sparse()
    L, S, A = sparse.shape
    path = op.save_model(sparse, tmp_path / "m.toml")
    text = re.sub(r"(indptr = \[\s*)0, ", r"\1", path.read_text(), count=1)  # drop indptr[0]
    assert text != path.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(OptplanError, match=rf"P_csr.indptr.*L\*S\*A \+ 1 = {L * S * A + 1}"):
        op.load_model(bad)


# -- environments and metrics ---------------------------------------------------------------


def test_environment_and_oracle_of_a_sparse_layered_model_match_the_dense_ones():
    from optplan.envs import TabularEnv
    from optplan.experiments import metrics

    dense = random_layered(21, masks=False)
    sparse = dense.to_sparse()
    runs = []
    for model in (dense, sparse):
        env = TabularEnv(model)
        obs, _ = env.reset(seed=3)
        trace = [obs]
        for _ in range(30):
            obs, reward, term, trunc, _ = env.step(0)
            trace.append((obs, reward, term, trunc))
            if term or trunc:
                trace.append(env.reset()[0])
        runs.append(trace)
    assert runs[0] == runs[1]
    policy = FiniteHorizonPlanning(dense).solve().policy
    a = metrics.oracle_layer_rewards(dense, policy)
    b = metrics.oracle_layer_rewards(sparse, policy)
    assert np.abs(a - b).max() <= 1e-12 * max(1.0, np.abs(a).max())
