r"""The model-based agents of bayesian-methods-tabular-rl (App. PSRL, UBE, MM; wave2.md §1):
continuing PSRL, the UBE without unrolling and moment matching, on one posterior.

**Posterior** (the write-up's App. A; wave2.md §1 "Common"): transitions
``P(. | s, a) ~ Dirichlet(kappa + counts)`` over *all* next states (``kappa = 1``) and the mean
reward of every transition ``mu(s, a, s') ~ NG(mu0, lam, alpha, beta)``, prior
:data:`~optplan.posteriors.DRAFT_REWARD_PRIOR` = ``(0, 4, 3, 3)``
(:class:`~optplan.posteriors.Dirichlet`, :class:`~optplan.posteriors.NormalGamma`). The agent
stores the transitions of the current batch and, every ``update_every`` steps, folds them into
the posterior in one batch update (:func:`~optplan.posteriors.transition_statistics`; with
``sum_of_squares="public-code"`` the Normal-Gamma update repeats the public code's
``(sum r)^2 / n`` slip, which depends on the batches) and re-plans:

- :class:`ContinuingPSRL`: one model ``P ~ Dirichlet``, ``mu ~ NG`` per ``(s, a, s')``,
  ``R[s, a] = sum_s' P mu``; its optimal policy by Howard policy iteration
  (:func:`optplan.dp.policy_iteration`, warm-started from the last policy), discounted at
  ``gamma = 0.9`` (the draft) or for average reward (``discount=None``); greedy until the next
  update.
- :class:`ContinuingUBE` (the draft's ``UbeNoUnrollAgent``): the posterior-mean model
  (``Pbar`` the Dirichlet mean, ``R[s, a] = sum_s' Pbar mu0``), its greedy policy ``pi`` and
  ``Qbar`` by policy iteration, the local uncertainty ``nu`` (:mod:`optplan.uncertainty`:
  ``local="draft"``, the draft's Eq. localunc, or ``"lemma1"``) and ``u`` from the continuing
  uncertainty Bellman equation :class:`~optplan.problems.UncertaintyBellman`
  (``u = nu + gamma^2 Pbar_pi u``, no unrolling); actions
  ``argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``.
- :class:`MomentMatching` (the write-up's App. A.4): the same ``Qbar`` and ``pi``, and the
  epistemic variance ``sigma~^2`` of :class:`~optplan.problems.MomentMatchingVariance`
  (exact Dirichlet moments, the same linear solve); actions
  ``argmax_b Qbar_sb + zeta eps_b sigma~_sb`` (``/ gamma`` as in the public code, see ``std``).

The linear algebra lives in the problem objects (``problem.solve("fast")``, or ``"conic"`` with
a counted fallback, :class:`~optplan.agents.base.ConicFallback`); the agents only assemble
their inputs. Every per-step operation is a few array operations on one row; the batch update
and planning are vectorized over all pairs.

Names: the UBE agent of the UBE paper (:class:`optplan.agents.UBE`, registered ``ube``) also
runs continuing, but with a known-noise Gaussian posterior per ``(s, a)`` and the UBE paper's
local rules; :class:`ContinuingUBE` (registered ``ube-continuing``) is the draft's agent on the
Normal-Gamma / Dirichlet posterior. Likewise :class:`optplan.agents.PSRL` (``psrl``) is the
episodic PSRL of the k-learning study and :class:`ContinuingPSRL` (``psrl-continuing``) the
draft's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._checks import OptplanError, check_choice, check_int, check_positive, check_real
from ..dp import masked, policy_iteration
from ..posteriors import (
    DRAFT_REWARD_PRIOR,
    SUM_OF_SQUARES,
    Dirichlet,
    NormalGamma,
    dirichlet_covariance,
    transition_statistics,
)
from ..problems.moment_matching import MomentMatchingVariance
from ..problems.ube import UncertaintyBellman
from ..result import OPTIMAL
from ..uncertainty import local_draft, local_lemma1, q_max
from .base import ConicFallback, check_count, check_rng, continuing_mask, one_hot_policy

__all__ = ["ContinuingPSRL", "ContinuingUBE", "MomentMatching", "UBE_LOCAL_RULES", "MM_STD_RULES"]

#: Local-uncertainty rules of :class:`ContinuingUBE` (wave2.md, Ambiguities 1).
UBE_LOCAL_RULES = ("draft", "lemma1")
#: Thompson standard deviation of :class:`MomentMatching` (wave2.md, Ambiguities 2).
MM_STD_RULES = ("public-code", "paper")


class _PosteriorAgent(ABC):
    """The shared posterior, batch buffer and re-planning clock (module docstring)."""

    #: Whether the agent needs ``Var mu`` (then the prior's ``alpha`` must exceed 1).
    _needs_variance = False
    #: ``discount=None`` (average reward) allowed.
    _average_ok = False

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        discount=0.9,
        update_every=1,
        prior=DRAFT_REWARD_PRIOR,
        transition_prior=1.0,
        sum_of_squares="correct",
        action_mask=None,
    ):
        S = check_count("n_states", n_states)
        A = check_count("n_actions", n_actions)
        self.n_states, self.n_actions = S, A
        if discount is None and self._average_ok:
            self.discount = None
        else:
            self.discount = check_real("discount", discount, 0.0, 1.0, high_open=True)
        self.update_every = check_int("update_every", update_every, 1)
        self.sum_of_squares = check_choice("sum_of_squares", sum_of_squares, SUM_OF_SQUARES)
        self.prior = _prior(prior)
        self.prior_posterior = NormalGamma(
            *self.prior, shape=(S, A, S), sum_of_squares=self.sum_of_squares
        )
        if self._needs_variance and self.prior[2] <= 1.0:
            raise OptplanError(
                f"prior alpha must be > 1 for {type(self).__name__}, which needs the variance of "
                f"each mean reward (beta / (lam (alpha - 1))), got alpha={self.prior[2]!r}"
            )
        self.transition_prior = check_positive("transition_prior", transition_prior)
        self.prior_transitions = Dirichlet(np.full((S, A, S), self.transition_prior))
        self.action_mask, self._forced = continuing_mask(action_mask, S, A)
        n = self.update_every
        self._buf_s = np.zeros(n, dtype=np.intp)
        self._buf_a = np.zeros(n, dtype=np.intp)
        self._buf_s2 = np.zeros(n, dtype=np.intp)
        self._buf_r = np.zeros(n)
        self.rng: np.random.Generator | None = None

    # --- the run protocol ------------------------------------------------------------------

    def reset(self, rng: np.random.Generator) -> None:
        """Back to the prior, take the run's generator, make the first plan."""
        self.rng = check_rng(rng)
        self.rewards = self.prior_posterior
        self.transitions = self.prior_transitions
        self._pending = 0
        self.steps = 0
        self.plans = 0
        self.policy = np.asarray(self.action_mask.argmax(axis=1), dtype=np.intp)
        self._planned = False
        self._plan_now()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Store the transition; every ``update_every`` steps fold the batch into the
        posterior and re-plan (continuing: ``done`` is not used)."""
        k = self._pending
        self._buf_s[k], self._buf_a[k], self._buf_r[k], self._buf_s2[k] = (
            state,
            action,
            reward,
            next_state,
        )
        self._pending = k + 1
        self.steps += 1
        if self._pending == self.update_every:
            self.absorb()
            self._plan_now()

    def absorb(self) -> None:
        """Fold the stored transitions into the posterior (one batch update)."""
        k = self._pending
        if k == 0:
            return
        counts, sums, sums_sq = transition_statistics(
            self._buf_s[:k],
            self._buf_a[:k],
            self._buf_r[:k],
            self._buf_s2[:k],
            self.n_states,
            self.n_actions,
        )
        self.transitions = self.transitions.update(counts)
        self.rewards = self.rewards.update(counts, sums, sums_sq)
        self._pending = 0

    def _plan_now(self) -> None:
        self.plans += 1
        self.plan()
        self._planned = True

    @abstractmethod
    def plan(self) -> None:
        """Plan on the current posterior."""

    @abstractmethod
    def select_action(self, state: int) -> int: ...

    # --- shared planning ---------------------------------------------------------------------

    def _optimal(self, P: np.ndarray, R: np.ndarray, what: str):
        """Howard policy iteration on ``(P, R)`` warm-started from the current policy."""
        prev = self.policy if self._planned else None
        out = policy_iteration(P, R, self.action_mask, self.discount, prev)
        if out.status != OPTIMAL:
            raise RuntimeError(
                f"policy iteration on the {what} ended {out.status!r}: {out.message}"
            )
        return out

    def mean_model(self) -> tuple[np.ndarray, np.ndarray]:
        """``(Pbar, Rbar)``: the Dirichlet mean and ``Rbar[s, a] = sum_s' Pbar mu0``."""
        P = self.transitions.mean
        return P, np.einsum("ijk,ijk->ij", P, self.rewards.mu0)

    def stats(self) -> dict:
        """Plans made (for the experiment record)."""
        return {"plans": self.plans}


