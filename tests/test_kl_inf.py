"""KL-minimization rate D(p, v, rho): fast path vs CVXPY, edge cases (Theorem 3), invariants."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.bench.cases import random_pv
from optplan.problems.kl_ball import kl_divergence
from optplan.result import INFEASIBLE, OPTIMAL


def target_between(p, v, frac):
    mu = p @ v
    return mu + frac * (v.max() - mu)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(seed=st.integers(0, 10**9), frac=st.floats(0.0, 0.999))
def test_fast_equals_clarabel_2000(seed, frac):
    p, v = random_pv(seed)
    # a target range to sample: v constant on the support (some "ties" instances) leaves none,
    # and p @ v may round above max v; those edge cases are test_theorem_3_edge_cases'
    assume(v.max() - p @ v > 1e-12 * (1.0 + abs(v.max())))
    rho = target_between(p, v, frac)
    chk = op.cross_check(op.KLInfRate(p, v, rho), solver="CLARABEL")
    fast = chk.fast
    assert fast.status == OPTIMAL and fast.value >= 0
    assert fast.x.min() >= 0 and fast.x.sum() == pytest.approx(1.0, abs=1e-12)
    assert fast.x @ v >= rho - 1e-9 * (1 + abs(rho))
    assert kl_divergence(p, fast.x) == pytest.approx(fast.value, rel=1e-9, abs=1e-12)
    if chk.conic.status == OPTIMAL:
        assert chk.agree, (seed, frac, chk.message)


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_fast_equals_each_solver(solver):
    optimal = 0
    for seed in range(30):
        p, v = random_pv(seed)
        rho = target_between(p, v, 0.1 + 0.12 * (seed % 7))
        chk = op.cross_check(op.KLInfRate(p, v, rho), solver=solver)
        if chk.conic.status == OPTIMAL:
            optimal += 1
            assert chk.agree, (seed, chk.message)
    assert optimal >= 15


def test_multiplier_is_the_derivative_in_the_target():
    for seed in range(40):
        p, v = random_pv(seed)
        v = v / max(1.0, np.abs(v).max())
        if np.ptp(v) == 0:
            continue
        for frac in (0.05, 0.5, 0.9):
            rho = target_between(p, v, frac)
            h = 1e-6 * (v.max() - p @ v)
            up, down = op.kl_inf_rate(p, v, [rho + h, rho - h]).value
            lam = op.kl_inf_rate(p, v, rho).multiplier
            assert lam == pytest.approx((up - down) / (2 * h), rel=1e-5)


def test_batched_equals_loop_of_scalar_calls():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(6), size=(3, 4))
    P[0, 0] = [0, 0.5, 0.5, 0, 0, 0]
    V = rng.random(6)
    mu = P @ V
    T = mu + rng.random((3, 4)) * (V.max() - mu)
    T[1, 1], T[2, 2], T[0, 3] = mu[1, 1] - 1, V.max() + 1, V.max()
    batch = op.kl_inf_rate(P, V, T)
    for i in range(3):
        for j in range(4):
            one = op.kl_inf_rate(P[i, j], V, T[i, j])
            assert np.array_equal(batch.value[i, j], one.value)
            assert np.array_equal(batch.x[i, j], one.x, equal_nan=True)
            assert np.array_equal(batch.multiplier[i, j], one.multiplier, equal_nan=True)
    assert batch.value[1, 1] == 0 and batch.status[2, 2] == INFEASIBLE
    assert batch.status[0, 3] == INFEASIBLE and batch.value[0, 3] == np.inf


def test_theorem_3_edge_cases():
    p, v = np.array([0.2, 0.3, 0.5]), np.array([1.0, 2.0, 3.0])
    mu = p @ v
    for rho in (mu - 1.0, mu):
        res = op.KLInfRate(p, v, rho).solve()
        assert res.value == 0.0 and res.multiplier == 0.0 and np.array_equal(res.x, p)
    for rho in (3.0, 3.5):  # rho = V with v not constant, and rho > V
        res = op.KLInfRate(p, v, rho).solve()
        assert res.status == INFEASIBLE and res.value == np.inf and not res.success
        conic = op.KLInfRate(p, v, rho).solve(method="conic")
        assert conic.status != OPTIMAL  # the solver must not claim an optimum here
    const = np.full(3, 2.0)
    assert op.KLInfRate(p, const, 2.0).solve().value == 0.0
    assert op.KLInfRate(p, const, 2.0 + 1e-9).solve().status == INFEASIBLE
    assert op.KLInfRate([1.0], [0.7], 0.7).solve().value == 0.0


def test_best_state_with_zero_probability():
    """V attained only where p = 0: the optimum may put the leftover mass there."""
    p, v = np.array([0.0, 0.5, 0.5]), np.array([10.0, 0.0, 1.0])
    for rho in (1.0, 5.0, 9.0):
        res = op.KLInfRate(p, v, rho).solve()
        assert res.status == OPTIMAL and res.x[0] > 0
        assert res.x @ v == pytest.approx(rho, rel=1e-12)
        # closed form at the boundary: q = p (V - rho) / (V - v) on the support
        q_support = p[1:] * (10.0 - rho) / (10.0 - v[1:])
        if q_support.sum() <= 1:
            assert res.value == pytest.approx(np.sum(p[1:] * np.log(p[1:] / q_support)))
        assert op.cross_check(op.KLInfRate(p, v, rho)).agree


def test_near_the_ends_of_the_range():
    rng = np.random.default_rng(3)
    p, v = rng.dirichlet(np.ones(10)), rng.random(10)
    mu, V = p @ v, v.max()
    var = p @ v**2 - mu**2
    gap = 1e-7  # D ~ gap^2 / (2 Var) just above the mean
    assert op.kl_inf_rate(p, v, mu + gap).value == pytest.approx(gap**2 / (2 * var), rel=1e-5)
    # just below the maximum the rate grows like -P_V log(1 - ...): finite, large, monotone
    vals = op.kl_inf_rate(p, v, V - np.geomspace(1e-2, 1e-12, 11)).value
    assert np.all(np.isfinite(vals)) and np.all(np.diff(vals) > 0)


def test_monotone_in_target_and_nonnegative():
    for seed in range(50):
        p, v = random_pv(seed)
        rho = target_between(p, v, np.linspace(-0.5, 0.999, 40))
        vals = op.kl_inf_rate(p, v, rho).value
        assert np.all(vals >= 0)
        assert np.all(np.diff(vals) >= -1e-12 * (1 + vals[1:]))


def test_duality_with_the_kl_ball():
    """C(p, v, D(p, v, rho)) = rho: the two problems invert each other."""
    for seed in range(30):
        p, v = random_pv(seed)
        if np.ptp(v) == 0:
            continue
        rho = target_between(p, v, 0.4)
        d = op.kl_inf_rate(p, v, rho).value
        assert op.kl_ball_index(p, v, d).value == pytest.approx(rho, rel=1e-9, abs=1e-9)


def test_shift_and_scale_invariance():
    rng = np.random.default_rng(4)
    p, v = rng.dirichlet(np.ones(12)), rng.random(12)
    rho = target_between(p, v, 0.3)
    base = op.kl_inf_rate(p, v, rho)
    big = op.kl_inf_rate(p, 1e6 * v - 2e6, 1e6 * rho - 2e6)
    assert big.value == pytest.approx(base.value, rel=1e-7)
    assert big.multiplier == pytest.approx(base.multiplier / 1e6, rel=1e-7)


@pytest.mark.parametrize(
    "args, match",
    [
        (([0.5, 0.6], [0, 1], 0.7), r"p must sum to 1"),
        (([0.5, -0.5, 1.0], [0, 1, 2], 0.7), r"p has a negative entry"),
        (([0.5, 0.5], [np.nan, 1], 0.7), r"v has a non-finite entry nan"),
        (([0.5, 0.5], [0, 1], -np.inf), r"target has a non-finite entry -inf"),
        (([[0.5, 0.5]] * 2, [0, 1], [0.1, 0.2, 0.3]), r"shapes do not broadcast.*target \(3,\)"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        op.kl_inf_rate(*args)
    p, v, t = args
    if np.ndim(p) == 1:
        with pytest.raises(ValueError, match=match):
            op.KLInfRate(p, v, t)
