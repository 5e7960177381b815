"""The pieces the bench suites build their rows and tables from: the conic solvers under a
time cap, the median and ratio entries of a row, a table's header and rule."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ._common import conic_capped

__all__ = ["CappedConic", "median", "solver_entries", "table_lines", "solvers_table"]


class CappedConic:
    """The conic solvers of one suite, each solve in a forked child killed at ``seconds``
    (:func:`conic_capped`): a solver cut off at one size is not run at that size's remaining
    instances nor at larger sizes."""

    def __init__(self, solvers: Sequence[str], seconds: float) -> None:
        self.solvers = solvers
        self.seconds = seconds
        #: ``solver -> the size at which a solve went over the cap``.
        self.cut: dict[str, int] = {}

    def solves(self, problem, warmup, size: int, times: dict[str, list[float]]) -> Iterator:
        """``(solver, result, seconds)`` per solver still running on ``problem``, its time
        appended to ``times[solver]`` (``warmup``: see :func:`conic_capped`)."""
        for solver in self.solvers:
            if solver in self.cut:
                continue
            res, t = conic_capped(problem, warmup, solver, self.seconds)
            if res is None:  # killed at the cap: no ratio at this size or above
                self.cut[solver] = size
                continue
            times[solver].append(t)
            yield solver, res, t

    def skipped(self, row: dict, solver: str) -> bool:
        """Whether ``solver`` was cut off; ``row[<solver>_skipped]`` says where (else ``None``)."""
        if solver not in self.cut:
            row[f"{solver}_skipped"] = None
            return False
        at = self.cut[solver]
        row[f"{solver}_skipped"] = f"a solve ran over the {self.seconds:g} s cap at S = {at}"
        return True

    @staticmethod
    def head(solver: str) -> str:
        """The table's header block of one solver (35 characters)."""
        return f"{solver + ' s':>12}{'ratio':>8}{'opt':>5}{'max err':>10}"

    @staticmethod
    def cells(row: dict, solver: str) -> str:
        """One solver's block of a table line: median, ratio, optimal / instances, max error."""
        s = solver
        return (
            f"{row[f'{s}_s']:>12.2e}{row[f'{s}_ratio']:>7.0f}x"
            f"{row[f'{s}_optimal']:>3}/{row['instances']}{row[f'{s}_err']:>10.1e}"
        )


def median(times: Sequence[float]) -> float | None:
    """The median wall time, ``None`` without any time."""
    return float(np.median(times)) if len(times) else None


def solver_entries(row: dict, key: str, med: float | None, **more) -> None:
    """``row[<key>_s]`` (the median ``med``), ``row[<key>_ratio]`` (``med / row["fast_s"]``,
    ``None`` without a median), then ``row[<key>_<name>] = value`` for each of ``more``."""
    row[f"{key}_s"] = med
    row[f"{key}_ratio"] = None if med is None else med / row["fast_s"]
    for name, value in more.items():
        row[f"{key}_{name}"] = value


def table_lines(
    head: str, solvers: Sequence[str], block: Callable[[str], str], tail: str = ""
) -> list[str]:
    """A table's first two lines: ``head``, ``block(solver)`` per solver and ``tail``; and the
    rule under them."""
    head += "".join(block(s) for s in solvers) + tail
    return [head, "-" * len(head)]


def solvers_table(format_table: Callable[[list[dict], Sequence[str]], str]) -> Callable:
    """A suite's ``table(rows, args)`` for the command line: ``format_table(rows, solvers)``
    with the solvers of ``--solvers``."""

    def table(rows: list[dict], args) -> str:
        return format_table(rows, args.solvers)

    return table
