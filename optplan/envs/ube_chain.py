r"""The two-action chain of uncertainty-bellman-equation §3.2 (Figure 1), used for its Fig. 2.

At the root the agent chooses between

* **action 0** (the paper's "action 1"): reward ``r ~ N(mu1, sigma^2)``, then the episode ends;
* **action 1** (the paper's "action 2"): reward ``r ~ N(mu2, sigma^2 (1 - gamma^2))`` and a
  deterministic walk along a chain of ``length`` distinct states, each with one admissible
  action paying ``N(mu2, sigma^2 (1 - gamma^2))``; the episode ends after the last one.

Transitions are known and deterministic; only the mean rewards are unknown. The paper's chain
is infinite: a chain episode then has discounted return of variance
``sigma^2 (1 - gamma^2) sum_k gamma^(2k) = sigma^2``, the same as action 0's, while a count
bonus compounded along it is ``sum_k gamma^k sigma sqrt(1 - gamma^2) / sqrt(n)
= sqrt((1 + gamma) / (1 - gamma)) sigma / sqrt(n)``, i.e. ``sqrt(19)`` times action 0's at
``gamma = 0.9``. Truncated after ``H = length`` chain states (``H + 1`` rewards in all) they
are ``sigma^2 (1 - gamma^(2(H+1)))`` and ``sqrt((1 + gamma)/(1 - gamma)) (1 - gamma^(H+1))``
times action 0's bonus: with the default ``H = 50`` and ``gamma = 0.9``, ``1 - 2.1e-5`` of the
infinite chain's variance and ``1 - 4.6e-3`` of its bonus factor (4.339 for 4.359);
:attr:`UBEChain.return_variance` and :attr:`UBEChain.bonus_factor` give the exact numbers.
``length = 300`` brings both below ``1e-13``.

Two representations of the same process (``layered``):

``layered=True`` (default; the paper's DAG setting)
    a :class:`~optplan.mdp.FiniteHorizonMDP` with ``L = length + 1`` layers and two states:
    ``0`` = on the chain (the root at layer 0) and ``1`` = terminated (absorbing, reward 0,
    only action 0 admissible). On the chain only action 1 is admissible after the root.
    Observations are ``0``/``1``, the layer is ``info["layer"]``. The episode ends at once
    after action 0 (``terminated=True`` at layer 1) or after the ``L``-th step.
``layered=False``
    a discounted :class:`~optplan.mdp.TabularMDP` (``discount = gamma``) with ``length + 2``
    states: ``0`` the root, ``1 .. length`` the chain, ``length + 1`` the absorbing terminal;
    the episode ends on arrival at the terminal. For agents in continuing mode.

Regret. The run loop's metrics (:mod:`optplan.experiments.metrics`) score the layered form
by the *undiscounted* action gaps of its finite-horizon model; every chain step has a single
action (gap 0), so an episode's regret is the root gap ``V*(root) - Q*(root, a)`` in
undiscounted return. The paper's regret is the pseudo-regret of the root choice in
*discounted* return, :attr:`UBEChain.root_gaps`. The two are equal (1 for the chain, 0 for
action 0) when ``mu2 = 0``, which is the paper's Fig. 2 setting; for ``mu2 != 0`` they differ,
and the continuing form's ``gap_regret`` (discounted ``Q*``) is the paper's exactly.
"""

from __future__ import annotations

import operator
from typing import Any

import gymnasium as gym
import numpy as np

from .._checks import OptplanError, check_int, check_positive, check_real
from ..mdp import FiniteHorizonMDP, TabularMDP, check_model_size
from .tabular import TabularEnv

__all__ = ["UBEChain", "ube_chain_model"]

ON_CHAIN, TERMINATED = 0, 1  # states of the layered form
STOP, CHAIN = 0, 1  # actions: the paper's "action 1" and "action 2"


