"""The result store of a sweep: one directory, one atomic record per finished task.

Layout of ``OUT/``::

    sweep.json       normalized sweep specification and its fingerprint (written first)
    sweep.lock       held while a sweep runs: pid, host and start time of the holder
    tasks/<h>.json   one record per finished task: ids, parameters, status, error, scalars
    tasks/<h>.npz    its curves (subsampled regret curves, visit counts)
    damaged/         records found unreadable, moved aside (never deleted); their tasks re-run
    summary.csv      one row per finished task (rewritten from the records)
    curves.npz       every task's curves in long (columnar) form

Each record is written to a temporary file, flushed to disk and renamed into place
(``os.replace`` is atomic on POSIX and Windows), the arrays before the JSON: a task counts as
finished exactly when its JSON exists, and a crash leaves at most a stray temporary file,
which the next run deletes. Re-running a sweep into the same directory resumes it; a
directory holding a *different* sweep is refused.

**Damage.** A record damaged after the fact (a truncated or otherwise unreadable JSON, a
curve file that is missing, truncated or fails its CRC, a record without the fields a record
has) is never fatal. Readers (:func:`load_results`, ``optplan results``, ``optplan plot``)
skip it with a :class:`StoreWarning` naming the file and list it in
:attr:`Results.damaged`; they change nothing on disk. A sweep run into the directory
(:meth:`ResultStore.quarantine`, called by :func:`~optplan.experiments.execute.run_sweep`)
moves the task's files to ``damaged/`` (renamed ``<name>.1``, ``.2`` ... if that name is
taken) and runs the task again.

**Lock.** :meth:`ResultStore.lock` takes an exclusive ``flock`` on ``sweep.lock`` (POSIX;
released by the kernel when the holder dies, whatever the signal) and writes the holder's
pid, host and start time into it. A second sweep on the same directory does not wait: it
raises :class:`StoreLocked` at once, naming the directory and the holder. A lock file left by
a holder that died (SIGKILL, power loss) is not held, so the next sweep takes it over and
says so with a :class:`StoreWarning`. Platforms without ``fcntl`` (Windows) run unlocked.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import platform
import socket
import sys
import time
import warnings
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._checks import OptplanError
from .sweep import Sweep

__all__ = [
    "ResultStore",
    "Results",
    "StoreMismatch",
    "StoreLocked",
    "StoreWarning",
    "DamagedRecord",
    "load_results",
    "SUMMARY_COLUMNS",
    "CURVE_KEYS",
    "OPTIONAL_CURVE_KEYS",
    "PLOT_CURVE_KEYS",
    "TIMING_COLUMNS",
]

FORMAT = 1

#: Summary columns before the agent/env parameter columns.
_ID_COLUMNS = ("index", "task_id", "agent", "env")
#: Summary columns after them.
SUMMARY_COLUMNS = (
    "seed_index",
    "seed",
    "criterion",
    "steps",
    "episodes",
    "regret",
    "realized_regret",
    "occupancy_regret",
    "gap_regret",
    "normalized_regret",
    "draft_regret",
    "draft_normalized_regret",
    "time_to_solve",
    "goal_rate",
    "optimal_rate",
    "agent_fallbacks",
    "wall_time",
    "status",
    "error",
)
#: Columns that measure the machine, not the result: excluded when comparing two stores.
TIMING_COLUMNS = ("wall_time",)
#: Step-indexed curves stored per task (each at the subsampled steps ``t``).
CURVE_KEYS = ("regret", "realized_regret", "gap_regret", "normalized_regret")
#: Curves stored only for the tasks that have them: ``occupancy_regret`` (discounted criterion,
#: an agent exposing its policy; :mod:`.metrics`). ``curves.npz`` holds them with ``NaN`` for
#: the other tasks.
OPTIONAL_CURVE_KEYS = ("occupancy_regret",)
#: Every curve a figure may ask for.
PLOT_CURVE_KEYS = (*CURVE_KEYS, *OPTIONAL_CURVE_KEYS)


#: The lock file's name in the result directory.
LOCK_NAME = "sweep.lock"
#: Where damaged records are moved (inside the result directory).
DAMAGED_DIR = "damaged"
#: Arrays every ``ok`` record's curve file holds.
_ARRAY_KEYS = ("t", "episodes", *CURVE_KEYS, "visits")


class StoreMismatch(OptplanError):
    """The output directory holds results of a different sweep."""


class StoreLocked(OptplanError):
    """Another sweep is running into the same output directory (it holds ``sweep.lock``)."""


class StoreWarning(UserWarning):
    """A damaged record skipped or moved aside, or a stale lock taken over."""


@dataclass(frozen=True)
class DamagedRecord:
    """A task record that could not be read: the file, why, and where it was moved (if)."""

    path: Path
    reason: str
    stem: str
    moved_to: tuple[Path, ...] = ()

    def __str__(self) -> str:
        text = f"{self.path}: {self.reason}"
        if self.moved_to:
            text += f"; moved to {', '.join(str(p) for p in self.moved_to)}"
        return text

    def to_dict(self) -> dict:
        return {
            "path": str(self.path),
            "reason": self.reason,
            "moved_to": [str(p) for p in self.moved_to],
        }


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or "no detail"
    return f"{type(exc).__name__}: {text}"


def _check_record(rec) -> str | None:
    """Why ``rec`` (a parsed JSON record) is not a usable record, or ``None``."""
    if not isinstance(rec, dict):
        return f"not a record (a JSON {type(rec).__name__})"
    need = ("index", "task_id", "agent", "env", "seed_index", "seed", "status")
    missing = [k for k in need if k not in rec]
    if missing:
        return f"record lacks {', '.join(missing)}"
    if not isinstance(rec["index"], int) or isinstance(rec["index"], bool):
        return f"record index is {rec['index']!r}, not an integer"
    if not isinstance(rec["task_id"], str):
        return f"record task_id is {rec['task_id']!r}, not a string"
    for side in ("agent", "env"):
        part = rec[side]
        if not (
            isinstance(part, dict) and "label" in part and isinstance(part.get("params"), dict)
        ):
            return f"record field {side!r} lacks a label or params"
    if rec["status"] not in ("ok", "error"):
        return f"record status is {rec['status']!r}, not 'ok' or 'error'"
    if rec["status"] == "ok" and not isinstance(rec.get("summary"), dict):
        return "record of a finished task lacks its summary"
    return None


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _check_arrays(path: Path) -> str | None:
    """Why the curve file ``path`` of an ``ok`` record is unusable, or ``None``."""
    if not path.exists():
        return "curve file missing (its record says the task finished)"
    try:
        arr = _read_arrays(path)  # reads every member: a truncation or a bad CRC raises
    except PermissionError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        return f"unreadable curve file ({_reason(exc)})"
    missing = [k for k in _ARRAY_KEYS if k not in arr]
    if missing:
        return f"curve file lacks {', '.join(missing)}"
    n = arr["t"].shape
    keys = ("episodes", *CURVE_KEYS, *(k for k in OPTIONAL_CURVE_KEYS if k in arr))
    if len(n) != 1 or n[0] == 0 or any(arr[k].shape != n for k in keys):
        return "curve file holds curves of inconsistent or empty shape"
    return None


def _free_name(folder: Path, name: str) -> Path:
    target = folder / name
    n = 0
    while target.exists():
        n += 1
        target = folder / f"{name}.{n}"
    return target


def _write_failure(root: Path, exc: OSError) -> OptplanError:
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(root) else ""
    return OptplanError(f"out {str(root)!r} is not writable: {reason}{where}")


@dataclass
class _Scan:
    records: list[dict]
    damaged: list[DamagedRecord] = field(default_factory=list)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, allow_nan=True) + "\n").encode()


def _diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, "<missing>"), b.get(key, "<missing>")
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: {json.dumps(va)} here vs {json.dumps(vb)} in the file")
    return out


class ResultStore:
    """Read and write the records of one sweep in directory ``root``."""

    def __init__(self, root) -> None:
        self.root = Path(root)
        self.tasks_dir = self.root / "tasks"
        self.lock_path = self.root / LOCK_NAME
        self.damaged_dir = self.root / DAMAGED_DIR

    # -- setup ---------------------------------------------------------------------------------
    def check(self, sweep: Sweep) -> None:
        """Refuse ``root`` for ``sweep`` without writing anything.

        Raises
        ------
        OptplanError
            If ``root`` is an existing regular file, or lies under one.
        StoreMismatch
            If ``root`` holds another sweep (its ``sweep.json`` has another fingerprint), or
            holds files but no ``sweep.json``. Says what differs.
        """
        root = self.root
        if root.exists() and not root.is_dir():
            raise OptplanError(f"out must be a directory, got the file {str(root)!r}")
        ancestor = root
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OptplanError(
                f"out {str(root)!r} cannot be created: {str(ancestor)!r} is a file, not a directory"
            )
        spec = {"format": FORMAT, "fingerprint": sweep.fingerprint(), "sweep": sweep.to_dict()}
        meta = root / "sweep.json"
        if meta.exists():
            try:
                old = json.loads(meta.read_text())
                if not isinstance(old, dict):
                    raise ValueError(f"a JSON {type(old).__name__}, not an object")
            except (OSError, ValueError) as exc:
                raise StoreMismatch(f"{meta} is unreadable ({exc}); use another --out") from None
            if old.get("fingerprint") != spec["fingerprint"]:
                diffs = _diff(old.get("sweep", {}), spec["sweep"])
                shown = "; ".join(diffs[:5]) + (" ..." if len(diffs) > 5 else "")
                raise StoreMismatch(
                    f"{root} holds results of a different sweep "
                    f"({old.get('sweep', {}).get('name')!r}, fingerprint "
                    f"{str(old.get('fingerprint'))[:12]}) than {sweep.source} "
                    f"(fingerprint {spec['fingerprint'][:12]}): {shown}. Refusing to mix them; "
                    f"use another --out or delete the directory."
                )
        elif root.is_dir() and any(p.name != LOCK_NAME for p in root.iterdir()):
            raise StoreMismatch(
                f"{root} is not empty and holds no sweep.json: not a result directory "
                f"of optplan sweep; use another --out"
            )

    def prepare(self, sweep: Sweep) -> None:
        """Create the directory for ``sweep``, or check that it already belongs to it.

        Checks as :meth:`check` does, then writes ``sweep.json`` (new directory), creates
        ``tasks/``, checks that it is writable, and deletes stray temporary files of an
        interrupted write. Call it holding :meth:`lock` (another sweep's temporary files are
        not strays).

        Raises
        ------
        StoreMismatch, OptplanError
            As :meth:`check`; ``OptplanError`` also when ``root`` is not writable.
        """
        self.check(sweep)
        spec = {"format": FORMAT, "fingerprint": sweep.fingerprint(), "sweep": sweep.to_dict()}
        meta = self.root / "sweep.json"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not meta.exists():
                _atomic_write(meta, _json_bytes(spec))
            self.tasks_dir.mkdir(exist_ok=True)
            probe = self.tasks_dir / f".write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise _write_failure(self.root, exc) from exc
        for stray in self.tasks_dir.glob(".*.tmp-*"):
            stray.unlink(missing_ok=True)

    @contextmanager
    def lock(self):
        """Hold ``sweep.lock`` for the duration of the ``with`` block (see the module doc).

        Creates ``root`` if needed. The lock is an ``flock`` on the file, which the kernel
        drops when the holder exits in any way; the file's contents (pid, host, start time,
        command) only serve the messages. Released (and the file removed) on exit.

        Raises
        ------
        StoreLocked
            At once, if another live process holds the lock; names the directory and the
            holder.
        OptplanError
            If ``root`` (or the lock file) cannot be created or written.

        Warns
        -----
        StoreWarning
            When it takes over a lock file left by a sweep that is no longer running.
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks here
            fcntl = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _write_failure(self.root, exc) from exc
        if fcntl is None:  # pragma: no cover
            yield self
            return
        fd = None
        for _ in range(100):  # retry while the file is replaced under us (a holder releasing)
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise _write_failure(self.root, exc) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                raise StoreLocked(
                    f"out {str(self.root)!r} is in use by another sweep: {holder} holds "
                    f"{self.lock_path}. Wait for it to finish (or stop it), or use another --out"
                ) from None
            except OSError as exc:  # a filesystem without locks (some network mounts)
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    os.close(fd)
                    raise
                warnings.warn(
                    f"cannot lock {self.lock_path} ({exc.strerror}); a concurrent sweep into "
                    f"{self.root} would not be refused",
                    StoreWarning,
                    stacklevel=3,
                )
                break
            try:
                same = os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
            fd = None
        if fd is None:  # pragma: no cover - 100 consecutive releases under us
            raise StoreLocked(f"out {str(self.root)!r}: could not take {self.lock_path}")
        old = self._holder(fd, raw=True)
        if old:
            warnings.warn(
                f"took over the lock {self.lock_path} left by "
                f"{self._holder(fd)}, which is no longer running",
                StoreWarning,
                stacklevel=3,
            )
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname() or platform.node(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "command": " ".join(sys.argv)[:500],
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _json_bytes(info), 0)
        except OSError as exc:
            os.close(fd)
            raise _write_failure(self.root, exc) from exc
        try:
            yield self
        finally:
            try:
                os.unlink(self.lock_path)  # while still holding it (see the inode check above)
            except OSError:
                pass
            os.close(fd)

    @staticmethod
    def _holder(fd: int, raw: bool = False):
        """The holder named in the lock file open at ``fd`` (``raw``: its bytes)."""
        try:
            data = os.pread(fd, 4096, 0)
        except OSError:
            data = b""
        if raw:
            return data
        try:
            info = json.loads(data)
            return (
                f"pid {info['pid']} on host {info['host']} (since {info['started']}: "
                f"{info.get('command') or '?'})"
            )
        except (ValueError, KeyError, TypeError):
            return "an unknown process"

    # -- records -------------------------------------------------------------------------------
    def save(self, stem: str, record: dict, arrays: dict) -> None:
        """Write one task's arrays, then its record (the commit point), each atomically."""
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        _atomic_write(self.tasks_dir / f"{stem}.npz", buf.getvalue())
        _atomic_write(self.tasks_dir / f"{stem}.json", _json_bytes(record))

    def scan(self) -> _Scan:
        """Every readable record (ordered by task index) and every damaged one; reads only.

        A record is damaged when its JSON cannot be parsed or lacks a record's fields, or
        (status ``ok``) its curve file is missing, unreadable (every member is read, so a
        truncation or a bad CRC shows) or lacks a curve.
        """
        out, damaged = [], []
        if self.tasks_dir.is_dir():
            for path in sorted(self.tasks_dir.glob("*.json")):
                try:
                    rec = json.loads(path.read_bytes())
                except PermissionError:
                    raise
                except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
                    damaged.append(
                        DamagedRecord(path, f"unreadable JSON ({_reason(exc)})", path.stem)
                    )
                    continue
                why = _check_record(rec)
                if why is not None:
                    damaged.append(DamagedRecord(path, why, path.stem))
                    continue
                if rec["status"] == "ok":
                    npz = path.with_suffix(".npz")
                    why = _check_arrays(npz)
                    if why is not None:
                        damaged.append(DamagedRecord(npz, why, path.stem))
                        continue
                rec["_stem"] = path.stem
                out.append(rec)
        return _Scan(sorted(out, key=lambda r: r["index"]), damaged)

    def records(self, warn: bool = True) -> list[dict]:
        """Every readable record, ordered by task index; damaged ones skipped (warned)."""
        scan = self.scan()
        if warn:
            _warn_skipped(scan.damaged, stacklevel=3)
        return scan.records

    def quarantine(self, damaged: list[DamagedRecord] | None = None) -> list[DamagedRecord]:
        """Move every damaged record's files (``.npz``, then ``.json``) to ``damaged/``.

        Nothing is deleted: a name already taken there gets a ``.1``, ``.2`` ... suffix. The
        tasks then count as unfinished. Call it holding :meth:`lock`. Warns (a
        :class:`StoreWarning` per record, naming the file, the reason and the new place) and
        returns the moved records.
        """
        if damaged is None:
            damaged = self.scan().damaged
        moved = []
        for d in damaged:
            targets = []
            try:
                self.damaged_dir.mkdir(exist_ok=True)
                for src in (self.tasks_dir / f"{d.stem}.npz", self.tasks_dir / f"{d.stem}.json"):
                    if src.exists():
                        dst = _free_name(self.damaged_dir, src.name)
                        os.replace(src, dst)
                        targets.append(dst)
            except OSError as exc:
                raise _write_failure(self.root, exc) from exc
            rec = DamagedRecord(d.path, d.reason, d.stem, tuple(targets))
            warnings.warn(
                f"damaged record {rec}; its task will be run again", StoreWarning, stacklevel=2
            )
            moved.append(rec)
        return moved

    def arrays(self, stem: str) -> dict[str, np.ndarray]:
        """The arrays of the task whose record file is ``tasks/<stem>.json``."""
        return _read_arrays(self.tasks_dir / f"{stem}.npz")

    def sweep_spec(self) -> dict:
        """The ``sweep.json`` contents (``format``, ``fingerprint``, ``sweep``).

        Raises
        ------
        OptplanError
            If ``root`` is not a result directory or its ``sweep.json`` is unreadable.
        """
        meta = self.root / "sweep.json"
        if not self.root.is_dir():
            raise OptplanError(f"result directory {str(self.root)!r} does not exist or is a file")
        if not meta.exists():
            raise OptplanError(f"{self.root} holds no sweep.json: not a sweep result")
        try:
            spec = json.loads(meta.read_bytes())
            missing = [k for k in ("agents", "envs", "seeds", "name") if k not in spec["sweep"]]
            if missing:
                raise KeyError(", ".join(missing))
        except PermissionError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise OptplanError(f"{meta} is unreadable ({_reason(exc)})") from None
        return spec

    # -- summaries -----------------------------------------------------------------------------
    def write_summary(self) -> tuple[Path, Path]:
        """(Re)write ``summary.csv`` and ``curves.npz`` from the readable records on disk."""
        records = self.records()
        rows = [summary_row(r) for r in records]
        columns = summary_columns(rows)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_cell(row.get(k)) for k in columns})
        summary = self.root / "summary.csv"
        _atomic_write(summary, text.getvalue().encode())

        cols: dict[str, list] = {k: [] for k in ("task", "t", "episodes", *CURVE_KEYS)}
        optional: dict[str, list] = {k: [] for k in OPTIONAL_CURVE_KEYS}
        for rec in records:
            if rec["status"] != "ok":
                continue
            arr = self.arrays(rec["_stem"])
            n = arr["t"].size
            cols["task"].append(np.full(n, rec["index"], dtype=np.int64))
            for k in ("t", "episodes", *CURVE_KEYS):
                cols[k].append(arr[k])
            for k in OPTIONAL_CURVE_KEYS:
                optional[k].append(arr[k] if k in arr else np.full(n, np.nan))
        for k, parts in optional.items():  # only when some task has the curve
            if any(np.isfinite(p).any() for p in parts):
                cols[k] = parts
        curves = {k: np.concatenate(v) if v else np.zeros(0, dtype=float) for k, v in cols.items()}
        curves["task_index"] = np.array([r["index"] for r in records], dtype=np.int64)
        curves["task_id"] = np.array([r["task_id"] for r in records], dtype=str)
        buf = io.BytesIO()
        np.savez_compressed(buf, **curves)
        path = self.root / "curves.npz"
        _atomic_write(path, buf.getvalue())
        return summary, path


