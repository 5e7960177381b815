r"""UCRL2 (Jaksch, Ortner and Auer 2010) and KL-UCRL (Filippi, Cappé and Garivier 2010):
optimistic planning over confidence sets, in episodes; average reward (the papers) or, with
``criterion="discounted"``, the discounted optimistic MDP at ``discount`` (a UCRL2-style
baseline for the discounted setting of RAVI-UCB: same radii, same doubling episodes, the
optimistic MDP :class:`~optplan.problems.OptimisticPlanning` solved for the discounted
criterion instead).

Both keep counts ``N[s, a]``, ``N[s, a, s']`` and reward sums; at the start of episode ``k``
(time ``t_k``) they solve the optimistic MDP :class:`~optplan.problems.OptimisticPlanning`
(``criterion="average"`` or ``"discounted"``) on ``p_hat = N[s, a, .] / max(1, N[s, a])``
(uniform for a pair never tried, whose ball is then the whole simplex anyway) and ``r_hat`` the
empirical mean reward (or the known rewards, with no reward radius, when ``rewards`` is given),
and follow its policy until some pair's count within the episode reaches ``max(1, N_k[s, a])``
(the doubling rule). The radii (docs/sources.md §5):

- **UCRL2** (L1): ``d = sqrt(14 S log(2 A t_k / delta) / max(1, N))``, reward radius
  ``r_max sqrt(7 log(2 S A t_k / delta) / (2 max(1, N)))``; EVI accuracy ``1 / sqrt(t_k)``,
  ``delta`` fixed (Jaksch et al.; docs/sources.md "Ambiguities" 9);
- **KL-UCRL** (KL): ``KL(p_hat || q) <= C_p / max(1, N)`` with ``B = log(2 e S^2 A log t /
  delta)``, ``C_p = S (B + log(B + 1 / log t) (1 + 1 / (B + 1 / log t)))``; reward radius
  ``C_r / sqrt(max(1, N))``, ``C_r = sqrt(log(4 S A log t / delta) / 1.99)``; ``t -> max(2, t)``
  (StatisticalRL/learners ``KLUCRL.py``).

``method="conic"`` solves the optimistic MDP with CVXPY (the convex program); a solve that does
not end ``optimal`` falls back to the fast answer and is counted (:meth:`stats`).

The agents follow a deterministic policy and expose it as a one-hot ``(S, A)`` matrix
(:class:`~optplan.agents.base.PolicyAgent`; ``policy_version`` changes when an episode's plan
changes the policy).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np

from .._checks import OptplanError, as_array, check_choice, check_positive, check_real
from .._jit import njit
from .._params import Component, Param
from ..envs.kernels import play
from ..problems import OptimisticPlanning
from ..result import SOLUTION_PRESENT
from ._env import DISCOUNT_FROM_ENV, continuing_shape, env_discount, env_model
from .base import (
    CompiledAgent,
    ConicFallback,
    check_agent_mask,
    check_count,
    check_rng,
    one_hot_policy,
    state_field,
)

__all__ = ["UCRL2", "KLUCRL", "UCRLState", "act", "observe", "run"]


class UCRLState(NamedTuple):
    """The counts of UCRL2 and KL-UCRL: ``N (S, A)``, ``N_next (S, A, S)``, ``reward_sums``,
    ``nu`` (counts within the episode), ``N_k = max(1, N)`` at the episode's start, the
    episode's ``policy (S,)`` and ``clock = [t]`` (1 on the first step)."""

    N: np.ndarray
    N_next: np.ndarray
    reward_sums: np.ndarray
    nu: np.ndarray
    N_k: np.ndarray
    policy: np.ndarray
    clock: np.ndarray


