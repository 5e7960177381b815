"""The agent-environment loop and its record, scored by exact regret (see :mod:`.metrics`).

:func:`run` drives an :class:`~optplan.agents.Agent` through an environment that exposes its
true model (``env.mdp``, e.g. :class:`~optplan.envs.TabularEnv`) and returns a :class:`Trace`.
Regret is computed from the model after the loop, from the visited pairs, so the pseudo-regret
carries no reward noise.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._checks import OptplanError, OptplanTypeError, check_int
from ..agents.base import Agent, PolicyAgent
from . import metrics
from .oracle import OPTIMAL_ACTION_RTOL, Oracle, solve_oracle, true_model
from .threads import one_blas_thread

__all__ = [
    "Trace",
    "run",
    "score",
    "oracle_run",
    "check_agent_fits",
    "agent_shape",
    "never_ends_episodes",
    "OPTIMAL_ACTION_RTOL",
]


def _freeze(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


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
        Cumulative pseudo-regret after each step (see :mod:`.metrics` for each criterion).
    gap_regret : ndarray of float, shape (steps,)
        Cumulative action gaps ``sum_t (max_a Q*(s_t, a) - Q*(s_t, a_t))`` with the oracle's
        ``Q*`` (average reward: ``r + P h*``, so a gap is Burnetas & Katehakis's
        ``Delta(x, a)``; episodic: the same as ``regret``). Nonnegative and free of the
        state-sequence noise of ``regret``, whose expectation differs from it by ``O(1)``
        (accelerating-ucb-indices-mdp §2.2).
    realized_regret : ndarray of float, shape (steps,)
        The same with the observed rewards: oracle's expected cumulative reward minus the
        rewards received.
    oracle_cumulative : ndarray of float, shape (steps,)
        The oracle's expected cumulative reward after each step (``g* t`` for the average
        criterion); :attr:`normalized_regret` divides by it.
    oracle_run_rewards : ndarray of float, shape (steps,), or None
        The rewards the oracle's policy received when run in the same environment from the
        same environment seed for as many steps (see :func:`run`); :attr:`draft_regret` and
        :attr:`draft_normalized_regret` use them.
    optimal_rate : float
        Fraction of steps whose action is optimal in the true model (ties included).
    criterion : str
        ``"average"``, ``"discounted"`` or ``"finite_horizon"``.
    optimal_value : float
        The optimal gain ``g*`` (average), ``initial @ V*`` (discounted), or
        ``initial @ V*_0``, the optimal expected episode return (finite horizon).
    layers : ndarray of int or None
        The layer ``l_t`` of each step (finite horizon only).
    episode_ends : ndarray of int, shape (episodes,)
        Number of steps taken when each episode ended (terminated or truncated).
    successes : ndarray of bool or None, shape (episodes,)
        Whether each finished episode reached the goal (``info["goal_reached"]`` on some step);
        ``None`` when the environment never reports a goal.
    visits : ndarray of int
        Visits per state, ``(S,)``, or per layer and state, ``(L, S)``, for finite horizon.
    steps, episodes : int
        Steps taken; episodes that ended during the run.
    seed : int
    wall_time : float
        Seconds spent in the loop (planning the true model excluded).
    stopped_early : bool
        The run stopped when the goal was solved (``stop_when_solved``).
    occupancy_regret : ndarray of float, shape (steps,), or None
        The discounted criterion with an agent that exposes its policy
        (:class:`~optplan.agents.base.PolicyAgent`): ``sum_{u <= t} <mu* - mu^{pi_u}, r>`` over
        normalized discounted occupancies from ``nu_0`` under the true model (RAVI-UCB's
        ``R_T``, :func:`.metrics.occupancy_gaps`); ``None`` otherwise.
    policy_gaps : ndarray of float, shape (policies,), or None
        ``<mu* - mu^pi, r>`` of each distinct policy the agent followed, in order.
    """

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    expected_rewards: np.ndarray
    regret: np.ndarray
    realized_regret: np.ndarray
    gap_regret: np.ndarray
    oracle_cumulative: np.ndarray
    optimal_rate: float
    criterion: str
    optimal_value: float
    layers: np.ndarray | None
    episode_ends: np.ndarray
    successes: np.ndarray | None
    visits: np.ndarray
    steps: int
    episodes: int
    seed: int
    wall_time: float
    stopped_early: bool = False
    oracle_run_rewards: np.ndarray | None = None
    occupancy_regret: np.ndarray | None = None
    policy_gaps: np.ndarray | None = None

    @property
    def normalized_regret(self) -> np.ndarray:
        """Pseudo-regret over the oracle's expected cumulative reward (``NaN`` where <= 0)."""
        return metrics.normalized_regret(self.regret, self.oracle_cumulative)

    @property
    def draft_regret(self) -> np.ndarray | None:
        """``cumsum(r_oracle - r)`` with the oracle's realized rewards from its own run on the
        same seed (bayesian-methods-tabular-rl's regret); ``None`` without that run."""
        if self.oracle_run_rewards is None:
            return None
        return metrics.cumulative_regret(self.oracle_run_rewards, self.rewards)

    @property
    def draft_normalized_regret(self) -> np.ndarray | None:
        """:attr:`draft_regret` over the oracle run's cumulative reward
        (:func:`.metrics.draft_normalized_regret`; ``NaN`` where that is not positive)."""
        if self.oracle_run_rewards is None:
            return None
        return metrics.draft_normalized_regret(self.oracle_run_rewards, self.rewards)

    @property
    def time_to_solve(self) -> int | None:
        """First episode with the goal reached in >= 10% of episodes so far (k-learning §4);
        ``None`` if never, or if the environment reports no goal."""
        if self.successes is None:
            return None
        return metrics.time_to_solve(self.successes)

    def summary(self) -> dict:
        """Scalars of the run, JSON-ready."""
        return {
            "criterion": self.criterion,
            "steps": self.steps,
            "episodes": self.episodes,
            "seed": self.seed,
            "regret": float(self.regret[-1]),
            "realized_regret": float(self.realized_regret[-1]),
            "occupancy_regret": _last(self.occupancy_regret),
            "policies": None if self.policy_gaps is None else int(self.policy_gaps.size),
            "gap_regret": float(self.gap_regret[-1]),
            "normalized_regret": float(self.normalized_regret[-1]),
            "draft_regret": _last(self.draft_regret),
            "draft_normalized_regret": _last(self.draft_normalized_regret),
            "regret_per_step": float(self.regret[-1]) / self.steps,
            "time_to_solve": self.time_to_solve,
            "goal_rate": None
            if self.successes is None
            else float(self.successes.mean())
            if self.successes.size
            else 0.0,
            "mean_reward": float(self.rewards.mean()),
            "mean_expected_reward": float(self.expected_rewards.mean()),
            "optimal_value": self.optimal_value,
            "optimal_rate": self.optimal_rate,
            "stopped_early": self.stopped_early,
            "wall_time": self.wall_time,
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Trace({s['criterion']}, steps={s['steps']}, episodes={s['episodes']}, "
            f"regret={s['regret']:.4g}, optimal_rate={s['optimal_rate']:.3f})"
        )


def _last(curve: np.ndarray | None) -> float | None:
    return None if curve is None else float(curve[-1])


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
) -> Trace:
    r"""Run ``agent`` in ``env`` and score it against the true model.

    Episodic: when an episode terminates or is truncated the agent gets ``done=True``, the
    environment is reset (without a seed, continuing its stream) and the run goes on.

    Parameters
    ----------
    agent : Agent
    env : gymnasium.Env
        An environment exposing its true model as ``env.unwrapped.mdp`` (e.g.
        :class:`~optplan.envs.TabularEnv`).
    steps : int, optional
        Number of time steps (positive). Give exactly one of ``steps`` and ``episodes``.
    seed : int, default 0
        Root of all randomness: ``np.random.SeedSequence(seed)`` is spawned into one stream
        for the environment (``env.reset(seed=...)``) and one generator for
        ``agent.reset(rng)``, so a run is a function of ``seed`` alone.
    episodes : int, optional
        Number of episodes (positive); the environment must end episodes.
    criterion : {"average", "discounted", "finite_horizon"}, optional
        How regret is measured (:mod:`.metrics`). ``None``: ``"finite_horizon"`` for a
        ``FiniteHorizonMDP``, ``"discounted"`` for a ``TabularMDP`` with a discount,
        ``"average"`` otherwise.
    stop_when_solved : bool, default False
        End the run after the episode at which the goal counts as solved
        (:func:`.metrics.time_to_solve`), e.g. DeepSea's "time to solve" runs.
    on_episode_end : callable, optional
        Called as ``on_episode_end(n, agent)`` after the ``n``-th episode ended (``n`` from 1)
        and the agent received its ``done=True`` update, i.e. once it has planned episode
        ``n + 1``: the hook for snapshots of an agent's values over time (k-learning Fig. 3).
    progress : bool
        A progress bar with ETA on stderr (tqdm), over the steps or the episodes. Off by
        default (library calls print nothing); sweeps show one bar over their tasks instead.
    engine : {"auto", "python", "compiled"}, default "auto"
        ``"python"``: the generic loop below. ``"compiled"``: the whole run of an index agent
        (MDP-UCB, OLP, MDP-DMED, MDP-PS, ``method="fast"``) on a plain
        :class:`~optplan.envs.TabularEnv` in one numba call
        (:mod:`optplan.experiments.index_compiled`), with exactly the generic loop's results;
        a ``ValueError`` says why when the run is not one it covers. ``"auto"``: compiled
        when it covers the run, the generic loop otherwise.

    Returns
    -------
    Trace

    Raises
    ------
    ValueError
        If ``steps``/``episodes`` are not given exactly once as positive integers, ``seed``
        is not a non-negative integer, ``criterion`` does not fit the model, or the agent was
        built for other state/action/layer counts than the model's
        (:func:`check_agent_fits`, naming both).
    TypeError
        If ``agent`` lacks the :class:`~optplan.agents.Agent` methods, ``env`` has no model or
        ``on_episode_end`` is not callable.
    RuntimeError
        If the true model cannot be solved (e.g. a multichain model has no scalar gain), or
        ``episodes`` is given and no episode ends within ``10**7`` steps (an environment
        known never to end one, :func:`never_ends_episodes`, is refused before the loop with
        a ``ValueError``).

    Notes
    -----
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
    ``env`` (``copy.deepcopy``, taken before the loop) for the same number of steps, from
    ``reset(seed=...)`` with the agent's environment seed, resetting when an episode ends as
    the loop does; its rewards are :attr:`Trace.oracle_run_rewards` (``None`` if ``env``
    cannot be copied). It costs one environment step per step and is not counted in
    :attr:`Trace.wall_time`.

    *Occupancy regret* (discounted criterion, an agent implementing
    :class:`~optplan.agents.base.PolicyAgent`): before each action the loop reads
    ``agent.policy_version`` and copies ``agent.current_policy()`` when it changed; after the
    loop each distinct policy is evaluated exactly once (batched linear solves) and
    :attr:`Trace.occupancy_regret` sums each step's ``<mu* - mu^{pi_t}, r>``.
    """
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
    mdp = true_model(env)
    if episodes is not None and never_ends_episodes(env):
        raise OptplanError(
            f"episodes={episodes} needs an environment whose episodes end, but "
            f"{type(env.unwrapped).__name__} over a continuing TabularMDP never ends one "
            "(no horizon, no max_steps, no time limit); give steps= instead, or build the "
            "environment with max_steps= (or DiscountedResets, or a FiniteHorizonMDP)"
        )
    check_agent_fits(agent, mdp)
    oracle = solve_oracle(mdp, criterion)
    env_ss, agent_ss = np.random.SeedSequence(seed).spawn(2)
    env_seed = int(env_ss.generate_state(1, dtype=np.uint64)[0])
    agent_rng = np.random.default_rng(agent_ss)
    oracle_env = _copy(env)
    track = oracle.criterion == "discounted" and isinstance(agent, PolicyAgent)
    if not isinstance(progress, bool):
        raise OptplanTypeError(f"progress must be True or False, got {progress!r}")
    compiled = _compiled_engine(engine, agent, env, episodes, track)
    bar = _bar(steps, episodes) if progress else None
    try:
        if compiled is not None:
            record = compiled.compiled_loop(agent, env, env_seed, agent_rng, steps, _Record(), bar)
        else:
            stops = (stop_when_solved, on_episode_end)
            record = _loop(agent, env, env_seed, agent_rng, steps, episodes, *stops, track, bar)
    finally:
        if bar is not None:
            bar.close()
    if oracle_env is not None:
        n = len(record.states)
        fast = (
            None
            if compiled is None
            else compiled.compiled_oracle_run(oracle_env, oracle, env_seed, n)
        )
        record.oracle_rewards = (
            oracle_run(oracle_env, oracle, env_seed, n) if fast is None else fast
        )
    return score(mdp, oracle, record, seed)


