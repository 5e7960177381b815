"""Conic path of ``KLInfRate``: ``min sum rel_entr(p_I, q_I)  s.t.  v.q >= rho`` (exp cones)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..problems.kl_ball import simplex_residual
from ..result import UNBOUNDED, UNBOUNDED_INACCURATE, PlanResult
from ._common import solve_index


def formulate(problem) -> cp.Problem:
    """Constraint 0: the target ``v.q >= rho`` (its dual is ``dD/drho``); 1: ``sum q = 1``."""
    p, v = problem.p, problem.v
    support = np.flatnonzero(p > 0)
    q = cp.Variable(p.size, name="q", nonneg=True)
    kl = cp.sum(cp.rel_entr(p[support], q[support]))
    return cp.Problem(cp.Minimize(kl), [v @ q >= problem.target, cp.sum(q) == 1])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    v, target = problem.v, problem.target
    scale = 1.0 + float(np.abs(v).max())

    def residual(q):
        shortfall = (target - float(v @ q)) / scale
        return max(shortfall, simplex_residual(q)), 1.0, "target constraint violation"

    return solve_index(
        formulate(problem),
        solver,
        solver_options,
        infeasible_value=np.inf,
        residual=residual,
        impossible=(frozenset({UNBOUNDED, UNBOUNDED_INACCURATE}), "KL >= 0 bounds it below"),
    )
