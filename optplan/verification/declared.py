"""Bring your own problem: a CVXPY formulation, the domains of its parameters, and
:func:`optplan.verify` draws instances, solves them, and checks a fast function against it.

Example (the entropy-regularized maximum, whose closed form is ``tau logsumexp(v / tau)``)::

    import cvxpy as cp
    import optplan as op
    from optplan.verification import Box

    def entropic_max(v, tau):
        q = cp.Variable(v.size, name="q", nonneg=True)
        return cp.Problem(cp.Maximize(q @ v + tau * cp.sum(cp.entr(q))), [cp.sum(q) == 1])

    problem = op.DeclaredProblem(
        entropic_max,
        {"v": Box(("S",), -100.0, 100.0), "tau": Box((), 0.01, 100.0)},
        dims={"S": (1, 6)},
        x="q",
    )
    report = op.verify(lambda v, tau: (tau * logsumexp(v / tau), softmax(v / tau)), problem)

The fast function is called with the parameters by keyword (``fn(v=..., tau=...)``), scalars
as Python floats, and returns the value, ``(value, x)`` or ``(value, x, multiplier)`` as for
optplan's own problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import OptplanError, OptplanTypeError
from ..problems._compare import diff
from ..result import OPTIMAL, PlanResult

__all__ = ["Box", "Nonnegative", "Simplex", "DeclaredProblem"]


def _check_shape(owner: str, shape) -> tuple:
    if isinstance(shape, (int, str)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise OptplanTypeError(
            f"{owner}: shape must be a tuple of ints and dimension names, got {shape!r}"
        ) from None
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer, str)):
            raise OptplanTypeError(
                f"{owner}: shape entries must be ints or dimension names, got {d!r} in {shape}"
            )
        if not isinstance(d, str) and d < 1:
            raise OptplanError(f"{owner}: the domain is empty: shape {shape} has a dimension {d}")
    return tuple(d if isinstance(d, str) else int(d) for d in shape)


@dataclass(frozen=True)
class Box:
    """Real arrays of ``shape`` with entries in ``[low, high]`` (finite bounds).

    Drawn: the bounds themselves, 0 and +-1e-300 when inside, repeated values (ties), uniform
    values and log-uniform magnitudes within the bounds. ``shape`` holds ints and dimension
    names (``("S",)``) sized by :class:`DeclaredProblem`'s ``dims``; ``()`` is a scalar.
    """

    shape: tuple = ()
    low: float = -1e6
    high: float = 1e6

    def __post_init__(self):
        object.__setattr__(self, "shape", _check_shape("Box", self.shape))
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise OptplanTypeError(f"Box: {name} must be a real number, got {value!r}")
            if not math.isfinite(value):
                raise OptplanError(f"Box: {name} must be finite, got {value!r}")
        if not self.low <= self.high:
            raise OptplanError(
                f"Box: the domain is empty: low = {self.low!r} > high = {self.high!r}"
            )

    def strategy(self, shape: tuple):
        from hypothesis import strategies as st

        lo, hi = float(self.low), float(self.high)
        pool = [
            x for x in (1.0, 0.0, -1.0, lo, hi, 1e-300, -1e-300, 0.5 * (lo + hi)) if lo <= x <= hi
        ]
        pool = list(dict.fromkeys(pool))
        parts = [st.sampled_from(pool)]
        if lo < hi:
            parts.append(st.floats(lo, hi))
            logs = st.tuples(st.floats(-300.0, 300.0), st.booleans()).map(
                lambda t: (-1.0 if t[1] else 1.0) * 10.0 ** t[0]
            )
            parts.append(logs.filter(lambda x: lo <= x <= hi))
        entry = st.one_of(*parts)
        return _array(entry, shape)


def Nonnegative(shape: tuple = (), high: float = 1e6) -> Box:
    """``Box(shape, 0, high)``: entries in ``[0, high]`` (0 and 1e-300 drawn often)."""
    return Box(shape, 0.0, high)


@dataclass(frozen=True)
class Simplex:
    """Arrays of ``shape`` whose last axis is a probability distribution (rows of ``P``,
    ``p``): zeros and tiny masses down to 1e-300 drawn on purpose."""

    shape: tuple = ("S",)

    def __post_init__(self):
        shape = _check_shape("Simplex", self.shape)
        if len(shape) < 1:
            raise OptplanError("Simplex: the domain needs a last axis (the outcomes), got shape ()")
        object.__setattr__(self, "shape", shape)

    def strategy(self, shape: tuple):
        from hypothesis import strategies as st

        from .strategies import WEIGHTS, _normalize

        entry = st.one_of(st.sampled_from(WEIGHTS), st.floats(1e-3, 1.0))
        return _array(entry, shape).map(_normalize)


def _array(entry, shape: tuple):
    from hypothesis import strategies as st

    size = int(np.prod(shape, dtype=int))
    if shape == ():
        return entry.map(float)
    return st.lists(entry, min_size=size, max_size=size).map(
        lambda xs: np.array(xs, dtype=float).reshape(shape)
    )


_DOMAINS = (Box, Simplex)


def _check_domains(domains) -> None:
    """``domains`` is a non-empty dict of named :class:`Box` / :class:`Simplex` domains."""
    if not isinstance(domains, dict) or not domains:
        raise OptplanTypeError(
            f"DeclaredProblem: domains must be a non-empty dict {{name: domain}}, got {domains!r}"
        )
    for key, dom in domains.items():
        if not isinstance(key, str):
            raise OptplanTypeError(f"DeclaredProblem: domain names must be strings, got {key!r}")
        if not isinstance(dom, _DOMAINS):
            raise OptplanTypeError(
                f"DeclaredProblem: domains[{key!r}] must be a Box, Nonnegative or Simplex, "
                f"got {dom!r}"
            )


def _parameter_domains(params: dict, domains: dict) -> dict:
    """The domains of a ``cvxpy.Problem``'s parameters ``params``: one per parameter, each
    with the parameter's shape."""
    missing = sorted(set(params) - set(domains))
    extra = sorted(set(domains) - set(params))
    if missing or extra:
        raise OptplanError(
            "DeclaredProblem: the domains must name the problem's parameters exactly: "
            + "; ".join(
                m
                for m in (
                    f"no domain for {missing}" if missing else "",
                    f"no parameter named {extra}" if extra else "",
                )
                if m
            )
            + f" (parameters: {sorted(params)})"
        )
    fixed = {}
    for key, dom in domains.items():
        shape = tuple(params[key].shape)
        default = ("S",) if isinstance(dom, Simplex) else ()
        if dom.shape not in (default, shape):
            raise OptplanError(
                f"DeclaredProblem: domains[{key!r}] has shape {dom.shape}, but parameter "
                f"{key!r} has shape {shape}"
            )
        if 0 in shape:
            raise OptplanError(f"DeclaredProblem: the domain of {key!r} is empty (shape {shape})")
        if isinstance(dom, Simplex) and len(shape) < 1:
            raise OptplanError(
                f"DeclaredProblem: Simplex domain of {key!r} needs a vector parameter, got a scalar"
            )
        fixed[key] = Simplex(shape) if isinstance(dom, Simplex) else Box(shape, dom.low, dom.high)
    return fixed


