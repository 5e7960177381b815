r"""Compiled row kernels for the three index problems (optional: needs ``numba``).

The numpy kernels of :mod:`optplan.fast.kl_ball`, :mod:`optplan.fast.kl_inf` and
:mod:`optplan.fast.l1_ball` are the reference. They spend their time in interpreter and
dispatch overhead: a Halley step is some 40 numpy calls on ``(B, S)`` temporaries, about
0.3 ms for 200 rows of 4 states, while the arithmetic is a few hundred flops. Here one
compiled function per row does the same steps in scalars, and the batched kernels loop over
the rows inside the compiled code with ``O(S)`` work arrays (no ``B x S`` temporaries).

**KL ball** (:func:`_kl_row`):

- the same setup (``V``, ``V_I``, ``delta``, ``P_top``, the explicit bracket, the boundary
  test at ``s_max``, the start ``s0``), except on rows of ``>= SUB_N`` supported states: the
  bracket's upper end from ``min delta`` instead of ``sum p log delta`` (looser, still an
  upper end: one pass of logs fewer) and the start from a sample's root (:func:`_sample_start`);
- the same stationarity equation in ``s``, in its direct form or, where the numpy kernel
  switches (``s + log(mean delta) > 20``), its large-s form, with Halley's (Newton's) step and
  the stopping rule of :func:`optplan.fast._roots.newton_bracketed`;
- the same last Newton correction where ``|s| > 16``, kept outside ``s`` as a factor of
  ``e^s``;
- the same ``q``, ``lam`` and value formulas (interior and boundary), including the leftover
  mass and the ``tiny`` floor.

It leaves to the numpy kernel, which owns them: radius ``<= 0``, roots beyond ``s = 600``
(its overflow-safe forms) and rows that do not converge.

**KL-inf** (:func:`_kl_inf_row`): the same cases (``rho <= p.v``: 0; ``rho >= V``:
infeasible), brackets, start and Newton iteration in ``r = log(1 - lam (V - rho))`` as
:func:`optplan.fast.kl_inf.kl_inf_rate`; rows that do not converge are left to numpy.

**L1 ball** (:func:`_l1_partial`, :func:`_l1_row`): the greedy closed form of
:mod:`optplan.fast.l1_ball`. Only the states the ball drains need the drain order (increasing
``v``, ties in index order, the best state last): a quicksort on ``(value, index)`` pairs
(all keys distinct, so the order is the numpy path's stable one) sorts the partitions before
the margin and drops those after it, where ``q = p``; short rows are insertion-sorted as they
are copied. A shared ``v`` (one sort for the batch) and balls that drain nearly every state
take the full order: numba's default (unstable) ``argsort`` plus a fix-up that sorts the
indices inside each run of equal values.

**Speed at large S.** A pass of ``math.log1p`` costs ~14 ns an element (a libm call per
element, which also stops LLVM from vectorizing the loop): at ``S = 10^4`` the KL-ball row's
eight passes were 1.3 ms. The direct form's sums are therefore computed in two loops: one
fills ``log1p(delta e^s)``, ``w`` and ``u`` per element with a branch-free ``log``
(:func:`_log_pos`: fdlibm's ``__ieee754_log`` reduction and polynomial, error < 1 ulp; the
``log1p`` correction ``c / u`` of fdlibm's ``log1p``), which LLVM vectorizes; one sums them
in four interleaved partial sums (a fixed order: a row gives the same bits alone or in a
batch). Elements where
``delta e^s > 1e300`` fall back to ``math.log1p``. Short rows (one scalar loop,
:func:`_sums_direct`) use the same fast ``log1p``. One instance from Python goes through the
``_*_into`` entries: ``q`` comes from the caller and only scalars are returned (boxing a
returned array, or five work allocations, cost as much as a row at ``S = 10``).
``tests/test_index_kernels.py`` compares
every kernel with its numpy reference on random and edge-case rows (values, ``q``,
multipliers, statuses) and the fast ``log`` with numpy's.
"""

from __future__ import annotations

import importlib.util
import math
import threading

import numpy as np

__all__ = [
    "AVAILABLE",
    "kl_ball_rows",
    "kl_ball_gathered",
    "kl_ball_one",
    "kl_inf_rows",
    "kl_inf_one",
    "l1_rows",
    "l1_one",
    "valid_one",
]

#: numba is installed (optional dependency: pip install "optplan[jit]"). It is imported, and
#: the kernels compiled (or loaded from numba's cache), on the first call, not with optplan.
AVAILABLE = importlib.util.find_spec("numba") is not None

# The constants of optplan.fast._roots and optplan.fast.kl_ball (copied as plain floats so
# the compiled code sees literals; test_index_kernels checks they match).
_EPS = 2.220446049250313e-16
STEP_RTOL = 4 * _EPS
G_RTOL = 8 * _EPS
FINAL_STEP = 1e-9
LARGE_S = 20.0
S_CAP = 1e300
FAR_S = 16.0
TINY = 2.2250738585072014e-308
#: Rows with at least this many supported states use the vectorized loops (:func:`_fill`).
VECTOR_N = 64
#: Rows with at least this many supported states start from a sample's root
#: (:func:`_sample_start`) of this many states.
SUB_N = 4096
SUB_M = 512
#: The L1 kernel's quicksort sorts segments of at most this many states by insertion.
L1_INSERTION_N = 16
#: Rows of at most this many states get their drain order by an insertion sort (no
#: allocation, no tie fix-up: it is stable by construction).
SORT_SMALL_N = 16
#: optplan._checks.ROW_SUM_TOL
ROW_SUM_TOL = 1e-9

#: Per-row outcome codes of the compiled kernels (the wrappers map them to statuses).
DONE, INFEASIBLE_ROW, LEFT = 0, 1, -1

# fdlibm e_log.c: the polynomial of log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f)
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951


# ---------------------------------------------------------------------------------------
# A vectorizable log


def _log_pos(x):  # pragma: no cover - compiled by numba
    """``log x`` for a positive normal finite ``x``, branch-free (fdlibm's ``__ieee754_log``:
    ``x = 2^k m`` with ``m`` in ``(sqrt(2)/2, sqrt(2)]``, ``f = m - 1`` exact, the degree-14
    polynomial in ``s = f / (2 + f)``; error < 1 ulp)."""
    bits = _f2i(x)  # noqa: F821 (bound at compile time: _bitcasts, below)
    k = ((bits >> 52) & 0x7FF) - 1023
    m = _i2f((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)  # noqa: F821
    big = m > _SQRT2
    m = 0.5 * m if big else m
    k = k + 1 if big else k
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    R = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7))) + w * (_LG2 + w * (_LG4 + w * _LG6))
    hfsq = 0.5 * f * f
    dk = float(k)
    return dk * _LN2_HI - ((hfsq - (s * (hfsq + R) + dk * _LN2_LO)) - f)


