"""The discounted criterion: policy evaluation, the discounted occupancy and value iteration
(policy iteration is :mod:`optplan.dp.policy_iteration`'s, shared with the average reward)."""

from __future__ import annotations

import numpy as np

from ..result import MAX_ITER, OPTIMAL
from ._common import backup, masked


def evaluate_discounted(P_pi: np.ndarray, r_pi: np.ndarray, discount: float) -> np.ndarray:
    """``V = (I - discount P_pi)^{-1} r_pi``."""
    S = r_pi.shape[0]
    return np.linalg.solve(np.eye(S) - discount * P_pi, r_pi)


def discounted_occupancy(P_pi: np.ndarray, start: np.ndarray, discount: float) -> np.ndarray:
    """Normalized discounted state occupancy ``(1-discount) start^T (I - discount P_pi)^{-1}``."""
    S = start.shape[0]
    return np.linalg.solve((np.eye(S) - discount * P_pi).T, (1.0 - discount) * start)


def value_iteration(
    P: np.ndarray, R: np.ndarray, mask: np.ndarray, discount: float, tol: float, max_iter: int
) -> tuple[str, str, np.ndarray, int]:
    """Discounted value iteration from ``V = 0``; ``(status, message, V, iterations)``.

    Stops when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which guarantees
    ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1).
    """
    V = np.zeros(R.shape[0])
    threshold = tol * (1.0 - discount) / (2.0 * discount) if discount > 0 else np.inf
    step = np.inf
    for it in range(1, max_iter + 1):
        V_new = masked(backup(P, R, V, discount), mask).max(axis=1)
        step = np.max(np.abs(V_new - V))
        V = V_new
        if step < threshold:
            return OPTIMAL, "", V, it
    message = (
        f"value iteration did not reach tol={tol} in {max_iter} iterations (last step {step:.3g})"
    )
    return MAX_ITER, message, V, max_iter
