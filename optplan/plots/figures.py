"""Figures from a sweep's result directory: regret curves, scaling plots, visit heatmaps.

These read :class:`~optplan.sweeps.results.Results` and draw with :mod:`.plots`; they back
``optplan plot DIR --kind regret|scaling|heatmap``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._checks import OptplanError
from ..sweeps.records import DERIVED_CURVE_KEYS, PLOT_CURVE_KEYS
from ..sweeps.results import Results
from . import plots, scaling

__all__ = [
    "regret_figure",
    "lower_bound_figure",
    "scaling_figure",
    "heatmap_figure",
    "reference_curve",
    "KINDS",
]

KINDS = ("regret", "scaling", "heatmap")

#: Summary scalars a scaling plot can show.
SCALING_METRICS = (
    "time_to_solve",
    "regret",
    "realized_regret",
    "gap_regret",
    "normalized_regret",
    "optimal_rate",
    "episodes",
    "steps",
    "wall_time",
)


#: What the line and the band of a regret figure are, per statistic.
STAT_NOTE = {
    "mean": "line: mean over seeds; band: 95% Student-t CI of the mean",
    "median": "line: median over seeds; band: 25-75% of the seeds",
}


def _grid(n: int, width: float = 5.0, height: float = 3.6):
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, axes = plots.new_figure(ncols=ncols, nrows=nrows, width=width, height=height)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _select(labels, wanted, what: str) -> list[str]:
    if wanted is None:
        return list(labels)
    missing = [w for w in wanted if w not in labels]
    if missing:
        raise OptplanError(f"no finished {what} labelled {missing[0]!r} (have: {list(labels)})")
    return [w for w in labels if w in wanted]


def _ok(results: Results):
    groups = results.groups()
    if not groups:
        raise OptplanError(f"{results.root} holds no successfully finished task to plot")
    return groups


def regret_figure(
    results: Results,
    metric: str = "regret",
    envs=None,
    agents=None,
    logx: bool = False,
    logy: bool = False,
    stat: str | None = None,
    t_min: float | None = None,
    lower_bound: bool = False,
):
    """One panel per environment configuration; one line and band per agent.

    `stat`: ``"mean"`` (band: 95% CI of the mean) or ``"median"`` (band: 25-75% of the seeds);
    by default the median on a log y axis (where a mean ± CI band can reach below 0) and the
    mean otherwise. `t_min`: leave out the stored points before this step (e.g. the first
    point of a linear grid on a log x axis). `lower_bound`: on the panels whose records carry
    Burnetas & Katehakis's ``C(P)`` (summary ``lower_bound``: the average criterion on an
    ergodic model), draw the asymptote ``C(P) ln t`` of a cumulative regret, or the level 1
    of a ratio ``regret / (C(P) ln t)`` (``metric="lower_bound_ratio"``,
    ``"gap_lower_bound_ratio"``).
    """
    if metric not in PLOT_CURVE_KEYS:
        raise OptplanError(
            f"metric must be one of {PLOT_CURVE_KEYS} for a regret plot, got {metric!r}"
        )
    groups = _ok(results)
    env_labels = _select(dict.fromkeys(e for _, e in groups), envs, "environment")
    agent_labels = _select(dict.fromkeys(a for a, _ in groups), agents, "agent")
    stat = stat or ("median" if logy else "mean")
    fig, axes = _grid(len(env_labels))
    ratio = metric in DERIVED_CURVE_KEYS
    ylabel = (
        f"{DERIVED_CURVE_KEYS[metric].replace('_', ' ')} / (C(P) ln t)"
        if ratio
        else f"cumulative {metric.replace('_', ' ')}"
    )
    for ax, env in zip(axes, env_labels, strict=True):
        curves, t_ref = {}, None
        for agent in agent_labels:
            recs = groups.get((agent, env))
            if not recs:
                continue
            t, Y = results.curve_matrix(recs, metric)
            if t_ref is None or t[-1] > t_ref[-1]:
                t_ref = t
            curves[agent] = (t, Y)
        # One grid per panel: the longest; others interpolated (NaN past their end).
        aligned = {}
        for agent, (t, Y) in curves.items():
            Z = np.full((Y.shape[0], t_ref.size), np.nan)
            inside = t_ref <= t[-1]
            for i, y in enumerate(Y):
                ok = np.isfinite(y)
                if ok.any():
                    Z[i, inside] = np.interp(t_ref[inside], t[ok], y[ok])
            aligned[agent] = Z
        shown = np.ones(t_ref.size, bool) if t_min is None else t_ref >= t_min
        plots.plot_regret(
            ax,
            t_ref[shown],
            {agent: Z[:, shown] for agent, Z in aligned.items()},
            ylabel=ylabel,
            logx=logx,
            logy=logy,
            title=env,
            legend=False,
            stat=stat,
        )
        if lower_bound:
            bound = _lower_bound(groups, env)
            if bound:
                t = t_ref[shown]
                line = np.ones(t.size) if ratio else bound * np.log(t)
                label = "lower bound (ratio 1)" if ratio else "C(P) ln t (lower bound)"
                ax.plot(t, line, color="black", ls="-", lw=1.2, label=label)
    plots.figure_legend(fig, axes)
    fig.suptitle(f"{results.spec['sweep']['name']}: {ylabel} against steps\n{STAT_NOTE[stat]}")
    return fig


#: What the panels of :func:`lower_bound_figure` divide by ``ln t``.
_PER_LOG_T = {
    "gap_regret": "gap regret sum_t Delta(x_t, a_t) / ln t",
    "regret": "pseudo-regret sum_t (g* - r(x_t, a_t)) / ln t",
    "realized_regret": "realized regret / ln t",
}


def lower_bound_figure(
    results: Results,
    env: str | None = None,
    metrics=("gap_regret", "regret"),
    agents=None,
    t_min: float = 100.0,
):
    """``regret / ln t`` against Burnetas & Katehakis's ``C(P)`` on one environment: one panel
    per metric of ``metrics`` (``gap_regret``, ``regret``, ``realized_regret``), one line
    (mean over seeds) and band (95% Student-t CI of the mean) per agent, the bound ``C(P)``
    (from the records' summaries) as a horizontal line, a log step axis from ``t_min``. An
    asymptotically optimal agent's curve settles on the line.

    Raises
    ------
    OptplanError
        If the environment's records carry no ``C(P)`` (not the average criterion, a model
        that is not ergodic, or a store written before the bound was recorded), or ``env`` is
        not given and the store has several environments.
    """
    groups = _ok(results)
    envs = list(dict.fromkeys(e for _, e in groups))
    if env is None:
        if len(envs) != 1:
            raise OptplanError(f"the store has {len(envs)} environments {envs}: pass env=")
        env = envs[0]
    _select(envs, [env], "environment")
    bound = _lower_bound(groups, env)
    if not bound:
        raise OptplanError(
            f"the records of {env!r} carry no positive lower bound C(P) (summary "
            "'lower_bound'): it needs the average criterion on an ergodic model"
        )
    for m in metrics:
        if m not in _PER_LOG_T:
            raise OptplanError(f"metrics must be among {tuple(_PER_LOG_T)}, got {m!r}")
    agent_labels = _select(dict.fromkeys(a for a, e in groups if e == env), agents, "agent")
    fig, axes = _grid(len(metrics), width=6.0, height=4.2)
    for ax, metric in zip(axes, metrics, strict=True):
        # one grid for every agent: the store's longest run (curve_matrix of them all)
        recs = [r for agent in agent_labels for r in groups[(agent, env)]]
        t, Y = results.curve_matrix(recs, metric)
        keep = t >= t_min
        per_log = Y[:, keep] / np.log(t[keep])
        curves, start = {}, 0
        for agent in agent_labels:
            n = len(groups[(agent, env)])
            curves[agent], start = per_log[start : start + n], start + n
        plots.plot_regret(
            ax,
            t[keep],
            curves,
            ylabel=_PER_LOG_T[metric],
            logx=True,
            title=f"{env}: {metric.replace('_', ' ')} / ln t",
            legend=False,
        )
        ax.axhline(bound, color="black", ls="-", lw=1.2, label=f"C(P) = {bound:.4g}")
    plots.figure_legend(fig, axes)
    sweep = results.spec["sweep"]
    runs = "/".join(str(n) for n in sorted({len(groups[(a, env)]) for a in agent_labels}))
    horizon = f" x {sweep['steps']:,} steps" if sweep.get("steps") else ""
    fig.suptitle(
        f"{sweep['name']}: regret / ln t against the lower bound C(P) (black line), {runs} runs"
        f"{horizon}\n{STAT_NOTE['mean']}",
        fontsize=10,
    )
    return fig


def _lower_bound(groups, env: str) -> float | None:
    """``C(P)`` of the panel ``env`` from its records' summaries (``None`` when none has it)."""
    for (_, e), recs in groups.items():
        if e == env:
            for r in recs:
                bound = (r.get("summary") or {}).get("lower_bound")
                if bound:
                    return float(bound)
    return None


