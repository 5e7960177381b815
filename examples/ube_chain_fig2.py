"""UBE Fig. 2: regret of UBE Thompson sampling and of the count-bonus agent on the §3.2 chain.

Runs the tasks of ``models/sweeps/ube-fig2.toml`` (500 seeds x 10^4 episodes; UBE with
zeta = 1, the count bonus ``Qhat + beta log(t) bonus`` for each swept beta) with
:mod:`optplan.experiments.chain_batch`, which reproduces the generic loop exactly and runs
all seeds of a configuration at once, checks that claim on the first seeds against
:func:`optplan.experiments.run` itself, picks the best beta by mean regret at the last
episode, prints the mean regret with 95% intervals at 10^2, 10^3 and 10^4 episodes, and writes
``ube-fig2.png`` (``ube-fig2-quick.png`` with ``--quick``) into ``--out DIR`` (default
``results/figures/``, which git ignores; ``--out examples/figures`` replaces the committed
figure)::

    python examples/ube_chain_fig2.py            # about 2 minutes on one core
    python examples/ube_chain_fig2.py --quick    # 50 seeds x 1000 episodes, seconds

The same tasks run through the generic loop with
``optplan sweep models/sweeps/ube-fig2.toml --out results/ube-fig2 --jobs 2`` (hours).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from optplan.experiments import run
from optplan.experiments.chain_batch import run_chain_batch
from optplan.experiments.metrics import subsample_indices
from optplan.experiments.stats import mean_ci
from optplan.plots.plots import new_figure, plot_regret, save_figure
from optplan.sweeps.registry import get_agent, get_env
from optplan.sweeps.sweep import load_sweep

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "models" / "sweeps" / "ube-fig2.toml"
DEFAULT_OUT = ROOT / "results" / "figures"  # untracked; --out examples/figures: the committed


def run_sweep_batched(sweep, n_seeds: int, episodes: int):
    """Every agent configuration of ``sweep`` on its (single) environment, first ``n_seeds``
    seed indices: ``{label: (config, task seeds, ChainBatch)}``."""
    (env_cfg,) = sweep.envs
    env = get_env(env_cfg.name).build(sweep.seeds[0], **env_cfg.params)
    tasks = sweep.tasks()
    out = {}
    for cfg in sweep.agents:
        seeds = [t.seed for t in tasks if t.agent is cfg][:n_seeds]
        batch = run_chain_batch(cfg.name, cfg.params, env, seeds, episodes)
        out[cfg.label] = (cfg, seeds, batch)
        print(
            f"  {cfg.label:<28} {len(seeds)} seeds x {episodes} episodes: {batch.wall_time:6.1f} s"
        )
    return env, out


def check_generic(env, results, n_seeds: int, episodes: int) -> bool:
    """The generic loop's root actions on the first seeds equal the batch's."""
    same = True
    spent = 0.0
    steps = 0
    for label, (cfg, seeds, batch) in results.items():
        comp = get_agent(cfg.name)
        for i, seed in enumerate(seeds[:n_seeds]):
            t0 = time.perf_counter()
            tr = run(comp.build(env, None, **cfg.params), env, episodes=episodes, seed=seed)
            spent += time.perf_counter() - t0
            steps += tr.episodes
            roots = tr.actions[np.r_[0, tr.episode_ends[:-1]]]
            if not np.array_equal(roots, batch.actions[i, :episodes]):
                print(f"  MISMATCH: {label}, seed {seed}")
                same = False
    print(
        f"generic loop check: {n_seeds} seeds x {episodes} episodes per configuration, "
        f"root actions equal to the batch's: {same} ({spent:.1f} s in the generic loop, "
        f"{1e6 * spent / steps:.0f} us per episode on average)"
    )
    return same


def summarize(results, marks):
    """Per configuration: mean regret and 95% half-width at each mark, the share of chain
    episodes in the last 10% of episodes, and the share of seeds whose regret exceeds half the
    episodes (mostly on the chain)."""
    table = {}
    for label, (_, _, batch) in results.items():
        row = []
        for m in marks:
            mean, half = mean_ci(batch.regret[:, m - 1])
            row.append((float(mean), float(half)))
        E = batch.actions.shape[1]
        late = float(batch.actions[:, -max(1, E // 10) :].mean())  # chain share, last 10%
        stuck = float((batch.regret[:, -1] > E / 2).mean())  # on the chain most of the time
        table[label] = (row, late, stuck)
    return table


def draw(env, results, best: str, ube: str, marks, out: Path, n_seeds: int) -> None:
    fig, (ax, bx) = new_figure(ncols=2, width=5.6, height=4.0)
    episodes = next(iter(results.values()))[2].regret.shape[1]
    idx = subsample_indices(episodes, 200, "log")
    x = idx + 1
    curves = {
        "UBE Thompson sampling (zeta = 1)": results[ube][2].regret[:, idx],
        f"count bonus, best beta = {results[best][0].params['beta']:g}": results[best][2].regret[
            :, idx
        ],
    }
    plot_regret(ax, x, curves, logx=True, ylabel="cumulative pseudo-regret (mean, 95% band)")
    ax.set_xlabel("episode")
    ax.set_xlim(1, episodes)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("UBE vs the best-tuned count bonus", fontsize=10)

    betas, means, halves = [], [], []
    for cfg, _, batch in results.values():
        if cfg.name == "count-bonus":
            m, h = mean_ci(batch.regret[:, -1])
            betas.append(cfg.params["beta"])
            means.append(float(m))
            halves.append(float(h))
    bx.errorbar(betas, means, yerr=halves, color="C1", marker="o", capsize=3, label="count bonus")
    m, h = mean_ci(results[ube][2].regret[:, -1])
    bx.axhline(float(m), color="C0", ls="--", lw=1, label=f"UBE (zeta = 1): {float(m):.1f}")
    bx.axhspan(float(m - h), float(m + h), color="C0", alpha=0.2, lw=0)
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xticks(betas, [f"{b:g}" for b in betas], fontsize=8)
    bx.minorticks_off()
    bx.set_xlabel("beta")
    bx.set_ylabel(f"regret at episode {episodes:,} (mean, 95% CI)")
    bx.set_title("the beta sweep", fontsize=10)
    bx.legend(fontsize=8)
    g = env.discount
    fig.suptitle(
        f"UBE Fig. 2 on the §3.2 chain: mu1 = {env.mu1:g}, mu2 = {env.mu2:g}, "
        f"sigma = {env.sigma:g}, gamma = {g:g}, {env.length} chain states, {n_seeds} seeds",
        fontsize=10,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="50 seeds x 1000 episodes")
    p.add_argument("--sweep", type=Path, default=SWEEP)
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="directory for ube-fig2.png (ube-fig2-quick.png with --quick); default "
        "results/figures/, untracked; --out examples/figures replaces the committed figure "
        "(a path ending in .png names the file itself)",
    )
    p.add_argument("--check-seeds", type=int, default=2, help="seeds re-run by the generic loop")
    args = p.parse_args()
    if args.out.suffix != ".png":
        args.out = args.out / ("ube-fig2-quick.png" if args.quick else "ube-fig2.png")
    sweep = load_sweep(args.sweep)
    n_seeds = 50 if args.quick else len(sweep.seeds)
    episodes = 1000 if args.quick else sweep.episodes
    marks = [m for m in (100, 1000, 10_000) if m <= episodes]
    print(f"{sweep.name}: {len(sweep.agents)} agent configurations, batched:")
    t0 = time.perf_counter()
    env, results = run_sweep_batched(sweep, n_seeds, episodes)
    print(f"batched runs: {time.perf_counter() - t0:.1f} s")
    check_generic(env, results, args.check_seeds, 300 if args.quick else 2000)

    table = summarize(results, marks)
    ube = next(lab for lab, (cfg, _, _) in results.items() if cfg.name == "ube")
    bonus = [lab for lab, (cfg, _, _) in results.items() if cfg.name == "count-bonus"]
    best = min(bonus, key=lambda lab: table[lab][0][-1][0])
    head = "".join(f"{f'episode {m:,}':>22}" for m in marks)
    print(f"\nmean regret ± 95% half-width over {n_seeds} seeds")
    print(f"{'agent':<28}{head}   chain share (last 10%)   seeds with regret > E/2")
    for label, (row, late, stuck) in table.items():
        cells = "".join(f"{f'{m:.2f} ± {h:.2f}':>22}" for m, h in row)
        print(f"{label:<28}{cells}   {late:>21.4f}   {stuck:>23.3f}")
    print(f"best beta by mean regret at episode {episodes:,}: {best}")
    (mu, hu), (mb, hb) = table[ube][0][-1], table[best][0][-1]
    apart = mu + hu < mb - hb
    print(
        f"UBE {mu:.2f} ± {hu:.2f} vs best count bonus {mb:.2f} ± {hb:.2f}: "
        f"{'below, intervals disjoint' if apart else 'intervals overlap or UBE not below'}"
    )
    draw(env, results, best, ube, marks, args.out, n_seeds)


if __name__ == "__main__":
    main()
