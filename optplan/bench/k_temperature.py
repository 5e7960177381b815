"""``optplan bench k-learning``: K-learning's optimal temperature, fast vs each conic solver.

Instances are DeepSea-shaped posteriors (k-learning §4, :func:`optplan.bench.cases.
deepsea_instance`): ``L`` layers of ``L`` columns, two actions, posterior-mean transitions from
random visit counts on DeepSea's true moves plus a Dirichlet(1/S) prior, random mean rewards,
seeded. Times are medians over the instances of one run; ratios compare solvers measured in
that same run. The fast path runs on its default kernel (compiled with numba when installed,
``pip install "optplan[jit]"``) and, for comparison, on the numpy reference kernel; ratios are
against the default kernel.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import check_int
from ..mdp import check_model_size
from ..problems import SOLVERS, KLearningTemperature
from ._common import check_seconds, check_sizes, check_solvers, timed
from ._options import add_conic_cap, add_count, add_sizes, add_solvers
from ._rows import median, solvers_table, table_lines
from .cases import deepsea_instance

__all__ = [
    "STEMS",
    "HELP",
    "bench_k_temperature",
    "format_k_table",
    "table",
    "total",
    "header",
    "add_arguments",
]

HELP = "K-learning optimal temperature (problem 11): fast vs conic solvers"

#: The problem stems this suite times (every instance is a :func:`deepsea_instance`).
STEMS = frozenset({KLearningTemperature.stem})


def bench_k_temperature(
    sizes: Sequence[int] = (5, 10, 20, 30, 50),
    instances: int = 5,
    solvers: Sequence[str] = SOLVERS,
    seed: int = 0,
    max_conic_seconds: float = 120.0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per depth: fast median time, each solver's median time, status counts, and the
    largest relative differences of ``tau*`` and objective from the fast path. Every argument
    is checked before any timing."""
    sizes = check_sizes(sizes)
    for L in sizes:
        check_model_size(L, 2, L, subject=f"depth L={L}")
    instances = check_int("instances", instances)
    solvers = check_solvers(solvers)
    seed = check_int("seed", seed, 0)
    max_conic_seconds = check_seconds("max_conic_seconds", max_conic_seconds)
    from ..fast import _k_kernels  # numba, when installed: imported by this suite only

    rng = np.random.default_rng(seed)
    rows = []
    skip: set[str] = set()
    if _k_kernels.AVAILABLE:  # compile (or load the cached kernel) outside the timings
        deepsea_instance(2, np.random.default_rng(0)).solve("fast", kernel="numba")
    for L in sizes:
        problems = [deepsea_instance(L, rng) for _ in range(instances)]
        fast_times, fast, numpy_times, kernel_dtau = [], [], [], []
        for p in problems:
            res, t = timed(lambda p=p: p.solve("fast"))
            fast_times.append(t)
            fast.append(res)
            ref, t = timed(lambda p=p: p.solve("fast", kernel="numpy"))
            numpy_times.append(t)
            kernel_dtau.append(abs(ref.x - res.x) / res.x)
        row = {
            "L": L,
            "pairs": L * L * 2,
            "kernel": fast[0].info["kernel"],
            "fast_median_s": float(np.median(fast_times)),
            "fast_numpy_median_s": float(np.median(numpy_times)),
            "kernel_max_rel_tau_diff": float(max(kernel_dtau)),
            "fast_max_gap": float(max(abs(r.info["gap"]) / (1 + abs(r.value)) for r in fast)),
            "tau_median": float(np.median([r.x for r in fast])),
            "solvers": {},
        }
        for solver in solvers:
            if solver in skip:
                row["solvers"][solver] = {"skipped": True}
                continue
            entry, over = _solver_entry(problems, fast, solver, max_conic_seconds)
            row["solvers"][solver] = entry | {"ratio": _ratio(entry["median_s"], row)}
            if over:
                skip.add(solver)
        if progress:
            progress(
                f"L={L}: fast {row['fast_median_s'] * 1e3:.2f} ms ({row['kernel']}), "
                f"numpy {row['fast_numpy_median_s'] * 1e3:.2f} ms"
            )
        rows.append(row)
    return rows


