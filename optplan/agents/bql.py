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

With numba (the ``jit`` extra) the action choice and the update (either moment match) are one
compiled call each (:mod:`optplan.agents._bql_kernels`), the same numbers as the NumPy code
below (the path without numba): NumPy's own loops, dot product and pairwise means, SciPy's
special functions, the same draws in the same order. The compiled run of
:mod:`optplan.experiments.bql_compiled` calls them too.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special

from .._checks import OptplanError, check_choice, check_int, check_real
from .._params import Component, Param
from ..posteriors import DRAFT_REWARD_PRIOR, NormalGamma
from . import _bql_kernels as BK
from ._posterior_agent import DRAFT_GAMMA, NG_PRIOR_PARAMS, continuing_args, ng_prior
from .base import check_count, check_normal_gamma, check_rng, continuing_mask

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

# Quadrature: largest step in u, steps per unit of the peak's half-width, tail cut-off
# (density below e^-TAIL), and a cap on the number of nodes (reached only for a peak much
# narrower than the Student-t's spread, which the agent does not meet: there w >= 1).
_H_MAX = BK.H_MAX
_STEPS_PER_WIDTH = BK.STEPS_PER_WIDTH
_TAIL = BK.TAIL
_MAX_NODES = BK.MAX_NODES
# log f(x) = log x - digamma(x) by its asymptotic series from this x on.
_SERIES_FROM = BK.SERIES_FROM


class MixtureMoments(NamedTuple):
    """``E_q[tau]``, ``E_q[mu tau]``, ``E_q[mu^2 tau]``, ``E_q[log tau]`` of the BQL mixture."""

    e_tau: float
    e_mu_tau: float
    e_mu2_tau: float
    e_log_tau: float


def log_minus_digamma(x):
    """``f(x) = log x - digamma(x)``, positive and decreasing on ``x > 0``; the asymptotic
    series ``1/(2x) + 1/(12 x^2) - 1/(120 x^4) + 1/(252 x^6) - 1/(240 x^8)`` for
    ``x >= 100`` (the difference of two logarithms would lose its digits there)."""
    x = np.asarray(x, dtype=float)
    big = x >= _SERIES_FROM
    xs = np.where(big, x, _SERIES_FROM)
    i2 = 1.0 / (xs * xs)
    series = 0.5 / xs + i2 * (1 / 12 - i2 * (1 / 120 - i2 * (1 / 252 - i2 / 240)))
    xd = np.where(big, 1.0, x)
    out = np.where(big, series, np.log(xd) - special.digamma(xd))
    return out if out.ndim else float(out)


def _f_prime(x: np.ndarray) -> np.ndarray:
    """``f'(x) = 1/x - trigamma(x) < 0`` (series for ``x >= 100``); trigamma is the Hurwitz
    zeta ``zeta(2, x)`` (a plain ufunc, unlike ``polygamma``)."""
    big = x >= _SERIES_FROM
    xs = np.where(big, x, _SERIES_FROM)
    i2 = 1.0 / (xs * xs)
    series = -i2 * (0.5 + (1 / 6 - i2 * (1 / 30 - i2 / 42)) / xs)
    xd = np.where(big, 1.0, x)
    return np.where(big, series, 1.0 / xd - special.zeta(2.0, xd))


def inverse_log_minus_digamma(y):
    """``x`` with ``log x - digamma(x) = y`` (``y > 0``), by Newton's method from Minka's
    starting point ``(3 - y + sqrt((y - 3)^2 + 24 y)) / (12 y)``; clipped to the public code's
    domain ``[1e-12, 1e12]`` (``y <= 0``, the limit of a degenerate mixture, gives ``1e12``).
    Vectorized; a float in, a float out."""
    y = np.asarray(y, dtype=float)
    lo, hi = F_INV_DOMAIN
    pos = y > 0
    yy = np.where(pos, y, 1.0)
    x = (3.0 - yy + np.sqrt((yy - 3.0) ** 2 + 24.0 * yy)) / (12.0 * yy)
    for _ in range(60):
        step = (log_minus_digamma(x) - yy) / _f_prime(x)
        new = np.where(x - step > 0, x - step, 0.5 * x)  # stay in the domain
        done = np.abs(new - x) <= 1e-14 * x
        x = new
        if done.all():
            break
    out = np.clip(np.where(pos, x, hi), lo, hi)
    return out if out.ndim else float(out)


