r"""The compiled steps of the continuing :class:`~optplan.agents.UBE` (uncertainty-bellman-
equation Eq. 3): its state tuple :class:`UBEState`, the Thompson action
(:func:`optplan.agents._posterior_agent.thompson_act`: ``argmax_b Qbar_xb + zeta eps_b
sqrt(u_xb)``), :func:`observe` (the posterior's counts, and every ``update_every`` steps the plan
:func:`plan_now`, the compiled plan of :func:`optplan.agents._ube_kernels._mean_plan`) and the
loop :func:`run`. A plan the compiled code cannot finish is redone by the agent's NumPy plan
between compiled calls."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._jit import njit
from ..envs.kernels import play
from . import _mean_model_kernels as MK
from . import _ube_kernels as UK
from ._count_bonus_steps import counted
from ._posterior_agent import thompson_act

__all__ = ["UBEState", "new_state", "observe", "plan_now", "run"]

#: ``flags`` entries (the first two as :mod:`optplan.agents._count_bonus_steps`', whose
#: :func:`~optplan.agents._count_bonus_steps.counted` counts the steps): steps taken,
#: ``update_every``, flat reward prior, known transitions,
#: planned once, plans made, the last plan's status, the local rule, policy iteration's
#: iteration limit (:data:`optplan.agents._ube_kernels.MAX_ITER` when the agent was reset).
STEPS, EVERY, IMPROPER, KNOWN, PLANNED, PLANS, STATUS, RULE, MAX_ITER = range(9)
#: ``params`` entries: the transition prior's pseudo-count, the reward prior's variance (inf:
#: flat), the discount, ``zeta`` (read by ``thompson_act``), the local rule's coefficient.
TPRIOR, PRIOR_VAR, DISCOUNT, ZETA, COEF = range(5)


class UBEState(NamedTuple):
    """The posterior's ``counts``, ``sums`` and ``next_counts`` (the agent's posterior arrays
    themselves), the reward noise ``sdr``, the mask, the single admissible action of each
    state (``forced``, -1 where there is a choice), the policy and the one before the last plan
    (``old``), ``qm`` (``q`` with inadmissible actions ``-inf``), the posterior-mean model
    (:class:`optplan.agents._mean_model_kernels.Model`, its bonus unused), policy iteration's
    scratch, the plan's arrays (``nu``, ``u``, ``sd = sqrt(u)``, scratch ``v``, ``w``);
    ``params``, ``flags``."""

    counts: np.ndarray
    sums: np.ndarray
    next_counts: np.ndarray
    sdr: np.ndarray
    mask: np.ndarray
    forced: np.ndarray
    policy: np.ndarray
    old: np.ndarray
    qm: np.ndarray
    model: MK.Model
    scratch: MK.K.Scratch
    nu: np.ndarray
    u: np.ndarray
    sd: np.ndarray
    v: np.ndarray
    w: np.ndarray
    params: np.ndarray
    flags: np.ndarray


def new_state(agent, rule: tuple) -> UBEState:
    """The state of a continuing agent just reset (its posterior's arrays, not copies); ``rule``
    is :func:`optplan.agents._ube_kernels.mean_rule`'s."""
    UK._mean_compiled()  # the plan's compiled functions, bound before a step compiles
    post = agent.posterior
    S, A = agent.n_states, agent.n_actions
    flags = np.zeros(9, dtype=np.int64)
    flags[EVERY], flags[IMPROPER], flags[KNOWN] = agent.update_every, post.improper, agent.known
    flags[RULE], flags[MAX_ITER] = rule[0], UK.MAX_ITER
    prior_var = np.inf if agent.prior_var is None else float(agent.prior_var)
    params = np.array([post.transition_prior, prior_var, agent.discount, agent.zeta, rule[1]])
    return UBEState(
        counts=post.counts, sums=post.reward_sums, next_counts=post.next_counts,
        sdr=np.ascontiguousarray(agent._sd, dtype=np.float64),
        mask=np.ascontiguousarray(agent.action_mask, dtype=np.bool_),
        forced=np.array(agent._forced, dtype=np.int64), policy=np.zeros(S, dtype=np.int64),
        old=np.zeros(S, dtype=np.int64), qm=np.zeros((S, A)),
        model=MK.new_model(agent, np.zeros((S, A))), scratch=MK.K.scratch(S),
        nu=np.zeros((S, A)), u=np.zeros((S, A)), sd=np.zeros((S, A)), v=np.zeros(S),
        w=np.zeros((S, A)), params=params, flags=flags,
    )  # fmt: skip


@njit(inline="always")
def plan_now(s):  # pragma: no cover - compiled by numba
    """A plan: the posterior-mean model, policy iteration warm-started from the last policy
    (kept in ``old``), ``nu``, ``u`` and ``sd``. ``True`` when it failed (status in
    ``flags``; the NumPy plan redoes it)."""
    f, p = s.flags, s.params
    f[PLANS] += 1
    S, A = s.qm.shape
    for x in range(S):
        s.old[x] = s.policy[x]
    post = (s.counts, s.sums, s.next_counts, p[TPRIOR], s.sdr, p[PRIOR_VAR], f[IMPROPER] == 1)
    status = UK._mean_plan(
        post, f[KNOWN] == 1, s.mask, p[DISCOUNT], f[RULE], p[COEF], s.policy, f[PLANNED] == 1,
        s.model, (s.nu, s.u, s.sd, s.v, s.w), s.scratch, f[MAX_ITER],
    )  # fmt: skip
    f[STATUS] = status
    if status != UK.OK:
        return True
    f[PLANNED] = 1
    for x in range(S):
        for c in range(A):
            s.qm[x, c] = s.model.q[x, c] if s.mask[x, c] else -math.inf
    return False


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Count the transition (the count-bonus agent's :func:`~optplan.agents._count_bonus_steps.
    counted`); every ``update_every`` steps, :func:`plan_now`."""
    return counted(s, x, a, r, y) and plan_now(s)


@njit
def run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(thompson_act, observe, s, env, steps, env_rng, agent_rng)
