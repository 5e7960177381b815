r"""The compiled steps of the index agents (:mod:`optplan.agents.index_agents`): the state
tuple :class:`IndexState`; per agent, ``rates`` (the optimization problem of each action in the
current state), ``scores`` (the indices from those values), ``choose`` and their composition
``act``; the shared :func:`observe` (the estimator's update and its warm-started policy
iteration); one loop per agent (:func:`optplan.envs.kernels.play` with its steps).

An action's problem is solved by the compiled row kernel of the batched fast path:
``_kl_row`` of :func:`~optplan.fast.kl_ball.kl_ball_index`, ``_l1_lane`` of
:func:`~optplan.fast.l1_ball.l1_ball_index`, ``_kl_inf_row`` of
:func:`~optplan.fast.kl_inf.kl_inf_rate`; a row such a kernel leaves to the general NumPy
kernel (a radius of 0, no convergence) is sent there through ``numba.objmode``. The radius or
target of each solved action is kept in ``radius``, so the conic path re-solves the same
problems (:meth:`~optplan.agents.index_agents.IndexAgent.indices`). Policy iteration is the
posterior agents' (:func:`optplan.agents._psrl_kernels._policy_iteration`, average reward, on
``p_hat`` restricted to the good actions).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import objmode

from .._jit import njit
from ..envs.kernels import play
from ..fast import _agent_kernels as AK
from ..fast._kernels import kl_ball as KB
from ..fast._kernels import kl_inf as KI
from ..fast._kernels import l1_ball as L1
from ..fast._kernels.common import LEFT
from . import _psrl_kernels as PK

__all__ = ["IndexState", "new_state", "observe", "solve", "good_rows", "STEPS"]

#: ``clock`` entries: the time ``t`` (1 on the first step), MDP-DMED's estimated best action,
#: the last policy iteration's status (:data:`optplan.agents._psrl_kernels.OK` ...), and
#: whether the policy iteration is left to Python (large models).
TIME, BEST, PI_STATUS, PYTHON_PI = 0, 1, 2, 3
#: Policy iteration's iteration limit.
PI_MAX_ITER = 100


class IndexState(NamedTuple):
    """What an index agent learns and the scratch its steps use: the known ``R`` and ``mask``;
    counts ``T (S, A, S)``, ``Txa``, ``Tx``; ``p_hat``; the good actions; the policy, bias ``v``
    and ``gain = [phi]`` of ``p_hat`` on them; the last scores ``u``, solved values ``rates``
    (index or rate; NaN for an action with no problem) and their radii or targets
    ``radius``; ``clock`` (:data:`TIME`, ...). The rest is scratch."""

    R: np.ndarray
    mask: np.ndarray
    T: np.ndarray
    Txa: np.ndarray
    Tx: np.ndarray
    p_hat: np.ndarray
    good: np.ndarray
    policy: np.ndarray
    v: np.ndarray
    gain: np.ndarray
    u: np.ndarray
    rates: np.ndarray
    radius: np.ndarray
    clock: np.ndarray
    G: np.ndarray
    W: np.ndarray
    kw: np.ndarray
    q: np.ndarray
    scratch: PK.Scratch
    iw: np.ndarray


def new_state(R, mask, counts, policy, python_pi: bool) -> IndexState:
    """The state at the start of a run (counts from ``counts``, ``policy`` the first one)."""
    S, A = R.shape
    Txa = counts.sum(axis=-1)
    Tx = Txa.sum(axis=-1)
    clock = np.array([1 + int(round(Tx.sum())), 0, 0, int(python_pi)], dtype=np.int64)
    return IndexState(
        R=np.array(R, dtype=float, order="C"), mask=np.array(mask, dtype=bool, order="C"),
        T=counts.copy(), Txa=Txa, Tx=Tx, p_hat=(counts + 1.0) / (Txa[..., None] + S),
        good=np.zeros((S, A), dtype=bool), policy=np.array(policy, dtype=np.int64),
        v=np.zeros(S), gain=np.full(1, np.nan), u=np.full(A, -np.inf), rates=np.full(A, np.nan),
        radius=np.full(A, np.nan), clock=clock, G=np.zeros((A, S)), W=np.zeros(A),
        kw=np.zeros((6, S)), q=np.zeros((S, A)), scratch=PK.scratch(S),
        iw=np.zeros(S + 128, dtype=np.int64),
    )  # fmt: skip


# --- the estimator ---------------------------------------------------------------------


@njit(inline="always")
def _good_row(s, x):  # pragma: no cover - compiled by numba
    """Row ``x`` of the good actions: ``T[x, a] >= (ln T[x])^2``, every admissible action
    where none is."""
    mask, Txa, good, Tx = s.mask, s.Txa, s.good, s.Tx
    A = mask.shape[1]
    thr = 0.0
    if Tx[x] > 0:
        ell = math.log(Tx[x])
        thr = ell * ell
    anyg = False
    for a in range(A):
        g = mask[x, a] and Txa[x, a] >= thr
        good[x, a] = g
        anyg = anyg or g
    if not anyg:
        for a in range(A):
            good[x, a] = mask[x, a]


@njit
def good_rows(s):  # pragma: no cover - compiled by numba
    """Every row of the good actions."""
    for x in range(s.R.shape[0]):
        _good_row(s, x)


@njit(inline="always")
def solve(s):  # pragma: no cover - compiled by numba
    """Gain and bias of ``p_hat`` on the good actions: policy iteration from the incumbent
    (a greedy restart in ``R`` when it lost a good action). ``True`` when Python must act: a
    large model's solve is due, or the iteration failed (status in ``clock``)."""
    if s.clock[PYTHON_PI]:
        return True
    PK._start_policy(s.R, s.good, s.policy, True)
    status, _, _, gain = PK._policy_iteration(
        s.p_hat, s.R, s.good, 1.0, True, s.policy, s.q, s.v, s.scratch, PI_MAX_ITER
    )
    s.gain[0] = gain
    s.clock[PI_STATUS] = status
    return status != PK.OK


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):  # pragma: no cover - compiled by numba
    """Count the transition, update ``p_hat[x, a]`` and the good actions of ``x``, and
    :func:`solve`."""
    T, Txa, p_hat = s.T, s.Txa, s.p_hat
    S = T.shape[0]
    T[x, a, y] += 1
    Txa[x, a] += 1
    s.Tx[x] += 1
    s.clock[TIME] += 1
    den = Txa[x, a] + S
    for j in range(S):
        p_hat[x, a, j] = (T[x, a, j] + 1.0) / den
    _good_row(s, x)
    return solve(s)