def _varying_param(rows: list[dict]) -> str:
    params = sorted({k for r in rows for k in r if k.startswith("env.")})
    varying = [k for k in params if len({repr(r.get(k)) for r in rows}) > 1]
    numeric = [
        k
        for k in varying
        if all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool) for r in rows)
    ]
    if len(numeric) != 1:
        raise OptplanError(
            "cannot tell which environment parameter is the size: "
            f"numeric parameters that vary: {[k[4:] for k in numeric] or 'none'}; pass --param"
        )
    return numeric[0][4:]


def scaling_figure(
    results: Results,
    metric: str = "regret",
    param: str | None = None,
    reference: Callable | None = None,
    reference_label: str | None = None,
    agents=None,
    logy: bool = True,
    stat: str | None = None,
    partial: bool = True,
    dodge: float = 0.0,
):
    """A summary scalar vs an environment size parameter; one panel per environment type.

    Unsolved runs (``time_to_solve`` empty) and failed tasks are NaN. With `partial` (the
    default) a size that only some seeds solved is drawn hollow with ``"k/n"`` beside it;
    without, it is not drawn (k-learning Fig. 2's convention). `stat` is ``"median"`` (with
    the interquartile range) on a log y axis and ``"mean"`` (with a 95% CI) on a linear one
    unless given; the axis label says which. `dodge` shifts each agent's points apart
    (:func:`~optplan.plots.scaling.plot_scaling`).
    """
    if metric not in SCALING_METRICS:
        raise OptplanError(f"metric must be one of {SCALING_METRICS}, got {metric!r}")
    rows = results.rows
    if not rows:
        raise OptplanError(f"{results.root} holds no finished task")
    env_names = {r["env"]: rec["env"]["name"] for r, rec in zip(rows, results.records, strict=True)}
    by_type: dict[str, list[dict]] = {}
    for r in rows:
        by_type.setdefault(env_names[r["env"]], []).append(r)
    stat = stat or ("median" if logy else "mean")
    spread = "median, IQR of the seeds" if stat == "median" else "mean, 95% CI"
    fig, axes = _grid(len(by_type))
    some_nan = False
    for ax, (env_name, env_rows) in zip(axes, by_type.items(), strict=True):
        p = param or _varying_param(env_rows)
        key = f"env.{p}"
        if any(key not in r for r in env_rows):
            raise OptplanError(f"environment {env_name!r} has no parameter {p!r}")
        sizes = _scaling_sizes(env_rows, key, metric, agents)
        some_nan = some_nan or any(bool(np.isnan(Y).any()) for _, Y in sizes.values())
        scaling.plot_scaling(
            ax,
            sizes,
            ylabel=f"{metric.replace('_', ' ')} ({spread})",
            xlabel=p,
            reference=None if reference is None else (reference, reference_label),
            logy=logy,
            title=env_name,
            stat=stat,
            partial=partial,
            legend=False,
            dodge=dodge,
        )
    plots.figure_legend(fig, axes)
    fig.suptitle(_scaling_title(results.spec["sweep"], metric, some_nan, partial))
    return fig


