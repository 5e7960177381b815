"""Tests for the plotting helpers in :mod:`optplan.plots.plots`."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.collections import PolyCollection  # noqa: E402

from optplan.experiments.stats import mean_ci  # noqa: E402
from optplan.plots.plots import (  # noqa: E402
    CUT_BAR_NOTE,  # noqa: E402
    new_figure,
    plot_heatmap,
    plot_regret,
    save_figure,
)
from optplan.plots.scaling import plot_scaling  # noqa: E402


def _line_by_label(ax, prefix):
    matches = [line for line in ax.lines if line.get_label().startswith(prefix)]
    assert len(matches) == 1, [line.get_label() for line in ax.lines]
    return matches[0]


# --- plot_regret ----------------------------------------------------------------------------


def _regret_curves():
    rng = np.random.default_rng(0)
    t = np.arange(1, 51)
    a = np.cumsum(rng.random((4, t.size)), axis=1)
    b = np.cumsum(0.5 * rng.random((3, t.size)), axis=1)
    b[0, 30:] = np.nan  # a run that stopped early
    return t, {"ucrl": a, "psrl": b}


def test_plot_regret_draws_line_and_band_per_label():
    t, curves = _regret_curves()
    fig, (ax,) = new_figure()
    out = plot_regret(ax, t, curves, title="regret")
    assert out is ax
    assert len(ax.lines) == 2
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(ax.collections) == 2 and len(bands) == 2
    for label, runs in curves.items():
        line = _line_by_label(ax, label)
        np.testing.assert_array_equal(line.get_xdata(), t)
        np.testing.assert_allclose(line.get_ydata(), np.nanmean(runs, axis=0))
    for line, band in zip(ax.lines, bands, strict=True):
        np.testing.assert_allclose(band.get_facecolor()[0][:3], _rgb(line.get_color()))
        assert band.get_alpha() == pytest.approx(0.25)
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["ucrl (n=4)", "psrl (n=3)"]
    assert ax.get_ylabel() == "cumulative regret"
    assert ax.get_title() == "regret"


def _rgb(color):
    from matplotlib.colors import to_rgb

    return to_rgb(color)


def test_plot_regret_log_axes():
    t, curves = _regret_curves()
    _, (ax,) = new_figure()
    plot_regret(ax, t, curves, logx=True, logy=True, ylabel="r")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_ylabel() == "r"


def test_plot_regret_shape_mismatch_names_label():
    t, curves = _regret_curves()
    curves["bad-agent"] = np.zeros((2, t.size - 1))
    _, (ax,) = new_figure()
    with pytest.raises(ValueError, match="bad-agent") as info:
        plot_regret(ax, t, curves)
    assert "(2, 49)" in str(info.value) and "50" in str(info.value)


def test_plot_regret_rejects_2d_t():
    _, (ax,) = new_figure()
    with pytest.raises(ValueError, match="t must be 1-D"):
        plot_regret(ax, np.zeros((2, 3)), {"a": np.zeros((1, 3))})


# --- plot_scaling ---------------------------------------------------------------------------


def test_plot_scaling_omits_unsolved_sizes_and_draws_reference():
    x = np.array([2, 4, 6, 8])
    y = np.array(
        [
            [3.0, 10.0, 40.0, 90.0],
            [4.0, 12.0, np.nan, 100.0],  # one seed did not solve size 6
            [5.0, 11.0, 35.0, 95.0],
        ]
    )
    x2 = np.array([3, 5])
    y2 = np.array([[1.0, 2.0], [1.5, 2.5]])
    _, (ax,) = new_figure()
    out = plot_scaling(
        ax,
        {"k-learning": (x, y), "q-learning": (x2, y2)},
        ylabel="steps to solve",
        reference=(lambda n: 2.0 ** (n - 1), "2^(n-1)"),
        title="scaling",
    )
    assert out is ax
    line = _line_by_label(ax, "k-learning")
    np.testing.assert_array_equal(line.get_xdata(), [2, 4, 8])
    np.testing.assert_allclose(line.get_ydata(), np.mean(y[:, [0, 1, 3]], axis=0))
    assert line.get_marker() == "o"
    np.testing.assert_array_equal(_line_by_label(ax, "q-learning").get_xdata(), x2)
    ref = _line_by_label(ax, "2^(n-1)")
    np.testing.assert_array_equal(ref.get_xdata(), [2, 3, 4, 5, 6, 8])
    np.testing.assert_allclose(ref.get_ydata(), 2.0 ** (np.array([2, 3, 4, 5, 6, 8]) - 1))
    assert ref.get_linestyle() == "--"
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == "size" and ax.get_ylabel() == "steps to solve"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["k-learning", "q-learning", "2^(n-1)", CUT_BAR_NOTE]  # q-learning's CI < 0


def test_plot_scaling_error_bars_are_ci_half_widths():
    x = np.array([1.0, 2.0])
    y = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    _, (ax,) = new_figure()
    plot_scaling(ax, {"a": (x, y)}, ylabel="m", logy=False)
    (container,) = ax.containers
    segments = container.lines[2][0].get_segments()
    _, half = mean_ci(y)
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segments], 2 * half)
    assert ax.get_yscale() == "linear"


def test_plot_scaling_shape_mismatch_names_label():
    _, (ax,) = new_figure()
    with pytest.raises(ValueError, match="agent-x"):
        plot_scaling(ax, {"agent-x": (np.arange(3), np.zeros((2, 4)))}, ylabel="m")


# --- plot_heatmap, figures ------------------------------------------------------------------


def test_plot_heatmap_log_rejects_negative_values():
    _, (ax,) = new_figure()
    with pytest.raises(ValueError, match="log"):
        plot_heatmap(ax, np.array([[1.0, -2.0], [0.0, 3.0]]), log=True)


def test_plot_heatmap_log_values_and_colorbar():
    counts = np.array([[0.0, 9.0, 99.0], [1.0, 0.0, 3.0]])
    fig, (ax,) = new_figure()
    plot_heatmap(ax, counts, log=True, title="visits")
    (image,) = ax.images
    np.testing.assert_allclose(image.get_array(), np.log10(1 + counts))
    assert len(fig.axes) == 2  # the colorbar
    assert fig.axes[1].get_ylabel() == "log10(1 + value)"
    assert ax.get_xlabel() == "state" and ax.get_ylabel() == "layer"


def test_plot_heatmap_shared_scale_without_colorbar():
    """A row of panels shares one colour scale (``vmin``/``vmax``) and one colorbar."""
    fig, axes = new_figure(ncols=2)
    plot_heatmap(axes[0], np.array([[0.0, 1.0]]), vmin=-2.0, vmax=5.0, colorbar=False)
    plot_heatmap(axes[1], np.array([[3.0, 4.0]]), vmin=-2.0, vmax=5.0, cbar_label="V")
    for ax in axes:
        assert ax.images[0].get_clim() == (-2.0, 5.0)
    assert len(fig.axes) == 3 and fig.axes[2].get_ylabel() == "V"


def test_plot_heatmap_1d_is_one_row():
    _, (ax,) = new_figure()
    plot_heatmap(ax, np.arange(5.0), cbar_label="count")
    assert ax.images[0].get_array().shape == (1, 5)


def test_new_figure_grid():
    fig, axes = new_figure(ncols=3, nrows=2, width=2.0, height=1.5)
    assert len(axes) == 6
    np.testing.assert_allclose(fig.get_size_inches(), [6.0, 3.0])


def test_save_figure_writes_png(tmp_path):
    t, curves = _regret_curves()
    fig, (ax_regret, ax_heat) = new_figure(ncols=2)
    plot_regret(ax_regret, t, curves)
    plot_heatmap(ax_heat, np.arange(12.0).reshape(3, 4), log=True)
    path = save_figure(fig, tmp_path / "nested" / "dir" / "regret.png")
    assert path == tmp_path / "nested" / "dir" / "regret.png"
    assert path.exists() and path.stat().st_size > 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_matplotlib_gives_install_hint(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'optplan\[plot\]'"):
        new_figure()
    mean, _ = mean_ci([[1.0], [3.0]])  # needs no matplotlib
    np.testing.assert_allclose(mean, [2.0])


# --- styles, figure legend, medians and partial solves -----------------------------------


def test_overlapping_curves_get_distinct_line_styles_and_markers():
    t, curves = _regret_curves()
    curves["copy"] = curves["ucrl"].copy()  # exactly on top of "ucrl"
    _, (ax,) = new_figure()
    plot_regret(ax, t, curves)
    styles = {(line.get_linestyle(), line.get_marker()) for line in ax.lines}
    assert len(styles) == 3


def test_figure_legend_replaces_panel_legends():
    from optplan.plots.plots import figure_legend

    t, curves = _regret_curves()
    fig, axes = new_figure(ncols=2)
    for ax in axes:
        plot_regret(ax, t, curves, legend=False)
    figure_legend(fig, axes)
    assert all(ax.get_legend() is None for ax in axes)
    assert len(fig.legends) == 1
    assert [x.get_text() for x in fig.legends[0].get_texts()] == ["ucrl (n=4)", "psrl (n=3)"]


def test_plot_scaling_median_iqr_and_partial_solves():
    x = np.array([4.0, 6.0, 8.0])
    y = np.array([[10.0, 50.0, np.nan], [20.0, 60.0, 300.0], [40.0, np.nan, np.nan]])
    _, (ax,) = new_figure()
    plot_scaling(ax, {"a": (x, y)}, ylabel="m", stat="median", partial=True)
    line = _line_by_label(ax, "a")
    np.testing.assert_array_equal(line.get_xdata(), x)
    np.testing.assert_allclose(line.get_ydata(), [20.0, 55.0, 300.0])  # medians of finite seeds
    (container,) = ax.containers
    seg = container.lines[2][0].get_segments()[0]  # first size: quartiles 15 and 30
    np.testing.assert_allclose([seg[0, 1], seg[1, 1]], [15.0, 30.0])
    notes = sorted(a.get_text() for a in ax.texts)
    assert notes == ["1/3", "2/3"]
    hollow = [ln for ln in ax.lines if ln.get_markerfacecolor() == "white"]
    assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [6.0, 8.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "6", "8"]  # data sizes only


def test_plot_scaling_dodge_shifts_labels_apart_and_keeps_ticks():
    x = np.array([4.0, 8.0])
    y = np.array([[10.0, 20.0]])
    _, (ax,) = new_figure()
    plot_scaling(ax, {"a": (x, y), "b": (x, y), "c": (x, y)}, ylabel="m", dodge=0.1)
    np.testing.assert_allclose(_line_by_label(ax, "a").get_xdata(), x * 0.9)
    np.testing.assert_allclose(_line_by_label(ax, "b").get_xdata(), x)
    np.testing.assert_allclose(_line_by_label(ax, "c").get_xdata(), x * 1.1)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8"]
    for bad in (-0.1, 0.5, float("nan")):  # 0.5 moves the first label's points to x * 0
        with pytest.raises(ValueError, match="dodge"):
            plot_scaling(ax, {"a": (x, y), "b": (x, y), "c": (x, y)}, ylabel="m", dodge=bad)


def test_plot_scaling_rejects_unknown_stat():
    _, (ax,) = new_figure()
    with pytest.raises(ValueError, match="stat"):
        plot_scaling(ax, {"a": ([1.0], [[1.0]])}, ylabel="m", stat="mode")


def test_plot_regret_median_band_is_interquartile_and_positive():
    t = np.arange(1, 11, dtype=float)
    runs = np.array([t * 0.5, t, t * 2.0, t * 4.0])  # mean - CI would go below 0
    _, (ax,) = new_figure()
    plot_regret(ax, t, {"a": runs}, stat="median", logy=True)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.median(runs, axis=0))
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() > 0
    np.testing.assert_allclose(ys.min(), np.percentile(runs[:, 0], 25))


def test_plot_scaling_log_axis_lower_bar_at_or_below_zero_is_cut_and_stated():
    """On a log y axis a lower error bar reaching 0 or below cannot be drawn: every bar drawn
    stays positive, an arrow to the axis' bottom marks the cut one, and the legend says so."""
    x = np.array([4.0, 8.0])
    y = np.array([[10.0, -50.0], [20.0, -5.0], [30.0, 30.0], [40.0, 60.0]])  # size 8: q25 < 0
    _, (ax,) = new_figure()
    plot_scaling(ax, {"oracle": (x, y)}, ylabel="regret", stat="median")
    (container,) = ax.containers
    for seg in container.lines[2][0].get_segments():
        assert seg[:, 1].min() > 0, seg
    arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == 1 and arrows[0].xy[0] == 8.0
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("lower bar" in t and "log axis" in t for t in legend), legend
    bottom, top = ax.get_ylim()
    assert bottom > 0 and bottom <= np.min(np.median(y, axis=0)) and top >= 37.5


