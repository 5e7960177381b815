"""The peers' episodic exploration agents (UCBVI with Hoeffding and Bernstein bonuses,
Q-learning with UCB-Hoeffding bonuses, tabular RLSVI) against PSRL and K-learning on bsuite's
deterministic DeepSea, L = 10, 20, 30: 5 seeds x 1,000 episodes
(models/sweeps/peers-episodic.toml), and rlberry's UCBVI on the same models.

Run from the repository root::

    OPENBLAS_NUM_THREADS=1 nice -n 10 optplan sweep models/sweeps/peers-episodic.toml \\
        --out results/peers-episodic --jobs 1
    python examples/peers_episodic.py results/peers-episodic --out examples/figures

prints the regret table (mean and 95% Student-t half-width over the seeds, at episodes 100
and 1,000, and the episodes to solve: the first episode at which the goal has been reached in
at least 10% of the episodes so far) as Markdown and writes ``peers-episodic.png`` into
``--out DIR`` (default ``results/figures/``, which git ignores).

rlberry's UCBVI as a further row (rlberry runs in its own environment:
``examples/rlberry_ucbvi_deepsea.py`` says how)::

    python examples/peers_episodic.py --export results/peers-episodic-models
    /tmp/rlberry-venv/bin/python examples/rlberry_ucbvi_deepsea.py \\
        results/peers-episodic-models results/peers-episodic-rlberry --episodes 1000
    /tmp/rlberry-venv/bin/python examples/rlberry_ucbvi_deepsea.py \\
        results/peers-episodic-models results/peers-episodic-rlberry-paper --episodes 1000 \\
        --bonus-scale-factor paper
    python examples/peers_episodic.py results/peers-episodic \\
        --rlberry results/peers-episodic-rlberry --rlberry results/peers-episodic-rlberry-paper \\
        --out examples/figures

``--export`` writes the sweep's DeepSea models (``mapping_seed`` = the seed index 0-4, as the
sweep's environment rows take it); ``--rlberry`` scores the saved actions against the true
model, exactly as optplan scores its runs (the sum of the gaps ``V*_l(s) - Q*_l(s, a)`` of the
steps taken, which on deterministic DeepSea is each episode's ``V*_0 - V^pi_0``).
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optplan.experiments.stats import mean_ci
from optplan.plots.plots import save_figure
from optplan.sweeps import load_results

ROOT = Path(__file__).resolve().parents[1]
AT = (100, 1000)  # episodes
SIZES = (10, 20, 30)
SEEDS = 5
RLBERRY = "rlberry UCBVI (simplified Bernstein, bonus_scale_factor 1)"
RLBERRY_PAPER = "rlberry UCBVI (bonus_scale_factor 7 H L: UCBVI-CH's constant)"


@dataclass
class Row:
    """One agent on one depth: cumulative regret curves ``Y[seed]`` at ``episodes``, and each
    seed's episodes to solve (``None``: not solved)."""

    episodes: np.ndarray
    Y: np.ndarray
    solve: list


def sweep_rows(results) -> dict[int, dict[str, Row]]:
    """``{L: {agent label: Row}}`` from a sweep's results, in sweep order."""
    out: dict[int, dict[str, Row]] = {}
    for (agent, _env), recs in results.groups().items():
        L = int(recs[0]["env"]["params"]["size"])
        t, Y = results.curve_matrix(recs, "regret")
        solve = [r["summary"].get("time_to_solve") for r in recs]
        out.setdefault(L, {})[agent] = Row(np.asarray(t) / L, np.asarray(Y), solve)
    return dict(sorted(out.items()))


def export_models(directory: Path) -> None:
    """The sweep's DeepSea models as ``deepsea-L{L}-m{mapping_seed}.npz``."""
    from optplan.envs import DeepSea

    directory.mkdir(parents=True, exist_ok=True)
    for L in SIZES:
        for m in range(SEEDS):
            mdp = DeepSea(size=L, mapping_seed=m).mdp
            np.savez(directory / f"deepsea-L{L}-m{m}.npz", P=mdp.P, R=mdp.R, initial=mdp.initial)
    print(f"{len(SIZES) * SEEDS} models in {directory}", file=sys.stderr)


