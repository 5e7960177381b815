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
the posterior in one batch update (:func:`absorb`, the operations of
:func:`~optplan.posteriors.transition_statistics` and the posteriors' updates; with
``sum_of_squares="public-code"`` the Normal-Gamma update repeats the public code's
``(sum r)^2 / n`` slip, which depends on the batches) and re-plans.

These agents are :class:`~optplan.agents.base.CompiledAgent`: a state tuple of arrays
(:class:`ThompsonState`, :class:`optplan.agents._psrl_steps.PSRLState`) whose compiled ``observe``
buffers a transition, absorbs a full batch (:func:`buffered`, :func:`absorb`) and plans
(flags :data:`FLAGS`). :class:`ThompsonMeanModel` is what ContinuingUBE and MomentMatching
share: the greedy policy of the posterior-mean model (``Pbar`` the Dirichlet mean,
``R[s, a] = sum_s' Pbar mu0``) by Howard policy iteration, plus a Thompson noise of per-pair
scale, one compiled call (:mod:`optplan.agents._ube_kernels`). The conic method (the problem
objects' ``solve("conic")`` with a counted fallback,
:class:`~optplan.agents.base.ConicFallback`), models of ``MAX_STATES`` states or more and a
subclass that overrides a method of the NumPy plan (``_NUMPY_PLAN``) plan in NumPy, called
from the compiled loop.

The end of the module holds the registry parameters these agents (and BQL) share.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np

from .._checks import OptplanError, check_choice, check_int, check_positive, check_real
from .._jit import njit
from .._params import Param
from ..dp import masked, policy_iteration
from ..envs.kernels import play
from ..posteriors import (
    DRAFT_REWARD_PRIOR,
    SUM_OF_SQUARES,
    Dirichlet,
    NormalGamma,
)
from ..result import OPTIMAL
from . import _psrl_kernels as PK
from . import _ube_kernels as UK
from ._env import continuing_shape
from .base import (
    CompiledAgent,
    ConicFallback,
    check_count,
    check_normal_gamma,
    check_rng,
    continuing_mask,
    state_field,
)

__all__ = ["PosteriorAgent", "ThompsonMeanModel", "ThompsonState", "absorb", "FLAGS"]

#: The flags of the compiled posterior agents' states (``state.flags``): the batch's
#: transitions so far, ``update_every``, the public code's Normal-Gamma update, plans in
#: Python (a large model, another method, a subclass's own plan), policy iteration's cap,
#: steps, plans, the policy's version, a plan made (the next one is warm), the last plan's
#: status, iterations and recurrent classes, tracked policies (return to Python when the
#: policy changes), a Python plan due, average reward, the Thompson plan's local rule.
(PENDING, UPDATE_EVERY, PUBLIC, PYTHON_PLAN, MAX_ITER, STEPS, PLANS, VERSION, PLANNED, STATUS,
 ITERATIONS, CLASSES, TRACK, DUE, AVERAGE, RULE) = range(16)  # fmt: skip
FLAGS = 16


def new_flags(agent, python_plan: bool, max_iter: int = 1_000) -> np.ndarray:
    """The flags of a compiled posterior agent after its ``reset`` (``max_iter``: policy
    iteration's cap)."""
    flags = np.zeros(FLAGS, dtype=np.int64)
    flags[UPDATE_EVERY] = agent.update_every
    flags[PUBLIC] = agent.sum_of_squares == "public-code"
    flags[PYTHON_PLAN] = python_plan
    flags[MAX_ITER] = max_iter
    flags[AVERAGE] = agent.discount is None
    return flags


def posterior_arrays(agent) -> tuple:
    """The prior's arrays (Dirichlet ``alpha``; Normal-Gamma ``mu0, lam, alpha, beta``),
    zeroed batch statistics ``cnt, sums, sq`` and the batch buffer, for a state tuple."""
    S, A, n = agent.n_states, agent.n_actions, agent.update_every
    t, r = agent.prior_transitions, agent.prior_posterior
    return (
        *(np.array(x, dtype=float) for x in (t.alpha, *r.params)),
        *(np.zeros((S, A, S)) for _ in range(3)),
        np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n),
        np.zeros(n, dtype=np.int64),
    )  # fmt: skip


@njit
def absorb(s):  # pragma: no cover - compiled by numba
    """Fold a compiled posterior agent's buffered transitions into its posterior
    (:func:`optplan.agents._psrl_kernels.absorb_batch`)."""
    PK.absorb_batch(s.flags[PENDING], (s.buf_s, s.buf_a, s.buf_r, s.buf_s2),
                    (s.cnt, s.sums, s.sq), (s.alpha, s.mu0, s.lam, s.nalpha, s.nbeta),
                    s.flags[PUBLIC] == 1)  # fmt: skip
    s.flags[PENDING] = 0


