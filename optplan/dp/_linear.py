"""Policy evaluation for the discounted criterion: the linear solves of ``(I - discount
P_pi) v = r_pi`` and of its transpose (the discounted occupancy), and a deterministic
policy's chain as the solves read it (gathered CSR, or a dense model's rows read in place).

A solve tries, in order: a banded LU where every transition stays within
:data:`BANDED_MAX` of the diagonal, the compiled fixed point with MacQueen's extrapolation,
Gauss-Seidel in the chain's flow order, a factorization and restarted GMRES
(:func:`_krylov`).
"""

from __future__ import annotations

import numpy as np

from .._jit import Jit
from ..mdp import is_sparse
from ._common import EvaluationError, policy_model
from ._sweeps import sweeps as compiled_sweeps

#: Up to this many states a sparse model's policies are evaluated by a dense LU of the
#: (densified, at most 80 KB) chain; above it iteratively (a factorization only for a
#: slowly mixing chain): a random chain's sparse LU fills in (random models with 10
#: successors, A = 4: 113 ms by LU against 1.6 ms iteratively at S = 1,000; Taxi, S = 501:
#: 1.56 against 1.36 ms).
SPARSE_DIRECT_MAX_STATES = 100
#: Restart length and the largest number of restarts of one GMRES evaluation.
GMRES_RESTART = 30
GMRES_MAX_RESTARTS = 200
#: The iterative solves' fixed-point phase: at most this many iterations, left for GMRES
#: once an iteration shrinks the residual by less than this factor.
FIXED_POINT_MAX = 500
FIXED_POINT_SLOW = 0.9
#: Gauss-Seidel (compiled, :mod:`optplan.dp._sweeps`) in the flow order of the chain
#: (each state after its most likely successor; the transpose's in the reverse order) where
#: the fixed point mixes slowly: at most this many sweeps, abandoned (for a factorization)
#: once, after the largest change so far, the largest change of the last :data:`GS_WINDOW`
#: sweeps is above :data:`GS_SLOW` to the power :data:`GS_WINDOW` times the largest of the
#: window before (windows, not single sweeps, and only once the changes fall: on a gridworld
#: the occupancy's changes rise while its mass reaches the goal, 20 sweeps at discount 0.999).
GS_MAX_SWEEPS = 5_000
GS_WINDOW = 10
GS_SLOW = 0.98
#: A policy's chain whose entries all lie within this many places of the diagonal (in the
#: labels the solve holds: a birth-death queue's or a path's, in their own order) is solved
#: by a banded LU (:func:`_banded_solve`), exactly, in ``O(S band^2)``, where Gauss-Seidel
#: contracts slowly (by about 0.94 a sweep on the queue of the benchmark).
BANDED_MAX = 8


def _eye(P_pi):
    import scipy.sparse as sp

    return sp.identity(P_pi.shape[0], format="csr")


#: The residual, relative to ``max |r_pi|``, to which :func:`evaluate_discounted` solves a
#: sparse chain above :data:`SPARSE_DIRECT_MAX_STATES` states iteratively (its values are then
#: within ``EXACT_RESIDUAL max|r_pi| / (1 - discount)`` of the exact ones).
EXACT_RESIDUAL = 1e-13


def evaluate_discounted(
    P_pi, r_pi: np.ndarray, discount: float, tol: float | None = None
) -> np.ndarray:
    """``V = (I - discount P_pi)^{-1} r_pi``: a dense LU (a sparse chain of at most
    :data:`SPARSE_DIRECT_MAX_STATES` states densified for it: 80 KB at most, and a tenth of a
    sparse LU's overhead); for a larger sparse chain (where a random chain's LU fills in) the
    iterative solve of :func:`discounted_policy_iteration` to a residual (``inf``-norm) of
    ``tol``, by default :data:`EXACT_RESIDUAL` times ``max |r_pi|``."""
    if is_sparse(P_pi):
        if P_pi.shape[0] > SPARSE_DIRECT_MAX_STATES:
            if tol is None:
                tol = EXACT_RESIDUAL * (float(np.abs(r_pi).max()) or 1.0)
            return _krylov(P_pi, r_pi, discount, np.zeros_like(r_pi), tol, "V^pi", True)
        P_pi = P_pi.toarray()  # at most SPARSE_DIRECT_MAX_STATES states: 80 KB
    S = r_pi.shape[0]
    return np.linalg.solve(np.eye(S) - discount * P_pi, r_pi)