def ube_chain_model(
    length: int, mu1: float, mu2: float, sigma: float, discount: float, layered: bool = True
) -> tuple[FiniteHorizonMDP | TabularMDP, np.ndarray]:
    """The true model of :class:`UBEChain` and the reward noise sd of every pair.

    Returns
    -------
    mdp : FiniteHorizonMDP (``L = length + 1``, ``S = 2``) or TabularMDP (``S = length + 2``)
    reward_sd : ndarray, ``(L, 2, 2)`` or ``(length + 2, 2)``, read-only
        ``sigma`` for the root's action 0, ``sigma sqrt(1 - gamma^2)`` on the chain (root
        action 1 included), 0 for the terminated state and the masked pairs.
    """
    chain_sd = sigma * np.sqrt(1.0 - discount**2)
    if layered:
        L = length + 1
        P = np.zeros((L, 2, 2, 2))
        P[:, ON_CHAIN, CHAIN, ON_CHAIN] = 1.0
        P[:, ON_CHAIN, STOP, TERMINATED] = 1.0  # admissible at the root only
        P[:, TERMINATED, :, TERMINATED] = 1.0
        R = np.zeros((L, 2, 2))
        R[:, ON_CHAIN, CHAIN] = mu2
        R[0, ON_CHAIN, STOP] = mu1
        mask = np.zeros((L, 2, 2), dtype=bool)
        mask[:, ON_CHAIN, CHAIN] = True
        mask[0, ON_CHAIN, STOP] = True
        mask[:, TERMINATED, STOP] = True
        sd = np.zeros((L, 2, 2))
        sd[:, ON_CHAIN, CHAIN] = chain_sd
        sd[0, ON_CHAIN, STOP] = sigma
        initial = np.array([1.0, 0.0])
        mdp = FiniteHorizonMDP(P, R, initial=initial, action_mask=mask, name=f"ube-chain-{length}")
    else:
        S = length + 2
        term = S - 1
        chain = np.arange(S - 1)  # the root and the chain states
        P = np.zeros((S, 2, S))
        P[chain, CHAIN, chain + 1] = 1.0
        P[:, STOP, term] = 1.0
        P[term, CHAIN, term] = 1.0
        R = np.zeros((S, 2))
        R[chain, CHAIN] = mu2
        R[0, STOP] = mu1
        mask = np.zeros((S, 2), dtype=bool)
        mask[chain, CHAIN] = True
        mask[0, STOP] = True
        mask[term, STOP] = True
        sd = np.zeros((S, 2))
        sd[chain, CHAIN] = chain_sd
        sd[0, STOP] = sigma
        initial = np.zeros(S)
        initial[0] = 1.0
        mdp = TabularMDP(
            P, R, discount=discount, initial=initial, action_mask=mask, name=f"ube-chain-{length}"
        )
    sd.setflags(write=False)
    return mdp, sd