def rlberry_rows(directory: Path, rows: dict[int, dict[str, Row]]) -> None:
    """Add rlberry's runs (``examples/rlberry_ucbvi_deepsea.py``), scored on the true model,
    as the row its ``label.txt`` names."""
    from optplan.dp import backward_induction
    from optplan.envs import DeepSea
    from optplan.experiments.metrics import time_to_solve

    runs: dict[int, list] = {}
    for path in sorted(directory.glob("deepsea-L*-m*.npz")):
        L, m = map(int, re.match(r"deepsea-L(\d+)-m(\d+)", path.stem).groups())
        mdp = DeepSea(size=L, mapping_seed=m).mdp
        Q, V = backward_induction(mdp.P, mdp.R)
        d = np.load(path)
        l, s, a = d["layers"], d["states"], d["actions"]
        per_episode = (V[l, s] - Q[l, s, a]).reshape(-1, L).sum(axis=1)
        goal = (mdp.R[l, s, a] > 0.5).reshape(-1, L).any(axis=1)
        runs.setdefault(L, []).append((np.cumsum(per_episode), time_to_solve(goal)))
    label = (directory / "label.txt").read_text().strip()
    for L, found in runs.items():
        Y = np.stack([y for y, _ in found])
        episodes = np.arange(1, Y.shape[1] + 1, dtype=float)
        rows.setdefault(L, {})[label] = Row(episodes, Y, [t for _, t in found])


def _at(episodes, Y, k):
    return np.array([np.interp(k, episodes, y) for y in Y])


