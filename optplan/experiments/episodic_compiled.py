r"""The compiled run of the episodic posterior agents, K-learning, the episodic PSRL, UBE and
count-bonus agents, with the generic loop's results **exactly**.

Both agents plan once per episode, at its start (:meth:`~optplan.agents.KLearning.plan`: the
temperature and K-values, or a posterior draw and backward induction), and between two plans
act from that plan and count. The engine plays each episode's steps in one compiled call
(:mod:`._episode_kernels`: action, environment step, posterior update, record) and makes every
plan with the agent's own ``plan()``, so the plans are the generic loop's by construction
and the steps are the same operations on the same generators; PSRL's compiled plan (the
function its ``plan()`` calls, :func:`optplan.agents._layered_kernels.psrl_plan`) runs at the
end of the episode's call instead, when its reward posterior needs no NumPy. Episode ends are
the generic loop's own bookkeeping (:func:`.trace.episode_ended`: successes,
``on_episode_end``, ``episodes``, ``stop_when_solved``), and the environment is reset by its
own ``reset``. It is a row of :data:`optplan.experiments.engines.RUN_ENGINES`; the generic
loop stays the reference (``tests/test_engines_exact_episodic.py`` compares the two). What it
covers:

- the agent is an instance of exactly :class:`~optplan.agents.KLearning` (any temperature,
  bonus, method: the plan is the agent's), :class:`~optplan.agents.PSRL`, or the episodic
  (``n_layers`` set) :class:`~optplan.agents.UBE` (its Thompson action drawn in the episode
  kernel on the agent's generator) or :class:`~optplan.agents.CountBonus`, not a subclass
  (the mean-model agents re-plan the layers the episode visited, as their ``update`` does);
- the environment is exactly :class:`~optplan.envs.DeepSea`, or a
  :class:`~optplan.envs.TabularEnv` over a :class:`~optplan.mdp.FiniteHorizonMDP` (no wrapper)
  whose class keeps ``TabularEnv``'s ``reset``, ``step`` and reward, without ``max_steps``
  (RiverSwim-episodic, a finite-horizon model file);
- runs of ``steps`` or ``episodes`` (with ``stop_when_solved`` and ``on_episode_end``), at most
  ``10**7`` steps;
- numba is installed, and its ``Generator.random`` and ``standard_normal`` give NumPy's
  numbers (:func:`._segment_kernels.self_check`).

The oracle run of :attr:`Trace.draft_regret` is compiled too (same draws).

The speed-up is the per-step Python overhead (the agent's action and update, the environment's
step, the record); the plans cost what they cost in the generic loop (compiled there too for
PSRL, K-learning at tau* or the schedule and the episodic UBE:
:mod:`optplan.agents._layered_kernels`, :mod:`optplan.agents._layered_ube_kernels`).
``optplan bench agents`` measures both loops.
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import OptplanError
from ..agents import PSRL, KLearning
from ..agents import _layered_kernels as LK
from ..agents._mean_model import MeanModelAgent
from ..agents.ube import UBE, CountBonus
from ..envs import DeepSea, TabularEnv
from ..mdp import FiniteHorizonMDP
from . import _episode_kernels as K
from . import _segment_kernels
from .trace import episode_ended

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "AGENT_CLASSES",
           "EPISODES"]  # fmt: skip

#: :func:`compiled_loop` takes ``episodes``, ``stop_when_solved`` and ``on_episode_end``.
EPISODES = True

#: The agent classes this engine covers (exact types).
AGENT_CLASSES = (KLearning, PSRL, UBE, CountBonus)

#: Steps between two updates of a progress bar over steps.
_BAR_STRIDE = 1024

#: The generic loop's cap on the steps of a run counted in episodes.
MAX_STEPS = 10**7


def _env_reason(env) -> str | None:
    cls = type(env)
    if cls is DeepSea:
        return None
    if not isinstance(env, TabularEnv):
        return (
            f"the environment is a {cls.__name__}, not DeepSea or a TabularEnv (wrappers take "
            "the generic loop)"
        )
    if cls.step is not TabularEnv.step or cls.reset is not TabularEnv.reset:
        return f"{cls.__name__} has its own step or reset"
    if cls._reward is not TabularEnv._reward:
        return f"{cls.__name__} has its own reward law"
    if not isinstance(env.mdp, FiniteHorizonMDP):
        return "the model is not a FiniteHorizonMDP"
    if env.max_steps is not None:
        return "the environment truncates episodes (max_steps)"
    return None


def _agent_reason(agent) -> str | None:
    cls = type(agent)
    if cls not in AGENT_CLASSES:
        names = ", ".join(c.__name__ for c in AGENT_CLASSES)
        return f"{cls.__name__} is not one of {names} (subclasses take the generic loop)"
    if isinstance(agent, MeanModelAgent) and agent.n_layers is None:
        return f"the {cls.__name__} agent is continuing (n_layers=None)"
    return None


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    reason = _agent_reason(agent) or _env_reason(env)
    if reason is not None:
        return reason
    if track:
        return "the run tracks the agent's policies"
    if episodes is not None and episodes * env.mdp.horizon > MAX_STEPS:
        return f"{episodes} episodes of {env.mdp.horizon} steps exceed {MAX_STEPS} steps"
    if not K.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not _segment_kernels.self_check():
        return "numba's random draws differ from numpy's on this installation"
    return None


class _Env:
    """The environment's arrays for the episode kernel (the unused kind's are placeholders of
    the right types), and how to leave the environment as its own steps would."""

    def __init__(self, env):
        self.env = env
        self.deepsea = type(env) is DeepSea
        mdp = env.mdp
        L, S, A = mdp.horizon, mdp.n_states, mdp.n_actions
        self.R = np.array(mdp.R, dtype=float, order="C", copy=True)
        if self.deepsea:
            self.kind = K.DEEPSEA
            self.cdf = np.zeros((1, 1, 1, 1))
            self.mask = np.ones((1, 1, 1), dtype=bool)
            self.goals = np.zeros(1, dtype=bool)
            self.mapping = np.array(env.mapping, dtype=np.int64, order="C", copy=True)
            self.noise_mask = np.array(env._noise_mask, dtype=bool, order="C", copy=True)
            self.windy, self.size = not env.deterministic, int(env.size)
            self.reports_goals = True
        else:
            self.kind = K.TABULAR
            self.cdf = np.array(env._cdf, dtype=float, order="C", copy=True)
            self.mask = np.array(mdp.action_mask, dtype=bool, order="C", copy=True)
            goals = env._goals
            self.reports_goals = goals is not None
            self.goals = np.zeros(S, dtype=bool) if goals is None else np.array(goals, dtype=bool)
            self.mapping = np.zeros((1, 1), dtype=np.int64)
            self.noise_mask = np.zeros((1, 1), dtype=bool)
            self.windy, self.size = False, S
        self.noise = float(env.reward_noise)
        self.initial_cdf = np.array(env._initial_cdf, dtype=float, order="C", copy=True)
        self.L, self.A = L, A

    def start(self) -> None:
        """The environment's state after its ``reset()`` (the draw is the kernel's)."""
        env = self.env
        if self.deepsea:
            env._row, env._column, env._running = 0, 0, True
        env._t, env._done = 0, False

    def leave(self, played: int, state: int) -> None:
        """The environment's state after ``played`` steps of the current episode."""
        env, ended = self.env, played >= self.L
        if self.deepsea:
            env._row, env._column, env._running = played, int(state), not ended
        else:
            env._t, env._state, env._done = played, int(state), ended


