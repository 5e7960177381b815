"""The figure of ``optplan bench indices --plot``: compute time vs ``|S|``, log-log, one panel
per index problem, one line per path or solver."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._checks import MissingDependency, check_writable, write_error

__all__ = ["PATH_STYLES", "require_matplotlib", "plot_indices"]

#: ``path or solver -> (label, color, marker, line style)``; ``N`` and ``B`` in a label are
#: replaced by the instance count and the large batch's size.
PATH_STYLES = {
    "fast": ("fast (single call)", "C0", "o", "-"),
    "batch": ("fast, the N instances in one batched call (time / N)", "C0", "s", "--"),
    "bigbatch": ("fast, B fresh instances in one batched call (time / B)", "C0", "^", ":"),
    "CLARABEL": ("CLARABEL", "C1", "o", "-"),
    "ECOS": ("ECOS", "C2", "D", "-"),
    "SCS": ("SCS", "C3", "v", "-"),
}


def require_matplotlib():
    """``matplotlib.figure.Figure``, or a :class:`MissingDependency` saying how to install it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependency(
            "plotting needs matplotlib: pip install 'optplan[plot]' (or matplotlib)"
        ) from exc
    return Figure


def plot_indices(rows: list[dict], path, solvers: Sequence[str], title: str | None = None):
    """Log-log PNG of compute time vs ``|S|``: one panel per problem, one line per path or
    solver (medians, 25-75% bands where there are several instances). Needs matplotlib (the
    ``plot`` extra); draws on a bare ``Figure`` (no pyplot, no global backend change)."""
    Figure = require_matplotlib()
    path = check_writable("plot file", path)
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig = Figure(figsize=(5.2 * len(problems), 4.6), layout="constrained")
    axes = fig.subplots(1, len(problems), sharey=True, squeeze=False)[0]
    for ax, problem in zip(axes, problems, strict=True):
        sel = [r for r in rows if r["problem"] == problem]
        S = np.array([r["S"] for r in sel], dtype=float)
        series = [("fast", "fast_s", "fast_q25", "fast_q75"), ("batch", "batch_s", None, None)]
        series.append(("bigbatch", "bigbatch_s", None, None))
        series += [(s, f"{s}_s", f"{s}_q25", f"{s}_q75") for s in solvers]
        notes = []
        for key, med_key, lo_key, hi_key in series:
            notes += _draw_series(ax, sel, S, key, med_key, lo_key, hi_key)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(problem)
        # The notes of capped sizes go under the axis, where no frame, line or band runs.
        ax.set_xlabel("\n".join(["|S|", *notes]))
        ax.set_xticks(S, [f"{v:,.0f}" for v in S])
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("wall seconds per instance\n(median; band: 25-75% of instances)")
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(
        title
        or f"Index compute time vs |S| ({rows[0]['instances']} random instances per size, "
        "log-log); hollow: solver stopped at its time cap"
    )
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise write_error("plot file", path, exc) from exc
    return path


def _column(sel: list[dict], key: str) -> np.ndarray:
    return np.array([np.nan if r[key] is None else r[key] for r in sel])


def _draw_series(ax, sel: list[dict], S: np.ndarray, key, med_key, lo_key, hi_key) -> list[str]:
    """One path's or solver's line on one problem's panel (rows ``sel``), with its band; the
    notes of the sizes where it hit its time cap (``"SCS: 3/15 timed at |S| = 1,000 ..."``)."""
    n = sel[0]["instances"]
    label, color, marker, style = PATH_STYLES.get(key, (key, None, "o", "-"))
    label = label.replace(" N ", f" {n} ").replace("/ N)", f"/ {n})")
    big = sel[0].get("bigbatch_n")
    if big:
        label = label.replace(" B ", f" {big:,} ").replace("/ B)", f"/ {big:,})")
    y = _column(sel, med_key)
    if np.isnan(y).all():
        return []
    # A size where the solver hit its time cap: drawn hollow, with "k/n" instances timed;
    # larger sizes were not run (no point).
    capped = [
        i
        for i, r in enumerate(sel)
        if r.get(f"{key}_skipped") and r.get(f"{key}_timed") and np.isfinite(y[i])
    ]
    full = [i for i in range(len(sel)) if i not in capped]
    ax.plot(S, y, linestyle=style, marker=marker, color=color, label=label, markevery=full)
    for i in capped:
        ax.plot(
            S[i],
            y[i],
            linestyle="none",
            marker=marker,
            markersize=8,
            markerfacecolor="white",
            markeredgecolor=color,
        )
    if lo_key is not None:
        lo, hi = _column(sel, lo_key), _column(sel, hi_key)
        ax.fill_between(S, lo, hi, color=color, alpha=0.2, linewidth=0)
    return [
        f"{key} (hollow): {sel[i][f'{key}_timed']}/{n} timed at |S| = {S[i]:,.0f}; "
        "larger |S| not run"
        for i in capped
    ]
