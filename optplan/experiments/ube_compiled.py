r"""The compiled run of the continuing UBE of Eq. 3 (:class:`~optplan.agents.UBE` with
``n_layers=None``): Thompson actions, steps, posterior updates and plans in one compiled loop,
with the generic loop's results **exactly**, for every ``update_every`` (1 included).

The agent keeps a Gaussian posterior per pair (:class:`~optplan.posteriors.LayeredPosterior`):
each step is recorded into its counts, reward sums and next-state counts as
:meth:`LayeredPosterior.update <optplan.posteriors.LayeredPosterior.update>` records it, and
every ``update_every`` steps its plan is :func:`optplan.agents._ube_kernels._mean_plan`, the
compiled function its own ``plan()`` calls (:func:`_run_mean`); a plan that fails there is
redone by its NumPy plan (raising its error, or planning as the generic loop's ``plan()``
would). ``tests/test_engines_exact_ube_class.py`` compares it with the generic loop.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _jit
from ..agents import UBE
from ..agents import _ube_kernels as UK
from ..agents._mean_model import MeanModelAgent
from . import _segment_kernels as SK
from ._engine_env import (
    _arrays,
    _env_reason,
    compiled_oracle_run,  # noqa: F401  (the engine's oracle run, same environments)
    finish_run,
)
from ._segment_kernels import _reward, _search_right, _thompson

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "CHUNK", "AGENT_CLASSES"]

#: The agents this engine runs (subclasses take the generic loop; UBE continuing only).
AGENT_CLASSES = (UBE,)

#: Steps per compiled call.
CHUNK = 8192

DONE, INADMISSIBLE, FAILED = 0, 1, 2

#: The kernels of the UBE of Eq. 3's run (:func:`_run_mean`): a collection of their own, as
#: :func:`optplan.agents._ube_kernels.mean_plan`'s.
_MEAN_JIT = _jit.Jit(
    "the compiled UBE run (Gaussian rewards)",
    uses=(UK._MEAN_JIT, SK._JIT),
    cache=True,
    error_model="numpy",
)


@_MEAN_JIT
def _run_mean(n, state, true_mask, cdf, rmean, rsd, env_rng, agent_rng, steps, update_every,
              counts, sums, next_counts, tprior, sdr, prior_var, improper, known, mask, forced,
              zeta, discount, rule, coef, g2, policy, old, qm, mean, var, P, bonus, R, q,
              values, M, b, row, new, ints, ipiv, nu, u, sqrt_u, v, w, max_iter, states,
              actions, rewards, offset):  # fmt: skip  # pragma: no cover - compiled by numba
    """Up to ``n`` steps of the UBE of Eq. 3 from ``state`` (``steps`` taken before).
    Returns ``(status, steps played, state, action, steps taken, plans)``; ``qm`` is ``q``
    with inadmissible actions ``-inf``, ``sqrt_u`` the noise sd; ``old`` the policy before
    the last plan."""
    S, A = qm.shape
    plans = 0
    for i in range(n):
        x = state
        a = _thompson(x, forced, policy, qm, zeta, sqrt_u, agent_rng)
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a, steps, plans
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
            plans += 1
            for s in range(S):
                old[s] = policy[s]
            status = UK._mean_plan(
                counts, sums, next_counts, tprior, sdr, prior_var, improper, known, mask,
                discount, rule, coef, g2, policy, True, mean, var, P, bonus, R, q, values, M, b,
                row, new, ints, ipiv, nu, u, sqrt_u, v, w, max_iter,
            )  # fmt: skip
            if status != UK.OK:
                return FAILED, i + 1, state, a, steps, plans
            for s in range(S):
                for c in range(A):
                    qm[s, c] = q[s, c] if mask[s, c] else -math.inf
    return DONE, n, state, -1, steps, plans


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    if type(agent) not in AGENT_CLASSES:
        names = ", ".join(c.__name__ for c in AGENT_CLASSES)
        return f"{type(agent).__name__} is not one of {names} (subclasses take the generic loop)"
    if agent.n_layers is not None:
        return "the UBE agent is episodic (this engine runs continuing ones)"
    if agent.method != "fast":
        return f'method={agent.method!r} (only "fast" is compiled)'
    if agent.n_states >= UK.MAX_STATES:
        return f"{agent.n_states} states: the agent plans in NumPy from {UK.MAX_STATES} on"
    if track:
        return "tracked runs take the generic loop"
    reason = _env_reason(env)
    if reason is not None:
        return reason
    if episodes is not None:
        return "the run counts episodes (give steps=)"
    if not UK.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not (SK.self_check() and UK.available(agent.n_states)):
        return "numba's random draws or BLAS / LAPACK routes differ from numpy's here"
    if not UK.mean_applies(agent):
        return (
            "the UBE agent plans in NumPy (deterministic transition prior, exact rewards under "
            "a proper prior, or numpy's BLAS not bound)"
        )
    return None


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None):
    """Fill ``record`` with ``steps`` steps; the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    work = agent._work
    cdf, true_mask, rmean, rsd = _arrays(env)
    post = agent.posterior
    forced = np.ascontiguousarray(agent._forced, dtype=np.int64)
    discount = float(agent.discount)
    policy, qm = _follow_mean(agent)
    old = policy.copy()
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    chunk = min(CHUNK, steps) if steps else 0
    taken = int(agent.steps)
    done, status, action, compiled_last = 0, DONE, -1, False
    fn = _mean_compiled()["_run_mean"]
    while done < steps and status in (DONE, FAILED):
        n = min(chunk, steps - done)
        out = fn(
            n, int(state), true_mask, cdf, rmean, rsd, env.np_random, agent.rng, taken,
            agent.update_every, post.counts, post.reward_sums, post.next_counts,
            float(post.transition_prior), work.sd, work.prior_var, post.improper, agent.known,
            work.mask, forced, float(agent.zeta), discount, int(work.rule), float(work.coef),
            discount**2, policy, old, qm, *work.args(agent), UK.MAX_ITER, states, actions,
            rewards, done,
        )  # fmt: skip
        status, played, state, action, taken, plans = out
        agent.plans += plans
        agent.steps = taken
        done += played
        if plans:
            compiled_last = True
        if status == FAILED:  # the NumPy plan redoes it: its error, or its plan
            compiled_last = False
            agent.plans -= 1  # counted again by the NumPy plan
            agent.policy, agent._planned = old.copy(), True
            MeanModelAgent.plan(agent)
            policy, qm = _follow_mean(agent)
        if bar is not None:
            bar.update(done - bar.n)
    if compiled_last:
        agent._from_work(policy.copy())
    finish_run(record, env, states, actions, rewards, done, state, action,
               status == INADMISSIBLE, start)  # fmt: skip
    return record


def _follow_mean(agent) -> tuple:
    """:func:`_follow` of the UBE of Eq. 3: its noise sd is ``sqrt(u)``."""
    policy = np.array(agent.policy, dtype=np.int64)
    qm = np.array(agent.q, dtype=float)
    agent._work.sqrt_u[...] = agent._sqrt_u
    return policy, qm


def _mean_compiled() -> dict:
    return _MEAN_JIT.table or _MEAN_JIT.compiled()