def table(rows) -> list[str]:
    lines = [
        f"| L | agent | seeds | regret at {AT[0]:,} episodes | regret at {AT[1]:,} episodes "
        "| solved (seeds) | episodes to solve (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for L, agents in rows.items():
        for agent, row in agents.items():
            cells = []
            for k in AT:
                m, h = mean_ci(_at(row.episodes, row.Y, k))
                cells.append(f"{float(m):,.1f} ± {float(h):,.1f}")
            solved = [t for t in row.solve if t is not None]
            med = f"{np.median(solved):,.0f}" if solved else "—"
            lines.append(
                f"| {L} | {agent} | {len(row.Y)} | {cells[0]} | {cells[1]} "
                f"| {len(solved)}/{len(row.Y)} | {med} |"
            )
    return lines


STYLE = {
    "UCBVI-CH (paper constants)": ("tab:blue", "--"),
    "UCBVI-CH (beta_scale 1e-4)": ("tab:blue", "-"),
    "UCBVI-BF (paper constants)": ("tab:cyan", "--"),
    "UCBVI-BF (beta_scale 1e-4)": ("tab:cyan", "-"),
    "Q-learning-UCB (c = 1)": ("tab:orange", "-"),
    "RLSVI (sigma 1, prior_var 1)": ("tab:green", "--"),
    "RLSVI (sigma 0.1, prior_var 1)": ("tab:green", "-"),
    "PSRL (deterministic prior)": ("tab:red", "-"),
    "K-learning tau* (deterministic prior, posterior bonus)": ("tab:purple", "-"),
    RLBERRY: ("black", "-."),
    RLBERRY_PAPER: ("dimgray", "--"),
}


#: The two UCBVI rows at beta_scale 1e-4 coincide at L = 10: markers tell them apart.
MARKERS = {"UCBVI-CH (beta_scale 1e-4)": "o", "UCBVI-BF (beta_scale 1e-4)": "x"}

SHORT = {
    "UCBVI-CH (paper constants)": "UCBVI-CH paper",
    "UCBVI-BF (paper constants)": "UCBVI-BF paper",
    "UCBVI-CH (beta_scale 1e-4)": "UCBVI-CH 1e-4",
    "UCBVI-BF (beta_scale 1e-4)": "UCBVI-BF 1e-4",
    "Q-learning-UCB (c = 1)": "Q-learning-UCB",
    "RLSVI (sigma 1, prior_var 1)": "RLSVI sigma 1",
    "RLSVI (sigma 0.1, prior_var 1)": "RLSVI sigma 0.1",
    RLBERRY: "rlberry UCBVI",
    RLBERRY_PAPER: "rlberry UCBVI 7 H L",
}


def figure(rows):
    import matplotlib.pyplot as plt

    sizes = rows
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 5.0), sharey=True)
    axes = np.atleast_1d(axes)
    seeds = set()
    for ax, (L, agents) in zip(axes, sizes.items(), strict=True):
        never = []
        for agent, row in agents.items():
            episodes, Y = row.episodes, row.Y
            keep = episodes >= 1
            episodes, Y = episodes[keep], Y[:, keep]
            m, h = mean_ci(Y)
            color, style = STYLE.get(agent, (None, "-"))
            marker = MARKERS.get(agent)
            ax.plot(
                episodes,
                m,
                style,
                color=color,
                label=agent,
                lw=1.6,
                marker=marker,
                markevery=5,
                markersize=5,
                fillstyle="none",
            )
            ax.fill_between(episodes, m - h, m + h, color=color, alpha=0.15, lw=0)
            seeds.add(len(Y))
            if all(t is None for t in row.solve):
                never.append(SHORT.get(agent, agent))
        ax.plot(episodes, episodes, ":", color="grey", lw=1.2, label="regret 1 per episode")
        never_text = "no seed solved (goal in 10% of episodes): " + (", ".join(never) or "none")
        wrapped = textwrap.fill(never_text, 72)
        ax.text(
            0.5,
            1.01,
            wrapped,
            transform=ax.transAxes,
            ha="center",
            va="bottom",
            fontsize=7.5,
        )
        lines = wrapped.count("\n") + 1
        ax.set_title(f"DeepSea L = {L} (deterministic, bsuite)", pad=6 + 10 * lines)
        ax.set_xlabel("episode")
        ax.set_yscale("log")
        ax.set_ylim(8, 1500)
        ax.set_xlim(0, episodes[-1])
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel(r"cumulative regret $\sum_k\, V^*_0(s_0) - V^{\pi_k}_0(s_0)$")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8.5, frameon=False)
    fig.suptitle(
        "Episodic exploration on DeepSea: UCBVI, Q-learning-UCB, RLSVI (and rlberry's UCBVI where "
        "given) vs PSRL and K-learning;\nmean cumulative regret (log scale) and 95% Student-t band "
        "over "
        f"{'/'.join(map(str, sorted(seeds)))} seeds; the dotted line is regret 1 per episode "
        "(the goal never reached); beta_scale multiplies UCBVI's bonus (1: the paper's)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.11, 1, 1))
    return fig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="?", help="the sweep's result directory")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "results" / "figures",
        help="where the figure goes (default results/figures/; --out examples/figures replaces the "
        "committed one)",
    )
    ap.add_argument("--export", type=Path, help="write the sweep's DeepSea models here, then stop")
    ap.add_argument(
        "--rlberry",
        type=Path,
        action="append",
        default=[],
        help="a directory of rlberry UCBVI's saved runs, as a further row (repeatable)",
    )
    args = ap.parse_args(argv)
    if args.export is not None:
        export_models(args.export)
        return 0
    if args.results is None:
        ap.error("give the sweep's result directory (or --export DIR)")
    rows = sweep_rows(load_results(args.results))
    for directory in args.rlberry:
        rlberry_rows(directory, rows)
    print("\n".join(table(rows)))
    fig = figure(rows)
    print(save_figure(fig, args.out / "peers-episodic.png"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
