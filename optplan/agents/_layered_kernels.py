r"""The compiled plans of the episodic agents on :class:`~optplan.posteriors.LayeredPosterior`:
:class:`~optplan.agents.PSRL` and :class:`~optplan.agents.KLearning` (``tau*`` by
``method="fast"``, or the schedule).

Both agents plan once per episode. In NumPy a plan is a few dozen array calls on the
posterior (tens of microseconds each on DeepSea L = 20) around its core: PSRL's draw of
``L S A S = 16,000`` Gamma variates and its backward induction, K-learning's search for
``tau*`` (:func:`optplan.fast._k_kernels.solve`) or its soft backward pass. :func:`psrl_plan`,
:func:`k_plan` and :func:`k_schedule_plan` make the whole plan in one compiled call each,
and the agents' own ``plan()`` call them wherever they apply (the NumPy plans remain for
what they do not cover: PSRL's deterministic transition prior, K-learning with a per-pair
``sigma`` or the conic method). ``tests/test_episodic_steps.py`` compares them with
the NumPy plans (:func:`optplan.dp.backward_induction`, ``KLearningTemperature.solve``,
:func:`optplan.soft.k_values`) on random posteriors:

- the reward posterior of :func:`optplan.posteriors.gaussian_mean_posterior` for one scalar
  ``sigma`` and a proper prior (or the exact branch of ``sigma = 0``); other posteriors (a
  per-pair ``sigma``, the flat prior) hand NumPy's mean and variance in;
- PSRL: ``R = mean + sqrt(var) z``, the ``z`` by ``Generator.standard_normal`` in C order (all
  of them first, as ``standard_normal(shape)``); ``P ~ Dirichlet(next_counts +
  transition_prior)``: the Gamma variates in C order by NumPy's algorithm (below shape 1 the
  rejection sampler, written out here; from shape 1 on numba's ``Generator.standard_gamma``),
  each row divided by its total, so the draws and the generator's state are NumPy's; then
  backward induction, the greedy policy the first maximum;
- K-learning: the posterior mean transitions (:meth:`LayeredPosterior.mean_transitions
  <optplan.posteriors.LayeredPosterior.mean_transitions>`, Dirichlet or deterministic), the
  bonus numerators (:func:`optplan.posteriors.k_bonus_numerators`, either kind), then the
  compiled search (:func:`optplan.fast._k_kernels._solve`, what
  ``KLearningTemperature.solve("fast", guess=...)`` runs, started around the last plan's
  ``tau*``, given the row groups it would find: the unvisited pairs of a layer share their
  uniform posterior-mean row). The model is incremental: between the plans of one agent only
  the rows of the pairs visited since are computed again (:func:`_k_model`). Where that
  search hands over to SciPy's (no bonus anywhere, no converged root) the agent makes the
  NumPy plan instead;
- K-learning at the schedule's temperature (Eq. 10, computed in Python; :func:`k_schedule_plan`,
  :func:`_k_schedule`): the same means and bonus numerators, then :func:`optplan.soft.
  soft_backward` and the Boltzmann policy in one call.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..fast import _k_kernels as _KK
from ..fast._k_kernels import _exceptions, _sparse_layer
from ..fast._pairwise import _JIT as _PAIRWISE
from ..fast._pairwise import _pw_block

__all__ = ["GIVEN", "NOISY", "EXACT", "PsrlWork", "psrl_plan", "psrl_scalars", "KWork", "k_plan",
           "k_policy", "k_schedule_plan"]  # fmt: skip

#: How a kernel gets the reward posterior: NumPy's mean and variance handed in; one noise
#: sd ``sigma > 0`` and a finite prior variance; ``sigma = 0`` and a finite prior variance.
GIVEN, NOISY, EXACT = 0, 1, 2


_JIT = _jit.Jit(
    "the compiled episodic plans", uses=(_KK._JIT, _PAIRWISE), cache=True, nogil=True,
    error_model="numpy",
)  # fmt: skip


@_JIT(inline="always")
def _row_sum(a, lo, n):  # pragma: no cover - compiled by numba
    """``a[lo:lo + n].sum()`` as NumPy's ``add.reduce`` (pairwise up to 256 terms: one split
    in halves whose first has a multiple of 8 terms)."""
    if n <= 128:
        return 0.0 + _pw_block(a, lo, n)
    n2 = n // 2
    n2 -= n2 % 8
    return 0.0 + (_pw_block(a, lo, n2) + _pw_block(a, lo + n2, n - n2))


@_JIT
def _small_gamma(rng, shape, inv):  # pragma: no cover - compiled by numba
    """NumPy's ``random_standard_gamma`` for ``0 < shape < 1`` (``inv = 1. / shape``)."""
    while True:
        U = rng.random()
        V = rng.standard_exponential()
        if U <= 1.0 - shape:
            X = math.pow(U, inv)
            if X <= V:
                return X
        else:
            Y = -math.log((1 - U) / shape)
            X = math.pow(1.0 - shape + shape * Y, inv)
            if X <= V + Y:
                return X


