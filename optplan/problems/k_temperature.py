r"""K-learning's optimal temperature, problem (11) of k-learning-variational-bayesian-rl.

.. math::

    \min_{\tau \ge 0, K}\ \mathbb{E}_{s\sim\rho}\Big[\tau \log \sum_a e^{K_0(s,a)/\tau}\Big]
    \quad \text{s.t.}\quad K_l \ge \mathcal{B}_l(\tau, K_{l+1}),\ K_L \equiv 0,

with the optimistic Bellman operator of Eq. 6 (see :mod:`optplan.soft`). Also the
functional helpers agents use: :func:`k_values`, :func:`boltzmann_policy`,
:func:`soft_values` (Eq. 14) and :func:`temperature_schedule` (Eq. 10).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import soft
from .._checks import (
    OptplanError,
    as_array,
    check_int,
    check_positive,
    first_bad,
)
from ..result import PlanResult
from ._compare import answer_errors, diff
from .base import Problem

__all__ = [
    "KLearningTemperature",
    "k_values",
    "boltzmann_policy",
    "soft_values",
    "temperature_schedule",
    "check_k_inputs",
    "check_bonus",
]

#: ``compare`` checks K-values only on pairs with at least this occupancy (see there).
PINNED_OCCUPANCY = 1e-6

#: Tolerance on the row sums of ``mean_transitions`` and on ``initial``.
_SUM_TOL = 1e-9


def _array(name: str, value, ndim: int) -> np.ndarray:
    return as_array(name, value, ndim, readonly=True)


def check_k_inputs(mean_rewards, mean_transitions, counts, sigma, initial=None):
    """Validate and convert K-learning inputs; errors name the argument, index and value.

    Returns ``(R, P, N, sigma, rho)`` as read-only float arrays (``sigma`` a float).
    """
    R = _array("mean_rewards", mean_rewards, 3)
    L, S, A = R.shape
    if min(L, S, A) < 1:
        raise OptplanError(f"mean_rewards must have L, S, A >= 1, got shape {R.shape}")
    P = _array("mean_transitions", mean_transitions, 4)
    if P.shape != (L, S, A, S):
        raise OptplanError(
            f"mean_transitions has shape {P.shape}, expected (L, S, A, S) = {(L, S, A, S)} "
            f"from mean_rewards {R.shape}"
        )
    if (P < 0).any():
        idx = first_bad(P < 0)
        raise OptplanError(f"mean_transitions must be >= 0, got {P[idx]} at index {idx}")
    sums = P.sum(axis=-1)
    off = np.abs(sums - 1.0) > _SUM_TOL
    if off.any():
        idx = first_bad(off)
        raise OptplanError(
            f"mean_transitions[{', '.join(map(str, idx))}, :] sums to {sums[idx]!r}, not 1: "
            f"each row must be a distribution over next states"
        )
    N = _array("counts", counts, 3)
    if N.shape != (L, S, A):
        raise OptplanError(
            f"counts has shape {N.shape}, expected (L, S, A) = {(L, S, A)} from mean_rewards"
        )
    if (N < 0).any():
        idx = first_bad(N < 0)
        raise OptplanError(f"counts must be >= 0, got {N[idx]} at index {idx}")
    sigma = check_positive("sigma", sigma, allow_zero=True)
    if initial is None:
        rho = np.full(S, 1.0 / S)
        rho.setflags(write=False)
    else:
        rho = _array("initial", initial, 1)
        if rho.shape != (S,):
            raise OptplanError(f"initial has shape {rho.shape}, expected ({S},) from mean_rewards")
        if (rho < 0).any() or abs(rho.sum() - 1.0) > _SUM_TOL:
            raise OptplanError(
                f"initial must be a distribution (>= 0, summing to 1), got sum {rho.sum()!r} "
                f"and min {rho.min()!r}"
            )
    return R, P, N, sigma, rho


def check_bonus(bonus, shape: tuple[int, int, int]) -> np.ndarray | None:
    """Bonus numerators: None, or a read-only ``(L, S, A)`` array of finite entries ``>= 0``;
    errors name the field, the index and the value."""
    if bonus is None:
        return None
    c = _array("bonus", bonus, 3)
    if c.shape != shape:
        raise OptplanError(
            f"bonus has shape {c.shape}, expected (L, S, A) = {shape} from mean_rewards"
        )
    if (c < 0).any():
        idx = first_bad(c < 0)
        raise OptplanError(f"bonus must be >= 0, got {c[idx]!r} at index {idx}")
    return c


def _handed_over(value) -> bool:
    """A read-only float array owning its data: nothing else can change it, so
    :meth:`KLearningTemperature._trusted` keeps it without a copy."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype == np.float64
        and value.base is None
        and not value.flags.writeable
    )


