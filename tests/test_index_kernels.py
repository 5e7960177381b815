"""The compiled index kernels (optplan.fast._kernels) against the numpy references
(optplan.fast.kl_ball, kl_inf, l1_ball): statuses, values, q* and multipliers on random and
edge-case rows; the one-instance lane against the batched kernel; the fast log."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optplan.fast import _kernels, _roots, kl_ball
from optplan.fast.kl_ball import kl_ball_index
from optplan.fast.kl_inf import kl_inf_rate
from optplan.fast.l1_ball import l1_ball_index
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(
    not _kernels.AVAILABLE, reason="numba not installed (pip install 'optplan[jit]')"
)


def test_constants_are_the_references():
    assert _kernels.STEP_RTOL == _roots.STEP_RTOL
    assert _kernels.G_RTOL == _roots.G_RTOL
    assert _kernels.FINAL_STEP == _roots.FINAL_STEP
    assert _kernels.LARGE_S == kl_ball._LARGE_S
    assert _kernels.S_CAP == kl_ball._S_CAP
    assert _kernels.TINY == np.finfo(float).tiny


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
    handled = _kernels.kl_ball_rows(p, np.broadcast_to(v, p.shape), d, 100, *out)
    assert handled.mean() > 0.95, handled.mean()


def test_kernel_option_errors(monkeypatch):
    with pytest.raises(OptplanError, match="kernel must be one of"):
        kl_ball_index([0.5, 0.5], [0.0, 1.0], 0.1, kernel="fortran")
    monkeypatch.setattr(_kernels, "AVAILABLE", False)
    with pytest.raises(OptplanError, match="needs numba"):
        kl_ball_index([0.5, 0.5], [0.0, 1.0], 0.1, kernel="numba")
    # auto without numba: the numpy reference
    res = kl_ball_index([0.5, 0.5], [0.0, 1.0], 0.1, kernel="auto")
    assert res.status == "optimal"


# ---------------------------------------------------------------------------------------
# The other two kernels, the one-instance lane, the fast log


def tiny_rows(seed: int, B: int, S: int):
    """Rows where the best supported state (or every state but one) holds 1e-300..1e-20 of
    the mass, and ties in ``v``."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(S), size=B)
    tiny = 10.0 ** rng.uniform(-300, -20, size=B)
    cols = rng.integers(S, size=B)
    p[np.arange(B), cols] = tiny
    p /= p.sum(axis=1, keepdims=True)
    v = np.round(rng.normal(size=(B, S)) * 2) / 2
    return p, v


