"""Sweeps of discounted value iteration (Jacobi and Gauss-Seidel) and Gauss-Seidel sweeps of
a policy's linear system, on CSR rows, compiled by numba (the optional ``jit`` extra).

A Jacobi sweep is one Bellman backup with its max, argmax and residual in one pass over the
rows (no ``(S, A)`` temporaries: on Taxi a tenth of NumPy's reductions).

A sweep visits the states in a given order and updates each in place from the values
already updated in this sweep: ordered by decreasing value, a goal-directed model's values
flow from the goal across the whole state space in one sweep instead of one step per
sweep. Each update solves for the state's own self-loop (``x_s = (b_s + gamma sum_{j != s}
M_sj x_j) / (1 - gamma M_ss)``; for value iteration per action, then the max), so an
absorbing state converges in one update instead of at rate ``gamma``. The fixed points are
the usual ones (``V*``, and ``(I - gamma M)^{-1} b``); the callers certify their results with
Jacobi Bellman residuals, never with a sweep's change.
"""

from __future__ import annotations

import numpy as np

from .._jit import Jit


def _jacobi_sweep_py(
    indptr, indices, data, R, mask, every, gamma, V, out, policy, zero
):  # pragma: no cover - compiled by numba
    """``out = T V`` (the Bellman backup's max over admissible actions) and ``policy`` its
    first maximizing action; returns ``(max |T V - V|, sum |T V - V|, states whose policy
    changed)``. ``zero``: ``V`` is 0, so ``T V`` is the reward's max (``P`` is not read)."""
    S, A = R.shape
    delta = 0.0
    total = 0.0
    changed = 0
    for s in range(S):
        best = -np.inf
        arg = -1
        for a in range(A):
            if not every and not mask[s, a]:
                continue
            row = s * A + a
            acc = 0.0
            if not zero:
                p, end = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
                while p < end:  # unsigned: no wraparound test on the two reads
                    acc += data[p] * V[np.uint64(indices[p])]
                    p += np.uint64(1)
            q = R[s, a] + gamma * acc
            if q > best:
                best = q
                arg = a
        change = abs(best - V[s])
        total += change
        if change > delta:
            delta = change
        out[s] = best
        if policy[s] != arg:
            changed += 1
            policy[s] = arg
    return delta, total, changed


def _jacobi_loop_py(
    csr, R, mask, every, gamma, V, policy, sweeps, target, quiet, stable
):  # pragma: no cover - compiled by numba
    """Value iteration from ``V`` (overwritten with the last values) for at most ``sweeps``
    sweeps: stops when a sweep's change is at most ``target`` (returns the number of that
    sweep; ``V`` is then the values it started from, certified by that change, and
    ``policy`` greedy in them) or when at most ``quiet`` states changed their greedy action
    in ``stable`` sweeps in a row (returns 0; ``V`` the last values, ``policy`` greedy in
    the ones before). ``csr = (indptr, indices, data)``: ``P``'s rows."""
    indptr, indices, data = csr
    S = V.shape[0]
    out = np.empty(S)
    held = 0
    zero = True  # from V = 0 the first sweep is the reward's max: P unread
    for s in range(S):
        if V[s] != 0.0:
            zero = False
            break
    for k in range(1, sweeps + 1):
        delta, total, changed = _jacobi_sweep(
            indptr, indices, data, R, mask, every, gamma, V, out, policy, zero and k == 1
        )
        if delta <= target:
            return k
        for s in range(S):
            V[s] = out[s]
        if k > 1 and changed <= quiet:
            held += 1
        else:
            held = 0
        if held >= stable:
            return 0
    return 0


def _value_sweep_py(
    indptr, indices, data, R, mask, every, gamma, V, order, policy, tie
):  # pragma: no cover - compiled by numba
    """One Gauss-Seidel sweep of value iteration over ``order``: ``V`` and ``policy`` (the
    first maximizing admissible action, ``policy[s]`` kept on a relative tie of ``tie``)
    updated in place; returns ``max |V_new - V_old|``."""
    A = R.shape[1]
    delta = 0.0
    for k in range(order.shape[0]):
        s = order[k]
        best = -np.inf
        arg = -1
        held = -np.inf
        for a in range(A):
            if not every and not mask[s, a]:
                continue
            row = s * A + a
            acc = 0.0
            diag = 0.0
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                if j == s:
                    diag += data[p]
                else:
                    acc += data[p] * V[j]
            q = (R[s, a] + gamma * acc) / (1.0 - gamma * diag)
            if q > best:
                best = q
                arg = a
            if a == policy[s]:
                held = q
        if held >= best - tie * abs(best):
            arg = policy[s]
        change = abs(best - V[s])
        if change > delta:
            delta = change
        V[s] = best
        policy[s] = arg
    return delta


