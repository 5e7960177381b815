r"""The compiled run of the continuing count-bonus agent (:class:`~optplan.agents.CountBonus`
with ``n_layers=None``): steps, posterior updates and plans in one compiled loop, with the
generic loop's results **exactly**, for every ``update_every``.

Each step is :mod:`._segment_kernels`' (the environment's transition and reward drawn on its
generator as :meth:`optplan.envs.TabularEnv.step` draws them) and the update of
:meth:`LayeredPosterior.update <optplan.posteriors.LayeredPosterior.update>` (count, reward sum,
next-state count); every ``update_every`` steps the plan at scale ``beta log(t)`` is
:mod:`optplan.agents._mean_model_kernels`' compiled function, the one the agent's own
``plan()`` calls. The run is played in chunks of :data:`CHUNK` steps (the progress bar is
updated between them); at the end the agent holds what the generic loop leaves it (posterior,
posterior-mean model, bonus, policy, ``q``, scale, counters).

Tracked runs and runs counted in episodes take the generic loop.
``tests/test_engines_exact_mean_model.py`` compares it with the generic loop.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _jit
from ..agents import _mean_model_kernels as MK
from ..agents.ube import CountBonus
from ..dp import masked
from . import _segment_kernels as SK
from ._engine_env import (
    _arrays,
    _env_reason,
    compiled_oracle_run,  # noqa: F401  (the engine's oracle run, same environments)
    finish_run,
)
from ._segment_kernels import _reward, _search_right

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "CHUNK"]

#: Steps per compiled call.
CHUNK = 8192

DONE, INADMISSIBLE, FAILED = 0, 1, 2

_JIT = _jit.Jit(
    "the compiled count-bonus run", uses=(MK._JIT, SK._JIT), cache=True, error_model="numpy"
)


@_JIT
def _run(n, state, true_mask, cdf, rmean, rsd, env_rng, steps, update_every, beta, counts,
         sums, next_counts, tprior, sd, prior_var, improper, known, mask, discount, policy,
         mean, var, P, bonus, R, q, values, M, b, row, new, ints, ipiv, max_iter, states,
         actions, rewards, offset):  # fmt: skip  # pragma: no cover - compiled by numba
    """Up to ``n`` steps from ``state`` (``steps`` taken before). Returns ``(status, steps
    played, state, action, steps taken, plans, last scale, plan status, iterations)``."""
    plans = 0
    scale = math.nan
    for i in range(n):
        x = state
        a = policy[x]
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a, steps, plans, scale, 0, 0
        y = _search_right(cdf[x, a], env_rng.random())
        r = _reward(rmean, rsd, x, a, y, env_rng)
        states[offset + i] = x
        actions[offset + i] = a
        rewards[offset + i] = r
        counts[x, a] += 1.0
        sums[x, a] += r
        next_counts[x, a, y] += 1.0
        steps += 1
        state = y
        if steps % update_every == 0:
            scale = beta * math.log(steps + 1)
            plans += 1
            status, its, _, _ = MK._plan(
                counts, sums, next_counts, tprior, sd, prior_var, improper, known, mask, scale,
                discount, policy, True, mean, var, P, bonus, R, q, values, M, b, row, new, ints,
                ipiv, max_iter,
            )  # fmt: skip
            if status != MK.K.OK:
                return FAILED, i + 1, state, a, steps, plans, scale, status, its
    return DONE, n, state, -1, steps, plans, scale, 0, 0


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    if type(agent) is not CountBonus:
        return f"{type(agent).__name__} is not one of CountBonus (subclasses take the generic loop)"
    if agent.n_layers is not None:
        return "the count-bonus agent is episodic (this engine runs continuing ones)"
    reason = _env_reason(env)
    if reason is not None:
        return reason
    if episodes is not None:
        return "the run counts episodes (give steps=)"
    if track:
        return "the run tracks the agent's policies"
    if not MK.applies(agent):
        return (
            "the agent plans in NumPy (deterministic transition prior, exact rewards under a "
            f"proper prior, or {MK.K.MAX_STATES} states or more)"
        )
    if not SK.self_check():
        return "numba's random draws differ from numpy's here"
    return None


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None):
    """Fill ``record`` with ``steps`` steps; the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    work = agent._work
    cdf, true_mask, rmean, rsd = _arrays(env)
    post = agent.posterior
    P = agent.P if work.P is None else work.P
    policy = np.array(agent.policy, dtype=np.int64)
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    chunk = min(CHUNK, steps) if steps else 0
    done, status, action, planned, scale = 0, DONE, -1, False, math.nan
    taken = int(agent.steps)
    plan_status = iterations = 0
    fn = _compiled()["_run"]
    while done < steps and status == DONE:
        n = min(chunk, steps - done)
        out = fn(
            n, int(state), true_mask, cdf, rmean, rsd, env.np_random, taken,
            agent.update_every, float(agent.beta), post.counts, post.reward_sums,
            post.next_counts, float(post.transition_prior), work.sd, work.prior_var,
            post.improper, agent.known, work.mask, float(agent.discount), policy, agent.mean,
            agent.var, P, agent.bonus, *work.tail(), 1_000, states, actions, rewards, done,
        )  # fmt: skip
        status, played, state, action, taken, plans, last, plan_status, iterations = out
        agent.plans += plans
        if plans:
            planned, scale = True, last
        done += played
        if bar is not None:
            bar.update(done - bar.n)
    agent.steps = taken
    if planned:
        agent.policy = policy
        agent.q = masked(work.q, agent.action_mask)
        agent._scale = scale
    failure = None
    if status == FAILED:  # pragma: no cover - discounted PI always stops
        failure = (
            f"policy iteration on the posterior-mean model: status {plan_status} after "
            f"{iterations} iterations"
        )
    finish_run(record, env, states, actions, rewards, done, state, action,
               status == INADMISSIBLE, start, failure)  # fmt: skip
    return record


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
