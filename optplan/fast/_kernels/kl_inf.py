r"""The compiled KL-inf kernel: ``min KL(p || q)`` over ``q.v >= rho``, one row at a time.

:func:`_kl_inf_row` takes the same cases as :func:`optplan.fast.kl_inf.kl_inf_rate` (the
reference: ``rho <= p.v``: 0; ``rho >= V``: infeasible), its brackets, start and Newton
iteration in ``r = log(1 - lam (V - rho))``, in scalars; rows that do not converge are left to
numpy.
"""

from __future__ import annotations

import math

import numpy as np

from .common import DONE, INFEASIBLE_ROW, LEFT, _bracketed, _leftover, _valid_one, call_rows, jit


@jit
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
            r, lo, hi, converged = _bracketed(r, r - g / dg, g, scale, lo, hi)
            if converged:
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


@jit
def _kl_inf_rows(P, Vv, R, max_iter, value, q, lam, iterations, code):  # pragma: no cover
    B, S = P.shape
    c = np.empty(S)
    for i in range(B):
        val, lm, it, k = _kl_inf_row(P[i], Vv[i], R[i], max_iter, q[i], c)
        code[i] = k
        value[i] = val
        lam[i] = lm
        iterations[i] = it


@jit
def _kl_inf_one(p, v, rho, max_iter, validate):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_one`: ``(value, lam, iterations, code, q)``."""
    q = np.empty(p.shape[0])
    if validate and not _valid_one(p, v, rho):
        return math.nan, math.nan, 0, LEFT, q
    value, lam, it, code = _kl_inf_row(p, v, rho, max_iter, q, np.empty(p.shape[0]))
    return value, lam, it, code, q


@jit
def _kl_inf_into(p, v, rho, max_iter, validate, q):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_into`: ``(value, lam, iterations, code)``, ``q`` filled in place."""
    if validate and not _valid_one(p, v, rho):
        return math.nan, math.nan, 0, LEFT
    return _kl_inf_row(p, v, rho, max_iter, q, np.empty(p.shape[0]))


def kl_inf_rows(p, v, rho, max_iter, value, q, lam, iterations) -> np.ndarray:
    """KL-inf rows: fill the outputs in place; return the per-row codes (``DONE``,
    ``INFEASIBLE_ROW``, ``LEFT``)."""
    outputs = (value, q, lam, iterations)
    return call_rows("_kl_inf_rows", p, v, rho, max_iter, outputs, np.empty(rho.shape[0], np.int64))


def kl_inf_one(p, v, rho: float, max_iter: int, validate: bool):
    """One KL-inf row: ``(value, lam, iterations, code, q)`` (``LEFT``: the general path)."""
    return (jit.table or jit.compiled())["_kl_inf_one"](p, v, rho, max_iter, validate)