def _log1p_pos(x):  # pragma: no cover - compiled by numba
    """``log1p x`` for ``0 <= x <= 1e300``: ``log u + c / u`` with ``u = 1 + x`` rounded and
    ``c`` its rounding error, computed exactly (fdlibm's ``log1p`` correction)."""
    u = 1.0 + x
    c = x - (u - 1.0) if x < 1.0 else 1.0 - (u - x)
    return _log_pos(u) + c / u


def _log1p_recip(x):  # pragma: no cover - compiled by numba
    """``(log1p x, 1 / (1 + x))`` for ``0 <= x <= 1e300``: :func:`_log1p_pos` with its
    correction ``c / u`` taken as ``c * (1 / u)``, the reciprocal its callers need anyway (one
    division fewer per element; the correction is below an ulp of ``log u``, so the product's
    rounding stays within the error bound)."""
    u = 1.0 + x
    c = x - (u - 1.0) if x < 1.0 else 1.0 - (u - x)
    t = 1.0 / u
    return _log_pos(u) + c * t, t


def _fill_same(delta, n, z, ell, w, u):  # pragma: no cover - compiled by numba
    """:func:`_fill` with ``zq = z`` (every iteration step): ``1 + delta z`` is divided once
    (:func:`_log1p_recip`), two divisions per element instead of three."""
    bad = False
    for j in range(n):
        dz = delta[j] * z
        ell_j, t = _log1p_recip(dz)
        ell[j] = ell_j
        w[j] = t
        u[j] = dz * t
        bad |= not dz <= 1e300
    return bad


def _fill(delta, n, z, zq, ell, w, u):  # pragma: no cover - compiled by numba
    """``ell = log1p(delta z)``, ``w = 1 / (1 + delta zq)``, ``u = delta zq w`` on the first
    ``n`` entries (vectorized); returns whether some ``delta z`` is beyond the fast log's
    range (then :func:`_fill_lib` redoes it)."""
    bad = False
    for j in range(n):
        dz = delta[j] * z
        ell[j] = _log1p_pos(dz)
        dq = delta[j] * zq
        t = 1.0 / (1.0 + dq)
        w[j] = t
        u[j] = dq * t
        bad |= not dz <= 1e300
    return bad


def _fill_lib(delta, n, z, zq, ell, w, u):  # pragma: no cover - compiled by numba
    for j in range(n):
        ell[j] = math.log1p(delta[j] * z)
        dq = delta[j] * zq
        t = 1.0 / (1.0 + dq)
        w[j] = t
        u[j] = dq * t


def _sums(p, ell, w, u, n):  # pragma: no cover - compiled by numba (fastmath: reassoc)
    """``(sum p w, sum p u, sum p ell, sum p w^2, sum p w u, sum p w^2 u)`` (vectorized: the
    order of the sums is the compiler's)."""
    a0 = 0.0
    us = 0.0
    L = 0.0
    a2 = 0.0
    b1 = 0.0
    b2 = 0.0
    for j in range(n):
        pw = p[j] * w[j]
        pwu = pw * u[j]
        a0 += pw
        us += p[j] * u[j]
        L += p[j] * ell[j]
        a2 += pw * w[j]
        b1 += pwu
        b2 += pwu * w[j]
    return a0, us, L, a2, b1, b2


def _sums_direct(ps, delta, n, z):  # pragma: no cover - compiled by numba
    """:func:`_sums` of :func:`_fill` in one scalar loop (the fast ``log1p`` of
    :func:`_log1p_pos`, ``math.log1p`` beyond its range): faster for short rows
    (``n < VECTOR_N``), where the vector loops do not pay."""
    a0 = 0.0
    us = 0.0
    L = 0.0
    a2 = 0.0
    b1 = 0.0
    b2 = 0.0
    for j in range(n):
        pj = ps[j]
        dz = delta[j] * z
        if dz <= 1e300:
            ell, w = _log1p_recip(dz)
        else:
            w = 1.0 / (1.0 + dz)
            ell = math.log1p(dz)
        u = dz * w
        pw = pj * w
        pwu = pw * u
        a0 += pw
        us += pj * u
        L += pj * ell
        a2 += pw * w
        b1 += pwu
        b2 += pwu * w
    return a0, us, L, a2, b1, b2


def _plogd(ps, delta, n, buf):  # pragma: no cover - compiled by numba
    """``sum_{delta > 0} p log delta`` (vectorized; math.log where ``delta`` is not normal)."""
    if n < VECTOR_N:
        total = 0.0
        for j in range(n):
            if delta[j] > 0.0:
                total += ps[j] * math.log(delta[j])
        return total
    bad = False
    for j in range(n):
        dx = delta[j]
        ok = dx >= TINY and dx <= 1.7e308
        buf[j] = ps[j] * _log_pos(dx if ok else 1.0)
        bad |= (not ok) and dx > 0.0
    total = 0.0
    for j in range(n):
        total += buf[j]
    if bad:
        total = 0.0
        for j in range(n):
            if delta[j] > 0.0:
                total += ps[j] * math.log(delta[j])
    return total


# ---------------------------------------------------------------------------------------
# KL ball


def _g(s, ps, delta, n, d, log_mean_delta, P_top, mean_delta, ell, w, u):  # pragma: no cover
    """``(g, g', scale, g'')`` of the stationarity equation at ``s``: the direct form, or the
    large-s form (``g'' = 0``: Newton steps) where the numpy kernel uses it."""
    if s + log_mean_delta > LARGE_S:
        g, dg, scale = _g_large_s(s, ps, delta, n, d, P_top, mean_delta)
        return g, dg, scale, 0.0
    z = math.exp(min(s, 700.0))
    if n < VECTOR_N:
        a0, u_sum, L, a2, b1, b2 = _sums_direct(ps, delta, n, z)
    else:
        if _fill_same(delta, n, z, ell, w, u):
            _fill_lib(delta, n, z, z, ell, w, u)
        a0, u_sum, L, a2, b1, b2 = _sums(ps, ell, w, u, n)
    log_a0 = math.log(a0) if a0 < 0.5 else math.log1p(-u_sum)
    g = L + log_a0 - d
    scale = L - log_a0 + d
    dg = a2 / a0 - a0
    d2g = (a2 * b1 - 2.0 * b2 * a0) / (a0 * a0) + b1
    return g, dg, scale, d2g


