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
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import check_int
from ..problems import SOLVERS, OptimisticPlanning
from ..result import OPTIMAL, SOLUTION_PRESENT
from ._common import (
    FAST_RUNS,
    add_actions,
    add_conic_cap,
    add_count,
    add_sizes,
    add_solvers,
    check_choices,
    check_seconds,
    check_sizes,
    check_solvers,
    conic_capped,
    timed_median,
)
from .cases import random_optimistic

__all__ = ["STEMS", "bench_optimistic", "format_table", "header", "add_arguments"]

STEMS = frozenset({OptimisticPlanning.stem})
VARIANTS = ("l1-discounted", "l1-average", "kl-discounted", "kl-average")


def bench_optimistic(
    sizes: Sequence[int] = (10, 50, 200),
    n_actions: int = 4,
    repeats: int = 3,
    solvers: Sequence[str] = SOLVERS,
    variants: Sequence[str] = VARIANTS,
    max_conic_seconds: float = 60.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Median wall time of EVI (fast) and of each conic solver, per (ball, criterion, S).

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
    sizes = check_sizes(sizes)
    n_actions = check_int("n_actions", n_actions)
    repeats = check_int("repeats", repeats)
    solvers = check_solvers(solvers)
    variants = check_choices("variants", variants, VARIANTS)
    max_conic_seconds = check_seconds("max_conic_seconds", max_conic_seconds)
    seed = check_int("seed", seed, 0)
    rows = []
    for variant in variants:
        ball, criterion = variant.split("-")
        # warm-up (imports, numba's compiled kernel, the solvers' first-call overheads), untimed
        small = random_optimistic(np.random.default_rng(12345), 3, n_actions, ball, criterion)
        small.solve(method="fast")
        for solver in solvers:
            small.solve(method="conic", solver=solver)
        cut: dict[str, int] = {}  # solver -> the size at which a solve went over the cap
        for S in sizes:
            rng = np.random.default_rng([seed, S, VARIANTS.index(variant)])
            times = {"fast": []} | {s: [] for s in solvers}
            sweeps, optimal = [], dict.fromkeys(solvers, 0)
            errs = dict.fromkeys(solvers, 0.0)
            ok_ratios: dict[str, list[float]] = {s: [] for s in solvers}
            for _ in range(repeats):
                problem = random_optimistic(rng, S, n_actions, ball, criterion)
                fast, t_fast = timed_median(lambda p=problem: p.solve(method="fast"))
                if fast.status != OPTIMAL:
                    raise RuntimeError(f"EVI: {fast.status} on a bench instance: {fast.message}")
                times["fast"].append(t_fast)
                sweeps.append(fast.iterations)
                for solver in solvers:
                    if solver in cut:
                        continue
                    res, t = conic_capped(problem, small, solver, max_conic_seconds)
                    if res is None:  # killed at the cap: no ratio at this size or above
                        cut[solver] = S
                        continue
                    times[solver].append(t)
                    if res.status == OPTIMAL:
                        optimal[solver] += 1
                        ok_ratios[solver].append(t / t_fast)
                    if res.status in SOLUTION_PRESENT:
                        errs[solver] = max(errs[solver], abs(res.value - fast.value))
            row = {
                "variant": variant,
                "S": S,
                "A": n_actions,
                "instances": repeats,
                "fast_s": float(np.median(times["fast"])),
                "fast_sweeps": int(np.median(sweeps)),
            }
            for solver in solvers:
                if solver in cut:
                    row[f"{solver}_skipped"] = (
                        f"a solve ran over the {max_conic_seconds:g} s cap at S = {cut[solver]}"
                    )
                    if cut[solver] == S:  # the cut solve alone bounds the ratio from below
                        row[f"{solver}_ratio_above"] = max_conic_seconds / row["fast_s"]
                    continue
                med = float(np.median(times[solver]))
                row[f"{solver}_skipped"] = None
                row[f"{solver}_s"] = med
                row[f"{solver}_ratio"] = med / row["fast_s"]
                row[f"{solver}_optimal"] = optimal[solver]
                row[f"{solver}_err"] = errs[solver]
                row[f"{solver}_ok_ratio"] = (
                    float(np.median(ok_ratios[solver])) if ok_ratios[solver] else None
                )
            ok = [row[f"{s}_ok_ratio"] for s in solvers if row.get(f"{s}_ok_ratio") is not None]
            row["best_ratio"] = min(ok) if ok else None
            rows.append(row)
            if progress:
                best = "none optimal" if not ok else f"{row['best_ratio']:.0f}x"
                progress(f"{variant} S={S}: EVI {row['fast_s']:.2e}s, best conic ratio {best}")
    return rows


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (variant, S): EVI's median and sweeps, then per solver its median, the
    ratio, optimal instances and the largest value difference."""
    head = f"{'variant':<15}{'S':>5}{'EVI s':>10}{'sweeps':>7}"
    for s in solvers:
        head += f"{s + ' s':>12}{'ratio':>8}{'opt':>5}{'max err':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = f"{r['variant']:<15}{r['S']:>5}{r['fast_s']:>10.2e}{r['fast_sweeps']:>7}"
        for s in solvers:
            if r.get(f"{s}_skipped"):
                above = r.get(f"{s}_ratio_above")
                text = f"over cap, ratio > {above:.0f}x" if above else "skipped (over cap below)"
                line += f"{text:>35}"
                continue
            line += (
                f"{r[f'{s}_s']:>12.2e}{r[f'{s}_ratio']:>7.0f}x"
                f"{r[f'{s}_optimal']:>3}/{r['instances']}{r[f'{s}_err']:>10.1e}"
            )
        lines.append(line)
    return "\n".join(lines)


def header(args: argparse.Namespace) -> str:
    return (
        f"optimistic planning benchmark: empirical models (A={args.n_actions}), radii ~ "
        f"1/sqrt(n), {args.repeats} instances per size, median wall seconds (EVI: median of "
        f"{FAST_RUNS} runs per instance); EVI = extended value iteration + exact finish; "
        "ratio = conic median / EVI median (same run)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_sizes(parser, [10, 50, 200], "numbers of states")
    add_actions(parser, 4)
    add_count(parser, "--repeats", 3, "random instances per size (medians)")
    add_solvers(parser)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        default=list(VARIANTS),
        help="confidence set (l1, kl) x criterion",
    )
    add_conic_cap(
        parser,
        60.0,
        "each conic solve is killed after this long; that solver is skipped at larger sizes",
    )