def _linear_sweep_py(
    indptr, indices, data, b, gamma, x, order
):  # pragma: no cover - compiled by numba
    """One Gauss-Seidel sweep of ``x = b + gamma M x`` over ``order`` (``M`` square CSR),
    ``x`` updated in place; returns ``max |x_new - x_old|``."""
    delta = 0.0
    for k in range(order.shape[0]):
        s = order[k]
        acc = 0.0
        diag = 0.0
        for p in range(indptr[s], indptr[s + 1]):
            j = indices[p]
            if j == s:
                diag += data[p]
            else:
                acc += data[p] * x[j]
        new = (b[s] + gamma * acc) / (1.0 - gamma * diag)
        change = abs(new - x[s])
        if change > delta:
            delta = change
        x[s] = new
    return delta


def _chain_fixed_point_py(
    indptr, indices, data, b, gamma, x, y, tol, max_iter, slow, transposed
):  # pragma: no cover - compiled by numba
    """The fixed-point phase of :func:`optplan.dp._linear._krylov` on a policy's chain
    (square CSR), with the same floating-point operations in the same order as the NumPy
    loop (the same iterates bit for bit), fused into one pass an iteration: ``y = b + gamma
    M x`` with ``M`` the chain (MacQueen's extrapolation after it) or, ``transposed``, its
    transpose (a scatter, as scipy's CSC mat-vec). ``x`` holds the iterate; ``y`` is work
    space. Returns ``(iterations, converged)``: converged once the residual is at most
    ``tol``; not after ``max_iter`` iterations or once one shrank it by less than
    ``slow``."""
    S = x.shape[0]
    prev = np.inf
    for it in range(max_iter):
        if transposed:
            for j in range(S):
                y[j] = 0.0
            for s in range(S):
                w = x[s]
                p, end = np.uint64(indptr[s]), np.uint64(indptr[s + 1])
                while p < end:
                    y[np.uint64(indices[p])] += data[p] * w
                    p += np.uint64(1)
        lo = np.inf
        hi = -np.inf
        nan = False
        for s in range(S):
            if transposed:
                ys = b[s] + gamma * y[s]
            else:
                acc = 0.0
                p, end = np.uint64(indptr[s]), np.uint64(indptr[s + 1])
                while p < end:
                    acc += data[p] * x[np.uint64(indices[p])]
                    p += np.uint64(1)
                ys = b[s] + gamma * acc
            y[s] = ys
            d = ys - x[s]
            if d < lo:
                lo = d
            if d > hi:
                hi = d
            if d != d:
                nan = True
        if nan:
            return it + 1, False
        if transposed:
            size = max(-lo, hi)
            if size <= tol:
                return it + 1, True
            for s in range(S):
                x[s] = y[s]
        else:
            size = gamma * (hi - lo) / 2
            shift = (gamma / (1.0 - gamma)) * 0.5 * (lo + hi)
            for s in range(S):
                x[s] = y[s] + shift
            if size <= tol:
                return it + 1, True
        if it >= 3 and size > slow * prev:
            return it + 1, False
        prev = size
    return max_iter, False


