"""``optplan bench optimistic``: optimistic planning over L1 / KL confidence sets, extended value
iteration (with its exact finish) vs the convex program on each conic solver.

Random instances as a UCRL agent meets them (:func:`random_optimistic`): empirical transitions
from a few hundred samples per pair, radii that shrink like ``1/sqrt(n)``. Every ratio is from
timings of the same run, instance by instance; medians. EVI's time on an instance is the median
of :data:`~optplan.bench._common.FAST_RUNS` runs (:func:`~optplan.bench._common.timed_median`:
the first run after a forked conic solve pays the fork's page faults). Each conic solve runs
in a forked child that is killed at ``max_conic_seconds``; a solver cut off at one size is not
run at the larger ones (reported as over the cap, with the lower bound on its ratio).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from dataclasses import astuple

import numpy as np

from ..problems import OptimisticPlanning
from ..result import OPTIMAL, SOLUTION_PRESENT
from ._common import (
    FAST_RUNS,
    Runs,
    check_choices,
    check_seconds,
    timed_median,
    timed_optimal,
)
from ._options import add_actions, add_choices, add_conic_cap, add_count, add_sizes, add_solvers
from ._rows import CappedConic, median, solver_entries, solvers_table, table_lines
from .cases import random_optimistic

__all__ = [
    "RUNS",
    "STEMS",
    "HELP",
    "bench_optimistic",
    "format_table",
    "table",
    "header",
    "total",
    "add_arguments",
]

HELP = "optimistic planning over L1/KL confidence sets: EVI vs the convex program"
STEMS = frozenset({OptimisticPlanning.stem})
VARIANTS = ("l1-discounted", "l1-average", "kl-discounted", "kl-average")
#: The suite's default runs: sizes, actions, instances per size, solvers, seed.
RUNS = Runs(sizes=(10, 50, 200))


def bench_optimistic(
    runs: Runs = RUNS,
    variants: Sequence[str] = VARIANTS,
    max_conic_seconds: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Median wall time of EVI (fast) and of each conic solver, per (ball, criterion, S), on
    ``runs.repeats`` instances with ``runs.n_actions`` actions at each of ``runs.sizes``
    states.

    Row keys: ``variant``, ``S``, ``A``, ``instances``, ``fast_s``, ``fast_sweeps`` (median EVI
    sweeps), per solver ``<SOLVER>_s``, ``_ratio`` (conic / fast), ``_optimal`` (instances the
    solver called optimal), ``_err`` (max |value difference| over those), ``_skipped``; and
    ``_ok_ratio`` (median over the instances that solver called optimal of its time over EVI's
    on the same instance) and ``best_ratio``: the smallest ``_ok_ratio``, the fastest
    successful conic solver against EVI (None when no solver was optimal anywhere). Each conic
    solve runs in a forked child killed at ``max_conic_seconds``: a solver cut off at one size
    gets ``_skipped`` there and above, and ``_ratio_above`` (cap / EVI median, a lower bound)
    at that size.
    """
    sizes, n_actions, repeats, solvers, seed = astuple(runs.checked())
    variants = check_choices("variants", variants, VARIANTS)
    max_conic_seconds = check_seconds("max_conic_seconds", max_conic_seconds)
    rows = []
    for variant in variants:
        ball, criterion = variant.split("-")
        # warm-up (imports, numba's compiled kernel, the solvers' first-call overheads), untimed
        small = random_optimistic(np.random.default_rng(12345), 3, n_actions, ball, criterion)
        small.solve(method="fast")
        for solver in solvers:
            small.solve(method="conic", solver=solver)
        conic = CappedConic(solvers, max_conic_seconds)
        for S in sizes:
            rng = np.random.default_rng([seed, S, VARIANTS.index(variant)])
            make = functools.partial(random_optimistic, rng, S, n_actions, ball, criterion)
            row = {"variant": variant, "S": S, "A": n_actions, "instances": repeats}
            _size_row(row, make, conic, small)
            rows.append(row)
            if progress:
                best = "none optimal" if row["best_ratio"] is None else f"{row['best_ratio']:.0f}x"
                progress(f"{variant} S={S}: EVI {row['fast_s']:.2e}s, best conic ratio {best}")
    return rows


