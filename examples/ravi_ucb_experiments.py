"""RAVI-UCB's experiments (ravi-ucb-optimistic-planning-regularized-dp has none): RAVI-UCB (tabular,
and linear on linear mixtures) against UCRL2-style discounted optimistic planning, continuing
PSRL and epsilon-greedy Q-learning, in the paper's setting (each step resets to nu_0 with
probability 1 - gamma), scored by the paper's regret ``R_T = sum_t <mu* - mu^{pi_t}, r>`` over
normalized discounted occupancies (exact, from the true model, one linear solve per policy the
agent followed).

Sweeps (``models/sweeps/``), run in this order into ``results/<name>`` (resumable: finished tasks
are skipped; the wall time of each run is logged in ``results/ravi-walltimes.json``):

- ``ravi-sensitivity-tabular``, ``ravi-sensitivity-linear``: ``beta_scale`` x ``eta_scale`` grids
  (multiples of the paper's beta and eta), T = 10^4, 5 seeds; they pick the "tuned" constants;
- ``ravi-tabular-gamma09``, ``ravi-tabular-gamma099``: RiverSwim-6 and a 10-state Dirichlet MDP
  at gamma = 0.9 / 0.99; ``ravi-linear``: 20-state linear mixtures, d = 2, 4, 8, gamma = 0.9;
  T = 10^5, 20 seeds.

Prints the table of ``R_T`` at T = 10^3, 10^4, 10^5 (mean ± 95% Student-t half-width over the
seeds) with the realized discounted regret at 10^5 beside it and the growth exponent of
``R_T`` in T (least-squares slope of ``log R_t`` on ``log t`` over the stored points in
[10^3, 10^5], per seed, mean ± 95% CI; Theorem 4.1's bound grows like ``sqrt(T)``, slope 1/2),
and the sensitivity grids; writes ``ravi-regret-tabular.png``, ``ravi-regret-linear.png`` and
``ravi-sensitivity.png`` into ``--out DIR`` (default ``results/figures/``, which git ignores;
``--out examples/figures`` replaces the committed figures).

Run from the repository root (one process; the sweeps are CPU-bound)::

    OPENBLAS_NUM_THREADS=1 python examples/ravi_ucb_experiments.py --quick   # T = 10^4, 3 seeds
    OPENBLAS_NUM_THREADS=1 python examples/ravi_ucb_experiments.py           # the full study
    python examples/ravi_ucb_experiments.py --table                          # from results/

``--quick`` runs the comparison sweeps with 3 seeds and T = 10^4 into ``results/ravi-quick/``
(same task seeds, so its runs are the first 10^4 steps of the full runs) and prints the
measured wall time and the full study's estimate (x 10 steps, x 20/3 seeds).

The fair comparison (``results/ravi-fair/``) tunes every agent by one protocol on held-out
models and evaluates on others::

    OPENBLAS_NUM_THREADS=1 python examples/ravi_ucb_experiments.py --tune      # -> tuned.json
    OPENBLAS_NUM_THREADS=1 python examples/ravi_ucb_experiments.py --evaluate  # reads it
    python examples/ravi_ucb_experiments.py --fair-table --out examples/figures

``--tune``: for each setting (:data:`SETTINGS`: the sparse goal Dirichlet family at S = 20 and
50, dense Dirichlet-10; gamma = 0.9, discounted resets), every cell of every agent's grid
(:data:`GRIDS`: RAVI-UCB's ``beta_scale`` x ``eta_scale``, each baseline's one exploration
knob) runs on the held-out models :data:`TUNE_MODELS` for :data:`T_TUNE` steps; each agent's
cell with the lowest mean ``R_T`` at :data:`T_TUNE` goes into ``tuned.json``. ``--evaluate``
runs the paper's constants and every agent's tuned cell on the evaluation models (seed i on
model i, i < :data:`EVAL_SEEDS`; fresh agent seeds) for :data:`T_EVAL` steps.
``--fair-table`` prints the reward-greedy policy's loss, the tuning grids, the ``R_T`` table with
the exponents of the mean curves (95% bootstrap intervals over seeds) and draws
``ravi-fair-regret.png``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from optplan.experiments.fits import growth_exponent, mean_curve_exponent
from optplan.experiments.stats import mean_ci
from optplan.modelfile import tomllib
from optplan.plots.plots import new_figure, save_figure
from optplan.sweeps import load_results, load_sweep, run_sweep
from optplan.sweeps.sweep import sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "models" / "sweeps"
RESULTS = ROOT / "results"
DEFAULT_OUT = RESULTS / "figures"  # untracked; --out examples/figures for the committed ones
SENSITIVITY = ("ravi-sensitivity-tabular", "ravi-sensitivity-linear")
MAIN = ("ravi-tabular-gamma09", "ravi-tabular-gamma099", "ravi-linear")
AT = (1_000, 10_000, 100_000)
METRIC = "occupancy_regret"
#: Sweep steps and seeds of --quick.
QUICK_STEPS, QUICK_SEEDS = 10_000, 3


# --- running -----------------------------------------------------------------------------------


def quick_sweep(path: Path):
    """The sweep of ``path`` with 3 seeds and T = 10^4 (agents keep their ``horizon``)."""
    data = tomllib.loads(path.read_text())
    data["name"] = "quick-" + data["name"]
    data["seeds"] = QUICK_SEEDS
    data["steps"] = QUICK_STEPS
    return sweep_from_dict(data, source=str(path))


def run_all(names, out_root: Path, jobs: int, quick: bool) -> dict:
    """Run (or resume) each sweep; returns the wall-time log ``{name: {wall_s, ran, total}}``."""
    log = out_root / "ravi-walltimes.json"
    times = json.loads(log.read_text()) if log.exists() else {}
    for name in names:
        path = SWEEPS / f"{name}.toml"
        sweep = quick_sweep(path) if quick else load_sweep(path)
        rep = run_sweep(sweep, out_root / name, jobs=jobs, quiet=True)
        print(f"  {name:<26} {rep}", file=sys.stderr)
        if rep.ran:
            prev = times.get(name, {"wall_s": 0.0, "ran": 0})
            times[name] = {
                "wall_s": round(prev["wall_s"] + rep.wall_time, 1),
                "ran": prev["ran"] + rep.ran,
                "total": rep.total,
            }
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(json.dumps(times, indent=1))
    return times


def estimate(times: dict) -> list[str]:
    """The full study's cost from the quick run's wall times (x steps ratio x seeds ratio)."""
    factor = (AT[-1] / QUICK_STEPS) * (20 / QUICK_SEEDS)
    lines, total = [], 0.0
    for name in MAIN:
        if name not in times:
            continue
        quick = times[name]["wall_s"]
        total += quick * factor
        lines.append(
            f"  {name:<26} quick {quick:8.1f} s ({times[name]['ran']} tasks) -> full about "
            f"{quick * factor / 60:6.1f} min"
        )
    lines.append(
        f"  full comparison on one core: about {total / 60:.0f} min (x {factor:.1f} of the quick "
        "run; the sensitivity grids are extra)"
    )
    return lines


# --- tables ------------------------------------------------------------------------------------


def slope(t: np.ndarray, y: np.ndarray, lo: float = AT[0], hi: float = AT[-1]) -> float:
    """Least-squares slope of ``log y`` on ``log t`` over ``lo <= t <= hi``; ``NaN`` unless
    ``y > 0`` on the whole range (a curve still at 0 at ``t = lo`` has no growth exponent)."""
    return growth_exponent(t, y, lo, hi)


def exponent_cell(t: np.ndarray, Y: np.ndarray, lo: float = AT[0], hi: float = AT[-1]) -> str:
    """The exponent of the mean curve over seeds with its 95% bootstrap interval over seeds
    (:func:`optplan.experiments.fits.mean_curve_exponent`, 2,000 resamples, fixed seed)."""
    k, low, high = mean_curve_exponent(t, Y, lo, min(hi, t[-1]), n_boot=2000, rng=0)
    if not np.isfinite(k):
        return "-"
    return f"{k:.2f} [{low:.2f}, {high:.2f}]"


def collect(names, out_root: Path) -> dict:
    """``{env label: {agent label: {"t", "Y" (seeds x t), "realized" (seeds,)}}}``."""
    data: dict = {}
    for name in names:
        d = out_root / name
        if not (d / "sweep.json").exists():
            continue
        res = load_results(d)
        for (agent, env), recs in res.groups().items():
            t, Y = res.curve_matrix(recs, METRIC)
            _, Z = res.curve_matrix(recs, "realized_regret")
            data.setdefault(env, {})[agent] = {"t": t, "Y": Y, "realized": Z[:, -1]}
    return data


def fmt(m: float, h: float) -> str:
    if not np.isfinite(m):
        return "-"
    digits = 1 if abs(m) >= 10 else 2
    return f"{m:,.{digits}f} ± {h:,.{digits}f}"


def regret_table(data: dict) -> list[str]:
    head = " | ".join(f"R_T, T = 10^{int(np.log10(T))}" for T in AT)
    lines = [
        f"| environment | agent | {head} | realized, T = max | exponent of the mean curve "
        "[95% bootstrap] |",
        "|---|---|" + "---|" * (len(AT) + 2),
    ]
    for env, agents in data.items():
        for agent, c in agents.items():
            t, Y = c["t"], c["Y"]
            cells = []
            for T in AT:
                if T > t[-1]:
                    cells.append("-")
                    continue
                vals = np.array([np.interp(T, t, y) for y in Y])
                cells.append(fmt(*mean_ci(vals)))
            lines.append(
                f"| {env} | {agent} (n={len(Y)}) | "
                + " | ".join(cells)
                + f" | {fmt(*mean_ci(c['realized']))} | {exponent_cell(t, Y)} |"
            )
    return lines


_GRID = re.compile(r"beta_scale=([0-9.e+-]+), eta_scale=([0-9.e+-]+)")


def grid(out_root: Path, name: str) -> dict:
    """``{env: (beta_scales, eta_scales, mean R_T (b x e), n)}`` of a sensitivity sweep."""
    d = out_root / name
    if not (d / "sweep.json").exists():
        return {}
    out: dict = {}
    for r in load_results(d).rows:
        if r["status"] != "ok":
            continue
        b, e = (float(x) for x in _GRID.search(r["agent"]).groups())
        out.setdefault(r["env"], {}).setdefault((b, e), []).append(r[METRIC])
    tables = {}
    for env, cells in out.items():
        bs, es = sorted({k[0] for k in cells}), sorted({k[1] for k in cells})
        M = np.array([[np.mean(cells[(b, e)]) for e in es] for b in bs])
        tables[env] = (bs, es, M, len(next(iter(cells.values()))))
    return tables


def grid_lines(tables: dict) -> list[str]:
    lines = []
    for env, (bs, es, M, n) in tables.items():
        lines.append(
            f"{env}: mean R_T at T = 10^4 over {n} seeds (rows beta_scale, cols eta_scale)"
        )
        lines.append(f"{'':>10}" + "".join(f"{e:>10g}" for e in es))
        for b, row in zip(bs, M, strict=True):
            lines.append(f"{b:>10g}" + "".join(f"{v:>10.1f}" for v in row))
        i, j = np.unravel_index(np.argmin(M), M.shape)
        lines.append(f"  lowest: beta_scale = {bs[i]:g}, eta_scale = {es[j]:g}: {M[i, j]:.1f}")
    return lines


def best_shared(tables: dict) -> tuple[float, float] | None:
    """The (beta_scale, eta_scale) with the lowest summed R_T / R_T of the paper's constants
    (beta_scale = 1, eta_scale = 1; about the uniform policy's) over the grid's environments."""
    score = None
    for bs, es, M, _ in tables.values():
        base = M[bs.index(1.0), es.index(1.0)] if 1.0 in bs and 1.0 in es else M.max()
        score = M / base if score is None else score + M / base
    if score is None:
        return None
    bs, es = next(iter(tables.values()))[:2]
    i, j = np.unravel_index(np.argmin(score), score.shape)
    return bs[i], es[j]


# --- figures -----------------------------------------------------------------------------------


#: ``agent -> (colour, line style, marker, z-order)``, shared by the figures. Every curve has
#: its own marker, placed at its own steps (:func:`marker_steps`), so that curves on top of each
#: other (RAVI-UCB with the paper's constants and epsilon-greedy, both close to linear) stay
#: visible; the paper's constants are dashed and drawn on top.
STYLE = {
    "RAVI-UCB (paper)": ("C0", "--", "o", 4.0),
    "RAVI-UCB (tuned)": ("C1", "-", "s", 3.0),
    "RAVI-UCB-linear (paper)": ("C5", "--", "D", 4.0),
    "RAVI-UCB-linear (tuned)": ("C6", "-", "P", 3.0),
    "UCRL2 (discounted)": ("C2", "-", "^", 2.5),
    "PSRL": ("C3", "-", "v", 2.5),
    "eps-greedy": ("C4", "-.", "X", 2.0),
    "UCRL2 (discounted) (tuned)": ("C2", "-", "^", 2.5),
    "PSRL (tuned)": ("C3", "-", "v", 2.5),
    "eps-greedy (tuned)": ("C4", "-.", "X", 2.0),
}
#: The y label: the paper's regret over normalized discounted occupancies.
YLABEL = r"$R_t = \sum_{u \leq t}\, \langle \mu^\star - \mu^{\pi_u},\, r \rangle$"
#: Markers per curve.
MARKERS = 6
#: A mean regret below this is round-off (an agent optimal from the start sums terms of order
#: 1e-17): drawn as 0, i.e. not on the log axis.
ROUND_OFF = 1e-9


def marker_steps(t: np.ndarray, i: int, n: int) -> list[int]:
    """Indices into ``t`` of :data:`MARKERS` log-spaced steps from ``t = 10`` on, shifted by
    ``i / n`` of their spacing for the ``i``-th of ``n`` curves: curves never share a marker."""
    lo = max(np.log10(max(t[0], 1.0)), 1.0)
    hi = np.log10(t[-1])
    step = (hi - lo) / MARKERS
    targets = 10 ** (lo + step * (np.arange(MARKERS) + (i + 0.5) / n))
    return sorted({int(k) for k in np.searchsorted(t, targets).clip(0, t.size - 1)})


def zero_note(agent: str, t: np.ndarray, m: np.ndarray) -> str:
    """What of ``agent``'s mean curve ``m`` is 0 (below :data:`ROUND_OFF`), so not drawn."""
    zero = m < ROUND_OFF
    if zero.all():
        return f"{agent}: $R_t$ = 0 throughout (not drawn)"
    if zero[: np.argmin(zero)].all():
        return f"{agent}: $R_t$ = 0 until $t$ = {t[np.argmin(zero)]:,.0f} (not drawn)"
    return f"{agent}: $R_t$ = 0 at {zero.sum()} of {zero.size} steps stored (not drawn)"


def regret_figure(data: dict, envs: list[str], ncols: int, title: str):
    """``R_t`` against ``t``, log-log, one panel per environment: the mean over seeds and its
    95% Student-t band per agent, slope-1/2 and slope-1 guides. The y axis starts at the decade
    below the lowest positive mean, so that every curve is drawn whole; what a log axis cannot
    show (a mean at 0 or at round-off, a band reaching 0) is said in the title."""
    nrows = -(-len(envs) // ncols)
    fig, axes = new_figure(ncols, nrows, width=5.2, height=3.9)
    handles, notes = {}, set()
    for ax, env in zip(axes, envs, strict=False):
        stats = {a: (c["t"], *mean_ci(c["Y"], axis=0)) for a, c in data[env].items()}
        zeros = []  # what the log axis cannot show, said under the panel's title
        for agent, (t, m, h) in stats.items():
            if np.any(m < ROUND_OFF):
                zeros.append(zero_note(agent, t, m))
                stats[agent] = (t, np.where(m < ROUND_OFF, np.nan, m), h)
        lowest = min(float(np.nanmin(m)) for _, m, _ in stats.values() if np.any(m > 0))
        bottom = 10.0 ** np.floor(np.log10(lowest))
        t_max = max(t[-1] for t, _, _ in stats.values())
        for i, (agent, (t, m, h)) in enumerate(stats.items()):
            color, style, marker, z = STYLE.get(agent, (None, "-", "o", 2.0))
            (line,) = ax.plot(
                t,
                m,
                linestyle=style,
                marker=marker,
                markevery=marker_steps(t, i, len(stats)),
                markersize=5,
                color=color,
                label=agent,
                lw=1.5,
                zorder=z,
            )
            ax.fill_between(
                t,
                np.maximum(m - h, bottom),
                m + h,
                color=line.get_color(),
                alpha=0.2,
                lw=0,
                zorder=z - 1,
            )
            handles.setdefault(agent, line)
            if np.any((m > 0) & (m - h <= bottom)):
                notes.add("bands reaching the axis' bottom are cut there")
        # slope guides from t = 10^3, a third below the panel's lowest curve there
        low = min(np.interp(1e3, t, np.nan_to_num(m)) for t, m, _ in stats.values())
        tt = np.array([1e3, t_max])
        for power, style in ((0.5, ":"), (1.0, "--")):
            y = max(low, 0.3) / 3 * (tt / 1e3) ** power
            (g,) = ax.plot(tt, y, color="0.45", ls=style, lw=1, zorder=1)
            handles.setdefault(f"slope {power:g} from $t = 10^3$ (guide)", g)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=bottom)
        ax.set_xlabel("step $t$")
        ax.set_ylabel(YLABEL)
        ax.set_title("\n".join([env, *zeros]), fontsize=10 if not zeros else 9)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    for ax in axes[len(envs) :]:
        ax.set_visible(False)
    fig.suptitle(title + ("" if not notes else f"\n({'; '.join(sorted(notes))})"), fontsize=10)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="lower center",
        ncol=min(4, len(handles)),
        fontsize=8,
        frameon=False,
    )
    rows = -(-len(handles) // 4)
    fig.tight_layout(rect=(0, 0.045 * rows / nrows + 0.02, 1, 0.95))
    return fig


def sensitivity_figure(tables: dict):
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    panels = list(tables.items())
    fig, axes = new_figure(len(panels), 1, width=4.6, height=3.9)
    for ax, (env, (bs, es, M, n)) in zip(axes, panels, strict=True):
        image = ax.imshow(M, norm=LogNorm(vmin=max(M.min(), 0.5), vmax=M.max()), cmap="viridis_r")
        ax.figure.colorbar(image, ax=ax, label="mean R_T, T = 10^4 (log)")
        ax.set_xticks(range(len(es)), [f"{e:g}" for e in es], fontsize=8)
        ax.set_yticks(range(len(bs)), [f"{b:g}" for b in bs], fontsize=8)
        ax.set_xlabel("eta_scale (x Theorem 4.1's eta)")
        ax.set_ylabel("beta_scale (x the paper's beta)")
        i, j = np.unravel_index(np.argmin(M), M.shape)
        mid = np.sqrt(max(M.min(), 0.5) * M.max())  # dark cells (high regret) get white text
        for r in range(len(bs)):
            for c in range(len(es)):
                ax.text(
                    c,
                    r,
                    f"{M[r, c]:.0f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if M[r, c] > mid else "black",
                    fontweight="bold" if (r, c) == (i, j) else "normal",
                )
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=1.5))
        ax.set_title(f"{env}\n(mean of {n} seeds; red box = lowest)", fontsize=9)
    fig.suptitle(
        "RAVI-UCB sensitivity: mean R_T at T = 10^4 (lower is better) over beta_scale x "
        "eta_scale; gamma = 0.9, horizon T = 10^4; scale 1 = the paper's constants",
        fontsize=10,
    )
    return fig


