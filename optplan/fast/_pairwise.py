"""NumPy's pairwise summation (``pairwise_sum`` in NumPy's ``loops_utils.h``), compiled: the
sums that compiled plans and steps take where NumPy's ``add.reduce`` gives the bits they
must reproduce. Callers list :data:`_JIT` in their collection's ``uses``."""

from __future__ import annotations

from .. import _jit

_JIT = _jit.Jit("NumPy's pairwise sums", cache=True, error_model="numpy")


@_JIT
def _pw_block(a, lo, n):  # pragma: no cover - compiled by numba
    """NumPy's pairwise sum of ``a[lo:lo + n]`` for ``n <= 128``: in order below 8 terms,
    else eight interleaved partial sums, added as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) +
    (r6 + r7))``, then the last ``n % 8`` terms in order (without the reduction's identity:
    ``0.0 +`` this is ``add.reduce``)."""
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    stop = n - (n % 8)
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res
