r"""Compiled row kernel for the batched KL-ball index (optional: needs ``numba``).

The numpy kernel of :mod:`optplan.fast.kl_ball` is the reference. It spends its time in
interpreter and dispatch overhead: a Halley step is some 40 numpy calls on ``(B, S)``
temporaries, about 0.3 ms for 200 rows of 4 states, while the arithmetic is a few hundred
flops. Here one compiled loop per row does the same steps in scalars:

- the same setup (``V``, ``V_I``, ``delta``, ``P_top``, the explicit bracket, the boundary
  test at ``s_max``, the start ``s0``);
- the same stationarity equation in ``s``, in its direct form or, where the numpy kernel
  switches (``s + log(mean delta) > 20``), its large-s form, with Halley's (Newton's) step and
  the stopping rule of :func:`optplan.fast._roots.newton_bracketed`;
- the same last Newton correction where ``|s| > 16``, kept outside ``s`` as a factor of
  ``e^s``;
- the same ``q``, ``lam`` and value formulas (interior and boundary), including the leftover
  mass and the ``tiny`` floor.

It leaves to the numpy kernel, which owns them: radius ``<= 0``, roots beyond ``s = 600``
(its overflow-safe forms) and rows that do not converge. ``tests/test_index_kernels.py``
compares the two on random and edge-case rows (values, ``q``, multipliers, statuses).
"""

from __future__ import annotations

import math

import numpy as np

try:  # optional dependency: pip install "optplan[jit]"
    import numba
except ImportError:  # pragma: no cover - exercised only without numba installed
    numba = None

__all__ = ["AVAILABLE", "kl_ball_rows", "kl_ball_gathered"]

AVAILABLE = numba is not None

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


def _g(s, p, delta, n, d, log_mean_delta, P_top, mean_delta):  # pragma: no cover - numba
    """``(g, g', scale, g'')`` of the stationarity equation at ``s``: the direct form, or the
    large-s form (``g'' = 0``: Newton steps) where the numpy kernel uses it."""
    if s + log_mean_delta > LARGE_S:
        g, dg, scale = _g_large_s(s, p, delta, n, d, P_top, mean_delta)
        return g, dg, scale, 0.0
    z = math.exp(min(s, 700.0))
    a0 = 0.0
    u_sum = 0.0
    L = 0.0
    a2 = 0.0
    b1 = 0.0
    b2 = 0.0
    for j in range(n):
        pj = p[j]
        dz = delta[j] * z
        ell = math.log1p(dz)
        w = 1.0 / (1.0 + dz)
        u = dz * w
        pw = pj * w
        a0 += pw
        u_sum += pj * u
        L += pj * ell
        a2 += pw * w
        pwu = pw * u
        b1 += pwu
        b2 += pwu * w
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


def _kl_ball_rows(P, Vv, D, max_iter, value, q, lam, iterations, handled):  # pragma: no cover
    """Fill the outputs of the rows this kernel handles; ``handled[i]`` says which."""
    B, S = P.shape
    ps = np.empty(S)
    delta = np.empty(S)
    sqrt_g_rtol = math.sqrt(G_RTOL)
    for i in range(B):
        handled[i] = False
        d = D[i]
        if not d > 0.0:
            continue
        V = -math.inf
        V_I = -math.inf
        for x in range(S):
            vx = Vv[i, x]
            if vx > V:
                V = vx
            if P[i, x] > 0.0 and vx > V_I:
                V_I = vx
        # the supported entries, compacted
        n = 0
        P_top = 0.0
        mean_delta = 0.0
        sq = 0.0
        sum_plogd = 0.0
        for x in range(S):
            px = P[i, x]
            if px > 0.0:
                dx = V_I - Vv[i, x]
                ps[n] = px
                delta[n] = dx
                n += 1
                if dx == 0.0:
                    P_top += px
                else:
                    sum_plogd += px * math.log(dx)
                mean_delta += px * dx
                sq += px * dx * dx
        gap = V - V_I
        if P_top >= 1.0 - 1e-15:  # v constant on the support: closed form
            keep = math.exp(-d) if V > V_I else 1.0
            lam[i] = keep * gap
            value[i] = V - keep * gap
            for x in range(S):
                q[i, x] = keep * P[i, x]
            _leftover(P, Vv, q, i, S, V)
            iterations[i] = 0
            handled[i] = True
            continue
        var_delta = max(sq - mean_delta * mean_delta, 1e-300)
        log_mean_delta = math.log(mean_delta)
        lo = _log_expm1(d) - log_mean_delta
        hi = (d - (math.log(P_top) if P_top > 0.0 else -math.inf) - sum_plogd) / (1.0 - P_top)
        hi = min(hi + 1.0, S_CAP)
        lo = min(lo, hi - 1.0)
        s_max = -math.log(gap) if gap > 0.0 else math.inf
        boundary = False
        if s_max < hi:
            g_cap = _g(s_max, ps, delta, n, d, log_mean_delta, P_top, mean_delta)[0]
            if g_cap <= 0.0:
                boundary = True
            hi = s_max
        it = 0
        if boundary:
            s = s_max
        else:
            s0 = math.log(math.sqrt(2.0 * d / var_delta))
            s = min(max(s0, lo), hi)
            converged = False
            while it < max_iter:
                it += 1
                g, dg, scale, d2g = _g(s, ps, delta, n, d, log_mean_delta, P_top, mean_delta)
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
                continue
        if s > 600.0:  # the numpy kernel's overflow-safe forms
            continue
        # q, lam and the value at s (interior: sum_I q = 1; boundary: leftover mass). Where an
        # ulp of s matters (|s| > 16), the numpy kernel's last Newton correction, kept outside
        # s as the factor e^corr of e^s (used for w and q; l stays at the uncorrected s).
        z = math.exp(min(s, 700.0))
        zq = z
        if not boundary and abs(s) > FAR_S:
            g_end, dg_end, _, _ = _g(s, ps, delta, n, d, log_mean_delta, P_top, mean_delta)
            corr = -g_end / dg_end if dg_end > 0.0 else 0.0
            if abs(corr) <= 1e-12 * max(1.0, abs(s)) and corr != 0.0:
                zq = math.exp(s) * math.exp(corr)
                s = s + corr
        a0 = 0.0
        u_sum = 0.0
        L = 0.0
        for j in range(n):
            L += ps[j] * math.log1p(delta[j] * z)
            dz = delta[j] * zq
            w = 1.0 / (1.0 + dz)
            a0 += ps[j] * w
            u_sum += ps[j] * (dz / (1.0 + dz) if zq != z else dz * w)
        log_a0 = math.log(a0) if a0 < 0.5 else math.log1p(-u_sum)
        if boundary:
            lam[i] = math.exp(L - s - d)
            factor = math.exp(L - d)
        else:
            lam[i] = math.exp(-s - log_a0)
            factor = 1.0 / a0
        mass = 0.0
        for x in range(S):
            px = P[i, x]
            if px > 0.0:
                dz = (V_I - Vv[i, x]) * zq
                qx = max(px * factor / (1.0 + dz), TINY)
                q[i, x] = qx
                mass += qx
            else:
                q[i, x] = 0.0
        if not boundary:
            for x in range(S):
                q[i, x] /= mass
        val = 0.0
        for x in range(S):
            if P[i, x] > 0.0:
                val += q[i, x] * (V - Vv[i, x])
        value[i] = V - val
        _leftover(P, Vv, q, i, S, V)
        iterations[i] = it
        handled[i] = True