# --- the problems of one state -----------------------------------------------------------


def _numpy_kl_ball(p, v, d):
    from ..fast.kl_ball import kl_ball_index

    return float(kl_ball_index(p[None], v, np.array([d]), validate=False).value[0])


def _numpy_kl_inf(p, v, rho):
    from ..fast.kl_inf import kl_inf_rate

    return float(kl_inf_rate(p[None], v, np.array([rho]), validate=False).value[0])


@njit(inline="always")
def _clear(s):  # pragma: no cover - compiled by numba
    rates, radius = s.rates, s.radius
    for a in range(rates.shape[0]):
        rates[a] = math.nan
        radius[a] = math.nan


@njit
def _kl_ball(p, v, d, k):  # pragma: no cover - compiled by numba
    """The KL-ball index of ``(p, v)`` at radius ``d`` (``k``: six work rows)."""
    value, _, _, ok = KB._kl_row(p, v, d, 100, k[0], k[1], k[2], k[3], k[4], k[5])
    if not ok:  # a row the compiled kernel leaves to the general one
        pc, vc = p.copy(), v.copy()
        with objmode(value="float64"):
            value = _numpy_kl_ball(pc, vc, d)
    return value


@njit
def _kl_inf(p, v, rho, k):  # pragma: no cover - compiled by numba
    """The KL-minimization rate of ``(p, v)`` for the target ``rho``."""
    value, _, _, code = KI._kl_inf_row(p, v, rho, 100, k[0], k[1])
    if code == LEFT:
        pc, vc = p.copy(), v.copy()
        with objmode(value="float64"):
            value = _numpy_kl_inf(pc, vc, rho)
    return value


@njit(inline="always")
def _balls(s, x, l1):  # pragma: no cover - compiled by numba
    """MDP-UCB's (KL, radius ``ln t / T``) or OLP's (L1, ``sqrt(2 ln t / T)``) index of
    every tried admissible action into ``rates``."""
    _clear(s)
    Txa, mask, p_hat, v, kw, rates = s.Txa, s.mask, s.p_hat, s.v, s.kw, s.rates
    log_t = math.log(s.clock[TIME])
    for a in range(mask.shape[1]):
        T = Txa[x, a]
        if mask[x, a] and T > 0:
            if l1:
                d = math.sqrt(2.0 * log_t / T)
                rates[a] = L1._l1_lane(p_hat[x, a], v, d, False, kw[0])[0]
            else:
                d = log_t / T
                rates[a] = _kl_ball(p_hat[x, a], v, d, kw)
            s.radius[a] = d


