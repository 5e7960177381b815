"""K-learning on DeepSea: the figures of k-learning-variational-bayesian-rl §4.

Fig. 2 (episodes to solve vs depth, from a sweep's results)::

    optplan sweep models/sweeps/k-learning-fig2.toml --out results/k-learning-fig2 --jobs 2
    python examples/k_learning_deepsea.py fig2 results/k-learning-fig2

writes ``examples/figures/k-learning-fig2.png`` and prints, per agent and depth, how many of
the seeds solved and the median episodes to solve, then each agent's largest depth solved by
every seed.

Fig. 3 and 4 (value of Eq. 14 and log visit counts at episodes 5, 50, 100, 300, 1000 on
DeepSea L = 50, one seed, K-learning with tau* and soft Q-learning)::

    python examples/k_learning_deepsea.py fig34

writes ``examples/figures/k-learning-fig3.png`` (K-learning) and ``k-learning-fig4.png``
(soft-Q) and prints the column reached in the last row and the goal visits at each snapshot.
Cells right of the diagonal can never be reached and are left blank.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from optplan.agents import KLearning, SoftQ
from optplan.envs import DeepSea
from optplan.experiments import load_results, run
from optplan.experiments.figures import reference_curve, scaling_figure
from optplan.experiments.plots import new_figure, plot_heatmap, save_figure

FIGURES = Path(__file__).parent / "figures"
SNAPSHOTS = (5, 50, 100, 300, 1000)


def fig2(results_dir: str, out: Path) -> None:
    results = load_results(results_dir)
    fig = scaling_figure(
        results,
        metric="time_to_solve",
        param="size",
        reference=reference_curve("2**(x-1)"),
        reference_label="2^(L-1)",
    )
    cap = results.spec["sweep"]["episodes"]
    ax = fig.axes[0]
    ax.axhline(cap, color="0.4", lw=0.8, ls=":", label=f"cap ({cap:g} episodes)")
    ax.set_ylim(1, 30 * cap)  # the 2^(L-1) line would otherwise stretch the axis to 1e14
    ax.set_ylabel("episodes to solve (mean, 95% CI)")
    ax.set_xlabel("depth L")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    ax.set_title("DeepSea (a depth is drawn when every seed solves it)", fontsize=10)
    fig.set_size_inches(8.0, 4.2)
    fig.suptitle(results.spec["sweep"].get("description", "k-learning Fig. 2"), fontsize=10)
    save_figure(fig, out)
    cells: dict[str, dict[int, list]] = {}
    for r in results.rows:
        v = r.get("time_to_solve") if r["status"] == "ok" else None
        cells.setdefault(r["agent"], {}).setdefault(r["env.size"], []).append(v)
    sizes = sorted({L for by in cells.values() for L in by})
    print("solved seeds / median episodes to solve (cap: the sweep's episodes)")
    print(f"{'agent':<22}" + "".join(f"{L:>12}" for L in sizes))
    for agent, by in cells.items():
        row = f"{agent:<22}"
        for L in sizes:
            runs = by.get(L, [])
            ok = [v for v in runs if v is not None]
            med = f"{np.median(ok):.0f}" if ok else "-"
            row += f"{f'{len(ok)}/{len(runs)} {med}':>12}"
        print(row)
    print("largest depth solved by every seed:")
    for agent, by in cells.items():
        full = [L for L in sizes if by.get(L) and all(v is not None for v in by[L])]
        print(f"  {agent:<22} {max(full) if full else 'none'}")
    print("growth of the median episodes to solve, L = 10..50 (least squares, log-log; depths")
    print("solved by every seed):")
    for agent, by in cells.items():
        fit = [
            (L, np.median(by[L]))
            for L in sizes
            if 10 <= L <= 50 and by.get(L) and all(v is not None for v in by[L])
        ]
        if len(fit) < 3:
            print(f"  {agent:<22} fewer than 3 such depths")
            continue
        x, y = np.log([L for L, _ in fit]), np.log([m for _, m in fit])
        slope, _ = np.polyfit(x, y, 1)
        print(f"  {agent:<22} episodes ~ L^{slope:.2f} over L = {fit[0][0]}..{fit[-1][0]}")
    print(f"wrote {out}")


def _mask_unreachable(grid: np.ndarray) -> np.ndarray:
    """NaN right of the diagonal (column > row): DeepSea never reaches those cells."""
    L = grid.shape[0]
    out = np.array(grid, dtype=float)
    out[np.triu_indices(L, k=1)] = np.nan
    return out


def _snapshots(agent, env, values_of, episodes: int, seed: int):
    snaps: dict[int, np.ndarray] = {}

    def hook(n, a):
        if n in SNAPSHOTS:
            snaps[n] = _mask_unreachable(values_of(a))

    t0 = time.perf_counter()
    tr = run(agent, env, episodes=episodes, seed=seed, on_episode_end=hook)
    wall = time.perf_counter() - t0
    L = env.mdp.R.shape[0]
    layers, states = np.asarray(tr.layers), np.asarray(tr.states)
    ends = np.asarray(tr.episode_ends)
    successes = np.asarray(tr.successes)
    visits = {}
    for n in SNAPSHOTS:
        k = ends[n - 1]
        grid = np.zeros((L, L))
        np.add.at(grid, (layers[:k], states[:k]), 1)
        visits[n] = (_mask_unreachable(grid), int(successes[:n].sum()))
    return snaps, visits, wall


def _draw(name: str, snaps, visits, out: Path, value_label: str) -> None:
    fig, axes = new_figure(ncols=len(SNAPSHOTS), nrows=2, width=3.4, height=3.0)
    for j, n in enumerate(SNAPSHOTS):
        plot_heatmap(
            axes[j], snaps[n], title=f"t = {n}", xlabel="column", ylabel="row", cmap="Blues"
        )
        grid, goals = visits[n]
        plot_heatmap(
            axes[len(SNAPSHOTS) + j],
            grid,
            log=True,
            title=f"visits, goal x{goals}",
            xlabel="column",
            ylabel="row",
            cmap="Greys",
            cbar_label="log10(1 + visits)",
        )
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    axes[0].set_ylabel(f"{value_label}\nrow")
    fig.suptitle(f"{name} on DeepSea L = 50: value (top) and log visit counts (bottom)")
    save_figure(fig, out)


def fig34(out_dir: Path, episodes: int = 1000, seed: int = 0) -> None:
    L = 50
    env = DeepSea(L, mapping_seed=seed, variant="k-learning", reward_noise=0.1)
    runs = {
        "K-learning (tau*)": (
            KLearning(L, L, 2, temperature="optimal", sigma=0.1, initial=env.mdp.initial),
            lambda a: a.values,
            "k-learning-fig3.png",
            "V (Eq. 14)",
        ),
        "soft Q-learning (tau = 0.05)": (
            SoftQ(L, 2, temperature=0.05, n_layers=L),
            lambda a: a.soft_values(),
            "k-learning-fig4.png",
            "soft V",
        ),
    }
    for name, (agent, values_of, fname, label) in runs.items():
        snaps, visits, wall = _snapshots(agent, env, values_of, episodes, seed)
        _draw(name, snaps, visits, out_dir / fname, label)
        print(f"{name}: {episodes} episodes in {wall:.1f} s")
        for n in SNAPSHOTS:
            grid, goals = visits[n]
            last = np.flatnonzero(np.nan_to_num(grid[-1]) > 0)
            print(
                f"  t={n:>5}: rightmost column reached in the last row {last.max()}, "
                f"goal reached in {goals} episodes"
            )
        if isinstance(agent, KLearning):
            print(f"  tau at t={episodes}: {agent.tau:.4g}")
        print(f"  wrote {out_dir / fname}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    f2 = sub.add_parser("fig2", help="episodes to solve vs depth, from a sweep")
    f2.add_argument("results", help="result directory of models/sweeps/k-learning-fig2.toml")
    f2.add_argument("--out", type=Path, default=FIGURES / "k-learning-fig2.png")
    f34 = sub.add_parser("fig34", help="value and visit heatmaps, L = 50")
    f34.add_argument("--out-dir", type=Path, default=FIGURES)
    f34.add_argument("--episodes", type=int, default=1000)
    f34.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.what == "fig2":
        fig2(args.results, args.out)
    else:
        if args.episodes < max(SNAPSHOTS):
            p.error(f"--episodes must be at least {max(SNAPSHOTS)}")
        fig34(args.out_dir, args.episodes, args.seed)


if __name__ == "__main__":
    main()
