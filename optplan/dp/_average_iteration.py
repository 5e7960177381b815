"""Iterations of a fixed policy's average reward: relative value iteration (gain and bias)
and power iteration (stationary distribution), each with an a-posteriori stopping rule; in
NumPy, and as one compiled loop whose steps read the chain's rows once for both (numba,
when installed). :func:`optplan.dp.evaluate_unichain` tries them on large chains before it
factorizes."""

from __future__ import annotations

import math

import numpy as np

from .._jit import Jit

#: From this many states on, :func:`evaluate_unichain` first tries iteration (a matrix-vector
#: product per step, ``O(S^2)``) before the ``O(S^3)`` factorization: a random dense chain
#: mixes in a handful of steps. Below, the factorization costs less than the attempt.
ITERATIVE_MIN_STATES = 200
#: The iteration may take at most this many steps: one step costs 1/60 to 1/170 of a
#: factorization from 200 to 2000 states (measured). A chain that is periodic, mixes slowly
#: or stalls at round-off is handed to the factorization as soon as its contraction rate says
#: it will not make it.
ITERATIVE_BUDGET = 48
#: The iteration stops when its a-posteriori error bound is below this, relative to the
#: larger of ``max |r|`` and ``max |h|``: a few units in the last place of an ``O(S)``-term
#: dot product, as close as the factorization comes.
ITERATIVE_TOL = 1e-13
#: Policy iteration's evaluations on large chains are this accurate (relative) until the
#: policy repeats; that policy is then evaluated again to :data:`ITERATIVE_TOL`, so the
#: returned policy is greedy in its own exact values.
LOOSE_TOL = 1e-4
#: Once an improvement changes at most this fraction of the states, the next policy is
#: evaluated to :data:`ITERATIVE_TOL` at once: it is usually the last one (random dense
#: models, S = 500: 6 states change, then none), and evaluating it loosely first would cost
#: one more full backup. A policy that still changes after it only costs that evaluation.
TIGHTEN_FRACTION = 0.05


def _converged(step: float, rate: float, tol: float) -> bool:
    """A geometric tail ``step * rate / (1 - rate)`` (at least ``step``) below ``tol``."""
    return rate < 1.0 and step * max(1.0, rate / (1.0 - rate)) <= tol


def _hopeless(it: int, step: float, rate: float, tol: float, budget: int) -> bool:
    """No contraction, or too slow to reach ``tol`` within ``budget`` steps."""
    if it < 3:
        return False
    if not rate < 1.0:
        return True
    return rate > 0.0 and it + math.log(tol / step) / math.log(rate) > budget


def _iterate_average(P_pi: np.ndarray, r_pi: np.ndarray, budget: int, h=None, tol=ITERATIVE_TOL):
    """``(gain, h, steps)`` by relative value iteration of the fixed policy, ``h_{k+1} = T h_k
    - (T h_k)[0]`` with ``T h = r + P_pi h`` from ``h`` (default 0), or ``None`` when it would
    not converge within ``budget`` steps. ``min (T h - h) <= g <= max (T h - h)`` (Puterman
    Thm 8.5.5), so the gain is the midpoint; the bias error is bounded by the geometric tail
    of the steps' spans, with the contraction rate read off the last two ratios."""
    S = r_pi.shape[0]
    scale = float(np.abs(r_pi).max())
    if scale == 0.0:
        return 0.0, np.zeros(S), 0
    h = np.zeros(S) if h is None else h.copy()
    spans = []
    # (preallocated buffers: at S = 500 the loop's own numpy calls cost half a matvec each step)
    Th, d = np.empty(S), np.empty(S)
    with np.errstate(over="ignore", invalid="ignore"):
        for it in range(1, budget + 1):
            np.dot(P_pi, h, out=Th)
            Th += r_pi
            state, gain = _relative_step(Th, h, d, spans, it, scale, tol, budget)
            if state == _DONE:
                return gain, h, it
            if state == _FAIL:
                return None
    return None


#: States of an iteration after a step (:func:`_relative_step`, :func:`_power_step`).
_GO, _DONE, _FAIL = 0, 1, 2


