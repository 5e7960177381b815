"""A tabular environment whose Gaussian rewards depend on the whole transition ``(s, a, s')``.

The Bayesian-methods environments (bayesian-methods-tabular-rl App. env; docs/sources.md §1) pay
``r ~ N(mean[s, a, s'], sd[s, a, s']^2)``: DeepSea-chain's goal pays only on a *successful*
"right" from the last state, PriorMDP draws one reward law per ``(s, a, s')``, and the agents'
Normal-Gamma posteriors sit on the same ``(s, a, s')`` entries. The true model of
:class:`~optplan.mdp.TabularMDP` keeps the expected reward of a pair,
``R[s, a] = sum_s' P[s, a, s'] mean[s, a, s']``, which is all exact (pseudo-)regret needs.
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, as_array, first_bad, index_str
from ..mdp import TabularMDP
from .tabular import TabularEnv

__all__ = ["TransitionRewardEnv"]


class TransitionRewardEnv(TabularEnv):
    """Simulate ``s' ~ P[s, a, :]`` and ``r ~ N(reward_mean[s, a, s'], reward_sd[s, a, s']^2)``.

    Parameters
    ----------
    P : array_like, shape (S, A, S)
        Transition probabilities (rows of admissible pairs sum to 1).
    reward_mean : array_like, shape (S, A, S)
        Mean reward of each transition (finite).
    reward_sd : array_like, shape (S, A, S)
        Standard deviation of each transition's reward (finite, ``>= 0``; 0 = exact reward).
    discount : float in [0, 1) or None
        The true model's discount (``None``: average reward only).
    initial : array_like, shape (S,), optional
        Start distribution (default: uniform).
    action_mask : array_like of bool, shape (S, A), optional
    name : str, optional

    Attributes
    ----------
    mdp : TabularMDP
        The true model: ``P`` and ``R[s, a] = sum_s' P[s, a, s'] reward_mean[s, a, s']``.
    transition_reward_mean, transition_reward_sd : ndarray (S, A, S), read-only
        The reward law of each transition (zero on masked pairs).
    discount : float or None

    Notes
    -----
    A step draws one uniform for the next state, then one standard normal for the reward
    when its sd is positive (none for an exact reward), both from ``self.np_random``.
    ``info["expected_reward"]`` is ``R[s, a]``, the pair's mean over next states.
    """

    def __init__(
        self,
        P,
        reward_mean,
        reward_sd,
        *,
        discount: float | None,
        initial=None,
        action_mask=None,
        name: str = "",
    ) -> None:
        P = as_array("P", P, 3)
        mean = as_array("reward_mean", reward_mean, 3, readonly=True)
        sd = as_array("reward_sd", reward_sd, 3, readonly=True)
        for label, arr in (("reward_mean", mean), ("reward_sd", sd)):
            if arr.shape != P.shape:
                raise OptplanError(f"{label} has shape {arr.shape}, expected {P.shape} (as P)")
        if (sd < 0).any():
            idx = first_bad(sd < 0)
            raise OptplanError(
                f"reward_sd must be >= 0, got {float(sd[idx])!r} at index {index_str(idx)}"
            )
        R = np.einsum("ijk,ijk->ij", P, mean)
        mdp = TabularMDP(
            P, R, discount=discount, initial=initial, action_mask=action_mask, name=name
        )
        super().__init__(mdp)
        self.transition_reward_mean = mean
        self.transition_reward_sd = sd
        self.discount = mdp.discount

    def _reward(self, pair, next_state, expected, rng) -> float:
        idx = (*pair, next_state)
        sd = float(self.transition_reward_sd[idx])
        mean = float(self.transition_reward_mean[idx])
        return mean + sd * float(rng.standard_normal()) if sd > 0.0 else mean

    def __repr__(self) -> str:
        return f"TransitionRewardEnv({self.mdp!r})"
