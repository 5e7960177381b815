r"""The drain order of the L1 ball, compiled: the states by increasing value, ties in index
order, the best state last (the numpy path's ``np.argsort(key, kind="stable")``).

:func:`_drain_order` gives the full order: an insertion sort on short rows, numba's default
(unstable) ``argsort`` plus a fix-up that sorts the indices inside each run of equal values
on long ones. The quicksort on ``(value, index)`` pairs (:func:`_partition2`,
:func:`_sort2`: all keys distinct, so the order is the stable one) lets
:func:`optplan.fast._kernels.l1_ball._l1_partial` sort only the part of a row the ball drains.
"""

from __future__ import annotations

import math

import numpy as np

from .common import L1_INSERTION_N, SORT_SMALL_N, jit


@jit
def _drain_order(v, order):  # pragma: no cover - compiled by numba
    """``order``: the states by increasing ``v``, ties in index order, the best state (first
    argmax) last: ``np.argsort(key, kind="stable")`` of the numpy path, by an insertion sort
    (short rows) or :func:`_sort2` on ``(value, index)`` pairs, whose order is the stable one
    (``v`` holds no NaN: the callers' inputs are checked). Returns the best state."""
    S = v.shape[0]
    best = 0
    for x in range(S):
        if v[x] > v[best]:
            best = x
    if S <= SORT_SMALL_N:  # short rows: an insertion sort, stable by construction
        m = 0
        for x in range(S):
            if x != best:
                vx = v[x]
                b = m - 1
                while b >= 0 and v[order[b]] > vx:
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = x
                m += 1
        order[S - 1] = best
        return best
    key = v.copy()
    key[best] = math.inf
    # (numba's own argsort would be a second sort to compile, and an unstable one)
    for j in range(S):
        order[j] = j
    _sort2(key, order, key, 0, S, np.empty(128, dtype=np.int64))
    return best


@jit(inline="always")
def _pair_less(ka, ia, kb, ib):  # pragma: no cover - compiled by numba
    """``(ka, ia) < (kb, ib)``: the drain order's key (value, then index; all keys distinct)."""
    return ka < kb or (ka == kb and ia < ib)


@jit(inline="always")
def _swap2(kv, ix, a, b):  # pragma: no cover - compiled by numba
    kv[a], kv[b] = kv[b], kv[a]
    ix[a], ix[b] = ix[b], ix[a]


@jit
def _insertion2(kv, ix, lo, hi):  # pragma: no cover - compiled by numba
    """Sort ``[lo, hi)`` of the pairs ``(kv, ix)`` by :func:`_pair_less` (insertion)."""
    for a in range(lo + 1, hi):
        k = kv[a]
        i = ix[a]
        b = a - 1
        while b >= lo and _pair_less(k, i, kv[b], ix[b]):
            kv[b + 1] = kv[b]
            ix[b + 1] = ix[b]
            b -= 1
        kv[b + 1] = k
        ix[b + 1] = i


@jit
def _partition2(kv, ix, p, lo, hi):  # pragma: no cover - compiled by numba
    """Partition ``[lo, hi)`` (``hi - lo >= 3``) of the pairs around the median of its first,
    middle and last keys: returns ``(i, mass)``, the pivot's final position (smaller keys
    before it, larger after) and the mass ``p`` of the states before it."""
    mid = (lo + hi) // 2
    last = hi - 1
    if _pair_less(kv[mid], ix[mid], kv[lo], ix[lo]):
        _swap2(kv, ix, mid, lo)
    if _pair_less(kv[last], ix[last], kv[mid], ix[mid]):
        _swap2(kv, ix, last, mid)
        if _pair_less(kv[mid], ix[mid], kv[lo], ix[lo]):
            _swap2(kv, ix, mid, lo)
    _swap2(kv, ix, mid, last)  # the median: the pivot, at the end
    pk = kv[last]
    pi = ix[last]
    i = lo
    mass = 0.0
    for t in range(lo, last):
        if _pair_less(kv[t], ix[t], pk, pi):
            _swap2(kv, ix, t, i)
            mass += p[ix[i]]
            i += 1
    _swap2(kv, ix, i, last)
    return i, mass


@jit
def _sort2(kv, ix, p, lo, hi, stack):  # pragma: no cover - compiled by numba
    """Quicksort ``[lo, hi)`` of the pairs by :func:`_pair_less`: the smaller side first,
    the larger on ``stack`` (depth <= log2 S), insertion below ``L1_INSERTION_N``."""
    top = 0
    while True:
        while hi - lo > L1_INSERTION_N:
            i, _ = _partition2(kv, ix, p, lo, hi)
            if i - lo > hi - i - 1:
                stack[top] = lo
                stack[top + 1] = i
                lo = i + 1
            else:
                stack[top] = i + 1
                stack[top + 1] = hi
                hi = i
            top += 2
        _insertion2(kv, ix, lo, hi)
        if top == 0:
            return
        top -= 2
        lo = stack[top]
        hi = stack[top + 1]
