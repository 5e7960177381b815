"""Conic paths: one CVXPY formulation per problem stem, solvable with CLARABEL, ECOS or SCS.

Each module defines ``formulate(problem) -> cvxpy.Problem`` and
``solve(problem, solver, solver_options=None) -> PlanResult``.
"""

from ._common import SOLVER_DEFAULTS

__all__ = ["SOLVER_DEFAULTS"]
