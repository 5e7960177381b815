r"""Peer implementations of the KL-ball and L1-ball indices, timed by
``optplan bench indices --peers`` on the same inputs as optplan's fast functions.

Each is our own transcription of a public description, written to be timed, not used:

- :func:`rl_agents_kl_ball`: the KL-ball step of rl-agents (E. Leurent,
  https://github.com/eleurent/rl-agents, ``rl_agents/agents/common/utils.py``:
  ``max_expectation_under_constraint`` with ``newton_iteration``), in numpy as there: with
  ``f* = max v`` over all states, if ``f*`` exceeds the support's maximum and
  ``theta(f*) < 0`` the leftover mass ``1 - e^theta(f*)`` goes to the best zero-probability
  state(s); otherwise Newton's method on ``theta(l) = p_I . log(l - v_I) +
  log(p_I . 1/(l - v_I)) - d`` from ``l = f* + 1`` with lower bound ``f*`` (a step below it is
  replaced by ``0.9 f* + 0.1 l``), stopped when a step is below ``tol`` (1e-12 here; its
  default is 1e-2); ``q_I = beta p_I / (l - v_I)`` with ``beta = (1 - z) / (p_I . 1/(l - v_I))``.
- :func:`filippi_kl_ball`: the KL-UCRL maximization of Filippi, Cappé & Garivier,
  "Optimism in reinforcement learning and Kullback-Leibler divergence" (Allerton 2010),
  Appendix: the same dual in ``nu``, solved by bisection (the paper's choice) on
  ``f(nu) = d`` over ``nu > max_I v``, compiled with numba; bisection until the bracket is
  ``1e-12`` of ``nu - max_I v`` (at most 200 halvings, after doubling the upper end until
  ``f(nu) <= d``).
- :func:`max_proba_l1`: the sort-based L1 step of UCRL2 (Jaksch, Ortner & Auer 2010, Fig. 2)
  as RonanFR's UCRL code does it (https://github.com/RonanFR/UCRL,
  ``UCRL/evi/_max_proba.pyx``, ``max_proba_purec``, Cython) and Colosseum's UCRL2 agent
  (``max_proba``, numba): ``argsort(v)``, ``min(1, p_best + d/2)`` on the last (best) state,
  the others copied, then, in increasing ``v`` while the total exceeds one, each state
  lowered to ``max(0, 1 - (total without it))``; compiled with numba.

All three return the value ``q* . v``; ``tests/test_bench_peers.py`` checks them against
optplan's indices.

**Accuracy, and why the comparison is fair.** optplan's KL-ball kernel runs Halley's method
to round-off (``|g| <= 8 eps`` of the terms of its equation, or a step of 4 ulps): the value
to ~1e-15 of the scale of ``v``. The peers are held to *looser* tolerances, so any time they
save by stopping early is on their side: Filippi's bisection stops when the bracket is 1e-12
of ``nu - max_I v`` (about 40 halvings from a unit bracket; a tighter ``rtol`` would cost a
halving per factor 2), rl-agents' Newton when a step in ``l`` is below 1e-12. The L1 step is
a closed form in both (exact up to the order of the sums). ``optplan bench indices --peers``
prints each peer's largest ``|value - optplan's|`` next to its time (the tests hold the
peers to 1e-10). The transcriptions do no extra work: one
``argsort`` and one pass in the L1 step; one pass per bisection step over the support,
computing ``f(nu) = sum p log(nu - v) + log sum p / (nu - v)`` (a ``log`` and a division per
state, both needed by ``f``).
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import Jit

__all__ = ["PEERS", "rl_agents_kl_ball", "filippi_kl_ball", "max_proba_l1", "available"]


def available() -> bool:
    """Whether the compiled peers can run (numba installed: ``pip install "optplan[jit]"``)."""
    from ..fast import _kernels

    return _kernels.AVAILABLE


def _newton_iteration(f, df, eps, x0, a, weight=0.9, max_iter=1000):
    """rl-agents' ``newton_iteration`` with a lower bound ``a`` only (and an iteration cap)."""
    x, x_next, it = np.inf, x0, 0
    while abs(x - x_next) > eps and it < max_iter:
        it += 1
        x = x_next
        f_x, df_x = f(x), df(x)
        if df_x != 0:
            x_next = x - f_x / df_x
        if x_next < a:
            x_next = weight * a + (1 - weight) * x
    return max(x_next, a)


