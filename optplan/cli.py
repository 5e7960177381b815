"""The ``optplan`` command: solve, verify, demo, bench."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .cases import INDEX_PROBLEMS
from .crosscheck import cross_check
from .experiments.cli import add_parsers as add_experiment_parsers
from .mdp import FiniteHorizonMDP, TabularMDP
from .modelfile import load_model
from .problems import (
    SOLVERS,
    AverageRewardPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
)
from .result import PlanResult

CRITERIA = ("average", "discounted", "finite_horizon")
DEMO_MODELS = ("cowan3.toml", "riverswim6.toml", "random-dirichlet.toml")


class CLIError(Exception):
    """A user error: printed without a traceback, exit status 2."""


def make_problem(model, criterion: str | None, discount: float | None, horizon: int | None):
    """The planning problem for a model and a criterion (default: the model's own)."""
    criterion = criterion or model.criterion
    if criterion == "finite_horizon":
        if isinstance(model, FiniteHorizonMDP):
            return FiniteHorizonPlanning(model)
        if horizon is None:
            raise CLIError("--criterion finite_horizon on a stationary model needs --horizon L")
        return FiniteHorizonPlanning(FiniteHorizonMDP.from_stationary(model, horizon))
    if not isinstance(model, TabularMDP):
        raise CLIError(
            f"--criterion {criterion} needs a stationary model, the file holds {model!r}"
        )
    if criterion == "discounted":
        gamma = discount if discount is not None else model.discount
        if gamma is None:
            raise CLIError(
                "the model has no discount: pass --discount G for --criterion discounted"
            )
        return DiscountedPlanning(model.with_discount(gamma))
    return AverageRewardPlanning(model)


def _fmt(arr, digits: int = 6) -> str:
    a = np.asarray(arr)
    if a.dtype.kind in "iu":
        return np.array2string(a, separator=" ")
    return np.array2string(
        a, precision=digits, separator=" ", suppress_small=False, max_line_width=100
    )


def describe(res: PlanResult) -> str:
    head = f"[{res.method}{' / ' + res.solver if res.solver else ''}]"
    lines = [
        f"{head} status={res.status}  time={res.solve_time * 1e3:.2f} ms  "
        f"iterations={res.iterations}"
    ]
    if res.message:
        lines.append(f"  message: {res.message}")
    if res.success:
        if res.gain is not None:
            lines.append(f"  gain   = {res.gain:.12g}")
            lines.append(f"  bias   = {_fmt(res.bias)}")
        else:
            lines.append(f"  value  = {res.value:.12g}   (initial @ V)")
            if res.values is not None and res.values.ndim == 1:
                lines.append(f"  V      = {_fmt(res.values)}")
        lines.append(f"  policy = {_fmt(res.policy)}")
    return "\n".join(lines)


def describe_check(chk) -> str:
    mark = "AGREE" if chk.agree else "DISAGREE"
    lines = [
        f"cross-check ({chk.conic.solver}, rtol={chk.rtol:g}, atol={chk.atol:g}): {mark}",
        "  quantity                 abs error (|fast - conic|; residual for *_feasibility)",
    ]
    for name, err in chk.abs_err.items():
        lines.append(f"  {name:<24} {err:.2e}")
    if not chk.agree:
        lines.append(f"  {chk.message}")
    return "\n".join(lines)


def cmd_solve(args) -> int:
    model = load_model(args.file)
    problem = make_problem(model, args.criterion, args.discount, args.horizon)
    fast_opts = {"algorithm": args.algorithm} if args.algorithm else {}
    out = {"model": str(args.file), "name": model.name, "criterion": problem.stem, "results": {}}
    code = 0
    if args.method == "both":
        chk = cross_check(problem, solver=args.solver, fast_options=fast_opts)
        results = {"fast": chk.fast, "conic": chk.conic}
        out["cross_check"] = {k: v for k, v in chk.to_dict().items() if k not in ("fast", "conic")}
        code = 0 if chk.agree else 1
    elif args.method == "fast":
        results = {"fast": problem.solve(method="fast", **fast_opts)}
    else:
        results = {"conic": problem.solve(method="conic", solver=args.solver)}
    out["results"] = {k: r.to_dict() for k, r in results.items()}
    if any(not r.success for r in results.values()):
        code = 1
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{model!r} from {args.file}, criterion {problem.stem}")
        for r in results.values():
            print(describe(r))
        if args.method == "both":
            print(describe_check(chk))
    return code


def cmd_verify(args) -> int:
    model = load_model(args.file)
    problem = make_problem(model, args.criterion, args.discount, args.horizon)
    solvers = args.solver or list(SOLVERS)
    report, ok = [], True
    for solver in solvers:
        chk = cross_check(problem, solver=solver, rtol=args.rtol, atol=args.atol)
        ok &= chk.agree
        report.append(chk)
    if args.json:
        print(
            json.dumps(
                {
                    "model": str(args.file),
                    "criterion": problem.stem,
                    "agree": ok,
                    "checks": [
                        {"solver": c.conic.solver}
                        | {k: v for k, v in c.to_dict().items() if k not in ("fast", "conic")}
                        for c in report
                    ],
                },
                indent=2,
            )
        )
    else:
        print(f"{model!r} from {args.file}, criterion {problem.stem}")
        for chk in report:
            print(describe_check(chk))
        print("verify: " + ("all solvers agree with the fast path" if ok else "DISAGREEMENT"))
    return 0 if ok else 1


def find_models_dir(given: str | None) -> Path:
    candidates = (
        [Path(given)]
        if given
        else [Path.cwd() / "models", Path(__file__).resolve().parents[1] / "models"]
    )
    for c in candidates:
        if (c / DEMO_MODELS[0]).is_file():
            return c
    raise CLIError(
        f"cannot find the shipped models (looked in {', '.join(map(str, candidates))}); "
        "run from the repository root or pass --models DIR"
    )


def cmd_demo(args) -> int:
    start = time.perf_counter()
    directory = find_models_dir(args.models)
    print("optplan demo: each shipped model solved by the fast path (policy iteration) and by its")
    print("LP in CVXPY (CLARABEL), then cross-checked (gain, bias, policy value, occupancies).\n")
    ok = True
    header = (
        f"{'model':<18}{'criterion':<12}{'value (fast)':>16}{'value (conic)':>16}"
        f"{'max |diff|':>11}{'fast ms':>9}{'conic ms':>10}  policy"
    )
    print(header)
    print("-" * len(header))
    for fname in DEMO_MODELS:
        model = load_model(directory / fname)
        for problem in (
            AverageRewardPlanning(model),
            DiscountedPlanning(model.with_discount(0.95)),
            FiniteHorizonPlanning(FiniteHorizonMDP.from_stationary(model, 10)),
        ):
            chk = cross_check(problem, solver="CLARABEL")
            ok &= chk.agree
            worst = max(chk.abs_err.values()) if chk.abs_err else float("nan")
            label = {
                "average_reward": "average",
                "discounted": "disc. 0.95",
                "finite_horizon": "horizon 10",
            }[problem.stem]
            policy = chk.fast.policy if chk.fast.policy.ndim == 1 else chk.fast.policy[0]
            print(
                f"{model.name:<18}{label:<12}{chk.fast.value:>16.10f}{chk.conic.value:>16.10f}"
                f"{worst:>11.1e}{chk.fast.solve_time * 1e3:>9.2f}"
                f"{chk.conic.solve_time * 1e3:>10.2f}"
                f"  {_fmt(policy)}{'' if chk.agree else '  DISAGREE: ' + chk.message}"
            )
    cowan = load_model(directory / "cowan3.toml")
    sol = AverageRewardPlanning(cowan).solve()
    paper = "matches" if sol.policy.tolist() == [0, 1, 0] else "DOES NOT match"
    print(f"\ncowan3 optimal policy {sol.policy.tolist()} {paper} the paper's (a1, a2, a1) (§5).")
    ok &= _demo_indices(cowan.P[0, 1], sol.bias)
    ok &= _demo_k_learning()
    print(f"all cross-checks agree: {ok}; total {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


def _demo_indices(p: np.ndarray, v: np.ndarray) -> bool:
    """The three index problems of accelerating-ucb-indices-mdp §4 on cowan3's (x1, a2) row."""
    from .problems import KLBallIndex, KLInfRate, L1BallIndex

    print(f"\nindices for p = P[x1, a2] = {p.tolist()}, v = the bias above:")
    target = float(p @ v + 0.5 * (v.max() - p @ v))
    ok = True
    for problem, label in (
        (KLBallIndex(p, v, 0.1), "KL ball C(p, v, 0.1)  (MDP-UCB)"),
        (KLInfRate(p, v, target), f"KL-inf D(p, v, {target:.3f}) (MDP-DMED)"),
        (L1BallIndex(p, v, 0.2), "L1 ball B(p, v, 0.2)  (OLP)"),
    ):
        chk = cross_check(problem, solver="CLARABEL")
        ok &= chk.agree
        print(
            f"  {label:<36} fast {chk.fast.value:.12f}  conic {chk.conic.value:.12f}  "
            f"multiplier {chk.fast.multiplier:.6f}  {'agree' if chk.agree else 'DISAGREE'}"
        )
    return ok


def _demo_k_learning() -> bool:
    """K-learning's optimal temperature (problem 11) on a DeepSea-shaped posterior, L = 6."""
    from .bench_k_learning import deepsea_instance

    problem = deepsea_instance(6, np.random.default_rng(0))
    # Load (or compile) the numba kernel first, so the time shown is the solve's own.
    deepsea_instance(2, np.random.default_rng(0)).solve("fast")
    chk = cross_check(problem, solver="CLARABEL")
    print(
        "\nK-learning temperature tau* (problem 11), DeepSea-shaped posterior, L = 6:\n"
        f"  fast tau* {chk.fast.x:.9f} ({chk.fast.info['kernel']} kernel, "
        f"{chk.fast.solve_time * 1e3:.2f} ms)  conic tau* {chk.conic.x:.9f} "
        f"({chk.conic.solve_time * 1e3:.1f} ms)  objective {chk.fast.value:.9f}  "
        f"primal-dual gap {chk.fast.info['gap']:.1e}  {'agree' if chk.agree else 'DISAGREE'}"
    )
    return chk.agree


def cmd_bench(args) -> int:
    from .bench import bench_planning, format_table

    solvers = args.solvers or list(SOLVERS)
    progress = None if (args.json or args.quiet) else (lambda m: print(m, file=sys.stderr))
    rows = bench_planning(
        sizes=args.sizes,
        n_actions=args.actions,
        repeats=args.repeats,
        solvers=solvers,
        criteria=args.criteria,
        seed=args.seed,
        progress=progress,
    )
    if args.json:
        print(json.dumps({"benchmark": "planning", "rows": rows}, indent=2))
    else:
        print(
            f"planning benchmark: random dense MDPs, A={args.actions}, {args.repeats} instances "
            "per size, median wall seconds; ratio = conic median / fast median (same run)"
        )
        print(format_table(rows, solvers))
    return 0


def cmd_bench_k_learning(args) -> int:
    from .bench_k_learning import bench_k_learning, format_k_table

    solvers = args.solvers or list(SOLVERS)
    progress = None if (args.json or args.quiet) else (lambda m: print(m, file=sys.stderr))
    rows = bench_k_learning(
        sizes=args.sizes,
        instances=args.instances,
        solvers=solvers,
        seed=args.seed,
        max_conic_seconds=args.max_conic_seconds,
        progress=progress,
    )
    if args.json:
        print(json.dumps({"benchmark": "k-learning", "rows": rows}, indent=2))
    else:
        print(
            "K-learning temperature benchmark: DeepSea-shaped posteriors (L x L states, 2 "
            f"actions), {args.instances} instances per depth, median wall milliseconds of the "
            "fast tau* on its default kernel and on the numpy reference; x fast = conic median / "
            "default-kernel median (same run); dtau = max |tau_conic - tau_fast| / tau_fast"
        )
        print(format_k_table(rows, solvers))
    return 0


def cmd_bench_index_agents(args) -> int:
    from .bench_index_agents import bench_index_agents, format_index_agents_table

    progress = None if (args.json or args.quiet) else (lambda m: print(m, file=sys.stderr))
    rows = bench_index_agents(
        sizes=args.sizes,
        n_actions=args.actions,
        fast_steps=args.fast_steps,
        conic_steps=args.conic_steps,
        seed=args.seed,
        progress=progress,
    )
    if args.json:
        print(json.dumps({"benchmark": "index-agents", "rows": rows}, indent=2))
    else:
        print(
            "Index agents on random Dirichlet MDPs: whole agent+env steps per second, fast vs "
            f"conic index path, measured in this run ({args.fast_steps} fast / "
            f"{args.conic_steps} conic steps per cell); fallbacks = conic index instances not "
            "solved to optimal (recomputed fast) / conic instances"
        )
        print(format_index_agents_table(rows))
    return 0


def cmd_bench_indices(args) -> int:
    from .bench import (
        MAX_BATCH_ELEMENTS,
        bench_indices,
        format_index_table,
        plot_indices,
        require_matplotlib,
    )

    if args.plot:  # before minutes of timing, not after
        try:
            require_matplotlib()
        except ImportError as exc:
            raise CLIError(str(exc)) from None
    solvers = args.solvers or list(SOLVERS)
    progress = None if (args.json or args.quiet) else (lambda m: print(m, file=sys.stderr))
    rows = bench_indices(
        sizes=args.sizes,
        instances=args.instances,
        problems=args.problems,
        solvers=solvers,
        batch=args.batch,
        max_conic_seconds=args.max_conic_seconds,
        zeros=args.zeros,
        seed=args.seed,
        progress=progress,
    )
    if args.plot:
        plot_indices(rows, args.plot, solvers)
    if args.json:
        out = {
            "benchmark": "indices",
            "sizes": args.sizes,
            "instances": args.instances,
            "problems": args.problems,
            "solvers": solvers,
            "batch": args.batch,
            "max_batch_elements": MAX_BATCH_ELEMENTS,
            "max_conic_seconds": args.max_conic_seconds,
            "zeros": args.zeros,
            "seed": args.seed,
            "plot": args.plot,
            "rows": rows,
        }
        print(json.dumps(out, indent=2))
    else:
        print(
            f"index benchmark (paper §4.5): {args.instances} random instances per size, "
            "median wall seconds per instance.\n"
            "batch/N: one batched fast call on the N instances / N; batch/B: one call on "
            f"B={args.batch} fresh instances / B (when S*B <= {MAX_BATCH_ELEMENTS:.0e}); "
            "batched calls: median of 3.\n"
            "ratio: conic median / fast single-call median (same run). fail: status neither "
            "optimal nor optimal_inaccurate; inacc: optimal_inaccurate.\n"
            "abs/rel err: max |fast - conic| and max |fast - conic| / (1 + |conic|) over the "
            "instances the solver solved to status optimal."
        )
        print(format_index_table(rows, solvers))
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0


def _solver_name(value: str) -> str:
    if value.upper() not in SOLVERS:
        raise argparse.ArgumentTypeError(f"unknown solver {value!r}; choose from {SOLVERS}")
    return value.upper()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optplan", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def model_args(p):
        p.add_argument("file", help="model file (TOML), e.g. models/cowan3.toml")
        p.add_argument("--criterion", choices=CRITERIA, help="default: the file's criterion")
        p.add_argument("--discount", type=float, help="discount for --criterion discounted")
        p.add_argument("--horizon", type=int, help="layers for --criterion finite_horizon")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("solve", help="solve a model file (fast, conic or both)")
    model_args(p)
    p.add_argument("--method", choices=("fast", "conic", "both"), default="fast")
    p.add_argument("--solver", type=_solver_name, default="CLARABEL")
    p.add_argument("--algorithm", help="fast-path algorithm, e.g. value_iteration")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("verify", help="cross-check fast vs conic; exit 1 on disagreement")
    model_args(p)
    p.add_argument(
        "--solver", type=_solver_name, action="append", help=f"repeatable; default all of {SOLVERS}"
    )
    p.add_argument("--rtol", type=float, help="override the per-solver tolerance table")
    p.add_argument("--atol", type=float, help="override the per-solver tolerance table")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("demo", help="solve the shipped models both ways (seconds)")
    p.add_argument("--models", help="directory holding the shipped model files")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="fast-vs-conic benchmarks")
    bsub = p.add_subparsers(dest="suite", required=True)
    b = bsub.add_parser("planning", help="known-model planning: fast DP vs LP solvers")
    b.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    b.add_argument("--actions", type=int, default=4)
    b.add_argument("--repeats", type=int, default=5)
    b.add_argument("--solvers", type=_solver_name, nargs="+")
    b.add_argument(
        "--criteria",
        nargs="+",
        choices=("discounted", "average"),
        default=["discounted", "average"],
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    b.set_defaults(func=cmd_bench)

    b = bsub.add_parser(
        "indices",
        help="index problems (KL ball, KL-inf, L1 ball): compute time vs |S| (paper Figs. 1-2)",
    )
    b.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    b.add_argument("--instances", type=int, default=15, help="random instances per size")
    b.add_argument("--problems", nargs="+", choices=INDEX_PROBLEMS, default=list(INDEX_PROBLEMS))
    b.add_argument("--solvers", type=_solver_name, nargs="+")
    b.add_argument(
        "--batch",
        type=int,
        default=1000,
        metavar="B",
        help="also time one batched fast call on B instances (when S*B <= 1e7; 0: never)",
    )
    b.add_argument(
        "--max-conic-seconds",
        type=float,
        default=120.0,
        metavar="T",
        help="stop timing a conic solver once it has spent T s on one size (and skip it on "
        "larger sizes); reported as skipped",
    )
    b.add_argument(
        "--zeros", type=float, default=0.0, help="fraction of zero-probability states in p"
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.add_argument("--plot", metavar="FILE", help="write a log-log PNG of time vs |S|")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    b.set_defaults(func=cmd_bench_indices)

    b = bsub.add_parser(
        "k-learning", help="K-learning optimal temperature (problem 11): fast vs conic solvers"
    )
    b.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20, 30, 50])
    b.add_argument("--instances", type=int, default=5, help="random instances per depth")
    b.add_argument("--solvers", type=_solver_name, nargs="+")
    b.add_argument("--max-conic-seconds", type=float, default=120.0, metavar="T")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.add_argument("--quiet", action="store_true")
    b.set_defaults(func=cmd_bench_k_learning)

    b = bsub.add_parser(
        "index-agents", help="MDP-UCB / OLP / MDP-DMED / MDP-PS steps per second, fast vs conic"
    )
    b.add_argument("--sizes", type=int, nargs="+", default=[3, 30, 300])
    b.add_argument("--actions", type=int, default=4)
    b.add_argument("--fast-steps", type=int, default=2000)
    b.add_argument("--conic-steps", type=int, default=20)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.add_argument("--quiet", action="store_true")
    b.set_defaults(func=cmd_bench_index_agents)

    add_experiment_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(f"optplan: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