def _prior(prior) -> tuple[float, float, float, float]:
    try:
        mu0, lam, alpha, beta = (float(v) for v in prior)
    except (TypeError, ValueError):
        raise OptplanError(
            f"prior must be four numbers (mu0, lam, alpha, beta), got {prior!r}"
        ) from None
    NormalGamma(mu0, lam, alpha, beta)  # names the bad field
    return mu0, lam, alpha, beta


class ContinuingPSRL(_PosteriorAgent):
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
    prior : (mu0, lam, alpha, beta), default ``DRAFT_REWARD_PRIOR``
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


class _ThompsonMeanModel(ConicFallback, _PosteriorAgent):
    """Greedy planning on the posterior-mean model plus a Thompson noise scale per pair."""

    _needs_variance = True

    def __init__(self, n_states, n_actions, zeta, method, solver, **posterior):
        self.zeta = check_positive("zeta", zeta, allow_zero=True)
        self.init_fallback(method, solver)
        _PosteriorAgent.__init__(self, n_states, n_actions, **posterior)

    def reset(self, rng: np.random.Generator) -> None:
        self.reset_fallback()
        _PosteriorAgent.reset(self, rng)

    def plan(self) -> None:
        P, R = self.mean_model()
        out = self._optimal(P, R, "posterior-mean model")
        self.policy = out.policy
        self.values = out.values
        self.q = masked(out.q, self.action_mask)
        self.noise_sd = np.where(self.action_mask, self._noise_sd(P), 0.0)

    @abstractmethod
    def _noise_sd(self, P: np.ndarray) -> np.ndarray:
        """The Thompson noise's standard deviation per pair, before ``zeta``."""

    def _solve(self, problem):
        res = self.solve_conic(problem) if self.method == "conic" else None
        if res is None:
            res = problem.solve("fast")
        if not res.success:
            raise RuntimeError(
                f"{type(problem).__name__} on the posterior ended {res.status!r}: {res.message}"
            )
        return res

    def select_action(self, state: int) -> int:
        forced = self._forced[state]
        if forced >= 0:
            return int(forced)
        if self.zeta == 0.0:
            return int(self.policy[state])
        eps = self.rng.standard_normal(self.n_actions)
        return int(np.argmax(self.q[state] + self.zeta * eps * self.noise_sd[state]))

    def stats(self) -> dict:
        out = _PosteriorAgent.stats(self)
        out.update(ConicFallback.stats(self))
        return out


