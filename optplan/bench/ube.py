"""``optplan bench ube``: the uncertainty Bellman equation, fast vs each conic solver.

Garnet-style random instances (:func:`optplan.bench.cases.random_ube`: a few uniformly drawn
next states per pair, a random stochastic policy, random local uncertainty) for each number
of state-action pairs ``|S||A|``; each instance is solved by the fast path on each of its
algorithms (``"direct"``, ``"iteration"``) and by every conic solver (the sparse LP),
interleaved instance by instance, so every ratio printed compares timings of the same run.
Medians, not means. One row per (problem, fast algorithm, size): the conic solves are done
once per instance and shared by the rows of the fast algorithms. A moment-matching row
(:func:`optplan.bench.cases.random_moment_matching`, which delegates to the UBE paths) times
its fast path against the ``mm_solvers`` at one size.

A conic solver's time at one size is capped at ``max_conic_seconds`` (cumulative, as in
``bench indices`` and ``bench k-learning``): past it, the solver is not run on that size's
remaining instances nor on larger sizes. Unlike those suites, the cap also interrupts a solve
in progress: with a finite cap each conic solve runs in a forked child process (the wall time
is measured inside it, around ``problem.solve``), killed when the cap is reached; a random
sparse LP with ``10^4`` pairs fills in the solvers' sparse factorizations, so one solve can
run far past any cap.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import astuple

import numpy as np

from .._checks import OptplanError, check_int, check_real
from ..mdp import check_model_size
from ..problems import MomentMatchingVariance, UncertaintyBellman
from ..problems.base import SOLVER_TOL
from ..result import OPTIMAL, SOLUTION_PRESENT
from ._common import (
    Runs,
    check_seconds,
    check_solvers,
    conic_capped,
    conic_quiet,
    forkable,
    timed,
)
from ._options import add_actions, add_conic_cap, add_count, add_fraction, add_sizes, add_solvers
from ._rows import solvers_table, table_lines
from .cases import random_moment_matching, random_ube

__all__ = [
    "RUNS",
    "total",
    "UBE_PROBLEMS",
    "FAST_ALGORITHMS",
    "STEMS",
    "bench_ube",
    "format_ube_table",
    "HELP",
    "table",
    "header",
    "add_arguments",
    "meta",
]

HELP = "uncertainty Bellman equation and moment matching: fast vs LP solvers"
#: ``stem -> random instance maker (rng, S, A, discount, next_states)`` of this suite.
UBE_PROBLEMS = {
    UncertaintyBellman.stem: random_ube,
    MomentMatchingVariance.stem: random_moment_matching,
}
#: The fast path's algorithms, each with its own rows.
FAST_ALGORITHMS = ("direct", "iteration")
#: The problem stems this suite times.
STEMS = frozenset(UBE_PROBLEMS)
#: The suite's default runs: sizes (state-action pairs), actions, instances per size, solvers,
#: seed.
RUNS = Runs(sizes=(100, 1000, 10000), n_actions=5, repeats=5)


def _agreement(problem, fast, conic, solver: str) -> tuple[float, float, bool]:
    """``max |u_f - u_c| / max |u_f|``, the same for ``y``, and whether either difference is
    beyond the solver's cross-check tolerance ``atol + rtol * scale``
    (:data:`optplan.problems.base.SOLVER_TOL`)."""
    rtol, atol = SOLVER_TOL[solver]
    diffs = problem.compare(conic, fast)  # (abs_err, scale of the fast answer)
    out = []
    beyond = False
    for key in ("x", "multiplier"):
        err, scale = diffs[key]
        out.append(err / scale if scale > 0 else err)
        beyond |= err > atol + rtol * scale
    return out[0], out[1], beyond


def bench_ube(
    runs: Runs = RUNS,
    next_states: int = 3,
    discount: float = 0.9,
    max_conic_seconds: float = 120.0,
    mm_pairs: int = 1000,
    mm_solvers: Sequence[str] = ("CLARABEL",),
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Median wall time of the fast UBE paths and of each conic solver on random Garnet
    instances, and one moment-matching size.

    ``runs.sizes`` are numbers of state-action pairs ``|S||A|`` (multiples of
    ``runs.n_actions``). For each size, ``runs.repeats`` random
    :func:`~optplan.bench.cases.random_ube` instances (``next_states`` next states per pair,
    discount ``discount``), each solved by every fast algorithm and every solver of
    ``runs.solvers`` in turn. Then, unless ``mm_pairs`` is 0, as many
    :func:`~optplan.bench.cases.random_moment_matching` instances with ``mm_pairs`` pairs,
    solved by the fast ``"direct"`` algorithm and each of ``mm_solvers`` (those in
    ``runs.solvers``).

    Returns one row per (problem, fast algorithm, size): ``problem`` (stem), ``fast``
    (algorithm), ``pairs``, ``S``, ``A``, ``instances``, ``fast_s`` (median), ``fast_fail``
    (fast solves without a solution), ``fast_iterations`` (median), and per solver of
    ``solvers``:

    - ``<SOLVER>_s`` (median over the instances it finished, whatever their status; ``None``
      if none), ``_timed`` (that count), ``_ratio`` (``_s / fast_s``);
    - ``_statuses`` (count per status), ``_ok`` (``optimal``), ``_fail`` (no solution);
      ``_ok_s``: median over the instances solved to ``optimal`` (``None`` if none);
    - ``_u_rel``, ``_y_rel``: max over the instances where both paths have a solution of
      ``max |u_fast - u_conic| / max |u_fast|`` and the same for the duals ``y``;
      ``_beyond_tol``: how many of those instances differ beyond the solver's cross-check
      tolerance (``atol + rtol * scale``, :data:`optplan.problems.base.SOLVER_TOL`);
    - ``_skipped``: ``None`` or why the solver was not run on (all) the instances (the time
      cap, or not one of ``mm_solvers`` in a moment-matching row);

    and ``best_ratio``: the fastest successful solver, ``min _ok_s / fast_s`` over the
    solvers with an ``optimal`` solve (``None`` if none; ``bench k-learning``'s medians);
    ``best_ratio_any``: ``min _ratio`` over the solvers that finished a solve, whatever its
    status.

    Every argument is checked before any timing.
    """
    sizes, n_actions, instances, solvers, seed = astuple(runs.checked())
    next_states = check_int("next_states", next_states)
    discount = check_real("discount", discount, 0.0, 1.0, high_open=True)
    max_conic_seconds = check_seconds("max_conic_seconds", max_conic_seconds)
    mm_pairs = check_int("mm_pairs", mm_pairs, 0)
    mm_solvers = [s for s in check_solvers(mm_solvers) if s in solvers]
    plan = _plan(sizes, n_actions, solvers, mm_pairs, mm_solvers)
    small = _warm_up(discount, next_states, solvers)
    rows = []
    tripped: dict[tuple[str, str], int] = {}  # (stem, solver) -> the size it went over the cap
    for stem, algorithms, run_solvers, pairs in plan:
        S = pairs // n_actions
        # one problem's instances of one size do not depend on the other sizes asked for
        rng = np.random.default_rng([seed, list(UBE_PROBLEMS).index(stem), pairs])
        size = _SizeTimes(algorithms, run_solvers, max_conic_seconds)
        for _ in range(instances):
            problem = UBE_PROBLEMS[stem](rng, S, n_actions, discount, next_states)
            size.instance(problem, small[stem], tripped, stem, pairs)
            del problem
        for a in algorithms:
            row = {"problem": stem, "fast": a, "pairs": pairs, "S": S, "A": n_actions}
            row["instances"] = instances
            size.fill(row, solvers, tripped.get)
            rows.append(row)
            if progress:
                _progress(progress, row, solvers)
    return rows


