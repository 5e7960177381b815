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


def unique_argmax(q: np.ndarray, rel_gap: float = 1e-6) -> bool:
    """True when every state's best action beats the runner-up by ``rel_gap`` (scaled).

    Then the optimal policy, and so the occupancy measure (the LP's multiplier), is unique and
    the two paths' multipliers must agree entry by entry; under ties they need only both be
    optimal duals (feasible, with the optimal objective).
    """
    q = np.asarray(q, dtype=float)
    if q.shape[-1] < 2:
        return True
    top2 = -np.sort(-np.where(np.isfinite(q), q, -np.inf), axis=-1)[..., :2]
    finite = np.isfinite(top2[..., 1])
    gap = top2[..., 0] - top2[..., 1]
    scale = 1.0 + np.abs(top2[..., 0])
    return bool(np.all(~finite | (gap > rel_gap * scale)))


def flow_residual(
    occupancy: np.ndarray, P: np.ndarray, source: np.ndarray, discount: float = 1.0
) -> float:
    """Max violation of ``sum_a y[s', a] = source[s'] + discount * sum_{s,a} y[s, a] P[s, a, s']``.

    The dual feasibility (flow conservation) of an occupancy measure: with ``discount = gamma``
    and ``source = (1 - gamma) w`` for the discounted LP, with ``discount = 1`` and
    ``source = 0`` (plus ``sum y = 1``) for the average-reward LP.
    """
    S, A = occupancy.shape
    inflow = source + discount * (occupancy.reshape(-1) @ P.reshape(S * A, S))
    return float(np.max(np.abs(occupancy.sum(axis=1) - inflow)))
