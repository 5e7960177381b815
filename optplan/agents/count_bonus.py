"""The count-bonus comparator of uncertainty-bellman-equation §3.2 (:class:`CountBonus`,
registered ``count-bonus``): the optimal policy of the posterior-mean model with a reward
bonus, episodic or continuing (:mod:`optplan.agents._mean_model`); the continuing agent's
steps are compiled (:mod:`optplan.agents._count_bonus_steps`)."""

from __future__ import annotations

import math

import numpy as np

from .._params import Component, Param
from ..dp import backup, evaluate_discounted, masked, policy_model
from . import _count_bonus_steps as CB
from . import _episodic_steps as ES
from . import _mean_model_kernels as MK
from ._mean_model import (
    MEAN_MODEL_PARAMS,
    UPDATE_EVERY,
    MeanModelAgent,
    check_scale,
    mean_model_args,
)
from .base import CompiledAgent

__all__ = ["CountBonus", "COUNT_BONUS"]


class CountBonus(CompiledAgent, MeanModelAgent):
    r"""The count-bonus comparator of uncertainty-bellman-equation §3.2: the optimal policy of
    the posterior-mean model with reward bonus ``beta log(t) sd_sa / sqrt(max(n_sa, 1))``.

    At §3.2's root this is ``Qhat_i + beta log(t) bonus_i`` with ``bonus_i`` the reward sd over
    ``sqrt(n)`` compounded (discounted) along the chain. ``t``: the number of the episode being
    planned (episodic mode) or the steps taken plus one (continuing mode).

    Parameters
    ----------
    n_states, n_actions, n_layers, discount, sigma, prior_var, known_transitions,
    transition_prior, update_every, action_mask :
        As :class:`UBE` (learned transitions get their Dirichlet mean, no transition bonus).
    beta : float >= 0, default 0.1
        Bonus scale (0: greedy on the mean model).

    Attributes
    ----------
    q : ndarray
        The optimistic ``Qhat + beta log(t) bonus`` of the last plan (``-inf`` inadmissible).
    policy : ndarray of int
        Its greedy policy, which the agent plays.
    """

    _has_bonus = True
    _run = staticmethod(CB.run)
    #: The compiled steps' state (:class:`~optplan.agents._count_bonus_steps.CountBonusState`);
    #: ``None`` where the agent plans in NumPy (episodic, or a plan the steps do not cover).
    state = None
    _compiled = False

    def __init__(self, n_states, n_actions, *, beta=0.1, **model):
        self.beta = check_scale("beta", beta)
        super().__init__(n_states, n_actions, **model)
        self._compiled = MK.applies(self)

    def reset(self, rng: np.random.Generator) -> None:
        self.state = None
        self._synced = -1
        super().reset(rng)

    def plan(self, top: int | None = None) -> None:
        """Plan on the current posterior (see :meth:`MeanModelAgent.plan`); a continuing plan
        is the compiled one where it applies (:func:`optplan.agents._count_bonus_steps.plan_now`,
        the steps' own), else the NumPy plan."""
        if not getattr(self, "_compiled", False):
            MeanModelAgent.plan(self, top)
            return
        if self.state is None:  # reset: the posterior's arrays are the state's
            self.state = CB.new_state(self)
        failed = CB.plan_now(self.state)
        self._sync(failed)

    def _sync(self, failed: bool = False) -> None:
        """The agent's attributes from its compiled state (after steps or a plan)."""
        s = self.state
        f = s.flags
        if failed:  # pragma: no cover - discounted policy iteration always stops
            raise RuntimeError(
                f"policy iteration on the posterior-mean model: status {int(f[CB.STATUS])} "
                f"after {int(f[CB.ITERATIONS])} iterations"
            )
        self.steps, self.plans = int(f[CB.STEPS]), int(f[CB.PLANS])
        if self.plans != self._synced:
            self._synced = self.plans
            self.policy = s.policy
            self.q = masked(s.model.q, self.action_mask)
            self._scale = float(s.params[CB.SCALE])
            self._planned = True

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if not self._compiled:
            super().update(state, action, reward, next_state, done)
            return
        self._sync(CB.observe(self.state, state, action, float(reward), next_state, done, None))

    plan_due = MeanModelAgent.plan_due

    def play(self, env, steps, env_rng) -> int:
        if self.episodic:
            return self._play_episodic(env, steps, env_rng)
        status = super().play(env, steps, env_rng)
        self._sync()
        return status

    def compiled_reason(self, env) -> str | None:
        if self.n_layers is not None:
            return ES.compiled_reason(self, env)
        if not self._compiled:
            return (
                "the agent plans in NumPy (deterministic transition prior, exact rewards under "
                f"a proper prior, or {MK.K.MAX_STATES} states or more)"
            )
        if env.ints[1]:
            return "the count-bonus agent is continuing, the environment is layered"
        return None

    def select_action(self, state: int) -> int:
        if self.episodic:
            return self._act_episodic(state)
        return int(self.policy[state])

    def _bonus(self, head=()) -> np.ndarray:
        counts = np.maximum(self.posterior.counts[head], 1.0)
        return np.where(self.action_mask[head], self._sd[head] / np.sqrt(counts), 0.0)

    def _bonus_scale(self) -> float:
        t = self.episode + 1 if self.n_layers is not None else self.steps + 1
        return self.beta * math.log(t)

    def _after_plan(self, top, head) -> None:
        pass

    def compounded_bonus(self) -> np.ndarray:
        """The bonus per unit scale compounded along the current policy, ``QB`` with
        ``q = Qhat + beta log(t) QB`` (§3.2's ``bonus_i`` at the root)."""
        if self.n_layers is not None:
            return self._QB.copy()
        P, bonus = self.P, self.bonus
        v = evaluate_discounted(*policy_model(P, bonus, self.policy), self.discount)
        return backup(P, bonus, v, self.discount)

    def __repr__(self) -> str:
        mode = f"L={self.n_layers}" if self.n_layers is not None else "continuing"
        return (
            f"CountBonus(S={self.n_states}, A={self.n_actions}, {mode}, beta={self.beta}, "
            f"discount={self.discount})"
        )


def _count_bonus(env, criterion, **params):
    return CountBonus(**mean_model_args(env, "count-bonus", params))


#: The registry's entry (listed with the UBE agents' in :mod:`optplan.agents.ube`).
COUNT_BONUS = Component(
    "count-bonus",
    _count_bonus,
    (
        MEAN_MODEL_PARAMS[0],
        Param("beta", "float", 0.1, "bonus scale: reward bonus beta log(t) sd / sqrt(n)"),
        *MEAN_MODEL_PARAMS[1:],
        UPDATE_EVERY,
    ),
    "count-bonus comparator of uncertainty-bellman-equation §3.2",
)
