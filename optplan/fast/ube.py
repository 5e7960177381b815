"""Fast path of ``UncertaintyBellman``: a direct linear solve on the states, value iteration
for large sparse models, backward recursion for the layered form (all vectorized). A sparse
``mean_transitions`` (CSR rows) is never densified: the policy's chain is a sparse product,
solved by a sparse LU on small chains and iteratively beyond (as a discounted evaluation),
and the recursions are one sparse mat-vec per layer."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..dp import (
    SPARSE_DIRECT_MAX_STATES,
    EvaluationError,
    discounted_occupancy,
    evaluate_discounted,
    solve_system,
)
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL, PlanResult
from ._options import check_algorithm, check_tol_iter

ALGORITHMS = ("direct", "iteration")


def solve(
    problem,
    algorithm: str = "direct",
    tol: float = 1e-12,
    max_iter: int | None = None,
    multiplier: bool = True,
) -> PlanResult:
    """Solve the UBE (``u``) and its dual (``y``).

    Parameters
    ----------
    algorithm : {"direct", "iteration"}
        ``"direct"``: ``v = (I - gamma^2 Pbar_pi)^{-1} nu_pi``, ``u = nu + gamma^2 Pbar v``, and
        the transposed system for ``y`` (an ``S x S`` solve, not ``SA x SA``). With a sparse
        ``mean_transitions`` the chain ``Pbar_pi`` stays sparse: a sparse LU up to
        :data:`~optplan.dp.SPARSE_DIRECT_MAX_STATES` states, beyond it the discounted
        evaluation's iterative solve (fixed point, then a factorization or GMRES) to a
        residual of :data:`SPARSE_RESIDUAL` relative to the right-hand side.
        ``"iteration"``: ``u <- nu + gamma^2 Pbar_pi u`` with a sparse ``Pbar`` from
        ``u_0 = nu``; the iterates increase to ``u`` (``nu >= 0``), and the iteration stops when
        every entry's error bound is within ``tol`` of the entry (``_entry_bounds``): the
        ``gamma^2``-contraction bound ``gamma^2 / (1 - gamma^2) ||d_k||``, or, when
        ``d_k <= rho d_{k-1}`` entrywise with ``rho < 1`` (``d_k = u_k - u_{k-1}``), the tighter
        ``rho / (1 - rho) d_k``; an entry still 0 after ``S`` steps is exactly 0. This bounds
        each entry's relative error by ``tol`` at any scale of ``u``; the same for ``y``.
        The layered form is always solved by backward (``u``) and forward (``y``) recursion.
    tol : float
        Relative accuracy of ``"iteration"``, entry by entry.
    max_iter : int, optional
        Iteration cap of ``"iteration"`` (default 1,000,000).
    multiplier : bool, default True
        ``False``: ``u`` alone, for a caller that never reads the dual (an agent's plan):
        ``multiplier`` is ``None``, only ``u``'s fixed point is certified, and
        ``"iteration"`` counts ``u``'s iterations only. ``u``, ``value`` and ``values`` are
        the same bits either way.
    """
    check_algorithm(algorithm, ALGORITHMS)
    check_tol_iter(tol, max_iter)
    start = time.perf_counter()
    if problem.layered:
        u, y = _layered(problem, multiplier)
        status, message, solver, iterations = OPTIMAL, "", "recursion", problem.local.shape[0]
    elif algorithm == "direct":
        solver, iterations = "direct", 1
        try:
            u, y = _direct(problem, multiplier)
            status, message = OPTIMAL, ""
        except EvaluationError as exc:
            u = y = None
            status, message = NUMERICAL_ERROR, str(exc)
    else:
        solver = "iteration"
        u, y, status, message, iterations = _iterate(
            problem, tol, max_iter or 1_000_000, multiplier
        )
    if u is not None and status == OPTIMAL:
        status, message = _certify(
            problem, u, y, algorithm == "iteration" and not problem.layered, tol
        )
    return _result(problem, u, y, status, message, solver, iterations, time.perf_counter() - start)


def _result(problem, u, y, status, message, solver, iterations, seconds) -> PlanResult:
    fields = {"value": np.nan}  # no solution: no number
    if u is not None:
        fields = {"value": float(np.sum(problem.weights * u)), "x": u, "multiplier": y}
        if not problem.layered:
            fields["values"] = np.sum(problem.policy * u, axis=-1)
    return PlanResult(
        status=status,
        message=message,
        method="fast",
        solver=solver,
        iterations=iterations,
        solve_time=seconds,
        **fields,
    )


def _direct(problem, multiplier: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    pi, nu, w = problem.policy, problem.local, problem.weights
    S, A = nu.shape
    g2 = problem.discount**2
    Pf = problem.transition_rows
    if problem.sparse:
        return _direct_sparse(Pf, pi, nu, w, g2, multiplier)
    P_pi = np.einsum("sa,sat->st", pi, problem.mean_transitions)
    M = np.eye(S) - g2 * P_pi
    v = solve_system(M, np.sum(pi * nu, axis=1), "the UBE's state uncertainties")
    u = nu + g2 * (Pf @ v).reshape(S, A)
    if not multiplier:
        return u, None
    z = solve_system(M.T, Pf.T @ w.reshape(-1), "the UBE's dual (occupancy)")
    y = w + g2 * pi * z[:, None]
    return u, y


#: Residual (``inf``-norm) of the iterative solves on a sparse chain above
#: :data:`~optplan.dp.SPARSE_DIRECT_MAX_STATES` states, relative to the right-hand side's
#: largest entry; raised to :data:`SPARSE_RESIDUAL_ULPS` roundings of the solution's size
#: (``max rhs / (1 - gamma^2)``) when that is larger, which double precision cannot beat.
SPARSE_RESIDUAL = 1e-13
SPARSE_RESIDUAL_ULPS = 16


def _residual_asked(rhs: np.ndarray, g2: float) -> float:
    size = float(np.abs(rhs).max(initial=0.0)) or 1.0
    return max(SPARSE_RESIDUAL * size, SPARSE_RESIDUAL_ULPS * np.finfo(float).eps * size / (1 - g2))


def _direct_sparse(Pf, pi, nu, w, g2: float, multiplier: bool):
    """:func:`_direct` on CSR rows: ``Pbar_pi = Pi Pbar`` sparse (``Pi[s, s·A + a] =
    pi[s, a]``), the two ``S x S`` systems solved as a discounted evaluation (discount
    ``gamma^2``) and its transposed occupancy."""
    S, A = nu.shape
    Pi = sp.csr_matrix(
        (pi.reshape(-1), (np.repeat(np.arange(S), A), np.arange(S * A))), shape=(S, S * A)
    )
    P_pi = (Pi @ Pf).tocsr()
    iterative = S > SPARSE_DIRECT_MAX_STATES
    nu_pi = np.sum(pi * nu, axis=1)
    tol = _residual_asked(nu_pi, g2)
    with np.errstate(all="ignore"):
        v = evaluate_discounted(P_pi, nu_pi, g2, tol=tol)
    if not np.isfinite(v).all():
        raise EvaluationError(
            "the UBE's state uncertainties cannot be computed in double precision"
        )
    u = nu + g2 * np.asarray(Pf @ v).reshape(S, A)
    if not multiplier:
        return u, None
    b = np.asarray(Pf.T @ w.reshape(-1)).ravel()  # >= 0: w > 0, Pbar >= 0

    with np.errstate(all="ignore"):
        # (I - g2 P_pi)^T z = b is the occupancy system with start b / (1 - g2)
        z = discounted_occupancy(
            P_pi, b / (1.0 - g2), g2, iterative=iterative, tol=_residual_asked(b, g2)
        )
    if not np.isfinite(z).all():
        raise EvaluationError("the UBE's dual (occupancy) cannot be computed in double precision")
    y = w + g2 * pi * z[:, None]
    return u, y


def _iterate(problem, tol: float, max_iter: int, multiplier: bool = True):
    pi, nu, w = problem.policy, problem.local, problem.weights
    S, A = nu.shape
    g2 = problem.discount**2
    rows = problem.transition_rows
    Pf = rows if problem.sparse else sp.csr_matrix(rows)
    PfT = Pf.T.tocsr()
    steps = {
        "u": lambda u: nu + g2 * (Pf @ np.sum(pi * u, axis=1)).reshape(S, A),
        "y": lambda y: w + g2 * pi * (PfT @ y.reshape(-1))[:, None],
    }
    x = {"u": nu.copy(), "y": w.copy() if multiplier else None}
    diff = {"u": x["u"], "y": x["y"]}  # d_0 = x_0 - 0
    done = {"u": False, "y": not multiplier}
    for it in range(1, max_iter + 1):  # loop over iterations only
        for key in ("u", "y"):
            if not done[key]:
                new = steps[key](x[key])
                d = new - x[key]
                done[key] = bool(np.all(_entry_bounds(diff[key], d, new, it >= S, g2) <= tol * new))
                x[key], diff[key] = new, d
        if done["u"] and done["y"]:
            return x["u"], x["y"], OPTIMAL, "", it
    message = (
        f"value iteration did not reach tol={tol:g} in {max_iter} iterations "
        f"(gamma^2 = {g2:.12g}); the last iterates are returned"
    )
    return x["u"], x["y"], MAX_ITER, message, max_iter


def _entry_bounds(
    prev: np.ndarray, d: np.ndarray, new: np.ndarray, zeros_exact: bool, g2: float
) -> np.ndarray:
    """Entrywise bounds on ``x - x_k`` for the monotone iteration ``x_{k+1} = c + g2 M x_k``
    (``c >= 0``, ``M`` row-stochastic and nonnegative), from ``d = x_k - x_{k-1} >= 0``,
    ``prev = x_{k-1} - x_{k-2}`` and ``new = x_k``.

    Two bounds hold, and the smaller is taken entry by entry: the contraction's
    ``g2 / (1 - g2) ||d||_inf``, and, when ``d <= rho prev`` entrywise with ``rho < 1``,
    ``rho / (1 - rho) d`` (then ``d_{k+j} <= rho^j d`` by induction, as ``M >= 0``). With
    ``zeros_exact`` (at least ``S`` steps done) an entry still 0 reaches no positive ``c``:
    its bound is 0."""
    d = np.maximum(d, 0.0)
    bound = np.full(d.shape, g2 / (1.0 - g2) * float(d.max(initial=0.0)) if g2 < 1 else np.inf)
    moving = (d > 0) | (prev > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(prev[moving] > 0, d[moving] / prev[moving], np.inf)
    rho = float(np.max(ratio, initial=0.0))
    if rho < 1.0:
        bound = np.minimum(bound, rho / (1.0 - rho) * d)
    if zeros_exact:
        bound[new == 0] = 0.0
    return bound


def _layered(problem, multiplier: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    pi, nu, w = problem.policy, problem.local, problem.weights
    L, S, A = nu.shape
    g2 = problem.discount**2
    u = np.empty_like(nu)
    u[L - 1] = nu[L - 1]
    for l in range(L - 2, -1, -1):  # loop over layers only: one mat-vec with layer l's rows
        v = np.sum(pi[l + 1] * u[l + 1], axis=1)
        u[l] = nu[l] + g2 * np.asarray(problem.layer_transitions(l) @ v).reshape(S, A)
    if not multiplier:
        return u, None
    y = np.empty_like(w)
    y[0] = w[0]
    for l in range(L - 1):
        inflow = np.asarray(problem.layer_transitions(l).T @ y[l].reshape(-1)).ravel()
        y[l + 1] = w[l + 1] + g2 * pi[l + 1] * inflow[:, None]
    return u, y


def _certify(problem, u, y, iterative: bool, tol: float) -> tuple[str, str]:
    """An answer whose fixed-point residual is beyond rounding (value iteration: beyond its
    stopping rule) is not called optimal: ``gamma`` near 1 with a closed class makes
    ``I - gamma^2 Pbar_pi`` ill-conditioned and the solve loses digits."""
    if not (np.isfinite(u).all() and (y is None or np.isfinite(y).all())):
        return NUMERICAL_ERROR, "the UBE solution overflowed the double range"
    allowed = 1e-10 + (tol if iterative else 0.0)  # relative to the size of the solution
    checks = [("u", problem.residual(u), float(np.abs(u).max(initial=0.0)))]
    if y is not None:
        checks.append(("y", problem.dual_residual(y), float(np.abs(y).max(initial=0.0))))
    for name, res, scale in checks:
        if res > allowed * scale:
            return NUMERICAL_ERROR, (
                f"the solved {name} misses its fixed point by {res:.3g} (scale {scale:.3g}): "
                f"I - gamma^2 Pbar_pi is too ill-conditioned at gamma = {problem.discount!r} "
                "for double precision"
            )
    return OPTIMAL, ""
