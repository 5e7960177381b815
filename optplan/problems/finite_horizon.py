"""Finite-horizon planning in a known layered MDP."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanTypeError
from ..dp import evaluate_layered
from ..mdp import FiniteHorizonMDP
from ..result import PlanResult
from ._compare import answer_errors, diff, reward_scale
from .base import Problem


@dataclass(frozen=True, eq=False)
class FiniteHorizonPlanning(Problem):
    r"""Maximize the expected total reward over ``L`` layers of a ``FiniteHorizonMDP``.

    Fast path: backward induction ``V_L = 0``, ``Q_l = R_l + P_l V_{l+1}``,
    ``V_l = max_a Q_l``. Conic path: the LP
    ``min sum_{l,s} V[l, s] s.t. V[l, s] >= R[l, s, a] + P[l, s, a] @ V[l+1]`` (all layers and
    states weighted equally, so ``V`` is determined everywhere); its dual is returned as
    ``multiplier``. ``occupancy[l, s, a]`` is the forward state-action distribution of the
    returned policy from ``initial`` (both paths compute it the same way from their policy).

    Results: ``value = initial @ V[0]``; ``x = values = V[l, s]``; ``q[l, s, a]``;
    ``policy[l, s]``.
    """

    mdp: FiniteHorizonMDP
    stem = "finite_horizon"

    def __post_init__(self):
        if not isinstance(self.mdp, FiniteHorizonMDP):
            raise OptplanTypeError(f"mdp must be a FiniteHorizonMDP, got {type(self.mdp).__name__}")

    def policy_values(self, policy: np.ndarray) -> np.ndarray:
        """Exact ``V^pi[l, s]`` of a deterministic layered policy."""
        return evaluate_layered(self.mdp.P, self.mdp.R, policy)

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        return {
            "value": diff(a.value, b.value),
            "x": diff(a.values, b.values),
            "policy_value": diff(self.policy_values(a.policy), self.policy_values(b.policy)),
        }

    def answer_x(self, result: PlanResult):
        return result.values

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value and ``V`` on the reward scale ``L max |R|`` at least."""
        floor = self.mdp.horizon * reward_scale(self.mdp.R, self.mdp.action_mask)
        return answer_errors(self, answer, reference, floor)
