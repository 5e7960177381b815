"""The discounted criterion: policy evaluation, the discounted occupancy, value iteration and
policy iteration with an inexact, warm-started Krylov evaluation for large or sparse models
(Howard's exact policy iteration is :mod:`optplan.dp.policy_iteration`'s, shared with the
average reward).

Every function here takes the transition law either dense ``(S, A, S)`` or as the
``(S·A, S)`` matrix of rows ``s·A + a`` (dense or ``scipy.sparse`` CSR: a sparse
:class:`~optplan.mdp.TabularMDP`'s ``P_rows``); a policy's chain is then a row gather of it,
and nothing is densified.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jit import Jit
from ..mdp import is_sparse
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL
from ._common import (
    EvaluationError,
    _gather_rows,
    backup,
    greedy,
    masked,
    policy_model,
    start_policy,
)
from ._sweeps import sweeps as compiled_sweeps

#: From this many states a dense model's policy iteration (in the discounted fast path)
#: evaluates each policy iteratively, warm-started, instead of factorizing
#: ``I - discount P_pi`` (O(S^3) per policy): on random dense models with A = 4, discount
#: 0.95, it is ahead of the factorization from S = 100 on (medians of 7 models: 0.46 ms
#: against 0.65 ms at S = 100, 0.75 ms against 1.40 ms at S = 150; 0.47 against 0.45 ms at
#: S = 80).
DENSE_ITERATIVE_MIN_STATES = 100
#: Up to this many states a sparse model's policies are evaluated by a dense LU of the
#: (densified, at most 80 KB) chain; above it iteratively (a factorization only for a
#: slowly mixing chain): a random chain's sparse LU fills in (random models with 10
#: successors, A = 4: 113 ms by LU against 1.6 ms iteratively at S = 1,000; Taxi, S = 501:
#: 1.56 against 1.36 ms).
SPARSE_DIRECT_MAX_STATES = 100
#: Restart length and the largest number of restarts of one GMRES evaluation.
GMRES_RESTART = 30
GMRES_MAX_RESTARTS = 200
#: Value-iteration sweeps that pick policy iteration's first policy: at most this many, and
#: they stop once the greedy policy changed in at most :data:`WARM_FRACTION` of the states for
#: :data:`WARM_STABLE` sweeps in a row. A sweep is one mat-vec with ``P``; on Taxi (S = 501)
#: 18 of them leave one policy evaluation instead of 16; on random models with 10 successors
#: about 5 leave three or four.
WARM_SWEEPS = 50
WARM_FRACTION = 1e-2
WARM_STABLE = 2
#: The iterative solves' fixed-point phase: at most this many iterations, left for GMRES
#: once an iteration shrinks the residual by less than this factor.
FIXED_POINT_MAX = 500
FIXED_POINT_SLOW = 0.9
#: First evaluation of the inexact policy iteration: residual ``LOOSE_EVAL`` times the reward
#: scale; later ones :data:`EVAL_SHRINK` times the last Bellman residual, down to what the
#: certificate needs.
LOOSE_EVAL = 1e-3
EVAL_SHRINK = 0.01
#: Gauss-Seidel (compiled, :mod:`optplan.dp._sweeps`) in the flow order of the chain
#: (each state after its most likely successor; the transpose's in the reverse order) where
#: the fixed point mixes slowly: at most this many sweeps, abandoned (for a factorization)
#: once :data:`GS_WINDOW` sweeps shrank the sweep's change by less than
#: :data:`GS_SLOW` a sweep on average.
GS_MAX_SWEEPS = 5_000
GS_WINDOW = 10
GS_SLOW = 0.98
#: Flow-ordered modified policy iteration (:func:`_flow_iteration`) starts policy iteration
#: on a goal-directed sparse model: after each Gauss-Seidel sweep of value iteration, which
#: changed the values by at most ``delta``, the greedy policy's chain is evaluated by
#: Gauss-Seidel sweeps in its flow order until one changes them by at most this times
#: ``delta`` (the slip of a gridworld leaves a flow-ordered sweep contracting by about 0.8
#: at discount 0.99: value iteration alone took 78 sweeps of all the actions on the 300 x 300
#: gridworld, this 10 of them and 62 of the chain, a quarter of their cost each).
FLOW_SHRINK = 0.1
#: Gauss-Seidel sweeps of one of those evaluations at most.
FLOW_EVAL_SWEEPS = 1_000
#: It hands over to policy iteration once the value sweep's change is above :data:`FLOW_SLOW`
#: times the largest of the :data:`FLOW_WINDOW` before it, or after :data:`FLOW_MAX_ITER`.
FLOW_SLOW = 0.5
FLOW_WINDOW = 4
FLOW_MAX_ITER = 500
#: A policy's chain whose entries all lie within this many places of the diagonal (in the
#: labels the solve holds: a birth-death queue's or a path's, in their own order) is solved
#: by a banded LU (:func:`_banded_solve`), exactly, in ``O(S band^2)``, where Gauss-Seidel
#: contracts slowly (by about 0.94 a sweep on the queue of the benchmark).
BANDED_MAX = 8
#: :func:`_structured`: a model whose breadth-first search from state 0 needs more than
#: :data:`FLOW_LEVELS` levels to reach :data:`PROBE_STATES` states mixes slowly, and its
#: solve starts with :func:`_flow_iteration`.
FLOW_LEVELS = 32
PROBE_STATES = 4_096
#: Its value sweeps keep a state's action on a relative tie of this times their target (a
#: held action worse by ``tie |V|`` drags the evaluated values down by up to that, which the
#: next value sweep undoes: above the target, a loop).
FLOW_TIE = 0.1


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
    (the last change above :data:`GS_SLOW` to the power :data:`GS_WINDOW` times the largest
    of the :data:`GS_WINDOW` before it) or do not get there in :data:`GS_MAX_SWEEPS`."""
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
    y = np.array(x, dtype=np.float64)[order]
    b = np.ascontiguousarray(b, dtype=np.float64)[order]
    ident = np.arange(S)
    changes = []
    for _ in range(GS_MAX_SWEEPS):
        delta = kernels["_linear_sweep"](*system, b, discount, y, ident)
        if not np.isfinite(delta):
            return None
        if discount * delta * reach <= tol:
            return _scattered(y, order)
        changes.append(delta)
        if len(changes) > GS_WINDOW and delta > GS_SLOW**GS_WINDOW * max(
            changes[-1 - GS_WINDOW : -1]
        ):
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


