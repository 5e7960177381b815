"""Small helpers for ``Problem.compare``: each returns ``(abs_err, scale)``."""

from __future__ import annotations

import numpy as np


def diff(a, b) -> tuple[float, float]:
    """Largest absolute difference, and the size of ``b`` it is relative to."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b), initial=0.0)), float(np.max(np.abs(b), initial=0.0))


def diff_up_to_constant(a, b) -> tuple[float, float]:
    """``min_c max |a - b - c|`` (biases are defined up to an additive constant)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(d.max() - d.min()) / 2.0, float(b.max() - b.min())
