"""optplan: optimistic and Bayesian planning in tabular MDPs, solved two ways and cross-checked.

Public API (re-exports only)::

    import optplan as op
    mdp = op.TabularMDP(P, R, discount=0.9)          # P[s, a, s'], R[s, a]
    res = op.solve_discounted(mdp, method="fast")   # or method="conic", solver="CLARABEL"
    chk = op.cross_check(op.AverageRewardPlanning(mdp))
    rep = op.verify(my_kl_index, "kl_ball", n=2000)  # a user's closed form vs CVXPY

Every name is loaded on first use (PEP 562 ``__getattr__``): ``import optplan`` itself imports
nothing heavy (no scipy, cvxpy, numba, gymnasium, matplotlib, ray or hypothesis;
``tests/test_startup.py`` checks it), so ``optplan --help`` and scripts start at once.
"""

from __future__ import annotations

import importlib
import sys

__version__ = "0.1.0"

#: Public name -> the module (relative to this package) that defines it.
_LAZY = {
    # subpackages
    "agents": None,
    "envs": None,
    "experiments": None,
    "sweeps": None,
    "plots": None,
    "uncertainty": None,
    "verification": None,
    # models, results, files, bridges
    "TabularMDP": ".mdp",
    "FiniteHorizonMDP": ".mdp",
    "PlanResult": ".result",
    "BatchResult": ".result",
    "CrossCheck": ".result",
    "load_model": ".modelfile",
    "save_model": ".modelfile",
    "from_gymnasium": ".bridges",
    "from_mdptoolbox": ".bridges",
    "to_mdptoolbox": ".bridges",
    "describe": ".hardness",
    "Description": ".hardness",
    "cross_check": ".crosscheck",
    "SOLVER_TOL": ".crosscheck",
    # problems
    "METHODS": ".problems",
    "SOLVERS": ".problems",
    "AverageRewardPlanning": ".problems",
    "ClippedOptimisticPlanning": ".problems",
    "DiscountedPlanning": ".problems",
    "FiniteHorizonPlanning": ".problems",
    "HittingTimes": ".problems",
    "KLBallIndex": ".problems",
    "KLearningTemperature": ".problems",
    "KLInfRate": ".problems",
    "L1BallIndex": ".problems",
    "MomentMatchingVariance": ".problems",
    "OptimisticPlanning": ".problems",
    "UncertaintyBellman": ".problems",
    "solve_average_reward": ".problems",
    "solve_discounted": ".problems",
    "solve_finite_horizon": ".problems",
    "boltzmann_policy": ".problems.k_temperature",
    "k_values": ".problems.k_temperature",
    "soft_values": ".problems.k_temperature",
    "temperature_schedule": ".problems.k_temperature",
    # vectorized fast paths, soft Bellman pieces
    "kl_ball_index": ".fast.kl_ball",
    "kl_inf_rate": ".fast.kl_inf",
    "l1_ball_index": ".fast.l1_ball",
    "ravi_step": ".soft",
    # verification
    "verify": ".verification",
    "VerifyReport": ".verification",
    "DeclaredProblem": ".verification",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    """Load a public name from its module on first use (then it is an ordinary attribute)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'optplan' has no attribute {name!r}")
    where = _LAZY[name]
    if where is None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if "gymnasium" in sys.modules:
    # Gymnasium is loaded already (``gymnasium.make("optplan:optplan/DeepSea-v0")`` imports this
    # package, or the user imported gymnasium first): register the ``optplan/`` ids now, as
    # ``import optplan.envs`` does; otherwise they are registered when ``op.envs`` loads.
    from .envs.registry import register_gymnasium

    register_gymnasium()
