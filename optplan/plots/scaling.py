"""Scaling plots: a statistic at the end of a run against the environment's size, one line per
agent, with error bars (Student-t intervals or quartiles over seeds) and an optional reference
curve. Matplotlib is imported lazily (``pip install 'optplan[plot]'``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import OptplanError
from ..experiments.stats import check_level
from .plots import CUT_BAR_NOTE, _centre_and_bars, _finish, _matplotlib, _runs, style

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_scaling"]


def _reference_values(reference: Callable[[Any], Any], xs: np.ndarray) -> np.ndarray:
    """``reference`` on ``xs``: vectorised when it can be, element by element otherwise."""
    try:
        ys = np.asarray(reference(xs), dtype=float)
        if ys.shape == xs.shape:
            return ys
    except Exception:  # fall back to scalar calls
        pass
    return np.array([float(reference(v)) for v in xs.tolist()], dtype=float)


def plot_scaling(
    ax: Axes,
    sizes: Mapping[Any, tuple[Any, Any]],
    *,
    ylabel: str,
    xlabel: str = "size",
    reference: Callable[[Any], Any] | tuple[Callable[[Any], Any], str] | None = None,
    logy: bool = True,
    level: float = 0.95,
    title: str | None = None,
    stat: str = "mean",
    partial: bool = False,
    legend: bool = True,
    dodge: float = 0.0,
) -> Axes:
    """Plot a metric against environment size, with confidence error bars.

    Each label gets a line with markers (the i-th label ``STYLES[i]``'s) through the statistic
    and error bars (the confidence half-width, or the quartiles). Unless `partial`, a size
    where any seed is NaN (or infinite) is omitted: an instance an agent did not solve within
    the cap is not plotted. On a log y axis a lower bar reaching 0 or below is drawn as an
    arrow to the axis' bottom (legend entry :data:`CUT_BAR_NOTE`), and a label whose statistic
    is <= 0 at some sizes gets a legend entry saying at how many it is not drawn.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    sizes : Mapping
        ``label -> (x, y)``: ``x`` of shape ``(m,)`` (environment sizes), ``y`` of shape
        ``(n_seeds, m)`` (a 1-D ``y`` is one seed; NaN: not solved within the cap).
    ylabel : str
    xlabel : str, default "size"
    reference : callable or (callable, str), optional
        ``f(x) -> y`` (e.g. ``lambda n: 2.0 ** (n - 1)``), a thin black dashed line over the
        union of all ``x``; called on the array of sizes, or on each size if that fails. With
        a label, ``(f, label)``: the line's legend entry (default ``"reference"``).
    logy : bool, default True
    level : float, default 0.95
        Confidence level of the error bars (:func:`~optplan.experiments.stats.mean_ci`).
    title : str, optional
    stat : {"mean", "median"}, default "mean"
        The mean and a Student-t interval, or the median and the interquartile range of the
        seeds (positive on a log axis when the data are; a mean ± CI need not be).
    partial : bool, default False
        Also draw sizes where only some seeds are finite (their statistic), hollow, with the
        fraction ``"k/n"`` beside; sizes where every seed is finite are filled.
    legend : bool, default True
        The panel's legend (a multi-panel figure may draw one :func:`figure_legend`).
    dodge : float, default 0
        Shift the i-th of ``n`` labels' points to ``x * (1 + dodge * (i - (n - 1) / 2))``, so
        that equal values at one size stay visible side by side; ticks stay at the sizes.

    Returns
    -------
    matplotlib.axes.Axes
        `ax`, with a line and error bars per label, and x ticks at the sizes in the data
        (``ax.set_xticks`` afterwards sets others).

    Raises
    ------
    ValueError
        An ``x`` is not 1-D, a ``y`` not of shape ``(n_seeds, m)``, `level` not in ``(0, 1)``.
    """
    _matplotlib()
    level = check_level(level)
    all_x, cut = _scaling_lines(ax, sizes, stat, level, partial, dodge, logy)
    if reference is not None and all_x:
        f, label = reference if isinstance(reference, tuple) else (reference, None)
        _reference_line(ax, f, label, np.unique(np.concatenate(all_x)))
    if cut:
        _cut_note(ax)
    if all_x:
        ticks = np.unique(np.concatenate(all_x))
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_locator(_null_locator())
    _finish(ax, xlabel, ylabel, logy, title, legend and bool(sizes))
    return ax


def _scaling_lines(
    ax, sizes, stat: str, level: float, partial: bool, dodge: float, logy: bool
) -> tuple[list, int]:
    """Check and draw every label of :func:`plot_scaling`; the sizes ``x`` of each and the
    number of lower bars cut at a log axis' bottom."""
    if stat not in ("mean", "median"):
        raise OptplanError(f"stat must be 'mean' or 'median', got {stat!r}")
    if not (math.isfinite(dodge) and 0.0 <= dodge * max(len(sizes) - 1, 0) < 1.0):
        raise OptplanError(f"dodge must be >= 0 and shift every x by less than 100%, got {dodge!r}")
    all_x, cut = [], 0
    for i, (label, (x, y)) in enumerate(sizes.items()):
        xx = np.asarray(x, dtype=float)
        if xx.ndim != 1:
            raise OptplanError(f"sizes[{label!r}]: x must be 1-D, got shape {xx.shape}")
        runs = _runs(label, y, xx.size, "sizes", xx.shape)
        all_x.append(xx)
        xx = xx * (1.0 + dodge * (i - (len(sizes) - 1) / 2.0))
        cut += _scaling_line(ax, i, label, xx, runs, stat, level, partial, logy)
    return all_x, cut


def _cut_note(ax) -> None:
    """A proxy artist: the legend (the panel's or the figure's) says what the arrows mean."""
    ax.plot(
        [], [], linestyle="none", marker=r"$\downarrow$", markersize=9, color="0.3",
        label=CUT_BAR_NOTE,
    )  # fmt: skip


def _reference_line(ax, reference: Callable, label: str | None, xs: np.ndarray) -> None:
    """The reference curve of :func:`plot_scaling`, a thin black dashed line at ``xs``."""
    ax.plot(
        xs,
        _reference_values(reference, xs),
        color="black",
        linewidth=1.0,
        linestyle=(0, (5, 3)),
        zorder=1,
        label=label if label is not None else "reference",
    )


def _scaling_line(
    ax, i: int, label, xx, runs, stat: str, level: float, partial: bool, logy: bool
) -> int:
    """The ``i``-th label of :func:`plot_scaling`: its line through the statistic, its error
    bars, and (``partial``) the hollow markers with ``"k/n"`` of the sizes some seeds missed.

    On a log axis (`logy`) a lower bar reaching 0 or below has no place on the axis: it is
    drawn as an arrow from the point down to the axis' bottom instead (returns how many), and
    a statistic <= 0 is not drawn, which a legend entry of the label says."""
    finite = np.isfinite(runs)
    n_ok = finite.sum(axis=0)
    full = n_ok == runs.shape[0] if runs.shape[0] else np.zeros(xx.size, bool)
    keep = (n_ok > 0) if partial else full
    centre, lo, hi = _centre_and_bars(runs[:, keep], stat, level)
    kw = style(i)
    # The line carries the label (so it is the legend entry and can be found in
    # ``ax.lines``); error bars and hollow markers are drawn separately in its colour.
    (line,) = ax.plot(
        xx[keep],
        centre,
        marker=kw["marker"],
        linestyle=kw["linestyle"],
        markersize=5,
        markevery=[j for j, f in enumerate(full[keep]) if f],
        label=str(label),
    )
    colour = line.get_color()
    lo, hi = np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=0.0)
    cut = (centre > 0) & (centre - lo <= 0) if logy else np.zeros(centre.size, bool)
    ax.errorbar(
        xx[keep],
        centre,
        yerr=np.vstack([np.where(cut, 0.0, lo), hi]),
        fmt="none",
        ecolor=colour,
        capsize=3,
    )
    hidden = int(np.sum(centre <= 0)) if logy else 0
    if hidden:
        # A value <= 0 has no place on a log axis: the legend names what is missing.
        ax.plot(
            [],
            [],
            linestyle="none",
            color=colour,
            label=f"{label}: <= 0 at {hidden} of {centre.size} sizes, not on the log axis",
        )
    for xv, yv in zip(xx[keep][cut], centre[cut], strict=True):
        ax.annotate(
            "",
            xy=(xv, 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(xv, yv),
            textcoords="data",
            arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.0, shrinkA=0, shrinkB=0),
        )
    some = ~full[keep]
    if partial and some.any():
        ax.plot(
            xx[keep][some],
            centre[some],
            linestyle="none",
            marker=kw["marker"],
            markersize=6,
            markerfacecolor="white",
            markeredgecolor=colour,
        )
        for xv, yv, k in zip(xx[keep][some], centre[some], n_ok[keep][some], strict=True):
            ax.annotate(
                f"{k}/{runs.shape[0]}",
                (xv, yv),
                xytext=(4, 3),
                textcoords="offset points",
                fontsize=7,
                color=colour,
            )
    return int(cut.sum())


def _null_locator():
    from matplotlib.ticker import NullLocator

    return NullLocator()
