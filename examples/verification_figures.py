"""Two pictures of the verification: fast-vs-conic errors over random instances, and the
planning benchmark (fast path against each conic solver) as a plot.

Run from the repository root:

    python examples/verification_figures.py crosscheck   # 700 random instances, Clarabel
    optplan bench planning --sizes 10 30 100 300 --repeats 3 --json > results/bench-planning.json
    python examples/verification_figures.py planning results/bench-planning.json

``crosscheck`` cross-checks the seeded random instances that the tests, the benchmarks and
``examples/conic_status_rates.py`` share (``optplan.bench.cases``) against Clarabel and draws,
per problem, the histogram of the absolute fast-vs-conic error of the optimal value and of the
largest error over the other compared quantities (solution, multipliers, policy value), on a
log axis, with the cross-check tolerance. Instances the solver does not end ``optimal`` are
counted in the panel title, not drawn. ``planning`` draws the median wall time per instance
against the number of states from ``optplan bench planning --json`` output. Figures go to
``--out DIR`` (default ``results/figures/``, which git ignores; ``--out examples/figures``
replaces the committed figures; a path ending in ``.png`` names the file itself).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullLocator

import optplan as op
from optplan.bench.cases import deepsea_instance, planning_cases, random_index_instance
from optplan.plots.plots import figure_legend, new_figure, save_figure, style

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results" / "figures"  # untracked
OUT_HELP = (
    "directory for the figure (default results/figures/, untracked; --out examples/figures "
    "replaces the committed one; a path ending in .png names the file)"
)


def _figure_path(out: Path, name: str) -> Path:
    """``out`` itself when it names a ``.png`` file, else ``out / name``."""
    return out if out.suffix == ".png" else out / name


INDEX = {"kl_ball": op.KLBallIndex, "kl_inf": op.KLInfRate, "l1_ball": op.L1BallIndex}
#: (problem, instances): the plan of examples/conic_status_rates.py.
PLAN = [
    ("discounted", 100),
    ("average", 100),
    ("finite_horizon", 100),
    ("kl_ball", 120),
    ("kl_inf", 120),
    ("l1_ball", 120),
    ("k_temperature", 60),
]


def instances(name: str, n: int):
    """``n`` seeded instances of the problem ``name`` (as examples/conic_status_rates.py)."""
    if name in ("discounted", "average", "finite_horizon"):
        make = {
            "discounted": op.DiscountedPlanning,
            "average": op.AverageRewardPlanning,
            "finite_horizon": op.FiniteHorizonPlanning,
        }[name]
        return [make(m) for m in planning_cases(len(name), n, name)]
    if name in INDEX:
        rng = np.random.default_rng(4)
        return [
            INDEX[name](*random_index_instance(rng, (3, 10, 100)[i % 3], name, 0.3 * (i % 2)))
            for i in range(n)
        ]
    rng = np.random.default_rng(5)
    return [deepsea_instance(int(L), rng) for L in rng.integers(3, 11, size=n)]


def crosscheck(out: Path, solver: str) -> None:
    warnings.filterwarnings("ignore")  # solver warnings: the statuses count them
    fig, axes = new_figure(ncols=4, nrows=2, width=3.6, height=2.8)
    bins = np.logspace(-17, -2, 31)
    floor = 1e-17  # an error of exactly 0 is drawn in the first bin
    for ax, (name, n) in zip(axes, PLAN, strict=False):
        t0 = time.perf_counter()
        value, other, tol, agree = [], [], [], 0
        sqrt_names: set = set()
        for prob in instances(name, n):
            chk = op.cross_check(prob, solver=solver)
            if chk.conic.status != "optimal":
                continue
            agree += bool(chk.agree)
            sqrt_names |= set(prob.sqrt_tol_quantities) & set(chk.abs_err)
            errs = {k: v for k, v in chk.abs_err.items() if v is not None and np.isfinite(v)}
            value.append(max(errs.pop("value", 0.0), floor))
            other.append(max(max(errs.values(), default=0.0), floor))
            tol.append(chk.atol)
        ok = len(value)
        for i, (data, label) in enumerate(
            ((value, "optimal value"), (other, "largest other quantity (x, multipliers, ...)"))
        ):
            kw = style(i)
            ax.hist(
                np.clip(data, bins[0], bins[-1]),
                bins=bins,
                histtype="step",
                linestyle=kw["linestyle"],
                linewidth=1.4,
                label=label,
            )
        if tol:
            atol = float(np.median(tol))
            ax.axvline(atol, color="0.3", ls=":", lw=1.0, label="atol (the value's tolerance)")
            if sqrt_names:
                ax.axvline(
                    np.sqrt(atol),
                    color="0.3",
                    ls="-.",
                    lw=1.0,
                    label="sqrt(atol): tolerance of solutions / multipliers where marked *",
                )
        ax.set_xscale("log")
        star = "*" if sqrt_names else ""
        ax.set_title(f"{name}{star}: {ok}/{n} optimal, {agree} agree", fontsize=9)
        ax.set_xlabel("|fast - conic|")
        ax.set_ylabel("instances")
        print(
            f"{name:<15} {ok:>3}/{n:<3} optimal; value error max {max(value):.1e}, "
            f"other max {max(other):.1e}; {time.perf_counter() - t0:.1f} s"
        )
    for ax in axes[len(PLAN) :]:
        ax.set_visible(False)
    figure_legend(fig, axes[: len(PLAN)], ncols=2, fontsize=8)
    fig.suptitle(
        f"Fast path vs {solver}: absolute errors over seeded random instances where {solver} "
        "ends optimal\n(log x; errors below 1e-17, including 0, in the first bin; "
        "agree: within the cross-check tolerance, relative part included)",
        fontsize=10,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


def planning(json_path: Path, out: Path) -> None:
    data = json.loads(json_path.read_text())
    rows = data["rows"]
    criteria = list(dict.fromkeys(r["criterion"] for r in rows))
    solvers = [k[:-2] for k in rows[0] if k.endswith("_s") and k != "fast_s"]
    fig, axes = new_figure(ncols=len(criteria), width=4.2, height=3.6)
    for ax, crit in zip(axes, criteria, strict=True):
        sel = sorted((r for r in rows if r["criterion"] == crit), key=lambda r: r["S"])
        S = np.array([r["S"] for r in sel], dtype=float)
        for i, key in enumerate(["fast", *solvers]):
            y = np.array([np.nan if r.get(f"{key}_s") is None else r[f"{key}_s"] for r in sel])
            kw = style(i)
            ax.plot(S, y, label="fast path" if key == "fast" else key, markersize=5, **kw)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(S, [f"{v:g}" for v in S])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(crit)
        ax.set_xlabel("states S (log)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("median wall seconds per instance")
    figure_legend(fig, axes, ncols=4, fontsize=8)
    n, A = rows[0]["instances"], rows[0]["A"]
    fig.suptitle(
        f"optplan bench planning: random dense MDPs, A = {A}, median of {n} instances per "
        "size, log-log",
        fontsize=10,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    cc = sub.add_parser("crosscheck", help="histogram of fast-vs-conic errors")
    cc.add_argument("--out", type=Path, default=DEFAULT_OUT, help=OUT_HELP)
    cc.add_argument("--solver", default="CLARABEL", choices=op.SOLVERS)
    pl = sub.add_parser("planning", help="plot of `optplan bench planning --json` output")
    pl.add_argument("json", type=Path)
    pl.add_argument("--out", type=Path, default=DEFAULT_OUT, help=OUT_HELP)
    args = p.parse_args()
    if args.what == "crosscheck":
        crosscheck(_figure_path(args.out, "crosscheck-errors.png"), args.solver)
    else:
        planning(args.json, _figure_path(args.out, "bench-planning.png"))


if __name__ == "__main__":
    main()
