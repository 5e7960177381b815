"""Fast path of ``AverageRewardPlanning``: Howard policy iteration or relative value iteration."""

from __future__ import annotations

import logging
import time

import numpy as np

from .._checks import OptplanError
from ..dp import (
    SPARSE_DIRECT_MAX_STATES,
    EvaluationError,
    average_policy_iteration,
    backup,
    evaluate_sparse_unichain,
    evaluate_unichain,
    greedy,
    masked,
    multichain_policy_iteration,
    n_recurrent_classes,
    policy_model,
    relative_value_iteration,
    sparse_recurrent_classes,
)
from ..problems.average_reward import settle_multichain
from ..result import MAX_ITER, MULTICHAIN, NUMERICAL_ERROR, OPTIMAL, PlanResult
from ._options import check_algorithm, check_tol_iter
from ._result import fast_result

ALGORITHMS = ("policy_iteration", "relative_value_iteration")

log = logging.getLogger(__name__)


def solve(
    problem,
    algorithm: str = "policy_iteration",
    tol: float = 1e-10,
    max_iter: int | None = None,
    aperiodicity: float = 0.5,
) -> PlanResult:
    """Solve the average-reward optimality equations of a unichain MDP.

    Parameters
    ----------
    algorithm : {"policy_iteration", "relative_value_iteration"}
        Howard's policy iteration for unichain models (Puterman §8.6): evaluate the policy
        (:func:`optplan.dp.evaluate_unichain`: the bordered linear system, or from 200 states
        on relative value iteration of the fixed policy when the chain mixes fast enough to
        reach 1e-13 for less than a factorization costs), improve greedily keeping the
        incumbent on ties. If an iterate is multichain, relative value iteration takes over
        (it also solves weakly communicating models). Relative value iteration (Puterman
        §8.5.5) stops when ``span(T h - h) < tol * max |R|``; it runs on the
        aperiodic transform ``tau I + (1 - tau) P`` (same gain, bias scaled by
        ``1/(1-tau)``) only once the plain iteration stalls (a periodic chain). Either way
        the gain, bias and stationary distribution returned are the returned policy's exact
        ones, from one evaluation (one factorization serves all three).
    tol : float
        Relative value iteration stops when the span of ``T h - h`` is below ``tol`` times the
        reward scale ``max |R|`` (1 when every reward is 0), so the gain is within ``tol``
        relative at any scale: with rewards near 1e6 the span cannot fall below about 1e-10 in
        double precision, and with rewards near 1e-12 an absolute ``tol`` would stop at once.
    max_iter : int, optional
        Default 1,000 (policy iteration) and 100,000 (relative value iteration).
    aperiodicity : float in (0, 1)
        ``tau`` of the aperiodicity transform (relative value iteration, once stalled).

    A sparse model (``mdp.P_format == "csr"``) is solved without densifying it: see
    :func:`_solve_sparse`.

    Returns
    -------
    PlanResult
        Status ``multichain`` (with no numbers but the last iterate's) when the gain is not
        constant across states, so Eq. (1) with a scalar gain has no solution: with
        ``policy_iteration``, decided by multichain policy iteration once the unichain
        methods meet a multichain policy (a constant optimal gain is then returned,
        ``optimal``); relative value iteration alone reports ``max_iter``.
    """
    _check_options(problem, algorithm, tol, max_iter, aperiodicity)
    if problem.mdp.sparse:
        return _solve_sparse(problem, algorithm, tol, max_iter, aperiodicity)
    if problem.multichain == "solve":
        return solve_multichain(problem, max_iter or 1_000)
    mdp = problem.mdp
    P, R, mask = mdp.P, mdp.R, mdp.action_mask
    start = time.perf_counter()
    out, note, pi_out, ev = _optimal_policy(P, R, mask, algorithm, tol, max_iter, aperiodicity)
    status, message, policy, iterations = out
    message = (note + message if status != OPTIMAL else note).strip("; ")
    status, message, gain, h, pi, q = _evaluate_returned(
        P, R, mask, policy, status, message, note, pi_out, ev
    )
    q = masked(backup(P, R, h), mask) if q is None else q
    result = _result(algorithm, start, iterations, (status, message), (gain, h, pi, q), policy)
    if algorithm == "policy_iteration" and status == MULTICHAIN:
        return settle_multichain(result, solve_multichain(problem, max_iter or 1_000), mdp)
    return result