def _g_large_s(s, p, delta, n, d, P_top, mean_delta):  # pragma: no cover - compiled by numba
    """``(g, g', scale)`` in the large-s form (:func:`optplan.fast.kl_ball._g_large_s`, one
    row, the same operations)."""
    e = math.exp(-s) / mean_delta
    B = 0.0
    M = 0.0
    m = 0.0
    for j in range(n):
        if delta[j] > 0.0:
            dn = delta[j] / mean_delta
            B += p[j] / (dn + e)
            M += p[j] * math.log(dn + e)
            m += p[j]
    log_md = math.log(mean_delta)
    top = P_top * math.exp(min(s, 700.0)) * mean_delta
    log_top = math.log(P_top) + s + log_md
    if s <= 700.0:
        log_c = math.log(top + B)
    else:
        lb = math.log(B)
        hi_ = max(log_top, lb)
        log_c = hi_ + math.log1p(math.exp(-abs(log_top - lb)))
    top_s = P_top * (s + log_md)
    g = log_c - top_s + M - d
    scale = abs(log_c) + abs(top_s) + abs(M) + d
    w_bar = 0.0
    for j in range(n):
        if delta[j] > 0.0:
            w_bar += p[j] * (e / (delta[j] / mean_delta + e))
    w_bar /= m
    r_bar = B / m
    cov = 0.0
    y2 = 0.0
    for j in range(n):
        if delta[j] > 0.0:
            dn = delta[j] / mean_delta
            r = 1.0 / (dn + e)
            cov += p[j] * (e * r - w_bar) * (r - r_bar)
            y2 += p[j] * (dn * r) * (dn * r)
    cov *= m
    ea = math.exp(-abs(log_top))
    if log_top > 0.0:
        dg = (y2 + cov * ea) / (1.0 + B * ea)
    else:
        dg = (ea * y2 + cov) / (ea + B)
    return g, dg, scale


def _log_expm1(d):  # pragma: no cover - compiled by numba
    if d > 1.0:
        return d + math.log(-math.expm1(-d))
    return math.log(math.expm1(d))


def _leftover(p, v, q, S, V):  # pragma: no cover - compiled by numba
    """``1 - sum(q)`` (if positive) onto the first zero-probability state at ``V``
    (:func:`optplan.fast._simplex.with_leftover`)."""
    total = 0.0
    for x in range(S):
        total += q[x]
    left = max(1.0 - total, 0.0)
    if left > 0.0:
        for x in range(S):
            if p[x] == 0.0 and v[x] == V:
                q[x] += left
                break


def _kl_row(p, v, d, max_iter, q, ps, delta, ell, w, u):  # pragma: no cover - numba
    """One KL-ball row: fill ``q`` and return ``(value, lam, iterations, handled)``;
    ``ps, delta, ell, w, u``: work arrays of length ``>= S``."""
    S = p.shape[0]
    if not d > 0.0:
        return math.nan, math.nan, 0, False
    V = -math.inf
    V_I = -math.inf
    for x in range(S):
        vx = v[x]
        if vx > V:
            V = vx
        if p[x] > 0.0 and vx > V_I:
            V_I = vx
    # the supported entries, compacted
    n = 0
    P_top = 0.0
    mean_delta = 0.0
    sq = 0.0
    small = S < VECTOR_N
    sum_plogd = 0.0
    d_min = math.inf
    for x in range(S):
        px = p[x]
        if px > 0.0:
            dx = V_I - v[x]
            ps[n] = px
            delta[n] = dx
            n += 1
            if dx == 0.0:
                P_top += px
            else:
                d_min = min(d_min, dx)
                if small:
                    sum_plogd += px * (_log_pos(dx) if TINY <= dx <= 1.7e308 else math.log(dx))
            mean_delta += px * dx
            sq += px * dx * dx
    gap = V - V_I
    if P_top >= 1.0 - 1e-15:  # v constant on the support: closed form
        keep = math.exp(-d) if V > V_I else 1.0
        for x in range(S):
            q[x] = keep * p[x]
        _leftover(p, v, q, S, V)
        return V - keep * gap, keep * gap, 0, True
    if n >= SUB_N:  # a looser upper end, one pass of logs fewer: sum p log delta >= m log d_min
        sum_plogd = (1.0 - P_top) * math.log(d_min)
    elif not small:
        sum_plogd = _plogd(ps, delta, n, ell)
    var_delta = max(sq - mean_delta * mean_delta, 1e-300)
    log_mean_delta = math.log(mean_delta)
    lo = _log_expm1(d) - log_mean_delta
    hi = (d - (math.log(P_top) if P_top > 0.0 else -math.inf) - sum_plogd) / (1.0 - P_top)
    hi = min(hi + 1.0, S_CAP)
    lo = min(lo, hi - 1.0)
    s_max = -math.log(gap) if gap > 0.0 else math.inf
    boundary = False
    if s_max < hi:
        g_cap = _g(s_max, ps, delta, n, d, log_mean_delta, P_top, mean_delta, ell, w, u)[0]
        if g_cap <= 0.0:
            boundary = True
        hi = s_max
    it = 0
    sqrt_g_rtol = math.sqrt(G_RTOL)
    if boundary:
        s = s_max
    else:
        s0 = math.log(math.sqrt(2.0 * d / var_delta))
        if n >= SUB_N:  # a start from a strided sample of the row (see _sample_start)
            s0 = _sample_start(s0, lo, hi, ps, delta, n, d, P_top, ell, w, u)
        s = min(max(s0, lo), hi)
        converged = False
        while it < max_iter:
            it += 1
            g, dg, scale, d2g = _g(s, ps, delta, n, d, log_mean_delta, P_top, mean_delta, ell, w, u)
            if g < 0.0:
                lo = s
            else:
                hi = s
            sn = s - 2.0 * g * dg / (2.0 * dg * dg - g * d2g)
            bad = not (sn > lo and sn < hi)
            if bad:
                sn = 0.5 * (lo + hi)
            ag = abs(g)
            ax = max(1.0, abs(s))
            step = abs(sn - s)
            root = ag <= G_RTOL * scale
            done = (
                root
                or ((not bad) and step <= FINAL_STEP * ax and ag <= sqrt_g_rtol * scale)
                or step <= STEP_RTOL * ax
                or (hi - lo) <= STEP_RTOL * ax
            )
            if not root:
                s = sn
            if done:
                converged = True
                break
        if not converged:
            return math.nan, math.nan, it, False
    if s > 600.0:  # the numpy kernel's overflow-safe forms
        return math.nan, math.nan, it, False
    # q, lam and the value at s (interior: sum_I q = 1; boundary: leftover mass). Where an
    # ulp of s matters (|s| > 16), the numpy kernel's last Newton correction, kept outside
    # s as the factor e^corr of e^s (used for w and q; l stays at the uncorrected s).
    z = math.exp(min(s, 700.0))
    zq = z
    if not boundary and abs(s) > FAR_S:
        g_end, dg_end, _, _ = _g(s, ps, delta, n, d, log_mean_delta, P_top, mean_delta, ell, w, u)
        corr = -g_end / dg_end if dg_end > 0.0 else 0.0
        if abs(corr) <= 1e-12 * max(1.0, abs(s)) and corr != 0.0:
            zq = math.exp(s) * math.exp(corr)
            s = s + corr
    if n < VECTOR_N:
        a0 = 0.0
        u_sum = 0.0
        L = 0.0
        for j in range(n):
            dz = delta[j] * z
            L += ps[j] * (_log1p_pos(dz) if dz <= 1e300 else math.log1p(dz))
            dq = delta[j] * zq
            t = 1.0 / (1.0 + dq)
            a0 += ps[j] * t
            u_sum += ps[j] * (dq * t)
    else:
        if _fill(delta, n, z, zq, ell, w, u):
            _fill_lib(delta, n, z, zq, ell, w, u)
        a0, u_sum, L, _, _, _ = _sums(ps, ell, w, u, n)
    log_a0 = math.log(a0) if a0 < 0.5 else math.log1p(-u_sum)
    if boundary:
        lam = math.exp(L - s - d)
        factor = math.exp(L - d)
    else:
        lam = math.exp(-s - log_a0)
        factor = 1.0 / a0
    mass = 0.0
    for x in range(S):
        px = p[x]
        if px > 0.0:
            qx = max(px * factor / (1.0 + (V_I - v[x]) * zq), TINY)
            q[x] = qx
            mass += qx
        else:
            q[x] = 0.0
    # one pass: normalize (interior), the value, and the total for the leftover mass (the
    # sums in _leftover's and the value loop's order: the same bits as separate passes)
    val = 0.0
    total = 0.0
    if boundary:
        for x in range(S):
            qx = q[x]
            total += qx
            if p[x] > 0.0:
                val += qx * (V - v[x])
    else:
        for x in range(S):
            qx = q[x] / mass
            q[x] = qx
            total += qx
            if p[x] > 0.0:
                val += qx * (V - v[x])
    left = max(1.0 - total, 0.0)
    if left > 0.0:  # onto the first zero-probability state at V (_leftover)
        for x in range(S):
            if p[x] == 0.0 and v[x] == V:
                q[x] += left
                break
    return V - val, lam, it, True


