"""The problem-object protocol: *what* is solved; ``conic/`` and ``fast/`` say *how*.

A problem is a frozen dataclass holding validated inputs. Its class attribute ``stem`` is its
row of the stem table (:mod:`optplan.problems.stems`), which names the fast and the conic
module, each of which defines ``solve(problem, **options) -> PlanResult``; the conic module
also defines ``formulate(problem) -> cvxpy.Problem``. ``compare`` lists, per quantity, how far
two results are apart; :func:`optplan.cross_check` uses it.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from .._checks import OptplanError, OptplanTypeError, check_int, check_tolerance
from ..mdp import StateActionSizes
from ..result import PlanResult, overflow_checked
from . import stems
from ._hint import did_you_mean

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


@functools.cache
def _solve_parameters(method: str, stem: str):
    """The parameters of the ``solve`` of ``stem``'s path ``method`` (read once per process:
    solve() is called per step or per episode by agents)."""
    return inspect.signature(stems.path_module(stem, method).solve).parameters


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


#: The settings each conic solver takes in ``solver_options`` (CVXPY hands them to the solver
#: as they are): the fields of ``clarabel.DefaultSettings`` (read from the installed clarabel;
#: this list, from clarabel 0.11, when it is missing) plus CVXPY's ``use_quad_obj`` and
#: ``accept_unknown``; the keywords of ``ecos.solve`` for ECOS 2; the settings of SCS 3 plus
#: the names CVXPY's SCS interface translates (``eps``, ``use_indirect``, ``use_quad_obj``).
SOLVER_OPTION_NAMES = {
    "CLARABEL": tuple(
        """
        max_iter time_limit verbose max_step_fraction tol_gap_abs tol_gap_rel tol_feas
        tol_infeas_abs tol_infeas_rel tol_ktratio reduced_tol_gap_abs reduced_tol_gap_rel
        reduced_tol_feas reduced_tol_infeas_abs reduced_tol_infeas_rel reduced_tol_ktratio
        equilibrate_enable equilibrate_max_iter equilibrate_min_scaling
        equilibrate_max_scaling linesearch_backtrack_step min_switch_step_length
        min_terminate_step_length max_threads direct_kkt_solver direct_solve_method
        static_regularization_enable static_regularization_constant
        static_regularization_proportional dynamic_regularization_enable
        dynamic_regularization_eps dynamic_regularization_delta iterative_refinement_enable
        iterative_refinement_reltol iterative_refinement_abstol iterative_refinement_max_iter
        iterative_refinement_stop_ratio presolve_enable input_sparse_dropzeros
        chordal_decomposition_enable chordal_decomposition_merge_method
        chordal_decomposition_compact chordal_decomposition_complete_dual pardiso_iparm
        pardiso_verbose use_quad_obj accept_unknown
        """.split()
    ),
    "ECOS": tuple(
        """
        feastol abstol reltol feastol_inacc abstol_inacc reltol_inacc max_iters nitref verbose
        """.split()
    ),
    "SCS": tuple(
        """
        max_iters eps_abs eps_rel eps_infeas alpha rho_x scale adaptive_scale normalize
        acceleration_lookback acceleration_interval time_limit_secs verbose
        write_data_filename log_csv_filename linear_solver eps use_indirect use_quad_obj
        """.split()
    ),
}
#: Keywords of ``cvxpy.Problem.solve`` itself, accepted in ``solver_options`` for every solver.
CVXPY_SOLVE_OPTIONS = ("verbose", "warm_start", "canon_backend", "ignore_dpp", "enforce_dpp")


def _clarabel_settings():
    """A fresh ``clarabel.DefaultSettings()``, or ``None`` when clarabel is not installed."""
    try:
        import clarabel
    except ImportError:  # pragma: no cover - clarabel is a core dependency
        return None
    return clarabel.DefaultSettings()


def solver_option_names(solver: str) -> tuple[str, ...]:
    """The ``solver_options`` keys ``solver`` accepts (see :data:`SOLVER_OPTION_NAMES`)."""
    solver = check_solver(solver)
    names = set(SOLVER_OPTION_NAMES[solver]) | set(CVXPY_SOLVE_OPTIONS)
    if solver == "CLARABEL" and (settings := _clarabel_settings()) is not None:
        names |= {n for n in dir(settings) if not n.startswith("_") and n != "default"}
    return tuple(sorted(names))


def check_solver_options(solver: str, solver_options) -> dict:
    """Validate ``solver_options`` for ``solver`` before anything is formulated.

    Every key must be a setting of that solver (or a keyword of ``cvxpy.Problem.solve``);
    for CLARABEL each value is also tried on a ``clarabel.DefaultSettings``, so a value of the
    wrong type is refused here rather than deep inside the solver. Returns a copy.
    """
    solver = check_solver(solver)
    if solver_options is None:
        return {}
    if not isinstance(solver_options, Mapping):
        raise OptplanTypeError(
            f"solver_options must be a dict of {solver} settings, got "
            f"{type(solver_options).__name__} {solver_options!r}"
        )
    accepted = solver_option_names(solver)
    for key in solver_options:
        if not isinstance(key, str) or key not in accepted:
            hint = did_you_mean(key, accepted, n=3)
            raise OptplanError(
                f"solver_options: {key!r} is not a setting of {solver}{hint} ({solver} accepts: "
                f"{', '.join(accepted)})"
            )
    settings = _clarabel_settings() if solver == "CLARABEL" else None
    if settings is not None:
        for key, value in solver_options.items():
            if key in CVXPY_SOLVE_OPTIONS or key in ("use_quad_obj", "accept_unknown"):
                continue
            try:
                setattr(settings, key, value)
            except (TypeError, ValueError, OverflowError):
                raise OptplanTypeError(
                    f"solver_options: {key}={value!r} is not a valid value of the CLARABEL "
                    f"setting {key!r} (default {getattr(settings, key)!r})"
                ) from None
    return dict(solver_options)


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
    #: ``{quantity: (certificate, ...)}``: a quantity of ``compare`` that may differ from the
    #: other path's because it is not unique or not well conditioned (``q*`` under near-ties,
    #: a multiplier where the dual function is flat) passes when those certificates do
    #: (:func:`optplan.crosscheck.judge`): it is then proved optimal, not copied.
    certified_by: ClassVar[dict] = {}
    #: ``+inf`` is a defined answer (a hitting time from a state that cannot reach the
    #: target), not an overflow (:func:`optplan.result.overflow_checked`).
    plus_inf_ok: ClassVar[bool] = False
    #: :attr:`certified_by` for the quantities of :meth:`compare_answer` (``None``: the same).
    answer_certified_by: ClassVar[dict | None] = None

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
        module = self._path(method)
        self.check_options(method, solver, options)
        if method == "conic":
            return overflow_checked(module.solve(self, solver=solver, **options), self.plus_inf_ok)
        return overflow_checked(module.solve(self, **options), self.plus_inf_ok)

    def _path(self, method: str):
        """The module of this problem's path ``method`` (``method`` already checked)."""
        return stems.path_module(self.stem, method)

    def check_options(self, method: str = "fast", solver: str | None = None, options=None):
        """Validate the options of :meth:`solve` for ``method`` before any work.

        Every option must be a keyword of that path's ``solve``; the fast paths' ``tol`` and
        ``xtol`` must be finite numbers > 0 and ``max_iter`` a positive integer; the conic
        path's ``solver_options`` must name settings of ``solver``
        (:func:`check_solver_options`). :func:`optplan.cross_check` calls this for both
        paths before solving either.
        """
        check_method(method)
        solver = check_solver(solver)
        options = {} if options is None else options
        if not isinstance(options, Mapping):
            raise OptplanTypeError(
                f"the {method} path's options must be a dict, got {type(options).__name__}"
            )
        params = _solve_parameters(method, self.stem)
        accepted = [n for n in list(params)[1:] if n != "solver"]
        for key in options:
            if key not in accepted:
                raise OptplanTypeError(
                    f"{type(self).__name__}.solve(method={method!r}) has no option {key!r} "
                    f"(its options: {', '.join(accepted) or 'none'})"
                )
        if method == "conic":
            check_solver_options(solver, options.get("solver_options"))
            return
        for key in ("tol", "xtol"):
            if key in options:
                check_tolerance(key, options[key])
        if "max_iter" in options:
            if not (options["max_iter"] is None and params["max_iter"].default is None):
                check_int("max_iter", options["max_iter"])

    def formulate(self):
        """The ``cvxpy.Problem`` of the conic path, for users to inspect or extend."""
        return stems.conic_module(self.stem).formulate(self)

    @abstractmethod
    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """``{quantity: (abs_err, scale)}`` between two optimal results of this problem."""

    def answer_x(self, result: PlanResult):
        """The array of ``result`` that a user's ``x`` means (:func:`optplan.verify`)."""
        return result.x

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """``{quantity: (abs_err, scale)}`` between a user's answer (``.value``; ``.x`` and
        ``.multiplier``, ``None`` where not given) and an optimal result: the rule of
        :func:`optplan.verify`. By default :meth:`compare` on the answer as a result (a
        missing multiplier as NaN); quantities of what the answer leaves out are dropped by
        the caller."""
        mult = np.nan if answer.multiplier is None else answer.multiplier
        return self.compare(PlanResult(answer.value, answer.x, mult, status="optimal"), reference)


def store_readonly(problem: Problem, **arrays: np.ndarray) -> None:
    """Store validated arrays on a frozen problem object, read-only (in the order given)."""
    for name, arr in arrays.items():
        arr.setflags(write=False)
        object.__setattr__(problem, name, arr)


class EstimatedKernel(StateActionSizes):
    """Sizes of a problem over an estimated kernel ``p_hat`` of shape ``(S, A, S)``."""

    sizes_from = "p_hat"
