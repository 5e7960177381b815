"""Modified policy iteration in flow order: the start of the sparse discounted solve on
slowly mixing models (gridworlds, queues, long chains), and the rule that sends a model there
(``docs/iterative.md``, "How the sparse discounted solve starts")."""

from __future__ import annotations

import numpy as np

from ._common import _gather_rows, backup, masked
from ._linear import (
    BANDED_MAX,
    _banded_solve,
    _bandwidth,
    _chain_buffers,
    _inverse,
    _scattered,
    flow_order,
)
from ._sweeps import sweeps as compiled_sweeps

#: Flow-ordered modified policy iteration (:func:`_flow_iteration`) starts policy iteration
#: on a goal-directed sparse model: after each Gauss-Seidel sweep of value iteration, which
#: changed the values by at most ``delta``, the greedy policy's chain is evaluated by
#: Gauss-Seidel sweeps in its flow order until one changes them by at most this times
#: ``delta`` (the slip of a gridworld leaves a flow-ordered sweep contracting by about 0.8
#: at discount 0.99: Gauss-Seidel value iteration alone took 78 sweeps of every action on the
#: 300 x 300 gridworld; this takes 12 of them and 74 of the chain, a quarter of their cost
#: each, at the default tol 1e-10).
FLOW_SHRINK = 0.1
#: Gauss-Seidel sweeps of one of those evaluations at most.
FLOW_EVAL_SWEEPS = 1_000
#: It hands over to policy iteration once the value sweep's change is above :data:`FLOW_SLOW`
#: times the largest of the :data:`FLOW_WINDOW` before it, or after :data:`FLOW_MAX_ITER`.
FLOW_SLOW = 0.5
FLOW_WINDOW = 4
FLOW_MAX_ITER = 500
#: :func:`_structured`: a model whose breadth-first search from state 0 needs more than
#: :data:`FLOW_LEVELS` levels to reach :data:`PROBE_STATES` states mixes slowly, and its
#: solve starts with :func:`_flow_iteration`.
FLOW_LEVELS = 32
PROBE_STATES = 4_096
#: Its value sweeps keep a state's action on a relative tie of this times their target (a
#: held action worse by ``tie |V|`` drags the evaluated values down by up to that, which the
#: next value sweep undoes: above the target, a loop).
FLOW_TIE = 0.1


def _structured(rows, n_actions: int) -> bool:
    """Whether the model mixes slowly: the breadth-first search from state 0 over every
    action's transitions needs more than :data:`FLOW_LEVELS` levels to reach
    :data:`PROBE_STATES` states (or all of them). A random model with 4 actions of 10
    successors reaches 4,096 states in 3 levels; a gridworld needs 90 from its corner, a
    queue or a path 4,096."""
    levels = compiled_sweeps()["_levels"](rows.indptr, rows.indices, n_actions, 0, PROBE_STATES)
    return int(levels) > FLOW_LEVELS


def _flow_iteration(rows, R, mask, every, discount, start, max_iter, target):
    """Modified policy iteration in flow order (compiled) from the values ``start``:
    ``(greedy policy, values, iterations)``.

    The model is first relabelled in :func:`reach_order` from the states of the best kept
    reward (:func:`_kept`: the goals), so that a sweep in label order visits each state after
    states nearer a goal, reading memory in order. Each iteration is one Gauss-Seidel sweep
    of value iteration, in label order and in reverse on alternate iterations (a policy's
    frontier moves across the state space in one sweep either way: towards the goals, or
    away from them where another reward, further from them, wins), which gives the greedy
    policy and the sweep's change ``delta``; then that policy's evaluation: exact by a
    banded LU when the model's entries lie within :data:`BANDED_MAX` of the diagonal in
    these labels (a queue, a path), else by Gauss-Seidel sweeps of its chain relabelled in
    its :func:`flow_order` (a sweep carries the values from the goal across the state space
    in one pass) until one changes the values by at most :data:`FLOW_SHRINK` ``* delta``.

    ``iterations`` is 0 when it handed over to policy iteration (see :data:`FLOW_SLOW`),
    else the iterations after which the value sweep met ``discount * delta <= target *
    max(1, max |V|)`` (the Bellman residual is then at most that)."""
    S, A = R.shape
    kept = _kept(R, mask, discount)
    labels = reach_order(rows, np.flatnonzero(kept == kept.max()), A)
    rows, R, mask = _permuted(rows, R, mask, labels)
    V, policy = start[labels], np.zeros(S, dtype=np.intp)
    sweep = compiled_sweeps()["_value_sweep"]
    csr = (rows.indptr, rows.indices, rows.data)
    evaluate = _FlowEvaluation(rows, R, discount)
    directions = (np.arange(S), np.arange(S)[::-1].copy())
    changes, done = [], 0
    tie = min(1e-12, FLOW_TIE * target)  # the incumbent's loss must stay below the target
    for it in range(1, max_iter + 1):
        visit = directions[(it - 1) % 2]
        delta = sweep(*csr, R, mask, every, discount, V, visit, policy, tie)
        if not np.isfinite(delta):
            break
        scale = max(1.0, float(np.abs(V).max()))
        if discount * delta <= target * scale:
            done = it
            break
        changes.append(delta)
        if len(changes) > FLOW_WINDOW and delta > FLOW_SLOW * max(changes[-1 - FLOW_WINDOW : -1]):
            break
        evaluate(policy, V, max(target * scale, FLOW_SHRINK * discount * delta))
    return _scattered(policy, labels), _scattered(V, labels), done


