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
from ._common import EvaluationError, backup, greedy, masked, policy_model, start_policy

#: From this many states a dense model's policy iteration (in the discounted fast path)
#: evaluates each policy iteratively, warm-started, instead of factorizing
#: ``I - discount P_pi`` (O(S^3) per policy): on random dense models with A = 4, discount
#: 0.95, it is ahead of the factorization from S = 100 on (medians of 7 models: 0.46 ms
#: against 0.65 ms at S = 100, 0.75 ms against 1.40 ms at S = 150; 0.47 against 0.45 ms at
#: S = 80).
DENSE_ITERATIVE_MIN_STATES = 100
#: Up to this many states a sparse model's policies are evaluated by a sparse LU (SuperLU);
#: above it iteratively (a factorization only for a slowly mixing chain): a random chain's LU
#: fills in (random models with 10 successors, A = 4: 113 ms by LU against 1.6 ms
#: iteratively at S = 1,000; Taxi, S = 501: 1.56 against 1.36 ms).
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
#: scale; later ones a tenth of the last Bellman residual, down to what the certificate needs.
LOOSE_EVAL = 1e-3


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
    """``V = (I - discount P_pi)^{-1} r_pi``: a dense LU; for a sparse chain a sparse LU up to
    :data:`SPARSE_DIRECT_MAX_STATES` states, beyond (where a random chain's LU fills in) the
    iterative solve of :func:`discounted_policy_iteration` to a residual (``inf``-norm) of
    ``tol``, by default :data:`EXACT_RESIDUAL` times ``max |r_pi|``."""
    if is_sparse(P_pi):
        if P_pi.shape[0] > SPARSE_DIRECT_MAX_STATES:
            if tol is None:
                tol = EXACT_RESIDUAL * (float(np.abs(r_pi).max()) or 1.0)
            return _krylov(P_pi, r_pi, discount, np.zeros_like(r_pi), tol, "V^pi", True)
        from scipy.sparse.linalg import spsolve

        return spsolve((_eye(P_pi) - discount * P_pi).tocsc(), r_pi)
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
    if is_sparse(P_pi):
        from scipy.sparse.linalg import spsolve

        return spsolve((_eye(P_pi) - discount * P_pi).T.tocsc(), b)
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
    x = _direct(M, b, discount, x)
    return _gmres(M, b, discount, x, tol, what)


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
    if policy is None and warm_sweeps > 0:
        policy, values = _warm_start(rows, R, mask, discount, warm_sweeps)
    policy = start_policy(R, mask, policy)
    idx = np.arange(S)
    every = bool(mask.all())
    r_scale = float(np.abs(np.where(mask, R, 0.0)).max()) or 1.0
    eval_tol = LOOSE_EVAL * r_scale
    q = None
    bound = np.inf
    evaluations = 0
    P_pi = None
    for it in range(1, max_iter + 1):
        if P_pi is None:
            chain = dense_chain if iterative and not sparse else policy_model
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
        same = bool((new == policy).all())
        if same and (not iterative or bound <= tol * scale):
            return DiscountedPolicyIteration(
                OPTIMAL, "", policy, values, q, bound, it, evaluations, iterative
            )
        if iterative:
            target = 0.5 * tol * scale * span
            eval_tol = max(target, min(eval_tol, 0.1 * bellman)) if not same else target
        if not same:
            policy = new
            P_pi = None
    message = f"discounted policy iteration did not stop in {max_iter} iterations"
    return DiscountedPolicyIteration(
        MAX_ITER, message, policy, values, q, bound, max_iter, evaluations, iterative
    )


def _warm_start(rows, R, mask, discount, sweeps):
    """Value iteration from 0 for at most ``sweeps`` sweeps, stopped once its greedy policy
    changed in at most :data:`WARM_FRACTION` of the states for :data:`WARM_STABLE` sweeps in
    a row: ``(greedy policy, values)``."""
    S = R.shape[0]
    V = np.zeros(S)
    policy, held = None, 0
    every = bool(mask.all())
    for _ in range(sweeps):
        qm = backup(rows, R, V, discount)
        qm = qm if every else masked(qm, mask)
        new = qm.argmax(axis=1)
        V = qm.max(axis=1)
        quiet = policy is not None and np.count_nonzero(new != policy) <= WARM_FRACTION * S
        held = held + 1 if quiet else 0
        policy = new
        if held >= WARM_STABLE:
            break
    return policy, V


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
