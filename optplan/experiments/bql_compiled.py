r"""The compiled run of Bayesian Q-learning (:class:`~optplan.agents.BayesianQLearning`): action
choice, environment step and posterior update in one compiled loop, with the generic loop's
results **exactly**.

Each step is the agent's own compiled action choice and update
(:mod:`optplan.agents._bql_kernels`, which the agent's ``select_action`` and ``update`` call
too, and which give the NumPy path's numbers) around :mod:`._segment_kernels`' environment step
(the transition and reward drawn on the environment's generator as
:meth:`optplan.envs.TabularEnv.step` draws them), in the generic loop's order: the action's
Student-t draws on the agent's generator, the environment's draws, the update. The run is
played in chunks of :data:`CHUNK` steps (the progress bar is updated between them); at the end
the agent holds what the generic loop leaves it (posterior, step count, generator).

It covers both moment matches: ``"quadrature"`` (the default, deterministic) and
``"monte-carlo"`` (its draws on the agent's generator after the environment's, as in the
generic loop; declined where numba's draws or the pairwise mean differ from NumPy's,
:func:`optplan.agents._bql_kernels.self_check_mc`). Runs counted in episodes and tracked runs
take the generic loop.
``tests/test_engines_exact_bql.py`` compares it with the generic loop.
"""

from __future__ import annotations

import time

import numpy as np

from .. import _jit
from ..agents import _bql_kernels as BK
from ..agents.bql import BayesianQLearning
from . import _segment_kernels as SK
from ._segment_kernels import _reward, _search_right
from .planning_compiled import (
    _arrays,
    _env_reason,
    compiled_oracle_run,  # noqa: F401  (the engine's oracle run, same environments)
    finish_run,
)

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "CHUNK"]

#: Steps per compiled call.
CHUNK = 8192

DONE, INADMISSIBLE, ZERO_DIVISION = 0, 1, 2

_JIT = _jit.Jit("the compiled BQL run", uses=(BK._JIT, SK._JIT), cache=True, error_model="numpy")


@_JIT
def _run(n, state, true_mask, cdf, rmean, rsd, env_rng, agent_rng, mu0, lam, alpha, beta, mask,
         forced, sample, quantile, discount, t, path, meta, mc, work, states, actions, rewards,
         offset):  # fmt: skip  # pragma: no cover - compiled by numba
    """Up to ``n`` steps from ``state``, recorded from ``offset`` on. Returns ``(status, steps
    played, state, action)``; :data:`ZERO_DIVISION`: the update of the step after those played
    divided by zero, the environment having stepped to ``state``."""
    for i in range(n):
        x = state
        a = BK._select(agent_rng, mu0, lam, alpha, beta, mask, forced, x, sample, quantile, t)
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a
        y = _search_right(cdf[x, a], env_rng.random())
        r = _reward(rmean, rsd, x, a, y, env_rng)
        states[offset + i] = x
        actions[offset + i] = a
        rewards[offset + i] = r
        if mc:
            status = BK._update_mc(agent_rng, mu0, lam, alpha, beta, mask, x, a, r, y, False,
                                   discount, path, meta, work)  # fmt: skip
        else:
            status = BK._update(mu0, lam, alpha, beta, mask, x, a, r, y, False, discount, path,
                                meta)  # fmt: skip
        if status != BK.OK:
            return ZERO_DIVISION, i, y, a
        state = y
    return DONE, n, state, -1


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    if type(agent) is not BayesianQLearning:
        return (
            f"{type(agent).__name__} is not one of BayesianQLearning (subclasses take the "
            "generic loop)"
        )
    reason = _env_reason(env)
    if reason is not None:
        return reason
    if episodes is not None:
        return "the run counts episodes (give steps=)"
    if track:
        return "the run tracks the agent's policies"
    if not BK.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not (SK.self_check() and BK.self_check()):
        return (
            "numba's random draws, or NumPy's loops / SciPy's special functions as the "
            "compiled step calls them, differ from NumPy's here"
        )
    if agent.moment_match == "monte-carlo" and not BK.self_check_mc():
        return (
            "moment_match='monte-carlo': numba's gamma / normal / Student-t draws or the "
            "pairwise mean differ from NumPy's here (the Monte-Carlo update takes the generic "
            "loop)"
        )
    return None


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None):
    """Fill ``record`` with ``steps`` steps; the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    cdf, true_mask, rmean, rsd = _arrays(env)
    mask = np.ascontiguousarray(agent.action_mask, dtype=np.bool_)
    forced = np.ascontiguousarray(agent._forced, dtype=np.int64)
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    chunk = min(CHUNK, steps) if steps else 0
    done, status, action = 0, DONE, -1
    fn = _compiled()["_run"]
    while done < steps and status == DONE:
        n = min(chunk, steps - done)
        status, played, state, action = fn(
            n, int(state), true_mask, cdf, rmean, rsd, env.np_random, agent.rng, agent.mu0,
            agent.lam, agent.alpha, agent.beta, mask, forced, agent.action == "sample",
            float(agent.quantile), float(agent.discount), agent._t, agent._path, agent._meta,
            agent.moment_match == "monte-carlo", agent._mc_work(), states, actions, rewards, done,
        )  # fmt: skip
        agent.steps += played
        done += played
        if bar is not None:
            bar.update(done - bar.n)
    if status == ZERO_DIVISION:  # the generic loop: the environment stepped, the update raised
        env._t += done + 1
        env._state = int(state)
        raise ZeroDivisionError("float division by zero")
    finish_run(record, env, states, actions, rewards, done, state, action,
               status == INADMISSIBLE, start)  # fmt: skip
    return record


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
