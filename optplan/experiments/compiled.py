"""Whole runs in an agent's compiled loop: the Python side of
:func:`optplan.envs.kernels.play`.

An agent that keeps its state in a tuple and its steps in compiled functions
(:class:`~optplan.agents.base.CompiledAgent`) is run by calling its cached loop on the
environment's arrays (:func:`~optplan.envs.kernels.env_arrays`) in chunks of :data:`CHUNK`
steps: between two calls the progress bar moves, a plan that ``observe`` asked for is made by
the agent's Python :meth:`~optplan.agents.base.CompiledAgent.plan_due`, and, when the run needs
them (``on_episode_end``, ``stop_when_solved``), each episode end is handed to
:func:`.trace.episode_ended`. The generic loop of :func:`~optplan.experiments.run` calls the
same compiled ``act`` and ``observe`` through ``select_action`` and ``update``, and the
environment steps draw alike, so a seed gives the same run in both loops.

The oracle run of :attr:`Trace.draft_regret` is a compiled loop too: the oracle's policy as an
agent (:class:`PolicyState`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import NamedTuple

import numpy as np

from .._checks import OptplanError
from .._jit import njit
from ..agents.base import CompiledAgent
from ..envs import kernels as EK
from ..envs.kernels import EnvArrays, Steps, env_arrays, play_resets
from .trace import episode_ended

__all__ = ["EPISODES", "TRACKS", "CHUNK", "compiled_reason", "compiled_loop", "compiled_oracle_run",
           "PolicyState"]  # fmt: skip

#: :func:`compiled_loop` takes ``episodes``, ``stop_when_solved`` and ``on_episode_end``, and
#: records the policies (``track``) of an agent whose policy changes only in its plans.
EPISODES = TRACKS = True
#: Steps per compiled call (the progress bar moves between calls).
CHUNK = 1 << 16
#: The most steps of a run counted in episodes (as the generic loop).
MAX_STEPS = 10**7
_NO_LIMIT = np.iinfo(np.int64).max
#: The methods a subclass must keep for its class's compiled loop to stand for it.
_STEPS = ("select_action", "update", "plan", "plan_due", "reset")


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why the agent's compiled loop does not cover this run, or ``None`` when it does."""
    if not isinstance(agent, CompiledAgent):
        return f"{type(agent).__name__} has no compiled steps (not a CompiledAgent)"
    cls = type(agent)
    home = next(c for c in cls.__mro__ if "_run" in vars(c))
    changed = [n for n in _STEPS if getattr(cls, n) is not getattr(home, n)]
    if changed:
        return (
            f"{cls.__name__} overrides {', '.join(changed)} of {home.__name__}, whose compiled "
            "loop would not call it"
        )
    if track and not agent.POLICY_CHANGES_IN_PLAN:
        return "the run tracks the agent's policies, which change within its compiled steps"
    arrays = env_arrays(env)
    if isinstance(arrays, str):
        return arrays
    if arrays.scalars[2] > 0 and getattr(agent, "_run_resets", None) is None:
        return f"{cls.__name__} has no compiled loop under discounted resets"
    return agent.compiled_reason(arrays)


@contextlib.contextmanager
def _sigint_after():
    """SIGINT held back while a compiled loop runs and delivered (as ``KeyboardInterrupt``)
    when it returns: a Ctrl-C never lands inside numba's handling of the call's arguments.
    A chunk lasts milliseconds. Only in the main thread of a POSIX process."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = mask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, old)


def _steps(n: int) -> Steps:
    position = np.zeros(10, dtype=np.int64)  # Steps.position
    return Steps(
        states=np.empty(n, dtype=np.int64), actions=np.empty(n, dtype=np.int64),
        rewards=np.empty(n), layers=np.empty(n, dtype=np.int64),
        ends=np.empty(n, dtype=np.int64), reached=np.empty(n, dtype=np.int64), position=position,
    )  # fmt: skip


def _grown(steps: Steps, n: int) -> Steps:
    """``steps`` with room for ``n`` steps (its entries kept)."""
    if steps.states.shape[0] >= n:
        return steps
    size = max(n, 2 * steps.states.shape[0])
    out = _steps(size)
    for old, new in zip(steps[:-1], out[:-1], strict=True):
        new[: old.shape[0]] = old
    out.position[:] = steps.position
    return out


def compiled_loop(agent, env, env_seed: int, agent_rng, steps, record, bar=None, *,
                  episodes=None, stop_when_solved=False, on_episode_end=None,
                  track=False):  # fmt: skip
    """Fill ``record`` as the generic loop would (``track``: with the policy in force at each
    step, which changes only between two compiled calls); the caller has checked
    :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    arrays = env_arrays(env)
    env_rng, coin_rng = EK.generators(env)
    resets = arrays.scalars[2] > 0
    max_steps = steps if steps is not None else MAX_STEPS
    each_end = on_episode_end is not None or stop_when_solved
    out = _steps(min(max_steps, CHUNK))
    pos = out.position
    pos[1] = state
    pos[7] = 1 if each_end else (episodes or _NO_LIMIT)
    ends_seen = 0
    version = object()  # equal to no version
    agent.track(track)  # until the next reset
    while True:
        pos[6] = min(int(pos[0]) + CHUNK, max_steps)
        out = _grown(out, int(pos[6]))
        pos = out.position
        before = int(pos[0])
        if track:
            version = _track(agent, record, version)
        with _sigint_after():
            if resets:
                status = agent.play_resets(arrays, out, env_rng, coin_rng)
            else:
                status = agent.play(arrays, out, env_rng)
        t = int(pos[0])
        if track:
            record.policy_index.extend([len(record.policies) - 1] * (t - before))
        if bar is not None and steps is not None:
            bar.update(t - bar.n)
        if status == EK.INADMISSIBLE:
            _leave(env, pos)
            where = f" at layer {int(pos[2])}" if arrays.ints[1] else ""
            raise OptplanError(
                f"action {int(pos[8])} is not admissible in state {int(pos[1])}{where}"
            )
        if status == EK.PLAN:
            agent.plan_due()
        stop = False
        if each_end:
            record.goal_seen = record.goal_seen or (pos[4] > 0 and _reports_goals(arrays))
            while ends_seen < pos[4] and not stop:
                stop = episode_ended(record, int(out.ends[ends_seen]),
                                     bool(out.reached[ends_seen]), agent, episodes,
                                     stop_when_solved, on_episode_end, bar)  # fmt: skip
                ends_seen += 1
            pos[7] = ends_seen + 1
        elif pos[4] >= pos[7]:  # the episodes asked for ended
            stop = True
        if stop or t >= max_steps:
            break
    if episodes is not None and not record.stopped_early and pos[4] < episodes:
        raise RuntimeError(
            f"only {int(pos[4])} of {episodes} episodes ended within {max_steps} steps"
        )
    return _finish(record, env, arrays, out, ends_seen if each_end else None, start, bar, steps)