# --- the fair comparison: every agent tuned the same way on held-out models --------------------

#: Results of the fair comparison (tuning and evaluation sweeps, the tuned constants).
FAIR = RESULTS / "ravi-fair"
#: The tuned constants the evaluation sweeps read (written by ``--tune``).
TUNED = FAIR / "tuned.json"
FAIR_GAMMA = 0.9
#: Tuning: every grid cell of every agent on each held-out model, one agent seed, T_TUNE steps;
#: selection by the mean R_T at T_TUNE over the held-out models.
T_TUNE = 30_000
TUNE_MODELS = tuple(range(1000, 1006))
#: Evaluation: EVAL_SEEDS seeds, seed i on model i (model seeds 0..11, disjoint from
#: TUNE_MODELS), agent seeds from another sweep seed than the tuning's; T_EVAL steps.
T_EVAL = 100_000
EVAL_SEEDS = 12
TUNE_SEED, EVAL_SEED = 2101, 2102
#: setting -> (environment, its parameters). Model seeds are set by the protocol.
SETTINGS = {
    "goal-dirichlet-20": (
        "sparse-goal-dirichlet-resets",
        {"n_states": 20, "n_actions": 3, "discount": FAIR_GAMMA},
    ),
    "goal-dirichlet-50": (
        "sparse-goal-dirichlet-resets",
        {"n_states": 50, "n_actions": 4, "discount": FAIR_GAMMA},
    ),
    "dirichlet-10": (
        "random-dirichlet-resets",
        {"n_states": 10, "n_actions": 3, "discount": FAIR_GAMMA},
    ),
}
#: setting -> the label of its panel and table rows.
SETTING_LABELS = {
    "goal-dirichlet-20": "sparse goal Dirichlet S=20 A=3",
    "goal-dirichlet-50": "sparse goal Dirichlet S=50 A=4",
    "dirichlet-10": "dense Dirichlet S=10 A=3",
}
#: agent label -> (registered agent, fixed parameters, the exploration grid {knob: values}).
#: RAVI-UCB's two constants are multiples of the paper's beta and eta at horizon T_EVAL (the
#: same absolute constants in tuning and evaluation); each baseline has its one knob.
GRIDS = {
    "RAVI-UCB": (
        "ravi-ucb",
        {"horizon": T_EVAL},
        {
            "beta_scale": [3e-5, 1e-4, 3e-4, 1e-3, 3e-3],
            "eta_scale": [100.0, 1000.0, 10000.0, 100000.0],
        },
    ),
    "UCRL2 (discounted)": ("ucrl2-discounted", {}, {"delta": [0.99, 0.1, 0.001]}),
    "PSRL": (
        "psrl-continuing",
        {"discount": FAIR_GAMMA, "update_every": round(1 / (1 - FAIR_GAMMA))},
        {"transition_prior": [0.01, 0.03, 0.1, 0.3, 1.0]},
    ),
    "eps-greedy": ("epsilon-greedy", {"discount": 1.0}, {"epsilon": [0.003, 0.01, 0.03, 0.1, 0.3]}),
}
#: The untuned reference in the evaluation: the paper's constants.
PAPER = ("RAVI-UCB (paper)", "ravi-ucb", {"horizon": T_EVAL})


