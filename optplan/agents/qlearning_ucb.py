r"""Q-learning with UCB-Hoeffding bonuses (Jin, Allen-Zhu, Bubeck, Jordan, NeurIPS 2018,
Algorithm 1), episodic only (registered ``q-learning-ucb``): ``Q_h(x, a) = H`` and
``N_h(x, a) = 0`` at the start; at step ``h`` in ``x`` it plays ``argmax_a Q_h(x, a)`` (ties
uniform at random), observes ``r, x'`` and sets

.. math:: t = N_h(x, a) \leftarrow N_h(x, a) + 1, \quad \alpha_t = \frac{H + 1}{H + t},
          \quad b_t = c \sqrt{H^3 \iota / t},

.. math:: Q_h(x, a) \leftarrow (1 - \alpha_t) Q_h(x, a) + \alpha_t \big(r + V_{h+1}(x')
          + b_t\big), \qquad V_h(x) \leftarrow \min\big(H, \max_{a'} Q_h(x, a')\big),

with ``V_H = 0`` and ``iota = ln(S A T / delta)``: ``S`` the states per step, ``T = K H`` for a
declared number of episodes ``K``, else ``k H`` with ``k`` the number of the current episode
(from 1: an anytime form of the paper's known ``T``). The state is a tuple of arrays and the
two steps are compiled functions of it (:class:`~optplan.agents.base.CompiledAgent`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._checks import check_positive, check_real
from .._jit import njit
from .._params import Component, Param
from ..envs.kernels import play
from .base import CompiledAgent, check_count, check_rng, state_field
from .qlearning import EPISODIC_CONFIDENCE, _pick, check_episodes, episodic_args, layered_mask

__all__ = ["QLearningUCB", "UCBQState", "ucb_act", "ucb_observe", "ucb_run"]


class UCBQState(NamedTuple):
    """The whole state of :class:`QLearningUCB`: ``q``, ``counts`` ``(H, S, A)``, ``values``
    ``(H + 1, S)``, ``params = [c, delta]``, ``clock = [step h, episodes ended, declared
    episodes K or 0]``."""

    q: np.ndarray
    counts: np.ndarray
    values: np.ndarray
    params: np.ndarray
    clock: np.ndarray


@njit(inline="always")
def ucb_act(s, x, rng):  # pragma: no cover - compiled by numba
    """``argmax_a Q_h(x, a)``, ties uniform at random."""
    row = s.q[s.clock[0], x]
    return _pick(row, row.max(), rng)


@njit(inline="always")
def ucb_observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Jin et al.'s update of ``Q_h(x, a)`` and ``V_h(x)`` (module docstring); the step."""
    h = s.clock[0]
    H, S, A = s.q.shape
    t = s.counts[h, x, a] + 1
    s.counts[h, x, a] = t
    alpha = (H + 1.0) / (H + t)
    future = 0.0 if done or h + 1 >= H else s.values[h + 1, y]
    k = s.clock[2] if s.clock[2] > 0 else s.clock[1] + 1
    iota = math.log(S * A * k * H / s.params[1])
    bonus = s.params[0] * math.sqrt(H**3 * iota / t)
    s.q[h, x, a] = (1.0 - alpha) * s.q[h, x, a] + alpha * (r + future + bonus)
    s.values[h, x] = min(float(H), s.q[h, x].max())
    s.clock[0] = 0 if done else h + 1
    if done:
        s.clock[1] += 1
    return False


@njit
def ucb_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(ucb_act, ucb_observe, s, env, steps, env_rng, agent_rng)