def _scaling_sizes(env_rows: list[dict], key: str, metric: str, agents) -> dict:
    """``agent -> (x, Y)`` of one panel: the sizes ``x`` (column ``key``) and ``Y[seed, j]``,
    the metric at size ``x[j]`` (NaN for a failed task or an empty value)."""
    xs = sorted({r[key] for r in env_rows})
    sizes = {}
    for agent in _select(dict.fromkeys(r["agent"] for r in env_rows), agents, "agent"):
        cells: dict = {x: [] for x in xs}
        for r in env_rows:
            if r["agent"] != agent:
                continue
            v = r.get(metric) if r["status"] == "ok" else None
            cells[r[key]].append(np.nan if v is None else float(v))
        n = max(len(c) for c in cells.values())
        Y = np.full((n, len(xs)), np.nan)
        for j, x in enumerate(xs):
            Y[: len(cells[x]), j] = cells[x]
        sizes[agent] = (np.asarray(xs, dtype=float), Y)
    return sizes


def _scaling_title(spec: dict, metric: str, some_nan: bool, partial: bool) -> str:
    """The figure's title: the sweep, the metric, the horizon and what hollow markers mean."""
    horizon = (
        f"{spec['steps']:,} steps" if spec.get("steps") else f"{spec.get('episodes', 0):,} episodes"
    )
    note = ""
    if some_nan:
        note = (
            "; hollow marker: only k of n seeds finite (e.g. solved)"
            if partial
            else "; sizes with an unfinished seed not drawn"
        )
    return (
        f"{spec['name']}: {metric.replace('_', ' ')} at the end of a run ({horizon}) vs size{note}"
    )


