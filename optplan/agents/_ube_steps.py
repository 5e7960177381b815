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
    (``old``), ``qm`` (``q`` with inadmissible actions ``-inf``), the posterior-mean model,
    the plan's arrays (``nu``, ``u``, ``sd = sqrt(u)``) and scratch; ``params``, ``flags``."""

    counts: np.ndarray
    sums: np.ndarray
    next_counts: np.ndarray
    sdr: np.ndarray
    mask: np.ndarray
    forced: np.ndarray
    policy: np.ndarray
    old: np.ndarray
    qm: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    P: np.ndarray
    bonus: np.ndarray
    R: np.ndarray
    q: np.ndarray
    values: np.ndarray
    M: np.ndarray
    b: np.ndarray
    row: np.ndarray
    new: np.ndarray
    ints: np.ndarray
    ipiv: np.ndarray
    nu: np.ndarray
    u: np.ndarray
    sd: np.ndarray
    v: np.ndarray
    w: np.ndarray
    params: np.ndarray
    flags: np.ndarray


def new_state(agent, work) -> UBEState:
    """The state of a continuing agent just reset: its posterior's arrays and ``work``'s
    (:class:`optplan.agents._ube_kernels.MeanWork`), not copies."""
    UK._mean_compiled()  # the plan's compiled functions, bound before a step compiles
    post = agent.posterior
    S, A = agent.n_states, agent.n_actions
    flags = np.zeros(9, dtype=np.int64)
    flags[EVERY], flags[IMPROPER], flags[KNOWN] = agent.update_every, post.improper, agent.known
    flags[RULE], flags[MAX_ITER] = work.rule, UK.MAX_ITER
    params = np.array([post.transition_prior, work.prior_var, agent.discount, agent.zeta,
                       work.coef])  # fmt: skip
    mean, var, P, bonus, R, q, values, M, b, row, new, ints, ipiv, nu, u, sd, v, w = work.args(
        agent
    )
    return UBEState(
        counts=post.counts, sums=post.reward_sums, next_counts=post.next_counts, sdr=work.sd,
        mask=work.mask, forced=np.array(agent._forced, dtype=np.int64),
        policy=np.zeros(S, dtype=np.int64), old=np.zeros(S, dtype=np.int64),
        qm=np.zeros((S, A)), mean=mean, var=var, P=P, bonus=bonus, R=R, q=q, values=values,
        M=M, b=b, row=row, new=new, ints=ints, ipiv=ipiv, nu=nu, u=u, sd=sd, v=v, w=w,
        params=params, flags=flags,
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
    g = p[DISCOUNT]
    status = UK._mean_plan(
        s.counts, s.sums, s.next_counts, p[TPRIOR], s.sdr, p[PRIOR_VAR], f[IMPROPER] == 1,
        f[KNOWN] == 1, s.mask, g, f[RULE], p[COEF], g * g, s.policy, f[PLANNED] == 1, s.mean,
        s.var, s.P, s.bonus, s.R, s.q, s.values, s.M, s.b, s.row, s.new, s.ints, s.ipiv, s.nu,
        s.u, s.sd, s.v, s.w, f[MAX_ITER],
    )  # fmt: skip
    f[STATUS] = status
    if status != UK.OK:
        return True
    f[PLANNED] = 1
    for x in range(S):
        for c in range(A):
            s.qm[x, c] = s.q[x, c] if s.mask[x, c] else -math.inf
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
