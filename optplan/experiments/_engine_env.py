"""What the compiled engines of the agents not yet written as
:class:`~optplan.agents.base.CompiledAgent` share: which environments they play
(:func:`_env_reason`: a plain continuing :class:`~optplan.envs.TabularEnv`), its arrays
(:func:`_arrays`), a run's end (:func:`finish_run`) and the oracle run
(:func:`compiled_oracle_run`)."""

from __future__ import annotations

import time

import numpy as np

from .._checks import OptplanError
from ..envs import TabularEnv
from ..envs.transition_rewards import TransitionRewardEnv
from ..mdp import TabularMDP
from . import _segment_kernels as K

__all__ = ["finish_run", "compiled_oracle_run"]

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


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """:func:`~optplan.experiments.run.oracle_run` compiled, for the environments
    :func:`_env_reason` accepts (``None`` for others: the caller runs the generic one)."""
    if _env_reason(env) is not None or oracle.criterion == "finite_horizon":
        return None
    if not (K.AVAILABLE and K.self_check()):
        return None
    policy = np.ascontiguousarray(oracle.result.policy, dtype=np.int64)
    state, _ = env.reset(seed=env_seed)
    cdf, _, mean, sd = _arrays(env)
    return K.oracle(steps, state, policy, cdf, mean, sd, env.np_random)
