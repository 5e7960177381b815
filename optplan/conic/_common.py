"""What every conic path shares: solver settings, running CVXPY, sparse Bellman matrices."""

from __future__ import annotations

import functools
import time
import warnings
from typing import NamedTuple

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..problems.base import SOLVER_TOL
from ..result import (
    INFEASIBLE,
    INFEASIBLE_INACCURATE,
    OPTIMAL,
    OPTIMAL_INACCURATE,
    SOLUTION_PRESENT,
    SOLVER_ERROR,
    UNBOUNDED,
    UNBOUNDED_INACCURATE,
    PlanResult,
    map_cvxpy_status,
)

#: Solver settings used unless the caller passes ``solver_options``. Tight, because the conic
#: path is the reference the fast paths are checked against; SCS (first-order) is looser and
#: gets more iterations. Names are each solver's own (CVXPY passes them through).
SOLVER_DEFAULTS = {
    # tol_feas 1e-11 and tol_ktratio 1e-9 rather than 1e-12 and 1e-10: at those Clarabel ended
    # optimal_inaccurate on 25% of random KL-ball and 17% of KL-inf instances (now 4% and 5%),
    # while the gap tolerance stays 1e-12: a looser gap (1e-11) let it call optimal answers
    # whose multipliers were 6e-4 off at radii near 1e-8
    "CLARABEL": {
        "tol_gap_abs": 1e-12,
        "tol_gap_rel": 1e-12,
        "tol_feas": 1e-11,
        "tol_ktratio": 1e-9,
        "max_iter": 500,
    },
    "ECOS": {"abstol": 1e-10, "reltol": 1e-10, "feastol": 1e-10, "max_iters": 500},
    "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000},
}


class ConicRun(NamedTuple):
    """How one conic solve (or several stages of one) ended."""

    status: str
    message: str
    solver: str
    iterations: int | None
    seconds: float

    def then(self, later: ConicRun, label: str) -> ConicRun:
        """This stage followed by ``later``: the worse status (a multi-stage answer is only as
        good as its worst stage), both messages, summed iterations and time."""
        message = "; ".join(
            m for m in (self.message, f"{label}: {later.message}" if later.message else "") if m
        )
        iterations = (self.iterations or 0) + (later.iterations or 0)
        return ConicRun(
            worse(self.status, later.status),
            message,
            self.solver,
            iterations,
            self.seconds + later.seconds,
        )

    def cannot_be(self, statuses, why: str) -> ConicRun:
        """A status the problem cannot have (an always feasible, bounded LP called
        ``unbounded``) is the solver's numerical trouble: ``solver_error``, with ``why``."""
        if self.status not in statuses:
            return self
        note = f"{self.solver} reported {self.status!r}, which this problem cannot be ({why})"
        return self._replace(
            status=SOLVER_ERROR, message="; ".join(m for m in (self.message, note) if m)
        )

    def checked(self, residual: float, scale: float, what: str, dual: bool = False) -> ConicRun:
        """Downgrade ``optimal`` to ``optimal_inaccurate`` when the answer's own ``residual``
        exceeds the solver's tolerance (:data:`SOLVER_TOL`) times ``scale``: a solver can
        report optimal on a badly scaled problem with an answer far from one."""
        rtol, atol = SOLVER_TOL[self.solver]
        if dual:  # multipliers are fixed only to the square root (Problem.sqrt_tol_quantities)
            rtol, atol = rtol**0.5, atol**0.5
        limit = atol + rtol * scale
        if self.status != OPTIMAL or not residual > limit:
            return self
        note = (
            f"{self.solver} reported optimal, but the answer's {what} is {residual:.3g} "
            f"(allowed {limit:.3g}): downgraded to optimal_inaccurate"
        )
        return self._replace(
            status=OPTIMAL_INACCURATE, message="; ".join(m for m in (self.message, note) if m)
        )


#: Statuses a feasible and bounded problem cannot have.
NOT_FEASIBLE_OR_BOUNDED = frozenset(
    {INFEASIBLE, INFEASIBLE_INACCURATE, UNBOUNDED, UNBOUNDED_INACCURATE}
)


def worse(a: str, b: str) -> str:
    """The worse of two statuses: no solution beats inaccurate beats optimal."""
    for status in (a, b):
        if status not in SOLUTION_PRESENT:
            return status
    return OPTIMAL_INACCURATE if OPTIMAL_INACCURATE in (a, b) else OPTIMAL


#: Each solver's absolute duality-gap and feasibility settings.
_STOP_SETTINGS = {
    "CLARABEL": ("tol_gap_abs", "tol_feas"),
    "ECOS": ("abstol", "feastol"),
    "SCS": ("eps_abs", "eps_abs"),
}


