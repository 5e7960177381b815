r"""RAVI-UCB (Moulin & Neu 2023, ravi-ucb-optimistic-planning-regularized-dp): optimistic
planning by one regularized (mirror-descent) Bellman step per epoch.

Each epoch ``k`` starts with one step of :func:`optplan.soft.ravi_step`:
``V_k = (1/eta) log sum_a pi_{k-1} e^{eta Q_k}``, ``pi_k ~ pi_{k-1} e^{eta Q_k}``,
``Q_{k+1} = Pi_H[r + CB_k + gamma P_hat_k V_k]``; the agent then samples ``a_t ~ pi_k``
until the epoch ends. Epochs end when the environment ends an episode (``done``): wrap the
environment in :class:`optplan.envs.DiscountedResets` (each step resets to ``nu_0`` with
probability ``1 - gamma``, Algorithm 1); the reset moves the state, so it belongs to the
environment, and the agent only has to notice it. ``pi_0`` is uniform over the admissible
actions and ``Q_1 = 0`` (``V_0 = 0``).

Defaults (docs/sources.md §4, with the square roots the text extraction lost restored),
``H = 1 / (1 - gamma)``, ``T = horizon``, ``delta = 1 / T`` (as Theorem 4.1's proof and
Theorem 5.6 set it):

- ``eta = sqrt(2 log|A| / (H^2 T))`` (Theorem 4.1; 1 when ``|A| = 1``, where the policy is
  fixed anyway);
- tabular (Algorithm 2, Lemma 5.1): ``beta = 8 H sqrt(|X| log(|X| |A| T / delta))``,
  ``CB = beta / sqrt(N)``, counts from ``N = 1``, ``N' = 0``, ``P_hat = N' / N``;
- linear mixture (Algorithm 3, Lemma 5.4 / Theorem 5.6): ``beta = H sqrt(2 ((d/2) log(1 + T
  B^2 H^2 / (lam d)) + log(1/delta))) + sqrt(lam) B``, ``CB = beta ||phi_k(x, a)||_{Lambda^-1}``.

``beta_scale`` multiplies ``beta`` (the theory's constants are loose; experiments sweep it).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    check_int,
    check_positive,
    check_real,
)
from .._jit import njit
from .._params import Component, Param
from ..envs.kernels import play, play_resets, search_right
from ..soft import check_unit_rewards, clipped_backup, mirror_step, ravi_step
from ._env import DISCOUNT_FROM_ENV, continuing_shape, env_discount, env_model
from .base import CompiledAgent, check_agent_mask, check_count, check_rng

__all__ = [
    "RAVIUCB",
    "RAVIUCBLinear",
    "default_eta",
    "tabular_beta",
    "linear_beta",
    "sherman_morrison",
    "sherman_morrison_into",
    "linear_observe",
    "RAVIState",
]


def default_eta(n_actions: int, H: float, T: int) -> float:
    """Theorem 4.1's learning rate ``sqrt(2 log|A| / (H^2 T))`` (1 for a single action)."""
    if n_actions == 1:
        return 1.0
    return math.sqrt(2.0 * math.log(n_actions) / (H**2 * T))


def tabular_beta(n_states: int, n_actions: int, H: float, T: int, delta: float) -> float:
    """Lemma 5.1: ``8 H sqrt(|X| log(|X| |A| T / delta))``."""
    return 8.0 * H * math.sqrt(n_states * math.log(n_states * n_actions * T / delta))


def linear_beta(d: int, H: float, T: int, B: float, lam: float, delta: float) -> float:
    """Lemma 5.4 (Theorem 5.6 at ``lam = 1``, ``delta = 1/T``): ``H sqrt(2 ((d/2) log(1 + T
    B^2 H^2 / (lam d)) + log(1/delta))) + sqrt(lam) B``."""
    inner = (d / 2.0) * math.log1p(T * B**2 * H**2 / (lam * d)) + math.log(1.0 / delta)
    return H * math.sqrt(2.0 * inner) + math.sqrt(lam) * B


