r"""Fast path of ``KLBallIndex``: the KL-ball index by a 1-D safeguarded Newton search, batched.

``C(p, v, d) = max { q.v : q in simplex, KL(p||q) <= d }`` (accelerating-ucb-indices-mdp §4.1).
Lagrangian duality in ``q`` (DESIGN.md) gives, with ``I = {x : p_x > 0}``,

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

from ..result import INFEASIBLE, MAX_ITER, BatchResult, PlanResult
from ._batch import batch_result, flat_batch
from ._roots import newton_bracketed
from ._simplex import with_leftover


def _log_expm1(d: np.ndarray) -> np.ndarray:
    """``log(exp(d) - 1)`` without overflow or cancellation, for ``d > 0``."""
    big = d > 1.0
    out = np.empty_like(d)
    out[big] = d[big] + np.log(-np.expm1(-d[big]))
    out[~big] = np.log(np.expm1(d[~big]))
    return out


def kl_ball_index(p, v, radius, max_iter: int = 100, validate: bool = True) -> BatchResult:
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

    Returns
    -------
    BatchResult
        ``value`` (C), ``x`` (q*), ``multiplier`` (``dC/d radius``), ``status`` per element.
        Equal to a loop of scalar calls.
    """
    start = time.perf_counter()
    p, v, d, batch, outputs = flat_batch(p, v, radius, "radius", validate)
    value, q, lam, status, iterations = outputs

    supp = p > 0
    V = v.max(axis=1)
    if supp.all():  # the common dense case: skip the masking passes
        V_I = V
        delta = V[:, None] - v
    else:
        V_I = np.where(supp, v, -np.inf).max(axis=1)
        delta = np.where(supp, V_I[:, None] - v, 0.0)
    P_top = (p * (delta == 0.0)).sum(axis=1)
    constant = P_top >= 1.0 - 1e-15

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

    todo = np.flatnonzero((d > 0) & ~constant)
    if todo.size:
        if todo.size == d.shape[0]:
            pt, dt, delt = p, d, delta
        else:
            pt, dt, delt = p[todo], d[todo], delta[todo]
        log_delta = np.log(np.where(delt > 0, delt, 1.0))  # log delta, 0 where delta = 0
        mean_delta = (pt * delt).sum(axis=1)
        var_delta = np.maximum((pt * delt**2).sum(axis=1) - mean_delta**2, 1e-300)
        lo = _log_expm1(dt) - np.log(mean_delta)
        hi = (dt - np.log(P_top[todo]) - (pt * log_delta).sum(axis=1)) / (1.0 - P_top[todo]) + 1.0
        lo = np.minimum(lo, hi - 1.0)
        # eta >= V: s <= s_max = -log(V - V_I) when the best state has probability zero
        gap = V[todo] - V_I[todo]
        with np.errstate(divide="ignore"):
            s_max = np.where(gap > 0, -np.log(gap), np.inf)

        def g_dg(s, idx):
            ell, w, u = _ell_w(delt[idx] if idx.size < todo.size else delt, s)
            pt_i = pt[idx] if idx.size < todo.size else pt
            pw = pt_i * w
            a0 = pw.sum(axis=1)
            L = (pt_i * ell).sum(axis=1)
            # log a0 = log1p(-sum p u) with u = 1 - w computed directly: no loss near a0 = 1
            log_a0 = np.log1p(-(pt_i * u).sum(axis=1))
            a2 = (pw * w).sum(axis=1)
            pwu = pw * u  # dw/ds = -w u
            b1, b2 = pwu.sum(axis=1), (pwu * w).sum(axis=1)
            dg = a2 / a0 - a0
            d2g = (a2 * b1 - 2.0 * b2 * a0) / a0**2 + b1
            return L + log_a0 - dt[idx], dg, L - log_a0 + dt[idx], d2g

        capped = s_max < hi
        boundary = np.zeros(todo.size, dtype=bool)
        if capped.any():
            ci = np.flatnonzero(capped)
            g_cap = g_dg(s_max[ci], ci)[0]
            boundary[ci[g_cap <= 0]] = True
            hi = np.where(capped, s_max, hi)
        s0 = np.log(np.sqrt(2.0 * dt / var_delta))
        s = np.where(boundary, s_max, 0.0)
        iters = np.zeros(todo.size, dtype=int)
        ok = np.ones(todo.size, dtype=bool)
        inner = np.flatnonzero(~boundary)
        if inner.size:
            sub = lambda x, i: g_dg(x, inner[i])  # noqa: E731
            s[inner], iters[inner], ok[inner] = newton_bracketed(
                sub, s0[inner], lo[inner], hi[inner], max_iter
            )
        ell = _ell_w(delt, s)[0]
        L = (pt * ell).sum(axis=1)
        qi = pt * np.exp(L[:, None] - dt[:, None] - ell)
        # a q*_x below the double range (e.g. e^-3900 when almost all of p sits on the best
        # state and d is large) is stored as the smallest normal double: KL(p||q) stays <= d
        # and the value moves by < 1e-300
        qi = np.where(pt > 0, np.maximum(qi, np.finfo(float).tiny), 0.0)
        mass = qi.sum(axis=1)
        qi = np.where(boundary[:, None], qi, qi / mass[:, None])  # interior: sum_I q = 1
        q[todo] = with_leftover(qi, v[todo], supp[todo], V[todo])
        value[todo] = V[todo] - (qi * (V[todo][:, None] - v[todo])).sum(axis=1)
        lam[todo] = np.exp(L - s - dt)
        iterations[todo] = iters
        status[todo[~ok]] = MAX_ITER

    return batch_result(batch, outputs, start, "halley")


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


def solve(problem) -> PlanResult:
    """Solve one ``KLBallIndex`` through the batched kernel."""
    # the problem object validated its fields at construction
    return kl_ball_index(problem.p, problem.v, problem.radius, validate=False).element(())
