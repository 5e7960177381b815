r"""The compiled plan of :class:`~optplan.agents.ContinuingUBE` (optional: needs ``numba``).

A plan of the UBE without unrolling is the posterior-mean model, Howard policy iteration on
it, the local uncertainty ``nu`` and the UBE's linear solve ``(I - gamma^2 Pbar_pi) v =
nu_pi``, ``u = nu + gamma^2 Pbar v``: in NumPy some hundred array calls on arrays of a few
dozen entries, with ``update_every = 1`` at every step. :func:`plan` does it in one compiled
call, which the agent's own ``plan()`` makes. It draws nothing (the plan is deterministic);
against the NumPy plan (:meth:`ThompsonMeanModel.plan
<optplan.agents._posterior_agent.ThompsonMeanModel.plan>` with
:meth:`ContinuingUBE._noise_sd <optplan.agents.ContinuingUBE._noise_sd>`) it is the same
operations:

- ``Pbar = alpha / alpha.sum(-1)`` and ``Var mu = beta / (lam (alpha - 1))`` entry by entry,
  the row totals as NumPy's pairwise sum; ``R[s, a] = sum_s' Pbar mu0`` summed in order
  (``np.einsum`` may group the terms otherwise: ``R``, ``q`` and the values may differ from
  the NumPy plan's in the last bits, as in :mod:`optplan.agents._psrl_kernels`);
- policy iteration: :func:`optplan.agents._psrl_kernels._policy_iteration` as it is (warm
  start from the last policy, else greedy in ``R``);
- ``nu``: :func:`optplan.uncertainty.local_draft` / :func:`~optplan.uncertainty.local_lemma1`
  term by term, each sum over ``s'`` NumPy's pairwise sum of the same products, 0 where
  inadmissible;
- the UBE: :func:`optplan.fast.ube._direct`'s system solved by Gaussian elimination with
  partial pivoting (:func:`optplan.fast._agent_kernels._solve_t`), ``Pbar v`` by a compiled
  product, and its certificate (the
  fixed-point residual within ``1e-10`` of ``max |u|``).

A plan that fails here (singular or not finite, no stop of policy iteration, a residual
beyond the certificate) is redone by the NumPy plan, which raises its own error: the plan
draws nothing, so redoing it changes nothing else. ``tests/test_ube_compiled.py`` compares
the two plans.

The continuing plan of :class:`~optplan.agents.UBE` (Eq. 3; Gaussian mean rewards per pair
with a known noise sd, :class:`~optplan.posteriors.LayeredPosterior`) is
:func:`_mean_plan`, one compiled call its steps make (:mod:`optplan.agents._ube_steps`), the
same operations as its NumPy plan
(:meth:`MeanModelAgent.plan <optplan.agents._mean_model.MeanModelAgent.plan>` then
``UBE._after_plan``):

- the posterior-mean model and policy iteration: :func:`optplan.agents._mean_model_kernels.
  _plan` without a bonus;
- ``nu`` (0 where inadmissible): ``Var mu`` with known transitions; else
  ``(sd^2 + gamma^2 Q_max^2) / max(n, 1)`` (``local="tabular"``, :func:`optplan.uncertainty.
  local_tabular`), ``Var mu + gamma^2 Q_max^2 (1 - sum_s' Pbar^2) / (alpha_0 + 1)``
  (``"lemma1"``) or the draft's rule with the reward mean and variance the same for every
  ``s'`` (``"draft"``), each sum over ``s'`` NumPy's pairwise sum of the same products;
- the UBE as above (:func:`_ube`), and ``sqrt(u)`` of every pair.

It applies (:func:`mean_applies`) to a continuing ``UBE`` with ``method="fast"`` of fewer than
:data:`MAX_STATES` states (:func:`available`, :func:`optplan.agents._mean_model_kernels.
applies`). Its kernels are a collection of their own (:data:`_MEAN_JIT`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..fast import _agent_kernels as _ak
from ..fast._agent_kernels import _matvec, _pw_sum
from . import _mean_model_kernels as MK
from . import _psrl_kernels as PK

__all__ = ["AVAILABLE", "OK", "NUMERICAL", "MAX_ITER", "DRAFT", "LEMMA1", "MOMENT", "TABULAR",
           "KNOWN", "MAX_STATES", "Work", "available", "mean_rule",
           "mean_applies"]  # fmt: skip

AVAILABLE = _jit.AVAILABLE
OK, NUMERICAL = PK.OK, PK.NUMERICAL
#: The local terms: the UBE's rules (``local="draft"``, ``"lemma1"``) and moment matching's
#: ``w`` (:func:`optplan.uncertainty.moment_matching_local`, clipped at 0).
DRAFT, LEMMA1, MOMENT = 0, 1, 2
#: :class:`~optplan.agents.UBE`'s local terms besides ``DRAFT`` and ``LEMMA1``:
#: ``local="tabular"`` and known transitions (``Var mu``).
TABULAR, KNOWN = 3, 4
#: The compiled plan covers models with fewer states.
MAX_STATES = PK.MAX_STATES
#: Policy iterations of a compiled plan (:func:`optplan.dp.policy_iteration`'s default cap);
#: a plan that needs more is redone in NumPy.
MAX_ITER = 1_000
#: :func:`optplan.fast.ube._certify`'s residual allowed, relative to ``max |u|``.
RESIDUAL = 1e-10

_JIT = _jit.Jit(
    "the compiled UBE plan", uses=(_ak._JIT, PK._JIT), cache=True, nogil=True, error_model="numpy"
)


@_JIT
def _mean_model(dalpha, mu0, lam, nalpha, nbeta, P, var, R, a0):  # pragma: no cover - numba
    """``Pbar``, ``Var mu``, ``R = sum_s' Pbar mu0`` and the Dirichlet totals ``a0``."""
    S, A, K = P.shape
    for s in range(S):
        for a in range(A):
            tot = 0.0 + _pw_sum(dalpha[s, a], 0, K)
            a0[s, a] = tot
            r = 0.0
            for k in range(K):
                P[s, a, k] = dalpha[s, a, k] / tot
                var[s, a, k] = nbeta[s, a, k] / (lam[s, a, k] * (nalpha[s, a, k] - 1.0))
                r += P[s, a, k] * mu0[s, a, k]
            R[s, a] = r


