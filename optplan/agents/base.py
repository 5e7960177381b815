"""What every agent shares: the :class:`Agent` protocol (bsuite's two methods), the
:class:`LayerClock` of episodic agents, the :class:`ConicFallback` bookkeeping of agents that
can verify their planning by CVXPY, and the input checks of agent parameters.

An agent is usually a posterior (:mod:`optplan.posteriors`), a planning problem
(:mod:`optplan.problems`) and a policy rule; the protocol is only the interface
:func:`optplan.experiments.run` drives it through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from .._checks import OptplanError, OptplanTypeError, check_int, first_bad, index_str
from ..posteriors import NormalGamma
from ..problems.base import check_method, check_solver
from ..result import OPTIMAL, PlanResult

log = logging.getLogger(__name__)

__all__ = [
    "Agent",
    "PolicyAgent",
    "one_hot_policy",
    "greedy_policy",
    "LayerClock",
    "ConicFallback",
    "check_agent_mask",
    "check_count",
    "check_rng",
    "check_normal_gamma",
    "thompson_action",
    "CompiledAgent",
]


@runtime_checkable
class Agent(Protocol):
    """An online agent acting in a tabular environment.

    The run loop calls :meth:`reset` once, then alternates :meth:`select_action` and
    :meth:`update` for every time step.
    """

    def reset(self, rng: np.random.Generator) -> None:
        """Start a run: forget everything learned and draw all randomness from ``rng``."""
        ...

    def select_action(self, state: int) -> int:
        """Choose an admissible action in ``state``."""
        ...

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Learn from one transition; ``done`` marks the end of an episode.

        When ``done`` is true ``next_state`` is the last state of the finished episode, not
        the first state of the next one (which arrives through :meth:`select_action`).
        """
        ...


@runtime_checkable
class PolicyAgent(Protocol):
    """An agent that can say which stationary policy it follows right now (optional; what
    :func:`optplan.experiments.run` needs to score it by the regret of its policies,
    :func:`optplan.experiments.metrics.occupancy_gaps`).

    ``current_policy()`` is the ``(S, A)`` row-stochastic matrix ``pi(a | s)`` by which the
    *next* :meth:`~Agent.select_action` draws its action (0 on inadmissible actions);
    ``policy_version`` is an integer that changes whenever that matrix may have changed, so the
    run loop copies the matrix only then (one copy, and later one linear solve, per policy, not
    per step). Conventions of the agents that implement it:

    - RAVI-UCB: the epoch's ``pi_k`` (version = epoch number);
    - UCRL2 / KL-UCRL, continuing PSRL, the oracle: their deterministic policy, one-hot
      (version bumped when a plan changes it);
    - epsilon-greedy Q-learning: ``epsilon`` spread uniformly over the admissible actions plus
      ``1 - epsilon`` spread uniformly over the greedy set (its random tie-break), version
      bumped when a row's greedy set changes; soft Q-learning: its Boltzmann policy, version
      bumped at every update; random: uniform over the admissible actions.

    Agents whose action is a fresh random perturbation each step (UBE, moment matching, BQL
    Thompson sampling) do not implement it: their action distribution has no closed form.
    """

    policy_version: int

    def current_policy(self) -> np.ndarray:
        """``pi(a | s)``, shape ``(S, A)``, rows summing to 1."""
        ...


def state_field(name: str, doc: str) -> property:
    """A read-only attribute that is the field ``name`` of the agent's compiled state."""
    return property(lambda self: getattr(self.state, name), doc=doc)


class CompiledAgent:
    """An agent whose steps are compiled functions of one state tuple (bsuite's
    ``TrainingState``): ``self.state`` is a ``NamedTuple`` of arrays holding all it learns, and
    ``act(state, x, rng) -> a``, ``observe(state, x, a, r, y, done, rng) -> plan due`` are
    ``numba.njit(cache=True)`` functions that :meth:`select_action` and :meth:`update` call.
    ``_run`` is the agent's cached compiled loop, three lines beside them::

        @njit(cache=True)
        def run(state, env, steps, env_rng, agent_rng):
            return optplan.envs.kernels.play(act, observe, state, env, steps, env_rng, agent_rng)

    :func:`optplan.experiments.run` then plays whole runs in ``_run`` (one call per chunk of
    steps), with the same functions, generators and so the same results as its generic loop.
    An agent that plans in Python returns ``True`` from ``observe`` when a plan is due; the
    loop then calls :meth:`plan_due` (:meth:`plan`) between two compiled calls.
    """

    #: The cached compiled loop ``run(state, env, steps, env_rng, agent_rng) -> status``.
    _run: Callable
    #: The same under discounted resets, ``run(state, env, steps, env_rng, coin_rng,
    #: agent_rng)`` (:func:`optplan.envs.kernels.play_resets`); ``None``: not covered.
    _run_resets: Callable | None = None
    #: The agent's policy (:class:`PolicyAgent`) changes only in :meth:`plan`, or in
    #: ``observe`` returning ``True`` while :meth:`track` is on, so the compiled loop can
    #: record it between calls (runs that track policies, for the occupancy regret).
    POLICY_CHANGES_IN_PLAN = False

    def compiled_reason(self, env) -> str | None:
        """Why the compiled loop cannot run this agent in ``env`` (an
        :class:`~optplan.envs.kernels.EnvArrays`), ``None`` when it can (the default)."""
        return None

    def play(self, env, steps, env_rng) -> int:
        """Run the compiled loop from ``steps.position`` (:func:`optplan.envs.kernels.play`);
        its status."""
        return int(self._run(self.state, env, steps, env_rng, self.rng))

    def play_resets(self, env, steps, env_rng, coin_rng) -> int:
        """:meth:`play` under discounted resets (:func:`optplan.envs.kernels.play_resets`), in
        the agent's ``_run_resets`` (``run`` with ``coin_rng`` after ``env_rng``)."""
        return int(self._run_resets(self.state, env, steps, env_rng, coin_rng, self.rng))

    def plan(self) -> None:
        """The plan ``observe`` asked for (agents that plan in Python override it)."""

    def plan_due(self) -> None:
        """What the compiled loop calls when ``observe`` returned ``True``: :meth:`plan`."""
        self.plan()

    def track(self, on: bool) -> None:
        """Whether the run records the agent's policies (until the next ``reset``): an agent
        whose policy changes in ``observe`` then returns ``True`` from it when it does (the
        compiled loop records the new policy in Python), and sets
        ``POLICY_CHANGES_IN_PLAN``."""


