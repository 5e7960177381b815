"""Reproduce accelerating-ucb-indices-mdp Fig. 3 and Fig. 4 (rigged start, §5.1) on cowan3,
and run the same four agents beyond the paper (RiverSwim-6, a 10-state Dirichlet MDP).

Run from the repository root:

    python examples/index_agents_regret.py          # all three sweeps (Fig. 3/4: 100 x 1e4 x 4)
    python examples/index_agents_regret.py --table  # only print the table from existing results
    python examples/index_agents_regret.py --quick  # 2 runs x 3,000 steps per sweep, same code
    python examples/index_agents_regret.py --lower-bound  # regret / ln t against C(P), 10^6 steps

Results go to ``results/<sweep name>/`` (resumable; ``--quick``: ``results/<sweep
name>-quick/``), figures ``<sweep name>.png`` (gap regret) and ``<sweep name>-pseudo.png``
(pseudo-regret; ``--quick``: ``-quick`` before ``.png``) to ``--out DIR`` (default
``results/figures/``, which git ignores; ``--out examples/figures`` replaces the committed
figures). The table gives,
per agent, the mean
regret at T = 1,000 and T = 10,000 with the 95% half-width, for two regret measures:

- ``gap_regret``: sum_t Delta(x_t, a_t) with Delta the average-reward action gaps of the true
  model (the paper's decomposition R(T) = sum E[T_x^a] Delta(x, a) + O(1), §2.2);
- ``regret``: sum_t (g* - r(x_t, a_t)), which adds the state-sequence noise of the bias.

On the ergodic models (cowan3, the Dirichlet MDP; RiverSwim is not ergodic) the figures draw
Burnetas & Katehakis's asymptote ``C(P) ln t`` (``op.RegretLowerBound``: every uniformly fast
agent has ``liminf Regret(T) / ln T >= C(P)``). ``--lower-bound`` runs the sweep
``models/sweeps/cowan3-lower-bound.toml`` (MDP-UCB, OLP, MDP-DMED, MDP-PS and IMED-RL, 20 runs
x 10^6 steps) and draws ``cowan3-lower-bound.png``: gap regret / ln t and pseudo-regret / ln t
against C(P), with a table of ``regret / ln T`` at T = 10^4, 10^5, 10^6 (mean ± 95% Student-t
half-width over the runs) and its ratio to C(P).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from optplan.experiments.stats import mean_ci
from optplan.modelfile import tomllib
from optplan.plots.figures import lower_bound_figure, regret_figure
from optplan.plots.plots import save_figure
from optplan.sweeps import load_results, load_sweep, run_sweep
from optplan.sweeps.sweep import sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
FIGS = {
    "cowan3-fig3": "Fig. 3 (plain start)",
    "cowan3-fig4": "Fig. 4 (rigged first 60 transitions)",
    "index-agents-beyond": "beyond the paper (20 runs)",
}
#: What each figure shows, for its title.
SETTING = {
    "cowan3-fig3": "accelerating-ucb Fig. 3: cowan3 (3 states, 2 actions), plain start",
    "cowan3-fig4": "accelerating-ucb Fig. 4: cowan3, first 60 transitions rigged",
    "index-agents-beyond": "beyond the paper: RiverSwim-6 and a 10-state, 3-action Dirichlet MDP",
}
METRIC_TITLE = {
    "gap_regret": "gap regret sum_t Delta(x_t, a_t)",
    "regret": "pseudo-regret sum_t (g* - r(x_t, a_t)): it includes the bias noise of the\n"
    "states visited, so it can be negative",
}
#: Runs per sweep with --quick (the first seeds of the full sweep: same task seeds).
QUICK_SEEDS = {"cowan3-fig3": 2, "cowan3-fig4": 2, "index-agents-beyond": 2}
#: Steps with --quick (the table then reads T = 300 and 3,000).
QUICK_STEPS = 3_000


def table(results, at=(1000, 10000)) -> list[str]:
    lines = []
    for (agent, env), recs in results.groups().items():
        cells = []
        for metric in ("gap_regret", "regret"):
            t, Y = results.curve_matrix(recs, metric)
            # the stored grid is ~100 linear points; read T exactly by linear interpolation
            vals = {T: np.array([np.interp(T, t, y) for y in Y]) for T in at}
            m1, h1 = mean_ci(vals[at[0]])
            m2, h2 = mean_ci(vals[at[1]])
            cells.append(f"{m1:6.2f} ± {h1:4.2f} | {m2:6.2f} ± {h2:4.2f} | {m2 / m1:4.2f}")
        lines.append(f"| {agent:<8} | {env} | {len(recs):>3} | " + " | ".join(cells) + " |")
    return lines


#: The lower-bound sweep, its steps with --quick and the T of its table.
LOWER_BOUND = "cowan3-lower-bound"
QUICK_LOWER_BOUND_STEPS = 20_000
LOWER_BOUND_AT = (10_000, 100_000, 1_000_000)


def lower_bound_table(results, at=LOWER_BOUND_AT) -> list[str]:
    """Per agent: ``regret / ln T`` (gap and pseudo) at each ``T`` of ``at``, mean ± 95%
    Student-t half-width over the runs, and the gap one's ratio to C(P)."""
    lines = []
    for (agent, _env), recs in results.groups().items():
        bound = recs[0]["summary"]["lower_bound"]
        cells = []
        for metric in ("gap_regret", "regret"):
            t, Y = results.curve_matrix(recs, metric)
            for T in at:
                m, h = mean_ci(np.array([np.interp(T, t, y) for y in Y]) / np.log(T))
                cells.append(
                    f"{m:6.3f} ± {h:5.3f}"
                    + (f" ({m / bound:4.2f})" if metric == "gap_regret" else "")
                )
        lines.append(f"| {agent:<8} | {len(recs):>3} | {bound:.4f} | " + " | ".join(cells) + " |")
    return lines


