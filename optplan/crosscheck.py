"""Solve a problem both ways and compare values, solutions and multipliers."""

from __future__ import annotations

import numpy as np

from ._checks import OptplanTypeError
from .problems.base import Problem, check_solver
from .result import SOLUTION_PRESENT, CrossCheck

#: Per-solver ``(rtol, atol)``, used as ``|a - b| <= atol + rtol * scale`` (cvxpy's
#: ``SOLVER_TO_TOL`` in spirit). Interior-point solvers at optplan's tight settings reach
#: ~1e-9; SCS is a first-order method.
SOLVER_TOL = {
    "CLARABEL": (1e-7, 1e-7),
    "ECOS": (1e-6, 1e-6),
    "SCS": (1e-4, 1e-4),
}


def cross_check(
    problem: Problem,
    solver: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    fast_options: dict | None = None,
    conic_options: dict | None = None,
) -> CrossCheck:
    """Solve ``problem`` with ``method="fast"`` and ``method="conic"`` and compare.

    Parameters
    ----------
    problem : Problem
        Any problem object (``DiscountedPlanning``, ``AverageRewardPlanning``, ...).
    solver : str, optional
        Conic solver; default ``CLARABEL``.
    rtol, atol : float, optional
        Override the per-solver tolerances of :data:`SOLVER_TOL`.
    fast_options, conic_options : dict, optional
        Passed to the two ``solve`` calls.

    Returns
    -------
    CrossCheck
        ``agree`` is True when both paths find a solution and every quantity the problem
        compares (``problem.compare``: value, solution ``x``, multipliers, ...) is within
        tolerance (its square root for ``problem.sqrt_tol_quantities``), or when both report
        the same non-solution status (e.g. both infeasible).
    """
    if not isinstance(problem, Problem):
        raise OptplanTypeError(
            f"problem must be an optplan problem object, got {type(problem).__name__}"
        )
    solver = check_solver(solver)
    d_rtol, d_atol = SOLVER_TOL[solver]
    rtol = d_rtol if rtol is None else float(rtol)
    atol = d_atol if atol is None else float(atol)
    fast = problem.solve(method="fast", **(fast_options or {}))
    conic = problem.solve(method="conic", solver=solver, **(conic_options or {}))
    abs_err, rel_err = {}, {}
    both = fast.status in SOLUTION_PRESENT and conic.status in SOLUTION_PRESENT
    if not both:
        agree = fast.status == conic.status
        message = f"fast: {fast.status} ({fast.message}); conic: {conic.status} ({conic.message})"
        return CrossCheck(agree, abs_err, rel_err, rtol, atol, fast, conic, message)
    bad = []
    for name, (err, scale) in problem.compare(fast, conic).items():
        abs_err[name] = err
        rel_err[name] = err / (1.0 + scale)
        a, r = (
            (np.sqrt(atol), np.sqrt(rtol)) if name in problem.sqrt_tol_quantities else (atol, rtol)
        )
        if not (err <= a + r * scale) or not np.isfinite(err):
            bad.append(f"{name}: |fast - conic| = {err:.3g} > {a:g} + {r:g} * {scale:.3g}")
    message = "; ".join(bad) if bad else "all quantities agree"
    return CrossCheck(not bad, abs_err, rel_err, rtol, atol, fast, conic, message)
