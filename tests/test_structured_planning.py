"""The discounted solve on slowly mixing models (a slippery gridworld, a birth-death queue, a
long chain): modified policy iteration in flow order, the banded evaluation, and the probe
that sends a model there, each checked against Howard's policy iteration with exact (dense
LU) evaluations, on the families and with random action masks and discounts up to 0.999."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.bench.models import chain_mdp, gridworld_mdp, queue_mdp, random_sparse_mdp
from optplan.dp import _flow as F
from optplan.dp import _linear as L
from optplan.dp import discounted as D
from optplan.dp._sweeps import sweeps

pytestmark = pytest.mark.skipif(sweeps() is None, reason="needs numba (optplan[jit])")


def _exact(mdp, mask=None):
    """Howard's policy iteration with dense LU evaluations on the densified model."""
    mask = mdp.action_mask if mask is None else mask
    dense = op.TabularMDP(mdp.dense_P(), mdp.R, mdp.discount, action_mask=mask)
    return op.DiscountedPlanning(dense).solve(method="fast", evaluation="direct")


def _family(name: str, size: int):
    if name == "grid":
        return gridworld_mdp(size)
    if name == "queue":
        return queue_mdp(size)
    if name == "chain":
        return chain_mdp(size)
    return random_sparse_mdp(np.random.default_rng(size), size, 3)


def _check(mdp, discount, mask, tol=1e-10):
    """The iterative sparse solve against the exact one: within its certificate, and its
    policy's own values too."""
    model = op.TabularMDP(mdp.P_rows, mdp.R, discount, action_mask=mask)
    out = D.discounted_policy_iteration(model.P_rows, model.R, mask, discount, tol=tol,
                                        evaluation="iterative")  # fmt: skip
    assert out.status == "optimal", out.message
    exact = _exact(model, mask)
    scale = max(1.0, np.abs(exact.values).max())
    assert out.bound <= tol * scale
    assert np.abs(out.values - exact.values).max() <= out.bound + 1e-12 * scale
    assert mask[np.arange(model.n_states), out.policy].all()
    own = L.evaluate_discounted(*op.dp.policy_model(model.dense_P(), model.R, out.policy),
                                discount)  # fmt: skip
    assert np.abs(own - exact.values).max() <= 2 * out.bound + 1e-11 * scale
    return out


@settings(max_examples=40, deadline=None)
@given(
    family=st.sampled_from(["grid", "queue", "chain", "random"]),
    size=st.integers(2, 12),
    discount=st.sampled_from([0.5, 0.9, 0.99, 0.999]),
    seed=st.integers(0, 2**16),
    masked=st.booleans(),
)
def test_every_route_gives_the_exact_values(family, size, discount, seed, masked):
    mdp = _family(family, size if family == "grid" else 12 * size)
    S, A = mdp.n_states, mdp.n_actions
    mask = np.ones((S, A), dtype=bool)
    if masked:  # each state keeps a random non-empty set of actions
        rng = np.random.default_rng(seed)
        mask = rng.random((S, A)) < 0.6
        mask[np.arange(S), rng.integers(0, A, S)] = True
    _check(mdp, discount, mask)


@pytest.mark.parametrize(
    ("family", "size"), [("grid", 20), ("queue", 300), ("chain", 300), ("grid", 40)]
)
@pytest.mark.parametrize("discount", [0.99, 0.999])
def test_structured_models_take_the_flow_iteration(family, size, discount):
    mdp = _family(family, size)
    # at 1e-8 (at 1e-10 and discount 0.999 the target nears round-off: a hand-over to
    # policy iteration, which the property test covers)
    out = _check(mdp, discount, mdp.action_mask, tol=1e-8)
    assert out.message.startswith("modified policy iteration (Gauss-Seidel, flow order)")


def test_the_probe_tells_slow_mixing_from_random():
    assert F._structured(queue_mdp(500).P_rows, 3)
    assert F._structured(chain_mdp(500).P_rows, 2)
    assert F._structured(gridworld_mdp(40).P_rows, 4)  # 78 levels from the corner
    assert not F._structured(random_sparse_mdp(np.random.default_rng(0), 20_000, 4).P_rows, 4)


@pytest.mark.parametrize("transposed", [False, True])
def test_banded_solve_equals_the_dense_solve(transposed):
    mdp = queue_mdp(40)
    P_pi, r_pi = op.dp.policy_model(mdp.P_rows, mdp.R, np.arange(40) % 3)
    b = r_pi if not transposed else np.full(40, 1 / 40)
    x = L._banded_solve((P_pi.indptr, P_pi.indices, P_pi.data), b, 0.999, transposed)
    M = P_pi.toarray().T if transposed else P_pi.toarray()
    exact = np.linalg.solve(np.eye(40) - 0.999 * M, b)
    np.testing.assert_allclose(x, exact, rtol=1e-11, atol=0)