def one_hot_policy(policy: np.ndarray, n_actions: int) -> np.ndarray:
    """``(S, A)`` matrix of a deterministic policy ``policy[s]``."""
    policy = np.asarray(policy, dtype=np.intp)
    out = np.zeros((policy.size, n_actions))
    out[np.arange(policy.size), policy] = 1.0
    return out


def greedy_policy(q: np.ndarray, mask: np.ndarray, epsilon: float = 0.0) -> np.ndarray:
    """``(S, A)``: ``1 - epsilon`` spread over the maximizers of each row of ``q`` (ties
    uniform), ``epsilon`` spread over the admissible actions (``mask``)."""
    qm = np.where(mask, q, -np.inf)
    best = qm == qm.max(axis=-1, keepdims=True)
    pi = (1.0 - epsilon) * best / best.sum(axis=-1, keepdims=True)
    if epsilon:
        pi = pi + epsilon * mask / mask.sum(axis=-1, keepdims=True)
    return pi


def check_count(name: str, value) -> int:
    """A positive integer parameter (``n_states``, ``n_actions`` ...). An environment or a
    model where a count belongs gets a pointer to :func:`~optplan.agents.make_agent`."""
    if not isinstance(value, (bool, int, float, str, np.number)) and value is not None:
        try:
            return check_int(name, value, 1)
        except OptplanTypeError:
            raise OptplanTypeError(
                f"{name} must be a positive integer (a count), got an object of type "
                f"{type(value).__name__}. To build an agent from an environment or a model use "
                "optplan.agents.make_agent(name, env, **params), e.g. "
                "make_agent('random', env)"
            ) from None
    return check_int(name, value, 1)


def check_normal_gamma(name: str, params) -> tuple[float, float, float, float]:
    """A Normal-Gamma prior or posterior ``(mu0, lam, alpha, beta)`` as four floats; an error
    naming ``name`` (or the bad field) otherwise."""
    try:
        mu0, lam, alpha, beta = (float(v) for v in params)
    except (TypeError, ValueError):
        raise OptplanError(
            f"{name} must be four numbers (mu0, lam, alpha, beta), got {params!r}"
        ) from None
    try:
        NormalGamma(mu0, lam, alpha, beta)  # names the bad field
    except OptplanError as exc:
        raise OptplanError(f"{name}: {exc}") from None
    return mu0, lam, alpha, beta


def check_rng(rng) -> np.random.Generator:
    """The run's generator handed to ``reset``."""
    if not isinstance(rng, np.random.Generator):
        raise OptplanTypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    return rng


class LayerClock:
    """The layer of the current step of an episodic agent: steps since :meth:`reset` or the
    last ``done`` (agents see states only, and a layered model's states repeat per layer).

    ``n_layers=None`` for continuing agents: the clock still counts, :meth:`current` never
    complains.
    """

    def __init__(self, n_layers: int | None = None) -> None:
        self.n_layers = n_layers
        #: ``[layer]``: the layer as an array, shared with compiled steps' state tuples.
        self.array = np.zeros(1, dtype=np.int64)

    @property
    def layer(self) -> int:
        return int(self.array[0])

    @layer.setter
    def layer(self, value: int) -> None:
        self.array[0] = value

    def reset(self) -> None:
        self.layer = 0

    def tick(self, done: bool) -> None:
        """After an update: next layer, or layer 0 when the episode ended."""
        self.layer = 0 if done else self.layer + 1

    def current(self) -> int:
        """The current layer; an error once an episode outlasts ``n_layers`` steps."""
        if self.n_layers is not None and self.layer >= self.n_layers:
            raise RuntimeError(
                f"{self.layer} steps without done, but the model has {self.n_layers} layers"
            )
        return self.layer

    @property
    def last(self) -> bool:
        """The current step is in the last layer."""
        return self.n_layers is not None and self.layer + 1 >= self.n_layers


