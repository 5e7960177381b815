"""Fast-vs-conic benchmarks, on the same random cases the tests use (``optplan.cases``).

Every ratio printed comes from timings taken in the same run, interleaved instance by
instance, so machine noise hits both paths alike. Medians, not means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from .cases import random_mdp
from .problems import SOLVERS, AverageRewardPlanning, DiscountedPlanning
from .result import SOLUTION_PRESENT

PLANNING_PROBLEMS = {
    "discounted": lambda mdp: DiscountedPlanning(mdp.with_discount(0.95)),
    "average": lambda mdp: AverageRewardPlanning(mdp),
}


def _timed(fn: Callable):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def bench_planning(
    sizes: Sequence[int] = (10, 100, 500),
    n_actions: int = 4,
    repeats: int = 5,
    solvers: Sequence[str] = SOLVERS,
    criteria: Sequence[str] = ("discounted", "average"),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Median wall time of the fast path and of each conic solver on random dense MDPs.

    Returns one row per (criterion, S) with ``fast_s``, ``<SOLVER>_s``, ``<SOLVER>_ratio``
    (conic time / fast time), ``<SOLVER>_fail`` (instances without a solution, counted, not
    dropped), ``<SOLVER>_err`` (max |value_fast - value_conic| over solved instances) and
    ``best_ratio`` (fastest conic solver's median / fast median).
    """
    rows = []
    for criterion in criteria:
        make = PLANNING_PROBLEMS[criterion]
        for S in sizes:
            rng = np.random.default_rng([seed, S])
            times = {"fast": []} | {s: [] for s in solvers}
            fails = dict.fromkeys(solvers, 0)
            errs = dict.fromkeys(solvers, 0.0)
            for _ in range(repeats):
                problem = make(random_mdp(rng, S, n_actions))
                fast, t = _timed(lambda p=problem: p.solve(method="fast"))
                times["fast"].append(t)
                for solver in solvers:
                    res, t = _timed(lambda p=problem, s=solver: p.solve(method="conic", solver=s))
                    times[solver].append(t)
                    if res.status in SOLUTION_PRESENT:
                        errs[solver] = max(errs[solver], abs(res.value - fast.value))
                    else:
                        fails[solver] += 1
            row = {
                "criterion": criterion,
                "S": S,
                "A": n_actions,
                "instances": repeats,
                "fast_s": float(np.median(times["fast"])),
            }
            for solver in solvers:
                med = float(np.median(times[solver]))
                row[f"{solver}_s"] = med
                row[f"{solver}_ratio"] = med / row["fast_s"]
                row[f"{solver}_fail"] = fails[solver]
                row[f"{solver}_err"] = errs[solver]
            row["best_ratio"] = min(row[f"{s}_ratio"] for s in solvers)
            rows.append(row)
            if progress:
                progress(
                    f"{criterion} S={S}: fast {row['fast_s']:.2e}s, "
                    f"best ratio {row['best_ratio']:.0f}x"
                )
    return rows


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    head = f"{'criterion':<11}{'S':>5}{'fast s':>10}"
    for s in solvers:
        head += f"{s + ' s':>12}{'ratio':>8}{'fail':>5}{'max err':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = f"{r['criterion']:<11}{r['S']:>5}{r['fast_s']:>10.2e}"
        for s in solvers:
            line += (
                f"{r[f'{s}_s']:>12.2e}{r[f'{s}_ratio']:>7.0f}x{r[f'{s}_fail']:>5}"
                f"{r[f'{s}_err']:>10.1e}"
            )
        lines.append(line)
    return "\n".join(lines)
