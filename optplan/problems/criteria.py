"""The planning criteria and the one map from (model, criterion) to a planning problem.

Used by the command line (``optplan solve``), the oracle agent and the experiment loop's
regret, so a criterion means the same thing everywhere.
"""

from __future__ import annotations

from .._checks import OptplanError, OptplanTypeError, check_choice
from ..mdp import CONTINUING, CRITERIA, FiniteHorizonMDP, TabularMDP
from .average_reward import AverageRewardPlanning
from .discounted import DiscountedPlanning
from .finite_horizon import FiniteHorizonPlanning

__all__ = ["CRITERIA", "CONTINUING", "resolve_criterion", "planning_problem"]


def resolve_criterion(model, criterion: str | None = None) -> str:
    """``criterion``, checked against ``model``; ``None`` gives the model's own.

    A model's own criterion: ``"finite_horizon"`` for a ``FiniteHorizonMDP``, ``"discounted"``
    for a ``TabularMDP`` with a discount, ``"average"`` without one. ``"average"`` applies to a
    discounted model too (its discount is then ignored); ``"discounted"`` needs a discount.
    """
    if not isinstance(model, (TabularMDP, FiniteHorizonMDP)):
        raise OptplanTypeError(
            f"model must be a TabularMDP or FiniteHorizonMDP, got {type(model).__name__}"
        )
    if criterion is None:
        return model.criterion
    check_choice("criterion", criterion, CRITERIA + (None,))
    if isinstance(model, FiniteHorizonMDP) != (criterion == "finite_horizon"):
        raise OptplanError(f"criterion {criterion!r} does not apply to {model!r}")
    if criterion == "discounted" and model.discount is None:
        raise OptplanError(f"criterion 'discounted' needs a model with a discount, got {model!r}")
    return criterion


def planning_problem(
    model, criterion: str | None = None, *, discount: float | None = None, horizon=None
):
    """The planning problem of ``model`` under ``criterion`` (default: the model's own).

    Parameters
    ----------
    model : TabularMDP or FiniteHorizonMDP
    criterion : {"average", "discounted", "finite_horizon"}, optional
    discount : float, optional
        ``"discounted"``: overrides the model's discount (needed when it has none).
    horizon : int, optional
        ``"finite_horizon"`` on a stationary model: repeat it over ``horizon`` layers.

    Returns
    -------
    AverageRewardPlanning, DiscountedPlanning or FiniteHorizonPlanning
    """
    if criterion == "finite_horizon" and isinstance(model, TabularMDP) and horizon is not None:
        return FiniteHorizonPlanning(FiniteHorizonMDP.from_stationary(model, horizon))
    if criterion == "discounted" and isinstance(model, TabularMDP) and discount is not None:
        model = model.with_discount(discount)
    criterion = resolve_criterion(model, criterion)
    if criterion == "finite_horizon":
        return FiniteHorizonPlanning(model)
    if criterion == "discounted":
        return DiscountedPlanning(model)
    return AverageRewardPlanning(model.with_discount(None))
