"""WideNarrow: the environment of bayesian-methods-tabular-rl (App. env) built to probe the
factored posteriors of BQL, UBE and moment matching.

``2n + 1`` states, deterministic transitions, rewards Gaussian per transition. With states
``0 .. 2n`` (docs/sources.md §1, "Environments"; the public code ``Environments.WideNarrow``):

* a *wide* state ``2k`` (``k < n``) has ``w`` actions, all moving to ``2k + 1``: action 0
  pays ``N(mu_high, sigma^2)`` (0.5, 1), every other ``N(mu_low, sigma^2)`` (0, 1);
* a *narrow* state ``2k + 1`` has one action (0), to ``2k + 2``, paying ``N(mu_low, sigma^2)``;
* the last state ``2n`` has one action (0), back to state 0, paying exactly 0.

The start is state 0. The single-action states are masked (``mdp.action_mask``): only action 0
is admissible there.
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, check_int, check_positive, check_real
from ..mdp import check_model_size
from .transition_rewards import TransitionRewardEnv

__all__ = ["WideNarrow", "wide_narrow_arrays"]


def wide_narrow_arrays(n: int, w: int, mu_high: float, mu_low: float, sigma: float):
    """``(P, reward_mean, reward_sd, action_mask)`` of :class:`WideNarrow`: ``(2n+1, w, 2n+1)``
    arrays (rows of masked pairs are zero) and the ``(2n+1, w)`` mask. Inputs unchecked."""
    S = 2 * n + 1
    s = np.arange(S)
    wide = s[:-1:2]  # 0, 2, ..., 2n - 2
    single = np.setdiff1d(s, wide)  # the narrow states and the last one
    P = np.zeros((S, w, S))
    P[wide, :, wide + 1] = 1.0
    P[s[:-1], 0, s[:-1] + 1] = 1.0
    P[S - 1, 0, 0] = 1.0
    mask = np.zeros((S, w), dtype=bool)
    mask[wide, :] = True
    mask[single, 0] = True
    mean = np.zeros((S, w, S))
    sd = np.zeros((S, w, S))
    mean[wide, :, wide + 1] = mu_low
    mean[wide, 0, wide + 1] = mu_high
    sd[wide, :, wide + 1] = sigma
    narrow = s[1::2]
    mean[narrow, 0, narrow + 1] = mu_low
    sd[narrow, 0, narrow + 1] = sigma
    return P, mean, sd, mask


class WideNarrow(TransitionRewardEnv):
    """The WideNarrow MDP of bayesian-methods-tabular-rl (module docstring).

    Parameters
    ----------
    n : int >= 1
        Number of wide-narrow pairs ``N``; ``2n + 1`` states.
    w : int >= 2
        Number of actions in a wide state ``W``.
    mu_high, mu_low : float, default 0.5, 0.0
        Mean reward of action 0 in a wide state, and of every other noisy transition.
    sigma : float >= 0, default 1.0
        Reward sd of every transition but the last state's (exactly 0).
    discount : float in [0, 1) or None, default 0.9
        The true model's discount (the draft's ``gamma = 0.9``); ``None``: average reward.

    Attributes
    ----------
    mdp : TabularMDP
        The true model, with ``action_mask`` (only action 0 outside the wide states).
    n, w, mu_high, mu_low, sigma : as given
    transition_reward_mean, transition_reward_sd : ndarray (2n+1, w, 2n+1), read-only
    discount : float or None

    Notes
    -----
    Where the sources differ (docs/sources.md §1, §2), this class follows the public code:

    * 0-indexed states: the wide states are the *even* ones (the draft counts from 1 and
      calls them odd), and the last state ``2n`` returns to 0 with reward exactly 0;
    * the high-reward action is action 0 in every wide state (the repository README swaps
      ``mu_l`` and ``mu_h``);
    * a narrow state pays ``N(mu_low, sigma^2)`` (the draft; the code has a separate
      ``(mu_n, sigma_n)``, set to ``(0, 1)`` = ``(mu_low, sigma)`` in every experiment);
    * single-action states are masked in ``mdp.action_mask`` (the code registers only
      ``(s, 0)`` there and fills the other rows with a large negative reward for planning).
    """

    def __init__(
        self,
        n: int = 1,
        w: int = 6,
        *,
        mu_high: float = 0.5,
        mu_low: float = 0.0,
        sigma: float = 1.0,
        discount: float | None = 0.9,
    ) -> None:
        n = check_int("n", n, 1)
        w = check_int("w", w, None)
        if w < 2:
            raise OptplanError(f"w must be an integer >= 2 (actions in a wide state), got {w!r}")
        check_model_size(2 * n + 1, w, subject=f"n={n}, w={w}")
        mu_high = check_real("mu_high", mu_high)
        mu_low = check_real("mu_low", mu_low)
        sigma = check_positive("sigma", sigma, allow_zero=True)
        P, mean, sd, mask = wide_narrow_arrays(n, w, mu_high, mu_low, sigma)
        initial = np.zeros(2 * n + 1)
        initial[0] = 1.0
        super().__init__(
            P,
            mean,
            sd,
            discount=discount,
            initial=initial,
            action_mask=mask,
            name=f"wide-narrow-{n}-{w}",
        )
        self.n, self.w = n, w
        self.mu_high, self.mu_low, self.sigma = mu_high, mu_low, sigma

    def __repr__(self) -> str:
        extra = ""
        if (self.mu_high, self.mu_low, self.sigma) != (0.5, 0.0, 1.0):
            extra = f", mu_high={self.mu_high}, mu_low={self.mu_low}, sigma={self.sigma}"
        return f"WideNarrow(n={self.n}, w={self.w}{extra}, discount={self.discount})"
