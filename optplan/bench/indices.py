"""``optplan bench indices``: compute time of the index problems vs ``|S|``, fast vs conic.

The experiment of accelerating-ucb-indices-mdp §4.5 (Figs. 1-2) with our paths, on the random
instances of :func:`optplan.bench.cases.random_index_instance`. Every ratio printed comes from
timings taken in the same run, interleaved instance by instance. Medians, not means.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import OptplanError, check_int, check_real, check_writable
from ..fast.kl_ball import kl_ball_index
from ..fast.kl_inf import kl_inf_rate
from ..fast.l1_ball import l1_ball_index
from ..problems import SOLVERS, KLBallIndex, KLInfRate, L1BallIndex
from ..result import OPTIMAL, OPTIMAL_INACCURATE, SOLUTION_PRESENT
from ._common import check_seconds, check_sizes, check_solvers, timed
from ._options import add_choices, add_conic_cap, add_count, add_fraction, add_sizes, add_solvers
from ._rows import solvers_table, table_lines
from .cases import INDEX_PROBLEMS, random_index_instance
from .index_peers import (
    PEER_LOOP_S,
    PEER_RUNS,
    check_peers,
    kernel_lanes,
    make_contenders,
    peer_entries,
    peer_table,
    time_contenders,
)
from .index_plot import plot_indices, require_matplotlib

__all__ = [
    "INDEX_PATHS",
    "MAX_BATCH_ELEMENTS",
    "STEMS",
    "HELP",
    "index_paths",
    "bench_indices",
    "format_index_table",
    "kernel_lanes",
    "plot_indices",
    "require_matplotlib",
    "table",
    "header",
    "add_arguments",
    "check",
    "finish",
    "meta",
]

HELP = "index problems (KL ball, KL-inf, L1 ball): compute time vs |S| (paper Figs. 1-2)"
#: ``stem -> (problem class, batched fast function)`` of each index problem.
INDEX_PATHS = {
    cls.stem: (cls, batched)
    for cls, batched in (
        (KLBallIndex, kl_ball_index),
        (KLInfRate, kl_inf_rate),
        (L1BallIndex, l1_ball_index),
    )
}
#: The problem stems this suite times.
STEMS = frozenset(INDEX_PATHS)
#: The large batch is timed only when ``S * batch`` is at most this many elements.
MAX_BATCH_ELEMENTS = 10_000_000


def index_paths(problem: str) -> tuple[type, Callable]:
    """The problem class and the batched fast function of an index problem stem."""
    if problem not in INDEX_PATHS:
        raise OptplanError(f"problem must be one of {INDEX_PROBLEMS}, got {problem!r}")
    return INDEX_PATHS[problem]


def _quartiles(times: list[float]) -> tuple[float | None, float | None, float | None]:
    if not times:
        return None, None, None
    q25, med, q75 = np.percentile(times, [25, 50, 75])
    return float(med), float(q25), float(q75)


def _note(messages: list[str], res, keep: int = 3) -> None:
    """Keep the first few distinct messages of results without a solution."""
    if not res.success and len(messages) < keep:
        msg = f"{res.status}: {res.message}" if res.message else res.status
        if msg not in messages:
            messages.append(msg)


def _conic(problem, solver: str):
    """The conic path, without CVXPY's "Solution may be inaccurate" warning: the bench counts
    ``optimal_inaccurate`` statuses itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return problem.solve(method="conic", solver=solver)


def _time_batch(batched: Callable, instances: list, repeats: int = 3) -> tuple[object, float]:
    """One batched call on all instances: the result and the median wall time of ``repeats``."""
    P = np.stack([p for p, _, _ in instances])
    V = np.stack([v for _, v, _ in instances])
    params = np.array([r for _, _, r in instances])
    runs = [timed(lambda: batched(P, V, params)) for _ in range(repeats)]
    return runs[0][0], float(np.median([t for _, t in runs]))


