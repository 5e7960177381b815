"""A Gymnasium environment that simulates a tabular model and exposes it for exact regret.

The environment samples from the arrays of a :class:`~optplan.mdp.TabularMDP` (continuing) or a
:class:`~optplan.mdp.FiniteHorizonMDP` (episodic, layered). It keeps the true model in ``.mdp``
so that experiments can score an agent by pseudo-regret against the optimal policy instead of
by noisy returns (bsuite's ``bsuite_info`` in spirit).
"""

from __future__ import annotations

import operator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .._checks import OptplanError, OptplanTypeError, check_int, check_positive
from ..mdp import FiniteHorizonMDP, TabularMDP

__all__ = ["TabularEnv"]


def _cumulative_rows(P: np.ndarray) -> np.ndarray:
    """Cumulative sums of the rows of ``P`` along the last axis, each ending in exactly 1.

    Dividing by the row total makes the last entry ``1.0`` bit for bit, so for ``u`` in
    ``[0, 1)`` ``searchsorted(row, u, side="right")`` always lands on a state of positive
    probability: it returns the first ``i`` with ``cdf[i] > u``, and ``cdf[i - 1] <= u``.
    Rows of masked-out pairs may be all zeros; they stay zero and are never sampled.
    """
    cdf = np.cumsum(P, axis=-1)
    total = cdf[..., -1:]
    np.divide(cdf, total, out=cdf, where=total > 0)
    cdf.setflags(write=False)
    return cdf


