"""The :class:`Agent` protocol: what the run loop needs from every agent (bsuite's two methods).

An agent is usually a posterior, a planning problem and a policy rule; this protocol is only
the interface :func:`optplan.experiments.run` drives it through.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Agent", "check_agent_mask", "check_count"]


@runtime_checkable
class Agent(Protocol):
    """An online agent acting in a tabular environment.

    The run loop calls :meth:`reset` once, then alternates :meth:`select_action` and
    :meth:`update` for every time step.
    """

    def reset(self, rng: np.random.Generator) -> None:
        """Start a run: forget everything learned and draw all randomness from ``rng``."""
        ...

    def select_action(self, state: int) -> int:
        """Choose an admissible action in ``state``."""
        ...

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Learn from one transition; ``done`` marks the end of an episode.

        When ``done`` is true ``next_state`` is the last state of the finished episode, not
        the first state of the next one (which arrives through :meth:`select_action`).
        """
        ...


def check_count(name: str, value) -> int:
    """A positive integer parameter (``n_states``, ``n_actions`` ...)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_agent_mask(action_mask, S: int, A: int) -> np.ndarray:
    """An agent's admissible actions: bool ``(S, A)`` or ``(L, S, A)``, every state with one."""
    if action_mask is None:
        return np.ones((S, A), dtype=bool)
    mask = np.asarray(action_mask)
    if mask.dtype != bool:
        if mask.dtype.kind not in "iu" or not np.isin(mask, (0, 1)).all():
            raise TypeError(f"action_mask must be boolean, got dtype {mask.dtype}")
        mask = mask.astype(bool)
    if mask.shape[-2:] != (S, A) or mask.ndim not in (2, 3):
        raise ValueError(
            f"action_mask has shape {mask.shape}, expected ({S}, {A}) or (L, {S}, {A})"
        )
    counts = mask.sum(axis=-1)
    if (counts == 0).any():
        idx = tuple(int(i) for i in np.argwhere(counts == 0)[0])
        raise ValueError(f"action_mask leaves state {idx[-1]} with no action (index {idx})")
    return mask
