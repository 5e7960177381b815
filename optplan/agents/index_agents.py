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

This module is the reference implementation, one Python step at a time.
:func:`optplan.experiments.run` runs an agent of exactly these five classes with
``method="fast"`` on a plain :class:`~optplan.envs.TabularEnv` (fewer than 200 states, no
reward noise) in one compiled loop instead (:mod:`optplan.experiments.index_compiled`, numba),
with the same results bit for bit; ``run(..., engine="python")`` keeps this loop.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from .._checks import OptplanError, as_numeric
from .._params import Component, Param
from ..dp import greedy, masked, policy_iteration
from ..fast.kl_ball import kl_ball_index
from ..fast.kl_inf import kl_inf_rate
from ..fast.l1_ball import l1_ball_index
from ..modelfile import load_counts
from ..posteriors import sample_dirichlet
from ..problems import KLBallIndex, KLInfRate, L1BallIndex
from ..result import INFEASIBLE, OPTIMAL
from ._env import continuing_shape, env_model
from .base import ConicFallback, check_agent_mask, check_rng

__all__ = ["TransitionEstimator", "IndexAgent", "MDPUCB", "OLP", "MDPDMED", "MDPPS", "IMEDRL"]


class TransitionEstimator:
    """Counts, ``p_hat``, good actions and the warm-started gain/bias of §3.1.

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
        self.R = R
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
        self.T = self.initial_counts.copy()
        self.Txa = self.T.sum(axis=-1)
        self.Tx = self.Txa.sum(axis=-1)
        self.t = 1 + int(round(self.Tx.sum()))
        self.policy = greedy(masked(self.R, self.mask))
        self.p_hat = (self.T + 1.0) / (self.Txa[..., None] + self.S)
        self.solve()

    def update(self, x: int, a: int, y: int) -> None:
        self.T[x, a, y] += 1
        self.Txa[x, a] += 1
        self.Tx[x] += 1
        self.t += 1
        self.p_hat[x, a] = (self.T[x, a] + 1.0) / (self.Txa[x, a] + self.S)
        self.solve()

    def good_actions(self) -> np.ndarray:
        """Bool (S, A): ``T[x, a] >= (ln T[x])^2``, all admissible actions where none is."""
        with np.errstate(divide="ignore"):
            thresh = np.log(self.Tx) ** 2
        good = self.mask & (self.Txa >= np.where(self.Tx > 0, thresh, 0.0)[:, None])
        empty = ~good.any(axis=1)
        good[empty] = self.mask[empty]
        return good

    def solve(self, max_iter: int = 100) -> None:
        """Gain ``phi_hat`` and bias ``v_hat`` of ``p_hat`` on the good actions (Howard policy
        iteration from the previous policy)."""
        # The incumbent is kept unless it lost a good action (then: greedy restart).
        out = policy_iteration(self.p_hat, self.R, self.good_actions(), None, self.policy, max_iter)
        if out.status != OPTIMAL:  # pragma: no cover - p_hat > 0: unichain, stops in few steps
            raise RuntimeError(f"policy iteration on the estimated model: {out.message}")
        self.policy, self.gain, self.v = out.policy, float(out.gain), out.values


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


class IndexAgent(ConicFallback, ABC):
    """Common machinery: estimator, method (fast/conic), fallbacks, action selection."""

    name = "index"

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
        self.last_indices: np.ndarray | None = None

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        self.estimator.reset()
        self.reset_fallback()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        self.estimator.update(state, action, next_state)

    def _conic(self, problem, fast_value: float) -> float:
        # Both paths agree when the solver finds no feasible q and the fast rate is +inf
        # (Theorem 3): not a fallback.
        res = self.solve_conic(
            problem, accept=lambda r: r.status == INFEASIBLE and math.isinf(fast_value)
        )
        return fast_value if res is None or res.status != OPTIMAL else float(res.value)

    @abstractmethod
    def indices(self, state: int) -> np.ndarray:
        """The agent's score per action in ``state`` (-inf for inadmissible actions)."""

    def select_action(self, state: int) -> int:
        u = self.indices(state)
        self.last_indices = u
        return int(np.argmax(u))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(S={self.n_states}, A={self.n_actions}, method={self.method!r})"
        )


class _BallIndexAgent(IndexAgent):
    """``u_a = r + index(p_hat, v_hat, radius(ln t, T))``; untried actions: ``r + max v``.

    A subclass names its ball: ``_index``, the batched fast index ``(p, v, radius,
    validate=False) -> BatchResult``, and ``_problem``, the problem class whose conic path
    computes one index.
    """

    _index: Callable
    _problem: type

    @abstractmethod
    def _radius(self, log_t: float, T: np.ndarray) -> np.ndarray:
        """Ball radius per tried action from ``ln t`` and the counts ``T[x, a]``."""

    def indices(self, state: int) -> np.ndarray:
        e = self.estimator
        acts = np.flatnonzero(e.mask[state])
        T = e.Txa[state, acts]
        p = e.p_hat[state, acts]
        u = np.full(self.n_actions, -np.inf)
        tried = T > 0
        u[acts[~tried]] = e.R[state, acts[~tried]] + e.v.max()
        if tried.any():
            radius = self._radius(math.log(e.t), T[tried])
            fast = self._index(p[tried], e.v, radius, validate=False).value
            if self.method == "conic":
                fast = np.array(
                    [
                        self._conic(self._problem(pi, e.v, float(d)), float(f))
                        for pi, d, f in zip(p[tried], radius, fast, strict=True)
                    ]
                )
            u[acts[tried]] = e.R[state, acts[tried]] + fast
        return u


