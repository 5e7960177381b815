r"""Compiled kernels for the K-learning temperature search (optional: needs ``numba``).

One call evaluates, at a temperature ``tau``, everything :func:`optplan.soft.temperature_terms`
evaluates with numpy: the backward recursion of Eq. 6 for ``K`` and ``V``
(Eq. 14), the Boltzmann policy (Eq. 9), its occupancy ``lambda`` from ``rho`` and the terms
``f = rho . V_0``, ``M = <lambda, mu>``, ``A = <lambda, H(pi)>``, ``B = <lambda, c>``. The
numpy code is the reference: ``tests/test_k_learning_kernels.py`` compares the two, and the
CVXPY cross-checks run on whichever kernel ``kernel="auto"`` picks.

Why compiled: a numpy pass spends its time in interpreter and dispatch overhead, a few numpy
calls per layer on arrays of a few hundred entries, repeated for every trial ``tau`` of the
search, while the arithmetic is ``2 L S^2 A`` multiply-adds.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit

__all__ = ["AVAILABLE", "terms"]

#: numba is installed (optional dependency: pip install "optplan[jit]"); it is imported, and
#: the kernel compiled (or loaded from numba's cache), on the first call, not with optplan.
AVAILABLE = _jit.AVAILABLE

_JIT = _jit.Jit('kernel "numba"', cache=True, nogil=True)


@_JIT
def _terms(tau, R, P, c, rho, K, V, pi, lam):  # pragma: no cover - compiled by numba
    """Fill ``K, V, pi, lam`` at ``tau``; return ``(f, M, A, B)``."""
    L, S, A_ = R.shape
    # Backward recursion (Eq. 6), soft-max with the max-shift (Eq. 14).
    for l in range(L - 1, -1, -1):
        for s in range(S):
            m = -math.inf
            for a in range(A_):
                acc = 0.0
                if l < L - 1:
                    for t in range(S):
                        acc += P[l, s, a, t] * V[l + 1, t]
                k = R[l, s, a] + c[l, s, a] / tau + acc
                K[l, s, a] = k
                if k > m:
                    m = k
            z = 0.0
            for a in range(A_):
                e = math.exp((K[l, s, a] - m) / tau)
                pi[l, s, a] = e
                z += e
            V[l, s] = m + tau * math.log(z)
            for a in range(A_):
                pi[l, s, a] /= z
    # Forward pass: occupancy of the Boltzmann policy and the three terms.
    d = rho.copy()
    nxt = np.empty(S)
    M = 0.0
    A = 0.0
    B = 0.0
    for l in range(L):
        for t in range(S):  # (loops, not slice assignments: no broadcast checks to compile)
            nxt[t] = 0.0
        for s in range(S):
            ds = d[s]
            # entropy as log1p(Z - 1) + sum pi (m - K) / tau: no cancellation when pi_best
            # rounds to 1 (see optplan.soft.boltzmann_entropy)
            m = -math.inf
            best = 0
            for a in range(A_):
                if K[l, s, a] > m:
                    m = K[l, s, a]
                    best = a
            zm1 = 0.0
            h = 0.0
            for a in range(A_):
                gap = (m - K[l, s, a]) / tau
                if a != best:
                    zm1 += math.exp(-gap)
                h += pi[l, s, a] * gap
            h += math.log1p(zm1)
            for a in range(A_):
                p = pi[l, s, a]
                w = ds * p
                lam[l, s, a] = w
                if w != 0.0:
                    M += w * R[l, s, a]
                    B += w * c[l, s, a]
                    if l < L - 1:
                        for t in range(S):
                            nxt[t] += w * P[l, s, a, t]
            A += ds * h
        for t in range(S):
            d[t] = nxt[t]
    f = 0.0
    for s in range(S):
        f += rho[s] * V[0, s]
    return f, M, A, B


def terms(tau: float, R, P, c, rho, out=None):
    """``(f, M, A, B, K, V, pi, lambda)`` at ``tau``, as ``temperature_terms`` returns.

    ``out`` may pass preallocated ``(K, V, pi, lam)`` buffers to reuse across calls (the
    returned arrays are then those buffers).
    """
    if not AVAILABLE:
        raise RuntimeError(f'kernel "numba" needs numba: {_jit.INSTALL}')
    L, S, A = R.shape
    if out is None:
        out = (np.empty((L, S, A)), np.empty((L, S)), np.empty((L, S, A)), np.empty((L, S, A)))
    K, V, pi, lam = out
    f, M, Aterm, B = (_JIT.table or _JIT.compiled())["_terms"](
        float(tau), R, P, c, rho, K, V, pi, lam
    )
    return f, M, Aterm, B, K, V, pi, lam
