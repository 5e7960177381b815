"""What a result directory holds, record by record: the layout's names, the summary columns,
the checks that tell a damaged record, and the atomic writes (:mod:`.store` uses them)."""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._checks import OptplanError

__all__ = [
    "StoreMismatch",
    "StoreLocked",
    "StoreWarning",
    "DamagedRecord",
    "SUMMARY_COLUMNS",
    "CURVE_KEYS",
    "OPTIONAL_CURVE_KEYS",
    "DERIVED_CURVE_KEYS",
    "PLOT_CURVE_KEYS",
    "TIMING_COLUMNS",
    "LOCK_NAME",
    "DAMAGED_DIR",
    "summary_row",
    "summary_columns",
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
    "lower_bound",
    "lower_bound_ratio",
    "gap_lower_bound_ratio",
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
#: Curves derived at read time from a stored curve and the record's summary
#: (:meth:`~optplan.sweeps.results.Results.curve_matrix`): ``regret / (C(P) ln t)`` and the
#: same of ``gap_regret``, for the records whose summary holds a positive ``lower_bound``.
DERIVED_CURVE_KEYS = {"lower_bound_ratio": "regret", "gap_lower_bound_ratio": "gap_regret"}
#: Curves stored only for the tasks that have them: ``occupancy_regret`` (discounted criterion,
#: an agent exposing its policy; :mod:`.metrics`). ``curves.npz`` holds them with ``NaN`` for
#: the other tasks.
OPTIONAL_CURVE_KEYS = ("occupancy_regret",)
#: Every curve a figure may ask for.
PLOT_CURVE_KEYS = (*CURVE_KEYS, *OPTIONAL_CURVE_KEYS, *DERIVED_CURVE_KEYS)


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


def _brief(value, width: int = 40) -> str:
    """``value`` as JSON, cut to ``width`` characters."""
    text = json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    """The differences of two sweeps' dicts, one short line each (nested dicts, and lists of
    equal length, compared entry by entry)."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, "<missing>"), b.get(key, "<missing>")
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _diff(va, vb, f"{prefix}{key}.")
        elif isinstance(va, list) and isinstance(vb, list) and len(va) == len(vb):
            for i, (x, y) in enumerate(zip(va, vb, strict=True)):
                if isinstance(x, dict) and isinstance(y, dict):
                    out += _diff(x, y, f"{prefix}{key}[{i}].")
                elif x != y:
                    out.append(f"{prefix}{key}[{i}]: {_brief(x)} there, {_brief(y)} here")
        elif va != vb:
            out.append(f"{prefix}{key}: {_brief(va)} there, {_brief(vb)} here")
    return out


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
