"""What the criteria's dynamic programming shares: Bellman backups and greedy policies, a
deterministic policy's chain, the chain's recurrent classes, and linear solves that raise
:class:`EvaluationError` instead of returning a NaN or inf."""

from __future__ import annotations

import numpy as np


def masked(q: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``q`` with inadmissible actions set to ``-inf``."""
    return np.where(mask, q, -np.inf)


def backup(P, R: np.ndarray, v: np.ndarray, discount: float = 1.0) -> np.ndarray:
    """``Q[s, a] = R[s, a] + discount * sum_s' P[s, a, s'] v[s']``; ``P`` dense ``(S, A, S)``
    or the ``(S·A, S)`` matrix of rows ``s·A + a`` (dense or ``scipy.sparse``)."""
    S, A = R.shape
    rows = P if P.ndim == 2 else P.reshape(S * A, -1)
    q = np.asarray(rows @ v).reshape(S, A)
    if discount != 1.0:
        q *= discount
    q += R
    return q


def greedy(
    qm: np.ndarray, prev: np.ndarray | None = None, tol: float = 0.0, scale=None
) -> np.ndarray:
    """Argmax over the last axis; where ``prev`` is within ``tol`` of the max, relative
    (``q_prev >= q_max - tol |q_max|``, or ``- tol * scale`` when ``scale`` is given), keep
    it: a scale-free tie test, so a better action is taken at any scale of ``q``.

    Keeping the incumbent on ties is what makes policy iteration terminate (Puterman §6.4, §8.6).
    """
    best = qm.argmax(axis=-1)
    if prev is None:
        return best
    if qm.ndim == 2:  # (S, A): plain indexing (take_along_axis costs ~40 us at S = 500)
        rows = np.arange(qm.shape[0])
        top, incumbent = qm[rows, best], qm[rows, prev]
    else:
        top = np.take_along_axis(qm, best[..., None], -1)[..., 0]
        incumbent = np.take_along_axis(qm, prev[..., None], -1)[..., 0]
    size = np.abs(top) if scale is None else scale
    return np.where(incumbent >= top - tol * size, prev, best)


def finite_scale(x: np.ndarray) -> float:
    """``max |x|`` over the finite entries (0 when there are none): the size of an array of
    action values, for tie tests relative to it."""
    finite = np.abs(x[np.isfinite(x)])
    return float(finite.max()) if finite.size else 0.0


def policy_model(P, R: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Markov chain ``P_pi[s, s']`` and reward ``r_pi[s]`` of a deterministic policy.

    ``P`` dense ``(S, A, S)`` gives a dense chain; ``P`` as the ``(S·A, S)`` matrix of rows
    ``s·A + a`` (a sparse model's :attr:`~optplan.mdp.TabularMDP.P_rows`) gives the chain as
    one row gather of it, in its format (CSR stays CSR)."""
    S, A = R.shape
    idx = np.arange(S)
    if P.ndim == 2:
        rows = idx * A + policy
        if getattr(P, "format", None) == "csr":
            return _gather_rows(P, rows), R[idx, policy]
        return P[rows], R[idx, policy]
    return P[idx, policy], R[idx, policy]


#: Up to this many rows :func:`_gather_rows` gathers by NumPy index arithmetic; above, by
#: scipy's compiled row indexing (no index temporaries of the gathered size: at 10^7
#: states with 10 successors they would be 2.4 GB).
GATHER_NUMPY_MAX_ROWS = 2**16


def _gather_rows(P, rows: np.ndarray):
    """``P[rows]`` for a CSR ``P``: by index arithmetic for up to
    :data:`GATHER_NUMPY_MAX_ROWS` rows (scipy's fancy row indexing costs ~0.3 ms of
    overhead at any size: most of a small model's policy evaluation), by scipy above."""
    if rows.size > GATHER_NUMPY_MAX_ROWS:
        return P[rows]
    start = P.indptr[rows]
    counts = P.indptr[rows + 1] - start
    indptr = np.zeros(rows.size + 1, dtype=P.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    src = np.repeat(start - indptr[:-1], counts) + np.arange(indptr[-1], dtype=start.dtype)
    out = type(P)((P.data[src], P.indices[src], indptr), shape=(rows.size, P.shape[1]))
    out.has_sorted_indices = P.has_sorted_indices
    return out


def start_policy(R: np.ndarray, mask: np.ndarray, policy: np.ndarray | None) -> np.ndarray:
    """Policy iteration's first policy: ``policy`` when every action it takes is admissible,
    else greedy in ``R``."""
    if policy is None or not mask[np.arange(R.shape[0]), policy].all():
        return greedy(masked(R, mask))
    return policy


#: Up to this many states, :func:`closed_classes` takes the dense transitive closure (a few
#: boolean matrix products, ~20 us at S = 50) instead of scipy's strongly connected
#: components (~0.5 ms of sparse-matrix setup at any size): optimistic policy iteration asks
#: once per step.
DENSE_CLASSES_MAX_STATES = 128


def closed_classes(P_pi: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Recurrent classes of a chain: ``(count, labels[s], closed[label])``.

    A strongly connected component is recurrent iff no transition leaves it. Labels number
    the components in the order of their smallest state up to
    :data:`DENSE_CLASSES_MAX_STATES` states (scipy's order beyond).
    """
    S = P_pi.shape[0]
    if S <= DENSE_CLASSES_MAX_STATES:
        return _closed_classes_dense(P_pi > 0)
    # scipy.sparse here, not at the top: it is most of the cost of importing optplan.dp
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    rows, cols = np.nonzero(P_pi > 0)
    graph = csr_matrix((np.ones(rows.size), (rows, cols)), shape=P_pi.shape)
    n, labels = connected_components(graph, directed=True, connection="strong")
    leaving = labels[rows] != labels[cols]
    closed = np.ones(n, dtype=bool)
    closed[labels[rows[leaving]]] = False
    return int(closed.sum()), labels, closed


def _closed_classes_dense(edges: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """:func:`closed_classes` from the reflexive-transitive closure ``R`` by repeated
    squaring (float32 products are exact: entries count paths through at most 128 states):
    ``s ~ t`` iff ``R[s, t]`` and ``R[t, s]``; a component is closed iff every state it
    reaches is in it."""
    S = edges.shape[0]
    reach = edges | np.eye(S, dtype=bool)
    while True:  # at most log2(S) + 1 squarings
        f = reach.astype(np.float32)
        wider = (f @ f) > 0
        if (wider == reach).all():
            break
        reach = wider
    mutual = reach & reach.T
    first, labels = np.unique(mutual.argmax(axis=1), return_inverse=True)
    closed = ~(reach & ~mutual).any(axis=1)[first]
    return int(closed.sum()), labels, closed


def n_recurrent_classes(P_pi: np.ndarray) -> int:
    """Number of recurrent classes; O(S^2) shortcut when some state is entered from every state
    (on large chains first tried in O(S) on the state state 0 enters most likely)."""
    if P_pi.shape[0] > DENSE_CLASSES_MAX_STATES and (P_pi[:, P_pi[0].argmax()] > 0).all():
        return 1
    if (P_pi > 0).all(axis=0).any():
        return 1
    return closed_classes(P_pi)[0]


def generator(P_pi: np.ndarray) -> np.ndarray:
    """``I - P_pi`` with the diagonal computed as the off-diagonal row sums (Grassmann, Taksar
    and Heyman's device): no subtraction ``1 - P_ss``, which would turn a state left with
    probability 1e-20 (or 4e-320) into an absorbing one and make the system singular."""
    M = -P_pi.copy()
    idx = np.arange(P_pi.shape[0])
    M[idx, idx] = 0.0
    M[idx, idx] = -M.sum(axis=1)
    return M


class EvaluationError(ArithmeticError):
    """Policy evaluation cannot be carried out in double precision (a singular system, or a
    bias beyond the double range); the message says which and why."""


def solve_system(M: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
    """``M^{-1} b``, or :class:`EvaluationError` (naming ``what``) when ``M`` is singular in
    double precision or the solution overflows: never a NaN or inf returned."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            x = np.linalg.solve(M, b)
        except np.linalg.LinAlgError:
            x = None
    if x is None or not np.isfinite(x).all():
        raise _singular(M, what)
    return x


def _singular(M: np.ndarray, what: str) -> EvaluationError:
    off = M[M != 0]
    smallest = float(np.abs(off).min()) if off.size else 0.0
    return EvaluationError(
        f"{what} cannot be computed in double precision: the linear system is singular or "
        f"its solution overflows (its smallest nonzero coefficient is {smallest:.3g}; "
        "transitions that small make the chain numerically multichain)"
    )