def _solve_sparse(problem, algorithm, tol, max_iter, aperiodicity) -> PlanResult:
    """The unichain fast path on a sparse model, never densifying it.

    Relative value iteration on the model's ``P_rows`` (one sparse mat-vec a sweep, the same
    :func:`~optplan.dp.relative_value_iteration` as dense models) gives a policy; with
    ``policy_iteration``, Howard's iteration continues from it (each chain a row gather,
    evaluated by :func:`~optplan.dp.evaluate_sparse_unichain`: exactly on chains up to
    :data:`~optplan.dp.SPARSE_DIRECT_MAX_STATES` states, by iterations to ``tol`` times the
    reward scale above) until the policy repeats. The gain, bias and stationary distribution
    returned are the returned policy's. A multichain iterate, or ``multichain="solve"``,
    hands the model to the dense path when its dense copy is within
    :data:`~optplan.mdp.DENSE_VIEW_MAX_BYTES` (``mdp.dense_P()`` raises, naming the size,
    otherwise)."""
    import dataclasses

    mdp = problem.mdp
    if problem.multichain == "solve":
        return solve(
            dataclasses.replace(problem, mdp=mdp.to_dense()), algorithm, tol, max_iter, aperiodicity
        )
    rows, R, mask = mdp.P_rows, mdp.R, mdp.action_mask
    S = mdp.n_states
    start = time.perf_counter()
    scale = float(np.abs(R[mask]).max()) or 1.0
    relative = np.zeros(S)
    status, message, policy, iterations = relative_value_iteration(
        rows, R, mask, tol * scale, max_iter or 100_000, aperiodicity, bias_out=relative
    )
    if status != OPTIMAL:
        return solve(
            dataclasses.replace(problem, mdp=mdp.to_dense()), algorithm, tol, max_iter, aperiodicity
        )
    exact = S <= SPARSE_DIRECT_MAX_STATES
    tie = 1e-12 if exact else 1e-9
    ev = None
    for _ in range(max_iter or 1_000):
        P_pi, r_pi = policy_model(rows, R, policy)
        n_classes = sparse_recurrent_classes(P_pi)
        if n_classes > 1:
            return solve(
                dataclasses.replace(problem, mdp=mdp.to_dense()),
                algorithm,
                tol,
                max_iter,
                aperiodicity,
            )
        try:
            # the first evaluation's bias starts from the relative values, each later one
            # from the last policy's stationary law and bias
            last = (None, relative) if ev is None else (ev.stationary, ev.bias)
            ev = evaluate_sparse_unichain(P_pi, r_pi, 0.1 * tol * scale, start=last)
        except EvaluationError as exc:
            status, message = NUMERICAL_ERROR, str(exc)
            break
        q = masked(backup(rows, R, ev.bias), mask)
        if algorithm != "policy_iteration":
            break
        iterations += 1
        new = greedy(q, policy, tol=tie)
        if (new == policy).all():
            break
        policy = new
    else:
        status, message = MAX_ITER, f"policy iteration did not stop in {max_iter} iterations"
    if status == NUMERICAL_ERROR:
        nan = np.full(S, np.nan)
        gain, h, pi, q = np.nan, nan, nan, masked(np.full_like(R, np.nan), mask)
    else:
        gain, h, pi = ev.gain, ev.bias, ev.stationary
    return _result(algorithm, start, iterations, (status, message), (gain, h, pi, q), policy)


def _result(algorithm, start, iterations, outcome, solution, policy) -> PlanResult:
    """The result of ``policy``: ``outcome = (status, message)``, ``solution = (gain, bias,
    stationary distribution of the policy's chain, q)``; the occupancy (the multiplier) is the
    stationary distribution on the policy's pairs."""
    status, message = outcome
    gain, h, pi, q = solution
    occupancy = np.zeros_like(q)
    occupancy[np.arange(q.shape[0]), policy] = pi
    return fast_result(
        algorithm,
        start,
        iterations,
        value=gain,
        x=h,
        multiplier=occupancy,
        status=status,
        message=message,
        values=h,
        q=q,
        policy=policy,
        gain=gain,
        bias=h,
        occupancy=occupancy,
    )


def _check_options(problem, algorithm, tol, max_iter, aperiodicity) -> None:
    """The options checked, with the errors naming them."""
    check_algorithm(algorithm, ALGORITHMS)
    check_tol_iter(tol, max_iter)
    if not (0.0 < aperiodicity < 1.0):
        raise OptplanError(f"aperiodicity must lie in (0, 1), got {aperiodicity!r}")
    if problem.multichain == "solve" and algorithm != "policy_iteration":
        raise OptplanError(
            "multichain='solve' is solved by multichain policy iteration: algorithm must be "
            f"'policy_iteration', got {algorithm!r}"
        )