class DiscountedPolicyIteration(NamedTuple):
    """Outcome of :func:`discounted_policy_iteration`.

    ``bound`` certifies the answer: ``||values - V*||_inf <= bound`` and the policy's own
    values are within ``bound`` of ``values`` (both from Bellman residuals, Puterman Prop.
    6.6.1: ``||V - V*|| <= ||T V - V|| / (1 - gamma)``). ``evaluations`` counts the policy
    evaluations (more than the policies when an evaluation was tightened)."""

    status: str
    message: str
    policy: np.ndarray
    values: np.ndarray
    q: np.ndarray
    bound: float
    iterations: int
    evaluations: int
    iterative: bool
    #: The policy's chain as the evaluations used it (``None`` when it is not at hand): the
    #: discounted occupancy can reuse it.
    chain: object = None


def discounted_policy_iteration(
    P,
    R: np.ndarray,
    mask: np.ndarray,
    discount: float,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
    tol: float = 1e-10,
    evaluation: str = "auto",
    warm_sweeps: int = WARM_SWEEPS,
) -> DiscountedPolicyIteration:
    """Policy iteration for the discounted criterion, on dense or sparse models.

    Each policy's chain ``P_pi`` is a row gather of ``P`` (no loop over states). It is
    evaluated exactly (``evaluation="direct"``: dense LU, or SuperLU for a sparse chain) or
    inexactly (``"iterative"``: restarted GMRES on ``I - discount P_pi``, warm-started from
    the last values, to a residual that starts at ``LOOSE_EVAL`` times the reward scale and
    follows a tenth of the last Bellman residual down: inexact policy iteration, as madupite
    does). ``"auto"``: direct below :data:`DENSE_ITERATIVE_MIN_STATES` states (dense) or up to
    :data:`SPARSE_DIRECT_MAX_STATES` (sparse), iterative above.

    The improvement is greedy, keeping the incumbent on relative ties (``1e-12``). Direct:
    stops when the policy repeats (Howard). Iterative: stops once the certificate ``bound``
    (see :class:`DiscountedPolicyIteration`) is at most ``tol * max |V|`` (``tol`` absolute
    when ``V = 0``) and the policy repeats; an evaluation that cannot get there (GMRES stalls)
    ends with status ``numerical_error``.

    Parameters
    ----------
    P : array (S, A, S), or (S·A, S) dense or scipy.sparse CSR (rows ``s·A + a``)
    R, mask : arrays (S, A)
    discount : float in [0, 1)
    policy : array (S,) of int, optional
        Warm start (ignored when it takes an inadmissible action). Without one, up to
        ``warm_sweeps`` sweeps of value iteration from ``V = 0`` choose the first policy
        (their greedy one, once it held for :data:`WARM_STABLE` sweeps) and the first
        evaluation starts from their values.
    max_iter : int
        Largest number of improvements.
    tol : float
        Relative accuracy certified by the iterative evaluation.
    evaluation : {"auto", "direct", "iterative"}
    """
    S, A = R.shape
    rows = P if P.ndim == 2 else P.reshape(S * A, S)
    sparse = is_sparse(rows)
    if evaluation == "auto":
        iterative = S > SPARSE_DIRECT_MAX_STATES if sparse else S >= DENSE_ITERATIVE_MIN_STATES
    else:
        iterative = evaluation == "iterative"
    values = np.zeros(S)
    every = bool(mask.all())
    r_scale = float(np.abs(np.where(mask, R, 0.0)).max()) or 1.0
    vi_sweeps, how = 0, "value iteration"
    if policy is None and warm_sweeps > 0:
        gauss_seidel = sparse and iterative and compiled_sweeps() is not None
        policy, values, vi_sweeps, how = _first_policy(
            rows, R, mask, discount, warm_sweeps, tol, gauss_seidel, r_scale
        )
    policy = start_policy(R, mask, policy)
    idx = np.arange(S)
    if vi_sweeps:
        done = _certified(rows, R, mask, discount, policy, values, tol)
        if isinstance(done, DiscountedPolicyIteration):
            return done._replace(message=how.format(vi_sweeps))
        policy = done
    eval_tol = LOOSE_EVAL * r_scale
    q = None
    bound = np.inf
    evaluations = 0
    P_pi = None
    kernels = compiled_sweeps() if sparse and iterative and rows.format == "csr" else None
    gathered = None if kernels is None else _GatheredChains(rows, R, mask, kernels)
    chain = dense_chain if iterative and not sparse else policy_model
    if gathered is not None:  # each policy's chain gathered into one set of arrays
        policy, P_pi, r_pi = gathered.first(policy)
    for it in range(1, max_iter + 1):
        if P_pi is None:
            P_pi, r_pi = chain(rows, R, policy)
        try:
            evaluations += 1
            if iterative:
                values = _krylov(P_pi, r_pi, discount, values, eval_tol, "policy evaluation", True)
            else:
                values = evaluate_discounted(P_pi, r_pi, discount)
                if not np.isfinite(values).all():
                    raise EvaluationError("the policy's linear system is singular")
        except EvaluationError as exc:
            message = f"discounted policy iteration, iteration {it}: {exc}"
            q = q if q is not None else np.full((S, A), np.nan)
            return DiscountedPolicyIteration(
                NUMERICAL_ERROR, message, policy, values, q, np.inf, it, evaluations, iterative
            )
        if gathered is not None:  # backup, greedy and both residuals in one pass
            policy, values, q, new, bellman, evaluation_residual = gathered.improve(
                discount, policy, values
            )
        else:
            q = backup(rows, R, values, discount)
            qm = q if every else masked(q, mask)
            new = greedy(qm, policy, tol=1e-12)
            top = qm.max(axis=1)
            own = q[idx, policy]
            bellman = float(np.abs(top - values).max())
            evaluation_residual = float(np.abs(own - values).max())
        span = 1.0 - discount
        bound = max(bellman, evaluation_residual) / span
        scale = float(np.abs(values).max()) or 1.0
        same = bool((new == policy).all())  # NaN residuals: never certified below
        if same and (not iterative or bound <= tol * scale):
            return DiscountedPolicyIteration(
                OPTIMAL, "", policy, values, q, bound, it, evaluations, iterative, P_pi
            )
        if iterative:
            target = 0.5 * tol * scale * span
            eval_tol = max(target, min(eval_tol, EVAL_SHRINK * bellman)) if not same else target
        if not same:
            policy = new
            P_pi = None
            if gathered is not None:
                P_pi, r_pi = gathered.next
    message = f"discounted policy iteration did not stop in {max_iter} iterations"
    return DiscountedPolicyIteration(
        MAX_ITER, message, policy, values, q, bound, max_iter, evaluations, iterative
    )