def test_plot_scaling_linear_axis_keeps_negative_lower_bars():
    x = np.array([4.0, 8.0])
    y = np.array([[10.0, -50.0], [20.0, -5.0], [30.0, 30.0], [40.0, 60.0]])
    _, (ax,) = new_figure()
    plot_scaling(ax, {"oracle": (x, y)}, ylabel="regret", stat="median", logy=False)
    (container,) = ax.containers
    assert min(seg[:, 1].min() for seg in container.lines[2][0].get_segments()) < 0
    assert not [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]


def test_plot_scaling_log_axis_names_values_it_cannot_draw():
    x = np.array([3.0, 4.0, 5.0])
    _, (ax,) = new_figure()
    plot_scaling(
        ax, {"oracle": (x, np.zeros((3, 3))), "random": (x, np.ones((3, 3)))}, ylabel="regret"
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "oracle: <= 0 at 3 of 3 sizes, not on the log axis" in legend
    assert not any(t.startswith("random:") for t in legend)


# --- figures of a result directory ---------------------------------------------------------


@pytest.fixture(scope="module")
def three_env_results(tmp_path_factory):
    from optplan.sweeps import load_results, run_sweep
    from optplan.sweeps.sweep import sweep_from_dict

    spec = {
        "name": "small",
        "seed": 7,
        "seeds": 2,
        "steps": 200,
        "curves": {"points": 10},
        "agents": [{"name": "random"}, {"name": "epsilon-greedy", "params": {"epsilon": 0.2}}],
        "envs": [
            {"name": "riverswim", "params": {"n_states": [3, 5]}},
            {"name": "riverswim-episodic", "params": {"n_states": 4, "horizon": 6}},
        ],
    }
    out = tmp_path_factory.mktemp("sweep") / "small"
    run_sweep(sweep_from_dict(spec, source="small.toml"), out, jobs=1, quiet=True)
    return load_results(out)


def _panel_titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]