def lower_bound_main(args) -> int:
    """The lower-bound sweep (or its results with --table), its table and figure."""
    quick = "-quick" if args.quick else ""
    res_dir = ROOT / "results" / f"{LOWER_BOUND}{quick}"
    at = (1_000, 10_000, QUICK_LOWER_BOUND_STEPS) if args.quick else LOWER_BOUND_AT
    if not args.table:
        path = ROOT / "models" / "sweeps" / f"{LOWER_BOUND}.toml"
        data = tomllib.loads(path.read_text())
        if args.quick:
            data.update(name="quick-" + data["name"], seeds=2, steps=QUICK_LOWER_BOUND_STEPS)
        report = run_sweep(sweep_from_dict(data, source=str(path)), res_dir, jobs=args.jobs)
        print(report, file=sys.stderr)
    results = load_results(res_dir)
    head = " | ".join(f"T={T:,}" for T in at)
    print(
        f"| agent | runs | C(P) | gap regret / ln T (ratio to C): {head} | pseudo-regret / ln T: "
        f"{head} |\n|" + "---|" * (3 + 2 * len(at))
    )
    print("\n".join(lower_bound_table(results, at)))
    fig = lower_bound_figure(results, t_min=100.0)
    print(save_figure(fig, args.out / f"{LOWER_BOUND}{quick}.png"), file=sys.stderr)
    return 0


def _sweep(key: str, quick: bool):
    path = ROOT / "models" / "sweeps" / f"{key}.toml"
    if not quick:
        return load_sweep(path)
    data = tomllib.loads(path.read_text())
    data["name"] = "quick-" + data["name"]
    data["seeds"] = QUICK_SEEDS[key]
    data["steps"] = QUICK_STEPS
    return sweep_from_dict(data, source=str(path))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="only print from existing results")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="2 runs x 3,000 steps per sweep instead of 100/100/20 x 10^4",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "results" / "figures",
        help="directory for the figures (default results/figures/, untracked; --out "
        "examples/figures replaces the committed ones)",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--lower-bound",
        action="store_true",
        help=f"the {LOWER_BOUND} sweep (regret / ln t against C(P), 20 runs x 10^6 steps) only",
    )
    args = ap.parse_args(argv)
    if args.lower_bound:
        return lower_bound_main(args)
    quick = "-quick" if args.quick else ""
    at = (QUICK_STEPS // 10, QUICK_STEPS) if args.quick else (1000, 10000)
    print(
        f"| agent | env | runs | gap regret T={at[0]:,} | T={at[1]:,} | ratio | regret T={at[0]:,} "
        f"| T={at[1]:,} | ratio |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    for key, title in FIGS.items():
        res_dir = ROOT / "results" / f"{key}{quick}"
        if not args.table:
            report = run_sweep(_sweep(key, args.quick), res_dir, jobs=args.jobs)
            print(report, file=sys.stderr)
        elif not (res_dir / "sweep.json").exists():
            print(f"| **{title}**: no results in {res_dir} (run without --table first) |")
            continue
        results = load_results(res_dir)
        runs = {len(r) for r in results.groups().values()}
        print(f"| **{title.split(' (2')[0]}** | | | | | | | | |")
        print("\n".join(table(results, at)))
        for metric, suffix in (("gap_regret", ""), ("regret", "-pseudo")):
            fig = regret_figure(results, metric=metric, lower_bound=True)
            for ax in fig.axes:
                if ax.get_visible():
                    ax.set_ylabel(f"cumulative {'gap regret' if suffix == '' else 'pseudo-regret'}")
            w, h = fig.get_size_inches()
            fig.set_size_inches(max(w, 8.0), h + 1.2)
            fig.suptitle(
                f"{SETTING[key]}\n{METRIC_TITLE[metric]}; mean and 95% CI over "
                f"{'/'.join(str(n) for n in sorted(runs))} runs; black line: C(P) ln t "
                "(ergodic models)",
                fontsize=9,
            )
            print(save_figure(fig, args.out / f"{key}{suffix}{quick}.png"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