def env_model(setting: str, model_seed: int):
    """The true model of ``setting`` drawn from ``model_seed``."""
    name, params = SETTINGS[setting]
    from optplan.envs.registry import ENVS

    return ENVS[name].build(0, **params, model_seed=model_seed).unwrapped.mdp


def greedy_loss(mdp) -> float:
    """``<mu* - mu^greedy, r>``: the per-step regret of the reward-greedy policy (what an agent
    that knows the rewards and nothing else plays; UCRL2's first policies)."""
    from optplan.experiments.metrics import occupancy_gaps

    greedy = np.eye(mdp.n_actions)[mdp.R.argmax(axis=1)]
    uniform = np.full(mdp.R.shape, 1.0 / mdp.n_actions)
    gaps = occupancy_gaps(mdp, np.stack([greedy, uniform]))
    return np.where(np.abs(gaps) < 1e-12, 0.0, gaps)  # an optimal policy's round-off


def cells(grid: dict) -> list[dict]:
    """Every combination of a grid ``{knob: values}``, in order."""
    out = [{}]
    for knob, values in grid.items():
        out = [{**c, knob: v} for c in out for v in values]
    return out


def cell_label(agent: str, cell: dict) -> str:
    return agent + " " + ", ".join(f"{k}={v:g}" for k, v in cell.items())