def _first_policy(rows, R, mask, discount, warm_sweeps, tol, gauss_seidel, r_scale):
    """:func:`discounted_policy_iteration`'s first policy and values: by
    :func:`_flow_iteration` (compiled, sparse) on a slowly mixing model (:func:`_structured`)
    or where the model keeps its start (:func:`_kept_start`), else ``warm_sweeps`` Jacobi
    sweeps of value iteration from 0. Returns ``(policy, values, iterations, how)``;
    ``iterations`` is 0 unless the values met their target."""
    every = bool(mask.all())
    if gauss_seidel:
        kept = _kept_start(rows, R, mask, discount)
        if kept or _structured(rows, R.shape[1]):
            # the certificate asks bound <= tol * max|V|, not known yet: aim at tol times
            # max(1, max |V|) as it goes (a sweep changing by delta leaves a Bellman
            # residual of at most discount * delta)
            target = 0.5 * tol * (1.0 - discount)
            start = _kept(R, mask, discount) if kept else np.zeros(R.shape[0])
            out = _flow_iteration(rows, R, mask, every, discount, start, FLOW_MAX_ITER, target)
            return (*out, "modified policy iteration (Gauss-Seidel, flow order): {} iterations")
    target = 0.5 * tol * r_scale * (1.0 - discount)
    return (
        *_warm_start(rows, R, mask, discount, warm_sweeps, target),
        "value iteration: {} sweeps",
    )