def _sample_start(s0, lo, hi, ps, delta, n, d, P_top, ell, w, u):  # pragma: no cover - numba
    """A start for the root search on a long row: Halley's iteration on ``SUB_M`` states taken
    at a fixed stride (their mass scaled up to the row's mass off the top, ``1 - P_top``) plus
    the top's mass ``P_top`` at ``delta = 0``, to a step of ``1e-3``. Only the start: the
    iteration on the full row from there is the reference's, with its bracket ``[lo, hi]``, so
    the root is the same; it needs two or three passes over the row instead of five or six
    (each pass a ``log1p`` per state). Returns ``s0`` unchanged when the sample is unusable
    (the large-s form, or a step that leaves the bracket)."""
    stride = n // SUB_M
    m = 0
    mass = 0.0
    for j in range(0, n, stride):  # the sample's delta > 0 entries, in the work arrays' tail
        if delta[j] > 0.0 and m < SUB_M:
            w[m] = ps[j]
            u[m] = delta[j]
            mass += ps[j]
            m += 1
    if m == 0 or mass <= 0.0:
        return s0
    k = m
    w[k] = P_top
    u[k] = 0.0
    scale_w = (1.0 - P_top) / mass
    for j in range(m):
        w[j] *= scale_w
    k += 1
    sp = w[:k].copy()
    sd = u[:k].copy()
    mean_d = 0.0
    for j in range(k):
        mean_d += sp[j] * sd[j]
    if not mean_d > 0.0:
        return s0
    lmd = math.log(mean_d)
    s = min(max(s0, lo), hi)
    for _ in range(20):
        if s + lmd > LARGE_S:
            return s0
        g, dg, _, d2g = _g(s, sp, sd, k, d, lmd, P_top, mean_d, ell, w, u)
        sn = s - 2.0 * g * dg / (2.0 * dg * dg - g * d2g)
        if not (sn > lo and sn < hi):
            return s0
        step = abs(sn - s)
        s = sn
        if step <= 1e-3 * max(1.0, abs(s)):
            return s
    return s0


def _kl_ball_rows(P, Vv, D, max_iter, value, q, lam, iterations, handled):  # pragma: no cover
    """Fill the outputs of the rows this kernel handles; ``handled[i]`` says which."""
    B, S = P.shape
    ps, delta, ell, w, u = np.empty(S), np.empty(S), np.empty(S), np.empty(S), np.empty(S)
    for i in range(B):
        val, lm, it, ok = _kl_row(P[i], Vv[i], D[i], max_iter, q[i], ps, delta, ell, w, u)
        handled[i] = ok
        if ok:
            value[i] = val
            lam[i] = lm
            iterations[i] = it


def _kl_ball_one(p, v, d, max_iter, validate):  # pragma: no cover - compiled by numba
    """One instance in one call: the input check (``validate``), then the row; returns
    ``(value, lam, iterations, handled, q)`` (not handled: the caller's general path)."""
    S = p.shape[0]
    q = np.empty(S)
    if validate and not _valid_one(p, v, d):
        return math.nan, math.nan, 0, False, q
    ps, delta, ell, w, u = np.empty(S), np.empty(S), np.empty(S), np.empty(S), np.empty(S)
    value, lam, it, ok = _kl_row(p, v, d, max_iter, q, ps, delta, ell, w, u)
    return value, lam, it, ok, q


def _kl_ball_into(p, v, d, max_iter, validate, q):  # pragma: no cover - compiled by numba
    """:func:`_kl_ball_one` with ``q`` given (filled in place) and one work allocation:
    returns ``(value, lam, iterations, handled)``, scalars only (boxing a returned array
    costs more than the caller's ``np.empty``)."""
    if validate and not _valid_one(p, v, d):
        return math.nan, math.nan, 0, False
    S = p.shape[0]
    work = np.empty(5 * S)
    ps, delta, ell = work[:S], work[S : 2 * S], work[2 * S : 3 * S]
    return _kl_row(p, v, d, max_iter, q, ps, delta, ell, work[3 * S : 4 * S], work[4 * S :])


# ---------------------------------------------------------------------------------------
# KL-inf


