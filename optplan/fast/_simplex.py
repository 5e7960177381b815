"""Helpers on distributions shared by the index fast paths."""

from __future__ import annotations

import numpy as np


def with_leftover(q_support: np.ndarray, v: np.ndarray, supp: np.ndarray, V: np.ndarray):
    """Put ``1 - sum(q_support)`` on the first best zero-probability state (if any mass left)."""
    q = np.where(supp, q_support, 0.0)
    leftover = np.maximum(1.0 - q.sum(axis=1), 0.0)
    candidates = ~supp & (v == V[:, None])
    has = candidates.any(axis=1) & (leftover > 0)
    rows = np.flatnonzero(has)
    q[rows, candidates[rows].argmax(axis=1)] += leftover[rows]
    return q