def _agent_arrays(agent, L: int, S: int):
    """``(act, cdf, policy)`` of the current plan for the kernel."""
    if type(agent) is KLearning:
        return K.BOLTZMANN, np.ascontiguousarray(agent._cdf, dtype=float), _NO_POLICY
    act = K.THOMPSON if type(agent) is UBE else K.POLICY
    return act, _NO_CDF, np.ascontiguousarray(agent.policy, dtype=np.int64)


def _thompson_arrays(agent):
    """``(forced, q, sqrt(u), zeta, eps scratch)`` of the UBE's current plan (placeholders for
    the other agents)."""
    if type(agent) is not UBE:
        return _NO_POLICY, _NO_Q, _NO_Q, 0.0, _NO_DRAWS
    return (
        np.ascontiguousarray(agent._forced, dtype=np.int64),
        np.ascontiguousarray(agent.q, dtype=float),
        np.ascontiguousarray(agent._sqrt_u, dtype=float),
        float(agent.zeta),
        np.empty(agent.n_actions),
    )


_NO_POLICY = np.zeros((1, 1), dtype=np.int64)
_NO_CDF = np.zeros((1, 1, 1))
_NO_DRAWS = np.zeros(0)
_NO_Q = np.zeros((1, 1, 1))


class _Buffers:
    """The record's arrays, grown by doubling (a run counted in episodes may stop early)."""

    def __init__(self, capacity: int):
        self.states = np.empty(capacity, dtype=np.int64)
        self.actions = np.empty(capacity, dtype=np.int64)
        self.rewards = np.empty(capacity)
        self.layers = np.empty(capacity, dtype=np.int64)

    def fit(self, need: int) -> None:
        size = self.states.shape[0]
        if need <= size:
            return
        size = max(need, 2 * size)
        for name in ("states", "actions", "rewards", "layers"):
            old = getattr(self, name)
            new = np.empty(size, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)