@njit
def sherman_morrison_into(inverse, x, u, w):  # pragma: no cover - compiled by numba
    """``inverse <- (Lambda + x x^T)^{-1}`` in place from ``inverse = Lambda^{-1}``, in
    ``O(d^2)``: ``Lambda^{-1} - u (u / (1 + x^T u))^T`` with ``u = Lambda^{-1} x``
    (``Lambda`` symmetric positive definite; ``u``, ``w``: room for ``d`` numbers)."""
    d = inverse.shape[0]
    c = 1.0
    for i in range(d):
        acc = 0.0
        for j in range(d):
            acc += inverse[i, j] * x[j]
        u[i] = acc
        c += x[i] * acc
    for j in range(d):
        w[j] = u[j] / c
    for i in range(d):
        for j in range(d):
            inverse[i, j] -= u[i] * w[j]


@njit
def linear_observe(inverse, gram, b, x, value, u, w):  # pragma: no cover - compiled by numba
    """One transition of :class:`RAVIUCBLinear`: ``Lambda^{-1}`` by :func:`sherman_morrison_into`,
    ``Lambda += x x^T``, ``b += x V(y)``."""
    sherman_morrison_into(inverse, x, u, w)
    d = x.shape[0]
    for i in range(d):
        for j in range(d):
            gram[i, j] += x[i] * x[j]
        b[i] += x[i] * value


def sherman_morrison(inverse: np.ndarray, x: np.ndarray) -> None:
    """``inverse <- (Lambda + x x^T)^{-1}`` in place from ``inverse = Lambda^{-1}``
    (:func:`sherman_morrison_into`, compiled)."""
    d = inverse.shape[0]
    sherman_morrison_into(inverse, np.ascontiguousarray(x, dtype=float), np.empty(d), np.empty(d))


class RAVIState(NamedTuple):
    """The compiled steps' view of a RAVI-UCB agent: the epoch's policy ``pi_k`` (``policy``,
    ``cdf`` its cumulative rows, ``(S, A)``); the tabular agent's counts ``N``, ``N_next``,
    ``reward_sums``, or the linear agent's ``phi_k`` (``(S, A, d)``), ``values`` (``V_k``),
    ``inv`` (``Lambda^{-1}``), ``gram`` (``Lambda``), ``b`` and scratch ``u``, ``w`` (the
    other kind's are ``1``-sized blanks); ``clock = [t, linear]``."""

    cdf: np.ndarray
    policy: np.ndarray
    N: np.ndarray
    N_next: np.ndarray
    reward_sums: np.ndarray
    phi: np.ndarray
    values: np.ndarray
    inv: np.ndarray
    gram: np.ndarray
    b: np.ndarray
    u: np.ndarray
    w: np.ndarray
    clock: np.ndarray


@njit(inline="always")
def ravi_act(s, x, rng):  # pragma: no cover - compiled by numba
    """``a ~ pi_k(. | x)``: :func:`ravi_pick` of one uniform of ``rng``."""
    return ravi_pick(s.cdf, s.policy, x, rng.random())


@njit(inline="always")
def ravi_pick(cdf, policy, x, u):  # pragma: no cover - compiled by numba
    """The action of uniform ``u``: ``u`` times the row's total, searched in its cumulative
    sums (``searchsorted``, side right); rounded past the last action, the last action with
    mass."""
    row = cdf[x]
    A = row.shape[0]
    a = search_right(row, u * row[A - 1])
    if a >= A:
        a = A - 1
        while a > 0 and not policy[x, a] > 0.0:
            a -= 1
    return a


@njit(inline="always")
def ravi_observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Record ``(x, a, r, y)``; a new epoch (a Python plan) is due when the episode ended."""
    if s.clock[1]:
        linear_observe(s.inv, s.gram, s.b, s.phi[x, a], s.values[y], s.u, s.w)
    else:
        count(s.N, s.N_next, s.reward_sums, x, a, r, y)
    s.clock[0] += 1
    return done


@njit(inline="always")
def count(N, N_next, reward_sums, x, a, r, y):  # pragma: no cover - compiled by numba
    """The tabular agent's record of ``(x, a, r, y)``."""
    N[x, a] += 1.0
    N_next[x, a, y] += 1.0
    reward_sums[x, a] += r


@njit
def ravi_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    """The compiled loop (:func:`optplan.envs.kernels.play`) with these steps."""
    return play(ravi_act, ravi_observe, s, env, steps, env_rng, agent_rng)