def bench_indices(
    sizes: Sequence[int] = (10, 100, 1000, 10000),
    instances: int = 15,
    problems: Sequence[str] = INDEX_PROBLEMS,
    solvers: Sequence[str] = SOLVERS,
    batch: int = 1000,
    max_conic_seconds: float = 120.0,
    zeros: float = 0.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    peers: bool = False,
) -> list[dict]:
    """Compute time of the index problems vs ``|S|``: fast path (single and batched) vs conic.

    The paper's §4.5 experiment with our paths: for each problem and each ``S``, ``instances``
    random instances (:func:`optplan.bench.cases.random_index_instance`), each solved by the fast
    path (``problem.solve(method="fast")``) and by every conic solver, interleaved instance by
    instance. Then one batched fast call on the same instances, and (when
    ``S * batch <= MAX_BATCH_ELEMENTS``) one batched call on ``batch`` fresh instances (each
    batched call timed three times, median).

    A conic solver whose cumulative time at one size exceeds ``max_conic_seconds`` is not run
    on that size's remaining instances nor on larger sizes; its row entries say so
    (``<SOLVER>_skipped``), its statistics cover the instances it did run (``<SOLVER>_timed``).

    Returns one row per (problem, S) with

    - ``fast_s`` (median), ``fast_q25``, ``fast_q75`` (quartiles, seconds per single call),
      ``fast_fail`` (fast single calls without a solution);
    - ``batch_s``: one batched call on the ``instances`` instances / ``instances``;
      ``batch_fail``, ``batch_err`` (max |batched - single| value);
    - ``bigbatch_s``: one batched call on ``batch`` instances / ``batch`` (``None`` when not
      run), ``bigbatch_n``, ``bigbatch_fail``;
    - per solver: ``<SOLVER>_s``, ``_q25``, ``_q75``, ``_timed``, ``_ratio`` (conic median /
      ``fast_s``), ``_ratio_batch`` (conic median / ``batch_s``), ``_fail`` (status neither
      optimal nor optimal_inaccurate: counted, not dropped), ``_inaccurate`` (optimal_inaccurate
      count), ``_statuses`` (count per status), ``_messages`` (the first few distinct
      messages of failures; also ``fast_messages``), ``_err`` (max |fast - conic| value over the
      instances the solver reported ``optimal``; ``None`` if none), ``_rel_err``
      (max ``|fast - conic| / (1 + |conic|)``), ``_skipped`` (``None`` or why);
    - ``best_ratio``: the smallest ``<SOLVER>_ratio`` (``None`` if no solver ran).

    With ``peers`` (needs numba), each instance is also solved in round-robin loops of calls
    by optplan's public fast function, its compiled kernel lane alone and the peer
    transcriptions of :mod:`optplan.bench.peers` (:mod:`optplan.bench.index_peers`); the row
    gets ``optplan_s``, ``kernel_s``, ``kernel_max_abs_diff`` and ``peers``
    (:func:`~optplan.bench.index_peers.peer_entries`).

    Every argument is checked before any timing: ``sizes`` and ``instances`` positive
    integers (``sizes >= 2`` with ``kl_inf``, whose target needs two states), ``batch >= 0``,
    ``zeros`` in ``[0, 1)``, ``max_conic_seconds >= 0``.
    """
    problems, sizes, instances, solvers, batch, max_conic_seconds, zeros, seed = _checked(
        problems, sizes, instances, solvers, batch, max_conic_seconds, zeros, seed, peers
    )
    rows = []
    for k, problem in enumerate(problems):
        cls, batched = index_paths(problem)
        contenders = _warm_up(problem, cls, batched, solvers, peers)
        tripped: dict[str, int] = {}  # solver -> the size at which it went over the cap
        for S in sizes:
            rng = np.random.default_rng([seed, k, S])
            cases = [random_index_instance(rng, S, problem, zeros) for _ in range(instances)]
            row = {"problem": problem, "S": S, "instances": instances}
            peer_times = {name: [] for name in contenders}
            peer_diff = dict.fromkeys(contenders, 0.0)
            # the peers first, on every instance of this size, before any conic solve
            for p, v, r in cases if contenders else ():
                time_contenders(contenders, p, v, r, peer_times, peer_diff)
            singles = _time_singles(row, cls, cases, solvers, tripped, max_conic_seconds)
            _batch_entries(row, batched, cases, singles[-1], batch, [seed, k, S, 1], zeros)
            _solvers_entries(row, solvers, singles, tripped, max_conic_seconds)
            if contenders:
                peer_entries(row, peer_times, peer_diff)
            rows.append(row)
            if progress:
                _index_progress(progress, row, solvers)
    return rows


