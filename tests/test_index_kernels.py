"""The compiled KL-ball row kernel (optplan.fast._index_kernels) against the numpy reference
(optplan.fast.kl_ball): statuses, values, q* and multipliers on random and edge-case rows."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optplan.fast import _index_kernels, _roots, kl_ball
from optplan.fast.kl_ball import kl_ball_index
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(
    not _index_kernels.AVAILABLE, reason="numba not installed (pip install 'optplan[jit]')"
)


def test_constants_are_the_references():
    assert _index_kernels.STEP_RTOL == _roots.STEP_RTOL
    assert _index_kernels.G_RTOL == _roots.G_RTOL
    assert _index_kernels.FINAL_STEP == _roots.FINAL_STEP
    assert _index_kernels.LARGE_S == kl_ball._LARGE_S
    assert _index_kernels.S_CAP == kl_ball._S_CAP
    assert _index_kernels.TINY == np.finfo(float).tiny


def rows(seed: int, B: int, S: int, v_scale: float, ties: bool, log_d: tuple[float, float]):
    """Random rows with zeros, single-state supports, ties in ``v`` and radii over a range,
    a few exactly 0 or negative."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(S, 0.5), size=B)
    p[rng.random((B, S)) < 0.3] = 0.0
    p[p.sum(axis=1) == 0, rng.integers(S)] = 1.0
    p /= p.sum(axis=1, keepdims=True)
    v = rng.normal(size=(B, S)) * v_scale
    if ties:
        v = np.round(v / v_scale) * v_scale
    d = 10.0 ** rng.uniform(*log_d, size=B)
    special = rng.random(B)
    d[special < 0.03] = 0.0
    d[(special >= 0.03) & (special < 0.05)] = -0.1
    return p, v, d


def assert_same(p, v, d):
    ref = kl_ball_index(p, v, d, kernel="numpy")
    new = kl_ball_index(p, v, d, kernel="numba")
    np.testing.assert_array_equal(new.status, ref.status)
    scale = 1.0 + np.abs(v).max(axis=-1)
    np.testing.assert_allclose(new.value, ref.value, rtol=0, atol=1e-13 * scale.max())
    np.testing.assert_allclose(new.x, ref.x, rtol=0, atol=1e-12, equal_nan=True)
    # The multiplier lam = dC/dd is conditioned like 1/sqrt(d) at small radii (the root s
    # moves by ~eps * scale / g'(s) with g' ~ 2d and the terms of g ~ sqrt(d)): both kernels
    # run the same iteration and differ by round-off in the sums, amplified by that factor.
    # Measured: at d = 5e-9 with v in [-1e6, 1e6] and a best state of mass 3.5e-6, the two
    # differ by 1.4e-9 relative while each is 1.6e-8 from a 80-digit root (the numpy
    # reference's own accuracy there, not the compiled kernel's: noted for the kernel work).
    # Elsewhere lam = e^-s / a0 carries the root's absolute error in s, eps * scale / g'(s):
    # measured up to 4.7e-11 relative at s ~ 440 (v ~ 1e-6, a best state of tiny mass).
    finite = np.isfinite(ref.multiplier)
    np.testing.assert_array_equal(np.isfinite(new.multiplier), finite)
    with np.errstate(divide="ignore"):
        rtol = 1e-10 + 1e-12 / np.sqrt(np.where(d > 0, d, np.inf))
    err = np.abs(new.multiplier[finite] - ref.multiplier[finite])
    assert (err <= rtol[finite] * np.abs(ref.multiplier[finite]) + 1e-300).all(), err.max()


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 12),
    v_scale=st.sampled_from([1e-6, 1e-2, 1.0, 1e3, 1e6]),
    ties=st.booleans(),
    log_d=st.sampled_from([(-12, -6), (-6, -1), (-1, 1), (1, 3), (-10, 3)]),
)
def test_compiled_equals_numpy(seed, S, v_scale, ties, log_d):
    assert_same(*rows(seed, 40, S, v_scale, ties, log_d))


@pytest.mark.parametrize(
    "p, v, d",
    [
        ([1.0, 0.0, 0.0], [0.0, 1.0, 2.0], 0.7),  # one-state support: closed form, leftover
        ([0.5, 0.5, 0.0], [1.0, 1.0, 3.0], 0.3),  # v constant on the support
        ([0.5, 0.5, 0.0], [1.0, 1.0, 0.0], 0.3),  # constant, no better zero state: q = p
        ([0.2, 0.8, 0.0], [0.0, 1.0, 1.5], 50.0),  # boundary: eta = max V
        ([0.2, 0.8], [0.0, 1.0], 1e-300),  # tiny radius: s ~ -350, the last correction
        ([1e-300, 1.0 - 1e-300, 0.0], [1.0, 0.0, 0.5], 5.0),  # large-s form (s ~ 690)
        ([0.2, 0.8], [0.0, 1.0], 1e300),  # huge radius
        ([0.3, 0.3, 0.4], [0.0, 1.0, 2.0], 0.0),  # radius 0
        ([0.3, 0.3, 0.4], [0.0, 1.0, 2.0], -1.0),  # infeasible
    ],
)
def test_edge_cases(p, v, d):
    assert_same(np.array([p]), np.array([v]), np.array([d]))


def test_compiled_kernel_handles_the_common_rows():
    """The compiled kernel is the one that runs: on UCRL-like rows (empirical frequencies,
    radii ~ S / n) it leaves fewer than 5% to the numpy reference."""
    rng = np.random.default_rng(0)
    S, B = 20, 2000
    n = rng.integers(1, 500, size=B)
    p = rng.multinomial(n, rng.dirichlet(np.ones(S), size=B)) / n[:, None]
    v = rng.normal(size=S)
    d = S / n
    out = [np.empty(B), np.empty((B, S)), np.empty(B), np.empty(B, dtype=int)]
    handled = _index_kernels.kl_ball_rows(p, np.broadcast_to(v, p.shape), d, 100, *out)
    assert handled.mean() > 0.95, handled.mean()


def test_kernel_option_errors(monkeypatch):
    with pytest.raises(OptplanError, match="kernel must be one of"):
        kl_ball_index([0.5, 0.5], [0.0, 1.0], 0.1, kernel="fortran")
    monkeypatch.setattr(_index_kernels, "AVAILABLE", False)
    with pytest.raises(OptplanError, match="needs numba"):
        kl_ball_index([0.5, 0.5], [0.0, 1.0], 0.1, kernel="numba")
    # auto without numba: the numpy reference
    res = kl_ball_index([0.5, 0.5], [0.0, 1.0], 0.1, kernel="auto")
    assert res.status == "optimal"