def _warm_up(discount: float, next_states: int, solvers) -> dict:
    """A small instance per stem, solved by every path (imports, the solvers' first-call
    overheads), untimed; forked children inherit it."""
    small = {}
    for stem, make in UBE_PROBLEMS.items():
        small[stem] = make(np.random.default_rng(12345), 4, 2, discount, next_states)
        for algorithm in FAST_ALGORITHMS:
            small[stem].solve(method="fast", algorithm=algorithm)
        for solver in solvers:
            conic_quiet(small[stem], solver)
    return small


def _plan(sizes, n_actions, solvers, mm_pairs, mm_solvers) -> list[tuple]:
    """``(stem, fast algorithms, solvers, pairs)`` per row group, each size checked."""
    plan = [(UncertaintyBellman.stem, FAST_ALGORITHMS, solvers, s) for s in sizes]
    if mm_pairs:
        plan.append((MomentMatchingVariance.stem, ("direct",), mm_solvers, mm_pairs))
    for stem, _, _, n in plan:
        if n % n_actions:
            flag = "mm_pairs" if stem == MomentMatchingVariance.stem else "sizes"
            raise OptplanError(
                f"{flag} counts state-action pairs |S||A| and must be a multiple of the number "
                f"of actions ({n_actions}), got {n}"
            )
        S = n // n_actions
        check_model_size(S, n_actions, subject=f"{n} pairs (n_states={S}, n_actions={n_actions})")
    return plan


