r"""Average-reward index agents of accelerating-ucb-indices-mdp §3 (MDP-UCB, OLP, MDP-DMED,
MDP-PS) and IMED-RL (Pesquerel & Maillard 2022), the index form of MDP-DMED's rate.

All five share :class:`TransitionEstimator` (§3.1), for the undiscounted, infinite-horizon
setting with known mean rewards ``r_x(a)`` and unknown transitions:

- transition estimate ``p_hat[x, a, y] = (T[x, a, y] + 1) / (T[x, a] + |S|)``;
- "good" actions ``{a : T[x, a] >= (ln T[x])^2}`` in every state (all admissible actions of
  a state where none qualifies);
- estimated gain and bias ``(phi_hat, v_hat)`` of the estimated model restricted to the good
  actions, by Howard policy iteration warm-started from the previous step's policy (one
  evaluation and one improvement when nothing changed). ``p_hat > 0`` everywhere, so every
  policy is unichain and the solve always succeeds.

At time ``t`` (1 on the first step) in state ``x``, with ``T = T[x, a]``:

- **MDP-UCB** (Eq. 2): ``u_a = r + C(p_hat, v_hat, ln t / T)``, the KL-ball index;
- **OLP** (§3.3): ``u_a = r + B(p_hat, v_hat, sqrt(2 ln t / T))``, the L1-ball index;
- **MDP-DMED** (§3.2): ``a* = argmax_a r + p_hat . v_hat``; discrepancies
  ``D(a) = ln t / K(a) - T`` for ``a != a*`` with ``K(a)`` the KL-minimization rate
  ``D(p_hat, v_hat, r(a*) + p_hat^{a*} . v_hat - r(a))``, and Theorem 3's conventions
  (``K = 0``: ``D = +inf``; ``K = +inf`` (target above max v, or at it with v not constant):
  ``D = -T``); play ``argmax D`` if positive, else ``a*``;
- **MDP-PS** (§3.4): ``W_a = r + Q_a . v_hat`` with ``Q_a ~ Dirichlet(T[x, a] + 1)`` (the
  uniform prior's posterior), play ``argmax W``;
- **IMED-RL** (Pesquerel & Maillard, NeurIPS 2022, in the known-reward form of this setting):
  with ``L_a = r + p_hat . v_hat`` and ``L* = max_a L_a``, the index
  ``I(a) = T K(a) + ln T`` where ``K(a) = D(p_hat, v_hat, L* - r(a))`` is MDP-DMED's rate for
  an empirically sub-optimal action (``L_a < L*``; ``K = +inf``: ``I = +inf``) and
  ``I(a) = ln T`` for an empirically optimal one (``L_a = L*``); play ``argmin I``, an
  untried action (``T = 0``: ``I = -inf``) first.

An action never tried (``T = 0``) has an infinite UCB/OLP radius: its index is the supremum
over the whole simplex, ``r + max v_hat``, computed exactly. Ties go to the lowest action.

``method="conic"`` computes each index with the CVXPY formulation of the same problem
(:class:`~optplan.problems.KLBallIndex`, :class:`~optplan.problems.L1BallIndex`,
:class:`~optplan.problems.KLInfRate`); an instance the solver does not solve to ``optimal`` is
recomputed by the fast path, counted in :attr:`~IndexAgent.fallbacks` and its status kept in
:attr:`~IndexAgent.statuses`. ``initial_counts`` starts the counts from given pseudo-counts
(the paper's "rigged" start, §5.1); they count as past steps for ``t``, ``T[x]`` and
``T[x, a]``.

The steps are compiled functions of one state (:mod:`optplan.agents._index_steps`), which
the generic loop of :func:`optplan.experiments.run` calls one step at a time and the compiled
loop plays whole runs of (``method="fast"``); from
:data:`optplan.dp.ITERATIVE_MIN_STATES` states on, the estimator's policy iteration is
:func:`optplan.dp.policy_iteration` (evaluations by iteration), called between steps.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import OptplanError, as_numeric
from .._params import Component, Param
from ..dp import ITERATIVE_MIN_STATES, greedy, masked, policy_iteration
from ..modelfile import load_counts
from ..problems import KLBallIndex, KLInfRate, L1BallIndex
from ..result import INFEASIBLE, OPTIMAL
from . import _index_steps as IX
from . import _psrl_kernels as PK
from ._env import continuing_shape, env_model
from .base import CompiledAgent, ConicFallback, check_agent_mask, check_rng, state_field

#: The compiled policy iteration's statuses, as words.
PK_STATUS = {
    PK.MULTICHAIN: "'multichain'",
    PK.MAX_ITER: f"'max_iter' ({IX.PI_MAX_ITER} iterations)",
    PK.NUMERICAL: "'numerical_error'",
}

__all__ = ["TransitionEstimator", "IndexAgent", "MDPUCB", "OLP", "MDPDMED", "MDPPS", "IMEDRL"]


class TransitionEstimator:
    """Counts, ``p_hat``, good actions and the warm-started gain/bias of §3.1, held in an
    :class:`~optplan.agents._index_steps.IndexState` (:attr:`state`) that the agents' compiled
    steps update.

    Parameters
    ----------
    rewards : array (S, A)
        Known mean rewards ``r_x(a)``.
    action_mask : array of bool (S, A), optional
    initial_counts : array (S, A, S) of pseudo-counts >= 0, optional
    """

    def __init__(self, rewards, *, action_mask=None, initial_counts=None):
        R = as_numeric("rewards", rewards)
        if R.ndim != 2 or not np.isfinite(R).all():
            raise OptplanError(f"rewards must be a finite (S, A) array, got shape {R.shape}")
        S, A = R.shape
        self._rewards = R
        self.S, self.A = S, A
        self.mask = check_agent_mask(action_mask, S, A)
        if self.mask.ndim != 2:
            raise OptplanError("index agents are for continuing (not layered) models")
        if initial_counts is None:
            init = np.zeros((S, A, S))
        else:
            init = as_numeric("initial_counts", initial_counts)
            if init.shape != (S, A, S):
                raise OptplanError(
                    f"initial_counts has shape {init.shape}, expected ({S}, {A}, {S}) "
                    "(state, action, next state)"
                )
            bad = ~np.isfinite(init) | (init < 0)
            if bad.any():
                x, a, y = (int(i) for i in np.argwhere(bad)[0])
                raise OptplanError(
                    f"initial_counts must be finite and >= 0, got {float(init[x, a, y])!r} at "
                    f"[x, a, y] = [{x}, {a}, {y}]"
                )
            if (init.sum(axis=-1)[~self.mask] > 0).any():
                raise OptplanError("initial_counts puts counts on inadmissible actions")
        self.initial_counts = init
        self.reset()

    def reset(self) -> None:
        PK._compiled()  # the compiled functions the steps call, bound before they compile
        policy = greedy(masked(self._rewards, self.mask))
        self.state = IX.new_state(
            self._rewards, self.mask, self.initial_counts, policy, self.S >= ITERATIVE_MIN_STATES
        )
        IX.good_rows(self.state)
        self.solve()

    R = state_field("R", "The known mean rewards ``(S, A)``.")
    T = state_field("T", "Counts ``T[x, a, y]``.")
    Txa = state_field("Txa", "Counts ``T[x, a]``.")
    Tx = state_field("Tx", "Counts ``T[x]``.")
    p_hat = state_field("p_hat", "``(T + 1) / (T[x, a] + S)``.")
    policy = state_field("policy", "The estimated optimal policy.")
    v = state_field("v", "Bias ``v_hat`` (0 in state 0).")
    gain = property(lambda self: float(self.state.gain[0]), doc="Gain ``phi_hat``.")

    @property
    def t(self) -> int:
        """The time step (1 on the first, pseudo-counts included)."""
        return int(self.state.clock[IX.TIME])

    @t.setter
    def t(self, value: int) -> None:
        self.state.clock[IX.TIME] = value

    def update(self, x: int, a: int, y: int) -> None:
        if IX.observe(self.state, x, a, 0.0, y, False, None):
            self.plan()

    def good_actions(self) -> np.ndarray:
        """Bool (S, A): ``T[x, a] >= (ln T[x])^2``, all admissible actions where none is."""
        return self.state.good.copy()

    def solve(self) -> None:
        """Gain ``phi_hat`` and bias ``v_hat`` of ``p_hat`` on the good actions (Howard policy
        iteration from the previous policy)."""
        if IX.solve(self.state):
            self.plan()

    def plan(self) -> None:
        """The solve the compiled steps leave to Python: a large model's (evaluations by
        iteration, :func:`optplan.dp.policy_iteration`), or the error of one that failed."""
        s = self.state
        if s.clock[IX.PYTHON_PI]:
            out = policy_iteration(s.p_hat, s.R, s.good, None, s.policy, IX.PI_MAX_ITER)
            if out.status == OPTIMAL:
                s.policy[:], s.v[:], s.gain[0] = out.policy, out.values, out.gain
                return
            message = out.message
        else:
            message = f"policy iteration ended {PK_STATUS.get(int(s.clock[IX.PI_STATUS]))}"
        raise RuntimeError(f"policy iteration on the estimated model: {message}")


_INDEX_PARAMETERS = """
    Parameters
    ----------
    rewards : array_like, shape (S, A)
        The known mean-reward matrix ``R[s, a] = r_x(a)`` of the true model (the paper's
        setting: rewards known, transitions learned). Not the number of states: ``S`` and
        ``A`` are read from its shape. To build the agent from an environment or a model, use
        ``make_agent("{name}", env)``, which passes the model's ``R``.
    action_mask : array_like of bool, shape (S, A), optional
        Admissible actions ``A(x)``; all admissible if omitted.
    initial_counts : array_like, shape (S, A, S), optional
        Pseudo-counts ``T[x, a, y] >= 0`` to start from (the paper's "rigged" start, §5.1);
        they count as past steps.
    method : {{"fast", "conic"}}, default "fast"
        How each index is computed: closed form / root finding, or the CVXPY formulation of
        the same problem (a conic failure falls back to the fast value, counted in
        :attr:`fallbacks`).{method_note}
    solver : {{"CLARABEL", "ECOS", "SCS"}}, optional
        The conic solver (``method="conic"``).
"""


def _with_parameters(cls, method_note: str = ""):
    """Append the shared numpydoc ``Parameters`` section to an index agent's docstring."""
    cls.__doc__ = (
        (cls.__doc__ or "").rstrip()
        + "\n"
        + _INDEX_PARAMETERS.format(name=cls.name, method_note=method_note)
    )
    return cls


def _check_rewards(cls_name: str, agent_name: str, rewards) -> None:
    """Refuse what is clearly not a reward matrix (a count, an environment, a model) with a
    message saying what was expected and how to build from an environment."""
    if isinstance(rewards, np.ndarray) or (
        isinstance(rewards, (list, tuple)) and np.ndim(rewards) == 2
    ):
        if np.ndim(rewards) == 2:
            return
        got = f"an array of shape {np.shape(rewards)}"
    elif isinstance(rewards, (bool, int, float, np.number)):
        got = f"the {type(rewards).__name__} {rewards!r}"
    elif isinstance(rewards, (list, tuple)):
        got = f"a {type(rewards).__name__} of shape {np.shape(rewards)}"
    else:
        got = f"an object of type {type(rewards).__name__}"
    raise OptplanError(
        f"{cls_name}(rewards=...) expects the known mean-reward matrix R of shape (S, A); got "
        f"{got}. To build from an environment or a model use make_agent({agent_name!r}, env)"
    )


class IndexAgent(CompiledAgent, ConicFallback):
    """Common machinery: the estimator, the method (fast/conic), fallbacks and the compiled
    steps of the agent (:data:`optplan.agents._index_steps.STEPS`, by :attr:`name`)."""

    name = "index"
    #: The conic problem of one action (its ``(p_hat, v_hat, radius or target)``).
    _problem: type | None = None

    def __init__(
        self, rewards, *, action_mask=None, initial_counts=None, method="fast", solver=None
    ):
        _check_rewards(type(self).__name__, self.name, rewards)
        self.init_fallback(method, solver)
        self.estimator = TransitionEstimator(
            rewards, action_mask=action_mask, initial_counts=initial_counts
        )
        self.n_states, self.n_actions = self.estimator.S, self.estimator.A
        self.rng: np.random.Generator | None = None
        self._steps = IX.STEPS[self.name]

    @property
    def state(self) -> IX.IndexState:
        """The estimator's state (:class:`~optplan.agents._index_steps.IndexState`)."""
        return self.estimator.state

    @property
    def _run(self):
        return self._steps.run

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        self.estimator.reset()
        self.reset_fallback()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        self.estimator.update(state, action, next_state)

    def plan(self) -> None:
        self.estimator.plan()

    def compiled_reason(self, env) -> str | None:
        if self.method != "fast":
            return f"method={self.method!r} solves the indices with CVXPY, in Python"
        if env.ints[1]:
            return f"{type(self).__name__} is for continuing models, the environment is layered"
        return None

    def _conic(self, problem, fast_value: float) -> float:
        # Both paths agree when the solver finds no feasible q and the fast rate is +inf
        # (Theorem 3): not a fallback.
        res = self.solve_conic(
            problem, accept=lambda r: r.status == INFEASIBLE and math.isinf(fast_value)
        )
        return fast_value if res is None or res.status != OPTIMAL else float(res.value)

    def indices(self, state: int) -> np.ndarray:
        """The agent's score of each action in ``state`` (see each agent); with
        ``method="conic"`` each action's problem solved by CVXPY."""
        s = self.state
        self._steps.rates(s, state, self.rng)
        if self.method == "conic":
            for a in np.flatnonzero(~np.isnan(s.rates)):
                p, rho = s.p_hat[state, a], float(s.radius[a])
                s.rates[a] = self._conic(self._problem(p, s.v, rho), float(s.rates[a]))
        self._steps.scores(s, state)
        return s.u.copy()

    def select_action(self, state: int) -> int:
        if self.method == "conic":
            self.indices(state)
            return int(self._steps.choose(self.state))
        return int(self._steps.act(self.state, state, self.rng))

    @property
    def last_indices(self) -> np.ndarray:
        """The scores of the last :meth:`select_action` (or :meth:`indices`)."""
        return self.state.u

    @property
    def last_rates(self) -> np.ndarray:
        """The value of each action's problem at the last step (its index, or its
        KL-minimization rate ``K(a)``); NaN for an action that had none."""
        return self.state.rates

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(S={self.n_states}, A={self.n_actions}, method={self.method!r})"
        )


