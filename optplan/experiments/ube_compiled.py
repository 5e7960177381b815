r"""The compiled run of the posterior-mean Thompson agents, the UBE without unrolling
(:class:`~optplan.agents.ContinuingUBE`) and moment matching
(:class:`~optplan.agents.MomentMatching`), and of the continuing UBE of Eq. 3
(:class:`~optplan.agents.UBE` with ``n_layers=None``): Thompson actions, steps, posterior
updates and plans in one compiled loop, with the generic loop's results **exactly**, for every
``update_every`` (1 included).

Each step's action is :func:`._segment_kernels._thompson` (:func:`optplan.agents.base.
thompson_action`'s draws on the agent's generator), its transition and reward
:mod:`._segment_kernels`' (as :meth:`optplan.envs.TabularEnv.step` draws them); every
``update_every`` steps the batch is folded into the posterior arrays by
:func:`optplan.agents._psrl_kernels.absorb_batch` (:meth:`PosteriorAgent.absorb
<optplan.agents._posterior_agent.PosteriorAgent.absorb>`'s operations) and the plan is
:func:`optplan.agents._ube_kernels._plan`, the compiled function the agent's own ``plan()``
calls. A plan that fails in the compiled code stops the chunk; the agent's NumPy plan redoes
it (raising its error, or planning as the generic loop's ``plan()`` would) and the run goes
on. The run is played in chunks of :data:`CHUNK` steps; at the end the agent holds what the
generic loop leaves it (posterior, batch buffer, policy, ``q``, values, its noise terms and
sd, counters). ``tests/test_ube_compiled.py`` compares it with the generic loop.

The UBE of Eq. 3 keeps a Gaussian posterior per pair (:class:`~optplan.posteriors.
LayeredPosterior`): each step is recorded into its counts, reward sums and next-state counts
as :meth:`LayeredPosterior.update <optplan.posteriors.LayeredPosterior.update>` records it,
and every ``update_every`` steps its plan is :func:`optplan.agents._ube_kernels._mean_plan`,
the compiled function its own ``plan()`` calls (:func:`_run_mean`); a plan that fails there
is redone by its NumPy plan as above. ``tests/test_engines_exact_ube_class.py`` compares it
with the generic loop.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _jit
from ..agents import UBE, ContinuingUBE, MomentMatching
from ..agents import _psrl_kernels as PK
from ..agents import _ube_kernels as UK
from ..agents._mean_model import MeanModelAgent
from ..posteriors import Dirichlet, NormalGamma
from . import _segment_kernels as SK
from ._segment_kernels import _reward, _search_right, _thompson
from .planning_compiled import (
    _arrays,
    _env_reason,
    compiled_oracle_run,  # noqa: F401  (the engine's oracle run, same environments)
    finish_run,
)

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "CHUNK", "AGENT_CLASSES"]

#: The agents this engine runs (subclasses take the generic loop; UBE continuing only).
AGENT_CLASSES = (ContinuingUBE, MomentMatching, UBE)

#: Steps per compiled call.
CHUNK = 8192

DONE, INADMISSIBLE, FAILED = 0, 1, 2

_JIT = _jit.Jit(
    "the compiled UBE run", uses=(UK._JIT, SK._JIT, PK._JIT), cache=True, error_model="numpy"
)


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
def _run(n, state, true_mask, cdf, rmean, rsd, env_rng, agent_rng, update_every, pending,
         buf_s, buf_a, buf_r, buf_s2, cnt, sums, sq, dalpha, mu0, lam, nalpha, nbeta, public,
         mask, forced, zeta, discount, rule, coef, div, g2, policy, old, qm, P, var, R, a0, q,
         values, nu, u, sd, M, b, row, new, reach, stack, v, w, max_iter, states, actions, rewards,
         offset):  # fmt: skip  # pragma: no cover - compiled by numba
    """Up to ``n`` steps from ``state``. Returns ``(status, steps played, state, action,
    pending, plans)``; ``qm`` is ``q`` with inadmissible actions ``-inf``; ``old`` the
    policy before the last plan."""
    S, A = qm.shape
    plans = 0
    for i in range(n):
        x = state
        a = _thompson(x, forced, policy, qm, zeta, sd, agent_rng)
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a, pending, plans
        y = _step(x, a, cdf, rmean, rsd, env_rng, states, actions, rewards, offset + i,
                     buf_s, buf_a, buf_r, buf_s2, pending)  # fmt: skip
        pending += 1
        state = y
        if pending == update_every:
            PK.absorb_batch(pending, buf_s, buf_a, buf_r, buf_s2, cnt, sums, sq, dalpha, mu0, lam,
                       nalpha, nbeta, public)  # fmt: skip
            pending = 0
            plans += 1
            for s in range(S):
                old[s] = policy[s]
            status = UK._plan(
                dalpha, mu0, lam, nalpha, nbeta, mask, discount, rule, coef, div, g2, policy, True,
                P, var, R, a0, q, values, nu, u, sd, M, b, row, new, reach, stack, v, w,
                max_iter,
            )  # fmt: skip
            if status != UK.OK:
                return FAILED, i + 1, state, a, pending, plans
            for s in range(S):
                for c in range(A):
                    qm[s, c] = q[s, c] if mask[s, c] else -math.inf
    return DONE, n, state, -1, pending, plans


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
    if type(agent) is UBE and agent.n_layers is not None:
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
    if type(agent) is UBE and not UK.mean_applies(agent):
        return (
            "the UBE agent plans in NumPy (deterministic transition prior, exact rewards under "
            "a proper prior, or numpy's BLAS not bound)"
        )
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


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None):
    """Fill ``record`` with ``steps`` steps; the caller has checked :func:`compiled_reason`."""
    if type(agent) is UBE:
        return _mean_loop(agent, env, env_seed, agent_rng, steps, record, bar)
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    work = agent._work
    cdf, true_mask, rmean, rsd = _arrays(env)
    dalpha, mu0, lam, nalpha, nbeta, public, cnt, sums, sq, mask = posterior_arrays(agent)
    forced = np.ascontiguousarray(agent._forced, dtype=np.int64)
    rule, coef, div = agent._kernel_rule()
    discount = float(agent.discount)
    policy, qm = _follow(agent)
    old = policy.copy()
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    chunk = min(CHUNK, steps) if steps else 0
    pending = int(agent._pending)
    done, status, action, compiled_last = 0, DONE, -1, False
    fn = _compiled()["_run"]
    while done < steps and status in (DONE, FAILED):
        n = min(chunk, steps - done)
        out = fn(
            n, int(state), true_mask, cdf, rmean, rsd, env.np_random, agent.rng,
            agent.update_every, pending, agent._buf_s, agent._buf_a, agent._buf_r,
            agent._buf_s2, cnt, sums, sq, dalpha, mu0, lam, nalpha, nbeta, public, mask,
            forced, float(agent.zeta), discount, rule, float(coef), float(div), discount**2,
            policy, old, qm, *_plan_arrays(work), UK.MAX_ITER, states, actions, rewards, done,
        )  # fmt: skip
        status, played, state, action, pending, plans = out
        agent.plans += plans
        agent.steps += played
        done += played
        if plans:
            compiled_last = True
        if status == FAILED:  # the NumPy plan redoes it: its error, or its plan
            compiled_last = False
            _store(agent, dalpha, mu0, lam, nalpha, nbeta, pending)
            agent.policy, agent._planned = old.copy(), True
            agent._plan_numpy()
            policy, qm = _follow(agent)
        if bar is not None:
            bar.update(done - bar.n)
    _store(agent, dalpha, mu0, lam, nalpha, nbeta, pending)
    if compiled_last:
        agent._planned = True
        agent._from_work(policy.copy())
    finish_run(record, env, states, actions, rewards, done, state, action,
               status == INADMISSIBLE, start)  # fmt: skip
    return record


def _mean_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None):
    """:func:`compiled_loop` of the UBE of Eq. 3 (continuing)."""
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


def _plan_arrays(work) -> tuple:
    """``work``'s arrays in :func:`_run`'s order after ``sd``."""
    w = work
    return (w.P, w.var, w.R, w.a0, w.q, w.values, w.nu, w.u, w.sd, w.M, w.b, w.row, w.new,
            w.reach, w.stack, w.v, w.w)  # fmt: skip


def _follow(agent) -> tuple:
    """The policy and masked ``q`` the agent acts on, as fresh C arrays, and its noise sd
    into the plan's own array (the compiled plan writes the next one there)."""
    policy = np.array(agent.policy, dtype=np.int64)
    qm = np.array(agent.q, dtype=float)
    agent._work.sd[...] = agent.noise_sd
    return policy, qm


def _store(agent, dalpha, mu0, lam, nalpha, nbeta, pending) -> None:
    agent._pending = pending
    agent.transitions = Dirichlet._trusted(dalpha.copy())
    agent.rewards = NormalGamma._trusted(
        mu0.copy(), lam.copy(), nalpha.copy(), nbeta.copy(), agent.rewards.sum_of_squares
    )


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
