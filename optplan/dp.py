"""Dynamic programming on known tabular models, shared by every layer above.

Bellman backups, policy evaluation (discounted, average reward, layered), Howard policy
iteration with a warm start (discounted and average reward), value iteration, relative value
iteration, backward induction, occupancy measures and recurrent classes. The fast planning
paths, the conic paths' post-processing, ``compare``, the agents and the metrics all use these
one implementations.

All are vectorized over states and actions; the only Python loops are over iterations
(policy/value iteration), layers (finite horizon) or recurrent classes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .result import MAX_ITER, MULTICHAIN, NUMERICAL_ERROR, OPTIMAL


def masked(q: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``q`` with inadmissible actions set to ``-inf``."""
    return np.where(mask, q, -np.inf)


def backup(P: np.ndarray, R: np.ndarray, v: np.ndarray, discount: float = 1.0) -> np.ndarray:
    """``Q[s, a] = R[s, a] + discount * sum_s' P[s, a, s'] v[s']``."""
    S, A = R.shape
    q = (P.reshape(S * A, -1) @ v).reshape(S, A)
    if discount != 1.0:
        q *= discount
    q += R
    return q


def greedy(qm: np.ndarray, prev: np.ndarray | None = None, tol: float = 0.0) -> np.ndarray:
    """Argmax over the last axis; where ``prev`` is within ``tol`` of the max, keep it.

    Keeping the incumbent on ties is what makes policy iteration terminate (Puterman §6.4, §8.6).
    """
    best = qm.argmax(axis=-1)
    if prev is None:
        return best
    if qm.ndim == 2:  # (S, A): plain indexing (take_along_axis costs ~40 us at S = 500)
        rows = np.arange(qm.shape[0])
        top, incumbent = qm[rows, best], qm[rows, prev]
    else:
        top = np.take_along_axis(qm, best[..., None], -1)[..., 0]
        incumbent = np.take_along_axis(qm, prev[..., None], -1)[..., 0]
    return np.where(incumbent >= top - tol * (1.0 + np.abs(top)), prev, best)