class ContinuingUBE(_ThompsonMeanModel):
    r"""The uncertainty Bellman equation without unrolling (bayesian-methods-tabular-rl App.
    UBE, Algorithm ube:algo; the public code's ``UbeNoUnrollAgent``) on the Normal-Gamma /
    Dirichlet posterior: ``a = argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``, ``eps_b ~ N(0, 1)``.

    Registered as ``ube-continuing``. Not :class:`optplan.agents.UBE` (registered ``ube``, the
    UBE paper's agent: known-noise Gaussian rewards per ``(s, a)``, ``zeta`` 1), which also has
    a continuing mode.

    At every plan: ``Qbar`` and ``pi`` of the posterior-mean model by policy iteration; the
    local term ``nu`` per pair from :mod:`optplan.uncertainty` (``Q_max = reward_bound /
    (1 - gamma)``):

    ``local="draft"`` (default; the draft's Eq. localunc and its code)
        ``sum_s' Pbar Var mu + Var_P[P . mu0] + Q_max^2 sum_s' Var P / E P``
        (:func:`~optplan.uncertainty.local_draft`; the code's 100-sample Monte-Carlo estimate
        of the last sum has the closed form ``(S - 1) / (alpha_0 + 1)``);
    ``local="lemma1"`` (the UBE paper's Lemma 1)
        the same reward terms plus ``gamma^2 Q_max^2 sum_s' Var P``
        (:func:`~optplan.uncertainty.local_lemma1`);

    and ``u`` = :class:`~optplan.problems.UncertaintyBellman` ``(Pbar, pi, nu, gamma)`` solved
    (``u = nu + gamma^2 Pbar_pi u``).

    Parameters
    ----------
    n_states, n_actions : int
    zeta : float >= 0, default 0.1
        Thompson noise scale (the draft's summary figure; 1.0 and 0.01 also plotted).
    discount : float in [0, 1), default 0.9
    local : {"draft", "lemma1"}, default "draft"
    reward_bound : float > 0, default 1.0
        Declared ``|mean reward| <= reward_bound`` for ``Q_max`` (the public code reads the
        true model's largest mean reward; an agent cannot: wave2.md Ambiguities 4).
    update_every, prior, transition_prior, sum_of_squares, action_mask :
        As :class:`ContinuingPSRL` (``prior`` needs ``alpha > 1``: ``Var mu``).
    method : {"fast", "conic"}, default "fast"
        How the UBE is solved; ``"conic"`` by CVXPY with a counted fallback to the fast path.
    solver : str, optional

    Attributes
    ----------
    q, policy, values : the posterior-mean model's ``Qbar``, greedy policy and ``V``.
    local, u : ndarray (S, A)
        ``nu`` and the UBE's solution (0 on inadmissible pairs).
    problem : UncertaintyBellman
        The last problem solved.
    """

    def __init__(
        self,
        n_states,
        n_actions,
        zeta=0.1,
        discount=0.9,
        local="draft",
        reward_bound=1.0,
        update_every=1,
        prior=DRAFT_REWARD_PRIOR,
        transition_prior=1.0,
        sum_of_squares="correct",
        action_mask=None,
        method="fast",
        solver=None,
    ):
        self.local_rule = check_choice("local", local, UBE_LOCAL_RULES)
        self.reward_bound = check_positive("reward_bound", reward_bound)
        super().__init__(
            n_states,
            n_actions,
            zeta,
            method,
            solver,
            discount=discount,
            update_every=update_every,
            prior=prior,
            transition_prior=transition_prior,
            sum_of_squares=sum_of_squares,
            action_mask=action_mask,
        )
        self.q_max = q_max(self.reward_bound, discount=self.discount)

    def local_uncertainty(self) -> np.ndarray:
        """``nu`` of every pair from the current posterior (0 where inadmissible)."""
        alpha = self.transitions.alpha
        mu0 = self.rewards.mu0
        var = self.rewards.variance
        if self.local_rule == "draft":
            nu = local_draft(alpha, mu0, var, self.q_max)
        else:
            pbar = self.transitions.mean
            reward_var = np.sum(pbar * var, axis=-1) + dirichlet_covariance(alpha, mu0, mu0)
            nu = local_lemma1(reward_var, alpha, self.q_max, self.discount)
        return np.where(self.action_mask, nu, 0.0)

    def _noise_sd(self, P: np.ndarray) -> np.ndarray:
        self.local = self.local_uncertainty()
        self.problem = UncertaintyBellman(
            mean_transitions=P, policy=self.policy, local=self.local, discount=self.discount
        )
        self.u = np.asarray(self._solve(self.problem).x)
        return np.sqrt(self.u)

    def __repr__(self) -> str:
        return (
            f"ContinuingUBE(S={self.n_states}, A={self.n_actions}, zeta={self.zeta}, "
            f"discount={self.discount}, local={self.local_rule!r}, "
            f"update_every={self.update_every})"
        )