@njit(inline="always")
def buffered(s, x, a, r, y):  # pragma: no cover - compiled by numba
    """Store one transition; whether the batch is full (then :func:`absorb` it and plan)."""
    f = s.flags
    k = f[PENDING]
    s.buf_s[k], s.buf_a[k], s.buf_r[k], s.buf_s2[k] = x, a, r, y
    f[PENDING] = k + 1
    f[STEPS] += 1
    return k + 1 >= f[UPDATE_EVERY]


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
        self.rng: np.random.Generator | None = None

    @abstractmethod
    def reset(self, rng: np.random.Generator) -> None:
        """Back to the prior, take the run's generator, make the first plan (a compiled
        agent's ``state``: :data:`FLAGS`, :func:`posterior_arrays` first)."""

    # --- what the compiled agents read from their state ----------------------------------

    @property
    def _planned(self) -> bool:
        return bool(self.state.flags[PLANNED])

    transitions = property(lambda self: Dirichlet._trusted(self.state.alpha.copy()),
                           doc="The Dirichlet posterior of the transitions (a copy).")  # fmt: skip
    rewards = property(
        lambda self: NormalGamma._trusted(
            *(x.copy() for x in self.state[1:5]), self.prior_posterior.sum_of_squares
        ),
        doc="The Normal-Gamma posterior of the mean rewards (a copy).",
    )
    policy = state_field("policy", "The greedy policy ``(S,)``.")
    steps = property(lambda self: int(self.state.flags[STEPS]), doc="Steps since ``reset``.")
    plans = property(lambda self: int(self.state.flags[PLANS]), doc="Plans since ``reset``.")
    _pending = property(lambda self: int(self.state.flags[PENDING]))

    def compiled_reason(self, env) -> str | None:
        if env.ints[1]:
            return f"{type(self).__name__} is continuing: it does not play layered models"
        if env.mask.shape[1:] != (self.n_states, self.n_actions):
            return "the agent's tables do not match the model's states and actions"
        return None

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


class ThompsonState(NamedTuple):
    """The whole state of a :class:`ThompsonMeanModel`: the posterior's and the batch's arrays
    (:func:`posterior_arrays`), the action mask, each state's only admissible action or -1
    (``forced``), the policy and room for the last one (``old``), the compiled plan's arrays
    (:class:`optplan.agents._ube_kernels.Work`: the mean model ``P``, ``q``, values, ``nu``,
    ``u``, the noise sd ``sd``, scratch), ``qm`` (``q``, ``-inf`` where inadmissible),
    ``params = [discount, coef, div, zeta]`` and ``flags`` (:data:`FLAGS`)."""

    alpha: np.ndarray
    mu0: np.ndarray
    lam: np.ndarray
    nalpha: np.ndarray
    nbeta: np.ndarray
    cnt: np.ndarray
    sums: np.ndarray
    sq: np.ndarray
    buf_s: np.ndarray
    buf_a: np.ndarray
    buf_r: np.ndarray
    buf_s2: np.ndarray
    mask: np.ndarray
    forced: np.ndarray
    policy: np.ndarray
    old: np.ndarray
    P: np.ndarray
    var: np.ndarray
    R: np.ndarray
    a0: np.ndarray
    q: np.ndarray
    values: np.ndarray
    nu: np.ndarray
    u: np.ndarray
    sd: np.ndarray
    v: np.ndarray
    w: np.ndarray
    scratch: PK.Scratch
    qm: np.ndarray
    params: np.ndarray
    flags: np.ndarray


@njit
def thompson_plan_now(s):  # pragma: no cover - compiled by numba
    """A plan (:func:`optplan.agents._ube_kernels._plan`: the posterior-mean model, policy
    iteration warm-started from the last policy, the local term, the uncertainty and the
    noise sd). ``True`` when Python must plan: a Python plan, or a compiled one that failed
    (the NumPy plan then redoes it and raises its error; it draws nothing)."""
    f = s.flags
    f[PLANS] += 1
    if f[PYTHON_PLAN]:
        f[DUE] = 1
        return True
    p = s.params
    status = UK._plan(
        (s.alpha, s.mu0, s.lam, s.nalpha, s.nbeta), s.mask, p[0], (f[RULE], p[1], p[2]),
        s.policy, f[PLANNED] == 1, (s.P, s.var, s.R, s.a0, s.q, s.values, s.nu, s.u, s.sd, s.v,
        s.w), s.scratch, f[MAX_ITER],
    )  # fmt: skip
    f[STATUS] = status
    if status != UK.OK:
        f[DUE] = 1
        return True
    S, A = s.q.shape
    for x in range(S):
        for a in range(A):
            s.qm[x, a] = s.q[x, a] if s.mask[x, a] else -math.inf
    f[PLANNED] = 1
    return False


