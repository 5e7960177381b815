"""One instance of :func:`optplan.verify`: call the user's function, solve the conic
formulation, read the answer by the return convention and compare it by the problem's rule."""

from __future__ import annotations

import math
import time
import traceback
import warnings
from collections.abc import Mapping

import numpy as np

from .._checks import OptplanError, OptplanTypeError
from ..crosscheck import judge, solver_tolerances
from ..problems.base import check_solver
from ..result import OPTIMAL, SOLUTION_PRESENT, SOLVER_ERROR, PlanResult
from .builtin import builtin_target
from .declared import DeclaredProblem
from .outcome import Answer, Outcome

__all__ = ["check_instance", "evaluate", "parse_answer", "resolve_target"]


def resolve_target(problem, options: dict | None = None, fn=None):
    """The verification target of ``problem``: a stem of optplan's problems or a
    :class:`DeclaredProblem`, configured with ``options``."""
    if isinstance(problem, DeclaredProblem):
        return problem.configure(options, fn)
    if isinstance(problem, str):
        return builtin_target(problem).configure(options, fn)
    raise OptplanTypeError(
        "verify: problem must be the name of one of optplan's problems (e.g. 'kl_ball') or a "
        f"DeclaredProblem, got {type(problem).__name__} {problem!r}"
    )


def check_fn(fn) -> None:
    if not callable(fn):
        raise OptplanTypeError(f"verify: fn must be callable, got {type(fn).__name__} {fn!r}")


# -- reading the user's answer ----------------------------------------------------------------


def _fields(out):
    """``(value, x, multiplier, status)`` of a return value, or a reason it is malformed."""
    if hasattr(out, "value") and not isinstance(out, (np.ndarray, np.generic)):
        value, x = out.value, getattr(out, "x", None)
        mult = getattr(out, "multiplier", None)
        return (value, x, mult, getattr(out, "status", None)), ""
    if isinstance(out, Mapping):
        if "value" not in out:
            keys = sorted(map(str, out))
            return None, f"fn returned a mapping without a 'value' key: {keys}"
        return (out["value"], out.get("x"), out.get("multiplier"), None), ""
    if isinstance(out, (tuple, list)):
        if not 1 <= len(out) <= 3:
            return None, (
                f"fn returned a {type(out).__name__} of {len(out)} items; expected value, "
                "(value, x) or (value, x, multiplier)"
            )
        return (*(*out, None, None)[:3], None), ""
    return (out, None, None, None), ""


def _real_value(value):
    """``value`` as a float, or a reason it is not a real number."""
    try:
        v = np.asarray(value)
        if v.ndim != 0 or v.dtype.kind not in "biuf":
            raise TypeError
        value = float(v)
    except (TypeError, ValueError):
        shape = getattr(np.asarray(value, dtype=object), "shape", ())
        hint = " (return (value, x) to pass the optimizer)" if shape else ""
        return None, f"value must be a real number, got {short(value)}{hint}"
    if math.isnan(value):
        return None, "value is NaN"
    return value, ""


def _real_array(name: str, given, shape):
    """``given`` as a float array of ``shape`` (a float when 0-d), or a reason it is not."""
    try:
        arr = np.asarray(given, dtype=float)
    except (TypeError, ValueError):
        return None, f"{name} is not a real array: {short(given)}"
    if arr.shape != tuple(shape):
        return None, f"{name} has shape {arr.shape}, expected {tuple(shape)}"
    if np.isnan(arr).any():
        idx = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0]) if arr.ndim else ()
        return None, f"{name} is NaN" + (f" at index {idx}" if idx else "")
    return (float(arr) if arr.ndim == 0 else arr), ""


def parse_answer(out, expected: dict) -> tuple[Answer | None, str, str]:
    """The user's return value as an :class:`Answer`, by the return convention:

    * a real number: the value;
    * a tuple or list ``(value,)``, ``(value, x)`` or ``(value, x, multiplier)``;
    * a mapping with keys ``"value"`` and optionally ``"x"``, ``"multiplier"``;
    * an object with a ``.value`` attribute and optionally ``.x``, ``.multiplier`` (an
      optplan :class:`~optplan.PlanResult`, a namedtuple ...); a ``.status`` string outside
      ``optimal`` / ``optimal_inaccurate`` is a failure of kind ``"status"``.

    ``expected`` maps ``"x"`` / ``"multiplier"`` to the shapes compared (only those are read).
    Returns ``(answer, kind, reason)``: ``answer`` None and a reason when malformed (kind
    ``"bad output"`` or ``"status"``).
    """
    fields, reason = _fields(out)
    if fields is None:
        return None, "bad output", reason
    value, x, mult, status = fields
    if isinstance(status, str) and status not in SOLUTION_PRESENT:
        return None, "status", f"fn reported status {status!r} where the solver found the optimum"
    value, reason = _real_value(value)
    if reason:
        return None, "bad output", reason
    arrays = {}
    for name, given in (("x", x), ("multiplier", mult)):
        if name not in expected or given is None:
            arrays[name] = None
            continue
        arrays[name], reason = _real_array(name, given, expected[name])
        if reason:
            return None, "bad output", reason
    return Answer(value, arrays["x"], arrays["multiplier"]), "", ""