@njit(inline="always")
def act(s, x, rng):  # pragma: no cover - compiled by numba
    """The episode's policy."""
    return s.policy[x]


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Count the transition; a new episode (a plan) is due when the pair's count within the
    episode reaches ``N_k`` (the doubling rule)."""
    s.N[x, a] += 1.0
    s.N_next[x, a, y] += 1.0
    s.reward_sums[x, a] += r
    s.nu[x, a] += 1.0
    s.clock[0] += 1
    return s.nu[x, a] >= s.N_k[x, a]


@njit
def run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(act, observe, s, env, steps, env_rng, agent_rng)


class _UCRL(CompiledAgent, ConicFallback, ABC):
    """Counts, episodes and the optimistic solve; subclasses give the ball and radii.

    Parameters
    ----------
    n_states, n_actions : int
    delta : float in (0, 1), default 0.05
        Confidence level of the sets.
    r_max : float > 0, default 1
        Reward range the reward radius is scaled by.
    criterion : {"average", "discounted"}, default "average"
        What the optimistic MDP is solved for.
    discount : float in (0, 1), required for ``"discounted"``
    rewards : array (S, A), optional
        Known mean rewards: used as ``r_hat`` with reward radius 0 (the confidence sets are
        then over the transitions only).
    action_mask : bool array (S, A), optional
    method : {"fast", "conic"}, default "fast"
    solver : str, optional
    """

    name = "ucrl"
    ball = "l1"
    _run = staticmethod(run)
    POLICY_CHANGES_IN_PLAN = True
    #: Bumped when an episode's plan changes the policy (:class:`~.base.PolicyAgent`).
    policy_version = 0

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        delta=0.05,
        r_max=1.0,
        criterion="average",
        discount=None,
        rewards=None,
        action_mask=None,
        method="fast",
        solver=None,
    ):
        self.n_states = check_count("n_states", n_states)
        self.n_actions = check_count("n_actions", n_actions)
        self.criterion = check_choice("criterion", criterion, ("average", "discounted"))
        if self.criterion == "discounted":
            if discount is None:
                raise OptplanError("discount is required for criterion='discounted'")
            discount = check_real("discount", discount, 0.0, 1.0, low_open=True, high_open=True)
        elif discount is not None:
            raise OptplanError(
                f"discount is for criterion='discounted', got discount={discount!r} with "
                "criterion='average'"
            )
        self.discount = discount
        if rewards is not None:
            rewards = as_array("rewards", rewards, 2)
            if rewards.shape != (self.n_states, self.n_actions):
                raise OptplanError(
                    f"rewards has shape {rewards.shape}, expected {(self.n_states, self.n_actions)}"
                )
        self.rewards = rewards
        self.delta = check_real("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        self.r_max = check_positive("r_max", r_max)
        mask = check_agent_mask(action_mask, self.n_states, self.n_actions)
        if mask.ndim != 2:
            raise OptplanError(f"{type(self).__name__} is for continuing (not layered) models")
        self.action_mask = mask
        self.init_fallback(method, solver)
        self.rng = None

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        S, A = self.n_states, self.n_actions
        self.state = UCRLState(
            N=np.zeros((S, A)), N_next=np.zeros((S, A, S)), reward_sums=np.zeros((S, A)),
            nu=np.zeros((S, A)), N_k=np.ones((S, A)),
            policy=self.action_mask.argmax(axis=1).astype(np.int64),  # until a plan succeeds
            clock=np.ones(1, dtype=np.int64),
        )  # fmt: skip
        self.episodes = 0
        self.plan_failures = 0
        self.policy_version = 0
        self.reset_fallback()
        self._new_episode()

    N = state_field("N", "Visits of each pair ``(S, A)``.")
    N_next = state_field("N_next", "Transition counts ``(S, A, S)``.")
    reward_sums = state_field("reward_sums", "Reward sums ``(S, A)``.")
    nu = state_field("nu", "Visits within the episode ``(S, A)``.")
    N_k = state_field("N_k", "``max(1, N)`` at the episode's start.")
    policy = state_field("policy", "The episode's policy ``(S,)``.")

    @property
    def t(self) -> int:
        """The time step (1 on the first)."""
        return int(self.state.clock[0])

    @t.setter
    def t(self, value: int) -> None:
        self.state.clock[0] = value

    @abstractmethod
    def radii(self, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(transition radius, reward radius)`` per pair at time ``t`` with counts ``n``."""

    def problem(self) -> OptimisticPlanning:
        """The optimistic MDP of the current counts."""
        S = self.n_states
        n = np.maximum(self.N, 1.0)
        p_hat = np.where(self.N[..., None] > 0, self.N_next / n[..., None], 1.0 / S)
        d, beta = self.radii(self.N)
        if self.rewards is None:
            r_hat = self.reward_sums / n
        else:
            r_hat, beta = self.rewards, 0.0
        return OptimisticPlanning(
            p_hat=p_hat,
            r_hat=r_hat,
            radius=d,
            reward_radius=beta,
            ball=self.ball,
            criterion=self.criterion,
            discount=self.discount,
            action_mask=self.action_mask,
        )

    def _new_episode(self) -> None:
        self.episodes += 1
        self.nu[:] = 0.0
        np.maximum(self.N, 1.0, out=self.N_k)
        problem = self.problem()
        tol = 1.0 / math.sqrt(self.t)
        res = problem.solve("fast", tol=tol)
        if self.method == "conic":
            conic = self.solve_conic(problem)
            if conic is not None and (conic.policy >= 0).all():
                res = conic
        if res.status in SOLUTION_PRESENT and res.policy is not None:
            policy = np.asarray(res.policy)
            if not np.array_equal(policy, self.policy):
                self.policy_version += 1
            self.policy[:] = policy
        else:  # keep the previous policy (before any plan: the first admissible action)
            self.plan_failures += 1
        self.last_result = res

    def current_policy(self) -> np.ndarray:
        """The episode's deterministic policy as a one-hot ``(S, A)`` matrix."""
        return one_hot_policy(self.policy, self.n_actions)

    def select_action(self, state: int) -> int:
        return int(act(self.state, state, None))  # act draws nothing: no generator to pass

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if observe(self.state, state, action, float(reward), next_state, bool(done), None):
            self._new_episode()

    def plan(self) -> None:
        self._new_episode()

    def compiled_reason(self, env) -> str | None:
        if env.ints[1]:
            return f"{type(self).__name__} is for continuing models, the environment is layered"
        return None

    def stats(self) -> dict:
        out = super().stats()
        out.update(episodes=self.episodes, plan_failures=self.plan_failures)
        return out

    def __repr__(self) -> str:
        crit = "" if self.criterion == "average" else f", discount={self.discount}"
        return (
            f"{type(self).__name__}(S={self.n_states}, A={self.n_actions}, delta={self.delta}, "
            f"method={self.method!r}{crit})"
        )