def heatmap_figure(
    results: Results, env: str | None = None, agents=None, log: bool = True, envs=None
):
    """Mean visit counts over seeds, as small multiples: one row per environment
    configuration, one column per agent.

    An episodic environment's row shows ``(layer, state)`` images on one colour scale (one
    colorbar per row); a continuing environment's row shows bars per state on one y scale.
    Every environment of the sweep is drawn unless `envs` (labels) or `env` (one label)
    name some.
    """
    groups = _ok(results)
    env_labels = list(dict.fromkeys(e for _, e in groups))
    rows = _select(env_labels, [env] if env is not None else envs, "environment")
    agent_labels = _select(
        dict.fromkeys(a for a, e in groups if e in rows), agents, "agent on those environments"
    )
    fig, axes = plots.new_figure(ncols=len(agent_labels), nrows=len(rows), width=3.6, height=2.6)
    fig.set_layout_engine("constrained")
    ncols = len(agent_labels)
    kinds = set()
    for r, row_env in enumerate(rows):
        row_axes = axes[r * ncols : (r + 1) * ncols]
        visits = {
            agent: np.mean([results.arrays(rec)["visits"] for rec in groups[(agent, row_env)]], 0)
            for agent in agent_labels
            if groups.get((agent, row_env))
        }
        for ax, agent in zip(row_axes, agent_labels, strict=True):
            if agent not in visits:
                ax.set_axis_off()
                ax.set_title(f"{agent}: not run on this environment", fontsize=8)
        drawn = [
            (ax, visits[a]) for ax, a in zip(row_axes, agent_labels, strict=True) if a in visits
        ]
        if not drawn:
            continue
        if drawn[0][1].ndim == 2:
            kinds.add("per (layer, state), log10(1 + visits)" if log else "per (layer, state)")
            _heatmap_row(fig, drawn, log)
        else:
            kinds.add("per state (continuing: no layers, bars)")
            _bar_row(drawn, log)
        for ax, agent in zip(row_axes, agent_labels, strict=True):
            if agent in visits:
                ax.set_title(f"{agent} | {row_env}", fontsize=9)
    n = sorted({len(groups[(a, e)]) for e in rows for a in agent_labels if groups.get((a, e))})
    over = f"over {'/'.join(map(str, n))} seeds"
    fig.suptitle(
        f"{results.spec['sweep']['name']}: mean visits {over}, {'; '.join(sorted(kinds))}; "
        "one row per environment, one scale per row",
        fontsize=10,
    )
    return fig


def _heatmap_row(fig, drawn: list, log: bool) -> None:
    """One episodic environment's row: an image per agent on one colour scale, one colorbar."""
    scaled = [np.log10(1.0 + v) if log else v for _, v in drawn]
    vmin = min(float(np.nanmin(v)) for v in scaled)
    vmax = max(float(np.nanmax(v)) for v in scaled)
    for ax, v in drawn:
        plots.plot_heatmap(ax, v, log=log, ylabel="layer", colorbar=False, vmin=vmin, vmax=vmax)
    fig.colorbar(
        drawn[-1][0].images[0],
        ax=[ax for ax, _ in drawn],
        label="log10(1 + visits)" if log else "visits",
        shrink=0.9,
    )


def _bar_row(drawn: list, log: bool) -> None:
    """One continuing environment's row: bars of mean visits per state, one y scale."""
    top = max(float(np.nanmax(v)) for _, v in drawn)
    positive = [float(np.min(v[v > 0])) for _, v in drawn if np.any(v > 0)]
    for ax, v in drawn:
        states = np.arange(v.size)
        ax.bar(states, v, color="0.35")
        ax.set_xticks(states if states.size <= 20 else states[:: max(1, states.size // 10)])
        ax.set_xlabel("state")
        ax.set_ylabel("mean visits" + (" (log)" if log else ""))
        if log and positive:
            ax.set_yscale("log")
            ax.set_ylim(min(positive) / 2, top * 2)
        else:
            ax.set_ylim(0, top * 1.05 if top > 0 else 1)


def reference_curve(expr: str) -> Callable:
    """A reference curve from an expression in ``x`` (or ``N``), e.g. ``"2**(x-1)"``.

    Only arithmetic and ``exp``, ``log``, ``log2``, ``sqrt`` are available; ``^`` means power.
    """
    namespace = {
        "exp": np.exp,
        "log": np.log,
        "log2": np.log2,
        "sqrt": np.sqrt,
        "pi": math.pi,
        "e": math.e,
    }
    source = expr.replace("^", "**")
    try:
        code = compile(source, "<reference>", "eval")
    except SyntaxError as exc:
        raise OptplanError(f"reference {expr!r} is not an expression: {exc.msg}") from None
    unknown = set(code.co_names) - set(namespace) - {"x", "N"}
    if unknown:
        raise OptplanError(
            f"reference {expr!r} uses unknown name {sorted(unknown)[0]!r} "
            f"(allowed: x, N, {', '.join(namespace)})"
        )

    def f(x):
        x = np.asarray(x, dtype=float)
        return np.broadcast_to(
            eval(code, {"__builtins__": {}}, {**namespace, "x": x, "N": x}), x.shape
        )

    f(np.array([1.0]))  # fail now, not while drawing
    return f
