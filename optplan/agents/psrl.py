r"""Posterior sampling (PSRL): the episodic agent of the k-learning study on layered models
(:class:`PSRL`) and the continuing agent of bayesian-methods-tabular-rl (:class:`ContinuingPSRL`).

- :class:`PSRL` (Osband et al. 2013): the Gaussian / Dirichlet posterior of
  :class:`~optplan.posteriors.LayeredPosterior` (shared with K-learning,
  :mod:`optplan.agents.k_learning`); one model drawn per episode, then the greedy policy of
  that model by backward induction. Registered ``psrl``.
- :class:`ContinuingPSRL` (bayesian-methods-tabular-rl App. PSRL): the Dirichlet /
  Normal-Gamma posterior per ``(s, a, s')`` of :mod:`optplan.agents._posterior_agent`, updated
  in batches of ``update_every`` steps; one model ``P ~ Dirichlet``, ``mu ~ NG`` drawn per
  batch, ``R[s, a] = sum_s' P mu``, its optimal policy by Howard policy iteration
  (:func:`optplan.dp.policy_iteration`, warm-started from the last policy), discounted at
  ``gamma = 0.9`` (the draft) or for average reward (``discount=None``); greedy until the next
  update. Registered ``psrl-continuing``.
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError
from .._params import Component, Param
from ..dp import backward_induction, masked
from ._posterior_agent import DRAFT_GAMMA, MODEL_POSTERIOR_PARAMS, PosteriorAgent, model_args
from .base import one_hot_policy
from .k_learning import POSTERIOR_PARAMS, EpisodicAgent, posterior_args

__all__ = ["PSRL", "ContinuingPSRL"]


class PSRL(EpisodicAgent):
    """Posterior sampling for episodic layered MDPs (Osband et al. 2013; the k-learning paper's
    main comparator): one model drawn from :class:`LayeredPosterior` per episode, then the
    greedy policy of that model by backward induction.

    Parameters
    ----------
    n_states, n_actions : int
        States per layer, actions (counts, not an environment: to build from one use
        ``make_agent("psrl", env)``, which reads them, ``n_layers`` and ``initial`` from its
        model).
    n_layers : int
        ``L``.
    sigma : float >= 0 or array (L, S, A) of such, default 1.0
        Known reward noise sd of the Gaussian reward posterior (0: exact rewards).
        ``make_agent("psrl", env)`` takes the environment's declared noise (its
        ``reward_sd`` or ``reward_noise``: 0 on bsuite's deterministic DeepSea) unless
        ``sigma`` is given, 1 when it declares none.
    prior_var : float > 0, default 1.0
        Prior variance of each mean reward (prior mean 0).
    transition_prior : float > 0 or "deterministic", optional
        Dirichlet pseudo-count per next state (default ``1 / S``); ``"deterministic"``: each
        pair has one unknown next state (DeepSea). See :class:`LayeredPosterior`.
    initial : array (S,), optional
        Start distribution (uniform by default).
    """

    def plan(self) -> None:
        R, P = self.posterior.sample(self.rng)
        self.Q, _ = backward_induction(P, R)
        self.policy = self.Q.argmax(axis=-1)

    def select_action(self, state: int) -> int:
        return int(self.policy[self.clock.current(), state])

    def __repr__(self) -> str:
        return f"PSRL(L={self.n_layers}, S={self.n_states}, A={self.n_actions})"


class ContinuingPSRL(PosteriorAgent):
    r"""Posterior sampling for continuing tabular MDPs (bayesian-methods-tabular-rl App. PSRL,
    Algorithm psrl; the public code's ``PSRLAgent``): every ``update_every`` steps, fold the
    batch into the posterior, draw ``P ~ Dirichlet`` and ``mu ~ NG`` per ``(s, a, s')``, plan
    ``R[s, a] = sum_s' P mu`` by policy iteration and act greedily until the next update.

    The episodic PSRL of the k-learning study is :class:`optplan.agents.PSRL`.

    Parameters
    ----------
    n_states, n_actions : int
    discount : float in [0, 1) or None, default 0.9
        Planning ``gamma`` (the draft's 0.9); ``None``: average-reward policy iteration (a
        sampled model has full support, so every policy is unichain).
    update_every : int >= 1, default 1
        Steps between posterior updates and plans (the draft: ``N + 1`` on DeepSea-chain,
        ``2N + 1`` on WideNarrow, 3 on PriorMDP).
    reward_prior : (mu0, lam, alpha, beta), default ``DRAFT_REWARD_PRIOR``
        Normal-Gamma prior of every ``mu(s, a, s')``.
    transition_prior : float > 0, default 1.0
        Dirichlet pseudo-count of every next state.
    sum_of_squares : {"correct", "public-code"}, default "correct"
        The Normal-Gamma batch update (:func:`~optplan.posteriors.normal_gamma_update`).
    action_mask : bool array (S, A), optional

    Attributes
    ----------
    transitions : Dirichlet, rewards : NormalGamma
        The current posterior.
    model : (P, mu)
        The last sampled model.
    policy : ndarray (S,) of int, q : ndarray (S, A)
        Its optimal policy and values (``-inf`` on inadmissible pairs).
    policy_version : int
        Bumped when a plan changes ``policy``; ``current_policy()`` is its one-hot ``(S, A)``
        matrix (:class:`~optplan.agents.base.PolicyAgent`).
    """

    _average_ok = True
    policy_version = 0

    def reset(self, rng: np.random.Generator) -> None:
        self.policy_version = 0
        super().reset(rng)

    def current_policy(self) -> np.ndarray:
        """The greedy policy of the last sampled model, one-hot ``(S, A)``."""
        return one_hot_policy(self.policy, self.n_actions)

    def sample_model(self) -> tuple[np.ndarray, np.ndarray]:
        """One draw ``(P, mu)`` from the current posterior, each ``(S, A, S)``."""
        P = self.transitions.sample(self.rng)
        mu, _ = self.rewards.sample(self.rng)
        return P, mu

    def plan(self) -> None:
        P, mu = self.sample_model()
        self.model = (P, mu)
        out = self._optimal(P, np.einsum("ijk,ijk->ij", P, mu), "sampled model")
        if not (self._planned and np.array_equal(out.policy, self.policy)):
            self.policy_version += 1
        self.policy = out.policy
        self.q = masked(out.q, self.action_mask)

    def select_action(self, state: int) -> int:
        return int(self.policy[state])

    def __repr__(self) -> str:
        crit = "average" if self.discount is None else f"discount={self.discount}"
        return (
            f"ContinuingPSRL(S={self.n_states}, A={self.n_actions}, {crit}, "
            f"update_every={self.update_every})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _psrl(env, criterion, transitions, transition_prior, sigma, **params):
    return PSRL(**posterior_args(env, "psrl", transitions, transition_prior, sigma), **params)


def _psrl_continuing(env, criterion, discount, planning, **params):
    if planning not in ("discounted", "average"):
        raise OptplanError(f"planning must be 'discounted' or 'average', got {planning!r}")
    args = model_args(env, "psrl-continuing", params)
    return ContinuingPSRL(discount=None if planning == "average" else discount, **args)


BUILDERS = (
    Component("psrl", _psrl, POSTERIOR_PARAMS, "posterior sampling (PSRL), episodic"),
    Component(
        "psrl-continuing",
        _psrl_continuing,
        (
            DRAFT_GAMMA,
            Param("planning", "str", "discounted", "'discounted' (gamma) or 'average' reward"),
            *MODEL_POSTERIOR_PARAMS,
        ),
        "continuing PSRL on Dirichlet / Normal-Gamma (s, a, s') posteriors (bayesian-methods)",
    ),
)
