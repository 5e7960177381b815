"""Fast path of ``UncertaintyBellman``: a direct linear solve on the states, value iteration
for large sparse models, backward recursion for the layered form (all vectorized)."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..dp import EvaluationError, solve_system
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL, PlanResult
from ._options import check_algorithm, check_tol_iter

ALGORITHMS = ("direct", "iteration")


def solve(
    problem, algorithm: str = "direct", tol: float = 1e-12, max_iter: int | None = None
) -> PlanResult:
    """Solve the UBE (``u``) and its dual (``y``).

    Parameters
    ----------
    algorithm : {"direct", "iteration"}
        ``"direct"``: ``v = (I - gamma^2 Pbar_pi)^{-1} nu_pi``, ``u = nu + gamma^2 Pbar v``, and
        the transposed system for ``y`` (an ``S x S`` solve, not ``SA x SA``).
        ``"iteration"``: ``u <- nu + gamma^2 Pbar_pi u`` with a sparse ``Pbar``, stopped when
        ``||u_{k+1} - u_k|| <= tol (1 - gamma^2) / gamma^2 * max(1, ||u||)``, which bounds the
        relative error of ``u`` by ``tol`` (a ``gamma^2``-contraction); the same for ``y``.
        The layered form is always solved by backward (``u``) and forward (``y``) recursion.
    tol : float
        Relative accuracy of ``"iteration"``.
    max_iter : int, optional
        Iteration cap of ``"iteration"`` (default 1,000,000).
    """
    check_algorithm(algorithm, ALGORITHMS)
    check_tol_iter(tol, max_iter)
    start = time.perf_counter()
    if problem.layered:
        u, y = _layered(problem)
        status, message, solver, iterations = OPTIMAL, "", "recursion", problem.local.shape[0]
    elif algorithm == "direct":
        solver, iterations = "direct", 1
        try:
            u, y = _direct(problem)
            status, message = OPTIMAL, ""
        except EvaluationError as exc:
            u = y = None
            status, message = NUMERICAL_ERROR, str(exc)
    else:
        solver = "iteration"
        u, y, status, message, iterations = _iterate(problem, tol, max_iter or 1_000_000)
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


def _direct(problem) -> tuple[np.ndarray, np.ndarray]:
    P, pi, nu, w = problem.mean_transitions, problem.policy, problem.local, problem.weights
    S, A, _ = P.shape
    g2 = problem.discount**2
    Pf = P.reshape(S * A, S)
    P_pi = np.einsum("sa,sat->st", pi, P)
    M = np.eye(S) - g2 * P_pi
    v = solve_system(M, np.sum(pi * nu, axis=1), "the UBE's state uncertainties")
    u = nu + g2 * (Pf @ v).reshape(S, A)
    z = solve_system(M.T, Pf.T @ w.reshape(-1), "the UBE's dual (occupancy)")
    y = w + g2 * pi * z[:, None]
    return u, y


def _iterate(problem, tol: float, max_iter: int):
    P, pi, nu, w = problem.mean_transitions, problem.policy, problem.local, problem.weights
    S, A, _ = P.shape
    g2 = problem.discount**2
    Pf = sp.csr_matrix(P.reshape(S * A, S))
    PfT = Pf.T.tocsr()
    stop = tol * (1.0 - g2) / g2 if g2 > 0 else np.inf
    u, y = nu.copy(), w.copy()
    u_done = y_done = False
    for it in range(1, max_iter + 1):  # loop over iterations only
        if not u_done:
            new = nu + g2 * (Pf @ np.sum(pi * u, axis=1)).reshape(S, A)
            u_done = np.max(np.abs(new - u)) <= stop * max(1.0, np.abs(new).max())
            u = new
        if not y_done:
            new = w + g2 * pi * (PfT @ y.reshape(-1))[:, None]
            y_done = np.max(np.abs(new - y)) <= stop * max(1.0, np.abs(new).max())
            y = new
        if u_done and y_done:
            return u, y, OPTIMAL, "", it
    message = (
        f"value iteration did not reach tol={tol:g} in {max_iter} iterations "
        f"(gamma^2 = {g2:.12g}); the last iterates are returned"
    )
    return u, y, MAX_ITER, message, max_iter


def _layered(problem) -> tuple[np.ndarray, np.ndarray]:
    P, pi, nu, w = problem.mean_transitions, problem.policy, problem.local, problem.weights
    L = nu.shape[0]
    g2 = problem.discount**2
    u = np.empty_like(nu)
    u[L - 1] = nu[L - 1]
    for l in range(L - 2, -1, -1):  # loop over layers only
        v = np.sum(pi[l + 1] * u[l + 1], axis=1)
        u[l] = nu[l] + g2 * np.einsum("sat,t->sa", P[l], v)
    y = np.empty_like(w)
    y[0] = w[0]
    for l in range(L - 1):
        inflow = np.einsum("sa,sat->t", y[l], P[l])
        y[l + 1] = w[l + 1] + g2 * pi[l + 1] * inflow[:, None]
    return u, y


def _certify(problem, u, y, iterative: bool, tol: float) -> tuple[str, str]:
    """An answer whose fixed-point residual is beyond rounding (value iteration: beyond its
    stopping rule) is not called optimal: ``gamma`` near 1 with a closed class makes
    ``I - gamma^2 Pbar_pi`` ill-conditioned and the solve loses digits."""
    if not (np.isfinite(u).all() and np.isfinite(y).all()):
        return NUMERICAL_ERROR, "the UBE solution overflowed the double range"
    g2 = problem.discount**2
    allowed = 1e-10 + (tol * (1.0 - g2) / g2 if iterative and g2 > 0 else 0.0)
    for name, res, scale in (
        ("u", problem.residual(u), float(np.abs(u).max())),
        ("y", problem.dual_residual(y), float(np.abs(y).max())),
    ):
        if res > allowed * (1.0 + scale):
            return NUMERICAL_ERROR, (
                f"the solved {name} misses its fixed point by {res:.3g} (scale {scale:.3g}): "
                f"I - gamma^2 Pbar_pi is too ill-conditioned at gamma = {problem.discount!r} "
                "for double precision"
            )
    return OPTIMAL, ""