class _FlowEvaluation:
    """:func:`_flow_iteration`'s policy evaluations on its relabelled model ``rows``:
    ``evaluate(policy, V, goal)`` updates ``V`` in place (see there)."""

    def __init__(self, rows, R, discount):
        S, A = R.shape
        self.rows, self.R, self.discount, self.A = rows, R, discount, A
        self.kernels = compiled_sweeps()
        self.chain = _chain_buffers(rows, S, A)
        self.ident = np.arange(S)
        self.banded = _bandwidth(rows.indptr, rows.indices, A) <= BANDED_MAX

    def __call__(self, policy, V, goal) -> None:
        rows, R, kernels, ident = self.rows, self.R, self.kernels, self.ident
        csr = (rows.indptr, rows.indices, rows.data)
        order = ident if self.banded else flow_order(rows, policy, self.A)
        inverse = ident if self.banded else _inverse(order, ident.size)
        kernels["_gather_chain"](*csr, self.A, policy, order, inverse, *self.chain)
        b = R[order, policy[order]]
        if self.banded:
            x = _banded_solve(self.chain, b, self.discount)
            if x is not None:
                V[:] = x
                return
        x = V[order]
        for _ in range(FLOW_EVAL_SWEEPS):
            change = kernels["_linear_sweep"](*self.chain, b, self.discount, x, ident)
            if not self.discount * change > goal:  # met, or NaN (the value sweep stops on it)
                break
        V[order] = x


def reach_order(rows, sources: np.ndarray, n_actions: int) -> np.ndarray:
    """The states in breadth-first order backwards from ``sources`` over the transitions of
    every action (CSR rows ``s·A + a``): ``sources``, then the states that can move to one
    of them in one step, and so on; states that reach none last. On a goal-directed model
    with the goals as sources, each state comes after states nearer a goal."""
    csc = rows.tocsc()
    order = np.empty(rows.shape[1], dtype=np.int64)
    sources = np.ascontiguousarray(sources, dtype=np.int64)
    compiled_sweeps()["_reach_order"](csc.indptr, csc.indices, n_actions, sources, order)
    return order


def _permuted(rows, R, mask, order):
    """The model relabelled so that state ``i`` is ``order[i]``: its rows (CSR), ``R`` and
    ``mask`` (contiguous)."""
    import scipy.sparse as sp

    S, A = R.shape
    inv = _inverse(order, S)
    pick = (order[:, None] * A + np.arange(A)).ravel()
    gathered = _gather_rows(rows, pick)
    indices = inv[gathered.indices].astype(gathered.indices.dtype, copy=False)
    P = sp.csr_matrix((gathered.data, indices, gathered.indptr), shape=rows.shape)
    R = np.ascontiguousarray(R[order], dtype=np.float64)
    return P, R, np.ascontiguousarray(mask[order])


def _kept(R, mask, discount) -> np.ndarray:
    """``V(s) = max_a R(s, a) / (1 - discount)``: each state's best reward kept forever."""
    kept = np.where(mask, R, -np.inf).max(axis=1) / (1.0 - discount)
    kept[~np.isfinite(kept)] = 0.0
    return kept


#: :func:`_kept_start` compares the two starts on at most this many states (every k-th one):
#: on larger models a sweep over all of them costs as much as a step of the solve (0.2 s at
#: 10^6 states, A = 4, 10 successors), and the means of the two starts differ by orders of
#: magnitude where the choice matters.
START_SAMPLE = 8_192


def _mean_residual(rows, R, mask, discount, V, states) -> float:
    """Mean over ``states`` of ``|T V - V|``, from their rows of ``P`` alone."""
    A = R.shape[1]
    if states is None:
        q = backup(rows, R, V, discount)
        top, own = masked(q, mask).max(axis=1), V
    else:
        sub = rows[(states[:, None] * A + np.arange(A)).ravel()]
        q = R[states] + discount * np.asarray(sub @ V).reshape(states.size, A)
        top, own = masked(q, mask[states]).max(axis=1), V[states]
    return float(np.abs(top - own).mean())


def _kept_start(rows, R, mask, discount) -> bool:
    """Whether value iteration starts from :func:`_kept` (and is Gauss-Seidel's, the solve
    unless it contracts slowly) rather than from 0 (Jacobi's, policy iteration's warm start
    unless it certifies first): the start with the smaller mean ``|T V - V|`` (over at most
    :data:`START_SAMPLE` states, evenly spaced), consistent on more of the state space. On
    goal-directed models with a constant step cost, the kept rewards are the exact values of
    every state too far from the goal to see it in double precision, where policy iteration
    would move its policy's frontier a few states per iteration; on random models and on
    terminating ones (Taxi) 0 is closer."""
    S = R.shape[0]
    states = None if S <= START_SAMPLE else np.arange(0, S, -(-S // START_SAMPLE))
    kept = _mean_residual(rows, R, mask, discount, _kept(R, mask, discount), states)
    return kept < _mean_residual(rows, R, mask, discount, np.zeros(S), states)