def _ratio(med: float | None, row: dict) -> float | None:
    return None if med is None else med / row["fast_median_s"]


def _solver_entry(problems, fast, solver: str, max_conic_seconds: float) -> tuple[dict, bool]:
    """One solver's entry of a depth's row (its ``ratio`` still ``None``), and whether it spent more
    than ``max_conic_seconds`` (then it stopped there, and is skipped at larger depths)."""
    times, statuses, dtau, dval = [], {}, [], []
    spent = 0.0
    for p, f in zip(problems, fast, strict=True):
        res, dt = timed(lambda p=p: p.solve("conic", solver=solver))
        spent += dt
        statuses[res.status] = statuses.get(res.status, 0) + 1
        if res.status == "optimal":
            times.append(dt)
            dtau.append(abs(res.x - f.x) / f.x)
            dval.append(abs(res.value - f.value) / (1 + abs(f.value)))
        if spent > max_conic_seconds:
            break
    entry = {
        "median_s": median(times),
        "ratio": None,
        "statuses": statuses,
        "max_rel_tau_diff": max(dtau) if dtau else None,
        "max_rel_value_diff": max(dval) if dval else None,
    }
    return entry, spent > max_conic_seconds


def format_k_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per depth: the fast medians on both kernels, the duality gap and ``tau*``,
    then per solver its median, the ratio to the fast median, ``dtau`` and optimal counts."""
    kernel = rows[0]["kernel"] if rows else "?"
    lines = table_lines(
        f"{'L':>3} {'pairs':>6} {kernel + ' ms':>9} {'numpy ms':>9} {'gap':>8} {'tau*':>8}",
        solvers,
        lambda s: f" | {s[:8]:>8} ms {'x fast':>7} {'dtau':>8} {'ok':>5}",
    )
    for r in rows:
        line = (
            f"{r['L']:>3} {r['pairs']:>6} {r['fast_median_s'] * 1e3:>9.3f} "
            f"{r['fast_numpy_median_s'] * 1e3:>9.3f} "
            f"{r['fast_max_gap']:>8.1e} {r['tau_median']:>8.3g}"
        )
        for s in solvers:
            d = r["solvers"][s]
            if d.get("skipped"):
                line += f" | {'skipped (time cap)':>35}"
                continue
            ok = d["statuses"].get("optimal", 0)
            n = sum(d["statuses"].values())
            ms = "-" if d["median_s"] is None else f"{d['median_s'] * 1e3:.1f}"
            ratio = "-" if d["ratio"] is None else f"{d['ratio']:.0f}"
            dt = "-" if d["max_rel_tau_diff"] is None else f"{d['max_rel_tau_diff']:.1e}"
            line += f" | {ms:>11} {ratio:>7} {dt:>8} {ok:>2}/{n:<2}"
        lines.append(line)
    return "\n".join(lines)


#: The text table of the rows for the command line.
table = solvers_table(format_k_table)


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_k_temperature` reports: one per depth."""
    return len(args.sizes)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    return (
        "K-learning temperature benchmark: DeepSea-shaped posteriors (L x L states, 2 "
        f"actions), {args.instances} instances per depth, median wall milliseconds of the "
        "fast tau* on its default kernel and on the numpy reference; x fast = conic median / "
        "default-kernel median (same run); dtau = max |tau_conic - tau_fast| / tau_fast"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_k_temperature`."""
    add_sizes(parser, [5, 10, 20, 30, 50], "DeepSea depths L")
    add_count(parser, "--instances", 5, "random instances per depth")
    add_solvers(parser)
    add_conic_cap(
        parser,
        120.0,
        "stop timing a conic solver once it has spent T s on one depth (and skip it on larger "
        "depths)",
        metavar="T",
    )
