r"""Local uncertainty of the Q-values under a posterior: the right-hand sides of the uncertainty
Bellman equation (UBE) and of the moment-matching variance equation.

Each is a named, vectorized function of posterior moments, ``(S, A)`` out (any leading shape
works, e.g. layers):

``"lemma1"``  (uncertainty-bellman-equation Lemma 1)
    ``nu = Var mu_sa + gamma^2 Q_max^2 sum_s' Var P(s'|s,a)``.
``"tabular"`` (same paper §4)
    ``nu = (sigma_r^2 + gamma^2 Q_max^2) / n_sa``, the bound when the reward posterior
    concentrates like ``sigma_r^2 / n`` and ``sum Var P <= 1 / n`` (Dirichlet).
``"draft"``   (bayesian-methods-tabular-rl, App. UBE Eq. localunc, and its public code)
    ``nu = sum_s' Pbar(s') Var mu(s,a,s') + Var_P[sum_s' P(s') mu0(s,a,s')]
    + Q_max^2 sum_s' Var P(s') / E P(s')``, rewards per ``(s, a, s')``; the code's Monte-Carlo
    estimate of the last sum has the closed form ``(k - 1) / (alpha_0 + 1)`` (``k`` states in
    the Dirichlet's support).

:func:`moment_matching_local` is the local term ``w = A + B + 2 gamma C + gamma^2 D`` of the
moment-matching equation (bayesian-methods-tabular-rl App. MM; write-up App. A.4), from exact
Dirichlet moments ``Cov[P_i, P_j] = (delta_ij pbar_i - pbar_i pbar_j) / (alpha_0 + 1)``.

The exact Dirichlet moments (:func:`dirichlet_covariance`, :func:`dirichlet_variance_sum`,
:func:`dirichlet_variance_ratio_sum`, :func:`check_dirichlet`) live in
:mod:`optplan.posteriors` and are re-exported here.

``Q_max`` comes from a *declared* bound on the mean rewards (:func:`q_max`), never from the true
model (docs/sources.md, Ambiguities 4).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._checks import (
    OptplanError,
    as_array,
    check_choice,
    check_int,
    check_positive,
    check_real,
    first_bad,
    index_str,
)
from .posteriors import (  # re-exported: the Dirichlet moments live with the posteriors
    check_dirichlet,
    dirichlet_covariance,
    dirichlet_variance_ratio_sum,
    dirichlet_variance_sum,
)

__all__ = [
    "LOCAL_UNCERTAINTY",
    "local_uncertainty",
    "local_lemma1",
    "local_tabular",
    "local_draft",
    "moment_matching_local",
    "MomentMatchingLocal",
    "q_max",
    "check_dirichlet",
    "dirichlet_variance_sum",
    "dirichlet_variance_ratio_sum",
    "dirichlet_covariance",
]


def q_max(reward_bound: float, discount: float | None = None, horizon: int | None = None) -> float:
    """Bound on ``|Q|`` from a declared bound ``|mu| <= reward_bound`` (Assumption 2):
    ``R_max / (1 - gamma)`` (continuing) or ``horizon * R_max`` (episodic)."""
    r = check_positive("reward_bound", reward_bound)
    if (discount is None) == (horizon is None):
        raise OptplanError("q_max needs exactly one of discount (continuing) or horizon (episodic)")
    if horizon is not None:
        return check_int("horizon", horizon) * r
    gamma = check_real("discount", discount, 0.0, 1.0, high_open=True)
    return r / (1.0 - gamma)


def _nonneg(name: str, value) -> np.ndarray:
    arr = as_array(name, value)
    if (arr < 0).any():
        idx = first_bad(arr < 0)
        raise OptplanError(
            f"{name} must be >= 0 (a variance), got {float(arr[idx])!r} at index {index_str(idx)}"
        )
    return arr


def local_lemma1(reward_var, alpha, q_max: float, discount: float) -> np.ndarray:
    """UBE paper Lemma 1: ``Var mu_sa + gamma^2 Q_max^2 sum_s' Var P(s'|s,a)``.

    Parameters
    ----------
    reward_var : array (..., S, A)
        Posterior variance of each mean reward ``mu_sa``.
    alpha : array (..., S, A, S)
        Dirichlet posterior parameters of the transitions.
    q_max : float > 0
        Bound on ``|Q|`` (:func:`q_max`).
    discount : float in [0, 1]
    """
    var = _nonneg("reward_var", reward_var)
    a = check_dirichlet(alpha)
    _same(("reward_var", var.shape), ("alpha", a.shape[:-1]))
    gamma = check_real("discount", discount, 0.0, 1.0)
    qm = check_positive("q_max", q_max)
    return _lemma1_unchecked(var, a, qm, gamma)


def _lemma1_unchecked(reward_var, alpha, q_max: float, discount: float) -> np.ndarray:
    """:func:`local_lemma1` of inputs already valid (float arrays of matching shapes, checked
    scalars): the same operations without the checks, for an agent's own posterior."""
    return reward_var + discount**2 * q_max**2 * dirichlet_variance_sum(alpha)


