"""Conic path of ``L1BallIndex``: the LP ``max v.q  s.t.  ||q - p||_1 <= d, q >= 0, sum q = 1``.

The paper's ``q+``/``q-`` form (§4.3) is the same LP with ``q = p + q- - q+``; CVXPY's
``norm1`` canonicalizes to it (one epigraph variable per state), and ``q`` stays a variable so
``x`` needs no reconstruction.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..problems.kl_ball import simplex_residual
from ..result import PlanResult
from ._common import solve_ball_index


def formulate(problem) -> cp.Problem:
    """Constraint 0: the L1 ball (its dual is ``dB/dd``); 1: ``sum q = 1``."""
    p, v = problem.p, problem.v
    q = cp.Variable(p.size, name="q", nonneg=True)
    return cp.Problem(cp.Maximize(v @ q), [cp.norm1(q - p) <= problem.radius, cp.sum(q) == 1])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    p, d = problem.p, problem.radius

    def residual(q, duals):
        excess = float(np.abs(q - p).sum()) - d
        # q is a distribution whatever d is: its distance from the simplex is measured on
        # the scale 1 (at d = 1e13 Clarabel's q summed to 1 - 1.3e-6 and still said optimal)
        return [
            (max(excess, 0.0), max(1.0, d), "L1-ball constraint violation"),
            (simplex_residual(q), 1.0, "distance from the simplex"),
        ]

    return solve_ball_index(problem, solver, solver_options, residual)