#: Extension rounds: after a round, an agent whose best cell lies at an end of its grid for a
#: knob gets that knob's next value beyond the end (the grid's ratio there) in every
#: combination with the other knob's values; at most EXTEND rounds after the first.
EXTEND = 2
#: Open bounds a knob's values must stay within (no extension past them).
KNOB_BOUNDS = {"delta": (0.0, 1.0), "epsilon": (0.0, 1.0)}


def extend(grid: dict, best: dict) -> dict | None:
    """``grid`` with, for every knob at whose smallest or largest value ``best`` lies, the next
    value beyond it (``v0 * v0 / v1``, 3 significant digits) if it stays within
    :data:`KNOB_BOUNDS`; ``None`` when nothing is added."""
    out, grew = {}, False
    for knob, values in grid.items():
        v = sorted(values)
        new = list(values)
        if len(v) >= 2:
            lo_b, hi_b = KNOB_BOUNDS.get(knob, (0.0, np.inf))
            for end, near in ((v[0], v[1]), (v[-1], v[-2])):
                if best[knob] == end:
                    x = float(f"{end * end / near:.3g}")
                    if lo_b < x < hi_b and x not in new:
                        new.append(x)
                        grew = True
        out[knob] = sorted(new)
    return out if grew else None


def tune_name(setting: str, round_: int) -> str:
    """The tuning sweep of ``setting``'s round ``round_`` (1: the grids of :data:`GRIDS`)."""
    return f"ravi-fair-tune-{setting}" + ("" if round_ == 1 else f"-r{round_}")


