"""Discounted planning in a known tabular MDP."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanError, OptplanTypeError
from ..dp import evaluate_discounted, policy_model
from ..mdp import TabularMDP
from ..result import PlanResult
from ._compare import (
    answer_errors,
    diff,
    flow_residual,
    occupancy_errors,
    reward_scale,
    unique_argmax,
)
from .base import Problem


@dataclass(frozen=True, eq=False)
class DiscountedPlanning(Problem):
    r"""Maximize the expected discounted return of a known ``TabularMDP``.

    The LP (Puterman §6.9; docs/math.md "Discounted"):

    .. math:: \min_V\ w^\top V \quad \text{s.t.}\quad
              V_s \ge R_{sa} + \gamma \sum_{s'} P_{sas'} V_{s'} \quad \forall\, a \in A(s),

    whose dual variables, scaled by ``1 - gamma``, are the normalized discounted state-action
    occupancy of an optimal policy started from ``w``. The weights ``w`` are :attr:`weights`:
    the model's ``initial`` when it has full support, otherwise ``(initial + uniform) / 2`` so
    that ``V`` is determined in every state. The fast path is policy iteration (default) or
    value iteration; both report the same occupancy for the same ``w``.

    Results: ``value = initial @ V``; ``x = values = V``; ``q``; ``policy``;
    ``occupancy[s, a]`` (sums to 1); ``multiplier = occupancy``.
    """

    mdp: TabularMDP
    stem = "discounted"
    #: with tiny rewards (1e-6) the optimal occupancy is unique but Clarabel fixes it only to
    #: its absolute tolerance: a user's occupancy passes when it is a feasible dual attaining
    #: the optimal value
    answer_certified_by = {"multiplier": ("multiplier_feasibility", "multiplier_value")}

    def __post_init__(self):
        if not isinstance(self.mdp, TabularMDP):
            raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(self.mdp).__name__}")
        if self.mdp.discount is None:
            raise OptplanError(
                "mdp.discount is None: the discounted criterion needs a discount in [0, 1) "
                "(use mdp.with_discount(0.95), or solve_average_reward)"
            )

    @property
    def weights(self) -> np.ndarray:
        """Full-support start weights of the LP objective (see the class docstring)."""
        rho = self.mdp.initial
        if (rho > 0).all():
            return rho
        return 0.5 * (rho + 1.0 / rho.size)

    def policy_values(self, policy: np.ndarray) -> np.ndarray:
        """Exact ``V^pi`` of a deterministic policy in this model."""
        mdp = self.mdp  # P_rows: the (S·A, S) rows, dense or sparse
        return evaluate_discounted(*policy_model(mdp.P_rows, mdp.R, policy), mdp.discount)

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        out = {"value": diff(a.value, b.value), "x": diff(a.values, b.values)}
        out["policy_value"] = diff(self.policy_values(a.policy), self.policy_values(b.policy))
        scale = 1.0 / (1.0 - self.mdp.discount)
        occ_value = [scale * float(np.sum(r.occupancy * self.mdp.R)) for r in (a, b)]
        out["occupancy_value"] = diff(*occ_value)
        gamma = self.mdp.discount
        source = (1.0 - gamma) * self.weights
        out["multiplier_feasibility"] = (
            max(flow_residual(r.occupancy, self.mdp.P_rows, source, gamma) for r in (a, b)),
            1.0,
        )
        if unique_argmax(a.q):
            out["multiplier"] = diff(a.occupancy, b.occupancy)
        return out

    def answer_x(self, result: PlanResult):
        return result.values

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value and ``V`` on the scale ``max |R| / (1 - gamma)`` at least; the occupancy
        (:func:`~optplan.problems._compare.occupancy_errors`)."""
        mdp = self.mdp
        gamma = mdp.discount
        floor = reward_scale(mdp.R, mdp.action_mask) / (1.0 - gamma)
        out = answer_errors(self, answer, reference, floor)
        if answer.multiplier is not None:
            source = (1.0 - gamma) * self.weights
            out |= occupancy_errors(
                self, answer, reference, source, gamma, mdp.R, mdp.action_mask, 1.0 / (1.0 - gamma)
            )
        return out