def kl_inf_rows(seed, B, S, v_scale, ties, zeros):
    """Random KL-inf rows: targets below, at and above ``p.v``, between it and ``max v``
    (near both ends), at and above ``max v``; zeros in ``p`` (the best state among them)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(S, 0.5), size=B)
    p[rng.random((B, S)) < zeros] = 0.0
    p[p.sum(axis=1) == 0, rng.integers(S)] = 1.0
    p /= p.sum(axis=1, keepdims=True)
    v = rng.normal(size=(B, S)) * v_scale
    if ties:
        v = np.round(v / v_scale) * v_scale
    mu, V = (p * v).sum(axis=1), v.max(axis=1)
    frac = rng.choice([-0.5, 0.0, 1e-12, 1e-6, 0.3, 0.9, 1.0 - 1e-9, 1.0, 1.5], size=B)
    frac = np.where(rng.random(B) < 0.5, rng.random(B), frac)
    return p, v, mu + frac * (V - mu)


def assert_same_kl_inf(p, v, rho):
    ref = kl_inf_rate(p, v, rho, kernel="numpy")
    new = kl_inf_rate(p, v, rho, kernel="numba")
    np.testing.assert_array_equal(new.status, ref.status)
    np.testing.assert_array_equal(np.isfinite(new.value), np.isfinite(ref.value))
    ok = np.isfinite(ref.value)
    # D and its multiplier are conditioned like 1/(V - rho) as rho nears max v: the two kernels
    # sum in different orders, and that round-off moves the root by eps / g'(r)
    cond = 1.0 + np.abs(rho - (p * v).sum(axis=-1)) / np.maximum(v.max(axis=-1) - rho, 1e-300)
    tol = 1e-12 * np.minimum(cond, 1e4)
    err = np.abs(new.value[ok] - ref.value[ok])
    assert (err <= tol[ok] * (1.0 + np.abs(ref.value[ok]))).all(), err.max()
    np.testing.assert_allclose(new.x, ref.x, rtol=0, atol=1e-11, equal_nan=True)
    # lam = dD/drho, in units of 1 / (the spread of v): at rho = p.v (to an ulp, which the two
    # kernels' sums may put on either side) one says 0 and the other ulp(p.v) / Var(v)
    finite = np.isfinite(ref.multiplier)
    np.testing.assert_array_equal(np.isfinite(new.multiplier), finite)
    unit = 1.0 / np.maximum(np.ptp(v, axis=-1), 1e-300)
    scale = tol * (np.abs(ref.multiplier) + unit)
    err = np.abs(new.multiplier - ref.multiplier)
    assert (err[finite] <= scale[finite]).all(), (err[finite] / scale[finite]).max()


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 12),
    v_scale=st.sampled_from([1e-6, 1.0, 1e6]),
    ties=st.booleans(),
    zeros=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_kl_inf_compiled_equals_numpy(seed, S, v_scale, ties, zeros):
    assert_same_kl_inf(*kl_inf_rows(seed, 40, S, v_scale, ties, zeros))


@pytest.mark.parametrize(
    "p, v, rho",
    [
        ([1.0], [0.3], 0.3),  # S = 1: rho = p.v
        ([1.0], [0.3], 0.5),  # S = 1: above max v
        ([0.5, 0.5, 0.0], [0.0, 1.0, 2.0], 1.5),  # best state with p = 0 (boundary possible)
        ([0.5, 0.5, 0.0], [0.0, 1.0, 2.0], 1.999999),
        ([0.2, 0.8], [0.0, 1.0], 1.0),  # rho = V: infeasible
        ([1e-300, 1.0 - 1e-300], [1.0, 0.0], 0.5),  # tiny mass on the best state
        ([0.3, 0.3, 0.4], [1.0, 1.0, 1.0], 1.0),  # constant v
        ([0.3, 0.3, 0.4], [0.0, 1.0, 2.0], 1.1),  # rho = p.v
    ],
)
def test_kl_inf_edge_cases(p, v, rho):
    assert_same_kl_inf(np.array([p]), np.array([v]), np.array([rho]))


def l1_rows(seed, B, S, ties, zeros):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(S, 0.5), size=B)
    p[rng.random((B, S)) < zeros] = 0.0
    p[p.sum(axis=1) == 0, rng.integers(S)] = 1.0
    p /= p.sum(axis=1, keepdims=True)
    v = rng.normal(size=(B, S))
    if ties:  # many equal values, at the top and at the margin
        v = np.round(v * 2) / 2
    d = rng.choice([-0.1, 0.0, 1e-300, 1e-12, 0.5, 1.0, 2.0, 1e300], size=B)
    d = np.where(rng.random(B) < 0.5, 2.2 * rng.random(B), d)
    return p, v, d


def assert_same_l1(p, v, d):
    ref = l1_ball_index(p, v, d, kernel="numpy")
    new = l1_ball_index(p, v, d, kernel="numba")
    np.testing.assert_array_equal(new.status, ref.status)
    scale = 1.0 + np.abs(v).max()
    np.testing.assert_allclose(new.value, ref.value, rtol=0, atol=1e-13 * scale)
    # the same drain order (ties included) gives the same q and margin bit for bit
    np.testing.assert_array_equal(new.x, ref.x)
    np.testing.assert_array_equal(new.multiplier, ref.multiplier)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 15),
    ties=st.booleans(),
    zeros=st.sampled_from([0.0, 0.5]),
    shared=st.booleans(),
)
def test_l1_compiled_equals_numpy(seed, S, ties, zeros, shared):
    p, v, d = l1_rows(seed, 40, S, ties, zeros)
    assert_same_l1(p, v[0] if shared else v, d)


def test_l1_ties_keep_the_stable_order():
    """Equal values drain in index order, whatever order the unstable sort leaves them in."""
    rng = np.random.default_rng(3)
    S = 200
    v = rng.integers(0, 4, size=S).astype(float)  # long runs of ties
    p = rng.dirichlet(np.ones(S))
    for d in (0.1, 0.5, 1.0, 1.7):
        assert_same_l1(p[None], v[None], np.array([d]))


@pytest.mark.parametrize(
    "fn, param",
    [
        (kl_ball_index, [0.0, 1e-300, 0.05, 3.0, 1e300, -1.0]),
        (l1_ball_index, [0.0, 1e-12, 0.3, 2.0, 1e300, -1.0]),
        (kl_inf_rate, None),
    ],
)
def test_one_instance_lane_equals_the_batch(fn, param):
    """A single call (the compiled one-instance lane) gives the batched kernel's row exactly,
    as a batch-shape-() BatchResult."""
    rng = np.random.default_rng(7)
    for S in (1, 2, 5, 70, 300):
        p, v = tiny_rows(S, 3, S) if S > 1 else (np.ones((3, 1)), np.zeros((3, 1)))
        p[1] = rng.dirichlet(np.ones(S))
        for i in range(3):
            params = param
            if params is None:
                mu, V = p[i] @ v[i], v[i].max()
                params = [mu - 1.0, mu, mu + 0.5 * (V - mu), V]
            batch = fn(
                np.repeat(p[i][None], len(params), 0),
                np.repeat(v[i][None], len(params), 0),
                np.array(params),
            )
            for j, r in enumerate(params):
                one = fn(p[i], v[i], r)
                assert one.shape == () and one.x.shape == (S,)
                assert str(one.status) == str(batch.status[j])
                np.testing.assert_array_equal(one.value, batch.value[j])
                np.testing.assert_array_equal(one.x, batch.x[j])
                np.testing.assert_array_equal(one.multiplier, batch.multiplier[j])
                assert int(one.iterations) == int(batch.iterations[j])


@pytest.mark.parametrize("fn", [kl_ball_index, l1_ball_index, kl_inf_rate])
def test_one_instance_lane_results_are_ordinary_batch_results(fn):
    """The lane's lazily made 0-d fields: ndarrays of the batch path's dtypes, made once,
    kept by pickling; unaligned or huge-``max_iter`` inputs, which
    the lane's compiled signature cannot take, go to the general path with the same answer."""
    import pickle

    p, v = np.array([0.2, 0.3, 0.5]), np.array([0.0, 0.5, 1.0])
    param = 0.6 if fn is kl_inf_rate else 0.3
    one = fn(p, v, param)
    batch = fn(p[None], v[None], np.array([param]))
    for name in ("value", "multiplier", "iterations"):
        got, ref = getattr(one, name), getattr(batch, name)[0]
        assert type(got) is np.ndarray and got.shape == () and got.dtype == ref.dtype
        assert got == ref
        assert getattr(one, name) is got  # made once
    twin = pickle.loads(pickle.dumps(fn(p, v, param)))
    assert twin.value == one.value and twin.multiplier == one.multiplier
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        one.missing  # noqa: B018
    # unaligned copies of p and v (a byte offset into a buffer)
    buf = np.zeros(8 * 3 + 1, dtype=np.uint8)
    pu = np.frombuffer(buf.data, dtype=float, count=3, offset=1)
    assert not pu.flags.aligned
    pu[...] = p
    assert fn(pu, v, param).value == one.value
    if fn is not l1_ball_index:
        assert fn(p, v, param, max_iter=2**70).value == one.value