class _SizeTimes:
    """The timings and agreements of one (problem, size): per fast algorithm and per solver
    run there (a solver's conic solves are shared by the rows of every fast algorithm)."""

    def __init__(self, algorithms: Sequence[str], solvers: Sequence[str], cap: float) -> None:
        self.algorithms, self.solvers, self.cap = algorithms, solvers, cap
        self.fast_times = {a: [] for a in algorithms}
        self.fast_iters = {a: [] for a in algorithms}
        self.fast_fail = dict.fromkeys(algorithms, 0)
        self.times = {s: [] for s in solvers}
        self.statuses = {s: [] for s in solvers}
        self.spent = dict.fromkeys(solvers, 0.0)
        self.killed = dict.fromkeys(solvers, False)
        self.u_rel = {(a, s): None for a in algorithms for s in solvers}
        self.y_rel = dict(self.u_rel)
        self.beyond = dict.fromkeys(self.u_rel, 0)

    def instance(self, problem, small, tripped: dict, stem: str, pairs: int) -> None:
        """Solve ``problem`` by every fast algorithm, then by every solver not yet over the
        cap (``tripped``: ``(stem, solver) -> pairs`` where it went over)."""
        fast = {}
        for a in self.algorithms:
            # untimed first: after a fork the first write to each shared page faults here
            small.solve(method="fast", algorithm=a)
            res, t = timed(lambda p=problem, a=a: p.solve(method="fast", algorithm=a))
            fast[a] = res
            self.fast_times[a].append(t)
            self.fast_iters[a].append(res.iterations or 0)
            self.fast_fail[a] += not res.success
        for solver in self.solvers:
            if (stem, solver) in tripped:
                continue
            left = self.cap - self.spent[solver]
            res, t = conic_capped(problem, small, solver, left)
            self.spent[solver] += t
            if res is None:
                self.killed[solver] = True
                tripped[(stem, solver)] = pairs
                continue
            self.times[solver].append(t)
            self.statuses[solver].append(res.status)
            if res.status in SOLUTION_PRESENT:
                self._agree(problem, fast, res, solver)
            if self.spent[solver] > self.cap:
                tripped[(stem, solver)] = pairs

    def _agree(self, problem, fast: dict, res, solver: str) -> None:
        for a in self.algorithms:
            if not fast[a].success:
                continue
            du, dy, off = _agreement(problem, fast[a], res, solver)
            self.u_rel[(a, solver)] = max(self.u_rel[(a, solver)] or 0.0, du)
            self.y_rel[(a, solver)] = max(self.y_rel[(a, solver)] or 0.0, dy)
            self.beyond[(a, solver)] += off

    def fill(self, row: dict, solvers: Sequence[str], tripped_at: Callable) -> None:
        """The rest of the row of fast algorithm ``row["fast"]``, with an entry per solver of
        ``solvers`` (those not run here say so)."""
        a, pairs = row["fast"], row["pairs"]
        row["fast_s"] = float(np.median(self.fast_times[a]))
        row["fast_fail"] = self.fast_fail[a]
        row["fast_iterations"] = int(np.median(self.fast_iters[a]))
        for solver in solvers:
            key = (a, solver)
            agreement = (self.u_rel.get(key), self.y_rel.get(key), self.beyond.get(key, 0))
            times = self.times.get(solver, [])
            _solver_entries(row, solver, times, self.statuses.get(solver, []), agreement)
            at = tripped_at((row["problem"], solver))
            if solver not in self.solvers:
                row[f"{solver}_skipped"] = "not run (--mm-solvers)"
            elif at is not None:
                how = "killed mid-solve at" if self.killed[solver] else "skipped after"
                row[f"{solver}_skipped"] = f"{how} {self.cap:g} s" + (
                    f" ({len(times)} of {row['instances']} instances timed)"
                    if at == pairs
                    else f" at pairs={at}"
                )
        ok = [row[f"{s}_ok_s"] for s in solvers if row[f"{s}_ok_s"] is not None]
        some = [row[f"{s}_ratio"] for s in solvers if row[f"{s}_ratio"] is not None]
        row["best_ratio"] = min(ok) / row["fast_s"] if ok else None
        row["best_ratio_any"] = min(some, default=None)