def _checked(problems, sizes, instances, solvers, batch, max_conic_seconds, zeros, seed, peers):
    """The arguments of :func:`bench_indices`, checked in this order (``problems`` as a
    list); with ``peers``, numba must be there."""
    if isinstance(problems, (str, bytes)):
        problems = [problems]
    for problem in problems:
        index_paths(problem)
    sizes = check_sizes(sizes, 2 if "kl_inf" in problems else 1)
    instances = check_int("instances", instances)
    solvers = check_solvers(solvers)
    batch = check_int("batch", batch, 0)
    max_conic_seconds = check_seconds("max_conic_seconds", max_conic_seconds)
    zeros = check_real("zeros", zeros, 0.0, 1.0, high_open=True)
    seed = check_int("seed", seed, 0)
    if peers:
        check_peers()
    return problems, sizes, instances, solvers, batch, max_conic_seconds, zeros, seed


def _warm_up(problem: str, cls, batched: Callable, solvers, peers: bool) -> dict[str, Callable]:
    """Untimed first calls (imports, the solvers' first-call overheads); the peer contenders
    (:func:`~optplan.bench.index_peers.make_contenders`; none without ``peers``)."""
    p, v, r = random_index_instance(np.random.default_rng(12345), 5, problem)
    cls(p, v, r).solve(method="fast")
    batched(p[None], v[None], np.array([r]))
    contenders = make_contenders(problem, batched) if peers else {}
    for fn in contenders.values():
        fn(p, v, r)
    for solver in solvers:
        _conic(cls(p, v, r), solver)
    return contenders


def _solvers_entries(row: dict, solvers, singles: tuple, tripped: dict, cap: float) -> None:
    """Each solver's entries of the row (from :func:`_time_singles`), why it was skipped, and
    ``best_ratio``."""
    times, statuses, messages, errs, _ = singles
    for solver in solvers:
        _solver_entries(
            row, solver, times[solver], statuses[solver], messages[solver], errs[solver]
        )
        if solver in tripped:
            at = tripped[solver]
            row[f"{solver}_skipped"] = f"skipped after {cap:g} s" + (
                f" ({len(times[solver])} of {row['instances']} instances timed)"
                if at == row["S"]
                else f" at S={at}"
            )
    ratios = [row[f"{s}_ratio"] for s in solvers if row[f"{s}_ratio"] is not None]
    row["best_ratio"] = min(ratios) if ratios else None


def _time_singles(row: dict, cls, cases: list, solvers, tripped: dict, cap: float) -> tuple:
    """Each instance of ``cases`` solved by the fast path and by every solver not yet over
    ``cap`` seconds at this size (``tripped``: ``solver -> the size where it went over``);
    the row's fast-path entries set. Returns per solver its times, statuses, messages and
    largest ``(absolute, relative)`` disagreement, and the fast values."""
    S = row["S"]
    times: dict[str, list[float]] = {"fast": []} | {s: [] for s in solvers}
    statuses: dict[str, list[str]] = {s: [] for s in solvers}
    messages: dict[str, list[str]] = {"fast": []} | {s: [] for s in solvers}
    errs = dict.fromkeys(solvers, None)
    rel_errs = dict.fromkeys(solvers, None)
    spent = dict.fromkeys(solvers, 0.0)
    fast_values, fast_fail = [], 0
    for p, v, r in cases:
        prob = cls(p, v, r)
        fast, t = timed(lambda prob=prob: prob.solve(method="fast"))
        times["fast"].append(t)
        fast_values.append(fast.value)
        fast_fail += not fast.success
        _note(messages["fast"], fast)
        for solver in solvers:
            if solver in tripped:
                continue
            res, t = timed(lambda prob=prob, s=solver: _conic(prob, s))
            times[solver].append(t)
            statuses[solver].append(res.status)
            _note(messages[solver], res)
            spent[solver] += t
            if res.status == OPTIMAL and fast.success:
                err = abs(fast.value - res.value)
                rel = err / (1.0 + abs(res.value))
                errs[solver] = max(errs[solver] or 0.0, err)
                rel_errs[solver] = max(rel_errs[solver] or 0.0, rel)
            if spent[solver] > cap:
                tripped[solver] = S
    med, q25, q75 = _quartiles(times["fast"])
    row |= {"fast_s": med, "fast_q25": q25, "fast_q75": q75, "fast_fail": fast_fail}
    row["fast_messages"] = messages["fast"]
    errs = {s: (errs[s], rel_errs[s]) for s in solvers}
    return times, statuses, messages, errs, fast_values


