"""The result every fast path returns: :class:`~optplan.result.PlanResult` stamped with the
method, the algorithm that ran, its iterations and the time since the path started."""

from __future__ import annotations

import time

from ..result import PlanResult


def fast_result(solver: str, start: float, iterations, **fields) -> PlanResult:
    """``PlanResult(method="fast", solver=solver, iterations=iterations, **fields)`` with
    ``solve_time`` the seconds since ``start`` (a ``time.perf_counter()`` reading)."""
    return PlanResult(
        method="fast",
        solver=solver,
        iterations=iterations,
        solve_time=time.perf_counter() - start,
        **fields,
    )