def _check_dims(domains: dict, dims: dict | None) -> dict:
    """``{name: (low, high)}`` for every dimension name of the domains' shapes."""
    names = {d for dom in domains.values() for d in dom.shape if isinstance(d, str)}
    dims = dict(dims or {})
    for key in sorted(names - set(dims)):
        raise OptplanError(
            f"DeclaredProblem: dimension {key!r} is used in a shape but has no range in "
            f"dims (give dims={{{key!r}: (low, high)}})"
        )
    checked = {}
    for key, rng in dims.items():
        try:
            lo, hi = (int(r) for r in rng)
        except (TypeError, ValueError):
            raise OptplanTypeError(
                f"DeclaredProblem: dims[{key!r}] must be a pair (low, high) of ints, got {rng!r}"
            ) from None
        if lo < 1 or lo > hi:
            raise OptplanError(
                f"DeclaredProblem: the domain is empty: dims[{key!r}] = {rng!r} (need "
                "1 <= low <= high)"
            )
        checked[key] = (lo, hi)
    return checked


class DeclaredProblem:
    """A problem the user declares: a CVXPY formulation plus the domains of its inputs.

    Parameters
    ----------
    formulation : callable or cvxpy.Problem
        Either a function of named parameters returning a ``cvxpy.Problem`` (called once per
        instance with numpy arrays and floats), or a ``cvxpy.Problem`` whose
        ``cvxpy.Parameter`` objects are named (``cp.Parameter(3, name="v")``): each instance
        sets their values and solves it again (CVXPY reuses the compilation when the
        problem is DPP).
    domains : dict
        ``{name: Box(...) | Nonnegative(...) | Simplex(...)}``, one per parameter, in the
        order the parameters are listed in the report. With a ``cvxpy.Problem`` the
        shapes come from the parameters (a domain's own shape, if given, must match).
    dims : dict, optional
        Ranges ``{name: (low, high)}`` (inclusive, ``low >= 1``) of the dimension names used
        in the domains' shapes; one size per name per instance, shared by all parameters.
    x : str, optional
        Name of the ``cvxpy.Variable`` compared with the fast function's ``x``.
    multiplier : int, optional
        Index of the constraint (in ``problem.constraints``) whose ``dual_value`` is compared
        with the fast function's ``multiplier`` (CVXPY's sign convention).
    sqrt_tol : tuple of str
        Quantities compared at the square root of the solver tolerance (default ``x`` and
        ``multiplier``: a conic solver fixes a curved problem's optimizer and duals only that
        well); the value is always compared at the tolerance itself.
    name : str, optional
        A label for reports (default: the formulation function's name).
    """

    def __init__(
        self,
        formulation: Callable[..., Any] | Any,
        domains: dict,
        *,
        dims: dict | None = None,
        x: str | None = None,
        multiplier: int | None = None,
        sqrt_tol: tuple = ("x", "multiplier"),
        name: str | None = None,
    ):
        import cvxpy as cp

        _check_domains(domains)
        self.parameters = None
        if isinstance(formulation, cp.Problem):
            self.parameters = {p.name(): p for p in formulation.parameters()}
            domains = _parameter_domains(self.parameters, domains)
            default_name = "declared problem"
        elif callable(formulation):
            default_name = getattr(formulation, "__name__", "declared problem")
        else:
            raise OptplanTypeError(
                "DeclaredProblem: formulation must be a function returning a cvxpy.Problem or "
                f"a cvxpy.Problem with Parameters, got {type(formulation).__name__}"
            )
        checked = _check_dims(domains, dims)
        if x is not None and not isinstance(x, str):
            raise OptplanTypeError(f"DeclaredProblem: x must be a variable's name, got {x!r}")
        if multiplier is not None and (
            isinstance(multiplier, bool) or not isinstance(multiplier, (int, np.integer))
        ):
            raise OptplanTypeError(
                f"DeclaredProblem: multiplier must be a constraint index, got {multiplier!r}"
            )
        self.formulation = formulation
        self.domains = dict(domains)
        self.dims = checked
        self.x = x
        self.multiplier = None if multiplier is None else int(multiplier)
        self.sqrt_tol = frozenset(sqrt_tol)
        self.certified_by = {}
        self.name = name or default_name
        self.quantities = {"value": "the optimal value"}
        if x is not None:
            self.quantities["x"] = f"the optimal {x}"
        if multiplier is not None:
            self.quantities["multiplier"] = f"the dual of constraint {multiplier}"
        self.settings = {}
        if self.parameters is not None:
            self._check_variable(formulation)
            if not formulation.is_dcp():
                raise OptplanError(
                    "DeclaredProblem: the problem does not follow CVXPY's DCP rules, so no "
                    "conic solver takes it"
                )

    def __repr__(self) -> str:
        return f"DeclaredProblem({self.name!r}, parameters {list(self.domains)})"

    # -- the protocol of a verification target --------------------------------------------

    label = property(lambda self: self.name)

    def configure(self, options: dict | None, fn=None) -> DeclaredProblem:
        if options:
            raise OptplanError(
                f"verify: a declared problem takes no options, got {sorted(options)}"
            )
        return self

    def strategy(self):
        from hypothesis import strategies as st

        @st.composite
        def instances(draw):
            sizes = {k: draw(st.integers(lo, hi)) for k, (lo, hi) in self.dims.items()}
            out = {}
            for key, dom in self.domains.items():
                shape = tuple(sizes[d] if isinstance(d, str) else d for d in dom.shape)
                out[key] = draw(dom.strategy(shape))
            return out

        return instances()

    def prepare(self, inputs: dict) -> dict:
        return inputs

    def call(self, fn, inputs: dict):
        return fn(
            **{k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        )

    def _check_variable(self, problem) -> None:
        if self.x is not None and self.x not in {v.name() for v in problem.variables()}:
            raise OptplanError(
                f"DeclaredProblem: x={self.x!r} names no variable of the problem (variables: "
                f"{sorted(v.name() for v in problem.variables())})"
            )
        if self.multiplier is not None and not 0 <= self.multiplier < len(problem.constraints):
            raise OptplanError(
                f"DeclaredProblem: multiplier={self.multiplier} is not a constraint index (the "
                f"problem has {len(problem.constraints)} constraints)"
            )

    def formulate(self, inputs: dict):
        """The ``cvxpy.Problem`` of one instance."""
        import cvxpy as cp

        if self.parameters is not None:
            for key, value in inputs.items():
                self.parameters[key].value = value
            return self.formulation
        problem = self.formulation(**inputs)
        if not isinstance(problem, cp.Problem):
            raise OptplanTypeError(
                f"DeclaredProblem: the formulation {self.name!r} returned "
                f"{type(problem).__name__}, not a cvxpy.Problem"
            )
        self._check_variable(problem)
        if not problem.is_dcp():
            raise OptplanError(
                f"DeclaredProblem: the formulation {self.name!r} does not follow CVXPY's DCP "
                "rules, so no conic solver takes it"
            )
        return problem

    def solve(self, inputs: dict, solver: str, solver_options: dict | None) -> PlanResult:
        from ..conic._common import run

        problem = self.formulate(inputs)
        outcome = run(problem, solver, solver_options)
        if outcome.status != OPTIMAL:
            return PlanResult(
                np.nan,
                status=outcome.status,
                message=outcome.message,
                method="conic",
                solver=solver,
            )
        x = None
        if self.x is not None:
            var = next(v for v in problem.variables() if v.name() == self.x)
            x = np.asarray(var.value, dtype=float)
        mult = None
        if self.multiplier is not None:
            dual = problem.constraints[self.multiplier].dual_value
            mult = np.asarray(dual, dtype=float)
            mult = float(mult) if mult.ndim == 0 else mult
        return PlanResult(
            float(problem.value),
            x,
            mult,
            status=outcome.status,
            method="conic",
            solver=solver,
            iterations=outcome.iterations,
            solve_time=outcome.seconds,
        )

    def reference(self, inputs: dict) -> None:
        return None

    def expected(self, inputs: dict, conic: PlanResult) -> dict[str, tuple]:
        out = {}
        if self.x is not None:
            out["x"] = np.shape(conic.x)
        if self.multiplier is not None:
            out["multiplier"] = np.shape(conic.multiplier)
        return out

    def compare(self, inputs: dict, answer, conic: PlanResult) -> dict:
        out = {"value": diff(answer.value, conic.value)}
        if answer.x is not None and self.x is not None:
            out["x"] = diff(answer.x, conic.x)
        if answer.multiplier is not None and self.multiplier is not None:
            out["multiplier"] = diff(answer.multiplier, conic.multiplier)
        return out
