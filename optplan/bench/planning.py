"""``optplan bench planning``: known-model planning, the fast path vs each conic solver.

Random dense MDPs (:func:`optplan.bench.cases.random_mdp`), or with ``--sparse`` random
sparse ones (:func:`random_sparse_mdp`: :data:`SPARSE_SUCCESSORS` successors per pair, ``P``
held CSR), the same instances for every criterion of one size. Every ratio printed comes
from timings taken in the same run, interleaved instance by instance, so machine noise hits
both paths alike. Medians, not means.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple

import numpy as np

from .._checks import OptplanError
from ..dp import ITERATIVE_MIN_STATES
from ..dp.discounted import DENSE_ITERATIVE_MIN_STATES
from ..mdp import FiniteHorizonMDP, check_model_size
from ..problems import (
    AverageRewardPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    HittingTimes,
    RegretLowerBound,
)
from . import peers_planning as dense_peers  # mdpsolver on the dense rows
from ._common import Runs, check_choices, time_conic, timed
from ._options import add_actions, add_choices, add_count, add_sizes, add_solvers
from ._rows import median, solver_entries, solvers_table, table_lines
from .cases import random_mdp
from .mdpsolver_peer import ALGORITHM as MDPSOLVER_ALGORITHM
from .mdpsolver_peer import PARALLEL as MDPSOLVER_PARALLEL
from .mdpsolver_peer import RELATIVE_TOLERANCE
from .models import (
    GRID_SIZE,
    GRID_SLIP,
    NAMED_MODELS,
    SIZED_MODELS,
    SPARSE_SUCCESSORS,
    gridworld_mdp,
    named_mdp,
    random_sparse_mdp,
)
from .peers_planning import PEER_LABELS, PEERS, RVI_EPSILON, SPARSE_PEERS, VI_EPSILON, run_peer
from .sparse_planning import (
    PEER_AGREE,
    PEER_ONE_RUN_STATES,
    SPARSE_PEER_RUNS,
    sparse_rows,
)

__all__ = [
    "RUNS",
    "PLANNING_PROBLEMS",
    "PLANNING_HORIZON",
    "STEMS",
    "HELP",
    "bench_planning",
    "random_sparse_mdp",
    "gridworld_mdp",
    "named_mdp",
    "NAMED_MODELS",
    "GRID_SIZE",
    "GRID_SLIP",
    "SPARSE_SUCCESSORS",
    "format_table",
    "table",
    "total",
    "header",
    "meta",
    "add_arguments",
]

HELP = "known-model planning: fast DP vs LP solvers"
#: Layers of the finite-horizon rows: the random stationary MDP repeated this many times.
PLANNING_HORIZON = 10
#: ``criterion -> (problem class, the model it is given, from a random stationary MDP)``.
PLANNING_PROBLEMS = {
    "discounted": (DiscountedPlanning, lambda mdp: mdp.with_discount(0.95)),
    "average": (AverageRewardPlanning, lambda mdp: mdp),
    "finite_horizon": (
        FiniteHorizonPlanning,
        lambda mdp: FiniteHorizonMDP.from_stationary(mdp, PLANNING_HORIZON),
    ),
    # value = the diameter; S targets' shortest paths (on request: S^2 LP variables)
    "hitting_time": (HittingTimes, lambda mdp: mdp),
    # value = C(P): the average-reward plan, then one KL-minimization rate per critical pair
    # (the conic path: one exponential-cone program each; on request)
    "lower_bound": (RegretLowerBound, lambda mdp: mdp),
}
#: The problem stems this suite times.
STEMS = frozenset(cls.stem for cls, _ in PLANNING_PROBLEMS.values())
#: The criteria timed when none are named (the finite-horizon rows are on request).
DEFAULT_CRITERIA = ("discounted", "average")
#: With peers, each contender solves each instance this many times in a row (a peer's model
#: copied into its layout before each run, untimed); its median run is kept.
PEER_RUNS = 3
#: The suite's default runs: sizes, actions, MDPs per size, solvers, seed.
RUNS = Runs(sizes=(10, 100, 500), n_actions=4, repeats=5)
#: The discount of the discounted rows unless ``--gamma`` says otherwise.
GAMMA = 0.95
#: The relative accuracy asked of the fast path (and of QuantEcon) unless ``--tol`` says
#: otherwise.
TOL = 1e-10


def bench_planning(
    runs: Runs = RUNS,
    criteria: Sequence[str] = DEFAULT_CRITERIA,
    peers: bool = False,
    progress: Callable[[str], None] | None = None,
    sparse: bool = False,
    models: Sequence[str] = ("random",),
    grid: int | Sequence[int] = GRID_SIZE,
    gamma: float = GAMMA,
    tol: float = TOL,
    sparse_peers: Sequence[str] = SPARSE_PEERS,
) -> list[dict]:
    """Median wall time of the fast path and of each conic solver on random dense MDPs:
    ``runs.repeats`` MDPs with ``runs.n_actions`` actions at each of ``runs.sizes`` states.

    Returns one row per (criterion, S) with ``fast_s``, ``<SOLVER>_s``, ``<SOLVER>_ratio``
    (conic time / fast time), ``<SOLVER>_fail`` (instances without a solution, counted, not
    dropped), ``<SOLVER>_err`` (max |value_fast - value_conic| over solved instances) and
    ``best_ratio`` (fastest conic solver's median / fast median; ``None`` without solvers).

    ``peers``: also pymdptoolbox on the same instances (:mod:`.peers_planning`: relative
    value iteration for ``average``, policy iteration for ``discounted``) and mdpsolver
    (:mod:`.mdpsolver_peer`, ``discounted``: its values checked against optplan's to
    :data:`PEER_AGREE` times ``max(1, max |V|)`` in an untimed run first, else
    ``peer_mdpsolver_skip`` says by how much they differ), each instance in
    :data:`PEER_RUNS` runs in a row per contender (the fast path, then each peer; per
    contender the median run: steady state, the model in cache), giving
    ``peer_<NAME>_s``, ``peer_<NAME>_ratio`` (peer median / fast median: >= 1 means optplan
    is faster) and ``peer_<NAME>_err`` (max disagreement of gain or values).

    ``sparse``: the families of :mod:`.models` that ``models`` names, ``P`` held CSR
    (:func:`.sparse_planning.sparse_rows`: criteria of :data:`SPARSE_CRITERIA`; the random,
    queue and chain families at ``sizes``, the named ones, ``grid`` the gridworlds' sides);
    each row adds ``model``, ``nnz`` and ``peak_rss_gib``; with ``peers``, the discounted
    rows time the peers of ``sparse_peers``, each checked against optplan's values (to
    :data:`PEER_AGREE` times ``max(1, max |V|)``) before its times count
    (``peer_<NAME>_skip`` says why one was not timed).

    ``sparse_peers``: of :data:`.peers_planning.SPARSE_PEERS` (default all). ``gamma``: the
    discount of the discounted rows. ``tol``: the relative accuracy asked of the fast path on
    sparse rows and of QuantEcon (``epsilon = tol max(1, max |V|)`` of optplan's answer).

    Every argument is checked before any timing (sizes and counts positive integers, a model
    within :data:`optplan.mdp.MAX_MODEL_BYTES`, dense).
    """
    sizes, n_actions, repeats, solvers, seed = astuple(runs.checked())
    criteria, models, grids = _checked(criteria, models, grid, tol, gamma)
    layers = PLANNING_HORIZON if "finite_horizon" in criteria else 1
    problems = dict(PLANNING_PROBLEMS)
    problems["discounted"] = (DiscountedPlanning, lambda mdp: mdp.with_discount(gamma))
    if sparse:
        instances = (sizes, n_actions, repeats, seed, models, grids, gamma)
        names = check_choices("sparse_peers", sparse_peers, SPARSE_PEERS) if peers else ()
        return sparse_rows(instances, criteria, solvers, problems, tuple(names), progress, tol)
    if tuple(models) != ("random",):
        raise OptplanError("--models names sparse instances: add --sparse")
    check_model_size(max(sizes), n_actions, layers)
    if peers and gamma == 0 and "discounted" in criteria:
        raise OptplanError(
            "--peers times discounted rows at a discount in (0, 1) (pymdptoolbox and mdpsolver "
            "refuse 0), got gamma 0"
        )
    if peers:
        dense_peers.require_dense()  # before any timing
    rows = []
    for criterion in criteria:
        cls, model = problems[criterion]
        names = PEERS.get(criterion, ()) if peers else ()
        _warm_up(cls, model, names, sizes, n_actions, seed, solvers)
        for S in sizes:
            rng = np.random.default_rng([seed, S])
            row = {"criterion": criterion, "S": S, "A": n_actions, "instances": repeats}
            instances = (cls(model(random_mdp(rng, S, n_actions))) for _ in range(repeats))
            _size_row(row, instances, solvers, names)
            rows.append(row)
            if progress:
                ratios = [f"best conic ratio {row['best_ratio']:.0f}x"] if solvers else []
                ratios += [f"{n} ratio {row[f'peer_{n}_ratio']:.2f}" for n in names]
                progress(f"{criterion} S={S}: fast {row['fast_s']:.2e}s, " + ", ".join(ratios))
    return rows


def _checked(criteria, models, grid, tol, gamma) -> tuple:
    """:func:`bench_planning`'s ``criteria``, ``models`` and ``grid`` (as a tuple of sides)
    checked, and ``tol`` and ``gamma``."""
    criteria = check_choices("criteria", criteria, tuple(PLANNING_PROBLEMS))
    models = check_choices("models", models, ("random",) + SIZED_MODELS + NAMED_MODELS)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
        raise OptplanError(f"tol must be in (0, 1), got {tol!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < 1:
        raise OptplanError(f"gamma must be a discount in [0, 1), got {gamma!r}")
    return criteria, models, _check_grids(grid)


def _check_grids(grid) -> tuple[int, ...]:
    """``grid`` (a side or a sequence of sides) as a tuple of integers >= 2."""
    sides = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
    for side in sides:
        if isinstance(side, bool) or not isinstance(side, (int, np.integer)) or side < 2:
            raise OptplanError(f"grid must be an integer >= 2, got {side!r}")
    if not sides:
        raise OptplanError("grid must name at least one side")
    return sides


def _warm_up(cls, model, names, sizes, n_actions: int, seed: int, solvers=()) -> None:
    """Untimed, before the first row: the first calls import and compile (SciPy's LAPACK,
    pymdptoolbox's modules, numba's kernels of the paths the sizes take: the dense iterative
    evaluation from ``DENSE_ITERATIVE_MIN_STATES`` states, the average one from
    ``ITERATIVE_MIN_STATES``; CVXPY and each conic solver), which would otherwise be timed
    in the first row they reach (a ratio of thousands with ``--repeats 1``)."""
    paths = {8} | {n for n in (DENSE_ITERATIVE_MIN_STATES, ITERATIVE_MIN_STATES)
                   if n <= max(sizes)}  # fmt: skip
    for n in sorted(paths):
        warm = cls(model(random_mdp(np.random.default_rng(seed), n, n_actions)))
        fast = warm.solve(method="fast")
        for name in names:
            run_peer(name, warm.mdp, fast)
    small = cls(model(random_mdp(np.random.default_rng(seed), 4, n_actions)))
    for solver in solvers:
        small.solve(method="conic", solver=solver)


def _size_row(row: dict, instances: Iterable, solvers: Sequence[str], names: Sequence[str]) -> None:
    """Fill the row of one size: each of the ``instances`` solved by the fast path, each peer
    of ``names`` and each conic solver."""
    times = {"fast": []} | {s: [] for s in solvers} | {f"peer_{n}": [] for n in names}
    fails = dict.fromkeys(solvers, 0)
    errs = dict.fromkeys(solvers, 0.0) | dict.fromkeys(names, 0.0)
    skips: dict[str, str] = {}
    for problem in instances:
        # with peers, each contender runs PEER_RUNS times in a row on the instance, its median
        # run kept: steady state, as in a planning loop (a run right after the other
        # contender's finds its data out of cache)
        rounds: dict[str, list[float]] = {"fast": []}
        for _ in range(PEER_RUNS if names else 1):
            fast, t = timed(lambda p=problem: p.solve(method="fast"))
            rounds["fast"].append(t)
        for name in names:
            if name in skips:
                continue
            built = dense_peers.peer_input(name, problem.mdp)  # untimed: the peer's own input
            if name == dense_peers.MDPSOLVER:  # untimed: its values checked before it is timed
                _, err = run_peer(name, problem.mdp, fast, built)
                scale = max(1.0, float(np.abs(np.asarray(fast.values)).max()))
                if err > PEER_AGREE * scale:
                    skips[name] = f"{name} not timed: its values differ from optplan's by {err:.2e}"
                    continue
            for _ in range(PEER_RUNS):
                t, err = run_peer(name, problem.mdp, fast, built)
                rounds.setdefault(name, []).append(t)
                errs[name] = max(errs[name], err)
            del built
        times["fast"].append(float(np.median(rounds["fast"])))
        for name in names:
            if name not in skips:
                times[f"peer_{name}"].append(float(np.median(rounds[name])))
        time_conic(problem, solvers, fast, times, errs, fails)
    row["fast_s"] = float(np.median(times["fast"]))
    for solver in solvers:
        solver_entries(row, solver, median(times[solver]), fail=fails[solver], err=errs[solver])
    row["best_ratio"] = min((row[f"{s}_ratio"] for s in solvers), default=None)
    for name in names:
        if name in skips:
            row[f"peer_{name}_skip"] = skips[name]
        else:
            solver_entries(row, f"peer_{name}", median(times[f"peer_{name}"]), err=errs[name])


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (criterion, model, S): the fast median (with ``--sparse`` the model, the
    stored transition probabilities and the peak memory), then per solver its median, the
    ratio to the fast median, failures and the max value difference; then per pymdptoolbox
    peer (when timed, ``-`` on rows without that peer, ``skipped`` where it was skipped, the
    reasons listed under the table) its median, ratio and max disagreement."""
    width = max([11] + [len(r["criterion"]) + 1 for r in rows])
    peers = [n for n in ("RVI",) + SPARSE_PEERS if any(f"peer_{n}_s" in r for r in rows)]
    peers += [
        n
        for n in (dense_peers.MDPSOLVER,)
        if n not in peers and any(f"peer_{n}_s" in r or f"peer_{n}_skip" in r for r in rows)
    ]
    peers += [
        n for n in SPARSE_PEERS if n not in peers and any(f"peer_{n}_skip" in r for r in rows)
    ]
    extra = any("peak_rss_gib" in r for r in rows)  # the --sparse columns
    lines = table_lines(
        f"{'criterion':<{width}}"
        + (f"{'model':>11}" if extra else "")
        + f"{'S':>9}{'fast s':>10}"
        + (f"{'nnz':>12}{'peak GiB':>10}" if extra else ""),
        solvers,
        lambda s: f"{s + ' s':>12}{'ratio':>8}{'fail':>5}{'max err':>10}",
        "".join(f"{_peer_label(n) + ' s':>17}{'ratio':>8}{'agree':>10}" for n in peers),
    )
    notes = []
    for r in rows:
        line = f"{r['criterion']:<{width}}"
        if extra:
            line += f"{r.get('model', 'random'):>11}"
        line += f"{r['S']:>9}{r['fast_s']:>10.2e}"
        if extra:
            line += f"{r['nnz']:>12}{r['peak_rss_gib']:>10.2f}"
        for s in solvers:
            line += (
                f"{r[f'{s}_s']:>12.2e}{r[f'{s}_ratio']:>7.0f}x{r[f'{s}_fail']:>5}"
                f"{r[f'{s}_err']:>10.1e}"
            )
        for n in peers:
            if f"peer_{n}_s" in r:
                line += (
                    f"{r[f'peer_{n}_s']:>17.2e}{r[f'peer_{n}_ratio']:>7.2f}x"
                    f"{r[f'peer_{n}_err']:>10.1e}"
                )
            elif f"peer_{n}_skip" in r:
                line += f"{'skipped':>17}{'-':>8}{'-':>10}"
                notes.append(f"{r.get('model', '')} S={r['S']}: {r[f'peer_{n}_skip']}")
            else:
                line += f"{'-':>17}{'-':>8}{'-':>10}"
        lines.append(line)
    return "\n".join(lines + notes)


def _peer_label(name: str) -> str:
    """A peer's column title (:data:`.peers_planning.PEER_LABELS`): mdpsolver by its name,
    pymdptoolbox's classes as ``pymdp PI``, mdptoolbox-hiive's as ``hiive PI``."""
    return PEER_LABELS.get(name, f"pymdp {name}")


#: The text table of the rows for the command line.
table = solvers_table(format_table)


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_planning` reports: one per criterion, family
    sized by ``--sizes`` and size, and one per named model (per side of ``--grid``)."""
    models = getattr(args, "models", ("random",))
    sized = sum(m in ("random",) + SIZED_MODELS for m in models)
    named = sum(len(_check_grids(args.grid)) if m == "grid" else 1
                for m in models if m in NAMED_MODELS)  # fmt: skip
    return len(args.criteria) * len(args.sizes) * sized + named


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    horizon = (
        f", finite horizon {PLANNING_HORIZON} layers of the same MDP"
        if "finite_horizon" in args.criteria
        else ""
    )
    kind = f"random dense MDPs, A={args.n_actions}"
    if getattr(args, "sparse", False):
        kind = "; ".join(_family_text(m, args) for m in getattr(args, "models", ("random",)))
    kind += f", discount {getattr(args, 'gamma', GAMMA)}"
    text = (
        f"planning benchmark: {kind}{horizon}, {args.repeats} "
        "instances per size, median wall seconds; ratio = conic median / fast median (same run)"
    )
    if getattr(args, "peers", False) and getattr(args, "sparse", False):
        text += (
            "\npeers: pymdptoolbox and mdptoolbox-hiive PolicyIteration and ValueIteration "
            f"(epsilon={VI_EPSILON:g}) given A scipy.sparse S x S matrices, run() timed; "
            "mdpsolver modified policy iteration (its default; one thread; tolerance "
            "1e-10 x max(1, max|r|) / (1 - gamma)), model.solve timed on a fresh model; "
            "QuantEcon DiscreteDP (state-action pairs, Q CSR) modified policy iteration (k=20, "
            f"epsilon = tol x max(1, max|V|), tol {getattr(args, 'tol', TOL):g}) and "
            "policy iteration, solve timed; each "
            f"peer's first run checked against optplan's values (to {PEER_AGREE:g} x max(1, "
            f"max|V|)) before its times count; median of {SPARSE_PEER_RUNS} runs per contender "
            f"below {PEER_ONE_RUN_STATES} states, one run from there; ratio = peer median / "
            "fast median (>= 1: optplan faster); agree = max |V difference|"
        )
    elif getattr(args, "peers", False):
        text += (
            "\npeers: pymdptoolbox RelativeValueIteration (epsilon="
            f"{RVI_EPSILON:g}) on average rows, PolicyIteration on discounted rows, run() "
            "timed; mdpsolver (modified policy iteration, one thread, tolerance "
            f"{RELATIVE_TOLERANCE:g} x max(1, max|r|) / (1 - gamma)) on discounted rows, its "
            f"values checked against optplan's (to {PEER_AGREE:g} x max(1, max|V|)) in an "
            "untimed run first, solve() timed; on the same instances, "
            f"{PEER_RUNS} runs in a row per contender and "
            "instance (each one's median run: steady state); ratio = peer median / fast "
            "median (>= 1: optplan faster); agree = max |gain or V difference|"
        )
    return text


def _family_text(name: str, args: argparse.Namespace) -> str:
    """The header's words for the model family ``name`` of ``--models``."""
    if name == "random":
        return f"random sparse MDPs (A={args.n_actions}, {SPARSE_SUCCESSORS} successors per pair)"
    if name == "grid":
        sides = ", ".join(f"{n}x{n}" for n in _check_grids(args.grid))
        return f"slippery gridworlds {sides} (A=4, slip {GRID_SLIP})"
    if name == "queue":
        return "controlled birth-death queues (A=3)"
    if name == "chain":
        return "RiverSwim chains (A=2)"
    return {"taxi": "Taxi-v4", "frozenlake": "FrozenLake-v1 8x8 slippery"}[name]


def meta(args: argparse.Namespace) -> dict:
    """The ``--json`` settings: the peers and their stopping tolerance, when timed."""
    if not getattr(args, "peers", False):
        return {}
    return {
        "peers": {
            "package": "pymdptoolbox",
            "by_criterion": {c: list(n) for c, n in PEERS.items()},
            "RVI_epsilon": RVI_EPSILON,
            "mdpsolver": {
                "algorithm": MDPSOLVER_ALGORITHM,
                "parallel": MDPSOLVER_PARALLEL,
                "relative_tolerance": RELATIVE_TOLERANCE,
            },
            "timed": "run() only",
            "runs_in_a_row": PEER_RUNS,
        }
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_planning` or a
    field of its :class:`Runs`."""
    add_sizes(parser, list(RUNS.sizes), "numbers of states")
    add_actions(parser, RUNS.n_actions)
    add_count(parser, "--repeats", RUNS.repeats, "random MDPs per size (medians)")
    add_solvers(parser, "*", "conic solvers to time (none: --solvers with no name)")
    parser.add_argument(
        "--sparse",
        action="store_true",
        help=f"random sparse models ({SPARSE_SUCCESSORS} successors per pair, P held CSR; "
        "discounted and average only); rows add nnz and peak RSS",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also time pymdptoolbox (RVI, PI) and, on dense discounted rows, mdpsolver; with "
        "--sparse: pymdptoolbox and mdptoolbox-hiive PI, VI and mdpsolver on the discounted "
        'rows; on the same instances ("optplan[bench]")',
    )
    add_choices(
        parser,
        "--models",
        ("random",) + SIZED_MODELS + NAMED_MODELS,
        "with --sparse: model families at --sizes states (random; queue: a controlled "
        "birth-death queue; chain: RiverSwim) and/or named ones (taxi: Taxi-v4; frozenlake: "
        "FrozenLake-v1 8x8 slippery; grid: the --grid N x N slippery gridworlds)",
        ("random",),
    )
    parser.add_argument(
        "--grid",
        type=int,
        nargs="+",
        default=[GRID_SIZE],
        metavar="N",
        help=f"sides of the gridworlds of --models grid (default {GRID_SIZE}: 10^6 states)",
    )
    add_choices(
        parser,
        "--sparse-peers",
        SPARSE_PEERS,
        "with --sparse --peers: the peers to time",
    )
    parser.add_argument(
        "--tol",
        type=float,
        default=TOL,
        help="relative accuracy asked of the fast path on --sparse rows and of QuantEcon "
        f"(default {TOL:g})",
    )
    parser.add_argument(
        "--gamma",
        type=float,
        default=GAMMA,
        help=f"discount of the discounted rows (default {GAMMA})",
    )
    add_choices(
        parser,
        "--criteria",
        tuple(PLANNING_PROBLEMS),
        "planning criteria to time",
        DEFAULT_CRITERIA,
    )
