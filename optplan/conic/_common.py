"""What every conic path shares: solver settings, running CVXPY, sparse Bellman matrices."""

from __future__ import annotations

import functools
import time
import warnings

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..result import INFEASIBLE, SOLUTION_PRESENT, SOLVER_ERROR, PlanResult, map_cvxpy_status

#: Solver settings used unless the caller passes ``solver_options``. Tight, because the conic
#: path is the reference the fast paths are checked against; SCS (first-order) is looser and
#: gets more iterations. Names are each solver's own (CVXPY passes them through).
SOLVER_DEFAULTS = {
    "CLARABEL": {
        "tol_gap_abs": 1e-12,
        "tol_gap_rel": 1e-12,
        "tol_feas": 1e-12,
        "tol_ktratio": 1e-10,
        "max_iter": 500,
    },
    "ECOS": {"abstol": 1e-10, "reltol": 1e-10, "feastol": 1e-10, "max_iters": 500},
    "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000},
}


@functools.cache
def _installed_solvers() -> tuple[str, ...]:
    # cvxpy probes every solver on each call (about 1 ms): once per process is enough, and
    # keeps that cost out of the timed conic solves
    return tuple(cp.installed_solvers())


def run(problem: cp.Problem, solver: str, solver_options: dict | None = None):
    """Solve a CVXPY problem; never raises for numerical trouble.

    Returns
    -------
    status : str
        optplan status (through :data:`optplan.result.CVXPY_STATUS_MAP`).
    message : str
    iterations : int or None
    seconds : float
        Wall time of ``problem.solve`` (canonicalization plus solver).
    """
    options = dict(SOLVER_DEFAULTS[solver])
    options.update(solver_options or {})
    start = time.perf_counter()
    if solver not in _installed_solvers():
        return (
            SOLVER_ERROR,
            f"solver {solver} is not installed (cvxpy has {_installed_solvers()})",
            None,
            0.0,
        )
    try:
        with warnings.catch_warnings():
            # Reported through the status (optimal_inaccurate), not as a warning.
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        return SOLVER_ERROR, f"{solver}: {exc}", None, time.perf_counter() - start
    seconds = time.perf_counter() - start
    status = map_cvxpy_status(problem.status)
    stats = problem.solver_stats
    iterations = getattr(stats, "num_iters", None) if stats is not None else None
    message = "" if problem.status == cp.OPTIMAL else f"{solver} returned status {problem.status!r}"
    return status, message, iterations, seconds


def admissible_pairs(mask: np.ndarray) -> tuple[np.ndarray, ...]:
    """Indices of the admissible pairs (one Bellman inequality each), in C order."""
    return np.nonzero(mask)


def bellman_matrix(
    P_rows: np.ndarray,
    rows_state: np.ndarray,
    n_cols: int,
    discount: float = 1.0,
    next_offset: np.ndarray | None = None,
) -> sp.csr_matrix:
    """Sparse ``E - discount * P`` for Bellman inequalities ``(E - gamma P) v >= r``.

    ``P_rows[k, s']`` are the transition rows of the admissible pairs, ``rows_state[k]`` the
    column of the pair's own state in ``v``; ``next_offset[k]`` shifts the columns of ``P``
    (finite horizon: the next layer's block).
    """
    K, S = P_rows.shape
    k_idx, s_next = np.nonzero(P_rows)
    cols = s_next if next_offset is None else s_next + next_offset[k_idx]
    E = sp.csr_matrix((np.ones(K), (np.arange(K), rows_state)), shape=(K, n_cols))
    Pm = sp.csr_matrix((P_rows[k_idx, s_next], (k_idx, cols)), shape=(K, n_cols))
    return (E - discount * Pm).tocsr()


def scatter(
    values: np.ndarray, index: tuple[np.ndarray, ...], shape: tuple[int, ...]
) -> np.ndarray:
    """Place per-pair values back into a dense ``shape`` array (zeros elsewhere)."""
    out = np.zeros(shape)
    out[index] = values
    return out


def conic_result(
    status: str, message: str, solver: str, iterations, seconds: float, **fields
) -> PlanResult:
    """A ``PlanResult`` of the conic path (``fields``: value, x, multiplier, policy ...)."""
    return PlanResult(
        status=status,
        message=message,
        method="conic",
        solver=solver,
        iterations=iterations,
        solve_time=seconds,
        **fields,
    )


def no_solution(
    status: str, message: str, solver: str, iterations, seconds: float, **fields
) -> PlanResult | None:
    """The result to return when the solver found no solution (``None`` when it did).

    The value is NaN, not the solver's last iterate: a number is returned only with a
    solution status.
    """
    if status in SOLUTION_PRESENT:
        return None
    return conic_result(
        status,
        message or f"{solver}: {status}",
        solver,
        iterations,
        seconds,
        value=np.nan,
        **fields,
    )


def solve_index(
    prob: cp.Problem, solver: str, solver_options: dict | None, infeasible_value: float
) -> PlanResult:
    """Run an index problem's formulation (variable ``q``, main constraint first).

    The value is the solver's objective (``opt_val``), not CVXPY's re-evaluation at the
    returned ``q``, which is ``inf`` when the solver rounds a tiny ``q_x`` with ``p_x > 0`` to 0.
    An infeasible problem gets the problem's conventional value (``-inf`` for a max, ``+inf``
    for a min) with the solver's status.
    """
    status, message, iterations, seconds = run(prob, solver, solver_options)
    failed = no_solution(status, message, solver, iterations, seconds)
    if failed:
        return failed.replace(value=infeasible_value) if status == INFEASIBLE else failed
    return conic_result(
        status,
        message,
        solver,
        iterations,
        seconds,
        value=float(prob.solution.opt_val),
        x=prob.var_dict["q"].value,
        multiplier=float(prob.constraints[0].dual_value),
    )
