r"""Bayesian Q-learning (Dearden, Friedman and Russell 1998) as bayesian-methods-tabular-rl runs it
(App. BQL, Eq. bqlupdate; docs/sources.md §1 "BQL"; the public code's ``BayesianQAgent``).

The return ``z_sa`` of every admissible pair is Gaussian with unknown mean ``mu`` and precision
``tau``, and the posterior of ``(mu, tau)`` is a Normal-Gamma ``NG(mu0, lam, alpha, beta)`` per
pair (:class:`~optplan.posteriors.NormalGamma` conventions: ``tau ~ Gamma(alpha, rate beta)``,
``mu | tau ~ N(mu0, 1 / (lam tau))``), factored over pairs. After a transition
``(s, a, r, s')`` the agent assumes it follows ``a' = argmax_b mu0(s', b)`` from ``s'``; the
return ``z = r + gamma z'`` with ``z'`` from the Student-t predictive of ``NG(s', a')``
(``df = 2 alpha'``, location ``mu0'``, scale ``sqrt(beta' (lam' + 1) / (alpha' lam'))``) makes the
exact update the mixture ``q = E_z NG(m(z), lam + 1, alpha + 1/2, b(z))`` with
``m(z) = (lam mu0 + z) / (lam + 1)`` and ``b(z) = beta + lam (z - mu0)^2 / (2 (lam + 1))``
(one observation of ``z``). The new posterior is the Normal-Gamma closest to ``q`` in
``KL(q || p)`` (:func:`kl_projection`):

.. math::
    \mu_0 = \frac{E_q[\mu\tau]}{E_q[\tau]},\quad
    \lambda = \big(10^{-12} + E_q[\mu^2\tau] - E_q[\tau]\mu_0^2\big)^{-1},\quad
    \alpha = \max\big(1 + 10^{-6}, f^{-1}(\log E_q[\tau] - E_q[\log\tau])\big),\quad
    \beta = \alpha / E_q[\tau],

``f(x) = log x - digamma(x)`` (the two guards are the draft's). The four expectations come from
(:func:`mixture_moments`):

``moment_match="quadrature"`` (default; deterministic)
    Conditional on ``z`` each is exact, ``E[tau] = a / b(z)``, ``E[mu tau] = a m(z) / b(z)``,
    ``E[mu^2 tau] = a m(z)^2 / b(z) + 1 / (lam + 1)``, ``E[log tau] = digamma(a) - log b(z)``
    (``a = alpha + 1/2``), so only one expectation over the Student-t ``T`` of ``z'`` remains. It
    is computed by the trapezoid rule in ``u = sqrt(nu) asinh(T / sqrt(nu))``, where the
    Student-t density is ``C cosh(u / sqrt(nu))^(-nu)``: analytic in a strip, so the rule
    converges geometrically (step ``min(0.3, w / 5)``, ``w`` the half-width of the integrand's
    peak ``b(z)`` in units of ``T`` seen through the map; the range ends where the density falls
    below ``e^-40``). Against adaptive ``scipy.integrate.quad`` the four moments agree to about
    1e-11 relative (``tests/test_bayes_agents.py``).
``moment_match="monte-carlo"`` (the draft and its code)
    ``n_samples`` draws of ``z'``; for each, one draw ``(mu, tau)`` of the updated Normal-Gamma;
    the four sample means.

Action choice (``action``): ``"sample"`` (default, the draft's Algorithm and code: Thompson
sampling, ``q_b = mu0 + t_b sqrt(beta / (lam alpha))`` with ``t_b`` one Student-t draw with
``2 alpha`` degrees of freedom per admissible action, then ``argmax``) or ``"quantile"`` (the
upper ``quantile`` of the same marginal, a deterministic optimistic rule).

The agent's state is a tuple of arrays (:class:`~optplan.agents._bql_kernels.BQLState`) and
its action choice and update are compiled functions of it (:mod:`optplan.agents._bql_kernels`);
``select_action``, ``update``, the functions of this module and the compiled loop of
:func:`~optplan.experiments.run` all call them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import OptplanError, check_choice, check_int, check_real
from .._params import Component, Param
from ..posteriors import DRAFT_REWARD_PRIOR, NormalGamma
from . import _bql_kernels as BK
from ._bql_kernels import BQLState, bql_act, bql_observe, bql_run
from ._posterior_agent import DRAFT_GAMMA, NG_PRIOR_PARAMS, continuing_args, ng_prior
from .base import (
    CompiledAgent,
    check_count,
    check_normal_gamma,
    check_rng,
    continuing_mask,
    state_field,
)

__all__ = [
    "BayesianQLearning",
    "MixtureMoments",
    "MOMENT_MATCH",
    "ACTION_RULES",
    "mixture_moments",
    "kl_projection",
    "inverse_log_minus_digamma",
    "log_minus_digamma",
]

#: How the mixture's moments are computed (:func:`mixture_moments`).
MOMENT_MATCH = ("quadrature", "monte-carlo")
#: How BQL picks an action from its posterior.
ACTION_RULES = ("sample", "quantile")

#: The draft's guards: ``alpha >= 1 + ALPHA_FLOOR``, ``lam = 1 / (LAM_JITTER + ...)``, and the
#: search domain of ``f^-1`` (pynverse's ``domain=[1e-12, 1e12]`` in the public code).
ALPHA_FLOOR = BK.ALPHA_FLOOR
LAM_JITTER = BK.LAM_JITTER
F_INV_DOMAIN = (BK.F_INV_LO, BK.F_INV_HI)


class MixtureMoments(NamedTuple):
    """``E_q[tau]``, ``E_q[mu tau]``, ``E_q[mu^2 tau]``, ``E_q[log tau]`` of the BQL mixture."""

    e_tau: float
    e_mu_tau: float
    e_mu2_tau: float
    e_log_tau: float


def _floats(x) -> tuple[np.ndarray, bool]:
    x = np.asarray(x, dtype=float)
    return np.ascontiguousarray(x.ravel()), x.ndim == 0


def log_minus_digamma(x):
    """``f(x) = log x - digamma(x)``, positive and decreasing on ``x > 0``; the asymptotic
    series ``1/(2x) + 1/(12 x^2) - 1/(120 x^4) + 1/(252 x^6) - 1/(240 x^8)`` for
    ``x >= 100`` (the difference of two logarithms would lose its digits there). Vectorized;
    a float in, a float out."""
    flat, scalar = _floats(x)
    out = np.empty_like(flat)
    BK.log_minus_digamma_many(flat, out)
    return float(out[0]) if scalar else out.reshape(np.shape(x))


def inverse_log_minus_digamma(y):
    """``x`` with ``log x - digamma(x) = y`` (``y > 0``), by Newton's method from Minka's
    starting point ``(3 - y + sqrt((y - 3)^2 + 24 y)) / (12 y)``; clipped to the public code's
    domain ``[1e-12, 1e12]`` (``y <= 0``, the limit of a degenerate mixture, gives ``1e12``).
    Vectorized; a float in, a float out."""
    flat, scalar = _floats(y)
    out = np.empty_like(flat)
    BK.f_inv_many(flat, out)
    return float(out[0]) if scalar else out.reshape(np.shape(y))


def kl_projection(moments: MixtureMoments) -> tuple[float, float, float, float]:
    """The Normal-Gamma ``(mu0, lam, alpha, beta)`` closest in ``KL(q || p)`` to a distribution
    ``q`` with the given moments (the draft's Eq. bqlupdate, with its guards).

    Raises
    ------
    ZeroDivisionError
        The moments are those of a degenerate mixture (``E[tau] = 0`` or
        ``E[mu^2 tau] - E[tau] mu0^2 = -1e-12``).
    """
    status, *out = BK.project(*(float(v) for v in moments), np.empty(BK.NEWTON_STEPS))
    if status != BK.OK:
        raise ZeroDivisionError(f"BQL's projection divides by zero at moments {tuple(moments)}")
    return tuple(out)


def mixture_moments(
    current,
    reward: float,
    discount: float,
    following=None,
    method: str = "quadrature",
    rng: np.random.Generator | None = None,
    n_samples: int = 1000,
) -> MixtureMoments:
    """The four moments of BQL's mixture update of the pair with posterior ``current`` after
    reward ``reward``, the next pair's posterior being ``following`` (both
    ``(mu0, lam, alpha, beta)``), ``z = reward + discount z'``.

    ``following=None``: the transition ended an episode, ``z = reward`` exactly (the moments
    of one Normal-Gamma update). ``method="monte-carlo"`` needs ``rng``.
    """
    current = check_normal_gamma("current", current)
    if following is not None:
        following = check_normal_gamma("following", following)
    check_choice("method", method, MOMENT_MATCH)
    reward = check_real("reward", reward)
    discount = check_real("discount", discount, 0.0, 1.0)
    n_samples = check_int("n_samples", n_samples, 1)
    if method == "monte-carlo":
        if rng is None:
            raise OptplanError("method='monte-carlo' needs rng (a numpy Generator)")
        check_rng(rng)
    if following is None:
        return MixtureMoments(*BK.exact_moments(*current, reward))
    if method == "monte-carlo":
        work = np.empty((3, n_samples))
        return MixtureMoments(
            *BK.monte_carlo_moments(rng, *current, reward, discount, *following, work)
        )
    return MixtureMoments(*BK.quadrature_moments(*current, reward, discount, *following))


class BayesianQLearning(CompiledAgent):
    r"""Bayesian Q-learning as bayesian-methods-tabular-rl runs it (module docstring): a
    Normal-Gamma posterior over the return of every admissible pair, updated after every
    transition by the moment-matched mixture, actions by Thompson sampling of the Student-t
    marginal (or its upper quantile). Continuing; no planning, so no ``update_every``.

    Parameters
    ----------
    n_states, n_actions : int
    discount : float in [0, 1), default 0.9
        ``gamma`` of ``z = r + gamma z'`` (the draft's).
    prior : (mu0, lam, alpha, beta), default ``DRAFT_REWARD_PRIOR`` = (0, 4, 3, 3)
        The Normal-Gamma prior of every pair (the write-up's WideNarrow figure also uses
        ``mu0 = 1.5``); ``lam``, ``alpha``, ``beta > 0``.
    moment_match : {"quadrature", "monte-carlo"}, default "quadrature"
        How the mixture's moments are computed: deterministic quadrature (exact to ~1e-11) or
        the draft's Monte-Carlo estimate from ``n_samples`` draws.
    n_samples : int >= 1, default 1000
        Draws of the Monte-Carlo moment match (the draft's ``num_mixture_samples``).
    action : {"sample", "quantile"}, default "sample"
        Thompson sampling (the draft) or the upper ``quantile`` of each action's marginal.
    quantile : float in (0, 1), default 0.9
        Used with ``action="quantile"``.
    action_mask : bool array (S, A), optional

    Attributes
    ----------
    mu0, lam, alpha, beta : ndarray (S, A)
        The posterior of every pair (the prior on inadmissible ones, never used).
    steps : int
        Updates made since :meth:`reset`.
    """

    _run = staticmethod(bql_run)

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        discount=0.9,
        prior=DRAFT_REWARD_PRIOR,
        moment_match="quadrature",
        n_samples=1000,
        action="sample",
        quantile=0.9,
        action_mask=None,
    ):
        S = check_count("n_states", n_states)
        A = check_count("n_actions", n_actions)
        self.n_states, self.n_actions = S, A
        self.discount = check_real("discount", discount, 0.0, 1.0, high_open=True)
        self.prior = check_normal_gamma("prior", prior)
        self.moment_match = check_choice("moment_match", moment_match, MOMENT_MATCH)
        self.n_samples = check_int("n_samples", n_samples, 1)
        self.action = check_choice("action", action, ACTION_RULES)
        self.quantile = check_real("quantile", quantile, 0.0, 1.0, low_open=True, high_open=True)
        self.action_mask, self._forced = continuing_mask(action_mask, S, A)
        self.rng: np.random.Generator | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        """Back to the prior; take the run's generator."""
        self.rng = check_rng(rng)
        shape = (self.n_states, self.n_actions)
        mu0, lam, alpha, beta = (np.full(shape, v) for v in self.prior)
        quantiles = np.zeros(shape)
        if self.action == "quantile":
            BK.quantile_table(alpha, self.quantile, quantiles)
        monte_carlo = self.moment_match == "monte-carlo"
        self.state = BQLState(
            mu0=mu0, lam=lam, alpha=alpha, beta=beta,
            mask=np.ascontiguousarray(self.action_mask, dtype=np.bool_),
            forced=np.ascontiguousarray(self._forced, dtype=np.int64), quantiles=quantiles,
            params=np.array([self.discount, self.quantile]),
            flags=np.array([self.action == "sample", monte_carlo, 0, BK.OK, 0], dtype=np.int64),
            work=np.zeros((3, self.n_samples if monte_carlo else 0)),
            path=np.zeros(BK.NEWTON_STEPS),
        )  # fmt: skip

    mu0 = state_field("mu0", "Posterior means ``mu0``, ``(S, A)``.")
    lam = state_field("lam", "Posterior ``lam``, ``(S, A)``.")
    alpha = state_field("alpha", "Posterior ``alpha``, ``(S, A)``.")
    beta = state_field("beta", "Posterior ``beta``, ``(S, A)``.")

    @property
    def steps(self) -> int:
        """Updates made since :meth:`reset`."""
        return int(self.state.flags[BK.STEPS])

    def marginal_scale(self) -> np.ndarray:
        """``sqrt(beta / (lam alpha))``, the scale of each pair's Student-t marginal of ``mu``."""
        return np.sqrt(self.beta / (self.lam * self.alpha))

    def select_action(self, state: int) -> int:
        return int(bql_act(self.state, int(state), self.rng))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if bql_observe(self.state, int(state), int(action), float(reward), int(next_state),
                       bool(done), self.rng):  # fmt: skip
            self.plan()

    def plan(self) -> None:
        """Raise the error of an update that divided by zero (:func:`kl_projection`)."""
        if self.state.flags[BK.STATUS] != BK.OK:
            x, a = divmod(int(self.state.flags[BK.PAIR]), self.n_actions)
            raise ZeroDivisionError(
                f"BQL's update of pair (state {x}, action {a}) divides by zero: the mixture is "
                f"degenerate (moment_match={self.moment_match!r}, n_samples={self.n_samples}); "
                "the posterior is left as it was"
            )

    def compiled_reason(self, env) -> str | None:
        if env.ints[1]:
            return "BayesianQLearning is continuing: it does not play layered models"
        if env.mask.shape[1:] != (self.n_states, self.n_actions):
            return "the agent's tables do not match the model's states and actions"
        return None

    def posterior(self) -> NormalGamma:
        """The current posterior of every pair as one :class:`NormalGamma` (S, A)."""
        return NormalGamma(self.mu0, self.lam, self.alpha, self.beta)

    def __repr__(self) -> str:
        return (
            f"BayesianQLearning(S={self.n_states}, A={self.n_actions}, "
            f"discount={self.discount}, prior={self.prior}, moment_match={self.moment_match!r}, "
            f"action={self.action!r})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _bql(env, criterion, prior_mu0, prior_lam, prior_alpha, prior_beta, **params):
    prior = ng_prior(prior_mu0, prior_lam, prior_alpha, prior_beta)
    return BayesianQLearning(**continuing_args(env, "bql"), prior=prior, **params)


BUILDERS = (
    Component(
        "bql",
        _bql,
        (
            DRAFT_GAMMA,
            *NG_PRIOR_PARAMS,
            Param(
                "moment_match", "str", "quadrature", "'quadrature' (exact) or 'monte-carlo' (draft)"
            ),
            Param("n_samples", "int", 1000, "draws of the Monte-Carlo moment match"),
            Param("action", "str", "sample", "'sample' (Thompson, the draft) or 'quantile'"),
            Param(
                "quantile",
                "float",
                0.9,
                "upper quantile of each action's marginal (action=quantile)",
            ),
        ),
        "Bayesian Q-learning (Dearden et al.; bayesian-methods-tabular-rl App. BQL), continuing",
    ),
)
