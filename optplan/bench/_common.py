"""Helpers shared by the bench suites: timing, and the ``--solvers`` argument type."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ..problems import SOLVERS

__all__ = ["timed", "solver_name"]


def timed(fn: Callable):
    """``(fn(), wall seconds)``."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def solver_name(value: str) -> str:
    """A conic solver name for the command line, case-insensitive, as the upper-case name."""
    if value.upper() not in SOLVERS:
        raise argparse.ArgumentTypeError(f"unknown solver {value!r}; choose from {SOLVERS}")
    return value.upper()