def _structured(rows, n_actions: int) -> bool:
    """Whether the model mixes slowly: the breadth-first search from state 0 over every
    action's transitions needs more than :data:`FLOW_LEVELS` levels to reach
    :data:`PROBE_STATES` states (or all of them). A random model with 4 actions of 10
    successors reaches 4,096 states in 3 levels; a gridworld needs 90 from its corner, a
    queue or a path 4,096."""
    levels = compiled_sweeps()["_levels"](rows.indptr, rows.indices, n_actions, 0, PROBE_STATES)
    return int(levels) > FLOW_LEVELS


def _certified(rows, R, mask, discount, policy, values, tol):
    """Value iteration met its target: certify ``values`` (the Jacobi Bellman residual of
    their greedy policy). The optimal result (its message to be set) when the bound is at most
    ``tol * max |V|``, else the greedy policy to start policy iteration from."""
    q = backup(rows, R, values, discount)
    qm = q if bool(mask.all()) else masked(q, mask)
    new = greedy(qm, policy, tol=1e-12)
    bellman = float(np.abs(qm.max(axis=1) - values).max())
    own = float(np.abs(q[np.arange(R.shape[0]), new] - values).max())
    bound = max(bellman, own) / (1.0 - discount)
    if bound <= tol * (float(np.abs(values).max()) or 1.0):
        return DiscountedPolicyIteration(OPTIMAL, "", new, values, q, bound, 0, 0, True)
    return new


