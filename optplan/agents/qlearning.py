"""Tabular Q-learning: the epsilon-greedy and soft (Boltzmann) baselines, each a state tuple and
two compiled steps (:class:`~optplan.agents.base.CompiledAgent`).

The comparators of k-learning-variational-bayesian-rl §4 (Fig. 2: epsilon-greedy with
epsilon = 0.1, soft Q-learning with tau = 0.05). Both learn

.. math:: Q(s, a) \\leftarrow Q(s, a) + \\alpha_n \\big(r + \\gamma (1 - \\text{done})
          \\max_{a' \\in A(s')} Q(s', a') - Q(s, a)\\big),

with step size ``1 / n(s, a)`` by default (the sample average of the targets) or a constant.

Both expose the policy they follow (:class:`~optplan.agents.base.PolicyAgent`):
``current_policy()`` is epsilon-greedy's ``epsilon / |A(s)| + (1 - epsilon) 1[a in
argmax] / |argmax|`` (its ties are broken uniformly at random) or soft Q-learning's Boltzmann
policy, ``(S, A)`` (``(L, S, A)`` when layered); ``policy_version`` changes when a row's greedy
set changes (epsilon-greedy) or at every update (soft Q-learning).

On an environment with discounted resets (:class:`optplan.envs.DiscountedResets`, ``done`` =
the episode ended w.p. ``1 - gamma``), ``discount=1`` learns the discounted values ``Q = r +
gamma P max Q`` of the setting: the reset is the discount.

:class:`~optplan.agents.qlearning_ucb.QLearningUCB` (episodic, UCB-Hoeffding bonuses) builds on
the helpers at the end of this module.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import OptplanError, check_real
from .._jit import njit
from .._params import Component, Param
from ..envs.kernels import play
from ._env import env_model, env_shape
from .base import (
    CompiledAgent,
    check_agent_mask,
    check_count,
    greedy_policy,
)

__all__ = ["EpsilonGreedyQ", "SoftQ", "QState", "act", "observe", "run", "episodic_args",
           "layered_mask"]  # fmt: skip


def _check_unit(name: str, value, low_open: bool = False, high_open: bool = False) -> float:
    return check_real(name, value, 0.0, 1.0, low_open=low_open, high_open=high_open)


class QState(NamedTuple):
    """The whole state of a Q-learning baseline: ``q``, ``counts``, ``best`` (each row's greedy
    set) ``(rows, A)``, with ``rows = S`` or ``L S`` (row ``l S + s`` when layered; ``q`` is
    ``-inf`` exactly on inadmissible pairs), ``params = [epsilon, temperature, discount, step
    size or -1 for 1 / n]``, ``ints = [kind, layer, n_layers or 0, S, policy_version]``;
    ``scratch (A,)``: work space of the Boltzmann draw."""

    q: np.ndarray
    counts: np.ndarray
    best: np.ndarray
    params: np.ndarray
    ints: np.ndarray
    scratch: np.ndarray


#: ``QState.ints[0]``: the epsilon-greedy or the Boltzmann action.
GREEDY, SOFT = 0, 1
_LAYER, _VERSION = 1, 4


@njit(inline="always")
def _row(s, x):  # pragma: no cover - compiled by numba
    """The table row of state ``x`` at the agent's layer."""
    return x if s.ints[2] == 0 else s.ints[_LAYER] * s.ints[3] + x


@njit(inline="always")
def _pick(values, top, rng):  # pragma: no cover - compiled by numba
    """A uniformly random index among the entries of ``values`` equal to ``top``, or, with
    ``top = -inf``, among the finite ones (the admissible actions)."""
    anyone = top == -np.inf
    m = 0
    for b in range(values.shape[0]):
        m += (values[b] > top) if anyone else (values[b] == top)
    j = 0 if m == 1 else rng.integers(0, m)
    for b in range(values.shape[0]):
        if (values[b] > top) if anyone else (values[b] == top):
            if j == 0:
                return b
            j -= 1
    return values.shape[0] - 1  # unreachable