@pytest.mark.parametrize(
    "fn, name", [(kl_ball_index, "radius"), (l1_ball_index, "radius"), (kl_inf_rate, "target")]
)
def test_one_instance_lane_keeps_the_checks(fn, name):
    p, v = np.array([0.5, 0.5]), np.array([0.0, 1.0])
    with pytest.raises(OptplanError, match="p must sum to 1"):
        fn(np.array([0.5, 0.6]), v, 0.1)
    with pytest.raises(OptplanError, match="p has a negative entry"):
        fn(np.array([-0.5, 1.5]), v, 0.1)
    with pytest.raises(OptplanError, match="v has a non-finite entry"):
        fn(p, np.array([0.0, np.nan]), 0.1)
    with pytest.raises(OptplanError, match=f"{name} has a non-finite entry"):
        fn(p, v, np.inf)
    # within the tolerance the lane's answer is the general path's
    q = np.array([0.5, 0.5 + 4e-10])
    assert fn(q, v, 0.3).value == fn(q, v, np.array(0.3)).value


def test_fast_log_is_within_an_ulp():
    k = _kernels.kernels()
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            10.0 ** rng.uniform(-300, 300, 20000),
            rng.random(20000),
            1e-17 * rng.random(100),
            [0.0, 1.0, 2.0**53, 1e300, np.nextafter(1.0, 2.0)],
        ]
    )
    n = x.size
    ell, w, u = np.empty(n), np.empty(n), np.empty(n)
    assert not k["_fill"](x, n, 1.0, 1.0, ell, w, u)
    ref = np.log1p(x)
    np.testing.assert_allclose(ell, ref, rtol=2.3e-16, atol=0)
    y = x[x >= np.finfo(float).tiny]
    buf = np.empty(y.size)
    got = k["_plogd"](np.ones(y.size), y, y.size, buf)
    assert got == pytest.approx(np.log(y).sum(), rel=1e-14, abs=1e-12)
    # beyond its range the fill says so, and the library log1p takes over
    assert k["_fill"](np.array([1e301]), 1, 1.0, 1.0, ell, w, u)
    # the iteration's fill (one division fewer): the same bound, and the same w and u
    ell2, w2, u2 = np.empty(n), np.empty(n), np.empty(n)
    assert not k["_fill"](x, n, 1.0, 1.0, ell, w, u)
    assert not k["_fill_same"](x, n, 1.0, ell2, w2, u2)
    np.testing.assert_allclose(ell2, ref, rtol=2.3e-16, atol=0)
    np.testing.assert_array_equal(w2, w)
    np.testing.assert_array_equal(u2, u)
    assert k["_fill_same"](np.array([1e301]), 1, 1.0, ell2, w2, u2)


