"""The compiled step of each kind of environment, and the compiled loops that play an agent's
compiled steps (``act``, ``observe``) in them.

An environment that a compiled loop can play hands over its arrays as one :class:`EnvArrays`
(:func:`env_arrays`); :func:`step` and :func:`start` are its step and its reset, with the
same draws, in the same order, on the same generator as the environment's own Python
``step`` and ``reset``:

- a :class:`~optplan.envs.TabularEnv` (continuing or finite horizon) and a
  :class:`~optplan.envs.TransitionRewardEnv` (DeepSea-chain, WideNarrow, PriorMDP): one
  uniform, searched in the cumulative transition row, then a standard normal times the
  transition's reward sd where it is positive;
- :class:`~optplan.envs.DeepSea`: the expected reward, a standard normal where the variant puts
  noise, then, for a "right" of the stochastic version, one uniform against ``1 / size``;
- :class:`~optplan.envs.DiscountedResets` over a continuing tabular environment: its step,
  then the reset coin (one uniform of the wrapper's own generator against ``discount``).

:func:`play` is the loop, written once and inlined into each agent's cached ``run`` (numba
caches a function whose compiled callees are globals of its module, not one that takes them
as arguments)::

    @njit
    def run(state, env, steps, env_rng, agent_rng):
        return play(act, observe, state, env, steps, env_rng, agent_rng)

:func:`play_resets` is the same loop under discounted resets, with the reset coin's generator
(``coin_rng``) after the environment's (:func:`generators` gives both).

The Python side, which calls ``run`` until the steps or episodes are done, records episode
ends and makes Python plans between calls, is :mod:`optplan.experiments.compiled`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jit import njit

__all__ = [
    "EnvArrays",
    "Steps",
    "env_arrays",
    "start",
    "play",
    "play_resets",
    "generators",
    "TABULAR",
    "DEEPSEA",
    "DONE",
    "INADMISSIBLE",
    "PLAN",
    "ENDS",
]

#: Kinds of environment step: a tabular model's; DeepSea's.
TABULAR, DEEPSEA = 0, 1
#: Why :func:`play` returned: the steps asked for were played; the agent chose an action the
#: environment does not admit; the agent asked for a Python plan (``observe`` returned True);
#: the episode ends asked for were reached.
DONE, INADMISSIBLE, PLAN, ENDS = 0, 1, 2, 3


class EnvArrays(NamedTuple):
    """An environment as arrays (``L = 1`` for a continuing model, whose layer stays 0).

    ``cdf[l, s, a]``: cumulative transition row; ``mean``, ``sd`` ``(L, S, A, S)``: the reward
    law of each transition (DeepSea: ``mean[l, s, a, 0]`` its expected reward, ``sd`` unused);
    ``mask (L, S, A)``: admissible pairs; ``initial_cdf (S,)``; ``goals (S,)``: next states that
    reach the goal (tabular); ``mapping``, ``noise_mask (L, S)``: DeepSea's "right" action and
    where its reward is noisy; ``scalars``: ``[noise sd, 1 / size or 0 when deterministic,
    the discount of discounted resets or 0]``;
    ``ints``: ``[kind, layered, max_steps or 0]``."""

    cdf: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    mask: np.ndarray
    initial_cdf: np.ndarray
    goals: np.ndarray
    mapping: np.ndarray
    noise_mask: np.ndarray
    scalars: np.ndarray
    ints: np.ndarray


class Steps(NamedTuple):
    """What a compiled loop records, and where the environment is.

    ``states``, ``actions``, ``rewards``, ``layers``: one entry per step (from ``position[0]``);
    ``ends``, ``reached``: the step count at each episode end and whether it reached the goal;
    ``position``: ``[t, state, layer, steps in the episode, episode ends, reached in this
    episode, stop at t, stop at this many ends, the inadmissible action, reset pending]``."""

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    layers: np.ndarray
    ends: np.ndarray
    reached: np.ndarray
    position: np.ndarray


def _c(x, dtype) -> np.ndarray:
    return np.array(x, dtype=dtype, order="C", copy=True)


def env_arrays(env) -> EnvArrays | str:
    """``env`` as :class:`EnvArrays`, or why a compiled loop cannot play it (an environment
    with its own step, reset or reward law, a wrapper, a model too large to hold densely)."""
    from .deepsea import DeepSea
    from .resets import DiscountedResets
    from .tabular import TabularEnv
    from .transition_rewards import TransitionRewardEnv

    cls = type(env)
    if cls is DiscountedResets:
        inner = env_arrays(env.env)
        if isinstance(inner, str) or inner.ints[1]:
            return inner if isinstance(inner, str) else "discounted resets of a layered model"
        return inner._replace(scalars=np.array([*inner.scalars[:2], env.discount]))
    if cls is DeepSea:
        size = env.size
        mean = _c(env.mdp.R, float)[..., None]
        return EnvArrays(
            cdf=np.zeros((1, 1, 1, 1)), mean=mean, sd=np.zeros((1, 1, 1, 1)),
            mask=_c(env.mdp.action_mask, np.bool_), initial_cdf=_c(env._initial_cdf, float),
            goals=np.zeros(size, dtype=np.bool_), mapping=_c(env.mapping, np.int64),
            noise_mask=_c(env._noise_mask, np.bool_),
            scalars=np.array([env.reward_noise, 0.0 if env.deterministic else 1.0 / size, 0.0]),
            ints=np.array([DEEPSEA, 1, 0], dtype=np.int64),
        )  # fmt: skip
    if not isinstance(env, TabularEnv):
        return f"the environment is a {cls.__name__}, not a TabularEnv or DeepSea (wrappers " \
               "take the generic loop)"  # fmt: skip
    if cls.step is not TabularEnv.step or cls.reset is not TabularEnv.reset:
        return f"{cls.__name__} has its own step or reset"
    if cls._reward not in (TabularEnv._reward, TransitionRewardEnv._reward):
        return f"{cls.__name__} has its own reward law"
    mdp = env.mdp
    layered = env._finite
    if isinstance(env, TransitionRewardEnv):
        mean, sd = env.transition_reward_mean, env.transition_reward_sd
    else:
        R = np.asarray(mdp.R, dtype=float)
        mean = np.broadcast_to(R[..., None], (*R.shape, mdp.n_states))
        sd = np.full(mean.shape, env.reward_noise)
    lift = (lambda x: x) if layered else (lambda x: np.asarray(x)[None])
    goals = np.zeros(mdp.n_states, dtype=np.bool_)
    goals[list(env.goal_states)] = True
    return EnvArrays(
        cdf=_c(lift(env._cdf), float), mean=_c(lift(mean), float), sd=_c(lift(sd), float),
        mask=_c(lift(mdp.action_mask), np.bool_), initial_cdf=_c(env._initial_cdf, float),
        goals=goals, mapping=np.zeros((1, 1), dtype=np.int64),
        noise_mask=np.zeros((1, 1), dtype=np.bool_), scalars=np.zeros(3),
        ints=np.array([TABULAR, int(layered), env.max_steps or 0], dtype=np.int64),
    )  # fmt: skip


@njit(inline="always")
def search_right(cdf, u):  # pragma: no cover - compiled by numba
    """``np.searchsorted(cdf, u, side="right")``."""
    lo, hi = 0, cdf.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if cdf[mid] <= u:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(inline="always")
def start(env, rng):  # pragma: no cover - compiled by numba
    """The environment's ``reset()`` (one uniform, searched in the start distribution)."""
    return search_right(env.initial_cdf, rng.random())


