"""optplan: optimistic and Bayesian planning in tabular MDPs, solved two ways and cross-checked.

Public API (re-exports only)::

    import optplan as op
    mdp = op.TabularMDP(P, R, discount=0.9)          # P[s, a, s'], R[s, a]
    res = op.solve_discounted(mdp, method="fast")   # or method="conic", solver="CLARABEL"
    chk = op.cross_check(op.AverageRewardPlanning(mdp))
    rep = op.verify(my_kl_index, "kl_ball", n=2000)  # a user's closed form vs CVXPY
"""

from . import agents, envs, experiments, uncertainty, verification
from .bridges import from_gymnasium, from_mdptoolbox, to_mdptoolbox
from .crosscheck import SOLVER_TOL, cross_check
from .describe import Description, describe
from .fast.kl_ball import kl_ball_index
from .fast.kl_inf import kl_inf_rate
from .fast.l1_ball import l1_ball_index
from .mdp import FiniteHorizonMDP, TabularMDP
from .modelfile import load_model, save_model
from .problems import (
    METHODS,
    SOLVERS,
    AverageRewardPlanning,
    ClippedOptimisticPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    HittingTimes,
    KLBallIndex,
    KLearningTemperature,
    KLInfRate,
    L1BallIndex,
    MomentMatchingVariance,
    OptimisticPlanning,
    UncertaintyBellman,
    solve_average_reward,
    solve_discounted,
    solve_finite_horizon,
)
from .problems.k_temperature import (
    boltzmann_policy,
    k_values,
    soft_values,
    temperature_schedule,
)
from .result import BatchResult, CrossCheck, PlanResult
from .soft import ravi_step
from .verification import DeclaredProblem, VerifyReport, verify

__version__ = "0.1.0"

__all__ = [
    "TabularMDP",
    "from_gymnasium",
    "from_mdptoolbox",
    "to_mdptoolbox",
    "load_model",
    "save_model",
    "agents",
    "envs",
    "experiments",
    "FiniteHorizonMDP",
    "PlanResult",
    "BatchResult",
    "CrossCheck",
    "cross_check",
    "describe",
    "Description",
    "SOLVER_TOL",
    "METHODS",
    "SOLVERS",
    "DiscountedPlanning",
    "AverageRewardPlanning",
    "FiniteHorizonPlanning",
    "HittingTimes",
    "KLBallIndex",
    "kl_ball_index",
    "KLInfRate",
    "kl_inf_rate",
    "L1BallIndex",
    "l1_ball_index",
    "KLearningTemperature",
    "UncertaintyBellman",
    "MomentMatchingVariance",
    "OptimisticPlanning",
    "ClippedOptimisticPlanning",
    "ravi_step",
    "uncertainty",
    "k_values",
    "boltzmann_policy",
    "soft_values",
    "temperature_schedule",
    "solve_discounted",
    "solve_average_reward",
    "solve_finite_horizon",
    "verify",
    "verification",
    "VerifyReport",
    "DeclaredProblem",
]
