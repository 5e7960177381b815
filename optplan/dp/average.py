"""The average-reward criterion on unichain policies: gain, bias and stationary distribution
of a policy (one factorization of the bordered system, or iteration on large chains), and
relative value iteration with the aperiodicity transform."""

from __future__ import annotations

import numpy as np

from ..result import MAX_ITER, OPTIMAL
from ._average_iteration import (
    ITERATIVE_BUDGET,
    ITERATIVE_MIN_STATES,
    ITERATIVE_TOL,
    _iterate_average,
    _iterate_joint,
    _iterate_stationary,
    _joint_loop,
)
from ._common import _singular, backup, generator, greedy, masked, solve_system


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
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    tol: float,
    max_iter: int,
    tau: float,
    bias_out: np.ndarray | None = None,
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
    (rescaled by ``1/(1-tau)``), and it converges (Puterman Thm 8.5.4). ``bias_out``, an
    array ``(S,)``: filled with the last relative values, on the bias's scale (an estimate
    of the bias up to a constant, for an evaluation to start from)."""
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
            if bias_out is not None:
                bias_out[:] = (1.0 - t) * h
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
