"""Dynamic-programming kernels shared by the fast planning paths and by ``compare``.

All are vectorized over states and actions; the only Python loops are over iterations
(policy/value iteration) or layers (finite horizon).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components


def masked(q: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``q`` with inadmissible actions set to ``-inf``."""
    return np.where(mask, q, -np.inf)


def backup(P: np.ndarray, R: np.ndarray, v: np.ndarray, discount: float = 1.0) -> np.ndarray:
    """``Q[s, a] = R[s, a] + discount * sum_s' P[s, a, s'] v[s']``."""
    S, A = R.shape
    return R + discount * (P.reshape(S * A, -1) @ v).reshape(S, A)


def greedy(qm: np.ndarray, prev: np.ndarray | None = None, tol: float = 0.0) -> np.ndarray:
    """Argmax over the last axis; where ``prev`` is within ``tol`` of the max, keep it.

    Keeping the incumbent on ties is what makes policy iteration terminate (Puterman §6.4, §8.6).
    """
    best = qm.argmax(axis=-1)
    if prev is None:
        return best
    top = np.take_along_axis(qm, best[..., None], -1)[..., 0]
    incumbent = np.take_along_axis(qm, prev[..., None], -1)[..., 0]
    return np.where(incumbent >= top - tol * (1.0 + np.abs(top)), prev, best)


def policy_model(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Markov chain ``P_pi[s, s']`` and reward ``r_pi[s]`` of a deterministic policy."""
    idx = np.arange(R.shape[0])
    return P[idx, policy], R[idx, policy]


def closed_classes(P_pi: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Recurrent classes of a chain: ``(count, labels[s], closed[label])``.

    A strongly connected component is recurrent iff no transition leaves it.
    """
    rows, cols = np.nonzero(P_pi > 0)
    graph = csr_matrix((np.ones(rows.size), (rows, cols)), shape=P_pi.shape)
    n, labels = connected_components(graph, directed=True, connection="strong")
    leaving = labels[rows] != labels[cols]
    closed = np.ones(n, dtype=bool)
    closed[labels[rows[leaving]]] = False
    return int(closed.sum()), labels, closed


def n_recurrent_classes(P_pi: np.ndarray) -> int:
    """Number of recurrent classes; O(S^2) shortcut when some state is entered from every state."""
    if (P_pi > 0).all(axis=0).any():
        return 1
    return closed_classes(P_pi)[0]


def evaluate_discounted(P_pi: np.ndarray, r_pi: np.ndarray, discount: float) -> np.ndarray:
    """``V = (I - discount P_pi)^{-1} r_pi``."""
    S = r_pi.shape[0]
    return np.linalg.solve(np.eye(S) - discount * P_pi, r_pi)


def discounted_occupancy(P_pi: np.ndarray, start: np.ndarray, discount: float) -> np.ndarray:
    """Normalized discounted state occupancy ``(1-discount) start^T (I - discount P_pi)^{-1}``."""
    S = start.shape[0]
    return np.linalg.solve((np.eye(S) - discount * P_pi).T, (1.0 - discount) * start)


def stationary(P_pi: np.ndarray) -> np.ndarray:
    """Stationary distribution of a unichain chain: ``pi (I - P_pi) = 0``, ``sum pi = 1``.

    For a unichain chain the left null space of ``I - P_pi`` is one-dimensional and any row of
    ``(I - P_pi)^T`` may be replaced by the normalization.
    """
    S = P_pi.shape[0]
    M = np.eye(S) - P_pi.T
    M[-1, :] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    pi = np.linalg.solve(M, b)
    return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()


def evaluate_average(P_pi: np.ndarray, r_pi: np.ndarray) -> tuple[float, np.ndarray]:
    """Gain and a bias of a unichain policy: ``g + h = r_pi + P_pi h`` with ``h[0] = 0``.

    The caller must have checked that the chain is unichain (:func:`closed_classes`); then the
    bordered system is non-singular.
    """
    S = r_pi.shape[0]
    M = np.zeros((S + 1, S + 1))
    M[:S, :S] = np.eye(S) - P_pi
    M[:S, S] = 1.0
    M[S, 0] = 1.0
    sol = np.linalg.solve(M, np.append(r_pi, 0.0))
    return float(sol[S]), sol[:S]


def class_gains(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """Gain of each recurrent class of a deterministic policy's chain (one entry if unichain)."""
    P_pi, r_pi = policy_model(P, R, policy)
    if n_recurrent_classes(P_pi) == 1:
        return np.array([evaluate_average(P_pi, r_pi)[0]])
    _, labels, closed = closed_classes(P_pi)
    gains = []
    for c in np.flatnonzero(closed):  # loop over recurrent classes, not states
        idx = np.flatnonzero(labels == c)
        gains.append(evaluate_average(P_pi[np.ix_(idx, idx)], r_pi[idx])[0])
    return np.array(gains)