def _flow_iteration(rows, R, mask, every, discount, start, max_iter, target):
    """Modified policy iteration in flow order (compiled) from the values ``start``:
    ``(greedy policy, values, iterations)``.

    The model is first relabelled in :func:`reach_order` from the states of the best kept
    reward (:func:`_kept`: the goals), so that a sweep in label order visits each state after
    states nearer a goal, reading memory in order. Each iteration is one Gauss-Seidel sweep
    of value iteration, in label order and in reverse on alternate iterations (a policy's
    frontier moves across the state space in one sweep either way: towards the goals, or
    away from them where another reward, further from them, wins), which gives the greedy
    policy and the sweep's change ``delta``; then that policy's evaluation: exact by a
    banded LU when the model's entries lie within :data:`BANDED_MAX` of the diagonal in
    these labels (a queue, a path), else by Gauss-Seidel sweeps of its chain relabelled in
    its :func:`flow_order` (a sweep carries the values from the goal across the state space
    in one pass) until one changes the values by at most :data:`FLOW_SHRINK` ``* delta``.

    ``iterations`` is 0 when it handed over to policy iteration (see :data:`FLOW_SLOW`),
    else the iterations after which the value sweep met ``discount * delta <= target *
    max(1, max |V|)`` (the Bellman residual is then at most that)."""
    S, A = R.shape
    kept = _kept(R, mask, discount)
    labels = reach_order(rows, np.flatnonzero(kept == kept.max()), A)
    rows, R, mask = _permuted(rows, R, mask, labels)
    V, policy = start[labels], np.zeros(S, dtype=np.intp)
    sweep = compiled_sweeps()["_value_sweep"]
    csr = (rows.indptr, rows.indices, rows.data)
    evaluate = _FlowEvaluation(rows, R, discount)
    directions = (np.arange(S), np.arange(S)[::-1].copy())
    changes, done = [], 0
    tie = min(1e-12, FLOW_TIE * target)  # the incumbent's loss must stay below the target
    for it in range(1, max_iter + 1):
        visit = directions[(it - 1) % 2]
        delta = sweep(*csr, R, mask, every, discount, V, visit, policy, tie)
        if not np.isfinite(delta):
            break
        scale = max(1.0, float(np.abs(V).max()))
        if discount * delta <= target * scale:
            done = it
            break
        changes.append(delta)
        if len(changes) > FLOW_WINDOW and delta > FLOW_SLOW * max(changes[-1 - FLOW_WINDOW : -1]):
            break
        evaluate(policy, V, max(target * scale, FLOW_SHRINK * discount * delta))
    return _scattered(policy, labels), _scattered(V, labels), done


