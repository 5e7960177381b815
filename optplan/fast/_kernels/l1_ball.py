r"""The compiled L1-ball kernel: ``max q.v`` over ``||q - p||_1 <= d``, one row at a time.

The greedy closed form of :mod:`optplan.fast.l1_ball` (:func:`_l1_partial`, :func:`_l1_row`).
Only the states the ball drains need the drain order (:mod:`optplan.fast._kernels.sorting`):
a quicksort on ``(value, index)`` pairs sorts the partitions before the margin and drops those
after it, where ``q = p``; short rows are insertion-sorted as they are copied. A shared ``v``
(one sort for the batch) and balls that drain nearly every state take the full order.
"""

from __future__ import annotations

import math

import numpy as np

from .common import DONE, INFEASIBLE_ROW, L1_INSERTION_N, LEFT, _floats, _valid_one, jit
from .sorting import _drain_order, _insertion2, _partition2, _sort2


@jit(inline="always")
def _l1_row(p, v, d, q, order, best):  # pragma: no cover - compiled by numba
    """One L1-ball row on the drain ``order`` (best state last): fill ``q``, return
    ``(value, lam, code)``."""
    S = p.shape[0]
    if d < 0.0:
        for x in range(S):
            q[x] = math.nan
        return -math.inf, math.nan, INFEASIBLE_ROW
    V = v[best]
    R = 0.0
    for j in range(S - 1):
        R += p[order[j]]
    eps = min(max(0.5 * d, 0.0), R)
    cum = 0.0
    lam = 0.0
    margin = True
    for j in range(S - 1):
        x = order[j]
        px = p[x]
        before = cum
        cum += px
        q[x] = px - min(px, max(0.0, eps - before))
        if margin and not cum <= eps:  # the first state not fully drained
            lam = 0.5 * (V - v[x])
            margin = False
    q[best] = p[best] + eps
    return V - _l1_gap(q, v, V), lam, DONE


@jit(inline="always")
def _l1_gap(q, v, V):  # pragma: no cover - compiled by numba
    """``sum_x q_x (V - v_x)`` in index order (the best state's term is ``q_best (V - V) =
    0``): every L1 path sums it the same way, so a row's value has the same bits whichever
    path (partial sort, full order, shared ``v``) drained it, and it is monotone in the
    radius exactly (each term is)."""
    acc = 0.0
    for x in range(q.shape[0]):
        acc += q[x] * (V - v[x])
    return acc


@jit
def _copy_rest(p, v, best, kv, ix):  # pragma: no cover - compiled by numba
    """The states but ``best`` as ``(value, index)`` pairs into ``kv``, ``ix`` (sorted while
    copied, stably, when they make one short segment); returns their count and mass."""
    S = p.shape[0]
    m = 0
    R = 0.0
    short = S <= L1_INSERTION_N + 1
    for x in range(S):
        if x == best:
            continue
        vx = v[x]
        b = m - 1
        while short and b >= 0 and kv[b] > vx:
            kv[b + 1] = kv[b]
            ix[b + 1] = ix[b]
            b -= 1
        kv[b + 1] = vx
        ix[b + 1] = x
        R += p[x]
        m += 1
    return m, R