def compiled_loop(agent, env, env_seed: int, agent_rng, steps, record, bar=None, *,
                  episodes=None, stop_when_solved=False, on_episode_end=None):  # fmt: skip
    """Fill ``record`` (a :class:`~optplan.experiments.trace.Record`) as the generic loop
    would; the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    E = _Env(env)
    L = E.L
    max_steps = steps if steps is not None else MAX_STEPS
    capacity = steps if steps is not None else min(episodes * L, MAX_STEPS)
    buf = _Buffers(min(capacity, 1 << 16))
    post = agent.posterior
    det = bool(post.deterministic)
    mean_model = isinstance(agent, MeanModelAgent)
    ends = (episodes, stop_when_solved, on_episode_end)
    fused = _fused_plan(agent)
    t = 0
    shown = 0
    reset = False  # the environment's reset() is due, the first thing of the next episode
    while t < max_steps:
        n = min(L, max_steps - t)
        buf.fit(t + n)
        act, cdf, policy = _agent_arrays(agent, L, E.A)
        uniforms = agent.rng.random(n) if act == K.BOLTZMANN else _NO_DRAWS
        if fused is not None:  # PSRL: the episode and the next plan in one call
            work, scalars, alpha0 = fused
            Q, new_policy = np.empty(work.shape), np.empty(work.shape[:2], dtype=np.intp)
            status, played, state, reached, action, nxt = K.psrl_episode(
                n, int(state), reset, E.initial_cdf, policy, E.kind, env.np_random, E.R,
                E.cdf, E.mask, E.noise, E.goals, E.mapping, E.noise_mask, E.windy, E.size,
                post.counts, post.reward_sums, post.next_counts, buf.states, buf.actions,
                buf.rewards, buf.layers, t, agent.rng, *scalars, work.mean, work.var, alpha0,
                work.R, work.P, work.V, Q, new_policy,
            )  # fmt: skip
        else:
            status, played, state, reached, action, nxt = K.episode(
                act, n, int(state), reset, E.initial_cdf, cdf, policy, uniforms, E.kind,
                env.np_random, E.R, E.cdf, E.mask, E.noise, E.goals, E.mapping, E.noise_mask,
                E.windy, E.size, post.counts, post.reward_sums, post.next_counts, det,
                buf.states, buf.actions, buf.rewards, buf.layers, t, agent.rng,
                *_thompson_arrays(agent),
            )  # fmt: skip
        t += played
        if mean_model:  # MeanModelAgent.update's counters: steps, deepest layer updated
            agent.steps += played
            agent._top = max(agent._top, played - 1)
        if played and E.reports_goals:
            record.goal_seen = True
        if status != K.DONE:
            _stop(agent, env, E, status, played, int(state), int(action), int(nxt))
        E.leave(played, state)
        if played < L:  # the run's steps end within this episode
            agent.clock.layer = played
            break
        agent.clock.tick(True)
        agent.episode += 1
        if mean_model:
            agent.plan(agent._top)
            agent._top = -1
        elif fused is not None:  # planned in the episode's call, as PSRL.plan() plans
            agent.Q, agent.policy = Q, new_policy
        else:
            agent.plan()
        if bar is not None and steps is not None and t - shown >= _BAR_STRIDE:
            bar.update(t - shown)
            shown = t
        if episode_ended(record, t, bool(reached), agent, *ends, bar):
            break
        if t < max_steps:  # the next call resets the environment
            reset = True
            E.start()
        else:
            state, _ = env.reset()
    else:
        _too_few_episodes(record, episodes, max_steps)
    return finish_episodes(record, buf, t, start, bar, steps)


def _too_few_episodes(record, episodes, max_steps: int) -> None:
    """The generic loop's error when a run counted in episodes hit its step cap first."""
    if episodes is not None:
        raise RuntimeError(
            f"only {len(record.episode_ends)} of {episodes} episodes ended within {max_steps} steps"
        )


