r"""The compiled KL-ball kernel: ``max q.v`` over ``KL(p || q) <= d``, one row at a time.

The numpy kernel of :mod:`optplan.fast.kl_ball` is the reference. It spends its time in
interpreter and dispatch overhead: a Halley step is some 40 numpy calls on ``(B, S)``
temporaries, while the arithmetic is a few hundred flops. Here one compiled function per row
(:func:`_kl_row`) does the same steps in scalars, and the batched kernel loops over the rows
inside the compiled code with ``O(S)`` work arrays (no ``B x S`` temporaries):

- the same setup (``V``, ``V_I``, ``delta``, ``P_top``, the explicit bracket, the boundary
  test at ``s_max``, the start ``s0``), except on rows of ``>= SUB_N`` supported states: the
  bracket's upper end from ``min delta`` instead of ``sum p log delta`` (looser, still an
  upper end: one pass of logs fewer) and the start from a sample's root (:func:`_sample_start`);
- the same stationarity equation in ``s``, in its direct form (the sums of
  :mod:`optplan.fast._kernels.logs`) or, where the numpy kernel switches
  (``s + log(mean delta) > 20``), its large-s form, with Halley's (Newton's) step and the
  stopping rule of :func:`optplan.fast._roots.newton_bracketed`;
- the same last Newton correction where ``|s| > 16``, kept outside ``s`` as a factor of
  ``e^s``;
- the same ``q``, ``lam`` and value formulas (interior and boundary), including the leftover
  mass and the ``tiny`` floor.

It leaves to the numpy kernel, which owns them: radius ``<= 0``, roots beyond ``s = 600``
(its overflow-safe forms) and rows that do not converge. One instance from Python goes
through :func:`_kl_ball_into`: ``q`` comes from the caller and only scalars are returned
(boxing a returned array, or five work allocations, cost as much as a row at ``S = 10``).
"""

from __future__ import annotations

import math

import numpy as np

from .common import (
    FAR_S,
    LARGE_S,
    S_CAP,
    SUB_M,
    SUB_N,
    TINY,
    VECTOR_N,
    _bracketed,
    _floats,
    _leftover,
    _valid_one,
    call_rows,
    jit,
)
from .logs import _fill, _fill_lib, _fill_same, _log1p_pos, _log_pos, _plogd, _sums, _sums_direct


@jit
def _g(
    s, ps, delta, n, d, log_mean_delta, P_top, mean_delta, ell, w, u
):  # pragma: no cover - numba
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


@jit
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


@jit
def _log_expm1(d):  # pragma: no cover - compiled by numba
    if d > 1.0:
        return d + math.log(-math.expm1(-d))
    return math.log(math.expm1(d))


@jit
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
    # v constant on the support (no supported state below V_I; or all but a mass below the
    # double's resolution, which a row summing to 1 - 1e-15 may leave): closed form
    if P_top >= 1.0 - 1e-15 or d_min == math.inf:
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
            sn = s - 2.0 * g * dg / (2.0 * dg * dg - g * d2g)
            s, lo, hi, converged = _bracketed(s, sn, g, scale, lo, hi)
            if converged:
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


@jit
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


@jit
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


@jit
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


@jit
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


@jit
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


@jit
def _scatter(q, where, out):  # pragma: no cover - compiled by numba
    """``out[i, where[i, j]] += q[i, j]`` (``out`` zero on entry)."""
    B, k = q.shape
    for i in range(B):
        for j in range(k):
            out[i, where[i, j]] += q[i, j]


def kl_ball_rows(p, v, d, max_iter, value, q, lam, iterations) -> np.ndarray:
    """Fill ``value, q, lam, iterations`` (in place) on the rows the compiled kernel handles;
    return that bool mask. ``p, v``: ``(B, S)``; ``d``: ``(B,)``."""
    outputs = (value, q, lam, iterations)
    return call_rows("_kl_ball_rows", p, v, d, max_iter, outputs, np.zeros(d.shape[0], np.bool_))


def kl_ball_one(p, v, d: float, max_iter: int, validate: bool):
    """One row (``p``, ``v`` contiguous float ``(S,)``), its inputs checked first with
    ``validate``: ``(value, lam, iterations, handled, q)``."""
    return (jit.table or jit.compiled())["_kl_ball_one"](p, v, d, max_iter, validate)


def kl_ball_gathered(pc, cols, zero, has_zero, v, d, max_iter, value, n_states=None):
    """The KL-ball rows of EVI's compact form in compiled calls: gather each ball row's values
    on its support columns and its best zero-probability state (``pc``: ``(B, k + 1)``
    probabilities in that order, the last 0; ``cols``: ``(B, k)``; ``zero``: ``(B, S)`` mask
    of ``p == 0``; ``has_zero``: ``(B,)``; ``v``: ``(S,)``), solve them, and (``n_states``
    given) scatter ``q`` back onto the ``S`` states. Fills ``value`` in place on the rows the
    kernel handles; returns ``(handled, vr, where, q)``: the bool mask of those rows, the
    gathered values and their columns (for the numpy kernel on the other rows), and ``q``
    (``(B, S)``, zero on unhandled rows; None without ``n_states``)."""
    k = jit.table or jit.compiled()
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
