"""Conjugate posteriors of tabular models, shared by the Bayesian agents.

Pure functions on arrays of sufficient statistics (counts, sums), vectorized over any leading
shape, two small immutable posterior classes, and :class:`LayeredPosterior`, the
per-``(layer, state, action)`` posterior of the episodic agents (K-learning, PSRL, UBE; with
``n_layers=None`` the per-``(state, action)`` posterior of continuing ones):

- mean rewards ``mu ~ N(0, prior_var)`` observed with Gaussian noise of standard deviation
  ``sigma`` (:func:`gaussian_mean_posterior`), or under a flat (improper) prior;
- mean rewards with unknown noise precision, per ``(s, a, s')``: the Normal-Gamma
  ``NG(mu0, lam, alpha, beta)`` of bayesian-methods-tabular-rl (:class:`NormalGamma`,
  :func:`normal_gamma_update`, :func:`transition_statistics`);
- transitions ``P(. | s, a) ~ Dirichlet(alpha)``, posterior ``Dirichlet(alpha + counts)``
  (:class:`Dirichlet`, :func:`dirichlet_mean`, :func:`sample_dirichlet`) and its exact moments
  (:func:`dirichlet_variance`, :func:`dirichlet_covariance`, :func:`dirichlet_variance_sum`,
  :func:`dirichlet_variance_ratio_sum`).

Normal-Gamma conventions (docs/sources.md §1): ``tau ~ Gamma(alpha, rate beta)``,
``mu | tau ~ N(mu0, 1 / (lam tau))``; rewards ``r ~ N(mu, 1 / tau)``. The marginal of ``mu`` is
a Student-t with ``2 alpha`` degrees of freedom, location ``mu0`` and scale
``sqrt(beta / (lam alpha))``, so ``Var[mu] = beta / (lam (alpha - 1))`` (``alpha > 1``).

One module per family: :mod:`~optplan.posteriors.gaussian`, :mod:`~optplan.posteriors.dirichlet`,
:mod:`~optplan.posteriors.normal_gamma` and :mod:`~optplan.posteriors.layered`.
"""

from .dirichlet import (
    Dirichlet,
    check_dirichlet,
    dirichlet_covariance,
    dirichlet_mean,
    dirichlet_variance,
    dirichlet_variance_ratio_sum,
    dirichlet_variance_sum,
    sample_dirichlet,
)
from .gaussian import gaussian_mean_posterior
from .layered import K_BONUSES, UNVISITED_TERMS, LayeredPosterior, k_bonus_numerators
from .normal_gamma import (
    DRAFT_REWARD_PRIOR,
    PRIOR_MDP_PRIOR,
    SUM_OF_SQUARES,
    NormalGamma,
    StudentT,
    normal_gamma_update,
    transition_statistics,
)

__all__ = [
    "gaussian_mean_posterior",
    "dirichlet_mean",
    "sample_dirichlet",
    "check_dirichlet",
    "dirichlet_variance",
    "dirichlet_covariance",
    "dirichlet_variance_sum",
    "dirichlet_variance_ratio_sum",
    "Dirichlet",
    "NormalGamma",
    "StudentT",
    "SUM_OF_SQUARES",
    "DRAFT_REWARD_PRIOR",
    "PRIOR_MDP_PRIOR",
    "normal_gamma_update",
    "transition_statistics",
    "LayeredPosterior",
    "k_bonus_numerators",
    "K_BONUSES",
    "UNVISITED_TERMS",
]