def local_tabular(counts, reward_sd, q_max: float, discount: float, min_count=1.0):
    """UBE paper §4: ``(sigma_r^2 + gamma^2 Q_max^2) / n_sa``.

    ``reward_sd`` is one noise standard deviation ``sigma_r >= 0`` or one per pair
    (broadcastable to ``counts``). ``n_sa`` below ``min_count`` (default 1: an unvisited pair
    counts as one observation, so its uncertainty is the largest finite one) is raised to it.
    """
    n = _nonneg("counts", counts)
    sd = _nonneg("reward_sd", reward_sd)
    try:
        np.broadcast_shapes(sd.shape, n.shape)
    except ValueError:
        raise OptplanError(
            f"reward_sd has shape {sd.shape}, which does not broadcast to counts {n.shape}"
        ) from None
    qm = check_positive("q_max", q_max)
    gamma = check_real("discount", discount, 0.0, 1.0)
    floor = check_positive("min_count", min_count)
    return _tabular_unchecked(n, sd, qm, gamma, floor)


def _tabular_unchecked(counts, reward_sd, q_max: float, discount: float, min_count=1.0):
    """:func:`local_tabular` of inputs already valid, without the checks."""
    return (reward_sd**2 + discount**2 * q_max**2) / np.maximum(counts, min_count)


def local_draft(alpha, reward_mean, reward_var, q_max: float) -> np.ndarray:
    """Bayesian-methods draft (App. UBE, Eq. localunc; its code ``UbeNoUnrollAgent``):
    ``sum pbar Var mu + Var_P[P.mu0] + Q_max^2 sum Var P / E P``, rewards per ``(s, a, s')``.

    Parameters
    ----------
    alpha : array (..., S, A, S)
        Dirichlet posterior parameters.
    reward_mean, reward_var : arrays (..., S, A, S)
        Posterior mean and variance of each mean reward ``mu(s, a, s')``.
    q_max : float > 0
    """
    a = check_dirichlet(alpha)
    mean = as_array("reward_mean", reward_mean)
    var = _nonneg("reward_var", reward_var)
    _same(("alpha", a.shape), ("reward_mean", mean.shape), ("reward_var", var.shape))
    qm = check_positive("q_max", q_max)
    return _draft_unchecked(a, mean, var, qm)


def _draft_unchecked(alpha, reward_mean, reward_var, q_max: float) -> np.ndarray:
    """:func:`local_draft` of inputs already valid (float arrays of one shape, ``q_max``
    checked), without the checks."""
    p = alpha / alpha.sum(axis=-1, keepdims=True)
    return (
        np.sum(p * reward_var, axis=-1)
        + dirichlet_covariance(alpha, reward_mean, reward_mean)
        + q_max**2 * dirichlet_variance_ratio_sum(alpha)
    )


