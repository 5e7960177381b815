"""UCRL2 and KL-UCRL (optimistic planning over L1 / KL confidence sets, solved by extended value
iteration with an exact finish) against the index agents MDP-UCB, OLP and MDP-PS of
accelerating-ucb-indices-mdp, on the paper's 3-state example, RiverSwim-6 and a 20-state
random Dirichlet MDP: 10 runs x 10^5 steps each (models/sweeps/ucrl-comparison.toml).

Run from the repository root:

    python examples/ucrl_comparison.py           # the sweep (resumable), the table, the figure
    python examples/ucrl_comparison.py --table   # only the table and figure from existing results
    python examples/ucrl_comparison.py --quick   # 2 runs x 3,000 steps, same code: about 2 minutes

Results go to ``results/ucrl-comparison/`` (``--quick``: ``results/ucrl-comparison-quick/``),
the figure ``ucrl-comparison.png`` (``--quick``: ``ucrl-comparison-quick.png``) to ``--out DIR``
(default ``results/figures/``, which git ignores; ``--out examples/figures`` replaces the
committed figure). The
table gives, per agent and environment, the mean regret at T = 10^4 and T = 10^5 with the 95%
half-width (Student t over the runs) and their ratio (10: linear growth, 1: no growth after
10^4), for the gap regret ``sum_t Delta(x_t, a_t)`` (the true model's average-reward action
gaps). The index agents are given the mean rewards (the paper's setting); UCRL2 and KL-UCRL
learn them, with their reward confidence radii.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from optplan.experiments.stats import mean_ci
from optplan.modelfile import tomllib
from optplan.plots.figures import regret_figure
from optplan.plots.plots import save_figure
from optplan.sweeps import load_results, load_sweep, run_sweep
from optplan.sweeps.sweep import sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
SWEEP = "ucrl-comparison"
AT = (10_000, 100_000)
#: --quick: runs and steps (the table then reads T = 300 and 3,000).
QUICK_SEEDS, QUICK_STEPS = 2, 3_000


def table(results, metric: str = "gap_regret", at=AT) -> list[str]:
    lines = [
        f"| env | agent | runs | T = {at[0]:,} | T = {at[1]:,} | ratio |",
        "|---|---|---|---|---|---|",
    ]
    groups = sorted(results.groups().items(), key=lambda kv: (kv[0][1], kv[0][0]))
    for (agent, env), recs in groups:
        t, Y = results.curve_matrix(recs, metric)
        # the stored grid is 100 linear points; read T exactly by linear interpolation
        vals = {T: np.array([np.interp(T, t, y) for y in Y]) for T in at}
        (m1, h1), (m2, h2) = (mean_ci(vals[T]) for T in at)
        lines.append(
            f"| {env} | {agent} | {len(recs)} | {m1:,.1f} ± {h1:,.1f} | {m2:,.1f} ± {h2:,.1f} "
            f"| {m2 / m1:.2f} |"
        )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="only print from existing results")
    ap.add_argument(
        "--quick", action="store_true", help="2 runs x 3,000 steps instead of 10 x 10^5"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "results" / "figures",
        help="directory for the figure (default results/figures/, untracked; --out "
        "examples/figures replaces the committed one)",
    )
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    suffix = "-quick" if args.quick else ""
    out = ROOT / "results" / f"{SWEEP}{suffix}"
    figure = args.out / f"{SWEEP}{suffix}.png"
    path = ROOT / "models" / "sweeps" / f"{SWEEP}.toml"
    at = (QUICK_STEPS // 10, QUICK_STEPS) if args.quick else AT
    if not args.table:
        if args.quick:
            data = tomllib.loads(path.read_text())
            data.update(name="quick-" + data["name"], seeds=QUICK_SEEDS, steps=QUICK_STEPS)
            sweep = sweep_from_dict(data, source=str(path))
        else:
            sweep = load_sweep(path)
        report = run_sweep(sweep, out, jobs=args.jobs)
        print(report, file=sys.stderr)
    elif not (out / "sweep.json").exists():
        print(f"no results in {out}: run without --table first", file=sys.stderr)
        return 2
    results = load_results(out)
    print("\n".join(table(results, at=at)))
    runs = sorted({len(r) for r in results.groups().values()})
    # log-log from T/100 (the stored grid is linear: its first points would draw a false
    # straight segment from step 1); medians, since a mean ± CI band can reach below 0
    fig = regret_figure(results, metric="gap_regret", logx=True, logy=True, t_min=at[1] / 100)
    fig.suptitle(
        "UCRL2 / KL-UCRL (learn rewards) vs index agents (given mean rewards): cumulative gap "
        f"regret over {at[1]:,} steps,\nmedian and 25-75% band over {'/'.join(map(str, runs))} "
        "runs (the table: means); log-log: slope 1 = linear regret",
        fontsize=10,
    )
    print(save_figure(fig, figure), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
