"""The continuing peers' agents IMED-RL (Pesquerel & Maillard 2022) and optimistic PSRL (Agrawal
& Jia 2017) against UCRL2, KL-UCRL and MDP-PS on RiverSwim-6 and the 3-state example of
accelerating-ucb-indices-mdp (cowan3): 10 runs x 50,000 steps each
(models/sweeps/peers-continuing.toml).

Run from the repository root:

    OPENBLAS_NUM_THREADS=1 nice -n 10 python examples/peers_continuing.py   # sweep, table, figure
    python examples/peers_continuing.py --table   # only the table and figure from existing results
    python examples/peers_continuing.py --quick   # 2 runs x 3,000 steps, same code

Results go to ``results/peers-continuing/`` (``--quick``: ``results/peers-continuing-quick/``),
the figure ``peers-continuing.png`` to ``--out DIR`` (default ``results/figures/``, which git
ignores; ``--out examples/figures`` replaces the committed figure). The table gives, per
environment and agent, the mean gap regret ``sum_t Delta(x_t, a_t)`` (the true model's
average-reward action gaps) at T / 10 and T with the 95% half-width (Student t over the runs),
and their ratio (10: linear growth, 1: no growth after T / 10), and the mean at T over
``C(P) ln T``, the Burnetas-Katehakis lower bound (:class:`optplan.RegretLowerBound`) where it
is defined (cowan3; RiverSwim is not ergodic). IMED-RL and MDP-PS are given the mean rewards;
UCRL2 and KL-UCRL learn them; optimistic PSRL runs both ways.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

import optplan as op
from optplan.experiments.stats import mean_ci
from optplan.generators import riverswim
from optplan.modelfile import tomllib
from optplan.plots.figures import regret_figure
from optplan.plots.plots import figure_legend, save_figure
from optplan.sweeps import load_results, load_sweep, run_sweep
from optplan.sweeps.sweep import sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
SWEEP = "peers-continuing"
QUICK_SEEDS, QUICK_STEPS = 2, 3_000


#: The sweep's environments as models, for the lower bound C(P).
MODELS = {
    "cowan3": lambda: op.load_model(ROOT / "models" / "cowan3.toml"),
    "riverswim-6": lambda: riverswim(6),
}


def lower_bounds() -> dict:
    """``C(P)`` per environment label, ``None`` where it is not defined (the reason printed)."""
    out = {}
    for label, make in MODELS.items():
        mdp = make()
        try:
            res = op.RegretLowerBound(mdp.with_discount(None) if mdp.discount else mdp).solve()
            out[label] = float(res.value)
            print(f"C(P) of {label}: {res.value:.4f} ({res.status})", file=sys.stderr)
        except ValueError as err:
            out[label] = None
            print(f"C(P) of {label}: not defined ({str(err)[:90]}...)", file=sys.stderr)
    return out


def table(results, at, bounds: dict, metric: str = "gap_regret") -> list[str]:
    lines = [
        f"| env | agent | runs | T = {at[0]:,} | T = {at[1]:,} | ratio | T = {at[1]:,} / "
        "(C ln T) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (agent, env), recs in results.groups().items():
        t, Y = results.curve_matrix(recs, metric)
        vals = {T: np.array([np.interp(T, t, y) for y in Y]) for T in at}
        (m1, h1), (m2, h2) = (mean_ci(vals[T]) for T in at)
        C = bounds.get(env)
        vs_bound = "—" if not C else f"{m2 / (C * np.log(at[1])):.2f}"
        lines.append(
            f"| {env} | {agent} | {len(recs)} | {m1:,.1f} ± {h1:,.1f} | {m2:,.1f} ± {h2:,.1f} "
            f"| {m2 / m1:.2f} | {vs_bound} |"
        )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="only print from existing results")
    ap.add_argument("--quick", action="store_true", help="2 runs x 3,000 steps")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "results" / "figures",
        help="directory for the figure (default results/figures/, untracked; --out "
        "examples/figures replaces the committed one)",
    )
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    suffix = "-quick" if args.quick else ""
    out = ROOT / "results" / f"{SWEEP}{suffix}"
    path = ROOT / "models" / "sweeps" / f"{SWEEP}.toml"
    data = tomllib.loads(path.read_text())
    steps = QUICK_STEPS if args.quick else int(data["steps"])
    at = (steps // 10, steps)
    if not args.table:
        if args.quick:
            data.update(name="quick-" + data["name"], seeds=QUICK_SEEDS, steps=QUICK_STEPS)
            sweep = sweep_from_dict(data, source=str(path))
        else:
            sweep = load_sweep(path)
        print(run_sweep(sweep, out, jobs=args.jobs), file=sys.stderr)
    elif not (out / "sweep.json").exists():
        print(f"no results in {out}: run without --table first", file=sys.stderr)
        return 2
    results = load_results(out)
    bounds = lower_bounds()
    print("\n".join(table(results, at, bounds)))
    runs = sorted({len(r) for r in results.groups().values()})
    fig = regret_figure(results, metric="gap_regret", logx=True, logy=True, t_min=steps / 100)
    for ax in fig.axes:  # the lower bound's asymptote where it is defined, in the legend
        C = bounds.get(ax.get_title())
        if C:
            t = np.geomspace(steps / 100, steps, 50)
            label = f"lower bound C(P) ln t ({ax.get_title()}: C(P) = {C:.3f})"
            ax.plot(t, C * np.log(t), color="black", lw=1.2, ls=(0, (1, 1)), label=label)
    for legend in list(fig.legends):  # drawn again with the bound's entry
        legend.remove()
    figure_legend(fig, fig.axes)
    fig.suptitle(
        "IMED-RL and optimistic PSRL vs UCRL2, KL-UCRL, MDP-PS: cumulative gap regret over "
        f"{steps:,} steps; median and 25-75% band over {'/'.join(map(str, runs))} runs\n"
        "given the mean rewards: IMED-RL, MDP-PS, optimistic PSRL (known rewards); "
        "learning them: UCRL2, KL-UCRL, optimistic PSRL",
        fontsize=10,
    )
    print(save_figure(fig, args.out / f"{SWEEP}{suffix}.png"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
