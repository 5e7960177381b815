r"""UBE Thompson sampling (uncertainty-bellman-equation Eq. 3), its §3.2 count-bonus comparator,
and the UBE without unrolling of bayesian-methods-tabular-rl.

- :class:`UBE` (Eq. 3): ``Qbar`` of the posterior-mean model, the greedy policy ``pi`` of
  ``Qbar``, the local uncertainty ``nu`` and ``u`` from
  :class:`~optplan.problems.UncertaintyBellman` (``u = nu + gamma^2 Pbar_pi u``); in state
  ``s`` it plays ``argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``, ``eps_b ~ N(0, 1)`` drawn afresh
  at every step (no draw in a state with a single admissible action). With known transitions
  ``nu = Var mu``; otherwise a rule of :mod:`optplan.uncertainty` chosen by name
  (``local="tabular"``, ``"lemma1"``, ``"draft"``), with ``Q_max`` from a declared
  ``reward_bound``. Registered ``ube``.
- :class:`CountBonus` (§3.2's comparator): the optimal policy of the mean model with the reward
  bonus ``beta log(t) sd_sa / sqrt(n_sa)`` (``n`` raised to 1 for unvisited pairs), so that the
  bonus compounds along the plan as in UCRL-style agents (``Qhat_i + beta log(t) bonus_i`` at
  §3.2's root). ``t`` is the number of the episode being planned (1 for the first) in episodic
  mode and the number of steps taken plus one in continuing mode. Registered ``count-bonus``.

Both keep a Gaussian posterior of the mean rewards with a known noise sd, episodic or
continuing, and plan on its mean model incrementally (:mod:`optplan.agents._mean_model`).

- :class:`ContinuingUBE` (bayesian-methods-tabular-rl App. UBE; the draft's
  ``UbeNoUnrollAgent``), registered ``ube-continuing``: the posterior-mean model of the
  Dirichlet / Normal-Gamma posterior per ``(s, a, s')`` (:mod:`optplan.agents._posterior_agent`;
  ``Pbar`` the Dirichlet mean, ``R[s, a] = sum_s' Pbar mu0``), its greedy policy ``pi`` and
  ``Qbar`` by policy iteration, the local uncertainty ``nu`` (:mod:`optplan.uncertainty`:
  ``local="draft"``, the draft's Eq. localunc, or ``"lemma1"``) and ``u`` from the continuing
  uncertainty Bellman equation (no unrolling); actions
  ``argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``.
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, check_choice, check_positive
from .._params import Component, Param
from ..dp import masked
from ..posteriors import dirichlet_covariance
from ..problems.ube import UncertaintyBellman
from ..uncertainty import (
    LOCAL_UNCERTAINTY,
    _draft_unchecked,
    _lemma1_unchecked,
    _tabular_unchecked,
    q_max,
)
from . import _episodic_steps as ES
from . import _layered_ube_kernels as LUK
from . import _ube_kernels as UK
from . import _ube_steps as US
from ._mean_model import (
    MEAN_MODEL_PARAMS,
    UPDATE_EVERY,
    MeanModelAgent,
    check_scale,
    mean_model_args,
)
from ._posterior_agent import (
    CONIC_PARAMS,
    DRAFT_GAMMA,
    MODEL_POSTERIOR_PARAMS,
    ThompsonMeanModel,
    model_builder,
    thompson_act,
)
from .base import CompiledAgent, ConicFallback, state_field, thompson_action
from .count_bonus import COUNT_BONUS, CountBonus

__all__ = ["UBE", "CountBonus", "ContinuingUBE", "LOCAL_RULES", "CONTINUING_LOCAL_RULES"]

#: Local-uncertainty rules of :class:`UBE` for learned transitions (:mod:`optplan.uncertainty`).
LOCAL_RULES = tuple(LOCAL_UNCERTAINTY)
#: Local-uncertainty rules of :class:`ContinuingUBE`.
CONTINUING_LOCAL_RULES = ("draft", "lemma1")


class UBE(CompiledAgent, ConicFallback, MeanModelAgent):
    r"""Thompson sampling with the uncertainty Bellman equation (uncertainty-bellman-equation
    Eq. 3): ``a = argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``, ``eps_b ~ N(0, 1)``.

    Parameters
    ----------
    n_states, n_actions : int
    n_layers : int, optional
        ``L``: episodic mode (one plan per episode, layered UBE). ``None``: continuing mode.
    zeta : float >= 0, default 1.0
        Scale of the Thompson noise (0: greedy on ``Qbar``).
    discount : float, default 0.9
        ``gamma`` of planning and of the UBE: ``[0, 1]`` episodic, ``[0, 1)`` continuing.
    sigma : float >= 0 or array (S, A) / (L, S, A), default 1.0
        The known reward-noise sd, one or per pair.
    prior_var : float > 0, optional
        Prior variance of each mean reward; ``None`` (default): the flat prior of §3.2.
    known_transitions : array (S, A, S) / (L, S, A, S), optional
        The transition law, if known (then ``nu = Var mu``). ``None``: Dirichlet posterior.
    transition_prior : float > 0, optional
        Dirichlet pseudo-count per next state (default ``1 / S``).
    local : {"tabular", "lemma1", "draft"}, optional
        Local-uncertainty rule for learned transitions (default ``"tabular"``); must be unset
        with ``known_transitions``. In episodic mode the last layer has no future and keeps
        only the reward term (``sd^2 / n`` for ``"tabular"``, ``Var mu`` otherwise).
    reward_bound : float > 0, optional
        Declared ``|mu| <= reward_bound``; required with learned transitions (unused with
        known ones: the local term then needs no ``Q_max``). ``Q_max`` is
        ``reward_bound / (1 - gamma)`` (continuing) or ``min(L, 1 / (1 - gamma))
        reward_bound`` (episodic).
    update_every : int >= 1, default 1
        Continuing mode: steps between plans.
    action_mask : bool array (S, A) or (L, S, A), optional
    method : {"fast", "conic"}, default "fast"
        How the UBE is solved; ``"conic"`` solves it whole by CVXPY at every plan, falling back
        to the fast path (counted in :meth:`stats`) when the solver does not end optimal.
    solver : str, optional
        Conic solver.

    Attributes
    ----------
    q : ndarray (S, A) / (L, S, A)
        ``Qbar`` (inadmissible actions ``-inf``).
    policy : ndarray of int
        Greedy policy of ``Qbar``, the policy of the UBE.
    u, local : ndarray like ``q``
        The UBE's solution and its local term (0 on inadmissible pairs).
    """

    _run = staticmethod(US.run)
    #: The continuing compiled steps' state (:class:`~optplan.agents._ube_steps.UBEState`);
    #: ``None`` where the agent plans in NumPy.
    state = None

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        zeta=1.0,
        local=None,
        reward_bound=None,
        method="fast",
        solver=None,
        **model,
    ):
        self.zeta = check_scale("zeta", zeta)
        self.init_fallback(method, solver)
        MeanModelAgent.__init__(self, n_states, n_actions, **model)
        if reward_bound is not None:
            reward_bound = check_positive("reward_bound", reward_bound)
        if self.known:
            if local is not None:
                raise OptplanError(
                    f"local={local!r} names a rule for learned transitions; with "
                    "known_transitions the local uncertainty is Var mu (leave local unset)"
                )
            self.local_rule = None
            self.q_max = None
        else:
            self.local_rule = check_choice(
                "local", "tabular" if local is None else local, LOCAL_RULES
            )
            if self.posterior.deterministic:
                raise OptplanError(
                    f"transition_prior={self.posterior.transition_prior!r} leaves no Dirichlet "
                    f"posterior for the local uncertainty rule {self.local_rule!r}: give a "
                    "pseudo-count (a float > 0) or known_transitions"
                )
            if reward_bound is None:
                raise OptplanError(
                    "reward_bound is required with learned (Dirichlet) transitions: Q_max comes "
                    "from a declared bound on |mean reward|, never from the true model"
                )
            self.q_max = _q_max(reward_bound, self.discount, self.n_layers)
        self.reward_bound = reward_bound

    def reset(self, rng: np.random.Generator) -> None:
        self.reset_fallback()
        self.u = np.zeros(self.action_mask.shape)
        self.local = np.zeros(self.action_mask.shape)
        self._sqrt_u = np.zeros(self.action_mask.shape)
        own = self._own_plan()
        self._work = UK.mean_rule(self) if own and UK.mean_applies(self) else None
        own &= all(getattr(type(self), n) is getattr(MeanModelAgent, n) for n in _MEAN_PLAN)
        self._layered = self._layered_plan() if own else None
        self.state = None
        self._synced = -1
        MeanModelAgent.reset(self, rng)

    def plan(self, top: int | None = None) -> None:
        """Plan on the current posterior (see :meth:`MeanModelAgent.plan`). A continuing plan
        is the compiled steps' own where it applies (:func:`optplan.agents._ube_steps.plan_now`;
        ``method="fast"``, a class that keeps the plan's :meth:`local_uncertainty`,
        ``_after_plan`` and ``_solve``), with the NumPy plan's policy and its numbers to
        rounding; a compiled plan that fails is redone by the NumPy plan, which raises its own
        error. An episodic plan with the tabular rule is one compiled call too
        (:meth:`_plan_layered`), with the same numbers."""
        work = getattr(self, "_work", None)
        if work is not None:
            if self.state is None:  # reset: the posterior's arrays are the state's
                self.state = US.new_state(self, work)
            s = self.state
            if s.flags[US.STATUS] == UK.OK and not US.plan_now(s):
                self._sync()
                return
            self._numpy_plan()
            return
        mode = getattr(self, "_layered", None)
        if mode is not None:
            self._plan_layered(top, mode)
            return
        MeanModelAgent.plan(self, top)

    def _own_plan(self) -> bool:
        """Whether the class keeps UBE's NumPy plan (the compiled plan computes it)."""
        return all(getattr(type(self), n) is getattr(UBE, n) for n in _NUMPY_PLAN)

    def _numpy_plan(self) -> None:
        """The NumPy plan of a compiled plan that failed (raising its own error), loaded into
        the state."""
        s = self.state
        f = s.flags
        f[US.PLANS] -= 1  # counted by the NumPy plan
        self.steps, self.plans = int(f[US.STEPS]), int(f[US.PLANS])
        MeanModelAgent.plan(self)
        s.policy[:] = self.policy
        s.qm[:] = self.q
        s.sd[:] = self._sqrt_u
        f[US.STATUS], f[US.PLANNED], f[US.PLANS] = UK.OK, 1, self.plans
        self._synced = self.plans

    def _sync(self) -> None:
        """The agent's attributes from its compiled state (after steps or a plan)."""
        s = self.state
        f = s.flags
        self.steps, self.plans = int(f[US.STEPS]), int(f[US.PLANS])
        if self.plans != self._synced:
            self._synced = self.plans
            self.policy = s.policy.copy()
            self.q = masked(s.model.q, self.action_mask)
            self.local = s.nu.copy()
            self.u = s.u.copy()
            self._sqrt_u = s.sd.copy()
            self._scale = 0.0
            self._planned = True

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if self.state is None or self.episodic:
            MeanModelAgent.update(self, state, action, reward, next_state, done)
        elif US.observe(self.state, state, action, float(reward), next_state, done, None):
            self._numpy_plan()
        else:
            self._sync()

    plan_due = MeanModelAgent.plan_due
    _KIND = ES.THOMPSON

    def play(self, env, steps, env_rng) -> int:
        if self.episodic:
            return self._play_episodic(env, steps, env_rng)
        status = CompiledAgent.play(self, env, steps, env_rng)
        self._sync()
        return status

    def compiled_reason(self, env) -> str | None:
        if self.n_layers is not None:
            return ES.compiled_reason(self, env)
        if not (self._own_plan() and UK.mean_applies(self)):
            return (
                "the UBE agent plans in NumPy (method='conic', a subclass with its own plan, "
                f"{UK.MAX_STATES} states or more, a deterministic transition prior, or exact "
                "rewards under a proper prior)"
            )
        if env.ints[1]:
            return "the UBE agent is continuing, the environment is layered"
        return None

    def _layered_mode(self):
        """The reward mode of the compiled layered plan
        (:func:`optplan.agents._layered_ube_kernels.plan`) for this agent, or ``None`` where
        it plans in NumPy (continuing, ``method="conic"``, known transitions, a local rule
        but ``"tabular"``, a per-pair ``sigma``, no numba)."""
        if self.n_layers is None or self.method != "fast" or self.known or not LUK.AVAILABLE:
            return None
        if self.local_rule != "tabular":
            return None
        self._layered_mask = np.ascontiguousarray(self.action_mask, dtype=bool)
        return LUK.reward_mode(self.posterior)

    def _layered_plan(self):
        """:meth:`_layered_mode`: the compiled plan's reward mode, or ``None``."""
        return self._layered_mode()

    def _fused(self):
        return self if getattr(self, "_layered", None) is not None else None

    def _failed(self) -> None:
        what = "the uncertainty Bellman equation of the posterior-mean model"
        raise RuntimeError(
            f"{what} ended 'numerical_error': the UBE solution overflowed the double range"
        )

    def _plan_layered(self, top, mode) -> None:
        """:meth:`MeanModelAgent.plan <optplan.agents._mean_model.MeanModelAgent.plan>` in
        episodic mode with the tabular rule, in one compiled call
        (:func:`optplan.agents._layered_ube_kernels.plan`: the posterior means of the layers
        ``0 .. top``, the backward pass, the local term and ``u``), the same numbers."""
        self.plans += 1
        fresh = not self._planned
        L = self.n_layers
        top = L - 1 if top is None or fresh else int(top)
        status = LUK.plan(self, top, fresh, mode)  # in place: the compiled steps' arrays
        self._scale = 0.0
        self._planned = True
        if status != LUK.OK:
            self._failed()
        self._load()

    def select_action(self, state: int) -> int:
        if self.episodic:
            return self._act_episodic(state)
        if self.state is not None:
            return int(thompson_act(self.state, int(state), self.rng))
        row = self._row(state)
        return thompson_action(
            self.rng, self._forced[row], self.policy[row], self.q[row], self.zeta, self._sqrt_u[row]
        )

    def local_uncertainty(self, head=()) -> np.ndarray:
        """``nu`` of the pairs in ``head`` (a slice of layers; all by default), 0 where
        inadmissible, from the current posterior."""
        var = self.var[head]
        if self.known:
            nu = var
        else:
            post = self.posterior
            counts = post.counts[head]
            alpha = post.next_counts[head] + post.transition_prior
            g = self.discount
            # the rules of optplan.uncertainty without their input checks (the posterior is
            # valid by construction)
            if self.local_rule == "tabular":
                reward_term = np.square(self._sd[head]) / np.maximum(counts, 1.0)
                nu = _tabular_unchecked(counts, self._sd[head], self.q_max, g)
            elif self.local_rule == "lemma1":
                reward_term = var
                nu = _lemma1_unchecked(var, alpha, self.q_max, g)
            else:  # "draft", whose rewards are per (s, a, s'): the same for every s' here
                reward_term = var
                nu = _draft_unchecked(
                    alpha,
                    np.broadcast_to(self.mean[head][..., None], alpha.shape),
                    np.broadcast_to(var[..., None], alpha.shape),
                    self.q_max,
                )
            if self.n_layers is not None and len(nu) == self.n_layers:  # no future after L
                nu = np.array(nu)
                nu[-1] = reward_term[-1]
        return np.where(self.action_mask[head], nu, 0.0)

    def _after_plan(self, top, head) -> None:
        self.local[head] = self.local_uncertainty(head)
        L = self.n_layers
        if L is None or self.method == "conic" or top == L - 1:
            self.u = self._solve(self.P, self.policy, self.local)
            self._sqrt_u = np.sqrt(self.u)
            return
        S, A = self.n_states, self.n_actions
        P = self.P
        v = self.u[top + 1][np.arange(S), self.policy[top + 1]]
        nu = self.local[head].copy()
        nu[top] += self.discount**2 * (P[top].reshape(S * A, S) @ v).reshape(S, A)
        if top == 0:  # a one-layer UBE's solution is its local term
            self.u[0] = nu[0]
        else:
            self.u[head] = self._solve(P[head], self.policy[head], nu)
        self._sqrt_u[head] = np.sqrt(self.u[head])

    def _solve(self, P, policy, nu) -> np.ndarray:
        # the agent's own model and plan: valid by construction, so built unchecked; its dual
        # (the occupancy) is never read
        problem = UncertaintyBellman._trusted(P, policy, nu, self.discount)
        what = "the uncertainty Bellman equation of the posterior-mean model"
        return np.asarray(self.solve_checked(problem, what, multiplier=False).x)

    def stats(self) -> dict:
        """Plans made and, with ``method="conic"``, the conic fallbacks and statuses."""
        out = {"plans": self.plans}
        out.update(ConicFallback.stats(self))
        return out

    def __repr__(self) -> str:
        mode = f"L={self.n_layers}" if self.n_layers is not None else "continuing"
        how = "known P" if self.known else f"Dirichlet P, local={self.local_rule!r}"
        return (
            f"UBE(S={self.n_states}, A={self.n_actions}, {mode}, zeta={self.zeta}, "
            f"discount={self.discount}, {how})"
        )