def _warn_skipped(damaged: list[DamagedRecord], stacklevel: int = 2) -> None:
    for d in damaged:
        warnings.warn(
            f"skipped damaged record {d} (its task counts as unfinished)",
            StoreWarning,
            stacklevel=stacklevel + 1,
        )


def _csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


def summary_row(rec: dict) -> dict:
    """The flat summary row of a record: ids, ``agent.*``/``env.*`` parameters, scalars."""
    s = rec.get("summary") or {}
    row = {
        "index": rec["index"],
        "task_id": rec["task_id"],
        "agent": rec["agent"]["label"],
        "env": rec["env"]["label"],
        "seed_index": rec["seed_index"],
        "seed": rec["seed"],
        "criterion": s.get("criterion"),
        "status": rec["status"],
        "error": rec.get("error"),
    }
    for k in SUMMARY_COLUMNS:
        if k not in row:
            row[k] = s.get(k)
    for side in ("agent", "env"):
        for k, v in rec[side]["params"].items():
            row[f"{side}.{k}"] = v
    return row


def summary_columns(rows: list[dict]) -> list[str]:
    """Column order: ids, then sorted ``agent.*`` and ``env.*``, then :data:`SUMMARY_COLUMNS`."""
    params = sorted({k for r in rows for k in r if k.startswith(("agent.", "env."))})
    agent_cols = [k for k in params if k.startswith("agent.")]
    env_cols = [k for k in params if k.startswith("env.")]
    return [*_ID_COLUMNS, *agent_cols, *env_cols, *SUMMARY_COLUMNS]