def discounted_occupancy(
    P_pi, start: np.ndarray, discount: float, iterative: bool = False, tol: float = 1e-13
) -> np.ndarray:
    """Normalized discounted state occupancy ``(1-discount) start^T (I - discount P_pi)^{-1}``.

    ``iterative``: an iterative solve of the transposed system (a mass-preserving fixed point,
    then GMRES if the chain mixes slowly) to ``tol`` (absolute, in the ``inf``-norm of the
    residual; the occupancy sums to 1), for chains too large to factorize.
    """
    b = (1.0 - discount) * start
    if iterative:
        PT = P_pi.T  # CSC: its mat-vec scatters, no transposed copy
        return _krylov(PT, b, discount, start.copy(), tol, "the discounted occupancy", False)
    if is_sparse(P_pi) and P_pi.shape[0] > SPARSE_DIRECT_MAX_STATES:
        from scipy.sparse.linalg import spsolve

        return spsolve((_eye(P_pi) - discount * P_pi).T.tocsc(), b)
    if is_sparse(P_pi):
        P_pi = P_pi.toarray()  # at most SPARSE_DIRECT_MAX_STATES states: 80 KB
    S = start.shape[0]
    return np.linalg.solve((np.eye(S) - discount * P_pi).T, b)


def _krylov(
    M, b: np.ndarray, discount: float, x0: np.ndarray, tol: float, what: str, stochastic: bool
):
    """Solve ``(I - discount M) x = b`` from ``x0`` until the residual's ``inf``-norm is at
    most ``tol``; ``M`` is a policy's chain (``stochastic``: rows sum to 1) or its transpose
    (columns sum to 1).

    First the fixed-point iteration ``y = b + discount M x``, one mat-vec an iteration, made
    to converge at the chain's mixing rate instead of at ``discount``: for the chain, by
    MacQueen's extrapolation (``x' = y + discount / (1 - discount) * mid(y - x)`` has residual
    at most ``discount * span(y - x) / 2``: the slow mode, the constant vector, is removed);
    for the transpose, by starting from ``x0`` rescaled to the solution's sum
    ``sum(b) / (1 - discount)``, which the iteration keeps, so the slow mode (the stationary
    distribution) is never excited. When the increments shrink slowly (a slowly mixing
    chain) a factorization takes over (:func:`_direct`), checked on the true residual, and
    restarted GMRES from there if that is above ``tol``. :class:`EvaluationError` when GMRES
    stalls above it."""
    x = x0
    if not stochastic:
        total = float(x.sum())
        if total > 0:
            x = x * (float(b.sum()) / (1.0 - discount) / total)
    if isinstance(M, SparseChain):  # the same iterations compiled, one pass each
        m = M.matrix
        out = _banded_solve((m.indptr, m.indices, m.data), b, discount, M.transposed)
        if out is not None:  # a banded chain (a queue, a path): exact, in O(S band^2)
            return out
        x = np.array(x, dtype=np.float64)
        if M.fixed_point(np.ascontiguousarray(b, dtype=np.float64), discount, x, tol):
            return x
        M = M.gathered()  # slowly mixing: the factorizations and GMRES need it
        return _slow(M, b, discount, x, tol, what, stochastic)
    prev = np.inf
    for it in range(FIXED_POINT_MAX):
        y = b + discount * (M @ x)
        d = y - x
        lo, hi = float(d.min()), float(d.max())
        if stochastic:
            size = discount * (hi - lo) / 2  # the residual of the extrapolated y
            x = y + (discount / (1.0 - discount)) * 0.5 * (lo + hi)
        else:
            size = max(-lo, hi)  # the residual of x
            if size <= tol:
                return x
            x = y
        if size <= tol:
            return x
        if it >= 3 and size > FIXED_POINT_SLOW * prev:
            break
        prev = size
    return _slow(M, b, discount, x, tol, what, stochastic)


def _slow(M, b: np.ndarray, discount: float, x: np.ndarray, tol: float, what: str, stochastic):
    """:func:`_krylov` once the fixed point contracts slowly: Gauss-Seidel, a factorization,
    GMRES, from ``x``."""
    if is_sparse(M) and compiled_sweeps() is not None:
        out = _gauss_seidel(M, b, discount, x, tol, stochastic)
        if out is not None:
            return out
    x = _direct(M, b, discount, x)
    return _gmres(M, b, discount, x, tol, what)


