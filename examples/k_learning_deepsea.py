"""K-learning on DeepSea: the figures of k-learning-variational-bayesian-rl §4.

Every subcommand writes its figures into ``--out DIR`` (default ``results/figures/``, which git
ignores; ``--out examples/figures`` replaces the committed figures; a path ending in ``.png``
names the file itself).

Fig. 2 (episodes to solve vs depth, from a sweep's results)::

    optplan sweep models/sweeps/k-learning-fig2.toml --out results/k-learning-fig2 --jobs 2
    python examples/k_learning_deepsea.py fig2 results/k-learning-fig2

writes ``k-learning-fig2.png`` and prints, per agent and depth, how many of
the seeds solved and the median episodes to solve, then each agent's largest depth solved by
every seed.

Fig. 3 and 4 (value of Eq. 14 and log visit counts at episodes 5, 50, 100, 300, 1000 on
DeepSea L = 50, one seed, K-learning with tau* and soft Q-learning)::

    python examples/k_learning_deepsea.py fig34

writes ``k-learning-fig3.png`` (K-learning as printed),
``k-learning-fig3-deterministic.png`` (K-learning with the deterministic transition prior and
the posterior bonus) and ``k-learning-fig4.png`` (soft-Q), one colour scale per
row, and prints the column reached in the last row and the goal visits at each snapshot.
Cells right of the diagonal can never be reached and are left blank.

The deterministic-prior configuration::

    optplan sweep models/sweeps/k-learning-fig2-deterministic.toml \
        --out results/k-learning-fig2-deterministic --jobs 2
    python examples/k_learning_deepsea.py fig2 results/k-learning-fig2-deterministic \
        --out examples/figures/k-learning-fig2-deterministic.png
    python examples/k_learning_deepsea.py noise   # tau* at L = 50, noise 0 / 0.05 / 0.1
    python examples/k_learning_deepsea.py tau     # tau* against episodes, both priors

Quick reproduction of Fig. 2 (the same sweep file and code, depths 4-10, 3 seeds, cap 10^3
episodes; results in ``results/k-learning-quick/``, the figure ``k-learning-fig2-quick.png``
into ``--out DIR``)::

    python examples/k_learning_deepsea.py quick

DeepSea goal-rate learning curves (fraction of episodes so far that reached the goal, without
stopping when solved; L = 10 and 20, 3 seeds, 2,000 episodes)::

    python examples/k_learning_deepsea.py goal-rate
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullLocator

from optplan.agents import PSRL, EpsilonGreedyQ, KLearning, SoftQ
from optplan.envs import DeepSea
from optplan.experiments import run
from optplan.modelfile import tomllib
from optplan.plots.figures import reference_curve, scaling_figure
from optplan.plots.plots import (
    figure_legend,
    new_figure,
    plot_heatmap,
    save_figure,
    style,
)
from optplan.sweeps import load_results, run_sweep
from optplan.sweeps.sweep import sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "results" / "figures"  # untracked; --out examples/figures: the committed
#: quick: depths, seeds and episode cap of the Fig. 2 sweep, and where its results go.
QUICK_RESULTS = ROOT / "results" / "k-learning-quick"
QUICK_SIZES, QUICK_SEEDS, QUICK_EPISODES = [4, 6, 8, 10], 3, 1000
SNAPSHOTS = (5, 50, 100, 300, 1000)


def _figure_path(out: Path, name: str) -> Path:
    """``out`` itself when it names a ``.png`` file, else ``out / name``."""
    return out if out.suffix == ".png" else out / name


def fig2(results_dir: str, out: Path) -> None:
    results = load_results(results_dir)
    # Medians and the interquartile range of the seeds that solved (the statistic of the
    # printed table); a depth only some seeds solved is drawn hollow with "k/n" beside it.
    fig = scaling_figure(
        results,
        metric="time_to_solve",
        param="size",
        reference=reference_curve("2**(x-1)"),
        reference_label="2^(L-1)",
        stat="median",
        partial=True,
        dodge=0.025,  # equal medians at L = 4 side by side
    )
    spec = results.spec["sweep"]
    cap = spec["episodes"]
    seeds = spec["seeds"]
    n_seeds = len(seeds) if isinstance(seeds, list) else int(seeds)
    ax = fig.axes[0]
    ax.axhline(cap, color="0.4", lw=0.8, ls=":", label=f"cap ({cap:g} episodes)")
    ax.set_ylim(1, 30 * cap)  # the 2^(L-1) line would otherwise stretch the axis to 1e14
    ax.set_ylabel("episodes to solve\n(median and IQR of the seeds that solved)")
    # log-log: polynomial growth (PSRL) is a straight line, 2^(L-1) bends upwards
    ticks = ax.get_xticks()
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("depth L (log scale)")
    ax.set_title(
        f"{n_seeds} seeds per depth; filled: all solved, hollow: k/{n_seeds} solved, absent: none",
        fontsize=9,
    )
    for legend in list(fig.legends):
        legend.remove()
    figure_legend(fig, [ax], ncols=2, fontsize=8)
    fig.set_size_inches(8.0, 5.0)
    fig.suptitle(spec.get("description", "k-learning Fig. 2"), fontsize=10)
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


#: The deterministic-prior configuration (models/sweeps/k-learning-fig2-deterministic.toml).
DETERMINISTIC = dict(transition_prior="deterministic", bonus="posterior", span=1.01)


def _k_agent(L: int, initial, sigma: float, prior: str) -> KLearning:
    extra = DETERMINISTIC if prior == "deterministic" else {}
    return KLearning(L, 2, n_layers=L, temperature="optimal", sigma=sigma, initial=initial, **extra)


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
    """Values (top row) and log visit counts (bottom row) at each snapshot, one colour scale
    per row shared by its time panels (its colorbar on the right), so the panels compare."""
    fig, axes = new_figure(ncols=len(SNAPSHOTS), nrows=2, width=3.4, height=3.0)
    values = np.stack([snaps[n] for n in SNAPSHOTS])
    v_lo, v_hi = float(np.nanmin(values)), float(np.nanmax(values))
    c_hi = float(np.log10(1.0 + max(np.nanmax(visits[n][0]) for n in SNAPSHOTS)))
    last = len(SNAPSHOTS) - 1
    for j, n in enumerate(SNAPSHOTS):
        plot_heatmap(
            axes[j],
            snaps[n],
            title=f"episode {n}",
            xlabel="column",
            ylabel="row",
            cmap="Blues",
            vmin=v_lo,
            vmax=v_hi,
            colorbar=j == last,
            cbar_label=value_label,
        )
        grid, goals = visits[n]
        plot_heatmap(
            axes[len(SNAPSHOTS) + j],
            grid,
            log=True,
            title=f"visits (goal reached {goals}x)",
            xlabel="column",
            ylabel="row",
            cmap="Greys",
            cbar_label="log10(1 + visits)",
            vmin=0.0,
            vmax=c_hi,
            colorbar=j == last,
        )
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    fig.suptitle(
        f"{name} on DeepSea L = 50 (noise 0.1)\nvalue (top) and visit counts (bottom) after "
        "each number of episodes; one colour scale per row; blank: unreachable cells"
    )
    save_figure(fig, out)


def fig34(out_dir: Path, episodes: int = 1000, seed: int = 0) -> None:
    L = 50
    env = DeepSea(L, mapping_seed=seed, variant="k-learning", reward_noise=0.1)
    runs = {
        "K-learning (tau*, as printed: Dirichlet 1/S prior, Eq. 6 bonus)": (
            _k_agent(L, env.mdp.initial, 0.1, "dirichlet"),
            lambda a: a.values,
            "k-learning-fig3.png",
            "V (Eq. 14)",
        ),
        "K-learning (tau*, deterministic prior, posterior bonus)": (
            _k_agent(L, env.mdp.initial, 0.1, "deterministic"),
            lambda a: a.values,
            "k-learning-fig3-deterministic.png",
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


def noise(seeds: int, L: int, cap: int) -> None:
    """K-learning tau* (deterministic prior, posterior bonus) on DeepSea L at reward noise 0,
    0.05 and 0.1 (the agent told the true sigma): episodes to solve per seed, median."""
    print(f"K-learning tau*, deterministic prior + posterior bonus, DeepSea L = {L}, cap {cap}")
    print(f"{'noise std':>10}  episodes to solve (seeds 0..{seeds - 1})  median   wall s")
    for sd in (0.0, 0.05, 0.1):
        times, t0 = [], time.perf_counter()
        for seed in range(seeds):
            env = DeepSea(L, mapping_seed=seed, variant="k-learning", reward_noise=sd)
            agent = _k_agent(L, env.mdp.initial, sd, "deterministic")
            tr = run(agent, env, episodes=cap, seed=seed, stop_when_solved=True)
            times.append(tr.time_to_solve)
        ok = [t for t in times if t is not None]
        med = f"{np.median(ok):.0f}" if len(ok) == len(times) else f"{len(ok)}/{len(times)}"
        shown = " ".join("-" if t is None else str(t) for t in times)
        print(f"{sd:>10}  {shown:<34}{med:>7}{time.perf_counter() - t0:>9.1f}")


def tau_curve(out: Path, L: int, episodes: int, seed: int) -> None:
    """tau* against episodes on DeepSea L (noise 0.1), K-learning with each prior: the quantity
    the comparison of the two transition priors rests on."""
    fig, (ax,) = new_figure(width=7.0, height=4.0)
    for prior, label, colour in (
        ("dirichlet", "Dirichlet 1/S prior, Eq. 6 bonus (as printed)", "C3"),
        ("deterministic", "deterministic prior, posterior bonus", "C0"),
    ):
        env = DeepSea(L, mapping_seed=seed, variant="k-learning", reward_noise=0.1)
        agent = _k_agent(L, env.mdp.initial, 0.1, prior)
        taus: list[float] = []
        tr = run(
            agent,
            env,
            episodes=episodes,
            seed=seed,
            on_episode_end=lambda n, a, taus=taus: taus.append(a.tau),
        )
        first = int(np.argmax(tr.successes)) + 1 if np.any(tr.successes) else None
        ax.plot(np.arange(1, len(taus) + 1), taus, color=colour, lw=1.2, label=label)
        if first is not None:
            ax.axvline(first, color=colour, ls=":", lw=1.0)
            label_first = f"first goal: episode {first}"
        else:
            label_first = "goal never reached"
        print(
            f"{label}: tau* {taus[0]:.3g} at episode 1, {taus[-1]:.3g} at {len(taus)}; "
            f"{label_first}; solved at {tr.time_to_solve}"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhline(1 / (L * np.log(2)), color="0.4", ls="--", lw=0.8, label="1 / (L log 2)")
    ax.set_xlabel("episode")
    ax.set_ylabel("tau* (problem 11)")
    ax.set_title(
        f"K-learning tau* on DeepSea L = {L} (noise 0.1, seed {seed}); dotted: first goal",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="center right")
    save_figure(fig, out)
    print(f"wrote {out}")


def quick(out: Path, jobs: int) -> None:
    """models/sweeps/k-learning-fig2.toml at depths 4-10, 3 seeds, cap 10^3: the same agents,
    environment, criterion and code as Fig. 2, then the same table and figure (``out``: its
    path; the results in ``QUICK_RESULTS``)."""
    path = ROOT / "models" / "sweeps" / "k-learning-fig2.toml"
    data = tomllib.loads(path.read_text())
    data.update(
        name="quick-" + data["name"],
        description=f"k-learning Fig. 2, quick: depths {QUICK_SIZES}, {QUICK_SEEDS} seeds, "
        f"cap {QUICK_EPISODES} episodes",
        seeds=QUICK_SEEDS,
        episodes=QUICK_EPISODES,
    )
    for env in data["envs"]:
        env["params"]["size"] = list(QUICK_SIZES)
    sweep = sweep_from_dict(data, source=str(path))
    t0 = time.perf_counter()
    report = run_sweep(sweep, QUICK_RESULTS, jobs=jobs, quiet=True)
    print(f"{report} ({time.perf_counter() - t0:.1f} s)")
    fig2(str(QUICK_RESULTS), out)


#: Agents of the goal-rate figure: label -> builder(L, env).
def _goal_rate_agents(L: int, env):
    initial = env.mdp.initial
    return {
        "PSRL (deterministic prior)": lambda: PSRL(
            L, 2, n_layers=L, sigma=0.1, initial=initial, transition_prior="deterministic"
        ),
        "K-learning tau* (deterministic prior, posterior bonus)": lambda: _k_agent(
            L, initial, 0.1, "deterministic"
        ),
        "K-learning tau* (as printed)": lambda: _k_agent(L, initial, 0.1, "dirichlet"),
        "soft-Q (0.05)": lambda: SoftQ(L, 2, temperature=0.05, n_layers=L),
        "eps-greedy (0.1)": lambda: EpsilonGreedyQ(L, 2, epsilon=0.1, n_layers=L),
    }


def goal_rate(out: Path, sizes, seeds: int, episodes: int) -> None:
    """Fraction of the episodes so far that reached the goal, against episodes, per agent and
    depth (median over seeds, band: min to max); no early stop, so the curve goes on after the
    run counts as solved."""
    fig, axes = new_figure(ncols=len(sizes), width=5.0, height=3.8)
    n = np.arange(1, episodes + 1)
    for ax, L in zip(axes, sizes, strict=True):
        env0 = DeepSea(L, mapping_seed=0, variant="k-learning", reward_noise=0.1)
        for i, (label, _) in enumerate(_goal_rate_agents(L, env0).items()):
            rates, t0 = [], time.perf_counter()
            for seed in range(seeds):
                env = DeepSea(L, mapping_seed=seed, variant="k-learning", reward_noise=0.1)
                agent = _goal_rate_agents(L, env)[label]()
                tr = run(agent, env, episodes=episodes, seed=seed)
                rates.append(np.cumsum(tr.successes) / n)
            R = np.array(rates)
            med = np.median(R, axis=0)
            kw = style(i)
            (line,) = ax.plot(
                n,
                med,
                label=label,
                linestyle=kw["linestyle"],
                marker=kw["marker"],
                markevery=_log_marks(episodes),
                markersize=4,
            )
            ax.fill_between(
                n, R.min(axis=0), R.max(axis=0), color=line.get_color(), alpha=0.2, linewidth=0
            )
            print(
                f"L = {L:>2} {label:<55} final goal rate {med[-1]:.3f} "
                f"(seeds {', '.join(f'{r[-1]:.3f}' for r in R)}), {time.perf_counter() - t0:.1f} s"
            )
        ax.axhline(0.1, color="0.4", ls=":", lw=0.9, label="solve criterion (10%)")
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_xlabel("episode (log scale)")
        ax.set_ylabel("fraction of episodes so far\nthat reached the goal")
        ax.set_title(f"DeepSea L = {L}")
    figure_legend(fig, axes, ncols=3, fontsize=8)
    fig.suptitle(
        f"DeepSea goal rate (reward noise 0.1): median over {seeds} seeds, band: min to max; "
        f"{episodes:,} episodes, no early stop",
        fontsize=10,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


def _log_marks(episodes: int) -> list[int]:
    return sorted({int(v) - 1 for v in np.geomspace(1, episodes, 8)})


OUT_HELP = (
    "directory for the figure (default results/figures/, untracked; --out examples/figures "
    "replaces the committed one; a path ending in .png names the file)"
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    f2 = sub.add_parser("fig2", help="episodes to solve vs depth, from a sweep")
    f2.add_argument("results", help="result directory of models/sweeps/k-learning-fig2.toml")
    f2.add_argument("--out", type=Path, default=DEFAULT_OUT, help=OUT_HELP)
    f34 = sub.add_parser("fig34", help="value and visit heatmaps, L = 50")
    f34.add_argument(
        "--out",
        "--out-dir",
        dest="out_dir",
        type=Path,
        default=DEFAULT_OUT,
        help="directory for the figures (default results/figures/, untracked; "
        "--out examples/figures replaces the committed ones)",
    )
    f34.add_argument("--episodes", type=int, default=1000)
    f34.add_argument("--seed", type=int, default=0)
    nz = sub.add_parser("noise", help="tau* K-learning (deterministic prior) vs reward noise")
    nz.add_argument("--seeds", type=int, default=5)
    nz.add_argument("--size", type=int, default=50)
    nz.add_argument("--cap", type=int, default=10_000)
    tc = sub.add_parser("tau", help="tau* against episodes, both priors")
    tc.add_argument("--out", type=Path, default=DEFAULT_OUT, help=OUT_HELP)
    tc.add_argument("--size", type=int, default=50)
    tc.add_argument("--episodes", type=int, default=3000)
    tc.add_argument("--seed", type=int, default=0)
    qk = sub.add_parser("quick", help="Fig. 2 sweep at depths 4-10, 3 seeds, cap 10^3")
    qk.add_argument("--out", type=Path, default=DEFAULT_OUT, help=OUT_HELP)
    qk.add_argument("--jobs", type=int, default=2)
    gr = sub.add_parser("goal-rate", help="goal-rate learning curves, L = 10 and 20")
    gr.add_argument("--out", type=Path, default=DEFAULT_OUT, help=OUT_HELP)
    gr.add_argument("--sizes", type=int, nargs="+", default=[10, 20])
    gr.add_argument("--seeds", type=int, default=3)
    gr.add_argument("--episodes", type=int, default=2000)
    args = p.parse_args()
    if args.what == "quick":
        quick(_figure_path(args.out, "k-learning-fig2-quick.png"), args.jobs)
    elif args.what == "goal-rate":
        goal_rate(
            _figure_path(args.out, "deepsea-goal-rate.png"), args.sizes, args.seeds, args.episodes
        )
    elif args.what == "fig2":
        fig2(args.results, _figure_path(args.out, "k-learning-fig2.png"))
    elif args.what == "noise":
        noise(args.seeds, args.size, args.cap)
    elif args.what == "tau":
        tau_curve(_figure_path(args.out, "k-learning-tau.png"), args.size, args.episodes, args.seed)
    else:
        if args.episodes < max(SNAPSHOTS):
            p.error(f"--episodes must be at least {max(SNAPSHOTS)}")
        fig34(args.out_dir, args.episodes, args.seed)


if __name__ == "__main__":
    main()