@njit(inline="always")
def act(s, x, rng):  # pragma: no cover - compiled by numba
    """The action in state ``x``: epsilon-greedy (one uniform; below ``epsilon`` a uniform
    admissible action, else a greedy one, ties uniform) or Boltzmann (one uniform searched in
    the cumulative ``exp((Q - max Q) / temperature)``)."""
    q = s.q[_row(s, x)]
    top = q.max()
    if s.ints[0] == GREEDY:
        if rng.random() < s.params[0]:
            return _pick(q, -np.inf, rng)
        return _pick(q, top, rng)
    tau = s.params[1]
    z = s.scratch
    total = 0.0
    for b in range(q.shape[0]):
        z[b] = np.exp((q[b] - top) / tau)
        total += z[b]
    u = rng.random() * total
    acc = 0.0
    for b in range(q.shape[0] - 1):
        acc += z[b]
        if acc > u:
            return b
    return q.shape[0] - 1


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """The Q-learning update of ``(x, a)`` after reward ``r`` and next state ``y`` (module
    docstring); the greedy set and ``policy_version``; the layer. Never asks for a plan."""
    row = _row(s, x)
    L = s.ints[2]
    s.counts[row, a] += 1
    if done or (L > 0 and s.ints[_LAYER] + 1 >= L):
        target = r
    else:
        target = r + s.params[2] * s.q[row + s.ints[3] - x + y if L > 0 else y].max()
    lr = 1.0 / s.counts[row, a] if s.params[3] < 0.0 else s.params[3]
    s.q[row, a] += lr * (target - s.q[row, a])
    if s.ints[0] == SOFT:
        s.ints[_VERSION] += 1  # any change of Q changes the Boltzmann policy
    else:
        top = s.q[row].max()
        changed = False
        for b in range(s.q.shape[1]):
            best = s.q[row, b] == top
            changed = changed or best != s.best[row, b]
            s.best[row, b] = best
        s.ints[_VERSION] += changed
    s.ints[_LAYER] = 0 if done else s.ints[_LAYER] + 1
    return False


@njit
def run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(act, observe, s, env, steps, env_rng, agent_rng)


