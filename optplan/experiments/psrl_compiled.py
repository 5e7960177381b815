r"""The compiled run of continuing PSRL (:class:`~optplan.agents.ContinuingPSRL`): steps,
batch updates and plans in one compiled loop, with the generic loop's results **exactly**,
for every ``update_every`` (1 included).

Each step is :mod:`._segment_kernels`' (the environment's transition and reward drawn on its
generator as :meth:`optplan.envs.TabularEnv.step` draws them); every ``update_every`` steps
the batch is folded into the posterior arrays as :meth:`PosteriorAgent.absorb
<optplan.agents._posterior_agent.PosteriorAgent.absorb>` folds it (the batch's counts, sums
and sums of squares added in order from zero, then the Normal-Gamma update's operations on the
entries the batch touched: the others are unchanged bit for bit), and the plan is
:func:`optplan.agents._psrl_kernels.plan`'s compiled function, the one the agent's own
``plan()`` calls. The run is played in chunks of :data:`CHUNK` steps (the progress bar and the
tracked policies are updated between them); at the end the agent holds what the generic loop
leaves it (posterior, batch buffer, last model, policy, ``q``, counters).

It is the first row of :data:`optplan.experiments.engines.RUN_ENGINES`'s planning rows; where
it does not apply (the agent plans in NumPy: no numba, ``MAX_STATES`` states or more) the
steps-between-plans engine (:mod:`.planning_compiled`) may. ``tests/test_psrl_compiled.py``
compares it with the generic loop.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _jit
from ..agents import ContinuingPSRL
from ..agents import _psrl_kernels as K
from ..agents.psrl import plan_failure
from ..dp import masked
from ..posteriors import Dirichlet, NormalGamma
from . import _segment_kernels as SK
from ._segment_kernels import _reward, _search_right
from .planning_compiled import (
    _arrays,
    _env_reason,
    compiled_oracle_run,  # noqa: F401  (the engine's oracle run, same environments)
    finish_run,
)

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "TRACKS", "CHUNK"]

#: :func:`compiled_loop` records the agent's policies when asked (``track``).
TRACKS = True
#: Steps per compiled call.
CHUNK = 8192

DONE, INADMISSIBLE, FAILED = 0, 1, 2

_JIT = _jit.Jit("the compiled PSRL run", uses=(K._JIT, SK._JIT), cache=True, error_model="numpy")


@_JIT(inline="always")
def _step(x, a, cdf, rmean, rsd, env_rng, states, actions, rewards, at, buf_s, buf_a, buf_r,
          buf_s2, pending):  # fmt: skip  # pragma: no cover - compiled by numba
    """One environment step from ``x`` by ``a``: recorded at ``at`` and buffered at
    ``pending`` for the next batch update; returns the next state."""
    y = _search_right(cdf[x, a], env_rng.random())
    r = _reward(rmean, rsd, x, a, y, env_rng)
    states[at] = x
    actions[at] = a
    rewards[at] = r
    buf_s[pending] = x
    buf_a[pending] = a
    buf_r[pending] = r
    buf_s2[pending] = y
    return y


@_JIT
def _absorb(k, buf_s, buf_a, buf_r, buf_s2, cnt, sums, sq, dalpha, mu0, lam, nalpha, nbeta,
            public):  # fmt: skip  # pragma: no cover - compiled by numba
    """Fold the ``k`` buffered transitions into the posterior arrays in place (``cnt``,
    ``sums``, ``sq``: zeros on entry and on exit)."""
    for i in range(k):
        x, a, y, r = buf_s[i], buf_a[i], buf_s2[i], buf_r[i]
        cnt[x, a, y] += 1.0
        sums[x, a, y] += r
        sq[x, a, y] += r * r
    for i in range(k):
        x, a, y = buf_s[i], buf_a[i], buf_s2[i]
        n = cnt[x, a, y]
        if n == 0.0:  # done at an earlier repeat of this entry
            continue
        total = sums[x, a, y]
        rbar = total / n
        if public:
            spread = (n - 1.0) * total * rbar
        else:
            spread = sq[x, a, y] - total * rbar
            if not spread >= 0.0:  # np.maximum(., 0): NaN stays NaN
                spread = spread if math.isnan(spread) else 0.0
        l0, m0 = lam[x, a, y], mu0[x, a, y]
        lam_n = l0 + n
        d = rbar - m0
        nbeta[x, a, y] = nbeta[x, a, y] + 0.5 * spread + l0 * n * (d * d) / (2.0 * lam_n)
        mu0[x, a, y] = (l0 * m0 + total) / lam_n
        lam[x, a, y] = lam_n
        nalpha[x, a, y] = nalpha[x, a, y] + 0.5 * n
        dalpha[x, a, y] = dalpha[x, a, y] + n
        cnt[x, a, y] = 0.0
        sums[x, a, y] = 0.0
        sq[x, a, y] = 0.0


@_JIT
def _run(n, state, true_mask, cdf, rmean, rsd, env_rng, agent_rng, update_every, pending,
         buf_s, buf_a, buf_r, buf_s2, cnt, sums, sq, dalpha, mu0, lam, nalpha, nbeta, public,
         mask, discount, average, policy, P, mu, R, q, values, M, b, row, new, reach, stack,
         max_iter, states, actions, rewards, offset, track, tracked, version, hist,
         pidx):  # fmt: skip  # pragma: no cover - compiled by numba
    """Up to ``n`` steps from ``state``. Returns ``(status, steps played, state, action,
    pending, version, tracked, plans, new policies recorded, plan status, iterations,
    classes)``."""
    S = policy.shape[0]
    plans = 0
    n_new = 0
    old = np.empty(S, dtype=np.int64)
    for i in range(n):
        if track:
            if version != tracked:
                tracked = version
                for s in range(S):
                    hist[n_new, s] = policy[s]
                n_new += 1
            pidx[i] = n_new - 1
        x = state
        a = policy[x]
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a, pending, version, tracked, plans, n_new, 0, 0, 0
        y = _step(x, a, cdf, rmean, rsd, env_rng, states, actions, rewards, offset + i,
                  buf_s, buf_a, buf_r, buf_s2, pending)  # fmt: skip
        pending += 1
        state = y
        if pending == update_every:
            _absorb(pending, buf_s, buf_a, buf_r, buf_s2, cnt, sums, sq, dalpha, mu0, lam,
                    nalpha, nbeta, public)  # fmt: skip
            pending = 0
            plans += 1
            for s in range(S):
                old[s] = policy[s]  # the incumbent, to compare with the plan's
            status, its, classes, _ = K._plan(
                agent_rng, dalpha, mu0, lam, nalpha, nbeta, mask, discount, average, policy,
                True, P, mu, R, q, values, M, b, row, new, reach, stack, max_iter,
            )  # fmt: skip
            if status != K.OK:
                return FAILED, i + 1, state, a, pending, version, tracked, plans, n_new, \
                    status, its, classes  # fmt: skip
            for s in range(S):
                if policy[s] != old[s]:
                    version += 1
                    break
    return DONE, n, state, -1, pending, version, tracked, plans, n_new, 0, 0, 0


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    if type(agent) is not ContinuingPSRL:
        return (
            f"{type(agent).__name__} is not one of ContinuingPSRL (subclasses take the generic "
            "loop)"
        )
    if agent.n_states >= K.MAX_STATES:
        return f"{agent.n_states} states: continuing PSRL plans in NumPy from {K.MAX_STATES} on"
    reason = _env_reason(env)
    if reason is not None:
        return reason
    if episodes is not None:
        return "the run counts episodes (give steps=)"
    if not K.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not (SK.self_check() and K.self_check()):
        return "numba's random draws or BLAS / LAPACK routes differ from numpy's here"
    return None


def posterior_arrays(agent) -> tuple:
    """A continuing posterior agent's state as writable arrays for a compiled run: the
    Dirichlet's ``alpha``, the Normal-Gamma's ``(mu0, lam, alpha, beta)``, whether its batch
    update is the public code's, zeroed batch statistics ``(counts, sums, squares)`` (each
    ``(S, A, S)``) and the action mask."""
    S, A = agent.n_states, agent.n_actions
    t, r = agent.transitions, agent.rewards
    dalpha = np.array(t.alpha)
    mu0, lam, nalpha, nbeta = (np.array(x) for x in r.params)
    public = r.sum_of_squares == "public-code"
    cnt, sums, sq = np.zeros((S, A, S)), np.zeros((S, A, S)), np.zeros((S, A, S))
    mask = np.ascontiguousarray(agent.action_mask, dtype=np.bool_)
    return dalpha, mu0, lam, nalpha, nbeta, public, cnt, sums, sq, mask


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None,
                  track: bool = False):  # fmt: skip
    """Fill ``record`` with ``steps`` steps; the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    work = agent._work
    cdf, true_mask, rmean, rsd = _arrays(env)
    S, A = agent.n_states, agent.n_actions
    dalpha, mu0, lam, nalpha, nbeta, public, cnt, sums, sq, mask = posterior_arrays(agent)
    average = agent.discount is None
    discount = 1.0 if average else float(agent.discount)
    policy = np.array(agent.policy, dtype=np.int64)
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    chunk = min(CHUNK, steps) if steps else 0
    hist = np.empty((chunk + 1 if track else 0, S), dtype=np.int64)
    pidx = np.empty(chunk if track else 0, dtype=np.int64)
    version, tracked = int(agent.policy_version), -1
    pending = int(agent._pending)
    done, status, action, planned = 0, DONE, -1, False
    fn = _compiled()["_run"]
    while done < steps and status == DONE:
        n = min(chunk, steps - done)
        out = fn(
            n, int(state), true_mask, cdf, rmean, rsd, env.np_random, agent.rng,
            agent.update_every, pending, agent._buf_s, agent._buf_a, agent._buf_r,
            agent._buf_s2, cnt, sums, sq, dalpha, mu0, lam, nalpha, nbeta, public, mask,
            discount, average, policy, *work.args(), 1_000, states, actions, rewards, done,
            track, tracked, version, hist, pidx,
        )  # fmt: skip
        status, played, state, action, pending, version, tracked, plans = out[:8]
        n_new, plan_status, iterations, classes = out[8:]
        if track and played:
            rec_pol = record.policies
            base = len(rec_pol)
            rec_pol.extend(np.eye(A)[hist[j]] for j in range(n_new))
            record.policy_index.extend((base + pidx[:played]).tolist())
        agent.plans += plans
        agent.steps += played
        planned = planned or plans > 0
        done += played
        if bar is not None:
            bar.update(done - bar.n)
    agent._pending = pending
    agent.transitions = Dirichlet._trusted(dalpha)
    agent.rewards = NormalGamma._trusted(mu0, lam, nalpha, nbeta, agent.rewards.sum_of_squares)
    agent.policy_version = version
    if planned:
        agent.policy = policy
        agent.q = masked(work.q, agent.action_mask)
        agent.model = (work.P.copy(), work.mu.copy())
    failure = plan_failure(plan_status, iterations, classes) if status == FAILED else None
    finish_run(record, env, states, actions, rewards, done, state, action,
               status == INADMISSIBLE, start, failure)  # fmt: skip
    return record


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