def test_heatmap_figure_draws_every_environment(three_env_results):
    """Small multiples: one row per environment configuration, one column per agent."""
    from optplan.plots.figures import heatmap_figure

    envs = list(dict.fromkeys(e for _, e in three_env_results.groups()))
    assert len(envs) == 3
    fig = heatmap_figure(three_env_results)
    text = " ".join(_panel_titles(fig)) + " " + " ".join(ax.get_ylabel() for ax in fig.axes)
    for env in envs:
        assert env in text, (env, text)
    panels = [ax for ax in fig.axes if ax.images or ax.containers]
    assert len(panels) == 3 * 2
    assert sum(bool(ax.images) for ax in panels) == 2  # the episodic row: (layer, state) images
    one = heatmap_figure(three_env_results, envs=[envs[0]])
    assert len([ax for ax in one.axes if ax.images or ax.containers]) == 2


def test_cli_heatmap_draws_every_environment_or_those_named(three_env_results, monkeypatch):
    from optplan.cli import experiments as cli_experiments
    from optplan.cli import main

    drawn = []
    monkeypatch.setattr(
        cli_experiments.plots, "save_figure", lambda fig, out: drawn.append(fig) or out
    )
    root = str(three_env_results.root)
    assert main(["plot", root, "--kind", "heatmap", "--out", "v.png"]) == 0
    envs = list(dict.fromkeys(e for _, e in three_env_results.groups()))
    two = ["--env", envs[0], "--env", envs[2]]
    assert main(["plot", root, "--kind", "heatmap", "--out", "v.png", *two]) == 0
    titles = [" ".join(_panel_titles(fig)) for fig in drawn]
    assert all(env in titles[0] for env in envs)
    assert envs[0] in titles[1] and envs[2] in titles[1] and envs[1] not in titles[1]