@_JIT
def _local(dalpha, mu0, mask, P, var, a0, rule, coef, nu, tmp):  # pragma: no cover - numba
    """``nu`` of every pair (0 where inadmissible): ``coef`` is ``Q_max^2`` (draft) or
    ``gamma^2 Q_max^2`` (lemma1)."""
    S, A, K = P.shape
    for s in range(S):
        for a in range(A):
            if not mask[s, a]:
                nu[s, a] = 0.0
                continue
            p = P[s, a]
            x = mu0[s, a]
            for k in range(K):
                tmp[k] = p[k] * var[s, a, k]
            t1 = 0.0 + _pw_sum(tmp, 0, K)
            for k in range(K):
                tmp[k] = p[k] * x[k]
            px = 0.0 + _pw_sum(tmp, 0, K)
            for k in range(K):
                tmp[k] = p[k] * (x[k] - px) * (x[k] - px)
            t2 = (0.0 + _pw_sum(tmp, 0, K)) / (a0[s, a] + 1.0)
            if rule == DRAFT:
                n_pos = 0
                for k in range(K):
                    if dalpha[s, a, k] > 0:
                        n_pos += 1
                t3 = (n_pos - 1.0) / (a0[s, a] + 1.0)
                nu[s, a] = t1 + t2 + coef * t3
            else:
                for k in range(K):
                    tmp[k] = p[k] * p[k]
                t3 = (1.0 - (0.0 + _pw_sum(tmp, 0, K))) / (a0[s, a] + 1.0)
                nu[s, a] = t1 + t2 + coef * t3


@_JIT
def _moment_local(mu0, P, var, a0, values, g, nu, tmp, dm, dv):  # pragma: no cover - numba
    """Moment matching's ``w = A + B + 2 g C + g^2 D`` of every pair, clipped at 0 as
    :class:`~optplan.problems.MomentMatchingVariance` clips it; ``NUMERICAL`` when some ``w``
    is negative beyond rounding."""
    S, A, K = P.shape
    for s in range(S):
        for a in range(A):
            p = P[s, a]
            x = mu0[s, a]
            scale = a0[s, a] + 1.0
            for k in range(K):
                tmp[k] = p[k] * x[k]
            pm = 0.0 + _pw_sum(tmp, 0, K)
            for k in range(K):
                tmp[k] = p[k] * values[k]
            pv = 0.0 + _pw_sum(tmp, 0, K)
            for k in range(K):
                dm[k] = x[k] - pm
                dv[k] = values[k] - pv
            for k in range(K):
                tmp[k] = p[k] * dm[k] * dm[k]
            tA = (0.0 + _pw_sum(tmp, 0, K)) / scale
            for k in range(K):
                tmp[k] = p[k] * var[s, a, k]
            tB = 0.0 + _pw_sum(tmp, 0, K)
            for k in range(K):
                tmp[k] = p[k] * dm[k] * dv[k]
            tC = (0.0 + _pw_sum(tmp, 0, K)) / scale
            for k in range(K):
                tmp[k] = p[k] * dv[k] * dv[k]
            tD = (0.0 + _pw_sum(tmp, 0, K)) / scale
            w = tA + tB + 2 * g * tC + g**2 * tD
            if w < 0:
                big = max(abs(tA), abs(tB), abs(2 * g * tC), abs(g**2 * tD))
                if w < -1e-12 * (1 + big):
                    return NUMERICAL
                w = 0.0
            nu[s, a] = w
    return OK


