"""Matplotlib helpers for experiment figures: regret curves, heatmaps, the shared styles, legend
and figure helpers (scaling plots: :mod:`.scaling`).

Matplotlib is an optional dependency (``pip install 'optplan[plot]'``); it is imported lazily,
inside the functions that need it. Figures are built with :class:`matplotlib.figure.Figure`
and the non-interactive Agg canvas, never with :mod:`matplotlib.pyplot`, so no global state
and no display are involved.

Confidence bands and error bars are Student-t intervals over seeds, see
:func:`optplan.experiments.stats.mean_ci`.
A NaN entry means "no data": a run that stopped before that step, or an instance not solved
within the step cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import MissingDependency, OptplanError, check_writable, write_error
from ..experiments.stats import check_level, mean_ci

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "plot_regret",
    "plot_heatmap",
    "new_figure",
    "save_figure",
    "check_image_suffix",
    "figure_legend",
    "style",
    "STYLES",
    "CUT_BAR_NOTE",
]

_INSTALL_HINT = "plotting needs matplotlib: pip install 'optplan[plot]'"

#: Legend entry of the arrows :func:`plot_scaling` draws on a log axis in place of lower error
#: bars that reach 0 or below.
CUT_BAR_NOTE = "arrow: lower bar <= 0, off the log axis"

#: Opacity of the confidence band drawn by :func:`plot_regret`.
BAND_ALPHA = 0.25

#: (line style, marker) of the i-th curve of a panel, so that curves that overlap (random and
#: epsilon-greedy on a hard environment) stay distinguishable in print and for colour-blind
#: readers; the colour still follows matplotlib's cycle.
STYLES = (
    ("-", "o"),
    ("--", "s"),
    ("-.", "^"),
    (":", "D"),
    ((0, (5, 1)), "v"),
    ((0, (3, 1, 1, 1, 1, 1)), "P"),
    ((0, (1, 1)), "X"),
    ((0, (8, 2)), "*"),
)


def style(i: int) -> dict:
    """Keyword arguments (``linestyle``, ``marker``) of the ``i``-th curve, see :data:`STYLES`."""
    ls, marker = STYLES[i % len(STYLES)]
    return {"linestyle": ls, "marker": marker}


def _matplotlib() -> Any:
    """Import and return :mod:`matplotlib`, or raise :class:`MissingDependency` with a hint."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise MissingDependency(_INSTALL_HINT) from exc
    return matplotlib


