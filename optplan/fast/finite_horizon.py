"""Fast path of ``FiniteHorizonPlanning``: backward induction (vectorized over states/actions)."""

from __future__ import annotations

import time

import numpy as np

from ..result import OPTIMAL, PlanResult
from ._dp import backup, greedy, masked


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


def solve(problem) -> PlanResult:
    """Backward induction: ``V_L = 0``, ``Q_l = R_l + P_l V_{l+1}``, ``V_l = max_{a in A} Q_l``."""
    mdp = problem.mdp
    start = time.perf_counter()
    L = mdp.horizon
    Q, values = backward_induction(mdp.P, mdp.R, mdp.action_mask)
    policy = greedy(Q)
    return PlanResult(
        value=float(mdp.initial @ values[0]),
        x=values,
        status=OPTIMAL,
        method="fast",
        solver="backward_induction",
        iterations=L,
        solve_time=time.perf_counter() - start,
        values=values,
        q=Q,
        policy=policy,
        occupancy=forward_occupancy(mdp, policy),
    )


def evaluate_policy(mdp, policy: np.ndarray) -> np.ndarray:
    """``V^pi[l, s]`` of a deterministic layered policy ``policy[l, s]``."""
    L, S, _ = mdp.R.shape
    idx = np.arange(S)
    V = np.zeros((L + 1, S))
    for l in range(L - 1, -1, -1):
        a = policy[l]
        V[l] = mdp.R[l, idx, a] + mdp.P[l, idx, a] @ V[l + 1]
    return V[:L]


def forward_occupancy(mdp, policy: np.ndarray) -> np.ndarray:
    """``d[l, s, a]``: probability of being in ``s`` at layer ``l`` and taking ``a``."""
    L, S, A = mdp.R.shape
    idx = np.arange(S)
    occ = np.zeros((L, S, A))
    d = np.asarray(mdp.initial, dtype=float)
    for l in range(L):
        occ[l, idx, policy[l]] = d
        d = d @ mdp.P[l, idx, policy[l]]
    return occ