def policy_model(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Markov chain ``P_pi[s, s']`` and reward ``r_pi[s]`` of a deterministic policy."""
    idx = np.arange(R.shape[0])
    return P[idx, policy], R[idx, policy]


#: Up to this many states, :func:`closed_classes` takes the dense transitive closure (a few
#: boolean matrix products, ~20 us at S = 50) instead of scipy's strongly connected
#: components (~0.5 ms of sparse-matrix setup at any size): optimistic policy iteration asks
#: once per step.
DENSE_CLASSES_MAX_STATES = 128


def closed_classes(P_pi: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Recurrent classes of a chain: ``(count, labels[s], closed[label])``.

    A strongly connected component is recurrent iff no transition leaves it. Labels number
    the components in the order of their smallest state up to
    :data:`DENSE_CLASSES_MAX_STATES` states (scipy's order beyond).
    """
    S = P_pi.shape[0]
    if S <= DENSE_CLASSES_MAX_STATES:
        return _closed_classes_dense(P_pi > 0)
    # scipy.sparse here, not at the top: it is most of the cost of importing optplan.dp
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    rows, cols = np.nonzero(P_pi > 0)
    graph = csr_matrix((np.ones(rows.size), (rows, cols)), shape=P_pi.shape)
    n, labels = connected_components(graph, directed=True, connection="strong")
    leaving = labels[rows] != labels[cols]
    closed = np.ones(n, dtype=bool)
    closed[labels[rows[leaving]]] = False
    return int(closed.sum()), labels, closed


def _closed_classes_dense(edges: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """:func:`closed_classes` from the reflexive-transitive closure ``R`` by repeated
    squaring (float32 products are exact: entries count paths through at most 128 states):
    ``s ~ t`` iff ``R[s, t]`` and ``R[t, s]``; a component is closed iff every state it
    reaches is in it."""
    S = edges.shape[0]
    reach = edges | np.eye(S, dtype=bool)
    while True:  # at most log2(S) + 1 squarings
        f = reach.astype(np.float32)
        wider = (f @ f) > 0
        if (wider == reach).all():
            break
        reach = wider
    mutual = reach & reach.T
    first, labels = np.unique(mutual.argmax(axis=1), return_inverse=True)
    closed = ~(reach & ~mutual).any(axis=1)[first]
    return int(closed.sum()), labels, closed


def n_recurrent_classes(P_pi: np.ndarray) -> int:
    """Number of recurrent classes; O(S^2) shortcut when some state is entered from every state
    (on large chains first tried in O(S) on the state state 0 enters most likely)."""
    if P_pi.shape[0] > DENSE_CLASSES_MAX_STATES and (P_pi[:, P_pi[0].argmax()] > 0).all():
        return 1
    if (P_pi > 0).all(axis=0).any():
        return 1
    return closed_classes(P_pi)[0]


def evaluate_discounted(P_pi: np.ndarray, r_pi: np.ndarray, discount: float) -> np.ndarray:
    """``V = (I - discount P_pi)^{-1} r_pi``."""
    S = r_pi.shape[0]
    return np.linalg.solve(np.eye(S) - discount * P_pi, r_pi)


def discounted_occupancy(P_pi: np.ndarray, start: np.ndarray, discount: float) -> np.ndarray:
    """Normalized discounted state occupancy ``(1-discount) start^T (I - discount P_pi)^{-1}``."""
    S = start.shape[0]
    return np.linalg.solve((np.eye(S) - discount * P_pi).T, (1.0 - discount) * start)


def generator(P_pi: np.ndarray) -> np.ndarray:
    """``I - P_pi`` with the diagonal computed as the off-diagonal row sums (Grassmann, Taksar
    and Heyman's device): no subtraction ``1 - P_ss``, which would turn a state left with
    probability 1e-20 (or 4e-320) into an absorbing one and make the system singular."""
    M = -P_pi.copy()
    idx = np.arange(P_pi.shape[0])
    M[idx, idx] = 0.0
    M[idx, idx] = -M.sum(axis=1)
    return M


class EvaluationError(ArithmeticError):
    """Policy evaluation cannot be carried out in double precision (a singular system, or a
    bias beyond the double range); the message says which and why."""


def stationary(P_pi: np.ndarray) -> np.ndarray:
    """Stationary distribution of a unichain chain: ``pi (I - P_pi) = 0``, ``sum pi = 1``.

    For a unichain chain the left null space of ``I - P_pi`` is one-dimensional and any row of
    ``(I - P_pi)^T`` may be replaced by the normalization.
    """
    S = P_pi.shape[0]
    M = generator(P_pi).T
    M[-1, :] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    pi = solve_system(M, b, "the stationary distribution")
    return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()


def evaluate_average(P_pi: np.ndarray, r_pi: np.ndarray) -> tuple[float, np.ndarray]:
    """Gain and a bias of a unichain policy: ``g + h = r_pi + P_pi h`` with ``h[0] = 0``.

    The caller must have checked that the chain is unichain (:func:`closed_classes`); then the
    bordered system is non-singular in exact arithmetic. In double precision a chain whose
    only links are tiny (1e-320) can still be singular or give a bias beyond the double range:
    :class:`EvaluationError`, never a wrong number.
    """
    S = r_pi.shape[0]
    M = np.zeros((S + 1, S + 1))
    M[:S, :S] = generator(P_pi)
    M[:S, S] = 1.0
    M[S, 0] = 1.0
    sol = solve_system(M, np.append(r_pi, 0.0), "the policy's gain and bias")
    return float(sol[S]), sol[:S]


def solve_system(M: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
    """``M^{-1} b``, or :class:`EvaluationError` (naming ``what``) when ``M`` is singular in
    double precision or the solution overflows: never a NaN or inf returned."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            x = np.linalg.solve(M, b)
        except np.linalg.LinAlgError:
            x = None
    if x is None or not np.isfinite(x).all():
        raise _singular(M, what)
    return x


def _singular(M: np.ndarray, what: str) -> EvaluationError:
    off = M[M != 0]
    smallest = float(np.abs(off).min()) if off.size else 0.0
    return EvaluationError(
        f"{what} cannot be computed in double precision: the linear system is singular or "
        f"its solution overflows (its smallest nonzero coefficient is {smallest:.3g}; "
        "transitions that small make the chain numerically multichain)"
    )


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


class UnichainEvaluation:
    """Gain and bias of a unichain policy (``g + h = r_pi + P_pi h``) from
    :func:`evaluate_unichain`, and its stationary distribution on request
    (:meth:`stationary`), from the same factorization or the same kind of iteration.

    ``bias`` has ``h[0] = 0``, or ``pi @ h = 0`` once :meth:`normalize` ran (``normalized``).
    ``method`` is ``"lu"`` (one LU factorization of the bordered system) or ``"iteration"``
    (relative value iteration of the fixed policy, ``iterations`` steps, to the relative
    accuracy ``tol``).
    """

    __slots__ = (
        "gain",
        "bias",
        "method",
        "iterations",
        "tol",
        "normalized",
        "_P_pi",
        "_model",
        "_lu",
        "_pi",
    )

    def __init__(self, gain, bias, method, iterations, tol, P_pi, lu, model=None):
        self.gain, self.bias, self.method, self.iterations = gain, bias, method, iterations
        self.tol, self.normalized = tol, False
        self._P_pi, self._model, self._lu, self._pi = P_pi, model, lu, None

    def _chain(self) -> np.ndarray:
        """``P_pi``, gathered from ``(P, policy)`` on first use when the evaluation read the
        model's rows in place."""
        if self._P_pi is None:
            P, policy = self._model
            self._P_pi = P[np.arange(P.shape[0]), policy]
        return self._P_pi

    @property
    def exact(self) -> bool:
        """Factorized, or iterated to :data:`ITERATIVE_TOL`."""
        return self.method == "lu" or self.tol <= ITERATIVE_TOL

    def stationary(self) -> np.ndarray:
        """``pi`` with ``pi P_pi = pi``, ``sum pi = 1``: the transposed bordered system solved
        with the factorization of the evaluation (``M^T z = e_S`` gives ``z = (pi, 0)``, since
        ``(I - P_pi) 1 = 0``), or power iteration when the evaluation iterated (the same
        contraction), the factorization if that does not converge in the budget. Computed
        once."""
        if self._pi is not None:
            return self._pi
        pi = None
        if self._lu is None:
            pi = _iterate_stationary(self._chain())
        if pi is None:
            if self._lu is None:
                self._lu = _bordered_lu(self._chain())
            S = self._chain().shape[0]
            e = np.zeros(S + 1)
            e[S] = 1.0
            pi = _lu_solve(self._lu, e, 1, "the stationary distribution")[:S]
        self._set_stationary(pi)
        return self._pi

    def _set_stationary(self, pi: np.ndarray) -> None:
        pi = np.clip(pi, 0.0, None)
        self._pi = pi / pi.sum()

    def normalize(self) -> None:
        """Shift ``bias`` so that ``pi @ bias = 0`` (the bias of the policy, Puterman §8.2)."""
        if not self.normalized:
            self.bias = self.bias - self.stationary() @ self.bias
            self.normalized = True


def _bordered(P_pi: np.ndarray) -> np.ndarray:
    """``M = [[I - P_pi, 1], [e_0^T, 0]]``: :func:`evaluate_average`'s system."""
    S = P_pi.shape[0]
    M = np.zeros((S + 1, S + 1))
    M[:S, :S] = generator(P_pi)
    M[:S, S] = 1.0
    M[S, 0] = 1.0
    return M


def _bordered_lu(P_pi: np.ndarray):
    """``(lu, piv, P_pi)``: LAPACK ``getrf`` factors of :func:`_bordered`, or
    :class:`EvaluationError` when a pivot is exactly zero."""
    from scipy.linalg.lapack import dgetrf  # lazy: scipy.linalg is a heavy import

    lu, piv, info = dgetrf(_bordered(P_pi), overwrite_a=True)
    if info != 0 or not np.isfinite(lu).all():
        raise _singular(_bordered(P_pi), "the policy's gain and bias")
    return lu, piv, P_pi


def _lu_solve(lu, b: np.ndarray, trans: int, what: str) -> np.ndarray:
    """``M^{-1} b`` (``trans=0``) or ``M^{-T} b`` (``trans=1``) from :func:`_bordered_lu`'s
    factors; :class:`EvaluationError` as :func:`solve_system`."""
    from scipy.linalg.lapack import dgetrs

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x, info = dgetrs(lu[0], lu[1], b, trans=trans)
    if info != 0 or not np.isfinite(x).all():
        raise _singular(_bordered(lu[2]), what)
    return x


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


def _joint_loop_py(P, pol, h, r, x, y, Th, budget, tol, scale, pi, out, power):  # pragma: no cover
    """:func:`_iterate_joint`'s loop compiled whole (numba): each step one fused pass
    (:func:`_fused_step`, the compiled :func:`_joint_step_py`), then the bookkeeping of
    :func:`_relative_step` and :func:`_power_step` in scalars (the last three spans and
    moves; the same bounds and rates). ``h`` ends as the evaluation's bias, ``pi`` gets the
    stationary distribution; ``out = [gain, evaluation steps, power steps]``. Returns
    :data:`_DONE` or :data:`_FAIL` (not converging in ``budget`` steps included).

    ``power=False``: the evaluation alone (:func:`_iterate_average`'s iteration; ``pi``,
    ``x``, ``y`` untouched, ``out[2] = 0``). Once the power iteration has converged, the
    remaining evaluation steps are value-only passes (:func:`_value_step`)."""
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


#: The compiled steps and stopping rules :func:`_joint_loop_py` calls (bound by
#: :func:`_joint_loop`; numba resolves them when it compiles the loop).
_rows4 = _fused_step = _value_step = _improve_c = _converged_c = _hopeless_c = None

#: ``[compiled loop or None]``: :func:`_joint_loop_py` (and the fused step it calls)
#: compiled by numba when it is installed (the optional ``jit`` extra), made on first use.
_JOINT: list = []


def _joint_step():
    """The compiled fused step of :func:`_iterate_joint`, or ``None`` without numba."""
    return _fused_step if _joint_loop() is not None else None


def _improve():
    """The compiled improvement of policy iteration (:func:`_improve_py`), or ``None``
    without numba."""
    return _improve_c if _joint_loop() is not None else None


def _joint_loop():
    """The compiled loop of :func:`_iterate_joint`, or ``None`` without numba."""
    if not _JOINT:
        try:
            import numba
        except ImportError:
            loop = None
        else:
            opts = {"cache": True, "nogil": True, "error_model": "numpy"}
            g = globals()
            # the fused pass's sums in the compiler's order (reassoc: they vectorize)
            fastmath = {"reassoc", "contract", "nsz"}
            g["_rows4"] = numba.njit(**opts)(_rows4_py)
            g["_fused_step"] = numba.njit(**opts, fastmath=fastmath)(_joint_step_py)
            g["_value_step"] = numba.njit(**opts, fastmath=fastmath)(_value_step_py)
            # no contract here: the tie test's subtraction stays unfused, as in greedy()
            g["_improve_c"] = numba.njit(**opts, fastmath={"reassoc", "nsz"})(_improve_py)
            g["_converged_c"] = numba.njit(**opts)(_converged)
            g["_hopeless_c"] = numba.njit(**opts)(_hopeless)
            loop = numba.njit(**opts)(_joint_loop_py)
        _JOINT.append(loop)
    return _JOINT[0]


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
    state = loop(P, pol, h, r_pi, x, y, Th, budget, tol, scale, pi, out, power)
    if state != _DONE:
        return None
    return float(out[0]), h, int(out[1]), pi if power else None


def _check_rows(P: np.ndarray, policy, S: int) -> np.ndarray:
    """``policy`` as ``intp`` after checking that ``P[s, policy[s]]`` are ``S`` rows of
    ``P`` ``(S, A, S)``: the compiled iteration reads them without bounds checks, so a
    wrong shape or action is a ``ValueError`` here, not a read outside ``P``."""
    P = np.asarray(P)
    if P.ndim != 3 or P.shape[0] != S or P.shape[2] != S:
        raise ValueError(f"P must have shape (S, A, S) with S = {S} given a policy, got {P.shape}")
    pol = np.asarray(policy)
    if pol.shape != (S,) or not np.issubdtype(pol.dtype, np.integer):
        raise ValueError(
            f"policy must be {S} integer actions, got shape {pol.shape} of dtype {pol.dtype}"
        )
    if S and (pol.min() < 0 or pol.max() >= P.shape[1]):
        bad = int(np.flatnonzero((pol < 0) | (pol >= P.shape[1]))[0])
        raise ValueError(
            f"policy[{bad}] = {int(pol[bad])} is not an action of P (A = {P.shape[1]})"
        )
    return pol.astype(np.intp, copy=False)


def evaluate_unichain(
    P_pi: np.ndarray,
    r_pi: np.ndarray,
    guess: np.ndarray | None = None,
    tol: float = ITERATIVE_TOL,
    stationary: bool = False,
    policy: np.ndarray | None = None,
) -> UnichainEvaluation:
    """Gain and bias (``h[0] = 0``) of a unichain policy, as :func:`evaluate_average`, with
    the stationary distribution available from the same work (:class:`UnichainEvaluation`).

    From :data:`ITERATIVE_MIN_STATES` states on, relative value iteration of the fixed policy
    is tried first (``O(S^2)`` per step; stopped by an a-posteriori bound at
    :data:`ITERATIVE_TOL`, relative); a periodic or slowly mixing chain, or one that stalls,
    goes to one LU factorization of the bordered system (LAPACK ``getrf``; the same
    factorization then gives the stationary distribution); ``guess`` (a bias, e.g. the
    previous policy's in policy iteration) starts the iteration and ``tol`` (default
    :data:`ITERATIVE_TOL`) is its accuracy: policy iteration evaluates loosely until the
    policy repeats. :class:`EvaluationError` as :func:`evaluate_average`. The caller must have
    checked that the chain is unichain.

    ``stationary=True`` says the caller will ask for the stationary distribution: on the
    iterative path, with numba installed, the evaluation and the power iteration then run in
    one loop whose steps read ``P_pi`` once for both (:func:`_iterate_joint`, compiled whole:
    :func:`_joint_loop`); the result is the separate iterations' to their accuracy. With
    numba, the evaluation alone runs in the same compiled loop (value-only passes); without,
    it is :func:`_iterate_average` (BLAS products, the bookkeeping in NumPy).

    ``policy``: ``P_pi`` is then the model's ``P`` ``(S, A, S)`` and the chain is
    ``P[s, policy[s]]``; the compiled iteration reads those rows in place (no gathered copy:
    one less array in cache beside ``P``, which policy iteration's next backup reads), and
    the chain is gathered only where needed (without numba, or for the factorization).
    """
    S = r_pi.shape[0]
    loop = _joint_loop() if S >= ITERATIVE_MIN_STATES else None
    model = None
    if policy is not None:
        model, P_pi = (P_pi, _check_rows(P_pi, policy, S)), None
    if loop is not None:
        if model is None:
            rows, pol = np.ascontiguousarray(P_pi, dtype=np.float64)[:, None], np.zeros(S, np.intp)
        else:
            rows, pol = np.ascontiguousarray(model[0], dtype=np.float64), model[1]
        if stationary and tol <= ITERATIVE_TOL:
            out = _iterate_joint(rows, pol, r_pi, loop, ITERATIVE_BUDGET, guess, tol)
            if out is not None:
                gain, h, steps, pi = out
                ev = UnichainEvaluation(gain, h, "iteration", steps, tol, P_pi, None, model)
                ev._set_stationary(pi)
                return ev
        # the evaluation alone, the same iteration compiled (value-only passes)
        out = _iterate_joint(rows, pol, r_pi, loop, ITERATIVE_BUDGET, guess, tol, power=False)
        if out is not None:
            gain, h, steps = out[:3]
            return UnichainEvaluation(gain, h, "iteration", steps, tol, P_pi, None, model)
    if P_pi is None:
        P_pi = model[0][np.arange(S), model[1]]
    if loop is None and S >= ITERATIVE_MIN_STATES:
        out = _iterate_average(P_pi, r_pi, ITERATIVE_BUDGET, guess, tol)
        if out is not None:
            gain, h, steps = out
            return UnichainEvaluation(gain, h, "iteration", steps, tol, P_pi, None)
    lu = _bordered_lu(P_pi)
    sol = _lu_solve(lu, np.append(r_pi, 0.0), 0, "the policy's gain and bias")
    return UnichainEvaluation(float(sol[S]), sol[:S], "lu", 0, 0.0, P_pi, lu)


def class_gains(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """Gain of each recurrent class of a deterministic policy's chain (one entry if unichain)."""
    P_pi, r_pi = policy_model(P, R, policy)
    if n_recurrent_classes(P_pi) == 1:
        return np.array([evaluate_average(P_pi, r_pi)[0]])
    _, labels, closed = closed_classes(P_pi)
    gains = []
    for c in np.flatnonzero(closed):  # loop over recurrent classes, not states
        idx = np.flatnonzero(labels == c)
        gains.append(evaluate_average(P_pi[np.ix_(idx, idx)], r_pi[idx])[0])
    return np.array(gains)


class PolicyIteration(NamedTuple):
    """Outcome of :func:`policy_iteration`.

    ``values`` and ``q`` belong to the last evaluated policy (``None`` when the first
    policy was multichain); ``gain`` is ``NaN`` for the discounted criterion.
    """

    status: str
    message: str
    policy: np.ndarray
    values: np.ndarray | None
    q: np.ndarray | None
    gain: float
    iterations: int


def policy_iteration(
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    discount: float | None = None,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
) -> PolicyIteration:
    """Howard policy iteration (Puterman §6.4 discounted, §8.6 unichain average reward).

    Evaluate the policy exactly, improve greedily keeping the incumbent on ties (tie
    tolerance ``1e-12``, relative), stop when the policy repeats.

    Parameters
    ----------
    P, R, mask : arrays (S, A, S), (S, A), (S, A)
    discount : float in [0, 1), optional
        ``None`` for the average-reward criterion: each policy is evaluated by
        :func:`evaluate_unichain` (the bordered unichain system, or iteration on large fast
        mixing chains), and a policy with several recurrent classes stops the iteration with
        status ``multichain``.
    policy : array (S,) of int, optional
        Warm start; ignored (greedy in ``R`` instead) when it takes an inadmissible action.
    max_iter : int
    """
    return _policy_iteration(P, R, mask, discount, policy, max_iter)[0]


def average_policy_iteration(
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
) -> tuple[PolicyIteration, UnichainEvaluation | None]:
    """:func:`policy_iteration` for the average-reward criterion, with the
    :class:`UnichainEvaluation` of the returned policy when the status is ``optimal``
    (``None`` otherwise): its gain and bias are the result's, and its
    :meth:`~UnichainEvaluation.stationary` reuses the evaluation's factorization."""
    return _policy_iteration(P, R, mask, None, policy, max_iter)


def _policy_iteration(P, R, mask, discount, policy, max_iter):
    S, A = R.shape
    rows = np.arange(S)
    if policy is None or not mask[rows, policy].all():
        policy = greedy(masked(R, mask))
    values = q = ev = P_pi = None
    gain = float("nan")
    # On large chains the average-reward evaluations iterate (evaluate_unichain): loosely
    # (LOOSE_TOL) while the policy changes much, then to ITERATIVE_TOL (once it changed in
    # few states, TIGHTEN_FRACTION, or once it repeated), normalized by its stationary
    # distribution so that its q is the final one; from then on every evaluation is tight.
    large = discount is None and S >= ITERATIVE_MIN_STATES
    # With numba, those evaluations read the chain's rows of P in place (no gathered P_pi)
    # and each improvement is one compiled pass over P (q and the greedy policy together).
    improve = _improve() if large else None
    if improve is not None:
        P, R = np.ascontiguousarray(P, dtype=np.float64), np.ascontiguousarray(R, np.float64)
        mask, policy = np.ascontiguousarray(mask, dtype=np.bool_), policy.astype(np.intp)
    tol = LOOSE_TOL if large else ITERATIVE_TOL
    for it in range(1, max_iter + 1):
        if improve is not None:
            r_pi = R[rows, policy]
        elif P_pi is None or not large:
            P_pi, r_pi = policy_model(P, R, policy)
        if discount is None:
            if improve is not None:  # the chain gathered only when the shortcut fails
                n_classes = _policy_classes(P, policy) or n_recurrent_classes(P[rows, policy])
            else:
                n_classes = n_recurrent_classes(P_pi)
            if n_classes > 1:
                message = (
                    f"policy iteration met a policy with {n_classes} recurrent classes at "
                    f"iteration {it}"
                )
                return PolicyIteration(MULTICHAIN, message, policy, values, q, gain, it), None
            try:
                if improve is not None:
                    ev = evaluate_unichain(P, r_pi, values, tol, stationary=True, policy=policy)
                else:
                    ev = evaluate_unichain(P_pi, r_pi, values, tol, stationary=large)
                if large and ev.exact:
                    ev.normalize()
            except EvaluationError as exc:
                message = f"policy iteration, iteration {it}: {exc}"
                out = PolicyIteration(NUMERICAL_ERROR, message, policy, None, None, gain, it)
                return out, None
            gain, values = ev.gain, ev.bias
        else:
            values = evaluate_discounted(P_pi, r_pi, discount)
        if improve is not None:
            q, new = np.empty((S, A)), np.empty(S, np.intp)
            n_changed = improve(P, R, mask, values, policy, q, new)
        else:
            q = backup(P, R, values, 1.0 if discount is None else discount)
            new = greedy(masked(q, mask), policy, tol=1e-12)
            n_changed = int(np.count_nonzero(new != policy))
        if n_changed == 0:
            if ev is None or ev.exact:
                return PolicyIteration(OPTIMAL, "", policy, values, q, gain, it), ev
            tol = ITERATIVE_TOL  # the same policy again, evaluated to the last digits
            continue
        if large and improve is None:  # only the rows of the states whose action changed
            changed = np.flatnonzero(new != policy)
            P_pi[changed] = P[changed, new[changed]]
            r_pi[changed] = R[changed, new[changed]]
        if large and n_changed <= TIGHTEN_FRACTION * S:  # likely the last policy: evaluate
            tol = ITERATIVE_TOL  # it tightly now, not loosely and then again (one backup)
        policy = new
    message = f"policy iteration did not stop in {max_iter} iterations"
    # values and q belong to the policy before the last improvement
    return PolicyIteration(MAX_ITER, message, policy, values, q, gain, max_iter), None


def _policy_classes(P: np.ndarray, policy: np.ndarray) -> int | None:
    """1 when some state is entered from every state of the chain ``P[s, policy[s]]``,
    tried in ``O(S)`` on the state that state 0 enters most likely (as
    :func:`n_recurrent_classes`, without gathering the chain), else ``None``."""
    j = P[0, policy[0]].argmax()
    return 1 if (P[np.arange(P.shape[0]), policy, j] > 0).all() else None


def value_iteration(
    P: np.ndarray, R: np.ndarray, mask: np.ndarray, discount: float, tol: float, max_iter: int
) -> tuple[str, str, np.ndarray, int]:
    """Discounted value iteration from ``V = 0``; ``(status, message, V, iterations)``.

    Stops when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which guarantees
    ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1).
    """
    V = np.zeros(R.shape[0])
    threshold = tol * (1.0 - discount) / (2.0 * discount) if discount > 0 else np.inf
    step = np.inf
    for it in range(1, max_iter + 1):
        V_new = masked(backup(P, R, V, discount), mask).max(axis=1)
        step = np.max(np.abs(V_new - V))
        V = V_new
        if step < threshold:
            return OPTIMAL, "", V, it
    message = (
        f"value iteration did not reach tol={tol} in {max_iter} iterations (last step {step:.3g})"
    )
    return MAX_ITER, message, V, max_iter


#: Relative value iteration gives up when span(T h - h) shrinks by less than STALL_DECREASE over
#: STALL_WINDOW iterations.
STALL_WINDOW = 1_000
STALL_DECREASE = 1e-3
#: Relative value iteration switches the aperiodicity transform on when span(T h - h) has
#: shrunk by less than the factor APERIODIC_SHRINK over APERIODIC_WINDOW iterations (a
#: periodic chain does not shrink it at all; a rate of 0.995 per step is left alone).
APERIODIC_WINDOW = 20
APERIODIC_SHRINK = 0.9


def relative_value_iteration(
    P: np.ndarray, R: np.ndarray, mask: np.ndarray, tol: float, max_iter: int, tau: float
) -> tuple[str, str, np.ndarray, int]:
    """Relative value iteration (Puterman §8.5.5), with the aperiodic transform
    ``tau I + (1 - tau) P`` (same gain, bias scaled by ``1/(1-tau)``) switched on only when
    the plain iteration stalls; stops when ``span(T h - h) < tol``. Returns ``(status,
    message, greedy policy, iterations)``.

    On an aperiodic model the plain iteration converges at the chains' own rate; the
    transform would slow that to at best ``tau`` per step (about three times the iterations
    at ``tau = 1/2`` on random dense models). On a periodic optimal chain the plain span
    stops shrinking: after :data:`APERIODIC_WINDOW` iterations whose span shrank by less than
    the factor :data:`APERIODIC_SHRINK`, the transform is switched on from the current ``h``
    (rescaled by ``1/(1-tau)``), and it converges (Puterman Thm 8.5.4)."""
    S = R.shape[0]
    h = np.zeros(S)
    checkpoint = np.inf
    t, since, spans = 0.0, 0, []
    for it in range(1, max_iter + 1):
        # aperiodic transform: T~h = t h + (1 - t) (max_a r + P h) with r unscaled keeps the
        # gain and scales the bias by 1 / (1 - t)
        Th = masked(backup(P, R, (1.0 - t) * h), mask).max(axis=1) + t * h
        delta = Th - h
        span = delta.max() - delta.min()
        h = Th - Th[0]
        if span < tol:
            policy = greedy(masked(backup(P, R, (1.0 - t) * h), mask))
            return OPTIMAL, "", policy, it
        spans.append(span)
        window = spans[-1 - APERIODIC_WINDOW] if it > APERIODIC_WINDOW else np.inf
        if t == 0.0 and span > APERIODIC_SHRINK * window:
            t, since, h = tau, it, h / (1.0 - tau)
            continue
        if (it - since) % STALL_WINDOW == 0:
            # converging spans shrink geometrically; a span that stops shrinking is the
            # difference between recurrent-class gains of a multichain model
            if span > (1.0 - STALL_DECREASE) * checkpoint:
                max_iter = it
                break
            checkpoint = span
    policy = greedy(masked(backup(P, R, (1.0 - t) * h), mask))
    return (
        MAX_ITER,
        f"relative value iteration stopped after {max_iter} iterations with "
        f"span(T h - h) = {span:.3g} above tol={tol} (the optimal gain is not constant "
        "across states in a multichain model, or the chain mixes very slowly); ",
        policy,
        max_iter,
    )


def backward_induction(P: np.ndarray, R: np.ndarray, action_mask=None):
    """``Q[l, s, a]`` and ``V[l, s]`` of a layered model: ``V_L = 0``,
    ``Q_l = R_l + P_l V_{l+1}`` (masked actions ``-inf``), ``V_l = max_a Q_l``."""
    L, S, A = R.shape
    V = np.zeros((L + 1, S))
    Q = np.empty((L, S, A))
    for l in range(L - 1, -1, -1):  # loop over layers only
        q = backup(P[l], R[l], V[l + 1])
        Q[l] = q if action_mask is None else masked(q, action_mask[l])
        V[l] = Q[l].max(axis=1)
    return Q, V[:L]


def evaluate_layered(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``V^pi[l, s]`` of a deterministic layered policy ``policy[l, s]``."""
    L, S, _ = R.shape
    idx = np.arange(S)
    V = np.zeros((L + 1, S))
    for l in range(L - 1, -1, -1):
        a = policy[l]
        V[l] = R[l, idx, a] + P[l, idx, a] @ V[l + 1]
    return V[:L]


def forward_occupancy(P: np.ndarray, initial: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``d[l, s, a]``: probability of being in ``s`` at layer ``l`` and taking ``a`` under a
    deterministic layered ``policy[l, s]`` started from ``initial``."""
    L, S, A = P.shape[:3]
    idx = np.arange(S)
    occ = np.zeros((L, S, A))
    d = np.asarray(initial, dtype=float)
    for l in range(L):
        occ[l, idx, policy[l]] = d
        d = d @ P[l, idx, policy[l]]
    return occ


class MultichainEvaluation(NamedTuple):
    """Gain and bias of a deterministic policy on any chain (:func:`evaluate_multichain`)."""

    gain: np.ndarray
    bias: np.ndarray
    labels: np.ndarray
    recurrent: np.ndarray
    stationary: np.ndarray


def evaluate_multichain(P_pi: np.ndarray, r_pi: np.ndarray) -> MultichainEvaluation:
    """Gain ``g`` and bias ``h`` of a chain with any number of recurrent classes (Puterman
    §8.2.3, §9.2.1): ``(I - P) g = 0``, ``g + (I - P) h = r``, ``P* h = 0``.

    On each recurrent class ``C`` (stationary distribution ``mu_C``): ``g_C = mu_C @ r_C``
    (constant) and ``h_C`` is the class's bias with ``mu_C @ h_C = 0``, one normalization per
    class. On the transient states ``T``: ``(I - P_TT) g_T = P_TR g_R`` and
    ``(I - P_TT) h_T = r_T - g_T + P_TR h_R``. Then ``P* h = 0`` holds (rows of ``P*`` are
    mixtures of the ``mu_C``), so ``h`` is the bias ``H_P r``. Returns also ``labels[s]``
    (class of each state, ``-1`` transient), the recurrent mask and ``stationary[s]``
    (``mu_C`` on each class, 0 on transient states).
    """
    S = r_pi.shape[0]
    n, labels, closed = closed_classes(P_pi)
    recurrent = closed[labels]
    g = np.zeros(S)
    h = np.zeros(S)
    mu = np.zeros(S)
    out_labels = np.full(S, -1)
    for k, c in enumerate(np.flatnonzero(closed)):  # loop over recurrent classes
        idx = np.flatnonzero(labels == c)
        P_c, r_c = P_pi[np.ix_(idx, idx)], r_pi[idx]
        gain_c, h_c = evaluate_average(P_c, r_c)
        mu_c = stationary(P_c)
        g[idx] = gain_c
        h[idx] = h_c - mu_c @ h_c
        mu[idx] = mu_c
        out_labels[idx] = k
    T = np.flatnonzero(~recurrent)
    if T.size:
        Rc = np.flatnonzero(recurrent)
        M = np.eye(T.size) - P_pi[np.ix_(T, T)]
        P_TR = P_pi[np.ix_(T, Rc)]
        g[T] = solve_system(M, P_TR @ g[Rc], "the transient states' gain")
        h[T] = solve_system(M, r_pi[T] - g[T] + P_TR @ h[Rc], "the transient states' bias")
    return MultichainEvaluation(g, h, out_labels, recurrent, mu)


def near_max(x: np.ndarray, tol: float) -> np.ndarray:
    """``x >= max(x) - tol (1 + |max|)`` along the last axis (``-inf`` entries never)."""
    top = x.max(axis=-1, keepdims=True)
    return np.isfinite(x) & (x >= top - tol * (1.0 + np.abs(top)))


class MultichainPolicyIteration(NamedTuple):
    """Outcome of :func:`multichain_policy_iteration` (``evaluation`` of the last policy)."""

    status: str
    message: str
    policy: np.ndarray
    evaluation: MultichainEvaluation | None
    iterations: int


def multichain_policy_iteration(
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
    tol: float = 1e-12,
) -> MultichainPolicyIteration:
    """Multichain policy iteration (Puterman §9.2.1) carried one level further, to a
    bias-optimal policy (Puterman §10.3, n-discount policy iteration with n = 0).

    Evaluate ``d``: gain ``g`` and bias ``h`` by :func:`evaluate_multichain`, and ``w`` with
    ``h + (I - P_d) w = 0`` (the same evaluation with reward ``-h``). Improve first on the
    gain: ``d'(s)`` in ``argmax_a P(s, a) g``, keeping ``d(s)`` when it attains the maximum
    (within ``tol``, relative). Only when that changes nothing, improve on the bias among
    those actions (``A1``): ``argmax_{A1} r + P h``; only when that changes nothing, on
    ``argmax_{A2} P w`` among the bias-maximizing actions ``A2``. Stop when the policy
    repeats. Then ``g`` is the optimal gain from every state, ``(g, h)`` solves the
    multichain optimality equations ``g = max_a P g``, ``g + h = max_{A1} (r + P h)``, and
    ``h`` is the largest bias of any gain-optimal policy (a bias-optimal policy, Puterman
    §10.3): unique, whichever optimal policy is returned (checked against every policy of
    small models in ``tests/test_multichain.py``). The first two levels alone are Puterman §9.2's
    multichain policy iteration; they stop at a gain-optimal policy whose bias solves the
    equations but may be smaller (a zero-reward loop beside an absorbing goal).
    """
    rows = np.arange(R.shape[0])
    if policy is None or not mask[rows, policy].all():
        policy = greedy(masked(R, mask))
    ev = None
    zero = np.zeros_like(R)
    for it in range(1, max_iter + 1):
        P_pi, r_pi = policy_model(P, R, policy)
        try:
            ev = evaluate_multichain(P_pi, r_pi)
        except EvaluationError as exc:
            message = f"multichain policy iteration, iteration {it}: {exc}"
            return MultichainPolicyIteration(NUMERICAL_ERROR, message, policy, None, it)
        pg = masked(backup(P, zero, ev.gain), mask)
        new = greedy(pg, policy, tol=tol)
        if np.array_equal(new, policy):
            a1 = mask & near_max(pg, tol)
            q = masked(backup(P, R, ev.bias), a1)
            new = greedy(q, policy, tol=tol)
            if np.array_equal(new, policy):
                try:
                    w = evaluate_multichain(P_pi, -ev.bias).bias
                except EvaluationError as exc:
                    message = f"multichain policy iteration, iteration {it}: {exc}"
                    return MultichainPolicyIteration(NUMERICAL_ERROR, message, policy, ev, it)
                pw = masked(backup(P, zero, w), a1 & near_max(q, tol))
                new = greedy(pw, policy, tol=tol)
                if np.array_equal(new, policy):
                    return MultichainPolicyIteration(OPTIMAL, "", policy, ev, it)
        policy = new
    message = f"multichain policy iteration did not stop in {max_iter} iterations"
    return MultichainPolicyIteration(MAX_ITER, message, policy, ev, max_iter)


class ModelClass(NamedTuple):
    """Communication structure of a model (:func:`classify`; Puterman §8.3.1).

    ``kind`` is the most specific of ``"unichain"`` (proved: every deterministic policy has
    one recurrent class), ``"communicating"``, ``"weakly_communicating"``, ``"multichain"``
    (some policy has two or more recurrent classes); a unichain model is also weakly
    communicating, and ``communicating`` is reported beside it. ``unichain`` is ``None`` when
    undecided: deciding it is NP-hard in general (Tsitsiklis 2007), and :func:`classify`
    enumerates policies only up to ``max_policies``. ``closed_sets`` are the closed
    strongly connected components of the graph of all admissible transitions (each holds a
    recurrent class of every policy); ``transient`` marks the states transient under every
    policy (every state outside the closed sets that no policy can keep out of them; the
    rest may still be transient under every policy when there are several closed sets).
    """

    kind: str
    communicating: bool
    weakly_communicating: bool
    unichain: bool | None
    closed_sets: list
    transient: np.ndarray


def classify(P: np.ndarray, mask: np.ndarray, max_policies: int = 4096) -> ModelClass:
    """Classify a model by graph algorithms on ``G`` (an edge ``s -> s'`` when some admissible
    action reaches ``s'`` with positive probability).

    * communicating iff ``G`` is strongly connected;
    * two or more closed components of ``G`` make every policy multichain;
    * with one closed component ``C`` (strongly connected, so communicating within), the
      model is weakly communicating iff the other states are transient under every policy,
      i.e. no nonempty set ``X`` outside ``C`` in which every state has an action staying in
      ``X`` (the greatest such set is the fixed point of removing the states without one);
      otherwise a policy staying in ``X`` has a recurrent class there besides ``C``'s;
    * unichain: refuted or proved by enumerating the deterministic policies when there are at
      most ``max_policies``; a weakly communicating model is then unichain iff no policy has
      two recurrent classes.
    """
    S = P.shape[0]
    reach = (P > 0) & mask[:, :, None]
    edges = reach.any(axis=1)
    n, labels, closed = closed_classes(edges.astype(float))
    closed_sets = [np.flatnonzero(labels == c) for c in np.flatnonzero(closed)]
    communicating = bool(np.unique(labels).size == 1)
    outside = np.ones(S, dtype=bool)
    outside[np.concatenate(closed_sets)] = False
    X = outside.copy()
    while True:  # greatest set whose every state has an action staying inside it
        stays = (mask & ~(reach & ~X[None, None, :]).any(axis=2)).any(axis=1) & X
        if np.array_equal(stays, X):
            break
        X = stays
    transient = outside & ~X
    if len(closed_sets) > 1:
        return ModelClass("multichain", False, False, False, closed_sets, transient)
    weakly = not X.any()
    if not weakly:
        return ModelClass("multichain", False, False, False, closed_sets, transient)
    unichain = _unichain_by_enumeration(P, mask, max_policies)
    kind = "unichain" if unichain else "communicating" if communicating else "weakly_communicating"
    return ModelClass(kind, communicating, True, unichain, closed_sets, transient)


def _unichain_by_enumeration(P, mask, max_policies):
    """True/False by checking every deterministic policy, ``None`` when there are more than
    ``max_policies`` (a loop over policies: a classification, not a hot path)."""
    counts = mask.sum(axis=1)
    if float(np.prod(counts.astype(float))) > max_policies:
        return None
    S = P.shape[0]
    # table[s, i]: the i-th admissible action of s; every policy as a row of choices
    table = np.argsort(~mask, axis=1, kind="stable")
    choices = np.indices(tuple(counts)).reshape(S, -1).T
    policies = table[np.arange(S)[None, :], choices]
    idx = np.arange(S)
    for policy in policies:  # loop over policies (bounded by max_policies)
        if n_recurrent_classes(P[idx, policy]) > 1:
            return False
    return True


def limiting_matrix(P_pi: np.ndarray, ev: MultichainEvaluation | None = None) -> np.ndarray:
    """``P* = lim (1/n) sum_{k<n} P^k`` (Puterman §A.4): on a recurrent class every row is the
    class's stationary distribution; a transient row mixes them with the absorption
    probabilities ``(I - P_TT)^{-1} P_TR``."""
    if ev is None:
        ev = evaluate_multichain(P_pi, np.zeros(P_pi.shape[0]))
    rec, T = np.flatnonzero(ev.recurrent), np.flatnonzero(~ev.recurrent)
    S = P_pi.shape[0]
    star = np.zeros((S, S))
    same = ev.labels[rec][:, None] == ev.labels[rec][None, :]
    star[np.ix_(rec, rec)] = same * ev.stationary[rec][None, :]
    if T.size:
        absorb = solve_system(
            np.eye(T.size) - P_pi[np.ix_(T, T)], P_pi[np.ix_(T, rec)], "absorption probabilities"
        )
        star[T] = absorb @ star[rec]
    return star