def _compiled_engine(engine, agent, env, episodes, track):
    """The module :mod:`.index_compiled` when ``engine`` selects the compiled loop for this run
    (``"auto"``: when it covers it), else ``None``."""
    if engine == "python":
        return None
    if engine not in ("auto", "compiled"):
        raise OptplanError(f'engine must be "auto", "python" or "compiled", got {engine!r}')
    from . import index_compiled

    reason = index_compiled.compiled_reason(agent, env, episodes, track)
    if reason is None:
        return index_compiled
    if engine == "compiled":
        raise OptplanError(f'engine="compiled" does not cover this run: {reason}')
    return None


#: Gymnasium wrappers that never end an episode themselves (what ``gymnasium.make`` adds).
_PASSTHROUGH_WRAPPERS = frozenset({"OrderEnforcing", "PassiveEnvChecker", "EnvChecker"})


def never_ends_episodes(env) -> bool:
    """Whether ``env`` is known never to end an episode: a :class:`~optplan.envs.TabularEnv`
    (or a subclass that keeps its ``step``) over a continuing ``TabularMDP`` with
    ``max_steps=None``, under no wrapper other than Gymnasium's pass-through checkers (a
    ``TimeLimit`` with a limit, :class:`~optplan.envs.DiscountedResets` or any unknown
    wrapper may end episodes, so ``False``). Environments it cannot vouch for give ``False``:
    :func:`run` then relies on its step limit."""
    from ..envs import TabularEnv
    from ..mdp import TabularMDP

    inner = env
    while hasattr(inner, "env") and inner is not getattr(inner, "unwrapped", inner):
        name = type(inner).__name__
        limited = name == "TimeLimit" and getattr(inner, "_max_episode_steps", None) is not None
        if limited or (name != "TimeLimit" and name not in _PASSTHROUGH_WRAPPERS):
            return False
        inner = inner.env
    return (
        isinstance(inner, TabularEnv)
        and type(inner).step is TabularEnv.step
        and inner.max_steps is None
        and isinstance(inner.mdp, TabularMDP)
    )


