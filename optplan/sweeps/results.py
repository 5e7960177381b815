"""A sweep's results read back from its directory: :func:`load_results` and :class:`Results`
(rows, curves on a common grid, groups by agent and environment, comparison of two stores)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._checks import MissingDependency, OptplanError
from .records import (
    CURVE_KEYS,
    DERIVED_CURVE_KEYS,
    OPTIONAL_CURVE_KEYS,
    PLOT_CURVE_KEYS,
    TIMING_COLUMNS,
    DamagedRecord,
    _warn_skipped,
    summary_columns,
    summary_row,
)
from .store import ResultStore

__all__ = ["Results", "load_results"]


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
        ``lower_bound_ratio`` and ``gap_lower_bound_ratio`` are ``regret`` and ``gap_regret``
        over ``C(P) ln t`` with each record's summary ``lower_bound`` (NaN at ``t = 1``).
        """
        if metric not in PLOT_CURVE_KEYS:
            raise OptplanError(f"metric must be one of {PLOT_CURVE_KEYS}, got {metric!r}")
        if metric in DERIVED_CURVE_KEYS:
            return self._bound_ratio(records, metric)
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

    def _bound_ratio(self, records: list[dict], metric: str):
        """:meth:`curve_matrix` of a curve over ``C(P) ln t`` (``DERIVED_CURVE_KEYS``)."""
        bounds = [(r.get("summary") or {}).get("lower_bound") for r in records]
        lacking = [r["task_id"] for r, c in zip(records, bounds, strict=True) if not c]
        if lacking:
            raise OptplanError(
                f"{len(lacking)} task(s) have no positive lower bound C(P) (e.g. "
                f"{lacking[0]!r}): {metric} needs the average criterion on an ergodic model "
                "whose C(P) > 0"
            )
        t, Y = self.curve_matrix(records, DERIVED_CURVE_KEYS[metric])
        log_t = np.log(t)
        out = np.full(Y.shape, np.nan)
        np.divide(Y, np.outer(bounds, log_t), out=out, where=log_t[None, :] > 0)
        return t, out

    def to_frame(self, curves: bool = False):
        """The results as a :class:`pandas.DataFrame` (the ``pandas`` extra).

        ``curves=False``: one row per finished task, the columns of ``summary.csv`` (ids,
        ``agent.*`` and ``env.*`` parameters, seed, the summary metrics, status). ``curves=
        True``: the curves in long form, one row per task and stored step: ``index``,
        ``task_id``, ``agent``, ``env``, ``seed_index``, ``t`` and one column per stored
        curve (``regret``, ``realized_regret``, ``gap_regret``, ``normalized_regret``, and
        ``occupancy_regret`` where the task has it; NaN where not). Tasks that failed have no
        curves.

        Raises
        ------
        MissingDependency
            pandas is not installed (``pip install "optplan[pandas]"``).
        """
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - exercised only without pandas
            raise MissingDependency(
                'Results.to_frame needs pandas: pip install "optplan[pandas]"'
            ) from exc
        rows = self.rows
        if not curves:
            return pd.DataFrame(rows, columns=summary_columns(rows))
        parts = []
        keys = (*CURVE_KEYS, *OPTIONAL_CURVE_KEYS)
        for r, row in zip(self.records, rows, strict=True):
            if r["status"] != "ok":
                continue
            a = self.arrays(r)
            part = {k: row[k] for k in ("index", "task_id", "agent", "env", "seed_index")}
            part["t"] = a["t"]
            part.update({k: a[k] if k in a else np.nan for k in keys})
            parts.append(pd.DataFrame(part))
        columns = ["index", "task_id", "agent", "env", "seed_index", "t", *keys]
        if not parts:
            return pd.DataFrame(columns=columns)
        return pd.concat(parts, ignore_index=True)[columns]

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
