"""The :class:`Agent` protocol: what the run loop needs from every agent (bsuite's two methods).

An agent is usually a posterior, a planning problem and a policy rule; this protocol is only
the interface :func:`optplan.experiments.run` drives it through.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Agent"]


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
