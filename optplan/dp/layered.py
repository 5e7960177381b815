"""Finite horizon (layered models ``P[l, s, a, s']``, ``R[l, s, a]``): backward induction,
policy evaluation and the forward occupancy of a layered policy.

``P`` is dense ``(L, S, A, S)`` or the ``(L·S·A, S)`` matrix of rows ``l·S·A + s·A + a``
(a sparse model's :attr:`~optplan.mdp.FiniteHorizonMDP.P_rows`, dense or ``scipy.sparse``
CSR): each layer is one ``(S·A, S)`` block, and each step one mat-vec with it (a CSR block
shares the model's arrays, so nothing is densified or copied)."""

from __future__ import annotations

import numpy as np

from ..mdp import csr_block, is_sparse
from ._common import backup, masked


def layer_block(P, layer: int, S: int, A: int):
    """Layer ``layer`` of ``P`` as the ``(S·A, S)`` matrix of rows ``s·A + a``, in ``P``'s
    format (a dense view, or a CSR block sharing the sparse matrix's arrays)."""
    if P.ndim == 4:
        return P[layer].reshape(S * A, S)
    if is_sparse(P):
        return csr_block(P, layer * S * A, (layer + 1) * S * A)
    return P[layer * S * A : (layer + 1) * S * A]


def backward_induction(P, R: np.ndarray, action_mask=None):
    """``Q[l, s, a]`` and ``V[l, s]`` of a layered model: ``V_L = 0``,
    ``Q_l = R_l + P_l V_{l+1}`` (masked actions ``-inf``), ``V_l = max_a Q_l``."""
    L, S, A = R.shape
    V = np.zeros((L + 1, S))
    Q = np.empty((L, S, A))
    for l in range(L - 1, -1, -1):  # loop over layers only
        q = backup(layer_block(P, l, S, A), R[l], V[l + 1])
        Q[l] = q if action_mask is None else masked(q, action_mask[l])
        V[l] = Q[l].max(axis=1)
    return Q, V[:L]


def evaluate_layered(P, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``V^pi[l, s]`` of a deterministic layered policy ``policy[l, s]``."""
    L, S, A = R.shape
    idx = np.arange(S)
    V = np.zeros((L + 1, S))
    for l in range(L - 1, -1, -1):
        a = policy[l]
        if P.ndim == 4:
            V[l] = R[l, idx, a] + P[l, idx, a] @ V[l + 1]
        else:  # the chosen rows l·S·A + s·A + pi(s), gathered from the layer's block
            rows = layer_block(P, l, S, A)[idx * A + a]
            V[l] = R[l, idx, a] + np.asarray(rows @ V[l + 1]).ravel()
    return V[:L]


def forward_occupancy(P, initial: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``d[l, s, a]``: probability of being in ``s`` at layer ``l`` and taking ``a`` under a
    deterministic layered ``policy[l, s]`` started from ``initial``."""
    L, S = policy.shape
    A = P.shape[2] if P.ndim == 4 else P.shape[0] // (L * S)
    idx = np.arange(S)
    occ = np.zeros((L, S, A))
    d = np.asarray(initial, dtype=float)
    for l in range(L):
        occ[l, idx, policy[l]] = d
        if P.ndim == 4:
            d = d @ P[l, idx, policy[l]]
        else:  # d_{l+1} = P_l^T x with x the layer's occupancy flattened over rows s·A + a
            d = np.asarray(layer_block(P, l, S, A).T @ occ[l].ravel()).ravel()
    return occ
