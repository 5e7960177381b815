r"""The compiled continuing plan of :class:`~optplan.agents.CountBonus`.

A continuing count-bonus plan (every ``update_every`` steps) is the posterior-mean model's
refresh (mean rewards and their variances, mean transitions, the bonus) and Howard policy
iteration on ``R = mean + beta log(t) bonus``, warm-started from the last policy: in NumPy
some fifty array calls on arrays of a few dozen entries. :func:`_plan` does it in one
compiled call, which the agent's compiled steps make
(:mod:`optplan.agents._count_bonus_steps`). It computes what the NumPy plan
(:meth:`MeanModelAgent.plan <optplan.agents._mean_model.MeanModelAgent>`, for the cases it
does not cover) computes:

- the reward posterior of :func:`optplan.posteriors.gaussian_mean_posterior` (flat prior:
  ``sum / max(n, 1)`` and ``sd^2 / max(n, 1)``; a proper prior: ``precision = 1 / prior_var +
  n / sd^2``, mean ``sum / sd^2 / precision``; a noise sd of 0 with a proper prior plans in
  NumPy);
- the Dirichlet mean ``alpha / sum(alpha)`` (known transitions: the agent's, unchanged);
- the bonus ``sd / sqrt(max(n, 1))`` (0 where inadmissible) and ``R = mean + scale bonus``;
- policy iteration: :func:`_policy_iteration` (the start policy of
  :func:`optplan.dp.policy_iteration`: the last one when warm and admissible, else greedy
  in ``R``).

``tests/test_mean_model_compiled.py`` compares the compiled plan with the NumPy one.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..fast import _agent_kernels as _ak
from ..fast._agent_kernels import _pw_sum
from . import _psrl_kernels as K

__all__ = ["Work", "applies"]


_JIT = _jit.Jit(
    "the compiled count-bonus plan",
    uses=(K._JIT, _ak._JIT),
    cache=True,
    nogil=True,
    error_model="numpy",
)


@_JIT
def _matvec(M, v, out):  # pragma: no cover - compiled by numba
    """``out = M @ v``."""
    m, n = M.shape
    for i in range(m):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * v[j]
        out[i] = acc


@_JIT
def _policy_iteration(P, R, mask, discount, policy, q, values, M_flat, b, new,
                      max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """:func:`optplan.dp.policy_iteration` (discounted) on the dense ``(P, R)`` from ``policy``
    (updated in place; the caller chose the start policy): the evaluation ``(I - discount
    P_pi) v = r_pi`` by :func:`optplan.fast._agent_kernels._solve_t`, the backup ``q = (P v)
    discount + R``, the greedy improvement of :func:`optplan.agents._psrl_kernels._improve`.
    Returns ``(status, iterations, classes, gain)`` as that module's."""
    S, A = R.shape
    flat = P.reshape(S * A, S)
    qv = q.reshape(S * A)
    M = M_flat[: S * S].reshape((S, S))
    for it in range(1, max_iter + 1):
        for i in range(S):  # I - discount P_pi, transposed
            a = policy[i]
            for j in range(S):
                M[j, i] = (1.0 if i == j else 0.0) - discount * P[i, a, j]
            b[i] = R[i, a]
        if _ak._solve_t(M, b[:S]) != 0:
            return K.NUMERICAL, it, 1, math.nan
        for i in range(S):
            if not math.isfinite(b[i]):
                return K.NUMERICAL, it, 1, math.nan
            values[i] = b[i]
        _matvec(flat, values, qv)
        if K._improve(q, R, mask, policy, new, discount) == 0:
            return K.OK, it, 1, math.nan
        for i in range(S):
            policy[i] = new[i]
    return K.MAX_ITER, max_iter, 1, math.nan


@_JIT
def _plan(counts, sums, next_counts, tprior, sd, prior_var, improper, known, mask, scale,
          discount, policy, warm, mean, var, P, bonus, R, q, values, M, b, row, new, ints,
          ipiv, max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """Refresh ``mean``, ``var``, ``P`` (unless ``known``) and ``bonus`` from the posterior
    arrays, ``R = mean + scale bonus``, then policy iteration from ``policy`` (updated in
    place). Returns ``(status, iterations, classes, gain)``. ``ints``, ``ipiv``: not used.
    """
    S, A = counts.shape
    for s in range(S):
        for a in range(A):
            n = counts[s, a]
            sig = sd[s, a]
            if improper:
                m = n if n > 1.0 else 1.0
                if math.isnan(n):
                    m = n
                mean[s, a] = sums[s, a] / m
                var[s, a] = (sig * sig) / m
            else:
                sd2 = sig * sig
                precision = 1.0 / prior_var + n / sd2
                mean[s, a] = sums[s, a] / sd2 / precision
                var[s, a] = 1.0 / precision
            if not known:
                for k in range(S):
                    row[k] = next_counts[s, a, k] + tprior
                total = _pw_sum(row, 0, S)
                for k in range(S):
                    P[s, a, k] = row[k] / total
            if mask[s, a]:
                c = n if n > 1.0 else 1.0
                if math.isnan(n):
                    c = n
                bonus[s, a] = sig / math.sqrt(c)
            else:
                bonus[s, a] = 0.0
            R[s, a] = mean[s, a] + scale * bonus[s, a]
    K._start_policy(R, mask, policy, warm)
    return _policy_iteration(P, R, mask, discount, policy, q, values, M, b, new, max_iter)


class Work:
    """The arrays a compiled plan reads and writes besides the agent's own: the per-pair sd,
    ``R``, ``q``, values and the solves' scratch (``S`` states, ``A`` actions)."""

    def __init__(self, agent):
        S, A = agent.n_states, agent.n_actions
        self.sd = np.ascontiguousarray(agent._sd, dtype=np.float64)
        self.mask = np.ascontiguousarray(agent.action_mask, dtype=np.bool_)
        self.prior_var = np.inf if agent.prior_var is None else float(agent.prior_var)
        self.R, self.q, self.values = np.zeros((S, A)), np.zeros((S, A)), np.zeros(S)
        self.M, self.b, self.row = np.zeros((S + 1) ** 2), np.zeros(S + 1), np.zeros(S + 1)
        self.new = np.zeros(S, np.int64)
        self.ints, self.ipiv = np.zeros(3, np.int64), np.zeros(S, np.int64)
        # known transitions are read-only on the agent: the plan reads this copy
        self.P = np.array(agent._P, dtype=np.float64) if agent.known else None

    def tail(self) -> tuple:
        """The arrays in :func:`_plan`'s order after ``bonus``."""
        return (self.R, self.q, self.values, self.M, self.b, self.row, self.new, self.ints,
                self.ipiv)  # fmt: skip


def applies(agent) -> bool:
    """Whether the agent's continuing plans can be compiled: a continuing agent of fewer than
    :data:`optplan.agents._psrl_kernels.MAX_STATES` states, Dirichlet (or known) transitions,
    no exact (sd 0) rewards under a proper prior."""
    post = agent.posterior
    if not (agent.n_layers is None and agent.n_states < K.MAX_STATES):
        return False
    if post.deterministic:
        return False
    return post.improper or bool(np.all(np.asarray(agent._sd) > 0))


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