def flow_order(rows, policy: np.ndarray, n_actions: int) -> np.ndarray:
    """The states, each after its most likely successor under ``policy`` (rows ``s·A +
    policy[s]`` of the CSR ``rows``): increasing number of such steps to a cycle or an
    absorbing state. A Gauss-Seidel sweep of the values in this order follows a
    goal-directed flow backwards, from the goal across the state space in one sweep."""
    depth = np.empty(policy.shape[0], dtype=np.int64)
    policy = np.ascontiguousarray(policy, dtype=np.intp)
    compiled_sweeps()["_depths"](rows.indptr, rows.indices, rows.data, policy, n_actions, depth)
    return np.argsort(depth, kind="stable")


def _gauss_seidel(M, b: np.ndarray, discount: float, x: np.ndarray, tol: float, stochastic: bool):
    """``(I - discount M)^{-1} b`` by Gauss-Seidel sweeps from ``x`` (compiled) in the flow
    order of the chain (``M``, or ``M.T`` when ``M`` is a chain's transpose, visited in the
    reverse order), the system relabelled in that order (a sweep reads memory in order), to
    a residual ``inf``-norm of at most ``tol``: a sweep whose change is ``delta`` leaves a
    residual of at most ``discount * delta * max_s sum_j M_sj`` (each state's update solved
    its own equation with the values it read). ``None`` when the sweeps contract too slowly
    (see :data:`GS_SLOW`) or do not get there in :data:`GS_MAX_SWEEPS`."""
    chain = M if stochastic else M.T
    chain = chain.tocsr()
    S = chain.shape[0]
    order = flow_order(chain, np.zeros(S, dtype=np.intp), 1)
    rows = chain if stochastic else M.tocsr()
    if not stochastic:
        order = order[::-1].copy()
    if stochastic:  # rows sum to 1 (to the 1e-9 TabularMDP checks)
        reach = 1.0 + 1e-9
    else:  # the chain's column sums
        reach = float(np.bincount(chain.indices, chain.data, minlength=S).max()) if S else 0.0
    kernels = compiled_sweeps()
    system = _chain_buffers(rows, S, 1)
    zero = np.zeros(S, dtype=np.intp)
    kernels["_gather_chain"](rows.indptr, rows.indices, rows.data, 1, zero, order,
                             _inverse(order, S), *system)  # fmt: skip
    # the transpose from 0: its sweeps, against the flow, carry each state's mass to the goal
    # in one pass; from the fixed point's iterate they rise and fall in waves (a gridworld at
    # discount 0.999: 81 sweeps from 0, a factorization after 31 from the iterate)
    y = np.array(x, dtype=np.float64)[order] if stochastic else np.zeros(S)
    b = np.ascontiguousarray(b, dtype=np.float64)[order]
    ident = np.arange(S)
    changes, peak, since = [], 0.0, 0
    for _ in range(GS_MAX_SWEEPS):
        delta = kernels["_linear_sweep"](*system, b, discount, y, ident)
        if not np.isfinite(delta):
            return None
        if discount * delta * reach <= tol:
            return _scattered(y, order)
        changes.append(delta)
        if delta >= peak:  # still rising (the occupancy's mass on its way to the goal)
            peak, since = delta, len(changes)
        if len(changes) - since >= 2 * GS_WINDOW:  # falling: window against window
            last, before = max(changes[-GS_WINDOW:]), max(changes[-2 * GS_WINDOW : -GS_WINDOW])
            if last > GS_SLOW**GS_WINDOW * before:
                return None
    return None


