r"""The compiled plan of the episodic (layered) :class:`~optplan.agents.UBE` (optional: needs
``numba``).

An episodic UBE plan re-plans the layers ``0 .. top`` that the episode gave data (the whole
model at the first plan): the posterior means of those layers
(:meth:`MeanModelAgent._refresh <optplan.agents._mean_model.MeanModelAgent._refresh>`), the
backward pass on the posterior-mean model with its tie rule
(:meth:`MeanModelAgent._backward <optplan.agents._mean_model.MeanModelAgent._backward>`), the
local uncertainty of the ``"tabular"`` rule and the layered uncertainty Bellman equation
(:meth:`UBE._after_plan <optplan.agents.UBE._after_plan>`: ``u`` by backward recursion,
:func:`optplan.fast.ube.solve`'s layered form). In NumPy that is some ten array calls per
layer; :func:`plan` makes it one compiled call, which the agent's own ``plan()`` calls, with
the NumPy plan's numbers (the same operations in the same order):

- the reward posterior of :func:`optplan.posteriors.gaussian_mean_posterior` for one scalar
  ``sigma``: the flat prior (``sum / max(n, 1)``, ``sigma^2 / max(n, 1)``), or a proper one
  (``sigma > 0``, ``sigma = 0``); the posterior-mean transitions of
  :meth:`LayeredPosterior.mean_transitions
  <optplan.posteriors.LayeredPosterior.mean_transitions>`, their row sums as NumPy's
  pairwise sum;
- the backward pass: ``q = (P_l V_{l+1}) gamma + R_l`` with ``P_l V_{l+1}`` by BLAS ``dgemv``
  (``np.dot``, as NumPy's ``@``), inadmissible actions ``-inf``, the first maximum, the
  previous action kept where it is as good (not at the first plan);
- the local term ``(sigma^2 + gamma^2 Q_max^2) / max(n, 1)`` (the last layer
  ``sigma^2 / max(n, 1)``), 0 where inadmissible; ``u_l = nu_l + gamma^2 P_l v_{l+1}`` with
  ``v_{l+1}(s) = u_{l+1}(s, pi(s))`` (the one-hot policy's sum over actions, exactly), the
  products by ``dgemv``; a partial re-plan adds the kept layer ``top + 1``'s term to the local
  term of ``top`` first, as the agent does. The UBE solve's certificate (its fixed-point
  residual) is 0 by construction for this recursion; a ``u`` that is not finite is reported
  (:data:`OVERFLOW`) and the agent raises the fast path's error.

``tests/test_episodic_steps.py`` compares the compiled plan with the NumPy plan
(:meth:`MeanModelAgent.plan <optplan.agents._mean_model.MeanModelAgent.plan>`) on the
posteriors of runs, within stated tolerances.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from . import _layered_kernels as _LK
from ._layered_kernels import _row_sum

__all__ = ["AVAILABLE", "FLAT", "NOISY", "EXACT", "OK", "OVERFLOW", "plan", "reward_mode"]

#: numba is installed (the ``jit`` extra).
AVAILABLE = _jit.AVAILABLE
#: The reward posterior: the flat prior; a proper prior with ``sigma > 0``; with ``sigma = 0``.
FLAT, NOISY, EXACT = 0, 1, 2
#: Plan outcomes: done; the UBE's solution is not finite (the fast path's numerical error).
OK, OVERFLOW = 0, 1

_JIT = _jit.Jit(
    "the compiled layered UBE plan",
    uses=(_LK._JIT,),
    cache=True,
    nogil=True,
    error_model="numpy",
)


@_JIT
def _refresh(top, post, sq, deterministic, alpha0, mean, var,
             P):  # fmt: skip  # pragma: no cover - compiled by numba
    """:meth:`MeanModelAgent._refresh <optplan.agents._mean_model.MeanModelAgent._refresh>`:
    the posterior of layers ``0 .. top`` into ``mean``, ``var`` and ``P`` from ``post =
    (counts, sums, next_counts, mode, inv_prior, sd2, prior_var)``."""
    counts, sums, next_counts, mode, inv_prior, sd2, prior_var = post
    L, S, A = counts.shape
    for l in range(top + 1):
        for s in range(S):
            for a in range(A):
                n = counts[l, s, a]
                if mode == FLAT:
                    nn = max(n, 1.0)
                    mean[l, s, a] = sums[l, s, a] / nn
                    var[l, s, a] = sq / nn
                elif mode == NOISY:
                    precision = inv_prior + n / sd2
                    mean[l, s, a] = sums[l, s, a] / sd2 / precision
                    var[l, s, a] = 1.0 / precision
                elif n > 0:
                    mean[l, s, a] = sums[l, s, a] / max(n, 1.0)
                    var[l, s, a] = 0.0
                else:
                    mean[l, s, a] = 0.0
                    var[l, s, a] = prior_var
                row = next_counts[l, s, a]
                out = P[l, s, a]
                if deterministic:
                    tc = _row_sum(row, 0, S)
                    if tc > 0:
                        nn = max(tc, 1.0)
                        for t in range(S):
                            out[t] = row[t] / nn
                    else:
                        for t in range(S):
                            out[t] = 1.0 / S
                else:
                    for t in range(S):
                        out[t] = row[t] + alpha0
                    total = _row_sum(out, 0, S)
                    for t in range(S):
                        out[t] = out[t] / total


@_JIT
def _backward(top, fresh, g, mask, mean, P, QA, VA, q,
              policy):  # fmt: skip  # pragma: no cover - compiled by numba
    """:meth:`MeanModelAgent._backward <optplan.agents._mean_model.MeanModelAgent._backward>`:
    layers ``top .. 0`` of ``QA``, ``VA``, the masked ``q`` and the policy."""
    L, S, A = mean.shape
    for l in range(top, -1, -1):
        pv = np.dot(P[l].reshape(S * A, S), VA[l + 1])
        for s in range(S):
            best = -1
            topq = 0.0
            for a in range(A):
                x = pv[s * A + a]
                if g != 1.0:
                    x *= g
                x += mean[l, s, a]
                QA[l, s, a] = x
                qm = x if mask[l, s, a] else -math.inf
                q[l, s, a] = qm
                if best >= 0 and math.isnan(topq):
                    continue
                if best < 0 or math.isnan(qm) or qm > topq:
                    best, topq = a, qm
            if not fresh:
                prev = policy[l, s]
                if q[l, s, prev] >= q[l, s, best]:
                    best = prev
            policy[l, s] = best
            VA[l, s] = QA[l, s, best]


@_JIT
def _uncertainty(top, counts, mask, coef, P, policy, local, u,
                 sqrt_u):  # fmt: skip  # pragma: no cover - compiled by numba
    """``UBE._after_plan``: the local term of layers ``0 .. top`` (tabular rule; ``coef = (g2,
    cq, sq)``), then ``u`` and ``sqrt_u``. Returns :data:`OK` or :data:`OVERFLOW`."""
    g2, cq, sq = coef
    L, S, A = counts.shape
    for l in range(top + 1):
        for s in range(S):
            for a in range(A):
                nn = max(counts[l, s, a], 1.0)
                nu = (sq / nn) if l == L - 1 else (sq + cq) / nn
                local[l, s, a] = nu if mask[l, s, a] else 0.0
    v = np.empty(S)
    for l in range(top, -1, -1):
        for s in range(S):
            for a in range(A):
                u[l, s, a] = local[l, s, a]
        if l + 1 < L:
            for s in range(S):  # sum_a pi(a|s) u(s, a) of the one-hot policy: u(s, pi(s))
                total = -0.0
                for a in range(A):
                    total += (1.0 if a == policy[l + 1, s] else 0.0) * u[l + 1, s, a]
                v[s] = 0.0 + total
            pu = np.dot(P[l].reshape(S * A, S), v)
            for s in range(S):
                for a in range(A):
                    u[l, s, a] = u[l, s, a] + g2 * pu[s * A + a]
    status = OK
    solved = top > 0 or L == 1  # a one-layer re-plan below L takes its local term unsolved
    for l in range(top + 1):
        for s in range(S):
            for a in range(A):
                if solved and not math.isfinite(u[l, s, a]):
                    status = OVERFLOW
                sqrt_u[l, s, a] = math.sqrt(u[l, s, a])
    return status


@_JIT
def _plan(top, fresh, post, deterministic, alpha0, mask, coef, model,
          ube):  # fmt: skip  # pragma: no cover - compiled by numba
    """Re-plan layers ``0 .. top`` in place (module docstring): ``post`` as :func:`_refresh`'s,
    ``coef = (g, g2, cq, sq)`` (``g2 = discount**2`` as Python computes it, ``cq =
    discount**2 q_max**2``, ``sq = np.square(sigma)``), ``model = (mean, var, P, QA, VA, q,
    policy)`` and ``ube = (local, u, sqrt_u)`` (of the layers below ``top``: the last
    plan's). Returns :data:`OK` or :data:`OVERFLOW`."""
    g, g2, cq, sq = coef
    mean, var, P, QA, VA, q, policy = model
    local, u, sqrt_u = ube
    _refresh(top, post, sq, deterministic, alpha0, mean, var, P)
    _backward(top, fresh, g, mask, mean, P, QA, VA, q, policy)
    return _uncertainty(top, post[0], mask, (g2, cq, sq), P, policy, local, u, sqrt_u)


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


def reward_mode(post) -> tuple[int, float, float, float] | None:
    """``(mode, 1.0 / prior_var, sigma**2, np.square(sigma))`` of :func:`_plan` for ``post``,
    the scalars computed as :func:`~optplan.posteriors.gaussian_mean_posterior` computes
    them; ``None`` for a per-pair ``sigma`` (the NumPy plan)."""
    sigma = post.sigma
    if np.ndim(sigma) != 0:
        return None
    sq = float(np.square(sigma))
    if post.improper:
        return FLAT, 0.0, 0.0, sq
    if sigma == 0:
        return EXACT, 0.0, 0.0, sq
    return NOISY, 1.0 / post.prior_var, sigma**2, sq


def plan(agent, top: int, fresh: bool, mode: tuple) -> int:
    """:func:`_plan` on ``agent`` (a layered :class:`~optplan.agents.UBE` with the tabular
    rule), its arrays updated in place."""
    post = agent.posterior
    det = bool(post.deterministic)
    g = float(agent.discount)
    return _compiled()["_plan"](
        int(top), bool(fresh),
        (post.counts, post.reward_sums, post.next_counts, mode[0], mode[1], mode[2],
         float(post.prior_var)), det, 0.0 if det else float(post.transition_prior),
        agent._layered_mask, (g, agent.discount**2, agent.discount**2 * agent.q_max**2, mode[3]),
        (agent.mean, agent.var, agent.P, agent._QA, agent._VA, agent.q, agent.policy),
        (agent.local, agent.u, agent._sqrt_u),
    )  # fmt: skip