def tune_sweep(setting: str, round_: int = 1, todo: dict | None = None):
    """The cells ``todo`` (``{agent: [cell, ...]}``; default: every cell of :data:`GRIDS`) on
    the held-out models of ``setting``, T_TUNE steps, one seed each."""
    env, params = SETTINGS[setting]
    if todo is None:
        todo = {agent: cells(grid) for agent, (_, _, grid) in GRIDS.items()}
    agents = [
        {
            "name": GRIDS[agent][0],
            "label": cell_label(agent, cell),
            "params": {**GRIDS[agent][1], **cell},
        }
        for agent, todo_cells in todo.items()
        for cell in todo_cells
    ]
    envs = [
        {"name": env, "label": f"{setting} model {m}", "params": {**params, "model_seed": m}}
        for m in TUNE_MODELS
    ]
    return sweep_from_dict(
        {
            "name": tune_name(setting, round_),
            "description": f"RAVI-UCB fair comparison: tuning on held-out models, {setting}",
            "seed": TUNE_SEED,
            "seeds": 1,
            "steps": T_TUNE,
            "curves": {"points": 20, "scale": "log"},
            "agents": agents,
            "envs": envs,
        },
        source="examples/ravi_ucb_experiments.py",
    )


def select(setting: str, grids: dict | None = None) -> dict:
    """``{agent: {"params", "mean_R", "grid": [[cell, mean R_T at T_TUNE, n], ...]}}``: each
    agent's cell of ``grids`` (default: :data:`GRIDS`' own) with the lowest mean R_T at T_TUNE
    over the held-out models, read from every tuning round of ``setting``."""
    if grids is None:
        grids = {agent: grid for agent, (_, _, grid) in GRIDS.items()}
    by_label: dict = {}
    for round_ in range(1, EXTEND + 2):
        d = FAIR / tune_name(setting, round_)
        if not (d / "sweep.json").exists():
            continue
        for r in load_results(d).rows:
            if r["status"] == "ok":
                by_label.setdefault(r["agent"], []).append(r[METRIC])
    out = {}
    for agent, grid in grids.items():
        rows = []
        for cell in cells(grid):
            vals = by_label.get(cell_label(agent, cell), [])
            if len(vals) != len(TUNE_MODELS):
                raise SystemExit(f"tuning of {setting} incomplete: {cell_label(agent, cell)}")
            rows.append([cell, float(np.mean(vals)), len(vals)])
        best = min(rows, key=lambda row: row[1])
        out[agent] = {"params": best[0], "mean_R": best[1], "grid": rows, "knobs": grid}
    return out