class QLearningUCB(CompiledAgent):
    r"""Q-learning with UCB-Hoeffding bonuses (Jin, Allen-Zhu, Bubeck, Jordan, NeurIPS 2018,
    Algorithm 1) for episodic layered models; the update is in the module docstring.

    Parameters
    ----------
    n_states, n_actions : int
        States per step (layer), actions (counts: to build from an environment use
        ``make_agent("q-learning-ucb", env)``).
    n_layers : int
        The horizon ``H``; the tables are ``(H, S, A)`` (one ``Q_h`` per step, as the paper).
    c : float >= 0, default 1.0
        The constant of the bonus ``b_t = c sqrt(H^3 iota / t)`` (the paper: "an absolute
        constant"; 0: no bonus, optimism from ``Q = H`` only).
    delta : float in (0, 1), default 0.1
        The failure probability ``p`` of ``iota = ln(S A T / delta)``.
    episodes : int, optional
        The number of episodes ``K`` of the run (``T = K H``); unset: ``T = k H`` at the
        ``k``-th episode.
    action_mask : bool array (S, A) or (H, S, A), optional

    Attributes
    ----------
    q : ndarray (H, S, A)
        ``Q_h`` (``-inf`` on inadmissible pairs).
    values : ndarray (H + 1, S)
        ``V_h``, with ``V_H = 0``.
    counts : ndarray (H, S, A) of int
        ``N_h``.
    """

    _run = staticmethod(ucb_run)

    def __init__(
        self, n_states, n_actions, *, n_layers, c=1.0, delta=0.1, episodes=None, action_mask=None
    ):
        self.n_states = check_count("n_states", n_states)
        self.n_actions = check_count("n_actions", n_actions)
        self.n_layers = check_count("n_layers", n_layers)
        self.c = check_positive("c", c, allow_zero=True)
        self.delta = check_real("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        self.episodes = check_episodes(episodes)
        self.action_mask = layered_mask(action_mask, self.n_layers, self.n_states, self.n_actions)
        self.rng: np.random.Generator | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        H = self.n_layers
        values = np.full((H + 1, self.n_states), float(H))
        values[-1] = 0.0
        self.state = UCBQState(
            q=np.where(self.action_mask, float(H), -np.inf),
            counts=np.zeros(self.action_mask.shape, dtype=np.int64), values=values,
            params=np.array([self.c, self.delta]),
            clock=np.array([0, 0, self.episodes or 0], dtype=np.int64),
        )  # fmt: skip

    q = state_field("q", "``Q_h``, ``(H, S, A)``.")
    values = state_field("values", "``V_h``, ``(H + 1, S)``.")
    counts = state_field("counts", "``N_h``, ``(H, S, A)``.")

    @property
    def episode(self) -> int:
        """Episodes ended since :meth:`reset`."""
        return int(self.state.clock[1])

    @property
    def layer(self) -> int:
        """The step ``h`` of the current episode."""
        return int(self.state.clock[0])

    def iota(self) -> float:
        """``ln(S A T / delta)`` with ``T = K H`` (declared ``episodes``) or ``k H``."""
        k = self.episodes if self.episodes is not None else self.episode + 1
        return math.log(self.n_states * self.n_actions * k * self.n_layers / self.delta)

    def bonus(self, t) -> np.ndarray | float:
        """``b_t = c sqrt(H^3 iota / t)`` at the current episode."""
        return self.c * np.sqrt(self.n_layers**3 * self.iota() / t)

    def _check_layer(self) -> None:
        if self.layer >= self.n_layers:
            raise RuntimeError(
                f"{self.layer} steps without done, but the model has {self.n_layers} layers"
            )

    def select_action(self, state: int) -> int:
        self._check_layer()
        return int(ucb_act(self.state, state, self.rng))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        self._check_layer()
        ucb_observe(self.state, state, action, float(reward), next_state, bool(done), None)

    def compiled_reason(self, env) -> str | None:
        if not env.ints[1] or env.mask.shape[0] != self.n_layers:
            return f"QLearningUCB(n_layers={self.n_layers}) plays layered models of that horizon"
        if env.mask.shape[1:] != (self.n_states, self.n_actions):
            return "the agent's tables do not match the model's states and actions"
        return None

    def __repr__(self) -> str:
        return (
            f"QLearningUCB(L={self.n_layers}, S={self.n_states}, A={self.n_actions}, "
            f"c={self.c}, delta={self.delta})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _q_learning_ucb(env, criterion, **params):
    return QLearningUCB(**episodic_args(env, "q-learning-ucb"), **params)


BUILDERS = (
    Component(
        "q-learning-ucb",
        _q_learning_ucb,
        (
            Param("c", "float", 1.0, "bonus constant: b_t = c sqrt(H^3 iota / t)"),
            *EPISODIC_CONFIDENCE,
        ),
        "Q-learning with UCB-Hoeffding bonuses (Jin et al. 2018), episodic",
    ),
)
