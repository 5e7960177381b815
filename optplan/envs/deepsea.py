"""DeepSea: the L x L "needle in a haystack" exploration grid, as bsuite's ``deep_sea``.

The agent starts in the top-left cell of an ``size x size`` grid and descends one row per step,
moving one column left or right; an episode lasts ``size`` steps. Only the bottom-right cell
pays, and reaching it needs the action "right" at every step, so dithering exploration needs
time exponential in ``size`` (k-learning-variational-bayesian-rl §4, Figure 1).

Layout in optplan terms: a :class:`~optplan.mdp.FiniteHorizonMDP` with ``L = size`` layers
(the row) and ``S = size`` states (the column), two actions, start at column 0 of layer 0.
Observations are column indices; the row is the layer, reported as ``info["layer"]`` (bsuite
observes a one-hot ``size x size`` grid instead, and an all-zero grid at the end).

References
----------
bsuite, ``bsuite/environments/deep_sea.py`` (google-deepmind/bsuite, commit 2d3793b), whose
semantics this module reproduces; the lines matched, paraphrased:

* Action mapping: with ``randomize_actions`` the mapping is
  ``np.random.RandomState(mapping_seed).binomial(1, 0.5, [size, size])`` (one draw, indexed
  ``[row, column]``); without it, ``np.ones([size, size])`` (action 1 is right everywhere,
  bsuite's debug mode). A step goes right iff ``action == mapping[row, column]``.
* Reward 1: ``if column == size - 1 and action_right: reward += 1`` -- paid for choosing right
  in the last column, *before* the transition (so also when a windy "right" fails). Since the
  column never exceeds the row, this happens only on the last step, at the bottom-right cell.
* Move cost: ``reward -= unscaled_move_cost / size`` on every "right" (success or not); "left"
  is free. The deterministic optimal return is ``1 - unscaled_move_cost`` (0.99 by default).
* Dynamics: "right" moves to ``clip(column + 1, 0, size - 1)`` if ``deterministic`` or
  ``rng.rand() > 1 / size`` (probability ``1 - 1/size``), and otherwise *stays in its column*
  (it does not move left); "left" moves to ``clip(column - 1, 0, size - 1)``. The row always
  increases; the episode terminates when ``row == size``.
* Stochastic rewards (``deterministic=False``): ``if row == size - 1 and column in [0, size - 1]:
  reward += rng.randn()``, standard normal noise at the two ends of the last row, for either
  action.
* bsuite's ``_optimal_return`` is ``(1 - 1/size) ** (size - 1) - unscaled_move_cost`` for the
  stochastic version: the value of "always right", which pays the move cost even after a
  failed move. The true optimum (:attr:`DeepSea.optimal_return`, backward induction) moves left
  once the goal is out of reach and is slightly higher; :attr:`DeepSea.bsuite_optimal_return`
  keeps bsuite's number.

k-learning-variational-bayesian-rl §4: "After choosing action 'left' the agent receives a random
reward with zero mean, and after choosing right the agent receives a random reward with small
negative mean. At the bottom rightmost corner of the grid the agent receives a random reward
with mean one." The paper states neither the noise law nor its scale; ``variant="k-learning"``
adds ``N(0, reward_noise**2)`` to every reward (default ``reward_noise=1.0``) around bsuite's
expected rewards.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._checks import OptplanError, check_int, check_positive
from ..mdp import FiniteHorizonMDP, check_model_size
from .tabular import TabularEnv

__all__ = ["DeepSea", "VARIANTS"]

#: Accepted values of ``DeepSea(variant=...)``.
VARIANTS = ("bsuite", "k-learning")

#: Default reward-noise standard deviation of each variant: bsuite's stochastic version adds
#: ``randn()`` (std 1) at the ends of the last row, its deterministic version no noise; the
#: k-learning paper does not state a scale, 1.0 is our choice.
_DEFAULT_NOISE = {
    ("bsuite", True): 0.0,
    ("bsuite", False): 1.0,
    ("k-learning", True): 1.0,
    ("k-learning", False): 1.0,
}


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise OptplanError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def deepsea_mdp(
    mapping: np.ndarray, deterministic: bool = True, unscaled_move_cost: float = 0.01
) -> FiniteHorizonMDP:
    """The true (expected-reward) model of a DeepSea grid with action ``mapping[row, column]``.

    Parameters
    ----------
    mapping : ndarray of int, shape (size, size)
        ``mapping[l, c]`` is the action index that means "right" at row ``l``, column ``c``.
    deterministic : bool, default True
        ``False``: "right" succeeds with probability ``1 - 1/size`` and otherwise stays.
    unscaled_move_cost : float, default 0.01
        Each "right" costs ``unscaled_move_cost / size``.

    Returns
    -------
    FiniteHorizonMDP
        ``L = S = size``, ``A = 2``, start at column 0. Every cell is modelled, also the ones
        unreachable from the start (column > row), with bsuite's rules: "right" in the last
        column pays ``1 - unscaled_move_cost / size`` at any row.
    """
    size = mapping.shape[0]
    cols = np.arange(size)
    q = 1.0 if deterministic else 1.0 - 1.0 / size  # P(a "right" moves)
    p_right = np.zeros((size, size))
    p_right[cols, np.minimum(cols + 1, size - 1)] += q
    p_right[cols, cols] += 1.0 - q
    p_left = np.zeros((size, size))
    p_left[cols, np.maximum(cols - 1, 0)] = 1.0
    # bsuite's order of operations: reward = 0; += 1 in the last column; -= cost / size.
    r_right = np.where(cols == size - 1, 1.0, 0.0) - unscaled_move_cost / size

    is_right = mapping[:, :, None] == np.arange(2)  # (L, S, A)
    P = np.where(is_right[..., None], p_right[None, :, None, :], p_left[None, :, None, :])
    R = np.where(is_right, r_right[None, :, None], 0.0)
    initial = np.zeros(size)
    initial[0] = 1.0
    return FiniteHorizonMDP(P, R, initial=initial, name=f"deepsea-{size}")


class DeepSea(TabularEnv):
    """bsuite's DeepSea (``deep_sea`` / ``deep_sea_stochastic``) as a layered tabular env.

    Parameters
    ----------
    size : int >= 1
        Grid side ``N``: ``N`` rows (layers, the episode length) and ``N`` columns (states).
    deterministic : bool, default True
        ``False`` is bsuite's stochastic ("windy") version: "right" succeeds with probability
        ``1 - 1/size`` and otherwise leaves the column unchanged.
    mapping_seed : int in [0, 2**32), default 0
        Seed of ``np.random.RandomState`` drawing the action mapping, as bsuite's
        ``mapping_seed`` (bsuite's default ``None``, fresh entropy, is not accepted: the model
        must be reproducible). Validated but unused when ``randomize_actions=False``.
    randomize_actions : bool, default True
        ``False``: action 1 means right in every cell (bsuite's debug mode).
    unscaled_move_cost : float >= 0, default 0.01
        Every "right" costs ``unscaled_move_cost / size``.
    variant : {"bsuite", "k-learning"}, default "bsuite"
        Where the reward noise goes (the expected rewards, and so ``.mdp``, are the same):
        ``"bsuite"`` adds it at the two ends (columns 0 and ``size - 1``) of the last row, for
        either action, as bsuite's stochastic version; ``"k-learning"`` adds it to every reward
        (k-learning-variational-bayesian-rl §4).
    reward_noise : float >= 0, optional
        Standard deviation of the Gaussian reward noise. ``None``: 1.0 for the stochastic
        bsuite version (bsuite's ``randn()``), 0.0 for the deterministic one, 1.0 for
        ``"k-learning"`` (the paper gives no scale).

    Attributes
    ----------
    mdp : FiniteHorizonMDP
        The true model with expected rewards (see :func:`deepsea_mdp`).
    mapping : ndarray of int, shape (size, size), read-only
        ``mapping[row, column]``: the action index meaning "right" there.
    size, deterministic, mapping_seed, randomize_actions, unscaled_move_cost, variant
    move_cost : float
        ``unscaled_move_cost / size``.
    reward_noise : float
        The resolved noise standard deviation.
    goal : tuple of int
        ``(size - 1, size - 1)``: the (layer, column) where "right" pays 1.

    Notes
    -----
    :meth:`step` reports ``info`` with ``"expected_reward"``, ``"layer"`` (of the returned
    observation), ``"action_right"`` and ``"goal_reached"`` (the step paid the reward 1: "right"
    in the last column, which from the start happens only on the last step, at the bottom-right
    cell), so :func:`~optplan.experiments.run` records successes and the time to solve. The
    episode terminates after ``size`` steps; it is never truncated. Randomness (windy moves,
    reward noise) comes from ``self.np_random``, seeded by ``reset(seed=...)`` -- bsuite's
    ``seed`` argument; the streams differ from bsuite's, the laws are the same.
    """

    def __init__(
        self,
        size: int,
        deterministic: bool = True,
        mapping_seed: int = 0,
        randomize_actions: bool = True,
        unscaled_move_cost: float = 0.01,
        variant: str = "bsuite",
        reward_noise: float | None = None,
    ) -> None:
        size = check_int("size", size)
        check_model_size(size, 2, size, subject=f"size={size}")  # P: (size, size, 2, size)
        deterministic = _check_bool("deterministic", deterministic)
        randomize_actions = _check_bool("randomize_actions", randomize_actions)
        if check_int("mapping_seed", mapping_seed, 0) >= 2**32:
            raise OptplanError(
                f"mapping_seed must be an integer in [0, 2**32), got {mapping_seed!r}"
            )
        check_positive("unscaled_move_cost", unscaled_move_cost, allow_zero=True)
        if not isinstance(variant, str) or variant not in VARIANTS:
            raise OptplanError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if reward_noise is None:
            reward_noise = _DEFAULT_NOISE[(variant, deterministic)]
        else:
            check_positive("reward_noise", reward_noise, allow_zero=True)

        if randomize_actions:
            mapping = np.random.RandomState(int(mapping_seed)).binomial(1, 0.5, [size, size])
        else:
            mapping = np.ones((size, size), dtype=int)
        mapping = mapping.astype(np.int64)
        mapping.setflags(write=False)

        # The base class gets no noise: step() below places it where the variant says.
        super().__init__(deepsea_mdp(mapping, deterministic, float(unscaled_move_cost)))
        self.size = size
        self.deterministic = deterministic
        self.mapping_seed = int(mapping_seed)
        self.randomize_actions = randomize_actions
        self.unscaled_move_cost = float(unscaled_move_cost)
        self.move_cost = self.unscaled_move_cost / size
        self.variant = variant
        self.reward_noise = float(reward_noise)
        self.mapping = mapping
        self.goal = (size - 1, size - 1)
        self._noise_mask = np.zeros((size, size), dtype=bool)  # [row, column]
        if variant == "k-learning":
            self._noise_mask[:] = True
        else:
            self._noise_mask[size - 1, [0, size - 1]] = True
        self._row = 0
        self._column = 0
        self._running = False
        self._optimal_return: float | None = None

    @property
    def optimal_return(self) -> float:
        """The optimal expected episode return, by backward induction on :attr:`mdp`."""
        if self._optimal_return is None:
            from ..problems import solve_finite_horizon

            self._optimal_return = float(solve_finite_horizon(self.mdp).value)
        return self._optimal_return

    @property
    def bsuite_optimal_return(self) -> float:
        """bsuite's ``_optimal_return``: ``(1 - 1/size)**(size - 1)`` (1 if deterministic)
        minus ``unscaled_move_cost``, the value of "always right"; equal to
        :attr:`optimal_return` (up to round-off) in the deterministic version only."""
        no_cost = 1.0 if self.deterministic else (1 - 1 / self.size) ** (self.size - 1)
        return no_cost - self.unscaled_move_cost

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Start at row 0, column 0; ``seed`` reseeds ``self.np_random``.

        Returns
        -------
        state : int
            ``0``.
        info : dict
            ``{"layer": 0}``.
        """
        super().reset(seed=seed, options=options)
        self._row = 0
        self._column = 0
        self._running = True
        return 0, {"layer": 0}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Take ``action`` (0 or 1) at the current cell, with bsuite's dynamics.

        Returns
        -------
        next_state : int
            The new column.
        reward : float
            The expected reward ``mdp.R[row, column, action]`` plus ``reward_noise`` times a
            standard normal draw where the variant puts noise.
        terminated : bool
            ``True`` after ``size`` steps.
        truncated : bool
            Always ``False``.
        info : dict
            ``"expected_reward"``, ``"layer"`` (row of ``next_state``), ``"action_right"``,
            ``"goal_reached"``.

        Raises
        ------
        ValueError
            If ``action`` is not 0 or 1.
        RuntimeError
            If called before :meth:`reset` or after the episode ended.
        """
        if not self._running:
            raise RuntimeError("call reset() before step(): no episode is running")
        row, col = self._row, self._column
        try:
            a = operator.index(action)
        except TypeError:
            raise OptplanError(
                f"action must be an integer, got {action!r} at row {row}, column {col}"
            ) from None
        if not 0 <= a < 2:
            raise OptplanError(f"action {a} is out of range [0, 2) at row {row}, column {col}")

        rng = self.np_random
        right = bool(a == self.mapping[row, col])
        goal = right and col == self.size - 1  # bsuite pays the 1 before moving
        expected = float(self.mdp.R[row, col, a])
        reward = expected
        if self.reward_noise > 0.0 and self._noise_mask[row, col]:
            reward += self.reward_noise * float(rng.standard_normal())
        if right:
            if self.deterministic or rng.random() > 1.0 / self.size:
                col = min(col + 1, self.size - 1)
        else:
            col = max(col - 1, 0)
        row += 1
        self._row, self._column = row, col
        terminated = row >= self.size
        self._running = not terminated
        info = {
            "expected_reward": expected,
            "layer": row,
            "action_right": right,
            "goal_reached": goal,
        }
        return col, reward, terminated, False, info

    def set_position(self, state: int, steps: int, done: bool = False) -> None:
        """Place the episode at column ``state`` of row ``steps`` (ended at the last row)."""
        self._row, self._column = int(steps), int(state)
        self._running = self._row < self.size

    def __repr__(self) -> str:
        extra = "" if self.deterministic else ", deterministic=False"
        if not self.randomize_actions:
            extra += ", randomize_actions=False"
        if self.unscaled_move_cost != 0.01:
            extra += f", unscaled_move_cost={self.unscaled_move_cost}"
        if self.variant != "bsuite":
            extra += f", variant={self.variant!r}"
        return (
            f"DeepSea(size={self.size}, mapping_seed={self.mapping_seed}{extra}, "
            f"reward_noise={self.reward_noise})"
        )
