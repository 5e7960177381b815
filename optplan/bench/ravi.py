"""``optplan bench ravi``: RAVI-UCB's clipped optimistic fixed point
(:class:`~optplan.problems.ClippedOptimisticPlanning`), the exact fast path (clipped-set rounds
of Howard policy iteration) and RAVI's own frozen-data iteration vs the clipped-set LPs on each
conic solver.

Random instances as RAVI-UCB meets them (:func:`~optplan.bench.cases.random_clipped_optimistic`:
counts from ``N = 1``, bonus ``~ 1/sqrt(N)``, some states clipped at ``H``). Every ratio is
from timings of the same run, instance by instance; medians. Each conic solve runs in a forked
child killed at ``max_conic_seconds``; a solver cut off at one size is not run at larger ones.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import check_int, check_real
from ..problems import SOLVERS, ClippedOptimisticPlanning
from ..result import OPTIMAL, SOLUTION_PRESENT
from ._common import (
    check_seconds,
    check_sizes,
    check_solvers,
    conic_capped,
    nonneg_seconds,
    positive_int,
    solver_name,
    timed,
)
from .cases import random_clipped_optimistic

__all__ = ["STEMS", "bench_ravi", "format_table", "header", "add_arguments"]

STEMS = frozenset({ClippedOptimisticPlanning.stem})


def bench_ravi(
    sizes: Sequence[int] = (10, 50, 200),
    n_actions: int = 4,
    repeats: int = 3,
    discount: float = 0.95,
    eta: float = 10.0,
    solvers: Sequence[str] = SOLVERS,
    max_conic_seconds: float = 60.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Median wall time of the exact fast path, of the RAVI iteration (``eta``, to ``tol =
    1e-8``) and of each conic solver, per size ``S``.

    Row keys: ``S``, ``A``, ``instances``, ``fast_s``, ``rounds`` and ``clipped`` (medians of
    clipped-set rounds and clipped states), ``ravi_s``, ``ravi_steps`` (median), ``ravi_err``
    (max ``|V_ravi - V|``); per solver ``<SOLVER>_s``, ``_ratio`` (conic / fast), ``_optimal``,
    ``_err`` (max ``|V_conic - V|``), ``_skipped``.
    """
    sizes = check_sizes(sizes)
    n_actions = check_int("n_actions", n_actions)
    repeats = check_int("repeats", repeats)
    discount = check_real("discount", discount, 0.0, 1.0, low_open=True, high_open=True)
    eta = check_real("eta", eta, 0.0, None, low_open=True)
    solvers = check_solvers(solvers)
    max_conic_seconds = check_seconds("max_conic_seconds", max_conic_seconds)
    seed = check_int("seed", seed, 0)
    small = random_clipped_optimistic(np.random.default_rng(12345), 3, n_actions, discount)
    small.solve(method="fast")  # warm-up, untimed
    for solver in solvers:
        small.solve(method="conic", solver=solver)
    cut: dict[str, int] = {}
    rows = []
    for S in sizes:
        rng = np.random.default_rng([seed, S])
        times = {"fast": [], "ravi": []} | {s: [] for s in solvers}
        rounds, clipped, steps = [], [], []
        ravi_err, optimal, errs = 0.0, dict.fromkeys(solvers, 0), dict.fromkeys(solvers, 0.0)
        for _ in range(repeats):
            problem = random_clipped_optimistic(rng, S, n_actions, discount)
            fast, t = timed(lambda p=problem: p.solve(method="fast"))
            if fast.status != OPTIMAL:
                raise RuntimeError(f"fast path: {fast.status} on a bench instance: {fast.message}")
            times["fast"].append(t)
            rounds.append(fast.info["rounds"])
            clipped.append(int(fast.info["clipped"].sum()))
            ravi, t = timed(lambda p=problem: p.solve(algorithm="ravi", eta=eta, tol=1e-8))
            times["ravi"].append(t)
            steps.append(ravi.iterations)
            ravi_err = max(ravi_err, float(np.abs(ravi.values - fast.values).max()))
            for solver in solvers:
                if solver in cut:
                    continue
                res, t = conic_capped(problem, small, solver, max_conic_seconds)
                if res is None:
                    cut[solver] = S
                    continue
                times[solver].append(t)
                optimal[solver] += res.status == OPTIMAL
                if res.status in SOLUTION_PRESENT:
                    err = float(np.abs(res.values - fast.values).max())
                    errs[solver] = max(errs[solver], err)
        row = {
            "S": S,
            "A": n_actions,
            "instances": repeats,
            "fast_s": float(np.median(times["fast"])),
            "rounds": int(np.median(rounds)),
            "clipped": int(np.median(clipped)),
            "ravi_s": float(np.median(times["ravi"])),
            "ravi_steps": int(np.median(steps)),
            "ravi_err": ravi_err,
        }
        for solver in solvers:
            if solver in cut:
                row[f"{solver}_skipped"] = (
                    f"a solve ran over the {max_conic_seconds:g} s cap at S = {cut[solver]}"
                )
                continue
            med = float(np.median(times[solver]))
            row[f"{solver}_skipped"] = None
            row[f"{solver}_s"] = med
            row[f"{solver}_ratio"] = med / row["fast_s"]
            row[f"{solver}_optimal"] = optimal[solver]
            row[f"{solver}_err"] = errs[solver]
        rows.append(row)
        if progress:
            progress(f"S={S}: fast {row['fast_s']:.2e}s, RAVI {row['ravi_s']:.2e}s")
    return rows


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per S: the exact path's median, rounds and clipped states, RAVI's median,
    steps and largest error, then per solver its median, ratio, optimal count and error."""
    head = (
        f"{'S':>5}{'fast s':>10}{'rounds':>7}{'clip':>6}{'RAVI s':>10}{'steps':>7}{'RAVI err':>10}"
    )
    for s in solvers:
        head += f"{s + ' s':>12}{'ratio':>8}{'opt':>5}{'max err':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = (
            f"{r['S']:>5}{r['fast_s']:>10.2e}{r['rounds']:>7}{r['clipped']:>6}"
            f"{r['ravi_s']:>10.2e}{r['ravi_steps']:>7}{r['ravi_err']:>10.1e}"
        )
        for s in solvers:
            if r.get(f"{s}_skipped"):
                line += f"{'over cap':>35}"
                continue
            line += (
                f"{r[f'{s}_s']:>12.2e}{r[f'{s}_ratio']:>7.0f}x"
                f"{r[f'{s}_optimal']:>3}/{r['instances']}{r[f'{s}_err']:>10.1e}"
            )
        lines.append(line)
    return "\n".join(lines)


def header(args: argparse.Namespace) -> str:
    return (
        f"RAVI-UCB clipped optimistic fixed point: empirical models (A={args.n_actions}, "
        f"gamma={args.discount}), bonus ~ 1/sqrt(N), {args.repeats} instances per size, median "
        "wall seconds; fast = clipped-set rounds of policy iteration (exact); RAVI = the "
        f"frozen-data regularized iteration (eta={args.eta}, tol 1e-8); ratio = conic / fast"
    )


def _discount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a discount in (0, 1), got {text!r}")
    return value


def _eta(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a learning rate > 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[10, 50, 200])
    parser.add_argument(
        "--actions", dest="n_actions", metavar="ACTIONS", type=positive_int, default=4
    )
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--discount", type=_discount, default=0.95)
    parser.add_argument("--eta", type=_eta, default=10.0, help="RAVI's learning rate")
    parser.add_argument("--solvers", type=solver_name, nargs="+", default=list(SOLVERS))
    parser.add_argument(
        "--max-conic-seconds",
        dest="max_conic_seconds",
        type=nonneg_seconds,
        default=60.0,
        help="each conic solve is killed after this long; that solver is skipped at larger sizes",
    )
