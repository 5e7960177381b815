"""Finite horizon (layered models ``P[l, s, a, s']``, ``R[l, s, a]``): backward induction,
policy evaluation and the forward occupancy of a layered policy."""

from __future__ import annotations

import numpy as np

from ._common import backup, masked


def backward_induction(P: np.ndarray, R: np.ndarray, action_mask=None):
    """``Q[l, s, a]`` and ``V[l, s]`` of a layered model: ``V_L = 0``,
    ``Q_l = R_l + P_l V_{l+1}`` (masked actions ``-inf``), ``V_l = max_a Q_l``."""
    L, S, A = R.shape
    V = np.zeros((L + 1, S))
    Q = np.empty((L, S, A))
    for l in range(L - 1, -1, -1):  # loop over layers only
        q = backup(P[l], R[l], V[l + 1])
        Q[l] = q if action_mask is None else masked(q, action_mask[l])
        V[l] = Q[l].max(axis=1)
    return Q, V[:L]


def evaluate_layered(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``V^pi[l, s]`` of a deterministic layered policy ``policy[l, s]``."""
    L, S, _ = R.shape
    idx = np.arange(S)
    V = np.zeros((L + 1, S))
    for l in range(L - 1, -1, -1):
        a = policy[l]
        V[l] = R[l, idx, a] + P[l, idx, a] @ V[l + 1]
    return V[:L]


def forward_occupancy(P: np.ndarray, initial: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``d[l, s, a]``: probability of being in ``s`` at layer ``l`` and taking ``a`` under a
    deterministic layered ``policy[l, s]`` started from ``initial``."""
    L, S, A = P.shape[:3]
    idx = np.arange(S)
    occ = np.zeros((L, S, A))
    d = np.asarray(initial, dtype=float)
    for l in range(L):
        occ[l, idx, policy[l]] = d
        d = d @ P[l, idx, policy[l]]
    return occ