@_JIT
def _reward_posterior(counts, sums, mode, inv_prior, sd2, prior_var, mean,
                      var):  # fmt: skip  # pragma: no cover - compiled by numba
    """Fill ``mean`` and ``var`` (flat, ``L S A``) with the reward posterior (:data:`GIVEN`:
    left as handed in)."""
    if mode == GIVEN:
        return
    for i in range(counts.shape[0]):
        n = counts[i]
        if mode == NOISY:
            precision = inv_prior + n / sd2
            mean[i] = sums[i] / sd2 / precision
            var[i] = 1.0 / precision
        elif n > 0:
            mean[i] = sums[i] / max(n, 1.0)
            var[i] = 0.0
        else:
            mean[i] = 0.0
            var[i] = prior_var


@_JIT
def _psrl(rng, post, mean, var, alpha0, R, P, V, Q, policy):  # pragma: no cover - numba
    """One PSRL plan into ``R, P`` (the drawn model), ``V`` (L + 1, S), ``Q`` and ``policy``
    (module docstring) from ``post = (counts, sums, next_counts, mode, inv_prior, sd2,
    prior_var)``. ``mean``, ``var``: NumPy's posterior (:data:`GIVEN`) or scratch;
    ``inv_prior = 1.0 / prior_var``, ``sd2 = sigma**2`` as Python computes them."""
    counts, sums, next_counts, mode, inv_prior, sd2, prior_var = post
    L, S, A = counts.shape
    n = L * S * A
    m1 = mean.reshape(n)
    v1 = var.reshape(n)
    _reward_posterior(counts.reshape(n), sums.reshape(n), mode, inv_prior, sd2, prior_var,
                      m1, v1)  # fmt: skip
    R1 = R.reshape(n)
    for i in range(n):
        R1[i] = m1[i] + math.sqrt(v1[i]) * rng.standard_normal()
    K = next_counts.shape[3]
    N1 = next_counts.reshape(n * K)
    P1 = P.reshape(n * K)
    for i in range(n * K):
        shape = N1[i] + alpha0  # > 0
        if shape < 1.0:
            P1[i] = _small_gamma(rng, shape, 1.0 / shape)
        else:
            P1[i] = rng.standard_gamma(shape)
    for i in range(n):
        total = _row_sum(P1, i * K, K)
        if total > 0:
            for k in range(i * K, (i + 1) * K):
                P1[k] = P1[k] / total
        else:
            for k in range(i * K, (i + 1) * K):
                P1[k] = 1.0 / K
    for s in range(S):
        V[L, s] = 0.0
    for l in range(L - 1, -1, -1):
        rows = P[l].reshape(S * A, K)
        if S * A == 1:
            q0 = np.dot(rows[0], V[l + 1])
            Q[l, 0, 0] = q0 + R[l, 0, 0]
        else:
            q = np.dot(rows, V[l + 1])
            for s in range(S):
                for a in range(A):
                    Q[l, s, a] = q[s * A + a] + R[l, s, a]
        for s in range(S):
            best = 0
            top = Q[l, s, 0]
            for a in range(1, A):
                val = Q[l, s, a]
                if math.isnan(top):
                    break
                if math.isnan(val) or val > top:
                    best, top = a, val
            V[l, s] = top
            policy[l, s] = best


