"""Helpers shared by the bench suites: timing, input checks, and the conic solves (quiet, or in
a forked child killed at a time cap)."""

from __future__ import annotations

import math
import multiprocessing
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._checks import OptplanError, OptplanTypeError, check_int, check_real
from ..problems.base import SOLVERS, check_solver
from ..result import OPTIMAL, SOLUTION_PRESENT

__all__ = [
    "timed",
    "timed_median",
    "timed_optimal",
    "check_sizes",
    "check_solvers",
    "check_seconds",
    "check_choices",
    "Runs",
    "conic_quiet",
    "conic_capped",
    "forkable",
]


def timed(fn: Callable):
    """``(fn(), wall seconds)``."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def time_conic(problem, solvers: Sequence[str], fast, times: dict, errs: dict, fails: dict):
    """Each conic solver of ``solvers`` on ``problem``: its wall time appended to
    ``times[solver]``, and the distance of its value to the fast result ``fast``'s kept in
    ``errs[solver]`` (the largest so far), or a failure (no solution) counted in
    ``fails[solver]``."""
    for solver in solvers:
        res, t = timed(lambda s=solver: problem.solve(method="conic", solver=s))
        times[solver].append(t)
        if res.status in SOLUTION_PRESENT:
            errs[solver] = max(errs[solver], abs(res.value - fast.value))
        else:
            fails[solver] += 1


#: Runs of a fast path per instance in :func:`timed_median`.
FAST_RUNS = 5


def timed_median(fn: Callable, runs: int = FAST_RUNS):
    """``(fn(), median wall seconds of runs)``: for millisecond solves timed next to forked
    conic children. After a ``fork`` every page the parent writes faults once (copy on write,
    even after the child has exited), so the first solve after each fork pays hundreds of
    page faults. The median of a few runs is the solve, not the fork's aftermath."""
    times, out = [], None
    for _ in range(runs):
        out, t = timed(fn)
        times.append(t)
    return out, float(statistics.median(times))


def timed_optimal(problem, path: str, timer: Callable = timed):
    """``(result, seconds)`` of ``problem``'s fast path timed by ``timer``; any status but
    optimal on a bench instance is an error naming the ``path``."""
    res, t = timer(lambda: problem.solve(method="fast"))
    if res.status != OPTIMAL:
        raise RuntimeError(f"{path}: {res.status} on a bench instance: {res.message}")
    return res, t


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


@dataclass(frozen=True)
class Runs:
    """What a suite times: ``repeats`` random instances with ``n_actions`` actions at each of
    ``sizes``, drawn from the root ``seed``, each solved by the fast path and by each of the
    conic ``solvers``.

    The suites that take it (``bench_planning``, ``bench_optimistic``, ``bench_ube``,
    ``bench_ravi``) each hold their defaults in a module constant ``RUNS``; the command line
    fills it from ``--sizes``, ``--actions``, ``--repeats`` (``--instances``), ``--solvers``
    and ``--seed``.
    """

    sizes: Sequence[int]
    n_actions: int = 4
    repeats: int = 3
    solvers: Sequence[str] = SOLVERS
    seed: int = 0

    def checked(self) -> Runs:
        """The same runs with every field checked, in the order of the fields (sizes and counts
        positive integers, known solver names as upper-case names, a seed >= 0)."""
        return Runs(
            check_sizes(self.sizes),
            check_int("n_actions", self.n_actions),
            check_int("repeats", self.repeats),
            check_solvers(self.solvers),
            check_int("seed", self.seed, 0),
        )