def eval_sweep(setting: str, tuned: dict):
    """The evaluation of ``setting``: the paper's constants and every agent at its tuned
    constants, EVAL_SEEDS seeds on the evaluation models (seed i on model i), T_EVAL steps."""
    env, params = SETTINGS[setting]
    label, name, fixed = PAPER
    agents = [{"name": name, "label": label, "params": dict(fixed)}]
    for agent, (name, fixed, _) in GRIDS.items():
        agents.append(
            {
                "name": name,
                "label": f"{agent} (tuned)",
                "params": {**fixed, **tuned[setting][agent]["params"]},
            }
        )
    return sweep_from_dict(
        {
            "name": f"ravi-fair-{setting}",
            "description": f"RAVI-UCB fair comparison: evaluation, {setting}",
            "seed": EVAL_SEED,
            "seeds": EVAL_SEEDS,
            "steps": T_EVAL,
            "curves": {"points": 80, "scale": "log"},
            "agents": agents,
            "envs": [{"name": env, "label": SETTING_LABELS[setting], "params": dict(params)}],
        },
        source="examples/ravi_ucb_experiments.py",
    )


def run_logged(sweep, out: Path, jobs: int, log: dict) -> None:
    """Run (or resume) ``sweep`` into ``out``; wall and CPU time (this process) into ``log``."""
    wall, cpu = time.perf_counter(), time.process_time()
    rep = run_sweep(sweep, out, jobs=jobs, quiet=True)
    print(f"  {sweep.name:<34} {rep}", file=sys.stderr)
    if rep.ran:
        prev = log.get(sweep.name, {"wall_s": 0.0, "cpu_s": 0.0, "ran": 0})
        log[sweep.name] = {
            "wall_s": round(prev["wall_s"] + time.perf_counter() - wall, 1),
            "cpu_s": round(prev["cpu_s"] + time.process_time() - cpu, 1),
            "ran": prev["ran"] + rep.ran,
            "total": rep.total,
        }
    FAIR.mkdir(parents=True, exist_ok=True)
    (FAIR / "walltimes.json").write_text(json.dumps(log, indent=1))


def tune(jobs: int) -> dict:
    """Run the tuning rounds, select, write :data:`TUNED`."""
    log_path = FAIR / "walltimes.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    tuned = {}
    for setting in SETTINGS:
        grids = {agent: grid for agent, (_, _, grid) in GRIDS.items()}
        run_logged(tune_sweep(setting), FAIR / tune_name(setting, 1), jobs, log)
        for round_ in range(2, EXTEND + 2):
            picked = select(setting, grids)
            todo = {}
            for agent, grid in grids.items():
                wider = extend(grid, picked[agent]["params"])
                if wider is not None:
                    old = cells(grid)
                    todo[agent] = [c for c in cells(wider) if c not in old]
                    grids[agent] = wider
            if not todo:
                break
            sweep = tune_sweep(setting, round_, todo)
            run_logged(sweep, FAIR / tune_name(setting, round_), jobs, log)
        tuned[setting] = select(setting, grids)
    protocol = {
        "t_tune": T_TUNE,
        "tune_models": list(TUNE_MODELS),
        "tune_seed": TUNE_SEED,
        "grids": {a: g for a, (_, _, g) in GRIDS.items()},
        "extend_rounds": EXTEND,
        "selection": "lowest mean R_T at t_tune over the held-out models; a pick at an end "
        "of a knob's grid extends it beyond that end (at most extend_rounds times)",
    }
    TUNED.write_text(json.dumps({"protocol": protocol, "tuned": tuned}, indent=1))
    print(f"wrote {TUNED}", file=sys.stderr)
    return tuned


