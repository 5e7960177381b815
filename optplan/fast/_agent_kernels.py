r"""Whole runs of the index agents in one compiled loop (optional: needs ``numba``).

:class:`~optplan.agents.index_agents.IndexAgent` with ``method="fast"`` spends most of a
step in Python overhead: the estimator update, a warm-started Howard policy iteration
(:func:`optplan.dp.policy_iteration`), the indices of the current state and the environment
step, each a few dozen numpy calls on arrays of a handful of entries. :func:`run_index_loop`
does all the steps of a run in one compiled call and gives **the same bits** as that Python
loop (the Python code stays the reference; ``tests/test_index_agents_compiled.py`` compares
the two), because every floating-point result the decisions depend on is computed by the same
code or the same operations in the same order:

- the indices: the compiled row kernels of :mod:`optplan.fast._kernels`
  (``_kl_row``, ``_l1_rows``, ``_kl_inf_rows``), the very functions the reference's
  batched calls run; a row they leave to numpy (``LEFT``, e.g. a radius of 0) sends the whole
  batch to the reference function (:func:`~optplan.fast.kl_ball.kl_ball_index`,
  :func:`~optplan.fast.kl_inf.kl_inf_rate`) through ``numba.objmode``;
- the gain and bias: the bordered unichain system of :func:`optplan.dp.evaluate_unichain`
  (below :data:`~optplan.dp.ITERATIVE_MIN_STATES` states, where it factorizes) solved by
  ``np.linalg.solve``, i.e. LAPACK ``dgesv`` of SciPy's library (``dgetrf`` + ``dgetrs``, what
  the reference calls); the generator's diagonal as numpy's pairwise row sum (:func:`_pw_sum`);
- products ``(m, n) @ (n,)``: ``np.dot``, which numba sends to BLAS ``dgemv`` (``ddot`` for
  one row), as numpy does;
- ``ln T[x]`` of the good-action test: ``math.log`` (libm), which may differ from numpy's
  SIMD ``np.log`` in the last bit, so a comparison within ``1e-9`` (relative) of a tie is
  redone with ``np.log`` in object mode;
- ``ln T[x, a]`` of IMED-RL's index: numpy's ``np.log`` itself, read from a table of
  ``np.log(0, 1, ..., n - 1)`` made before the loop for integral counts (numpy's log of a value
  does not depend on the array it sits in: :func:`self_check` checks it), in object mode for
  a count the table does not hold (fractional pseudo-counts);
- Dirichlet draws (MDP-PS): ``Generator.standard_gamma`` on the agent's own generator, which
  numba implements with NumPy's algorithms on the same bit generator (same stream, same
  state after the run); the environment's transitions: ``Generator.random`` on the
  environment's generator and the binary search of ``searchsorted(cdf, u, side="right")``.

:func:`self_check` compares the BLAS/LAPACK routes with numpy's on random inputs once per
process (numpy and SciPy each ship their own OpenBLAS); the compiled path is used only when
they agree bit for bit.

Compiled on first use and cached by numba, with the cache keyed on this module's source and on
those of :mod:`optplan.fast._kernels` (whose kernels the loop inlines; numba's own key would
not see a change there: see :class:`optplan._jit.Jit`). Each agent kind has its own loop
(``_run_ucb``, ``_run_olp``, ...), so a run compiles the index kernel of its agent and no
other: a first ``optplan run --agent mdp-ucb`` of 3,000 steps takes 9.4-10.3 s of CPU with
an empty cache, about 8 s of it compiling the loop and the KL-ball kernel (2 shared cores,
numba 0.68; ``ESTIMATE`` in :mod:`optplan._jit`); later runs load them from the cache.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from . import _kernels
from ._kernels.kl_ball import _kl_row
from ._kernels.kl_inf import _kl_inf_rows
from ._kernels.l1_ball import _l1_rows
from ._pairwise import _JIT as _PAIRWISE
from ._pairwise import _pw_block

__all__ = [
    "AVAILABLE",
    "run_index_loop",
    "oracle_loop",
    "self_check",
    "log_table",
    "UCB",
    "OLP",
    "DMED",
    "PS",
    "IMED",
]

#: numba is installed (the ``jit`` extra).
AVAILABLE = _kernels.AVAILABLE

#: Agent kinds of :func:`run_index_loop`.
UCB, OLP, DMED, PS, IMED = 0, 1, 2, 3, 4
#: Loop outcomes: all steps done; the agent chose an action the environment does not admit
#: (the environment raises); policy iteration did not stop in ``max_iter`` iterations.
DONE, INADMISSIBLE, PI_MAX_ITER = 0, 1, 2
#: Good-action tests this close to a tie (relative) are redone with numpy's ``log``.
TIE_RTOL = 1e-9
#: :func:`optplan.dp.greedy`'s tie tolerance in policy iteration.
GREEDY_TOL = 1e-12
#: numpy's pairwise summation block (``PW_BLOCKSIZE``).
_PW_BLOCK = 128


# ---------------------------------------------------------------------------------------
# Python helpers called from object mode (rare: the reference does the work)


def _py_kl_ball(p, v, d):
    from .kl_ball import kl_ball_index

    return np.ascontiguousarray(kl_ball_index(p, v, d, validate=False).value, dtype=float)


def _py_kl_inf(p, v, rho):
    from .kl_inf import kl_inf_rate

    return np.ascontiguousarray(kl_inf_rate(p, v, rho, validate=False).value, dtype=float)


def _py_log(x):
    return float(np.log(np.array([x]))[0])


def _py_threshold(Tx, x):
    with np.errstate(divide="ignore"):
        thresh = np.log(Tx) ** 2
    return float(np.where(Tx > 0, thresh, 0.0)[x])


# ---------------------------------------------------------------------------------------
# Compiled helpers


def _setup(numba) -> dict:
    """``objmode``, for the rare calls back into Python."""
    return {"objmode": numba.objmode}


#: The loop and its helpers: compiled after the index kernels they call, ``objmode`` bound
#: for the rare calls back into Python.
_JIT = _jit.Jit(
    "the compiled agent loop",
    uses=(_kernels.jit, _PAIRWISE),
    setup=_setup,
    cache=True,
    error_model="numpy",
)


@_JIT(inline="always")
def _copy(dst, src):  # pragma: no cover - compiled by numba
    """``dst[:n] = src`` for ``n = len(src)`` (an explicit loop: a slice assignment compiles
    numba's broadcast checks and their error message, seconds of a first compile)."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@_JIT
def _pw_sum(a, lo, n):  # pragma: no cover - compiled by numba
    """numpy's pairwise sum of ``a[lo:lo + n]``, ``n <= 2 * 128`` (one split in halves whose
    first has a multiple of 8 terms; not recursive: numba's cache mishandles recursion)."""
    if n <= _PW_BLOCK:
        return _pw_block(a, lo, n)
    if n > 2 * _PW_BLOCK:
        raise ValueError("_pw_sum: more than 256 terms")
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_block(a, lo, n2) + _pw_block(a, lo + n2, n - n2)


@_JIT
def _row_sum(a):  # pragma: no cover - compiled by numba
    """``a.sum()`` of a 1-d contiguous array, as numpy's ``add.reduce``."""
    return 0.0 + _pw_sum(a, 0, a.shape[0])


@_JIT
def _matvec(M, v, out):  # pragma: no cover - compiled by numba
    """``out = M @ v`` as numpy computes it (BLAS ``dgemv``; ``ddot`` for one row)."""
    if M.shape[0] == 1:
        out[0] = np.dot(M[0], v)
    else:
        _copy(out, np.dot(M, v))


@_JIT
def _argmin(u):  # pragma: no cover - compiled by numba
    """``np.argmin``: the first minimum, the first NaN if any."""
    best = 0
    for i in range(u.shape[0]):
        if math.isnan(u[i]):
            return i
        if u[i] < u[best]:
            best = i
    return best


@_JIT
def _argmax(u):  # pragma: no cover - compiled by numba
    """``np.argmax``: the first maximum, the first NaN if any."""
    best = 0
    for i in range(u.shape[0]):
        if math.isnan(u[i]):
            return i
        if u[i] > u[best]:
            best = i
    return best


@_JIT
def _solve_t(M, b):  # pragma: no cover - compiled by numba
    """Solve the system whose matrix ``M`` holds transposed (its C buffer is the matrix in
    Fortran order, as LAPACK reads it) for ``b``, in place: 0, or 1 when the matrix is
    singular to machine precision (``b`` then unchanged). ``np.linalg.solve`` of numba (LAPACK
    ``dgesv`` of SciPy's library, as ``np.linalg.solve`` calls it)."""
    try:
        x = np.linalg.solve(M.T, b)
    except Exception:  # noqa: BLE001 - numba's LinAlgError on a singular matrix
        return 1
    _copy(b, x)
    return 0


@_JIT
def _gesv(M, b):  # pragma: no cover - compiled by numba
    """:func:`_solve_t`, raising on a singular matrix; returns a copy of the solution."""
    if _solve_t(M, b) != 0:
        raise np.linalg.LinAlgError("Matrix is singular to machine precision.")
    return b.copy()


@_JIT
def _evaluate(p_hat, R, policy, M, b, row):  # pragma: no cover - compiled by numba
    """Gain and bias (``h[0] = 0``) of ``policy`` on ``p_hat``: the bordered system of
    :func:`optplan.dp.evaluate_average` with :func:`optplan.dp.generator`'s diagonal, built
    transposed in ``M`` (LAPACK's column order) and solved by :func:`_gesv`."""
    S = R.shape[0]
    for i in range(S + 1):
        for j in range(S + 1):
            M[i, j] = 0.0
    for i in range(S):
        a = policy[i]
        for j in range(S):
            row[j] = -p_hat[i, a, j]
            M[j, i] = row[j]
        row[i] = 0.0
        M[i, i] = -_row_sum(row)
        M[S, i] = 1.0
        b[i] = R[i, a]
    M[0, S] = 1.0
    b[S] = 0.0
    return _gesv(M, b)


@_JIT
def _policy_iteration(p_hat, R, good, policy, q, M, b, row, max_iter):  # pragma: no cover
    """:func:`optplan.dp.policy_iteration` (average reward, ``S <`` ITERATIVE_MIN_STATES, every
    policy unichain since ``p_hat > 0``) warm-started from ``policy`` (updated in place).
    Returns ``(gain, bias, iterations)``; ``iterations = -1``: no stop in ``max_iter``."""
    S, A = R.shape
    restart = False
    for s in range(S):
        if not good[s, policy[s]]:
            restart = True
    if restart:
        for s in range(S):
            best = -1
            for a in range(A):
                if good[s, a] and (best < 0 or R[s, a] > R[s, best]):
                    best = a
            policy[s] = best if best >= 0 else 0
    flat = p_hat.reshape(S * A, S)
    qv = q.reshape(S * A)
    new = np.empty(S, dtype=np.int64)
    sol = np.empty(S + 1)
    for it in range(1, max_iter + 1):
        sol = _evaluate(p_hat, R, policy, M, b, row)
        _matvec(flat, sol[:S], qv)
        changed = False
        for s in range(S):
            best = -1
            top = -math.inf
            for a in range(A):
                qa = R[s, a] + q[s, a]
                if good[s, a] and (best < 0 or qa > top):
                    best, top = a, qa
            if best < 0:  # no good action (cannot happen: good rows are never empty)
                best, top = 0, -math.inf
            incumbent = R[s, policy[s]] + q[s, policy[s]] if good[s, policy[s]] else -math.inf
            if incumbent >= top - GREEDY_TOL * abs(top):
                new[s] = policy[s]
            else:
                new[s] = best
                changed = True
        if not changed:
            return sol[S], sol[:S].copy(), it
        _copy(policy, new)
    return sol[S], sol[:S].copy(), -1


@_JIT
def _good_row(x, Tx, Txa, mask, good):  # pragma: no cover - compiled by numba
    """Row ``x`` of :meth:`TransitionEstimator.good_actions`."""
    A = mask.shape[1]
    tx = Tx[x]
    thr = 0.0
    if tx > 0:
        ell = math.log(tx)
        thr = ell * ell
        near = False
        for a in range(A):
            if mask[x, a] and abs(Txa[x, a] - thr) <= TIE_RTOL * max(thr, 1.0):
                near = True
        if near:  # math.log and numpy's SIMD log may differ in the last bit: numpy's
            Txc = Tx.copy()
            with objmode(thr="float64"):  # noqa: F821 (bound at compile time)
                thr = _py_threshold(Txc, x)
    anyg = False
    for a in range(A):
        g = mask[x, a] and Txa[x, a] >= thr
        good[x, a] = g
        anyg = anyg or g
    if not anyg:
        for a in range(A):
            good[x, a] = mask[x, a]


@_JIT
def _ball_gather(kind, x, log_t, R, mask, Txa, p_hat, v, u, Pr, Vr, D, acts):  # pragma: no cover
    """The rows of ``_BallIndexAgent.indices(x)``: ``u[a]`` of the masked and unvisited
    actions, and the ball rows of the others in ``Pr, Vr, D, acts`` (their number returned)."""
    S, A = R.shape
    vmax = v[0]
    for j in range(1, S):
        if v[j] > vmax:
            vmax = v[j]
    B = 0
    for a in range(A):
        u[a] = -math.inf
        if not mask[x, a]:
            continue
        T = Txa[x, a]
        if T > 0:
            _copy(Pr[B], p_hat[x, a])
            _copy(Vr[B], v)
            D[B] = log_t / T if kind == UCB else math.sqrt(2.0 * log_t / T)
            acts[B] = a
            B += 1
        else:
            u[a] = R[x, a] + vmax
    return B


@_JIT
def _ucb_indices(  # pragma: no cover - compiled by numba
    x, log_t, R, mask, Txa, p_hat, v, u, Pr, Vr, D, val, qw, lam, its, kw, acts
):  # fmt: skip
    """``MDPUCB.indices(x)`` into ``u`` (KL balls; ``kw``: ``(5, S)`` work rows)."""
    B = _ball_gather(UCB, x, log_t, R, mask, Txa, p_hat, v, u, Pr, Vr, D, acts)
    if B == 0:
        return
    # _kl_ball_rows(Pr[:B], Vr[:B], D[:B], 100, val[:B], qw[:B], lam[:B], its[:B], ...):
    # its loop over _kl_row here, one level of compiled calls fewer
    left = False
    for i in range(B):
        value, lm, it, ok = _kl_row(
            Pr[i], Vr[i], D[i], 100, qw[i], kw[0], kw[1], kw[2], kw[3], kw[4]
        )  # fmt: skip
        if ok:
            val[i] = value
            lam[i] = lm
            its[i] = it
        else:
            left = True
    if left:  # rows the compiled kernel leaves to numpy: the reference call
        Pc, vc, Dc = Pr[:B].copy(), v.copy(), D[:B].copy()
        with objmode(out="float64[:]"):  # noqa: F821
            out = _py_kl_ball(Pc, vc, Dc)
        _copy(val, out)
    for i in range(B):
        u[acts[i]] = R[x, acts[i]] + val[i]


@_JIT
def _olp_indices(  # pragma: no cover - compiled by numba
    x, log_t, R, mask, Txa, p_hat, v, u, Pr, Vr, D, val, qw, lam, code, acts
):  # fmt: skip
    """``OLP.indices(x)`` into ``u`` (L1 balls)."""
    B = _ball_gather(OLP, x, log_t, R, mask, Txa, p_hat, v, u, Pr, Vr, D, acts)
    if B == 0:
        return
    _l1_rows(Pr[:B], Vr[:1], D[:B], True, val[:B], qw[:B], lam[:B], code[:B])
    for i in range(B):
        u[acts[i]] = R[x, acts[i]] + val[i]


@_JIT
def _dmed_indices(
    x, log_t, R, mask, Txa, p_hat, v, u, rates, Lv, Pr, Vr, D, val, qw, lam, its, code, acts
):  # noqa: E501  # pragma: no cover
    """``MDPDMED.indices(x)`` into ``u`` (and ``rates``); returns the estimated best action."""
    S, A = R.shape
    _matvec(p_hat[x], v, Lv)
    for a in range(A):
        Lv[a] = R[x, a] + Lv[a] if mask[x, a] else -math.inf
    best = _argmax(Lv)
    B = 0
    for a in range(A):
        u[a] = -math.inf
        rates[a] = math.nan
        if mask[x, a] and a != best:
            _copy(Pr[B], p_hat[x, a])
            _copy(Vr[B], v)
            D[B] = Lv[best] - R[x, a]
            acts[B] = a
            B += 1
    u[best] = 0.0
    if B == 0:
        return best
    _kl_inf_rows(Pr[:B], Vr[:B], D[:B], 100, val[:B], qw[:B], lam[:B], its[:B], code[:B])
    left = False
    for i in range(B):
        if code[i] == -1:  # LEFT
            left = True
    if left:
        Pc, vc, Dc = Pr[:B].copy(), v.copy(), D[:B].copy()
        with objmode(out="float64[:]"):  # noqa: F821
            out = _py_kl_inf(Pc, vc, Dc)
        _copy(val, out)
    for i in range(B):
        a = acts[i]
        K = val[i]
        rates[a] = K
        T = Txa[x, a]
        if K <= 0:
            u[a] = math.inf
        elif math.isinf(K):
            u[a] = -T
        else:
            u[a] = log_t / K - T
    return best


@_JIT
def _log_count(T, logs):  # pragma: no cover - compiled by numba
    """numpy's ``np.log(T)``: from the table for an integral count it holds, else by numpy."""
    if T >= 0 and T < logs.shape[0] and T == math.floor(T):
        return logs[int(T)]
    with objmode(out="float64"):  # noqa: F821
        out = _py_log(T)
    return out


@_JIT
def _imed_indices(
    x, R, mask, Txa, p_hat, v, u, rates, Lv, Pr, Vr, D, val, qw, lam, its, code, acts, logs
):  # noqa: E501  # pragma: no cover
    """``IMEDRL.indices(x)`` into ``u`` (and ``rates``)."""
    S, A = R.shape
    _matvec(p_hat[x], v, Lv)
    top = -math.inf
    for a in range(A):
        Lv[a] = R[x, a] + Lv[a] if mask[x, a] else -math.inf
        if Lv[a] > top:
            top = Lv[a]
    B = 0
    for a in range(A):
        rates[a] = math.nan
        T = Txa[x, a]
        if not mask[x, a]:
            u[a] = math.inf
        elif T == 0:
            u[a] = -math.inf
        else:
            u[a] = _log_count(T, logs)
            if Lv[a] != top:  # empirically sub-optimal: a rate to compute
                _copy(Pr[B], p_hat[x, a])
                _copy(Vr[B], v)
                D[B] = top - R[x, a]
                acts[B] = a
                B += 1
    if B == 0:
        return
    _kl_inf_rows(Pr[:B], Vr[:B], D[:B], 100, val[:B], qw[:B], lam[:B], its[:B], code[:B])
    left = False
    for i in range(B):
        if code[i] == -1:  # LEFT
            left = True
    if left:
        Pc, vc, Dc = Pr[:B].copy(), v.copy(), D[:B].copy()
        with objmode(out="float64[:]"):  # noqa: F821
            out = _py_kl_inf(Pc, vc, Dc)
        _copy(val, out)
    for i in range(B):
        a = acts[i]
        rates[a] = val[i]
        u[a] = Txa[x, a] * val[i] + u[a]


@_JIT
def _ps_indices(x, rng, R, mask, T, v, u, G, Q, W):  # pragma: no cover - compiled by numba
    """``MDPPS.indices(x)`` into ``u``: ``sample_dirichlet(T[x] + 1, rng)`` row by row."""
    S, A = R.shape
    for a in range(A):
        for j in range(S):
            G[a, j] = rng.standard_gamma(T[x, a, j] + 1.0)
    for a in range(A):
        total = _row_sum(G[a])
        for j in range(S):
            Q[a, j] = G[a, j] / total if total > 0 else 1.0 / S
    _matvec(Q, v, W)
    for a in range(A):
        u[a] = R[x, a] + W[a] if mask[x, a] else -math.inf


@_JIT
def _search_right(cdf, u):  # pragma: no cover - compiled by numba
    """``np.searchsorted(cdf, u, side="right")``."""
    lo, hi = 0, cdf.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if cdf[mid] <= u:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_JIT(inline="always")
def _work(S, A):  # pragma: no cover - compiled by numba
    """The work arrays of a run: ``(Pr, Vr, qw, G, Q)`` ``(A, S)``; ``(D, val, lam, Lv)``
    ``(A,)``; ``(its, code, acts)`` int ``(A,)``; ``q`` ``(S, A)``;
    ``M, b, row`` of the bordered solve; ``kw`` ``(5, S)``, a KL-ball row's."""
    Pr, Vr, qw = np.empty((A, S)), np.empty((A, S)), np.empty((A, S))
    D, val, lam, Lv = np.empty(A), np.empty(A), np.empty(A), np.empty(A)
    its, code, acts = np.empty(A, np.int64), np.empty(A, np.int64), np.empty(A, np.int64)
    G, Q = np.empty((A, S)), np.empty((A, S))
    q = np.empty((S, A))
    M, b, row = np.empty((S + 1, S + 1)), np.empty(S + 1), np.empty(S)
    kw = np.empty((5, S))
    return Pr, Vr, qw, G, Q, D, val, lam, Lv, its, code, acts, q, M, b, row, kw


@_JIT(inline="always")
def _advance(k, x, a, R, mask, good, T, Txa, Tx, p_hat, policy, cdf, env_rng, states, actions,
             q, M, b, row):  # fmt: skip  # pragma: no cover - compiled by numba
    """Step ``k`` after the choice of ``a`` in ``x``: the environment's transition, the
    record, ``TransitionEstimator.update`` and the warm-started policy iteration. Returns
    ``(next state, gain, bias, iterations)`` (``iterations = -1``: no stop)."""
    S = R.shape[0]
    y = _search_right(cdf[x, a], env_rng.random())
    states[k] = x
    actions[k] = a
    # TransitionEstimator.update
    T[x, a, y] += 1
    Txa[x, a] += 1
    Tx[x] += 1
    den = Txa[x, a] + S
    for j in range(S):
        p_hat[x, a, j] = (T[x, a, j] + 1.0) / den
    _good_row(x, Tx, Txa, mask, good)
    gain, v, it = _policy_iteration(p_hat, R, good, policy, q, M, b, row, 100)
    return y, gain, v, it


# One loop per agent kind (the loop of :func:`optplan.experiments.run` with the agent's
# select/update inlined), so that a run compiles the index kernel of its agent only. Each
# takes the arguments of :func:`run_index_loop` and returns ``(status, steps done, t, gain,
# v, last best action, action, state)``.


@_JIT
def _run_ucb(steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf, true_mask,
             env_rng, agent_rng, states, actions, u, rates, logs):  # fmt: skip  # pragma: no cover
    """MDP-UCB's run."""
    S, A = R.shape
    Pr, Vr, qw, G, Q, D, val, lam, Lv, its, code, acts, q, M, b, row, kw = _work(S, A)
    gain = math.nan
    for k in range(steps):
        x = state
        _ucb_indices(x, math.log(t), R, mask, Txa, p_hat, v, u, Pr, Vr, D, val, qw, lam, its,
                     kw, acts)  # fmt: skip
        a = _argmax(u)
        if not true_mask[x, a]:
            return INADMISSIBLE, k, t, gain, v, 0, a, state
        state, gain, v, it = _advance(k, x, a, R, mask, good, T, Txa, Tx, p_hat, policy, cdf,
                                      env_rng, states, actions, q, M, b, row)  # fmt: skip
        t += 1
        if it < 0:
            return PI_MAX_ITER, k + 1, t, gain, v, 0, a, state
    return DONE, steps, t, gain, v, 0, -1, state


@_JIT
def _run_olp(steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf, true_mask,
             env_rng, agent_rng, states, actions, u, rates, logs):  # fmt: skip  # pragma: no cover
    """OLP's run."""
    S, A = R.shape
    Pr, Vr, qw, G, Q, D, val, lam, Lv, its, code, acts, q, M, b, row, kw = _work(S, A)
    gain = math.nan
    for k in range(steps):
        x = state
        _olp_indices(x, math.log(t), R, mask, Txa, p_hat, v, u, Pr, Vr, D, val, qw, lam, code,
                     acts)  # fmt: skip
        a = _argmax(u)
        if not true_mask[x, a]:
            return INADMISSIBLE, k, t, gain, v, 0, a, state
        state, gain, v, it = _advance(k, x, a, R, mask, good, T, Txa, Tx, p_hat, policy, cdf,
                                      env_rng, states, actions, q, M, b, row)  # fmt: skip
        t += 1
        if it < 0:
            return PI_MAX_ITER, k + 1, t, gain, v, 0, a, state
    return DONE, steps, t, gain, v, 0, -1, state


@_JIT
def _run_dmed(steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf, true_mask,
              env_rng, agent_rng, states, actions, u, rates, logs):  # fmt: skip  # pragma: no cover
    """MDP-DMED's run."""
    S, A = R.shape
    Pr, Vr, qw, G, Q, D, val, lam, Lv, its, code, acts, q, M, b, row, kw = _work(S, A)
    gain = math.nan
    best = 0
    for k in range(steps):
        x = state
        best = _dmed_indices(x, math.log(t), R, mask, Txa, p_hat, v, u, rates, Lv, Pr, Vr, D,
                             val, qw, lam, its, code, acts)  # fmt: skip
        ub = u[best]
        u[best] = -math.inf
        j = _argmax(u)
        a = j if u[j] > 0 else best
        u[best] = ub
        if not true_mask[x, a]:
            return INADMISSIBLE, k, t, gain, v, best, a, state
        state, gain, v, it = _advance(k, x, a, R, mask, good, T, Txa, Tx, p_hat, policy, cdf,
                                      env_rng, states, actions, q, M, b, row)  # fmt: skip
        t += 1
        if it < 0:
            return PI_MAX_ITER, k + 1, t, gain, v, best, a, state
    return DONE, steps, t, gain, v, best, -1, state


@_JIT
def _run_imed(steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf, true_mask,
              env_rng, agent_rng, states, actions, u, rates, logs):  # fmt: skip  # pragma: no cover
    """IMED-RL's run."""
    S, A = R.shape
    Pr, Vr, qw, G, Q, D, val, lam, Lv, its, code, acts, q, M, b, row, kw = _work(S, A)
    gain = math.nan
    for k in range(steps):
        x = state
        _imed_indices(x, R, mask, Txa, p_hat, v, u, rates, Lv, Pr, Vr, D, val, qw, lam, its,
                      code, acts, logs)  # fmt: skip
        a = _argmin(u)
        if not true_mask[x, a]:
            return INADMISSIBLE, k, t, gain, v, 0, a, state
        state, gain, v, it = _advance(k, x, a, R, mask, good, T, Txa, Tx, p_hat, policy, cdf,
                                      env_rng, states, actions, q, M, b, row)  # fmt: skip
        t += 1
        if it < 0:
            return PI_MAX_ITER, k + 1, t, gain, v, 0, a, state
    return DONE, steps, t, gain, v, 0, -1, state


@_JIT
def _run_ps(steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf, true_mask,
            env_rng, agent_rng, states, actions, u, rates, logs):  # fmt: skip  # pragma: no cover
    """MDP-PS's run."""
    S, A = R.shape
    Pr, Vr, qw, G, Q, D, val, lam, Lv, its, code, acts, q, M, b, row, kw = _work(S, A)
    gain = math.nan
    for k in range(steps):
        x = state
        _ps_indices(x, agent_rng, R, mask, T, v, u, G, Q, Lv)
        a = _argmax(u)
        if not true_mask[x, a]:
            return INADMISSIBLE, k, t, gain, v, 0, a, state
        state, gain, v, it = _advance(k, x, a, R, mask, good, T, Txa, Tx, p_hat, policy, cdf,
                                      env_rng, states, actions, q, M, b, row)  # fmt: skip
        t += 1
        if it < 0:
            return PI_MAX_ITER, k + 1, t, gain, v, 0, a, state
    return DONE, steps, t, gain, v, 0, -1, state


#: The loop of each agent kind.
_RUNS = {UCB: "_run_ucb", OLP: "_run_olp", DMED: "_run_dmed", PS: "_run_ps", IMED: "_run_imed"}


@_JIT
def _oracle(steps, state, policy, R, cdf, rng, rewards):  # pragma: no cover - compiled by numba
    """:func:`optplan.experiments.run.oracle_run` on a continuing noiseless environment."""
    for k in range(steps):
        a = policy[state]
        rewards[k] = R[state, a]
        state = _search_right(cdf[state, a], rng.random())
    return state


def _compiled() -> dict:
    """The jitted loop and helpers, made on first use (after the index kernels)."""
    return _JIT.table or _JIT.compiled()


_CHECK: dict = {}


def self_check(cases: int = 200, seed: int = 0, logs: bool = False) -> bool:
    """Whether the compiled products, row sums and bordered solves equal numpy's and
    :func:`optplan.dp.evaluate_unichain`'s bit for bit on ``cases`` random inputs (sizes 1 to
    40; computed once per process), and with ``logs`` (IMED-RL's loop) the logs of counts
    too. ``False`` when numba is missing or lacks the LAPACK binding :func:`_setup` takes."""
    if logs in _CHECK:
        return _CHECK[logs]
    ok = AVAILABLE
    if ok:
        try:
            c = _compiled()
        except ImportError:  # numba without the internals _setup binds
            _CHECK[logs] = False
            return False
    if ok:
        from ..dp import evaluate_unichain

        rng = np.random.default_rng(seed)
        table = log_table(4096)
        for _ in range(cases):
            S = int(rng.integers(1, 41))
            m = int(rng.integers(1, 9))
            Mx, x = rng.random((m, S)), rng.standard_normal(S) * 10.0
            out = np.empty(m)
            c["_matvec"](Mx, x, out)
            ok &= np.array_equal(out, Mx @ x)
            ok &= bool(c["_row_sum"](x) == x.sum())
            P = rng.dirichlet(np.full(S, 0.5) + rng.random(S), size=(S, 1))
            r = rng.random((S, 1))
            ev = evaluate_unichain(P[:, 0], r[:, 0])
            sol = c["_evaluate"](
                P,
                r,
                np.zeros(S, np.int64),
                np.empty((S + 1, S + 1)),
                np.empty(S + 1),
                np.empty(S),
            )
            ok &= bool(sol[S] == ev.gain) and np.array_equal(sol[:S], ev.bias)
            # numpy's log of a count is the same in a short row as in IMED-RL's long table
            # (and in object mode), so the table and the fallback give the reference's bits
            k, big = int(rng.integers(1, 4096)), float(rng.integers(4096, 2**40))
            row = rng.integers(1, 50, size=m).astype(float)
            j = int(rng.integers(m))
            if logs:  # (the same draws either way)
                row[j] = k
                ok &= bool(np.log(row)[j] == c["_log_count"](float(k), table))
                row[j] = big
                ok &= bool(np.log(row)[j] == c["_log_count"](big, table))
            if not ok:
                break
    _CHECK[logs] = bool(ok)
    return _CHECK[logs]


def log_table(n: int) -> np.ndarray:
    """``np.log([0, 1, ..., n - 1])`` (``-inf`` first): IMED-RL's ``ln T`` of integral counts."""
    with np.errstate(divide="ignore"):
        return np.log(np.arange(max(int(n), 1), dtype=float))


def run_index_loop(kind, steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf,
                   true_mask, env_rng, agent_rng, logs=None):  # fmt: skip
    """Run ``steps`` steps; the estimator arrays (``good, T, Txa, Tx, p_hat, policy``) are
    updated in place; ``logs``: IMED-RL's table (:func:`log_table`, covering every count the
    run can reach; others are computed by numpy in object mode). Returns ``(status, n, t,
    gain, v, best, action, states, actions, u, rates)``: ``n`` steps recorded in
    ``states[:n]``, ``actions[:n]``; ``u`` the last scores; ``action`` the refused action
    when ``status`` is ``INADMISSIBLE``."""
    c = _compiled()
    S, A = R.shape
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    u = np.full(A, -np.inf)
    rates = np.full(A, np.nan)
    logs = np.zeros(0) if logs is None else np.ascontiguousarray(logs, dtype=float)
    status, n, t, gain, v, best, action, state = c[_RUNS[kind]](
        steps, state, t, R, mask, good, T, Txa, Tx, p_hat, policy, v, cdf, true_mask,
        env_rng, agent_rng, states, actions, u, rates, logs,
    )  # fmt: skip
    return status, n, t, gain, v, best, action, state, states, actions, u, rates


def oracle_loop(steps: int, state: int, policy, R, cdf, rng) -> np.ndarray:
    """Rewards of ``policy`` for ``steps`` steps from ``state`` (see :func:`_oracle`)."""
    rewards = np.empty(steps)
    _compiled()["_oracle"](steps, int(state), policy, R, cdf, rng, rewards)
    return rewards