def _scattered(x: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``y`` with ``y[order[i]] = x[i]``: values in sweep order back in state order."""
    y = np.empty_like(x)
    y[order] = x
    return y


def _bandwidth(indptr, indices, n_actions: int = 1) -> int:
    """The largest ``|s - j|`` over the entries of CSR rows ``s·A + a`` (a square chain's
    ``|i - j|`` when ``n_actions`` is 1), or ``BANDED_MAX + 1`` once one is above
    :data:`BANDED_MAX` (compiled: it stops at the first such entry)."""
    return int(compiled_sweeps()["_band"](indptr, indices, n_actions, BANDED_MAX))


def _banded_solve(csr, b: np.ndarray, discount: float, transposed: bool = False):
    """``(I - discount C)^{-1} b``, ``C`` the square chain of the CSR arrays ``csr = (indptr,
    indices, data)`` (``transposed``: its transpose), by a banded LU with partial pivoting
    (LAPACK ``gbsv``, ``O(S band^2)``) when every entry of ``C`` lies within
    :data:`BANDED_MAX` of the diagonal (a birth-death queue, a path), else ``None``."""
    from scipy.linalg import solve_banded

    indptr = csr[0]
    S, nnz = indptr.size - 1, int(indptr[-1])
    indices, data = csr[1][:nnz], csr[2][:nnz]
    band = _bandwidth(indptr, indices)
    if band > BANDED_MAX:
        return None
    rows = np.repeat(np.arange(S), np.diff(indptr))
    i, j = (indices, rows) if transposed else (rows, indices)
    # LAPACK's band storage: entry (i, j) at ab[band + i - j, j]; duplicates add up
    flat = (band + i - j) * S + j
    ab = np.bincount(flat, -discount * data, minlength=(2 * band + 1) * S).reshape(-1, S)
    ab[band] += 1.0
    with np.errstate(all="ignore"):
        try:
            x = solve_banded((band, band), ab, b, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return None
    return x if np.isfinite(x).all() else None


def _direct(M, b: np.ndarray, discount: float, x: np.ndarray) -> np.ndarray:
    """``(I - discount M)^{-1} b`` by a factorization (SuperLU for a sparse ``M``), for the
    slowly mixing chains the fixed point leaves: those are the structured ones (grids, paths,
    cycles), whose sparse LU fills in little, while random chains, whose LU fills in, mix fast
    and never get here. ``x`` (the iterate so far) when the factorization fails."""
    with np.errstate(all="ignore"):
        try:
            if is_sparse(M):
                from scipy.sparse.linalg import spsolve

                out = spsolve((_eye(M) - discount * M).tocsc(), b)
            else:
                out = np.linalg.solve(np.eye(b.size) - discount * M, b)
        except (np.linalg.LinAlgError, RuntimeError, MemoryError):
            return x
    return out if np.isfinite(out).all() else x


def _gmres(M, b: np.ndarray, discount: float, x0: np.ndarray, tol: float, what: str):
    from scipy.sparse.linalg import LinearOperator, gmres

    S = b.size
    op = LinearOperator((S, S), matvec=lambda x: x - discount * (M @ x), dtype=np.float64)
    x = x0
    for _ in range(4):  # GMRES's stop is on the 2-norm: recheck the inf-norm, tighten if short
        res = b - op.matvec(x)
        err = float(np.abs(res).max())
        if err <= tol:
            return x
        # ||res||_2 <= tol guarantees the inf-norm
        dx, _ = gmres(
            op, res, rtol=0.0, atol=tol, restart=GMRES_RESTART, maxiter=GMRES_MAX_RESTARTS
        )
        x = x + dx
    res = b - op.matvec(x)
    err = float(np.abs(res).max())
    if err <= tol:
        return x
    raise EvaluationError(
        f"{what}: GMRES stalled at residual {err:.3g} above the {tol:.3g} asked "
        f"({GMRES_MAX_RESTARTS} restarts of {GMRES_RESTART})"
    )


def _inverse(order: np.ndarray, S: int) -> np.ndarray:
    inv = np.empty(S, dtype=np.intp)
    inv[order] = np.arange(S)
    return inv


def _chain_matvec_py(rows, n_actions, policy, x, out):
    """``out[s] = sum_s' rows[s·A + policy[s], s'] x[s']``: ``P_pi @ x`` row by row."""
    for s in range(policy.shape[0]):
        row = rows[s * n_actions + policy[s]]
        acc = 0.0
        for j in range(x.shape[0]):
            acc += row[j] * x[j]
        out[s] = acc


def _chain_rmatvec_py(rows, n_actions, policy, y, out):
    """``out[s'] = sum_s y[s] rows[s·A + policy[s], s']``: ``P_pi^T @ y`` row by row."""
    out[:] = 0.0
    for s in range(policy.shape[0]):
        row = rows[s * n_actions + policy[s]]
        w = y[s]
        for j in range(out.shape[0]):
            out[j] += w * row[j]


#: The chain kernels, compiled on first use when numba is installed (the ``jit`` extra);
#: reassociated sums vectorize (each product is memory-bound, as BLAS's on a gathered copy).
_JIT = Jit("the compiled discounted policy chains", cache=True, nogil=True, error_model="numpy")
_JIT.register(_chain_matvec_py, name="_chain_matvec", fastmath={"reassoc", "contract", "nsz"})
_JIT.register(_chain_rmatvec_py, name="_chain_rmatvec", fastmath={"reassoc", "contract", "nsz"})


class DenseChain:
    """A deterministic policy's chain ``P_pi`` of a dense model, read in place from its
    ``(S·A, S)`` rows (row ``s·A + policy[s]`` is ``P_pi[s]``): ``chain @ x`` and
    ``chain.T @ y`` are compiled loops over those rows, so no ``S x S`` copy is made for a
    policy (at S = 6,000, A = 4 the gather copies 288 MB, most of its time spent in the
    fresh memory's page faults). :func:`_krylov` and :func:`discounted_occupancy` take it as
    a matrix; ``gamma * chain`` (the factorization a slowly mixing chain falls back to) and
    ``numpy.asarray(chain)`` gather the rows."""

    __array_ufunc__ = None  # numpy defers ``gamma * chain`` to __rmul__

    def __init__(self, rows: np.ndarray, n_actions: int, policy: np.ndarray, kernels, T=False):
        self.rows, self.n_actions = rows, n_actions
        self.policy = np.ascontiguousarray(policy, dtype=np.intp)
        self.kernels, self.transposed = kernels, T
        S = self.policy.shape[0]
        self.shape = (S, S)
        self.ndim = 2

    @property
    def T(self) -> DenseChain:
        return DenseChain(self.rows, self.n_actions, self.policy, self.kernels, not self.transposed)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        out = np.empty(self.shape[0])
        name = "_chain_rmatvec" if self.transposed else "_chain_matvec"
        self.kernels[name](self.rows, self.n_actions, self.policy, x, out)
        return out

    dot = __matmul__

    def toarray(self) -> np.ndarray:
        S = self.shape[0]
        P_pi = self.rows[np.arange(S) * self.n_actions + self.policy]
        return P_pi.T if self.transposed else P_pi

    def __array__(self, dtype=None, copy=None):
        out = self.toarray()
        return out if dtype is None else out.astype(dtype)

    def __rmul__(self, c) -> np.ndarray:
        return c * self.toarray()

    __mul__ = __rmul__


class SparseChain:
    """A deterministic policy's chain ``P_pi`` of a sparse model as a CSR matrix (its rows
    gathered once), whose :func:`_krylov` fixed point runs compiled (:meth:`fixed_point`:
    each iteration one pass, no temporaries); everything else (``@``, ``.T``, the
    factorizations and GMRES that a slowly mixing chain falls back to) takes
    :attr:`matrix`."""

    def __init__(self, matrix, kernels, T: bool = False):
        self.matrix, self.kernels, self.transposed = matrix, kernels, T
        self.shape = matrix.shape
        self.ndim = 2

    @property
    def T(self) -> SparseChain:
        return SparseChain(self.matrix, self.kernels, not self.transposed)

    def gathered(self):
        """The chain as a CSR matrix (its transpose, CSC, when transposed)."""
        return self.matrix.T if self.transposed else self.matrix

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        return self.gathered() @ x

    def fixed_point(self, b: np.ndarray, discount: float, x: np.ndarray, tol: float) -> bool:
        """:func:`_krylov`'s fixed-point phase from ``x`` (updated in place): whether it
        reached ``tol``."""
        y = np.empty_like(x)
        m = self.matrix
        _, done = self.kernels["_chain_fixed_point"](
            m.indptr, m.indices, m.data, b, discount, x, y, tol, FIXED_POINT_MAX,
            FIXED_POINT_SLOW, self.transposed,
        )  # fmt: skip
        return bool(done)


class _GatheredChains:
    """:func:`discounted_policy_iteration`'s chains on a CSR model with the compiled sweeps:
    each policy's chain gathered into one set of CSR arrays (:func:`_chain_buffers`), and the
    improvement (backup, greedy, both residuals) in one compiled pass that gathers the next
    policy's chain as it goes."""

    def __init__(self, rows, R, mask, kernels):
        S, A = R.shape
        self.rows, self.R, self.kernels = rows, R, kernels
        self.q, self.greedy = np.empty((S, A)), np.empty(S, dtype=np.intp)
        self.mask = np.ascontiguousarray(mask)
        self.R_c = np.ascontiguousarray(R, dtype=np.float64)
        self.every = bool(mask.all())
        self.buffers = _chain_buffers(rows, S, A)
        #: The chain of the last improvement's new policy and its rewards.
        self.next = None

    def _chain(self):
        c_ptr, c_idx, c_data = self.buffers
        nnz = int(c_ptr[-1])
        return SparseChain(_csr((c_data[:nnz], c_idx[:nnz], c_ptr), self.rows), self.kernels)

    def first(self, policy):
        """``(policy, P_pi, r_pi)`` of the first policy (``policy`` as ``intp``)."""
        policy = np.ascontiguousarray(policy, dtype=np.intp)
        rows = self.rows
        ident = np.arange(policy.shape[0])
        self.kernels["_gather_chain"](
            rows.indptr, rows.indices, rows.data, self.R.shape[1], policy, ident, ident,
            *self.buffers,
        )  # fmt: skip
        return policy, self._chain(), self.R[np.arange(policy.shape[0]), policy]

    def improve(self, discount, policy, values):
        """``(policy, values, q, new, bellman, evaluation_residual)``; where the policy
        changes, :attr:`next` is the new one's chain. The next chain overwrites the last one's
        arrays: its evaluation is done, and it is returned only when the policy repeats (the
        same rows written again)."""
        policy = np.ascontiguousarray(policy, dtype=np.intp)
        values = np.ascontiguousarray(values, dtype=np.float64)
        rows = self.rows
        bellman, residual, same = self.kernels["_policy_backup"](
            (rows.indptr, rows.indices, rows.data), self.R_c, self.mask, self.every, discount,
            values, policy, self.q, self.greedy, self.buffers,
        )  # fmt: skip
        new = policy if same else self.greedy.copy()
        if not same:
            self.next = (self._chain(), self.R[np.arange(new.shape[0]), new])
        return policy, values, self.q, new, bellman, residual


def _chain_buffers(rows, S: int, A: int) -> tuple:
    """CSR arrays long enough for any deterministic policy's chain (each state's longest
    row), for :func:`discounted_policy_iteration` to gather each policy's chain into."""
    longest = int(np.diff(rows.indptr).reshape(S, A).max(axis=1).sum())
    return (
        np.empty(S + 1, dtype=rows.indptr.dtype),
        np.empty(longest, dtype=rows.indices.dtype),
        np.empty(longest),
    )


def _csr(arrays, rows):
    """A CSR matrix on ``(data, indices, indptr)`` as they are (no copy, no check: they come
    from ``rows``'s own rows), ``rows.shape[1]`` columns."""
    import scipy.sparse as sp

    data, indices, indptr = arrays
    out = sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, rows.shape[1]), copy=False)
    out.has_sorted_indices = rows.has_sorted_indices
    return out