def test_large_rows_use_the_vector_loops():
    """Rows with >= VECTOR_N supported states (the vectorized fill) against numpy, including
    tiny masses on the best state and radii at both ends."""
    S = 3 * _kernels.VECTOR_N
    p, v = tiny_rows(11, 30, S)
    d = 10.0 ** np.random.default_rng(1).uniform(-12, 3, 30)
    assert_same(p, v, d)
    p, v, rho = kl_inf_rows(12, 30, S, 1.0, True, 0.3)
    assert_same_kl_inf(p, v, rho)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 40),
    kind=st.sampled_from(["kl_ball", "kl_inf", "l1"]),
)
def test_compiled_equals_numpy_many(seed, S, kind):
    if kind == "kl_ball":
        assert_same(*rows(seed, 40, S, 1.0, seed % 2 == 0, (-10, 3)))
    elif kind == "kl_inf":
        assert_same_kl_inf(*kl_inf_rows(seed, 40, S, 1.0, seed % 2 == 0, 0.3))
    else:
        assert_same_l1(*l1_rows(seed, 40, S, seed % 2 == 0, 0.3))


@pytest.mark.parametrize("ties", [False, True])
def test_l1_partial_sort_equals_the_full_sort(ties):
    """Rows of more than ``L1_INSERTION_N + 1`` states drain by the partial quicksort (only
    the drained part sorted): the same q and margin bit for bit as the numpy reference's full
    stable sort, for radii from 0 to past full drain (where the full sort takes over)."""
    rng = np.random.default_rng(5)
    S = 384
    p = rng.dirichlet(np.full(S, 0.5), size=12)
    p[rng.random(p.shape) < 0.3] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    v = rng.normal(size=(12, S))
    if ties:
        v = np.round(v * 2) / 2
    for d in (0.0, 1e-300, 1e-12, 0.01, 0.3, 1.0, 1.9, 2.0, 5.0, -1.0):
        assert_same_l1(p, v, np.full(12, d))
        for i in range(3):  # and the one-instance lane
            assert_same_l1(p[i][None], v[i][None], np.array([d]))


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(_kernels.L1_INSERTION_N, 300),
    order=st.sampled_from(["random", "ascending", "descending", "few values", "constant"]),
    zeros=st.sampled_from([0.0, 0.5, 0.95]),
)
def test_l1_partial_sort_on_ordered_and_tied_rows(seed, S, order, zeros):
    """The partial quicksort's pivots on the inputs that trouble quicksorts (sorted, reversed,
    few distinct values, one value) and sparse masses, at sizes across the insertion
    threshold: the reference's q and margin bit for bit, batched and one instance at a time."""
    rng = np.random.default_rng(seed)
    p, v, d = l1_rows(seed, 6, S, False, zeros)
    if order == "ascending":
        v = np.sort(v, axis=1)
    elif order == "descending":
        v = -np.sort(v, axis=1)
    elif order == "few values":
        v = rng.integers(0, 3, size=v.shape).astype(float)
    elif order == "constant":
        v = np.full(v.shape, 0.25)
    assert_same_l1(p, v, d)
    for i in range(2):
        assert_same_l1(p[i][None], v[i][None], d[i : i + 1])
        one = l1_ball_index(p[i], v[i], float(d[i]))
        _same_bits(one.x, l1_ball_index(p[i][None], v[i][None], d[i : i + 1], kernel="numpy").x[0])


