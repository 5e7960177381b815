"""One instance of :func:`optplan.verify`: the user's answer, the outcome of comparing it,
and the worst error of a quantity over a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..result import OPTIMAL, PlanResult

__all__ = ["Answer", "Outcome", "Worst", "MAX_LISTED"]

#: Instances listed individually in a report (failures, exceptions); the counts cover all.
MAX_LISTED = 100


@dataclass(frozen=True)
class Answer:
    """The user's answer, read by the return convention: ``value``; ``x`` and
    ``multiplier`` where the function returned them (``None`` otherwise)."""

    value: float
    x: Any = None
    multiplier: Any = None


@dataclass(frozen=True)
class Outcome:
    """One instance: the conic status, the user's answer or exception, the errors.

    ``errors[name] = (abs_err, scale, allowed)``; ``failed`` lists the failure kinds
    (quantities beyond tolerance, ``"bad output"``, ``"status"``, ``"raises <Type>"``), empty
    when the instance agrees or was not compared.
    """

    inputs: dict
    status: str
    conic: PlanResult | None = None
    answer: Answer | None = None
    output: Any = None
    exception: str | None = None
    fn_warnings: tuple = ()
    conic_exception: str | None = None
    errors: dict = field(default_factory=dict)
    failed: tuple = ()
    certified: tuple = ()
    reason: str = ""
    invalid: str = ""
    fn_seconds: float = 0.0
    conic_seconds: float = 0.0

    @property
    def compared(self) -> bool:
        """The solver said ``optimal`` (so the instance counts)."""
        return self.status == OPTIMAL and not self.invalid

    @property
    def agree(self) -> bool:
        return self.compared and not self.failed


@dataclass(frozen=True)
class Worst:
    """The largest error of one quantity over the run, relative to what was allowed."""

    quantity: str
    abs_err: float
    scale: float
    allowed: float
    index: int

    @property
    def ratio(self) -> float:
        """``abs_err / allowed``: above 1 is a disagreement."""
        if self.allowed > 0:
            return self.abs_err / self.allowed
        return 0.0 if self.abs_err == 0 else np.inf


def worse(a: Worst, b: Worst) -> bool:
    """``a`` is the larger error (by its ratio to the allowance, then absolutely)."""
    ra, rb = a.ratio, b.ratio
    if not np.isfinite(a.abs_err) and np.isfinite(b.abs_err):
        return True
    if ra != rb:
        return bool(ra > rb)
    return bool(a.abs_err > b.abs_err)