class MomentMatching(_ThompsonMeanModel):
    r"""Moment matching across the Bellman equation (bayesian-methods-tabular-rl App. MM,
    Algorithm tmm; the write-up's App. A.4; the public code's ``MomentMatchingAgent``):
    ``a = argmax_b Qbar_sb + zeta eps_b sd_sb``, ``eps_b ~ N(0, 1)``.

    At every plan: ``Qbar``, ``pi`` and ``V(s) = Qbar(s, pi(s))`` of the posterior-mean model by
    policy iteration, then ``sigma~^2`` = :class:`~optplan.problems.MomentMatchingVariance`
    ``(alpha, mu0, Var mu, pi, gamma, values=V)`` solved: the local term
    ``w = A + B + 2 gamma C + gamma^2 D`` from exact Dirichlet moments and
    ``sigma~^2 = w + gamma^2 Pbar_pi sigma~^2``.

    Parameters
    ----------
    n_states, n_actions : int
    zeta : float >= 0, default 1.0
        Thompson noise scale (the draft: 1.0 throughout).
    std : {"public-code", "paper"}, default "public-code"
        ``sd = sigma~ / gamma`` as the public code draws it (wave2.md Ambiguities 2: reproduce
        with it), or ``sigma~`` as the draft and write-up write it.
    discount : float in (0, 1), default 0.9
    update_every, prior, transition_prior, sum_of_squares, action_mask, method, solver :
        As :class:`ContinuingUBE`.

    Attributes
    ----------
    q, policy, values : the posterior-mean model's ``Qbar``, greedy policy and ``V``.
    variance : ndarray (S, A)
        ``sigma~^2`` (0 on inadmissible pairs).
    problem : MomentMatchingVariance
        The last problem solved (``problem.terms``: ``w`` and ``A``, ``B``, ``C``, ``D``).
    """

    def __init__(
        self,
        n_states,
        n_actions,
        zeta=1.0,
        std="public-code",
        discount=0.9,
        update_every=1,
        prior=DRAFT_REWARD_PRIOR,
        transition_prior=1.0,
        sum_of_squares="correct",
        action_mask=None,
        method="fast",
        solver=None,
    ):
        self.std = check_choice("std", std, MM_STD_RULES)
        if isinstance(discount, (int, float)) and discount == 0 and std == "public-code":
            raise OptplanError("discount must be > 0 with std='public-code' (sd = sigma~ / gamma)")
        super().__init__(
            n_states,
            n_actions,
            zeta,
            method,
            solver,
            discount=discount,
            update_every=update_every,
            prior=prior,
            transition_prior=transition_prior,
            sum_of_squares=sum_of_squares,
            action_mask=action_mask,
        )

    def _noise_sd(self, P: np.ndarray) -> np.ndarray:
        self.problem = MomentMatchingVariance(
            alpha=self.transitions.alpha,
            reward_mean=self.rewards.mu0,
            reward_var=self.rewards.variance,
            policy=self.policy,
            discount=self.discount,
            values=self.values,
        )
        self.variance = np.where(self.action_mask, np.asarray(self._solve(self.problem).x), 0.0)
        sd = np.sqrt(self.variance)
        return sd / self.discount if self.std == "public-code" else sd

    def __repr__(self) -> str:
        return (
            f"MomentMatching(S={self.n_states}, A={self.n_actions}, zeta={self.zeta}, "
            f"std={self.std!r}, discount={self.discount}, update_every={self.update_every})"
        )