def finish_episodes(record, buf, t: int, start: float, bar, steps):
    """The end of an episodic engine's run: the record's arrays (the buffers' first ``t``
    steps), its wall time since ``start`` and the progress bar's last update."""
    record.states = buf.states[:t]
    record.actions = buf.actions[:t]
    record.rewards = buf.rewards[:t]
    record.layers = buf.layers[:t]
    record.wall_time = time.perf_counter() - start
    if bar is not None and steps is not None:
        bar.update(t - bar.n)
    return record


def _fused_plan(agent):
    """``(work, scalars, alpha0)`` of a PSRL agent whose compiled plan
    (:func:`optplan.agents._layered_kernels.psrl_plan`) can run inside the episode's call (the
    reward posterior needs no NumPy: one scalar ``sigma``, a proper prior), else ``None``."""
    if type(agent) is not PSRL or getattr(agent, "_work", None) is None:
        return None
    post = agent.posterior
    scalars = LK.psrl_scalars(post, agent._work)
    if scalars[0] == LK.GIVEN:
        return None
    return agent._work, scalars, float(post.transition_prior)


def _stop(agent, env, E, status, played, state, action, nxt):
    """Raise the error the generic loop raises at the step that stopped an episode."""
    if status == K.INADMISSIBLE:
        E.leave(played, state)
        raise OptplanError(f"action {action} is not admissible in state {state} at layer {played}")
    # CONTRADICTED: the environment made its step; the posterior's update raises
    E.leave(played + 1, nxt)
    agent.clock.layer = played
    agent.posterior.update(played, state, action, 0.0, nxt)
    raise RuntimeError("the deterministic prior's contradiction did not raise")  # unreachable


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """:func:`~optplan.experiments.run.oracle_run` compiled (the oracle's policy played by the
    episode kernel, its posterior arrays thrown away), for the environments
    :func:`compiled_reason` accepts; ``None`` for others (the caller runs the generic one)."""
    if _env_reason(env) is not None or oracle.criterion != "finite_horizon":
        return None
    if not (K.AVAILABLE and _segment_kernels.self_check()):
        return None
    policy = np.ascontiguousarray(oracle.result.policy, dtype=np.int64)
    state, _ = env.reset(seed=env_seed)
    E = _Env(env)
    L, S, A = E.L, env.mdp.n_states, E.A
    counts, sums, nexts = np.zeros((L, S, A)), np.zeros((L, S, A)), np.zeros((L, S, A, S))
    buf = _Buffers(steps)
    status, t, played, state = K.policy_run(
        steps, int(state), E.initial_cdf, policy, E.kind, env.np_random, E.R, E.cdf, E.mask,
        E.noise, E.goals, E.mapping, E.noise_mask, E.windy, E.size, counts, sums, nexts,
        buf.states, buf.actions, buf.rewards, buf.layers,
    )  # fmt: skip
    if status != K.DONE:  # the oracle's policy takes admissible actions
        raise RuntimeError(f"the oracle's policy stopped at step {t} (status {status})")
    E.leave(played, state)
    if played == L:  # the last episode ended: the environment is reset, as after every one
        env.reset()
    return buf.rewards[:steps]