class UCRL2(_UCRL):
    """UCRL2 (Jaksch et al. 2010): L1 confidence sets, doubling episodes."""

    name = "ucrl2"
    ball = "l1"

    def radii(self, n):
        S, A, t = self.n_states, self.n_actions, self.t
        n = np.maximum(n, 1.0)
        d = np.sqrt(14.0 * S * math.log(2.0 * A * t / self.delta) / n)
        beta = self.r_max * np.sqrt(7.0 * math.log(2.0 * S * A * t / self.delta) / (2.0 * n))
        return d, beta


class KLUCRL(_UCRL):
    """KL-UCRL (Filippi et al. 2010): KL confidence sets, doubling episodes."""

    name = "kl-ucrl"
    ball = "kl"

    def radii(self, n):
        S, A = self.n_states, self.n_actions
        log_t = math.log(max(2, self.t))
        B = math.log(2.0 * math.e * S**2 * A * log_t / self.delta)
        c = B + 1.0 / log_t
        C_p = S * (B + math.log(c) * (1.0 + 1.0 / c))
        C_r = math.sqrt(math.log(4.0 * S * A * log_t / self.delta) / 1.99)
        n = np.maximum(n, 1.0)
        return C_p / n, self.r_max * C_r / np.sqrt(n)


# The subclasses take the shared constructor's parameters: show them in help(UCRL2) too.
_PARAMETERS_DOC = _UCRL.__doc__[_UCRL.__doc__.index("    Parameters") :]
for _cls in (UCRL2, KLUCRL):
    _cls.__doc__ = _cls.__doc__.rstrip() + "\n\n" + _PARAMETERS_DOC


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _builder(cls):
    def build(env, criterion, **params):
        refusal = f"{cls.name} is for continuing (average-reward) environments"
        S, A, mask = continuing_shape(env, refusal)
        return cls(S, A, action_mask=mask, **params)

    return build


def _ucrl2_discounted(env, criterion, discount, known_rewards, **params):
    S, A, mask = continuing_shape(env, "ucrl2-discounted is for continuing environments")
    discount = env_discount(env, "ucrl2-discounted", discount)
    rewards = env_model(env).R if known_rewards else None
    return UCRL2(
        S, A, criterion="discounted", discount=discount, rewards=rewards, action_mask=mask, **params
    )


_PARAMS = (
    Param("delta", "float", 0.05, "confidence level of the sets"),
    Param("r_max", "float", 1.0, "reward range the reward radius is scaled by"),
    Param("method", "str", "fast", "optimistic MDP by 'fast' (EVI) or 'conic' (CVXPY)"),
    Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
)
BUILDERS = (
    Component(
        UCRL2.name,
        _builder(UCRL2),
        _PARAMS,
        "UCRL2 (Jaksch et al.): L1 confidence sets, doubling episodes, EVI",
    ),
    Component(
        KLUCRL.name,
        _builder(KLUCRL),
        _PARAMS,
        "KL-UCRL (Filippi et al.): KL confidence sets, doubling episodes, EVI",
    ),
    Component(
        "ucrl2-discounted",
        _ucrl2_discounted,
        (
            *_PARAMS[:2],
            DISCOUNT_FROM_ENV,
            Param("known_rewards", "bool", True, "use the true mean rewards (no reward radius)"),
            *_PARAMS[2:],
        ),
        "UCRL2-style discounted optimistic planning: UCRL2's L1 radii and doubling episodes, the "
        "discounted optimistic MDP (EVI + exact finish)",
    ),
)
