"""Conjugate posteriors of tabular models, shared by the Bayesian agents.

Pure functions on arrays of sufficient statistics (counts, sums), vectorized over any leading
shape, and :class:`LayeredPosterior`, the per-``(layer, state, action)`` posterior of the
episodic agents (K-learning, PSRL, UBE; with ``n_layers=None`` the per-``(state, action)``
posterior of continuing ones):

- mean rewards ``mu ~ N(0, prior_var)`` observed with Gaussian noise of standard deviation
  ``sigma`` (:func:`gaussian_mean_posterior`), or under a flat (improper) prior;
- transitions ``P(. | s, a) ~ Dirichlet(alpha)``, posterior ``Dirichlet(alpha + counts)``
  (:func:`dirichlet_mean`, :func:`sample_dirichlet`).
"""

from __future__ import annotations

import numpy as np

from ._checks import OptplanError, as_array, check_int, check_positive, first_bad, index_str

__all__ = ["gaussian_mean_posterior", "dirichlet_mean", "sample_dirichlet", "LayeredPosterior"]


def gaussian_mean_posterior(
    sums: np.ndarray, counts: np.ndarray, sigma: float, prior_var: float
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of a mean reward with prior ``N(0, prior_var)``, after
    ``counts`` observations summing to ``sums`` with Gaussian noise ``sigma``:
    precision ``1/prior_var + n/sigma^2``, mean ``(sum / sigma^2) / precision``.

    ``sigma`` is a scalar or an array broadcasting against ``counts`` (a noise sd per pair).
    ``sigma = 0`` (exact observations): the sample mean and variance 0 once observed, the
    prior before. ``prior_var = inf`` is the flat prior: mean ``sum / n``, variance
    ``sigma^2 / n``, defined for ``n >= 1`` only.
    """
    if prior_var == np.inf:  # the flat prior, counts >= 1
        return sums / counts, np.square(sigma) / counts
    exact = np.equal(sigma, 0)
    if not exact.any():
        precision = 1.0 / prior_var + counts / sigma**2
        return sums / sigma**2 / precision, 1.0 / precision
    n = np.maximum(counts, 1)
    mean = np.where(counts > 0, sums / n, 0.0)
    var = np.where(counts > 0, 0.0, prior_var)
    if exact.all():
        return mean, var
    sd2 = np.where(exact, 1.0, np.square(sigma))  # any positive stand-in where exact
    precision = 1.0 / prior_var + counts / sd2
    return (
        np.where(exact, mean, sums / sd2 / precision),
        np.where(exact, var, 1.0 / precision),
    )


def dirichlet_mean(alpha: np.ndarray) -> np.ndarray:
    """Mean of ``Dirichlet(alpha)`` along the last axis."""
    return alpha / alpha.sum(axis=-1, keepdims=True)


def sample_dirichlet(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw of ``Dirichlet(alpha)`` per row (last axis), by normalized Gamma variates.

    A row whose gammas all underflow to 0 (tiny pseudo-counts) is uniform, not NaN.
    """
    g = rng.standard_gamma(alpha)
    total = g.sum(axis=-1, keepdims=True)
    return np.where(total > 0, g / np.where(total > 0, total, 1.0), 1.0 / alpha.shape[-1])


class LayeredPosterior:
    """Gaussian rewards and Dirichlet transitions per ``(layer, state, action)``.

    Parameters
    ----------
    n_layers : int or None
        ``L``; ``None`` for a continuing model: arrays are ``(S, A)`` and every transition is
        recorded (in the layered form the last layer's transitions leave the horizon).
    n_states, n_actions : int
    sigma : float >= 0, or array of such
        Reward-noise standard deviation, one for all pairs or one per pair (an array
        broadcasting to ``(L, S, A)``, ``(S, A)`` without layers). 0: rewards are observed
        exactly; the reward posterior then is the sample mean once visited.
    prior_var : float > 0 or None
        Prior variance of each mean reward (prior mean 0). ``None``: the flat (improper)
        prior, posterior ``N(sum / n, sigma^2 / n)``; an unvisited pair counts as one
        observation of the prior mean, ``N(0, sigma^2)``, so that its uncertainty is finite
        (the largest a visited pair can have).
    transition_prior : float > 0, optional
        Dirichlet pseudo-count per next state; default ``1 / S``.
    """

    def __init__(
        self, n_layers, n_states, n_actions, sigma=1.0, prior_var=1.0, transition_prior=None
    ):
        self.L = None if n_layers is None else check_int("n_layers", n_layers)
        self.S = check_int("n_states", n_states)
        self.A = check_int("n_actions", n_actions)
        self.shape = (self.S, self.A) if self.L is None else (self.L, self.S, self.A)
        if np.ndim(sigma) == 0:
            self.sigma = check_positive("sigma", sigma, allow_zero=True)
        else:
            self.sigma = _per_pair_sd(sigma, self.shape)
        self.improper = prior_var is None
        self.prior_var = np.inf if self.improper else check_positive("prior_var", prior_var)
        alpha = 1.0 / self.S if transition_prior is None else transition_prior
        self.transition_prior = check_positive("transition_prior", alpha)
        self.reset()

    def reset(self) -> None:
        shape = self.shape
        self.counts = np.zeros(shape)
        self.reward_sums = np.zeros(shape)
        self.next_counts = np.zeros((*shape, self.S))

    def update(self, layer: int | None, state: int, action: int, reward: float, next_state: int):
        """Record one transition (``layer`` is ignored without layers)."""
        if self.L is None:
            self.counts[state, action] += 1
            self.reward_sums[state, action] += reward
            self.next_counts[state, action, next_state] += 1
            return
        self.counts[layer, state, action] += 1
        self.reward_sums[layer, state, action] += reward
        if layer + 1 < self.L:
            self.next_counts[layer, state, action, next_state] += 1

    def reward_posterior(self, index=()) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of every mean reward, each shaped like ``counts``
        (``counts[index]`` with an ``index``, e.g. a slice of layers)."""
        counts = self.counts[index]
        if self.improper:
            counts = np.maximum(counts, 1.0)
        sigma = self.sigma if np.ndim(self.sigma) == 0 else self.sigma[index]
        return gaussian_mean_posterior(self.reward_sums[index], counts, sigma, self.prior_var)

    def mean_transitions(self, index=()) -> np.ndarray:
        """Posterior mean transitions, ``counts.shape + (S,)`` (or of ``counts[index]``)."""
        return dirichlet_mean(self.next_counts[index] + self.transition_prior)

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One model from the posterior: rewards (L, S, A) and transitions (L, S, A, S)."""
        mean, var = self.reward_posterior()
        R = mean + np.sqrt(var) * rng.standard_normal(mean.shape)
        return R, sample_dirichlet(self.next_counts + self.transition_prior, rng)


def _per_pair_sd(sigma, shape: tuple[int, ...]) -> np.ndarray:
    """A per-pair noise sd: finite, ``>= 0``, broadcast (read-only) to ``shape``."""
    sd = as_array("sigma", sigma)
    try:
        sd = np.broadcast_to(sd, shape)
    except ValueError:
        raise OptplanError(
            f"sigma has shape {sd.shape}, which does not broadcast to the posterior's {shape}"
        ) from None
    if (sd < 0).any():
        idx = first_bad(sd < 0)
        raise OptplanError(
            f"sigma must be >= 0 (a standard deviation), got {float(sd[idx])!r} at index "
            f"{index_str(idx)}"
        )
    return sd