def _runs(label: Any, y: Any, m: int, what: str, x_shape: tuple[int, ...]) -> np.ndarray:
    """``y`` as a float array of shape ``(n_seeds, m)`` (1-D means one seed), or ValueError."""
    arr = np.asarray(y, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != m:
        raise OptplanError(
            f"{what}[{label!r}] has shape {np.shape(y)}; expected (n_seeds, {m}) "
            f"to match x of shape {x_shape}"
        )
    return arr


def plot_regret(
    ax: Axes,
    t: Any,
    curves: Mapping[Any, Any],
    *,
    ylabel: str = "cumulative regret",
    level: float = 0.95,
    logx: bool = False,
    logy: bool = False,
    title: str | None = None,
    legend: bool = True,
    markers: int = 8,
    stat: str = "mean",
) -> Axes:
    """Plot mean curves over seeds with shaded confidence bands.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    t : array_like, shape (steps,)
        The x positions (time steps).
    curves : Mapping
        ``label -> array`` of shape ``(n_seeds, steps)`` (a 1-D array is one seed). NaN means
        "not reached" (e.g. a run that stopped early) and is left out of the mean.
    ylabel : str, default "cumulative regret"
    level : float, default 0.95
        Confidence level of the band, see :func:`~optplan.experiments.stats.mean_ci`.
    logx, logy : bool, default False
        Log-scale axes.
    title : str, optional
    legend : bool, default True
        Draw the panel's legend; a figure of several panels draws one
        :func:`figure_legend` instead.
    markers : int, default 8
        Markers per curve (the i-th curve gets ``STYLES[i]``'s line style and marker), spread
        evenly over the points (in log space when `logx`); 0 for none.
    stat : {"mean", "median"}, default "mean"
        ``"median"``: the median over seeds and a band from the 25th to the 75th percentile,
        which stays positive on a log axis when the data do (a mean ± CI band need not).

    Returns
    -------
    matplotlib.axes.Axes
        `ax`, with one line (the mean) and one band (mean ± half-width, same colour) per
        label, and a legend ``"label (n=seeds)"``.

    Raises
    ------
    ValueError
        If `t` is not 1-D, a curve's shape does not match ``(n_seeds, len(t))``, or `level`
        is not in ``(0, 1)``.
    """
    _matplotlib()
    level = check_level(level)
    tt = np.asarray(t, dtype=float)
    if tt.ndim != 1:
        raise OptplanError(f"t must be 1-D, got shape {tt.shape}")
    every = _markevery(tt, markers, logx)
    for i, (label, y) in enumerate(curves.items()):
        runs = _runs(label, y, tt.size, "curves", tt.shape)
        mean, band_lo, band_hi = _band(runs, stat, level)
        kw = style(i)
        if every is None:
            kw["marker"] = None
        (line,) = ax.plot(
            tt,
            mean,
            label=f"{label} (n={runs.shape[0]})",
            markevery=every,
            markersize=4,
            **kw,
        )
        ax.fill_between(tt, band_lo, band_hi, color=line.get_color(), alpha=BAND_ALPHA, linewidth=0)
    if logx:
        ax.set_xscale("log")
    _finish(ax, "step", ylabel, logy, title, legend and bool(curves))
    return ax


def _band(runs: np.ndarray, stat: str, level: float):
    """``(centre, low, high)`` of a regret band over seeds: the mean and its confidence
    interval, or the median and the quartiles."""
    if stat == "median":
        mean, lo, hi = _centre_and_bars(runs, "median", level)
        return mean, mean - lo, mean + hi
    if stat == "mean":
        mean, half = mean_ci(runs, axis=0, level=level)
        return mean, mean - half, mean + half
    raise OptplanError(f"stat must be 'mean' or 'median', got {stat!r}")


def _finish(ax, xlabel: str, ylabel: str, logy: bool, title, legend: bool) -> None:
    """Axis labels, the log y scale, the title and the legend of a panel."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title is not None:
        ax.set_title(title)
    if legend:
        ax.legend()


def _markevery(t: np.ndarray, n: int, logx: bool) -> list[int] | None:
    """Indices of about ``n`` points spread evenly along ``t`` (log-spaced when ``logx``)."""
    if n <= 0 or t.size == 0:
        return None
    if logx and np.all(t > 0):
        targets = np.geomspace(t[0], t[-1], n)
    else:
        targets = np.linspace(t[0], t[-1], n)
    idx = np.unique(np.clip(np.searchsorted(t, targets), 0, t.size - 1))
    return [int(i) for i in idx]


def figure_legend(fig: Figure, axes, *, ncols: int | None = None, fontsize: float = 9) -> None:
    """One legend for the whole figure, below the panels: every distinct label of `axes`.

    Uses matplotlib's constrained layout (``loc="outside lower center"``), so the legend never
    covers data and :func:`save_figure` keeps it inside the image.
    """
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if not labels:
        return
    if ncols is None:
        # As many columns as the longest entry lets fit across the figure (about 0.6 em a
        # character, plus the handle), at most 5.
        entry = fontsize / 72 * (0.6 * max(len(lab) for lab in labels) + 4)
        ncols = max(1, min(len(labels), 5, int(fig.get_figwidth() / entry)))
    fig.set_layout_engine("constrained")
    fig.legend(
        [handles[lab] for lab in labels],
        labels,
        loc="outside lower center",
        ncols=ncols,
        fontsize=fontsize,
        frameon=False,
    )


def _centre_and_bars(
    runs: np.ndarray, stat: str, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of ``runs`` (NaN = no data): the centre and the lower / upper bar lengths."""
    m = runs.shape[1]
    if m == 0:
        empty = np.zeros(0)
        return empty, empty, empty
    if stat == "mean":
        if np.all(np.isfinite(runs)):
            centre, half = mean_ci(runs, axis=0, level=level)
        else:
            pairs = [mean_ci(c[np.isfinite(c)], level=level) for c in runs.T]
            centre = np.array([p[0] for p in pairs], dtype=float)
            half = np.array([p[1] for p in pairs], dtype=float)
        return centre, half, half
    q25, centre, q75 = np.nanpercentile(runs, [25, 50, 75], axis=0)
    return centre, centre - q25, q75 - centre


def plot_heatmap(
    ax: Axes,
    values: Any,
    *,
    log: bool = False,
    title: str | None = None,
    xlabel: str = "state",
    ylabel: str = "layer",
    cbar_label: str | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw a 2-D array as a heatmap with a colorbar (e.g. visit counts per layer and state).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    values : array_like, shape (rows, cols) or (cols,)
        The values; a 1-D array is drawn as one row.
    log : bool, default False
        Plot ``log10(1 + values)``; `values` must then be non-negative.
    title : str, optional
    xlabel : str, default "state"
    ylabel : str, default "layer"
    cbar_label : str, optional
        Colorbar label (default ``"log10(1 + value)"`` when `log`, none otherwise).
    cmap : str, default "viridis"
    vmin, vmax : float, optional
        The colour scale's limits (after the ``log`` transform), e.g. one scale shared by the
        panels of a row so that they can be compared; the data's range by default.
    colorbar : bool, default True
        Draw this panel's colorbar (a row sharing one scale may draw it once).

    Returns
    -------
    matplotlib.axes.Axes
        `ax`.

    Raises
    ------
    ValueError
        If `values` has more than 2 dimensions, or `log` is set and some value is negative.
    """
    _matplotlib()
    from matplotlib.ticker import MaxNLocator

    data = np.asarray(values, dtype=float)
    if data.ndim < 2:
        data = data.reshape(1, -1)
    if data.ndim != 2:
        raise OptplanError(f"values must be 1-D or 2-D, got shape {data.shape}")
    if log:
        if np.any(data < 0):  # NaN compares False
            raise OptplanError(
                f"log=True needs values >= 0, got minimum {float(np.nanmin(data))!r}"
            )
        data = np.log10(1.0 + data)
        if cbar_label is None:
            cbar_label = "log10(1 + value)"
    image = ax.imshow(data, aspect="auto", interpolation="nearest", cmap=cmap, vmin=vmin, vmax=vmax)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=cbar_label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    return ax


def new_figure(
    ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6
) -> tuple[Figure, list[Axes]]:
    """A figure on the Agg canvas with a grid of axes, without :mod:`matplotlib.pyplot`.

    Parameters
    ----------
    ncols, nrows : int, default 1
        Grid shape.
    width, height : float
        Size of one panel in inches; the figure is ``(width * ncols, height * nrows)``.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : list of matplotlib.axes.Axes
        The panels, row by row (flat, ``nrows * ncols`` long).

    Raises
    ------
    ValueError
        If `ncols` or `nrows` is below 1, or `width` or `height` is not positive.
    """
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if int(ncols) < 1 or int(nrows) < 1:
        raise OptplanError(f"ncols and nrows must be >= 1, got ncols={ncols!r}, nrows={nrows!r}")
    if not (width > 0 and height > 0):
        raise OptplanError(f"width and height must be > 0, got width={width!r}, height={height!r}")
    fig = Figure(figsize=(width * ncols, height * nrows))
    FigureCanvasAgg(fig)
    axes = fig.subplots(int(nrows), int(ncols), squeeze=False)
    return fig, list(axes.ravel())


def check_image_suffix(name: str, path: str | Path) -> None:
    """Refuse a ``path`` whose suffix is not an image format matplotlib writes (``.png``,
    ``.pdf``, ``.svg``, ...), naming ``name``, the path and the formats; no suffix is allowed
    (matplotlib then writes its default format)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return
    _matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if suffix not in formats:
        raise OptplanError(
            f"{name} {str(path)!r} has the suffix .{suffix}, not an image format matplotlib "
            f"writes: {', '.join('.' + f for f in formats)}"
        )


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 120) -> Path:
    """Lay out and save a figure, creating the parent directories.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or pathlib.Path
        Destination; the format follows the suffix (e.g. ``.png``, ``.pdf``). A path that
        cannot be written (a directory, under a regular file, read-only) raises
        :class:`~optplan._checks.OptplanError` naming it.
    dpi : int, default 120

    Returns
    -------
    pathlib.Path
        `path`.
    """
    _matplotlib()
    out = check_writable("figure file", path)
    check_image_suffix("figure file", out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        fig.savefig(out, dpi=dpi)
    except OSError as exc:
        raise write_error("figure file", out, exc) from exc
    return out