def stopping_tolerances(solver: str, solver_options: dict | None = None) -> tuple[float, float]:
    """``(duality gap, feasibility)`` the solver stops at, with these options."""
    options = {**SOLVER_DEFAULTS[solver], **(solver_options or {})}
    gap, feas = _STOP_SETTINGS[solver]
    return float(options[gap]), float(options[feas])


@functools.cache
def _installed_solvers() -> tuple[str, ...]:
    # cvxpy probes every solver on each call (about 1 ms): once per process is enough, and
    # keeps that cost out of the timed conic solves
    return tuple(cp.installed_solvers())


def run(problem: cp.Problem, solver: str, solver_options: dict | None = None) -> ConicRun:
    """Solve a CVXPY problem; never raises for numerical trouble.

    The status goes through :data:`optplan.result.CVXPY_STATUS_MAP`; ``seconds`` is the wall
    time of ``problem.solve`` (canonicalization plus solver).
    """
    options = dict(SOLVER_DEFAULTS[solver])
    options.update(solver_options or {})
    start = time.perf_counter()
    if solver not in _installed_solvers():
        return ConicRun(
            SOLVER_ERROR,
            f"solver {solver} is not installed (cvxpy has {_installed_solvers()})",
            solver,
            None,
            0.0,
        )
    try:
        with warnings.catch_warnings():
            # Reported through the status (optimal_inaccurate), not as a warning.
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        return ConicRun(SOLVER_ERROR, f"{solver}: {exc}", solver, None, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    status = map_cvxpy_status(problem.status)
    stats = problem.solver_stats
    iterations = getattr(stats, "num_iters", None) if stats is not None else None
    message = "" if problem.status == cp.OPTIMAL else f"{solver} returned status {problem.status!r}"
    return ConicRun(status, message, solver, iterations, seconds)


def run_bounded(
    problem: cp.Problem, solver: str, solver_options: dict | None, why: str
) -> ConicRun:
    """:func:`run` of a problem that is always feasible and bounded (``why`` says why): an
    infeasible or unbounded status is the solver's numerical trouble
    (:meth:`ConicRun.cannot_be`)."""
    return run(problem, solver, solver_options).cannot_be(NOT_FEASIBLE_OR_BOUNDED, why)


def run_stage(
    problem: cp.Problem,
    solver: str,
    solver_options: dict | None,
    why: str,
    before: ConicRun | None = None,
    label: str = "",
    **fields,
) -> tuple[ConicRun, PlanResult | None]:
    """:func:`run_bounded`, as the stage ``label`` after ``before`` when given
    (:meth:`ConicRun.then`): ``(run, failed)``, with ``failed`` the result to return when
    there is no solution (:func:`no_solution` with ``fields``), else ``None``."""
    result = run_bounded(problem, solver, solver_options, why)
    if before is not None:
        result = before.then(result, label)
    return result, no_solution(result, **fields)


def run_formulated(
    formulate, problem, solver: str, solver_options: dict | None, why: str, **fields
) -> tuple[cp.Problem, ConicRun, PlanResult | None]:
    """``formulate(problem)`` and its :func:`run_stage`: ``(prob, run, failed)``, with
    ``failed`` the result to return when the LP has no solution (``why`` says why it should
    have one)."""
    prob = formulate(problem)
    result, failed = run_stage(prob, solver, solver_options, why, **fields)
    return prob, result, failed


def run_bias_stage(
    problem: cp.Problem, solver: str, solver_options: dict | None, before: ConicRun, **fields
) -> tuple[ConicRun, PlanResult | None]:
    """:func:`run_stage` of an average-reward bias LP (stage 2) after its gain LP ``before``
    (stage 1), whose answer, with the gain raised by its own largest violation, is
    feasible."""
    why = "stage 1's answer is feasible and the bias is bounded"
    return run_stage(problem, solver, solver_options, why, before, "stage 2 (bias)", **fields)


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
    if sp.issparse(P_rows):  # a sparse model's rows: their stored entries, never densified
        coo = P_rows.tocoo()
        k_idx, s_next, probs = coo.row, coo.col, coo.data
    else:
        k_idx, s_next = np.nonzero(P_rows)
        probs = P_rows[k_idx, s_next]
    cols = s_next if next_offset is None else s_next + next_offset[k_idx]
    E = sp.csr_matrix((np.ones(K), (np.arange(K), rows_state)), shape=(K, n_cols))
    Pm = sp.csr_matrix((probs, (k_idx, cols)), shape=(K, n_cols))
    return (E - discount * Pm).tocsr()


def bellman_rows(
    P: np.ndarray, R: np.ndarray, mask: np.ndarray, discount: float = 1.0
) -> tuple[sp.csr_matrix, np.ndarray, tuple[np.ndarray, ...]]:
    """The Bellman inequalities ``(E - discount P) v >= r`` of the pairs of ``mask``, one per
    pair in C order: ``(E - discount P, r, (s_idx, a_idx))`` (:func:`bellman_matrix`).

    ``P`` dense ``(S, A, S)`` or the ``(S·A, S)`` matrix of rows ``s·A + a`` (a sparse
    model's ``P_rows``: its rows gathered, the constraint matrix built from its entries)."""
    s_idx, a_idx = admissible_pairs(mask)
    S, A = R.shape
    rows = P[s_idx * A + a_idx] if P.ndim == 2 else P[s_idx, a_idx]
    A = bellman_matrix(rows, s_idx, S, discount)
    return A, R[s_idx, a_idx], (s_idx, a_idx)


def scatter(
    values: np.ndarray, index: tuple[np.ndarray, ...], shape: tuple[int, ...]
) -> np.ndarray:
    """Place per-pair values back into a dense ``shape`` array (zeros elsewhere)."""
    out = np.zeros(shape)
    out[index] = values
    return out


def conic_result(run: ConicRun, **fields) -> PlanResult:
    """A ``PlanResult`` of the conic path (``fields``: value, x, multiplier, policy ...)."""
    return PlanResult(
        status=run.status,
        message=run.message,
        method="conic",
        solver=run.solver,
        iterations=run.iterations,
        solve_time=run.seconds,
        **fields,
    )


def planning_result(
    run: ConicRun, value: float, values: np.ndarray, multiplier, **fields
) -> PlanResult:
    """:func:`conic_result` of a planning problem, whose variable ``x`` is its value function
    ``values`` (``multiplier``: the Bellman inequalities' duals; ``fields``: q, policy ...)."""
    return conic_result(run, value=value, x=values, multiplier=multiplier, values=values, **fields)


def no_solution(run: ConicRun, **fields) -> PlanResult | None:
    """The result to return when the solver found no solution (``None`` when it did).

    The value is NaN, not the solver's last iterate: a number is returned only with a
    solution status.
    """
    if run.status in SOLUTION_PRESENT:
        return None
    message = run.message or f"{run.solver}: {run.status}"
    return conic_result(run._replace(message=message), **{"value": np.nan, **fields})


def solve_ball_index(problem, solver, solver_options, residual) -> PlanResult:
    """:func:`solve_index` for a ball index (KL or L1): ``max v.q`` over a ball of radius
    ``d`` around ``p``; with ``d >= 0``, ``q = p`` is feasible and the value is at most
    ``max v``, so the solver cannot rightly call it infeasible or unbounded."""
    impossible = (NOT_FEASIBLE_OR_BOUNDED, "q = p is feasible and q.v <= max v")
    return solve_index(
        problem.formulate(),
        solver,
        solver_options,
        infeasible_value=-np.inf,
        residual=residual,
        impossible=impossible if problem.radius >= 0 else None,
    )


def solve_index(
    prob: cp.Problem,
    solver: str,
    solver_options: dict | None,
    infeasible_value: float,
    residual=None,
    impossible: tuple[frozenset, str] | None = None,
) -> PlanResult:
    """Run an index problem's formulation (variable ``q``, main constraint first).

    The value is the solver's objective (``opt_val``), not CVXPY's re-evaluation at the
    returned ``q``, which is ``inf`` when the solver rounds a tiny ``q_x`` with ``p_x > 0`` to 0.
    An infeasible problem gets the problem's conventional value (``-inf`` for a max, ``+inf``
    for a min) with the solver's status. ``residual(q, duals) -> [(residual, scale, what,
    dual), ...]``, if given, checks the answer (:meth:`ConicRun.checked`; ``duals`` are the
    constraints' dual values in order); ``impossible = (statuses, why)`` names
    statuses the instance cannot have (:meth:`ConicRun.cannot_be`).
    """
    result = run(prob, solver, solver_options)
    if impossible is not None:
        result = result.cannot_be(*impossible)
    failed = no_solution(result)
    if failed:
        return failed.replace(value=infeasible_value) if result.status == INFEASIBLE else failed
    q = prob.var_dict["q"].value
    if residual is not None:
        for check in residual(q, [c.dual_value for c in prob.constraints]):
            result = result.checked(*check)
    return conic_result(
        result,
        value=float(prob.solution.opt_val),
        x=q,
        multiplier=float(prob.constraints[0].dual_value),
    )
