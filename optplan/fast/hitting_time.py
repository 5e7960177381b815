"""Fast path of ``HittingTimes``: stochastic-shortest-path policy iteration, one target at a
time (a loop over targets; each iteration is vectorized over states and actions)."""

from __future__ import annotations

import time

import numpy as np

from ..dp import EvaluationError, greedy, masked, solve_system
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL, PlanResult
from ._options import check_tol_iter
from ._result import fast_result


def steps_toward(P: np.ndarray, allowed: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """A proper policy towards ``goal``: states are settled in rounds, each taking the
    ``allowed`` action with the most probability on the states settled before it (``goal``
    first); every round settles the states whose best mass is at least half the round's
    largest. Each settled state moves to earlier ones with positive probability, so ``goal``
    is reached with probability 1 from every state that gets an action; ``-1`` where none
    does. Preferring large masses (a widest-path tree) keeps the first evaluation well
    conditioned: a breadth-first step along a mass of 1e-94 is proper too, but its system
    ``I - P_NN`` is singular in double precision."""
    S = P.shape[0]
    edges = np.where(allowed[:, :, None], P, 0.0)
    settled = goal.copy()
    policy = np.full(S, -1)
    for _ in range(S):  # rounds (each settles at least one state)
        mass = edges[:, :, settled].sum(axis=2)  # (S, A): mass on the settled states
        best = np.where(settled, 0.0, mass.max(axis=1))
        top = best.max()
        if not top > 0:
            break
        pick = best >= 0.5 * top
        policy[pick] = mass[pick].argmax(axis=1)
        settled |= pick
    return policy


def escape_matrix(P_N: np.ndarray, P_out: np.ndarray, pol: np.ndarray) -> np.ndarray:
    """``I - P_NN`` of policy ``pol`` with its diagonal computed as the mass that leaves each
    state (to the other states of ``N`` and to the target), summed from the small entries:
    ``1 - P(s, a, s)`` cancels to 0 when ``P(s, a, s) = 1 - 1e-300`` rounds to 1, and the
    system turns singular although the policy is proper (Grassmann, Taksar and Heyman 1985
    use the same complement for stationary distributions)."""
    n = P_N.shape[0]
    rows = np.arange(n)
    M = -P_N[rows, pol]
    M[rows, rows] = 0.0
    M[rows, rows] = P_out[rows, pol] - M.sum(axis=1)
    return M


def solve(problem, max_iter: int = 1_000, tol: float = 1e-12) -> PlanResult:
    """Policy iteration per target ``t`` on the states ``N`` that reach ``t`` (``t``
    excluded): evaluate ``T_N = (I - P_NN)^{-1} 1``, improve to ``argmin_a 1 + P(s, a) T``
    over the actions that stay among the states reaching ``t``, keeping the incumbent on
    ties (``tol``, relative); stop when the policy repeats. The start (:func:`steps_toward`)
    is proper, and so is every improvement (Bertsekas and Tsitsiklis 1991)."""
    check_tol_iter(tol, max_iter)
    mdp = problem.mdp
    P = mdp.P
    S = mdp.n_states
    start = time.perf_counter()
    reach, stays = problem.reach, problem.stays()
    T = np.full((S, S), np.inf)
    policy = np.full((S, S), -1)
    status, message, iterations = OPTIMAL, "", 0
    for t in range(S):  # loop over targets
        N = reach[t].copy()
        N[t] = False
        idx = np.flatnonzero(N)
        T[t, t] = 0.0
        if not idx.size:
            continue
        goal = np.zeros(S, dtype=bool)
        goal[t] = True
        pol = steps_toward(P, stays[t], goal)[idx]
        P_N = P[np.ix_(idx, np.arange(P.shape[1]), idx)]  # (n, A, n): mass to t drops out
        P_out = P[idx, :, t]  # (n, A): mass to the target
        allowed = stays[t][idx]
        it = 0
        try:
            for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
                times = solve_system(
                    escape_matrix(P_N, P_out, pol), np.ones(idx.size), "a hitting time"
                )
                q = 1.0 + P_N @ times
                new = greedy(masked(-q, allowed), pol, tol=tol)
                if np.array_equal(new, pol):
                    break
                pol = new
            else:
                status = MAX_ITER
                message = f"policy iteration for target {t} did not stop in {max_iter} iterations"
        except EvaluationError as err:
            times = np.full(idx.size, np.nan)
            status, message = NUMERICAL_ERROR, f"target {t}: {err}"
        if status == OPTIMAL and not (times >= 1.0 - 1e-9).all():
            # each time from s != t is at least one step: less is rounding, not an answer
            worst = int(idx[np.argmin(times)])
            status = NUMERICAL_ERROR
            message = (
                f"target {t}: the policy evaluation gave a hitting time of "
                f"{times.min():.3g} < 1 from state {worst}: the transition masses are too "
                "small for double precision"
            )
            times = np.full(idx.size, np.nan)
        iterations = max(iterations, it)
        T[t, idx] = times
        policy[t, idx] = pol
    off = ~np.eye(S, dtype=bool)
    return fast_result(
        "policy_iteration",
        start,
        iterations,
        value=float(T[off].max()) if S > 1 else 0.0,
        x=T,
        status=status,
        message=message,
        values=T,
        policy=policy,
    )
