r"""The compiled plan of :class:`~optplan.agents.ContinuingPSRL` and its batch update.

A plan of continuing PSRL is a draw of the model from the posterior and Howard policy
iteration on it: with ``update_every = 1`` that is every step, and in NumPy it is some sixty
array calls on arrays of a few dozen entries (about 100 us on RiverSwim-6, most of it call
overhead). :func:`_plan` does it in one compiled call, which the agent's compiled ``observe``
makes (:mod:`optplan.agents.psrl`). Against the NumPy plan (:meth:`ContinuingPSRL._plan_numpy
<optplan.agents.ContinuingPSRL._plan_numpy>`, the plan of models of :data:`MAX_STATES` states
or more) it draws the same numbers and leaves the generator in the same state, and its
policy iteration is the same operations:

- draws: ``Generator.standard_gamma`` (the Dirichlet), ``Generator.gamma`` and
  ``standard_normal`` (the Normal-Gamma) on the agent's generator, entry by entry in C order,
  all the Dirichlet's gammas first, then all the precisions, then all the normals, as
  :meth:`Dirichlet.sample <optplan.posteriors.Dirichlet.sample>` and
  :meth:`NormalGamma.sample <optplan.posteriors.NormalGamma.sample>`; numba implements them
  with NumPy's algorithms on the same bit generator; the Dirichlet's
  row totals as NumPy's pairwise sum;
- the sampled reward ``R[s, a] = sum_s' P mu`` summed in order (``np.einsum`` may group
  the terms otherwise: ``R`` and ``q`` may differ from the NumPy plan's in the last bits;
  ``tests/test_psrl_compiled.py`` compares the two);
- policy iteration: :func:`optplan.dp.policy_iteration`'s steps (start policy, evaluation,
  backup ``q = (P v) gamma + R`` by BLAS ``dgemv``, greedy improvement keeping the incumbent
  within ``1e-12`` relative) with the evaluation solved by Gaussian elimination with partial
  pivoting (:func:`optplan.fast._agent_kernels._solve_t`; the values can differ from the NumPy
  plan's in the last bits; the policies agree on the tested posteriors): ``I - gamma P_pi``,
  or the bordered
  unichain system of :func:`optplan.dp.evaluate_unichain` for average reward); the recurrent classes
  of each average-reward policy counted as :func:`optplan.dp.n_recurrent_classes` does.

It covers fewer than :data:`optplan.dp.ITERATIVE_MIN_STATES` states (where the NumPy average
evaluation factorizes); larger models plan in NumPy.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _jit
from ..fast import _agent_kernels as _ak
from ..fast._agent_kernels import _copy, _matvec, _pw_sum

__all__ = ["AVAILABLE", "OK", "MULTICHAIN", "MAX_ITER", "NUMERICAL", "Scratch",
           "scratch", "Work", "MAX_STATES", "absorb_batch"]  # fmt: skip

#: numba is installed (the ``jit`` extra).
AVAILABLE = _jit.AVAILABLE
#: Plan outcomes: optimal; an average-reward policy with several recurrent classes; no stop
#: in ``max_iter`` iterations; an evaluation that is singular or not finite.
OK, MULTICHAIN, MAX_ITER, NUMERICAL = 0, 1, 2, 3
#: :func:`optplan.dp.greedy`'s tie tolerance in policy iteration.
GREEDY_TOL = 1e-12
#: The compiled plan covers models with fewer states (the NumPy average evaluation iterates
#: from :data:`optplan.dp.ITERATIVE_MIN_STATES` on).
MAX_STATES = 200

_JIT = _jit.Jit(
    "the compiled PSRL plan", uses=(_ak._JIT,), cache=True, nogil=True, error_model="numpy"
)


class Scratch(NamedTuple):
    """Policy iteration's scratch for ``S`` states: the evaluation's system ``M`` (flat, room
    for the bordered average-reward one) and right-hand side ``b``, a row, the improved
    policy ``new``, and the reachability ``reach`` and ``stack`` of the class count."""

    M: np.ndarray
    b: np.ndarray
    row: np.ndarray
    new: np.ndarray
    reach: np.ndarray
    stack: np.ndarray


def scratch(S: int) -> Scratch:
    """Zeroed :class:`Scratch` for ``S`` states."""
    z = np.zeros
    return Scratch(z((S + 1) ** 2), z(S + 1), z(S + 1), z(S, np.int64), z((S, S), np.bool_),
                   z(S, np.int64))  # fmt: skip


@_JIT
def _start_policy(R, mask, policy, warm):  # pragma: no cover - compiled by numba
    """Policy iteration's first policy, in place: ``policy`` itself when ``warm`` and it takes
    only admissible actions, else each state's first admissible action of largest ``R``
    (``numpy.argmax`` over the masked rewards: a NaN wins, as there)."""
    S, A = R.shape
    keep = warm
    for s in range(S):
        if not mask[s, policy[s]]:
            keep = False
    if keep:
        return
    for s in range(S):
        best = -1
        top = 0.0
        for a in range(A):
            val = R[s, a] if mask[s, a] else -math.inf
            if best >= 0 and math.isnan(top):
                continue
            if best < 0 or math.isnan(val) or val > top:
                best, top = a, val
        policy[s] = best


@_JIT
def _sample(rng, dalpha, mu0, lam, nalpha, nbeta, P, mu):  # pragma: no cover - compiled by numba
    """``P ~ Dirichlet(dalpha)`` (rows: last axis) and ``mu ~ NG(mu0, lam, nalpha, nbeta)``
    into ``P`` and ``mu``, each ``(S, A, S)``: the draws of ``Dirichlet.sample`` then
    ``NormalGamma.sample`` (``mu`` holds the precisions until the normals)."""
    S, A, K = P.shape
    for s in range(S):
        for a in range(A):
            for k in range(K):
                P[s, a, k] = rng.standard_gamma(dalpha[s, a, k])
    for s in range(S):
        for a in range(A):
            total = 0.0 + _pw_sum(P[s, a], 0, K)
            if total > 0:
                for k in range(K):
                    P[s, a, k] = P[s, a, k] / total
            else:
                for k in range(K):
                    P[s, a, k] = 1.0 / K
    for s in range(S):
        for a in range(A):
            for k in range(K):
                mu[s, a, k] = rng.gamma(nalpha[s, a, k], 1.0 / nbeta[s, a, k])
    for s in range(S):
        for a in range(A):
            for k in range(K):
                z = rng.standard_normal()
                mu[s, a, k] = mu0[s, a, k] + z / math.sqrt(lam[s, a, k] * mu[s, a, k])


@_JIT
def _n_classes(P, policy, reach, stack):  # pragma: no cover - compiled by numba
    """Recurrent classes of the chain ``P[s, policy[s]]``: 1 when some state is entered from
    every state (:func:`optplan.dp.n_recurrent_classes`' shortcut), else counted from the
    reachability (a state is recurrent iff every state it reaches reaches it back)."""
    S = P.shape[0]
    for j in range(S):
        every = True
        for i in range(S):
            if not P[i, policy[i], j] > 0:
                every = False
                break
        if every:
            return 1
    for i in range(S):  # reach[i, j]: j reachable from i (depth-first search)
        for j in range(S):
            reach[i, j] = i == j
        top = 1
        stack[0] = i
        while top > 0:
            top -= 1
            u = stack[top]
            for j in range(S):
                if P[u, policy[u], j] > 0 and not reach[i, j]:
                    reach[i, j] = True
                    stack[top] = j
                    top += 1
    count = 0
    for i in range(S):
        recurrent = True
        first = True  # i is the smallest state of its class
        for j in range(S):
            if reach[i, j] and not reach[j, i]:
                recurrent = False
                break
            if j < i and reach[i, j] and reach[j, i]:
                first = False
        if recurrent and first:
            count += 1
    return count


@_JIT
def _improve(q, R, mask, policy, new, discount):  # pragma: no cover - compiled by numba
    """``q = (P v) discount + R`` (no product for average reward, ``discount = 1``) from
    ``q = P v``, then :func:`optplan.dp.greedy` of the masked ``q`` keeping ``policy`` within
    ``1e-12`` (relative) into ``new``; returns how many states changed."""
    S, A = R.shape
    changed = 0
    for s in range(S):
        best = -1
        top = 0.0
        for a in range(A):
            if discount != 1.0:
                q[s, a] *= discount
            q[s, a] += R[s, a]
            val = q[s, a] if mask[s, a] else -math.inf
            if best >= 0 and math.isnan(top):
                continue
            if best < 0 or math.isnan(val) or val > top:
                best, top = a, val
        p = policy[s]
        incumbent = q[s, p] if mask[s, p] else -math.inf
        if incumbent >= top - GREEDY_TOL * abs(top):
            new[s] = p
        else:
            new[s] = best
            changed += 1
    return changed


@_JIT
def _discounted_system(P, policy, g, rhs, M, b):  # pragma: no cover - compiled by numba
    """The system ``(I - g P_pi) x = rhs_pi`` of the policy, transposed
    (:func:`optplan.fast._agent_kernels._solve_t`'s order), into ``M`` and ``b``."""
    S = P.shape[0]
    for i in range(S):
        a = policy[i]
        for j in range(S):
            M[j, i] = (1.0 if i == j else 0.0) - g * P[i, a, j]
        b[i] = rhs[i, a]


@_JIT
def _policy_iteration(P, R, mask, discount, average, policy, q, values, w,
                      max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """:func:`optplan.dp.policy_iteration` on the dense ``(P, R)`` from ``policy`` (updated in
    place; the caller chose the start policy) with the :class:`Scratch` ``w``. Returns
    ``(status, iterations, classes, gain)``; ``values`` and ``q`` belong to the last evaluated
    policy."""
    M_flat, b, row, new, reach, stack = w
    S, A = R.shape
    flat = P.reshape(S * A, S)
    qv = q.reshape(S * A)
    gain = math.nan
    n_eq = S + 1 if average else S
    M = M_flat[: n_eq * n_eq].reshape((n_eq, n_eq))
    for it in range(1, max_iter + 1):
        if average:
            n = _n_classes(P, policy, reach, stack)
            if n > 1:
                return MULTICHAIN, it, n, gain
            for i in range(S + 1):  # the bordered system, transposed (_solve_t's order)
                for j in range(S + 1):
                    M[i, j] = 0.0
            for i in range(S):
                a = policy[i]
                for j in range(S):
                    row[j] = -P[i, a, j]
                    M[j, i] = row[j]
                row[i] = 0.0
                M[i, i] = -(0.0 + _pw_sum(row, 0, S))
                M[S, i] = 1.0
                b[i] = R[i, a]
            M[0, S] = 1.0
            b[S] = 0.0
        else:
            _discounted_system(P, policy, discount, R, M, b)
        info = _ak._solve_t(M, b[:n_eq])
        if info != 0:
            return NUMERICAL, it, 1, gain
        for i in range(n_eq):
            if not math.isfinite(b[i]):
                return NUMERICAL, it, 1, gain
        for i in range(S):
            values[i] = b[i]
        if average:
            gain = b[S]
        _matvec(flat, values, qv)
        if _improve(q, R, mask, policy, new, 1.0 if average else discount) == 0:
            return OK, it, 1, gain
        _copy(policy, new)
    return MAX_ITER, max_iter, 1, gain


@_JIT
def _plan(rng, post, mask, discount, average, policy, warm, out, w,
          max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """One plan from the posterior ``post = (dalpha, mu0, lam, nalpha, nbeta)`` into ``out =
    (P, mu, R, q, values)``: draw ``(P, mu)``, ``R = sum_s' P mu``, policy iteration from
    ``policy`` (``warm``: the last plan's; else, or when it takes an inadmissible action,
    greedy in ``R``) with the :class:`Scratch` ``w``. ``policy`` becomes the new policy.
    Returns ``(status, iterations, classes, gain)``."""
    dalpha, mu0, lam, nalpha, nbeta = post
    P, mu, R, q, values = out
    _sample(rng, dalpha, mu0, lam, nalpha, nbeta, P, mu)
    S, A, K = P.shape
    for s in range(S):
        for a in range(A):
            total = 0.0
            for k in range(K):
                total += P[s, a, k] * mu[s, a, k]
            R[s, a] = total
    _start_policy(R, mask, policy, warm)
    return _policy_iteration(P, R, mask, discount, average, policy, q, values, w, max_iter)


@_JIT
def absorb_batch(k, buf, batch, post, public):  # pragma: no cover - compiled by numba
    """Fold the ``k`` transitions of ``buf = (s, a, r, s')`` into the posterior ``post = (dalpha,
    mu0, lam, nalpha, nbeta)`` in place (``batch = (cnt, sums, sq)``: zeros on entry and on
    exit): the Dirichlet's counts and :func:`~optplan.posteriors.normal_gamma_update` on the
    entries the batch touched (``public``: the public code's sum of squares)."""
    buf_s, buf_a, buf_r, buf_s2 = buf
    cnt, sums, sq = batch
    dalpha, mu0, lam, nalpha, nbeta = post
    for i in range(k):
        x, a, y, r = buf_s[i], buf_a[i], buf_s2[i], buf_r[i]
        cnt[x, a, y] += 1.0
        sums[x, a, y] += r
        sq[x, a, y] += r * r
    for i in range(k):
        x, a, y = buf_s[i], buf_a[i], buf_s2[i]
        n = cnt[x, a, y]
        if n == 0.0:  # done at an earlier repeat of this entry
            continue
        total = sums[x, a, y]
        rbar = total / n
        if public:
            spread = (n - 1.0) * total * rbar
        else:
            spread = sq[x, a, y] - total * rbar
            if not spread >= 0.0:  # np.maximum(., 0): NaN stays NaN
                spread = spread if math.isnan(spread) else 0.0
        l0, m0 = lam[x, a, y], mu0[x, a, y]
        lam_n = l0 + n
        d = rbar - m0
        nbeta[x, a, y] = nbeta[x, a, y] + 0.5 * spread + l0 * n * (d * d) / (2.0 * lam_n)
        mu0[x, a, y] = (l0 * m0 + total) / lam_n
        lam[x, a, y] = lam_n
        nalpha[x, a, y] = nalpha[x, a, y] + 0.5 * n
        dalpha[x, a, y] = dalpha[x, a, y] + n
        cnt[x, a, y] = 0.0
        sums[x, a, y] = 0.0
        sq[x, a, y] = 0.0


class Work:
    """The arrays one agent's plans write (its sampled model, ``R``, ``q``, values) and the
    scratch of the solves, allocated once per agent: ``S`` states, ``A`` actions."""

    def __init__(self, S: int, A: int):
        self.P, self.mu = np.zeros((S, A, S)), np.zeros((S, A, S))
        self.R, self.q, self.values = np.zeros((S, A)), np.zeros((S, A)), np.zeros(S)
        self.scratch = scratch(S)

    def out(self) -> tuple:
        """:func:`_plan`'s ``out``."""
        return (self.P, self.mu, self.R, self.q, self.values)


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
