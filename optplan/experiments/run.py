"""The agent-environment loop and its record, scored by exact regret (see :mod:`.metrics`).

:func:`run` drives an :class:`~optplan.agents.Agent` through an environment that exposes its
true model (``env.mdp``, e.g. :class:`~optplan.envs.TabularEnv`) and returns a :class:`Trace`.
Regret is computed from the model after the loop, from the visited pairs, so the pseudo-regret
carries no reward noise.

Pseudo-regret uses expected rewards of the visited pairs, never the sampled ones.

*Average* (``TabularMDP``): the step-``t`` term is ``g* - R[s_t, a_t]`` with ``g*`` the
optimal gain of the true model. Under an optimal policy its expected sum is
``h(s_0) - E h(s_T)``, bounded by ``span(h)``; any gain gap shows up as linear growth.

*Discounted*: the step term is ``E[r_k]`` of an oracle following a discount-optimal policy
from the initial distribution, ``k`` steps into the episode (the oracle restarts when the
environment is reset), minus ``R[s_t, a_t]``.

*Finite horizon* (``FiniteHorizonMDP``): the step term is the action gap
``V*_l(s_l) - Q*_l(s_l, a_l) >= 0``, exactly 0 for an optimal action. By the
performance-difference lemma its expected sum over an episode is
``V*_0(s_0) - V^pi_0(s_0)``, the episode's regret, for any (even non-Markov) policy. A
truncated episode contributes only its prefix of gaps. ``V*`` is taken as ``max_a Q*`` so
that optimal actions have gap 0 bit for bit.

Goals: an environment that puts ``"goal_reached"`` in a step's ``info`` marks that
episode a success; :attr:`Trace.successes` and :attr:`Trace.time_to_solve` follow.

*Oracle run* (bayesian-methods-tabular-rl's regret, :attr:`Trace.draft_regret`): after the
loop the oracle's optimal policy (the one regret is measured against) is run in a copy of
``env`` (``copy.deepcopy``, taken before the loop) for the same number of steps, resetting
when an episode ends as the loop does; its rewards are :attr:`Trace.oracle_run_rewards`
(``None`` if ``env`` cannot be copied). It costs one environment step per step and is not
counted in :attr:`Trace.wall_time`. Its first ``reset(seed=...)`` takes (``oracle_noise``):

- ``"shared"`` (default): the agent's environment seed. The two runs read one random stream,
  so where they draw alike (DeepSea-chain, PriorMDP: one uniform and one normal per step) the
  reward noise cancels in the difference of their sums.
- ``"independent"``: a seed of its own (a third child of ``SeedSequence(seed)``, after the
  environment's and the agent's), so the oracle's rewards carry noise independent of the
  agent's. This is the public code's setting: there one global NumPy stream is seeded alike
  for both runs, but the agent draws from it too, so the oracle's draws fall elsewhere.

*Occupancy regret* (discounted criterion, an agent implementing
:class:`~optplan.agents.base.PolicyAgent`): before each action the loop reads
``agent.policy_version`` and copies ``agent.current_policy()`` when it changed; after the
loop each distinct policy is evaluated exactly once (batched linear solves) and
:attr:`Trace.occupancy_regret` sums each step's ``<mu* - mu^{pi_t}, r>``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import numpy as np

from .._checks import OptplanError, OptplanTypeError, check_choice, check_int
from .._progress import progress_bar
from ..agents.base import Agent, PolicyAgent
from . import engines
from .fits import agent_shape, check_agent_fits, never_ends_episodes
from .oracle import OPTIMAL_ACTION_RTOL, Oracle, solve_oracle, true_model
from .threads import one_blas_thread
from .trace import Record, Trace, episode_ended, score

__all__ = [
    "Trace",
    "run",
    "score",
    "oracle_run",
    "oracle_env_seed",
    "check_agent_fits",
    "agent_shape",
    "never_ends_episodes",
    "OPTIMAL_ACTION_RTOL",
    "ORACLE_NOISE",
]

#: ``oracle_noise=`` values of :func:`run`: the oracle run's environment seed is the agent's
#: (``"shared"``) or its own (``"independent"``).
ORACLE_NOISE = ("shared", "independent")


@one_blas_thread  # tabular products gain nothing from BLAS threads; sweeps oversubscribe
def run(
    agent: Agent,
    env,
    steps: int | None = None,
    seed: int = 0,
    *,
    episodes: int | None = None,
    criterion: str | None = None,
    stop_when_solved: bool = False,
    on_episode_end: Callable[[int, Agent], None] | None = None,
    progress: bool = False,
    engine: str = "auto",
    oracle_noise: str = "shared",
) -> Trace:
    r"""Run ``agent`` in ``env`` and score it against the true model.

    When an episode terminates or is truncated the agent gets ``done=True``, the environment
    is reset (without a seed, continuing its stream) and the run goes on.

    Parameters
    ----------
    agent : Agent
    env : gymnasium.Env
        Exposing its true model as ``env.unwrapped.mdp`` (:class:`~optplan.envs.TabularEnv`).
    steps, episodes : int, optional
        Number of time steps, or of episodes (the environment must end them): exactly one.
    seed : int, default 0
        Root of all randomness: ``SeedSequence(seed)`` spawns the environment's stream
        (``env.reset(seed=...)``) and ``agent.reset(rng)``'s generator.
    criterion : {"average", "discounted", "finite_horizon"}, optional
        How regret is measured (:mod:`.metrics`); by default the model's own (finite horizon,
        discounted when it has a discount, average otherwise).
    stop_when_solved : bool, default False
        End the run once the goal counts as solved (:func:`.metrics.time_to_solve`).
    on_episode_end : callable, optional
        ``on_episode_end(n, agent)`` after the ``n``-th episode ended (from 1) and the agent
        received its ``done=True`` update: snapshots of an agent's values over time.
    progress : bool
        A progress bar on stderr (tqdm) over the steps or the episodes (off: library calls
        print nothing; sweeps show one bar over their tasks instead); when stderr is not a
        terminal, a plain line every 10 s instead.
    engine : {"auto", "python", "compiled"}, default "auto"
        ``"python"``: the generic loop. ``"compiled"``: a compiled engine of :mod:`.engines`
        (e.g. the index agents' whole run in one numba call), with exactly the generic loop's
        results; a ``ValueError`` says why when no engine covers the run. ``"auto"``: an
        engine when one covers the run, the generic loop otherwise.
    oracle_noise : {"shared", "independent"}, default "shared"
        The oracle run's environment seed (module docstring, *Oracle run*): the agent's, so
        the reward noise of the two runs cancels where they draw alike, or a stream of its own
        (the public code's setting of bayesian-methods-tabular-rl). Pseudo-regret (from the
        true model) does not depend on it.

    Returns
    -------
    Trace

    Raises
    ------
    ValueError
        ``steps``/``episodes`` not given exactly once as positive integers, ``seed`` not a
        non-negative integer, ``criterion`` not fitting the model, ``episodes`` on an
        environment known never to end one (:func:`never_ends_episodes`), an agent built
        for other state/action/layer counts (:func:`check_agent_fits`, naming both), or
        ``oracle_noise`` not one of :data:`ORACLE_NOISE`.
    TypeError
        ``agent`` lacks the :class:`~optplan.agents.Agent` methods, ``env`` has no model or
        ``on_episode_end`` is not callable.
    RuntimeError
        The true model cannot be solved (e.g. a multichain model has no scalar gain), or no
        episode of ``episodes`` ends within ``10**7`` steps.
    """
    steps, episodes, seed = _check_run(agent, steps, episodes, seed, on_episode_end)
    check_choice("oracle_noise", oracle_noise, ORACLE_NOISE)
    mdp = true_model(env)
    _check_ends(env, episodes)
    check_agent_fits(agent, mdp)
    oracle = solve_oracle(mdp, criterion)
    env_seed, agent_rng = _streams(seed)
    oracle_env = _copy(env)
    track = _tracks_policies(agent, oracle)
    _check_progress(progress)
    compiled = engines.select(engine, agent, env, episodes, track)
    args = (agent, env, env_seed, agent_rng, steps, episodes)
    record = _drive(compiled, *args, stop_when_solved, on_episode_end, track, progress)
    if oracle_env is not None:
        oracle_seed = env_seed if oracle_noise == "shared" else oracle_env_seed(seed)
        record.oracle_rewards = _oracle_rewards(compiled, oracle_env, oracle, oracle_seed, record)
    return score(mdp, oracle, record, seed)


def _streams(seed: int):
    """``(env_seed, agent_rng)``: ``SeedSequence(seed)`` spawned into the environment's seed
    and the agent's generator."""
    env_ss, agent_ss = np.random.SeedSequence(seed).spawn(2)
    return _as_seed(env_ss), np.random.default_rng(agent_ss)


def oracle_env_seed(seed: int) -> int:
    """The oracle run's environment seed under ``oracle_noise="independent"``: the third child
    of ``SeedSequence(seed)`` (the first two are the environment's and the agent's streams,
    unchanged by spawning a third)."""
    return _as_seed(np.random.SeedSequence(seed).spawn(3)[2])


def _as_seed(ss: np.random.SeedSequence) -> int:
    return int(ss.generate_state(1, dtype=np.uint64)[0])


def _drive(
    compiled, agent, env, env_seed, agent_rng, steps, episodes, stop, on_end, track, progress
) -> Record:
    """The run's record, by the compiled engine (``None``: the generic loop), under a
    progress bar if asked."""
    bar = _bar(steps, episodes) if progress else None
    try:
        if compiled is not None:
            return compiled.loop(
                agent, env, env_seed, agent_rng, steps, Record(), bar, track, episodes=episodes,
                stop_when_solved=stop, on_episode_end=on_end,
            )  # fmt: skip
        return _loop(agent, env, env_seed, agent_rng, steps, episodes, stop, on_end, track, bar)
    finally:
        if bar is not None:
            bar.close()


def _check_run(agent, steps, episodes, seed, on_episode_end):
    """``(steps, episodes, seed)`` checked; the agent's methods and the hook's type checked."""
    if (steps is None) == (episodes is None):
        raise OptplanError(
            f"give exactly one of steps and episodes, got steps={steps!r}, episodes={episodes!r}"
        )
    if steps is not None:
        steps = check_int("steps", steps, 1)
    else:
        episodes = check_int("episodes", episodes, 1)
    seed = check_int("seed", seed, 0)
    if not isinstance(agent, Agent):
        raise OptplanTypeError(
            f"agent must implement reset, select_action and update, got {type(agent).__name__}"
        )
    if on_episode_end is not None and not callable(on_episode_end):
        raise OptplanTypeError(
            f"on_episode_end must be callable, got {type(on_episode_end).__name__}"
        )
    return steps, episodes, seed


def _check_progress(progress) -> None:
    if not isinstance(progress, bool):
        raise OptplanTypeError(f"progress must be True or False, got {progress!r}")


def _check_ends(env, episodes) -> None:
    """Refuse ``episodes=`` on an environment known never to end one."""
    if episodes is not None and never_ends_episodes(env):
        raise OptplanError(
            f"episodes={episodes} needs an environment whose episodes end, but "
            f"{type(env.unwrapped).__name__} over a continuing TabularMDP never ends one "
            "(no horizon, no max_steps, no time limit); give steps= instead, or build the "
            "environment with max_steps= (or DiscountedResets, or a FiniteHorizonMDP)"
        )


def _tracks_policies(agent, oracle) -> bool:
    """Whether the loop records the agent's policies (for the occupancy regret): discounted
    runs of an agent exposing its policy (:class:`~optplan.agents.base.PolicyAgent`)."""
    return oracle.criterion == "discounted" and isinstance(agent, PolicyAgent)


def _oracle_rewards(compiled, oracle_env, oracle, env_seed: int, record: Record) -> np.ndarray:
    """The oracle run's rewards (:func:`oracle_run`), by the engine's compiled run where it
    has one."""
    n = len(record.states)
    fast = None if compiled is None else compiled.oracle_run(oracle_env, oracle, env_seed, n)
    return oracle_run(oracle_env, oracle, env_seed, n) if fast is None else fast


def _copy(env):
    """A deep copy of ``env`` for the oracle run (so that the run leaves ``env``, and any
    wrapper recording its steps, as the agent left it), or ``None`` if it cannot be copied."""
    try:
        return copy.deepcopy(env)
    except Exception:  # an environment holding an uncopyable resource: no oracle run
        return None


def oracle_run(env, oracle: Oracle, env_seed: int, steps: int) -> np.ndarray:
    """Rewards of ``oracle``'s policy run in ``env`` for ``steps`` steps from
    ``env.reset(seed=env_seed)``, reset when an episode ends (the layer of a step as in the
    run loop). Shape ``(steps,)``."""
    policy = np.asarray(oracle.result.policy, dtype=np.intp)
    finite = oracle.criterion == "finite_horizon"
    rewards = np.empty(steps)
    state, info = env.reset(seed=env_seed)
    layer = info.get("layer", 0)
    step = env.step
    for t in range(steps):
        action = int(policy[layer, state]) if finite else int(policy[state])
        next_state, reward, terminated, truncated, info = step(action)
        rewards[t] = reward
        if terminated or truncated:
            state, info = env.reset()
            layer = info.get("layer", 0)
        else:
            layer = info.get("layer", layer + 1)
            state = next_state
    return rewards


#: Steps between two updates of a progress bar over steps (its cost stays off the step).
BAR_STRIDE = 1024


def _bar(steps: int | None, episodes: int | None):
    total, unit = (steps, "step") if steps is not None else (episodes, "episode")
    return progress_bar(total=total, unit=unit)


def _loop(
    agent,
    env,
    env_seed,
    agent_rng,
    steps,
    episodes,
    stop_when_solved,
    on_episode_end,
    track=False,
    bar=None,
) -> Record:
    """Drive the agent; the layer of a step is the environment's ``info["layer"]`` where it
    reports one, else the step's index within its episode. ``track``: record the agent's
    policy at each step (copied only when its ``policy_version`` changes)."""
    rec = Record()
    version = object()  # equal to no version
    select, update, step = agent.select_action, agent.update, env.step
    reached = False  # this episode reached the goal
    max_steps = steps if steps is not None else 10**7

    start = time.perf_counter()
    state, info = env.reset(seed=env_seed)
    layer = info.get("layer", 0)
    agent.reset(agent_rng)
    t = 0
    while t < max_steps:
        if track:
            version = _track_policy(agent, rec, version)
        action = select(state)
        next_state, reward, terminated, truncated, info = step(action)
        done = bool(terminated or truncated)
        update(state, action, reward, next_state, done)
        rec.states.append(state)
        rec.actions.append(action)
        rec.rewards.append(reward)
        rec.layers.append(layer)
        t += 1
        if bar is not None and steps is not None and t % BAR_STRIDE == 0:
            bar.update(BAR_STRIDE)
        if "goal_reached" in info:
            rec.goal_seen = True
            reached = reached or bool(info["goal_reached"])
        if done:
            ends = (episodes, stop_when_solved, on_episode_end)
            if episode_ended(rec, t, reached, agent, *ends, bar):
                break
            reached = False
            state, info = env.reset()
            layer = info.get("layer", 0)
        else:
            layer = info.get("layer", layer + 1)
            state = next_state
    else:
        if episodes is not None:
            raise RuntimeError(
                f"only {len(rec.episode_ends)} of {episodes} episodes ended within "
                f"{max_steps} steps"
            )
    rec.wall_time = time.perf_counter() - start
    if bar is not None and steps is not None:
        bar.update(t - bar.n)
    return rec


def _track_policy(agent, rec: Record, version):
    """Record the policy the agent follows at this step (copied when its version changed);
    the version now in force."""
    if agent.policy_version != version:
        version = agent.policy_version
        rec.policies.append(np.array(agent.current_policy(), dtype=float))
    rec.policy_index.append(len(rec.policies) - 1)
    return version
