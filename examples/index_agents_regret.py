"""Reproduce accelerating-ucb-indices-mdp Fig. 3 and Fig. 4 (rigged start, §5.1) on cowan3,
and run the same four agents beyond the paper (RiverSwim-6, a 10-state Dirichlet MDP).

Run from the repository root:

    python examples/index_agents_regret.py          # all three sweeps (Fig. 3/4: 100 x 1e4 x 4)
    python examples/index_agents_regret.py --table  # only print the table from existing results

Results go to results/<sweep name> (resumable), figures to examples/figures/<sweep name>.png
(gap regret) and <sweep name>-pseudo.png (regret). The table gives, per agent, the mean
regret at T = 1,000 and T = 10,000 with the 95% half-width, for two regret measures:

- ``gap_regret``: sum_t Delta(x_t, a_t) with Delta the average-reward action gaps of the true
  model (the paper's decomposition R(T) = sum E[T_x^a] Delta(x, a) + O(1), §2.2);
- ``regret``: sum_t (g* - r(x_t, a_t)), which adds the state-sequence noise of the bias.
"""

import argparse
import sys

import numpy as np

from optplan.experiments import load_results, load_sweep, run_sweep
from optplan.experiments.figures import regret_figure
from optplan.experiments.plots import save_figure
from optplan.experiments.stats import mean_ci

FIGS = {
    "cowan3-fig3": "Fig. 3 (plain start)",
    "cowan3-fig4": "Fig. 4 (rigged first 60 transitions)",
    "index-agents-beyond": "beyond the paper (20 runs)",
}
SHORT = {"cowan3-fig3": "Fig. 3", "cowan3-fig4": "Fig. 4 (rigged)", "index-agents-beyond": ""}


def table(results) -> list[str]:
    lines = []
    for (agent, env), recs in results.groups().items():
        cells = []
        for metric in ("gap_regret", "regret"):
            t, Y = results.curve_matrix(recs, metric)
            # the stored grid is ~100 linear points; read T exactly by linear interpolation
            at = {T: np.array([np.interp(T, t, y) for y in Y]) for T in (1000, 10000)}
            m1, h1 = mean_ci(at[1000])
            m2, h2 = mean_ci(at[10000])
            cells.append(f"{m1:6.2f} ± {h1:4.2f} | {m2:6.2f} ± {h2:4.2f} | {m2 / m1:4.2f}")
        lines.append(f"| {agent:<8} | {env} | {len(recs):>3} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="only print from existing results")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    print(
        "| agent | env | runs | gap regret T=1e3 | T=1e4 | ratio | regret T=1e3 | T=1e4 | ratio |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    for key, title in FIGS.items():
        out = f"results/{key}"
        if not args.table:
            report = run_sweep(load_sweep(f"models/sweeps/{key}.toml"), out, jobs=args.jobs)
            print(report, file=sys.stderr)
        results = load_results(out)
        print(f"| **{title}** | | | | | | | | |")
        print("\n".join(table(results)))
        for metric, suffix in (("gap_regret", ""), ("regret", "-pseudo")):
            fig = regret_figure(results, metric=metric)
            fig.suptitle(f"{SHORT[key]} {metric.replace('_', ' ')}, mean ± 95%", fontsize=10)
            save_figure(fig, f"examples/figures/{key}{suffix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
