"""Conic path of ``KLInfRate``: ``min sum rel_entr(p_I, q_I)  s.t.  v.q >= rho`` (exp cones)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..result import INFEASIBLE, PlanResult
from ._common import conic_result, no_solution, run


def formulate(problem) -> cp.Problem:
    """Constraint 0: the target ``v.q >= rho`` (its dual is ``dD/drho``); 1: ``sum q = 1``."""
    p, v = problem.p, problem.v
    support = np.flatnonzero(p > 0)
    q = cp.Variable(p.size, name="q", nonneg=True)
    kl = cp.sum(cp.rel_entr(p[support], q[support]))
    return cp.Problem(cp.Minimize(kl), [v @ q >= problem.target, cp.sum(q) == 1])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    """The value is the solver's objective (``opt_val``), not CVXPY's re-evaluation at the
    returned ``q``, which is ``inf`` when the solver rounds a tiny ``q_x`` with ``p_x > 0`` to 0."""
    prob = formulate(problem)
    status, message, iterations, seconds = run(prob, solver, solver_options)
    failed = no_solution(status, message, solver, iterations, seconds)
    if failed:
        return failed.replace(value=np.inf) if status == INFEASIBLE else failed
    return conic_result(
        status,
        message,
        solver,
        iterations,
        seconds,
        value=float(prob.solution.opt_val),
        x=prob.var_dict["q"].value,
        multiplier=float(prob.constraints[0].dual_value),
    )