#: The methods of :class:`UBE`'s NumPy plan: a subclass that overrides one plans in NumPy.
_NUMPY_PLAN = ("local_uncertainty", "_after_plan", "_solve")
#: The mean-model plan's steps a subclass may override (then its episodic plan is NumPy's).
_MEAN_PLAN = ("_refresh", "_backward")


class ContinuingUBE(ThompsonMeanModel):
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
        true model's largest mean reward; an agent cannot: docs/sources.md Ambiguities 4).
    update_every, reward_prior, transition_prior, sum_of_squares, action_mask :
        As :class:`~optplan.agents.ContinuingPSRL` (``reward_prior`` needs ``alpha > 1``:
        ``Var mu``).
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

    def __init__(self, n_states, n_actions, *, zeta=0.1, local="draft", reward_bound=1.0, **model):
        self.local_rule = check_choice("local", local, CONTINUING_LOCAL_RULES)
        self.reward_bound = check_positive("reward_bound", reward_bound)
        super().__init__(n_states, n_actions, zeta=zeta, **model)

    @property
    def q_max(self) -> float:
        """``Q_max = reward_bound / (1 - gamma)``."""
        return q_max(self.reward_bound, discount=self.discount)

    def _kernel_rule(self) -> tuple:
        """The compiled plan's ``(rule, coef, div)`` (:func:`optplan.agents._ube_kernels._plan`)."""
        if self.local_rule == "draft":
            return UK.DRAFT, self.q_max**2, 1.0
        return UK.LEMMA1, self.discount**2 * self.q_max**2, 1.0

    local = state_field("nu", "``nu`` of every pair (0 where inadmissible).")
    u = state_field("u", "The UBE's solution (0 where inadmissible).")

    @local.setter
    def local(self, value) -> None:
        self.state.nu[...] = value

    @u.setter
    def u(self, value) -> None:
        self.state.u[...] = value

    @property
    def problem(self) -> UncertaintyBellman:
        """The last UBE solved (built on first read after a compiled plan)."""
        if self._problem_plan != self.plans:
            st = self.state
            self._problem = UncertaintyBellman._trusted(
                st.P.copy(), st.policy.copy(), st.nu.copy(), self.discount
            )
            self._problem_plan = self.plans
        return self._problem

    @problem.setter
    def problem(self, value: UncertaintyBellman) -> None:
        self._problem, self._problem_plan = value, self.plans

    def local_uncertainty(self) -> np.ndarray:
        """``nu`` of every pair from the current posterior (0 where inadmissible)."""
        alpha = self.transitions.alpha
        mu0 = self.rewards.mu0
        var = self.rewards.variance
        # local_draft / local_lemma1 without their input checks (the posterior is valid)
        if self.local_rule == "draft":
            nu = _draft_unchecked(alpha, mu0, var, self.q_max)
        else:
            pbar = self.transitions.mean
            reward_var = np.sum(pbar * var, axis=-1) + dirichlet_covariance(alpha, mu0, mu0)
            nu = _lemma1_unchecked(reward_var, alpha, self.q_max, self.discount)
        return np.where(self.action_mask, nu, 0.0)

    def _noise_sd(self, P: np.ndarray) -> np.ndarray:
        self.local = self.local_uncertainty()
        # the agent's own posterior and plan: valid by construction, so built unchecked
        self.problem = UncertaintyBellman._trusted(
            P, self.policy.copy(), self.local.copy(), self.discount
        )
        self.u = np.asarray(self._solve(self.problem).x)
        return np.sqrt(self.u)

    def __repr__(self) -> str:
        return (
            f"ContinuingUBE(S={self.n_states}, A={self.n_actions}, zeta={self.zeta}, "
            f"discount={self.discount}, local={self.local_rule!r}, "
            f"update_every={self.update_every})"
        )


