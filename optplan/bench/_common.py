"""Helpers shared by the bench suites: timing, input checks, and the argument types of their
command-line options (each refuses a bad value with a message naming the flag, before any
timing)."""

from __future__ import annotations

import argparse
import math
import multiprocessing
import statistics
import time
import warnings
from collections.abc import Callable, Sequence

from .._checks import OptplanError, OptplanTypeError, check_int, check_real
from ..problems import SOLVERS
from ..problems.base import check_solver

__all__ = [
    "timed",
    "timed_median",
    "solver_name",
    "positive_int",
    "nonneg_int",
    "fraction",
    "nonneg_seconds",
    "nonneg_float",
    "check_sizes",
    "check_solvers",
    "check_seconds",
    "check_choices",
    "add_sizes",
    "add_actions",
    "add_count",
    "add_solvers",
    "add_conic_cap",
]


def timed(fn: Callable):
    """``(fn(), wall seconds)``."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


#: Runs of a fast path per instance in :func:`timed_median`.
FAST_RUNS = 5


def timed_median(fn: Callable, runs: int = FAST_RUNS):
    """``(fn(), median wall seconds of runs)``: for millisecond solves timed next to forked
    conic children. After a ``fork`` every page the parent writes faults once (copy on write,
    even after the child has exited): about 600 faults, 1 ms, on the first 2.7 ms EVI solve
    after each fork, measured with ``resource.getrusage``. The median of a few runs is the
    solve, not the fork's aftermath."""
    times, out = [], None
    for _ in range(runs):
        out, t = timed(fn)
        times.append(t)
    return out, float(statistics.median(times))


def solver_name(value: str) -> str:
    """A conic solver name for the command line, case-insensitive, as the upper-case name."""
    if value.upper() not in SOLVERS:
        raise argparse.ArgumentTypeError(f"unknown solver {value!r}; choose from {SOLVERS}")
    return value.upper()


def _integer(text: str, low: int, kind: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """Argument type: an integer >= 1."""
    return _integer(text, 1, "a positive integer")


def nonneg_int(text: str) -> int:
    """Argument type: an integer >= 0."""
    return _integer(text, 0, "a non-negative integer")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def fraction(text: str) -> float:
    """Argument type: a number in ``[0, 1)``."""
    value = _number(text)
    if value is None or not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), got {text!r}")
    return value


def nonneg_seconds(text: str) -> float:
    """Argument type: a number of seconds >= 0 (``inf``: no cap)."""
    value = _number(text)
    if value is None or not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def nonneg_float(text: str) -> float:
    """Argument type: a finite number >= 0 (tolerances)."""
    value = _number(text)
    if value is None or not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def check_sizes(sizes: Sequence[int], low: int = 1, name: str = "sizes") -> list[int]:
    """A non-empty sequence of integers ``>= low`` (problem sizes), as a list."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise OptplanTypeError(f"{name} must be a non-empty list of integers, got {sizes!r}")
    return [check_int(f"{name}[{i}]", s, low) for i, s in enumerate(sizes)]


def check_solvers(solvers: Sequence[str]) -> list[str]:
    """Conic solver names (case-insensitive), as upper-case names."""
    if isinstance(solvers, (str, bytes)) or not isinstance(solvers, Sequence):
        raise OptplanTypeError(f"solvers must be a list of solver names, got {solvers!r}")
    return [check_solver(s) for s in solvers]


def check_seconds(name: str, value) -> float:
    """A time cap: a number >= 0 (``inf`` allowed)."""
    return check_real(name, value, 0.0, None, finite=False)


def check_choices(name: str, values: Sequence[str], choices: Sequence[str]) -> list[str]:
    """Every entry of ``values`` one of ``choices``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise OptplanTypeError(f"{name} must be a list, got {values!r}")
    for v in values:
        if v not in choices:
            raise OptplanError(f"{name} must hold entries of {tuple(choices)}, got {v!r}")
    return list(values)


def conic_quiet(problem, solver: str):
    """The conic path, without CVXPY's "Solution may be inaccurate" warning: the bench counts
    the statuses itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return problem.solve(method="conic", solver=solver)


def _child(problem, warmup, solver: str, conn) -> None:  # pragma: no cover - in the child
    try:
        conic_quiet(
            warmup, solver
        )  # untimed: the first solve in a fork copies the pages it touches
        conn.send(timed(lambda: conic_quiet(problem, solver)))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, re-raised there
        conn.send(exc)
    finally:
        conn.close()


def forkable() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def conic_capped(problem, warmup, solver: str, seconds: float):
    """``(result, wall seconds)`` of one conic solve, or ``(None, seconds)`` when it was still
    running after ``seconds`` (then the forked child that ran it is killed; in the child an
    untimed solve of the small ``warmup`` problem comes first). Without a finite
    cap, or where ``fork`` is unavailable, the solve runs in this process and is not
    interrupted."""
    if math.isinf(seconds) or not forkable():
        return timed(lambda: conic_quiet(problem, solver))
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(problem, warmup, solver, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(seconds):
            proc.kill()
            return None, seconds
        try:
            out = recv.recv()
        except EOFError:
            raise OptplanError(
                f"the {solver} solve died in its child process (exit code {proc.exitcode})"
            ) from None
    finally:
        proc.join()
        recv.close()
    if isinstance(out, BaseException):
        raise out
    return out


# The options most suites share: one definition each, so every suite's --help reads alike.
def add_sizes(parser: argparse.ArgumentParser, default: list[int], help: str) -> None:
    """``--sizes N [N ...]``: the problem sizes timed."""
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=default, help=help)


def add_actions(parser: argparse.ArgumentParser, default: int) -> None:
    """``--actions A`` (``dest="n_actions"``): actions per state."""
    parser.add_argument(
        "--actions",
        dest="n_actions",
        metavar="ACTIONS",
        type=positive_int,
        default=default,
        help="actions per state",
    )


def add_count(parser: argparse.ArgumentParser, flag: str, default: int, help: str) -> None:
    """A positive count such as ``--repeats`` or ``--instances``."""
    parser.add_argument(flag, type=positive_int, default=default, help=help)


def add_solvers(
    parser: argparse.ArgumentParser, nargs: str = "+", help: str = "conic solvers to time"
) -> None:
    """``--solvers NAME [NAME ...]`` (case-insensitive), all of them by default."""
    parser.add_argument(
        "--solvers", type=solver_name, nargs=nargs, default=list(SOLVERS), help=help
    )


def add_conic_cap(
    parser: argparse.ArgumentParser, default: float, help: str, metavar: str | None = None
) -> None:
    """``--max-conic-seconds T``: the suite's time cap on a conic solver."""
    parser.add_argument(
        "--max-conic-seconds",
        dest="max_conic_seconds",
        type=nonneg_seconds,
        default=default,
        metavar=metavar,
        help=help,
    )
