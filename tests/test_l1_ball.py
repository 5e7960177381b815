"""L1-ball index B(p, v, d) of OLP: fast path vs CVXPY and vs scipy's HiGHS, the multiplier as
dB/dd (and at kinks, as any value between the one-sided derivatives), edge cases, invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import optplan as op
from optplan.fast.l1_ball import l1_ball_index
from optplan.problems.l1_ball import KINK_TOL, L1BallIndex
from optplan.result import INFEASIBLE, OPTIMAL

# cvxpy warns on every optimal_inaccurate solve; the tests read the status instead
pytestmark = pytest.mark.filterwarnings("ignore:Solution may be inaccurate:UserWarning")


def instance(seed: int, S: int | None = None):
    """``(p, v, d)``: sizes 1..60, dense and sparse ``p``, best state with ``p = 0``, ties in
    ``v`` (at the top and at the margin), large magnitudes, radii at and between the edges."""
    rng = np.random.default_rng(seed)
    S = int(rng.integers(1, 61)) if S is None else S
    p = rng.dirichlet(np.full(S, float(rng.choice([0.3, 1.0, 5.0]))))
    kind = seed % 6
    if kind in (1, 5) and S > 1:  # sparse p
        p[rng.random(S) < 0.5] = 0.0
    if kind == 2 and S > 1:  # the best state has probability zero
        p[0] = 0.0
    if p.sum() == 0:
        p[rng.integers(S)] = 1.0
    p /= p.sum()
    v = rng.random(S)
    if kind == 2:
        v[0] = v.max() + rng.random()
    if kind in (3, 5):  # ties
        v = np.round(v * 3) / 3
    if kind == 4:  # large magnitude
        v = 1e6 * v - 3e5
    edges = [0.0, 1e-12, 1e-6, 0.01, 0.5, 1.0, 2.0, 3.0]
    d = float(rng.choice(edges)) if rng.random() < 0.3 else 2.2 * rng.random()
    return p, v, d


def highs(p, v, d):
    """``B`` and the L1 constraint's dual by scipy's HiGHS, in the paper's q+/q- form (§4.3):
    ``max v.(p + q- - q+)  s.t.  sum(q+ + q-) <= d, sum(q- - q+) = 0, q+ - q- <= p``."""
    S = p.size
    one, eye = np.ones(S), np.eye(S)
    res = linprog(
        np.r_[v, -v],
        A_ub=np.r_[np.r_[one, one][None], np.c_[eye, -eye]],
        b_ub=np.r_[d, p],
        A_eq=np.r_[-one, one][None],
        b_eq=[0.0],
        bounds=(0, None),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    assert res.status == 0, res.message
    return p @ v - res.fun, -res.ineqlin.marginals[0]


# ---- (a) fast vs each conic solver ---------------------------------------------------------


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_fast_equals_each_solver(solver):
    optimal = 0
    for seed in range(90):
        p, v, d = instance(seed)
        chk = op.cross_check(L1BallIndex(p, v, d), solver=solver)
        assert chk.fast.status == OPTIMAL
        if chk.conic.status == OPTIMAL:
            optimal += 1
            assert chk.agree, (seed, p.size, d, chk.message)
    assert optimal >= 80  # inaccurate solves are rare (large |v| with tiny radii)


def test_fast_equals_highs():
    """An independent LP solver, in the paper's form, including |v| ~ 1e6 (where the conic
    solvers often report ``optimal_inaccurate``)."""
    for seed in range(120):
        p, v, d = instance(seed)
        res = l1_ball_index(p, v, d)
        value, dual = highs(p, v, d)
        scale = 1.0 + np.abs(v).max()
        assert abs(res.value - value) <= 1e-9 * scale, seed
        # within KINK_TOL of a kink (d = 0 included) any dual between the slopes is as good
        prob = L1BallIndex(p, v, d)
        right, left = prob.derivatives(d + 2 * KINK_TOL)[0], prob.derivatives(d - 2 * KINK_TOL)[1]
        assert right - 1e-9 * scale <= dual <= left + 1e-9 * scale, seed
        if right == left:
            assert abs(res.multiplier - dual) <= 1e-9 * scale, seed


# ---- (b) property test ---------------------------------------------------------------------

weights = st.one_of(st.just(0.0), st.integers(1, 4).map(float), st.floats(1e-6, 1.0))
values = st.one_of(st.integers(-3, 3).map(float), st.floats(-10, 10).map(lambda x: round(x, 6)))
radii = st.one_of(st.sampled_from([0.0, 1e-12, 0.5, 1.0, 2.0, 3.0]), st.floats(0.0, 2.5))


@st.composite
def problems(draw):
    S = draw(st.integers(1, 20))
    w = np.array(draw(st.lists(weights, min_size=S, max_size=S)))
    if w.sum() == 0:
        w[draw(st.integers(0, S - 1))] = 1.0
    v = np.array(draw(st.lists(values, min_size=S, max_size=S)))
    v *= draw(st.sampled_from([1.0, 1e-3, 1e3]))
    return w / w.sum(), v, draw(radii)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(prob=problems(), h=st.floats(1e-9, 0.5))
def test_fast_equals_clarabel_and_invariants_2000(prob, h):
    p, v, d = prob
    chk = op.cross_check(L1BallIndex(p, v, d), solver="CLARABEL")
    fast = chk.fast
    assert fast.status == OPTIMAL
    if chk.conic.status == OPTIMAL:
        assert chk.agree, chk.message
    else:  # Clarabel inaccurate (|v| ~ 1e4 at its 1e-12 tolerances): HiGHS instead
        assert fast.value == pytest.approx(highs(p, v, d)[0], abs=1e-9 * (1 + np.abs(v).max()))
    scale = 1e-12 * (1.0 + np.abs(v).max())
    # the fast answer certifies itself: feasible q* attaining B, zero duality gap at lam
    cert = L1BallIndex(p, v, d).compare(fast, fast)
    assert cert["x_certificate"][0] <= 10 * scale
    assert cert["multiplier_certificate"][0] <= 10 * scale
    assert p @ v - scale <= fast.value <= v.max()
    q = fast.x
    assert q.min() >= 0 and q.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.abs(q - p).sum() <= d + 1e-12
    assert q @ v == pytest.approx(fast.value, abs=scale)
    # monotone in the radius, exactly (the closed form is built from monotone operations)
    wider = l1_ball_index(p, v, [d, d + h])
    assert wider.value[0] == fast.value and wider.value[1] >= fast.value


# ---- (c) batched == loop -------------------------------------------------------------------


def test_batched_equals_loop_of_scalar_calls():
    rng = np.random.default_rng(0)
    S = 7
    P = rng.dirichlet(np.full(S, 0.5), size=(4, 5))
    P[0, 0] = [0, 0.5, 0.5, 0, 0, 0, 0]
    P[0, 1] = np.eye(S)[3]
    V = rng.random(S)
    V[2] = V.max() + 1.0  # the best state ...
    P[1, 0] = [0.2, 0.2, 0, 0.2, 0.2, 0.1, 0.1]  # ... with p = 0
    D = 2.2 * rng.random((4, 5))
    D[1, 1], D[2, 2], D[3, 3], D[3, 4], D[2, 4] = 0.0, -0.5, 1e-12, 5.0, 2.0
    for v in (V, rng.random((4, 5, S)), np.round(rng.random((5, S)) * 2) / 2):
        batch = l1_ball_index(P, v, D)
        assert batch.value.shape == (4, 5) and batch.x.shape == (4, 5, S)
        vb = np.broadcast_to(v, P.shape)
        for i in range(4):
            for j in range(5):
                one = l1_ball_index(P[i, j], vb[i, j], D[i, j])
                assert np.array_equal(batch.value[i, j], one.value)
                assert np.array_equal(batch.x[i, j], one.x, equal_nan=True)
                assert np.array_equal(batch.multiplier[i, j], one.multiplier, equal_nan=True)
                assert batch.status[i, j] == one.status
                res = L1BallIndex(P[i, j], vb[i, j], D[i, j]).solve()
                assert res.value == one.value and res.status == one.status
        assert batch.status[2, 2] == INFEASIBLE and (batch.status != INFEASIBLE).sum() == 19
    # a scalar radius broadcast over the batch; an empty batch
    b2 = l1_ball_index(P, V, 0.2)
    assert np.array_equal(b2.value[3, 1], l1_ball_index(P[3, 1], V, 0.2).value)
    empty = l1_ball_index(P[:0], V, 0.2)
    assert empty.value.shape == (0, 5) and empty.x.shape == (0, 5, S)


# ---- (d) the multiplier --------------------------------------------------------------------


def test_multiplier_is_the_derivative_in_the_radius():
    h = 1e-6
    checked = 0
    for seed in range(200):
        p, v, _ = instance(seed)
        d = 2.0 * np.random.default_rng(seed).random()
        prob = L1BallIndex(p, v, d)
        if prob.derivatives(d - 2 * h)[0] != prob.derivatives(d + 2 * h)[1]:
            continue  # a kink within 2h: no derivative
        up, down = l1_ball_index(p, v, [d + h, d - h]).value
        lam = l1_ball_index(p, v, d).multiplier
        assert lam == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-8 * np.abs(v).max())
        checked += 1
    assert checked > 150


def kinks(p, v):
    """Radii where ``B`` has a kink: twice the cumulative mass drained, worst state first."""
    b = np.argmax(v)
    order = [i for i in np.argsort(v, kind="stable") if i != b]
    return 2.0 * np.cumsum(p[order])[p[order] > 0]


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS"])
def test_multiplier_at_kinks_is_between_the_one_sided_derivatives(solver):
    h = 1e-7
    for seed in range(12):
        p, v, _ = instance(seed, S=6)
        if seed % 6 == 4:
            v = v / 1e6
        for d in np.r_[0.0, kinks(p, v)]:
            prob = L1BallIndex(p, v, d)
            right, left = prob.derivatives()
            fast = l1_ball_index(p, v, [d, d + h, max(d - h, 0.0)])
            # the fast path reports the right derivative
            assert fast.multiplier[0] == right
            assert right == pytest.approx((fast.value[1] - fast.value[0]) / h, abs=1e-7)
            if d > 0:
                assert left == pytest.approx((fast.value[0] - fast.value[2]) / h, abs=1e-7)
            # the dual function touches B exactly on [right, left]
            for lam in (right, left, (right + left) / 2):
                if np.isfinite(lam):
                    assert prob.dual_function(lam) == pytest.approx(fast.value[0], abs=1e-14)
            assert prob.dual_function(right - 0.01) > fast.value[0] or right < 0.01
            conic = prob.solve(method="conic", solver=solver)
            assert conic.status == OPTIMAL
            assert right - 1e-6 <= conic.multiplier <= left + 1e-6, (seed, d, right, left)
            assert conic.value == pytest.approx(fast.value[0], abs=1e-8)


# ---- (e) edge cases ------------------------------------------------------------------------


def test_radius_zero_keeps_p():
    p, v = np.array([0.0, 0.3, 0.2, 0.5]), np.array([9.0, 1.0, 2.0, 3.0])
    res = L1BallIndex(p, v, 0.0).solve()
    assert res.status == OPTIMAL and np.array_equal(res.x, p)
    assert res.value == pytest.approx(p @ v, abs=1e-15)
    assert res.multiplier == (9.0 - 1.0) / 2  # right derivative: drain the worst in the support
    assert op.cross_check(L1BallIndex(p, v, 0.0)).agree
    # support only on the best value: nothing to gain, right derivative 0
    assert L1BallIndex([0.0, 1.0], [1.0, 5.0], 0.0).solve().multiplier == 0.0


def test_negative_radius_is_infeasible():
    p, v = np.array([0.2, 0.3, 0.5]), np.array([1.0, 2.0, 3.0])
    res = L1BallIndex(p, v, -0.1).solve()
    assert res.status == INFEASIBLE and res.value == -np.inf and not res.success
    assert res.x is None and np.isnan(res.multiplier)
    for solver in ("CLARABEL", "ECOS", "SCS"):
        chk = op.cross_check(L1BallIndex(p, v, -0.1), solver=solver)
        assert chk.agree and chk.conic.value == -np.inf, chk.message


def test_constant_v_and_single_state():
    p = np.array([0.2, 0.3, 0.5])
    const = L1BallIndex(p, np.full(3, 4.0), 0.7).solve()
    assert const.value == 4.0 and const.multiplier == 0.0
    assert op.cross_check(L1BallIndex(p, np.full(3, 4.0), 0.7)).agree
    for d in (0.0, 1e-12, 0.5, 3.0):
        single = L1BallIndex([1.0], [2.5], d).solve()
        assert single.value == 2.5 and single.x.tolist() == [1.0] and single.multiplier == 0.0
        assert op.cross_check(L1BallIndex([1.0], [2.5], d)).agree


def test_best_state_with_zero_probability_gets_the_mass():
    p, v = np.array([0.0, 0.5, 0.3, 0.2]), np.array([10.0, 0.0, 1.0, 2.0])
    res = L1BallIndex(p, v, 0.8).solve()
    np.testing.assert_allclose(res.x, [0.4, 0.1, 0.3, 0.2], atol=1e-15)
    assert res.value == pytest.approx(4.0 + 0.3 + 0.4, abs=1e-14)
    assert res.multiplier == 5.0  # still draining state 1 (v = 0)
    for solver in ("CLARABEL", "ECOS", "SCS"):
        assert op.cross_check(L1BallIndex(p, v, 0.8), solver=solver).agree


@pytest.mark.parametrize("d", [2.0, 2.5, 100.0])
def test_large_radius_gives_max_v(d):
    rng = np.random.default_rng(3)
    p, v = rng.dirichlet(np.ones(20)), rng.random(20)
    res = L1BallIndex(p, v, d).solve()
    assert res.value == v.max() and res.multiplier == 0.0
    np.testing.assert_allclose(res.x, np.eye(20)[np.argmax(v)], rtol=0, atol=1e-15)
    assert op.cross_check(L1BallIndex(p, v, d)).agree


def test_radius_exactly_at_full_drain():
    p, v = np.array([0.25, 0.25, 0.5]), np.array([0.0, 1.0, 3.0])
    res = L1BallIndex(p, v, 1.0).solve()  # d/2 = 1 - p_best: all mass just reaches the best
    assert res.value == 3.0 and res.multiplier == 0.0
    assert L1BallIndex(p, v, 1.0).derivatives() == (0.0, 1.0)


def test_tiny_radius():
    rng = np.random.default_rng(4)
    p, v = rng.dirichlet(np.ones(10)), rng.random(10)
    d = 1e-12
    res = l1_ball_index(p, v, d)
    worst = v[p > 0].min()
    assert res.multiplier == (v.max() - worst) / 2
    # the gain 5e-13 * (v_b - v_m) sits 4 digits below B: resolved to ~1e-3 relative
    assert res.value - p @ v == pytest.approx(d / 2 * (v.max() - worst), rel=1e-2)
    assert op.cross_check(L1BallIndex(p, v, d)).agree


def test_large_magnitude_is_shift_and_scale_invariant():
    rng = np.random.default_rng(2)
    p, v = rng.dirichlet(np.ones(15)), rng.random(15)
    base = l1_ball_index(p, v, 0.3)
    big = l1_ball_index(p, 1e6 * v + 5e6, 0.3)
    assert big.value == pytest.approx(1e6 * base.value + 5e6, rel=1e-14)
    np.testing.assert_allclose(big.x, base.x, atol=1e-15)
    assert big.multiplier == pytest.approx(1e6 * base.multiplier, rel=1e-12)
    assert big.value == pytest.approx(highs(p, 1e6 * v + 5e6, 0.3)[0], rel=1e-13)


def test_ties():
    # ties at the top: the first best index gets the mass; q* is compared per tie class
    p, v = np.array([0.4, 0.0, 0.3, 0.3]), np.array([0.0, 2.0, 1.0, 2.0])
    res = L1BallIndex(p, v, 0.5).solve()
    np.testing.assert_allclose(res.x, [0.15, 0.25, 0.3, 0.3], atol=1e-15)
    # ties at the margin: drained in index order (any split is optimal)
    p2, v2 = np.array([0.25, 0.25, 0.25, 0.25]), np.array([1.0, 0.0, 0.0, 3.0])
    res2 = L1BallIndex(p2, v2, 0.6).solve()
    np.testing.assert_allclose(res2.x, [0.25, 0.0, 0.2, 0.55], atol=1e-15)
    assert res2.value == pytest.approx(0.25 + 3 * 0.55) and res2.multiplier == 1.5
    for prob in (L1BallIndex(p, v, 0.5), L1BallIndex(p2, v2, 0.6), L1BallIndex(p, v, 3.0)):
        for solver in ("CLARABEL", "ECOS", "SCS"):
            assert op.cross_check(prob, solver=solver).agree


def test_formulate_constraint_0_is_the_l1_ball():
    prob = L1BallIndex([0.2, 0.8], [0.0, 1.0], 0.1).formulate()
    assert prob.is_dcp() and "norm1" in str(prob.constraints[0])
    prob.solve(solver="CLARABEL")
    assert prob.value == pytest.approx(0.85)
    assert prob.constraints[0].dual_value == pytest.approx(0.5)


# ---- (f) bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, match",
    [
        (([0.5, 0.6], [0, 1], 0.1), r"p must sum to 1"),
        (([1.5, -0.5], [0, 1], 0.1), r"p has a negative entry -0\.5"),
        (([0.5, np.nan], [0, 1], 0.1), r"p has a non-finite entry nan"),
        (([0.5, 0.5], [0, np.nan], 0.1), r"v has a non-finite entry nan"),
        (([0.5, 0.5], [0, np.inf], 0.1), r"v has a non-finite entry inf"),
        (([0.5, 0.5], [0, 1, 2], 0.1), r"v has 3 states .* but p has 2"),
        (([0.5, 0.5], [0, 1], np.nan), r"radius has a non-finite entry nan"),
        (([0.5, 0.5], [0, 1], -np.inf), r"radius has a non-finite entry -inf"),
        (([[0.5, 0.5]] * 3, [0, 1], [0.1, 0.2]), r"shapes do not broadcast.*radius \(2,\)"),
        (([[0.5, 0.5]] * 3, [[0, 1]] * 2, 0.1), r"shapes do not broadcast: p \(3, 2\), v \(2, 2\)"),
        (([[0.5, 0.5], [0.2, 0.7]], [0, 1], 0.1), r"p must sum to 1 along its last axis"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        l1_ball_index(*args)
    p, v, r = args
    if np.ndim(p) == 1 and np.ndim(r) == 0:
        with pytest.raises(ValueError, match=match):
            L1BallIndex(p, v, r)


def test_problem_object_rejects_a_batch():
    with pytest.raises(ValueError, match="use op.l1_ball_index for batches"):
        L1BallIndex([[0.5, 0.5]], [0, 1], 0.1)
    with pytest.raises(TypeError, match="radius must be numeric"):
        L1BallIndex([0.5, 0.5], [0, 1], "big")