def _kl_inf_row(p, v, rho, max_iter, q, c):  # pragma: no cover - compiled by numba
    """One KL-inf row (:func:`optplan.fast.kl_inf.kl_inf_rate`, the same steps): fill ``q``
    and return ``(value, lam, iterations, code)`` (``DONE``, ``INFEASIBLE_ROW``, ``LEFT``:
    did not converge, for the numpy kernel); ``c``: a work array of length ``>= S``."""
    S = p.shape[0]
    V = -math.inf
    lo_v = math.inf
    hi_v = -math.inf
    pv = 0.0
    for x in range(S):
        vx = v[x]
        if vx > V:
            V = vx
        if p[x] > 0.0:
            lo_v = min(lo_v, vx)
            hi_v = max(hi_v, vx)
        pv += p[x] * vx
    mu = min(max(pv, lo_v), hi_v)
    if rho <= mu:
        for x in range(S):
            q[x] = p[x]
        return 0.0, 0.0, 0, DONE
    if rho >= V:
        for x in range(S):
            q[x] = math.nan
        return math.inf, math.nan, 0, INFEASIBLE_ROW
    span = V - rho
    P_V = 0.0
    k0 = 0.0
    M = 0.0
    k_rest = 0.0
    pv2 = 0.0
    for x in range(S):
        px = p[x]
        pv2 += px * v[x] * v[x]
        if px > 0.0:
            cx = (V - v[x]) / span
            c[x] = cx
            oc = 1.0 - cx
            if v[x] == V:
                P_V += px
            k0 += px * oc / cx
            mc = min(cx, 1.0)
            M += px * oc * oc / (mc * mc)
            if cx > 0.0:
                k_rest += px * oc / cx
        else:
            c[x] = 1.0
    if P_V > 0.0:
        k0 = math.inf
        lo = math.log(min(P_V / 4.0, 0.5))
    else:
        lo = math.log(min(max(k0 / (2.0 * M), 1e-300), 0.5))
    boundary = k0 <= 0.0
    hi = 0.0
    var = max(pv2 - mu * mu, 1e-300)
    eps0 = min(max((rho - mu) / var * span, 1e-300), 1.0 - 1e-16)
    near_v = False
    omega_v = math.nan
    if P_V > 0.0 and k_rest < 0.0:
        omega_v = P_V / -k_rest
        near_v = rho - mu > span and math.isfinite(omega_v)
    if near_v:
        r0 = math.log(min(max(omega_v, 1e-300), 1.0))
    else:
        r0 = math.log1p(-eps0)
    r = -math.inf
    it = 0
    if not boundary:
        r = min(max(r0, lo), hi)
        converged = False
        while it < max_iter:
            it += 1
            er = math.exp(r)
            em = math.expm1(r)
            g = 0.0
            dgs = 0.0
            scale = 0.0
            for x in range(S):
                px = p[x]
                if px > 0.0:
                    oc = 1.0 - c[x]
                    t = er - em * c[x]
                    ratio = px * oc / t
                    g -= ratio
                    dgs += ratio * oc / t
                    scale += abs(ratio)
            dg = er * dgs
            if g < 0.0:
                lo = r
            else:
                hi = r
            rn = r - g / dg
            bad = not (rn > lo and rn < hi)
            if bad:
                rn = 0.5 * (lo + hi)
            ag = abs(g)
            ax = max(1.0, abs(r))
            step = abs(rn - r)
            root = ag <= G_RTOL * scale
            done = (
                root
                or ((not bad) and step <= FINAL_STEP * ax and ag <= math.sqrt(G_RTOL) * scale)
                or step <= STEP_RTOL * ax
                or (hi - lo) <= STEP_RTOL * ax
            )
            if not root:
                r = rn
            if done:
                converged = True
                break
        if not converged:
            return math.nan, math.nan, it, LEFT
    eps = -math.expm1(r)
    er = math.exp(r)
    em = math.expm1(r)
    value = 0.0
    mass = 0.0
    for x in range(S):
        px = p[x]
        if px > 0.0:
            t = er - em * c[x]
            if eps < 0.5:
                lt = math.log1p(-eps * (1.0 - c[x]))
            else:
                lt = math.log(t)
            value += px * lt
            qx = px / t
            q[x] = qx
            mass += qx
        else:
            q[x] = 0.0
    if not boundary:
        for x in range(S):
            q[x] = q[x] / mass
    _leftover(p, v, q, S, V)
    return max(value, 0.0), eps / span, it, DONE


def _kl_inf_rows(P, Vv, R, max_iter, value, q, lam, iterations, code):  # pragma: no cover
    B, S = P.shape
    c = np.empty(S)
    for i in range(B):
        val, lm, it, k = _kl_inf_row(P[i], Vv[i], R[i], max_iter, q[i], c)
        code[i] = k
        value[i] = val
        lam[i] = lm
        iterations[i] = it


def _kl_inf_one(p, v, rho, max_iter, validate):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_one`: ``(value, lam, iterations, code, q)``."""
    q = np.empty(p.shape[0])
    if validate and not _valid_one(p, v, rho):
        return math.nan, math.nan, 0, LEFT, q
    value, lam, it, code = _kl_inf_row(p, v, rho, max_iter, q, np.empty(p.shape[0]))
    return value, lam, it, code, q


def _kl_inf_into(p, v, rho, max_iter, validate, q):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_into`: ``(value, lam, iterations, code)``, ``q`` filled in place."""
    if validate and not _valid_one(p, v, rho):
        return math.nan, math.nan, 0, LEFT
    return _kl_inf_row(p, v, rho, max_iter, q, np.empty(p.shape[0]))


# ---------------------------------------------------------------------------------------
# L1 ball


def _drain_order(v, order):  # pragma: no cover - compiled by numba
    """``order``: the states by increasing ``v``, ties in index order, the best state (first
    argmax) last: ``np.argsort(key, kind="stable")`` of the numpy path, by the default sort and
    an insertion sort of the indices inside each run of equal values (only where there are
    ties). Returns the best state."""
    S = v.shape[0]
    best = 0
    for x in range(S):
        if v[x] > v[best]:
            best = x
    if S <= SORT_SMALL_N:  # short rows: an insertion sort, stable by construction
        m = 0
        for x in range(S):
            if x != best:
                vx = v[x]
                b = m - 1
                while b >= 0 and v[order[b]] > vx:
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = x
                m += 1
        order[S - 1] = best
        return best
    key = v.copy()
    key[best] = math.inf
    srt = np.argsort(key)
    for j in range(S):
        order[j] = srt[j]
    j = 0
    while j < S - 1:
        if key[order[j + 1]] == key[order[j]]:  # a run of ties: indices ascending
            k = j + 1
            while k + 1 < S and key[order[k + 1]] == key[order[j]]:
                k += 1
            for a in range(j + 1, k + 1):
                x = order[a]
                b = a - 1
                while b >= j and order[b] > x:
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = x
            j = k + 1
        else:
            j += 1
    return best


def _l1_row(p, v, d, q, order, best):  # pragma: no cover - compiled by numba
    """One L1-ball row on the drain ``order`` (best state last): fill ``q``, return
    ``(value, lam, code)``."""
    S = p.shape[0]
    if d < 0.0:
        for x in range(S):
            q[x] = math.nan
        return -math.inf, math.nan, INFEASIBLE_ROW
    V = v[best]
    R = 0.0
    for j in range(S - 1):
        R += p[order[j]]
    eps = min(max(0.5 * d, 0.0), R)
    cum = 0.0
    lam = 0.0
    margin = True
    for j in range(S - 1):
        x = order[j]
        px = p[x]
        before = cum
        cum += px
        q[x] = px - min(px, max(0.0, eps - before))
        if margin and not cum <= eps:  # the first state not fully drained
            lam = 0.5 * (V - v[x])
            margin = False
    q[best] = p[best] + eps
    return V - _l1_gap(q, v, V), lam, DONE


def _l1_gap(q, v, V):  # pragma: no cover - compiled by numba
    """``sum_x q_x (V - v_x)`` in index order (the best state's term is ``q_best (V - V) =
    0``): every L1 path sums it the same way, so a row's value has the same bits whichever
    path (partial sort, full order, shared ``v``) drained it, and it is monotone in the
    radius exactly (each term is)."""
    acc = 0.0
    for x in range(q.shape[0]):
        acc += q[x] * (V - v[x])
    return acc


def _pair_less(ka, ia, kb, ib):  # pragma: no cover - compiled by numba
    """``(ka, ia) < (kb, ib)``: the drain order's key (value, then index; all keys distinct)."""
    return ka < kb or (ka == kb and ia < ib)


