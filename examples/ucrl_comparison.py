"""UCRL2 and KL-UCRL (optimistic planning over L1 / KL confidence sets, solved by extended value
iteration with an exact finish) against the index agents MDP-UCB, OLP and MDP-PS of
accelerating-ucb-indices-mdp, on the paper's 3-state example, RiverSwim-6 and a 20-state
random Dirichlet MDP: 10 runs x 10^5 steps each (models/sweeps/ucrl-comparison.toml).

Run from the repository root:

    python examples/ucrl_comparison.py           # the sweep (resumable), the table, the figure
    python examples/ucrl_comparison.py --table   # only the table and figure from existing results

Results go to results/ucrl-comparison, the figure to examples/figures/ucrl-comparison.png. The
table gives, per agent and environment, the mean regret at T = 10^4 and T = 10^5 with the 95%
half-width (Student t over the runs) and their ratio (10: linear growth, 1: no growth after
10^4), for the gap regret ``sum_t Delta(x_t, a_t)`` (the true model's average-reward action
gaps). The index agents are given the mean rewards (the paper's setting); UCRL2 and KL-UCRL
learn them, with their reward confidence radii.
"""

import argparse
import sys

import numpy as np

from optplan.experiments import load_results, load_sweep, run_sweep
from optplan.experiments.figures import regret_figure
from optplan.experiments.plots import save_figure
from optplan.experiments.stats import mean_ci

SWEEP = "ucrl-comparison"
AT = (10_000, 100_000)


def table(results, metric: str = "gap_regret") -> list[str]:
    lines = [
        "| env | agent | runs | T = 10^4 | T = 10^5 | ratio |",
        "|---|---|---|---|---|---|",
    ]
    groups = sorted(results.groups().items(), key=lambda kv: (kv[0][1], kv[0][0]))
    for (agent, env), recs in groups:
        t, Y = results.curve_matrix(recs, metric)
        # the stored grid is 100 linear points; read T exactly by linear interpolation
        at = {T: np.array([np.interp(T, t, y) for y in Y]) for T in AT}
        (m1, h1), (m2, h2) = (mean_ci(at[T]) for T in AT)
        lines.append(
            f"| {env} | {agent} | {len(recs)} | {m1:,.1f} ± {h1:,.1f} | {m2:,.1f} ± {h2:,.1f} "
            f"| {m2 / m1:.2f} |"
        )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="only print from existing results")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    out = f"results/{SWEEP}"
    if not args.table:
        report = run_sweep(load_sweep(f"models/sweeps/{SWEEP}.toml"), out, jobs=args.jobs)
        print(report, file=sys.stderr)
    results = load_results(out)
    print("\n".join(table(results)))
    fig = regret_figure(results, metric="gap_regret", logy=True)
    fig.suptitle(
        "UCRL2 / KL-UCRL (learn rewards) vs index agents (given mean rewards): cumulative gap "
        "regret over 10^5 steps, mean ± 95% CI over 10 runs, log y",
        fontsize=10,
    )
    print(save_figure(fig, f"examples/figures/{SWEEP}.png"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
