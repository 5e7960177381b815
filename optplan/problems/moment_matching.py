"""The moment-matching variance equation (bayesian-methods-tabular-rl App. MM): the UBE's
fixed-point structure with an exact local term."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanError, as_array, check_real
from ..result import PlanResult
from ..uncertainty import _moment_matching_unchecked, check_dirichlet, moment_matching_local
from ._compare import answer_errors
from .base import Problem, store_readonly
from .ube import UncertaintyBellman, as_policy


@dataclass(frozen=True, eq=False)
class MomentMatchingVariance(Problem):
    r"""The epistemic variance of the Q-values by moment matching across the Bellman equation
    (bayesian-methods-tabular-rl App. MM, Eq. epistemicmm; its write-up's App. A.4):

    .. math:: \tilde\sigma^2_{sa} = w_{sa} + \gamma^2 \sum_{s'} \bar P(s'|s,a)
              \tilde\sigma^2_{s'\pi(s')},\qquad w = A + B + 2\gamma C + \gamma^2 D

    with the local term from exact Dirichlet / Normal-Gamma posterior moments
    (:func:`optplan.uncertainty.moment_matching_local`). The equation is the UBE's with
    ``local = w`` and ``Pbar`` the Dirichlet mean, so both paths are the UBE's
    (:attr:`bellman`): one linear solve, one LP.

    Parameters
    ----------
    alpha : array (S, A, S)
        Dirichlet posterior parameters of the transitions (``> 0`` on the support).
    reward_mean, reward_var : arrays (S, A, S)
        Posterior mean ``mu0`` and variance ``Var mu`` of the mean reward of each
        ``(s, a, s')`` (Normal-Gamma: ``beta / (lambda (alpha - 1))``).
    policy : array (S, A) or int array (S,)
        The greedy policy of the posterior-mean model (or any policy).
    discount : float in [0, 1)
    values : array (S,), optional
        ``V[s'] = Qbar(s', pi(s'))``; default: evaluated exactly for ``policy`` in the
        posterior-mean model (``rbar[s, a] = sum_s' pbar mu0``).

    Notes
    -----
    Results: as :class:`UncertaintyBellman` (``x = sigma~^2``); ``info`` holds the local term
    ``w`` and its parts ``A``, ``B``, ``C``, ``D`` (also :attr:`terms`).
    """

    alpha: np.ndarray
    reward_mean: np.ndarray
    reward_var: np.ndarray
    policy: np.ndarray
    discount: float
    values: np.ndarray | None = None
    stem = "moment_matching"

    def __post_init__(self):
        alpha = check_dirichlet(as_array("alpha", self.alpha, 3))
        S, A, S2 = alpha.shape
        if S2 != S:
            raise OptplanError(f"alpha must have shape (S, A, S), got {alpha.shape}")
        gamma = check_real("discount", self.discount, 0.0, 1.0, high_open=True)
        pbar_policy = as_policy(self.policy, (S, A))
        mean = as_array("reward_mean", self.reward_mean)
        if mean.shape != alpha.shape:
            raise OptplanError(
                f"reward_mean has shape {mean.shape}, expected {alpha.shape} (as alpha)"
            )
        if self.values is None:
            pbar = alpha / alpha.sum(-1, keepdims=True)
            rbar = np.sum(pbar * mean, axis=-1)
            P_pi = np.einsum("sa,sat->st", pbar_policy, pbar)
            values = np.linalg.solve(np.eye(S) - gamma * P_pi, np.sum(pbar_policy * rbar, axis=-1))
        else:
            values = self.values
        terms = moment_matching_local(alpha, mean, self.reward_var, values, gamma)
        bellman = UncertaintyBellman(
            alpha / alpha.sum(-1, keepdims=True), pbar_policy, _local_term(terms, gamma), gamma
        )
        self._store(alpha, mean, values, gamma, terms, bellman)

    def _store(self, alpha, mean, values, gamma, terms, bellman) -> None:
        store_readonly(self, alpha=alpha, reward_mean=mean)
        object.__setattr__(self, "values", np.asarray(values, dtype=float))
        object.__setattr__(self, "discount", gamma)
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "bellman", bellman)

    @classmethod
    def _trusted(
        cls, alpha, reward_mean, reward_var, policy, discount: float, values
    ) -> MomentMatchingVariance:
        """The problem of an agent's own posterior, already valid (float arrays of one shape
        ``(S, A, S)``, Dirichlet ``alpha``, ``reward_var >= 0``, a policy of action indices,
        a checked ``discount``, the policy's ``values``), built without the checks: the same
        arrays, terms and :attr:`bellman` as the public constructor. Not part of the public
        API: a user's input goes through the constructor."""
        out = cls.__new__(cls)
        alpha = np.array(alpha, dtype=float)
        mean = np.array(reward_mean, dtype=float)
        values = np.asarray(values, dtype=float)
        gamma = float(discount)
        terms = _moment_matching_unchecked(alpha, mean, reward_var, values, gamma)
        bellman = UncertaintyBellman._trusted(
            alpha / alpha.sum(-1, keepdims=True), policy, _local_term(terms, gamma), gamma
        )
        object.__setattr__(out, "reward_var", reward_var)
        object.__setattr__(out, "policy", policy)
        out._store(alpha, mean, values, gamma, terms, bellman)
        return out

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        return self.bellman.compare(a, b)

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value, ``sigma~^2`` and the occupancy ``y``."""
        return answer_errors(self, answer, reference, multiplier=True)


def _local_term(terms, gamma: float) -> np.ndarray:
    """``w`` clipped at 0: the local term is a variance, and rounding can leave it at -1e-17
    where it is 0 (beyond rounding it is an error)."""
    w = terms.w
    if (w < 0).any():
        scale = np.abs(np.stack([terms.A, terms.B, 2 * gamma * terms.C, gamma**2 * terms.D])).max(0)
        if (w < -1e-12 * (1 + scale)).any():  # pragma: no cover - a variance identity
            raise OptplanError("moment-matching local term is negative beyond rounding")
    return np.maximum(w, 0.0)