def agent_shape(agent) -> tuple[int | None, int | None, int | None | str]:
    """``(n_states, n_actions, n_layers)`` an agent was built for, as far as it says.

    Read from ``agent.n_states`` / ``agent.n_actions`` / ``agent.n_layers``, else from the
    model it holds (``agent.mdp``, e.g. :class:`~optplan.agents.OracleAgent`), else from its
    layer clock. ``None`` where the agent does not say; ``n_layers`` is ``"continuing"`` when
    the agent is known to be built for a continuing model.
    """
    from ..mdp import FiniteHorizonMDP, TabularMDP

    def count(name):
        value = getattr(agent, name, None)
        return (
            value if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None
        )

    S, A, L = count("n_states"), count("n_actions"), count("n_layers")
    model = getattr(agent, "mdp", None)
    if isinstance(model, (TabularMDP, FiniteHorizonMDP)):
        S = model.n_states if S is None else S
        A = model.n_actions if A is None else A
        if L is None:
            L = model.horizon if isinstance(model, FiniteHorizonMDP) else "continuing"
    if L is None:
        clock = getattr(agent, "_clock", getattr(agent, "clock", None))
        layers = getattr(clock, "n_layers", None)
        L = layers if isinstance(layers, (int, np.integer)) else None
    return S, A, L