def _swap2(kv, ix, a, b):  # pragma: no cover - compiled by numba
    kv[a], kv[b] = kv[b], kv[a]
    ix[a], ix[b] = ix[b], ix[a]


def _insertion2(kv, ix, lo, hi):  # pragma: no cover - compiled by numba
    """Sort ``[lo, hi)`` of the pairs ``(kv, ix)`` by :func:`_pair_less` (insertion)."""
    for a in range(lo + 1, hi):
        k = kv[a]
        i = ix[a]
        b = a - 1
        while b >= lo and _pair_less(k, i, kv[b], ix[b]):
            kv[b + 1] = kv[b]
            ix[b + 1] = ix[b]
            b -= 1
        kv[b + 1] = k
        ix[b + 1] = i


def _partition2(kv, ix, p, lo, hi):  # pragma: no cover - compiled by numba
    """Partition ``[lo, hi)`` (``hi - lo >= 3``) of the pairs around the median of its first,
    middle and last keys: returns ``(i, mass)``, the pivot's final position (smaller keys
    before it, larger after) and the mass ``p`` of the states before it."""
    mid = (lo + hi) // 2
    last = hi - 1
    if _pair_less(kv[mid], ix[mid], kv[lo], ix[lo]):
        _swap2(kv, ix, mid, lo)
    if _pair_less(kv[last], ix[last], kv[mid], ix[mid]):
        _swap2(kv, ix, last, mid)
        if _pair_less(kv[mid], ix[mid], kv[lo], ix[lo]):
            _swap2(kv, ix, mid, lo)
    _swap2(kv, ix, mid, last)  # the median: the pivot, at the end
    pk = kv[last]
    pi = ix[last]
    i = lo
    mass = 0.0
    for t in range(lo, last):
        if _pair_less(kv[t], ix[t], pk, pi):
            _swap2(kv, ix, t, i)
            mass += p[ix[i]]
            i += 1
    _swap2(kv, ix, i, last)
    return i, mass


def _sort2(kv, ix, p, lo, hi, stack):  # pragma: no cover - compiled by numba
    """Quicksort ``[lo, hi)`` of the pairs by :func:`_pair_less`: the smaller side first,
    the larger on ``stack`` (depth <= log2 S), insertion below ``L1_INSERTION_N``."""
    top = 0
    while True:
        while hi - lo > L1_INSERTION_N:
            i, _ = _partition2(kv, ix, p, lo, hi)
            if i - lo > hi - i - 1:
                stack[top] = lo
                stack[top + 1] = i
                lo = i + 1
            else:
                stack[top] = i + 1
                stack[top + 1] = hi
                hi = i
            top += 2
        _insertion2(kv, ix, lo, hi)
        if top == 0:
            return
        top -= 2
        lo = stack[top]
        hi = stack[top + 1]


def _l1_partial(p, v, d, q, iw):  # pragma: no cover - compiled by numba
    """One L1-ball row, sorting only the states the ball drains. The states but the best are
    copied as ``(value, index)`` pairs (the values into ``q``, which is written only at the
    end; the indices into ``iw``, an int work array of ``S + 128``, the rest a stack);
    quicksort partitions them and fully sorts only the parts before the margin (whose order
    sets the drain's cumulative sums), dropping the parts after it, where ``q = p``. The
    margin lies in the sorted prefix once that prefix's mass exceeds ``eps = d / 2`` by
    ``1e-9`` relative (far above the round-off of the partition's sums). The drain then runs
    over the prefix in the reference's order (value, ties by index: :func:`_drain_order`'s)
    with its formulas and sequential sums: the same ``q`` and margin, bit for bit, as the
    full stable sort. ``O(S)`` expected plus the sort of the drained part. Returns ``(value,
    lam, code)``; ``LEFT`` when ``d < 0`` or the ball drains (nearly) every state off the
    best one, which the full sort handles."""
    S = p.shape[0]
    best = 0
    for x in range(S):
        if v[x] > v[best]:
            best = x
    V = v[best]
    eps = 0.5 * d
    kv = q
    ix = iw[:S]
    stack = iw[S:]
    m = 0
    R = 0.0
    if S <= L1_INSERTION_N + 1:  # one short segment: sorted while copied, stably
        for x in range(S):
            if x != best:
                vx = v[x]
                b = m - 1
                while b >= 0 and kv[b] > vx:
                    kv[b + 1] = kv[b]
                    ix[b + 1] = ix[b]
                    b -= 1
                kv[b + 1] = vx
                ix[b + 1] = x
                R += p[x]
                m += 1
    else:
        for x in range(S):
            if x != best:
                kv[m] = v[x]
                ix[m] = x
                R += p[x]
                m += 1
    target = eps * (1.0 + 1e-9) + 1e-15
    if not (d >= 0.0 and target < R * (1.0 - 1e-9)):
        return math.nan, math.nan, LEFT
    lo = 0
    hi = m
    acc = 0.0
    while hi - lo > L1_INSERTION_N:
        i, mass = _partition2(kv, ix, p, lo, hi)
        if acc + mass > target:  # the margin lies before the pivot: drop the rest
            hi = i
            continue
        _sort2(kv, ix, p, lo, i, stack)  # all drained: sorted, for the sums' order
        if acc + mass + p[ix[i]] > target:  # the pivot is (at or past) the margin
            hi = i + 1
            lo = hi
            break
        acc += mass + p[ix[i]]
        lo = i + 1
    if m > L1_INSERTION_N:
        _insertion2(kv, ix, lo, hi)
    for x in range(S):  # the keys in q are no longer needed: the order is in ix
        q[x] = p[x]
    cum = 0.0
    lam = math.nan
    for t in range(hi):
        x = ix[t]
        px = p[x]
        before = cum
        cum += px
        q[x] = px - min(px, max(0.0, eps - before))
        if not cum <= eps:  # the margin: the states after it keep q = p
            lam = 0.5 * (V - v[x])
            break
    if not lam == lam:
        return math.nan, math.nan, LEFT
    q[best] = p[best] + eps
    return V - _l1_gap(q, v, V), lam, DONE


