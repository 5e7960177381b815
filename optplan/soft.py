r"""Soft (log-sum-exp) Bellman pieces: K-learning (k-learning-variational-bayesian-rl §3) and,
later, RAVI-UCB's softmax values.

Arrays are layered: ``R[l, s, a]`` (L, S, A) mean rewards, ``P[l, s, a, s']`` (L, S, A, S)
transitions from layer ``l`` to ``l + 1``, ``counts[l, s, a]``. Layers are 0-based: the
paper's ``l = 1..L`` is our ``l = 0..L-1``, so its bonus numerator ``sigma^2 + (L - l)^2`` is
``sigma^2 + (L - 1 - l)^2``.

K-learning's optimistic Bellman operator (Eq. 6), with
``c_l(s, a) = (sigma^2 + (L-1-l)^2) / (2 max(n, 1))``::

    K_l(s, a) = mu_l(s, a) + c_l(s, a) / tau + sum_s' P_l(s'|s, a) V_{l+1}(s'),
    V_l(s)    = tau log sum_a exp(K_l(s, a) / tau)        (Eq. 14),   V_L = 0,

the Boltzmann policy ``pi_l(s, a) ~ exp(K_l(s, a) / tau)`` (Eq. 9), the schedule (Eq. 10),
and the terms ``f(tau) = M + tau A + B / tau`` of the temperature objective (problem 11) along
the Boltzmann policy's occupancy (see :mod:`optplan.fast.k_temperature`).

Inputs are not validated here (the problem objects and agents do that where input enters).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "soft_values",
    "boltzmann_policy",
    "boltzmann_entropy",
    "soft_backward",
    "layered_occupancy",
    "k_bonus",
    "k_values",
    "temperature_terms",
    "temperature_schedule",
]


def soft_values(K: np.ndarray, tau: float) -> np.ndarray:
    """``tau log sum_a exp(K / tau)`` over the last axis (Eq. 14), max-shifted: stable for any
    ``tau > 0``."""
    K = np.asarray(K, dtype=float)
    m = K.max(axis=-1)
    z = np.exp((K - m[..., None]) / float(tau))
    return m + float(tau) * np.log(z.sum(axis=-1))


def boltzmann_policy(K: np.ndarray, tau: float) -> np.ndarray:
    """``pi(a) ~ exp(K(a) / tau)`` over the last axis (Eq. 9), max-shifted; rows sum to 1."""
    K = np.asarray(K, dtype=float)
    z = np.exp((K - K.max(axis=-1, keepdims=True)) / float(tau))
    return z / z.sum(axis=-1, keepdims=True)


def boltzmann_entropy(K: np.ndarray, tau: float) -> np.ndarray:
    """Entropy of ``boltzmann_policy(K, tau)`` over the last axis, without cancellation.

    With ``D = max K - K >= 0`` and ``z = exp(-D / tau)``: ``H = log Z + sum pi D / tau`` with
    ``Z = sum z`` and ``log Z = log1p(Z - 1)``, ``Z - 1`` summed over all but one maximizer.
    Both terms are nonnegative; ``-sum pi log pi`` instead loses the ``1 - pi_best`` of a
    policy whose best probability rounds to 1 (rewards of 1e3 at tau ~ 30), a relative error
    in ``H`` of up to ``1 / (1 + D / tau)``.
    """
    K = np.asarray(K, dtype=float)
    D = K.max(axis=-1, keepdims=True) - K
    z = np.exp(-D / float(tau))
    rest = z.copy()
    first = np.argmax(D == 0.0, axis=-1)[..., None]  # one maximizer, left out of Z - 1
    np.put_along_axis(rest, first, 0.0, axis=-1)
    z_minus_1 = rest.sum(axis=-1)
    pi = z / (1.0 + z_minus_1)[..., None]
    return np.log1p(z_minus_1) + (pi * D).sum(axis=-1) / float(tau)


def soft_backward(tau: float, R: np.ndarray, P: np.ndarray, c: np.ndarray):
    """``K`` (L, S, A) and ``V`` (L, S) of ``K_l = R_l + c_l / tau + P_l V_{l+1}``,
    ``V_l = soft_values(K_l, tau)``, ``V_L = 0``; vectorized over states and actions."""
    L, S, A = R.shape
    K = np.empty((L, S, A))
    V = np.empty((L, S))
    v_next = np.zeros(S)
    for l in range(L - 1, -1, -1):
        K[l] = R[l] + c[l] / tau + P[l] @ v_next
        v_next = V[l] = soft_values(K[l], tau)
    return K, V


def layered_occupancy(pi: np.ndarray, P: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Occupancy ``lambda_l(s, a)`` (L, S, A) of a layered stochastic policy from ``rho``."""
    L = pi.shape[0]
    lam = np.empty_like(pi)
    d = rho
    for l in range(L):
        lam[l] = d[:, None] * pi[l]
        d = np.einsum("sa,sat->t", lam[l], P[l])
    return lam


def k_bonus(counts: np.ndarray, sigma: float) -> np.ndarray:
    """``c_l(s, a) = (sigma^2 + (L-1-l)^2) / (2 max(n_l(s, a), 1))``, shape (L, S, A)."""
    L = counts.shape[0]
    remaining = (L - 1 - np.arange(L, dtype=float)) ** 2
    return (sigma**2 + remaining)[:, None, None] / (2.0 * np.maximum(counts, 1.0))


def k_values(tau: float, R: np.ndarray, P: np.ndarray, counts: np.ndarray, sigma: float):
    """K-values (L, S, A) of Eq. 6 at temperature ``tau``."""
    return soft_backward(float(tau), R, P, k_bonus(counts, sigma))[0]


def temperature_terms(tau, R, P, c, rho):
    """``(f, M, A, B, K, V, pi, lambda)`` at ``tau``: ``f = rho . V_0``, and the terms of
    ``f = M + tau A + B / tau`` along the Boltzmann policy's occupancy ``lambda`` (the numpy
    reference of :mod:`optplan.fast._k_kernels`)."""
    K, V = soft_backward(tau, R, P, c)
    pi = boltzmann_policy(K, tau)
    lam = layered_occupancy(pi, P, rho)
    M = float((lam * R).sum())
    A = float((lam.sum(axis=-1) * boltzmann_entropy(K, tau)).sum())
    B = float((lam * c).sum())
    return float(rho @ V[0]), M, A, B, K, V, pi, lam


def temperature_schedule(t: int, sigma: float, L: int, S: int, A: int) -> float:
    """Eq. 10: ``sqrt((sigma^2 + L^2) S A (1 + log t) / (4 L t log A))`` for episode ``t``.

    ``S`` is the total number of states (all layers), as in the paper's footnote 1.
    """
    return math.sqrt((sigma**2 + L**2) * S * A * (1 + math.log(t)) / (4 * L * t * math.log(A)))