@_JIT
def _k_model(post, R, var, deterministic, alpha0, bonus, P, c,
             M):  # fmt: skip  # pragma: no cover - compiled by numba
    """A K-learning plan's model from ``post`` (as :func:`_psrl`'s): ``R`` (the posterior mean
    rewards; NumPy's with :data:`GIVEN`), ``var``, ``P`` (mean transitions) and ``c`` (bonus
    numerators) filled, and the search's row groups (:func:`optplan.fast._k_kernels._rows`).
    ``bonus = (posterior_bonus, sigma2, span, paper_unvisited, s_alpha)``: ``span <= 0``: the
    default ``L - 1 - l``; ``s_alpha = S * transition_prior`` as Python computes it;
    ``sigma2 = np.square(sigma)``. Returns whether some ``c`` is not 0.

    Incremental: ``P`` and ``M = (seen, totals, uniform, owned, prior, PT, group, nrep, flat,
    sparse, base, nnz, idx, val)`` (:attr:`KWork.model`; from ``PT`` on the search's row
    groups, as :func:`optplan.fast._k_kernels._rows` makes them) persist between the plans of
    one posterior, and a pair's row of ``P``, its next-state total ``totals`` and its group
    are computed again only where its count differs from ``seen`` (the counts of the last
    plan; ``-1`` before the first): a visit adds to a pair's count and its next-state
    counts together (:meth:`LayeredPosterior.update
    <optplan.posteriors.LayeredPosterior.update>`), and a row is a function of its own
    counts. ``uniform[:S]`` keeps an unvisited pair's row (``uniform[S]`` is 1 once it is
    computed), ``owned[l, j]`` whether pair ``j`` of layer ``l`` has a group of its own,
    ``prior[l]`` the layer's group of unvisited pairs (``-1``: none yet)."""
    counts, sums, next_counts, mode, inv_prior, sd2, prior_var = post
    posterior_bonus, sigma2, span, paper_unvisited, s_alpha = bonus
    seen3, totals3, uniform, owned, prior = M[:5]
    PT, group, nrep, flat, sparse, base, nnz, idx, val = M[5:]
    L, S, A = counts.shape
    n = L * S * A
    seen, totals = seen3.reshape(n), totals3.reshape(n)
    c1 = counts.reshape(n)
    _reward_posterior(c1, sums.reshape(n), mode, inv_prior, sd2, prior_var, R.reshape(n),
                      var.reshape(n))  # fmt: skip
    N1 = next_counts.reshape(n * S)
    P1 = P.reshape(n * S)
    var1 = var.reshape(n)
    cc = c.reshape(n)
    nonzero = False
    # the search's row groups (optplan.fast._k_kernels._rows): the unvisited pairs of a layer
    # share one uniform row (equal entries, one group), every visited pair is its own group
    SA = S * A
    for i in range(n):
        l = i // SA
        if c1[i] != seen[i]:
            lo = i * S
            tc = _row_sum(N1, lo, S)
            totals[i] = tc
            if deterministic:
                if tc > 0:
                    nn = max(tc, 1.0)
                    for k in range(lo, lo + S):
                        P1[k] = N1[k] / nn
                else:
                    for k in range(lo, lo + S):
                        P1[k] = 1.0 / S
            elif tc == 0 and uniform[S] != 0.0:  # an unvisited pair's row: the kept numbers
                for k in range(S):
                    P1[lo + k] = uniform[k]
            else:
                for k in range(lo, lo + S):
                    P1[k] = N1[k] + alpha0
                total = _row_sum(P1, lo, S)
                for k in range(lo, lo + S):
                    P1[k] = P1[k] / total
                if tc == 0:
                    for k in range(S):
                        uniform[k] = P1[lo + k]
                    uniform[S] = 1.0
            j = i - l * SA
            write = True
            if owned[l, j]:  # its own group: the row's new numbers
                g = group[l, j]
            elif tc == 0 and prior[l] >= 0:
                g = prior[l]
                write = False
            else:
                g = nrep[l]
                nrep[l] += 1
                if tc == 0:
                    prior[l] = g
                else:
                    owned[l, j] = True
            if write:
                for t in range(S):
                    PT[l, t, g] = P1[lo + t]
                _exceptions(P1[lo : lo + S], S, l, g, base, nnz, idx, val)
            group[l, j] = g
            flat[l, j // A, j % A] = tc == 0
            seen[i] = c1[i]
        tc = totals[i]
        remaining = float(L - 1 - l)
        if not posterior_bonus:
            cc[i] = (sigma2 + remaining * remaining) / (2.0 * max(c1[i], 1.0))
        else:
            sp = remaining
            if span > 0:
                sp = span if remaining > 0 else 0.0
            span2 = sp * sp
            if deterministic:
                before = span2 if paper_unvisited else span2 / 4.0
                transition = 0.0 if tc > 0 else before
            else:
                transition = span2 / (tc + s_alpha)
            cc[i] = (var1[i] + transition) / 2.0
        if cc[i] != 0.0:
            nonzero = True
    for l in range(L):
        sparse[l] = _sparse_layer(nnz, l, nrep[l], S)
    return nonzero


@_JIT
def _k_exponents(K, tau, m, X):  # pragma: no cover - compiled by numba
    """The Boltzmann policy's ``m = max_a K`` (the first maximum, NaN as NumPy's ``max``)
    and max-shifted exponents ``X = (K - m) / tau``."""
    L, S, A = K.shape
    for l in range(L):
        for s in range(S):
            top = K[l, s, 0]
            for a in range(1, A):
                if not math.isnan(top) and (math.isnan(K[l, s, a]) or K[l, s, a] > top):
                    top = K[l, s, a]
            m[l, s] = top
            for a in range(A):
                X[l, s, a] = (K[l, s, a] - top) / tau


@_JIT
def _soft(z, pi, cdf, total):  # pragma: no cover - compiled by numba
    """From ``z = exp((K - max K) / tau)`` (NumPy's ``exp``): ``total`` its sums over actions
    (pairwise, as NumPy), the policy ``pi = z / total`` and its cumulative sums ``cdf``."""
    L, S, A = z.shape
    z1 = z.reshape(L * S * A)
    for l in range(L):
        for s in range(S):
            t = _row_sum(z1, (l * S + s) * A, A)
            total[l, s] = t
            acc = 0.0
            for a in range(A):
                p = z[l, s, a] / t
                pi[l, s, a] = p
                acc = p if a == 0 else acc + p
                cdf[l, s, a] = acc


@_JIT
def _k_schedule(post, R, var, deterministic, alpha0, bonus, tau, P, c, M,
                out):  # fmt: skip  # pragma: no cover - compiled by numba
    """One K-learning plan at the temperature ``tau`` of the schedule (module docstring) into
    ``out = (K, V, pi, cdf)``: the model (:func:`_k_model`), then
    :func:`optplan.soft.soft_backward` into ``K`` and ``V``
    (``K_l = (R_l + c_l / tau) + P_l V_{l+1}``, ``V_l = m + tau log(sum_a exp((K_l - m) /
    tau))``, ``m = max_a K_l``), and the Boltzmann policy ``pi`` (``exp(...) / sum``, the same
    numbers as :func:`optplan.soft.boltzmann_policy_and_values`; its values are ``V``) and its
    cumulative rows ``cdf``."""
    K, V, pi, cdf = out
    L, S, A = R.shape
    _k_model(post, R, var, deterministic, alpha0, bonus, P, c, M)
    SA = S * A
    q = np.zeros((S, A))
    x = np.empty(SA)
    z = np.empty(SA)
    top = np.empty(S)
    total = np.empty(S)
    logs = np.empty(S)
    zero = np.zeros(S)
    for l in range(L - 1, -1, -1):
        v_next = zero if l == L - 1 else V[l + 1]
        for s in range(S):  # P[l] @ v_next
            for a in range(A):
                acc = 0.0
                for t in range(S):
                    acc += P[l, s, a, t] * v_next[t]
                q[s, a] = acc
        for s in range(S):
            for a in range(A):
                K[l, s, a] = (R[l, s, a] + c[l, s, a] / tau) + q[s, a]
            t = K[l, s, 0]
            for a in range(1, A):
                if not math.isnan(t) and (math.isnan(K[l, s, a]) or K[l, s, a] > t):
                    t = K[l, s, a]
            top[s] = t
            for a in range(A):
                x[s * A + a] = (K[l, s, a] - t) / tau
        for i in range(SA):
            z[i] = math.exp(x[i])
        for s in range(S):
            total[s] = _row_sum(z, s * A, A)
            logs[s] = math.log(total[s])
        for s in range(S):
            V[l, s] = top[s] + tau * logs[s]
            t = total[s]
            acc = 0.0
            for a in range(A):
                p = z[s * A + a] / t
                pi[l, s, a] = p
                acc = p if a == 0 else acc + p
                cdf[l, s, a] = acc


class PsrlWork:
    """The scratch of one PSRL agent's plans: the drawn ``R`` and ``P``, the values ``V`` and
    the reward posterior's mean and variance."""

    def __init__(self, L: int, S: int, A: int):
        self.R, self.P, self.V = np.empty((L, S, A)), np.empty((L, S, A, S)), np.empty((L + 1, S))
        self.mean, self.var = np.empty((L, S, A)), np.empty((L, S, A))
        self.shape = (L, S, A)
        self.scalars = None  # (mode, 1 / prior_var, sigma**2, prior_var) of the first plan


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


def reward_mode(post) -> tuple[int, float, float]:
    """``(mode, 1.0 / prior_var, sigma**2)`` of the kernels for ``post`` (a
    :class:`~optplan.posteriors.LayeredPosterior`), the scalars computed as
    :func:`~optplan.posteriors.gaussian_mean_posterior` computes them."""
    sigma = post.sigma
    if post.improper or np.ndim(sigma) != 0:
        return GIVEN, 0.0, 0.0
    if sigma == 0:
        return EXACT, 0.0, 0.0
    return NOISY, 1.0 / post.prior_var, sigma**2


def _given(post, mean, var) -> None:
    """NumPy's reward posterior into ``mean`` and ``var``."""
    m, v = post.reward_posterior()
    mean[...] = m
    var[...] = v


def psrl_scalars(post, work: PsrlWork) -> tuple:
    """``(mode, 1 / prior_var, sigma**2, prior_var)`` of :func:`_psrl` for ``post`` (fixed for
    an agent: computed once, kept in ``work``)."""
    if work.scalars is None:
        mode, inv_prior, sd2 = reward_mode(post)
        work.scalars = (mode, inv_prior, sd2, float(post.prior_var))
    return work.scalars


def psrl_plan(rng, post, work: PsrlWork) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, policy)`` of one PSRL plan on ``post`` (Dirichlet transition prior) with the
    agent's generator ``rng``; the drawn model is left in ``work.R``, ``work.P``."""
    psrl_scalars(post, work)
    if work.scalars[0] == GIVEN:
        _given(post, work.mean, work.var)
    Q = np.empty(work.shape)
    policy = np.empty(work.shape[:2], dtype=np.intp)
    _compiled()["_psrl"](
        rng, (post.counts, post.reward_sums, post.next_counts, *work.scalars), work.mean,
        work.var, float(post.transition_prior), work.R, work.P, work.V, Q, policy,
    )  # fmt: skip
    return Q, policy


