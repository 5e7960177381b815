"""Reference agents: uniform random play and the optimal policy of the true model.

They bracket every learning agent: an agent's regret should grow slower than
:class:`RandomAgent`'s (linear) and cannot beat :class:`OracleAgent`'s (bounded).
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanTypeError
from .._params import Component
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..problems.criteria import planning_problem, resolve_criterion
from ..result import PlanResult
from ._env import env_model, env_shape
from .base import LayerClock, check_agent_mask, check_count, check_rng, one_hot_policy

__all__ = ["RandomAgent", "OracleAgent"]


class RandomAgent:
    """Play uniformly at random among the admissible actions of the current state.

    Parameters
    ----------
    n_states, n_actions : int
        ``S`` and ``A``.
    action_mask : array_like of bool, shape (S, A) or (L, S, A), optional
        Admissible actions; all admissible if omitted. With a layered mask the agent counts
        the steps since :meth:`reset` or the last ``done`` to know its layer.
    """

    def __init__(self, n_states: int, n_actions: int, *, action_mask=None) -> None:
        S = check_count("n_states", n_states)
        A = check_count("n_actions", n_actions)
        mask = check_agent_mask(action_mask, S, A)
        self.n_states = S
        self.n_actions = A
        self.action_mask = mask
        self._layered = mask.ndim == 3
        # Admissible actions first, in index order: entry k of row s is the k-th admissible one.
        self._actions = np.argsort(~mask, axis=-1, kind="stable")
        self._counts = mask.sum(axis=-1)
        self._rng: np.random.Generator | None = None
        self._clock = LayerClock(len(mask) if self._layered else None)
        #: The policy never changes (:class:`~optplan.agents.base.PolicyAgent`).
        self.policy_version = 0

    def current_policy(self) -> np.ndarray:
        """Uniform over the admissible actions, ``(S, A)`` or ``(L, S, A)``."""
        return self.action_mask / self._counts[..., None]

    @classmethod
    def for_mdp(cls, mdp: TabularMDP | FiniteHorizonMDP) -> RandomAgent:
        """A random agent with the sizes and admissible actions of ``mdp``."""
        return cls(mdp.n_states, mdp.n_actions, action_mask=mdp.action_mask)

    def reset(self, rng: np.random.Generator) -> None:
        """Take the run's generator; the agent learns nothing, so there is nothing to forget."""
        self._rng = check_rng(rng)
        self._clock.reset()

    def select_action(self, state: int) -> int:
        """A uniform draw from the admissible actions of ``state``."""
        if self._rng is None:
            raise RuntimeError("call reset(rng) before select_action()")
        if self._layered:
            layer = self._clock.current()
            k = self._rng.integers(self._counts[layer, state])
            return int(self._actions[layer, state, k])
        return int(self._actions[state, self._rng.integers(self._counts[state])])

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Advance the layer counter (reset to 0 when ``done``)."""
        self._clock.tick(done)

    def __repr__(self) -> str:
        return f"RandomAgent(S={self.n_states}, A={self.n_actions})"


class OracleAgent:
    """Act by an optimal deterministic policy of the true model.

    The model is solved once, at construction, through :mod:`optplan.problems`.

    Parameters
    ----------
    mdp : TabularMDP or FiniteHorizonMDP
        The true model.
    criterion : {"discounted", "average", "finite_horizon"}, optional
        What to optimize. ``None`` takes the model's own: ``"finite_horizon"`` for a
        ``FiniteHorizonMDP``, ``"discounted"`` for a ``TabularMDP`` with a discount,
        ``"average"`` without one. ``"average"`` on a discounted model ignores its discount.
    method : {"fast", "conic"}, default "fast"
        Passed to the planner.

    Attributes
    ----------
    result : PlanResult
        The planner's solution; ``result.policy`` is ``[s]`` or ``[l, s]`` (finite horizon).
    criterion : str
    policy : ndarray of int

    Raises
    ------
    ValueError
        For a criterion the model cannot be solved for.
    RuntimeError
        If the planner reports no solution (e.g. ``multichain`` for the average criterion).

    Notes
    -----
    For finite horizon the agent counts the steps since :meth:`reset` or the last ``done``
    to know its layer, so it must see every transition through :meth:`update`.
    """

    def __init__(
        self,
        mdp: TabularMDP | FiniteHorizonMDP,
        *,
        criterion: str | None = None,
        method: str = "fast",
    ) -> None:
        if not isinstance(mdp, (TabularMDP, FiniteHorizonMDP)):
            raise OptplanTypeError(
                f"mdp must be a TabularMDP or FiniteHorizonMDP, got {type(mdp).__name__}"
            )
        criterion = resolve_criterion(mdp, criterion)
        result = planning_problem(mdp, criterion).solve(method=method)
        finite = criterion == "finite_horizon"
        if not result.success:
            raise RuntimeError(
                f"planning the {criterion} criterion on {mdp!r} failed: "
                f"status {result.status!r}, {result.message}"
            )
        self.mdp = mdp
        self.criterion = criterion
        self.result: PlanResult = result
        self.policy = np.asarray(result.policy, dtype=np.intp)
        self._finite = finite
        self._clock = LayerClock(len(self.policy) if finite else None)

    #: The policy never changes (:class:`~optplan.agents.base.PolicyAgent`).
    policy_version = 0

    def current_policy(self) -> np.ndarray:
        """The optimal policy, one-hot: ``(S, A)``, or ``(L, S, A)`` for finite horizon."""
        flat = one_hot_policy(self.policy.ravel(), self.mdp.n_actions)
        return flat.reshape(*self.policy.shape, self.mdp.n_actions)

    def reset(self, rng: np.random.Generator) -> None:
        """Start a run at layer 0; the policy is deterministic, ``rng`` is not used."""
        self._clock.reset()

    def select_action(self, state: int) -> int:
        """The optimal action in ``state`` (at the current layer, for finite horizon)."""
        if self._finite:
            return int(self.policy[self._clock.current(), state])
        return int(self.policy[state])

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Advance the layer counter (reset to 0 when ``done``)."""
        self._clock.tick(done)

    def __repr__(self) -> str:
        return f"OracleAgent({self.mdp!r}, criterion={self.criterion!r})"


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _random(env, criterion):
    _, S, A, mask = env_shape(env)
    return RandomAgent(S, A, action_mask=mask)


def _oracle(env, criterion):
    return OracleAgent(env_model(env), criterion=criterion)


BUILDERS = (
    Component("random", _random, (), "uniformly random admissible actions"),
    Component("oracle", _oracle, (), "optimal policy of the true model (regret ~ 0)"),
)
