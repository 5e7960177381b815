r"""Small compiled helpers of the agents' steps: copies, NumPy's pairwise row sum, products
``(m, n) @ (n,)``, ``argmin``/``argmax`` with NumPy's
ties and NaNs, and a transposed dense solve (Gaussian elimination with partial pivoting).

Compiled on first use and cached by numba (:class:`optplan._jit.Jit`).
"""

from __future__ import annotations

import math

from .. import _jit
from . import _kernels
from ._pairwise import _JIT as _PAIRWISE
from ._pairwise import _pw_block

__all__ = ["AVAILABLE"]

#: numba is installed.
AVAILABLE = _kernels.AVAILABLE
#: numpy's pairwise summation block (``PW_BLOCKSIZE``).
_PW_BLOCK = 128

_JIT = _jit.Jit("the agents' compiled helpers", uses=(_kernels.jit, _PAIRWISE), cache=True,
                error_model="numpy")  # fmt: skip


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
    """``out = M @ v``, row by row (the agents' matrices are small: a loop compiles in a
    fraction of BLAS's binding and allocates nothing)."""
    m, n = M.shape
    for i in range(m):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * v[j]
        out[i] = acc


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
    """Solve ``A x = b`` in place, ``A = M.T`` (``M``'s C buffer holds ``A`` in Fortran order,
    LAPACK's layout, so that a column of ``A`` is a row of ``M``), by Gaussian elimination
    with partial pivoting (LAPACK ``dgetf2``'s algorithm); ``M`` is overwritten by the
    factors. Returns 0, or 1 when a pivot is 0 or not a number (``A`` singular or not finite;
    ``b`` is then partly reduced)."""
    n = b.shape[0]
    for k in range(n):
        p, big = k, abs(M[k, k])
        for i in range(k + 1, n):
            if abs(M[k, i]) > big:
                p, big = i, abs(M[k, i])
        if not big > 0.0:
            return 1
        if p != k:
            for j in range(n):
                M[j, k], M[j, p] = M[j, p], M[j, k]
            b[k], b[p] = b[p], b[k]
        pivot = M[k, k]
        for i in range(k + 1, n):
            M[k, i] /= pivot
        for j in range(k + 1, n):
            akj = M[j, k]
            if akj != 0.0:
                for i in range(k + 1, n):
                    M[j, i] -= M[k, i] * akj
        bk = b[k]
        for i in range(k + 1, n):
            b[i] -= M[k, i] * bk
    for i in range(n - 1, -1, -1):
        acc = b[i]
        for j in range(i + 1, n):
            acc -= M[j, i] * b[j]
        b[i] = acc / M[i, i]
    return 0


def _compiled() -> dict:
    """The compiled helpers, made on first use."""
    return _JIT.table or _JIT.compiled()
