r"""Fast path of ``KLInfRate``: the KL-minimization rate by a 1-D safeguarded Newton search.

``D(p, v, rho) = min { KL(p||q) : q in simplex, q.v >= rho }`` (accelerating-ucb-indices-mdp
§4.2, Theorems 3-4). With ``I = {x : p_x > 0}`` and ``V = max_x v_x`` over all states,

.. math:: D = \max_{0 \le \lambda \le 1/(V - \rho)}
          \sum_{x \in I} p_x \log\big(1 - \lambda (v_x - \rho)\big)

(the paper's λ-formulation with its sign convention flipped), ``q_x = p_x / (1 - lam (v_x - rho))``
on ``I`` and the multiplier of ``q.v >= rho`` is ``lam = dD/drho``. When ``V`` is attained only
by zero-probability states the maximum may sit at ``lam = 1/(V - rho)``, and the leftover mass
goes to the best zero-probability state.

The stationarity equation is solved in ``r = log(1 - lam (V - rho))`` (``r <= 0``): with
``c = (V - v)/(V - rho) >= 0``, ``eps = -expm1(r)`` and ``t_x = e^r + eps c_x``
(``= 1 - lam (v_x - rho)``),

.. math:: g(r) = -\sum_I p_x \frac{1 - c_x}{t_x} = 0, \qquad
          g'(r) = e^r \sum_I p_x \frac{(1 - c_x)^2}{t_x^2} \ge 0,

which resolves ``lam`` near 0 (``rho`` just above ``p.v``) and near ``1/(V - rho)`` (``rho``
just below ``V``) without cancellation. Brackets: ``g(0) = (rho - mu)/(V - rho) > 0``, and
``g < 0`` below ``log(P_V / 4)`` (``P_V`` = mass at ``V``), or below an explicit bound from
``g(-inf)`` when ``P_V = 0``.

Defined edge cases (Theorem 3): ``rho <= p.v`` gives 0 (``q = p``, multiplier 0);
``rho > V``, and ``rho = V`` with ``v`` not constant, give ``+inf`` with status
``infeasible`` (no ``q`` with finite divergence meets the target).
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import check_int
from ..result import INFEASIBLE, MAX_ITER, BatchResult, PlanResult
from . import _kernels
from ._batch import lane_result, single_row, solve_rows, use_compiled
from ._roots import newton_bracketed
from ._simplex import with_leftover


def kl_inf_rate(
    p, v, target, max_iter: int = 100, validate: bool = True, kernel: str = "auto"
) -> BatchResult:
    """Batched KL-minimization rate ``D(p, v, target)``.

    Parameters
    ----------
    p : array_like, shape batch + (S,)
    v : array_like, shape (S,) or broadcastable to ``p``
    target : float or array_like broadcastable to ``batch``
        ``rho``.

    validate : bool
        Check the inputs (default); ``False`` skips the checks for inputs that already
        passed them.
    kernel : {"auto", "numpy", "numba"}
        ``"numba"``: the compiled row kernel of :mod:`optplan.fast._kernels` (the same
        steps, one compiled loop per row; one instance of float64 ``(S,)`` arrays and a scalar
        target goes straight to it), this module's numpy kernel (the reference) on the rows
        it leaves (no convergence); ``"auto"`` (default) picks numba when it is installed.

    Returns
    -------
    BatchResult
        ``value`` (D), ``x`` (q*), ``multiplier`` (``dD/d target``), ``status`` per element.
    """
    start = time.perf_counter()
    if type(max_iter) is not int or max_iter < 1:
        check_int("max_iter", max_iter)
    compiled = use_compiled(kernel, _kernels.AVAILABLE)
    one = single_row(p, v, target) if compiled else None
    if one is not None:  # one instance: checked and solved in one compiled call
        q = np.empty(one[0].shape[0])
        value, lam, its, code = (_kernels.LANES or _kernels.lanes())["_kl_inf_into"](
            *one, min(max_iter, _kernels.MAX_ITER_CAP), validate is True or bool(validate), q
        )
        res = lane_result(code, value, q, lam, its, start, "newton")
        if res is not None:
            return res
    rows = _compiled_rows if compiled else None
    return solve_rows(
        p, v, target, "target", validate, max_iter, rows, _numpy_rows, start, "newton"
    )


def _compiled_rows(p, v, rho, max_iter, outputs) -> np.ndarray:
    """The compiled row kernel on rows ``(B, S)``: fill ``outputs`` in place; return the
    indices of the rows it leaves (no convergence)."""
    value, q, lam, status, iterations = outputs
    code = _kernels.kl_inf_rows(p, v, rho, max_iter, value, q, lam, iterations)
    status[code == _kernels.INFEASIBLE_ROW] = INFEASIBLE
    return np.flatnonzero(code == _kernels.LEFT)


def _numpy_rows(p, v, rho, max_iter, outputs) -> None:
    """The reference kernel on rows ``(B, S)``: fill ``outputs`` (from ``flat_batch``) in
    place."""
    value, q, lam, status, iterations = outputs

    supp = p > 0
    V = v.max(axis=1)
    # p.v, clipped to the support's range: round-off must not put a constant v's mean below v
    support_v = np.where(supp, v, np.nan)
    mu = np.clip((p * v).sum(axis=1), np.nanmin(support_v, axis=1), np.nanmax(support_v, axis=1))
    below = rho <= mu
    value[below], q[below], lam[below] = 0.0, p[below], 0.0
    out = ~below & (rho >= V)  # rho > V, or rho = V > mu (v not constant)
    value[out], status[out] = np.inf, INFEASIBLE

    todo = np.flatnonzero(~below & ~out)
    if todo.size:
        pt, vt, rt, Vt = p[todo], v[todo], rho[todo], V[todo]
        st = supp[todo]
        c = np.where(st, (Vt[:, None] - vt) / (Vt - rt)[:, None], 1.0)
        one_c = np.where(st, 1.0 - c, 0.0)
        P_V = np.where(st & (vt == Vt[:, None]), pt, 0.0).sum(axis=1)

        # no support mass at V: the optimum may be at lam = 1/(V - rho) (r = -inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            k0 = np.where(P_V > 0, np.inf, (pt * one_c / c).sum(axis=1))
            M = (pt * one_c**2 / np.minimum(c, 1.0) ** 2).sum(axis=1)
            lo = np.where(
                P_V > 0,
                np.log(np.minimum(P_V / 4.0, 0.5)),
                np.log(np.clip(k0 / (2.0 * M), 1e-300, 0.5)),
            )
        boundary = k0 <= 0
        hi = np.zeros(todo.size)
        var = np.maximum((pt * vt**2).sum(axis=1) - mu[todo] ** 2, 1e-300)
        # start: lam ~ (rho - mu) / Var near the mean; near V, k ~ P_V / omega + k_rest (a
        # variance at its 1e-300 floor overflows the ratio: the start saturates at 1 - 1e-16)
        with np.errstate(over="ignore"):
            eps0 = np.clip((rt - mu[todo]) / var * (Vt - rt), 1e-300, 1.0 - 1e-16)
        with np.errstate(divide="ignore", invalid="ignore"):
            k_rest = np.where(st & (c > 0), pt * one_c / c, 0.0).sum(axis=1)
            omega_v = np.where((P_V > 0) & (k_rest < 0), P_V / -k_rest, np.nan)
        near_v = (rt - mu[todo] > Vt - rt) & np.isfinite(omega_v)
        r0 = np.where(near_v, np.log(np.clip(omega_v, 1e-300, 1.0)), np.log1p(-eps0))

        def g_dg(r, idx):
            t = _terms(r, c[idx])
            ratio = pt[idx] * one_c[idx] / t
            return (
                -ratio.sum(axis=1),
                np.exp(r) * (ratio * one_c[idx] / t).sum(axis=1),
                np.abs(ratio).sum(axis=1),
            )

        r = np.full(todo.size, -np.inf)
        iters = np.zeros(todo.size, dtype=int)
        ok = np.ones(todo.size, dtype=bool)
        inner = np.flatnonzero(~boundary)
        if inner.size:
            sub = lambda x, i: g_dg(x, inner[i])  # noqa: E731
            r[inner], iters[inner], ok[inner] = newton_bracketed(
                sub, r0[inner], lo[inner], hi[inner], max_iter
            )
        eps = -np.expm1(r)
        t = _terms(r, c)
        with np.errstate(divide="ignore"):
            log_t = np.where(eps[:, None] < 0.5, np.log1p(-eps[:, None] * one_c), np.log(t))
        # D >= 0; a target within round-off of p.v can sum to -1e-32
        value[todo] = np.maximum((pt * np.where(st, log_t, 0.0)).sum(axis=1), 0.0)
        qi = np.where(st, pt / t, 0.0)
        qi = np.where(boundary[:, None], qi, qi / qi.sum(axis=1, keepdims=True))
        q[todo] = with_leftover(qi, vt, st, Vt)
        lam[todo] = eps / (Vt - rt)
        iterations[todo] = iters
        status[todo[~ok]] = MAX_ITER


def _terms(r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``t = e^r + (1 - e^r) c`` (``= 1 - lam (v - rho)``), exact at both ends."""
    return np.exp(r)[:, None] - np.expm1(r)[:, None] * c


def solve(problem, kernel: str = "auto") -> PlanResult:
    """Solve one ``KLInfRate`` by the batched kernel (``kernel``: :func:`kl_inf_rate`'s)."""
    # the problem object validated its fields at construction
    return kl_inf_rate(problem.p, problem.v, problem.target, validate=False, kernel=kernel).element(
        ()
    )