def _check_tau(tau) -> float:
    return check_positive("tau", tau)


@dataclass(frozen=True, eq=False)
class KLearningTemperature(Problem):
    r"""Problem (11): the temperature ``tau*`` that minimizes K-learning's regret bound.

    Parameters
    ----------
    mean_rewards : array (L, S, A)
        Posterior mean rewards ``E^t mu_l(s, a)``.
    mean_transitions : array (L, S, A, S)
        Posterior mean transitions from layer ``l`` to ``l + 1`` (rows are distributions; the
        last layer's rows are not used).
    counts : array (L, S, A)
        Visit counts ``n_l^t(s, a) >= 0``.
    sigma : float >= 0
        Sub-Gaussian scale of the reward noise.
    initial : array (S,), optional
        ``rho``, the start distribution over layer-0 states (uniform by default).
    bonus : array (L, S, A), optional
        The bonus numerators ``c`` in ``K = mu + c / tau + P . V`` (finite, ``>= 0``). Default:
        Eq. 6 as printed, ``(sigma^2 + (L-1-l)^2) / (2 max(n, 1))``. Named derivations from a
        posterior: :meth:`optplan.posteriors.LayeredPosterior.bonus_numerators` (``"paper"``,
        ``"posterior"``). Both paths use the array as given.

    Notes
    -----
    Fast path: Brent's method on ``f'(tau) = <lambda, H(pi)> - <lambda, c> / tau^2`` in
    ``log tau`` (:mod:`optplan.fast.k_temperature`), with the dual value of Appendix A.4 and the
    primal-dual gap in ``info``. Conic path: the joint program in ``(tau, K)``, the
    perspective of log-sum-exp as exponential cones and ``1/tau`` as a second-order cone
    (:mod:`optplan.conic.k_temperature`).

    Results: ``x = tau*``; ``value`` the objective; ``q = K`` (L, S, A); ``values`` Eq. 14's
    ``V`` (L, S); ``policy`` the Boltzmann policy (L, S, A); ``occupancy`` its occupancy.
    """

    mean_rewards: np.ndarray
    mean_transitions: np.ndarray
    counts: np.ndarray
    sigma: float
    initial: np.ndarray | None = None
    bonus: np.ndarray | None = None

    stem = "k_temperature"
    sqrt_tol_quantities = frozenset({"x", "q"})
    #: ``tau*`` is not unique where the objective is flat (one layer, ``sigma = 0``: Eq. 6's
    #: bonus is 0 and every small enough ``tau`` attains ``max`` of the rewards): it passes
    #: when ``x_alt``, its objective's gap to the optimum, is within the value's tolerance.
    certified_by = {"x": ("x_alt",)}

    def __post_init__(self):
        R, P, N, sigma, rho = check_k_inputs(
            self.mean_rewards, self.mean_transitions, self.counts, self.sigma, self.initial
        )
        if R.shape[2] < 2:
            raise OptplanError(
                "KLearningTemperature needs at least 2 actions: with one action the objective "
                "decreases in tau forever and has no minimizer"
            )
        for name, value in (
            ("mean_rewards", R),
            ("mean_transitions", P),
            ("counts", N),
            ("sigma", sigma),
            ("initial", rho),
            ("bonus", check_bonus(self.bonus, R.shape)),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def _trusted(
        cls, mean_rewards, mean_transitions, counts, sigma, initial=None, bonus=None
    ) -> KLearningTemperature:
        """The problem of an agent's own posterior, already valid (float ``(L, S, A)`` /
        ``(L, S, A, S)`` arrays, distribution rows, counts and bonus ``>= 0``, a checked
        ``sigma`` and ``initial``, at least 2 actions), built without the checks: the arrays
        the public constructor would store (float copies, read-only; a read-only float array
        that owns its data is the caller's to hand over and is kept as it is). Not part of the
        public API: a user's input goes through the constructor."""
        out = cls.__new__(cls)
        S = np.shape(mean_rewards)[1]
        rho = np.full(S, 1.0 / S) if initial is None else initial
        for name, value in (
            ("mean_rewards", mean_rewards),
            ("mean_transitions", mean_transitions),
            ("counts", counts),
            ("initial", rho),
            ("bonus", bonus),
        ):
            if value is not None and not _handed_over(value):
                value = np.array(value, dtype=float)
                value.setflags(write=False)
            object.__setattr__(out, name, value)
        object.__setattr__(out, "sigma", float(sigma))
        return out

    def bonus_numerators(self) -> np.ndarray:
        """``c`` (L, S, A): :attr:`bonus`, or Eq. 6's when none was given."""
        if self.bonus is not None:
            return self.bonus
        return soft.k_bonus(self.counts, self.sigma)

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(L, S, A)``."""
        return self.mean_rewards.shape

    def objective(self, tau: float) -> float:
        """``f(tau) = rho . V_0`` with ``V`` from the K-values at ``tau`` (problem 11 after
        minimizing over ``K``)."""
        tau = _check_tau(tau)
        c = self.bonus_numerators()
        return soft.temperature_terms(
            tau, self.mean_rewards, self.mean_transitions, c, self.initial
        )[0]

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """``tau*``, objective, and K-values on the pairs whose occupancy is at least
        :data:`PINNED_OCCUPANCY`.

        The objective depends on ``K[l, s, a]`` with weight ``lambda[l, s, a]``, so a solver
        accurate to ``eps`` in the objective fixes ``K`` there only to about
        ``eps / lambda``; where the Boltzmann occupancy is tiny (1e-32 measured) ``K`` is not
        pinned at all and any value satisfying the inequalities is optimal."""
        reach = np.asarray(a.occupancy) >= PINNED_OCCUPANCY
        qa = np.where(reach, np.asarray(a.q, dtype=float), 0.0)
        qb = np.where(reach, np.asarray(b.q, dtype=float), 0.0)
        out = {"value": diff(a.value, b.value), "x": diff(a.x, b.x), "q": diff(qa, qb)}
        return out | self.tau_gap(float(a.x), b.value)

    def tau_gap(self, tau: float, optimum: float) -> dict[str, tuple[float, float]]:
        """``{"x_alt": (|objective(tau) - optimum|, |optimum|)}``, the certificate of a
        ``tau`` (:attr:`certified_by`); empty for a ``tau`` that is not a finite number
        ``>= 0``."""
        if not (np.isfinite(tau) and tau >= 0):
            return {}
        # tau = 0 stands for the limit tau -> 0+ (finite only without a bonus)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            f = self.objective(max(tau, np.finfo(float).tiny))
        return {"x_alt": (abs(f - optimum) if np.isfinite(f) else np.inf, abs(optimum))}

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value and ``tau*``, certified by :meth:`tau_gap`."""
        out = answer_errors(self, answer, reference)
        if answer.x is not None:
            tau = float(np.asarray(answer.x, dtype=float).reshape(-1)[0])
            out |= self.tau_gap(tau, reference.value)
        return out


def k_values(tau, mean_rewards, mean_transitions, counts, sigma, bonus=None) -> np.ndarray:
    """K-values (L, S, A) of the optimistic Bellman operator (Eq. 6) at temperature ``tau``.

    Backward recursion ``K_l = mu_l + c_l / tau + P_l V_{l+1}``, ``V_l = tau logsumexp(K_l /
    tau)`` with a max-shift, so any ``tau`` in ``(0, inf)`` (1e-8 ... 1e8) gives finite values.
    ``bonus``: the numerators ``c`` (L, S, A), as in :class:`KLearningTemperature`.
    """
    tau = _check_tau(tau)
    R, P, N, sigma, _ = check_k_inputs(mean_rewards, mean_transitions, counts, sigma)
    return soft.k_values(tau, R, P, N, sigma, check_bonus(bonus, R.shape))


def _check_K(K) -> np.ndarray:
    """K-values: a real array with a last axis of actions, every entry finite."""
    K = as_array("K", K)
    if K.ndim < 1 or K.shape[-1] < 1:
        raise OptplanError(f"K must have a last axis of at least one action, got shape {K.shape}")
    return K


def boltzmann_policy(K, tau) -> np.ndarray:
    """``pi(s, a) ~ exp(K(s, a) / tau)`` over the last axis (Eq. 9); ``K`` finite."""
    tau = _check_tau(tau)
    return soft.boltzmann_policy(_check_K(K), tau)


def soft_values(K, tau) -> np.ndarray:
    """``V = tau log sum_a exp(K / tau)`` over the last axis (Eq. 14); ``K`` finite."""
    tau = _check_tau(tau)
    return soft.soft_values(_check_K(K), tau)


def temperature_schedule(t: int, sigma: float, L: int, S: int, A: int) -> float:
    """The temperature schedule of Eq. 10 for episode ``t >= 1`` (``S``: all states)."""
    for name, v, low in (("t", t, 1), ("L", L, 1), ("S", S, 1), ("A", A, 2)):
        check_int(name, v, low)
    check_positive("sigma", sigma, allow_zero=True)
    return soft.temperature_schedule(int(t), float(sigma), int(L), int(S), int(A))