@jit
def _l1_partial(p, v, d, q, iw):  # pragma: no cover - compiled by numba
    """One L1-ball row, sorting only the states the ball drains. The states but the best are
    copied as ``(value, index)`` pairs (the values into ``q``, which is written only at the
    end; the indices into ``iw``, an int work array of ``S + 128``, the rest a stack);
    quicksort partitions them and fully sorts only the parts before the margin (whose order
    sets the drain's cumulative sums), dropping the parts after it, where ``q = p``. The
    margin lies in the sorted prefix once that prefix's mass exceeds ``eps = d / 2`` by
    ``1e-9`` relative (far above the round-off of the partition's sums). The drain then runs
    over the prefix in the reference's order (value, ties by index: :func:`_drain_order`'s)
    with its formulas and sequential sums: the same ``q`` and margin, bit for bit, as the
    full stable sort. ``O(S)`` expected plus the sort of the drained part. Returns ``(value,
    lam, code)``; ``LEFT`` when ``d < 0`` or the ball drains (nearly) every state off the
    best one, which the full sort handles."""
    S = p.shape[0]
    best = 0
    for x in range(S):
        if v[x] > v[best]:
            best = x
    V = v[best]
    eps = 0.5 * d
    kv = q
    ix = iw[:S]
    stack = iw[S:]
    m, R = _copy_rest(p, v, best, kv, ix)
    target = eps * (1.0 + 1e-9) + 1e-15
    if not (d >= 0.0 and target < R * (1.0 - 1e-9)):
        return math.nan, math.nan, LEFT
    lo = 0
    hi = m
    acc = 0.0
    while hi - lo > L1_INSERTION_N:
        i, mass = _partition2(kv, ix, p, lo, hi)
        if acc + mass > target:  # the margin lies before the pivot: drop the rest
            hi = i
            continue
        _sort2(kv, ix, p, lo, i, stack)  # all drained: sorted, for the sums' order
        if acc + mass + p[ix[i]] > target:  # the pivot is (at or past) the margin
            hi = i + 1
            lo = hi
            break
        acc += mass + p[ix[i]]
        lo = i + 1
    if m > L1_INSERTION_N:
        _insertion2(kv, ix, lo, hi)
    for x in range(S):  # the keys in q are no longer needed: the order is in ix
        q[x] = p[x]
    cum = 0.0
    lam = math.nan
    for t in range(hi):
        x = ix[t]
        px = p[x]
        before = cum
        cum += px
        q[x] = px - min(px, max(0.0, eps - before))
        if not cum <= eps:  # the margin: the states after it keep q = p
            lam = 0.5 * (V - v[x])
            break
    if not lam == lam:
        return math.nan, math.nan, LEFT
    q[best] = p[best] + eps
    return V - _l1_gap(q, v, V), lam, DONE


@jit
def _l1_rows(P, Vv, D, shared, value, q, lam, code):  # pragma: no cover - compiled by numba
    B, S = P.shape
    order = np.empty(S, dtype=np.int64)
    iw = np.empty(S + 128, dtype=np.int64)
    best = 0
    sorted_ = False
    for i in range(B):
        vi = Vv[0] if shared else Vv[i]
        if not shared:
            val, lm, k = _l1_partial(P[i], vi, D[i], q[i], iw)
            if k != LEFT:
                value[i] = val
                lam[i] = lm
                code[i] = k
                continue
            sorted_ = False
        if not (shared and sorted_):
            best = _drain_order(vi, order)
            sorted_ = True
        val, lm, k = _l1_row(P[i], vi, D[i], q[i], order, best)
        value[i] = val
        lam[i] = lm
        code[i] = k


@jit
def _l1_lane(p, v, d, validate, q):  # pragma: no cover - compiled by numba
    """One instance: the input check (``validate``), then the partial sort
    (:func:`_l1_partial`), or the full drain order where it hands the row back;
    ``(value, lam, code)``, ``q`` filled in place."""
    if validate and not _valid_one(p, v, d):
        return math.nan, math.nan, LEFT
    S = p.shape[0]
    iw = np.empty(S + 128 if S > L1_INSERTION_N else S, dtype=np.int64)  # (no stack needed)
    value, lam, code = _l1_partial(p, v, d, q, iw)
    if code != LEFT:
        return value, lam, code
    best = _drain_order(v, iw)
    return _l1_row(p, v, d, q, iw, best)


@jit
def _l1_into(p, v, d, validate, q):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_into`: ``(value, lam, code)``, ``q`` filled in place."""
    return _l1_lane(p, v, d, validate, q)


@jit
def _l1_one(p, v, d, validate):  # pragma: no cover - compiled by numba
    """As :func:`_kl_ball_one`: ``(value, lam, code, q)``."""
    q = np.empty(p.shape[0])
    value, lam, code = _l1_lane(p, v, d, validate, q)
    return value, lam, code, q


def l1_rows(p, v, d, shared: bool, value, q, lam) -> np.ndarray:
    """L1-ball rows (``shared``: every row has the ``v`` of ``v[0]``, sorted once; ``v`` may
    then have one row): fill the outputs in place; return the per-row codes."""
    k = jit.table or jit.compiled()
    code = np.empty(d.shape[0], dtype=np.int64)
    k["_l1_rows"](_floats(p), _floats(v), _floats(d), bool(shared), value, q, lam, code)
    return code


def l1_one(p, v, d: float, validate: bool):
    """One L1-ball row: ``(value, lam, code, q)`` (``LEFT``: the general path)."""
    return (jit.table or jit.compiled())["_l1_one"](p, v, d, validate)
