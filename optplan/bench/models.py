"""The model families of ``optplan bench planning --sparse``: random sparse models, which mix
in a few steps, and the structured ones users bring, which mix slowly (a slippery gridworld,
a controlled queue, a long chain), all with ``P`` held CSR and built without a Python loop
over states."""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError
from ..mdp import TabularMDP

__all__ = [
    "SPARSE_SUCCESSORS",
    "SIZED_MODELS",
    "NAMED_MODELS",
    "GRID_SIZE",
    "GRID_SLIP",
    "QUEUE_ARRIVAL",
    "QUEUE_SERVICE",
    "QUEUE_COST",
    "QUEUE_HOLDING",
    "random_sparse_mdp",
    "gridworld_mdp",
    "queue_mdp",
    "chain_mdp",
    "sized_mdp",
    "named_mdp",
    "check_sparse_sizes",
]

#: Successors per state-action pair of :func:`random_sparse_mdp`.
SPARSE_SUCCESSORS = 10

#: Families of ``--sparse`` sized by ``--sizes`` (numbers of states), besides ``random``:
#: the controlled queue of :func:`queue_mdp` and the long RiverSwim chain of
#: :func:`chain_mdp`.
SIZED_MODELS = ("queue", "chain")
#: ``--models`` of ``--sparse`` with their own size: Gymnasium's Taxi-v4 and slippery
#: FrozenLake-v1 8x8 (episodic view, ``P`` held CSR), and the ``--grid`` N x N
#: :func:`gridworld_mdp` (a row per side).
NAMED_MODELS = ("taxi", "frozenlake", "grid")
#: ``--grid``: side of the gridworld (10^6 states).
GRID_SIZE = 1000
#: The gridworld's slip probability: the move is drawn uniformly among the 4 directions.
GRID_SLIP = 0.1
#: :func:`queue_mdp`: the probability of an arrival in a step, each action's probability of a
#: service completion and its cost per step, and the holding cost per customer and step.
QUEUE_ARRIVAL = 0.45
QUEUE_SERVICE = (0.3, 0.5, 0.7)
QUEUE_COST = (0.0, 0.2, 0.6)
QUEUE_HOLDING = 0.01


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


def queue_mdp(n: int, discount: float | None = None) -> TabularMDP:
    """A controlled single-server queue with room for ``n - 1`` customers (the state: how many
    are in it), ``P`` held CSR (at most 3 entries a row): in a step a customer arrives with
    probability :data:`QUEUE_ARRIVAL` (turned away when the queue is full) and, when one is
    there, a service completes with the action's probability in :data:`QUEUE_SERVICE`, at
    its cost in :data:`QUEUE_COST`; reward ``-(QUEUE_HOLDING * s + cost)``. A birth-death
    chain: it mixes in ``O(n^2)`` steps where a random model mixes in a few."""
    import scipy.sparse as sp

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise OptplanError(f"queue size must be an integer >= 2, got {n!r}")
    S, A = int(n), len(QUEUE_SERVICE)
    state = np.arange(S, dtype=np.int64)
    rows, cols, vals = [], [], []
    lam = QUEUE_ARRIVAL
    for a, mu in enumerate(QUEUE_SERVICE):  # over the 3 actions, vectorized over states
        up = np.where(state < S - 1, lam * np.where(state > 0, 1.0 - mu, 1.0), 0.0)
        down = np.where(state > 0, mu * (1.0 - lam), 0.0)
        for step, p in ((1, up), (-1, down), (0, 1.0 - up - down)):
            keep = p > 0
            rows.append(state[keep] * A + a)
            cols.append(state[keep] + step)
            vals.append(p[keep])
    rows, cols, vals = (np.concatenate(x) for x in (rows, cols, vals))
    P = sp.coo_matrix((vals, (rows, cols)), shape=(S * A, S)).tocsr()
    R = -(QUEUE_HOLDING * state[:, None] + np.asarray(QUEUE_COST)[None, :])
    return TabularMDP(P, R, discount, name=f"queue {S}")


def chain_mdp(n: int, discount: float | None = None) -> TabularMDP:
    """RiverSwim (:func:`optplan.generators.riverswim`, its usual numbers) with ``n`` states,
    ``P`` held CSR: a long chain whose reward lies ``n`` steps against the current."""
    from ..generators import riverswim

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise OptplanError(f"chain size must be an integer >= 2, got {n!r}")
    return riverswim(int(n), discount=discount, sparse=True)


def sized_mdp(name: str, rng: np.random.Generator, S: int, n_actions: int) -> TabularMDP:
    """An instance of the family ``name`` (``"random"`` or one of :data:`SIZED_MODELS`) with
    ``S`` states (``rng`` and ``n_actions``: the random family's), without a discount."""
    if name == "random":
        return random_sparse_mdp(rng, S, n_actions)
    if name == "queue":
        return queue_mdp(S)
    if name == "chain":
        return chain_mdp(S)
    raise OptplanError(f"model must be one of {('random',) + SIZED_MODELS}, got {name!r}")


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


def check_sparse_sizes(sizes, n_actions: int, grids=()) -> None:
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
    for grid in grids:
        S = grid * grid
        check_bytes(16 * 5 * 4 * S + 8 * 4 * S, f"--grid {grid} ({S:,} states, 4 moves)",
                    "a CSR P", budget)  # fmt: skip