def _track(agent, record, version):
    """The policy in force now recorded when its version changed; the version."""
    if agent.policy_version != version:
        version = agent.policy_version
        record.policies.append(np.array(agent.current_policy(), dtype=float))
    return version


def _finish(record, env, arrays: EnvArrays, out: Steps, ends_seen, start, bar, steps):
    """``record`` filled from ``out``; the environment left where the run stopped."""
    pos = out.position
    t, n_ends = int(pos[0]), int(pos[4])
    record.states = out.states[:t]
    record.actions = out.actions[:t]
    record.rewards = out.rewards[:t]
    record.layers = out.layers[:t]
    if ends_seen is None:  # the episode ends, not yet handed over one by one
        reached = out.reached[:n_ends].astype(bool)
        record.episode_ends = out.ends[:n_ends].tolist()
        record.successes = reached.tolist()
        record.solved = int(reached.sum())
        if bar is not None and steps is None:
            bar.update(n_ends)
    record.goal_seen = t > 0 and _reports_goals(arrays)
    _leave(env, pos, out, arrays)
    record.wall_time = time.perf_counter() - start
    return record


def _reports_goals(arrays: EnvArrays) -> bool:
    """The environment says when a step reaches its goal (DeepSea, goal states)."""
    return arrays.ints[0] == EK.DEEPSEA or bool(arrays.goals.any())


def _leave(env, pos, out: Steps | None = None, arrays: EnvArrays | None = None) -> None:
    """The Python environment placed where the compiled run left it (at the end of an episode
    when the run stopped there: ended, or cut by a discounted reset's coin)."""
    n = int(pos[4])
    if out is None or not pos[9] or n == 0:
        env.set_position(int(pos[1]), int(pos[3]))
        return
    length = int(out.ends[n - 1] - (out.ends[n - 2] if n > 1 else 0))
    env.set_position(int(pos[1]), length, done=not arrays.scalars[2] > 0)


class PolicyState(NamedTuple):
    """A fixed policy as an agent: ``policy (L, S)`` (``L = 1`` continuing), ``layer [l]``."""

    policy: np.ndarray
    layer: np.ndarray


@njit(inline="always")
def _policy_act(s, x, rng):  # pragma: no cover - compiled by numba
    return s.policy[s.layer[0], x]


@njit(inline="always")
def _policy_observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    if s.policy.shape[0] > 1:
        s.layer[0] = 0 if done else s.layer[0] + 1
    return False


@njit
def _policy_run(s, env, steps, env_rng, coin_rng, agent_rng):  # pragma: no cover - compiled
    return play_resets(_policy_act, _policy_observe, s, env, steps, env_rng, coin_rng, agent_rng)


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """:func:`~optplan.experiments.run.oracle_run` in a compiled loop, or ``None`` for an
    environment it cannot play (the caller runs the generic one)."""
    arrays = env_arrays(env)
    if isinstance(arrays, str):
        return None
    policy = np.asarray(oracle.result.policy, dtype=np.int64)
    policy = np.ascontiguousarray(policy if policy.ndim == 2 else policy[None])
    state, _ = env.reset(seed=env_seed)
    out = _steps(steps)
    out.position[1] = state
    out.position[6] = steps
    out.position[7] = _NO_LIMIT
    agent = PolicyState(policy, np.zeros(1, dtype=np.int64))
    rng = np.random.default_rng(0)  # the oracle draws nothing
    env_rng, coin_rng = EK.generators(env)
    while out.position[0] < steps:
        with _sigint_after():
            status = _policy_run(agent, arrays, out, env_rng, coin_rng, rng)
        if status != EK.DONE:
            return None
    return out.rewards