class _FlowEvaluation:
    """:func:`_flow_iteration`'s policy evaluations on its relabelled model ``rows``:
    ``evaluate(policy, V, goal)`` updates ``V`` in place (see there)."""

    def __init__(self, rows, R, discount):
        S, A = R.shape
        self.rows, self.R, self.discount, self.A = rows, R, discount, A
        self.kernels = compiled_sweeps()
        self.chain = _chain_buffers(rows, S, A)
        self.ident = np.arange(S)
        self.banded = _bandwidth(rows.indptr, rows.indices, A) <= BANDED_MAX

    def __call__(self, policy, V, goal) -> None:
        rows, R, kernels, ident = self.rows, self.R, self.kernels, self.ident
        csr = (rows.indptr, rows.indices, rows.data)
        order = ident if self.banded else flow_order(rows, policy, self.A)
        inverse = ident if self.banded else _inverse(order, ident.size)
        kernels["_gather_chain"](*csr, self.A, policy, order, inverse, *self.chain)
        b = R[order, policy[order]]
        if self.banded:
            x = _banded_solve(self.chain, b, self.discount)
            if x is not None:
                V[:] = x
                return
        x = V[order]
        for _ in range(FLOW_EVAL_SWEEPS):
            change = kernels["_linear_sweep"](*self.chain, b, self.discount, x, ident)
            if not self.discount * change > goal:  # met, or NaN (the value sweep stops on it)
                break
        V[order] = x


def reach_order(rows, sources: np.ndarray, n_actions: int) -> np.ndarray:
    """The states in breadth-first order backwards from ``sources`` over the transitions of
    every action (CSR rows ``s·A + a``): ``sources``, then the states that can move to one
    of them in one step, and so on; states that reach none last. On a goal-directed model
    with the goals as sources, each state comes after states nearer a goal."""
    csc = rows.tocsc()
    order = np.empty(rows.shape[1], dtype=np.int64)
    sources = np.ascontiguousarray(sources, dtype=np.int64)
    compiled_sweeps()["_reach_order"](csc.indptr, csc.indices, n_actions, sources, order)
    return order


def _permuted(rows, R, mask, order):
    """The model relabelled so that state ``i`` is ``order[i]``: its rows (CSR), ``R`` and
    ``mask`` (contiguous)."""
    import scipy.sparse as sp

    S, A = R.shape
    inv = _inverse(order, S)
    pick = (order[:, None] * A + np.arange(A)).ravel()
    gathered = _gather_rows(rows, pick)
    indices = inv[gathered.indices].astype(gathered.indices.dtype, copy=False)
    P = sp.csr_matrix((gathered.data, indices, gathered.indptr), shape=rows.shape)
    R = np.ascontiguousarray(R[order], dtype=np.float64)
    return P, R, np.ascontiguousarray(mask[order])


def _kept(R, mask, discount) -> np.ndarray:
    """``V(s) = max_a R(s, a) / (1 - discount)``: each state's best reward kept forever."""
    kept = np.where(mask, R, -np.inf).max(axis=1) / (1.0 - discount)
    kept[~np.isfinite(kept)] = 0.0
    return kept


#: :func:`_kept_start` compares the two starts on at most this many states (every k-th one):
#: on larger models a sweep over all of them costs as much as a step of the solve (0.2 s at
#: 10^6 states, A = 4, 10 successors), and the means of the two starts differ by orders of
#: magnitude where the choice matters.
START_SAMPLE = 8_192


def _mean_residual(rows, R, mask, discount, V, states) -> float:
    """Mean over ``states`` of ``|T V - V|``, from their rows of ``P`` alone."""
    A = R.shape[1]
    if states is None:
        q = backup(rows, R, V, discount)
        top, own = masked(q, mask).max(axis=1), V
    else:
        sub = rows[(states[:, None] * A + np.arange(A)).ravel()]
        q = R[states] + discount * np.asarray(sub @ V).reshape(states.size, A)
        top, own = masked(q, mask[states]).max(axis=1), V[states]
    return float(np.abs(top - own).mean())


