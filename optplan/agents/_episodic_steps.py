r"""The compiled steps of the episodic agents that plan once per episode on a
:class:`~optplan.posteriors.LayeredPosterior`: K-learning, the episodic PSRL, and the episodic
UBE and count-bonus agents.

Their state (:class:`EpisodicState`) holds the posterior's own arrays (counts, reward sums,
next-state counts: the Python plan reads them where they are), the layer of the current step
(the :class:`~optplan.agents.base.LayerClock`'s array) and the arrays the current plan acts
from, one row per ``(layer, state)``:

- :func:`act`: K-learning's Boltzmann draw (one ``Generator.random()``, searched in the row of
  the plan's cumulative policy as ``np.searchsorted(cdf, u cdf[-1], side="right")``, capped at
  ``A - 1``), the UBE's Thompson action
  (:func:`optplan.agents._posterior_agent.thompson_act`), or the plan's policy (PSRL, the count
  bonus);
- :func:`observe`: the posterior's update (:meth:`LayeredPosterior.update
  <optplan.posteriors.LayeredPosterior.update>`: the same float additions; a next state that
  contradicts the deterministic transition prior is left out and reported, so that the Python
  update raises its error), the layer, the counters; at an episode end a plan is due. Two
  plans are compiled and made here: PSRL's with a Dirichlet prior and one reward noise sd
  (:func:`optplan.agents._layered_kernels._psrl`) and the UBE's with the tabular rule
  (:func:`optplan.agents._layered_ube_kernels._plan`, layers ``0 .. top``, in place in the
  agent's own arrays); the others are the agents' Python ``plan()``, between two compiled
  calls.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jit import njit
from ..envs.kernels import play, search_right
from . import _layered_kernels as LK
from . import _layered_ube_kernels as LUK
from ._posterior_agent import thompson_act

__all__ = ["EpisodicState", "new_state", "act", "pick", "observe", "record", "plan_end", "run",
           "python_act", "python_observe", "BOLTZMANN", "POLICY", "THOMPSON", "FLAGS"]  # fmt: skip

#: How the agent acts: a Boltzmann draw from a cumulative policy; a deterministic policy; the
#: UBE's Thompson action.
BOLTZMANN, POLICY, THOMPSON = 0, 1, 2
#: ``flags``: how it acts; the deterministic transition prior; the deepest layer updated since
#: the last plan; steps; episodes; compiled plans; the compiled plan's reward mode (-1: the
#: plan is Python's); a contradicted prior (then its layer, state, action, next state); the
#: compiled plan (:data:`PSRL_PLAN`, :data:`UBE_PLAN`); a compiled plan that failed.
(KIND, DETERMINISTIC, TOP, STEPS, EPISODES, PLANS, FUSED, BAD, BAD_L, BAD_X, BAD_A, BAD_Y,
 PLANNER, FAILED) = range(14)  # fmt: skip
FLAGS = 14
PSRL_PLAN, UBE_PLAN = 0, 1
#: ``params``: the reward posterior's ``1 / prior_var``, ``sigma**2``, ``prior_var``; the
#: UBE's ``zeta`` (where :func:`~optplan.agents._posterior_agent.thompson_act` reads it); the
#: Dirichlet pseudo-count; the UBE plan's ``np.square(sigma)``, ``gamma``, ``gamma**2``,
#: ``gamma**2 Q_max**2``.
INV_PRIOR, SD2, PRIOR_VAR, ZETA, ALPHA0, SQ, G, G2, CQ = range(9)


class EpisodicState(NamedTuple):
    """An episodic agent's state: the posterior's ``counts``, ``reward_sums`` ``(L, S, A)``
    and ``next_counts`` ``(L, S, A, S)``; ``clock = [layer]``; ``flags`` (:data:`FLAGS`),
    ``params``; the plan's ``cdf``, ``qm``, ``sd`` ``(L S, A)`` and ``policy``, ``forced``
    ``(L S,)`` (row ``l S + s``); the compiled plan's arrays: PSRL's scratch ``mean``,
    ``var``, ``R``, ``P``, ``V`` and its ``Q``
    (:class:`optplan.agents._layered_kernels.PsrlWork`), or the UBE's posterior means
    ``mean``, ``var``, ``P``, its mean-reward values ``Q`` (``QA``), ``V`` (``VA``), ``local``,
    ``u`` and ``mask``."""

    counts: np.ndarray
    reward_sums: np.ndarray
    next_counts: np.ndarray
    clock: np.ndarray
    flags: np.ndarray
    params: np.ndarray
    cdf: np.ndarray
    policy: np.ndarray
    forced: np.ndarray
    qm: np.ndarray
    sd: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    R: np.ndarray
    P: np.ndarray
    V: np.ndarray
    Q: np.ndarray
    local: np.ndarray
    u: np.ndarray
    mask: np.ndarray


_NONE = np.zeros((1, 1))


def new_state(agent, kind: int, forced=None, zeta: float = 0.0, psrl=None, ube=None):
    """The :class:`EpisodicState` of ``agent`` after its ``reset`` (its posterior, clock and
    sizes): ``kind`` of :data:`BOLTZMANN`, :data:`POLICY`, :data:`THOMPSON`; ``forced (L,
    S)`` the Thompson action's only admissible action (``-1``: several); ``psrl`` PSRL's
    compiled plan's scratch, ``ube`` the UBE agent whose compiled plan the steps make
    (:func:`ube_arrays`); neither: Python plans."""
    post = agent.posterior
    L, S, A = post.shape
    flags = np.zeros(FLAGS, dtype=np.int64)
    flags[KIND], flags[DETERMINISTIC], flags[TOP], flags[FUSED] = kind, post.deterministic, -1, -1
    params = np.zeros(9)
    params[ZETA] = zeta
    rows = (L * S, A)
    three, four = _NONE[None], _NONE[None, None]
    plan = {"mean": three, "var": three, "R": three, "P": four, "V": _NONE, "Q": three,
            "local": three, "u": three, "mask": np.ones((1, 1, 1), dtype=np.bool_)}  # fmt: skip
    acting = {
        "cdf": np.zeros(rows if kind == BOLTZMANN else (1, 1)),
        "policy": np.zeros(L * S, dtype=np.int64),
        "qm": np.zeros(rows if kind == THOMPSON else (1, 1)),
        "sd": np.zeros(rows if kind == THOMPSON else (1, 1)),
    }
    if psrl is not None:
        mode, params[INV_PRIOR], params[SD2], params[PRIOR_VAR] = LK.psrl_scalars(post, psrl)
        if mode != LK.GIVEN:
            flags[FUSED], flags[PLANNER] = mode, PSRL_PLAN
            params[ALPHA0] = post.transition_prior
            plan.update(mean=psrl.mean, var=psrl.var, R=psrl.R, P=psrl.P, V=psrl.V,
                        Q=np.empty((L, S, A)))  # fmt: skip
    elif ube is not None:
        flags[FUSED], flags[PLANNER] = ube._layered[0], UBE_PLAN
        params[INV_PRIOR], params[SD2], params[SQ] = ube._layered[1:]
        params[PRIOR_VAR] = post.prior_var
        params[ALPHA0] = 0.0 if post.deterministic else post.transition_prior
        g = float(ube.discount)
        params[G], params[G2], params[CQ] = g, ube.discount**2, ube.discount**2 * ube.q_max**2
        plan.update(mean=ube.mean, var=ube.var, P=ube.P, Q=ube._QA, V=ube._VA, local=ube.local,
                    u=ube.u, mask=ube._layered_mask)  # fmt: skip
        acting.update(qm=ube.q.reshape(rows), sd=ube._sqrt_u.reshape(rows),
                      policy=ube.policy.reshape(L * S))  # fmt: skip
    LK._compiled()  # the plans' compiled functions, bound before a step compiles
    LUK._compiled()
    return EpisodicState(
        counts=post.counts, reward_sums=post.reward_sums, next_counts=post.next_counts,
        clock=agent.clock.array, flags=flags, params=params,
        forced=np.full(L * S, -1, dtype=np.int64) if forced is None
        else np.ascontiguousarray(forced, dtype=np.int64).reshape(L * S),
        **acting, **plan,
    )  # fmt: skip


@njit(inline="always")
def act(s, x, rng):  # pragma: no cover - compiled by numba
    """The action in state ``x`` at the current layer, from the current plan."""
    row = s.clock[0] * s.counts.shape[1] + x
    kind = s.flags[KIND]
    if kind == BOLTZMANN:
        return pick(s.cdf, row, rng.random())
    if kind == THOMPSON:
        return thompson_act(s, row, rng)
    return s.policy[row]


@njit(inline="always")
def pick(cdf, row, u):  # pragma: no cover - compiled by numba
    """The Boltzmann action of uniform ``u``: ``u`` times the row's total searched in the
    cumulative row (side right), capped at the last action."""
    c = cdf[row]
    last = c.shape[0] - 1
    return min(search_right(c, u * c[last]), last)


#: What :func:`record` saw: a step within an episode; an episode's last step; a step that
#: contradicts the deterministic transition prior (left out).
STEP, ENDED, CONTRADICTED = 0, 1, 2


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """:func:`record`, then at an episode's end :func:`plan_end`; ``True`` when Python must
    plan (an episode ended and the plan is Python's) or raise (a contradicted prior)."""
    seen = record(s.counts, s.reward_sums, s.next_counts, s.clock, s.flags, x, a, r, y, done)
    if seen == STEP:
        return False
    if seen == CONTRADICTED:
        return True
    return plan_end(s, rng)


@njit(inline="always")
def record(counts, reward_sums, nxt, clock, f, x, a, r, y, done):  # pragma: no cover
    """The posterior's update, the layer and the counters (:data:`STEP`, :data:`ENDED`), or
    :data:`CONTRADICTED` with the step kept in ``flags``."""
    l = clock[0]
    recorded = l + 1 < nxt.shape[0]
    if recorded and f[DETERMINISTIC]:
        seen = 0.0
        for t in range(nxt.shape[3]):
            seen += nxt[l, x, a, t]
        if seen > 0 and nxt[l, x, a, y] == 0:
            f[BAD], f[BAD_L], f[BAD_X], f[BAD_A], f[BAD_Y] = 1, l, x, a, y
            return CONTRADICTED
    counts[l, x, a] += 1
    reward_sums[l, x, a] += r
    if recorded:
        nxt[l, x, a, y] += 1
    if l > f[TOP]:
        f[TOP] = l
    f[STEPS] += 1
    if not done:
        clock[0] = l + 1
        return STEP
    clock[0] = 0
    f[EPISODES] += 1
    return ENDED


@njit
def plan_end(s, rng):  # pragma: no cover - compiled by numba
    """At an episode's end, the compiled plan (PSRL's, the UBE's; ``False``), or ``True``: the
    plan is Python's, or the UBE's failed (Python raises)."""
    f = s.flags
    if f[FUSED] < 0:
        return True
    f[PLANS] += 1
    if f[PLANNER] == PSRL_PLAN:
        _psrl_plan(s, rng)
        return False
    ok = _ube_plan(s)
    f[TOP] = -1
    if not ok:
        f[FAILED] = 1
    return not ok


def python_act(agent, x: int) -> int:
    """:func:`act` from Python (the generic loop): the same compiled pieces, with the arrays
    they read handed over (numba types a state tuple anew at every call)."""
    s = agent.state
    agent.clock.current()  # an error once an episode outlasts n_layers steps
    row = int(s.clock[0]) * s.counts.shape[1] + x
    kind = s.flags[KIND]
    if kind == BOLTZMANN:
        return int(pick(s.cdf, row, agent.rng.random()))
    if kind == THOMPSON:
        return int(thompson_act(s, row, agent.rng))
    return int(s.policy[row])


def python_observe(agent, x: int, a: int, r: float, y: int, done: bool) -> bool:
    """:func:`observe` from Python (the generic loop): whether a Python plan is due."""
    s = agent.state
    seen = record(s.counts, s.reward_sums, s.next_counts, s.clock, s.flags, x, a, r, y, done)
    if seen == STEP:
        return False
    return seen == CONTRADICTED or bool(plan_end(s, agent.rng))


@njit(inline="always")
def _psrl_plan(s, rng):  # pragma: no cover - compiled by numba
    """PSRL's plan (:func:`optplan.agents._layered_kernels._psrl`) into ``Q`` and the
    policy."""
    f, p = s.flags, s.params
    L, S = s.Q.shape[0], s.Q.shape[1]
    post = (s.counts, s.reward_sums, s.next_counts, f[FUSED], p[INV_PRIOR], p[SD2], p[PRIOR_VAR])
    LK._psrl(rng, post, s.mean, s.var, p[ALPHA0], s.R, s.P, s.V, s.Q, s.policy.reshape(L, S))


@njit(inline="always")
def _ube_plan(s):  # pragma: no cover - compiled by numba
    """The UBE's re-plan of layers ``0 .. top`` (:func:`optplan.agents._layered_ube_kernels.
    _plan`) in the agent's arrays; whether ``u`` stayed finite."""
    f, p = s.flags, s.params
    L, S, A = s.counts.shape
    status = LUK._plan(
        f[TOP], False,
        (s.counts, s.reward_sums, s.next_counts, f[FUSED], p[INV_PRIOR], p[SD2], p[PRIOR_VAR]),
        f[DETERMINISTIC] == 1, p[ALPHA0], s.mask, (p[G], p[G2], p[CQ], p[SQ]),
        (s.mean, s.var, s.P, s.Q, s.V, s.qm.reshape(L, S, A), s.policy.reshape(L, S)),
        (s.local, s.u, s.sd.reshape(L, S, A)),
    )  # fmt: skip
    return status == LUK.OK


@njit
def run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(act, observe, s, env, steps, env_rng, agent_rng)


def contradiction(agent) -> None:
    """Raise the posterior's error for the step :func:`observe` left out (if any)."""
    f = agent.state.flags
    if f[BAD]:
        f[BAD] = 0
        l, x, a, y = (int(v) for v in f[BAD_L : BAD_Y + 1])
        agent.posterior.update(l, x, a, 0.0, y)  # raises
        raise RuntimeError("the deterministic prior's contradiction did not raise")


def compiled_reason(agent, env) -> str | None:
    """Why the episodic steps cannot be played in ``env`` (an
    :class:`~optplan.envs.kernels.EnvArrays`): a continuing or truncated environment, or one
    with another number of layers."""
    if not env.ints[1]:
        return f"the {type(agent).__name__} agent is episodic, the environment is continuing"
    if env.ints[2]:
        return "the environment truncates episodes (max_steps)"
    if env.mask.shape[0] != agent.n_layers:
        return f"the environment has {env.mask.shape[0]} layers, the agent {agent.n_layers}"
    return None