def evaluate(jobs: int) -> None:
    """Run the evaluation sweeps at the constants of :data:`TUNED`."""
    if not TUNED.exists():
        raise SystemExit(f"{TUNED} missing: run with --tune first")
    tuned = json.loads(TUNED.read_text())["tuned"]
    log_path = FAIR / "walltimes.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    for setting in SETTINGS:
        run_logged(eval_sweep(setting, tuned), FAIR / f"ravi-fair-{setting}", jobs, log)


def tuned_lines() -> list[str]:
    """The tuning grids' mean R_T at T_TUNE and the picked cells: the one-knob agents in one
    table, RAVI-UCB's two knobs as a matrix per setting (bold = picked)."""
    if not TUNED.exists():
        return []
    stored = json.loads(TUNED.read_text())
    tuned, t_tune, models = (
        stored["tuned"],
        stored["protocol"]["t_tune"],
        stored["protocol"]["tune_models"],
    )
    lines = [
        f"tuning: mean R_T at T = {t_tune:,} over {len(models)} held-out models "
        f"(model seeds {models[0]}-{models[-1]}), one agent seed each; bold = picked",
        "",
        "| setting | agent | knob: mean R_T at T_tune | picked |",
        "|---|---|---|---|",
    ]
    for setting, agents in tuned.items():
        for agent, t in agents.items():
            if len(t["params"]) != 1:
                continue
            (knob,) = t["params"]
            grid = ", ".join(
                (
                    f"**{cell[knob]:g}: {m:,.0f}**"
                    if cell == t["params"]
                    else f"{cell[knob]:g}: {m:,.0f}"
                )
                for cell, m, _ in t["grid"]
            )
            lines.append(f"| {setting} | {agent} | {knob} = {grid} | {t['params'][knob]:g} |")
    for setting, agents in tuned.items():
        for agent, t in agents.items():
            if len(t["params"]) != 2:
                continue
            (kr, kc) = t["params"]
            rows = sorted({cell[kr] for cell, _, _ in t["grid"]})
            cols = sorted({cell[kc] for cell, _, _ in t["grid"]})
            value = {(cell[kr], cell[kc]): m for cell, m, _ in t["grid"]}
            lines += [
                "",
                f"{setting}, {agent}: mean R_T at T = {t_tune:,} (rows {kr}, columns {kc})",
                "",
                f"| {kr} \\ {kc} | " + " | ".join(f"{c:g}" for c in cols) + " |",
                "|---|" + "---|" * len(cols),
            ]
            for r in rows:
                cells_ = []
                for c in cols:
                    text = f"{value[(r, c)]:,.0f}"
                    picked = t["params"] == {kr: r, kc: c}
                    cells_.append(f"**{text}**" if picked else text)
                lines.append(f"| {r:g} | " + " | ".join(cells_) + " |")
    return lines


def greedy_lines() -> list[str]:
    """The reward-greedy and uniform policies' per-step regret on the evaluation and tuning
    models of every setting."""
    lines = [
        "| setting | models | reward-greedy loss per step: mean (min, max) | "
        "uniform policy's loss per step: mean |",
        "|---|---|---|---|",
    ]
    for setting in SETTINGS:
        for what, seeds in (
            (f"evaluation (0-{EVAL_SEEDS - 1})", range(EVAL_SEEDS)),
            (f"tuning ({TUNE_MODELS[0]}-{TUNE_MODELS[-1]})", TUNE_MODELS),
        ):
            L = np.array([greedy_loss(env_model(setting, m)) for m in seeds])
            lines.append(
                f"| {setting} | {what} | {L[:, 0].mean():.4f} ({L[:, 0].min():.4f}, "
                f"{L[:, 0].max():.4f}) | {L[:, 1].mean():.4f} |"
            )
    return lines


def paired_lines() -> list[str]:
    """Per setting: tuned RAVI-UCB's R_T at T_EVAL minus each other agent's on the same model
    (seed i plays model i for every agent; mean ± 95% Student-t), and every agent's regret per
    step over the second half of the run, ``(R_T - R_{T/2}) / (T/2)``."""
    lines = [
        "| setting | agent | R_T(RAVI-UCB tuned) - R_T(agent), paired by model | RAVI-UCB lower "
        "on | regret per step over [T/2, T] | models below 0.001 per step |",
        "|---|---|---|---|---|---|",
    ]
    for setting in SETTINGS:
        d = FAIR / f"ravi-fair-{setting}"
        if not (d / "sweep.json").exists():
            continue
        res = load_results(d)
        final, late = {}, {}
        for (agent, _), recs in res.groups().items():
            t, Y = res.curve_matrix(recs, METRIC)
            Y = Y[np.argsort([r["seed_index"] for r in recs])]
            half = int(np.searchsorted(t, t[-1] / 2))
            final[agent] = Y[:, -1]
            late[agent] = (Y[:, -1] - Y[:, half]) / (t[-1] - t[half])
        ours = final["RAVI-UCB (tuned)"]
        for agent in final:
            diff = "-" if agent == "RAVI-UCB (tuned)" else fmt(*mean_ci(ours - final[agent]))
            lower = "-" if diff == "-" else f"{int((ours < final[agent]).sum())} of {ours.size}"
            m, h = mean_ci(late[agent])
            lines.append(
                f"| {SETTING_LABELS[setting]} | {agent} | {diff} | {lower} | {m:.4f} ± {h:.4f} | "
                f"{int((late[agent] < 1e-3).sum())} of {ours.size} |"
            )
    return lines


