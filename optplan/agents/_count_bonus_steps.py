r"""The compiled steps of the continuing :class:`~optplan.agents.CountBonus`: its state tuple
:class:`CountBonusState`, the greedy action :func:`act`, :func:`observe` (the posterior's
counts, and every ``update_every`` steps the plan :func:`plan_now` at scale ``beta log(t)``,
the compiled plan of :mod:`optplan.agents._mean_model_kernels`) and the loop :func:`run`."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._jit import njit
from ..envs.kernels import play
from . import _mean_model_kernels as MK

__all__ = ["CountBonusState", "new_state", "act", "counted", "observe", "plan_now", "run"]

#: ``flags`` entries: steps taken, ``update_every``, flat reward prior, known transitions,
#: planned once, plans made, the last plan's status and iterations.
STEPS, EVERY, IMPROPER, KNOWN, PLANNED, PLANS, STATUS, ITERATIONS = range(8)
#: ``params`` entries: the transition prior's pseudo-count, the reward prior's variance (inf:
#: flat), ``beta``, the discount, the last plan's bonus scale.
TPRIOR, PRIOR_VAR, BETA, DISCOUNT, SCALE = range(5)
#: Policy iteration's iteration limit.
MAX_ITER = 1_000


class CountBonusState(NamedTuple):
    """The posterior's ``counts``, ``sums`` and ``next_counts`` (the agent's
    :class:`~optplan.posteriors.LayeredPosterior` arrays themselves), the per-pair noise
    ``sd``, the action mask, the policy, the posterior-mean model with the bonus
    (:class:`optplan.agents._mean_model_kernels.Model`), the plan's scratch; ``params`` and
    ``flags`` (:data:`TPRIOR` ..., :data:`STEPS` ...)."""

    counts: np.ndarray
    sums: np.ndarray
    next_counts: np.ndarray
    sd: np.ndarray
    mask: np.ndarray
    policy: np.ndarray
    model: MK.Model
    scratch: MK.K.Scratch
    params: np.ndarray
    flags: np.ndarray


def new_state(agent) -> CountBonusState:
    """The state of a continuing agent just reset (its posterior's arrays, not copies)."""
    MK._compiled()  # the plan's compiled functions, bound before a step compiles
    post = agent.posterior
    S = agent.n_states
    prior_var = np.inf if agent.prior_var is None else float(agent.prior_var)
    flags = np.zeros(8, dtype=np.int64)
    flags[EVERY], flags[IMPROPER], flags[KNOWN] = agent.update_every, post.improper, agent.known
    params = np.array([post.transition_prior, prior_var, agent.beta, agent.discount, 0.0])
    return CountBonusState(
        counts=post.counts, sums=post.reward_sums, next_counts=post.next_counts,
        sd=np.array(agent._sd, dtype=float, order="C"),
        mask=np.array(agent.action_mask, dtype=bool, order="C"),
        policy=np.zeros(S, dtype=np.int64), model=MK.new_model(agent, agent.bonus),
        scratch=MK.K.scratch(S), params=params, flags=flags,
    )  # fmt: skip


@njit(inline="always")
def plan_now(s):  # pragma: no cover - compiled by numba
    """A plan at scale ``beta log(steps + 1)``: the posterior-mean model, the bonus and policy
    iteration warm-started from the last policy. ``True`` when it failed (status in
    ``flags``)."""
    f, p = s.flags, s.params
    scale = p[BETA] * math.log(f[STEPS] + 1)
    f[PLANS] += 1
    post = (s.counts, s.sums, s.next_counts, p[TPRIOR], s.sd, p[PRIOR_VAR], f[IMPROPER] == 1)
    status, its, _, _ = MK._plan(post, f[KNOWN] == 1, s.mask, scale, p[DISCOUNT], s.policy,
                                 f[PLANNED] == 1, s.model, s.scratch, MAX_ITER)  # fmt: skip
    f[STATUS], f[ITERATIONS] = status, its
    f[PLANNED] = 1
    p[SCALE] = scale
    return status != MK.K.OK


@njit(inline="always")
def act(s, x, rng):  # pragma: no cover - compiled by numba
    """The plan's greedy action."""
    return s.policy[x]


@njit(inline="always")
def counted(s, x, a, r, y):  # pragma: no cover - compiled by numba
    """Count the transition into the posterior's arrays (:meth:`LayeredPosterior.update
    <optplan.posteriors.LayeredPosterior.update>`) and the step into ``flags``; whether a plan
    is due (every ``update_every`` steps). The UBE's steps count alike."""
    f = s.flags
    s.counts[x, a] += 1.0
    s.sums[x, a] += r
    s.next_counts[x, a, y] += 1.0
    f[STEPS] += 1
    return f[STEPS] % f[EVERY] == 0


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """:func:`counted`; when a plan is due, :func:`plan_now`."""
    return counted(s, x, a, r, y) and plan_now(s)


@njit
def run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(act, observe, s, env, steps, env_rng, agent_rng)
