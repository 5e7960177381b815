"""Fast path of ``HittingTimes``: stochastic-shortest-path policy iteration, one target at a
time (a loop over targets; each iteration is vectorized over states and actions)."""

from __future__ import annotations

import time

import numpy as np

from ..dp import greedy, masked, solve_system
from ..result import MAX_ITER, OPTIMAL, PlanResult
from ._options import check_tol_iter


def steps_toward(P: np.ndarray, allowed: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """A policy that, off ``goal``, takes an ``allowed`` action reaching a state strictly
    closer to ``goal`` (breadth-first distance in the graph of allowed actions) with positive
    probability: ``goal`` is then reached with probability 1 from every state at a finite
    distance. ``-1`` where no allowed action exists."""
    S = P.shape[0]
    edges = (P > 0) & allowed[:, :, None]
    dist = np.where(goal, 0, S + 1)
    for d in range(1, S + 1):  # breadth-first layers (a loop over distances)
        step = (edges & (dist < d)[None, None, :]).any(axis=(1, 2)) & (dist > d)
        if not step.any():
            break
        dist[step] = d
    closer = (edges & (dist[None, None, :] < dist[:, None, None])).any(axis=2)
    return np.where(closer.any(axis=1), closer.argmax(axis=1), -1)


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
        allowed = stays[t][idx]
        rows = np.arange(idx.size)
        it = 0
        for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
            times = solve_system(
                np.eye(idx.size) - P_N[rows, pol], np.ones(idx.size), "a hitting time"
            )
            q = 1.0 + P_N @ times
            new = greedy(masked(-q, allowed), pol, tol=tol)
            if np.array_equal(new, pol):
                break
            pol = new
        else:
            status = MAX_ITER
            message = f"policy iteration for target {t} did not stop in {max_iter} iterations"
        iterations = max(iterations, it)
        T[t, idx] = times
        policy[t, idx] = pol
    off = ~np.eye(S, dtype=bool)
    return PlanResult(
        value=float(T[off].max()) if S > 1 else 0.0,
        x=T,
        status=status,
        message=message,
        method="fast",
        solver="policy_iteration",
        iterations=iterations,
        solve_time=time.perf_counter() - start,
        values=T,
        policy=policy,
    )
