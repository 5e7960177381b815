"""Fast path of ``MomentMatchingVariance``: the UBE's (:mod:`optplan.fast.ube`) on its
local term, plus the term's parts."""

from __future__ import annotations

from ..result import PlanResult
from . import ube


def solve(
    problem,
    algorithm: str = "direct",
    tol: float = 1e-12,
    max_iter: int | None = None,
    multiplier: bool = True,
) -> PlanResult:
    """See :func:`optplan.fast.ube.solve` (``multiplier=False``: ``sigma~^2`` alone)."""
    result = ube.solve(
        problem.bellman, algorithm=algorithm, tol=tol, max_iter=max_iter, multiplier=multiplier
    )
    return result.replace(info={**result.info, **problem.terms._asdict()})