class KWork:
    """One K-learning agent's compiled plan: its posterior's fixed scalars and the plan's
    scratch (the posterior means, the search's buffers, the policy's exponents)."""

    def __init__(self, post, initial, bonus: str, span, unvisited: str):
        L, S, A = self.shape = post.shape
        self.post = post
        self.mode, inv_prior, sd2 = reward_mode(post)
        det = bool(post.deterministic)
        #: ``(mode, 1 / prior_var, sigma**2, prior_var)``; deterministic, ``alpha0``; the bonus
        #: scalars (:func:`_k_model`); the search's constants.
        self.scalars = (self.mode, inv_prior, sd2, float(post.prior_var))
        self.det, self.alpha0 = det, 0.0 if det else float(post.transition_prior)
        self.bonus = (
            bonus == "posterior", float(np.square(post.sigma)),
            0.0 if span is None else float(span), unvisited == "paper",
            0.0 if det else S * post.transition_prior,
        )  # fmt: skip
        self.search = _search_constants()
        self.R, self.var, self.pi, self.lam, self.X = (np.empty((L, S, A)) for _ in range(5))
        self.P, self.V, self.m = np.empty((L, S, A, S)), np.empty((L, S)), np.empty((L, S))
        #: Read-only views of ``R``, ``P`` and the initial distribution, for the search.
        self.frozen = _KK._read_only(self.R, self.P, np.array(initial, dtype=float))
        SA = S * A
        #: What the plans of this posterior keep (:func:`_k_model`): the counts of the last
        #: plan, each pair's next-state total, an unvisited pair's row, and the search's row
        #: groups (``PT`` with room for every pair's group and a layer's unvisited one).
        G = SA + 1
        self.model = (
            np.full((L, S, A), -1.0), np.zeros((L, S, A)), np.zeros(S + 1),
            np.zeros((L, SA), dtype=np.bool_), np.full(L, -1, dtype=np.int64),
            np.zeros((L, S, G)), np.zeros((L, SA), dtype=np.int64),
            np.zeros(L, dtype=np.int64), np.zeros((L, S, A), dtype=np.bool_),
            np.zeros(L, dtype=np.bool_), np.zeros((L, G)), np.zeros((L, G), dtype=np.int64),
            np.zeros((L, G, S), dtype=np.int64), np.zeros((L, G, S)),
        )  # fmt: skip