class UBEChain(TabularEnv):
    """The §3.2 example of uncertainty-bellman-equation: a stopping action against a chain.

    Parameters
    ----------
    length : int >= 1, default 50
        ``H``, the number of chain states after the root (see the module docstring for how
        far the truncation is from the paper's infinite chain).
    mu1, mu2 : float, default 1.0, 0.0
        Mean reward of action 0 and of every chain step.
    sigma : float > 0, default 1.0
        Action 0's reward sd; chain rewards have sd ``sigma sqrt(1 - gamma^2)``.
    discount : float in [0, 1), default 0.9
        ``gamma``: it sets the chain's reward noise, the discounted values
        (:attr:`root_q`) and the agents' planning discount.
    layered : bool, default True
        ``True``: a finite-horizon model (two states per layer); ``False``: a discounted
        tabular model with one state per chain position (see the module docstring).

    Attributes
    ----------
    mdp : FiniteHorizonMDP or TabularMDP
        The true model (expected rewards), for exact regret.
    reward_sd : ndarray, read-only
        The known noise sd of every pair, shaped like ``mdp.R`` (agents are told it, the
        paper's "improper Gaussian prior" setting).
    discount : float
    length, mu1, mu2, sigma, layered
    root_q : ndarray (2,)
        Discounted ``Q*(root, a)``: ``mu1`` and ``mu2 (1 - gamma^(H+1)) / (1 - gamma)``.
    root_gaps : ndarray (2,)
        ``max root_q - root_q``: the paper's per-episode pseudo-regret of each root action.
    return_variance : ndarray (2,)
        Variance of each root action's discounted return: ``sigma^2`` and
        ``sigma^2 (1 - gamma^(2(H+1)))``.
    bonus_factor : float
        Action 1's compounded count bonus over action 0's at equal counts,
        ``sqrt((1+gamma)/(1-gamma)) (1 - gamma^(H+1))``.

    Notes
    -----
    ``info`` carries ``"expected_reward"`` and ``"layer"`` (of the returned observation: the
    steps taken in the episode). Reward noise comes from ``self.np_random``, one standard
    normal draw per step and nothing else (the start is fixed), so a run's rewards are the
    stream's draws in order (:mod:`optplan.experiments.chain_batch` relies on it).
    """

    def __init__(
        self,
        length: int = 50,
        mu1: float = 1.0,
        mu2: float = 0.0,
        sigma: float = 1.0,
        discount: float = 0.9,
        layered: bool = True,
    ) -> None:
        length = check_int("length", length)
        if layered:
            check_model_size(2, 2, length + 1, subject=f"length={length}")
        else:
            check_model_size(length + 2, 2, 1, subject=f"length={length}")
        mu1 = check_real("mu1", mu1)
        mu2 = check_real("mu2", mu2)
        sigma = check_positive("sigma", sigma)
        gamma = check_real("discount", discount, 0.0, 1.0, high_open=True)
        if not isinstance(layered, (bool, np.bool_)):
            raise OptplanError(f"layered must be a bool, got {layered!r}")
        mdp, sd = ube_chain_model(length, mu1, mu2, sigma, gamma, bool(layered))
        super().__init__(mdp)
        self.length, self.mu1, self.mu2, self.sigma = length, mu1, mu2, sigma
        self.discount = gamma
        self.layered = bool(layered)
        self.reward_sd = sd
        g = gamma ** (length + 1)
        self.root_q = np.array([mu1, mu2 * (1.0 - g) / (1.0 - gamma)])
        self.root_gaps = self.root_q.max() - self.root_q
        self.return_variance = np.array([sigma**2, sigma**2 * (1.0 - g * g)])
        self.bonus_factor = float(np.sqrt((1.0 + gamma) / (1.0 - gamma)) * (1.0 - g))
        for arr in (self.root_q, self.root_gaps, self.return_variance):
            arr.setflags(write=False)
        self._R = mdp.R
        self._pos = 0  # chain position: 0 = root, 1..length = chain, length + 1 = ended

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Start at the root; ``seed`` reseeds ``self.np_random``.

        Returns ``(0, {"layer": 0})``.
        """
        gym.Env.reset(self, seed=seed)  # the start is fixed: no draw for it
        self._state, self._t, self._done = 0, 0, False
        self._pos = 0
        return 0, {"layer": 0}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Take ``action``: 0 (stop, root only) or 1 (along the chain).

        Returns
        -------
        next_state : int
            Layered: ``0`` on the chain, ``1`` terminated. Continuing: the chain position,
            ``length + 1`` for the terminal.
        reward : float
            The pair's mean plus its noise sd times a standard normal draw.
        terminated : bool
            After action 0, or after the last chain state.
        truncated : bool
            Always ``False``.
        info : dict
            ``"expected_reward"``, ``"layer"``.

        Raises
        ------
        ValueError
            If ``action`` is not an admissible action index here.
        RuntimeError
            If called before :meth:`reset` or after the episode ended.
        """
        pos = self._pos
        if self._state is None or pos > self.length:
            raise RuntimeError("call reset() before step(): no episode is running")
        try:
            a = operator.index(action)
        except TypeError:
            raise OptplanError(
                f"action must be an integer, got {action!r} at position {pos}"
            ) from None
        if a != CHAIN and not (a == STOP and pos == 0):
            raise OptplanError(
                f"action {a} is not admissible at chain position {pos} (the root admits 0 and "
                "1, the chain only 1)"
            )
        layered = self.layered
        idx = (pos, ON_CHAIN, a) if layered else (pos, a)
        expected = float(self._R[idx])
        sd = float(self.reward_sd[idx])
        reward = expected + sd * float(self.np_random.standard_normal()) if sd > 0 else expected
        if a == STOP:
            pos = self.length + 1
            nxt = TERMINATED if layered else pos
            info_layer = 1
        else:
            pos += 1
            nxt = ON_CHAIN if layered else pos
            info_layer = pos
        self._pos = pos
        terminated = pos > self.length
        self._state = nxt
        return nxt, reward, terminated, False, {"expected_reward": expected, "layer": info_layer}

    def __repr__(self) -> str:
        extra = "" if self.layered else ", layered=False"
        return (
            f"UBEChain(length={self.length}, mu1={self.mu1}, mu2={self.mu2}, "
            f"sigma={self.sigma}, discount={self.discount}{extra})"
        )