def fair_report(figures: Path) -> None:
    """Print the fair comparison's tables; draw ``ravi-fair-regret.png`` into ``figures``."""
    print("\n".join(greedy_lines()))
    print()
    print("\n".join(tuned_lines()))
    print()
    data = collect([f"ravi-fair-{s}" for s in SETTINGS], FAIR)
    if not data:
        return
    print("\n".join(regret_table(data)))
    print()
    print("\n".join(paired_lines()))
    figures.mkdir(parents=True, exist_ok=True)
    n = sorted({len(c["Y"]) for a in data.values() for c in a.values()})
    models = len(json.loads(TUNED.read_text())["protocol"]["tune_models"]) if TUNED.exists() else 0
    fig = regret_figure(
        data,
        list(data),
        len(data),
        "RAVI-UCB vs baselines, every agent tuned by the same protocol on "
        f"{models} held-out models ($\\gamma = 0.9$, discounted resets)\n"
        "$R_t$ (log-log): mean and 95% Student-t CI over "
        f"{'/'.join(map(str, n))} evaluation models, one seed each",
    )
    print(save_figure(fig, figures / "ravi-fair-regret.png"), file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="only tables and figures from results/")
    ap.add_argument("--quick", action="store_true", help="3 seeds, T = 10^4: measure the cost")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="directory for the figures (default: results/figures/, untracked; "
        "--out examples/figures replaces the committed ones)",
    )
    fair = ap.add_argument_group("the fair comparison (results/ravi-fair/)")
    fair.add_argument("--tune", action="store_true", help="tune every agent on the held-out models")
    fair.add_argument(
        "--evaluate", action="store_true", help="evaluate at the tuned constants (tuned.json)"
    )
    fair.add_argument(
        "--fair", action="store_true", help="--tune, --evaluate, then its tables and figure"
    )
    fair.add_argument(
        "--fair-table", action="store_true", help="the fair comparison's tables and figure only"
    )
    args = ap.parse_args(argv)
    figures = args.out
    if args.tune or args.evaluate or args.fair or args.fair_table:
        start = time.perf_counter()
        if args.tune or args.fair:
            tune(args.jobs)
        if args.evaluate or args.fair:
            evaluate(args.jobs)
        if not args.fair_table:
            print(f"ran in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        fair_report(figures)
        return 0
    root = RESULTS / "ravi-quick" if args.quick else RESULTS
    if not args.table:
        start = time.perf_counter()
        names = MAIN if args.quick else (*SENSITIVITY, *MAIN)
        times = run_all(names, root, args.jobs, args.quick)
        print(f"ran in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        if args.quick:
            print("\n".join(estimate(times)))
    tabs = {}
    for name in SENSITIVITY:
        tabs[name] = grid(RESULTS, name)
        print("\n".join(grid_lines(tabs[name])))
        pick = best_shared(tabs[name])
        if pick:
            print(
                f"  {name}: best over its environments: beta_scale = {pick[0]:g}, "
                f"eta_scale = {pick[1]:g}"
            )
    data = collect(MAIN, root)
    print("\n".join(regret_table(data)))
    if args.quick:
        return 0
    figures.mkdir(parents=True, exist_ok=True)
    tabular = [e for e in data if not e.startswith("linear")]
    linear = [e for e in data if e.startswith("linear")]
    n = {len(c["Y"]) for a in data.values() for c in a.values()}
    seeds = "/".join(str(k) for k in sorted(n))
    t_end = max(int(c["t"][-1]) for a in data.values() for c in a.values())
    horizon = f"10^{{{np.log10(t_end):.0f}}}" if np.log10(t_end) % 1 == 0 else f"{t_end:,}"
    if tabular:
        fig = regret_figure(
            data,
            tabular,
            2,
            f"RAVI-UCB vs baselines, tabular, discounted resets: $R_t$ to $T = {horizon}$ "
            f"(log-log), mean and 95% CI over {seeds} seeds",
        )
        print(save_figure(fig, figures / "ravi-regret-tabular.png"), file=sys.stderr)
    if linear:
        fig = regret_figure(
            data,
            linear,
            3,
            f"RAVI-UCB on linear mixtures (20 states, 2 actions, $\\gamma = 0.9$): $R_t$ to "
            f"$T = {horizon}$ (log-log), mean and 95% CI over {seeds} seeds",
        )
        print(save_figure(fig, figures / "ravi-regret-linear.png"), file=sys.stderr)
    merged = {k: v for name in SENSITIVITY for k, v in tabs[name].items()}
    if merged:
        print(
            save_figure(sensitivity_figure(merged), figures / "ravi-sensitivity.png"),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
