"""The record of one run and its score: :class:`Trace` (what :func:`~optplan.experiments.run`
returns), :class:`Record` (what a loop saw) and :func:`score` (the regret against the true
model, see :mod:`.metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import metrics
from .oracle import Oracle

__all__ = ["Trace", "Record", "score", "episode_ended"]


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
        same environment seed (its own seed with ``oracle_noise="independent"``) for as many
        steps (see :func:`run`); :attr:`draft_regret` and
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
    lower_bound : float or None
        The average criterion on an ergodic model: Burnetas & Katehakis's ``C(P)``
        (:class:`~optplan.problems.regret_lower_bound.RegretLowerBound`, the mean rewards
        known), the coefficient every uniformly fast agent's ``Regret(T) / ln T`` is at least
        in the limit; ``None`` elsewhere, with the reason in ``lower_bound_note``.
    lower_bound_note : str
        Why ``lower_bound`` is ``None`` (empty when it is set, or for other criteria).
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
    lower_bound: float | None = None
    lower_bound_note: str = ""

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
    def lower_bound_ratio(self) -> np.ndarray | None:
        """``regret[t - 1] / (C(P) ln t)`` after each step ``t`` (NaN at ``t = 1``): tends to 1
        for an asymptotically optimal agent; ``None`` without a positive :attr:`lower_bound`
        (:func:`.metrics.lower_bound_ratio`)."""
        return metrics.lower_bound_ratio(self.regret, self.lower_bound)

    @property
    def gap_lower_bound_ratio(self) -> np.ndarray | None:
        """:attr:`lower_bound_ratio` of :attr:`gap_regret` (the same limit, without the
        state-sequence noise of the pseudo-regret)."""
        return metrics.lower_bound_ratio(self.gap_regret, self.lower_bound)

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
            "lower_bound": self.lower_bound,
            "lower_bound_ratio": _last(self.lower_bound_ratio),
            "gap_lower_bound_ratio": _last(self.gap_lower_bound_ratio),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Trace({s['criterion']}, steps={s['steps']}, episodes={s['episodes']}, "
            f"regret={s['regret']:.4g}, optimal_rate={s['optimal_rate']:.3f})"
        )


def _last(curve: np.ndarray | None) -> float | None:
    return None if curve is None else float(curve[-1])


@dataclass
class Record:
    """What the loop saw, before scoring."""

    states: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    layers: list = field(default_factory=list)
    episode_ends: list = field(default_factory=list)
    successes: list = field(default_factory=list)
    goal_seen: bool = False
    #: Episodes that reached the goal.
    solved: int = 0
    stopped_early: bool = False
    wall_time: float = 0.0
    oracle_rewards: np.ndarray | None = None
    #: The distinct policies the agent followed (copies), and each step's index into them.
    policies: list = field(default_factory=list)
    policy_index: list = field(default_factory=list)


def score(mdp, oracle: Oracle, rec: Record, seed: int) -> Trace:
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
    bound, note = None, ""
    if oracle.criterion == "average":
        bound, note = metrics.regret_lower_bound(mdp)
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
        lower_bound=bound,
        lower_bound_note=note,
    )


def episode_ended(
    rec: Record, t: int, reached: bool, agent, episodes, stop_when_solved, on_episode_end, bar
) -> bool:
    """Record the episode that ended at step ``t`` (``reached``: it reached the goal) and call
    the hook; whether the run stops here (the episodes done, or the goal solved)."""
    rec.episode_ends.append(t)
    rec.successes.append(reached)
    rec.solved += reached
    n_done = len(rec.episode_ends)
    if bar is not None and episodes is not None:
        bar.update(1)
    if on_episode_end is not None:
        on_episode_end(n_done, agent)
    if episodes is not None and n_done >= episodes:
        return True
    if (
        stop_when_solved
        and rec.goal_seen
        and rec.solved >= metrics.SOLVE_THRESHOLD * n_done * (1 - 1e-12)
    ):
        rec.stopped_early = True
        return True
    return False