@njit(inline="always")
def _ball_scores(s, x):  # pragma: no cover - compiled by numba
    """``u = r + index`` of the tried actions, ``r + max v`` of the untried ones (the index
    over the whole simplex), ``-inf`` where inadmissible."""
    R, mask, Txa, u, rates = s.R, s.mask, s.Txa, s.u, s.rates
    vmax = s.v.max()
    for a in range(R.shape[1]):
        if not mask[x, a]:
            u[a] = -math.inf
        elif Txa[x, a] > 0:
            u[a] = R[x, a] + rates[a]
        else:
            u[a] = R[x, a] + vmax


@njit(inline="always")
def _values(s, x):  # pragma: no cover - compiled by numba
    """``W[a] = r + p_hat . v`` of the admissible actions (``-inf`` elsewhere)."""
    R, mask, W = s.R, s.mask, s.W
    AK._matvec(s.p_hat[x], s.v, W)
    for a in range(R.shape[1]):
        W[a] = R[x, a] + W[a] if mask[x, a] else -math.inf


@njit(inline="always")
def _dmed_rates(s, x):  # pragma: no cover - compiled by numba
    """MDP-DMED: the estimated best action ``a* = argmax W`` (in ``clock``) and the rate
    ``K(a) = D(p_hat, v, W[a*] - r(a))`` of every other admissible action."""
    _clear(s)
    _values(s, x)
    R, mask, W, radius, p_hat, v, kw = s.R, s.mask, s.W, s.radius, s.p_hat, s.v, s.kw
    best = AK._argmax(W)
    s.clock[BEST] = best
    for a in range(R.shape[1]):
        if mask[x, a] and a != best:
            radius[a] = W[best] - R[x, a]
            s.rates[a] = _kl_inf(p_hat[x, a], v, radius[a], kw)


@njit(inline="always")
def _dmed_scores(s, x):  # pragma: no cover - compiled by numba
    """Discrepancies ``D(a) = ln t / K - T`` (Theorem 3: ``K = 0`` gives ``+inf``, ``K =
    inf`` gives ``-T``), 0 for the best action, ``-inf`` where inadmissible."""
    rates, Txa, u = s.rates, s.Txa, s.u
    log_t = math.log(s.clock[TIME])
    for a in range(u.shape[0]):
        K = rates[a]
        T = Txa[x, a]
        if math.isnan(K):
            u[a] = -math.inf
        elif K <= 0:
            u[a] = math.inf
        elif math.isinf(K):
            u[a] = -T
        else:
            u[a] = log_t / K - T
    u[s.clock[BEST]] = 0.0


@njit(inline="always")
def _imed_rates(s, x):  # pragma: no cover - compiled by numba
    """IMED-RL: the rate ``K(a) = D(p_hat, v, L* - r(a))`` of every tried empirically
    sub-optimal action (``W[a] < L* = max W``)."""
    _clear(s)
    _values(s, x)
    R, mask, W, Txa, radius, p_hat, v, kw = s.R, s.mask, s.W, s.Txa, s.radius, s.p_hat, s.v, s.kw
    top = W.max()
    for a in range(R.shape[1]):
        if mask[x, a] and Txa[x, a] > 0 and W[a] != top:
            radius[a] = top - R[x, a]
            s.rates[a] = _kl_inf(p_hat[x, a], v, radius[a], kw)


@njit(inline="always")
def _imed_scores(s, x):  # pragma: no cover - compiled by numba
    """``I(a) = T K + ln T`` (``ln T`` for an empirically optimal action, ``-inf`` untried,
    ``+inf`` inadmissible)."""
    mask, Txa, u, rates = s.mask, s.Txa, s.u, s.rates
    for a in range(u.shape[0]):
        T = Txa[x, a]
        if not mask[x, a]:
            u[a] = math.inf
        elif T == 0:
            u[a] = -math.inf
        elif math.isnan(rates[a]):
            u[a] = math.log(T)
        else:
            u[a] = T * rates[a] + math.log(T)


@njit(inline="always")
def _ps_scores(s, x, rng):  # pragma: no cover - compiled by numba
    """MDP-PS: ``u[a] = r + Q_a . v`` with ``Q_a ~ Dirichlet(T[x, a] + 1)`` (row by row, the
    draws of :func:`optplan.posteriors.sample_dirichlet`)."""
    R, mask, T, G, W, u = s.R, s.mask, s.T, s.G, s.W, s.u
    S, A = R.shape
    for a in range(A):
        for j in range(S):
            G[a, j] = rng.standard_gamma(T[x, a, j] + 1.0)
    for a in range(A):
        total = G[a].sum()
        for j in range(S):
            G[a, j] = G[a, j] / total if total > 0 else 1.0 / S
    AK._matvec(G, s.v, W)
    for a in range(A):
        u[a] = R[x, a] + W[a] if mask[x, a] else -math.inf


