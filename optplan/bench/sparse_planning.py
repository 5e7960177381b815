"""The rows of ``optplan bench planning --sparse``: each model family of :mod:`.models` (``P``
held CSR), the fast path against each conic solver and, on the discounted rows, against the
peers of :data:`.peers_planning.SPARSE_PEERS`, every contender's values checked against
optplan's before any of its times counts."""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError
from ..problems import DiscountedPlanning
from ._common import time_conic, timed
from ._rows import solver_entries
from .models import (
    NAMED_MODELS,
    SIZED_MODELS,
    check_sparse_sizes,
    named_mdp,
    sized_mdp,
)
from .peers_planning import PEER_LABELS, SPARSE_PEERS, require, run_sparse_peer, sparse_peer_skip

__all__ = [
    "SPARSE_CRITERIA",
    "PEER_AGREE",
    "PEER_ONE_RUN_STATES",
    "SPARSE_PEER_RUNS",
    "sparse_rows",
]

#: The criteria ``--sparse`` times (the others' paths are dense).
SPARSE_CRITERIA = ("discounted", "average")
#: A peer's values must agree with optplan's to this (times max(1, max |V|)) to be timed.
PEER_AGREE = 1e-8
#: From this many states each contender of a ``--sparse --peers`` row runs once (its first,
#: checked run is its time), below it :data:`SPARSE_PEER_RUNS` times (the median: a run of
#: a millisecond is hit by the odd pause of a shared machine, 5-10 ms on Taxi).
PEER_ONE_RUN_STATES = 100_000
SPARSE_PEER_RUNS = 5


def sparse_rows(instances, criteria, solvers, problems, peers, progress, tol) -> list[dict]:
    """:func:`.planning.bench_planning`'s sparse rows: per criterion the families sized by
    ``--sizes`` (``random``, then :data:`.models.SIZED_MODELS`, discounted only) in
    ``models``, then one
    discounted row per named model (per side of ``grids``); ``instances = (sizes,
    n_actions, repeats, seed, models, grids, gamma)``; ``tol``: the accuracy asked of
    optplan's fast path and of QuantEcon; ``peers``: the names of
    :data:`.peers_planning.SPARSE_PEERS` timed on the discounted rows (none: empty)."""
    sizes, n_actions, repeats, seed, models, grids, gamma = instances
    check_sparse_sizes(sizes if "random" in models else (), n_actions,
                       grids if "grid" in models else ())  # fmt: skip
    other = [c for c in criteria if c not in SPARSE_CRITERIA]
    if other:
        raise OptplanError(
            f"--sparse times the criteria {SPARSE_CRITERIA}, got {tuple(other)} (dense paths)"
        )
    if peers:
        require()  # before any timing
    rows = []
    for criterion in criteria:
        cls, model = problems[criterion]
        warm = cls(model(sized_mdp("random", np.random.default_rng(seed), 8, n_actions)))
        warm.solve(method="fast")  # untimed: imports
        for family in [m for m in ("random",) + SIZED_MODELS if m in models]:
            if family != "random" and criterion != "discounted":
                continue  # the structured families' rows are discounted
            for S in sizes:
                rng = np.random.default_rng([seed, S])
                count = repeats if family == "random" else 1  # the others are deterministic
                row = {"criterion": criterion, "model": family, "S": S, "A": None}
                made = (cls(model(sized_mdp(family, rng, S, n_actions))) for _ in range(count))
                names = peers if criterion == "discounted" else ()
                rows.append(_row(row, made, solvers, names, tol))
                _report(progress, rows[-1])
    for name in [m for m in NAMED_MODELS if m in models]:
        for side in grids if name == "grid" else (None,):
            mdp = named_mdp(name, gamma, side)
            DiscountedPlanning(named_mdp(name, gamma, 2) if name == "grid" else mdp).solve(
                method="fast"
            )  # untimed: imports and compiled kernels
            row = {"criterion": "discounted", "model": name, "S": mdp.n_states, "A": None}
            rows.append(_row(row, [DiscountedPlanning(mdp)], solvers, peers, tol))
            _report(progress, rows[-1])
    return rows