def check_agent_fits(agent, mdp) -> None:
    """Refuse an agent built for another model size than ``mdp``'s, naming both.

    Compares :func:`agent_shape` with the model's states, actions and layers (what the agent
    does not state is not compared).

    Raises
    ------
    ValueError
        If the state count, the action count or the layer count differ, or a layered agent
        meets a continuing model (or the reverse).
    """
    from ..mdp import FiniteHorizonMDP

    S, A, L = agent_shape(agent)
    env_L = mdp.horizon if isinstance(mdp, FiniteHorizonMDP) else "continuing"
    wrong = []
    if S is not None and S != mdp.n_states:
        wrong.append("n_states")
    if A is not None and A != mdp.n_actions:
        wrong.append("n_actions")
    if L is not None and L != env_L:
        wrong.append("n_layers")
    if not wrong:
        return

    def describe(S, A, L):
        layers = "continuing" if L == "continuing" else f"n_layers={L}"
        return f"n_states={S}, n_actions={A}, {layers}"

    label = f" {mdp.name!r}" if mdp.name else ""
    own = getattr(getattr(agent, "mdp", None), "name", "")
    own = f" (its model {own!r})" if own else ""
    raise OptplanError(
        f"agent {type(agent).__name__} does not fit the environment: {' and '.join(wrong)} "
        f"differ. The agent was built for {describe(S, A, L)}{own}; the environment's "
        f"model{label} has {describe(mdp.n_states, mdp.n_actions, env_L)}. Build the agent "
        f"for this environment (e.g. from its env.unwrapped.mdp)"
    )


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