def _leftover(P, Vv, q, i, S, V):  # pragma: no cover - compiled by numba
    """``1 - sum(q)`` (if positive) onto the first zero-probability state at ``V``
    (:func:`optplan.fast._simplex.with_leftover`)."""
    total = 0.0
    for x in range(S):
        total += q[i, x]
    left = max(1.0 - total, 0.0)
    if left > 0.0:
        for x in range(S):
            if P[i, x] == 0.0 and Vv[i, x] == V:
                q[i, x] += left
                break


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


if AVAILABLE:
    _jit = numba.njit(cache=True, nogil=True, error_model="numpy")  # IEEE: 1/0 = inf
    _gather = _jit(_gather)
    _scatter = _jit(_scatter)
    _g_large_s = _jit(_g_large_s)
    _g = _jit(_g)
    _log_expm1 = _jit(_log_expm1)
    _leftover = _jit(_leftover)
    _kl_ball_rows_jit = _jit(_kl_ball_rows)


def kl_ball_rows(p, v, d, max_iter, value, q, lam, iterations) -> np.ndarray:
    """Fill ``value, q, lam, iterations`` (in place) on the rows the compiled kernel handles;
    return that bool mask. ``p, v``: ``(B, S)``; ``d``: ``(B,)``."""
    if not AVAILABLE:
        raise RuntimeError('kernel "numba" needs numba: pip install "optplan[jit]"')
    handled = np.zeros(d.shape[0], dtype=np.bool_)
    _kl_ball_rows_jit(
        np.ascontiguousarray(p, dtype=float),
        np.ascontiguousarray(v, dtype=float),
        np.ascontiguousarray(d, dtype=float),
        int(max_iter),
        value,
        q,
        lam,
        iterations,
        handled,
    )
    return handled


def kl_ball_gathered(pc, cols, zero, has_zero, v, d, max_iter, value, n_states=None):
    """The KL-ball rows of EVI's compact form in compiled calls: gather each ball row's values
    on its support columns and its best zero-probability state (``pc``: ``(B, k + 1)``
    probabilities in that order, the last 0; ``cols``: ``(B, k)``; ``zero``: ``(B, S)`` mask
    of ``p == 0``; ``has_zero``: ``(B,)``; ``v``: ``(S,)``), solve them, and (``n_states``
    given) scatter ``q`` back onto the ``S`` states. Fills ``value`` in place on the rows the
    kernel handles; returns ``(handled, vr, where, q)``: the bool mask of those rows, the
    gathered values and their columns (for the numpy kernel on the other rows), and ``q``
    (``(B, S)``, zero on unhandled rows; None without ``n_states``)."""
    if not AVAILABLE:
        raise RuntimeError('kernel "numba" needs numba: pip install "optplan[jit]"')
    B = d.shape[0]
    vr, where = np.empty(pc.shape), np.empty(pc.shape, dtype=np.int64)
    _gather(cols, zero, has_zero, np.ascontiguousarray(v, dtype=float), vr, where)
    handled = np.zeros(B, dtype=np.bool_)
    qc, lam, its = np.zeros(pc.shape), np.empty(B), np.empty(B, dtype=np.int64)
    _kl_ball_rows_jit(pc, vr, d, int(max_iter), value, qc, lam, its, handled)
    if n_states is None:
        return handled, vr, where, None
    qc[~handled] = 0.0
    q = np.zeros((B, n_states))
    _scatter(qc, where, q)
    return handled, vr, where, q