def generators(env) -> tuple:
    """``(env_rng, coin_rng)``: the generator of ``env``'s steps and resets, and that of its
    reset coin (:class:`~optplan.envs.DiscountedResets`: the wrapper's; else ``env_rng``)."""
    from .resets import DiscountedResets

    if type(env) is DiscountedResets:
        return env.env.np_random, env.np_random
    return env.np_random, env.np_random


@njit(inline="always")
def play(act, observe, state, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled
    """:func:`play_resets` of an environment without discounted resets."""
    return play_resets(act, observe, state, env, steps, env_rng, env_rng, agent_rng)


@njit(inline="always")
def play_resets(act, observe, state, env, steps, env_rng, coin_rng, agent_rng):  # pragma: no cover
    """Play the agent (``act(state, x, rng) -> a``, ``observe(state, x, a, r, y, done, rng)
    -> plan due``) in ``env`` from ``steps.position`` until ``position[6]`` steps, or
    ``position[7]`` episode ends, or a Python plan is due, or an inadmissible action; returns
    the reason (:data:`DONE`, :data:`ENDS`, :data:`PLAN`, :data:`INADMISSIBLE`; :data:`PLAN`
    when a plan is due at the episode end that reached ``position[7]``).

    An episode ends after ``L`` steps of a layered model, ``max_steps`` steps, or when the reset
    coin of discounted resets (one uniform of ``coin_rng`` after each step) is at least their
    discount (``done`` is then passed to ``observe``), and the environment is reset then, or at
    the start of the next call when the episode end stopped this one."""
    pos = steps.position
    if pos[9]:  # the reset after the episode end play stopped at
        pos[1] = start(env, env_rng)
        pos[9] = 0
    t, x, k, n_ends, reached = pos[0], pos[1], pos[3], pos[4], pos[5]
    # the environment's arrays as locals: passing a tuple of arrays into an inlined function
    # costs a reference count per array and call
    deepsea = env.ints[0] == DEEPSEA
    layered = env.ints[1] == 1
    max_steps = env.ints[2]
    cdf, mean, sd, mask, goals = env.cdf, env.mean, env.sd, env.mask, env.goals
    initial_cdf = env.initial_cdf
    mapping, noise_mask, noise, wind = env.mapping, env.noise_mask, env.scalars[0], env.scalars[1]
    gamma = env.scalars[2]
    L = mask.shape[0]
    size = mapping.shape[1]
    status = DONE
    while t < pos[6]:
        l = k if layered else 0
        a = act(state, x, agent_rng)
        if not mask[l, x, a]:
            pos[8] = a
            status = INADMISSIBLE
            break
        if deepsea:  # DeepSea.step: the reward (noisy where the variant says), then the move
            right = a == mapping[l, x]
            goal = right and x == size - 1
            r = mean[l, x, a, 0]
            if noise > 0.0 and noise_mask[l, x]:
                r += noise * env_rng.standard_normal()
            y = max(x - 1, 0)
            if right:
                y = x if wind > 0.0 and env_rng.random() <= wind else min(x + 1, size - 1)
        else:  # TabularEnv.step: the next state, then the reward of the transition
            y = search_right(cdf[l, x, a], env_rng.random())
            r = mean[l, x, a, y]
            if sd[l, x, a, y] > 0.0:
                r += sd[l, x, a, y] * env_rng.standard_normal()
            goal = goals[y]
        reached = reached | int(goal)
        steps.states[t] = x
        steps.actions[t] = a
        steps.rewards[t] = r
        steps.layers[t] = k
        t += 1
        k += 1
        done = (layered and k >= L) or (max_steps > 0 and k >= max_steps)
        if gamma > 0.0 and coin_rng.random() >= gamma:  # DiscountedResets.step's coin
            done = True
        plan = observe(state, x, a, r, y, done, agent_rng)
        x = y
        if done:
            steps.ends[n_ends] = t
            steps.reached[n_ends] = reached
            n_ends += 1
            reached = 0
            k = 0
            if n_ends >= pos[7]:
                pos[9] = 1
                status = PLAN if plan else ENDS
                break
            x = search_right(initial_cdf, env_rng.random())  # the environment's reset
        if plan:
            status = PLAN
            break
    pos[0], pos[1], pos[2], pos[3], pos[4], pos[5] = t, x, k, k, n_ends, reached
    return status