def _f_inv(y: float) -> float:
    """:func:`inverse_log_minus_digamma` for one float (the per-step path: plain floats).

    Newton's iterate is a function of the last one only, so once an iterate repeats (the
    iteration circles through a few floats next to the root without meeting its stopping rule,
    a quarter of the agent's calls) every later one is known: the loop returns the iterate the
    full 60 steps would end on, the same float, without computing them."""
    lo, hi = F_INV_DOMAIN
    if not y > 0:
        return hi
    x = (3.0 - y + math.sqrt((y - 3.0) ** 2 + 24.0 * y)) / (12.0 * y)
    seen: dict[float, int] = {}  # iterate -> the step it started
    path: list[float] = []
    steps = BK.NEWTON_STEPS
    for k in range(steps):
        first = seen.get(x)
        if first is not None:  # a cycle of length k - first: step 60 starts on this iterate
            x = path[first + (steps - first) % (k - first)]
            break
        seen[x] = k
        path.append(x)
        if x >= _SERIES_FROM:
            i2 = 1.0 / (x * x)
            f = 0.5 / x + i2 * (1 / 12 - i2 * (1 / 120 - i2 * (1 / 252 - i2 / 240)))
            fp = -i2 * (0.5 + (1 / 6 - i2 * (1 / 30 - i2 / 42)) / x)
        else:
            f = math.log(x) - float(special.digamma(x))
            fp = 1.0 / x - float(special.zeta(2.0, x))
        new = x - (f - y) / fp
        if not new > 0:
            new = 0.5 * x
        if abs(new - x) <= 1e-14 * x:
            x = new
            break
        x = new
    return min(max(x, lo), hi)


def kl_projection(moments: MixtureMoments) -> tuple[float, float, float, float]:
    """The Normal-Gamma ``(mu0, lam, alpha, beta)`` closest in ``KL(q || p)`` to a distribution
    ``q`` with the given moments (the draft's Eq. bqlupdate, with its guards)."""
    e_tau, e_mu_tau, e_mu2_tau, e_log_tau = moments
    mu0 = e_mu_tau / e_tau
    lam = 1.0 / (LAM_JITTER + e_mu2_tau - e_tau * mu0 * mu0)
    alpha = max(1.0 + ALPHA_FLOOR, _f_inv(math.log(e_tau) - e_log_tau))
    return mu0, lam, alpha, alpha / e_tau


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
    if method == "monte-carlo":
        if rng is None:
            raise OptplanError("method='monte-carlo' needs rng (a numpy Generator)")
        check_rng(rng)
    return _moments(
        current, reward, discount, following, method, rng, check_int("n_samples", n_samples, 1)
    )


def _moments(current, reward, discount, following, method, rng, n_samples) -> MixtureMoments:
    """:func:`mixture_moments` without the input checks (the agent's per-step path)."""
    mu0, lam, alpha, beta = current
    a = alpha + 0.5
    lam1 = lam + 1.0
    k = lam / (2.0 * lam1)
    if following is None:  # a single exact update
        b = beta + k * (reward - mu0) ** 2
        m = (lam * mu0 + reward) / lam1
        return MixtureMoments(
            a / b, a * m / b, a * m * m / b + 1.0 / lam1, special.digamma(a) - math.log(b)
        )
    m2, l2, a2, b2 = following
    nu = 2.0 * a2
    scale = math.sqrt(b2 * (l2 + 1.0) / (a2 * l2))
    shift = reward + discount * m2 - mu0  # y = z - mu0 = shift + spread * T
    spread = discount * scale
    if method == "monte-carlo":
        n = n_samples
        y = shift + spread * rng.standard_t(nu, n)
        b = beta + k * y * y
        tau = rng.gamma(a, 1.0 / b)
        mu = mu0 + y / lam1 + rng.standard_normal(n) / np.sqrt(lam1 * tau)
        return MixtureMoments(
            float(tau.mean()),
            float((mu * tau).mean()),
            float((mu * mu * tau).mean()),
            float(np.log(tau).mean()),
        )
    if spread == 0.0:  # z is known: one exact update
        return _moments(current, reward + discount * m2, 1.0, None, method, rng, n_samples)
    wt, y = _student_t_nodes(nu, shift, spread, math.sqrt(beta / k))
    b = beta + k * y * y
    m = mu0 + y / lam1
    ib = 1.0 / b
    return MixtureMoments(
        a * float(wt @ ib),
        a * float(wt @ (m * ib)),
        a * float(wt @ (m * m * ib)) + 1.0 / lam1,
        float(special.digamma(a)) - float(wt @ np.log(b)),
    )