def k_plan(work: KWork, guess: float | None = None):
    """One K-learning plan at ``tau*`` (``method="fast"``, one scalar ``sigma``; the search
    started around ``guess`` as ``KLearningTemperature.solve("fast", guess=guess)`` starts
    it): ``(tau, K, c)`` (fresh arrays), or ``None`` where the compiled search hands over to
    SciPy's (the agent then makes the NumPy plan); :func:`k_policy` then gives its policy."""
    table = _compiled()
    K, c = np.empty(work.shape), np.empty(work.shape)
    if not table["_k_model"](*_k_args(work), work.P, c, work.model):
        return None  # no bonus anywhere: SciPy's search answers tau* = 0
    # the search on read-only views, as KLearningTemperature.solve("fast") hands them over:
    # one compiled search for both (numba compiles a function once per array writability)
    R, P, rho = work.frozen
    out = _KK._table()["_solve_rows"](
        (R, P, work.model[5:], _KK._read_only(c)[0], rho),
        (*work.search, *_SEARCH[-1](guess), 2.0), (K, work.V, work.pi, work.lam),
    )  # fmt: skip
    if out[0] != _KK.SOLVED:
        return None
    table["_k_exponents"](K, out[1], work.m, work.X)
    return out[1], K, c


def k_policy(work: KWork, tau: float):
    """``(pi, values, cdf)`` of the last :func:`k_plan`: :func:`optplan.soft.
    boltzmann_policy_and_values` and the cumulative policy, ``exp`` and ``log`` by NumPy."""
    z = np.exp(work.X)
    pi, cdf = np.empty(work.shape), np.empty(work.shape)
    total = np.empty(work.shape[:2])
    _compiled()["_soft"](z, pi, cdf, total)
    return pi, work.m + tau * np.log(total), cdf