def sparse_chain(rows, R: np.ndarray, policy: np.ndarray):
    """``(P_pi, r_pi)`` of a deterministic policy of a sparse model (CSR ``(S·A, S)`` rows):
    ``P_pi`` a :class:`SparseChain` when numba is installed, else the CSR chain
    (:func:`~optplan.dp._common.policy_model`)."""
    P_pi, r_pi = policy_model(rows, R, policy)
    kernels = compiled_sweeps() if P_pi.format == "csr" else None
    return (P_pi if kernels is None else SparseChain(P_pi, kernels)), r_pi


def dense_chain(P, R: np.ndarray, policy: np.ndarray):
    """``(P_pi, r_pi)`` of a deterministic policy of a dense model (``P`` ``(S, A, S)`` or
    its ``(S·A, S)`` rows): ``P_pi`` a :class:`DenseChain` read in place when numba is
    installed, else the gathered ``S x S`` array (:func:`~optplan.dp._common.policy_model`)."""
    S, A = R.shape
    rows = P if P.ndim == 2 else P.reshape(S * A, S)
    kernels = _JIT.compiled_or_none() if rows.flags.c_contiguous else None
    if kernels is None:
        return policy_model(rows, R, policy)
    return DenseChain(rows, A, policy, kernels), R[np.arange(S), policy]