def _relative_step(Th, h, d, spans, it: int, scale: float, tol: float, budget: int):
    """The bookkeeping of step ``it`` of the fixed policy's relative value iteration, given
    ``Th = r + P h``: ``h <- Th - Th[0]`` (in place; ``d``: a work array), the span of
    ``Th - h`` appended to ``spans``; ``(_DONE, gain)`` once the a-posteriori bound is met,
    ``(_FAIL, None)`` when the span is not finite or the rate too slow for ``budget``,
    ``(_GO, None)`` otherwise."""
    np.subtract(Th, h, out=d)
    lo, hi = float(d.min()), float(d.max())
    span = hi - lo
    if not math.isfinite(span):
        return _FAIL, None
    spans.append(span)
    np.subtract(Th, Th[0], out=h)
    rate = max(spans[-1] / spans[-2], spans[-2] / spans[-3]) if it >= 3 else 1.0
    bound = tol * max(scale, float(h.max()), -float(h.min()))
    if span == 0.0 or _converged(span, rate, bound):
        return _DONE, 0.5 * (lo + hi)
    if _hopeless(it, span, rate, bound, budget):
        return _FAIL, None
    return _GO, None


def _power_step(y, x, d, moves, it: int, budget: int) -> int:
    """The bookkeeping of power-iteration step ``it`` (``y = x P``): ``||y - x||_1``
    appended to ``moves`` (``d``: a work array); :data:`_DONE`, :data:`_FAIL` or
    :data:`_GO` as :func:`_relative_step`, at :data:`ITERATIVE_TOL`."""
    np.subtract(y, x, out=d)
    moves.append(float(np.abs(d, out=d).sum()))
    rate = max(moves[-1] / moves[-2], moves[-2] / moves[-3]) if it >= 3 else 1.0
    if moves[-1] == 0.0 or _converged(moves[-1], rate, ITERATIVE_TOL):
        return _DONE
    if _hopeless(it, moves[-1], rate, ITERATIVE_TOL, budget):
        return _FAIL
    return _GO


def _iterate_stationary(P_pi: np.ndarray):
    """``pi`` by power iteration from the uniform distribution, or ``None`` (as
    :func:`_iterate_average`); the steps are ``||x_{k+1} - x_k||_1``."""
    S = P_pi.shape[0]
    x, y, diff = np.full(S, 1.0 / S), np.empty(S), np.empty(S)
    steps = []
    budget = ITERATIVE_BUDGET
    for it in range(1, budget + 1):
        np.dot(x, P_pi, out=y)
        state = _power_step(y, x, diff, steps, it, budget)
        x, y = y, x
        if state == _DONE:
            return x
        if state == _FAIL:
            return None
    return None


def _rows4_py(P, pol, i):  # pragma: no cover - compiled by numba
    """The chain's rows ``i`` to ``i + 3``, ``P[s, pol[s]]`` (views)."""
    return P[i, pol[i]], P[i + 1, pol[i + 1]], P[i + 2, pol[i + 2]], P[i + 3, pol[i + 3]]


def _joint_step_py(P, pol, h, r, x, Th, y):  # pragma: no cover - compiled by numba
    """``Th = r + P_pi h`` and ``y = x P_pi`` in one pass over the chain's rows ``P[s,
    pol[s]]`` (read in place: ``P`` is the model's ``(S, A, S)``, or ``P_pi[:, None]`` with
    ``pol = 0``), each row read once (two BLAS calls read it twice), four rows at a time:
    each pass over ``y`` then adds four rows, so ``y`` is loaded and stored a quarter as
    often (one row at a time: 47 us at S = 500 and 3.3 ms at S = 2000, where ``y``, ``h``
    and a row overflow L1; four: 33 us and 1.8 ms; a BLAS ``P_pi @ h`` alone: 30 us and
    1.5 ms). The sums' order is the compiler's (fastmath reassoc, so they vectorize)."""
    S = P.shape[0]
    for j in range(S):
        y[j] = 0.0
    i = 0
    while i + 4 <= S:
        p0, p1, p2, p3 = _rows4(P, pol, i)
        x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
        a0 = a1 = a2 = a3 = 0.0
        for j in range(S):
            hj = h[j]
            q0, q1, q2, q3 = p0[j], p1[j], p2[j], p3[j]
            a0 += q0 * hj
            a1 += q1 * hj
            a2 += q2 * hj
            a3 += q3 * hj
            y[j] += (x0 * q0 + x1 * q1) + (x2 * q2 + x3 * q3)
        Th[i], Th[i + 1] = r[i] + a0, r[i + 1] + a1
        Th[i + 2], Th[i + 3] = r[i + 2] + a2, r[i + 3] + a3
        i += 4
    for k in range(i, S):
        acc = 0.0
        xk = x[k]
        row = P[k, pol[k]]
        for j in range(S):
            pkj = row[j]
            acc += pkj * h[j]
            y[j] += xk * pkj
        Th[k] = r[k] + acc


