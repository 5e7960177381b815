"""Conic path of ``KLInfRate``: ``min sum rel_entr(p_I, q_I)  s.t.  v.q >= rho`` (exp cones)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..problems.kl_ball import simplex_residual
from ..result import UNBOUNDED, UNBOUNDED_INACCURATE, PlanResult
from ._common import solve_index, stopping_tolerances


def formulate(problem) -> cp.Problem:
    """Constraint 0: the target ``v.q >= rho`` (its dual is ``dD/drho``); 1: ``sum q = 1``."""
    p, v = problem.p, problem.v
    support = np.flatnonzero(p > 0)
    q = cp.Variable(p.size, name="q", nonneg=True)
    kl = cp.sum(cp.rel_entr(p[support], q[support]))
    return cp.Problem(cp.Minimize(kl), [v @ q >= problem.target, cp.sum(q) == 1])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    v, target = problem.v, problem.target
    scale = 1.0 + float(np.abs(v).max())

    support = problem.p > 0
    p = problem.p
    tolerances = stopping_tolerances(solver, solver_options)

    def residual(q, duals):
        shortfall = (target - float(v @ q)) / scale
        primal = max(shortfall, simplex_residual(q)), 1.0, "target constraint violation"
        # stationarity: q_x (1 - lam (v_x - target)) = p_x on the support (lam: the dual of
        # the target constraint); a wrong multiplier breaks it
        lam = float(duals[0])
        gap = np.abs(q[support] * (1.0 - lam * (v[support] - target)) - p[support])
        stationarity = float(gap.max()) / float(p.max()), 1.0, "stationarity residual", True
        # How well any solver stopping at this duality gap and feasibility pins the
        # multiplier: the dual objective sum p log(1 - lam (v - target)) has curvature k at
        # lam, so lam is fixed only to sqrt(2 gap / k) + feas / k (a target met only to feas
        # moves lam by feas / k). Near target = p.v (k -> Var of v, tiny when p sits on one
        # state) that exceeds the tolerance the multiplier is compared at: not verified.
        dv = v[support] - target
        k = float(np.sum(p[support] * dv**2 / (1.0 - lam * dv) ** 2))
        gap_tol, feas_tol = tolerances
        spread = (2.0 * gap_tol / k) ** 0.5 + feas_tol * scale / k if k > 0 else np.inf
        # compared as cross_check compares multipliers: atol + rtol |lam|
        return [primal, stationarity, (spread, abs(lam), "multiplier uncertainty", True)]

    return solve_index(
        formulate(problem),
        solver,
        solver_options,
        infeasible_value=np.inf,
        residual=residual,
        impossible=(frozenset({UNBOUNDED, UNBOUNDED_INACCURATE}), "KL >= 0 bounds it below"),
    )