def _policy_backup_py(
    csr, R, mask, every, gamma, V, policy, q, new, chain
):  # pragma: no cover - compiled by numba
    """One pass of policy iteration's improvement step, as ``backup``, ``greedy(...,
    tol=1e-12)`` and the two residuals compute it: ``q = R + gamma P V`` (every action),
    ``new`` the greedy admissible action keeping ``policy[s]`` on relative ties (1e-12),
    and ``new``'s chain gathered into the CSR arrays ``c_ptr``, ``c_idx``, ``c_data`` (each
    state's row copied while it is in cache; ``c_idx`` and ``c_data`` long enough for any
    policy). Returns ``(max_s |max_a q - V|, max_s |q[s, policy[s]] - V|, whether new ==
    policy)``; a NaN anywhere makes the residuals NaN. ``csr = (indptr, indices, data)``:
    ``P``'s rows; ``chain = (c_ptr, c_idx, c_data)``."""
    indptr, indices, data = csr
    c_ptr, c_idx, c_data = chain
    S, A = R.shape
    n = np.uint64(0)
    c_ptr[0] = 0
    bellman = 0.0
    own = 0.0
    same = True
    nan = False
    for s in range(S):
        best = -np.inf
        arg = -1
        for a in range(A):
            row = s * A + a
            acc = 0.0
            p, end = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
            while p < end:
                acc += data[p] * V[np.uint64(indices[p])]
                p += np.uint64(1)
            qa = acc * gamma + R[s, a]
            q[s, a] = qa
            if every or mask[s, a]:
                if qa > best or arg < 0:
                    best = qa
                    arg = a
        inc = q[s, policy[s]]
        pick = policy[s] if inc >= best - 1e-12 * abs(best) else arg
        new[s] = pick
        n = _copy_row(indptr, indices, data, s * A + pick, n, c_idx, c_data)
        c_ptr[s + 1] = n
        if pick != policy[s]:
            same = False
        b = abs(best - V[s])
        o = abs(inc - V[s])
        if b != b or o != o:
            nan = True
        if b > bellman:
            bellman = b
        if o > own:
            own = o
    if nan:
        return np.nan, np.nan, same
    return bellman, own, same


def _gather_chain_py(
    indptr, indices, data, A, policy, order, inv, c_ptr, c_idx, c_data
):  # pragma: no cover - compiled by numba
    """A deterministic policy's chain relabelled in ``order``: its row ``i`` is row
    ``s·A + policy[s]`` of the CSR rows for ``s = order[i]``, each column ``j`` written as
    ``inv[j]`` (``inv`` the inverse of ``order``), into the CSR arrays ``c_ptr``, ``c_idx``,
    ``c_data`` (long enough for it)."""
    n = np.uint64(0)
    c_ptr[0] = 0
    for i in range(order.shape[0]):
        s = order[i]
        row = s * A + policy[s]
        p, end = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
        while p < end:
            c_idx[n] = inv[indices[p]]
            c_data[n] = data[p]
            n += np.uint64(1)
            p += np.uint64(1)
        c_ptr[i + 1] = n


def _copy_row_py(indptr, indices, data, row, n, c_idx, c_data):  # pragma: no cover - numba
    """Row ``row`` of the CSR arrays appended to ``c_idx``, ``c_data`` from position ``n``
    (unsigned); returns the position after it."""
    p, end = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
    while p < end:
        c_idx[n] = indices[p]
        c_data[n] = data[p]
        n += np.uint64(1)
        p += np.uint64(1)
    return n


def _depths_py(indptr, indices, data, policy, A, depth):  # pragma: no cover - compiled by numba
    """Each state's number of steps to a cycle (absorbing states included) when it moves to
    its most likely successor other than itself under ``policy`` (rows ``s·A + policy[s]``;
    a Gauss-Seidel sweep solves a state's self-loop in place): ``depth`` filled in place.
    A sweep in increasing depth visits a state after the one it most likely moves to: the
    policy's flow, backwards."""
    S = policy.shape[0]
    succ = np.empty(S, np.int64)
    for s in range(S):
        row = s * A + policy[s]
        best = 0.0
        arg = s
        for p in range(indptr[row], indptr[row + 1]):
            if data[p] > best and indices[p] != s:  # a self-loop is solved in place
                best = data[p]
                arg = indices[p]
        succ[s] = arg
    state = np.zeros(S, np.int8)  # 0 unseen, 1 on the path, 2 done
    path = np.empty(S, np.int64)
    for s0 in range(S):
        if state[s0] == 2:
            continue
        n = 0
        s = s0
        while state[s] == 0:
            state[s] = 1
            path[n] = s
            n += 1
            s = succ[s]
        if state[s] == 1:  # the path closed a cycle at s: depth 0 on it
            i = n - 1
            while path[i] != s:
                depth[path[i]] = 0
                state[path[i]] = 2
                i -= 1
            depth[s] = 0
            state[s] = 2
            n = i
        for i in range(n - 1, -1, -1):
            t = path[i]
            depth[t] = depth[succ[t]] + 1
            state[t] = 2