class TabularEnv(gym.Env):
    """Simulate a tabular MDP through the Gymnasium API.

    Observations are state indices (``Discrete(S)``) and actions are action indices
    (``Discrete(A)``). From state ``s`` and action ``a`` the environment moves to
    ``s' ~ P[s, a, :]`` and pays ``R[s, a] + reward_noise * N(0, 1)``.

    For a :class:`~optplan.mdp.FiniteHorizonMDP` the environment also tracks the layer ``l``
    (the number of steps taken since :meth:`reset`), samples from ``P[l]`` and ``R[l]``, and
    ends the episode (``terminated=True``) after ``L`` steps.

    Parameters
    ----------
    mdp : TabularMDP or FiniteHorizonMDP
        The true model. A ``TabularMDP``'s discount plays no part in the simulation.
    reward_noise : float, default 0.0
        Standard deviation of the Gaussian noise added to the expected reward.
    max_steps : int, optional
        Truncate the episode (``truncated=True``) after this many steps. ``None`` means a
        continuing task for a ``TabularMDP`` and episodes of exactly ``L`` steps for a
        ``FiniteHorizonMDP``.
    goal_states : sequence of int, optional
        States that count as reaching the goal: every step then reports
        ``info["goal_reached"]`` (whether ``next_state`` is one of them), which
        :func:`~optplan.experiments.run` turns into per-episode successes and DeepSea's
        *time to solve*.

    Attributes
    ----------
    mdp : TabularMDP or FiniteHorizonMDP
        The true model, for exact regret.
    reward_noise : float
    max_steps : int or None
    goal_states : tuple of int

    Notes
    -----
    ``info`` always carries ``"expected_reward"`` (``R[s, a]``, ``R[l, s, a]``) from
    :meth:`step`; a finite-horizon environment adds ``"layer"``, the layer of the returned
    observation (``0`` after :meth:`reset`, ``L`` at termination). After an episode has ended
    (terminated or truncated) :meth:`step` requires a new :meth:`reset`.

    Transitions are sampled by one uniform draw and a binary search in a precomputed
    cumulative row, so a step costs ``O(log S)`` and no per-step normalization.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        mdp: TabularMDP | FiniteHorizonMDP,
        reward_noise: float = 0.0,
        max_steps: int | None = None,
        goal_states=None,
    ) -> None:
        if not isinstance(mdp, (TabularMDP, FiniteHorizonMDP)):
            raise OptplanTypeError(
                f"mdp must be a TabularMDP or FiniteHorizonMDP, got {type(mdp).__name__}"
            )
        check_positive("reward_noise", reward_noise, allow_zero=True)
        if max_steps is not None:
            check_int("max_steps", max_steps)

        goals = np.zeros(mdp.n_states, dtype=bool)
        if goal_states is not None:
            for g in goal_states:
                if check_int("goal_states", g, 0) >= mdp.n_states:
                    raise OptplanError(
                        f"goal_states must hold state indices in [0, {mdp.n_states}), got {g!r}"
                    )
                goals[g] = True
        self._goals = goals if goal_states is not None else None
        self.goal_states = tuple(int(g) for g in np.flatnonzero(goals)) if goal_states else ()
        self.mdp = mdp
        self.reward_noise = float(reward_noise)
        self.max_steps = None if max_steps is None else int(max_steps)
        self._finite = isinstance(mdp, FiniteHorizonMDP)
        self._horizon = mdp.horizon if self._finite else None
        self._n_states = mdp.n_states
        self._n_actions = mdp.n_actions
        # a sparse model's dense copy (refused, naming the size, when too large)
        self._cdf = _cumulative_rows(mdp.dense_P())
        self._initial_cdf = _cumulative_rows(mdp.initial)

        self.observation_space = spaces.Discrete(self._n_states)
        self.action_space = spaces.Discrete(self._n_actions)

        self._state: int | None = None
        self._t = 0
        self._done = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Start an episode in ``s0 ~ mdp.initial``.

        Parameters
        ----------
        seed : int, optional
            Reseed ``self.np_random`` (Gymnasium's seeding); ``None`` continues the stream.
        options : dict, optional
            Unused; accepted for API compatibility.

        Returns
        -------
        state : int
        info : dict
            ``{"layer": 0}`` for a finite-horizon model, else empty.
        """
        super().reset(seed=seed)
        u = self.np_random.random()
        self._state = int(np.searchsorted(self._initial_cdf, u, side="right"))
        self._t = 0
        self._done = False
        return self._state, ({"layer": 0} if self._finite else {})

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Take ``action`` in the current state.

        Parameters
        ----------
        action : int
            An admissible action index of the current state.

        Returns
        -------
        next_state : int
        reward : float
            ``R[s, a]`` (``R[l, s, a]``) plus ``reward_noise`` times a standard normal draw.
        terminated : bool
            ``True`` after ``L`` steps of a finite-horizon model, never for a ``TabularMDP``.
        truncated : bool
            ``True`` when ``max_steps`` steps have been taken since :meth:`reset`.
        info : dict
            ``"expected_reward"``, ``"layer"`` (of ``next_state``) for finite horizon, and
            ``"goal_reached"`` when ``goal_states`` were given.

        Raises
        ------
        ValueError
            If ``action`` is not an integer in ``[0, A)`` or is masked out in this state.
        RuntimeError
            If called before :meth:`reset` or after the episode ended.
        """
        if self._state is None or self._done:
            raise RuntimeError("call reset() before step(): no episode is running")
        s = self._state
        try:
            a = operator.index(action)
        except TypeError:
            raise OptplanError(f"action must be an integer, got {action!r} in state {s}") from None
        if not 0 <= a < self._n_actions:
            raise OptplanError(f"action {a} is out of range [0, {self._n_actions}) in state {s}")

        rng = self.np_random
        if self._finite:
            l = self._t
            if not self.mdp.action_mask[l, s, a]:
                raise OptplanError(f"action {a} is not admissible in state {s} at layer {l}")
            pair = (l, s, a)
        else:
            if not self.mdp.action_mask[s, a]:
                raise OptplanError(f"action {a} is not admissible in state {s}")
            pair = (s, a)
        expected = float(self.mdp.R[pair])

        nxt = int(np.searchsorted(self._cdf[pair], rng.random(), side="right"))
        reward = self._reward(pair, nxt, expected, rng)

        self._t += 1
        self._state = nxt
        terminated = self._finite and self._t >= self._horizon
        truncated = self.max_steps is not None and self._t >= self.max_steps
        self._done = terminated or truncated
        info: dict[str, Any] = {"expected_reward": expected}
        if self._finite:
            info["layer"] = self._t
        if self._goals is not None:
            info["goal_reached"] = bool(self._goals[nxt])
        return nxt, reward, terminated, truncated, info

    def set_position(self, state: int, steps: int, done: bool = False) -> None:
        """Place the episode at ``state`` after ``steps`` steps, running or ended (where a
        compiled run, :mod:`optplan.envs.kernels`, left it)."""
        self._state = int(state)
        self._t = int(steps)
        self._done = bool(done)

    def _reward(
        self, pair: tuple[int, ...], next_state: int, expected: float, rng: np.random.Generator
    ) -> float:
        """The reward of a step from ``pair`` (``(s, a)``, or ``(l, s, a)``) to
        ``next_state``, drawn after the transition: ``expected`` (``R[pair]``) plus
        ``reward_noise`` times a standard normal draw (no draw without noise). Subclasses
        with transition-dependent rewards override it."""
        if self.reward_noise > 0.0:
            return expected + self.reward_noise * float(rng.standard_normal())
        return expected

    def __repr__(self) -> str:
        extra = ""
        if self.reward_noise:
            extra += f", reward_noise={self.reward_noise}"
        if self.max_steps is not None:
            extra += f", max_steps={self.max_steps}"
        if self._goals is not None:
            extra += f", goal_states={list(self.goal_states)}"
        return f"TabularEnv({self.mdp!r}{extra})"