@_with_parameters
class MDPUCB(_BallIndexAgent):
    """MDP-UCB (Burnetas & Katehakis; accelerating-ucb-indices-mdp §3.1, Eq. 2): KL-ball
    index of radius ``ln t / T[x, a]``. See :mod:`optplan.agents.index_agents`."""

    name = "mdp-ucb"
    _index = staticmethod(kl_ball_index)
    _problem = KLBallIndex

    def _radius(self, log_t, T):
        return log_t / T


@_with_parameters
class OLP(_BallIndexAgent):
    """Optimistic linear programming (Tewari & Bartlett; §3.3): L1-ball index of radius
    ``sqrt(2 ln t / T[x, a])``."""

    name = "olp"
    _index = staticmethod(l1_ball_index)
    _problem = L1BallIndex

    def _radius(self, log_t, T):
        return np.sqrt(2.0 * log_t / T)


@_with_parameters
class MDPDMED(IndexAgent):
    """MDP-DMED (§3.2): play the estimated best action unless some other action's
    discrepancy ``ln t / K(a) - T[x, a]`` is positive (Theorem 3 conventions)."""

    name = "mdp-dmed"

    def indices(self, state: int) -> np.ndarray:
        """Discrepancies ``D(a)``; the estimated best action gets 0 (played when no ``D > 0``)."""
        e = self.estimator
        L_val = masked(e.R[state] + e.p_hat[state] @ e.v, e.mask[state])
        best = int(np.argmax(L_val))
        others = np.flatnonzero(e.mask[state] & (np.arange(self.n_actions) != best))
        D = np.full(self.n_actions, -np.inf)
        D[best] = 0.0
        self.last_rates = np.full(self.n_actions, np.nan)  # K(a) per other action, for checks
        if others.size:
            target = L_val[best] - e.R[state, others]
            res = kl_inf_rate(e.p_hat[state, others], e.v, target, validate=False)
            K = np.asarray(res.value, dtype=float)
            if self.method == "conic":
                K = np.array(
                    [
                        self._conic(KLInfRate(e.p_hat[state, a], e.v, float(tg)), float(k))
                        for a, tg, k in zip(others, target, K, strict=True)
                    ]
                )
            self.last_rates[others] = K
            T = e.Txa[state, others]
            log_t = math.log(e.t)
            with np.errstate(divide="ignore", invalid="ignore"):
                d = np.where(K <= 0, np.inf, np.where(np.isinf(K), -T, log_t / K - T))
            D[others] = d
        self.best_action = best
        return D

    def select_action(self, state: int) -> int:
        D = self.indices(state)
        self.last_indices = D
        others = D.copy()
        others[self.best_action] = -np.inf
        j = int(np.argmax(others))
        return j if others[j] > 0 else self.best_action


class MDPPS(IndexAgent):
    """MDP-PS (§3.4): ``W_a = r + Q_a . v_hat`` with ``Q_a ~ Dirichlet(T[x, a] + 1)``."""

    name = "mdp-ps"

    def indices(self, state: int) -> np.ndarray:
        e = self.estimator
        Q = sample_dirichlet(e.T[state] + 1.0, self.rng)
        return masked(e.R[state] + Q @ e.v, e.mask[state])


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
    inadmissible action has ``I = +inf``. Ties go to the lowest action. ``ln T`` is numpy's
    ``log`` of the counts (with ``initial_counts``, of the pseudo-counts included)."""

    name = "imed-rl"

    def indices(self, state: int) -> np.ndarray:
        """The IMED indices ``I(a)`` (``+inf`` for inadmissible actions); :attr:`last_rates`
        holds ``K(a)`` of the empirically sub-optimal tried actions (NaN elsewhere)."""
        e = self.estimator
        mask = e.mask[state]
        L_val = masked(e.R[state] + e.p_hat[state] @ e.v, mask)
        top = L_val.max()
        T = e.Txa[state]
        tried = mask & (T > 0)
        optimal = tried & (L_val == top)
        others = np.flatnonzero(tried & ~optimal)
        self.last_rates = np.full(self.n_actions, np.nan)
        with np.errstate(divide="ignore"):
            log_T = np.log(T)
        index = np.where(tried, log_T, np.inf)
        index[mask & (T == 0)] = -np.inf
        if others.size:
            target = top - e.R[state, others]
            K = np.asarray(
                kl_inf_rate(e.p_hat[state, others], e.v, target, validate=False).value,
                dtype=float,
            )
            if self.method == "conic":
                K = np.array(
                    [
                        self._conic(KLInfRate(e.p_hat[state, a], e.v, float(tg)), float(k))
                        for a, tg, k in zip(others, target, K, strict=True)
                    ]
                )
            self.last_rates[others] = K
            index[others] = T[others] * K + log_T[others]
        return index

    def select_action(self, state: int) -> int:
        index = self.indices(state)
        self.last_indices = index
        return int(np.argmin(index))


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
    Param("initial_counts", "str", "", "TOML file with T[x][a][y] pseudo-counts (rigged start)"),
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
