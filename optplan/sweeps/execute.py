"""Run a sweep's tasks locally (joblib processes) or on Ray, into a resumable result store.

:func:`execute_task` is the unit of work: a pure function of the task's description (a
plain dict), so it runs unchanged in this process, a joblib worker or a Ray worker on another
machine, and gives bitwise the same result everywhere. Workers only compute; this process
writes each record as it arrives, so any backend works with a local output directory.

:func:`run_sweep` checks the output directory before any task runs (a file, a path under a
file, a directory of another sweep, a directory it cannot write: each an
:class:`~optplan._checks.OptplanError` naming the path), holds its lock for the whole run (a
second sweep on the same directory is refused at once with
:class:`~optplan.sweeps.store.StoreLocked`), and moves damaged records aside so that
their tasks run again (:meth:`~optplan.sweeps.store.ResultStore.quarantine`). It starts
the tasks it expects to be longest first (``optplan.sweeps.order``); the results do not
depend on the order.

Local workers (joblib's loky processes) end with the driver: an interrupt or an error in the
driver kills them (joblib aborts the pool), and each worker watches its parent from a
background thread (:func:`_exit_with_parent`, polled every :data:`PARENT_POLL_SECONDS`), so
they exit about a second after the driver is gone, even after a SIGKILL; loky's resource
trackers, which live as long as a process holds their pipe, follow at once. Without it (a
SIGKILLed driver) the workers finished their task and then idled for loky's 300 s timeout:
measured 355 s on a 2-core machine.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import modelfile
from .._checks import MissingDependency, OptplanError, check_int
from .._progress import progress_bar
from ..experiments.metrics import subsample_indices
from ..experiments.run import run
from . import registry
from .order import dispatch_order
from .store import DAMAGED_DIR, ResultStore
from .sweep import Sweep

__all__ = [
    "execute_task",
    "run_sweep",
    "worker_payloads",
    "SweepReport",
    "SweepInterrupted",
    "BACKENDS",
]

BACKENDS = ("local", "ray")
#: How often a local worker checks that the driver is still alive.
PARENT_POLL_SECONDS = 0.2
#: Exit status of a worker that outlived its driver.
ORPHAN_EXIT_CODE = 3
#: Retries of a Ray task whose worker or node died (Ray's ``max_retries``: system failures
#: only; a task's own error is recorded, not retried).
RAY_RETRIES = 3

_watching: int | None = None


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_sweep`: the finished tasks are kept (their records and the
    summary files are on disk) and the message says how many and where. A
    :class:`KeyboardInterrupt`, so code that stops on Ctrl-C still stops."""


