r"""The compiled steps of :class:`~optplan.agents.BayesianQLearning`: its state tuple
:class:`BQLState`, the action choice :func:`bql_act`, the update :func:`bql_observe`, and the
pieces they are made of (the mixture's moments by quadrature or Monte Carlo, the projection
onto a Normal-Gamma, the inverse of ``log x - digamma(x)``). The agent's ``select_action`` and
``update`` call them, and so does its compiled loop :func:`bql_run`; the module docstring of
:mod:`optplan.agents.bql` gives the mathematics.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._jit import njit
from ..envs.kernels import play
from ..fast._special import digamma, log_beta_half, student_t_quantile, trigamma

__all__ = ["BQLState", "bql_act", "bql_observe", "bql_run", "quadrature_moments",
           "monte_carlo_moments", "exact_moments", "project", "f_inv", "f_inv_many",
           "log_minus_digamma_many"]  # fmt: skip

#: The draft's guards: ``alpha >= 1 + ALPHA_FLOOR``, ``lam = 1 / (LAM_JITTER + ...)``, and the
#: search domain of ``f^-1`` (pynverse's ``domain=[1e-12, 1e12]`` in the public code).
ALPHA_FLOOR = 1e-6
LAM_JITTER = 1e-12
F_INV_LO, F_INV_HI = 1e-12, 1e12
#: Quadrature: largest step in u, steps per unit of the peak's half-width, tail cut-off
#: (density below e^-TAIL), cap on the number of nodes.
H_MAX = 0.3
STEPS_PER_WIDTH = 5.0
TAIL = 40.0
MAX_NODES = 20_001
#: ``log x - digamma(x)`` and its derivative by their asymptotic series from this x on.
SERIES_FROM = 100.0
#: Newton steps of ``f^-1``.
NEWTON_STEPS = 60
#: :func:`project`'s outcomes: the posterior updated; the projection divided by zero (a
#: degenerate mixture, e.g. one Monte-Carlo draw: ``E[mu^2 tau] - E[tau] mu0^2`` cancels
#: exactly): nothing written.
OK, ZERO_DIVISION = 0, 1
#: ``BQLState.flags``: Thompson sampling (else the upper quantile), Monte-Carlo moment match
#: (else quadrature), updates made, the last update's outcome, and the pair it was for.
SAMPLE, MONTE_CARLO, STEPS, STATUS, PAIR = 0, 1, 2, 3, 4


class BQLState(NamedTuple):
    """The whole state of :class:`~optplan.agents.BayesianQLearning`: the Normal-Gamma
    posterior ``mu0, lam, alpha, beta`` ``(S, A)``; ``mask`` ``(S, A)`` and ``forced``
    ``(S,)`` (the one admissible action of a state, or -1); ``quantiles`` ``(S, A)``, each
    pair's upper ``quantile`` of its Student-t (the quantile rule); ``params = [discount,
    quantile]``; ``flags`` (:data:`SAMPLE` ...); room for the Monte-Carlo draws ``work``
    ``(3, n_samples)`` and Newton's iterates ``path``."""

    mu0: np.ndarray
    lam: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    mask: np.ndarray
    forced: np.ndarray
    quantiles: np.ndarray
    params: np.ndarray
    flags: np.ndarray
    work: np.ndarray
    path: np.ndarray


@njit
def _f(x):  # pragma: no cover - compiled by numba
    """``log x - digamma(x)`` and its derivative ``1/x - trigamma(x)`` (series from
    :data:`SERIES_FROM` on, where the differences would lose their digits)."""
    if x >= SERIES_FROM:
        i2 = 1.0 / (x * x)
        f = 0.5 / x + i2 * (1 / 12 - i2 * (1 / 120 - i2 * (1 / 252 - i2 / 240)))
        fp = -i2 * (0.5 + (1 / 6 - i2 * (1 / 30 - i2 / 42)) / x)
        return f, fp
    return math.log(x) - digamma(x), 1.0 / x - trigamma(x)


@njit
def f_inv(y, path):  # pragma: no cover - compiled by numba
    """``x`` with ``log x - digamma(x) = y`` by Newton's method from Minka's start, clipped to
    ``[F_INV_LO, F_INV_HI]`` (``y <= 0``: ``F_INV_HI``). Newton's iterate depends on the last
    one only, so once one repeats (a cycle next to the root that never meets the stopping
    rule) the iterate the full :data:`NEWTON_STEPS` steps end on is known (``path``: room for
    the iterates)."""
    if not y > 0:
        return F_INV_HI
    x = (3.0 - y + math.sqrt((y - 3.0) * (y - 3.0) + 24.0 * y)) / (12.0 * y)
    for k in range(NEWTON_STEPS):
        first = -1
        for j in range(k):
            if path[j] == x:
                first = j
                break
        if first >= 0:
            x = path[first + (NEWTON_STEPS - first) % (k - first)]
            break
        path[k] = x
        f, fp = _f(x)
        new = x - (f - y) / fp
        if not new > 0:
            new = 0.5 * x
        if abs(new - x) <= 1e-14 * x:
            x = new
            break
        x = new
    return min(max(x, F_INV_LO), F_INV_HI)


