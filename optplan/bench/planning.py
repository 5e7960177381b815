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
from ..mdp import FiniteHorizonMDP, TabularMDP, check_model_size
from ..problems import (
    AverageRewardPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    HittingTimes,
    RegretLowerBound,
)
from ..result import SOLUTION_PRESENT
from ._common import Runs, check_choices, timed
from ._options import add_actions, add_choices, add_count, add_sizes, add_solvers
from ._rows import median, solver_entries, solvers_table, table_lines
from .cases import random_mdp
from .peers_planning import PEERS, RVI_EPSILON, require, run_peer

__all__ = [
    "RUNS",
    "PLANNING_PROBLEMS",
    "PLANNING_HORIZON",
    "STEMS",
    "HELP",
    "bench_planning",
    "random_sparse_mdp",
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
#: Successors per state-action pair of :func:`random_sparse_mdp`.
SPARSE_SUCCESSORS = 10
#: The criteria ``--sparse`` times (the others' paths are dense).
SPARSE_CRITERIA = ("discounted", "average")


def random_sparse_mdp(
    rng: np.random.Generator, n_states: int, n_actions: int, successors: int = SPARSE_SUCCESSORS
) -> TabularMDP:
    """A random sparse ``TabularMDP``: each pair moves to ``successors`` states drawn
    uniformly (with replacement: a repeated state's probabilities add up) with Dirichlet(1)
    probabilities; rewards uniform on [0, 1); ``P`` built as CSR directly (memory ``O(S A
    successors)``, never ``S^2``)."""
    import scipy.sparse as sp

    S, A, K = n_states, n_actions, min(successors, n_states)
    index = np.int32 if S < 2**31 else np.int64
    indices = rng.integers(0, S, size=S * A * K, dtype=index)
    data = rng.random(S * A * K).reshape(-1, K)
    data = (-np.log1p(-data)) / (-np.log1p(-data)).sum(axis=1, keepdims=True)  # Dirichlet(1)
    pointer = np.arange(0, S * A * K + 1, K, dtype=np.int64 if S * A * K >= 2**31 else np.int32)
    P = sp.csr_matrix((data.ravel(), indices, pointer), shape=(S * A, S))
    return TabularMDP(P, rng.random((S, A)))


def bench_planning(
    runs: Runs = RUNS,
    criteria: Sequence[str] = DEFAULT_CRITERIA,
    peers: bool = False,
    progress: Callable[[str], None] | None = None,
    sparse: bool = False,
) -> list[dict]:
    """Median wall time of the fast path and of each conic solver on random dense MDPs:
    ``runs.repeats`` MDPs with ``runs.n_actions`` actions at each of ``runs.sizes`` states.

    Returns one row per (criterion, S) with ``fast_s``, ``<SOLVER>_s``, ``<SOLVER>_ratio``
    (conic time / fast time), ``<SOLVER>_fail`` (instances without a solution, counted, not
    dropped), ``<SOLVER>_err`` (max |value_fast - value_conic| over solved instances) and
    ``best_ratio`` (fastest conic solver's median / fast median; ``None`` without solvers).

    ``peers``: also pymdptoolbox on the same instances (:mod:`.peers_planning`: relative
    value iteration for ``average``, policy iteration for ``discounted``), each instance in
    :data:`PEER_RUNS` runs in a row per contender (the fast path, then each peer; per
    contender the median run: steady state, the model in cache), giving
    ``peer_<NAME>_s``, ``peer_<NAME>_ratio`` (peer median / fast median: >= 1 means optplan
    is faster) and ``peer_<NAME>_err`` (max disagreement of gain or values).

    ``sparse``: the instances are :func:`random_sparse_mdp` models (criteria of
    :data:`SPARSE_CRITERIA` only, no peers), and each row adds ``nnz`` (stored transition
    probabilities per instance) and ``peak_rss_gib`` (the process's peak resident memory
    once the size is done: it only grows, so it is the largest size's so far).

    Every argument is checked before any timing (sizes and counts positive integers, a model
    within :data:`optplan.mdp.MAX_MODEL_BYTES`, dense).
    """
    sizes, n_actions, repeats, solvers, seed = astuple(runs.checked())
    criteria = check_choices("criteria", criteria, tuple(PLANNING_PROBLEMS))
    layers = PLANNING_HORIZON if "finite_horizon" in criteria else 1
    if sparse:
        other = [c for c in criteria if c not in SPARSE_CRITERIA]
        if other:
            raise OptplanError(
                f"--sparse times the criteria {SPARSE_CRITERIA}, got {tuple(other)} (dense paths)"
            )
        if peers:
            raise OptplanError("--sparse and --peers together are not available: run them apart")
        return _bench_sparse(sizes, n_actions, repeats, solvers, seed, criteria, progress)
    check_model_size(max(sizes), n_actions, layers)
    if peers:
        require()  # before any timing
    rows = []
    for criterion in criteria:
        cls, model = PLANNING_PROBLEMS[criterion]
        names = PEERS.get(criterion, ()) if peers else ()
        _warm_up(cls, model, names, max(sizes), n_actions, seed)
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


def _bench_sparse(sizes, n_actions, repeats, solvers, seed, criteria, progress) -> list[dict]:
    """:func:`bench_planning` on random sparse models (see its ``sparse``)."""
    import resource

    rows = []
    for criterion in criteria:
        cls, model = PLANNING_PROBLEMS[criterion]
        warm = cls(model(random_sparse_mdp(np.random.default_rng(seed), 8, n_actions)))
        warm.solve(method="fast")  # untimed: imports
        for S in sizes:
            rng = np.random.default_rng([seed, S])
            row = {"criterion": criterion, "S": S, "A": n_actions, "instances": repeats}
            nnz = []

            def instances(rng=rng, cls=cls, model=model, nnz=nnz, S=S):
                for _ in range(repeats):
                    problem = cls(model(random_sparse_mdp(rng, S, n_actions)))
                    nnz.append(problem.mdp.nnz)
                    yield problem

            _size_row(row, instances(), solvers, ())
            row["nnz"] = int(np.median(nnz))
            row["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            rows.append(row)
            if progress:
                ratios = [f", best conic ratio {row['best_ratio']:.0f}x"] if solvers else []
                progress(
                    f"{criterion} S={S} (sparse): fast {row['fast_s']:.2e}s, peak RSS "
                    f"{row['peak_rss_gib']:.2f} GiB" + "".join(ratios)
                )
    return rows


def _warm_up(cls, model, names, largest: int, n_actions: int, seed: int) -> None:
    """Untimed: the first calls import (SciPy's LAPACK, pymdptoolbox's modules, numba's cached
    kernel of the iterative evaluation from ITERATIVE_MIN_STATES states on)."""
    for n in (8, ITERATIVE_MIN_STATES) if largest >= ITERATIVE_MIN_STATES else (8,):
        warm = cls(model(random_mdp(np.random.default_rng(seed), n, n_actions)))
        fast = warm.solve(method="fast")
        for name in names:
            run_peer(name, warm.mdp, fast)


def _size_row(row: dict, instances: Iterable, solvers: Sequence[str], names: Sequence[str]) -> None:
    """Fill the row of one size: each of the ``instances`` solved by the fast path, each peer
    of ``names`` and each conic solver."""
    times = {"fast": []} | {s: [] for s in solvers} | {f"peer_{n}": [] for n in names}
    fails = dict.fromkeys(solvers, 0)
    errs = dict.fromkeys(solvers, 0.0) | dict.fromkeys(names, 0.0)
    for problem in instances:
        # with peers, each contender runs PEER_RUNS times in a row on the instance, its median
        # run kept: steady state, as in a planning loop (a run right after the other
        # contender's finds its data out of cache)
        rounds: dict[str, list[float]] = {"fast": []}
        for _ in range(PEER_RUNS if names else 1):
            fast, t = timed(lambda p=problem: p.solve(method="fast"))
            rounds["fast"].append(t)
        for name in names:
            for _ in range(PEER_RUNS):
                t, err = run_peer(name, problem.mdp, fast)
                rounds.setdefault(name, []).append(t)
                errs[name] = max(errs[name], err)
        times["fast"].append(float(np.median(rounds["fast"])))
        for name in names:
            times[f"peer_{name}"].append(float(np.median(rounds[name])))
        for solver in solvers:
            res, t = timed(lambda p=problem, s=solver: p.solve(method="conic", solver=s))
            times[solver].append(t)
            if res.status in SOLUTION_PRESENT:
                errs[solver] = max(errs[solver], abs(res.value - fast.value))
            else:
                fails[solver] += 1
    row["fast_s"] = float(np.median(times["fast"]))
    for solver in solvers:
        solver_entries(row, solver, median(times[solver]), fail=fails[solver], err=errs[solver])
    row["best_ratio"] = min((row[f"{s}_ratio"] for s in solvers), default=None)
    for name in names:
        solver_entries(row, f"peer_{name}", median(times[f"peer_{name}"]), err=errs[name])


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per (criterion, S): the fast median (with ``--sparse`` the stored transition
    probabilities and the peak memory), then per solver its median, the ratio to
    the fast median, failures and the max value difference; then per pymdptoolbox peer (when
    timed, ``-`` on rows without that peer) its median, ratio and max disagreement."""
    width = max([11] + [len(r["criterion"]) + 1 for r in rows])
    peers = [n for n in ("RVI", "PI") if any(f"peer_{n}_s" in r for r in rows)]
    extra = any("peak_rss_gib" in r for r in rows)  # the --sparse columns
    lines = table_lines(
        f"{'criterion':<{width}}{'S':>8}{'fast s':>10}"
        + (f"{'nnz':>12}{'peak GiB':>10}" if extra else ""),
        solvers,
        lambda s: f"{s + ' s':>12}{'ratio':>8}{'fail':>5}{'max err':>10}",
        "".join(f"{'pymdp ' + n + ' s':>15}{'ratio':>8}{'agree':>10}" for n in peers),
    )
    for r in rows:
        line = f"{r['criterion']:<{width}}{r['S']:>8}{r['fast_s']:>10.2e}"
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
                    f"{r[f'peer_{n}_s']:>15.2e}{r[f'peer_{n}_ratio']:>7.2f}x"
                    f"{r[f'peer_{n}_err']:>10.1e}"
                )
            else:
                line += f"{'-':>15}{'-':>8}{'-':>10}"
        lines.append(line)
    return "\n".join(lines)


#: The text table of the rows for the command line.
table = solvers_table(format_table)


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_planning` reports: one per criterion and size."""
    return len(args.criteria) * len(args.sizes)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    horizon = (
        f", finite horizon {PLANNING_HORIZON} layers of the same MDP"
        if "finite_horizon" in args.criteria
        else ""
    )
    kind = (
        f"random sparse MDPs ({SPARSE_SUCCESSORS} successors per pair, P held CSR)"
        if getattr(args, "sparse", False)
        else "random dense MDPs"
    )
    text = (
        f"planning benchmark: {kind}, A={args.n_actions}{horizon}, {args.repeats} "
        "instances per size, median wall seconds; ratio = conic median / fast median (same run)"
    )
    if getattr(args, "peers", False):
        text += (
            "\npeers: pymdptoolbox RelativeValueIteration (epsilon="
            f"{RVI_EPSILON:g}) on average rows, PolicyIteration on discounted rows, run() "
            f"timed on the same instances, {PEER_RUNS} runs in a row per contender and "
            "instance (each one's median run: steady state); ratio = peer median / fast "
            "median (>= 1: optplan faster); agree = max |gain or V difference|"
        )
    return text


def meta(args: argparse.Namespace) -> dict:
    """The ``--json`` settings: the peers and their stopping tolerance, when timed."""
    if not getattr(args, "peers", False):
        return {}
    return {
        "peers": {
            "package": "pymdptoolbox",
            "by_criterion": {c: list(n) for c, n in PEERS.items()},
            "RVI_epsilon": RVI_EPSILON,
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
        help='also time pymdptoolbox (RVI, PI) on the same instances ("optplan[bench]")',
    )
    add_choices(
        parser,
        "--criteria",
        tuple(PLANNING_PROBLEMS),
        "planning criteria to time",
        DEFAULT_CRITERIA,
    )