def _row(row: dict, problems, solvers, peers: tuple, tol: float) -> dict:
    """Fill ``row`` from its instances ``problems``: the fast path's median time (with
    ``peers``, each instance's median of :data:`SPARSE_PEER_RUNS` runs below
    :data:`PEER_ONE_RUN_STATES` states), each conic solver's, and each peer's of ``peers``
    (:func:`_sparse_peers`); ``nnz`` (the median stored transition probabilities) and
    ``peak_rss_gib``."""
    times, solved, nnz = [], [], []
    conic = {s: [] for s in solvers}
    fails, errs = dict.fromkeys(solvers, 0), dict.fromkeys(solvers, 0.0)
    for problem in problems:
        S = problem.mdp.n_states
        row["A"] = problem.mdp.n_actions
        nnz.append(problem.mdp.nnz)
        runs = SPARSE_PEER_RUNS if peers and S < PEER_ONE_RUN_STATES else 1
        fast, runs_s = None, []
        for _ in range(runs):
            fast, t = timed(lambda p=problem: p.solve(method="fast", tol=tol))
            runs_s.append(t)
        times.append(float(np.median(runs_s)))
        time_conic(problem, solvers, fast, conic, errs, fails)
        if peers:
            solved.append((problem.mdp, fast))
    row["instances"] = len(times)
    row["fast_s"] = float(np.median(times))
    for solver in solvers:
        med = float(np.median(conic[solver]))
        solver_entries(row, solver, med, fail=fails[solver], err=errs[solver])
    row["best_ratio"] = min((row[f"{s}_ratio"] for s in solvers), default=None)
    if peers:
        _sparse_peers(row, solved, tol, peers)
    row["nnz"] = int(np.median(nnz))
    row["peak_rss_gib"] = _peak_rss_gib()
    return row


def _report(progress, row: dict) -> None:
    if not progress:
        return
    text = f"fast {row['fast_s']:.2e}s, peak RSS {row['peak_rss_gib']:.2f} GiB" + "".join(
        f", {PEER_LABELS[p]} ratio {row[f'peer_{p}_ratio']:.2f}"
        for p in SPARSE_PEERS
        if f"peer_{p}_ratio" in row
    )
    if row.get("best_ratio") is not None:
        text += f", best conic ratio {row['best_ratio']:.0f}x"
    progress(f"{row['criterion']} {row['model']} S={row['S']} (sparse): {text}")


def _peak_rss_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _sparse_peers(row: dict, solved: list, tol: float, names=SPARSE_PEERS) -> None:
    """Time each peer of ``names`` (of :data:`SPARSE_PEERS`) on the ``(mdp, fast result)`` pairs of
    ``solved`` (one row's instances) into ``row``: per instance its runs
    (:data:`SPARSE_PEER_RUNS`, one from :data:`PEER_ONE_RUN_STATES` states), the first
    checked against optplan's values (to :data:`PEER_AGREE` times ``max(1, max |V|)``)
    before any of its times counts; the median over instances of each instance's median
    run. A peer skipped (:func:`.peers_planning.sparse_peer_skip`) or disagreeing gets
    ``peer_<NAME>_skip``."""
    S = solved[0][0].n_states
    runs = SPARSE_PEER_RUNS if S < PEER_ONE_RUN_STATES else 1
    for peer in names:
        skip = sparse_peer_skip(peer, S, row.get("model", "random"))
        medians, worst = [], 0.0
        for mdp, fast in solved if skip is None else ():
            cache: dict = {}
            scale = max(1.0, float(np.abs(np.asarray(fast.values)).max()))
            first = run_sparse_peer(peer, mdp, fast, cache, tol)
            if first[1] != first[1]:
                skip = f"{PEER_LABELS[peer]} not timed: it stopped at its iteration limit"
                break
            if not first[1] <= PEER_AGREE * scale:
                skip = (
                    f"{PEER_LABELS[peer]} not timed: its values differ from optplan's by "
                    f"{first[1]:.2e} (max |V| {scale:.3g})"
                )
                break
            others = [run_sparse_peer(peer, mdp, fast, cache, tol) for _ in range(runs - 1)]
            del cache
            medians.append(float(np.median([t for t, _ in [first] + others])))
            worst = max([worst] + [e for _, e in [first] + others])
        if skip is not None:
            row[f"peer_{peer}_skip"] = skip
            continue
        solver_entries(row, f"peer_{peer}", float(np.median(medians)), err=worst)