@njit
def f_inv_many(y, out):  # pragma: no cover - compiled by numba
    """:func:`f_inv` of each ``y[i]`` into ``out[i]``."""
    path = np.empty(NEWTON_STEPS)
    for i in range(y.shape[0]):
        out[i] = f_inv(y[i], path)


@njit
def log_minus_digamma_many(x, out):  # pragma: no cover - compiled by numba
    """``log x - digamma(x)`` of each ``x[i] > 0`` into ``out[i]``."""
    for i in range(x.shape[0]):
        out[i] = _f(x[i])[0]


@njit
def exact_moments(mu0, lam, alpha, beta, reward):  # pragma: no cover - compiled by numba
    """The four moments of one exact Normal-Gamma update by ``reward``."""
    a = alpha + 0.5
    lam1 = lam + 1.0
    b = beta + lam / (2.0 * lam1) * (reward - mu0) ** 2
    m = (lam * mu0 + reward) / lam1
    return a / b, a * m / b, a * m * m / b + 1.0 / lam1, digamma(a) - math.log(b)


@njit
def quadrature_moments(mu0, lam, alpha, beta, reward, discount, m2, l2, a2,
                       b2):  # fmt: skip  # pragma: no cover - compiled by numba
    """The mixture's four moments by the trapezoid rule in ``u = sqrt(nu) asinh(T /
    sqrt(nu))`` (:mod:`optplan.agents.bql`), the following pair's posterior being ``(m2, l2,
    a2, b2)``."""
    a = alpha + 0.5
    lam1 = lam + 1.0
    k = lam / (2.0 * lam1)
    nu = 2.0 * a2
    shift = reward + discount * m2 - mu0  # y = z - mu0 = shift + spread * T
    spread = discount * math.sqrt(b2 * (l2 + 1.0) / (a2 * l2))
    if spread == 0.0:  # z is known: one exact update
        return exact_moments(mu0, lam, alpha, beta, reward + discount * m2)
    sn = math.sqrt(nu)
    w = math.sqrt(beta / k) / spread  # the peak's half-width in T, seen at T* through the map
    t_star = -shift / spread
    h = min(H_MAX, w / math.sqrt(1.0 + t_star * t_star / nu) / STEPS_PER_WIDTH)
    r = TAIL / nu  # nu log cosh(u_max / sqrt(nu)) = TAIL
    u_max = sn * (math.acosh(math.exp(r)) if r < 700 else r + math.log(2.0))
    n = int(math.ceil(u_max / h))
    if 2 * n + 1 > MAX_NODES:
        n = (MAX_NODES - 1) // 2
        h = u_max / n
    # log of the Student-t constant 1 / (sqrt(nu) B(nu/2, 1/2))
    log_c = -0.5 * math.log(nu) - log_beta_half(0.5 * nu)
    s_ib = s_mib = s_m2ib = s_logb = 0.0
    for i in range(-n, n + 1):
        x = (h / sn) * i
        sh = math.sinh(0.5 * x)
        log_cosh = math.log1p(2.0 * sh * sh)  # no cancellation at small x, large nu
        wt = h * math.exp(log_c - nu * log_cosh)
        y = shift + spread * sn * math.sinh(x)
        b = beta + k * y * y
        m = mu0 + y / lam1
        ib = wt / b
        s_ib += ib
        s_mib += m * ib
        s_m2ib += m * m * ib
        s_logb += wt * math.log(b)
    return a * s_ib, a * s_mib, a * s_m2ib + 1.0 / lam1, digamma(a) - s_logb


@njit
def monte_carlo_moments(rng, mu0, lam, alpha, beta, reward, discount, m2, l2, a2, b2,
                        work):  # fmt: skip  # pragma: no cover - compiled by numba
    """The mixture's four moments as means over ``n = work.shape[1]`` draws on ``rng``: ``n``
    Student-t draws of ``z'``, then for each a draw of ``tau``, then of ``mu`` (``work``: room
    for them, ``(3, n)``)."""
    a = alpha + 0.5
    lam1 = lam + 1.0
    k = lam / (2.0 * lam1)
    nu = 2.0 * a2
    shift = reward + discount * m2 - mu0
    spread = discount * math.sqrt(b2 * (l2 + 1.0) / (a2 * l2))
    n = work.shape[1]
    y, tau, mu = work[0], work[1], work[2]
    for i in range(n):
        y[i] = shift + spread * rng.standard_t(nu)
    for i in range(n):
        tau[i] = rng.gamma(a, 1.0 / (beta + k * y[i] * y[i]))
    for i in range(n):
        mu[i] = mu0 + y[i] / lam1 + rng.standard_normal() / math.sqrt(lam1 * tau[i])
    s_tau = s_mu_tau = s_mu2_tau = s_log_tau = 0.0
    for i in range(n):
        s_tau += tau[i]
        s_mu_tau += mu[i] * tau[i]
        s_mu2_tau += mu[i] * mu[i] * tau[i]
        s_log_tau += math.log(tau[i])
    return s_tau / n, s_mu_tau / n, s_mu2_tau / n, s_log_tau / n


