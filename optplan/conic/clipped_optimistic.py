"""Conic path of ``ClippedOptimisticPlanning``: one LP per clipped set.

``min(H, T V)`` is not the optimal value of one convex program (see the problem's docstring),
but with the clipped set ``U`` fixed it is the LP ``min mean(V) s.t. V(s) >= r + CB + gamma
P_hat V`` for the admissible pairs of states outside ``U``, ``V = H`` on ``U``. The rounds on
``U`` start from the unclipped LP (``U = {}``); a state joins only where ``T V`` exceeds ``H``
by more than the solver's tolerance, so solver noise cannot move ``U``. One round when no
clipping is active.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..dp import masked
from ..problems.base import SOLVER_TOL
from ..result import PlanResult
from ._common import bellman_rows, planning_result, run_stage


def formulate(problem, clipped: np.ndarray | None = None) -> cp.Problem:
    """The LP of one clipped set (default: none clipped, the unclipped optimistic LP):
    ``min mean(V) s.t. (E - gamma P_hat) V >= r + CB`` over the admissible pairs of the states
    outside ``clipped`` (constraint 0, when there are any), ``V[clipped] == H`` (constraint 1,
    when any state is clipped)."""
    S = problem.n_states
    U = np.zeros(S, dtype=bool) if clipped is None else np.asarray(clipped, dtype=bool)
    mask = problem.action_mask & ~U[:, None]
    V = cp.Variable(S, name="V")
    constraints = []
    if mask.any():
        A, c, _ = bellman_rows(problem.p_hat, problem.r + problem.bonus, mask, problem.discount)
        constraints.append(A @ V >= c)
    if U.any():
        constraints.append(V[np.flatnonzero(U)] == problem.horizon)
    return cp.Problem(cp.Minimize(cp.sum(V) / S), constraints)


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    S, H = problem.n_states, problem.horizon
    rtol, atol = SOLVER_TOL[solver]
    margin = atol + rtol * H  # T V above H by less than this: solver noise, not clipping
    U = np.zeros(S, dtype=bool)
    result = None
    for rounds in range(1, S + 2):  # loop over clipped sets (U shrinks after round 1)
        prob = formulate(problem, U)
        why, label = "every clipped-set LP is feasible and bounded", f"round {rounds}"
        result, failed = run_stage(
            prob, solver, solver_options, why, result, label, info={"rounds": rounds}
        )
        if failed:
            return failed
        V = prob.var_dict["V"].value
        TV = problem.backup(V).max(axis=1)
        new = TV > H + margin if rounds == 1 else U & (TV > H + margin)
        if np.array_equal(new, U):
            break
        U = new
    # the Bellman inequalities' duals: the discounted occupancy (from uniform weights) of the
    # optimal policy in the model where the clipped states stop
    free = problem.action_mask & ~U[:, None]
    occupancy = np.zeros(free.shape)
    if free.any():
        occupancy[free] = np.clip(prob.constraints[0].dual_value, 0.0, None)
    Q = problem.operator(V)
    residual = problem.residual(V)
    result = result.checked(residual, 1.0 + H, "clipped Bellman residual")
    # the LP's own policy where its dual names one (every free state carries occupancy under
    # the uniform weights); clipped states are not constrained: greedy in Q there
    policy = np.where(U, masked(Q, problem.action_mask).argmax(axis=1), occupancy.argmax(axis=1))
    info = {"clipped": U, "rounds": rounds, "residual": residual}
    return planning_result(result, float(np.mean(V)), V, occupancy, q=Q, policy=policy, info=info)