def _batch_entries(row: dict, batched, cases, fast_values, batch, big_seed, zeros) -> None:
    """``batch_*``: one batched call on the row's instances; ``bigbatch_*``: one on ``batch``
    fresh instances (seeded by ``big_seed``), when ``S * batch <= MAX_BATCH_ELEMENTS``."""
    S, problem = row["S"], row["problem"]
    res, t = _time_batch(batched, cases)
    row["batch_s"] = t / len(cases)
    row["batch_fail"] = int((~res.success).sum())
    diff = np.abs(np.asarray(res.value) - np.asarray(fast_values))
    row["batch_err"] = float(diff[np.isfinite(diff)].max(initial=0.0))
    row["bigbatch_n"] = batch
    row["bigbatch_s"] = row["bigbatch_fail"] = None
    if batch > 0 and S * batch <= MAX_BATCH_ELEMENTS:
        big_rng = np.random.default_rng(big_seed)
        big = [random_index_instance(big_rng, S, problem, zeros) for _ in range(batch)]
        res, t = _time_batch(batched, big)
        del big
        row["bigbatch_s"] = t / batch
        row["bigbatch_fail"] = int((~res.success).sum())
        del res


def _solver_entries(row: dict, solver: str, times, statuses, messages, errs) -> None:
    """One solver's entries of the row (``errs``: its largest absolute and relative
    disagreements with the fast path)."""
    err, rel_err = errs
    med, q25, q75 = _quartiles(times)
    counts = {st: statuses.count(st) for st in sorted(set(statuses))}
    row[f"{solver}_s"] = med
    row[f"{solver}_q25"] = q25
    row[f"{solver}_q75"] = q75
    row[f"{solver}_timed"] = len(times)
    row[f"{solver}_ratio"] = None if med is None else med / row["fast_s"]
    row[f"{solver}_ratio_batch"] = None if med is None else med / row["batch_s"]
    row[f"{solver}_fail"] = sum(st not in SOLUTION_PRESENT for st in statuses)
    row[f"{solver}_inaccurate"] = counts.get(OPTIMAL_INACCURATE, 0)
    row[f"{solver}_statuses"] = counts
    row[f"{solver}_messages"] = messages
    row[f"{solver}_err"] = err
    row[f"{solver}_rel_err"] = rel_err
    row[f"{solver}_skipped"] = None


def _index_progress(progress: Callable[[str], None], row: dict, solvers: Sequence[str]) -> None:
    head = f"{row['problem']} S={row['S']}"
    big = (
        f", batch {row['bigbatch_n']} {row['bigbatch_s']:.2e} s/inst"
        if row["bigbatch_s"] is not None
        else ""
    )
    progress(
        f"{head} fast: {row['fast_s']:.2e} s single, {row['batch_s']:.2e} s/inst batched"
        f"{big}, {row['fast_fail']} failed"
    )
    for s in solvers:
        if row[f"{s}_s"] is None:
            progress(f"{head} {s}: {row[f'{s}_skipped']}")
            continue
        err = row[f"{s}_err"]
        skipped = f"; {row[f'{s}_skipped']}" if row[f"{s}_skipped"] else ""
        progress(
            f"{head} {s}: {row[f'{s}_s']:.2e} s ({row[f'{s}_ratio']:.0f}x fast), "
            f"{row[f'{s}_fail']} failed, {row[f'{s}_inaccurate']} inaccurate, max err "
            f"{'-' if err is None else f'{err:.1e}'}{skipped}"
        )


def _e(x: float | None, width: int, spec: str = ".2e") -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{spec}}"


def _e(x: float | None, width: int, spec: str = ".2e") -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{spec}}"