@_JIT
def _ube(P, policy, nu, g2, u, v, M_flat, b, w):  # pragma: no cover - compiled by numba
    """``u`` of the UBE ``u = nu + g2 Pbar_pi u`` by the states' system; returns the
    status (certificate included)."""
    S, A, K = P.shape
    flat = P.reshape(S * A, S)
    uf = u.reshape(S * A)
    wf = w.reshape(S * A)
    M = M_flat[: S * S].reshape((S, S))
    PK._discounted_system(P, policy, g2, nu, M, b)
    info = _ak._solve_t(M, b[:S])
    if info != 0:
        return NUMERICAL
    for i in range(S):
        if not math.isfinite(b[i]):
            return NUMERICAL
        v[i] = b[i]
    _matvec(flat, v, uf)
    scale = 0.0
    for s in range(S):
        for a in range(A):
            u[s, a] = nu[s, a] + g2 * u[s, a]
            if not math.isfinite(u[s, a]):
                return NUMERICAL
            scale = max(scale, abs(u[s, a]))
    for i in range(S):
        v[i] = u[i, policy[i]]
    _matvec(flat, v, wf)
    res = 0.0
    for s in range(S):
        for a in range(A):
            res = max(res, abs(u[s, a] - (nu[s, a] + g2 * w[s, a])))
    if res > RESIDUAL * scale:
        return NUMERICAL
    return OK


