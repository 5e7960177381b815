r"""The compiled run of the continuing posterior agents ContinuingUBE and MomentMatching, with
the generic loop's results **exactly**.

These agents spend a run in two kinds of work: a plan (a posterior update, a draw and policy
iteration every ``update_every`` steps) and, between two plans, steps that follow a fixed
policy (or Thompson noise around fixed action values) and update counts. The engine plays
the steps between two plans in one compiled call (:mod:`._segment_kernels`) and makes every
plan with the agent's own Python code (``agent.absorb()`` and ``agent._plan_now()``), so the
plans are the generic loop's by construction and the steps are the same operations on the
same generators.
It is a row of :data:`optplan.experiments.engines.RUN_ENGINES`; the generic loop stays the
reference (``tests/test_engines_exact.py`` compares the two). What it covers:

- the agent is an instance of exactly :class:`~optplan.agents.ContinuingUBE` or
  :class:`~optplan.agents.MomentMatching`
  (``method="fast"``, ``update_every`` at least 2: with a plan every step there is nothing
  between plans to compile), not a subclass;
- the environment is a :class:`~optplan.envs.TabularEnv` over a continuing model (no wrapper)
  whose class keeps ``TabularEnv``'s ``reset`` and ``step`` and either ``TabularEnv``'s reward
  (``R[s, a]`` plus ``reward_noise`` times a normal) or
  :class:`~optplan.envs.transition_rewards.TransitionRewardEnv`'s (a normal law per
  transition: DeepSea-chain, WideNarrow, PriorMDP), without ``max_steps`` or goal states, run
  for ``steps`` (not ``episodes``);
- numba is installed (the ``jit`` extra), and its ``Generator.random`` and
  ``standard_normal`` give NumPy's numbers (:func:`._segment_kernels.self_check`).

Policies are tracked (discounted runs, for the occupancy regret) at the start of each
segment: a plan is the only place their version changes. The oracle run of
:attr:`Trace.draft_regret` is compiled too (same draws).

The speed-up is the per-step Python overhead only (environment, agent update, record); the
plans cost what they cost in the generic loop. ``optplan bench agents`` measures both loops.
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import OptplanError
from ..agents import ContinuingUBE, MomentMatching
from ..envs import TabularEnv
from ..envs.transition_rewards import TransitionRewardEnv
from ..mdp import TabularMDP
from . import _segment_kernels as K

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "AGENT_CLASSES", "TRACKS"]

#: :func:`compiled_loop` records the agent's policies when asked (``track``).
TRACKS = True

#: The agent classes this engine covers (exact types).
AGENT_CLASSES = (ContinuingUBE, MomentMatching)
_THOMPSON = (ContinuingUBE, MomentMatching)
_REWARDS = (TabularEnv._reward, TransitionRewardEnv._reward)


def _env_reason(env) -> str | None:
    cls = type(env)
    if not isinstance(env, TabularEnv):
        return (
            f"the environment is a {cls.__name__}, not a TabularEnv (wrappers take the generic "
            "loop)"
        )
    if cls.step is not TabularEnv.step or cls.reset is not TabularEnv.reset:
        return f"{cls.__name__} has its own step or reset"
    if cls._reward not in _REWARDS:
        return f"{cls.__name__} has its own reward law"
    if not isinstance(env.mdp, TabularMDP):
        return "the model is not a continuing TabularMDP"
    if env.max_steps is not None:
        return "the environment truncates episodes (max_steps)"
    if env.goal_states:
        return "the environment reports goals"
    return None


def _agent_reason(agent) -> str | None:
    cls = type(agent)
    if cls not in AGENT_CLASSES:
        names = ", ".join(c.__name__ for c in AGENT_CLASSES)
        return f"{cls.__name__} is not one of {names} (subclasses take the generic loop)"
    if getattr(agent, "method", "fast") != "fast":
        return f'method={agent.method!r} (only "fast" is compiled)'
    if getattr(agent, "update_every", 2) == 1:
        return (
            "update_every=1: a plan every step leaves no steps between plans to compile (the "
            "generic loop is as fast)"
        )
    return None


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    reason = _agent_reason(agent) or _env_reason(env)
    if reason is not None:
        return reason
    if episodes is not None:
        return "the run counts episodes (give steps=)"
    if not K.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not K.self_check():
        return "numba's random draws differ from numpy's on this installation"
    return None


def _reward_law(env) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, sd)``, each ``(S, A, S)``, of the environment's reward of ``(s, a) -> s'``."""
    if isinstance(env, TransitionRewardEnv):
        mean, sd = env.transition_reward_mean, env.transition_reward_sd
    else:
        R = np.asarray(env.mdp.R, dtype=float)
        S = R.shape[0]
        mean = np.broadcast_to(R[:, :, None], (*R.shape, S))
        sd = np.full(mean.shape, env.reward_noise)
    return (np.array(x, dtype=float, order="C", copy=True) for x in (mean, sd))