def rl_agents_kl_ball(p: np.ndarray, v: np.ndarray, d: float, tol: float = 1e-12) -> float:
    """``max q.v s.t. KL(p||q) <= d`` as rl-agents computes it (see the module docstring)."""
    x_plus = p > 0
    x_zero = ~x_plus
    q = np.zeros(p.shape)
    lam, z = None, 0.0
    p_i, v_i = p[x_plus], v[x_plus]
    f_star = np.amax(v)

    def theta(l):
        return p_i @ np.log(l - v_i) + np.log(p_i @ (1 / (l - v_i))) - d

    def d_theta(l):
        inv = 1 / (l - v_i)
        s1 = p_i @ inv
        return s1 - (p_i @ inv**2) / s1

    if f_star > np.amax(v_i):
        theta_star = theta(f_star)
        if theta_star < 0:
            lam = f_star
            z = 1 - np.exp(theta_star)
            q[x_zero] = 1.0 * (v[x_zero] == np.amax(v[x_zero]))
            q[x_zero] *= z / q[x_zero].sum()
    if lam is None:
        if np.allclose(v_i, v_i[0]):
            return float(p @ v)
        lam = _newton_iteration(theta, d_theta, tol, x0=f_star + 1, a=f_star)
    beta = (1 - z) / (p_i @ (1 / (lam - v_i)))
    q[x_plus] = beta * p_i / (lam - v_i)
    return float(q @ v)


#: The compiled peers (numba, on first use).
_JIT = Jit("the compiled peers", cache=True, nogil=True, error_model="numpy")


@_JIT
def _filippi(p, v, d, rtol):  # pragma: no cover - compiled by numba
    S = p.shape[0]
    V = -math.inf
    V_I = -math.inf
    for x in range(S):
        V = max(V, v[x])
        if p[x] > 0.0:
            V_I = max(V_I, v[x])

    def f(nu):
        s_log = 0.0
        s_inv = 0.0
        for x in range(S):
            if p[x] > 0.0:
                s_log += p[x] * math.log(nu - v[x])
                s_inv += p[x] / (nu - v[x])
        return s_log + math.log(s_inv), s_inv

    if V > V_I:  # the best state has probability zero: is the optimum at nu = V?
        f_V, s_inv = f(V)
        if f_V <= d:
            z = 1.0 - math.exp(f_V - d)
            beta = (1.0 - z) / s_inv
            val = z * V
            for x in range(S):
                if p[x] > 0.0:
                    val += beta * p[x] / (V - v[x]) * v[x]
            return val
    lo_v = math.inf
    for x in range(S):
        if p[x] > 0.0:
            lo_v = min(lo_v, v[x])
    if lo_v == V_I:  # v constant on the support (and no better state): q = p
        return V_I
    lo = V_I
    width = 1.0
    hi = V_I + width
    for _ in range(2000):  # f decreases in nu: f(hi) <= d
        if f(hi)[0] <= d:
            break
        lo = hi
        width *= 2.0
        hi = V_I + width
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid)[0] > d:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rtol * (lo - V_I):  # relative to nu - max_I v, which sets q
            break
    nu = hi
    s_inv = f(nu)[1]
    val = 0.0
    for x in range(S):
        if p[x] > 0.0:
            val += p[x] / (nu - v[x]) / s_inv * v[x]
    return val


@_JIT
def _max_proba(p, v, d):  # pragma: no cover - compiled by numba
    S = p.shape[0]
    order = np.argsort(v)
    best = order[S - 1]
    q = np.empty(S)
    top = min(1.0, p[best] + 0.5 * d)
    q[best] = top
    total = top
    if top < 1.0:
        for i in range(S - 1):
            q[order[i]] = p[order[i]]
            total += p[order[i]]
        i = 0
        while total > 1.0 and i < S:
            x = order[i]
            total -= p[x]
            q[x] = max(0.0, 1.0 - total)
            total += q[x]
            i += 1
    else:
        for x in range(S):
            q[x] = 0.0
        q[best] = top
    val = 0.0
    for x in range(S):
        val += q[x] * v[x]
    return val


def filippi_kl_ball(p: np.ndarray, v: np.ndarray, d: float, rtol: float = 1e-12) -> float:
    """``max q.v s.t. KL(p||q) <= d`` by Filippi et al.'s bisection, compiled (numba)."""
    if d <= 0.0:
        return float(p @ v)
    return _JIT.compiled()["_filippi"](p, v, d, rtol)


def max_proba_l1(p: np.ndarray, v: np.ndarray, d: float) -> float:
    """``max q.v s.t. ||q - p||_1 <= d`` by UCRL2's sort-based step, compiled (numba)."""
    return _JIT.compiled()["_max_proba"](p, v, d)


#: ``problem stem -> ((column name, function), ...)``: the peers timed per index problem.
PEERS = {
    "kl_ball": (("rl-agents", rl_agents_kl_ball), ("filippi", filippi_kl_ball)),
    "l1_ball": (("colosseum", max_proba_l1),),
}
