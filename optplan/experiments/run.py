"""The agent-environment loop and its record, scored by exact pseudo-regret.

:func:`run` drives an :class:`~optplan.agents.Agent` through an environment that exposes its
true model (``env.mdp``, e.g. :class:`~optplan.envs.TabularEnv`) and returns a :class:`Trace`.
Regret is computed from the model after the loop, from the visited pairs, so it carries no
reward noise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..agents.base import Agent
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..problems import solve_average_reward, solve_finite_horizon

__all__ = ["Trace", "run", "OPTIMAL_ACTION_RTOL"]

#: An action counts as optimal (for :attr:`Trace.optimal_rate`) when its Q-value is within
#: ``OPTIMAL_ACTION_RTOL * (1 + max |Q|)`` of the best one: solver round-off, not a real gap.
OPTIMAL_ACTION_RTOL = 1e-9


@dataclass(frozen=True, eq=False, repr=False)
class Trace:
    """What one run recorded, with the regret against the true model.

    Attributes
    ----------
    states, actions : ndarray of int, shape (steps,)
        ``s_t`` and ``a_t``.
    rewards : ndarray of float, shape (steps,)
        The observed (possibly noisy) rewards.
    expected_rewards : ndarray of float, shape (steps,)
        ``R[s_t, a_t]`` (``R[l_t, s_t, a_t]``) of the true model.
    regret : ndarray of float, shape (steps,)
        Cumulative pseudo-regret after each step (see :func:`run`).
    optimal_rate : float
        Fraction of steps whose action is optimal in the true model (ties included).
    criterion : str
        ``"average"`` (continuing) or ``"finite_horizon"``.
    optimal_value : float
        The benchmark: the optimal gain ``g*`` (average), or ``initial @ V*_0``, the optimal
        expected episode return (finite horizon).
    layers : ndarray of int or None
        The layer ``l_t`` of each step (finite horizon only).
    steps, episodes : int
        Steps taken; episodes that ended (terminated or truncated) during the run.
    seed : int
    wall_time : float
        Seconds spent in the loop (planning the true model excluded).
    """

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    expected_rewards: np.ndarray
    regret: np.ndarray
    optimal_rate: float
    criterion: str
    optimal_value: float
    layers: np.ndarray | None
    steps: int
    episodes: int
    seed: int
    wall_time: float

    def summary(self) -> dict:
        """Scalars of the run, JSON-ready."""
        return {
            "criterion": self.criterion,
            "steps": self.steps,
            "episodes": self.episodes,
            "seed": self.seed,
            "regret": float(self.regret[-1]),
            "regret_per_step": float(self.regret[-1]) / self.steps,
            "mean_reward": float(self.rewards.mean()),
            "mean_expected_reward": float(self.expected_rewards.mean()),
            "optimal_value": self.optimal_value,
            "optimal_rate": self.optimal_rate,
            "wall_time": self.wall_time,
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Trace({s['criterion']}, steps={s['steps']}, episodes={s['episodes']}, "
            f"regret={s['regret']:.4g}, optimal_rate={s['optimal_rate']:.3f})"
        )


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        kind = "positive" if low == 1 else "non-negative"
        raise ValueError(f"{name} must be a {kind} integer, got {value!r}")
    return int(value)


def _check_solved(res, what: str) -> None:
    if not res.success:
        raise RuntimeError(
            f"cannot score the run: solving the {what} of the true model gave status "
            f"{res.status!r}: {res.message}"
        )


def _freeze(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def run(agent: Agent, env, steps: int, seed: int = 0) -> Trace:
    r"""Run ``agent`` in ``env`` for ``steps`` steps and score it against the true model.

    Episodic: when an episode terminates or is truncated the agent gets ``done=True``, the
    environment is reset (without a seed, continuing its stream) and the run goes on.

    Parameters
    ----------
    agent : Agent
    env : gymnasium.Env
        An environment exposing its true model as ``env.unwrapped.mdp`` (e.g.
        :class:`~optplan.envs.TabularEnv`).
    steps : int
        Number of time steps (positive).
    seed : int, default 0
        Root of all randomness: ``np.random.SeedSequence(seed)`` is spawned into one stream
        for the environment (``env.reset(seed=...)``) and one generator for
        ``agent.reset(rng)``, so a run is a function of ``seed`` alone.

    Returns
    -------
    Trace

    Raises
    ------
    ValueError
        If ``steps`` is not a positive or ``seed`` not a non-negative integer.
    TypeError
        If ``agent`` lacks the :class:`~optplan.agents.Agent` methods or ``env`` has no model.
    RuntimeError
        If the true model cannot be solved (e.g. a multichain model has no scalar gain).

    Notes
    -----
    Pseudo-regret uses expected rewards of the visited pairs, never the sampled ones.

    *Continuing* (``TabularMDP``, criterion ``"average"``): the step-``t`` term is
    ``g* - R[s_t, a_t]`` with ``g*`` the optimal gain of the true model (its discount is
    ignored). Under an optimal policy its expected sum is ``h(s_0) - E h(s_T)``, bounded by
    ``span(h)``; any gain gap shows up as linear growth.

    *Finite horizon* (``FiniteHorizonMDP``): the step term is the action gap
    ``V*_l(s_l) - Q*_l(s_l, a_l) >= 0``, exactly 0 for an optimal action. By the
    performance-difference lemma (telescoping ``Q*_l = R_l + P_l V*_{l+1}``, ``V*_L = 0``) its
    expected sum over an episode is ``V*_0(s_0) - V^pi_0(s_0)``, the episode's regret, for any
    (even non-Markov) policy. A truncated episode (``max_steps < L``) contributes only its
    prefix of gaps. ``V*`` is taken as ``max_a Q*`` so that optimal actions have gap 0 bit
    for bit.
    """
    steps = _check_int("steps", steps, 1)
    seed = _check_int("seed", seed, 0)
    if not isinstance(agent, Agent):
        raise TypeError(
            f"agent must implement reset, select_action and update, got {type(agent).__name__}"
        )
    mdp = getattr(getattr(env, "unwrapped", env), "mdp", None)
    if not isinstance(mdp, (TabularMDP, FiniteHorizonMDP)):
        raise TypeError(f"env must expose its true model as .mdp, got {type(env).__name__}")
    finite = isinstance(mdp, FiniteHorizonMDP)

    if finite:
        res = solve_finite_horizon(mdp)
        _check_solved(res, "finite-horizon problem")
        q = np.asarray(res.q, dtype=float)
        vstar = q.max(axis=-1)
        optimal_value = float(mdp.initial @ vstar[0])
        criterion = "finite_horizon"
    else:
        res = solve_average_reward(mdp.with_discount(None))
        _check_solved(res, "average-reward problem")
        q = np.asarray(res.q, dtype=float)
        vstar = q.max(axis=-1)
        optimal_value = float(res.gain)
        criterion = "average"
    scale = 1.0 + float(np.abs(q[np.isfinite(q)]).max())
    # Near-optimal within round-off; the Q-values of the average problem are r + P h.
    is_optimal = q >= vstar[..., None] - OPTIMAL_ACTION_RTOL * scale

    env_ss, agent_ss = np.random.SeedSequence(seed).spawn(2)
    env_seed = int(env_ss.generate_state(1, dtype=np.uint64)[0])
    agent_rng = np.random.default_rng(agent_ss)

    states: list[int] = []
    actions: list[int] = []
    rewards: list[float] = []
    layers: list[int] = []
    select, update, step = agent.select_action, agent.update, env.step
    episodes = 0
    layer = 0

    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    for _ in range(steps):
        action = select(state)
        next_state, reward, terminated, truncated, _ = step(action)
        done = bool(terminated or truncated)
        update(state, action, reward, next_state, done)
        states.append(state)
        actions.append(action)
        rewards.append(reward)
        layers.append(layer)
        if done:
            episodes += 1
            layer = 0
            state, _ = env.reset()
        else:
            layer += 1
            state = next_state
    wall_time = time.perf_counter() - start

    s = np.asarray(states, dtype=np.intp)
    a = np.asarray(actions, dtype=np.intp)
    if finite:
        l = np.asarray(layers, dtype=np.intp)
        expected = mdp.R[l, s, a]
        gaps = vstar[l, s] - q[l, s, a]
        optimal = is_optimal[l, s, a]
    else:
        l = None
        expected = mdp.R[s, a]
        gaps = optimal_value - expected
        optimal = is_optimal[s, a]

    return Trace(
        states=_freeze(s),
        actions=_freeze(a),
        rewards=_freeze(np.asarray(rewards, dtype=float)),
        expected_rewards=_freeze(np.array(expected, dtype=float)),
        regret=_freeze(np.cumsum(gaps)),
        optimal_rate=float(optimal.mean()),
        criterion=criterion,
        optimal_value=optimal_value,
        layers=None if l is None else _freeze(l),
        steps=steps,
        episodes=episodes,
        seed=seed,
        wall_time=wall_time,
    )
