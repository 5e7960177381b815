r"""Compiled kernels for the K-learning temperature search (optional: needs ``numba``).

One call evaluates, at a temperature ``tau``, everything :func:`optplan.soft.temperature_terms`
evaluates with numpy: the backward recursion of Eq. 6 for ``K`` and ``V``
(Eq. 14), the Boltzmann policy (Eq. 9), its occupancy ``lambda`` from ``rho`` and the terms
``f = rho . V_0``, ``M = <lambda, mu>``, ``A = <lambda, H(pi)>``, ``B = <lambda, c>``. The
numpy code is the reference: ``tests/test_k_learning_kernels.py`` compares the two, and the
CVXPY cross-checks run on whichever kernel ``kernel="auto"`` picks.

:func:`solve` is the whole search of :func:`optplan.fast.k_temperature.solve` in one call:
the bracket in ``log tau`` and Brent's method, a port of SciPy's ``brentq`` (the C routine
``scipy/optimize/Zeros/brentq.c``, its operations in its order), on the same derivative
``A - B / tau**2`` (``tau**2`` by ``pow``, as Python computes it), so it returns the same
``tau*`` to the bit; ``tests/test_k_learning_kernels.py`` compares it with the SciPy search.
Where that search would take a path other than a converged root (no sign change, a NaN, an
overflow Python raises, the bracket's fallback centre) it answers :data:`FALLBACK` and the
caller runs the SciPy search.

Why compiled: a numpy pass spends its time in interpreter and dispatch overhead, a few numpy
calls per layer on arrays of a few hundred entries, repeated for every trial ``tau`` of the
search, while the arithmetic is ``2 L S^2 A`` multiply-adds. Within a pass, ``P V`` is
accumulated over next states for all distinct rows of a layer at once (the rows transposed to
``(L, S, rows)``: the same sum per pair, in the same order, vectorized across rows; equal rows,
such as every unvisited pair's uniform posterior mean, give equal sums and are summed once,
and a constant row's products in the occupancy's next-state sums are one number; a state whose
K row equals the previous state's takes that state's exponentials, soft value and entropy).
A layer whose rows each differ from their smallest entry ``b`` in at most ``S / 4`` places
(posterior means: a pseudo-count on every next state, counts on a few) is summed through those
places: ``P V = b sum_t V_t + sum (P_t - b) V_t`` and the next-state sums
``sum_{s,a} w b + `` the places' excess, ``O(S + nonzeros)`` a row instead of ``O(S)``
(:func:`_exceptions`, :func:`_sparse_layer`; the same numbers up to rounding). The
divisions by ``tau`` and by the normalizer run over a layer's pairs at once, and each
``(K - max K) / tau`` and its exponential is computed once (the backward pass keeps them for
the entropy, whose ``(max K - K) / tau`` is their exact negative; the maximizer's exponential
is ``exp(0) = 1``).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit

__all__ = ["AVAILABLE", "terms", "solve", "SOLVED", "FALLBACK"]

#: numba is installed (optional dependency: pip install "optplan[jit]"); it is imported, and
#: the kernel compiled (or loaded from numba's cache), on the first call, not with optplan.
AVAILABLE = _jit.AVAILABLE

#: :func:`solve` outcomes: ``tau*`` found (Brent's method converged); the SciPy search must
#: decide (see the module docstring).
SOLVED, FALLBACK = 0, 1

# error_model "numpy": a division by zero gives inf / nan (the search then hands over to
# SciPy's, FALLBACK), never a ZeroDivisionError out of compiled code
_JIT = _jit.Jit('kernel "numba"', cache=True, nogil=True, error_model="numpy")

#: The smallest positive normal double: a ``pow`` result below it (and not 0) sets ``ERANGE``,
#: which Python turns into an ``OverflowError``.
_TINY = 2.2250738585072014e-308


@_JIT(inline="always")
def _exceptions(row, S, l, k, base, nnz, idx, val):  # pragma: no cover - compiled by numba
    """Row ``row[:S]`` of a transition matrix as its smallest entry ``base[l, k]`` plus the
    entries above it: ``nnz[l, k]`` of them, at ``idx[l, k, :nnz]``, exceeding it by
    ``val[l, k, :nnz]`` (next states in order)."""
    b = row[0]
    for t in range(1, S):
        if row[t] < b:
            b = row[t]
    base[l, k] = b
    m = 0
    for t in range(S):
        if row[t] != b:
            idx[l, k, m] = t
            val[l, k, m] = row[t] - b
            m += 1
    nnz[l, k] = m


@_JIT(inline="always")
def _sparse_layer(nnz, l, nr, S):  # pragma: no cover - compiled by numba
    """Whether layer ``l``'s ``nr`` distinct rows are summed through their exceptions: at
    most ``S / 4`` entries of every row above its smallest."""
    most = 0
    for k in range(nr):
        most = max(most, nnz[l, k])
    return 4 * most <= S


@_JIT
def _terms(tau, R, P, G, c, rho, K, V, pi, lam, E):  # pragma: no cover - compiled by numba
    """Fill ``K, V, pi, lam`` at ``tau``; return ``(f, M, A, B)``. ``G = (PT, group, nrep,
    flat, sparse, base, nnz, idx, val)``: :func:`_rows` of ``P`` (the distinct rows of each
    layer, transposed, and as smallest entry plus exceptions; ``sparse[l]``: layer ``l`` is
    summed through the exceptions); ``E`` (L, S, A) is scratch (the exponentials
    ``exp((K - max K) / tau)``)."""
    PT, group, nrep, flat, sparse, base, nnz, idx, val = G
    L, S, A_ = R.shape
    SA = S * A_
    dist = np.empty(SA)  # P V of each distinct row of the layer
    # flat (L, S A) views: the per-pair loops below run over j = s A + a, vectorized
    R2, c2, K2, E2, pi2 = (R.reshape(L, SA), c.reshape(L, SA), K.reshape(L, SA),
                           E.reshape(L, SA), pi.reshape(L, SA))  # fmt: skip
    X = np.empty((L, SA))  # (K - max K) / tau
    best = np.empty((L, S), dtype=np.int64)  # the first maximizer of each state
    acc = np.empty(SA)
    top = np.empty(SA)  # max K of the pair's state
    zs = np.empty(SA)  # the pair's state's sum of exponentials
    # same[l, s]: state s's K row equals state s - 1's (bit for bit): its exponentials, soft
    # value, policy and entropy are state s - 1's, taken without computing them again
    same = np.zeros((L, S), dtype=np.bool_)
    # Backward recursion (Eq. 6), soft-max with the max-shift (Eq. 14).
    for l in range(L - 1, -1, -1):
        if l < L - 1:
            # acc[j] = sum_t P[l, j, t] V[l + 1, t], once per distinct row
            nr = nrep[l]
            if sparse[l]:  # base * sum_t V + the exceptions' excess
                vsum = 0.0
                for t in range(S):
                    vsum += V[l + 1, t]
                for k in range(nr):
                    pv = base[l, k] * vsum
                    for e in range(nnz[l, k]):
                        pv += val[l, k, e] * V[l + 1, idx[l, k, e]]
                    dist[k] = pv
            else:  # t in order, vectorized across the rows
                for k in range(nr):
                    dist[k] = 0.0
                for t in range(S):
                    v = V[l + 1, t]
                    for k in range(nr):
                        dist[k] += PT[l, t, k] * v
            for j in range(SA):
                acc[j] = dist[group[l, j]]
        else:
            for j in range(SA):
                acc[j] = 0.0
        for j in range(SA):
            K2[l, j] = R2[l, j] + c2[l, j] / tau + acc[j]
        for s in range(S):
            m = -math.inf
            b = 0
            for a in range(A_):
                if K[l, s, a] > m:
                    m = K[l, s, a]
                    b = a
            best[l, s] = b
            for a in range(A_):
                top[s * A_ + a] = m
            if s > 0:
                eq = True
                for a in range(A_):
                    x, y = K[l, s, a], K[l, s - 1, a]
                    if not (x == y and math.copysign(1.0, x) == math.copysign(1.0, y)):
                        eq = False
                        break
                same[l, s] = eq
        for j in range(SA):
            X[l, j] = (K2[l, j] - top[j]) / tau
        for s in range(S):
            if same[l, s]:
                for a in range(A_):
                    E[l, s, a] = E[l, s - 1, a]
            else:
                for a in range(A_):
                    x = X[l, s * A_ + a]
                    E[l, s, a] = 1.0 if x == 0.0 else math.exp(x)
        for s in range(S):
            if same[l, s]:
                z = zs[(s - 1) * A_]
                V[l, s] = V[l, s - 1]
            else:
                z = 0.0
                for a in range(A_):
                    z += E[l, s, a]
                V[l, s] = top[s * A_] + tau * math.log(z)
            for a in range(A_):
                zs[s * A_ + a] = z
        for j in range(SA):
            pi2[l, j] = E2[l, j] / zs[j]
    # Forward pass: occupancy of the Boltzmann policy and the three terms.
    d = rho.copy()
    nxt = np.empty(S)
    M = 0.0
    A = 0.0
    B = 0.0
    for l in range(L):
        for t in range(S):  # (loops, not slice assignments: no broadcast checks to compile)
            nxt[t] = 0.0
        h = 0.0
        # a sparse layer's next-state sums: every next state gets sum w base, the exceptions
        # their excess
        thin = l < L - 1 and sparse[l]
        floor = 0.0
        for s in range(S):
            ds = d[s]
            # entropy as log1p(Z - 1) + sum pi (m - K) / tau: no cancellation when pi_best
            # rounds to 1 (see optplan.soft.boltzmann_entropy); (m - K) / tau is -X exactly
            # and its exponential E (a state of the same K row as s - 1: s - 1's entropy)
            if not same[l, s]:
                b = best[l, s]
                zm1 = 0.0
                h = 0.0
                for a in range(A_):
                    if a != b:
                        zm1 += E[l, s, a]
                    h += pi[l, s, a] * -X[l, s * A_ + a]
                h += math.log1p(zm1)
            for a in range(A_):
                p = pi[l, s, a]
                w = ds * p
                lam[l, s, a] = w
                if w != 0.0:
                    M += w * R[l, s, a]
                    B += w * c[l, s, a]
            if thin and ds != 0.0:
                for a in range(A_):
                    w = lam[l, s, a]
                    g = group[l, s * A_ + a]
                    floor += w * base[l, g]
                    for e in range(nnz[l, g]):
                        nxt[idx[l, g, e]] += w * val[l, g, e]
            # nxt[t] += w P[l, s, a, t] over a in order; a zero weight adds +0 to nxt >= 0
            # (P finite, >= 0), which changes nothing, so it needs no test
            elif l < L - 1 and ds != 0.0:
                if A_ == 2:
                    # a constant row's products w P[t] are one number, computed once
                    w0 = lam[l, s, 0]
                    w1 = lam[l, s, 1]
                    if flat[l, s, 0] and flat[l, s, 1]:
                        c0 = w0 * P[l, s, 0, 0]
                        c1 = w1 * P[l, s, 1, 0]
                        for t in range(S):
                            nxt[t] = (nxt[t] + c0) + c1
                    elif flat[l, s, 0]:
                        c0 = w0 * P[l, s, 0, 0]
                        for t in range(S):
                            nxt[t] = (nxt[t] + c0) + w1 * P[l, s, 1, t]
                    elif flat[l, s, 1]:
                        c1 = w1 * P[l, s, 1, 0]
                        for t in range(S):
                            nxt[t] = (nxt[t] + w0 * P[l, s, 0, t]) + c1
                    else:
                        for t in range(S):
                            nxt[t] = (nxt[t] + w0 * P[l, s, 0, t]) + w1 * P[l, s, 1, t]
                else:
                    for a in range(A_):
                        w = lam[l, s, a]
                        for t in range(S):
                            nxt[t] += w * P[l, s, a, t]
            A += ds * h
        if thin:
            for t in range(S):
                d[t] = nxt[t] + floor
        else:
            for t in range(S):
                d[t] = nxt[t]
    f = 0.0
    for s in range(S):
        f += rho[s] * V[0, s]
    return f, M, A, B


@_JIT
def _rows(P):  # pragma: no cover - compiled by numba
    """The distinct rows of each layer of ``P`` (L, S, A, S): ``(PT, group, nrep, flat,
    sparse, base, nnz, idx, val)`` with ``flat[l, s, a]`` the row is constant (every entry
    equal, e.g. an unvisited pair's uniform posterior mean), constant rows of equal entries
    one group (up to 8 values per layer; every other row a group of its own), ``group[l, s A +
    a]`` the row's group, ``nrep[l]`` the layer's groups, ``PT[l, t, k] = P[l, s, a, t]`` for
    the first row ``(s, a)`` of group ``k``, the same row as its smallest entry plus
    exceptions (:func:`_exceptions`) and ``sparse[l]`` (:func:`_sparse_layer`). Equal rows
    give equal sums ``sum_t P[t] V[t]`` (the same products, added in the same order), so
    each is computed once."""
    L, S, A, _ = P.shape
    SA = S * A
    PT = np.empty((L, S, SA))
    group = np.empty((L, SA), dtype=np.int64)
    nrep = np.empty(L, dtype=np.int64)
    flat = np.empty((L, S, A), dtype=np.bool_)
    sparse = np.empty(L, dtype=np.bool_)
    base = np.empty((L, SA))
    nnz = np.empty((L, SA), dtype=np.int64)
    idx = np.empty((L, SA, S), dtype=np.int64)
    val = np.empty((L, SA, S))
    values = np.empty(8)
    owner = np.empty(8, dtype=np.int64)
    for l in range(L):
        k = 0
        nv = 0
        for s in range(S):
            for a in range(A):
                p0 = P[l, s, a, 0]
                same = not math.isnan(p0)
                for t in range(1, S):
                    if P[l, s, a, t] != p0:
                        same = False
                        break
                flat[l, s, a] = same
                g = -1
                if same:
                    for i in range(nv):
                        if values[i] == p0:
                            g = owner[i]
                            break
                if g < 0:
                    g = k
                    k += 1
                    for t in range(S):
                        PT[l, t, g] = P[l, s, a, t]
                    _exceptions(P[l, s, a], S, l, g, base, nnz, idx, val)
                    if same and nv < 8:
                        values[nv] = p0
                        owner[nv] = g
                        nv += 1
                group[l, s * A + a] = g
        nrep[l] = k
        sparse[l] = _sparse_layer(nnz, l, k, S)
    return PT, group, nrep, flat, sparse, base, nnz, idx, val


@_JIT
def _derivative(u, two, prob, buf, k):  # pragma: no cover - compiled by numba
    """``(f'(e^u), ok)``: ``A - B / tau**2`` at ``tau = e^u`` for ``prob = (R, P, G, c, rho)``,
    the pass at ``tau`` kept in buffer set ``k`` of ``buf = (BK, BV, Bpi, Blam, E, T)``
    (``BK[k]``, ... and ``T[k] = (f, M, A, B)``); ``ok`` False where Python would raise
    (``tau**2`` out of range) or the value is not finite. ``two`` is 2.0, an argument so that
    ``pow`` stays a call (as Python's ``tau**2``), not ``tau * tau``."""
    R, P, G, c, rho = prob
    BK, BV, Bpi, Blam, E, T = buf
    tau = math.exp(u)
    f, M, A, B = _terms(tau, R, P, G, c, rho, BK[k], BV[k], Bpi[k], Blam[k], E)
    T[k, 0], T[k, 1], T[k, 2], T[k, 3] = f, M, A, B
    t2 = math.pow(tau, two)
    if not math.isfinite(t2) or (t2 != 0.0 and t2 < _TINY):
        return 0.0, False
    g = A - B / t2
    return g, math.isfinite(g)


@_JIT(inline="always")
def _other(i, j):  # pragma: no cover - compiled by numba
    """A buffer set (of 0, 1, 2) that is neither ``i`` nor ``j``."""
    for k in range(3):
        if k != i and k != j:
            return k
    return 0


@_JIT(inline="always")
def _signbit(x):  # pragma: no cover - compiled by numba
    return math.copysign(1.0, x) < 0.0


@_JIT
def _solve(R, P, c, rho, search, out):  # pragma: no cover - compiled by numba
    """The search of :func:`optplan.fast.k_temperature.solve`; ``out = (K, V, pi, lam)``
    filled at ``tau*``. Returns ``(status, tau, iterations, evaluations, f, M, A, B)``.
    ``search = (xtol, rtol, max_iter, u_min, u_max, u_guess, half, step0, two)``: the bracket
    starts at ``[u0 - half, u0 + half]`` and widens by ``step0``, doubling; ``u0`` is
    ``u_guess`` (the log of a guess of ``tau*``, clipped to the bounds) or, where that is NaN,
    the centre from ``tau = 1``."""
    return _solve_rows((R, P, _rows(P), c, rho), search, out)


@_JIT
def _solve_rows(prob, search, out):  # pragma: no cover - compiled by numba
    """:func:`_solve` with ``prob = (R, P, G, c, rho)``, ``G`` :func:`_rows` of ``P`` or a
    caller's equivalent grouping (rows put in one group must be equal, ``flat`` rows
    constant).

    Each trial ``tau`` is evaluated into one of three buffer sets, one per point Brent's
    method holds (``xpre``, ``xcur``, ``xblk``; the bracket's two ends before it), so the pass
    at the root found is the one kept in ``xcur``'s set: no pass is repeated."""
    R, P, G, c, rho = prob
    xtol, rtol, max_iter, u_min, u_max, u_guess, half, step0, two = search
    K, V, pi, lam = out
    L, S, A_ = R.shape
    E = np.empty((L, S, A_))
    BK, BV, Bpi, Blam = (
        np.empty((3, L, S, A_)),
        np.empty((3, L, S)),
        np.empty((3, L, S, A_)),
        np.empty((3, L, S, A_)),
    )
    T = np.empty((3, 4))
    buf = (BK, BV, Bpi, Blam, E, T)
    evals = 0
    if math.isnan(u_guess):
        # _start: the bracket's centre from tau = 1
        _, _, A1, B1 = _terms(1.0, R, P, G, c, rho, BK[0], BV[0], Bpi[0], Blam[0], E)
        evals = 1
        if not (A1 > 0 and B1 > 0 and math.isfinite(B1 / A1)):
            return FALLBACK, 0.0, 0, evals, 0.0, 0.0, 0.0, 0.0
        u0 = 0.5 * math.log(B1 / A1)
    else:
        u0 = u_guess
    u0 = max(u0, u_min + 1.0)
    u0 = min(u0, u_max - 1.0)
    # _bracket
    lo = u0 - half
    hi = u0 + half
    k_lo, k_hi = 0, 1
    g_lo, ok = _derivative(lo, two, prob, buf, k_lo)
    evals += 1
    if not ok:
        return FALLBACK, 0.0, 0, evals, 0.0, 0.0, 0.0, 0.0
    g_hi, ok = _derivative(hi, two, prob, buf, k_hi)
    evals += 1
    if not ok:
        return FALLBACK, 0.0, 0, evals, 0.0, 0.0, 0.0, 0.0
    step = step0
    found = False
    for _ in range(max_iter):
        if (g_lo < 0.0 and 0.0 < g_hi) or g_lo == 0.0 or g_hi == 0.0:
            found = True
            break
        if (g_lo > 0.0 and lo <= u_min) or (g_hi < 0.0 and hi >= u_max):
            return FALLBACK, 0.0, 0, evals, 0.0, 0.0, 0.0, 0.0
        if g_lo > 0.0:
            hi, g_hi, k_hi = lo, g_lo, k_lo
            lo = lo - step
            if u_min > lo:
                lo = u_min
            k_lo = _other(k_hi, k_hi)
            g_lo, ok = _derivative(lo, two, prob, buf, k_lo)
        else:
            lo, g_lo, k_lo = hi, g_hi, k_hi
            hi = hi + step
            if u_max < hi:
                hi = u_max
            k_hi = _other(k_lo, k_lo)
            g_hi, ok = _derivative(hi, two, prob, buf, k_hi)
        evals += 1
        if not ok:
            return FALLBACK, 0.0, 0, evals, 0.0, 0.0, 0.0, 0.0
        step *= 2.0
    if not found:
        return FALLBACK, 0.0, 0, evals, 0.0, 0.0, 0.0, 0.0
    # _root: an end where f' is 0, else brentq (its f(a), f(b) are g_lo, g_hi)
    iterations = 0
    if g_lo == 0.0:
        u_star, k_star = lo, k_lo
    elif g_hi == 0.0:
        u_star, k_star = hi, k_hi
    else:
        xpre, xcur, fpre, fcur = lo, hi, g_lo, g_hi
        k_pre, k_cur, k_blk = k_lo, k_hi, k_lo
        xblk = 0.0
        fblk = 0.0
        spre = 0.0
        scur = 0.0
        converged = False
        for _ in range(max_iter):
            iterations += 1
            if fpre != 0.0 and fcur != 0.0 and _signbit(fpre) != _signbit(fcur):
                xblk = xpre
                fblk = fpre
                k_blk = k_pre
                spre = scur = xcur - xpre
            if abs(fblk) < abs(fcur):
                xpre = xcur
                xcur = xblk
                xblk = xpre
                fpre = fcur
                fcur = fblk
                fblk = fpre
                k_pre = k_cur
                k_cur = k_blk
                k_blk = k_pre
            delta = (xtol + rtol * abs(xcur)) / 2
            sbis = (xblk - xcur) / 2
            if fcur == 0.0 or abs(sbis) < delta:
                converged = True
                break
            if abs(spre) > delta and abs(fcur) < abs(fpre):
                if xpre == xblk:  # interpolate
                    stry = -fcur * (xcur - xpre) / (fcur - fpre)
                else:  # extrapolate
                    dpre = (fpre - fcur) / (xpre - xcur)
                    dblk = (fblk - fcur) / (xblk - xcur)
                    stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
                bound = 3 * abs(sbis) - delta
                if abs(spre) < bound:
                    bound = abs(spre)
                if 2 * abs(stry) < bound:  # good short step
                    spre = scur
                    scur = stry
                else:  # bisect
                    spre = sbis
                    scur = sbis
            else:  # bisect
                spre = sbis
                scur = sbis
            xpre = xcur
            fpre = fcur
            k_pre = k_cur
            if abs(scur) > delta:
                xcur += scur
            else:
                xcur += delta if sbis > 0 else -delta
            k_cur = _other(k_pre, k_blk)
            fcur, ok = _derivative(xcur, two, prob, buf, k_cur)
            evals += 1
            if not ok:
                return FALLBACK, 0.0, iterations, evals, 0.0, 0.0, 0.0, 0.0
        if not converged:
            return FALLBACK, 0.0, iterations, evals, 0.0, 0.0, 0.0, 0.0
        u_star, k_star = xcur, k_cur
    # the pass at tau* = exp(u*) was made at this u: its buffers are the answer
    tau = math.exp(u_star)
    K[...] = BK[k_star]
    V[...] = BV[k_star]
    pi[...] = Bpi[k_star]
    lam[...] = Blam[k_star]
    return SOLVED, tau, iterations, evals, T[k_star, 0], T[k_star, 1], T[k_star, 2], T[k_star, 3]


def _table() -> dict:
    if not AVAILABLE:
        raise RuntimeError(f'kernel "numba" needs numba: {_jit.INSTALL}')
    return _JIT.table or _JIT.compiled()


def _read_only(*arrays) -> tuple:
    """Read-only views of ``arrays``: the kernels take their inputs read-only whoever calls
    them (numba compiles a function once per argument writability, and an agent's plan hands
    its buffers over read-only too), so they are compiled once."""
    out = []
    for a in arrays:
        view = a.view()
        view.flags.writeable = False
        out.append(view)
    return tuple(out)


def transposed(P) -> tuple:
    """``P`` (L, S, A, S) prepared for :func:`terms`: :func:`_rows` (each layer's distinct rows,
    transposed, and which row is which), computed once for a search's many passes."""
    return _table()["_rows"](np.ascontiguousarray(P, dtype=float))


def terms(tau: float, R, P, c, rho, out=None, PT=None):
    """``(f, M, A, B, K, V, pi, lambda)`` at ``tau``, as ``temperature_terms`` returns.

    ``out`` may pass preallocated ``(K, V, pi, lam)`` buffers to reuse across calls (the
    returned arrays are then those buffers); ``PT``, :func:`transposed` ``P`` for the same.
    """
    table = _table()
    L, S, A = R.shape
    if out is None:
        out = (np.empty((L, S, A)), np.empty((L, S)), np.empty((L, S, A)), np.empty((L, S, A)))
    if PT is None:
        PT = transposed(P)
    K, V, pi, lam = out
    R, P, c, rho = _read_only(R, P, c, rho)
    f, M, Aterm, B = table["_terms"](float(tau), R, P, PT, c, rho, K, V, pi, lam,
                                     np.empty_like(K))  # fmt: skip
    return f, M, Aterm, B, K, V, pi, lam


def solve(
    R,
    P,
    c,
    rho,
    xtol: float,
    rtol: float,
    max_iter: int,
    u_min: float,
    u_max: float,
    bracket: tuple[float, float, float],
):
    """The whole search for ``tau*`` (module docstring): ``(status, tau, iterations,
    evaluations, f, M, A, B, K, V, pi, lambda)``; arrays C-contiguous floats. ``status`` is
    :data:`FALLBACK` where the SciPy search must decide (the other entries are then
    meaningless). ``bracket = (u_guess, half, step)`` (:func:`_solve`)."""
    table = _table()
    L, S, A = R.shape
    K, pi, lam = np.empty((L, S, A)), np.empty((L, S, A)), np.empty((L, S, A))
    V = np.empty((L, S))
    R, P, c, rho = _read_only(R, P, c, rho)
    search = (float(xtol), float(rtol), int(max_iter), float(u_min), float(u_max), *bracket, 2.0)
    out = table["_solve"](R, P, c, rho, search, (K, V, pi, lam))
    return (*out, K, V, pi, lam)