@njit
def ravi_run_resets(s, env, steps, env_rng, coin_rng, agent_rng):  # pragma: no cover - compiled
    """The same under discounted resets (:func:`optplan.envs.kernels.play_resets`)."""
    return play_resets(ravi_act, ravi_observe, s, env, steps, env_rng, coin_rng, agent_rng)


#: The blanks of the other agent's arrays in :class:`RAVIState`: 2-, 3- and 1-dimensional.
_BLANK = (np.zeros((1, 1)), np.zeros((1, 1, 1)), np.zeros(1))


class _RAVI(CompiledAgent):
    """What both agents share: parameters, the epoch's policy and its sampling, the epoch
    clock. Subclasses plan an epoch (:meth:`_plan`) and say what the compiled steps record
    (:meth:`_data`). The steps are compiled functions of :class:`RAVIState`
    (:func:`ravi_act`, :func:`ravi_observe`), which both loops of
    :func:`~optplan.experiments.run` call; an epoch's plan is Python's."""

    name = "ravi-ucb"
    _run = staticmethod(ravi_run)
    _run_resets = staticmethod(ravi_run_resets)
    POLICY_CHANGES_IN_PLAN = True

    def _init_common(self, S, A, discount, horizon, eta, beta_scale, delta, action_mask):
        self.n_states, self.n_actions = S, A
        self.discount = check_real("discount", discount, 0.0, 1.0, low_open=True, high_open=True)
        self.horizon = check_int("horizon", horizon)
        self.H = 1.0 / (1.0 - self.discount)
        self.eta = (
            default_eta(A, self.H, self.horizon)
            if eta is None
            else check_real("eta", eta, 0.0, None, low_open=True)
        )
        self.beta_scale = check_positive("beta_scale", beta_scale, allow_zero=True)
        self.delta = (
            1.0 / self.horizon
            if delta is None
            else check_real("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        )
        mask = check_agent_mask(action_mask, S, A)
        if mask.ndim != 2:
            raise OptplanError(f"{type(self).__name__} is for continuing (not layered) models")
        self.action_mask = mask
        self.rng = None
        self.epochs = 0
        self._clock = np.array([1, isinstance(self, RAVIUCBLinear)], dtype=np.int64)

    @staticmethod
    def _check_beta(beta) -> float | None:
        return None if beta is None else check_positive("beta", beta, allow_zero=True)

    @property
    def t(self) -> int:
        """The step count, from 1."""
        return int(self._clock[0])

    @t.setter
    def t(self, value: int) -> None:
        self._clock[0] = value

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        mask = self.action_mask
        self.log_policy = np.where(mask, -np.log(mask.sum(axis=1, keepdims=True)), -np.inf)
        self.q = np.zeros(mask.shape)  # Q_1 = E V_0 = 0
        self.t = 1
        self.epochs = 0
        self._reset_data()
        self._new_epoch()

    def _new_epoch(self) -> None:
        self.epochs += 1
        self._plan()
        self.policy = np.exp(self.log_policy)
        self._cdf = np.cumsum(self.policy, axis=1)
        self.state = RAVIState(self._cdf, self.policy, *self._data(), self._clock)

    def plan(self) -> None:
        """The next epoch (its planning step), due when an episode ended."""
        self._new_epoch()

    @property
    def policy_version(self) -> int:
        """The epoch number: ``pi_k`` changes once per epoch (:class:`~.base.PolicyAgent`)."""
        return self.epochs

    def current_policy(self) -> np.ndarray:
        """``pi_k`` of the current epoch, ``(S, A)`` (:class:`~.base.PolicyAgent`)."""
        return self.policy

    def select_action(self, state: int) -> int:
        """``a ~ pi_k(. | state)`` (:func:`ravi_act`: :func:`ravi_pick` of one uniform)."""
        return int(ravi_pick(self._cdf, self.policy, int(state), self.rng.random()))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Record ``(x_t, a_t, x_{t+1})``; a new epoch (one planning step) when ``done``."""
        # :func:`ravi_observe` with the arrays it writes handed over (numba types a state
        # tuple anew at every call)
        s, x, a, y = self.state, int(state), int(action), int(next_state)
        if self._clock[1]:
            linear_observe(s.inv, s.gram, s.b, s.phi[x, a], float(s.values[y]), s.u, s.w)
        else:
            count(s.N, s.N_next, s.reward_sums, x, a, float(reward), y)
        self._clock[0] += 1
        if done:
            self._new_epoch()

    def stats(self) -> dict:
        """Scalars for the experiment record."""
        return {"epochs": self.epochs, "eta": self.eta, "beta": self.beta}


class RAVIUCB(_RAVI):
    """RAVI-UCB for tabular MDPs (Algorithm 2).

    Parameters
    ----------
    n_states, n_actions : int
    discount : float in (0, 1)
        ``gamma``: ``H = 1 / (1 - gamma)`` truncates the values; use the same ``gamma`` as the
        environment's :class:`~optplan.envs.DiscountedResets`.
    horizon : int
        ``T``, the number of steps the defaults of ``eta`` and ``beta`` are tuned for.
    rewards : array (S, A) in [0, 1], optional
        The known rewards (the paper's assumption). ``None``: the empirical mean reward of each
        pair (0 before a visit), clipped to ``[0, 1]``, with no separate reward bonus: ``CB``
        (at least ``8 H / sqrt(N)``) is far above a reward's confidence width ``~
        sqrt(log / N)`` (the paper's footnote 3: unknown rewards cost a constant factor).
    beta : float >= 0, optional
        ``beta`` of ``CB = beta / sqrt(N)``; default Lemma 5.1's (:func:`tabular_beta`).
    beta_scale : float >= 0, default 1
        Multiplies ``beta``.
    eta : float > 0, optional
        Default Theorem 4.1's (:func:`default_eta`).
    delta : float in (0, 1), optional
        Confidence of Lemma 5.1; default ``1 / T``.
    action_mask : bool array (S, A), optional

    Attributes (after ``reset``)
    ----------------------------
    N : (S, A) counts from 1; N_next : (S, A, S) from 0; q : ``Q_{k+1}``; values : ``V_k``;
    log_policy, policy : ``pi_k``; epochs, t.
    """

    name = "ravi-ucb"

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        discount,
        horizon,
        rewards=None,
        beta=None,
        beta_scale=1.0,
        eta=None,
        delta=None,
        action_mask=None,
    ):
        S = check_count("n_states", n_states)
        A = check_count("n_actions", n_actions)
        self._init_common(S, A, discount, horizon, eta, beta_scale, delta, action_mask)
        if rewards is not None:
            rewards = as_array("rewards", rewards, 2)
            if rewards.shape != (S, A):
                raise OptplanError(f"rewards has shape {rewards.shape}, expected {(S, A)}")
            check_unit_rewards("rewards", rewards)
        self.rewards = rewards
        beta = self._check_beta(beta)
        base = tabular_beta(S, A, self.H, self.horizon, self.delta) if beta is None else beta
        self.beta = self.beta_scale * base

    def _reset_data(self) -> None:
        S, A = self.n_states, self.n_actions
        self.N = np.ones((S, A))  # N_1 = 1 (footnote 6: no division by zero)
        self.N_next = np.zeros((S, A, S))
        self.reward_sums = np.zeros((S, A))

    def _plan(self) -> None:
        p_hat = self.N_next / self.N[..., None]  # rows sum to (N - 1) / N
        if self.rewards is None:
            r = np.clip(self.reward_sums / np.maximum(self.N - 1.0, 1.0), 0.0, 1.0)
        else:
            r = self.rewards
        bonus = self.beta / np.sqrt(self.N)
        step = ravi_step(
            self.log_policy, self.q, p_hat, bonus, r, self.eta, self.discount, validate=False
        )
        self.values, self.log_policy, self.q = step

    def _data(self) -> tuple:
        two, three, one = _BLANK
        return self.N, self.N_next, self.reward_sums, three, one, two, two, one, one, one

    def __repr__(self) -> str:
        return (
            f"RAVIUCB(S={self.n_states}, A={self.n_actions}, discount={self.discount}, "
            f"horizon={self.horizon}, eta={self.eta:.3g}, beta={self.beta:.3g})"
        )


class RAVIUCBLinear(_RAVI):
    r"""RAVI-UCB for linear mixture MDPs (Algorithm 3).

    With ``phi_k(x, a) = sum_x' psi(x, a, x') V_k(x')`` (d,), the data are ``Lambda = lam I +
    sum_t phi_k(x_t, a_t) phi_k(x_t, a_t)^T`` and ``b = sum_t phi_k(x_t, a_t) V_k(x_{t+1})``;
    ``Lambda^{-1}`` is kept up to date by Sherman-Morrison in ``O(d^2)`` per step
    (:func:`sherman_morrison`). At epoch ``k``: ``theta_hat = Lambda^{-1} b``, ``P_hat V_k =
    phi_k theta_hat`` (the kernel ``sum_i theta_hat_i psi_i`` itself is never formed; it may be
    negative or unnormalized, so this is not a :class:`ClippedOptimisticPlanning` instance),
    ``CB_k = beta sqrt(phi_k^T Lambda^{-1} phi_k)``, ``Q_{k+1} = Pi_H[r + CB_k + gamma
    phi_k theta_hat]``. Planning an epoch costs ``O(S^2 A d + S A d^2)``.

    Parameters
    ----------
    features : array (S, A, S, d)
        The known feature map ``psi`` (e.g. :attr:`optplan.envs.LinearMixtureMDP.features`).
    rewards : array (S, A) in [0, 1]
        The known rewards (Assumption 5.3's setting).
    discount, horizon, beta_scale, eta, delta, action_mask
        As for :class:`RAVIUCB`.
    beta : float >= 0, optional
        Default :func:`linear_beta` (Lemma 5.4 with this ``lam``, ``B``, ``delta``).
    lam : float > 0, default 1
        Ridge regularization ``lambda`` (Theorem 5.6: 1).
    theta_bound : float > 0, default 1
        A bound on ``||theta||_2`` (1 for mixture weights in the simplex). ``B`` is the larger
        of it and ``max_{x,a} ||sum_x' |psi(x, a, x')| ||_2``, so that ``||phi||_2 <= B H`` for
        every ``V`` in ``[0, H]`` (``sqrt(d)`` for a mixture of ``d`` kernels).

    Attributes (after ``reset``)
    ----------------------------
    Lambda_inv : (d, d); Lambda : (d, d), the same matrix accumulated directly (kept for
    inspection; the estimate uses only ``Lambda_inv``); b : (d,); theta_hat; phi : (S, A, d).
    """

    name = "ravi-ucb-linear"

    def __init__(
        self,
        features,
        rewards,
        *,
        discount,
        horizon,
        beta=None,
        beta_scale=1.0,
        eta=None,
        lam=1.0,
        theta_bound=1.0,
        delta=None,
        action_mask=None,
    ):
        psi = as_array("features", features, 4)
        S, A, S2, d = psi.shape
        if S2 != S:
            raise OptplanError(f"features must have shape (S, A, S, d), got {psi.shape}")
        self._init_common(S, A, discount, horizon, eta, beta_scale, delta, action_mask)
        rewards = as_array("rewards", rewards, 2)
        if rewards.shape != (S, A):
            raise OptplanError(f"rewards has shape {rewards.shape}, expected {(S, A)}")
        check_unit_rewards("rewards", rewards)
        self.features, self.rewards, self.dim = psi, rewards, d
        self.lam = check_positive("lam", lam)
        feature_bound = float(np.linalg.norm(np.abs(psi).sum(axis=2), axis=-1).max())
        self.B = max(check_positive("theta_bound", theta_bound), feature_bound)
        beta = self._check_beta(beta)
        base = (
            linear_beta(d, self.H, self.horizon, self.B, self.lam, self.delta)
            if beta is None
            else beta
        )
        self.beta = self.beta_scale * base

    def _reset_data(self) -> None:
        d = self.dim
        self.Lambda_inv = np.eye(d) / self.lam
        self.Lambda = np.eye(d) * self.lam
        self.b = np.zeros(d)

    def _plan(self) -> None:
        self.theta_hat = self.Lambda_inv @ self.b
        values, self.log_policy = mirror_step(self.log_policy, self.q, self.eta)
        if not np.isfinite(values).all():
            raise FloatingPointError(
                f"RAVI step: V_k is not finite (eta = {self.eta!r}): (1/eta) log sum pi "
                "e^(eta Q) overflows double precision"
            )
        self.values = values
        self.phi = np.einsum("sajd,j->sad", self.features, values)
        width = np.einsum("sad,de,sae->sa", self.phi, self.Lambda_inv, self.phi)
        bonus = self.beta * np.sqrt(np.maximum(width, 0.0))
        self.q = clipped_backup(self.rewards, bonus, self.phi @ self.theta_hat, self.discount)

    def _data(self) -> tuple:
        two, three, _ = _BLANK
        phi = np.ascontiguousarray(self.phi)
        values = np.ascontiguousarray(self.values, dtype=float)
        d = self.dim
        return (two, three, two, phi, values, self.Lambda_inv, self.Lambda, self.b, np.empty(d),
                np.empty(d))  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"RAVIUCBLinear(S={self.n_states}, A={self.n_actions}, d={self.dim}, "
            f"discount={self.discount}, horizon={self.horizon}, eta={self.eta:.3g}, "
            f"beta={self.beta:.3g})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _ravi_args(env, who, discount, horizon, eta, eta_scale, beta, beta_scale, delta):
    """The shared arguments of the RAVI-UCB agents: the discount (the environment's unless
    given), ``T``, ``eta = eta_scale * (eta or Theorem 4.1's)``."""
    S, A, mask = continuing_shape(
        env, f"{who} is for continuing environments (with discounted resets)"
    )
    if horizon is None:
        raise OptplanError(
            f"{who}: set horizon, the T that the default eta and beta are tuned for (e.g. the "
            "run's steps)"
        )
    if horizon < 1:
        raise OptplanError(f"{who}: horizon must be a positive integer, got {horizon!r}")
    gamma = env_discount(env, who, discount)
    gamma = check_real("discount", gamma, 0.0, 1.0, low_open=True, high_open=True)
    eta_scale = check_real("eta_scale", eta_scale, 0.0, None, low_open=True)
    if eta is None:
        eta = default_eta(A, 1.0 / (1.0 - gamma), horizon)
    else:
        eta = check_real("eta", eta, 0.0, None, low_open=True)
    return {
        "discount": gamma,
        "horizon": horizon,
        "eta": eta_scale * eta,
        "beta": beta,
        "beta_scale": beta_scale,
        "delta": delta,
        "action_mask": mask,
    }


def _ravi_ucb(env, criterion, known_rewards, **params):
    args = _ravi_args(env, "ravi-ucb", **params)
    mdp = env_model(env)
    rewards = mdp.R if known_rewards else None
    return RAVIUCB(mdp.n_states, mdp.n_actions, rewards=rewards, **args)


def _ravi_ucb_linear(env, criterion, lam, theta_bound, **params):
    args = _ravi_args(env, "ravi-ucb-linear", **params)
    features = getattr(getattr(env, "unwrapped", env), "features", None)
    if features is None:
        raise OptplanError(
            "ravi-ucb-linear needs an environment with known features psi(x, a, x') "
            f"(e.g. linear-mixture), got {env!r}"
        )
    return RAVIUCBLinear(features, env_model(env).R, lam=lam, theta_bound=theta_bound, **args)


_PARAMS = (
    DISCOUNT_FROM_ENV,
    Param("horizon", "int", None, "T of Theorem 4.1's eta and the bonus's beta (required)"),
    Param("beta_scale", "float", 1.0, "multiplies beta"),
    Param("beta", "float", None, "bonus scale beta; unset: the paper's (Lemma 5.1 / Thm 5.6)"),
    Param("eta_scale", "float", 1.0, "multiplies eta"),
    Param("eta", "float", None, "learning rate; unset: Theorem 4.1's sqrt(2 log A / (H^2 T))"),
    Param("delta", "float", None, "confidence of the bonus; unset: 1 / T"),
)
BUILDERS = (
    Component(
        "ravi-ucb",
        _ravi_ucb,
        (
            *_PARAMS,
            Param("known_rewards", "bool", True, "the true mean rewards (the paper); else learned"),
        ),
        "RAVI-UCB, tabular (Algorithm 2): one regularized optimistic step per reset epoch",
    ),
    Component(
        "ravi-ucb-linear",
        _ravi_ucb_linear,
        (
            *_PARAMS,
            Param("lam", "float", 1.0, "ridge regularization lambda"),
            Param("theta_bound", "float", 1.0, "bound B on ||theta||_2 (raised to the features')"),
        ),
        "RAVI-UCB for linear mixture MDPs (Algorithm 3); needs the env's features (linear-mixture)",
    ),
)