class _StateParam:
    """An agent attribute kept in ``state.params[index]`` too (set after a reset, it takes
    effect at once)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __set_name__(self, owner, name: str) -> None:
        self.name = "_" + name

    def __get__(self, agent, owner=None):
        return self if agent is None else getattr(agent, self.name)

    def __set__(self, agent, value) -> None:
        setattr(agent, self.name, value)
        if "state" in vars(agent):
            agent.state.params[self.index] = value


class _TabularQ(CompiledAgent):
    """Shared state and update of the Q-learning baselines (:class:`QState`, :func:`act`,
    :func:`observe`).

    With ``n_layers = L`` (episodic, layered environments such as DeepSea, whose observations
    are indices within a layer) the table is indexed by ``(layer, state)``: the agent counts
    the steps since :meth:`reset` or the last ``done`` to know its layer, and the target of the
    last layer has no continuation.
    """

    _KIND = GREEDY
    _run = staticmethod(run)
    epsilon = _StateParam(0)
    temperature = _StateParam(1)
    _epsilon, _temperature = 0.0, 1.0

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        n_layers=None,
        discount=0.99,
        learning_rate=None,
        q_init=0.0,
        action_mask=None,
    ):
        self.n_states = check_count("n_states", n_states)
        self.n_actions = check_count("n_actions", n_actions)
        self.n_layers = None if n_layers is None else check_count("n_layers", n_layers)
        self.discount = _check_unit("discount", discount)
        if learning_rate is not None:
            learning_rate = _check_unit("learning_rate", learning_rate, low_open=True)
        self.learning_rate = learning_rate
        if not isinstance(q_init, (int, float)) or not np.isfinite(q_init):
            raise OptplanError(f"q_init must be a finite number, got {q_init!r}")
        self.q_init = float(q_init)
        mask = check_agent_mask(action_mask, self.n_states, self.n_actions)
        L = self.n_layers
        if L is None and mask.ndim != 2:
            raise OptplanError(
                f"action_mask must be (S, A) for Q-learning without n_layers, got {mask.shape}"
            )
        if L is not None:
            if mask.ndim == 2:
                mask = np.broadcast_to(mask, (L, *mask.shape))
            elif len(mask) != L:
                raise OptplanError(f"action_mask has {len(mask)} layers, n_layers is {L}")
            mask = mask.reshape(L * self.n_states, self.n_actions)
        self.action_mask = np.ascontiguousarray(mask, dtype=np.bool_)
        self.rng: np.random.Generator | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        q = np.where(self.action_mask, self.q_init, -np.inf)
        rate = -1.0 if self.learning_rate is None else self.learning_rate
        params = [self._epsilon, self._temperature, self.discount, rate]
        ints = [self._KIND, 0, self.n_layers or 0, self.n_states, 0]
        self.state = QState(
            q=q, counts=np.zeros(q.shape, dtype=np.int64),
            best=q == q.max(axis=1, keepdims=True),
            params=np.array(params, dtype=float), ints=np.array(ints, dtype=np.int64),
            scratch=np.zeros(self.n_actions),
        )  # fmt: skip

    @property
    def q(self) -> np.ndarray:
        """Q-values, ``(S, A)`` or ``(L S, A)`` when layered (the state's array)."""
        return self.state.q

    @property
    def counts(self) -> np.ndarray:
        """Updates of each pair, shaped as :attr:`q`."""
        return self.state.counts

    @property
    def policy_version(self) -> int:
        """Changes when a row's greedy set changes (epsilon-greedy) or at every update (soft
        Q-learning)."""
        return int(self.state.ints[_VERSION])

    @property
    def layer(self) -> int:
        """The layer of the current step (steps since :meth:`reset` or the last ``done``)."""
        return int(self.state.ints[_LAYER])

    def _row(self, state: int) -> int:
        """Row of the table: ``state``, or ``layer * S + state`` when layered."""
        if self.n_layers is None:
            return state
        if self.layer >= self.n_layers:
            raise RuntimeError(
                f"{self.layer} steps without done, but the model has {self.n_layers} layers"
            )
        return self.layer * self.n_states + state

    @property
    def q_table(self) -> np.ndarray:
        """Q-values, ``(S, A)`` or ``(L, S, A)`` when layered (a view)."""
        if self.n_layers is None:
            return self.q
        return self.q.reshape(self.n_layers, self.n_states, self.n_actions)

    def select_action(self, state: int) -> int:
        self._row(state)
        return int(act(self.state, state, self.rng))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        self._row(state)
        observe(self.state, state, action, float(reward), next_state, bool(done), None)

    def compiled_reason(self, env) -> str | None:
        """Why the compiled loop cannot run this agent in ``env`` (:class:`EnvArrays`)."""
        layered = bool(env.ints[1])
        if (self.n_layers is not None) != layered:
            return (f"the agent's n_layers={self.n_layers} on a "
                    f"{'layered' if layered else 'continuing'} model")  # fmt: skip
        if layered and self.n_layers != env.mask.shape[0]:
            return f"the agent's n_layers={self.n_layers}, the model's horizon {env.mask.shape[0]}"
        if env.mask.shape[1:] != (self.n_states, self.n_actions):
            return "the agent's table does not match the model's states and actions"
        return None

    def _table(self, pi: np.ndarray) -> np.ndarray:
        return pi if self.n_layers is None else pi.reshape(self.q_table.shape)


class EpsilonGreedyQ(_TabularQ):
    """Q-learning acting uniformly at random (among admissible actions) with probability
    ``epsilon``, greedily (ties broken at random) otherwise.

    Parameters
    ----------
    n_states, n_actions : int
    n_layers : int, optional
        Episodic layered environments: index the table by (layer, state).
    epsilon : float in [0, 1], default 0.1
    discount : float in [0, 1], default 0.99
    learning_rate : float in (0, 1], optional
        Constant step size; ``1 / n(s, a)`` if omitted.
    q_init : float, default 0
        Initial Q-values (optimistic initialization if large).
    action_mask : array_like of bool, shape (S, A) or (L, S, A), optional
    """

    def __init__(self, n_states, n_actions, *, epsilon=0.1, **table):
        self.epsilon = _check_unit("epsilon", epsilon)
        super().__init__(n_states, n_actions, **table)

    def current_policy(self) -> np.ndarray:
        """``epsilon`` uniform over the admissible actions, ``1 - epsilon`` uniform over the
        greedy set; ``(S, A)`` or ``(L, S, A)``."""
        return self._table(greedy_policy(self.q, self.action_mask, self.epsilon))


class SoftQ(_TabularQ):
    """Q-learning acting by the Boltzmann policy ``pi(a|s) ∝ exp(Q(s, a) / temperature)``.

    Probabilities use the max-shift, so any temperature > 0 is safe from overflow.

    Parameters
    ----------
    temperature : float > 0, default 0.05
    n_states, n_actions, n_layers, discount, learning_rate, q_init, action_mask :
        As :class:`EpsilonGreedyQ`.
    """

    _KIND = SOFT

    def __init__(self, n_states, n_actions, *, temperature=0.05, **table):
        if not isinstance(temperature, (int, float)) or not (0 < temperature < np.inf):
            raise OptplanError(f"temperature must be a positive number, got {temperature!r}")
        self.temperature = float(temperature)
        super().__init__(n_states, n_actions, **table)

    def policy(self, state: int) -> np.ndarray:
        """Action probabilities in ``state`` (at the current layer; 0 on masked actions)."""
        values = self.q[self._row(state)]
        z = np.exp((values - values.max()) / self.temperature)  # exp(-inf) = 0 when masked
        return z / z.sum()

    def current_policy(self) -> np.ndarray:
        """The Boltzmann policy of every row, ``(S, A)`` or ``(L, S, A)``."""
        z = np.exp((self.q - self.q.max(axis=1, keepdims=True)) / self.temperature)
        return self._table(z / z.sum(axis=1, keepdims=True))

    def soft_values(self) -> np.ndarray:
        """``temperature * logsumexp(Q / temperature)`` per state (the analogue of
        k-learning Eq. 14), ``(S,)`` or ``(L, S)``."""
        q = self.q_table
        m = q.max(axis=-1)
        return m + self.temperature * np.log(
            np.exp((q - m[..., None]) / self.temperature).sum(axis=-1)
        )


def layered_mask(action_mask, n_layers: int, n_states: int, n_actions: int) -> np.ndarray:
    """An episodic agent's admissible actions as ``(L, S, A)`` (a 2-D mask repeated per layer)."""
    mask = check_agent_mask(action_mask, n_states, n_actions)
    if mask.ndim == 3 and len(mask) != n_layers:
        raise OptplanError(f"action_mask has {len(mask)} layers, n_layers is {n_layers}")
    return np.broadcast_to(mask, (n_layers, n_states, n_actions))


def check_episodes(episodes) -> int | None:
    """The declared number of episodes ``K`` of a run (``T = K H``), or ``None``."""
    if episodes is None:
        return None
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise OptplanError(f"episodes must be a positive integer or None, got {episodes!r}")
    return int(episodes)


def greedy_action(rng: np.random.Generator, values: np.ndarray) -> int:
    """A maximizer of ``values`` (one row), ties broken uniformly at random."""
    best = np.flatnonzero(values == values.max())
    return int(best[0] if best.size == 1 else rng.choice(best))


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _builder(cls):
    def build(env, criterion, **params):
        L, S, A, mask = env_shape(env)
        return cls(S, A, n_layers=L, action_mask=mask, **params)

    return build


_Q_PARAMS = (
    Param("discount", "float", 0.99, "discount of the Q-learning target"),
    Param("learning_rate", "float", None, "constant step size; unset: 1/n(s, a)"),
    Param("q_init", "float", 0.0, "initial Q-values"),
)
BUILDERS = (
    Component(
        "epsilon-greedy",
        _builder(EpsilonGreedyQ),
        (Param("epsilon", "float", 0.1, "exploration probability"), *_Q_PARAMS),
        "Q-learning with epsilon-greedy actions",
    ),
    Component(
        "soft-q",
        _builder(SoftQ),
        (Param("temperature", "float", 0.05, "Boltzmann temperature"), *_Q_PARAMS),
        "Q-learning with Boltzmann (softmax) actions",
    ),
)


def episodic_args(env, who: str) -> dict:
    """``n_states``, ``n_actions``, ``n_layers`` and ``action_mask`` of an episodic (layered)
    environment, for the episodic agents that learn everything but the sizes; an error naming
    the missing horizon for a continuing one."""
    L, S, A, mask = env_shape(env)
    if L is None:
        mdp = env_model(env)
        name = f" {mdp.name!r}" if mdp.name else ""
        raise OptplanError(
            f"{who} is for episodic (finite-horizon) environments, but the environment's "
            f"model{name} is a continuing {type(mdp).__name__} with no horizon "
            f"(n_layers=None); give a layered one (e.g. deepsea, riverswim-episodic)"
        )
    return {"n_states": S, "n_actions": A, "n_layers": L, "action_mask": mask}


#: The registry parameters ``delta`` and ``episodes`` of the peers' episodic optimistic agents.
EPISODIC_CONFIDENCE = (
    Param("delta", "float", 0.1, "failure probability in the log term"),
    Param("episodes", "int", None, "episodes K of the run, T = K H; unset: k H at episode k"),
)