def _solver_entries(row: dict, solver: str, times, statuses, agreement) -> None:
    med = float(np.median(times)) if times else None
    counts = {st: statuses.count(st) for st in sorted(set(statuses))}
    row[f"{solver}_s"] = med
    row[f"{solver}_timed"] = len(times)
    row[f"{solver}_ratio"] = None if med is None else med / row["fast_s"]
    row[f"{solver}_statuses"] = counts
    row[f"{solver}_ok"] = counts.get(OPTIMAL, 0)
    ok = [t for t, st in zip(times, statuses, strict=True) if st == OPTIMAL]
    row[f"{solver}_ok_s"] = float(np.median(ok)) if ok else None
    row[f"{solver}_fail"] = sum(st not in SOLUTION_PRESENT for st in statuses)
    row[f"{solver}_u_rel"], row[f"{solver}_y_rel"], row[f"{solver}_beyond_tol"] = agreement
    row[f"{solver}_skipped"] = None


def _progress(progress: Callable[[str], None], row: dict, solvers: Sequence[str]) -> None:
    head = f"{row['problem']} {row['fast']} pairs={row['pairs']}"
    progress(f"{head} fast: {row['fast_s']:.2e} s, {row['fast_fail']} failed")
    for s in solvers:
        if row[f"{s}_s"] is None:
            progress(f"{head} {s}: {row[f'{s}_skipped']}")
            continue
        skipped = f"; {row[f'{s}_skipped']}" if row[f"{s}_skipped"] else ""
        progress(
            f"{head} {s}: {row[f'{s}_s']:.2e} s ({row[f'{s}_ratio']:.0f}x fast), statuses "
            f"{row[f'{s}_statuses']}, u rel {_g(row[f'{s}_u_rel'])}, y rel "
            f"{_g(row[f'{s}_y_rel'])}{skipped}"
        )


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.1e}"


def _e(x: float | None, width: int, spec: str = ".0e") -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{spec}}"