@dataclass
class _Record:
    """What the loop saw, before scoring."""

    states: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    layers: list = field(default_factory=list)
    episode_ends: list = field(default_factory=list)
    successes: list = field(default_factory=list)
    goal_seen: bool = False
    stopped_early: bool = False
    wall_time: float = 0.0
    oracle_rewards: np.ndarray | None = None
    #: The distinct policies the agent followed (copies), and each step's index into them.
    policies: list = field(default_factory=list)
    policy_index: list = field(default_factory=list)


#: Steps between two updates of a progress bar over steps (its cost stays off the step).
BAR_STRIDE = 1024


def _bar(steps: int | None, episodes: int | None):
    from tqdm.auto import tqdm

    total, unit = (steps, "step") if steps is not None else (episodes, "episode")
    return tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


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
) -> _Record:
    """Drive the agent; the layer of a step is the environment's ``info["layer"]`` where it
    reports one, else the step's index within its episode. ``track``: record the agent's
    policy at each step (copied only when its ``policy_version`` changes)."""
    rec = _Record()
    version = object()  # equal to no version
    select, update, step = agent.select_action, agent.update, env.step
    reached = False  # this episode reached the goal
    solved_count = 0
    max_steps = steps if steps is not None else 10**7

    start = time.perf_counter()
    state, info = env.reset(seed=env_seed)
    layer = info.get("layer", 0)
    agent.reset(agent_rng)
    t = 0
    while t < max_steps:
        if track:
            if agent.policy_version != version:
                version = agent.policy_version
                rec.policies.append(np.array(agent.current_policy(), dtype=float))
            rec.policy_index.append(len(rec.policies) - 1)
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
            rec.episode_ends.append(t)
            rec.successes.append(reached)
            solved_count += reached
            reached = False
            n_done = len(rec.episode_ends)
            if bar is not None and episodes is not None:
                bar.update(1)
            if on_episode_end is not None:
                on_episode_end(n_done, agent)
            if episodes is not None and n_done >= episodes:
                break
            if (
                stop_when_solved
                and rec.goal_seen
                and solved_count >= metrics.SOLVE_THRESHOLD * n_done * (1 - 1e-12)
            ):
                rec.stopped_early = True
                break
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


