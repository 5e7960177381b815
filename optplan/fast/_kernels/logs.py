r"""A vectorizable ``log`` and the KL ball's per-element passes built on it.

A pass of ``math.log1p`` is a libm call per element, which also stops LLVM from vectorizing
the loop, and a KL-ball row makes several such passes. The direct form's sums are therefore
computed in two loops: one fills ``log1p(delta e^s)``, ``w`` and ``u`` per element with a
branch-free ``log`` (:func:`_log_pos`: fdlibm's ``__ieee754_log`` reduction and polynomial,
error < 1 ulp; the ``log1p`` correction ``c / u`` of fdlibm's ``log1p``), which LLVM
vectorizes; one sums them in four interleaved partial sums (a fixed order: a row gives the
same bits alone or in a batch). Elements where ``delta e^s > 1e300`` fall back to
``math.log1p``. Short rows (one scalar loop, :func:`_sums_direct`) use the same fast
``log1p``.
"""

from __future__ import annotations

import math

from .common import TINY, VECTOR_N, jit

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


@jit(inline="always")
def _log_pos(x):  # pragma: no cover - compiled by numba
    """``log x`` for a positive normal finite ``x``, branch-free (fdlibm's ``__ieee754_log``:
    ``x = 2^k m`` with ``m`` in ``(sqrt(2)/2, sqrt(2)]``, ``f = m - 1`` exact, the degree-14
    polynomial in ``s = f / (2 + f)``; error < 1 ulp)."""
    bits = _f2i(x)  # noqa: F821 (bound at compile time: common._bitcasts)
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


@jit(inline="always")
def _log1p_pos(x):  # pragma: no cover - compiled by numba
    """``log1p x`` for ``0 <= x <= 1e300``: ``log u + c / u`` with ``u = 1 + x`` rounded and
    ``c`` its rounding error, computed exactly (fdlibm's ``log1p`` correction)."""
    u = 1.0 + x
    c = x - (u - 1.0) if x < 1.0 else 1.0 - (u - x)
    return _log_pos(u) + c / u


@jit(inline="always")
def _log1p_recip(x):  # pragma: no cover - compiled by numba
    """``(log1p x, 1 / (1 + x))`` for ``0 <= x <= 1e300``: :func:`_log1p_pos` with its
    correction ``c / u`` taken as ``c * (1 / u)``, the reciprocal its callers need anyway (one
    division fewer per element; the correction is below an ulp of ``log u``, so the product's
    rounding stays within the error bound)."""
    u = 1.0 + x
    c = x - (u - 1.0) if x < 1.0 else 1.0 - (u - x)
    t = 1.0 / u
    return _log_pos(u) + c * t, t


@jit(inline="always")
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


@jit(inline="always")
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


@jit(inline="always")
def _fill_lib(delta, n, z, zq, ell, w, u):  # pragma: no cover - compiled by numba
    for j in range(n):
        ell[j] = math.log1p(delta[j] * z)
        dq = delta[j] * zq
        t = 1.0 / (1.0 + dq)
        w[j] = t
        u[j] = dq * t


@jit(fastmath={"reassoc", "nsz"})
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


@jit(inline="always")
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


@jit(inline="always")
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