def _size_row(row: dict, make: Callable, conic: CappedConic, small) -> None:
    """Fill the row of one size (``row`` holds its ``S`` and ``instances``): that many
    instances of ``make()``, each solved by EVI (median of :data:`FAST_RUNS` runs) and by
    every solver still running."""
    solvers, S = conic.solvers, row["S"]
    times = {"fast": []} | {s: [] for s in solvers}
    sweeps, optimal = [], dict.fromkeys(solvers, 0)
    errs = dict.fromkeys(solvers, 0.0)
    ok_ratios: dict[str, list[float]] = {s: [] for s in solvers}
    for _ in range(row["instances"]):
        problem = make()
        fast, t_fast = timed_optimal(problem, "EVI", timed_median)
        times["fast"].append(t_fast)
        sweeps.append(fast.iterations)
        for solver, res, t in conic.solves(problem, small, S, times):
            if res.status == OPTIMAL:
                optimal[solver] += 1
                ok_ratios[solver].append(t / t_fast)
            if res.status in SOLUTION_PRESENT:
                errs[solver] = max(errs[solver], abs(res.value - fast.value))
    row["fast_s"] = float(np.median(times["fast"]))
    row["fast_sweeps"] = int(np.median(sweeps))
    for solver in solvers:
        if conic.skipped(row, solver):
            if conic.cut[solver] == S:  # the cut solve alone bounds the ratio from below
                row[f"{solver}_ratio_above"] = conic.seconds / row["fast_s"]
            continue
        solver_entries(
            row,
            solver,
            median(times[solver]),
            optimal=optimal[solver],
            err=errs[solver],
            ok_ratio=median(ok_ratios[solver]),
        )
    ok = [row[f"{s}_ok_ratio"] for s in solvers if row.get(f"{s}_ok_ratio") is not None]
    row["best_ratio"] = min(ok) if ok else None


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (variant, S): EVI's median and sweeps, then per solver its median, the
    ratio, optimal instances and the largest value difference."""
    lines = table_lines(
        f"{'variant':<15}{'S':>5}{'EVI s':>10}{'sweeps':>7}", solvers, CappedConic.head
    )
    for r in rows:
        line = f"{r['variant']:<15}{r['S']:>5}{r['fast_s']:>10.2e}{r['fast_sweeps']:>7}"
        for s in solvers:
            if r.get(f"{s}_skipped"):
                above = r.get(f"{s}_ratio_above")
                text = f"over cap, ratio > {above:.0f}x" if above else "skipped (over cap below)"
                line += f"{text:>35}"
                continue
            line += CappedConic.cells(r, s)
        lines.append(line)
    return "\n".join(lines)


#: The text table of the rows for the command line.
table = solvers_table(format_table)


def header(args: argparse.Namespace) -> str:
    return (
        f"optimistic planning benchmark: empirical models (A={args.n_actions}), radii ~ "
        f"1/sqrt(n), {args.repeats} instances per size, median wall seconds (EVI: median of "
        f"{FAST_RUNS} runs per instance); EVI = extended value iteration + exact finish; "
        "ratio = conic median / EVI median (same run)"
    )


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_optimistic` reports: one per variant and size."""
    return len(args.variants) * len(args.sizes)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_optimistic` or
    a field of its :class:`Runs`."""
    add_sizes(parser, list(RUNS.sizes), "numbers of states")
    add_actions(parser, RUNS.n_actions)
    add_count(parser, "--repeats", RUNS.repeats, "random instances per size (medians)")
    add_solvers(parser)
    add_choices(parser, "--variants", VARIANTS, "confidence set (l1, kl) x criterion")
    add_conic_cap(
        parser,
        60.0,
        "each conic solve is killed after this long; that solver is skipped at larger sizes",
    )
