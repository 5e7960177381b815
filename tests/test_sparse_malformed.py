"""Malformed sparse input cannot crash the interpreter: every constructor that takes a sparse
``P`` validates its index arrays before any work, and either refuses it with an
``OptplanError`` naming ``P``, the row and the value, or (when the arrays still describe a
valid model) solves it as the dense model it describes.

The property runs in a subprocess, so that a segmentation fault fails the test instead of
ending the test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import optplan as op
from optplan._checks import OptplanError

PROPERTY = r"""
import json, sys
import numpy as np, scipy.sparse as sp
from hypothesis import HealthCheck, given, settings, strategies as st
import optplan as op
from optplan._checks import OptplanError

counts = {"refused": 0, "solved": 0}


def valid_rows(rng, n_rows, S):
    P = rng.dirichlet(np.ones(S), size=n_rows)
    P[rng.random(P.shape) < 0.4] = 0.0
    P[np.arange(n_rows), rng.integers(0, S, n_rows)] += 0.1
    return P / P.sum(axis=1, keepdims=True)


@st.composite
def cases(draw):
    S, A = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    L = draw(st.sampled_from([None, 2]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = valid_rows(rng, S * A * (L or 1), S)
    fmt = draw(st.sampled_from(["csr", "csc", "coo"]))
    P = sp.csr_matrix(dense).asformat(fmt)
    kind = draw(st.sampled_from(["index", "indptr", "short", "none"]))
    big = draw(st.sampled_from([-1, S, S + 1, 10**6, -(10**9), 2**31 - 1]))
    at = draw(st.integers(0, 10**6))
    if kind == "index":
        arr = P.col if fmt == "coo" else P.indices
        if arr.size:
            arr[at % arr.size] = big
    elif kind == "indptr" and fmt != "coo":
        ip = P.indptr.copy()
        ip[at % ip.size] = big
        P.indptr = ip
    elif kind == "short":
        if fmt == "coo":
            P.row = P.row[:-1]
        else:
            P.indices = P.indices[: max(P.indices.size - 1, 0)]
    R = rng.normal(size=(L, S, A) if L else (S, A))
    return P, R, L, S, A


@settings(max_examples=int(sys.argv[1]), derandomize=True, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def check(case):
    P, R, L, S, A = case
    try:
        if L is None:
            mdp = op.TabularMDP(P, R, discount=0.9)
        else:
            mdp = op.FiniteHorizonMDP(P, R)
    except OptplanError as err:
        assert "P" in str(err), str(err)
        counts["refused"] += 1
        return
    # accepted: the arrays describe a valid model; solve it both ways
    dense = np.asarray(mdp.dense_P())
    if L is None:
        fast = op.solve_discounted(mdp)
        ref = op.solve_discounted(op.TabularMDP(dense, R, discount=0.9))
        np.testing.assert_allclose(fast.values, ref.values, rtol=1e-8, atol=1e-8)
        avg = op.solve_average_reward(mdp)
        assert avg.status in ("optimal", "multichain"), avg.status
    else:
        fast = op.solve_finite_horizon(mdp)
        ref = op.solve_finite_horizon(op.FiniteHorizonMDP(dense, R))
        np.testing.assert_allclose(fast.values, ref.values, rtol=1e-10, atol=1e-10)
    counts["solved"] += 1


check()
print(json.dumps(counts))
"""


@pytest.mark.slow
def test_malformed_sparse_input_never_crashes():
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROPERTY), "2000"],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["refused"] + got["solved"] == 2000
    assert got["refused"] > 500 and got["solved"] > 200, got


def _csr(indices, indptr, n=6, S=3, data=None):
    data = np.ones(len(indices)) if data is None else data
    P = sp.csr_matrix((np.ones(n), np.arange(n) % S, np.arange(n + 1)), shape=(n, S))
    P.data, P.indices, P.indptr = np.asarray(data, float), np.asarray(indices), np.asarray(indptr)
    return P


@pytest.mark.parametrize(
    ("indices", "indptr", "match"),
    [
        ([0, 10**6, 1, 2, 0, 1], np.arange(7), r"column index 1000000 at row 1 = \(s, a\)"),
        ([0, 5, 1, 2, 0, 1], np.arange(7), r"column index 5 at row 1 .*outside \[0, 3\)"),
        ([0, -1, 1, 2, 0, 1], np.arange(7), r"column index -1"),
        ([0, 1, 1, 2, 0, 1], [0, 2, 1, 3, 4, 5, 6], r"indptr that does not rise"),
        ([0, 1, 1, 2, 0, 1], [0, 1, 2, 3, 4, 5], r"indptr of length 6, expected 7"),
        ([0, 1, 1], np.arange(7), r"indptr\[-1\] = 6 entries but 3 indices"),
    ],
)
def test_each_malformed_array_is_refused_naming_it(indices, indptr, match):
    P = _csr(indices, indptr, data=np.ones(6))
    with pytest.raises(OptplanError, match=match):
        op.TabularMDP(P, np.arange(6.0).reshape(3, 2), discount=0.9)


def test_a_layered_model_names_the_layer():
    P = sp.csr_matrix(np.full((12, 3), 1 / 3))
    P.indices = P.indices.copy()
    P.indices[7 * 3] = 7
    with pytest.raises(OptplanError, match=r"column index 7 at row 7 = \(l, s, a\) = \(1, 0, 1\)"):
        op.FiniteHorizonMDP(P, np.zeros((2, 3, 2)))


def test_a_valid_sparse_model_still_solves():
    P = sp.csr_matrix(np.full((6, 3), 1 / 3))
    R = np.arange(6.0).reshape(3, 2)
    res = op.solve_discounted(op.TabularMDP(P, R, discount=0.9))
    assert res.status == "optimal"
    # uniform transitions: V = max R + 0.9 mean V, so every V(s) - max_a R(s, a) is the same
    np.testing.assert_allclose(res.values - R.max(axis=1), 0.9 * res.values.mean(), rtol=1e-10)


def test_optimistic_planning_refuses_a_malformed_p_hat():
    P = sp.csr_matrix(np.full((6, 3), 1 / 3))
    P.indices = P.indices.copy()
    P.indices[4] = 99
    with pytest.raises(OptplanError, match=r"p_hat \(sparse csr\) has column index 99 at row 1"):
        op.OptimisticPlanning(p_hat=P, r_hat=np.zeros((3, 2)), radius=0.1)
