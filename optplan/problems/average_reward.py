"""Average-reward (undiscounted, infinite-horizon) planning in a known unichain MDP."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanTypeError
from ..dp import class_gains
from ..mdp import TabularMDP
from ..result import PlanResult
from ._compare import diff, diff_up_to_constant, flow_residual, unique_argmax
from .base import Problem


@dataclass(frozen=True, eq=False)
class AverageRewardPlanning(Problem):
    r"""Solve the average-reward optimality equations (accelerating-ucb-indices-mdp Eq. 1).

    .. math:: \phi + v_x = \max_{a \in A(x)} \Big( r_{x,a} + \sum_y p^a_{x,y} v_y \Big).

    The model's ``discount``, if any, is ignored. The model is assumed unichain (every
    deterministic policy has one recurrent class), as in the paper; the fast path detects a
    policy with several recurrent classes, falls back to relative value iteration, and reports
    status ``multichain`` when that does not converge to a constant gain.

    Conic path: the LP (Derman 1970; Puterman §8.8) ``min phi s.t. phi + v_x >= r_xa + P v``;
    its dual variables are the stationary state-action frequencies ``y[s, a]`` (sum 1), from
    which the policy is read on the states they visit. ``v`` of that LP is unique only up to a
    constant on the recurrent states; when some Bellman inequality is not tight, a second LP
    (``phi`` fixed, ``min sum v`` subject to the same inequalities and ``pi @ v = 0``) returns
    the solution of the optimality equations.

    Fast path: Howard policy iteration (default) or relative value iteration with the
    aperiodicity transform.

    Results: ``value = gain``; ``x = bias`` normalized by ``pi @ bias = 0`` with ``pi`` the
    stationary distribution of the returned policy (so both paths agree exactly when the
    optimal policy is unique, and up to a constant otherwise); ``q[s, a] = r + P bias``;
    ``policy``; ``occupancy[s, a]`` stationary frequencies; ``multiplier = occupancy``.
    """

    mdp: TabularMDP
    stem = "average_reward"

    def __post_init__(self):
        if not isinstance(self.mdp, TabularMDP):
            raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(self.mdp).__name__}")

    def policy_gain(self, policy: np.ndarray) -> float:
        """Gain of a deterministic policy (the worst recurrent class's if it is multichain)."""
        return float(class_gains(self.mdp.P, self.mdp.R, policy).min())

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        out = {
            "value": diff(a.value, b.value),
            "gain": diff(a.gain, b.gain),
            "x": diff_up_to_constant(a.bias, b.bias),
            "policy_value": diff(self.policy_gain(a.policy), self.policy_gain(b.policy)),
            "occupancy_value": diff(*(float(np.sum(r.occupancy * self.mdp.R)) for r in (a, b))),
        }
        zero = np.zeros(self.mdp.n_states)
        out["multiplier_feasibility"] = (
            max(
                max(flow_residual(r.occupancy, self.mdp.P, zero), abs(r.occupancy.sum() - 1.0))
                for r in (a, b)
            ),
            1.0,
        )
        if unique_argmax(a.q):
            out["multiplier"] = diff(a.occupancy, b.occupancy)
        return out
