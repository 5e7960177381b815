r"""Soft (log-sum-exp) Bellman pieces: K-learning (k-learning-variational-bayesian-rl §3) and
RAVI-UCB's regularized optimistic step (ravi-ucb-optimistic-planning-regularized-dp Algorithm 1).

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

RAVI-UCB's step (:func:`ravi_step`, from :func:`mirror_step` and :func:`clipped_backup`) is
continuing, not layered: ``log_policy[s, a]`` (S, A), ``q[s, a]``, ``p_hat[s, a, s']``.

Inputs of the K-learning pieces are not validated here (the problem objects and agents do that
where input enters); :func:`ravi_step` validates unless told not to (``validate=False``, the
agents' per-epoch call).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._checks import (
    ROW_SUM_TOL,
    OptplanError,
    as_array,
    check_real,
    first_bad,
    index_str,
)

__all__ = [
    "soft_values",
    "boltzmann_policy",
    "boltzmann_policy_and_values",
    "boltzmann_entropy",
    "soft_backward",
    "layered_occupancy",
    "k_bonus",
    "k_values",
    "temperature_terms",
    "temperature_schedule",
    "RaviStep",
    "mirror_step",
    "clipped_backup",
    "ravi_step",
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


def boltzmann_policy_and_values(K: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """``(boltzmann_policy(K, tau), soft_values(K, tau))`` with one shared exponential: the
    same operations, so the same bits, as the two functions."""
    K = np.asarray(K, dtype=float)
    m = K.max(axis=-1, keepdims=True)
    z = np.exp((K - m) / float(tau))
    total = z.sum(axis=-1, keepdims=True)
    return z / total, m[..., 0] + float(tau) * np.log(total[..., 0])


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
    tau = float(tau)
    K = np.empty((L, S, A))
    V = np.empty((L, S))
    v_next = np.zeros(S)
    base = R + c / tau  # R_l + c_l / tau of every layer at once (the same sums)
    for l in range(L - 1, -1, -1):
        k = np.add(base[l], P[l] @ v_next, out=K[l])
        m = k.max(axis=-1)  # soft_values(k, tau), inlined
        v_next = V[l] = m + tau * np.log(np.exp((k - m[:, None]) / tau).sum(axis=-1))
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


def k_values(tau: float, R: np.ndarray, P: np.ndarray, counts: np.ndarray, sigma: float, c=None):
    """K-values (L, S, A) of Eq. 6 at temperature ``tau`` (bonus numerators ``c``; Eq. 6's
    :func:`k_bonus` when None)."""
    c = k_bonus(counts, sigma) if c is None else c
    return soft_backward(float(tau), R, P, c)[0]


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


# --- RAVI-UCB (ravi-ucb-optimistic-planning-regularized-dp Algorithm 1) -----------------------


class RaviStep(NamedTuple):
    """One regularized optimistic step: ``V_k`` (S,), ``log pi_k`` (S, A), ``Q_{k+1}`` (S, A)."""

    values: np.ndarray
    log_policy: np.ndarray
    q: np.ndarray


def mirror_step(log_policy: np.ndarray, q: np.ndarray, eta: float) -> tuple[np.ndarray, np.ndarray]:
    r"""The mirror-descent half of Algorithm 1: ``(V_k, log pi_k)`` from ``log pi_{k-1}``, ``Q_k``.

    .. math:: V_k(s) = \frac1\eta \log \sum_a \pi_{k-1}(a|s) e^{\eta Q_k(s,a)}, \qquad
              \log\pi_k = \log\pi_{k-1} + \eta (Q_k - V_k)

    (Lemma C.1: ``V_k`` is the KL-regularized maximum ``max_p <p, Q_k> - KL(p || pi_{k-1}) /
    eta`` and ``pi_k`` its maximizer). Computed without forming ``eta Q``: with ``d = Q -
    max_a Q <= 0`` on the policy's support and ``w = log pi + eta d``,
    ``V = max Q + L / eta`` with ``L = log E_pi[e^{eta d}]`` and ``log pi_k = w - log sum exp
    w``. ``L`` is ``log1p(E_pi[expm1(eta d)])`` when that mean is above -1/2 (small ``eta``: no
    cancellation in ``log(1 - eps)``, and no ``1e-16 / eta`` error from a policy normalized
    only up to rounding), else the max-shifted log-sum-exp of ``w`` (large ``eta``: terms
    underflow to 0, never overflow). So ``eta`` from 1e-12 to 1e12 and ``|Q|`` up to 1e300 give
    finite answers; ``log pi_k`` is normalized by construction.

    Actions with ``log_policy = -inf`` (masked, or probability underflowed to 0) keep it and
    do not enter ``V``; their ``q`` is ignored (it may be ``-inf``). Inputs are not checked.
    """
    lp = np.asarray(log_policy, dtype=float)
    on = lp > -np.inf
    qs = np.where(on, q, -np.inf)
    qmax = qs.max(axis=-1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        d = np.where(on, qs - qmax[..., None], -np.inf)  # <= 0, -inf off the support
        w = lp + eta * d
        pi = np.exp(lp)
        norm = pi.sum(axis=-1)  # 1 up to rounding; dividing by it keeps V free of that error
        # E_pi[e^{eta d}] - 1 without cancellation, in (-1, 0]
        small = (pi * np.expm1(eta * d)).sum(axis=-1) / norm
        m = w.max(axis=-1)
        lse = m + np.log(np.exp(w - m[..., None]).sum(axis=-1))
    # L = log E_pi[e^{eta d}]
    L = np.where(small > -0.5, np.log1p(np.maximum(small, -0.5)), lse - np.log(norm))
    with np.errstate(over="ignore", invalid="ignore"):  # ravi_step reports a non-finite V
        values = qmax + L / eta
    new = np.where(on, w - lse[..., None], -np.inf)
    return values, new


def clipped_backup(r: np.ndarray, bonus, pv: np.ndarray, gamma: float) -> np.ndarray:
    r"""``Q = Pi_H[r + CB + gamma P V]``: ``pv`` is ``P V`` per pair (``p_hat @ V``; the linear
    mixture agent's ``phi theta``), clipped to ``[0, H]``, ``H = 1 / (1 - gamma)``."""
    return np.clip(r + bonus + gamma * pv, 0.0, 1.0 / (1.0 - gamma))


def ravi_step(
    log_policy: np.ndarray,
    q: np.ndarray,
    p_hat: np.ndarray,
    bonus,
    r: np.ndarray,
    eta: float,
    gamma: float,
    *,
    validate: bool = True,
) -> RaviStep:
    r"""One epoch's planning of RAVI-UCB (Algorithm 1; Algorithm 2 for tabular models):

    .. math::
        V_k(x) &= \tfrac1\eta \log \textstyle\sum_a \pi_{k-1}(a|x)\, e^{\eta Q_k(x,a)}, \\
        \log \pi_k &= \log \pi_{k-1} + \eta\,(Q_k - V_k), \\
        Q_{k+1} &= \Pi_H\big[r + CB_k + \gamma \hat P_k V_k\big], \quad H = 1/(1-\gamma),

    with ``Pi_H`` the truncation to ``[0, H]`` (:func:`mirror_step`, :func:`clipped_backup`).

    Parameters
    ----------
    log_policy : array (S, A)
        ``log pi_{k-1}``, each row a log-distribution (``-inf`` for actions outside the
        support, e.g. masked ones); the uniform policy is ``-log A`` everywhere.
    q : array (S, A)
        ``Q_k`` (``Q_1 = 0``); finite on the policy's support.
    p_hat : array (S, A, S)
        ``P_hat_k``, nonnegative rows summing to at most 1 (Algorithm 2's ``N' / N`` with ``N``
        started at 1 sums to ``(N - 1) / N``).
    bonus : float or array (S, A)
        ``CB_k >= 0``.
    r : array (S, A)
        Known rewards in ``[0, 1]`` (the paper's assumption; ``H`` bounds values only then).
    eta : float > 0
        Learning rate (Theorem 4.1: ``sqrt(2 log|A| / (H^2 T))``).
    gamma : float in (0, 1)
    validate : bool, default True
        Check the inputs (shapes, ``eta``, ``gamma``, signs) and raise ``OptplanError`` naming
        the field; agents pass ``False`` for their own, already valid, arrays.

    Returns
    -------
    RaviStep
        ``(values, log_policy, q)``: ``V_k``, ``log pi_k``, ``Q_{k+1}``.

    Raises
    ------
    OptplanError
        Malformed input (``validate=True``).
    FloatingPointError
        A result that is not finite: only at the edge of the double range (``eta`` below
        about 1e-300 with ``Q`` of about 1e300, where ``log(...) / eta`` overflows); never
        returned silently.
    """
    if validate:
        log_policy, q, p_hat, bonus, r, eta, gamma = _check_step(
            log_policy, q, p_hat, bonus, r, eta, gamma
        )
    values, new = mirror_step(log_policy, q, eta)
    if not np.isfinite(values).all():
        s = int(np.flatnonzero(~np.isfinite(values))[0])
        raise FloatingPointError(
            f"RAVI step: V_k({s}) = {float(values[s])!r} is not finite (eta = {eta!r}): "
            "(1/eta) log sum pi e^(eta Q) overflows double precision"
        )
    pv = np.einsum("sat,t->sa", p_hat, values)
    return RaviStep(values, new, clipped_backup(r, bonus, pv, gamma))


def _check_step(log_policy, q, p_hat, bonus, r, eta, gamma):
    """The inputs of :func:`ravi_step`, validated (errors name the field)."""
    eta = check_real("eta", eta, 0.0, None, low_open=True)
    gamma = check_real("gamma", gamma, 0.0, 1.0, low_open=True, high_open=True)
    lp = as_array("log_policy", log_policy, 2, finite=False)
    S, A = lp.shape
    if np.isnan(lp).any() or (lp == np.inf).any():
        idx = first_bad(np.isnan(lp) | (lp == np.inf))
        raise OptplanError(
            f"log_policy has entry {float(lp[idx])!r} at (s, a) = {index_str(idx)}: log-"
            "probabilities are finite or -inf"
        )
    sums = np.exp(lp).sum(axis=1)
    off = np.abs(sums - 1.0) > ROW_SUM_TOL * A
    if off.any():
        s = int(np.flatnonzero(off)[0])
        raise OptplanError(
            f"log_policy row {s} is not a log-distribution: exp(log_policy) sums to "
            f"{float(sums[s])!r}"
        )
    q = as_array("q", q, 2, finite=False)
    if q.shape != (S, A):
        raise OptplanError(f"q has shape {q.shape}, expected {(S, A)} (the shape of log_policy)")
    bad = (lp > -np.inf) & ~np.isfinite(q)
    if bad.any():
        idx = first_bad(bad)
        raise OptplanError(
            f"q has a non-finite entry {float(q[idx])!r} at (s, a) = {index_str(idx)}, where "
            "the policy has mass"
        )
    P = as_array("p_hat", p_hat, 3)
    if P.shape != (S, A, S):
        raise OptplanError(f"p_hat has shape {P.shape}, expected {(S, A, S)}")
    check_substochastic("p_hat", P)
    r = as_array("r", r, 2)
    if r.shape != (S, A):
        raise OptplanError(f"r has shape {r.shape}, expected {(S, A)}")
    check_unit_rewards("r", r)
    b = as_array("bonus", bonus, (0, 2))
    if b.ndim == 2 and b.shape != (S, A):
        raise OptplanError(f"bonus has shape {b.shape}, expected {(S, A)} or a scalar")
    if (b < 0).any():
        idx = first_bad(b < 0)
        where = f" at (s, a) = {index_str(idx)}" if b.ndim else ""
        raise OptplanError(f"bonus must be >= 0, got {float(b[idx])!r}{where}")
    return lp, q, P, b, r, eta, gamma


def check_substochastic(name: str, P: np.ndarray) -> None:
    """Nonnegative entries and rows along the last axis summing to at most 1 (within
    :data:`ROW_SUM_TOL`): an estimate ``N' / N`` whose missing mass goes nowhere."""
    if (P < 0).any():
        idx = first_bad(P < 0)
        raise OptplanError(
            f"{name} has a negative entry {float(P[idx])!r} at index {index_str(idx)}"
        )
    sums = P.sum(axis=-1)
    if (sums > 1.0 + ROW_SUM_TOL).any():
        idx = first_bad(sums > 1.0 + ROW_SUM_TOL)
        raise OptplanError(
            f"{name} rows must sum to at most 1, row {index_str(idx)} sums to {float(sums[idx])!r}"
        )


def check_unit_rewards(name: str, r: np.ndarray) -> None:
    """Rewards in ``[0, 1]``: RAVI-UCB's truncation at ``H = 1 / (1 - gamma)`` bounds the
    values only for such rewards (ravi-ucb §2)."""
    bad = (r < 0) | (r > 1)
    if bad.any():
        idx = first_bad(bad)
        raise OptplanError(
            f"{name} must lie in [0, 1] (RAVI-UCB's truncation at H = 1/(1 - gamma) assumes "
            f"it), got {float(r[idx])!r} at (s, a) = {index_str(idx)}"
        )