# --- examples/ravi_ucb_experiments.py's regret figure --------------------------------------


def _ravi_example():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "ravi_ucb_experiments.py"
    spec = importlib.util.spec_from_file_location("ravi_ucb_experiments_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ravi_data():
    """One panel shaped like the RAVI sweeps' results: RAVI-UCB (paper) and eps-greedy on the
    same curve, UCRL2 far below 0.1 for its first thousand steps."""
    t = np.unique(np.geomspace(1, 1e5, 80).round())
    rng = np.random.default_rng(0)

    def seeds(curve):
        return curve * (1 + 0.05 * rng.standard_normal((5, 1)))

    linear = 0.13 * t
    curves = {
        "RAVI-UCB (paper)": seeds(linear),
        "RAVI-UCB (tuned)": seeds(np.minimum(linear, 200.0)),
        "UCRL2 (discounted)": seeds(2e-3 * t),
        "PSRL": seeds(np.minimum(linear, 150.0)),
        "eps-greedy": seeds(linear),
    }
    agents = {a: {"t": t, "Y": Y, "realized": Y[:, -1]} for a, Y in curves.items()}
    return {"riverswim-6 gamma=0.9": agents}


def test_ravi_regret_figure_shows_every_curve_with_a_mathtext_label():
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    ex = _ravi_example()
    data = _ravi_data()
    env = next(iter(data))
    fig = ex.regret_figure(data, [env], 2, "RAVI-UCB vs baselines")
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()  # the mathtext parses
    bottom, top = ax.get_ylim()
    lines = {ln.get_label(): ln for ln in ax.lines if ln.get_label() in data[env]}
    assert set(lines) == set(data[env])
    for agent, line in lines.items():
        y = np.asarray(line.get_ydata(), dtype=float)
        assert bottom <= y[y > 0].min() and y.max() <= top, (agent, bottom, y[y > 0].min())
    # no curve hides another: each its own marker and line style, markers at its own points
    styles = [(str(ln.get_linestyle()), ln.get_marker()) for ln in lines.values()]
    assert len({m for _, m in styles}) == len(styles)
    paper, eps = lines["RAVI-UCB (paper)"], lines["eps-greedy"]
    assert paper.get_linestyle() != eps.get_linestyle()
    assert not set(paper.get_markevery()) & set(eps.get_markevery())
    assert paper.get_zorder() != eps.get_zorder()
    label = ax.get_ylabel()
    assert label.startswith("$") and r"\sum" in label and "mu^pi" not in label


def test_ravi_regret_figure_names_a_curve_at_zero_instead_of_stretching_the_axis():
    pytest.importorskip("matplotlib")
    ex = _ravi_example()
    data = _ravi_data()
    env = next(iter(data))
    ucrl = data[env]["UCRL2 (discounted)"]
    ucrl["Y"] = np.full_like(ucrl["Y"], 1e-16) * ucrl["t"]  # optimal from the start: round-off
    fig = ex.regret_figure(data, [env], 2, "RAVI-UCB vs baselines")
    ax = fig.axes[0]
    assert ax.get_ylim()[0] >= 0.1
    assert "UCRL2 (discounted): $R_t$ = 0 throughout (not drawn)" in ax.get_title()
