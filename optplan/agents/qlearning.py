"""Tabular Q-learning baselines: epsilon-greedy and soft (Boltzmann) action selection.

The comparators of k-learning-variational-bayesian-rl §4 (Fig. 2: epsilon-greedy with
epsilon = 0.1, soft Q-learning with tau = 0.05). Both learn

.. math:: Q(s, a) \\leftarrow Q(s, a) + \\alpha_n \\big(r + \\gamma (1 - \\text{done})
          \\max_{a' \\in A(s')} Q(s', a') - Q(s, a)\\big),

with step size ``1 / n(s, a)`` by default (the sample average of the targets) or a constant.
"""

from __future__ import annotations

import numpy as np

from .base import check_agent_mask, check_count

__all__ = ["EpsilonGreedyQ", "SoftQ"]


def _check_unit(name: str, value, low_open: bool = False, high_open: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    value = float(value) if ok else value
    if (
        not ok
        or not np.isfinite(value)
        or not (
            (value > 0 if low_open else value >= 0) and (value < 1 if high_open else value <= 1)
        )
    ):
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lo}0, 1{hi}, got {value!r}")
    return value


class _TabularQ:
    """Shared state and update of the Q-learning baselines."""

    def __init__(
        self, n_states, n_actions, discount=0.99, learning_rate=None, q_init=0.0, action_mask=None
    ):
        self.n_states = check_count("n_states", n_states)
        self.n_actions = check_count("n_actions", n_actions)
        self.discount = _check_unit("discount", discount)
        if learning_rate is not None:
            learning_rate = _check_unit("learning_rate", learning_rate, low_open=True)
        self.learning_rate = learning_rate
        if not isinstance(q_init, (int, float)) or not np.isfinite(q_init):
            raise ValueError(f"q_init must be a finite number, got {q_init!r}")
        self.q_init = float(q_init)
        mask = check_agent_mask(action_mask, self.n_states, self.n_actions)
        if mask.ndim != 2:
            raise ValueError(f"action_mask must be (S, A) for Q-learning, got {mask.shape}")
        self.action_mask = mask
        self.rng: np.random.Generator | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.q = np.where(self.action_mask, self.q_init, -np.inf)
        self.counts = np.zeros((self.n_states, self.n_actions), dtype=int)

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        self.counts[state, action] += 1
        target = reward + (0.0 if done else self.discount * self.q[next_state].max())
        lr = 1.0 / self.counts[state, action] if self.learning_rate is None else self.learning_rate
        self.q[state, action] += lr * (target - self.q[state, action])

    def _greedy(self, state: int) -> int:
        row = self.q[state]
        best = np.flatnonzero(row == row.max())
        return int(best[0] if best.size == 1 else self.rng.choice(best))


class EpsilonGreedyQ(_TabularQ):
    """Q-learning acting uniformly at random (among admissible actions) with probability
    ``epsilon``, greedily (ties broken at random) otherwise.

    Parameters
    ----------
    n_states, n_actions : int
    epsilon : float in [0, 1]
    discount : float in [0, 1]
    learning_rate : float in (0, 1], optional
        Constant step size; ``1 / n(s, a)`` if omitted.
    q_init : float
        Initial Q-values (optimistic initialization if large).
    action_mask : array_like of bool, shape (S, A), optional
    """

    def __init__(
        self,
        n_states,
        n_actions,
        epsilon=0.1,
        discount=0.99,
        learning_rate=None,
        q_init=0.0,
        action_mask=None,
    ):
        self.epsilon = _check_unit("epsilon", epsilon)
        super().__init__(n_states, n_actions, discount, learning_rate, q_init, action_mask)

    def select_action(self, state: int) -> int:
        if self.rng.random() < self.epsilon:
            return int(self.rng.choice(np.flatnonzero(self.action_mask[state])))
        return self._greedy(state)


class SoftQ(_TabularQ):
    """Q-learning acting by the Boltzmann policy ``pi(a|s) ∝ exp(Q(s, a) / temperature)``.

    Probabilities use the max-shift, so any temperature > 0 is safe from overflow.

    Parameters
    ----------
    temperature : float > 0
    (the others as :class:`EpsilonGreedyQ`)
    """

    def __init__(
        self,
        n_states,
        n_actions,
        temperature=0.05,
        discount=0.99,
        learning_rate=None,
        q_init=0.0,
        action_mask=None,
    ):
        if not isinstance(temperature, (int, float)) or not (0 < temperature < np.inf):
            raise ValueError(f"temperature must be a positive number, got {temperature!r}")
        self.temperature = float(temperature)
        super().__init__(n_states, n_actions, discount, learning_rate, q_init, action_mask)

    def policy(self, state: int) -> np.ndarray:
        """Action probabilities in ``state`` (0 on inadmissible actions)."""
        row = self.q[state]
        z = np.exp((row - row.max()) / self.temperature)  # exp(-inf) = 0 on masked actions
        return z / z.sum()

    def select_action(self, state: int) -> int:
        return int(self.rng.choice(self.n_actions, p=self.policy(state)))
