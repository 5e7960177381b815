"""The ``--peers`` part of ``optplan bench indices``: optplan's public fast function, its
compiled kernel lane alone and the peer transcriptions of :mod:`optplan.bench.peers`, timed
in round-robin loops of calls on the same instances, and the table of their times."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._checks import MissingDependency
from ._common import timed
from .peers import PEERS

__all__ = [
    "PEER_RUNS",
    "PEER_LOOP_S",
    "KERNEL",
    "check_peers",
    "make_contenders",
    "kernel_lanes",
    "time_contenders",
    "peer_entries",
    "peer_table",
]

#: Rounds per instance with ``peers``: in each, every contender runs a loop of calls (about
#: :data:`PEER_LOOP_S` seconds, at least one call), round-robin; the median round is kept.
PEER_RUNS = 5
PEER_LOOP_S = 2e-4


def check_peers() -> None:
    """The peers are compiled with numba: refuse before any timing when it is missing."""
    from .peers import available

    if not available():
        raise MissingDependency('--peers needs numba: pip install "optplan[jit]"')


def make_contenders(problem: str, batched: Callable) -> dict[str, Callable]:
    """``{"optplan": the public fast function on one instance, peer name: peer}``."""
    out = {"optplan": lambda p, v, r: batched(p, v, r).value, KERNEL: kernel_lanes()[problem]}
    out.update(dict(PEERS.get(problem, ())))
    return out


#: The contender name of optplan's compiled kernel lane in :func:`time_contenders`.
KERNEL = "optplan-kernel"


def kernel_lanes() -> dict[str, Callable]:
    """``stem -> f(p, v, param)``: optplan's compiled row kernel for one instance, called as
    the public functions call it (the one-signature entry points of
    :func:`optplan.fast._kernels.lanes`, ``_*_into``: ``q`` written into a fresh array)
    but with the input check off, returning the value only. The work a peer of
    :mod:`optplan.bench.peers` does (a compiled function on already-valid float64 arrays),
    to compare kernels with kernels; the public functions add the checks and the result
    object. Needs numba."""
    from ..fast import _kernels

    k = _kernels.lanes()
    kl, inf, l1 = k["_kl_ball_into"], k["_kl_inf_into"], k["_l1_into"]
    empty = np.empty
    return {
        "kl_ball": lambda p, v, r: kl(p, v, r, 100, False, empty(p.shape[0]))[0],
        "kl_inf": lambda p, v, r: inf(p, v, r, 100, False, empty(p.shape[0]))[0],
        "l1_ball": lambda p, v, r: l1(p, v, r, False, empty(p.shape[0]))[0],
    }


def time_contenders(contenders, p, v, r, times, diff) -> None:
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


def peer_table(rows: list[dict]) -> list[str]:
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


def peer_entries(row: dict, times: dict[str, list[float]], diff: dict[str, float]) -> None:
    """The row's ``optplan_s`` and ``kernel_s`` (medians over the instances),
    ``kernel_max_abs_diff`` and ``peers``: per peer its median ``s``, ``ratio`` (to
    ``optplan_s``), ``ratio_kernel`` (to ``kernel_s``) and ``max_abs_diff``."""
    mine = float(np.median(times.pop("optplan")))
    kern = float(np.median(times.pop(KERNEL)))
    row["optplan_s"] = mine
    row["kernel_s"] = kern
    row["kernel_max_abs_diff"] = diff[KERNEL]
    row["peers"] = {
        name: {
            "s": float(np.median(t)),
            "ratio": float(np.median(t)) / mine,
            "ratio_kernel": float(np.median(t)) / kern,
            "max_abs_diff": diff[name],
        }
        for name, t in times.items()
    }