def format_ube_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (problem, fast algorithm, size): the fast median, then per solver its
    median, the ratio to the fast median, ``optimal``/finished instances and the max relative
    differences of ``u`` and ``y``. A ``*`` marks a median over fewer than the instances (the
    solver went over the time cap); notes under the table name every status other than
    ``optimal``, every disagreement beyond tolerance and every fast failure."""
    width = max([10] + [len(r["problem"]) + 1 for r in rows])
    lines = table_lines(  # a 43-character block per solver
        f"{'problem':<{width}}{'fast':<10}{'pairs':>6}{'S':>6}{'fast s':>10}",
        solvers,
        lambda s: f"{s + ' s':>12}{'ratio':>8}{'ok/n':>7}{'u rel':>8}{'y rel':>8}",
    )
    notes: list[str] = []

    def note(text: str) -> None:
        if text not in notes:
            notes.append(text)

    for r in rows:
        where = f"{r['problem']} pairs={r['pairs']}"
        line = (
            f"{r['problem']:<{width}}{r['fast']:<10}{r['pairs']:>6}{r['S']:>6}{r['fast_s']:>10.2e}"
        )
        if r["fast_fail"]:
            note(f"! fast {r['fast']} at {where}: {r['fast_fail']} instances without a solution")
        for s in solvers:
            skipped = r[f"{s}_skipped"]
            if skipped and "instances timed" in skipped:  # went over the cap at this size
                note(f"* {s} at {where}: {skipped}")
                skipped = skipped.split(" (")[0]
            if r[f"{s}_s"] is None:
                line += f"{skipped:>43}"
                continue
            partial = r[f"{s}_timed"] < r["instances"]
            others = {k: v for k, v in r[f"{s}_statuses"].items() if k != OPTIMAL}
            if others:
                listed = ", ".join(f"{k} {v}" for k, v in others.items())
                note(f"  {s} at {where}: {listed} (of {r[f'{s}_timed']})")
            if r[f"{s}_beyond_tol"]:
                note(
                    f"! {s} at {where} vs fast {r['fast']}: {r[f'{s}_beyond_tol']} instances "
                    "differ beyond the cross-check tolerance"
                )
            ok = f"{r[f'{s}_ok']}/{r[f'{s}_timed']}"
            line += (
                f"{r[f'{s}_s']:>11.2e}{'*' if partial else ' '}{r[f'{s}_ratio']:>7.0f}x"
                f"{ok:>7}{_e(r[f'{s}_u_rel'], 8)}{_e(r[f'{s}_y_rel'], 8)}"
            )
        lines.append(line)
    return "\n".join(lines + notes)


#: The text table of the rows for the command line.
table = solvers_table(format_ube_table)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    mm = (
        f"; moment matching at pairs={args.mm_pairs} (fast direct vs "
        f"{', '.join(s for s in args.mm_solvers if s in args.solvers) or 'no solver'})"
        if args.mm_pairs
        else ""
    )
    return (
        f"uncertainty Bellman benchmark: Garnet instances (A={args.n_actions}, "
        f"{args.next_states} next states per pair, discount {args.discount:g}, random "
        f"stochastic policy and local term){mm}; {args.repeats} instances per size, median "
        "wall seconds.\n"
        "ratio: conic median / fast median of the row's algorithm (same run; the iteration "
        "rows reuse the direct rows' conic solves). ok/n: status optimal / solves finished.\n"
        "u rel, y rel: max |fast - conic| / max |fast| of u and of the duals y, over the "
        "instances with a solution (optimal or optimal_inaccurate).\n"
        f"A solver is stopped once it has spent {args.max_conic_seconds:g} s on one size (a "
        "solve in progress is killed) and not run on larger sizes."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_ube` or a field
    of its :class:`Runs` (``--instances`` sets ``repeats``)."""
    add_sizes(
        parser, list(RUNS.sizes), "numbers of state-action pairs |S||A| (multiples of --actions)"
    )
    add_actions(parser, RUNS.n_actions)
    add_count(parser, "--next-states", 3, "next states per pair (Garnet)")
    add_fraction(parser, "--discount", 0.9, "discount gamma")
    add_count(
        parser,
        "--instances",
        RUNS.repeats,
        "random instances per size",
        metavar="INSTANCES",
        dest="repeats",
    )
    add_solvers(parser)
    add_conic_cap(
        parser,
        120.0,
        "stop a conic solver once it has spent T s on one size, killing a solve in progress "
        "(and skip it on larger sizes); reported as skipped",
        metavar="T",
    )
    add_count(
        parser,
        "--mm-pairs",
        1000,
        "|S||A| of the moment-matching row (0: no such row)",
        metavar="PAIRS",
        zero=True,
    )
    add_solvers(
        parser,
        help="conic solvers of the moment-matching row",
        flag="--mm-solvers",
        default=["CLARABEL"],
        metavar="SOLVER",
    )


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_ube` reports (for the bar's ETA): per row (one per
    size and fast algorithm, plus the moment-matching row) one line for the fast path and one
    per solver."""
    rows = len(args.sizes) * len(FAST_ALGORITHMS) + (1 if args.mm_pairs else 0)
    return rows * (1 + len(args.solvers))


def meta(args: argparse.Namespace) -> dict:
    """The run's settings, ahead of the rows in ``--json`` output (and the machine's load
    average when the rows were done)."""
    return {
        "sizes": args.sizes,
        "actions": args.n_actions,
        "next_states": args.next_states,
        "discount": args.discount,
        "instances": args.repeats,
        "solvers": args.solvers,
        "max_conic_seconds": args.max_conic_seconds,
        "cap_interrupts_solves": forkable() and math.isfinite(args.max_conic_seconds),
        "mm_pairs": args.mm_pairs,
        "mm_solvers": args.mm_solvers,
        "seed": args.seed,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
