"""KL-ball index C(p, v, d): fast path vs CVXPY, edge cases (Theorem 1), invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.bench.cases import random_pv
from optplan.result import INFEASIBLE, OPTIMAL


def kl(p, q):
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(seed=st.integers(0, 10**9), log_radius=st.floats(-8, 1.5))
def test_fast_equals_clarabel_2000(seed, log_radius):
    """Value, q* and the KL multiplier agree with Clarabel wherever Clarabel says optimal."""
    p, v = random_pv(seed)
    d = 10.0**log_radius
    chk = op.cross_check(op.KLBallIndex(p, v, d), solver="CLARABEL")
    fast = chk.fast
    assert fast.status == OPTIMAL
    # invariants of the fast answer on its own
    assert p @ v - 1e-9 * (1 + abs(p @ v)) <= fast.value <= v.max() + 1e-9 * (1 + abs(v.max()))
    assert fast.x.min() >= 0 and fast.x.sum() == pytest.approx(1.0, abs=1e-12)
    assert kl(p, fast.x) <= d * (1 + 1e-9) + 1e-12
    assert fast.x @ v == pytest.approx(fast.value, rel=1e-12, abs=1e-9 * np.abs(v).max())
    if chk.conic.status == OPTIMAL:
        assert chk.agree, (seed, d, chk.message)


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_fast_equals_each_solver(solver):
    """Where the solver reports optimal it agrees; it may honestly report inaccuracy (the
    1e6-magnitude instances are badly scaled for a conic solver), never a wrong optimum."""
    optimal = 0
    for seed in range(30):
        p, v = random_pv(seed)
        chk = op.cross_check(op.KLBallIndex(p, v, 0.05 + 0.1 * (seed % 7)), solver=solver)
        if chk.conic.status == OPTIMAL:
            optimal += 1
            assert chk.agree, (seed, chk.message)
    assert optimal >= 20


def test_multiplier_is_the_derivative_in_the_radius():
    for seed in range(40):
        p, v = random_pv(seed)
        v = v / max(1.0, np.abs(v).max())
        for d in (0.01, 0.3, 2.0):
            h = 1e-5 * d
            up, down = op.kl_ball_index(p, v, [d + h, d - h]).value
            lam = op.kl_ball_index(p, v, d).multiplier
            assert lam == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9)


def test_batched_equals_loop_of_scalar_calls():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(7), size=(4, 5))
    P[0, 0] = [0, 0.5, 0.5, 0, 0, 0, 0]
    V = rng.random(7)
    D = rng.random((4, 5))
    D[1, 1], D[2, 2], D[3, 3] = 0.0, -0.5, 1e-12
    batch = op.kl_ball_index(P, V, D)
    assert batch.value.shape == (4, 5) and batch.x.shape == (4, 5, 7)
    for i in range(4):
        for j in range(5):
            one = op.kl_ball_index(P[i, j], V, D[i, j])
            assert np.array_equal(batch.value[i, j], one.value)
            assert np.array_equal(batch.x[i, j], one.x, equal_nan=True)
            assert batch.status[i, j] == one.status
    assert batch.status[2, 2] == INFEASIBLE
    # v batched too, and a scalar radius broadcast over the batch
    Vb = rng.random((4, 5, 7))
    b2 = op.kl_ball_index(P, Vb, 0.2)
    assert np.array_equal(b2.value[3, 1], op.kl_ball_index(P[3, 1], Vb[3, 1], 0.2).value)


def test_theorem_1_edge_cases():
    p, v = np.array([0.2, 0.3, 0.5]), np.array([1.0, 2.0, 3.0])
    neg = op.KLBallIndex(p, v, -0.1).solve()
    assert neg.status == INFEASIBLE and neg.value == -np.inf and not neg.success
    zero = op.KLBallIndex(p, v, 0.0).solve()
    assert zero.value == pytest.approx(p @ v) and np.array_equal(zero.x, p)
    assert zero.multiplier == np.inf  # dC/dd -> inf as d -> 0+ (C ~ sqrt(2 Var d))
    const = op.KLBallIndex(p, np.full(3, 4.0), 0.7).solve()
    assert const.value == 4.0 and const.multiplier == 0.0
    single = op.KLBallIndex([1.0], [2.5], 3.0).solve()
    assert single.value == 2.5 and single.x.tolist() == [1.0]


def test_best_state_with_zero_probability_gets_mass():
    p, v = np.array([0.0, 0.5, 0.5]), np.array([10.0, 0.0, 1.0])
    res = op.KLBallIndex(p, v, 0.5).solve()
    assert res.x[0] > 0 and res.value > p @ v
    # constant on the support: everything but e^{-d} moves to the zero-probability state
    res2 = op.KLBallIndex(np.array([0.0, 0.5, 0.5]), np.array([3.0, 1.0, 1.0]), 0.7).solve()
    assert res2.value == pytest.approx(3.0 - np.exp(-0.7) * 2.0, rel=1e-14)
    assert res2.x[0] == pytest.approx(1 - np.exp(-0.7))
    assert op.cross_check(op.KLBallIndex(p, v, 0.5)).agree
    # ties among zero-probability best states: the leftover is compared as a total
    p3, v3 = np.array([0.0, 0.0, 1.0]), np.array([5.0, 5.0, 1.0])
    assert op.cross_check(op.KLBallIndex(p3, v3, 0.3)).agree


def test_large_radius_tends_to_max_v_and_tiny_radius_to_mean():
    rng = np.random.default_rng(1)
    p, v = rng.dirichlet(np.ones(20)), rng.random(20)
    big = op.kl_ball_index(p, v, [50.0, 1e3, 1e6]).value
    assert np.all(big <= v.max()) and v.max() - big[-1] < 1e-12
    assert np.all(np.diff(big) >= 0)
    d = 1e-12  # C - p.v = sqrt(2 Var_p(v) d) + O(d)
    tiny = op.kl_ball_index(p, v, d).value - p @ v
    var = p @ v**2 - (p @ v) ** 2
    assert tiny == pytest.approx(np.sqrt(2 * var * d), rel=1e-5)


def test_shift_and_scale_invariance_at_large_magnitude():
    rng = np.random.default_rng(2)
    p, v = rng.dirichlet(np.ones(15)), rng.random(15)
    base = op.kl_ball_index(p, v, 0.3)
    big = op.kl_ball_index(p, 1e6 * v + 5e6, 0.3)
    assert big.value == pytest.approx(1e6 * base.value + 5e6, rel=1e-13)
    np.testing.assert_allclose(big.x, base.x, atol=1e-12)
    assert big.multiplier == pytest.approx(1e6 * base.multiplier, rel=1e-9)


def test_monotone_in_radius_and_bounded():
    for seed in range(50):
        p, v = random_pv(seed)
        vals = op.kl_ball_index(p, v, np.geomspace(1e-6, 20, 40)).value
        assert np.all(np.diff(vals) >= -1e-12 * (1 + np.abs(vals[1:])))
        assert vals[0] >= p @ v - 1e-9 * (1 + abs(p @ v)) and vals[-1] <= v.max()


def bernoulli_kl_ucb(mean: float, d: float) -> float:
    """Largest q with kl(mean, q) <= d, by plain bisection (independent of optplan)."""

    def kl2(a, b):
        out = 0.0
        if a > 0:
            out += a * np.log(a / b)
        if a < 1:
            out += (1 - a) * np.log((1 - a) / (1 - b))
        return out

    lo, hi = mean, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid >= 1.0 or kl2(mean, mid) > d:
            hi = mid
        else:
            lo = mid
    return lo


@pytest.mark.parametrize("mean", [0.0, 0.05, 0.3, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("d", [1e-6, 0.01, 0.2, 1.0, 5.0])
def test_two_states_equals_bernoulli_kl_ucb(mean, d):
    res = op.KLBallIndex([1 - mean, mean], [0.0, 1.0], d).solve()
    assert res.value == pytest.approx(bernoulli_kl_ucb(mean, d), abs=1e-12)


@pytest.mark.parametrize(
    "args, match",
    [
        (([0.5, 0.6], [0, 1], 0.1), r"p must sum to 1"),
        (([1.5, -0.5], [0, 1], 0.1), r"p has a negative entry -0\.5"),
        (([0.5, np.nan], [0, 1], 0.1), r"p has a non-finite entry nan"),
        (([0.5, 0.5], [0, np.inf], 0.1), r"v has a non-finite entry inf"),
        (([0.5, 0.5], [0, 1, 2], 0.1), r"v has 3 states .* but p has 2"),
        (([0.5, 0.5], [0, 1], np.nan), r"radius has a non-finite entry nan"),
        (([0.5, 0.5], [0, 1], np.inf), r"radius has a non-finite entry inf"),
        (([[0.5, 0.5]] * 3, [0, 1], [0.1, 0.2]), r"shapes do not broadcast.*radius \(2,\)"),
        (
            ([[0.5, 0.5], [0.2, 0.7]], [0, 1], 0.1),
            r"p must sum to 1 along its last axis \(row \(1,\)\)",
        ),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        op.kl_ball_index(*args)
    p, v, r = args
    if np.ndim(p) == 1:
        with pytest.raises(ValueError, match=match):
            op.KLBallIndex(p, v, r)


def test_problem_object_rejects_a_batch():
    with pytest.raises(ValueError, match="use op.kl_ball_index for batches"):
        op.KLBallIndex([[0.5, 0.5]], [0, 1], 0.1)
    with pytest.raises(TypeError, match="radius must be numeric"):
        op.KLBallIndex([0.5, 0.5], [0, 1], "big")


def test_formulate_is_an_exponential_cone_program():
    prob = op.KLBallIndex([0.2, 0.8], [0.0, 1.0], 0.1).formulate()
    assert prob.is_dcp()
    assert prob.get_problem_data("CLARABEL")[0]["dims"].exp > 0  # exponential cones
    prob.solve(solver="CLARABEL")
    assert prob.value == pytest.approx(op.KLBallIndex([0.2, 0.8], [0, 1], 0.1).solve().value)


def test_pinsker_kl_ball_inside_the_l1_ball():
    """KL(p||q) >= ||p - q||_1^2 / 2, so C(p, v, d) <= B(p, v, sqrt(2 d))."""
    for seed in range(200):
        p, v = random_pv(seed)
        d = np.geomspace(1e-8, 10, 9)
        kl_val = op.kl_ball_index(p, v, d).value
        l1_val = op.l1_ball_index(p, v, np.sqrt(2 * d)).value
        assert np.all(kl_val <= l1_val + 1e-12 * (1 + np.abs(l1_val)))


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize("level", [0.0, 3.0])
def test_constant_v_on_a_row_summing_to_one_minus_round_off(kernel, level):
    """v constant on a full support whose row sums to 1 - 3e-15 (a Dirichlet draw's
    round-off): the closed form ``q = p``, value ``v``, not a root search on ``delta = 0``."""
    p = np.full(250, 1.0 / 250)
    p[0] -= 3e-15
    assert p.sum() < 1.0 - 1e-15
    res = op.kl_ball_index(p, np.full(250, level), 1.0, kernel=kernel)
    assert res.status == OPTIMAL
    assert res.value == pytest.approx(level, abs=1e-15)
    np.testing.assert_allclose(res.x, p, rtol=0, atol=1e-15)