def _reach_order_py(col_ptr, row_idx, A, sources, order):  # pragma: no cover - numba
    """The states in breadth-first order backwards from ``sources`` (``col_ptr``, ``row_idx``:
    the CSC structure of the ``(S·A, S)`` rows, so that column ``j`` lists the pairs that can
    move to ``j``): the sources, then the states one step from them under some action, and so
    on; states that reach no source last, in increasing order. ``order`` filled in place."""
    S = order.shape[0]
    seen = np.zeros(S, np.bool_)
    n = 0
    for s in sources:
        if not seen[s]:
            seen[s] = True
            order[n] = s
            n += 1
    head = 0
    while head < n:
        j = order[head]
        head += 1
        for p in range(col_ptr[j], col_ptr[j + 1]):
            s = row_idx[p] // A
            if not seen[s]:
                seen[s] = True
                order[n] = s
                n += 1
    for s in range(S):
        if not seen[s]:
            order[n] = s
            n += 1


def _band_py(indptr, indices, A, limit):  # pragma: no cover - compiled by numba
    """The largest ``|s - j|`` over the entries ``(r, j)`` of the CSR rows, ``s = r // A``
    (the state of row ``r = s·A + a``), or ``limit + 1`` as soon as one exceeds ``limit``."""
    band = 0
    for r in range(indptr.shape[0] - 1):
        s = r // A
        for p in range(indptr[r], indptr[r + 1]):
            d = abs(indices[p] - s)
            if d > band:
                if d > limit:
                    return limit + 1
                band = d
    return band


def _levels_py(indptr, indices, A, start, limit):  # pragma: no cover - compiled by numba
    """The levels of the breadth-first search from ``start`` over every action's transitions
    (CSR rows ``s·A + a``) until it has reached ``limit`` states, or all it can."""
    S = (indptr.shape[0] - 1) // A
    seen = np.zeros(S, np.bool_)
    queue = np.empty(min(S, limit + S), np.int64)
    seen[start] = True
    queue[0] = start
    head, n, levels = 0, 1, 0
    while head < n and n < limit:
        end = n  # this level's states are queue[head:end]
        levels += 1
        while head < end:
            s = queue[head]
            head += 1
            for p in range(indptr[s * A], indptr[s * A + A]):
                j = indices[p]
                if not seen[j]:
                    seen[j] = True
                    queue[n] = j
                    n += 1
    return levels


#: The compiled sweeps, bound by :data:`_JIT` when it compiles (numba resolves them when it
#: compiles the loop).
_jacobi_sweep = None
_copy_row = None

#: The compiled sweeps, compiled on first use when numba is installed.
_JIT = Jit("the compiled value-iteration sweeps", cache=True, nogil=True, error_model="numpy")
_JIT.register(_jacobi_sweep_py, name="_jacobi_sweep")
_JIT.register(_copy_row_py, name="_copy_row", inline="always")
_JIT.register(_jacobi_loop_py, name="_jacobi_loop")
_JIT.register(_value_sweep_py, name="_value_sweep")
_JIT.register(_linear_sweep_py, name="_linear_sweep")
_JIT.register(_depths_py, name="_depths")
_JIT.register(_reach_order_py, name="_reach_order")
_JIT.register(_levels_py, name="_levels")
_JIT.register(_band_py, name="_band")
_JIT.register(_chain_fixed_point_py, name="_chain_fixed_point")
_JIT.register(_policy_backup_py, name="_policy_backup")
_JIT.register(_gather_chain_py, name="_gather_chain")


def sweeps():
    """``{"_jacobi_sweep": ..., "_jacobi_loop": ..., "_value_sweep": ..., "_linear_sweep":
    ..., "_depths": ..., "_reach_order": ..., "_levels": ..., "_band": ...,
    "_chain_fixed_point": ..., "_policy_backup": ..., "_gather_chain": ...}`` compiled, or
    ``None`` without numba."""
    return _JIT.compiled_or_none()