def _worker_init(parent_pid: int) -> None:
    """Local worker initializer: leave Ctrl-C to the driver (a terminal's SIGINT reaches
    every process of the foreground group; the driver stops the workers itself, without a
    traceback from each), and exit with the driver (:func:`_exit_with_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent_pid)
    _one_blas_thread_per_worker()


def _one_blas_thread_per_worker() -> None:
    """One BLAS thread for the rest of this worker process (``jobs`` workers each starting a
    BLAS thread per core oversubscribe the machine; :mod:`.threads`); ``run`` sets the same
    limit around each agent run, in Ray workers too."""
    import scipy.linalg  # noqa: F401 - loaded before the limit, so that it is limited too
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _exit_with_parent(parent_pid: int, interval: float = PARENT_POLL_SECONDS) -> None:
    """Worker initializer: exit this process as soon as ``parent_pid`` is no longer its parent.

    On POSIX a process whose parent dies is re-parented (to init or a subreaper), so
    ``os.getppid()`` changes; a daemon thread polls it every ``interval`` seconds and calls
    ``os._exit`` (the worker's only state is the task in progress, which the driver can no
    longer record). Started once per process. A no-op where ``getppid`` does not change on
    the parent's death (Windows) or when called in the driver itself.
    """
    global _watching
    if os.name != "posix" or parent_pid == os.getpid() or _watching == parent_pid:
        return
    _watching = parent_pid

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(ORPHAN_EXIT_CODE)

    threading.Thread(target=watch, name="optplan-exit-with-parent", daemon=True).start()


def execute_task(task: dict) -> tuple[dict, dict]:
    """Build the task's environment and agent, run it, and return ``(record, arrays)``.

    Never raises for a failure of the task itself: the record then has ``status = "error"``,
    the error message and the traceback, and empty arrays.
    """
    record = {
        "format": 1,
        "index": task["index"],
        "task_id": task["task_id"],
        "agent": task["agent"],
        "env": task["env"],
        "seed_index": task["seed_index"],
        "seed": task["seed"],
        "host": platform.node(),
        "pid": os.getpid(),
    }
    start = time.perf_counter()
    try:
        _prepare_worker(task)
        env_cfg, agent_cfg = task["env"], task["agent"]
        with modelfile.shipped(task.get("files", {})):
            env = registry.get_env(env_cfg["name"]).build(task["seed_index"], **env_cfg["params"])
            agent = registry.make_agent(
                agent_cfg["name"], env, task["criterion"], **agent_cfg["params"]
            )
        trace = run(
            agent,
            env,
            steps=task["steps"],
            episodes=task["episodes"],
            seed=task["seed"],
            criterion=task["criterion"],
            stop_when_solved=task["stop_when_solved"],
            oracle_noise=task.get("oracle_noise", "shared"),
        )
    except Exception as exc:  # a failing task is recorded, never stops the sweep
        record.update(
            status="error",
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
            summary={"wall_time": time.perf_counter() - start},
        )
        return record, {}
    idx = subsample_indices(trace.steps, task["curve_points"], task["curve_scale"])
    t = idx + 1
    episodes_by_t = np.searchsorted(trace.episode_ends, t, side="right")
    arrays = {
        "t": t.astype(np.int64),
        "episodes": episodes_by_t.astype(np.int64),
        "regret": trace.regret[idx],
        "realized_regret": trace.realized_regret[idx],
        "gap_regret": trace.gap_regret[idx],
        "normalized_regret": trace.normalized_regret[idx],
        "visits": trace.visits,
    }
    if trace.occupancy_regret is not None:
        arrays["occupancy_regret"] = trace.occupancy_regret[idx]
    summary = trace.summary()
    stats = getattr(agent, "stats", None)
    if callable(stats):  # agent-side counters (e.g. conic fallbacks), prefixed
        summary.update({f"agent_{k}": v for k, v in stats().items()})
    summary["wall_time"] = time.perf_counter() - start
    record.update(status="ok", error=None, traceback=None, summary=summary)
    return record, arrays


#: The names optplan registers itself (this module is imported with the package, before any
#: user code registers more): a worker knows them without help.
_BUILTIN = {"agents": frozenset(registry.AGENTS), "envs": frozenset(registry.ENVS)}


def _prepare_worker(task: dict) -> None:
    """Import the task's modules and register the user components shipped with it, so that
    a worker process knows every name the sweep's driver knew (a no-op when they are known:
    imports are cached, registered names are kept)."""
    for path in task.get("sys_path", ()):
        if path not in sys.path:  # appended: never shadows the worker's own packages
            sys.path.append(path)
    for name in task.get("imports", ()):
        try:
            registry.import_user_module(name)
        except Exception as exc:
            raise OptplanError(
                f"worker {platform.node()}:{os.getpid()} cannot import {name!r} (a module the "
                f"sweep's agents or environments come from; it must be importable there, e.g. "
                f"on PYTHONPATH): {type(exc).__name__}: {exc}"
            ) from None
    for kind, comp in task.get("components", ()):
        registry.ensure_registered(kind, comp)


def worker_payloads(sweep: Sweep, tasks) -> list[dict]:
    """The tasks as workers receive them: :meth:`Task.to_dict` plus what a fresh process
    needs to know the sweep's user components.

    ``imports`` gains the module of every user (non-optplan) agent or environment the sweep
    uses, so a worker imports it (and runs its registrations) first, with the directories the
    driver imported those modules (and the import paths' modules) from in ``sys_path``
    (appended to the worker's ``sys.path`` where missing: a loky worker started before the
    user's module existed, a local Ray worker); a component defined in
    the driver's script (``__main__``), which a worker cannot import, is shipped itself in
    ``components`` (pickled by value by loky's and Ray's cloudpickle).
    """
    modules = list(sweep.imports)
    shipped = []
    for kind, configs, get in (
        ("agents", sweep.agents, registry.get_agent),
        ("envs", sweep.envs, registry.get_env),
    ):
        builtin = _BUILTIN[kind]
        for name in dict.fromkeys(c.name for c in configs):
            if name in builtin or ":" in name:  # known everywhere / an import path resolves
                continue
            comp = get(name)
            module = getattr(comp.build, "__module__", None) or "__main__"
            if module == "__main__" or module.split(".")[0] == "optplan":
                shipped.append((kind, comp))  # not importable / not registered by an import
            else:
                modules.append(module)
    modules = list(dict.fromkeys(modules))
    paths = [
        _module_root(m)
        for m in modules
        + [c.name.partition(":")[0] for c in (*sweep.agents, *sweep.envs) if ":" in c.name]
    ]
    paths = [p for p in dict.fromkeys(paths) if p]
    files = _files(sweep)
    out = []
    for t in tasks:
        payload = t.to_dict()
        payload["imports"] = modules
        payload["sys_path"] = paths
        if shipped:
            payload["components"] = shipped
        mine = {
            key: files[key]
            for side in ("agent", "env")
            for key in _file_values(payload[side], side)
            if files.get(key) is not None
        }
        if mine:
            payload["files"] = mine
        out.append(payload)
    return out


def _file_values(config: dict, side: str) -> list[str]:
    """The files a task's agent or environment configuration names (its parameters declared
    ``Param(file=True)``), as :func:`optplan.modelfile.shipped` keys them."""
    get = registry.get_agent if side == "agent" else registry.get_env
    try:
        params = get(config["name"]).params
    except OptplanError:  # unknown here: the worker reports it
        return []
    values = (config["params"].get(p.name) for p in params if p.file)
    return [str(Path(v)) for v in values if isinstance(v, str) and v]


def _files(sweep: Sweep) -> dict[str, bytes | None]:
    """Every file the sweep's components name, read once by the driver (relative paths from
    its working directory, as the sweep file says): the tasks carry them to the workers,
    wherever those run. A file the driver cannot read is not sent; the worker then reports
    its own error for the task."""
    out: dict[str, bytes | None] = {}
    for side, configs in (("agent", sweep.agents), ("env", sweep.envs)):
        for c in configs:
            for key in _file_values({"name": c.name, "params": c.params}, side):
                if key not in out:
                    out[key] = modelfile.read_shippable(key)
    return out


def _module_root(name: str) -> str | None:
    """The directory a worker needs on ``sys.path`` to import module ``name`` as the driver
    did (where its top-level package or module lives), or ``None`` if unknown."""
    top = sys.modules.get(name.split(".")[0])
    file = getattr(top, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    return str(path.parent.parent if path.name == "__init__.py" else path.parent)


@dataclass
class SweepReport:
    """What :func:`run_sweep` did."""

    total: int
    skipped: int
    ran: int
    failed: int
    wall_time: float
    summary_path: Path
    curves_path: Path
    #: Damaged records moved to ``damaged/`` (their tasks are among those run).
    damaged: int = 0

    def __str__(self) -> str:
        text = (
            f"{self.total} tasks: {self.skipped} already finished, {self.ran} run "
            f"({self.failed} failed) in {self.wall_time:.1f} s; summary {self.summary_path}"
        )
        if self.damaged:
            text += (
                f"; {self.damaged} damaged record(s) moved to "
                f"{self.summary_path.parent / DAMAGED_DIR} and run again"
            )
        return text


def _progress(total: int, quiet: bool, desc: str):
    return progress_bar(total=total, desc=desc, unit="task", disable=quiet)


def _local(payloads: list[dict], jobs: int):
    from joblib import Parallel, delayed

    if jobs == 1:  # in-process: no worker start-up, easy to debug
        for p in payloads:
            yield execute_task(p)
        return
    par = Parallel(
        n_jobs=jobs,
        backend="loky",
        return_as="generator_unordered",
        batch_size=1,
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    # On an exception or an interrupt in the loop of the caller, closing this generator
    # closes joblib's, which kills the workers (abort_everything(kill_workers=True)).
    yield from par(delayed(execute_task)(p) for p in payloads)


def _ray(payloads: list[dict], jobs: int | None, address: str | None):
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the environment
        raise MissingDependency("the ray backend needs Ray: pip install 'optplan[ray]'") from None
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "log_to_driver": False}
        if address:
            # Ship this package to the cluster's workers (its dependencies must be there).
            package = Path(__file__).resolve().parents[1]
            kwargs["runtime_env"] = {"py_modules": [str(package)]}
            try:
                ray.init(address=address, **kwargs)
            except ConnectionError as exc:  # no cluster there: say so, not Ray's traceback
                raise OptplanError(
                    f"no Ray cluster found at address {address!r} ({exc}); start one with "
                    "`ray start --head`, or drop --address to run on a local Ray instance"
                ) from None
        else:
            ray.init(num_cpus=jobs or os.cpu_count(), **kwargs)
        started = True
    try:
        # Ray retries a task whose worker or node died (a system failure) up to RAY_RETRIES
        # times; a task's own error is a record that execute_task returns, never retried
        remote = ray.remote(num_cpus=1, max_retries=RAY_RETRIES)(execute_task)
        pending = {remote.remote(p): p for p in payloads}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            payload = pending.pop(ref)
            try:
                yield ray.get(ref)
            except Exception as exc:  # worker died (e.g. out of memory): record it
                yield _crashed(payload, exc)
    finally:
        if started:
            ray.shutdown()


def _crashed(payload: dict, exc: Exception) -> tuple[dict, dict]:
    rec = {
        "format": 1,
        "index": payload["index"],
        "task_id": payload["task_id"],
        "agent": payload["agent"],
        "env": payload["env"],
        "seed_index": payload["seed_index"],
        "seed": payload["seed"],
        "status": "error",
        "error": f"worker failed: {type(exc).__name__}: {exc}",
        "traceback": None,
        "summary": {},
    }
    return rec, {}


def run_sweep(
    sweep: Sweep,
    out,
    backend: str = "local",
    jobs: int = 1,
    address: str | None = None,
    quiet: bool = False,
    retry_failed: bool = False,
) -> SweepReport:
    """Run every task of ``sweep`` not yet finished in ``out``, then write the summaries.

    Parameters
    ----------
    sweep : Sweep
    out : path
        Result directory (:class:`~optplan.sweeps.store.ResultStore`). Finished tasks
        found there are skipped; damaged records are moved to ``out/damaged/`` (with a
        :class:`~optplan.sweeps.store.StoreWarning` each) and their tasks run again.
    backend : {"local", "ray"}
        ``"local"``: joblib worker processes (``jobs`` of them; ``1`` runs in this process),
        which exit when this process ends, however it ends.
        ``"ray"``: Ray tasks, on a local Ray instance with ``jobs`` CPUs, or on the cluster at
        ``address`` (e.g. ``"auto"`` or ``"ray://host:10001"``).
    jobs : int
        Parallel workers (local) or CPUs of the local Ray instance.
    quiet : bool
        No progress bar.
    retry_failed : bool
        Run again the tasks whose record says ``error`` (default: they count as finished).

    Notes
    -----
    The pending tasks start longest expected first, not in grid order
    (``optplan.sweeps.order.dispatch_order``, for both backends: joblib and Ray receive
    them in that order), so that no worker idles at the end while the largest environment's
    runs finish. The estimate needs no run: (state-action pairs of the environment's true
    model, times the horizon of a finite-horizon model) x (``steps``, or ``episodes`` x the
    horizon), from each environment configuration built once in this process (12 builds for
    the 300 tasks of ``k-learning-fig2.toml``). Ties keep grid order. A task
    whose environment cannot be built here has an unknown cost and starts first, in grid order
    among such tasks. Records, ``summary.csv`` and ``curves.npz`` (ordered by task index) are
    the same in any order.

    Returns
    -------
    SweepReport

    Raises
    ------
    OptplanError
        Before any task runs: bad arguments; ``out`` is a file, lies under a file, or cannot
        be written. :class:`~optplan.sweeps.store.StoreMismatch`: ``out`` holds another
        sweep or foreign files. :class:`~optplan.sweeps.store.StoreLocked`: another
        sweep is running into ``out`` (the lock is not waited for).
    """
    if backend not in BACKENDS:
        raise OptplanError(f"backend must be one of {BACKENDS}, got {backend!r}")
    check_int("jobs", jobs)
    if address is not None and backend != "ray":
        raise OptplanError("address applies to the ray backend only (--backend ray)")
    if backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise MissingDependency("the ray backend needs Ray: pip install 'optplan[ray]'")
    store = ResultStore(out)
    store.check(sweep)  # refuse a file / another sweep before creating anything
    with store.lock():
        store.prepare(sweep)
        damaged = store.quarantine()
        return _run_pending(store, sweep, backend, jobs, address, quiet, retry_failed, damaged)


def _run_pending(store, sweep, backend, jobs, address, quiet, retry_failed, damaged):
    out = store.root
    tasks = sweep.tasks()
    done = {
        r["task_id"] for r in store.records(warn=False) if r["status"] == "ok" or not retry_failed
    }
    pending = dispatch_order([t for t in tasks if t.task_id not in done])
    stems = {t.task_id: t.file_stem for t in pending}
    payloads = worker_payloads(sweep, pending)

    start = time.perf_counter()
    failed = 0
    skipped = len(tasks) - len(pending)
    if not quiet and skipped:
        print(
            f"{skipped} of {len(tasks)} tasks already finished in {out}; skipping them",
            file=sys.stderr,
        )
    bar = _progress(len(pending), quiet or not pending, sweep.name)
    results = _local(payloads, jobs) if backend == "local" else _ray(payloads, jobs, address)
    try:
        for record, arrays in results:
            store.save(stems[record["task_id"]], record, arrays)
            failed += record["status"] != "ok"
            bar.update(1)
            bar.set_postfix(done=bar.n, failed=failed, refresh=False)
    except KeyboardInterrupt:
        results.close()  # stop the workers before writing anything else
        bar.close()
        finished, note = len(store.records(warn=False)), ""
        try:
            store.write_summary()  # the finished tasks, readable by optplan results / plot
        except KeyboardInterrupt:  # a second Ctrl-C: the task files are kept all the same
            note = "; interrupted again while writing the summary, which the resumed run rewrites"
        raise SweepInterrupted(
            f"interrupted: {finished} of {len(tasks)} tasks finished, results kept in "
            f"{out} (run the same command again to resume{note})"
        ) from None
    finally:
        results.close()  # on an error or interrupt: stops the workers now, not at gc
        bar.close()
    summary, curves = store.write_summary()
    return SweepReport(
        total=len(tasks),
        skipped=skipped,
        ran=len(pending),
        failed=failed,
        wall_time=time.perf_counter() - start,
        summary_path=summary,
        curves_path=curves,
        damaged=len(damaged),
    )
