"""``optplan bench planning``: known-model planning, the fast path vs each conic solver.

Random dense MDPs (:func:`optplan.bench.cases.random_mdp`), the same instances for every
criterion of one size. Every ratio printed comes from timings taken in the same run,
interleaved instance by instance, so machine noise hits both paths alike. Medians, not means.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import check_int
from ..mdp import FiniteHorizonMDP, check_model_size
from ..problems import (
    SOLVERS,
    AverageRewardPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    HittingTimes,
)
from ..result import SOLUTION_PRESENT
from ._common import (
    check_choices,
    check_sizes,
    check_solvers,
    positive_int,
    solver_name,
    timed,
)
from .cases import random_mdp

__all__ = [
    "PLANNING_PROBLEMS",
    "PLANNING_HORIZON",
    "STEMS",
    "bench_planning",
    "format_table",
    "header",
    "add_arguments",
]

#: Layers of the finite-horizon rows: the random stationary MDP repeated this many times.
PLANNING_HORIZON = 10
#: ``criterion -> (problem class, the model it is given, from a random stationary MDP)``.
PLANNING_PROBLEMS = {
    "discounted": (DiscountedPlanning, lambda mdp: mdp.with_discount(0.95)),
    "average": (AverageRewardPlanning, lambda mdp: mdp),
    "finite_horizon": (
        FiniteHorizonPlanning,
        lambda mdp: FiniteHorizonMDP.from_stationary(mdp, PLANNING_HORIZON),
    ),
    # value = the diameter; S targets' shortest paths (on request: S^2 LP variables)
    "hitting_time": (HittingTimes, lambda mdp: mdp),
}
#: The problem stems this suite times.
STEMS = frozenset(cls.stem for cls, _ in PLANNING_PROBLEMS.values())
#: The criteria timed when none are named (the finite-horizon rows are on request).
DEFAULT_CRITERIA = ("discounted", "average")


def bench_planning(
    sizes: Sequence[int] = (10, 100, 500),
    n_actions: int = 4,
    repeats: int = 5,
    solvers: Sequence[str] = SOLVERS,
    criteria: Sequence[str] = DEFAULT_CRITERIA,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Median wall time of the fast path and of each conic solver on random dense MDPs.

    Returns one row per (criterion, S) with ``fast_s``, ``<SOLVER>_s``, ``<SOLVER>_ratio``
    (conic time / fast time), ``<SOLVER>_fail`` (instances without a solution, counted, not
    dropped), ``<SOLVER>_err`` (max |value_fast - value_conic| over solved instances) and
    ``best_ratio`` (fastest conic solver's median / fast median).

    Every argument is checked before any timing (sizes and counts positive integers, a model
    within :data:`optplan.mdp.MAX_MODEL_BYTES`).
    """
    sizes = check_sizes(sizes)
    n_actions = check_int("n_actions", n_actions)
    repeats = check_int("repeats", repeats)
    solvers = check_solvers(solvers)
    criteria = check_choices("criteria", criteria, tuple(PLANNING_PROBLEMS))
    seed = check_int("seed", seed, 0)
    layers = PLANNING_HORIZON if "finite_horizon" in criteria else 1
    check_model_size(max(sizes), n_actions, layers)
    rows = []
    for criterion in criteria:
        cls, model = PLANNING_PROBLEMS[criterion]
        for S in sizes:
            rng = np.random.default_rng([seed, S])
            times = {"fast": []} | {s: [] for s in solvers}
            fails = dict.fromkeys(solvers, 0)
            errs = dict.fromkeys(solvers, 0.0)
            for _ in range(repeats):
                problem = cls(model(random_mdp(rng, S, n_actions)))
                fast, t = timed(lambda p=problem: p.solve(method="fast"))
                times["fast"].append(t)
                for solver in solvers:
                    res, t = timed(lambda p=problem, s=solver: p.solve(method="conic", solver=s))
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
    """One line per (criterion, S): the fast median, then per solver its median, the ratio to
    the fast median, failures and the max value difference."""
    width = max([11] + [len(r["criterion"]) + 1 for r in rows])
    head = f"{'criterion':<{width}}{'S':>5}{'fast s':>10}"
    for s in solvers:
        head += f"{s + ' s':>12}{'ratio':>8}{'fail':>5}{'max err':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = f"{r['criterion']:<{width}}{r['S']:>5}{r['fast_s']:>10.2e}"
        for s in solvers:
            line += (
                f"{r[f'{s}_s']:>12.2e}{r[f'{s}_ratio']:>7.0f}x{r[f'{s}_fail']:>5}"
                f"{r[f'{s}_err']:>10.1e}"
            )
        lines.append(line)
    return "\n".join(lines)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    horizon = (
        f", finite horizon {PLANNING_HORIZON} layers of the same MDP"
        if "finite_horizon" in args.criteria
        else ""
    )
    return (
        f"planning benchmark: random dense MDPs, A={args.n_actions}{horizon}, {args.repeats} "
        "instances per size, median wall seconds; ratio = conic median / fast median (same run)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_planning`."""
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[10, 100, 500])
    parser.add_argument(
        "--actions", dest="n_actions", metavar="ACTIONS", type=positive_int, default=4
    )
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--solvers", type=solver_name, nargs="+", default=list(SOLVERS))
    parser.add_argument(
        "--criteria",
        nargs="+",
        choices=tuple(PLANNING_PROBLEMS),
        default=list(DEFAULT_CRITERIA),
    )