def test_banded_solve_declines_a_wide_chain():
    P = sp.csr_matrix(np.roll(np.eye(20), L.BANDED_MAX + 1, axis=1))  # i -> i + 9 (mod 20)
    assert L._banded_solve((P.indptr, P.indices, P.data), np.ones(20), 0.9) is None
    assert L._bandwidth(P.indptr, P.indices) == L.BANDED_MAX + 1  # it stops at the first
    rows = queue_mdp(30).P_rows  # rows s·3 + a of a birth-death chain: within 1 of s
    assert L._bandwidth(rows.indptr, rows.indices, 3) == 1


def test_value_sweep_keeps_the_incumbent_on_a_tie():
    # one state, two actions of equal value: the held action stays, whichever it is
    P = sp.csr_matrix(np.ones((2, 1)))
    R = np.array([[1.0, 1.0]])
    for held in (0, 1):
        policy = np.array([held], dtype=np.intp)
        V = np.zeros(1)
        sweeps()["_value_sweep"](P.indptr, P.indices, P.data, R, np.ones((1, 2), bool), True,
                                 0.5, V, np.arange(1), policy, 1e-12)  # fmt: skip
        assert policy[0] == held and V[0] == pytest.approx(2.0)
    R = np.array([[1.0, 1.5]])  # a better action wins
    policy = np.array([0], dtype=np.intp)
    sweeps()["_value_sweep"](P.indptr, P.indices, P.data, R, np.ones((1, 2), bool), True, 0.5,
                             np.zeros(1), np.arange(1), policy, 1e-12)  # fmt: skip
    assert policy[0] == 1


def test_queue_and_chain_models():
    q = queue_mdp(5, discount=0.9)
    P = q.dense_P()
    np.testing.assert_allclose(P.sum(axis=2), 1.0)
    lam, mu = 0.45, 0.7  # action 2
    np.testing.assert_allclose(
        P[2, 2, [1, 2, 3]], [mu * (1 - lam), 1 - mu * (1 - lam) - lam * (1 - mu), lam * (1 - mu)]
    )
    np.testing.assert_allclose(P[0, 2, [0, 1]], [1 - lam, lam])  # nobody to serve
    np.testing.assert_allclose(P[4, 2, [3, 4]], [mu * (1 - lam), 1 - mu * (1 - lam)])  # full
    assert q.R[3, 1] == pytest.approx(-(0.03 + 0.2))
    from optplan.generators import riverswim

    for S in (2, 3, 7):
        np.testing.assert_array_equal(chain_mdp(S).dense_P(), riverswim(S).P)
    with pytest.raises(ValueError, match="queue size must be an integer >= 2, got 1"):
        queue_mdp(1)
    with pytest.raises(ValueError, match="sparse must be True or False"):
        riverswim(5, sparse="yes")


def test_occupancy_gauss_seidel_finishes_on_a_gridworld_at_discount_0999():
    """The transposed solve's changes rise while the mass reaches the goal, then fall: it
    must not give up (for a factorization) while they rise."""
    mdp = gridworld_mdp(60, discount=0.999)
    policy = op.DiscountedPlanning(mdp).solve(tol=1e-8).policy
    P_pi, _ = op.dp.policy_model(mdp.P_rows, mdp.R, policy)
    S = mdp.n_states
    b = np.full(S, (1 - 0.999) / S)
    x = L._gauss_seidel(P_pi.T, b, 0.999, np.full(S, 1.0 / S), 1e-13, False)
    assert x is not None
    column_sums = np.asarray(P_pi.sum(axis=0)).max()
    assert np.abs(b - (x - 0.999 * (P_pi.T @ x))).max() <= 1e-13 * max(1.0, column_sums)
    assert abs(x.sum() - 1.0) < 1e-9


def test_bad_sizes_and_bench_options_are_named():
    from optplan.bench import Runs
    from optplan.bench.planning import bench_planning

    with pytest.raises(ValueError, match="chain size must be an integer >= 2, got 1"):
        chain_mdp(1)
    with pytest.raises(ValueError, match="queue size must be an integer >= 2, got 2.5"):
        queue_mdp(2.5)
    for tol in (0, 1.5, True):
        with pytest.raises(ValueError, match="tol must be in \\(0, 1\\)"):
            bench_planning(Runs(sizes=[10]), sparse=True, models=["queue"], tol=tol)
    with pytest.raises(ValueError, match="models must hold entries of"):
        bench_planning(Runs(sizes=[10]), sparse=True, models=["queues"])