def _student_t_nodes(nu: float, shift: float, spread: float, half_width: float):
    """Weights and points ``y = shift + spread T`` of the trapezoid rule for ``E g(y)``,
    ``T ~ Student-t(nu)``, in ``u = sqrt(nu) asinh(T / sqrt(nu))`` (module docstring).
    ``half_width``: where ``g`` has its peak, ``|y| <~ half_width``."""
    sn = math.sqrt(nu)
    w = half_width / spread  # the peak's half-width in T, seen at T* through the map:
    t_star = -shift / spread
    h = min(_H_MAX, w / math.sqrt(1.0 + t_star * t_star / nu) / _STEPS_PER_WIDTH)
    r = _TAIL / nu  # nu log cosh(u_max / sqrt(nu)) = TAIL
    u_max = sn * (math.acosh(math.exp(r)) if r < 700 else r + math.log(2.0))
    n = int(math.ceil(u_max / h))
    if 2 * n + 1 > _MAX_NODES:
        n = (_MAX_NODES - 1) // 2
        h = u_max / n
    x = (h / sn) * np.arange(-n, n + 1)
    log_cosh = np.log1p(2.0 * np.sinh(0.5 * x) ** 2)  # no cancellation at small x, large nu
    # log of the Student-t constant 1 / (sqrt(nu) B(nu/2, 1/2)); a difference of gammaln
    # would lose ~1e-6 at nu = 1e9 (alpha reaches 1e12 when a mixture is nearly degenerate)
    log_c = -0.5 * math.log(nu) - float(special.betaln(0.5 * nu, 0.5))
    wt = h * np.exp(log_c - nu * log_cosh)
    return wt, shift + spread * sn * np.sinh(x)


class BayesianQLearning:
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
    """

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
        self.mu0, self.lam, self.alpha, self.beta = (np.full(shape, v) for v in self.prior)
        self.steps = 0
        # room for the compiled step (:mod:`._bql_kernels`): the draws, Newton's iterates,
        # the arguments of NumPy's loops
        self._t = np.empty(self.n_actions)
        self._path = np.empty(BK.NEWTON_STEPS)
        self._meta = np.empty(5, dtype=np.int64)
        self._mc = np.empty((4, 0))

    def _mc_work(self) -> np.ndarray:
        """Room for the compiled Monte-Carlo update's ``n_samples`` draws and products
        (``(4, n_samples)``; none for the quadrature)."""
        n = self.n_samples if self.moment_match == "monte-carlo" else 0
        if self._mc.shape != (4, n):
            self._mc = np.empty((4, n))
        return self._mc

    def marginal_scale(self) -> np.ndarray:
        """``sqrt(beta / (lam alpha))``, the scale of each pair's Student-t marginal of ``mu``."""
        return np.sqrt(self.beta / (self.lam * self.alpha))

    def select_action(self, state: int) -> int:
        forced = self._forced[state]
        if forced >= 0:
            return int(forced)
        kernels = BK.table()
        if kernels is not None:  # the same numbers, in one compiled call
            return int(
                kernels["_select"](
                    self.rng, self.mu0, self.lam, self.alpha, self.beta, self.action_mask,
                    self._forced, int(state), self.action == "sample", self.quantile, self._t,
                )
            )  # fmt: skip
        df = 2.0 * self.alpha[state]
        if self.action == "sample":
            t = self.rng.standard_t(df)
        else:
            t = special.stdtrit(df, self.quantile)
        q = self.mu0[state] + t * np.sqrt(self.beta[state] / (self.lam[state] * self.alpha[state]))
        return int(np.argmax(np.where(self.action_mask[state], q, -np.inf)))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        mc = self.moment_match == "monte-carlo"
        kernels = BK.mc_table() if mc else BK.table()
        if kernels is not None:  # the same numbers, in one compiled call
            args = (
                self.mu0, self.lam, self.alpha, self.beta, self.action_mask, int(state),
                int(action), float(reward), int(next_state), bool(done), self.discount,
                self._path, self._meta,
            )  # fmt: skip
            if mc:
                status = kernels["_update_mc"](self.rng, *args, self._mc_work())
            else:
                status = kernels["_update"](*args)
            if status == BK.ZERO_DIVISION:  # as kl_projection below raises it
                raise ZeroDivisionError("float division by zero")
            self.steps += 1
            return
        cur = (
            self.mu0[state, action],
            self.lam[state, action],
            self.alpha[state, action],
            self.beta[state, action],
        )
        following = None
        if not done:
            nxt = int(
                np.argmax(np.where(self.action_mask[next_state], self.mu0[next_state], -np.inf))
            )
            following = (
                self.mu0[next_state, nxt],
                self.lam[next_state, nxt],
                self.alpha[next_state, nxt],
                self.beta[next_state, nxt],
            )
        moments = _moments(
            cur,
            float(reward),
            self.discount,
            following,
            self.moment_match,
            self.rng,
            self.n_samples,
        )
        (
            self.mu0[state, action],
            self.lam[state, action],
            self.alpha[state, action],
            self.beta[state, action],
        ) = kl_projection(moments)
        self.steps += 1

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