def format_index_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (problem, S); columns: the fast path (single call, per instance in the
    N-batch and in the large batch), then per solver its median, ratio to the fast single
    call, failures/inaccurate, and the max abs and relative disagreement with the fast path.
    A ``*`` marks a median over fewer than N instances (the solver went over the time cap)."""
    lines = table_lines(  # a 47-character block per solver
        f"{'problem':<9}{'S':>7}{'fast s':>10}{'batch/N':>10}{'batch/B':>10}",
        solvers,
        lambda s: f"{s + ' s':>12}{'ratio':>8}{'fail/inacc':>11}{'abs err':>8}{'rel err':>8}",
    )
    notes = []
    for r in rows:
        line = (
            f"{r['problem']:<9}{r['S']:>7}{r['fast_s']:>10.2e}{r['batch_s']:>10.2e}"
            f"{_e(r['bigbatch_s'], 10)}"
        )
        if r["fast_fail"] or r["batch_fail"] or r["bigbatch_fail"]:
            notes.append(
                f"! {r['problem']} S={r['S']}: fast path failed on {r['fast_fail']} single, "
                f"{r['batch_fail']} batched, {r['bigbatch_fail']} large-batch instances"
            )
        for s in solvers:
            if r[f"{s}_s"] is None:
                line += f"{r[f'{s}_skipped']:>47}"
                continue
            partial = r[f"{s}_timed"] < r["instances"]
            if partial:
                notes.append(f"* {s} at {r['problem']} S={r['S']}: {r[f'{s}_skipped']}")
            ratio = r[f"{s}_ratio"]
            line += (
                f"{r[f'{s}_s']:>11.2e}{'*' if partial else ' '}"
                f"{ratio:>7.0f}x"
                f"{str(r[f'{s}_fail']) + '/' + str(r[f'{s}_inaccurate']):>11}"
                f"{_e(r[f'{s}_err'], 8, '.0e')}{_e(r[f'{s}_rel_err'], 8, '.0e')}"
            )
        lines.append(line)
    return "\n".join(lines + notes + peer_table(rows))


#: The text table of the rows for the command line.
table = solvers_table(format_index_table)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    return (
        f"index benchmark (paper §4.5): {args.instances} random instances per size, "
        "median wall seconds per instance.\n"
        "batch/N: one batched fast call on the N instances / N; batch/B: one call on "
        f"B={args.batch} fresh instances / B (when S*B <= {MAX_BATCH_ELEMENTS:.0e}); "
        "batched calls: median of 3.\n"
        "ratio: conic median / fast single-call median (same run). fail: status neither "
        "optimal nor optimal_inaccurate; inacc: optimal_inaccurate.\n"
        "abs/rel err: max |fast - conic| and max |fast - conic| / (1 + |conic|) over the "
        "instances the solver solved to status optimal."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` but ``plot`` is a keyword of :func:`bench_indices`."""
    add_sizes(parser, [10, 100, 1000, 10000], "numbers of states |S|")
    add_count(parser, "--instances", 15, "random instances per size")
    add_choices(parser, "--problems", INDEX_PROBLEMS, "index problems to time")
    add_solvers(parser)
    add_count(
        parser,
        "--batch",
        1000,
        "also time one batched fast call on B instances (when S*B <= 1e7; 0: never)",
        metavar="B",
        zero=True,
    )
    add_conic_cap(
        parser,
        120.0,
        "stop timing a conic solver once it has spent T s on one size (and skip it on "
        "larger sizes); reported as skipped",
        metavar="T",
    )
    add_fraction(parser, "--zeros", 0.0, "fraction of zero-probability states in p")
    parser.add_argument("--plot", metavar="FILE", help="write a log-log PNG of time vs |S|")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also time peer implementations (rl-agents' KL Newton, Filippi et al.'s KL "
        "bisection, UCRL2's sort-based L1 step; see optplan.bench.peers) against optplan's "
        "public fast functions, on the same instances (needs numba)",
    )


def check(args: argparse.Namespace) -> None:
    """Before minutes of timing, not after: ``--plot`` needs matplotlib and a writable path;
    ``kl_inf`` needs sizes >= 2."""
    if args.plot:
        require_matplotlib()
        check_writable("--plot", args.plot)
    if getattr(args, "peers", False):
        check_peers()
    if "kl_inf" in args.problems and min(args.sizes) < 2:
        raise OptplanError(
            f"--sizes must be >= 2 for problem kl_inf (its target lies strictly between p.v "
            f"and max v), got {min(args.sizes)}"
        )


def finish(rows: list[dict], args: argparse.Namespace) -> str | None:
    """Draw the ``--plot`` figure; the line saying so."""
    if not args.plot:
        return None
    plot_indices(rows, args.plot, args.solvers)
    return f"plot written to {args.plot}"


def meta(args: argparse.Namespace) -> dict:
    """The run's settings, ahead of the rows in ``--json`` output."""
    return {
        "sizes": args.sizes,
        "instances": args.instances,
        "problems": args.problems,
        "solvers": args.solvers,
        "batch": args.batch,
        "max_batch_elements": MAX_BATCH_ELEMENTS,
        "max_conic_seconds": args.max_conic_seconds,
        "zeros": args.zeros,
        "seed": args.seed,
        "plot": args.plot,
        "peers": getattr(args, "peers", False),
        "peer_runs": PEER_RUNS,
        "peer_loop_s": PEER_LOOP_S,
    }