def _value_step_py(P, pol, h, r, Th):  # pragma: no cover - compiled by numba
    """``Th = r + P_pi h`` (:func:`_joint_step_py` without the power iteration), four rows
    at a time, sums in the compiler's order."""
    S = P.shape[0]
    i = 0
    while i + 4 <= S:
        p0, p1, p2, p3 = _rows4(P, pol, i)
        a0 = a1 = a2 = a3 = 0.0
        for j in range(S):
            hj = h[j]
            a0 += p0[j] * hj
            a1 += p1[j] * hj
            a2 += p2[j] * hj
            a3 += p3[j] * hj
        Th[i], Th[i + 1] = r[i] + a0, r[i + 1] + a1
        Th[i + 2], Th[i + 3] = r[i + 2] + a2, r[i + 3] + a3
        i += 4
    for k in range(i, S):
        acc = 0.0
        row = P[k, pol[k]]
        for j in range(S):
            acc += row[j] * h[j]
        Th[k] = r[k] + acc


def _improve_py(P, R, mask, h, pol, q, new):  # pragma: no cover - compiled by numba
    """Policy iteration's improvement in one pass over ``P``: ``q = R + P h`` (sums in the
    compiler's order) and ``new``, :func:`greedy` of ``q`` over the admissible actions
    keeping ``pol[s]`` within ``1e-12`` (relative) of the best, as
    ``greedy(masked(q, mask), pol, 1e-12)`` (the first maximum; NaN counts as the maximum,
    as in ``argmax``). Returns how many states changed action."""
    S, A = R.shape
    changed = 0
    for s in range(S):
        best = -1
        top = 0.0
        for a in range(A):
            row = P[s, a]
            acc = 0.0
            for j in range(S):
                acc += row[j] * h[j]
            v = R[s, a] + acc
            q[s, a] = v
            if mask[s, a] and (best < 0 or v > top or (v != v and top == top)):
                best, top = a, v
        incumbent = q[s, pol[s]]
        if incumbent >= top - 1e-12 * (1.0 + abs(top)):
            new[s] = pol[s]
        else:
            new[s] = best
            changed += 1
    return changed


def _joint_loop_py(P, pol, h, r, x, y, Th, stop, pi, out, power):  # pragma: no cover - numba
    """:func:`_iterate_joint`'s loop compiled whole (numba): each step one fused pass
    (:func:`_fused_step`, the compiled :func:`_joint_step_py`), then the bookkeeping of
    :func:`_relative_step` and :func:`_power_step` in scalars (the last three spans and
    moves; the same bounds and rates). ``h`` ends as the evaluation's bias, ``pi`` gets the
    stationary distribution; ``out = [gain, evaluation steps, power steps]``. Returns
    :data:`_DONE` or :data:`_FAIL` (not converging in ``budget`` steps included).

    ``power=False``: the evaluation alone (:func:`_iterate_average`'s iteration; ``pi``,
    ``x``, ``y`` untouched, ``out[2] = 0``). Once the power iteration has converged, the
    remaining evaluation steps are value-only passes (:func:`_value_step`). ``stop = (budget,
    tol, scale)``."""
    budget, tol, scale = stop
    S = P.shape[0]
    s1 = s2 = s3 = 0.0  # the last three spans (s1 the latest)
    m1 = m2 = m3 = 0.0  # the last three moves
    evaluated = False
    stationary = not power
    for it in range(1, budget + 1):
        if stationary:
            _value_step(P, pol, h, r, Th)
        else:
            _fused_step(P, pol, h, r, x, Th, y)
        if not evaluated:  # relative value iteration of the fixed policy
            lo = math.inf
            hi = -math.inf
            for i in range(S):
                di = Th[i] - h[i]
                if not math.isfinite(di):  # overflow (min/max alone could skip a NaN)
                    return _FAIL
                lo = min(lo, di)
                hi = max(hi, di)
            span = hi - lo
            s3, s2, s1 = s2, s1, span
            t0 = Th[0]
            h_hi = -math.inf
            h_lo = math.inf
            for i in range(S):
                hi_ = Th[i] - t0
                h[i] = hi_
                h_hi = max(h_hi, hi_)
                h_lo = min(h_lo, hi_)
            rate = max(s1 / s2, s2 / s3) if it >= 3 else 1.0
            bound = tol * max(scale, h_hi, -h_lo)
            if span == 0.0 or _converged_c(span, rate, bound):
                evaluated = True
                out[0] = 0.5 * (lo + hi)
                out[1] = it
            elif _hopeless_c(it, span, rate, bound, budget):
                return _FAIL
        if not stationary:  # power iteration: y = x P
            move = 0.0
            for j in range(S):
                move += abs(y[j] - x[j])
            m3, m2, m1 = m2, m1, move
            rate = max(m1 / m2, m2 / m3) if it >= 3 else 1.0
            x, y = y, x
            if m1 == 0.0 or _converged_c(m1, rate, ITERATIVE_TOL):
                stationary = True
                for j in range(S):
                    pi[j] = x[j]
                out[2] = it
            elif _hopeless_c(it, m1, rate, ITERATIVE_TOL, budget):
                return _FAIL
        if evaluated and stationary:
            return _DONE
    return _FAIL


