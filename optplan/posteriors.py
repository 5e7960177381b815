"""Conjugate posteriors of tabular models, shared by the Bayesian agents.

Pure functions on arrays of sufficient statistics (counts, sums), vectorized over any leading
shape, and :class:`LayeredPosterior`, the per-``(layer, state, action)`` posterior of the
episodic agents (K-learning, PSRL):

- mean rewards ``mu ~ N(0, prior_var)`` observed with Gaussian noise of standard deviation
  ``sigma`` (:func:`gaussian_mean_posterior`);
- transitions ``P(. | s, a) ~ Dirichlet(alpha)``, posterior ``Dirichlet(alpha + counts)``
  (:func:`dirichlet_mean`, :func:`sample_dirichlet`).
"""

from __future__ import annotations

import numpy as np

from ._checks import check_int, check_positive

__all__ = ["gaussian_mean_posterior", "dirichlet_mean", "sample_dirichlet", "LayeredPosterior"]


def gaussian_mean_posterior(
    sums: np.ndarray, counts: np.ndarray, sigma: float, prior_var: float
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of a mean reward with prior ``N(0, prior_var)``, after
    ``counts`` observations summing to ``sums`` with Gaussian noise ``sigma``:
    precision ``1/prior_var + n/sigma^2``, mean ``(sum / sigma^2) / precision``.

    ``sigma = 0`` (exact observations): the sample mean and variance 0 once observed, the
    prior before.
    """
    if sigma == 0:
        n = np.maximum(counts, 1)
        mean = np.where(counts > 0, sums / n, 0.0)
        var = np.where(counts > 0, 0.0, prior_var)
        return mean, var
    precision = 1.0 / prior_var + counts / sigma**2
    return sums / sigma**2 / precision, 1.0 / precision


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
    n_layers, n_states, n_actions : int
    sigma : float >= 0
        Reward-noise standard deviation (0: rewards are observed exactly; the reward posterior
        then is the sample mean once visited).
    prior_var : float > 0
        Prior variance of each mean reward (prior mean 0).
    transition_prior : float > 0, optional
        Dirichlet pseudo-count per next state; default ``1 / S``.
    """

    def __init__(
        self, n_layers, n_states, n_actions, sigma=1.0, prior_var=1.0, transition_prior=None
    ):
        self.L = check_int("n_layers", n_layers)
        self.S = check_int("n_states", n_states)
        self.A = check_int("n_actions", n_actions)
        self.sigma = check_positive("sigma", sigma, allow_zero=True)
        self.prior_var = check_positive("prior_var", prior_var)
        alpha = 1.0 / self.S if transition_prior is None else transition_prior
        self.transition_prior = check_positive("transition_prior", alpha)
        self.reset()

    def reset(self) -> None:
        shape = (self.L, self.S, self.A)
        self.counts = np.zeros(shape)
        self.reward_sums = np.zeros(shape)
        self.next_counts = np.zeros((*shape, self.S))

    def update(self, layer: int, state: int, action: int, reward: float, next_state: int):
        self.counts[layer, state, action] += 1
        self.reward_sums[layer, state, action] += reward
        if layer + 1 < self.L:
            self.next_counts[layer, state, action, next_state] += 1

    def reward_posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of every mean reward, (L, S, A) each."""
        return gaussian_mean_posterior(self.reward_sums, self.counts, self.sigma, self.prior_var)

    def mean_transitions(self) -> np.ndarray:
        """Posterior mean transitions (L, S, A, S)."""
        return dirichlet_mean(self.next_counts + self.transition_prior)

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One model from the posterior: rewards (L, S, A) and transitions (L, S, A, S)."""
        mean, var = self.reward_posterior()
        R = mean + np.sqrt(var) * rng.standard_normal(mean.shape)
        return R, sample_dirichlet(self.next_counts + self.transition_prior, rng)
