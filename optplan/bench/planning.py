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
from ..mdp import FiniteHorizonMDP, TabularMDP, check_model_size
from ..problems import (
    AverageRewardPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    HittingTimes,
    RegretLowerBound,
)
from ..result import SOLUTION_PRESENT
from . import peers_planning as dense_peers  # mdpsolver on the dense rows
from ._common import Runs, check_choices, timed
from ._options import add_actions, add_choices, add_count, add_sizes, add_solvers
from ._rows import median, solver_entries, solvers_table, table_lines
from .cases import random_mdp
from .mdpsolver_peer import ALGORITHM as MDPSOLVER_ALGORITHM
from .mdpsolver_peer import PARALLEL as MDPSOLVER_PARALLEL
from .mdpsolver_peer import RELATIVE_TOLERANCE
from .peers_planning import (
    PEER_LABELS,
    PEERS,
    RVI_EPSILON,
    SPARSE_PEERS,
    VI_EPSILON,
    require,
    run_peer,
    run_sparse_peer,
    sparse_peer_skip,
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
#: Successors per state-action pair of :func:`random_sparse_mdp`.
SPARSE_SUCCESSORS = 10
#: The criteria ``--sparse`` times (the others' paths are dense).
SPARSE_CRITERIA = ("discounted", "average")
#: ``--models`` of ``--sparse``: random sparse models at ``--sizes``, and named instances
#: (discounted rows only): Gymnasium's Taxi-v4 and slippery FrozenLake-v1 8x8 (episodic
#: view, ``P`` held CSR), and the ``--grid`` N x N :func:`gridworld_mdp`.
NAMED_MODELS = ("taxi", "frozenlake", "grid")
#: ``--grid``: side of the gridworld (10^6 states).
GRID_SIZE = 1000
#: The gridworld's slip probability: the move is drawn uniformly among the 4 directions.
GRID_SLIP = 0.1
#: A peer's values must agree with optplan's to this (times max(1, max |V|)) to be timed.
PEER_AGREE = 1e-8
#: From this many states each contender of a ``--sparse --peers`` row runs once (its first,
#: checked run is its time), below it :data:`SPARSE_PEER_RUNS` times (the median: a run of
#: a millisecond is hit by the odd pause of a shared machine, 5-10 ms on Taxi).
PEER_ONE_RUN_STATES = 100_000
SPARSE_PEER_RUNS = 5
#: The discount of the discounted rows unless ``--gamma`` says otherwise.
GAMMA = 0.95


def gridworld_mdp(n: int, slip: float = GRID_SLIP, discount: float | None = None) -> TabularMDP:
    """An ``n x n`` gridworld, ``P`` held CSR (``4 n^2`` rows, at most 4 entries each): state
    ``row * n + col``, actions up, right, down, left; the chosen move with probability
    ``1 - slip``, otherwise a direction drawn uniformly among the 4 (a move off the grid
    stays); reward -1 per step until the one goal, the corner ``n^2 - 1``, absorbing with
    reward 0. Built without a Python loop over states."""
    import scipy.sparse as sp

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise OptplanError(f"grid must be an integer >= 2, got {n!r}")
    if not 0.0 <= slip <= 1.0:
        raise OptplanError(f"slip must be in [0, 1], got {slip!r}")
    S, A = n * n, 4
    state = np.arange(S, dtype=np.int64)
    r, c = np.divmod(state, n)
    moves = (
        np.where(r > 0, state - n, state),  # up
        np.where(c < n - 1, state + 1, state),  # right
        np.where(r < n - 1, state + n, state),  # down
        np.where(c > 0, state - 1, state),  # left
    )
    goal = S - 1
    rows, cols, vals = [], [], []
    for a in range(A):  # over the 4 actions and 4 directions, vectorized over states
        for d in range(A):
            p = slip / A + (1.0 - slip) * (d == a)
            if p > 0:
                rows.append(state * A + a)
                cols.append(moves[d])
                vals.append(np.full(S, p))
    rows, cols, vals = (np.concatenate(x) for x in (rows, cols, vals))
    keep = rows // A != goal
    rows = np.concatenate([rows[keep], goal * A + np.arange(A)])
    cols = np.concatenate([cols[keep], np.full(A, goal)])
    vals = np.concatenate([vals[keep], np.ones(A)])
    P = sp.coo_matrix((vals, (rows, cols)), shape=(S * A, S)).tocsr()
    R = np.full((S, A), -1.0)
    R[goal] = 0.0
    return TabularMDP(P, R, discount, name=f"gridworld {n}x{n}")


def named_mdp(name: str, gamma: float, grid: int = GRID_SIZE) -> TabularMDP:
    """The named instance ``name`` of :data:`NAMED_MODELS` at discount ``gamma``, ``P`` CSR."""
    from ..bridges import from_gymnasium

    if name == "taxi":
        return from_gymnasium("Taxi-v4", discount=gamma, sparse=True)
    if name == "frozenlake":
        return from_gymnasium(
            "FrozenLake-v1", discount=gamma, sparse=True, map_name="8x8", is_slippery=True
        )
    if name == "grid":
        return gridworld_mdp(grid, discount=gamma)
    raise OptplanError(f"model must be one of {('random',) + NAMED_MODELS}, got {name!r}")


def _check_sparse_sizes(sizes, n_actions: int, grid: int | None) -> None:
    """Refuse, before any model is built, a random sparse size or a grid whose CSR ``P`` (a
    value and an index per entry, a pointer per row) would not fit in the machine's memory,
    naming the option and the bytes."""
    from .._model_checks import check_bytes, memory_bytes

    budget = memory_bytes()
    if budget is None:
        return
    for S in sizes:
        rows, nnz = S * n_actions, S * n_actions * SPARSE_SUCCESSORS
        check_bytes(16 * nnz + 8 * rows, f"--sizes {S} (random sparse, {n_actions} actions, "
                    f"{SPARSE_SUCCESSORS} successors)", "a CSR P", budget)  # fmt: skip
    if grid is not None:
        S = grid * grid
        check_bytes(16 * 5 * 4 * S + 8 * 4 * S, f"--grid {grid} ({S:,} states, 4 moves)",
                    "a CSR P", budget)  # fmt: skip


def random_sparse_mdp(
    rng: np.random.Generator, n_states: int, n_actions: int, successors: int = SPARSE_SUCCESSORS
) -> TabularMDP:
    """A random sparse ``TabularMDP``: each pair moves to ``successors`` states drawn
    uniformly (with replacement: a repeated state's probabilities add up) with Dirichlet(1)
    probabilities; rewards uniform on [0, 1); ``P`` built as CSR directly (memory ``O(S A
    successors)``, never ``S^2``, and no temporary of the size of ``P``'s data)."""
    import scipy.sparse as sp

    S, A, K = n_states, n_actions, min(successors, n_states)
    index = np.int32 if S < 2**31 else np.int64
    indices = rng.integers(0, S, size=S * A * K, dtype=index)
    data = np.empty(S * A * K)
    step = K * 2**20  # filled in blocks: no temporary of the full size (S = 10^7: 3.2 GB)
    for start in range(0, data.size, step):
        block = data[start : start + step]
        block[:] = rng.random(block.size)  # the same stream as one call
        np.negative(block, out=block)
        np.log1p(block, out=block)
        np.negative(block, out=block)  # Exp(1)
        rows = block.reshape(-1, K)
        rows /= rows.sum(axis=1, keepdims=True)  # Dirichlet(1)
    pointer = np.arange(0, S * A * K + 1, K, dtype=np.int64 if S * A * K >= 2**31 else np.int32)
    P = sp.csr_matrix((data, indices, pointer), shape=(S * A, S), copy=False)
    return TabularMDP(P, rng.random((S, A)))


def bench_planning(
    runs: Runs = RUNS,
    criteria: Sequence[str] = DEFAULT_CRITERIA,
    peers: bool = False,
    progress: Callable[[str], None] | None = None,
    sparse: bool = False,
    models: Sequence[str] = ("random",),
    grid: int = GRID_SIZE,
    gamma: float = GAMMA,
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

    ``sparse``: the instances are :func:`random_sparse_mdp` models (criteria of
    :data:`SPARSE_CRITERIA` only) when ``models`` holds ``"random"``, then one discounted
    row per named instance of ``models`` (:data:`NAMED_MODELS`; ``grid``: the side of
    :func:`gridworld_mdp`); each row adds ``model``, ``nnz`` (stored transition
    probabilities per instance) and ``peak_rss_gib`` (the process's peak resident memory
    once the row is done: it only grows, so it is the largest model's so far). With
    ``peers``, the discounted rows (random and named) also time the peers of
    :data:`.peers_planning.SPARSE_PEERS` (pymdptoolbox's and mdptoolbox-hiive's
    ``PolicyIteration`` and ``ValueIteration`` given ``A`` scipy.sparse matrices, mdpsolver's
    modified policy iteration: :func:`.peers_planning.run_sparse_peer`): each peer's first
    run is checked against optplan's values (to :data:`PEER_AGREE` times ``max(1, max
    |V|)``) before any of its times counts (:func:`_sparse_peers`); ``peer_<NAME>_skip``
    says why a peer was not timed.

    ``gamma``: the discount of the discounted rows.

    Every argument is checked before any timing (sizes and counts positive integers, a model
    within :data:`optplan.mdp.MAX_MODEL_BYTES`, dense).
    """
    sizes, n_actions, repeats, solvers, seed = astuple(runs.checked())
    criteria = check_choices("criteria", criteria, tuple(PLANNING_PROBLEMS))
    models = check_choices("models", models, ("random",) + NAMED_MODELS)
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < 1:
        raise OptplanError(f"gamma must be a discount in [0, 1), got {gamma!r}")
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 2:
        raise OptplanError(f"grid must be an integer >= 2, got {grid!r}")
    layers = PLANNING_HORIZON if "finite_horizon" in criteria else 1
    problems = dict(PLANNING_PROBLEMS)
    problems["discounted"] = (DiscountedPlanning, lambda mdp: mdp.with_discount(gamma))
    if sparse:
        instances = (sizes, n_actions, repeats, seed, models, grid, gamma)
        return _sparse_rows(instances, criteria, solvers, problems, peers, progress)
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


def _peak_rss_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _named_row(name, gamma, grid, peers, solvers, progress) -> dict:
    """The discounted row of the named instance ``name`` (see :func:`bench_planning`)."""
    mdp = named_mdp(name, gamma, grid)
    problem = DiscountedPlanning(mdp)
    S = mdp.n_states
    row = {"criterion": "discounted", "model": name, "S": S, "A": mdp.n_actions}
    row |= {"instances": 1, "nnz": mdp.nnz}
    DiscountedPlanning(named_mdp(name, gamma, 2) if name == "grid" else mdp).solve(
        method="fast"
    )  # untimed: imports and compiled kernels
    runs = SPARSE_PEER_RUNS if peers and S < PEER_ONE_RUN_STATES else 1
    fast = None
    times = []
    for _ in range(runs):
        fast, t = timed(lambda: problem.solve(method="fast"))
        times.append(t)
    row["fast_s"] = float(np.median(times))
    for solver in solvers:
        res, t = timed(lambda s=solver: problem.solve(method="conic", solver=s))
        ok = res.status in SOLUTION_PRESENT
        err = abs(res.value - fast.value) if ok else 0.0
        solver_entries(row, solver, t, fail=int(not ok), err=err)
    row["best_ratio"] = min((row[f"{s}_ratio"] for s in solvers), default=None)
    if peers:
        _sparse_peers(row, [(mdp, fast)])
    row["peak_rss_gib"] = _peak_rss_gib()
    if progress:
        progress(f"discounted {name} S={S} (sparse): " + _progress_text(row))
    return row


def _progress_text(row: dict) -> str:
    return f"fast {row['fast_s']:.2e}s, peak RSS {row['peak_rss_gib']:.2f} GiB" + "".join(
        f", {PEER_LABELS[p]} ratio {row[f'peer_{p}_ratio']:.2f}"
        for p in SPARSE_PEERS
        if f"peer_{p}_ratio" in row
    )


def _sparse_peers(row: dict, solved: list) -> None:
    """Time each peer of :data:`SPARSE_PEERS` on the ``(mdp, fast result)`` pairs of
    ``solved`` (one row's instances) into ``row``: per instance its runs
    (:data:`SPARSE_PEER_RUNS`, one from :data:`PEER_ONE_RUN_STATES` states), the first
    checked against optplan's values (to :data:`PEER_AGREE` times ``max(1, max |V|)``)
    before any of its times counts; the median over instances of each instance's median
    run. A peer skipped (:func:`.peers_planning.sparse_peer_skip`) or disagreeing gets
    ``peer_<NAME>_skip``."""
    S = solved[0][0].n_states
    runs = SPARSE_PEER_RUNS if S < PEER_ONE_RUN_STATES else 1
    for peer in SPARSE_PEERS:
        skip = sparse_peer_skip(peer, S, row.get("model", "random"))
        medians, worst = [], 0.0
        for mdp, fast in solved if skip is None else ():
            cache: dict = {}
            scale = max(1.0, float(np.abs(np.asarray(fast.values)).max()))
            first = run_sparse_peer(peer, mdp, fast, cache)
            if not first[1] <= PEER_AGREE * scale:
                skip = (
                    f"{PEER_LABELS[peer]} not timed: its values differ from optplan's by "
                    f"{first[1]:.2e} (max |V| {scale:.3g})"
                )
                break
            results = [first] + [run_sparse_peer(peer, mdp, fast, cache) for _ in range(runs - 1)]
            del cache
            medians.append(float(np.median([t for t, _ in results])))
            worst = max([worst] + [e for _, e in results])
        if skip is not None:
            row[f"peer_{peer}_skip"] = skip
            continue
        solver_entries(row, f"peer_{peer}", float(np.median(medians)), err=worst)


def _sparse_rows(instances, criteria, solvers, problems, peers, progress) -> list[dict]:
    """:func:`bench_planning`'s sparse rows: the random models' (``"random"`` in ``models``),
    then one discounted row per named model; ``instances = (sizes, n_actions, repeats, seed,
    models, grid, gamma)``."""
    sizes, n_actions, repeats, seed, models, grid, gamma = instances
    _check_sparse_sizes(sizes if "random" in models else (), n_actions,
                        grid if "grid" in models else None)  # fmt: skip
    other = [c for c in criteria if c not in SPARSE_CRITERIA]
    if other:
        raise OptplanError(
            f"--sparse times the criteria {SPARSE_CRITERIA}, got {tuple(other)} (dense paths)"
        )
    if peers:
        require()  # before any timing
    rows = []
    if "random" in models:
        rows += _bench_sparse(
            sizes, n_actions, repeats, solvers, seed, criteria, progress, problems, peers
        )
    for name in models:
        if name != "random":
            rows.append(_named_row(name, gamma, grid, peers, solvers, progress))
    return rows


def _bench_sparse(
    sizes, n_actions, repeats, solvers, seed, criteria, progress, problems, peers=False
) -> list[dict]:
    """:func:`bench_planning` on random sparse models (see its ``sparse``); ``peers``: the
    discounted rows also time :data:`SPARSE_PEERS` (:func:`_sparse_peers`)."""
    rows = []
    for criterion in criteria:
        cls, model = problems[criterion]
        warm = cls(model(random_sparse_mdp(np.random.default_rng(seed), 8, n_actions)))
        warm.solve(method="fast")  # untimed: imports
        with_peers = peers and criterion == "discounted"
        for S in sizes:
            rng = np.random.default_rng([seed, S])
            row = {"criterion": criterion, "model": "random", "S": S, "A": n_actions}
            row["instances"] = repeats
            nnz = []
            if with_peers:
                times, solved = [], []
                for _ in range(repeats):
                    problem = cls(model(random_sparse_mdp(rng, S, n_actions)))
                    nnz.append(problem.mdp.nnz)
                    runs = []
                    for _ in range(SPARSE_PEER_RUNS if S < PEER_ONE_RUN_STATES else 1):
                        fast, t = timed(lambda p=problem: p.solve(method="fast"))
                        runs.append(t)
                    times.append(float(np.median(runs)))
                    solved.append((problem.mdp, fast))
                row["fast_s"] = float(np.median(times))
                row["best_ratio"] = None
                _sparse_peers(row, solved)
                del solved
            else:

                def instances(rng=rng, cls=cls, model=model, nnz=nnz, S=S):
                    for _ in range(repeats):
                        problem = cls(model(random_sparse_mdp(rng, S, n_actions)))
                        nnz.append(problem.mdp.nnz)
                        yield problem

                _size_row(row, instances(), solvers, ())
            row["nnz"] = int(np.median(nnz))
            row["peak_rss_gib"] = _peak_rss_gib()
            rows.append(row)
            if progress:
                ratios = (
                    [f", best conic ratio {row['best_ratio']:.0f}x"]
                    if row.get("best_ratio") is not None
                    else []
                )
                progress(f"{criterion} S={S} (sparse): " + _progress_text(row) + "".join(ratios))
    return rows


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
        "".join(f"{_peer_label(n) + ' s':>15}{'ratio':>8}{'agree':>10}" for n in peers),
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
                    f"{r[f'peer_{n}_s']:>15.2e}{r[f'peer_{n}_ratio']:>7.2f}x"
                    f"{r[f'peer_{n}_err']:>10.1e}"
                )
            elif f"peer_{n}_skip" in r:
                line += f"{'skipped':>15}{'-':>8}{'-':>10}"
                notes.append(f"{r.get('model', '')} S={r['S']}: {r[f'peer_{n}_skip']}")
            else:
                line += f"{'-':>15}{'-':>8}{'-':>10}"
        lines.append(line)
    return "\n".join(lines + notes)


def _peer_label(name: str) -> str:
    """A peer's column title (:data:`.peers_planning.PEER_LABELS`): mdpsolver by its name,
    pymdptoolbox's classes as ``pymdp PI``, mdptoolbox-hiive's as ``hiive PI``."""
    return PEER_LABELS.get(name, f"pymdp {name}")


#: The text table of the rows for the command line.
table = solvers_table(format_table)


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_planning` reports: one per criterion and size
    (of the random models), and one per named model."""
    models = getattr(args, "models", ("random",))
    named = sum(m != "random" for m in models)
    return (len(args.criteria) * len(args.sizes) if "random" in models else 0) + named


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
    if getattr(args, "sparse", False):
        models = getattr(args, "models", ("random",))
        named = [m for m in models if m != "random"]
        parts = [kind] if "random" in models else []
        if named:
            parts.append(
                f"named sparse models {', '.join(named)} (grid {args.grid}x{args.grid}, "
                f"slip {GRID_SLIP})"
            )
        kind = "; ".join(parts)
    kind += f", discount {getattr(args, 'gamma', GAMMA)}"
    text = (
        f"planning benchmark: {kind}, A={args.n_actions}{horizon}, {args.repeats} "
        "instances per size, median wall seconds; ratio = conic median / fast median (same run)"
    )
    if getattr(args, "peers", False) and getattr(args, "sparse", False):
        text += (
            "\npeers: pymdptoolbox and mdptoolbox-hiive PolicyIteration and ValueIteration "
            f"(epsilon={VI_EPSILON:g}) given A scipy.sparse S x S matrices, run() timed; "
            "mdpsolver modified policy iteration (its default; one thread; tolerance "
            "1e-10 x max(1, max|r|) / (1 - gamma)), model.solve timed on a fresh model; each "
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
        ("random",) + NAMED_MODELS,
        "with --sparse: random models at --sizes and/or named ones (taxi: Taxi-v4; "
        "frozenlake: FrozenLake-v1 8x8 slippery; grid: the --grid N x N gridworld)",
        ("random",),
    )
    parser.add_argument(
        "--grid",
        type=int,
        default=GRID_SIZE,
        metavar="N",
        help=f"side of the gridworld of --models grid (default {GRID_SIZE}: 10^6 states)",
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
