"""The result store of a sweep: one directory, one atomic record per finished task.

Layout of ``OUT/``::

    sweep.json       normalized sweep specification and its fingerprint (written first)
    tasks/<h>.json   one record per finished task: ids, parameters, status, error, scalars
    tasks/<h>.npz    its curves (subsampled regret curves, visit counts)
    summary.csv      one row per finished task (rewritten from the records)
    curves.npz       every task's curves in long (columnar) form

Each record is written to a temporary file, flushed to disk and renamed into place
(``os.replace`` is atomic on POSIX and Windows), the arrays before the JSON: a task counts as
finished exactly when its JSON exists, and a crash leaves at most a stray temporary file,
which the next run deletes. Re-running a sweep into the same directory resumes it; a
directory holding a *different* sweep is refused.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._checks import OptplanError
from .sweep import Sweep

__all__ = [
    "ResultStore",
    "Results",
    "StoreMismatch",
    "load_results",
    "SUMMARY_COLUMNS",
    "CURVE_KEYS",
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
    "gap_regret",
    "normalized_regret",
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


class StoreMismatch(OptplanError):
    """The output directory holds results of a different sweep."""


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

    # -- setup ---------------------------------------------------------------------------------
    def prepare(self, sweep: Sweep) -> None:
        """Create the directory for ``sweep``, or check that it already belongs to it.

        Raises
        ------
        StoreMismatch
            If ``root`` holds another sweep (its ``sweep.json`` has another fingerprint), or
            holds files but no ``sweep.json``. Says what differs.
        """
        spec = {"format": FORMAT, "fingerprint": sweep.fingerprint(), "sweep": sweep.to_dict()}
        meta = self.root / "sweep.json"
        if meta.exists():
            try:
                old = json.loads(meta.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise StoreMismatch(f"{meta} is unreadable ({exc}); use another --out") from None
            if old.get("fingerprint") != spec["fingerprint"]:
                diffs = _diff(old.get("sweep", {}), spec["sweep"])
                shown = "; ".join(diffs[:5]) + (" ..." if len(diffs) > 5 else "")
                raise StoreMismatch(
                    f"{self.root} holds results of a different sweep "
                    f"({old.get('sweep', {}).get('name')!r}, fingerprint "
                    f"{str(old.get('fingerprint'))[:12]}) than {sweep.source} "
                    f"(fingerprint {spec['fingerprint'][:12]}): {shown}. Refusing to mix them; "
                    f"use another --out or delete the directory."
                )
        else:
            if self.root.exists() and any(self.root.iterdir()):
                raise StoreMismatch(
                    f"{self.root} is not empty and holds no sweep.json: not a result directory "
                    f"of optplan sweep; use another --out"
                )
            self.root.mkdir(parents=True, exist_ok=True)
            _atomic_write(meta, _json_bytes(spec))
        self.tasks_dir.mkdir(exist_ok=True)
        for stray in self.tasks_dir.glob(".*.tmp-*"):
            stray.unlink(missing_ok=True)

    # -- records -------------------------------------------------------------------------------
    def save(self, stem: str, record: dict, arrays: dict) -> None:
        """Write one task's arrays, then its record (the commit point), each atomically."""
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        _atomic_write(self.tasks_dir / f"{stem}.npz", buf.getvalue())
        _atomic_write(self.tasks_dir / f"{stem}.json", _json_bytes(record))

    def records(self) -> list[dict]:
        """Every finished task's record, ordered by task index."""
        out = []
        if self.tasks_dir.is_dir():
            for path in self.tasks_dir.glob("*.json"):
                rec = json.loads(path.read_text())
                rec["_stem"] = path.stem
                out.append(rec)
        return sorted(out, key=lambda r: r["index"])

    def arrays(self, stem: str) -> dict[str, np.ndarray]:
        """The arrays of the task whose record file is ``tasks/<stem>.json``."""
        with np.load(self.tasks_dir / f"{stem}.npz") as npz:
            return {k: npz[k] for k in npz.files}

    def sweep_spec(self) -> dict:
        """The ``sweep.json`` contents (``format``, ``fingerprint``, ``sweep``)."""
        meta = self.root / "sweep.json"
        if not meta.exists():
            raise FileNotFoundError(f"{self.root} holds no sweep.json: not a sweep result")
        return json.loads(meta.read_text())

    # -- summaries -----------------------------------------------------------------------------
    def write_summary(self) -> tuple[Path, Path]:
        """(Re)write ``summary.csv`` and ``curves.npz`` from the records on disk."""
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
        for rec in records:
            if rec["status"] != "ok":
                continue
            arr = self.arrays(rec["_stem"])
            n = arr["t"].size
            cols["task"].append(np.full(n, rec["index"], dtype=np.int64))
            for k in ("t", "episodes", *CURVE_KEYS):
                cols[k].append(arr[k])
        curves = {k: np.concatenate(v) if v else np.zeros(0, dtype=float) for k, v in cols.items()}
        curves["task_index"] = np.array([r["index"] for r in records], dtype=np.int64)
        curves["task_id"] = np.array([r["task_id"] for r in records], dtype=str)
        buf = io.BytesIO()
        np.savez_compressed(buf, **curves)
        path = self.root / "curves.npz"
        _atomic_write(path, buf.getvalue())
        return summary, path


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
        if metric not in CURVE_KEYS:
            raise OptplanError(f"metric must be one of {CURVE_KEYS}, got {metric!r}")
        data = [self.arrays(r) for r in records]
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


def load_results(root) -> Results:
    """Read a sweep's directory: its specification and every finished task's record."""
    store = ResultStore(root)
    return Results(Path(root), store.sweep_spec(), store.records())