class ConicFallback:
    """Planning by ``method="fast"`` or, to verify it, ``"conic"`` with a counted fallback.

    A conic solve that does not end ``optimal`` (or accepted by ``accept``) is replaced by the
    fast answer: :attr:`fallbacks` counts those, :attr:`statuses` every conic status, and
    :meth:`stats` reports both to the experiment record. Each fallback is also logged on the
    ``optplan.agents.base`` logger: at ``WARNING`` the first time a status causes one since
    the last reset, at ``DEBUG`` after that (a run may have thousands).
    """

    method: str
    solver: str

    def init_fallback(self, method: str, solver: str | None) -> None:
        self.method = check_method(method)
        self.solver = check_solver(solver)
        self.reset_fallback()

    def reset_fallback(self) -> None:
        self.fallbacks = 0
        self.statuses: dict[str, int] = {}
        self._logged: set[str] = set()

    def solve_conic(
        self, problem, accept: Callable[[PlanResult], bool] | None = None
    ) -> PlanResult | None:
        """The conic result, or ``None`` (a fallback) when its status is not acceptable."""
        res = problem.solve("conic", solver=self.solver)
        self.statuses[res.status] = self.statuses.get(res.status, 0) + 1
        if res.status == OPTIMAL or (accept is not None and accept(res)):
            return res
        self.fallbacks += 1
        level = logging.DEBUG if res.status in self._logged else logging.WARNING
        self._logged.add(res.status)
        log.log(
            level,
            "%s: conic %s by %s ended %r (%s); using the fast answer instead (fallback %d)",
            type(self).__name__,
            type(problem).__name__,
            getattr(res, "solver", None) or self.solver,
            res.status,
            getattr(res, "message", "") or "no message",
            self.fallbacks,
        )
        return None

    def solve_planned(self, problem, **fast) -> PlanResult:
        """``problem`` solved by :attr:`method`: by CVXPY when ``"conic"`` (the fast path when
        that status is not acceptable), else by the fast path with the options ``fast`` (e.g.
        ``multiplier=False`` where the agent never reads the dual)."""
        res = self.solve_conic(problem) if self.method == "conic" else None
        return problem.solve("fast", **fast) if res is None else res

    def solve_checked(self, problem, what: str, **fast) -> PlanResult:
        """:meth:`solve_planned`, and a ``RuntimeError`` naming ``what`` when even the answer
        kept is not a success."""
        res = self.solve_planned(problem, **fast)
        if not res.success:
            raise RuntimeError(f"{what} ended {res.status!r}: {res.message}")
        return res

    def stats(self) -> dict:
        """Scalars for the experiment record: conic fallbacks and statuses."""
        out = {"fallbacks": self.fallbacks}
        out.update({f"status_{k}": v for k, v in sorted(self.statuses.items())})
        return out


def thompson_action(rng, forced: int, greedy: int, q: np.ndarray, zeta: float, sd) -> int:
    """``argmax_b q_b + zeta eps_b sd_b`` with ``eps ~ N(0, I)`` drawn from ``rng``; no draw in a
    state with a single admissible action (``forced >= 0``, played) or with ``zeta = 0`` (the
    ``greedy`` action)."""
    if forced >= 0:
        return int(forced)
    if zeta == 0.0:
        return int(greedy)
    eps = rng.standard_normal(q.shape[-1])
    return int(np.argmax(q + zeta * eps * sd))


def continuing_mask(action_mask, S: int, A: int) -> tuple[np.ndarray, np.ndarray]:
    """A continuing agent's ``(S, A)`` mask and, per state, its only admissible action (``-1``
    where it has several)."""
    mask = check_agent_mask(action_mask, S, A)
    if mask.ndim != 2:
        raise OptplanError(
            f"action_mask must be (S, A) for a continuing agent, got shape {mask.shape}"
        )
    forced = np.where(mask.sum(axis=1) == 1, mask.argmax(axis=1), -1)
    return mask, forced


def check_agent_mask(action_mask, S: int, A: int) -> np.ndarray:
    """An agent's admissible actions: bool ``(S, A)`` or ``(L, S, A)``, every state with one."""
    if action_mask is None:
        return np.ones((S, A), dtype=bool)
    mask = np.asarray(action_mask)
    if mask.dtype != bool:
        if mask.dtype.kind not in "iu" or not np.isin(mask, (0, 1)).all():
            raise OptplanTypeError(f"action_mask must be boolean, got dtype {mask.dtype}")
        mask = mask.astype(bool)
    if mask.shape[-2:] != (S, A) or mask.ndim not in (2, 3):
        raise OptplanError(
            f"action_mask has shape {mask.shape}, expected ({S}, {A}) or (L, {S}, {A})"
        )
    counts = mask.sum(axis=-1)
    if (counts == 0).any():
        idx = first_bad(counts == 0)
        raise OptplanError(
            f"action_mask leaves state {idx[-1]} with no action (index {index_str(idx)})"
        )
    return mask
