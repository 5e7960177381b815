"""Mean rewards ``mu ~ N(0, prior_var)`` observed with Gaussian noise of known standard
deviation ``sigma``, or under a flat (improper) prior."""

from __future__ import annotations

import numpy as np


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
