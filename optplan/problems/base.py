"""The problem-object protocol: *what* is solved; ``conic/`` and ``fast/`` say *how*.

A problem is a frozen dataclass holding validated inputs. Its class attribute ``stem`` names
the modules ``optplan.conic.<stem>`` and ``optplan.fast.<stem>``, each of which defines
``solve(problem, **options) -> PlanResult``; the conic module also defines
``formulate(problem) -> cvxpy.Problem``. ``compare`` lists, per quantity, how far two results
are apart; :func:`optplan.cross_check` uses it.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import ClassVar

from .._checks import OptplanError
from ..result import PlanResult

METHODS = ("fast", "conic")
#: Conic solvers optplan drives through CVXPY.
SOLVERS = ("CLARABEL", "ECOS", "SCS")
DEFAULT_SOLVER = "CLARABEL"
#: Per-solver ``(rtol, atol)`` of the answers at :data:`SOLVER_DEFAULTS`: what
#: :func:`optplan.cross_check` allows as ``|a - b| <= atol + rtol * scale`` (cvxpy's
#: ``SOLVER_TO_TOL`` in spirit), and the largest residual of its own a conic answer may show
#: (relative to the problem's scale) and still be called ``optimal``. Interior-point solvers at
#: these settings reach ~1e-9; SCS is a first-order method.
SOLVER_TOL = {
    "CLARABEL": (1e-7, 1e-7),
    "ECOS": (1e-6, 1e-6),
    "SCS": (1e-4, 1e-4),
}


def check_method(method: str) -> str:
    if method not in METHODS:
        raise OptplanError(f"method must be one of {METHODS}, got {method!r}")
    return method


def check_solver(solver: str | None) -> str:
    """Validate a conic solver name (case-insensitive); ``None`` gives the default."""
    if solver is None:
        return DEFAULT_SOLVER
    if not isinstance(solver, str) or solver.upper() not in SOLVERS:
        raise OptplanError(f"solver must be one of {SOLVERS}, got {solver!r}")
    return solver.upper()


class Problem(ABC):
    """Base class of the problem objects (subclasses are frozen dataclasses)."""

    stem: ClassVar[str]
    #: Quantities of ``compare`` checked at the square root of the solver tolerance. The
    #: optimizer of a curved (non-LP) problem is fixed by a conic solver only to about the
    #: square root of its objective accuracy (``f(x) - f* ~ m |x - x*|^2 / 2``), and its dual
    #: is the least accurate output of an interior-point method (measured on the KL ball at
    #: d = 1e-6, lam = 219: Clarabel off by 3e-7 relative, ECOS by 7e-6, while a finite
    #: difference of the fast value agrees with the fast lam to 1e-8). Such problems also
    #: report tight ``*_certificate`` entries: feasibility and objective of the fast optimizer
    #: and the stationarity of (optimizer, multiplier), which with the tight ``value`` check
    #: prove the fast answer optimal.
    sqrt_tol_quantities: ClassVar[frozenset] = frozenset()

    def solve(self, method: str = "fast", solver: str | None = None, **options) -> PlanResult:
        """Solve the problem.

        Parameters
        ----------
        method : {"fast", "conic"}
            ``"fast"``: closed form / root finding / dynamic programming (``optplan.fast``);
            ``"conic"``: the CVXPY formulation (``optplan.conic``).
        solver : {"CLARABEL", "ECOS", "SCS"}, optional
            Conic solver (``method="conic"`` only; validated either way).
        **options
            Passed to the path: e.g. ``algorithm``, ``tol``, ``max_iter`` for the fast path,
            solver settings (``solver_options={...}``) for the conic path.
        """
        check_method(method)
        solver = check_solver(solver)
        module = importlib.import_module(f"optplan.{method}.{self.stem}")
        if method == "conic":
            return module.solve(self, solver=solver, **options)
        return module.solve(self, **options)

    def formulate(self):
        """The ``cvxpy.Problem`` of the conic path, for users to inspect or extend."""
        module = importlib.import_module(f"optplan.conic.{self.stem}")
        return module.formulate(self)

    @abstractmethod
    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """``{quantity: (abs_err, scale)}`` between two optimal results of this problem."""
