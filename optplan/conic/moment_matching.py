"""Conic path of ``MomentMatchingVariance``: the UBE's LP (:mod:`optplan.conic.ube`) on its
local term."""

from __future__ import annotations

import cvxpy as cp

from ..result import PlanResult
from . import ube


def formulate(problem) -> cp.Problem:
    """The UBE LP of ``problem.bellman``."""
    return ube.formulate(problem.bellman)


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    result = ube.solve(problem.bellman, solver=solver, solver_options=solver_options)
    return result.replace(info={**result.info, **problem.terms._asdict()})
