r"""Fast path of ``KLBallIndex``: the KL-ball index by a 1-D safeguarded Newton search, batched.

``C(p, v, d) = max { q.v : q in simplex, KL(p||q) <= d }`` (accelerating-ucb-indices-mdp §4.1).
Lagrangian duality in ``q`` (docs/math.md) gives, with ``I = {x : p_x > 0}``,

.. math:: C = \min_{\eta \ge V,\ \eta > V_I}\
          \eta - \exp\Big(\sum_{x \in I} p_x \log(\eta - v_x) - d\Big),

``V = max_x v_x``, ``V_I = max_{x in I} v_x``; ``q_x = lam p_x / (eta - v_x)`` on ``I`` with
``lam = exp(sum p log(eta - v) - d) = dC/dd``, and leftover mass on the best zero-probability
state when the minimum sits at ``eta = V`` (possible only if ``V > V_I``). The stationarity
condition ``sum_I q_x = 1`` is solved (Halley's method) in ``s = -log(eta - V_I)``: with
``delta = V_I - v``, ``l_x = log(1 + delta_x e^s)`` and ``w = e^{-l}``,

.. math:: g(s) = \sum_I p_x l_x + \log \sum_I p_x w_x - d = 0, \qquad
          g'(s) = \frac{\sum p w^2}{\sum p w} - \sum p w \ \ge 0,

which is shift- and scale-invariant in ``v`` and free of cancellation for tiny ``d`` (where
``eta`` is huge). The bracket is explicit: ``g(s) <= 0`` at
``s = log(expm1 d) - log(sum p delta)`` (Jensen) and ``g(s) > 0`` above
``(d - log P_top - sum_{delta>0} p log delta) / (1 - P_top)`` (``P_top`` = mass at ``V_I``).
This is the same optimum as the paper's ``(mu_q*, lambda)`` system of Theorem 2.

Defined edge cases (Theorem 1): ``d < 0`` infeasible (value ``-inf``); ``d = 0`` gives
``p.v`` with ``q = p`` (multiplier ``+inf`` unless ``v`` is constant on the support);
``v`` constant on the support gives ``V - e^{-d} (V - V_I)``.
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import check_int
from ..result import INFEASIBLE, MAX_ITER, BatchResult, PlanResult
from . import _kernels
from ._batch import single_result, single_row, solve_rows, use_compiled
from ._roots import newton_bracketed
from ._simplex import with_leftover

#: ``s + log(mean delta)`` above which the stationarity equation is evaluated in its large-s
#: form (:func:`_g_large_s`).
_LARGE_S = 20.0

#: Upper end of the bracket in ``s = -log(eta - V_I)``.
_S_CAP = 1e300


def _log_expm1(d: np.ndarray) -> np.ndarray:
    """``log(exp(d) - 1)`` without overflow or cancellation, for ``d > 0``."""
    big = d > 1.0
    out = np.empty_like(d)
    out[big] = d[big] + np.log(-np.expm1(-d[big]))
    out[~big] = np.log(np.expm1(d[~big]))
    return out


def kl_ball_index(
    p, v, radius, max_iter: int = 100, validate: bool = True, kernel: str = "auto"
) -> BatchResult:
    """Batched KL-ball index ``C(p, v, radius)``.

    Parameters
    ----------
    p : array_like, shape batch + (S,)
        Distributions (zeros allowed: mass may move to a zero-probability state).
    v : array_like, shape (S,) or broadcastable to ``p``
    radius : float or array_like broadcastable to ``batch``
        KL radius ``d`` (negative: infeasible).

    validate : bool
        Check the inputs (default); ``False`` skips the checks for inputs that already
        passed them.
    kernel : {"auto", "numpy", "numba"}
        ``"numba"``: the compiled row kernel of :mod:`optplan.fast._kernels` on the rows
        it handles, this module's numpy kernel (the reference) on the rest; ``"auto"`` (default)
        picks numba when it is installed (``pip install "optplan[jit]"``). One instance given as
        float64 arrays ``p``, ``v`` of shape ``(S,)`` and a scalar radius goes straight to the
        compiled row (its inputs checked in the same compiled pass).

    Returns
    -------
    BatchResult
        ``value`` (C), ``x`` (q*), ``multiplier`` (``dC/d radius``), ``status`` per element.
        Equal to a loop of scalar calls.
    """
    start = time.perf_counter()
    if type(max_iter) is not int or max_iter < 1:
        check_int("max_iter", max_iter)
    compiled = use_compiled(kernel, _kernels.AVAILABLE)
    one = single_row(p, v, radius) if compiled else None
    if one is not None:  # one instance: checked and solved in one compiled call
        q = np.empty(one[0].shape[0])
        value, lam, its, handled = (_kernels.LANES or _kernels.lanes())["_kl_ball_into"](
            *one, min(max_iter, _kernels.MAX_ITER_CAP), validate is True or bool(validate), q
        )
        if handled:
            return single_result(value, q, lam, its, start, "halley")
    rows = _compiled_rows if compiled else None
    return solve_rows(
        p, v, radius, "radius", validate, max_iter, rows, _numpy_rows, start, "halley"
    )


def _compiled_rows(p, v, d, max_iter, outputs) -> np.ndarray:
    """The compiled row kernel on rows ``(B, S)``: fill ``outputs`` in place on the rows it
    handles; return the indices of the others."""
    value, q, lam, _, iterations = outputs
    handled = _kernels.kl_ball_rows(p, v, d, max_iter, value, q, lam, iterations)
    return np.flatnonzero(~handled)


def _numpy_rows(p, v, d, max_iter, outputs) -> None:
    """The reference kernel on rows ``(B, S)``: fill ``outputs`` (from ``flat_batch``) in
    place."""
    value, q, lam, status, iterations = outputs
    supp, V, V_I, delta, P_top, constant = _support(p, v)
    _closed_form_rows(p, v, d, outputs, supp, V, V_I, P_top, constant)
    todo = np.flatnonzero((d > 0) & ~constant)
    if not todo.size:
        return
    if todo.size == d.shape[0]:
        pt, dt, delt = p, d, delta
    else:
        pt, dt, delt = p[todo], d[todo], delta[todo]
    # the equation is scale-invariant in v: solve it for delta / max delta (s shifts by the
    # log of the unit, lam scales with it), so values near the largest double (a bias of
    # 1e306 behind a kernel entry of 1e-308) neither overflow delta e^s nor delta^2
    unit = delt.max(axis=1)
    delt = delt / unit[:, None]
    gap = (V[todo] - V_I[todo]) / unit
    lo, hi, s_max, s0, mean_delta = _bracket(pt, dt, delt, P_top[todo], gap)
    g_dg = _StationarityRows(pt, dt, delt, P_top[todo], mean_delta)
    s, iters, ok, boundary = _root_search(g_dg, lo, hi, s_max, s0, max_iter)
    s, ell, w, u = _corrected(g_dg, delt, s, boundary)
    qi, lam_unit = _q_lam(pt, dt, s, ell, w, u, boundary)
    lam[todo] = lam_unit * unit
    q[todo] = with_leftover(qi, v[todo], supp[todo], V[todo])
    value[todo] = V[todo] - (qi * (V[todo][:, None] - v[todo])).sum(axis=1)
    iterations[todo] = iters
    status[todo[~ok]] = MAX_ITER


def _support(p, v):
    """``(supp, V, V_I, delta, P_top, constant)`` of rows ``(B, S)``: the support ``p > 0``,
    the best value and the best on the support, ``delta = V_I - v`` on the support (0 off it),
    the mass at ``V_I`` and whether that is all of it (``v`` constant on the support)."""
    supp = p > 0
    V = v.max(axis=1)
    if supp.all():  # the common dense case: skip the masking passes
        V_I = V
        delta = V[:, None] - v
    else:
        V_I = np.where(supp, v, -np.inf).max(axis=1)
        delta = np.where(supp, V_I[:, None] - v, 0.0)
    P_top = (p * (delta == 0.0)).sum(axis=1)
    # constant: no supported state below V_I (the row may sum to 1 - 1e-15), or all but a
    # mass below the double's resolution
    constant = (P_top >= 1.0 - 1e-15) | ~(delta > 0.0).any(axis=1)
    return supp, V, V_I, delta, P_top, constant


def _closed_form_rows(p, v, d, outputs, supp, V, V_I, P_top, constant) -> None:
    """The rows without a root search, in ``outputs``: ``d < 0`` (infeasible), ``d = 0``
    (``q = p``) and ``v`` constant on the support."""
    value, q, lam, status, _ = outputs
    infeasible = d < 0
    value[infeasible], status[infeasible] = -np.inf, INFEASIBLE
    zero = d == 0
    if zero.any():
        value[zero] = (p[zero] * v[zero]).sum(axis=1)
        q[zero] = p[zero]
        lam[zero] = np.where(constant[zero], V[zero] - V_I[zero], np.inf)

    # v constant on the support: everything but e^{-d} of the mass moves to the best state
    flat = (d > 0) & constant
    if flat.any():
        # (with no better zero-probability state nothing moves: q = p)
        keep = np.where(V[flat] > V_I[flat], np.exp(-d[flat]), 1.0)
        qi = keep[:, None] * p[flat]
        lam[flat] = keep * (V[flat] - V_I[flat])
        q[flat] = with_leftover(qi, v[flat], supp[flat], V[flat])
        value[flat] = V[flat] - keep * (V[flat] - V_I[flat])


def _bracket(pt, dt, delt, P_top, gap):
    """``(lo, hi, s_max, s0, mean_delta)``: the bracket of the root in ``s``, its cap
    ``s_max = -log(V - V_I)`` (``eta >= V``), the start and ``sum p delta``."""
    log_delta = np.log(np.where(delt > 0, delt, 1.0))  # log delta, 0 where delta = 0
    mean_delta = (pt * delt).sum(axis=1)
    var_delta = np.maximum((pt * delt**2).sum(axis=1) - mean_delta**2, 1e-300)
    lo = _log_expm1(dt) - np.log(mean_delta)
    with np.errstate(over="ignore"):
        hi = (dt - np.log(P_top) - (pt * log_delta).sum(axis=1)) / (1.0 - P_top)
    # Radii near the largest double put the root beyond 1e300; at s = 1e300 every state
    # below V_I already has q below the double range, so the answer is the same there.
    hi = np.minimum(hi + 1.0, _S_CAP)
    lo = np.minimum(lo, hi - 1.0)
    # eta >= V: s <= s_max = -log(V - V_I) when the best state has probability zero
    with np.errstate(divide="ignore"):
        s_max = np.where(gap > 0, -np.log(gap), np.inf)
    with np.errstate(over="ignore"):
        s0 = np.log(np.sqrt(2.0 * dt / var_delta))
    return lo, hi, s_max, s0, mean_delta


class _StationarityRows:
    """``g_dg(s, idx) -> (g, g', scale, g'')``: the stationarity equation of rows ``idx`` (of
    ``pt, dt, delt``) at ``s``, in the direct form or, where it would cancel, the large-s
    form (:func:`_g_large_s`)."""

    def __init__(self, pt, dt, delt, P_top, mean_delta):
        self.pt, self.dt, self.delt, self.P_top = pt, dt, delt, P_top
        self.mean_delta = mean_delta
        self.log_mean_delta = np.log(mean_delta)

    def __call__(self, s, idx):
        dt = self.dt
        part = idx.size < dt.shape[0]
        delt_i, pt_i = (self.delt[idx], self.pt[idx]) if part else (self.delt, self.pt)
        ell, w, u = _ell_w(delt_i, s)
        pw = pt_i * w
        a0 = pw.sum(axis=1)
        L = (pt_i * ell).sum(axis=1)
        log_a0 = _log_a0(a0, (pt_i * u).sum(axis=1))
        g, scale = L + log_a0 - dt[idx], L - log_a0 + dt[idx]
        a2 = (pw * w).sum(axis=1)
        pwu = pw * u  # dw/ds = -w u
        b1, b2 = pwu.sum(axis=1), (pwu * w).sum(axis=1)
        dg = a2 / a0 - a0
        d2g = (a2 * b1 - 2.0 * b2 * a0) / a0**2 + b1
        # The large-s form where L ~ (1 - P_top) s and log a0 ~ -s would cancel by more
        # than 20 (mean delta e^s > e^20); below, the form above loses < 1e-14 and keeps
        # Halley's steps.
        big = s + self.log_mean_delta[idx] > _LARGE_S
        if big.any():
            g[big], dg[big], scale[big] = _g_large_s(
                s[big],
                delt_i[big],
                pt_i[big],
                self.P_top[idx][big],
                dt[idx][big],
                self.mean_delta[idx][big],
            )
            d2g[big] = 0.0  # Newton steps there (Halley's needs g'', not worth it)
        return g, dg, scale, d2g


def _root_search(g_dg, lo, hi, s_max, s0, max_iter):
    """``(s, iterations, converged, boundary)``: the root of each row, or ``s_max`` where the
    equation is still negative there (the boundary case, ``eta = V``)."""
    n = s0.shape[0]
    capped = s_max < hi
    boundary = np.zeros(n, dtype=bool)
    if capped.any():
        ci = np.flatnonzero(capped)
        g_cap = g_dg(s_max[ci], ci)[0]
        boundary[ci[g_cap <= 0]] = True
        hi = np.where(capped, s_max, hi)
    s = np.where(boundary, s_max, 0.0)
    iters = np.zeros(n, dtype=int)
    ok = np.ones(n, dtype=bool)
    inner = np.flatnonzero(~boundary)
    if inner.size:
        sub = lambda x, i: g_dg(x, inner[i])  # noqa: E731
        s[inner], iters[inner], ok[inner] = newton_bracketed(
            sub, s0[inner], lo[inner], hi[inner], max_iter
        )
    return s, iters, ok, boundary


def _corrected(g_dg, delt, s, boundary):
    """``(s, ell, w, u)`` at the root with one more Newton correction where an ulp of ``s``
    matters.

    The root s* lies between two doubles: at s ~ 690 (best supported state with 1e-300 of the
    mass) one ulp of s moves q by 6e-14 relative. One more Newton correction, kept outside s
    as the factor e^corr of e^s, puts q at round-off. Only where an ulp of s matters (|s| >
    16, ulp >= 3.6e-15): elsewhere it would cost an evaluation for nothing."""
    ell, w, u = _ell_w(delt, s)
    corr = np.zeros(s.shape[0])
    far = np.flatnonzero(~boundary & (np.abs(s) > 16.0) & (s <= 700.0))
    if far.size:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            g_end, dg_end = g_dg(s[far], far)[:2]
            corr[far] = np.where(dg_end > 0, -g_end / dg_end, 0.0)
    fix = (np.abs(corr) <= 1e-12 * np.maximum(1.0, np.abs(s))) & (corr != 0)
    if fix.any():
        dz = delt[fix] * (np.exp(s[fix]) * np.exp(corr[fix]))[:, None]
        w[fix], u[fix] = 1.0 / (1.0 + dz), dz / (1.0 + dz)
        s = s + corr  # (rounds to s where corr is below an ulp: only e^s carried it)
    return s, ell, w, u


def _q_lam(pt, dt, s, ell, w, u, boundary):
    """``(q on the support, lam)`` at the root (before the leftover mass)."""
    L = (pt * ell).sum(axis=1)
    pw = pt * w
    a0 = pw.sum(axis=1)
    log_a0 = _log_a0(a0, (pt * u).sum(axis=1))
    # q_x = lam p_x / (eta - v_x) = lam e^s p_x w_x. Interior (sum_I q = 1): lam e^s = 1/a0,
    # so q = p w / a0 and lam = e^-s / a0, with no exp(L - d): L and d cancel when d is
    # huge (1e18 and beyond). Boundary (eta = V, leftover mass): lam = exp(L - s - d).
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        log_lam = np.where(boundary, L - s - dt, -s - log_a0)
        qi = np.where(boundary[:, None], pt * np.exp(L - dt)[:, None] * w, pw / a0[:, None])
        lam = np.exp(log_lam)
    # a q*_x below the double range (e.g. e^-3900 when almost all of p sits on the best
    # state and d is large) is stored as the smallest normal double: KL(p||q) stays <= d
    # (d is then far above KL's ~709 per unit of mass) and the value moves by < 1e-300
    qi = np.where(pt > 0, np.maximum(qi, np.finfo(float).tiny), 0.0)
    mass = qi.sum(axis=1)
    qi = np.where(boundary[:, None], qi, qi / mass[:, None])  # interior: sum_I q = 1
    return qi, lam


def _g_large_s(s, delta, p, P_top, d, mean_delta):
    """``(g, g', scale)`` for large ``s`` (``eta`` close to ``V_I``), where ``L ~ (1 - P_top) s``
    and ``log a0 ~ -s`` cancel, as do the two terms of ``a2 / a0 - a0``.

    In units of ``mean_delta`` (``delta' = delta / mean_delta``, ``e = e^-s / mean_delta``:
    scale-free round-off), with ``r = 1 / (delta' + e)``, ``w = e r``, ``y = delta' r`` on
    ``delta > 0``, ``B = sum p r`` and ``c = P_top e^s mean_delta + B``:

    - ``g = log c - P_top (s + log mean_delta) + sum p log(delta' + e) - d``;
    - ``g' = (P_top e^s mean_delta sum p y^2 + m sum p (w - w_bar)(r - r_bar)) / c``
      (``m = 1 - P_top``; ``w_bar``, ``r_bar`` the ``p / m``-weighted means over
      ``delta > 0``), nonnegative terms.

    Nothing large cancels, so ``s`` is found to round-off even when the best supported state
    holds 1e-300 of the mass (``s`` ~ 690) or the radius is 1e300.
    """
    m_d = mean_delta[:, None]
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        e = (np.exp(-s) / mean_delta)[:, None]
        pos = delta > 0
        pp = np.where(pos, p, 0.0)
        dn = delta / m_d
        r = np.where(pos, 1.0 / (dn + e), 0.0)
        w, y = e * r, dn * r
        B = (pp * r).sum(axis=1)
        M = (pp * np.log(np.where(pos, dn, 1.0) + e)).sum(axis=1)
        log_md = np.log(mean_delta)
        # P_top e^s mean_delta as a product while e^s is a double: log P_top + s would round
        # at ~1e-13 when s ~ 690 (P_top ~ 1e-300), and g is needed to 1e-17 there
        top = P_top * np.exp(np.minimum(s, 700.0)) * mean_delta
        log_top = np.log(P_top) + s + log_md
        log_c = np.where(s <= 700.0, np.log(top + B), np.logaddexp(log_top, np.log(B)))
        top_s = P_top * (s + log_md)
        g = log_c - top_s + M - d
        scale = np.abs(log_c) + np.abs(top_s) + np.abs(M) + d
        m = pp.sum(axis=1)
        w_bar = (pp * w).sum(axis=1) / m
        r_bar = B / m
        cov = m * (pp * (w - w_bar[:, None]) * (r - r_bar[:, None])).sum(axis=1)
        y2 = (pp * y * y).sum(axis=1)
        # numerator and denominator scaled by 1 / (P_top e^s mean_delta) when that is large
        ea = np.exp(-np.abs(log_top))
        dg = np.where(log_top > 0, (y2 + cov * ea) / (1.0 + B * ea), (ea * y2 + cov) / (ea + B))
    return g, dg, scale


def _log_a0(a0: np.ndarray, one_minus_a0: np.ndarray) -> np.ndarray:
    """``log a0`` from whichever of ``a0 = sum p w`` and ``1 - a0 = sum p u`` (both summed
    directly) carries it without cancellation: ``log1p(-(1 - a0))`` near ``a0 = 1`` (small
    ``s``), ``log a0`` when ``a0`` is small (the best supported state has tiny mass, e.g.
    1e-20, and ``1 - a0`` rounds to 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a0 < 0.5, np.log(a0), np.log1p(-one_minus_a0))


def _ell_w(delta: np.ndarray, s: np.ndarray):
    """``l = log(1 + delta e^s)``, ``w = 1 / (1 + delta e^s)`` and ``u = 1 - w`` per row ``s``.

    The direct form is fast; rows where ``delta e^s`` could overflow use ``logaddexp``.
    """
    z = np.exp(np.minimum(s, 700.0))[:, None]
    with np.errstate(over="ignore", invalid="ignore"):  # rows with s > 600 are redone below
        dz = delta * z
        ell = np.log1p(dz)
        w = 1.0 / (1.0 + dz)
        u = dz * w
    big = s > 600.0
    if big.any():
        with np.errstate(divide="ignore"):
            ell[big] = np.logaddexp(0.0, np.log(delta[big]) + s[big, None])
        w[big] = np.exp(-ell[big])
        u[big] = -np.expm1(-ell[big])
    return ell, w, u


def solve(problem, kernel: str = "auto") -> PlanResult:
    """Solve one ``KLBallIndex`` by the batched kernel (``kernel``: :func:`kl_ball_index`'s)."""
    # the problem object validated its fields at construction
    return kl_ball_index(
        problem.p, problem.v, problem.radius, validate=False, kernel=kernel
    ).element(())