def _arrays(env):
    """The environment's arrays as fresh writable C arrays (one set of numba types)."""
    cdf = np.array(env._cdf, dtype=float, order="C", copy=True)
    true_mask = np.array(env.mdp.action_mask, dtype=bool, order="C", copy=True)
    mean, sd = _reward_law(env)
    return cdf, true_mask, mean, sd


class _Tracker:
    """The policies a segment follows, as the generic loop's ``_track_policy`` records them
    step by step (their version changes only in a plan, between segments)."""

    def __init__(self, record, on: bool):
        self.record, self.on, self.version = record, on, object()

    def segment(self, agent, n: int) -> None:
        if not self.on or n <= 0:
            return
        rec = self.record
        if agent.policy_version != self.version:
            self.version = agent.policy_version
            rec.policies.append(np.array(agent.current_policy(), dtype=float))
        rec.policy_index.extend([len(rec.policies) - 1] * n)


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None,
                  track: bool = False):  # fmt: skip
    """Fill ``record`` (a :class:`~optplan.experiments.trace.Record`) with ``steps`` steps;
    the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    cdf, true_mask, mean, sd = _arrays(env)
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    tracker = _Tracker(record, track)
    done, status, state, action = _play_posterior(
        agent, env, state, steps, cdf, true_mask, mean, sd, states, actions, rewards, tracker, bar
    )
    finish_run(record, env, states, actions, rewards, done, state, action,
               status == K.INADMISSIBLE, start)  # fmt: skip
    if bar is not None:
        bar.update(done - bar.n)
    return record


def finish_run(record, env, states, actions, rewards, done: int, state, action, inadmissible: bool,
               start: float, failure: str | None = None) -> None:  # fmt: skip
    """A compiled continuing run's end: the environment left where the run stopped, the
    agent's inadmissible ``action`` (``inadmissible``) or a failed plan (``failure``, its
    message) raised as the generic loop raises them, else ``record`` filled with the
    ``done`` steps."""
    env._t += done
    env._state = int(state)
    if inadmissible:
        raise OptplanError(f"action {int(action)} is not admissible in state {int(state)}")
    if failure is not None:
        raise RuntimeError(failure)
    record.states = states[:done]
    record.actions = actions[:done]
    record.rewards = rewards[:done]
    record.layers = np.arange(done)
    record.wall_time = time.perf_counter() - start


def _play_posterior(agent, env, state, steps, cdf, true_mask, mean, sd, states, actions,
                    rewards, tracker, bar):  # fmt: skip
    """The posterior agents: a compiled segment to the next update, then the agent's own
    batch update and plan."""
    kind = K.THOMPSON if isinstance(agent, _THOMPSON) else K.POLICY
    S, A = agent.n_states, agent.n_actions
    forced = np.ascontiguousarray(agent._forced, dtype=np.int64)
    zeta = float(getattr(agent, "zeta", 0.0))
    blank = np.zeros((S, A))
    done = 0
    while done < steps:
        k = agent._pending
        n = min(agent.update_every - k, steps - done)
        policy = np.ascontiguousarray(agent.policy, dtype=np.int64)
        if kind == K.THOMPSON:
            q = np.ascontiguousarray(agent.q, dtype=float)
            noise = np.ascontiguousarray(agent.noise_sd, dtype=float)
        else:
            q = noise = blank
        status, played, state, action = K.follow(
            kind, n, int(state), policy, forced, q, zeta, noise, true_mask, cdf, mean, sd,
            env.np_random, agent.rng, states, actions, rewards, done, agent._buf_s,
            agent._buf_a, agent._buf_r, agent._buf_s2, k,
        )  # fmt: skip
        tracker.segment(agent, played)
        done += played
        agent._pending = k + played
        agent.steps += played
        if status == K.INADMISSIBLE:
            return done, status, state, action
        if agent._pending == agent.update_every:
            agent.absorb()
            agent._plan_now()
        _progress(bar, done)
    return done, K.DONE, state, -1


def _progress(bar, done: int) -> None:
    if bar is not None and done - bar.n >= 1024:
        bar.update(done - bar.n)


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """:func:`~optplan.experiments.run.oracle_run` compiled, for the environments
    :func:`compiled_reason` accepts (``None`` for others: the caller runs the generic one)."""
    if _env_reason(env) is not None or oracle.criterion == "finite_horizon":
        return None
    if not (K.AVAILABLE and K.self_check()):
        return None
    policy = np.ascontiguousarray(oracle.result.policy, dtype=np.int64)
    state, _ = env.reset(seed=env_seed)
    cdf, _, mean, sd = _arrays(env)
    return K.oracle(steps, state, policy, cdf, mean, sd, env.np_random)
