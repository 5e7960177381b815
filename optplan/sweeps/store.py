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
which the next run deletes (unless the process that wrote it is still alive); readers
ignore them. Re-running a sweep into the same directory resumes it; a
directory holding a *different* sweep is refused.

**Damage.** A record damaged after the fact (a truncated or otherwise unreadable JSON, a
curve file that is missing, truncated or fails its CRC, a record without the fields a record
has) is never fatal. Readers (:func:`~optplan.sweeps.results.load_results`,
``optplan results``, ``optplan plot``) skip it with a :class:`StoreWarning` naming the file and
list it in :attr:`~optplan.sweeps.results.Results.damaged`; they change nothing on disk. A sweep
run into the directory (:meth:`ResultStore.quarantine`, called by
:func:`~optplan.sweeps.execute.run_sweep`) moves the task's files to ``damaged/`` (renamed
``<name>.1``, ``.2`` ... if that name is taken) and runs the task again.

**Lock.** :meth:`ResultStore.lock` takes an exclusive ``flock`` on ``sweep.lock`` (POSIX;
released by the kernel when the holder dies, whatever the signal) and writes the holder's
pid, host and start time into it. A second sweep on the same directory does not wait: it
raises :class:`StoreLocked` at once, naming the directory and the holder. A lock file left by
a holder that died (SIGKILL, power loss) is not held, so the next sweep takes it over and
says so with a :class:`StoreWarning`. Platforms without ``fcntl`` (Windows) run unlocked.
"""

from __future__ import annotations

import csv
import io
import json
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .._checks import OptplanError
from . import lock
from .records import (
    CURVE_KEYS,
    DAMAGED_DIR,
    FORMAT,
    LOCK_NAME,
    OPTIONAL_CURVE_KEYS,
    DamagedRecord,
    StoreLocked,
    StoreMismatch,
    StoreWarning,
    _atomic_write,
    _check_arrays,
    _check_record,
    _csv_cell,
    _diff,
    _free_name,
    _json_bytes,
    _read_arrays,
    _reason,
    _Scan,
    _warn_skipped,
    _write_failure,
    summary_columns,
    summary_row,
)
from .sweep import Sweep

__all__ = ["ResultStore", "StoreMismatch", "StoreLocked", "StoreWarning", "DamagedRecord"]


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
                more = [f"  ... and {len(diffs) - 8} more"] if len(diffs) > 8 else []
                shown = "\n".join([*(f"  {d}" for d in diffs[:8]), *more])
                raise StoreMismatch(
                    f"{root} holds results of a different sweep "
                    f"({old.get('sweep', {}).get('name')!r}) than {sweep.source}.\n"
                    "Refusing to mix them: use another --out or delete the directory.\n"
                    "What differs (there: the directory's sweep.json; here: the sweep file):\n"
                    f"{shown}"
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
        self.remove_strays()

    def remove_strays(self) -> list[Path]:
        """Delete the temporary files (``*.tmp-PID``) of interrupted writes in the directory
        and ``tasks/``, those whose writer ``PID`` is not a live process (a live one may be
        writing still); the paths deleted. Call it holding :meth:`lock`."""
        removed = []
        for folder in (self.root, self.tasks_dir):
            if not folder.is_dir():
                continue
            for stray in folder.glob("*.tmp-*"):
                pid = stray.name.rsplit(".tmp-", 1)[1]
                if not stray.is_file() or (pid.isdigit() and lock.writer_alive(int(pid))):
                    continue
                stray.unlink(missing_ok=True)
                removed.append(stray)
        return removed

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
        fcntl = lock.fcntl_module()
        lock.make_root(self.root)
        if fcntl is None:  # pragma: no cover
            yield self
            return
        fd = lock.take(fcntl, self.root, self.lock_path)
        lock.mark_holder(fd, self.root, self.lock_path)
        try:
            yield self
        finally:
            lock.release(fd, self.lock_path)

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