@_with_parameters
class MDPUCB(IndexAgent):
    """MDP-UCB (Burnetas & Katehakis; accelerating-ucb-indices-mdp §3.1, Eq. 2): KL-ball
    index of radius ``ln t / T[x, a]``; ``r + max v_hat`` for an untried action. See
    :mod:`optplan.agents.index_agents`."""

    name = "mdp-ucb"
    _problem = KLBallIndex


@_with_parameters
class OLP(IndexAgent):
    """Optimistic linear programming (Tewari & Bartlett; §3.3): L1-ball index of radius
    ``sqrt(2 ln t / T[x, a])``; ``r + max v_hat`` for an untried action."""

    name = "olp"
    _problem = L1BallIndex


@_with_parameters
class MDPDMED(IndexAgent):
    """MDP-DMED (§3.2): play the estimated best action unless some other action's
    discrepancy ``ln t / K(a) - T[x, a]`` is positive (Theorem 3 conventions); the scores are
    the discrepancies ``D(a)``, 0 for the estimated best action."""

    name = "mdp-dmed"
    _problem = KLInfRate

    @property
    def best_action(self) -> int:
        """The estimated best action ``a*`` of the last step."""
        return int(self.state.clock[IX.BEST])


class MDPPS(IndexAgent):
    """MDP-PS (§3.4): ``W_a = r + Q_a . v_hat`` with ``Q_a ~ Dirichlet(T[x, a] + 1)``."""

    name = "mdp-ps"


