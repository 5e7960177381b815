"""Problem objects: *what* is solved (inputs, validation); ``conic``/``fast`` say how."""

from __future__ import annotations

from ..mdp import FiniteHorizonMDP, TabularMDP
from ..result import PlanResult
from .average_reward import AverageRewardPlanning
from .base import DEFAULT_SOLVER, METHODS, SOLVERS, Problem
from .clipped_optimistic import ClippedOptimisticPlanning
from .criteria import CONTINUING, CRITERIA, planning_problem, resolve_criterion
from .discounted import DiscountedPlanning
from .finite_horizon import FiniteHorizonPlanning
from .hitting_time import HittingTimes
from .k_temperature import KLearningTemperature
from .kl_ball import KLBallIndex
from .kl_inf import KLInfRate
from .l1_ball import L1BallIndex
from .moment_matching import MomentMatchingVariance
from .optimistic import OptimisticPlanning
from .regret_lower_bound import RegretLowerBound
from .ube import UncertaintyBellman

__all__ = [
    "Problem",
    "METHODS",
    "SOLVERS",
    "DEFAULT_SOLVER",
    "DiscountedPlanning",
    "AverageRewardPlanning",
    "FiniteHorizonPlanning",
    "HittingTimes",
    "KLBallIndex",
    "KLInfRate",
    "L1BallIndex",
    "KLearningTemperature",
    "UncertaintyBellman",
    "MomentMatchingVariance",
    "OptimisticPlanning",
    "ClippedOptimisticPlanning",
    "RegretLowerBound",
    "CRITERIA",
    "CONTINUING",
    "planning_problem",
    "resolve_criterion",
    "solve_discounted",
    "solve_average_reward",
    "solve_finite_horizon",
]


def solve_discounted(
    mdp: TabularMDP, method: str = "fast", solver: str | None = None, **options
) -> PlanResult:
    """Solve ``DiscountedPlanning(mdp)``; see :meth:`Problem.solve` for the arguments."""
    return DiscountedPlanning(mdp).solve(method=method, solver=solver, **options)


def solve_average_reward(
    mdp: TabularMDP,
    method: str = "fast",
    solver: str | None = None,
    multichain: str = "refuse",
    **options,
) -> PlanResult:
    """Solve ``AverageRewardPlanning(mdp, multichain)`` (the model's discount is ignored)."""
    return AverageRewardPlanning(mdp, multichain).solve(method=method, solver=solver, **options)


def solve_finite_horizon(
    mdp: FiniteHorizonMDP, method: str = "fast", solver: str | None = None, **options
) -> PlanResult:
    """Solve ``FiniteHorizonPlanning(mdp)`` by backward induction or its LP."""
    return FiniteHorizonPlanning(mdp).solve(method=method, solver=solver, **options)
