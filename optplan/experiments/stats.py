"""Statistics over seeds: confidence intervals and the per-(agent, environment) summary.

Shared by the command line (``optplan run``/``sweep``/``results`` tables) and the figures
(:mod:`.plots` bands and error bars); needs no matplotlib.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy import stats

from .._checks import OptplanError

__all__ = ["check_level", "mean_ci", "aggregate"]


def check_level(level: float) -> float:
    """``level`` as a float in ``(0, 1)``, or :class:`OptplanError`."""
    try:
        level = float(level)
    except (TypeError, ValueError):
        raise OptplanError(f"level must be a number in (0, 1), got {level!r}") from None
    if not 0.0 < level < 1.0:  # also rejects NaN
        raise OptplanError(f"level must be in (0, 1), got {level!r}")
    return level


def mean_ci(values: Any, axis: int = 0, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Mean and Student-t confidence half-width along an axis, ignoring NaN.

    Parameters
    ----------
    values : array_like of float
        The samples, e.g. shape ``(n_seeds, steps)``; NaN entries are ignored.
    axis : int, default 0
        The axis to reduce (the seeds).
    level : float, default 0.95
        Confidence level, in ``(0, 1)``.

    Returns
    -------
    mean : ndarray
        Mean of the non-NaN entries; NaN where there are none.
    half_width : ndarray
        ``t.ppf((1 + level) / 2, n - 1) * std(ddof=1) / sqrt(n)`` with ``n`` the count of
        non-NaN entries; NaN where ``n < 2``.

    Raises
    ------
    ValueError
        If `level` is not in ``(0, 1)``.

    Notes
    -----
    No :class:`RuntimeWarning` is emitted for empty or single-sample slices.
    """
    level = check_level(level)
    x = np.asarray(values, dtype=float)
    finite = ~np.isnan(x)
    n = finite.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        total = np.where(finite, x, 0.0).sum(axis=axis)
        mean = np.where(n > 0, total / np.maximum(n, 1), np.nan)
        centred = np.where(finite, x - np.expand_dims(mean, axis), 0.0)
        var = (centred**2).sum(axis=axis) / np.maximum(n - 1, 1)
        quantile = stats.t.ppf((1.0 + level) / 2.0, np.maximum(n - 1, 1))
        half = quantile * np.sqrt(var) / np.sqrt(np.maximum(n, 1))
        half = np.where(n >= 2, half, np.nan)
    return np.asarray(mean, dtype=float), np.asarray(half, dtype=float)


def _finite(x) -> bool:
    return x is not None and np.isfinite(float(x))


def aggregate(rows: list[dict]) -> list[dict]:
    """Per (agent, env): tasks, failures, mean final regret with 95% CI, time to solve.

    ``rows`` are summary rows of a result store (:func:`optplan.sweeps.load_results`)
    or of :func:`optplan.sweeps.records.summary_row`; failed tasks are counted, and left
    out of the means. ``draft_normalized_regret`` (bayesian-methods-tabular-rl's metric) also
    gets the population standard deviation over the tasks, ``..._sd``, the spread the draft
    reports (rows without it, from older records, are left out of its mean).
    ``occupancy_regret`` (RAVI-UCB's ``R_T``, only for agents exposing their policy under the
    discounted criterion) gets its mean and 95% CI over the rows that have it.
    """
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["agent"], r["env"]), []).append(r)
    out = []
    for (agent, env), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        entry = {"agent": agent, "env": env, "tasks": len(rs), "failed": len(rs) - len(ok)}
        for key in ("regret", "normalized_regret", "draft_normalized_regret", "occupancy_regret"):
            vals = np.array([np.nan if r.get(key) is None else r[key] for r in ok], dtype=float)
            m, h = mean_ci(vals) if vals.size else (np.nan, np.nan)
            entry[key] = None if np.isnan(m) else float(m)
            entry[f"{key}_ci95"] = None if np.isnan(h) else float(h)
        finite = [
            r["draft_normalized_regret"] for r in ok if _finite(r.get("draft_normalized_regret"))
        ]
        entry["draft_normalized_regret_sd"] = float(np.std(finite)) if finite else None
        tts = [r["time_to_solve"] for r in ok if r.get("goal_rate") is not None]
        if tts:
            solved = [t for t in tts if t is not None]
            entry["solved"] = f"{len(solved)}/{len(tts)}"
            entry["time_to_solve_median"] = float(np.median(solved)) if solved else None
        entry["wall_time_mean"] = float(np.mean([r["wall_time"] for r in ok])) if ok else None
        out.append(entry)
    return out
