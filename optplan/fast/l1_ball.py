r"""Fast path of ``L1BallIndex``: the L1-ball index in closed form, batched.

``B(p, v, d) = max { q.v : q in simplex, ||q - p||_1 <= d }`` (accelerating-ucb-indices-mdp
§4.3, the LP of OLP). Greedy solution: ``b = argmax v`` (first index, over all states),
``eps = min(d/2, R)`` with ``R = 1 - p_b`` the mass off ``b``; ``q_b = p_b + eps`` and ``eps``
is drained from the other states in increasing ``v`` (ties in index order):

.. math:: q_j = p_j - \min\big(p_j, \max(0, \varepsilon - C_{j-1})\big), \qquad
          B = v_b - \sum_{j \ne b} q_j (v_b - v_j),

``C`` the cumulative mass in drain order. Written this way ``B`` is exactly ``v_b`` once all
mass is on ``b`` (and for constant ``v``), never above ``v_b``, and, in floating point too,
non-decreasing in ``d`` (every operation is monotone). ``dB/dd = (v_b - v_m) / 2`` with ``m``
the first state whose cumulative mass exceeds ``eps`` (the right derivative at a kink), 0 when
``eps = R``. ``d < 0`` is infeasible (value ``-inf``); ``d = 0`` gives ``q = p``.
"""

from __future__ import annotations

import time

import numpy as np

from ..problems._index import check_index_inputs
from ..result import INFEASIBLE, OPTIMAL, BatchResult, PlanResult
from . import _kernels
from ._batch import broadcast_index_inputs, flag_overflow, lane_result, single_row, use_compiled


def l1_ball_index(p, v, radius, validate: bool = True, kernel: str = "auto") -> BatchResult:
    """Batched L1-ball index ``B(p, v, radius)``.

    Parameters
    ----------
    p : array_like, shape batch + (S,)
        Distributions (zeros allowed: mass may move to a zero-probability state).
    v : array_like, shape (S,) or broadcastable to ``p``
        Values; a shared ``v`` is sorted once for the whole batch.
    radius : float or array_like broadcastable to ``batch``
        L1 radius ``d`` (negative: infeasible).

    validate : bool
        Check the inputs (default); ``False`` skips the checks for inputs that already
        passed them.
    kernel : {"auto", "numpy", "numba"}
        ``"numba"``: the compiled closed form of :mod:`optplan.fast._kernels` (the same
        drain order and formulas, one compiled loop per row; one instance of float64 ``(S,)``
        arrays and a scalar radius goes straight to it); ``"numpy"``: this module's numpy code
        (the reference); ``"auto"`` (default): numba when it is installed.

    Returns
    -------
    BatchResult
        ``value`` (B), ``x`` (q*), ``multiplier`` (``dB/d radius``, the right derivative at a
        kink), ``status`` per element. Equal to a loop of scalar calls.
    """
    start = time.perf_counter()
    compiled = use_compiled(kernel, _kernels.AVAILABLE)
    one = single_row(p, v, radius) if compiled else None
    if one is not None:  # one instance: checked and solved in one compiled call
        q = np.empty(one[0].shape[0])
        value, lam, code = (_kernels.LANES or _kernels.lanes())["_l1_into"](
            *one, validate is True or bool(validate), q
        )
        res = lane_result(code, value, q, lam, 0, start, "closed_form")
        if res is not None:
            return res
    if validate:
        p, v, d = check_index_inputs(p, v, radius, "radius")
    else:
        p, v, d = broadcast_index_inputs(p, v, radius)
    batch, S = d.shape, p.shape[-1]
    shared_v = d.size > 0 and all(stride == 0 for stride in v.strides[:-1])
    p = np.ascontiguousarray(p.reshape(-1, S), dtype=float)
    d = d.reshape(-1).astype(float)
    n = d.size
    if compiled:
        v = v[(0,) * (v.ndim - 1)][None] if shared_v else v.reshape(-1, S)
        value, q, lam = np.empty(n), np.empty((n, S)), np.empty(n)
        code = _kernels.l1_rows(p, v, d, shared_v, value, q, lam)
        status = np.full(n, OPTIMAL, dtype="<U20")
        status[code == _kernels.INFEASIBLE_ROW] = INFEASIBLE
    else:
        value, q, lam, status = _numpy_rows(p, v, d, shared_v)
    flag_overflow(value, status)
    return BatchResult(
        value=value.reshape(batch),
        x=q.reshape(batch + (S,)),
        multiplier=lam.reshape(batch),
        status=status.reshape(batch),
        iterations=np.zeros(batch, dtype=int),
        solve_time=time.perf_counter() - start,
        method="fast",
        solver="closed_form",
    )


def _numpy_rows(p, v, d, shared_v):
    """The reference: ``(value, q, lam, status)`` of the rows ``p`` ``(n, S)``, ``d`` ``(n,)``
    (``v`` broadcast to ``p``; ``shared_v``: one ``v`` for all rows, sorted once)."""
    n, S = p.shape

    # drain order: increasing v, the best state (first argmax) last
    v = np.ascontiguousarray(v[(0,) * (v.ndim - 1)][None] if shared_v else v.reshape(-1, S))
    best = v.argmax(axis=1)
    key = v.copy()
    key[np.arange(key.shape[0]), best] = np.inf
    order = np.argsort(key, axis=1, kind="stable")
    if shared_v:
        order, best, v = (np.broadcast_to(a, (n,) + a.shape[1:]) for a in (order, best, v))
    rows = np.arange(n)
    V = v[rows, best]
    drain = order[:, :-1]
    ps = np.take_along_axis(p, drain, axis=1)
    gap = V[:, None] - np.take_along_axis(v, drain, axis=1)

    cum = np.cumsum(ps, axis=1)
    R = cum[:, -1] if S > 1 else np.zeros(n)
    eps = np.clip(0.5 * d, 0.0, R)
    before = np.concatenate([np.zeros((n, 1)), cum[:, :-1]], axis=1)
    qs = ps - np.minimum(ps, np.maximum(0.0, eps[:, None] - before))

    value = V - (qs * gap).sum(axis=1)
    q = np.empty_like(p)
    np.put_along_axis(q, drain, qs, axis=1)
    q[rows, best] = p[rows, best] + eps
    # the margin: states with cum <= eps are drained; the next one is drained at the margin
    m = (cum <= eps[:, None]).sum(axis=1)
    inside = m < S - 1
    lam = np.zeros(n)
    lam[inside] = 0.5 * gap[rows[inside], m[inside]]

    status = np.full(n, OPTIMAL, dtype="<U20")
    infeasible = d < 0
    value[infeasible], status[infeasible] = -np.inf, INFEASIBLE
    q[infeasible], lam[infeasible] = np.nan, np.nan
    return value, q, lam, status


def solve(problem, kernel: str = "auto") -> PlanResult:
    """Solve one ``L1BallIndex`` by the batched kernel (``kernel``: :func:`l1_ball_index`'s)."""
    # the problem object validated its fields at construction
    return l1_ball_index(
        problem.p, problem.v, problem.radius, validate=False, kernel=kernel
    ).element(())
