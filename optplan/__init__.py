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

from ._version import __version__ as __version__

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
    "RegretLowerBound": ".problems",
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
    # errors: every refusal of bad input is an OptplanError (a ValueError)
    "OptplanError": "._checks",
    "OptplanTypeError": "._checks",
    "MissingDependency": "._checks",
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


def _register_gymnasium_ids() -> None:
    """Register the ``optplan/`` ids with Gymnasium (:func:`optplan.envs.register_gymnasium`)."""
    from .envs.registry import register_gymnasium

    register_gymnasium()


class _ThenRegister:
    """Gymnasium's own loader, then :func:`_register_gymnasium_ids` once its package has run."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its own
        self.loader.exec_module(module)
        if f"{__name__}.envs" in sys.modules:
            return  # Gymnasium loads for optplan.envs, which registers the ids as it finishes
        try:
            _register_gymnasium_ids()
        except Exception as exc:  # never break ``import gymnasium``; say why the ids are missing
            import warnings

            warnings.warn(
                f"optplan could not register its Gymnasium ids (optplan/...): {exc!r}",
                RuntimeWarning,
                stacklevel=2,
            )

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


class _WhenGymnasiumLoads:
    """A meta-path finder that sees ``import gymnasium`` (first time only) and has the
    ``optplan/`` ids registered right after Gymnasium's package runs. ``import optplan`` stays
    light (no gymnasium, no numpy): the environments load with Gymnasium, not before."""

    def find_spec(self, name: str, path=None, target=None):
        if name != "gymnasium":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenRegister(spec.loader)
        return spec


# The ``optplan/`` Gymnasium ids exist after ``import optplan`` whichever of optplan and
# gymnasium is imported first: now if Gymnasium is loaded already (it imported this package for
# ``gymnasium.make("optplan:optplan/DeepSea-v0")``, or the user imported it first), else as soon
# as it is. ``import optplan.envs`` registers them too.
if "gymnasium" in sys.modules:
    _register_gymnasium_ids()
elif not any(isinstance(f, _WhenGymnasiumLoads) for f in sys.meta_path):
    sys.meta_path.insert(0, _WhenGymnasiumLoads())