@dataclass
class Results:
    """A sweep's results as read back from its directory (:func:`load_results`)."""

    root: Path
    spec: dict
    records: list[dict]
    #: Records skipped because they could not be read (see the module doc).
    damaged: list[DamagedRecord] = field(default_factory=list)

    @property
    def rows(self) -> list[dict]:
        """Summary rows, one per finished task, ordered by task index."""
        return [summary_row(r) for r in self.records]

    @property
    def n_tasks(self) -> int:
        """Tasks the sweep defines (finished or not)."""
        sw = self.spec["sweep"]
        return len(sw["agents"]) * len(sw["envs"]) * len(sw["seeds"])

    def arrays(self, record: dict) -> dict[str, np.ndarray]:
        return ResultStore(self.root).arrays(record["_stem"])

    def groups(self) -> dict[tuple[str, str], list[dict]]:
        """Finished ``ok`` records grouped by (agent label, env label), in sweep order."""
        out: dict[tuple[str, str], list[dict]] = {}
        for r in self.records:
            if r["status"] == "ok":
                out.setdefault((r["agent"]["label"], r["env"]["label"]), []).append(r)
        return out

    def curve_matrix(self, records: list[dict], metric: str = "regret"):
        """``(t, Y)``: ``Y[i]`` is record ``i``'s curve on a common grid ``t``.

        The grid is that of the longest run; shorter runs (stopped early, or episodes of other
        lengths) are interpolated linearly in ``t`` and ``NaN`` past their last step.
        """
        if metric not in PLOT_CURVE_KEYS:
            raise OptplanError(f"metric must be one of {PLOT_CURVE_KEYS}, got {metric!r}")
        data = [self.arrays(r) for r in records]
        lacking = [r["task_id"] for r, a in zip(records, data, strict=True) if metric not in a]
        if lacking:
            raise OptplanError(
                f"{len(lacking)} task(s) have no {metric} curve (e.g. {lacking[0]!r}: "
                "occupancy regret needs the discounted criterion and an agent exposing its policy)"
            )
        longest = max(data, key=lambda a: a["t"][-1])
        t = longest["t"].astype(float)
        Y = np.full((len(data), t.size), np.nan)
        for i, a in enumerate(data):
            ti, yi = a["t"].astype(float), a[metric]
            inside = t <= ti[-1]
            Y[i, inside] = np.interp(t[inside], ti, yi)
        return t, Y

    def compare(self, other: Results) -> list[str]:
        """Differences between the summary rows of two stores, timing columns excluded.

        Returns an empty list when every task of either store has an equal row in the other
        (floats compared bit for bit).
        """
        mine = {r["task_id"]: r for r in self.rows}
        theirs = {r["task_id"]: r for r in other.rows}
        out = []
        for tid in sorted(set(mine) | set(theirs)):
            if tid not in mine or tid not in theirs:
                out.append(f"{tid}: only in {self.root if tid in mine else other.root}")
                continue
            a, b = mine[tid], theirs[tid]
            for k in sorted(set(a) | set(b)):
                if k in TIMING_COLUMNS:
                    continue
                va, vb = a.get(k), b.get(k)
                same = va == vb or (
                    isinstance(va, float)
                    and isinstance(vb, float)
                    and math.isnan(va)
                    and math.isnan(vb)
                )
                if not same:
                    out.append(f"{tid}: {k} {va!r} vs {vb!r}")
        return out


def load_results(root, warn: bool = True) -> Results:
    """Read a sweep's directory: its specification and every finished task's record.

    Changes nothing on disk. A damaged record (see the module doc) is skipped, listed in
    :attr:`Results.damaged` and, with ``warn``, reported by a :class:`StoreWarning` naming
    its file.

    Raises
    ------
    OptplanError
        If ``root`` is not a result directory or its ``sweep.json`` is unreadable.
    """
    store = ResultStore(root)
    spec = store.sweep_spec()
    scan = store.scan()
    if warn:
        _warn_skipped(scan.damaged)
    return Results(Path(root), spec, scan.records, scan.damaged)