class MomentMatchingLocal(NamedTuple):
    """The four terms of the moment-matching local variance and their sum
    ``w = A + B + 2 gamma C + gamma^2 D`` (each ``(..., S, A)``)."""

    w: np.ndarray
    A: np.ndarray  # Var_P[P.mu0]: expected reward's variance from the transitions
    B: np.ndarray  # E_P[P.Var mu]: reward-mean uncertainty
    C: np.ndarray  # Cov_P[P.mu0, P.V]
    D: np.ndarray  # Var_P[P.V]


def moment_matching_local(alpha, reward_mean, reward_var, values, discount: float):
    """The moment-matching local term (bayesian-methods-tabular-rl App. MM, Eq. epistemicmm;
    write-up App. A.4), exactly from Dirichlet moments:

    ``A = Var_P[P.mu0]``, ``B = pbar.Var mu``, ``C = Cov_P[P.mu0, P.V]``, ``D = Var_P[P.V]``,
    ``w = A + B + 2 gamma C + gamma^2 D``,

    with ``P ~ Dirichlet(alpha[s, a])``, ``mu0``/``Var mu`` the posterior mean and variance of
    the mean reward per ``(s, a, s')`` and ``V[s'] = Qbar(s', pi(s'))`` the posterior-mean
    values of the next states. Returns a :class:`MomentMatchingLocal`.
    """
    a = check_dirichlet(alpha)
    mean = as_array("reward_mean", reward_mean)
    var = _nonneg("reward_var", reward_var)
    v = as_array("values", values, 1)
    _same(("alpha", a.shape), ("reward_mean", mean.shape), ("reward_var", var.shape))
    if v.shape[0] != a.shape[-1]:
        raise OptplanError(
            f"values has {v.shape[0]} entries, expected one per state ({a.shape[-1]})"
        )
    gamma = check_real("discount", discount, 0.0, 1.0)
    return _moment_matching_unchecked(a, mean, var, v, gamma)


def _moment_matching_unchecked(alpha, reward_mean, reward_var, values, discount: float):
    """:func:`moment_matching_local` of inputs already valid (float arrays, ``values`` one per
    state, ``discount`` checked), without the checks."""
    # dirichlet_covariance's operations, with alpha_0, pbar and the centred factors formed
    # once for the three covariances (the same bits)
    a0 = alpha.sum(axis=-1)
    p = alpha / a0[..., None]
    scale = a0 + 1.0
    dm = reward_mean - np.sum(p * reward_mean, axis=-1)[..., None]
    dv = values - np.sum(p * values, axis=-1)[..., None]
    A = np.sum(p * dm * dm, axis=-1) / scale
    B = np.sum(p * reward_var, axis=-1)
    C = np.sum(p * dm * dv, axis=-1) / scale
    D = np.sum(p * dv * dv, axis=-1) / scale
    g = discount
    return MomentMatchingLocal(A + B + 2 * g * C + g**2 * D, A, B, C, D)


#: The local-uncertainty rules of the UBE, by name.
LOCAL_UNCERTAINTY = {"lemma1": local_lemma1, "tabular": local_tabular, "draft": local_draft}


def local_uncertainty(kind: str, **posterior) -> np.ndarray:
    """``LOCAL_UNCERTAINTY[kind](**posterior)``: the UBE local term chosen by name
    (``"lemma1"``, ``"tabular"``, ``"draft"``)."""
    check_choice("kind", kind, tuple(LOCAL_UNCERTAINTY))
    return LOCAL_UNCERTAINTY[kind](**posterior)


def _same(*named_shapes) -> None:
    (first, shape), *rest = named_shapes
    for name, other in rest:
        if tuple(other) != tuple(shape):
            raise OptplanError(
                f"{name} has shape {tuple(other)}, expected {tuple(shape)} (as {first})"
            )
