"""A vectorized, bracketed, safeguarded Newton iteration for many 1-D monotone equations.

Each element has its own bracket ``[lo, hi]`` with ``g(lo) <= 0 <= g(hi)`` (``g`` increasing).
A Newton step that leaves the bracket is replaced by bisection, so every element converges
(scipy's ``elementwise.find_root`` in spirit, with derivatives). Only the elements still
active are evaluated at each iteration.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Stop when a step is below ``STEP_RTOL * max(1, |x|)``.
STEP_RTOL = 4 * np.finfo(float).eps
#: ... or when ``|g|`` is below ``G_RTOL`` times the size of its terms.
G_RTOL = 8 * np.finfo(float).eps
#: A Newton/Halley step below this (relative), taken where ``|g|`` is already below
#: ``sqrt(G_RTOL)`` times its scale, is the last one: convergence is at least quadratic there,
#: so the error after it is ~1e-18.
FINAL_STEP = 1e-9


def newton_bracketed(
    func: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve ``g_i(x_i) = 0`` for every ``i``.

    Parameters
    ----------
    func : callable ``(x, idx) -> (g, dg, scale)`` or ``(g, dg, scale, d2g)``
        Values and derivatives of the elements ``idx`` at points ``x`` (same length), and the
        size of the terms summed into ``g``: ``|g| <= G_RTOL * scale`` is round-off, a root.
        With a second derivative the step is Halley's instead of Newton's.
    x0, lo, hi : ndarray, shape (n,)
        Start and brackets (``g(lo) <= 0 <= g(hi)``); copied, not modified.

    Returns
    -------
    x : ndarray
        The roots.
    iterations : ndarray of int
    converged : ndarray of bool
    """
    lo, hi = lo.astype(float), hi.astype(float)
    x = np.clip(x0, lo, hi).astype(float)
    n = x.shape[0]
    iterations = np.zeros(n, dtype=int)
    idx = np.arange(n)
    sqrt_g_rtol = np.sqrt(G_RTOL)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for it in range(1, max_iter + 1):
            xi = x[idx]
            out = func(xi, idx)
            g, dg, scale = out[:3]
            neg = g < 0
            l = np.where(neg, xi, lo[idx])
            h = np.where(neg, hi[idx], xi)
            if len(out) == 4:  # Halley: cubic convergence when g'' is supplied
                xn = xi - 2.0 * g * dg / (2.0 * dg * dg - g * out[3])
            else:
                xn = xi - g / dg
            bad = ~((xn > l) & (xn < h))  # outside the bracket, or not finite
            xn = np.where(bad, 0.5 * (l + h), xn)
            ag, ax, step = np.abs(g), np.maximum(1.0, np.abs(xi)), np.abs(xn - xi)
            root = ag <= G_RTOL * scale
            done = (
                root
                | (~bad & (step <= FINAL_STEP * ax) & (ag <= sqrt_g_rtol * scale))
                | (step <= STEP_RTOL * ax)
                | ((h - l) <= STEP_RTOL * ax)
            )
            x[idx] = np.where(root, xi, xn)
            lo[idx], hi[idx] = l, h
            iterations[idx] = it
            idx = idx[~done]
            if idx.size == 0:
                break
    converged = np.ones(n, dtype=bool)
    converged[idx] = False
    return x, iterations, converged