@njit(inline="always")
def thompson_act(s, x, rng):  # pragma: no cover - compiled by numba
    """``argmax_b q_xb + zeta eps_b sd_xb``, ``eps ~ N(0, I)`` (one draw per action, none in a
    state with one admissible action or with ``zeta = 0``: the greedy action)."""
    if s.forced[x] >= 0:
        return s.forced[x]
    zeta = s.params[3]
    if zeta == 0.0:
        return s.policy[x]
    best, top = -1, 0.0
    for b in range(s.qm.shape[1]):
        val = s.qm[x, b] + zeta * rng.standard_normal() * s.sd[x, b]
        if best >= 0 and math.isnan(top):
            continue  # numpy's argmax: the first NaN wins (the draws still happen)
        if best < 0 or math.isnan(val) or val > top:
            best, top = b, val
    return best


@njit(inline="always")
def thompson_observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Buffer the transition; every ``update_every`` steps, :func:`absorb` and
    :func:`thompson_plan_now`."""
    if not buffered(s, x, a, r, y):
        return False
    absorb(s)
    return thompson_plan_now(s)


@njit
def thompson_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(thompson_act, thompson_observe, s, env, steps, env_rng, agent_rng)


class ThompsonMeanModel(CompiledAgent, ConicFallback, PosteriorAgent):
    """Greedy planning on the posterior-mean model plus a Thompson noise scale per pair. Its
    state is a :class:`ThompsonState`; steps, batch updates and plans are compiled
    (:func:`thompson_observe`), except plans by the conic method, of :data:`MAX_STATES
    <optplan.agents._ube_kernels.MAX_STATES>` states or more, or of a subclass with its own
    NumPy plan (:data:`_NUMPY_PLAN`): :meth:`_plan_numpy`, called from the compiled loop."""

    _needs_variance = True
    _run = staticmethod(thompson_run)
    compiled_reason = PosteriorAgent.compiled_reason

    def __init__(self, n_states, n_actions, *, zeta, method="fast", solver=None, **posterior):
        self.zeta = check_positive("zeta", zeta, allow_zero=True)
        self.init_fallback(method, solver)
        PosteriorAgent.__init__(self, n_states, n_actions, **posterior)
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        """Back to the prior, take the run's generator, make the first plan."""
        self.reset_fallback()
        self.rng = check_rng(rng)
        S, A = self.n_states, self.n_actions
        python = not (self.method == "fast" and S < UK.MAX_STATES and _keeps_plan(type(self)))
        rule, coef, div = self._kernel_rule()
        flags = new_flags(self, python, UK.MAX_ITER)
        flags[RULE] = rule
        work = UK.Work(S, A)
        self.state = ThompsonState(
            *posterior_arrays(self), np.ascontiguousarray(self.action_mask, dtype=np.bool_),
            np.ascontiguousarray(self._forced, dtype=np.int64),
            np.asarray(self.action_mask.argmax(axis=1), dtype=np.int64),
            np.zeros(S, dtype=np.int64), *work.args(), np.zeros((S, A)),
            np.array([float(self.discount), float(coef), float(div), float(self.zeta)]), flags,
        )  # fmt: skip
        self._problem, self._problem_plan = None, -1
        UK._compiled()  # the plan's compiled functions, bound before a step compiles
        if thompson_plan_now(self.state):
            self.plan()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Store the transition; every ``update_every`` steps fold the batch into the
        posterior and re-plan (continuing: ``done`` is not used)."""
        if thompson_observe(self.state, int(state), int(action), float(reward),
                            int(next_state), bool(done), self.rng):  # fmt: skip
            self.plan()

    def plan(self) -> None:
        """The plan ``observe`` handed to Python (:meth:`_plan_numpy`)."""
        flags = self.state.flags
        if flags[DUE]:
            flags[DUE] = 0
            self._plan_numpy()

    def _plan_numpy(self) -> None:
        """The plan in NumPy: :meth:`mean_model`, policy iteration, the noise sd
        (:meth:`_noise_sd`), written into the state."""
        st = self.state
        P, R = self.mean_model()
        out = self._optimal(P, R, "posterior-mean model")
        st.policy[...] = out.policy
        st.values[...] = out.values
        st.q[...] = out.q
        st.qm[...] = masked(out.q, self.action_mask)
        st.P[...] = P
        st.sd[...] = np.where(self.action_mask, self._noise_sd(P), 0.0)
        st.flags[PLANNED] = 1

    @abstractmethod
    def _kernel_rule(self) -> tuple:
        """The compiled plan's ``(rule, coef, div)`` (:func:`optplan.agents._ube_kernels._plan`)."""

    @abstractmethod
    def _noise_sd(self, P: np.ndarray) -> np.ndarray:
        """The Thompson noise's standard deviation per pair, before ``zeta`` (the NumPy
        plan)."""

    q = state_field("qm", "``Qbar`` (``-inf`` where inadmissible).")
    values = state_field("values", "``V`` of the greedy policy.")
    noise_sd = state_field("sd", "The Thompson noise's sd per pair.")

    def _solve(self, problem):
        """The agent's problem solved: the fast path without the dual (never read here)."""
        what = f"{type(problem).__name__} on the posterior"
        return self.solve_checked(problem, what, multiplier=False)

    def select_action(self, state: int) -> int:
        return int(thompson_act(self.state, int(state), self.rng))

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
