"""Conic path of ``RegretLowerBound``: the average-reward LP for the optimal bias and the gaps,
then one exponential-cone program per critical pair (the conic ``kl_inf`` path)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..problems.average_reward import AverageRewardPlanning
from ..problems.kl_inf import KLInfRate
from ..problems.regret_lower_bound import (
    CRITICAL_PAIR,
    bound_fields,
    classify_pairs,
    worst_status,
)
from ..result import INFEASIBLE, OPTIMAL, SOLUTION_PRESENT, PlanResult
from . import average_reward, kl_inf


def formulate(problem) -> cp.Problem:
    """The first of the programs: the average-reward LP (stage 1 of
    :func:`optplan.conic.average_reward.formulate`), whose answer fixes the bias and the gaps;
    :func:`formulate_rate` gives each critical pair's exponential-cone program."""
    return average_reward.formulate(AverageRewardPlanning(problem.mdp))


def formulate_rate(problem, s: int, a: int, bias: np.ndarray, target: float) -> cp.Problem:
    """The exponential-cone program of pair ``(s, a)``'s rate ``K = min {KL(p || q) : q . v >=
    target}`` (:func:`optplan.conic.kl_inf.formulate`)."""
    return kl_inf.formulate(KLInfRate(problem.mdp.P[s, a], bias, target))


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    """The LP (two stages where needed) through :mod:`optplan.conic.average_reward`, then the
    rate of each critical pair through :mod:`optplan.conic.kl_inf` (its residual checks
    included). The status is the worst of all programs'."""
    mdp = problem.mdp
    planning = average_reward.solve(AverageRewardPlanning(mdp), solver, solver_options)
    seconds, iterations = planning.solve_time, planning.iterations or 0
    if planning.status not in SOLUTION_PRESENT:
        return PlanResult(
            value=np.nan,
            status=planning.status,
            message=f"planning the optimal bias: {planning.message}",
            method="conic",
            solver=solver,
            iterations=iterations,
            solve_time=seconds,
        )
    gaps, targets, classes = classify_pairs(problem, planning.q, planning.bias)
    crit = np.argwhere(classes == CRITICAL_PAIR)
    rates, multipliers = np.empty(len(crit)), np.empty(len(crit))
    statuses, notes = [planning.status], [planning.message] if planning.message else []
    for k, (s, a) in enumerate(crit):  # one exponential-cone program per critical pair
        res = kl_inf.solve(
            KLInfRate(mdp.P[s, a], planning.bias, targets[s, a]), solver, solver_options
        )
        seconds += res.solve_time
        iterations += res.iterations or 0
        rates[k], multipliers[k] = res.value, res.multiplier
        status = res.status
        if status == INFEASIBLE:  # a critical target is below max v: never infeasible
            status = "solver_error"
        statuses.append(status)
        if status != OPTIMAL:
            notes.append(f"rate of (s, a) = ({s}, {a}): {status} {res.message}".strip())
    status = worst_status(statuses)
    if status not in SOLUTION_PRESENT:
        rates[:] = np.nan
    fields = bound_fields(planning, gaps, targets, classes, rates, multipliers)
    if status not in SOLUTION_PRESENT:
        fields["value"] = np.nan
    return PlanResult(
        status=status,
        message="; ".join(notes),
        method="conic",
        solver=solver,
        iterations=iterations,
        solve_time=seconds,
        **fields,
    )
