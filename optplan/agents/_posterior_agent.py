r"""The posterior and re-planning clock of the model-based continuing agents of
bayesian-methods-tabular-rl (App. PSRL, UBE, MM): :class:`~optplan.agents.ContinuingPSRL`
(:mod:`~optplan.agents.psrl`), :class:`~optplan.agents.ContinuingUBE`
(:mod:`~optplan.agents.ube`) and :class:`~optplan.agents.MomentMatching`
(:mod:`~optplan.agents.moment_matching`).

**Posterior** (the write-up's App. A): transitions ``P(. | s, a) ~ Dirichlet(kappa + counts)``
over *all* next states (``kappa = 1``) and the mean reward of every transition
``mu(s, a, s') ~ NG(mu0, lam, alpha, beta)``, prior
:data:`~optplan.posteriors.DRAFT_REWARD_PRIOR` = ``(0, 4, 3, 3)``
(:class:`~optplan.posteriors.Dirichlet`, :class:`~optplan.posteriors.NormalGamma`). The agent
stores the transitions of the current batch and, every ``update_every`` steps, folds them into
the posterior in one batch update (:func:`~optplan.posteriors.transition_statistics`; with
``sum_of_squares="public-code"`` the Normal-Gamma update repeats the public code's
``(sum r)^2 / n`` slip, which depends on the batches) and re-plans.

:class:`ThompsonMeanModel` is what ContinuingUBE and MomentMatching share: the greedy policy
of the posterior-mean model (``Pbar`` the Dirichlet mean, ``R[s, a] = sum_s' Pbar mu0``) by
Howard policy iteration, plus a Thompson noise of per-pair scale. The linear algebra lives in
the problem objects (``problem.solve("fast")``, or ``"conic"`` with a counted fallback,
:class:`~optplan.agents.base.ConicFallback`); the agents only assemble their inputs. With
numba and ``method="fast"`` a plan is one compiled call instead
(:mod:`optplan.agents._ube_kernels`: the same operations, the floats within 1e-12, which the
whole-run engine :mod:`optplan.experiments.ube_compiled` calls too), unless a subclass
overrides a method of the NumPy plan (``_NUMPY_PLAN``): that one plans in NumPy. Every
per-step operation is a few array operations on one row; the batch update and planning are
vectorized over all pairs.

The end of the module holds the registry parameters these agents (and BQL) share.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._checks import OptplanError, check_choice, check_int, check_positive, check_real
from .._params import Param
from ..dp import masked, policy_iteration
from ..posteriors import (
    DRAFT_REWARD_PRIOR,
    SUM_OF_SQUARES,
    Dirichlet,
    NormalGamma,
    normal_gamma_update,
    transition_statistics,
)
from ..result import OPTIMAL
from . import _ube_kernels as UK
from ._env import continuing_shape
from .base import (
    ConicFallback,
    check_count,
    check_normal_gamma,
    check_rng,
    continuing_mask,
    thompson_action,
)

__all__ = ["PosteriorAgent", "ThompsonMeanModel"]


class PosteriorAgent(ABC):
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
        reward_prior=DRAFT_REWARD_PRIOR,
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
        self.reward_prior = check_normal_gamma("reward_prior", reward_prior)
        self.prior_posterior = NormalGamma(
            *self.reward_prior, shape=(S, A, S), sum_of_squares=self.sum_of_squares
        )
        if self._needs_variance and self.reward_prior[2] <= 1.0:
            raise OptplanError(
                f"prior alpha must be > 1 for {type(self).__name__}, which needs the variance of "
                f"each mean reward (beta / (lam (alpha - 1))), got alpha={self.reward_prior[2]!r}"
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
        """Fold the stored transitions into the posterior (one batch update).

        The statistics and both updates are :func:`~optplan.posteriors.transition_statistics`,
        :meth:`Dirichlet.update <optplan.posteriors.Dirichlet.update>` and
        :meth:`NormalGamma.update <optplan.posteriors.NormalGamma.update>` without their input
        checks (the buffers hold the agent's own valid transitions): the same operations, the
        same bits (``tests/test_engines_exact.py`` compares them), a fraction of the cost."""
        k = self._pending
        if k == 0:
            return
        S, A = self.n_states, self.n_actions
        # np.add.at's sums into zeros, in the same order: one flat index and three bincounts
        flat = (self._buf_s[:k] * A + self._buf_a[:k]) * S + self._buf_s2[:k]
        r = self._buf_r[:k]
        n = S * A * S
        counts = np.bincount(flat, minlength=n).astype(float).reshape(S, A, S)
        sums = np.bincount(flat, weights=r, minlength=n).reshape(S, A, S)
        sums_sq = np.bincount(flat, weights=r * r, minlength=n).reshape(S, A, S)
        self.transitions = Dirichlet._trusted(self.transitions.alpha + counts)
        mode = self.rewards.sum_of_squares
        new = normal_gamma_update(*self.rewards.params, counts, sums, sums_sq, mode)
        self.rewards = NormalGamma._trusted(*new, mode)
        self._pending = 0

    def absorb_checked(self) -> None:
        """:meth:`absorb` through the checked public updates (the reference it equals)."""
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


class ThompsonMeanModel(ConicFallback, PosteriorAgent):
    """Greedy planning on the posterior-mean model plus a Thompson noise scale per pair."""

    _needs_variance = True

    def __init__(self, n_states, n_actions, *, zeta, method="fast", solver=None, **posterior):
        self.zeta = check_positive("zeta", zeta, allow_zero=True)
        self.init_fallback(method, solver)
        PosteriorAgent.__init__(self, n_states, n_actions, **posterior)

    def reset(self, rng: np.random.Generator) -> None:
        self.reset_fallback()
        self._work = (
            UK.Work(self.n_states, self.n_actions)
            if self.method == "fast" and UK.available(self.n_states) and _keeps_plan(type(self))
            else None
        )
        PosteriorAgent.reset(self, rng)

    def plan(self) -> None:
        """``Qbar`` and ``pi`` of the posterior-mean model and the noise sd: one compiled
        call (:func:`optplan.agents._ube_kernels.plan`) where it applies (numba, ``method=
        "fast"``, fewer than ``MAX_STATES`` states, a class that keeps the NumPy plan's
        methods, ``_NUMPY_PLAN``, of the class that defines ``_kernel_rule``), else (or when
        that plan fails: it draws nothing, so the NumPy plan redoes it and raises its error)
        :meth:`_plan_numpy`."""
        work = getattr(self, "_work", None)
        if work is None:
            self._plan_numpy()
            return
        t, r = self.transitions, self.rewards
        policy = np.array(self.policy, dtype=np.int64)
        status = UK.plan(
            t.alpha, r.mu0, r.lam, r.alpha, r.beta, self.action_mask, self.discount,
            self._kernel_rule(), policy, self._planned, work,
        )  # fmt: skip
        if status != UK.OK:
            self._plan_numpy()
            return
        self._from_work(policy)

    @abstractmethod
    def _kernel_rule(self) -> tuple:
        """The compiled plan's ``(rule, coef, div)`` (:func:`optplan.agents._ube_kernels.plan`)."""

    @abstractmethod
    def _from_work(self, policy: np.ndarray) -> None:
        """The plan's results from the compiled plan's arrays (``policy``: its new policy)."""

    def _plan_numpy(self) -> None:
        """:meth:`plan` in NumPy (the path without numba)."""
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
        """The agent's problem solved: the fast path without the dual (never read here)."""
        what = f"{type(problem).__name__} on the posterior"
        return self.solve_checked(problem, what, multiplier=False)

    def select_action(self, state: int) -> int:
        return thompson_action(
            self.rng,
            self._forced[state],
            self.policy[state],
            self.q[state],
            self.zeta,
            self.noise_sd[state],
        )

    def stats(self) -> dict:
        out = PosteriorAgent.stats(self)
        out.update(ConicFallback.stats(self))
        return out


#: The methods of :class:`ThompsonMeanModel`'s NumPy plan: a subclass of ContinuingUBE or
#: MomentMatching that overrides one plans in NumPy (the compiled plan would not see it).
_NUMPY_PLAN = ("_plan_numpy", "_optimal", "mean_model", "_noise_sd", "_solve", "local_uncertainty")


def _keeps_plan(cls: type) -> bool:
    """Whether ``cls`` has the NumPy plan of the class that defines its ``_kernel_rule``."""
    home = next(c for c in cls.__mro__ if "_kernel_rule" in vars(c))
    return all(getattr(cls, n, None) is getattr(home, n, None) for n in _NUMPY_PLAN)


# --- registry parameters shared by these agents and BQL (:mod:`optplan.agents.registry`) ------


def ng_prior(prior_mu0, prior_lam, prior_alpha, prior_beta) -> tuple:
    """The Normal-Gamma prior tuple from the registry's four parameters, each checked under
    its registry name (``prior_lam must be > 0, got 0.0``)."""
    check_real("prior_mu0", prior_mu0)
    for name, value in (("prior_lam", prior_lam), ("prior_alpha", prior_alpha),
                        ("prior_beta", prior_beta)):  # fmt: skip
        check_positive(name, value)
    return (prior_mu0, prior_lam, prior_alpha, prior_beta)


NG_PRIOR_PARAMS = (
    Param("prior_mu0", "float", 0.0, "Normal-Gamma prior mu0 (draft App. A: 0)"),
    Param("prior_lam", "float", 4.0, "Normal-Gamma prior lambda (> 0; draft: 4)"),
    Param("prior_alpha", "float", 3.0, "Normal-Gamma prior alpha (> 0, > 1 for UBE/MM; draft: 3)"),
    Param("prior_beta", "float", 3.0, "Normal-Gamma prior beta (> 0; draft: 3)"),
)
DRAFT_GAMMA = Param("discount", "float", 0.9, "planning gamma (the draft's 0.9)")
MODEL_POSTERIOR_PARAMS = (
    Param("update_every", "int", 1, "steps between posterior updates and plans (>= 1)"),
    *NG_PRIOR_PARAMS,
    Param("transition_prior", "float", 1.0, "Dirichlet pseudo-count per next state (all states)"),
    Param("sum_of_squares", "str", "correct", "NG batch update: 'correct' or 'public-code' slip"),
)
CONIC_PARAMS = (
    Param("method", "str", "fast", "the uncertainty equation by 'fast' or 'conic' (verification)"),
    Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
)


def continuing_args(env, who: str) -> dict:
    """Sizes and admissible actions of a continuing environment, for a continuing agent."""
    S, A, mask = continuing_shape(
        env, f"{who} is for continuing environments, got a finite-horizon one"
    )
    return {"n_states": S, "n_actions": A, "action_mask": mask}


def model_args(env, who: str, params: dict) -> dict:
    """The posterior and shape arguments of a model-based agent from its registry
    ``params`` (the four ``prior_*`` become ``reward_prior``)."""
    args = continuing_args(env, who)
    prior = ng_prior(*(params.pop(p.name) for p in NG_PRIOR_PARAMS))
    return {**args, "reward_prior": prior, **params}


def model_builder(cls, who: str):
    """The registry builder of a model-based agent class: ``cls(**model_args(...))``."""

    def build(env, criterion, **params):
        return cls(**model_args(env, who, params))

    return build
