"""Fast path of ``RegretLowerBound``: policy iteration for the optimal bias and the gaps, then
the KL-minimization rates of every critical pair in one batched call."""

from __future__ import annotations

import time

import numpy as np

from ..problems.average_reward import AverageRewardPlanning
from ..problems.regret_lower_bound import (
    CRITICAL_PAIR,
    bound_fields,
    classify_pairs,
    worst_status,
)
from ..result import OPTIMAL, PlanResult
from . import average_reward
from ._result import fast_result
from .kl_inf import kl_inf_rate


def solve(problem, max_iter: int = 100) -> PlanResult:
    """``C(P)`` by Howard policy iteration (:mod:`optplan.fast.average_reward`) and the batched
    KL-minimization rate (:func:`optplan.fast.kl_inf.kl_inf_rate`, one call for all critical
    pairs: the compiled row kernel where numba is installed).

    Parameters
    ----------
    max_iter : int
        Newton iterations per rate (as :func:`~optplan.fast.kl_inf.kl_inf_rate`).
    """
    start = time.perf_counter()
    mdp = problem.mdp
    planning = average_reward.solve(AverageRewardPlanning(mdp))
    if planning.status != OPTIMAL:
        return fast_result(
            "policy_iteration+newton",
            start,
            planning.iterations,
            value=np.nan,
            status=planning.status,
            message=f"planning the optimal bias: {planning.message}",
        )
    gaps, targets, classes = classify_pairs(problem, planning.q, planning.bias)
    crit = classes == CRITICAL_PAIR
    iterations = planning.iterations or 0
    statuses = [OPTIMAL]
    rates = multipliers = np.zeros(0)
    if crit.any():
        s, a = np.nonzero(crit)
        # the rate is scale-free (D(p, c v, c rho) = D(p, v, rho)): solved at a bias of size
        # about 1 when its size is extreme (squares of 1e300 overflow), the multiplier
        # (dD / d rho) scaled back
        size = float(np.abs(planning.bias).max())
        c = size if (size > 1e100 or 0.0 < size < 1e-100) else 1.0
        rows = kl_inf_rate(mdp.P[s, a], planning.bias / c, targets[s, a] / c, max_iter,
                           validate=False)  # fmt: skip
        rates, multipliers = rows.value, rows.multiplier / c
        iterations += int(rows.iterations.sum())
        statuses = np.unique(rows.status).tolist()
    status = worst_status(statuses)
    message = "" if status == OPTIMAL else f"some rate's root finding ended {status!r}"
    fields = bound_fields(planning, gaps, targets, classes, rates, multipliers)
    return fast_result(
        "policy_iteration+newton", start, iterations, status=status, message=message, **fields
    )