def _l1_rows(P, Vv, D, shared, value, q, lam, code):  # pragma: no cover - compiled by numba
    B, S = P.shape
    order = np.empty(S, dtype=np.int64)
    iw = np.empty(S + 128, dtype=np.int64)
    best = 0
    sorted_ = False
    for i in range(B):
        vi = Vv[0] if shared else Vv[i]
        if not shared:
            val, lm, k = _l1_partial(P[i], vi, D[i], q[i], iw)
            if k != LEFT:
                value[i] = val
                lam[i] = lm
                code[i] = k
                continue
            sorted_ = False
        if not (shared and sorted_):
            best = _drain_order(vi, order)
            sorted_ = True
        val, lm, k = _l1_row(P[i], vi, D[i], q[i], order, best)
        value[i] = val
        lam[i] = lm
        code[i] = k


def _l1_lane(p, v, d, validate, q):  # pragma: no cover - compiled by numba
    """One instance: the input check (``validate``), then the partial sort
    (:func:`_l1_partial`), or the full drain order where it hands the row back;
    ``(value, lam, code)``, ``q`` filled in place."""
    if validate and not _valid_one(p, v, d):
        return math.nan, math.nan, LEFT
    S = p.shape[0]
    iw = np.empty(S + 128 if S > L1_INSERTION_N else S, dtype=np.int64)  # (no stack needed)
    value, lam, code = _l1_partial(p, v, d, q, iw)
    if code != LEFT:
        return value, lam, code
    best = _drain_order(v, iw)
    return _l1_row(p, v, d, q, iw, best)


