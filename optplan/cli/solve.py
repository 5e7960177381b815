"""``optplan solve``, ``verify`` and ``demo``: a model file's planning problem, both ways."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from .._checks import OptplanError
from ..bench import solver_name
from ..bench._options import nonneg_float
from ..bench.cases import deepsea_instance
from ..crosscheck import cross_check
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..modelfile import load_model
from ..problems import (
    CRITERIA,
    SOLVERS,
    AverageRewardPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    KLBallIndex,
    KLInfRate,
    L1BallIndex,
    planning_problem,
)
from ..result import PlanResult

__all__ = ["CLIError", "model_problem", "add_parsers", "cmd_solve", "cmd_verify", "cmd_demo"]

DEMO_MODELS = ("cowan3.toml", "riverswim6.toml", "random-dirichlet.toml")


class CLIError(OptplanError):
    """A user error: printed without a traceback, exit status 2."""


def key_values(pairs, error: str, booleans: bool = False) -> dict:
    """``{key: value}`` of ``KEY=VALUE`` strings, each value an int, else a float, else (with
    ``booleans``, ``true``/``false`` in any case first) the string; a malformed pair is a
    :class:`CLIError` ``"<error>, got <pair>"``."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CLIError(f"{error}, got {pair!r}")
        out[key] = _scalar(value, booleans)
    return out


def _scalar(text: str, booleans: bool):
    if booleans and text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def model_problem(model, args: argparse.Namespace):
    """The planning problem of ``--criterion`` (default: the model's own), ``--discount`` and
    ``--horizon``, by :func:`optplan.problems.planning_problem`; the flags a stationary model
    lacks are named first, as flags."""
    criterion = args.criterion or model.criterion
    if isinstance(model, TabularMDP):
        if criterion == "finite_horizon" and args.horizon is None:
            raise CLIError("--criterion finite_horizon on a stationary model needs --horizon L")
        if criterion == "discounted" and args.discount is None and model.discount is None:
            raise CLIError(
                "the model has no discount: pass --discount G for --criterion discounted"
            )
    return planning_problem(model, criterion, discount=args.discount, horizon=args.horizon)


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
    problem = model_problem(model, args)
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
    problem = model_problem(model, args)
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
        else [Path.cwd() / "models", Path(__file__).resolve().parents[2] / "models"]
    )
    for c in candidates:
        if (c / DEMO_MODELS[0]).is_file():
            return c
    raise CLIError(
        f"cannot find the shipped models (looked in {', '.join(map(str, candidates))}); "
        "run from the repository root or pass --models DIR"
    )


def _check_json(chk) -> dict:
    """One cross-check as JSON: values, the fast policy (or tau*), the largest difference,
    the solve times, agreement."""
    worst = max(chk.abs_err.values()) if chk.abs_err else None
    return {
        "value_fast": float(chk.fast.value),
        "value_conic": float(chk.conic.value),
        "max_abs_err": None if worst is None else float(worst),
        "fast_ms": chk.fast.solve_time * 1e3,
        "conic_ms": chk.conic.solve_time * 1e3,
        "agree": bool(chk.agree),
    }


def cmd_demo(args) -> int:
    start = time.perf_counter()
    directory = find_models_dir(args.models)
    report: dict = {"models": [], "indices": [], "k_learning": None}
    say = (lambda *a, **k: None) if args.json else print
    say("optplan demo: each shipped model solved by the fast path (policy iteration) and by its")
    say("LP in CVXPY (CLARABEL), then cross-checked (gain, bias, policy value, occupancies).\n")
    ok = True
    header = (
        f"{'model':<18}{'criterion':<12}{'value (fast)':>16}{'value (conic)':>16}"
        f"{'max |diff|':>11}{'fast ms':>9}{'conic ms':>10}  policy"
    )
    say(header)
    say("-" * len(header))
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
            report["models"].append(
                {"model": model.name, "criterion": label, "policy": policy.tolist()}
                | _check_json(chk)
            )
            say(
                f"{model.name:<18}{label:<12}{chk.fast.value:>16.10f}{chk.conic.value:>16.10f}"
                f"{worst:>11.1e}{chk.fast.solve_time * 1e3:>9.2f}"
                f"{chk.conic.solve_time * 1e3:>10.2f}"
                f"  {_fmt(policy)}{'' if chk.agree else '  DISAGREE: ' + chk.message}"
            )
    cowan = load_model(directory / "cowan3.toml")
    sol = AverageRewardPlanning(cowan).solve()
    paper = "matches" if sol.policy.tolist() == [0, 1, 0] else "DOES NOT match"
    say(f"\ncowan3 optimal policy {sol.policy.tolist()} {paper} the paper's (a1, a2, a1) (§5).")
    report["cowan3_policy"] = sol.policy.tolist()
    report["cowan3_matches_paper"] = sol.policy.tolist() == [0, 1, 0]
    ok &= _demo_indices(cowan.dense_P()[0, 1], sol.bias, say, report)
    ok &= _demo_k_learning(say, report)
    total = time.perf_counter() - start
    say(f"all cross-checks agree: {ok}; total {total:.1f} s")
    if args.json:
        report |= {"all_cross_checks_agree": bool(ok), "total_s": total}
        print(json.dumps(report, indent=2))
    return 0 if ok else 1