def score(mdp, oracle: Oracle, rec: _Record, seed: int) -> Trace:
    """Regret of a recorded run against the true model's oracle (see :func:`run`)."""
    s = np.asarray(rec.states, dtype=np.intp)
    a = np.asarray(rec.actions, dtype=np.intp)
    n = s.size
    q, vstar = oracle.q, oracle.vstar
    if oracle.criterion == "finite_horizon":
        l = np.asarray(rec.layers, dtype=np.intp)
        expected = mdp.R[l, s, a]
        gaps = vstar[l, s] - q[l, s, a]
        optimal = oracle.is_optimal[l, s, a]
        oracle_rewards = metrics.oracle_layer_rewards(mdp, oracle.result.policy)[l]
        regret = np.cumsum(gaps)
        visits = np.zeros((mdp.horizon, mdp.n_states), dtype=np.int64)
        np.add.at(visits, (l, s), 1)
    else:
        l = None
        expected = mdp.R[s, a]
        optimal = oracle.is_optimal[s, a]
        if oracle.criterion == "average":
            oracle_rewards = np.full(n, oracle.optimal_value)
        else:
            # The oracle restarts from the initial distribution whenever the environment is
            # reset (truncated episodes): index it by the step within the episode.
            k = np.asarray(rec.layers, dtype=np.intp)
            oracle_rewards = metrics.oracle_step_rewards(
                mdp, oracle.result.policy, int(k.max()) + 1
            )[k]
        regret = metrics.cumulative_regret(oracle_rewards, expected)
        gaps = vstar[s] - q[s, a]
        visits = np.bincount(s, minlength=mdp.n_states).astype(np.int64)
    rewards = np.asarray(rec.rewards, dtype=float)
    occupancy, policy_gaps = None, None
    if rec.policies and oracle.criterion == "discounted":
        policy_gaps = metrics.occupancy_gaps(mdp, np.stack(rec.policies), oracle.optimal_value)
        occupancy = metrics.occupancy_regret(policy_gaps, rec.policy_index)

    return Trace(
        states=_freeze(s),
        actions=_freeze(a),
        rewards=_freeze(rewards),
        expected_rewards=_freeze(np.array(expected, dtype=float)),
        regret=_freeze(regret),
        realized_regret=_freeze(metrics.cumulative_regret(oracle_rewards, rewards)),
        gap_regret=_freeze(np.cumsum(gaps)),
        oracle_cumulative=_freeze(np.cumsum(oracle_rewards)),
        optimal_rate=float(optimal.mean()),
        criterion=oracle.criterion,
        optimal_value=oracle.optimal_value,
        layers=None if l is None else _freeze(l),
        episode_ends=_freeze(np.asarray(rec.episode_ends, dtype=np.int64)),
        successes=_freeze(np.asarray(rec.successes, dtype=bool)) if rec.goal_seen else None,
        visits=_freeze(visits),
        steps=n,
        episodes=len(rec.episode_ends),
        seed=seed,
        wall_time=rec.wall_time,
        stopped_early=rec.stopped_early,
        oracle_run_rewards=None if rec.oracle_rewards is None else _freeze(rec.oracle_rewards),
        occupancy_regret=None if occupancy is None else _freeze(occupancy),
        policy_gaps=None if policy_gaps is None else _freeze(policy_gaps),
    )
