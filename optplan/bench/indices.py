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

from .._checks import (
    MissingDependency,
    OptplanError,
    check_int,
    check_real,
    check_writable,
    write_error,
)
from ..fast.kl_ball import kl_ball_index
from ..fast.kl_inf import kl_inf_rate
from ..fast.l1_ball import l1_ball_index
from ..problems import SOLVERS, KLBallIndex, KLInfRate, L1BallIndex
from ..result import OPTIMAL, OPTIMAL_INACCURATE, SOLUTION_PRESENT
from ._common import (
    check_seconds,
    check_sizes,
    check_solvers,
    fraction,
    nonneg_int,
    nonneg_seconds,
    positive_int,
    solver_name,
    timed,
)
from .cases import INDEX_PROBLEMS, random_index_instance
from .peers import PEERS

__all__ = [
    "INDEX_PATHS",
    "MAX_BATCH_ELEMENTS",
    "STEMS",
    "index_paths",
    "bench_indices",
    "format_index_table",
    "plot_indices",
    "require_matplotlib",
    "header",
    "add_arguments",
    "check",
    "finish",
    "meta",
]

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

    With ``peers`` (needs numba), each instance is also solved, in round-robin loops of calls
    (:func:`_time_contenders`: the median of :data:`PEER_RUNS` rounds), by optplan's public
    fast function (``kl_ball_index(p, v, r)`` etc., inputs checked, a ``BatchResult``), by
    optplan's compiled kernel lane alone (:func:`kernel_lanes`: the row kernel on the same
    already-valid float64 arrays, no checks, the value only: the work a peer does) and by the
    peer transcriptions of :mod:`optplan.bench.peers` for that problem; the row gets
    ``optplan_s`` and ``kernel_s`` (medians over the instances), ``kernel_max_abs_diff``
    (kernel value vs public value) and ``peers``: ``{name: {"s", "ratio" (peer /
    optplan_s), "ratio_kernel" (peer / kernel_s), "max_abs_diff" (of the values, vs the
    public function's)}}``.

    Every argument is checked before any timing: ``sizes`` and ``instances`` positive
    integers (``sizes >= 2`` with ``kl_inf``, whose target needs two states), ``batch >= 0``,
    ``zeros`` in ``[0, 1)``, ``max_conic_seconds >= 0``.
    """
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
    rows = []
    for k, problem in enumerate(problems):
        cls, batched = index_paths(problem)
        # warm-up (imports, solvers' first-call overheads), untimed
        p, v, r = random_index_instance(np.random.default_rng(12345), 5, problem)
        cls(p, v, r).solve(method="fast")
        batched(p[None], v[None], np.array([r]))
        contenders = _contenders(problem, batched) if peers else {}
        for fn in contenders.values():
            fn(p, v, r)
        for solver in solvers:
            _conic(cls(p, v, r), solver)
        tripped: dict[str, int] = {}  # solver -> the size at which it went over the cap
        for S in sizes:
            rng = np.random.default_rng([seed, k, S])
            cases = [random_index_instance(rng, S, problem, zeros) for _ in range(instances)]
            times: dict[str, list[float]] = {"fast": []} | {s: [] for s in solvers}
            statuses: dict[str, list[str]] = {s: [] for s in solvers}
            messages: dict[str, list[str]] = {"fast": []} | {s: [] for s in solvers}
            errs = dict.fromkeys(solvers, None)
            rel_errs = dict.fromkeys(solvers, None)
            spent = dict.fromkeys(solvers, 0.0)
            fast_values, fast_fail = [], 0
            peer_times = {name: [] for name in contenders}
            peer_diff = dict.fromkeys(contenders, 0.0)
            # the peers first, on every instance of this size, before any conic solve
            for p, v, r in cases if contenders else ():
                _time_contenders(contenders, p, v, r, peer_times, peer_diff)
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
                    if spent[solver] > max_conic_seconds:
                        tripped[solver] = S

            med, q25, q75 = _quartiles(times["fast"])
            row = {
                "problem": problem,
                "S": S,
                "instances": instances,
                "fast_s": med,
                "fast_q25": q25,
                "fast_q75": q75,
                "fast_fail": fast_fail,
                "fast_messages": messages["fast"],
            }
            res, t = _time_batch(batched, cases)
            row["batch_s"] = t / instances
            row["batch_fail"] = int((~res.success).sum())
            diff = np.abs(np.asarray(res.value) - np.asarray(fast_values))
            row["batch_err"] = float(diff[np.isfinite(diff)].max(initial=0.0))
            row["bigbatch_n"] = batch
            row["bigbatch_s"] = row["bigbatch_fail"] = None
            if batch > 0 and S * batch <= MAX_BATCH_ELEMENTS:
                big_rng = np.random.default_rng([seed, k, S, 1])
                big = [random_index_instance(big_rng, S, problem, zeros) for _ in range(batch)]
                res, t = _time_batch(batched, big)
                del big
                row["bigbatch_s"] = t / batch
                row["bigbatch_fail"] = int((~res.success).sum())
                del res

            for solver in solvers:
                med, q25, q75 = _quartiles(times[solver])
                counts = {st: statuses[solver].count(st) for st in sorted(set(statuses[solver]))}
                row[f"{solver}_s"] = med
                row[f"{solver}_q25"] = q25
                row[f"{solver}_q75"] = q75
                row[f"{solver}_timed"] = len(times[solver])
                row[f"{solver}_ratio"] = None if med is None else med / row["fast_s"]
                row[f"{solver}_ratio_batch"] = None if med is None else med / row["batch_s"]
                row[f"{solver}_fail"] = sum(st not in SOLUTION_PRESENT for st in statuses[solver])
                row[f"{solver}_inaccurate"] = counts.get(OPTIMAL_INACCURATE, 0)
                row[f"{solver}_statuses"] = counts
                row[f"{solver}_messages"] = messages[solver]
                row[f"{solver}_err"] = errs[solver]
                row[f"{solver}_rel_err"] = rel_errs[solver]
                row[f"{solver}_skipped"] = None
                if solver in tripped:
                    at = tripped[solver]
                    row[f"{solver}_skipped"] = f"skipped after {max_conic_seconds:g} s" + (
                        f" ({len(times[solver])} of {instances} instances timed)"
                        if at == S
                        else f" at S={at}"
                    )
            ratios = [row[f"{s}_ratio"] for s in solvers if row[f"{s}_ratio"] is not None]
            row["best_ratio"] = min(ratios) if ratios else None
            if contenders:
                mine = float(np.median(peer_times.pop("optplan")))
                kern = float(np.median(peer_times.pop(KERNEL)))
                row["optplan_s"] = mine
                row["kernel_s"] = kern
                row["kernel_max_abs_diff"] = peer_diff[KERNEL]
                row["peers"] = {
                    name: {
                        "s": float(np.median(t)),
                        "ratio": float(np.median(t)) / mine,
                        "ratio_kernel": float(np.median(t)) / kern,
                        "max_abs_diff": peer_diff[name],
                    }
                    for name, t in peer_times.items()
                }
            rows.append(row)
            if progress:
                _index_progress(progress, row, solvers)
    return rows


#: Rounds per instance with ``peers``: in each, every contender runs a loop of calls (about
#: :data:`PEER_LOOP_S` seconds, at least one call), round-robin; the median round is kept.
PEER_RUNS = 5
PEER_LOOP_S = 2e-4


def check_peers() -> None:
    """The peers are compiled with numba: refuse before any timing when it is missing."""
    from . import peers as _peers

    if not _peers.available():
        raise MissingDependency('--peers needs numba: pip install "optplan[jit]"')


def _contenders(problem: str, batched: Callable) -> dict[str, Callable]:
    """``{"optplan": the public fast function on one instance, peer name: peer}``."""
    out = {"optplan": lambda p, v, r: batched(p, v, r).value, KERNEL: kernel_lanes()[problem]}
    out.update(dict(PEERS.get(problem, ())))
    return out


#: The contender name of optplan's compiled kernel lane in :func:`_time_contenders`.
KERNEL = "optplan-kernel"


def kernel_lanes() -> dict[str, Callable]:
    """``stem -> f(p, v, param)``: optplan's compiled row kernel for one instance, called as
    the public functions call it (the one-signature entry points of
    :func:`optplan.fast._index_kernels.lanes`, ``_*_into``: ``q`` written into a fresh array)
    but with the input check off, returning the value only. The work a peer of
    :mod:`optplan.bench.peers` does (a compiled function on already-valid float64 arrays),
    to compare kernels with kernels; the public functions add the checks and the result
    object. Needs numba."""
    from ..fast import _index_kernels

    k = _index_kernels.lanes()
    kl, inf, l1 = k["_kl_ball_into"], k["_kl_inf_into"], k["_l1_into"]
    empty = np.empty
    return {
        "kl_ball": lambda p, v, r: kl(p, v, r, 100, False, empty(p.shape[0]))[0],
        "kl_inf": lambda p, v, r: inf(p, v, r, 100, False, empty(p.shape[0]))[0],
        "l1_ball": lambda p, v, r: l1(p, v, r, False, empty(p.shape[0]))[0],
    }


def _time_contenders(contenders, p, v, r, times, diff) -> None:
    """Per contender, the median over ``PEER_RUNS`` round-robin rounds of the mean time of a
    loop of calls (the loop's length set once per instance from one call: about
    ``PEER_LOOP_S`` seconds), so a microsecond call is timed in steady state, as an agent
    calling it step after step sees it, and load drifts hit every contender alike; and the
    largest |value - optplan's|."""
    values, loops = {}, {}
    for name, fn in contenders.items():
        value, t = timed(lambda fn=fn: fn(p, v, r))
        values[name] = float(value)
        loops[name] = max(1, min(1000, int(PEER_LOOP_S / max(t, 1e-9))))
    runs = {name: [] for name in contenders}
    for _ in range(PEER_RUNS):
        for name, fn in contenders.items():
            n = loops[name]

            def loop(fn=fn, n=n):
                for _ in range(n):
                    fn(p, v, r)

            runs[name].append(timed(loop)[1] / n)
    for name in contenders:
        times[name].append(float(np.median(runs[name])))
        if name != "optplan":
            diff[name] = max(diff[name], abs(values[name] - values["optplan"]))


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


def format_index_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (problem, S); columns: the fast path (single call, per instance in the
    N-batch and in the large batch), then per solver its median, ratio to the fast single
    call, failures/inaccurate, and the max abs and relative disagreement with the fast path.
    A ``*`` marks a median over fewer than N instances (the solver went over the time cap)."""
    head = f"{'problem':<9}{'S':>7}{'fast s':>10}{'batch/N':>10}{'batch/B':>10}"
    for s in solvers:  # a 47-character block per solver
        head += f"{s + ' s':>12}{'ratio':>8}{'fail/inacc':>11}{'abs err':>8}{'rel err':>8}"
    lines = [head, "-" * len(head)]
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
    return "\n".join(lines + notes + _peer_table(rows))


def _peer_table(rows: list[dict]) -> list[str]:
    """The ``--peers`` block: per (problem, S) optplan's public fast function (one call, and
    per row of the large batch), optplan's kernel lane alone and each peer, in microseconds,
    with both ratios: peer / public call and peer / kernel lane."""
    rows = [r for r in rows if "peers" in r]
    if not rows:
        return []
    names = list(dict.fromkeys(n for r in rows for n in r["peers"]))
    head = f"{'problem':<9}{'S':>7}{'public us':>11}{'kernel us':>11}{'batch/B us':>12}"
    for n in names:
        head += f"{n + ' us':>15}{'/public':>9}{'/kernel':>9}{'|diff|':>9}"
    lines = [
        "",
        "peers (same instances; per instance the median of 5 round-robin rounds of ~0.2 ms "
        "call loops, then the median over instances; us per call):",
        "  public = optplan's public function (kl_ball_index(p, v, r) etc.): inputs checked, "
        "a BatchResult (value, q*, multiplier, status);",
        "  kernel = optplan's compiled row kernel alone on the same already-valid float64 "
        "arrays, no checks, value only: the work a peer does;",
        "  /public, /kernel = peer us / public us, peer us / kernel us (> 1: optplan is "
        "faster); |diff| = max |peer value - public value|.",
        head,
        "-" * len(head),
    ]
    for r in rows:
        big = r["bigbatch_s"]
        line = f"{r['problem']:<9}{r['S']:>7}{r['optplan_s'] * 1e6:>11.2f}"
        line += f"{r['kernel_s'] * 1e6:>11.2f}"
        line += f"{'-':>12}" if big is None else f"{big * 1e6:>12.3f}"
        for n in names:
            pr = r["peers"].get(n)
            if pr is None:
                line += f"{'':>42}"
                continue
            line += (
                f"{pr['s'] * 1e6:>15.2f}{pr['ratio']:>8.2f}x{pr['ratio_kernel']:>8.2f}x"
                f"{pr['max_abs_diff']:>9.0e}"
            )
        lines.append(line)
    return lines


PATH_STYLES = {
    "fast": ("fast (single call)", "C0", "o", "-"),
    "batch": ("fast, the N instances in one batched call (time / N)", "C0", "s", "--"),
    "bigbatch": ("fast, B fresh instances in one batched call (time / B)", "C0", "^", ":"),
    "CLARABEL": ("CLARABEL", "C1", "o", "-"),
    "ECOS": ("ECOS", "C2", "D", "-"),
    "SCS": ("SCS", "C3", "v", "-"),
}


def require_matplotlib():
    """``matplotlib.figure.Figure``, or a :class:`MissingDependency` saying how to install it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependency(
            "plotting needs matplotlib: pip install 'optplan[plot]' (or matplotlib)"
        ) from exc
    return Figure


def plot_indices(rows: list[dict], path, solvers: Sequence[str], title: str | None = None):
    """Log-log PNG of compute time vs ``|S|``: one panel per problem, one line per path or
    solver (medians, 25-75% bands where there are several instances). Needs matplotlib (the
    ``plot`` extra); draws on a bare ``Figure`` (no pyplot, no global backend change)."""
    Figure = require_matplotlib()
    path = check_writable("plot file", path)
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig = Figure(figsize=(5.2 * len(problems), 4.6), layout="constrained")
    axes = fig.subplots(1, len(problems), sharey=True, squeeze=False)[0]
    for ax, problem in zip(axes, problems, strict=True):
        sel = [r for r in rows if r["problem"] == problem]
        S = np.array([r["S"] for r in sel], dtype=float)
        n = sel[0]["instances"]
        series = [("fast", "fast_s", "fast_q25", "fast_q75"), ("batch", "batch_s", None, None)]
        series.append(("bigbatch", "bigbatch_s", None, None))
        series += [(s, f"{s}_s", f"{s}_q25", f"{s}_q75") for s in solvers]
        for key, med_key, lo_key, hi_key in series:
            label, color, marker, style = PATH_STYLES.get(key, (key, None, "o", "-"))
            label = label.replace(" N ", f" {n} ").replace("/ N)", f"/ {n})")
            big = sel[0].get("bigbatch_n")
            if big:
                label = label.replace(" B ", f" {big:,} ").replace("/ B)", f"/ {big:,})")
            y = np.array([np.nan if r[med_key] is None else r[med_key] for r in sel])
            if np.isnan(y).all():
                continue
            # A size where the solver hit its time cap: drawn hollow, with "k/n" instances
            # timed; larger sizes were not run (no point).
            capped = [
                i
                for i, r in enumerate(sel)
                if r.get(f"{key}_skipped") and r.get(f"{key}_timed") and np.isfinite(y[i])
            ]
            full = [i for i in range(len(sel)) if i not in capped]
            ax.plot(S, y, linestyle=style, marker=marker, color=color, label=label, markevery=full)
            for i in capped:
                ax.plot(
                    S[i],
                    y[i],
                    linestyle="none",
                    marker=marker,
                    markersize=8,
                    markerfacecolor="white",
                    markeredgecolor=color,
                )
                ax.annotate(
                    f"{sel[i][f'{key}_timed']}/{n} timed; larger S not run",
                    (S[i], y[i]),
                    xytext=(-8, 6),
                    textcoords="offset points",
                    ha="right",
                    fontsize=7,
                    color=color,
                )
            if lo_key is not None:
                lo = np.array([np.nan if r[lo_key] is None else r[lo_key] for r in sel])
                hi = np.array([np.nan if r[hi_key] is None else r[hi_key] for r in sel])
                ax.fill_between(S, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(problem)
        ax.set_xlabel("|S|")
        ax.set_xticks(S, [f"{v:,.0f}" for v in S])
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("wall seconds per instance\n(median; band: 25-75% of instances)")
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(
        title
        or f"Index compute time vs |S| ({rows[0]['instances']} random instances per size, "
        "log-log); hollow: solver stopped at its time cap"
    )
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise write_error("plot file", path, exc) from exc
    return path


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
    parser.add_argument(
        "--sizes",
        type=positive_int,
        nargs="+",
        default=[10, 100, 1000, 10000],
        help="numbers of states |S|",
    )
    parser.add_argument(
        "--instances", type=positive_int, default=15, help="random instances per size"
    )
    parser.add_argument(
        "--problems",
        nargs="+",
        choices=INDEX_PROBLEMS,
        default=list(INDEX_PROBLEMS),
        help="index problems to time",
    )
    parser.add_argument(
        "--solvers",
        type=solver_name,
        nargs="+",
        default=list(SOLVERS),
        help="conic solvers to time",
    )
    parser.add_argument(
        "--batch",
        type=nonneg_int,
        default=1000,
        metavar="B",
        help="also time one batched fast call on B instances (when S*B <= 1e7; 0: never)",
    )
    parser.add_argument(
        "--max-conic-seconds",
        type=nonneg_seconds,
        default=120.0,
        metavar="T",
        help="stop timing a conic solver once it has spent T s on one size (and skip it on "
        "larger sizes); reported as skipped",
    )
    parser.add_argument(
        "--zeros", type=fraction, default=0.0, help="fraction of zero-probability states in p"
    )
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