def _optimal_policy(P, R, mask, algorithm, tol, max_iter, aperiodicity):
    """``((status, message, policy, iterations), note, pi_out, ev)``: the unichain iteration
    (``pi_out``: policy iteration's output, ``ev`` its last evaluation, ``None`` for relative
    value iteration), relative value iteration taking over where policy iteration meets a
    multichain or numerically singular iterate (``note`` says so)."""
    note = ""
    rvi_tol = tol * (float(np.abs(R[mask]).max()) or 1.0)  # relative to the reward scale
    pi_out = ev = None
    if algorithm == "policy_iteration":
        pi_out, ev = average_policy_iteration(P, R, mask, None, max_iter or 1_000)
        out = (pi_out.status, pi_out.message, pi_out.policy, pi_out.iterations)
        if out[0] in (MULTICHAIN, NUMERICAL_ERROR):
            note = out[1] + "; switched to relative value iteration. "
            log.info("average reward: %s; switching to relative value iteration", out[1])
            out = relative_value_iteration(P, R, mask, rvi_tol, 100_000, aperiodicity)
            if out[0] == MAX_ITER:  # a multichain policy exists and the gain is not constant
                out = (MULTICHAIN, *out[1:])
    else:
        out = relative_value_iteration(P, R, mask, rvi_tol, max_iter or 100_000, aperiodicity)
    return out, note, pi_out, ev


def _evaluate_returned(P, R, mask, policy, status, message, note, pi_out, ev):
    """``(status, message, gain, h, pi, q)`` of the returned policy: its exact gain, bias and
    stationary distribution from one evaluation (``ev`` when policy iteration ended on it;
    ``q`` its last backup, or ``None``), NaN with status ``multichain`` or
    ``numerical_error`` where it has no unichain evaluation in double precision."""
    q = None
    if ev is None:
        P_pi, r_pi = policy_model(P, R, policy)
        n_classes = n_recurrent_classes(P_pi)
    else:  # policy iteration checked the returned policy's chain and evaluated it
        n_classes = 1
    if status == OPTIMAL and n_classes > 1:
        status, message = (
            MULTICHAIN,
            message + (f"the returned policy has {n_classes} recurrent classes"),
        )
    try:
        if n_classes > 1:
            raise EvaluationError("")
        if ev is None:
            ev = evaluate_unichain(P_pi, r_pi, stationary=True)
        elif ev.normalized:  # policy iteration's last backup used the final bias
            q = masked(pi_out.q, mask)
        pi = ev.stationary()  # the same factorization (or iteration) as gain and bias
        ev.normalize()
        gain, h = ev.gain, ev.bias
    except EvaluationError as exc:
        if n_classes == 1:  # unichain, but not computable in double precision
            status, message = NUMERICAL_ERROR, (note + str(exc)).strip("; ")
        S = P.shape[0]
        gain, h, pi = np.nan, np.full(S, np.nan), np.full(S, np.nan)
    return status, message, gain, h, pi, q


def solve_multichain(problem, max_iter: int) -> PlanResult:
    """Multichain policy iteration (Puterman §9.2, :func:`optplan.dp.multichain_policy_iteration`):
    the optimal gain of every state and the bias of the returned policy (``P*_d h = 0``)."""
    mdp = problem.mdp.to_dense()  # a sparse model's dense copy (its size limit)
    P, R, mask = mdp.P, mdp.R, mdp.action_mask
    start = time.perf_counter()
    out = multichain_policy_iteration(P, R, mask, max_iter=max_iter)
    S = mdp.n_states
    ev = out.evaluation
    if ev is None:  # no evaluation of the last policy: no numbers
        nan = np.full(S, np.nan)
        value, gain, bias, found = np.nan, nan, nan, {}
    else:
        occupancy = limiting_occupancy(P, out.policy, ev, np.full(S, 1.0 / S))
        value, gain, bias = float(mdp.initial @ ev.gain), ev.gain, ev.bias
        found = {
            "multiplier": occupancy,
            "values": bias,
            "q": masked(backup(P, R, bias), mask),
            "occupancy": occupancy,
            "info": {"recurrent": ev.recurrent, "stationary": ev.stationary},
        }
    return fast_result(
        "multichain_policy_iteration",
        start,
        out.iterations,
        value=value,
        x=bias,
        status=out.status,
        message=out.message,
        policy=out.policy,
        gain=gain,
        bias=bias,
        **found,
    )


def limiting_occupancy(P, policy, ev, start) -> np.ndarray:
    """``occupancy[s, a] = (start @ P*_d)[s]`` on ``a = d(s)``: the limiting state-action
    frequencies of ``d`` from ``start``; a transient state's start mass reaches the recurrent
    classes with the absorption probabilities ``(I - P_TT)^{-1} P_TR``."""
    S = P.shape[0]
    P_pi = P[np.arange(S), policy]
    rec, T = np.flatnonzero(ev.recurrent), np.flatnonzero(~ev.recurrent)
    reached = np.zeros(S)
    reached[rec] = start[rec]
    if T.size:
        through = np.linalg.solve((np.eye(T.size) - P_pi[np.ix_(T, T)]).T, start[T])
        reached[rec] += through @ P_pi[np.ix_(T, rec)]
    mass = np.bincount(ev.labels[rec], weights=reached[rec], minlength=ev.labels.max() + 1)
    occupancy = np.zeros(P.shape[:2])
    occupancy[rec, policy[rec]] = mass[ev.labels[rec]] * ev.stationary[rec]
    return occupancy