def test_long_rows_sample_start_and_loose_bracket():
    """Rows of >= SUB_N states (a sample's root as the start, the bracket's upper end from
    min delta) against numpy: the same root."""
    S = _kernels.SUB_N + 500
    p, v = tiny_rows(13, 6, S)
    p[0] = np.random.default_rng(2).dirichlet(np.ones(S))
    d = np.array([1e-9, 1e-3, 0.05, 0.7, 5.0, 200.0])
    assert_same(p, v, d)


def _same_bits(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 140),
    ties=st.booleans(),
    validate=st.booleans(),
)
def test_into_lanes_equal_the_one_lanes(seed, S, ties, validate):
    """The ``_*_into`` entry points (``q`` given by the caller, scalars returned: the public
    one-instance lane) give the ``_*_one`` kernels' outcome bit for bit: values, ``q``,
    multipliers, iterations and codes, on random and edge-case rows (radii 0, negative, tiny,
    huge; targets at and past the ends; ties; zeros; long rows that drain by selection)."""
    k = _kernels.kernels()
    p, v, d = rows(seed, 6, S, 1.0, ties, (-10, 3))
    pi, vi, rho = kl_inf_rows(seed, 6, S, 1.0, ties, 0.3)
    pl, vl, dl = l1_rows(seed, 6, S, ties, 0.3)
    for i in range(6):
        one = k["_kl_ball_one"](p[i], v[i], d[i], 100, validate)
        q = np.full(S, 7.0)
        into = k["_kl_ball_into"](p[i], v[i], d[i], 100, validate, q)
        assert into[2:] == one[2:4]
        if one[3]:  # handled: the outputs are defined
            _same_bits(into[:2], one[:2])
            _same_bits(q, one[4])
        one = k["_kl_inf_one"](pi[i], vi[i], rho[i], 100, validate)
        q = np.full(S, 7.0)
        into = k["_kl_inf_into"](pi[i], vi[i], rho[i], 100, validate, q)
        assert into[2:] == one[2:4]
        if one[3] != _kernels.LEFT:
            _same_bits(into[:2], one[:2])
            _same_bits(q, one[4])
        one = k["_l1_one"](pl[i], vl[i], dl[i], validate)
        q = np.full(S, 7.0)
        into = k["_l1_into"](pl[i], vl[i], dl[i], validate, q)
        assert into[2] == one[2]
        if one[2] != _kernels.LEFT:
            _same_bits(into[:2], one[:2])
            _same_bits(q, one[3])


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), S=st.integers(1, 40), ties=st.booleans())
def test_public_single_call_equals_its_batch_row(seed, S, ties):
    """One instance through the public functions (the compiled one-instance lane) returns the
    batched call's row bit for bit, as a batch-shape-() BatchResult with the same fields, on
    rows whose radii and targets cover the edge cases (0, negative, past max v)."""
    cases = (
        (kl_ball_index, rows(seed, 8, S, 1.0, ties, (-10, 3))),
        (kl_inf_rate, kl_inf_rows(seed, 8, S, 1.0, ties, 0.3)),
        (l1_ball_index, l1_rows(seed, 8, S, ties, 0.3)),
    )
    for fn, (p, v, d) in cases:
        batch = fn(p, v, d)
        for i in range(p.shape[0]):
            one = fn(p[i], v[i], float(d[i]))
            assert type(one) is type(batch)
            assert one.shape == () and one.x.shape == (S,)
            assert (one.method, one.solver) == (batch.method, batch.solver)
            for name in ("value", "x", "multiplier", "status", "iterations"):
                got, want = getattr(one, name), getattr(batch, name)[i]
                assert isinstance(got, np.ndarray) and got.dtype == getattr(batch, name).dtype
                _same_bits(got, want)