# inlined into the compiled step that plans: its tuples of arrays are not built at each
# plan, and numba compiles one level less
@_JIT(inline="always")
def _plan(post, mask, discount, rule, policy, warm, out, w,
          max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """One plan from the posterior ``post = (dalpha, mu0, lam, nalpha, nbeta)`` into ``out =
    (P, var, R, a0, q, values, nu, u, sd, v, w)`` (:class:`Work`) with the policy iteration
    scratch ``w``; ``policy`` becomes the new policy; ``rule = (rule, coef, div)``: the local
    term, its coefficient, and the noise sd ``sqrt(u) / div``. Returns the status."""
    dalpha, mu0, lam, nalpha, nbeta = post
    P, var, R, a0, q, values, nu, u, sd, v, ws = out
    kind, coef, div = rule
    _mean_model(dalpha, mu0, lam, nalpha, nbeta, P, var, R, a0)
    S, A, K = P.shape
    PK._start_policy(R, mask, policy, warm)
    status, _, _, _ = PK._policy_iteration(P, R, mask, discount, False, policy, q, values, w,
                                           max_iter)  # fmt: skip
    if status != OK:
        return status
    if kind == MOMENT:
        status = _moment_local(mu0, P, var, a0, values, discount, nu, w.row, w.b, v)
        if status != OK:
            return status
    else:
        _local(dalpha, mu0, mask, P, var, a0, kind, coef, nu, w.row)
    status = _ube(P, policy, nu, discount * discount, u, v, w.M, w.b, ws)
    if status != OK:
        return status
    for s in range(S):
        for a in range(A):
            sd[s, a] = math.sqrt(u[s, a]) / div if mask[s, a] else 0.0
    return OK


class Work:
    """One agent's plan arrays (``S`` states, ``A`` actions), allocated once (zeros)."""

    def __init__(self, S: int, A: int):
        self.P, self.var = np.zeros((S, A, S)), np.zeros((S, A, S))
        self.R, self.a0, self.q = np.zeros((S, A)), np.zeros((S, A)), np.zeros((S, A))
        self.values = np.zeros(S)
        self.nu, self.u, self.sd = np.zeros((S, A)), np.zeros((S, A)), np.zeros((S, A))
        self.v, self.w = np.zeros(S), np.zeros((S, A))
        self.scratch = PK.scratch(S)

    def args(self) -> tuple:
        """:func:`_plan`'s ``out``, then the scratch."""
        return (self.P, self.var, self.R, self.a0, self.q, self.values, self.nu, self.u,
                self.sd, self.v, self.w, self.scratch)  # fmt: skip


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


# --- the continuing plan of UBE (Eq. 3) ---------------------------------------------------

#: The kernels of :func:`_mean_plan`: they call :mod:`optplan.agents._mean_model_kernels`.
_MEAN_JIT = _jit.Jit(
    "the compiled UBE plan (Gaussian rewards)",
    uses=(_JIT, MK._JIT),
    cache=True,
    nogil=True,
    error_model="numpy",
)


@_MEAN_JIT
def _mean_local(counts, next_counts, tprior, sd, mask, P, var, mean, rule, coef, nu,
                tmp):  # fmt: skip  # pragma: no cover - compiled by numba
    """``nu`` of every pair of the UBE (0 where inadmissible); ``coef`` is ``gamma^2
    Q_max^2`` (tabular, lemma1) or ``Q_max^2`` (draft)."""
    S, A = counts.shape
    for s in range(S):
        for a in range(A):
            if not mask[s, a]:
                nu[s, a] = 0.0
                continue
            if rule == KNOWN:
                nu[s, a] = var[s, a]
                continue
            if rule == TABULAR:
                n = counts[s, a]
                c = n if n > 1.0 else 1.0
                if math.isnan(n):
                    c = n
                sig = sd[s, a]
                nu[s, a] = (sig * sig + coef) / c
                continue
            n_pos = 0
            for k in range(S):
                tmp[k] = next_counts[s, a, k] + tprior
                if tmp[k] > 0:
                    n_pos += 1
            a0 = 0.0 + _pw_sum(tmp, 0, S)
            p = P[s, a]
            if rule == LEMMA1:
                for k in range(S):
                    tmp[k] = p[k] * p[k]
                t3 = (1.0 - (0.0 + _pw_sum(tmp, 0, S))) / (a0 + 1.0)
                nu[s, a] = var[s, a] + coef * t3
                continue
            # the draft's rule, the reward's mean and variance the same for every s'
            x, y = mean[s, a], var[s, a]
            for k in range(S):
                tmp[k] = p[k] * y
            t1 = 0.0 + _pw_sum(tmp, 0, S)
            for k in range(S):
                tmp[k] = p[k] * x
            px = 0.0 + _pw_sum(tmp, 0, S)
            for k in range(S):
                tmp[k] = p[k] * (x - px) * (x - px)
            t2 = (0.0 + _pw_sum(tmp, 0, S)) / (a0 + 1.0)
            t3 = (n_pos - 1.0) / (a0 + 1.0)
            nu[s, a] = t1 + t2 + coef * t3


# inlined into the compiled step that plans: its tuples of arrays are not built at each
# plan, and numba compiles one level less
@_MEAN_JIT(inline="always")
def _mean_plan(post, known, mask, discount, rule, coef, policy, warm, model, ube, w,
               max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """One plan of the UBE from ``post`` (:func:`optplan.agents._mean_model_kernels._plan`'s;
    ``sd`` the reward noise's per pair): ``model = (mean, var, P, bonus, R, q, values)``
    (``P`` unless ``known``), ``policy`` (in place) and ``ube = (nu, u, sqrt_u, v, w)``, with
    the policy iteration scratch ``w``. Returns the status."""
    counts, sums, next_counts, tprior, sdr, prior_var, improper = post
    mean, var, P, bonus, R, q, values = model
    nu, u, sqrt_u, v, wu = ube
    status, _, _, _ = MK._plan(post, known, mask, 0.0, discount, policy, warm, model, w,
                               max_iter)  # fmt: skip
    if status != OK:
        return status
    _mean_local(counts, next_counts, tprior, sdr, mask, P, var, mean, rule, coef, nu, w.row)
    status = _ube(P, policy, nu, discount * discount, u, v, w.M, w.b, wu)
    if status != OK:
        return status
    S, A = u.shape
    for s in range(S):
        for a in range(A):
            sqrt_u[s, a] = math.sqrt(u[s, a])
    return OK


def mean_rule(agent) -> tuple[int, float]:
    """A :class:`~optplan.agents.UBE`'s local rule for :func:`_mean_plan` and its ``coef``."""
    if agent.known:
        return KNOWN, 0.0
    if agent.local_rule == "draft":
        return DRAFT, agent.q_max**2
    # as the NumPy rules scale their transition term
    rule = TABULAR if agent.local_rule == "tabular" else LEMMA1
    return rule, float(agent.discount) ** 2 * agent.q_max**2


def mean_applies(agent) -> bool:
    """Whether a :class:`~optplan.agents.UBE`'s plans are compiled: continuing, ``method=
    "fast"``, and both :func:`available` and :func:`optplan.agents._mean_model_kernels.
    applies` (fewer than :data:`MAX_STATES` states, a Dirichlet or known transition law, no
    exact rewards under a proper prior, numba's and numpy's routes agreeing)."""
    return (
        agent.n_layers is None
        and agent.method == "fast"
        and available(agent.n_states)
        and MK.applies(agent)
        and _mean_compiled() is not None
    )


def _mean_compiled() -> dict | None:
    return _MEAN_JIT.table or _MEAN_JIT.compiled_or_none()


def available(n_states: int) -> bool:
    """Whether the compiled plan applies: numba and fewer than :data:`MAX_STATES` states."""
    return AVAILABLE and n_states < MAX_STATES