def _demo_indices(p: np.ndarray, v: np.ndarray, say=print, report=None) -> bool:
    """The three index problems of accelerating-ucb-indices-mdp §4 on cowan3's (x1, a2) row."""
    say(
        f"\nindices for p = P[x1, a2] = {p.tolist()}, v = the bias above (NumPy kernels: one "
        "instance takes them a fraction of a millisecond; batches use the compiled ones):"
    )
    target = float(p @ v + 0.5 * (v.max() - p @ v))
    ok = True
    for problem, label in (
        (KLBallIndex(p, v, 0.1), "KL ball C(p, v, 0.1)  (MDP-UCB)"),
        (KLInfRate(p, v, target), f"KL-inf D(p, v, {target:.3f}) (MDP-DMED)"),
        (L1BallIndex(p, v, 0.2), "L1 ball B(p, v, 0.2)  (OLP)"),
    ):
        chk = cross_check(problem, solver="CLARABEL", fast_options={"kernel": "numpy"})
        ok &= chk.agree
        if report is not None:
            report["indices"].append(
                {"problem": problem.stem, "label": label.split("  ")[0].strip()}
                | {"p": p.tolist(), "v": v.tolist(), "multiplier": float(chk.fast.multiplier)}
                | _check_json(chk)
            )
        say(
            f"  {label:<36} fast {chk.fast.value:.12f}  conic {chk.conic.value:.12f}  "
            f"multiplier {chk.fast.multiplier:.6f}  {'agree' if chk.agree else 'DISAGREE'}"
        )
    return ok


def _demo_k_learning(say=print, report=None) -> bool:
    """K-learning's optimal temperature (problem 11) on a DeepSea-shaped posterior, L = 6."""
    problem = deepsea_instance(6, np.random.default_rng(0))
    # NumPy's kernel: on one problem this small it takes a millisecond or two, while the
    # compiled search would first cost several seconds of numba compiling on a new install
    # (K-learning's runs pay that once, and gain it back within their first episodes)
    options = {"kernel": "numpy"}
    deepsea_instance(2, np.random.default_rng(0)).solve("fast", **options)  # imports, untimed
    chk = cross_check(problem, solver="CLARABEL", fast_options=options)
    if report is not None:
        report["k_learning"] = {
            "layers": 6,
            "tau_fast": float(chk.fast.x),
            "tau_conic": float(chk.conic.x),
            "kernel": chk.fast.info["kernel"],
            "gap": float(chk.fast.info["gap"]),
        } | _check_json(chk)
    say(
        "\nK-learning temperature tau* (problem 11), DeepSea-shaped posterior, L = 6:\n"
        f"  fast tau* {chk.fast.x:.9f} (NumPy search, {chk.fast.solve_time * 1e3:.2f} ms; "
        "K-learning's runs use the compiled one)  conic tau* "
        f"{chk.conic.x:.9f} "
        f"({chk.conic.solve_time * 1e3:.1f} ms)  objective {chk.fast.value:.9f}  "
        f"primal-dual gap {chk.fast.info['gap']:.1e}  {'agree' if chk.agree else 'DISAGREE'}"
    )
    return chk.agree


def add_parsers(sub) -> None:
    """Add ``solve``, ``verify`` and ``demo`` to the ``optplan`` subparsers."""

    def model_args(p):
        p.add_argument("file", help="model file (TOML), e.g. models/cowan3.toml")
        p.add_argument("--criterion", choices=CRITERIA, help="default: the file's criterion")
        p.add_argument("--discount", type=float, help="discount for --criterion discounted")
        p.add_argument("--horizon", type=int, help="layers for --criterion finite_horizon")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("solve", help="solve a model file (fast, conic or both)")
    model_args(p)
    p.add_argument(
        "--method",
        choices=("fast", "conic", "both"),
        default="fast",
        help="fast path, conic (CVXPY) path, or both and compare",
    )
    p.add_argument("--solver", type=solver_name, default="CLARABEL", help="conic solver")
    p.add_argument("--algorithm", help="fast-path algorithm, e.g. value_iteration")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("verify", help="cross-check fast vs conic; exit 1 on disagreement")
    model_args(p)
    p.add_argument(
        "--solver", type=solver_name, action="append", help=f"repeatable; default all of {SOLVERS}"
    )
    p.add_argument(
        "--rtol", type=nonneg_float, help="override the per-solver tolerance table (>= 0)"
    )
    p.add_argument(
        "--atol", type=nonneg_float, help="override the per-solver tolerance table (>= 0)"
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("demo", help="solve the shipped models both ways (seconds)")
    p.add_argument("--models", help="directory holding the shipped model files")
    p.add_argument(
        "--json",
        action="store_true",
        help="machine-readable: per criterion values, policies, max error, times; the "
        "indices; tau*; all_cross_checks_agree",
    )
    p.set_defaults(func=cmd_demo)