#: The compiled steps and stopping rules :func:`_joint_loop_py` calls, bound by
#: :data:`_JIT` when it compiles (numba resolves them when it compiles the loop).
_rows4 = _fused_step = _value_step = _improve_c = _converged_c = _hopeless_c = None

#: The compiled loop of :func:`_iterate_joint` and what it calls, compiled on first use when
#: numba is installed (the optional ``jit`` extra).
_JIT = Jit("the compiled average-reward iteration", cache=True, nogil=True, error_model="numpy")
#: The fused pass's sums in the compiler's order (reassoc: they vectorize).
_FASTMATH = {"reassoc", "contract", "nsz"}
_JIT.register(_rows4_py, name="_rows4")
_JIT.register(_joint_step_py, name="_fused_step", fastmath=_FASTMATH)
_JIT.register(_value_step_py, name="_value_step", fastmath=_FASTMATH)
# no contract here: the tie test's subtraction stays unfused, as in greedy()
_JIT.register(_improve_py, name="_improve_c", fastmath={"reassoc", "nsz"})
_JIT.register(_converged, name="_converged_c")
_JIT.register(_hopeless, name="_hopeless_c")
_JIT.register(_joint_loop_py, name="_joint_loop_c")


def _joint_step():
    """The compiled fused step of :func:`_iterate_joint`, or ``None`` without numba."""
    return _fused_step if _joint_loop() is not None else None


def _improve():
    """The compiled improvement of policy iteration (:func:`_improve_py`), or ``None``
    without numba."""
    return _improve_c if _joint_loop() is not None else None


def _joint_loop():
    """The compiled loop of :func:`_iterate_joint`, or ``None`` without numba."""
    table = _JIT.compiled_or_none()
    return None if table is None else table["_joint_loop_c"]


def _iterate_joint(
    P, pol, r_pi, loop, budget: int, h=None, tol: float = ITERATIVE_TOL, power: bool = True
):
    """:func:`_iterate_average` and :func:`_iterate_stationary` in one loop, each step one
    fused pass over the chain's rows ``P[s, pol[s]]`` (``P``: C-contiguous ``(S, A, S)``,
    ``pol`` of ``intp``), with their stopping rules (``loop``: :func:`_joint_loop`, the
    whole loop compiled): each sequence is kept from the step it converged; ``(gain, h,
    steps, pi)``, or ``None`` when either would not converge in ``budget`` steps (the caller
    then takes the separate paths). ``power=False``: :func:`_iterate_average` compiled
    (``pi`` is ``None``; zero rewards give ``(0.0, 0, 0, None)`` as there)."""
    S = r_pi.shape[0]
    scale = float(np.abs(r_pi).max())
    if scale == 0.0:
        return (0.0, np.zeros(S), 0, None) if not power else None
    h = np.zeros(S) if h is None else h.copy()
    x = np.full(S, 1.0 / S)
    y, Th, pi, out = np.empty(S), np.empty(S), np.empty(S), np.zeros(3)
    r_pi = np.ascontiguousarray(r_pi, dtype=np.float64)
    state = loop(P, pol, h, r_pi, x, y, Th, (budget, tol, scale), pi, out, power)
    if state != _DONE:
        return None
    return float(out[0]), h, int(out[1]), pi if power else None