_with_parameters(MDPPS, " MDP-PS solves no optimization problem: accepted for a uniform interface.")


@_with_parameters
class IMEDRL(IndexAgent):
    """IMED-RL (Pesquerel & Maillard, NeurIPS 2022; IMED of Honda & Takemura 2015 for MDPs), in
    the known-reward form of this module: the index ``I(a) = T[x, a] K(a) + ln T[x, a]`` with
    MDP-DMED's KL-minimization rate ``K(a) = D(p_hat, v_hat, L* - r(a))`` (``L_a = r(a) +
    p_hat . v_hat``, ``L* = max_a L_a``) for an empirically sub-optimal action, ``ln T[x, a]``
    for an empirically optimal one (``L_a = L*``); the agent plays ``argmin I``.

    Conventions: an untried admissible action has ``I = -inf`` (tried first, lowest index
    first); ``K = +inf`` (the target is above ``max v_hat``, or at it with ``v_hat`` not
    constant: no model in the simplex makes the action optimal) gives ``I = +inf``; an
    inadmissible action has ``I = +inf``. Ties go to the lowest action. ``ln T`` is the
    natural log of the counts (with ``initial_counts``, of the pseudo-counts included)."""

    name = "imed-rl"
    _problem = KLInfRate


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _builder(cls):
    def build(env, criterion, method, solver, initial_counts):
        refusal = f"{cls.name} is for continuing (average-reward) environments"
        S, A, mask = continuing_shape(env, refusal)
        counts = load_counts(initial_counts, S, A) if initial_counts else None
        return cls(
            env_model(env).R, action_mask=mask, initial_counts=counts, method=method, solver=solver
        )

    return build


_PARAMS = (
    Param("method", "str", "fast", "index by 'fast' (closed form / root) or 'conic' (CVXPY)"),
    Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
    Param(
        "initial_counts",
        "str",
        "",
        "TOML file with T[x][a][y] pseudo-counts (rigged start)",
        file=True,
    ),
)
BUILDERS = tuple(
    Component(cls.name, _builder(cls), _PARAMS, doc)
    for cls, doc in (
        (MDPUCB, "MDP-UCB: KL-ball index (accelerating-ucb-indices-mdp Eq. 2)"),
        (OLP, "OLP: L1-ball index (Tewari & Bartlett)"),
        (MDPDMED, "MDP-DMED: KL-minimization discrepancies (Theorem 3 conventions)"),
        (MDPPS, "MDP-PS: Dirichlet posterior samples of the current state's rows"),
        (IMEDRL, "IMED-RL: index T K + ln T from MDP-DMED's KL-minimization rate, argmin"),
    )
)
