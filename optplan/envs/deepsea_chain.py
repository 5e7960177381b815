"""DeepSea-chain: the continuing chain of bayesian-methods-tabular-rl (App. env "DeepSea").

Not bsuite's grid (:class:`~optplan.envs.DeepSea`): ``n`` states in a row, two actions, no
rows, no horizon, no resets. With ``delta = 0.1 exp(-n / 4)`` and states ``0 .. n-1``
(docs/sources.md §1, "Environments", the public code ``Environments.DeepSea`` being authoritative):

* **left** (action 0): move to ``max(s - 1, 0)``, reward ``N(0, delta^2)``;
* **right** (action 1) from ``s < n - 1``: to ``s + 1`` with probability ``1 - 1/n``, else
  to ``max(s - 1, 0)`` (a failed "right" moves *left*); reward ``N(-delta, delta^2)`` either
  way;
* **right** from the last state ``n - 1``: with probability ``1 - 1/n`` back to state 0 with
  reward ``N(1, delta^2)`` (the goal), else to ``n - 2`` with reward ``N(-delta, delta^2)``.

The start is state 0. ``delta`` keeps "right" optimal everywhere (the draft: at least up to
``n = 40``; its code refuses ``n <= 2`` and ``n >= 40``, and so does this class).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import OptplanError, check_int
from .transition_rewards import TransitionRewardEnv

__all__ = ["DeepSeaChain", "deepsea_chain_arrays", "LEFT", "RIGHT"]

LEFT, RIGHT = 0, 1

#: The draft's bounds on ``n``: ``2 < n < 40``.
N_MIN, N_MAX = 3, 39


def deepsea_chain_arrays(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(P, reward_mean, reward_sd, delta)`` of :class:`DeepSeaChain` (``(n, 2, n)`` arrays,
    rewards per ``(s, a, s')``). ``n`` is not checked here."""
    delta = 0.1 * math.exp(-n / 4)
    p = 1.0 - 1.0 / n
    s = np.arange(n)
    left = np.maximum(s - 1, 0)
    P = np.zeros((n, 2, n))
    P[s, LEFT, left] = 1.0
    P[s[:-1], RIGHT, s[:-1] + 1] = p
    P[s[:-1], RIGHT, left[:-1]] += 1.0 - p  # at s = 0 the failed move stays in 0
    P[n - 1, RIGHT, 0] = p
    P[n - 1, RIGHT, n - 2] = 1.0 - p
    mean = np.zeros((n, 2, n))
    mean[:, RIGHT, :] = -delta
    mean[n - 1, RIGHT, 0] = 1.0
    sd = np.full((n, 2, n), delta)
    return P, mean, sd, delta


class DeepSeaChain(TransitionRewardEnv):
    """The continuing DeepSea chain of bayesian-methods-tabular-rl (module docstring).

    Parameters
    ----------
    n : int, 3 <= n <= 39
        Number of states ``N`` (the draft's ``2 < N < 40``).
    discount : float in [0, 1) or None, default 0.9
        The true model's discount: the draft plans, and scores its oracle, at ``gamma = 0.9``.
        ``None`` leaves only the average-reward criterion.

    Attributes
    ----------
    mdp : TabularMDP
        The true model, ``R[s, a] = sum_s' P[s, a, s'] mean(s, a, s')``: ``0`` for left,
        ``-delta`` for right, ``(1 - 1/n) - delta / n`` for right at the last state.
    n : int
    delta : float
        ``0.1 exp(-n / 4)``.
    transition_reward_mean, transition_reward_sd : ndarray (n, 2, n), read-only
    discount : float or None

    Notes
    -----
    Where the sources differ (docs/sources.md §1 and "Ambiguities"), this class follows the public
    code and the write-up:

    * every reward is Gaussian with sd ``delta``, left's included (Ambiguity 6: the draft's
      appendix has deterministic rewards, ``0`` for left and ``-delta`` for right);
    * a failed "right" from the last state moves to ``n - 2`` (the code; the draft's figure
      leaves it implicit), and "left" from state 0 stays in 0;
    * actions are fixed, 0 = left and 1 = right in every state (no per-state action mapping,
      unlike bsuite's grid);
    * continuing from state 0, with the goal wrapping to state 0 (bsuite: episodic, a failed
      "right" stays in its column, move cost ``0.01 / size``).
    """

    def __init__(self, n: int = 4, discount: float | None = 0.9) -> None:
        n = check_int("n", n)
        if not N_MIN <= n <= N_MAX:
            raise OptplanError(
                f"n must satisfy 2 < n < 40 (the draft's bounds on DeepSea-chain), got {n!r}"
            )
        P, mean, sd, delta = deepsea_chain_arrays(n)
        initial = np.zeros(n)
        initial[0] = 1.0
        super().__init__(P, mean, sd, discount=discount, initial=initial, name=f"deepsea-chain-{n}")
        self.n = n
        self.delta = delta

    def __repr__(self) -> str:
        return f"DeepSeaChain(n={self.n}, discount={self.discount})"
