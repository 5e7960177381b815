"""The per-``(layer, state, action)`` posterior of the episodic agents (K-learning, PSRL,
UBE; with ``n_layers=None`` the per-``(state, action)`` posterior of continuing ones):
Gaussian mean rewards and Dirichlet (or deterministic) transitions, and K-learning's bonus
numerators."""

from __future__ import annotations

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    check_choice,
    check_int,
    check_positive,
    first_bad,
    index_str,
)
from ._common import _broadcast
from .dirichlet import sample_dirichlet
from .gaussian import gaussian_mean_posterior


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
    transition_prior : float > 0 or "deterministic", optional
        Dirichlet pseudo-count per next state; default ``1 / S``. ``"deterministic"``: each
        pair has one next state, unknown and uniform a priori (the ``alpha -> 0`` limit of the
        symmetric Dirichlet): a visited pair's mean transition is its observed next state, an
        unvisited pair's is uniform, and a sample puts it on one uniformly drawn state. A
        second, different next state for a pair contradicts the prior: :meth:`update` raises,
        naming the layer, state and action.
    """

    #: ``transition_prior`` of the deterministic-transition prior.
    DETERMINISTIC = "deterministic"

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
        self.deterministic = isinstance(transition_prior, str)
        if self.deterministic:
            check_choice("transition_prior", transition_prior, (self.DETERMINISTIC,))
            self.transition_prior = self.DETERMINISTIC
        else:
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
        pair = (state, action) if self.L is None else (layer, state, action)
        recorded = self.L is None or layer + 1 < self.L
        if recorded and self.deterministic:
            seen = self.next_counts[pair]
            if seen.sum() > 0 and seen[next_state] == 0:
                where = ", ".join(
                    f"{k} {v}"
                    for k, v in zip(("layer", "state", "action")[-len(pair) :], pair, strict=True)
                )
                raise OptplanError(
                    f"the deterministic transition prior is contradicted at {where}: next state "
                    f"{next_state} observed after {int(np.argmax(seen))}; use a Dirichlet "
                    "transition_prior (a pseudo-count) for stochastic transitions"
                )
        self.counts[pair] += 1
        self.reward_sums[pair] += reward
        if recorded:
            self.next_counts[(*pair, next_state)] += 1

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
        counts = self.next_counts[index]
        if not self.deterministic:  # dirichlet_mean, divided in place of the fresh sum
            alpha = counts + self.transition_prior
            return np.divide(alpha, alpha.sum(axis=-1, keepdims=True), out=alpha)
        n = counts.sum(axis=-1, keepdims=True)
        return np.where(n > 0, counts / np.maximum(n, 1.0), 1.0 / self.S)

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One model from the posterior: rewards (L, S, A) and transitions (L, S, A, S)."""
        mean, var = self.reward_posterior()
        R = mean + np.sqrt(var) * rng.standard_normal(mean.shape)
        if not self.deterministic:
            return R, sample_dirichlet(self.next_counts + self.transition_prior, rng)
        P = self.mean_transitions()
        unseen = self.next_counts.sum(axis=-1) == 0
        draws = rng.integers(0, self.S, size=unseen.shape)
        P[unseen] = 0.0
        P[unseen, draws[unseen]] = 1.0
        return R, P

    def bonus_numerators(self, kind: str = "paper", span=None, unvisited: str = "hoeffding"):
        """K-learning's bonus numerators ``c`` in ``K = E mu + c / tau + E P . V`` (layered
        posteriors only), shape ``(L, S, A)``; see :func:`k_bonus_numerators`."""
        if self.L is None:
            raise OptplanError("bonus_numerators needs a layered posterior (n_layers set)")
        # Eq. 6 as printed reads neither the posterior variance nor the transition counts
        held = kind == "posterior"
        return k_bonus_numerators(
            kind,
            self.counts,
            self.sigma,
            self.reward_posterior()[1] if held else None,
            self.next_counts.sum(axis=-1) if held else None,
            self.transition_prior,
            self.S,
            span,
            unvisited,
        )


#: Names of :func:`k_bonus_numerators`' bonuses and of its unvisited-pair terms.
K_BONUSES = ("paper", "posterior")
UNVISITED_TERMS = ("hoeffding", "paper")


def k_bonus_numerators(
    kind,
    counts,
    sigma,
    reward_var,
    transition_counts,
    transition_prior,
    n_states,
    span=None,
    unvisited="hoeffding",
) -> np.ndarray:
    r"""K-learning's bonus numerators ``c_l(s, a)`` (shape of ``counts``, ``(L, S, A)``).

    - ``"paper"``: Eq. 6 as printed, ``(sigma^2 + p_l^2) / (2 max(n, 1))`` with
      ``p_l = L - 1 - l``, whatever the posterior.
    - ``"posterior"``: from the posterior actually held, ``(v_n + t) / 2``: ``v_n`` the exact
      posterior variance of the mean reward (``reward_var``; the prior variance when
      ``n = 0``, 0 once visited when ``sigma = 0``) and ``t`` Lemma 2's transition term,
      ``Span_l^2 / (m + sum alpha)`` for a Dirichlet prior (``m`` observed transitions, ``sum
      alpha = S alpha``), and for the deterministic prior 0 once the pair's transition was
      seen, before it ``Span_l^2 / 4`` (Hoeffding: a value in a range of width ``Span``, the
      default ``unvisited="hoeffding"``) or ``Span_l^2`` (``unvisited="paper"``, the paper's
      ``p_l^2``, 4x conservative).

    ``span``: the value span ``Span_l`` of layer ``l + 1``'s values; default ``p_l = L-1-l``
    (rewards in [0, 1]); a positive finite number declares it for every layer but the last
    (DeepSea's return lies in [-0.01, 1]: 1.01). The last layer has no next value: 0 there.
    """
    check_choice("bonus", kind, K_BONUSES)
    check_choice("unvisited", unvisited, UNVISITED_TERMS)
    L = counts.shape[0]
    remaining = L - 1 - np.arange(L, dtype=float)
    if kind == "paper":
        return (np.square(sigma) + remaining[:, None, None] ** 2) / (2.0 * np.maximum(counts, 1.0))
    if span is None:
        spans = remaining
    else:
        spans = np.where(remaining > 0, check_positive("span", span), 0.0)
    span2 = (spans**2)[:, None, None]
    if transition_prior == LayeredPosterior.DETERMINISTIC:
        before = span2 / 4.0 if unvisited == "hoeffding" else span2
        transition = np.where(transition_counts > 0, 0.0, before)
    else:
        transition = span2 / (transition_counts + n_states * transition_prior)
    return (reward_var + transition) / 2.0


def _per_pair_sd(sigma, shape: tuple[int, ...]) -> np.ndarray:
    """A per-pair noise sd: finite, ``>= 0``, broadcast (read-only) to ``shape``."""
    sd = _broadcast("sigma", as_array("sigma", sigma), shape)
    if (sd < 0).any():
        idx = first_bad(sd < 0)
        raise OptplanError(
            f"sigma must be >= 0 (a standard deviation), got {float(sd[idx])!r} at index "
            f"{index_str(idx)}"
        )
    return sd