def short(obj, limit: int = 120) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."


def _exception_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


# -- one instance -----------------------------------------------------------------------------


def _call(target, fn, inputs: dict) -> dict:
    """The user's function on ``inputs``: its output or exception, warnings and time."""
    start = time.perf_counter()
    exception, out = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = target.call(fn, inputs)
        except Exception as exc:  # the user's function: reported, never aborting the run
            exception = _exception_text(exc)
    fn_warnings = tuple(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    return dict(
        output=out,
        exception=exception,
        fn_warnings=fn_warnings,
        fn_seconds=time.perf_counter() - start,
    )


def _solve(target, prepared, solver, solver_options) -> dict:
    """The conic reference (a solver error when the path raises), its exception and time."""
    start = time.perf_counter()
    conic_exception = None
    with warnings.catch_warnings():
        # the reference's own numerical trouble is in its status (optimal_inaccurate ...)
        warnings.simplefilter("ignore")
        try:
            conic = target.solve(prepared, solver, solver_options)
        except OptplanError:  # a declaration error (e.g. a formulation that is not DCP)
            raise
        except Exception as exc:  # the reference failed: this instance is not compared
            conic_exception = _exception_text(exc)
            conic = PlanResult(
                np.nan,
                status=SOLVER_ERROR,
                message=f"the conic path raised {conic_exception}",
                method="conic",
                solver=solver,
            )
    return dict(
        status=conic.status,
        conic=conic,
        conic_exception=conic_exception,
        conic_seconds=time.perf_counter() - start,
    )


def _compared(target, prepared, answer: Answer, conic: PlanResult) -> dict:
    """The problem's comparison, without the quantities the user did not return (nor their
    certificates)."""
    compared = target.compare(prepared, answer, conic)
    for name in list(compared):
        if (answer.x is None and name.startswith("x")) or (
            answer.multiplier is None and name.startswith("multiplier")
        ):
            del compared[name]
    return compared


def _judged(target, prepared, base: dict, rtol, atol) -> Outcome:
    """The outcome of an instance the solver called optimal: the answer read and judged."""
    conic = base["conic"]
    if base["exception"] is not None:
        kind = f"raises {base['exception'].split(':')[0]}"
        return Outcome(**base, failed=(kind,), reason=f"fn raised {base['exception']}")
    answer, kind, reason = parse_answer(base["output"], target.expected(prepared, conic))
    if answer is None:
        return Outcome(**base, failed=(kind,), reason=reason)
    try:
        compared = _compared(target, prepared, answer, conic)
    except Exception as exc:
        return Outcome(
            **base,
            answer=answer,
            failed=("bad output",),
            reason=f"the answer could not be compared: {_exception_text(exc)}",
        )
    errors, failed, bad, certified = judge(
        compared, rtol, atol, target.sqrt_tol, target.certified_by
    )
    bad = [b.replace("|a - b|", "|fn - conic|") for b in bad]
    return Outcome(
        **base,
        answer=answer,
        errors=errors,
        failed=tuple(failed),
        certified=tuple(certified),
        reason="; ".join(bad) if bad else "all quantities agree",
    )


def evaluate(target, fn, inputs: dict, solver, solver_options, rtol, atol) -> Outcome:
    """``fn`` and the conic reference on one instance, compared (:class:`Outcome`)."""
    try:
        prepared = target.prepare(inputs)
    except OptplanError as exc:  # a drawn instance the problem refuses: a strategy's bug
        return Outcome(inputs, "invalid", invalid=str(exc))
    called = _call(target, fn, inputs)
    solved = _solve(target, prepared, solver, solver_options)
    base = dict(inputs=inputs, **solved, **called)
    if solved["status"] != OPTIMAL:
        return Outcome(**base, reason=f"not compared: the solver reported {solved['status']}")
    return _judged(target, prepared, base, rtol, atol)


def check_instance(
    fn,
    problem,
    inputs: dict,
    solver: str | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    options: dict | None = None,
    solver_options: dict | None = None,
) -> Outcome:
    """Evaluate ``fn`` on one instance (``inputs``, e.g. a counterexample's) as
    :func:`optplan.verify` does: ``.agree``, ``.status``, ``.errors``, ``.reason``."""
    check_fn(fn)
    target = resolve_target(problem, options, fn)
    solver = check_solver(solver)
    rtol, atol = solver_tolerances(solver, rtol, atol)
    if not isinstance(inputs, Mapping):
        raise OptplanTypeError(f"inputs must be a dict of the problem's inputs, got {inputs!r}")
    inputs = {k: np.asarray(v) if isinstance(v, (list, tuple)) else v for k, v in inputs.items()}
    return evaluate(target, fn, dict(inputs), solver, solver_options, rtol, atol)
