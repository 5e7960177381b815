"""Discounted resets: every step ends the episode with probability ``1 - gamma`` and the next
one starts from ``nu_0`` (ravi-ucb-optimistic-planning-regularized-dp Algorithm 1).

Why an environment and not the agent: the reset moves the *state* (``x_t ~ nu_0``), which only
the environment can do, and it must come from the environment's randomness so that every agent
run on the same seed meets the same resets. An agent that ends its epochs on ``done`` (RAVI-UCB)
then needs nothing else, and :func:`optplan.experiments.run` already does the rest: on a
truncation it resets the environment and hands the agent ``done=True``, and its
``"discounted"`` regret compares each step with an oracle that restarts from ``nu_0`` at the
same resets, i.e. the geometric-horizon discounted setting of the paper.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from .._checks import OptplanTypeError, check_real
from ..mdp import TabularMDP

__all__ = ["DiscountedResets"]


class DiscountedResets(gym.Env):
    """Wrap a continuing tabular environment so that each step ends the episode with
    probability ``1 - discount`` (``truncated=True``, ``info["discounted_reset"] = True``).

    Episodes have geometric length with mean ``H = 1 / (1 - discount)``; the transition of the
    ending step is a real one (``next_state ~ P``), as in Algorithm 1: the agent adds
    ``(x_t, a_t, x_{t+1})`` to its data, then the state resets to ``nu_0`` (the wrapped model's
    ``initial``) at the next :meth:`reset`.

    Parameters
    ----------
    env : gymnasium.Env
        A continuing environment exposing a :class:`~optplan.mdp.TabularMDP` as
        ``env.unwrapped.mdp`` (e.g. :class:`~optplan.envs.TabularEnv`,
        :class:`~optplan.envs.LinearMixtureMDP`).
    discount : float in (0, 1)

    Attributes
    ----------
    mdp : TabularMDP
        The wrapped model with ``discount`` as its discount, so runs are scored by the
        discounted criterion at the same ``gamma`` (this object is its own ``unwrapped``).
    env : gymnasium.Env
        The wrapped environment; other attributes (``features``, ...) are read through to it.
    discount : float

    Notes
    -----
    ``reset(seed=s)`` seeds the reset coin from ``s`` and the wrapped environment from a draw of
    that stream, so a run is a function of its seed alone.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env, discount: float) -> None:
        inner = getattr(getattr(env, "unwrapped", env), "mdp", None)
        if not isinstance(inner, TabularMDP):
            raise OptplanTypeError(
                "env must be a continuing environment exposing a TabularMDP as .mdp, got "
                f"{type(env).__name__}"
            )
        self.discount = check_real("discount", discount, 0.0, 1.0, low_open=True, high_open=True)
        self.env = env
        self.mdp = inner.with_discount(self.discount)
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def __getattr__(self, name: str):
        # read-through to the wrapped environment (its features, goal states, ...); never for
        # private names or before ``env`` exists (unpickling)
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Reset the wrapped environment (a start ``x_0 ~ nu_0``)."""
        super().reset(seed=seed)
        inner_seed = None if seed is None else int(self.np_random.integers(2**63))
        return self.env.reset(seed=inner_seed, options=options)

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """One step of the wrapped environment; then, with probability ``1 - discount``, the
        episode ends (``truncated``)."""
        state, reward, terminated, truncated, info = self.env.step(action)
        if self.np_random.random() >= self.discount and not (terminated or truncated):
            truncated = True
            info = {**info, "discounted_reset": True}
        return state, reward, terminated, truncated, info

    def __repr__(self) -> str:
        return f"DiscountedResets({self.env!r}, discount={self.discount})"
