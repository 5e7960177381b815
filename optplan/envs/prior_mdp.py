"""PriorMDP: a random MDP drawn from the Dirichlet / Normal-Gamma prior of
bayesian-methods-tabular-rl (App. env "PriorMDP", after Osband et al.'s PSRL experiments).

For every ``(s, a)``: ``P(. | s, a) ~ Dirichlet(kappa, ..., kappa)`` over all states
(``kappa = 1``); for every ``(s, a, s')``: ``(mu, tau) ~ NG(mu0, lam, alpha, beta)`` with
``(0, 1, 4, 4)``, i.e. ``tau ~ Gamma(4, rate 4)``, ``mu ~ N(0, 1 / (lam tau))``; the transition
then pays ``r ~ N(mu, 1 / tau)``. The start is state 0 (the experiments are continuing from
``s0 = 0``).
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, check_choice, check_int, check_positive
from ..mdp import check_model_size
from ..posteriors import PRIOR_MDP_PRIOR, Dirichlet, NormalGamma
from .transition_rewards import TransitionRewardEnv

__all__ = ["PriorMDP", "prior_mdp_arrays", "SAMPLERS"]

#: How :class:`PriorMDP` turns its seed into draws.
SAMPLERS = ("generator", "public-code")


def prior_mdp_arrays(
    n_states: int,
    n_actions: int,
    seed: int,
    sampler: str = "generator",
    kappa: float = 1.0,
    prior=PRIOR_MDP_PRIOR,
):
    """``(P, mu, tau)`` of :class:`PriorMDP`: ``(S, A, S)`` each. Inputs unchecked.

    ``"generator"``: ``rng = np.random.default_rng(seed)``; all of ``P`` first
    (:meth:`~optplan.posteriors.Dirichlet.sample`, normalized Gamma variates, rows in
    ``(s, a)`` order), then every ``tau``, then every ``mu``
    (:meth:`~optplan.posteriors.NormalGamma.sample`).

    ``"public-code"``: the public code's ``PriorMDP`` draw for draw: legacy
    ``np.random.RandomState(seed)``; for each ``s``, each ``a``: ``dirichlet(kappa * ones(S))``,
    then for each ``s'``: ``tau = gamma(alpha, beta^-1)``, ``mu = normal(mu0, (lam tau)^-1/2)``.
    """
    S, A = n_states, n_actions
    mu0, lam, alpha, beta = prior
    if sampler == "generator":
        rng = np.random.default_rng(seed)
        P = Dirichlet(np.full((S, A, S), float(kappa))).sample(rng)
        mu, tau = NormalGamma(mu0, lam, alpha, beta, shape=(S, A, S)).sample(rng)
        return P, mu, tau
    legacy = np.random.RandomState(seed)
    P = np.empty((S, A, S))
    mu = np.empty((S, A, S))
    tau = np.empty((S, A, S))
    ones = np.ones(S) * kappa
    for s in range(S):
        for a in range(A):
            P[s, a] = legacy.dirichlet(ones)
            for s2 in range(S):
                t = legacy.gamma(shape=alpha, scale=beta**-1, size=(1,))
                m = legacy.normal(loc=mu0, scale=(lam * t) ** -0.5, size=(1,))
                tau[s, a, s2], mu[s, a, s2] = t[0], m[0]
    return P, mu, tau


class PriorMDP(TransitionRewardEnv):
    """A continuing MDP drawn from the prior of bayesian-methods-tabular-rl (module docstring).

    Parameters
    ----------
    n_states, n_actions : int >= 1, default 4, 2
        ``N_s``, ``N_a`` (the study: 4 x 2).
    seed : int >= 0, default 0
        The model's seed (the study: env seeds 0-3). The same seed gives the same arrays on
        any machine (for ``"generator"``, with the same NumPy: NumPy keeps the
        ``default_rng`` streams of these distributions stable but does not promise it across
        versions; the legacy stream of ``"public-code"`` is frozen).
    sampler : {"generator", "public-code"}, default "generator"
        How the seed becomes draws (:func:`prior_mdp_arrays`): NumPy's ``Generator``, or the
        public code's legacy global-state draws, which rebuild the repository's PriorMDPs.
    kappa : float > 0, default 1.0
        Dirichlet pseudo-count of every next state.
    discount : float in [0, 1) or None, default 0.9
        The true model's discount (the draft's ``gamma = 0.9``); ``None``: average reward.

    Attributes
    ----------
    mdp : TabularMDP
        ``P`` and ``R[s, a] = sum_s' P[s, a, s'] mu[s, a, s']``.
    transition_reward_mean : ndarray (S, A, S), read-only
        ``mu``.
    transition_reward_sd : ndarray (S, A, S), read-only
        ``1 / sqrt(tau)``.
    precision : ndarray (S, A, S), read-only
        ``tau``.
    prior : tuple
        ``(mu0, lam, alpha, beta)`` = :data:`~optplan.posteriors.PRIOR_MDP_PRIOR`.
    n_states, n_actions, seed, sampler, kappa, discount

    Notes
    -----
    Where the sources differ (docs/sources.md §1 and "Ambiguities" 5), this class follows the
    write-up and the public code: ``lam = 1`` (the draft's appendix says
    ``lam = 3.00 x 10^2``), and the reward law is per ``(s, a, s')`` (the draft writes
    ``mu_{s,a}, tau_{s,a}``; the code draws one pair per transition).
    """

    def __init__(
        self,
        n_states: int = 4,
        n_actions: int = 2,
        seed: int = 0,
        *,
        sampler: str = "generator",
        kappa: float = 1.0,
        discount: float | None = 0.9,
    ) -> None:
        S = check_int("n_states", n_states)
        A = check_int("n_actions", n_actions)
        check_model_size(S, A)
        seed = check_int("seed", seed, 0)
        check_choice("sampler", sampler, SAMPLERS)
        if sampler == "public-code" and seed >= 2**32:
            raise OptplanError(f"seed must be below 2**32 for sampler='public-code', got {seed}")
        kappa = check_positive("kappa", kappa)
        P, mu, tau = prior_mdp_arrays(S, A, seed, sampler, kappa)
        initial = np.zeros(S)
        initial[0] = 1.0
        super().__init__(
            P,
            mu,
            1.0 / np.sqrt(tau),
            discount=discount,
            initial=initial,
            name=f"prior-mdp-{S}x{A}-seed{seed}",
        )
        self.precision = np.array(tau)
        self.precision.setflags(write=False)
        self.prior = PRIOR_MDP_PRIOR
        self.n_states, self.n_actions, self.seed = S, A, seed
        self.sampler, self.kappa = sampler, kappa

    def __repr__(self) -> str:
        extra = "" if self.sampler == "generator" else f", sampler={self.sampler!r}"
        if self.kappa != 1.0:
            extra += f", kappa={self.kappa}"
        return (
            f"PriorMDP(n_states={self.n_states}, n_actions={self.n_actions}, seed={self.seed}"
            f"{extra}, discount={self.discount})"
        )