# --- each agent's steps ------------------------------------------------------------------


@njit
def ucb_rates(s, x, rng):  # pragma: no cover - compiled by numba
    _balls(s, x, False)


@njit
def olp_rates(s, x, rng):  # pragma: no cover - compiled by numba
    _balls(s, x, True)


@njit
def dmed_rates(s, x, rng):  # pragma: no cover - compiled by numba
    _dmed_rates(s, x)


@njit
def imed_rates(s, x, rng):  # pragma: no cover - compiled by numba
    _imed_rates(s, x)


@njit
def ps_rates(s, x, rng):  # pragma: no cover - compiled by numba
    _clear(s)
    _ps_scores(s, x, rng)


@njit
def ball_scores(s, x):  # pragma: no cover - compiled by numba
    _ball_scores(s, x)


@njit
def dmed_scores(s, x):  # pragma: no cover - compiled by numba
    _dmed_scores(s, x)


@njit
def imed_scores(s, x):  # pragma: no cover - compiled by numba
    _imed_scores(s, x)


@njit
def ps_scores(s, x):  # pragma: no cover - compiled by numba
    """MDP-PS's scores are its draws (made by :func:`ps_rates`)."""


@njit
def argmax_choice(s):  # pragma: no cover - compiled by numba
    return AK._argmax(s.u)


@njit
def argmin_choice(s):  # pragma: no cover - compiled by numba
    return AK._argmin(s.u)


@njit
def dmed_choice(s):  # pragma: no cover - compiled by numba
    """The largest positive discrepancy's action, else the estimated best action."""
    best = s.clock[BEST]
    j = -1
    for a in range(s.u.shape[0]):
        if a != best and (j < 0 or s.u[a] > s.u[j]):
            j = a
    return j if j >= 0 and s.u[j] > 0 else best


@njit(inline="always")
def ucb_act(s, x, rng):  # pragma: no cover - compiled by numba
    _balls(s, x, False)
    _ball_scores(s, x)
    return AK._argmax(s.u)


@njit(inline="always")
def olp_act(s, x, rng):  # pragma: no cover - compiled by numba
    _balls(s, x, True)
    _ball_scores(s, x)
    return AK._argmax(s.u)


@njit(inline="always")
def dmed_act(s, x, rng):  # pragma: no cover - compiled by numba
    _dmed_rates(s, x)
    _dmed_scores(s, x)
    return dmed_choice(s)


@njit(inline="always")
def imed_act(s, x, rng):  # pragma: no cover - compiled by numba
    _imed_rates(s, x)
    _imed_scores(s, x)
    return AK._argmin(s.u)


@njit(inline="always")
def ps_act(s, x, rng):  # pragma: no cover - compiled by numba
    _clear(s)
    _ps_scores(s, x, rng)
    return AK._argmax(s.u)


@njit
def ucb_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    return play(ucb_act, observe, s, env, steps, env_rng, agent_rng)


@njit
def olp_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    return play(olp_act, observe, s, env, steps, env_rng, agent_rng)


@njit
def dmed_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    return play(dmed_act, observe, s, env, steps, env_rng, agent_rng)


@njit
def imed_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    return play(imed_act, observe, s, env, steps, env_rng, agent_rng)


@njit
def ps_run(s, env, steps, env_rng, agent_rng):  # pragma: no cover - compiled by numba
    return play(ps_act, observe, s, env, steps, env_rng, agent_rng)


class Steps(NamedTuple):
    """One agent's compiled steps: ``rates(s, x, rng)``, ``scores(s, x)``, ``choose(s)``,
    ``act = choose . scores . rates`` and the loop ``run``."""

    rates: object
    scores: object
    choose: object
    act: object
    run: object


#: The steps of each agent, by its registry name.
STEPS = {
    "mdp-ucb": Steps(ucb_rates, ball_scores, argmax_choice, ucb_act, ucb_run),
    "olp": Steps(olp_rates, ball_scores, argmax_choice, olp_act, olp_run),
    "mdp-dmed": Steps(dmed_rates, dmed_scores, dmed_choice, dmed_act, dmed_run),
    "imed-rl": Steps(imed_rates, imed_scores, argmin_choice, imed_act, imed_run),
    "mdp-ps": Steps(ps_rates, ps_scores, argmax_choice, ps_act, ps_run),
}
