"""Fast path of ``FiniteHorizonPlanning``: backward induction (vectorized over states/actions)."""

from __future__ import annotations

import time

from ..dp import backward_induction, forward_occupancy, greedy
from ..result import OPTIMAL, PlanResult
from ._result import fast_result


def solve(problem) -> PlanResult:
    """Backward induction: ``V_L = 0``, ``Q_l = R_l + P_l V_{l+1}``, ``V_l = max_{a in A} Q_l``."""
    mdp = problem.mdp
    start = time.perf_counter()
    L = mdp.horizon
    Q, values = backward_induction(mdp.P, mdp.R, mdp.action_mask)
    policy = greedy(Q)
    return fast_result(
        "backward_induction",
        start,
        L,
        value=float(mdp.initial @ values[0]),
        x=values,
        status=OPTIMAL,
        values=values,
        q=Q,
        policy=policy,
        occupancy=forward_occupancy(mdp.P, mdp.initial, policy),
    )
