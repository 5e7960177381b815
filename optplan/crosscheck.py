"""Solve a problem both ways and compare values, solutions and multipliers."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._checks import OptplanTypeError, check_positive
from .problems.base import SOLVER_TOL, Problem, check_solver
from .result import SOLUTION_PRESENT, CrossCheck


def allowed_error(
    name: str, scale: float, rtol: float, atol: float, sqrt_quantities=frozenset()
) -> float:
    """The error quantity ``name`` may show: ``atol + rtol * scale``, at the square roots of
    both for the quantities a conic solver fixes only that well
    (:attr:`~optplan.problems.base.Problem.sqrt_tol_quantities`). The one rule of
    :func:`cross_check` and :func:`optplan.verify`."""
    a, r = tolerances(name, rtol, atol, sqrt_quantities)
    return float(a + r * scale)


def solver_tolerances(solver: str, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """``(rtol, atol)``: the given ones (finite, ``>= 0``), else the solver's row of
    :data:`~optplan.problems.base.SOLVER_TOL` (``solver`` already checked)."""
    d_rtol, d_atol = SOLVER_TOL[solver]
    rtol = d_rtol if rtol is None else check_positive("rtol", rtol, allow_zero=True)
    atol = d_atol if atol is None else check_positive("atol", atol, allow_zero=True)
    return rtol, atol


def tolerances(name: str, rtol: float, atol: float, sqrt_quantities=frozenset()):
    """``(atol, rtol)`` for quantity ``name`` (square roots for ``sqrt_quantities``)."""
    if name in sqrt_quantities:
        return float(np.sqrt(atol)), float(np.sqrt(rtol))
    return atol, rtol


def within(err: float, allowed: float) -> bool:
    """``err <= allowed`` for a finite ``err`` (NaN or an infinite error never agrees)."""
    return bool(np.isfinite(err) and err <= allowed)


class Judgement(NamedTuple):
    """:func:`judge`'s verdict: ``errors[q] = (abs_err, scale, allowed)``; the ``failed``
    quantities with their ``reasons``; the ``certified`` ones (beyond tolerance of the other
    path's, proved optimal by their certificates)."""

    errors: dict
    failed: list
    reasons: list
    certified: list


def judge(
    compared: dict, rtol: float, atol: float, sqrt_quantities=frozenset(), certified_by=None
) -> Judgement:
    """The one rule of :func:`cross_check` and :func:`optplan.verify`: ``compared`` is
    ``{quantity: (abs_err, scale)}`` (``Problem.compare``); returns a :class:`Judgement`.

    A quantity fails when its error exceeds :func:`allowed_error`, unless every certificate
    ``certified_by[q]`` lists is within its own tolerance: a non-unique or ill-conditioned
    quantity (``q*`` under near-ties, the multiplier where the dual is flat, an occupancy
    when rewards are tiny) is then proved optimal rather than equal to the solver's. Entries
    named ``*_alt`` are such certificates only: they never fail on their own."""
    certified_by = certified_by or {}
    errors = {}
    for name, (err, scale) in compared.items():
        allowed = allowed_error(name, scale, rtol, atol, sqrt_quantities)
        errors[name] = (float(err), float(scale), allowed)
    ok = {name: within(err, allowed) for name, (err, _, allowed) in errors.items()}
    failed, reasons, certified = [], [], []
    for name, (err, scale, _) in errors.items():
        if ok[name] or name.endswith("_alt"):
            continue
        certs = certified_by.get(name, ())
        if certs and all(ok.get(c, False) for c in certs):
            certified.append(name)
            continue
        a, r = tolerances(name, rtol, atol, sqrt_quantities)
        failed.append(name)
        reasons.append(f"{name}: |a - b| = {err:.3g} > {a:g} + {r:g} * {scale:.3g}")
    return Judgement(errors, failed, reasons, certified)


def cross_check(
    problem: Problem,
    solver: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    fast_options: dict | None = None,
    conic_options: dict | None = None,
) -> CrossCheck:
    """Solve ``problem`` with ``method="fast"`` and ``method="conic"`` and compare.

    Parameters
    ----------
    problem : Problem
        Any problem object (``DiscountedPlanning``, ``AverageRewardPlanning``, ...).
    solver : str, optional
        Conic solver; default ``CLARABEL``.
    rtol, atol : float >= 0, optional
        Override the per-solver tolerances of :data:`SOLVER_TOL` (finite, non-negative).
    fast_options, conic_options : dict, optional
        Passed to the two ``solve`` calls; both are validated
        (:meth:`~optplan.problems.base.Problem.check_options`) before either path runs.

    Returns
    -------
    CrossCheck
        ``agree`` is True when both paths find a solution and every quantity the problem
        compares (``problem.compare``: value, solution ``x``, multipliers, ...) is within
        tolerance (its square root for ``problem.sqrt_tol_quantities``), or when both report
        the same non-solution status (e.g. both infeasible).
    """
    if not isinstance(problem, Problem):
        raise OptplanTypeError(
            f"problem must be an optplan problem object, got {type(problem).__name__}"
        )
    solver = check_solver(solver)
    rtol, atol = solver_tolerances(solver, rtol, atol)
    problem.check_options("fast", None, fast_options)  # both paths' options, before either runs
    problem.check_options("conic", solver, conic_options)
    fast = problem.solve(method="fast", **(fast_options or {}))
    conic = problem.solve(method="conic", solver=solver, **(conic_options or {}))
    abs_err, rel_err = {}, {}
    both = fast.status in SOLUTION_PRESENT and conic.status in SOLUTION_PRESENT
    if not both:
        agree = fast.status == conic.status
        message = f"fast: {fast.status} ({fast.message}); conic: {conic.status} ({conic.message})"
        return CrossCheck(agree, abs_err, rel_err, rtol, atol, fast, conic, message)
    errors, _, bad, _ = judge(
        problem.compare(fast, conic),
        rtol,
        atol,
        problem.sqrt_tol_quantities,
        problem.certified_by,
    )
    for name, (err, scale, _) in errors.items():
        abs_err[name] = err
        rel_err[name] = err / (1.0 + scale)
    bad = [b.replace("|a - b|", "|fast - conic|") for b in bad]
    message = "; ".join(bad) if bad else "all quantities agree"
    return CrossCheck(not bad, abs_err, rel_err, rtol, atol, fast, conic, message)
