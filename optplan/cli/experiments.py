"""The experiment commands of ``optplan``: ``run``, ``sweep``, ``plot`` and ``results``.

Store warnings (a damaged record skipped or moved aside, a stale lock taken over) are printed
as they happen, one line each, ``optplan: warning: ...``; ``results`` and ``plot`` then say how
many damaged records they skipped and carry on with the rest (exit status unchanged).
"""

from __future__ import annotations

import functools
import json
import sys
import warnings

from .._checks import MissingDependency, OptplanError
from .._progress import progress_bar
from ..experiments.stats import aggregate
from ..modelfile import tomllib
from ..plots import figures, plots
from ..plots.figures import KINDS, SCALING_METRICS
from ..sweeps import registry
from ..sweeps.execute import BACKENDS, execute_task, run_sweep
from ..sweeps.records import (
    DAMAGED_DIR,
    PLOT_CURVE_KEYS,
    StoreWarning,
    summary_columns,
    summary_row,
)
from ..sweeps.results import load_results
from ..sweeps.sweep import load_sweep, single_sweep

__all__ = ["add_parsers", "split_params", "format_aggregate"]


def _value(text: str):
    """A ``--param`` value: a TOML literal (``0.1``, ``true``, ``"x"``) or else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def split_params(pairs: list[str], agent: str, env: str) -> tuple[dict, dict]:
    """``k=v`` pairs into agent and environment parameters (``agent.k``/``env.k`` to choose)."""
    a_comp, e_comp = registry.get_agent(agent), registry.get_env(env)
    a_names = {p.name for p in a_comp.params}
    e_names = {p.name for p in e_comp.params}
    a_params: dict = {}
    e_params: dict = {}
    for pair in pairs:
        if "=" not in pair:
            raise OptplanError(f"--param takes key=value, got {pair!r}")
        key, text = pair.split("=", 1)
        key = key.strip()
        side, _, name = key.rpartition(".")
        if side == "agent":
            a_params[name] = _value(text)
        elif side == "env":
            e_params[name] = _value(text)
        elif side:
            raise OptplanError(f"--param {key!r}: prefix must be 'agent.' or 'env.'")
        elif name in a_names and name in e_names:
            raise OptplanError(f"--param {name!r} is both an agent and an env parameter: prefix it")
        elif name in a_names:
            a_params[name] = _value(text)
        elif name in e_names:
            e_params[name] = _value(text)
        else:
            raise OptplanError(
                f"--param {name!r}: not a parameter of agent {agent!r} "
                f"({', '.join(sorted(a_names)) or 'none'}) or env {env!r} "
                f"({', '.join(sorted(e_names))})"
            )
    return a_params, e_params


def _store_warnings(cmd):
    """Run ``cmd`` printing each :class:`StoreWarning` as one line on stderr, at once."""

    @functools.wraps(cmd)
    def wrapped(args) -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("always", StoreWarning)
            show = warnings.showwarning

            def one_line(message, category, filename, lineno, file=None, line=None):
                if issubclass(category, StoreWarning):
                    print(f"optplan: warning: {message}", file=sys.stderr)
                else:
                    show(message, category, filename, lineno, file, line)

            warnings.showwarning = one_line
            return cmd(args)

    return wrapped


def _report_skipped(res) -> None:
    """One line: how many damaged records of ``res`` were skipped (none: nothing)."""
    if res.damaged:
        print(
            f"optplan: warning: {len(res.damaged)} damaged record(s) in {res.root} skipped "
            f"(named above); the next optplan sweep into it moves them to {DAMAGED_DIR}/ and "
            f"runs their tasks again",
            file=sys.stderr,
        )


def _fmt_ci(m, h) -> str:
    if m is None:
        return "-"
    return f"{m:.4g} ± {h:.2g}" if h is not None else f"{m:.4g}"


def _fmt_sd(m, sd) -> str:
    if m is None:
        return "-"
    return f"{m:.4g} ± {sd:.2g} sd" if sd is not None else f"{m:.4g}"


def format_aggregate(groups: list[dict]) -> str:
    occupancy = any(g.get("occupancy_regret") is not None for g in groups)
    head = (
        f"{'agent':<28} {'env':<30} {'n':>3} {'fail':>4} {'final regret (95% CI)':>24} "
        f"{'normalized (95% CI)':>20} {'draft normalized':>20} {'solved':>7} {'t_solve':>8} "
        f"{'wall s':>7}"
    )
    if occupancy:  # RAVI-UCB's R_T, where some agent exposes its policy (discounted runs)
        head += f" {'occupancy regret (95% CI)':>26}"
    lines = [head, "-" * len(head)]
    for g in groups:
        tts = g.get("time_to_solve_median")
        lines.append(
            f"{g['agent']:<28.28} {g['env']:<30.30} {g['tasks']:>3} {g['failed']:>4} "
            f"{_fmt_ci(g['regret'], g['regret_ci95']):>24} "
            f"{_fmt_ci(g['normalized_regret'], g['normalized_regret_ci95']):>20} "
            f"{_fmt_sd(g.get('draft_normalized_regret'), g.get('draft_normalized_regret_sd')):>20} "
            f"{g.get('solved', '-'):>7} {'-' if tts is None else f'{tts:g}':>8} "
            f"{(g['wall_time_mean'] or 0):>7.2f}"
        )
        if occupancy:
            occ = _fmt_ci(g.get("occupancy_regret"), g.get("occupancy_regret_ci95"))
            lines[-1] += f" {occ:>26}"
    return "\n".join([*lines, "", *LEGEND])


#: What the columns of :func:`format_aggregate` are.
LEGEND = (
    "final regret: the run's regret after its last step (the optimal policy's expected reward "
    "minus the agent's, summed); mean over seeds ± the 95% t interval's half-width",
    "normalized: that regret / the oracle's cumulative expected reward; mean ± 95% half-width",
    "draft normalized: the Bayesian-methods draft's (realized rewards, oracle run on the same "
    "seed); mean ± population sd over seeds, as the draft reports it",
    "t_solve: the first episode by which the goal was reached in 10% of the episodes "
    "(k-learning §4), median over the seeds that got there (solved); wall s: mean seconds "
    "per seed",
)


def _command(sub, name: str, func, text: str):
    """The subparser of command ``name`` (``help=text``), dispatching to ``func``."""
    p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
    p.set_defaults(func=func)
    return p


def _switches(p, **flags: str) -> None:
    """On/off options (``store_true``), in the order given: ``linear_y="..."`` adds
    ``--linear-y`` with that help."""
    for name, text in flags.items():
        p.add_argument("--" + name.replace("_", "-"), action="store_true", help=text)


@_store_warnings
def cmd_run(args) -> int:
    if args.list:
        print(registry.describe())
        return 0
    if not args.agent or not args.env:
        raise OptplanError("give --agent and --env (optplan run --list shows them)")
    args.env, given = _gymnasium_id(args.env, args.param or [])
    a_params, e_params = split_params(given, args.agent, args.env)
    options = ("seeds", "steps", "episodes", "criterion", "seed", "stop_when_solved")
    sweep = single_sweep(
        args.agent, args.env, a_params, e_params, **{k: getattr(args, k) for k in options}
    )
    if args.out:
        report = run_sweep(sweep, args.out, jobs=args.jobs, quiet=args.quiet or args.json)
        rows = load_results(args.out, warn=False).rows
        if not args.json:
            print(report)
    else:
        tasks = progress_bar(
            sweep.tasks(),
            desc=f"{args.agent} on {args.env}",
            unit="seed",
            disable=args.quiet or args.json,
        )
        rows = [summary_row(execute_task(t.to_dict())[0]) for t in tasks]
    groups = aggregate(rows)
    if args.json:
        print(json.dumps({"tasks": rows, "groups": groups}, indent=2, default=str))
        return 0
    print(
        f"{'seed':>4} {'steps':>8} {'episodes':>8} {'regret':>12} {'normalized':>11} "
        f"{'t_solve':>8} {'wall s':>7}  status"
    )
    for r in rows:
        tts = r.get("time_to_solve")
        norm = r.get("normalized_regret")
        print(
            f"{r['seed_index']:>4} {r.get('steps') or 0:>8} {r.get('episodes') or 0:>8} "
            f"{(r.get('regret') or float('nan')):>12.5g} "
            f"{(float('nan') if norm is None else norm):>11.4g} "
            f"{'-' if tts is None else tts:>8} {(r.get('wall_time') or 0):>7.2f}  "
            f"{r['status']}{': ' + r['error'] if r.get('error') else ''}"
        )
    print()
    print(format_aggregate(groups))
    return 1 if any(r["status"] != "ok" for r in rows) else 0


def _gymnasium_id(env: str, params: list[str]) -> tuple[str, list[str]]:
    """``--env FrozenLake-v1`` (not a registered name, but a Gymnasium id) as the registered
    ``gymnasium`` environment with ``env.id=FrozenLake-v1``; any other ``env`` as it is."""
    from ..envs import ENVS

    if env in ENVS or "-v" not in env:
        return env, params
    import gymnasium as gym

    try:
        gym.spec(env)
    except gym.error.Error:
        return env, params  # the registry's error names the registered environments
    return "gymnasium", [*params, f"env.id={env}"]


def _run_parser(sub) -> None:
    p = _command(sub, "run", cmd_run, "run one agent on one environment over seeds")
    p.description = (
        "Run one registered agent on one environment for several seeds and print each seed's "
        "regret and their mean with a 95% interval, e.g. optplan run --agent ucrl2 --env "
        "riverswim --steps 3000. --env takes a registered environment or a Gymnasium toy-text "
        "id (FrozenLake-v1, CliffWalking-v1: its transition table, terminal transitions "
        "restarting the episode; --param env.terminal=absorbing for the other view)."
    )
    p.add_argument("--agent", help="registered agent (see --list)")
    p.add_argument("--env", help="registered environment (see --list) or a Gymnasium id")
    p.add_argument(
        "--param",
        action="append",
        metavar="K=V",
        help="agent or env parameter (prefix agent./env. when ambiguous); repeatable",
    )
    p.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    horizon = p.add_mutually_exclusive_group()
    horizon.add_argument("--steps", type=int, help="steps per seed (or --episodes)")
    horizon.add_argument("--episodes", type=int, help="episodes per seed (episodic envs)")
    p.add_argument("--criterion", choices=["average", "discounted"], help="continuing regret")
    p.add_argument("--seed", type=int, default=0, help="root seed")
    _switches(p, stop_when_solved="stop a seed once its goal is solved")
    p.add_argument("--out", help="also keep the results in this directory (resumable)")
    p.add_argument("--jobs", type=int, default=1, help="parallel workers (with --out)")
    _switches(
        p,
        quiet="no progress bar",
        json="machine-readable output (no bar)",
        list="list agents, environments, parameters",
    )


@_store_warnings
def cmd_sweep(args) -> int:
    sweep = load_sweep(args.file)
    report = run_sweep(
        sweep,
        args.out,
        backend=args.backend,
        jobs=args.jobs,
        address=args.address,
        quiet=args.quiet,
        retry_failed=args.retry_failed,
    )
    print(report)
    if not args.quiet:
        print(format_aggregate(aggregate(load_results(args.out, warn=False).rows)))
    return 1 if report.failed else 0


def _sweep_parser(sub) -> None:
    p = _command(sub, "sweep", cmd_sweep, "run a sweep file into a resumable result directory")
    p.add_argument("file", help="sweep file, e.g. models/sweeps/smoke.toml")
    p.add_argument("--out", required=True, help="result directory (re-run to resume)")
    p.add_argument(
        "--backend", choices=BACKENDS, default="local", help="joblib processes or Ray tasks"
    )
    p.add_argument("--jobs", type=int, default=1, help="worker processes / local Ray CPUs")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    _switches(p, retry_failed="re-run tasks that raised", quiet="no progress bar or table")


@_store_warnings
def cmd_results(args) -> int:
    res = load_results(args.dir)
    _report_skipped(res)
    rows = res.rows
    if args.compare:
        other = load_results(args.compare)
        _report_skipped(other)
        diffs = res.compare(other)
        if diffs:
            print(f"{len(diffs)} differences (wall_time ignored):")
            print("\n".join(diffs[:50]))
            return 1
        print(
            f"identical: {len(rows)} tasks, every summary column equal bit for bit "
            f"(wall_time ignored)"
        )
        return 0
    if args.curves and not (args.csv or args.parquet):
        raise OptplanError("--curves says what --csv or --parquet writes: give one of them")
    if args.csv or args.parquet:
        return _export(res, args)
    groups = aggregate(rows)
    if args.json:
        damaged = [d.to_dict() for d in res.damaged]
        print(
            json.dumps({"tasks": rows, "groups": groups, "damaged": damaged}, indent=2, default=str)
        )
        return 0
    sw = res.spec["sweep"]
    failed = sum(r["status"] != "ok" for r in rows)
    skipped = f", {len(res.damaged)} damaged record(s) skipped" if res.damaged else ""
    print(
        f"sweep {sw['name']!r}: {len(rows)} of {res.n_tasks} tasks finished, {failed} failed"
        f"{skipped}"
    )
    print(format_aggregate(groups))
    errors = [r for r in rows if r["status"] != "ok"]
    for r in errors[:10]:
        print(f"error in {r['task_id']}: {r['error']}")
    return 0


def _export(res, args) -> int:
    """``optplan results --csv/--parquet``: the summary table (one row per task) or, with
    ``--curves``, the curves in long form (:meth:`Results.to_frame`, made once). The task
    table as CSV needs only the standard library."""
    import csv

    frame = res.to_frame(curves=args.curves) if args.curves or args.parquet else None
    if args.csv and frame is None:
        rows = res.rows
        with open(args.csv, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=summary_columns(rows))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}: {len(rows)} tasks")
    elif args.csv:
        frame.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}: {len(frame)} rows")
    if args.parquet:
        try:
            frame.to_parquet(args.parquet, index=False)
        except ImportError as exc:  # pandas names both engines it tried
            hint = "--parquet needs a Parquet engine: pip install pyarrow"
            raise MissingDependency(hint) from exc
        print(f"wrote {args.parquet}: {len(frame)} rows")
    return 0


def _results_parser(sub) -> None:
    p = _command(sub, "results", cmd_results, "summarize a sweep's result directory")
    p.add_argument("dir", help="result directory of optplan sweep")
    _switches(p, json="every task row and the group table")
    p.add_argument("--compare", metavar="DIR", help="exit 1 unless DIR has equal rows")
    p.add_argument("--csv", metavar="FILE", help="write the table of tasks (or --curves) as CSV")
    p.add_argument(
        "--parquet", metavar="FILE", help="write it as Parquet (needs pandas and pyarrow)"
    )
    p.add_argument(
        "--curves",
        action="store_true",
        help="with --csv/--parquet: the curves in long form, one row per task and step",
    )


@_store_warnings
def cmd_plot(args) -> int:
    plots.check_image_suffix("--out", args.out)
    res = load_results(args.dir)
    _report_skipped(res)
    if args.kind == "regret":
        fig = figures.regret_figure(
            res,
            metric=args.metric or "regret",
            envs=args.env,
            agents=args.agent,
            logx=args.logx,
            logy=args.logy,
        )
    elif args.kind == "scaling":
        ref = figures.reference_curve(args.reference) if args.reference else None
        fig = figures.scaling_figure(
            res,
            metric=args.metric or "regret",
            param=args.param,
            reference=ref,
            reference_label=args.reference,
            agents=args.agent,
            logy=not args.linear_y,
        )
    else:
        fig = figures.heatmap_figure(res, envs=args.env, agents=args.agent, log=not args.linear_y)
    path = plots.save_figure(fig, args.out)
    print(f"wrote {path}")
    return 0


def _plot_parser(sub) -> None:
    p = _command(sub, "plot", cmd_plot, "plot a sweep's results")
    p.add_argument("dir", help="result directory of optplan sweep")
    p.add_argument("--kind", choices=KINDS, default="regret", help="which figure")
    p.add_argument("--out", required=True, help="PNG (or any matplotlib format) to write")
    p.add_argument(
        "--metric",
        help=f"regret: one of {', '.join(PLOT_CURVE_KEYS)}; scaling: one of "
        f"{', '.join(SCALING_METRICS)} (default regret)",
    )
    p.add_argument("--env", action="append", help="environment label(s) to show")
    p.add_argument("--agent", action="append", help="agent label(s) to show")
    p.add_argument("--param", help="scaling: the environment size parameter (default: guessed)")
    p.add_argument("--reference", help="scaling: reference curve in x, e.g. '2**(x-1)'")
    _switches(
        p,
        logx="regret: log-scale steps",
        logy="regret: log-scale y",
        linear_y="scaling/heatmap: linear scale",
    )


def add_parsers(sub) -> None:
    """Add ``run``, ``sweep``, ``plot`` and ``results`` to the ``optplan`` subparsers."""
    for add in (_run_parser, _sweep_parser, _plot_parser, _results_parser):
        add(sub)
