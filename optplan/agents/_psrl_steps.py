r"""The compiled steps of :class:`~optplan.agents.ContinuingPSRL`: its state tuple
:class:`PSRLState`, the greedy action :func:`psrl_act`, :func:`psrl_observe` (the batch buffer,
the batch update and :func:`psrl_plan_now`, the compiled plan of
:mod:`optplan.agents._psrl_kernels`) and the loop :func:`psrl_run`; :func:`plan_failure` words a
failed plan's error."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jit import njit
from ..envs.kernels import play
from . import _psrl_kernels as K
from ._posterior_agent import (
    AVERAGE,
    CLASSES,
    DUE,
    ITERATIONS,
    MAX_ITER,
    PLANNED,
    PLANS,
    PYTHON_PLAN,
    STATUS,
    TRACK,
    VERSION,
    absorb,
    buffered,
)

__all__ = ["PSRLState", "psrl_act", "psrl_observe", "psrl_plan_now", "psrl_run", "plan_failure"]


class PSRLState(NamedTuple):
    """The whole state of :class:`ContinuingPSRL`: the Dirichlet's ``alpha`` and the
    Normal-Gamma's ``mu0, lam, nalpha, nbeta`` (each ``(S, A, S)``); zeroed batch statistics
    ``cnt, sums, sq``; the batch buffer; the action mask; the policy (and room for the last
    one, ``old``); the last sampled model
    ``P, mu``, its ``R``, ``q``, values and the plan's scratch
    (:class:`optplan.agents._psrl_kernels.Work`); ``params = [discount]`` (1 for average
    reward); ``flags`` (:data:`optplan.agents._posterior_agent.FLAGS`)."""

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
    policy: np.ndarray
    old: np.ndarray
    P: np.ndarray
    mu: np.ndarray
    R: np.ndarray
    q: np.ndarray
    values: np.ndarray
    scratch: K.Scratch
    params: np.ndarray
    flags: np.ndarray


@njit
def psrl_plan_now(s, rng):  # pragma: no cover - compiled by numba
    """A plan: draw ``(P, mu)``, ``R = sum_s' P mu``, policy iteration warm-started from the
    last policy (:func:`optplan.agents._psrl_kernels._plan`). ``True`` when Python must act: a
    large model's plan is due, the plan failed, or (tracked runs) the policy changed."""
    f = s.flags
    f[PLANS] += 1
    if f[PYTHON_PLAN]:
        f[DUE] = 1
        return True
    S = s.policy.shape[0]
    changed = f[PLANNED] == 0
    old = s.old
    for x in range(S):
        old[x] = s.policy[x]
    status, its, classes, _ = K._plan(
        rng, (s.alpha, s.mu0, s.lam, s.nalpha, s.nbeta), s.mask, s.params[0], f[AVERAGE] == 1,
        s.policy, f[PLANNED] == 1, (s.P, s.mu, s.R, s.q, s.values), s.scratch, f[MAX_ITER],
    )  # fmt: skip
    f[STATUS], f[ITERATIONS], f[CLASSES] = status, its, classes
    if status != K.OK:
        return True
    for x in range(S):
        if s.policy[x] != old[x]:
            changed = True
    f[PLANNED] = 1
    if changed:
        f[VERSION] += 1
    return changed and f[TRACK] == 1


@njit(inline="always")
def psrl_act(s, x, rng):  # pragma: no cover - compiled by numba
    """The sampled model's greedy action."""
    return s.policy[x]


@njit(inline="always")
def psrl_observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Buffer the transition; every ``update_every`` steps, :func:`absorb` and
    :func:`psrl_plan_now`."""
    if not buffered(s, x, a, r, y):
        return False
    absorb(s)
    return psrl_plan_now(s, rng)


@njit
def psrl_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(psrl_act, psrl_observe, s, env, steps, env_rng, agent_rng)


def plan_failure(status: int, iterations: int, classes: int) -> str:
    """The error of a compiled plan that did not end ``optimal``, worded as
    :meth:`PosteriorAgent._optimal <optplan.agents._posterior_agent.PosteriorAgent._optimal>`
    words the NumPy plan's."""
    if status == K.MULTICHAIN:
        what = (
            f"'multichain': policy iteration met a policy with {classes} recurrent classes at "
            f"iteration {iterations}"
        )
    elif status == K.MAX_ITER:
        what = f"'max_iter': policy iteration did not stop in {iterations} iterations"
    else:
        what = (
            f"'numerical_error': policy iteration, iteration {iterations}: the policy's values "
            "cannot be computed in double precision (the linear system is singular or its "
            "solution overflows)"
        )
    return f"policy iteration on the sampled model ended {what}"