def k_schedule_plan(work: KWork, tau: float):
    """One K-learning plan at the schedule's temperature ``tau`` (one scalar ``sigma``, ``S >=
    2``): ``(K, c, pi, values, cdf)`` (fresh arrays), the numbers of :func:`optplan.soft.
    k_values` and :func:`optplan.soft.boltzmann_policy_and_values` on the posterior's means."""
    K, c, pi, cdf = (np.empty(work.shape) for _ in range(4))
    V = np.empty(work.shape[:2])
    _compiled()["_k_schedule"](*_k_args(work), float(tau), work.P, c, work.model, (K, V, pi, cdf))
    return K, c, pi, V, cdf


def _k_args(work: KWork) -> tuple:
    """:func:`_k_model`'s arguments up to ``bonus`` (NumPy's reward posterior first, where the
    kernels do not compute it)."""
    post = work.post
    if work.mode == GIVEN:
        _given(post, work.R, work.var)
    return (
        (post.counts, post.reward_sums, post.next_counts, *work.scalars), work.R, work.var,
        work.det, work.alpha0, work.bonus,
    )  # fmt: skip


_SEARCH: list = []


def _search_constants() -> tuple:
    """The fast search's defaults (``KLearningTemperature.solve("fast")``: ``xtol``, Brent's
    ``rtol``, ``max_iter``, the bracket's bounds in ``log tau``); ``_SEARCH[-1]`` is its
    bracket's start from a guess (``k_temperature._bracket_start``)."""
    if not _SEARCH:
        from ..fast import k_temperature as kt

        _SEARCH.extend((1e-15, kt._RTOL, 200, kt._U_MIN, kt._U_MAX, kt._bracket_start))
    return tuple(_SEARCH[:-1])