def _kept_start(rows, R, mask, discount) -> bool:
    """Whether value iteration starts from :func:`_kept` (and is Gauss-Seidel's, the solve
    unless it contracts slowly) rather than from 0 (Jacobi's, policy iteration's warm start
    unless it certifies first): the start with the smaller mean ``|T V - V|`` (over at most
    :data:`START_SAMPLE` states, evenly spaced), consistent on more of the state space. On
    goal-directed models with a constant step cost, the kept rewards are the exact values of
    every state too far from the goal to see it in double precision, where policy iteration
    would move its policy's frontier a few states per iteration; on random models and on
    terminating ones (Taxi) 0 is closer."""
    S = R.shape[0]
    states = None if S <= START_SAMPLE else np.arange(0, S, -(-S // START_SAMPLE))
    kept = _mean_residual(rows, R, mask, discount, _kept(R, mask, discount), states)
    return kept < _mean_residual(rows, R, mask, discount, np.zeros(S), states)


def _inverse(order: np.ndarray, S: int) -> np.ndarray:
    inv = np.empty(S, dtype=np.intp)
    inv[order] = np.arange(S)
    return inv


def _warm_start(rows, R, mask, discount, sweeps, target):
    """Value iteration from 0 for at most ``sweeps`` sweeps, stopped once its greedy policy
    changed in at most :data:`WARM_FRACTION` of the states for :data:`WARM_STABLE` sweeps in
    a row: ``(greedy policy, values, 0)``; or once a sweep changed the values by at most
    ``target`` (their Bellman residual): ``(greedy policy, values, sweeps)``, the values
    those before that sweep (the ones the residual certifies)."""
    S = R.shape[0]
    V = np.zeros(S)
    policy, held = None, 0
    every = bool(mask.all())
    table = compiled_sweeps() if is_sparse(rows) and rows.format == "csr" else None
    if table is not None:  # compiled: the whole loop in one call
        policy = np.full(S, -1, dtype=np.intp)
        R = np.ascontiguousarray(R, dtype=np.float64)
        k = table["_jacobi_loop"](
            (rows.indptr, rows.indices, rows.data),
            R,
            np.ascontiguousarray(mask),
            every,
            discount,
            V,
            policy,
            sweeps,
            target,
            int(WARM_FRACTION * S),
            WARM_STABLE,
        )
        return policy, V, int(k)
    for k in range(1, sweeps + 1):
        qm = backup(rows, R, V, discount)
        qm = qm if every else masked(qm, mask)
        new = qm.argmax(axis=1)
        top = qm.max(axis=1)
        if float(np.abs(top - V).max()) <= target:
            return new, V, k
        V = top
        quiet = policy is not None and np.count_nonzero(new != policy) <= WARM_FRACTION * S
        held = held + 1 if quiet else 0
        policy = new
        if held >= WARM_STABLE:
            break
    return policy, V, 0


def value_iteration(
    P, R: np.ndarray, mask: np.ndarray, discount: float, tol: float, max_iter: int
) -> tuple[str, str, np.ndarray, int]:
    """Discounted value iteration from ``V = 0``; ``(status, message, V, iterations)``.

    Stops when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which guarantees
    ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1). ``P`` dense ``(S, A, S)`` or the
    ``(S·A, S)`` rows, dense or sparse.
    """
    V = np.zeros(R.shape[0])
    threshold = tol * (1.0 - discount) / (2.0 * discount) if discount > 0 else np.inf
    step = np.inf
    for it in range(1, max_iter + 1):
        V_new = masked(backup(P, R, V, discount), mask).max(axis=1)
        step = np.max(np.abs(V_new - V))
        V = V_new
        if step < threshold:
            return OPTIMAL, "", V, it
    message = (
        f"value iteration did not reach tol={tol} in {max_iter} iterations (last step {step:.3g})"
    )
    return MAX_ITER, message, V, max_iter


# A dense model's policy chains, read in place (compiled with numba when installed).

#: ``warm_sweeps`` of :func:`discounted_policy_iteration` that the discounted fast path
#: passes for a dense model (a sweep reads all of ``P``: at S = 6,000, A = 4, 1.15 GB,
#: 0.1 s). On random dense models (A = 4, discount 0.95, S = 200 to 6,000) two sweeps leave
#: two policy evaluations, as the three the stability rule of :data:`WARM_STABLE` needs do;
#: none or one leave three or four.
DENSE_WARM_SWEEPS = 2


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
