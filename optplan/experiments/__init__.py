"""Experiments: the agent-environment run loop and its :class:`Trace`."""

from .run import Trace, run

__all__ = ["Trace", "run"]