@njit
def project(e_tau, e_mu_tau, e_mu2_tau, e_log_tau, path):  # pragma: no cover - compiled
    """The Normal-Gamma ``(mu0, lam, alpha, beta)`` closest in ``KL(q || p)`` to a ``q`` with
    these moments, and :data:`OK` (or :data:`ZERO_DIVISION`, where it divides by zero)."""
    if e_tau == 0.0:
        return ZERO_DIVISION, 0.0, 0.0, 0.0, 0.0
    m = e_mu_tau / e_tau
    den = LAM_JITTER + e_mu2_tau - e_tau * m * m
    if den == 0.0:
        return ZERO_DIVISION, 0.0, 0.0, 0.0, 0.0
    alpha = max(1.0 + ALPHA_FLOOR, f_inv(math.log(e_tau) - e_log_tau, path))
    return OK, m, 1.0 / den, alpha, alpha / e_tau


@njit(inline="always")
def _argmax_masked(values, mask):  # pragma: no cover - compiled by numba
    """``argmax`` of ``values`` where ``mask``, NumPy's rule (the first maximum; the first
    NaN wins)."""
    best, top = -1, 0.0
    for b in range(values.shape[0]):
        val = values[b] if mask[b] else -math.inf
        if best >= 0 and math.isnan(top):
            continue
        if best < 0 or math.isnan(val) or val > top:
            best, top = b, val
    return best


@njit(inline="always")
def bql_act(s, x, rng):  # pragma: no cover - compiled by numba
    """Thompson sampling of each action's Student-t marginal of ``mu`` (one draw per action,
    in order), or its upper quantile; ``argmax`` over the admissible actions."""
    if s.forced[x] >= 0:
        return s.forced[x]
    A = s.mu0.shape[1]
    q = np.empty(A)
    for b in range(A):
        t = rng.standard_t(2.0 * s.alpha[x, b]) if s.flags[SAMPLE] else s.quantiles[x, b]
        q[b] = s.mu0[x, b] + t * math.sqrt(s.beta[x, b] / (s.lam[x, b] * s.alpha[x, b]))
    return _argmax_masked(q, s.mask[x])


@njit(inline="always")
def bql_observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """The moment-matched mixture update of pair ``(x, a)``; ``True`` (a "plan" the agent's
    :meth:`~optplan.agents.BayesianQLearning.plan` turns into an error) when it divided by
    zero."""
    c = (s.mu0[x, a], s.lam[x, a], s.alpha[x, a], s.beta[x, a])
    if done:
        moments = exact_moments(c[0], c[1], c[2], c[3], r)
    else:
        n = _argmax_masked(s.mu0[y], s.mask[y])
        f = (s.mu0[y, n], s.lam[y, n], s.alpha[y, n], s.beta[y, n])
        if s.flags[MONTE_CARLO]:
            moments = monte_carlo_moments(rng, c[0], c[1], c[2], c[3], r, s.params[0], f[0],
                                          f[1], f[2], f[3], s.work)  # fmt: skip
        else:
            moments = quadrature_moments(c[0], c[1], c[2], c[3], r, s.params[0], f[0], f[1],
                                         f[2], f[3])  # fmt: skip
    status, m, lam, alpha, beta = project(moments[0], moments[1], moments[2], moments[3],
                                          s.path)  # fmt: skip
    s.flags[STATUS] = status
    s.flags[PAIR] = x * s.mu0.shape[1] + a
    if status != OK:
        return True
    s.mu0[x, a], s.lam[x, a], s.alpha[x, a], s.beta[x, a] = m, lam, alpha, beta
    if not s.flags[SAMPLE]:
        s.quantiles[x, a] = student_t_quantile(2.0 * alpha, s.params[1])
    s.flags[STEPS] += 1
    return False


@njit
def bql_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(bql_act, bql_observe, s, env, steps, env_rng, agent_rng)


@njit
def quantile_table(alpha, quantile, out):  # pragma: no cover - compiled by numba
    """The upper ``quantile`` of each pair's Student-t (``2 alpha`` degrees of freedom)."""
    for i in range(alpha.shape[0]):
        for j in range(alpha.shape[1]):
            out[i, j] = student_t_quantile(2.0 * alpha[i, j], quantile)