def _l1_into(p, v, d, validate, q):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_into`: ``(value, lam, code)``, ``q`` filled in place."""
    return _l1_lane(p, v, d, validate, q)


def _l1_one(p, v, d, validate):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_one`: ``(value, lam, code, q)``."""
    q = np.empty(p.shape[0])
    value, lam, code = _l1_lane(p, v, d, validate, q)
    return value, lam, code, q


# ---------------------------------------------------------------------------------------
# Input check of one instance


def _valid_one(p, v, param):  # pragma: no cover - compiled by numba (fastmath: reassoc)
    """Whether ``check_index_inputs`` surely accepts one instance: finite entries, ``p >= 0``,
    ``|sum p - 1|`` at most half its tolerance (summation order aside: the sum's order is
    the compiler's, which lets the loop vectorize). ``False`` sends the caller to the Python
    checks, which raise the error naming the field and value."""
    if not math.isfinite(param):
        return False
    S = p.shape[0]
    bad = 0
    total = 0.0
    for x in range(S):
        px = p[x]
        # (a NaN in p fails its comparisons; v[x] - v[x] is NaN for an infinite or NaN v[x])
        bad += (not px >= 0.0) | (not px <= 1.0 + ROW_SUM_TOL) | (not v[x] - v[x] == 0.0)
        total += px
    return bad == 0 and abs(total - 1.0) <= 0.5 * ROW_SUM_TOL


# ---------------------------------------------------------------------------------------
# Compilation (on first use)


def _gather(cols, zero, has_zero, v, vr, where):  # pragma: no cover - compiled by numba
    """``vr[i] = v`` on row ``i``'s support columns ``cols[i]``, then on its best
    zero-probability state (the first one at the maximum; ``cols[i, 0]`` when it has none),
    as :meth:`optplan.fast.optimistic._BallRows._gather` does in numpy; ``where[i]``: those
    columns."""
    B, k = cols.shape
    order = np.argsort(-v, kind="mergesort")  # stable: the first state among equal values
    for i in range(B):
        for j in range(k):
            vr[i, j] = v[cols[i, j]]
            where[i, j] = cols[i, j]
        best = cols[i, 0]
        if has_zero[i]:  # the best-valued zero state: a few steps down `order` (small supports)
            for x in order:
                if zero[i, x]:
                    best = x
                    break
        vr[i, k] = v[best]
        where[i, k] = best


def _scatter(q, where, out):  # pragma: no cover - compiled by numba
    """``out[i, where[i, j]] += q[i, j]`` (``out`` zero on entry)."""
    B, k = q.shape
    for i in range(B):
        for j in range(k):
            out[i, where[i, j]] += q[i, j]


_COMPILED: dict = {}
_COMPILE_LOCK = threading.Lock()

#: Helpers jitted first, in order (a caller's globals are resolved when it compiles).
_HELPERS = (
    "_log_pos",
    "_log1p_pos",
    "_log1p_recip",
    "_fill_same",
    "_fill",
    "_fill_lib",
    "_sums_direct",
    "_plogd",
    "_g_large_s",
    "_g",
    "_log_expm1",
    "_leftover",
    "_sample_start",
    "_kl_row",
    "_kl_inf_row",
    "_drain_order",
    "_pair_less",
    "_swap2",
    "_insertion2",
    "_partition2",
    "_sort2",
    "_l1_gap",
    "_l1_partial",
    "_l1_row",
    "_l1_lane",
)
#: The entry points called from Python.
_ENTRIES = (
    "_gather",
    "_scatter",
    "_kl_ball_rows",
    "_kl_ball_one",
    "_kl_inf_rows",
    "_kl_inf_one",
    "_l1_rows",
    "_l1_one",
    "_kl_ball_into",
    "_kl_inf_into",
    "_l1_into",
)


def _bitcasts(numba):
    """``float64 <-> int64`` reinterpretation (LLVM ``bitcast``), for :func:`_log_pos`."""
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def f2i(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.int64))

        return types.int64(types.float64), codegen

    @intrinsic
    def i2f(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float64))

        return types.float64(types.int64), codegen

    return f2i, i2f


def _kernels() -> dict:
    """The jitted functions, by name, made on first use. The helpers are rebound in this
    module's namespace, where numba resolves the callers' globals at compile time."""
    if _COMPILED:
        return _COMPILED
    if not AVAILABLE:
        raise RuntimeError('kernel "numba" needs numba: pip install "optplan[jit]"')
    with _COMPILE_LOCK:
        if not _COMPILED:
            import numba

            g = globals()
            g["_f2i"], g["_i2f"] = _bitcasts(numba)
            opts = {"cache": True, "nogil": True, "error_model": "numpy"}  # IEEE: 1/0 = inf
            # sums only: reassociation (the order of a sum) lets LLVM vectorize them
            g["_sums"] = numba.njit(**opts, fastmath={"reassoc", "nsz"})(g["_sums"])
            g["_valid_one"] = numba.njit(**opts, fastmath={"reassoc", "nsz"})(g["_valid_one"])
            # inlined in numba's IR: no call boundary, no reference counting of the array
            # arguments per call (it cost ~40% of a row at S = 10)
            inline = {
                "_g",
                "_log_pos",
                "_log1p_pos",
                "_log1p_recip",
                "_fill_same",
                "_fill",
                "_fill_lib",
                "_sums_direct",
                "_plogd",
                "_leftover",
                "_kl_row",
                "_kl_inf_row",
                "_l1_row",
                "_l1_gap",
                "_pair_less",
                "_swap2",
            }
            for name in _HELPERS:
                extra = {"inline": "always"} if name in inline else {}
                g[name] = numba.njit(**opts, **extra)(g[name])
            compiled = {name: numba.njit(**opts)(g[name]) for name in _ENTRIES}
            compiled.update({name: g[name] for name in _HELPERS + ("_sums", "_valid_one")})
            _COMPILED.update(compiled)
    return _COMPILED


#: ``name -> entry point`` of the one-instance lanes (``_*_into``) for the one signature the
#: public functions call them with (1-d C float64 arrays, a float, an int, a bool): numba's
#: compiled wrapper without the dispatcher's per-call typing of six arguments (about 0.4 us
#: of a 4 us call at S = 10). :func:`optplan.fast._batch.single_row` vouches for the types.
LANES: dict = {}

#: ``max_iter`` passed to a lane is capped here (an int64 argument).
MAX_ITER_CAP = 2**62


def lanes() -> dict:
    """:data:`LANES`, made on first use (compiled, or loaded from numba's cache)."""
    if LANES:
        return LANES
    k = _kernels()
    from numba import types

    arr = types.float64[::1]
    f, i, b = types.float64, types.int64, types.boolean
    sigs = {
        "_kl_ball_into": (arr, arr, f, i, b, arr),
        "_kl_inf_into": (arr, arr, f, i, b, arr),
        "_l1_into": (arr, arr, f, b, arr),
    }
    with _COMPILE_LOCK:
        if not LANES:
            LANES.update({name: k[name].compile(sig) for name, sig in sigs.items()})
    return LANES


def _floats(a):
    return np.ascontiguousarray(a, dtype=float)


def kl_ball_rows(p, v, d, max_iter, value, q, lam, iterations) -> np.ndarray:
    """Fill ``value, q, lam, iterations`` (in place) on the rows the compiled kernel handles;
    return that bool mask. ``p, v``: ``(B, S)``; ``d``: ``(B,)``."""
    k = _kernels()
    handled = np.zeros(d.shape[0], dtype=np.bool_)
    k["_kl_ball_rows"](
        _floats(p), _floats(v), _floats(d), int(max_iter), value, q, lam, iterations, handled
    )
    return handled


def kl_ball_one(p, v, d: float, max_iter: int, validate: bool):
    """One row (``p``, ``v`` contiguous float ``(S,)``), its inputs checked first with
    ``validate``: ``(value, lam, iterations, handled, q)``."""
    return (_COMPILED or _kernels())["_kl_ball_one"](p, v, d, max_iter, validate)


def kl_inf_rows(p, v, rho, max_iter, value, q, lam, iterations) -> np.ndarray:
    """KL-inf rows: fill the outputs in place; return the per-row codes (``DONE``,
    ``INFEASIBLE_ROW``, ``LEFT``)."""
    k = _kernels()
    code = np.empty(rho.shape[0], dtype=np.int64)
    k["_kl_inf_rows"](
        _floats(p), _floats(v), _floats(rho), int(max_iter), value, q, lam, iterations, code
    )
    return code


def kl_inf_one(p, v, rho: float, max_iter: int, validate: bool):
    """One KL-inf row: ``(value, lam, iterations, code, q)`` (``LEFT``: the general path)."""
    return (_COMPILED or _kernels())["_kl_inf_one"](p, v, rho, max_iter, validate)


def l1_rows(p, v, d, shared: bool, value, q, lam) -> np.ndarray:
    """L1-ball rows (``shared``: every row has the ``v`` of ``v[0]``, sorted once; ``v`` may
    then have one row): fill the outputs in place; return the per-row codes."""
    k = _kernels()
    code = np.empty(d.shape[0], dtype=np.int64)
    k["_l1_rows"](_floats(p), _floats(v), _floats(d), bool(shared), value, q, lam, code)
    return code


def l1_one(p, v, d: float, validate: bool):
    """One L1-ball row: ``(value, lam, code, q)`` (``LEFT``: the general path)."""
    return (_COMPILED or _kernels())["_l1_one"](p, v, d, validate)


def valid_one(p, v, param: float) -> bool:
    """See :func:`_valid_one`."""
    return _kernels()["_valid_one"](p, v, param)


def kl_ball_gathered(pc, cols, zero, has_zero, v, d, max_iter, value, n_states=None):
    """The KL-ball rows of EVI's compact form in compiled calls: gather each ball row's values
    on its support columns and its best zero-probability state (``pc``: ``(B, k + 1)``
    probabilities in that order, the last 0; ``cols``: ``(B, k)``; ``zero``: ``(B, S)`` mask
    of ``p == 0``; ``has_zero``: ``(B,)``; ``v``: ``(S,)``), solve them, and (``n_states``
    given) scatter ``q`` back onto the ``S`` states. Fills ``value`` in place on the rows the
    kernel handles; returns ``(handled, vr, where, q)``: the bool mask of those rows, the
    gathered values and their columns (for the numpy kernel on the other rows), and ``q``
    (``(B, S)``, zero on unhandled rows; None without ``n_states``)."""
    k = _kernels()
    B = d.shape[0]
    vr, where = np.empty(pc.shape), np.empty(pc.shape, dtype=np.int64)
    k["_gather"](cols, zero, has_zero, _floats(v), vr, where)
    handled = np.zeros(B, dtype=np.bool_)
    qc, lam, its = np.zeros(pc.shape), np.empty(B), np.empty(B, dtype=np.int64)
    k["_kl_ball_rows"](pc, vr, d, int(max_iter), value, qc, lam, its, handled)
    if n_states is None:
        return handled, vr, where, None
    qc[~handled] = 0.0
    q = np.zeros((B, n_states))
    k["_scatter"](qc, where, q)
    return handled, vr, where, q