def _q_max(reward_bound, discount: float, n_layers: int | None) -> float:
    if n_layers is None:
        return q_max(reward_bound, discount=discount)
    bound = q_max(reward_bound, horizon=n_layers)
    return bound if discount >= 1.0 else min(bound, q_max(reward_bound, discount=discount))


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _ube(env, criterion, reward_bound, **params):
    args = mean_model_args(env, "ube", params)
    if args["known_transitions"] is not None:
        reward_bound = None  # the local term is Var mu: no Q_max
    return UBE(reward_bound=reward_bound, **args)


BUILDERS = (
    Component(
        "ube",
        _ube,
        (
            MEAN_MODEL_PARAMS[0],
            Param("zeta", "float", 1.0, "Thompson noise scale of Eq. 3"),
            *MEAN_MODEL_PARAMS[1:],
            Param(
                "local", "str", None, "local uncertainty rule (learned P): tabular, lemma1, draft"
            ),
            Param(
                "reward_bound", "float", 1.0, "declared |mean reward| bound, for Q_max (learned P)"
            ),
            UPDATE_EVERY,
            Param("method", "str", "fast", "the UBE by 'fast' or 'conic' (verification)"),
            Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
        ),
        "UBE Thompson sampling (uncertainty-bellman-equation Eq. 3)",
    ),
    COUNT_BONUS,
    Component(
        "ube-continuing",
        model_builder(ContinuingUBE, "ube-continuing"),
        (
            Param("zeta", "float", 0.1, "Thompson noise scale (the draft's summary: 0.1)"),
            DRAFT_GAMMA,
            Param(
                "local", "str", "draft", "local uncertainty: 'draft' (Q_max^2 Var/E) or 'lemma1'"
            ),
            Param(
                "reward_bound", "float", 1.0, "declared |mean reward| bound: Q_max = it / (1 - g)"
            ),
            *MODEL_POSTERIOR_PARAMS,
            *CONIC_PARAMS,
        ),
        "UBE without unrolling on the Normal-Gamma / Dirichlet posterior "
        "(bayesian-methods App. UBE)",
    ),
)
