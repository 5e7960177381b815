"""The engine of :func:`optplan.verify`: draw instances with hypothesis, call the user's
function, solve the conic formulation, compare, then shrink one counterexample per kind.

Two hypothesis runs with the same seed:

1. **generation** (``phases=[generate]``, ``max_examples=n``, the test never fails): every
   instance is evaluated once and recorded (statuses, errors, exceptions), so the report
   covers all ``n`` instances rather than stopping at the first failure;
2. **shrinking**, once per failure kind (``phases=[generate, shrink]``, the test fails on
   that kind): hypothesis draws the same instances again (same seed, same outcomes up to the
   first failure; they come from a cache, not re-solved), fails on the first one of the kind
   and shrinks it with its own shrinker. The minimal failing instance is the counterexample.

Hypothesis is imported only here, inside the functions (``import optplan`` stays free of it).
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
import traceback
import warnings
from collections.abc import Mapping

import numpy as np

from .._checks import MissingDependency, OptplanError, OptplanTypeError, check_int, check_positive
from ..crosscheck import judge
from ..problems.base import SOLVER_TOL, check_solver
from ..result import OPTIMAL, SOLUTION_PRESENT, SOLVER_ERROR, PlanResult
from .builtin import builtin_target
from .declared import DeclaredProblem
from .report import MAX_LISTED, Answer, Counterexample, Outcome, VerifyReport, Worst

__all__ = ["verify", "check_instance", "resolve_target", "parse_answer", "require_hypothesis"]

INSTALL_HINT = (
    "optplan.verify needs hypothesis (its instance generation and shrinking): "
    "pip install 'optplan[verify]' (or pip install hypothesis)"
)


def require_hypothesis():
    """Import hypothesis, or raise :class:`~optplan._checks.MissingDependency` saying how to
    install it."""
    try:
        import hypothesis
    except ImportError as exc:
        raise MissingDependency(INSTALL_HINT) from exc
    return hypothesis


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


def _fn_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}:{name}" if module and module != "__main__" else name


def _check_fn(fn) -> None:
    if not callable(fn):
        raise OptplanTypeError(f"verify: fn must be callable, got {type(fn).__name__} {fn!r}")


def _tolerances(solver, rtol, atol) -> tuple[float, float]:
    d_rtol, d_atol = SOLVER_TOL[solver]
    rtol = d_rtol if rtol is None else check_positive("rtol", rtol, allow_zero=True)
    atol = d_atol if atol is None else check_positive("atol", atol, allow_zero=True)
    return rtol, atol


# -- reading the user's answer ----------------------------------------------------------------


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
    status = None
    if hasattr(out, "value") and not isinstance(out, (np.ndarray, np.generic)):
        value = out.value
        x = getattr(out, "x", None)
        mult = getattr(out, "multiplier", None)
        status = getattr(out, "status", None)
    elif isinstance(out, Mapping):
        if "value" not in out:
            return (
                None,
                "bad output",
                f"fn returned a mapping without a 'value' key: {sorted(map(str, out))}",
            )
        value, x, mult = out["value"], out.get("x"), out.get("multiplier")
    elif isinstance(out, (tuple, list)):
        if not 1 <= len(out) <= 3:
            return (
                None,
                "bad output",
                f"fn returned a {type(out).__name__} of {len(out)} items; expected value, "
                "(value, x) or (value, x, multiplier)",
            )
        value, x, mult = (*out, None, None)[:3]
    else:
        value, x, mult = out, None, None
    if isinstance(status, str) and status not in SOLUTION_PRESENT:
        return None, "status", f"fn reported status {status!r} where the solver found the optimum"
    try:
        v = np.asarray(value)
        if v.ndim != 0 or v.dtype.kind not in "biuf":
            raise TypeError
        value = float(v)
    except (TypeError, ValueError):
        shape = getattr(np.asarray(value, dtype=object), "shape", ())
        hint = " (return (value, x) to pass the optimizer)" if shape else ""
        return None, "bad output", f"value must be a real number, got {_short(value)}{hint}"
    if math.isnan(value):
        return None, "bad output", "value is NaN"
    arrays = {}
    for name, given in (("x", x), ("multiplier", mult)):
        if name not in expected or given is None:
            arrays[name] = None
            continue
        try:
            arr = np.asarray(given, dtype=float)
        except (TypeError, ValueError):
            return None, "bad output", f"{name} is not a real array: {_short(given)}"
        if arr.shape != tuple(expected[name]):
            return (
                None,
                "bad output",
                f"{name} has shape {arr.shape}, expected {tuple(expected[name])}",
            )
        if np.isnan(arr).any():
            idx = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0]) if arr.ndim else ()
            return None, "bad output", f"{name} is NaN" + (f" at index {idx}" if idx else "")
        arrays[name] = float(arr) if arr.ndim == 0 else arr
    return Answer(value, arrays["x"], arrays["multiplier"]), "", ""


def _short(obj, limit: int = 120) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."


def _exception_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


# -- one instance -----------------------------------------------------------------------------


def _evaluate(target, fn, inputs: dict, solver, solver_options, rtol, atol) -> Outcome:
    try:
        prepared = target.prepare(inputs)
    except OptplanError as exc:  # a drawn instance the problem refuses: a strategy's bug
        return Outcome(inputs, "invalid", invalid=str(exc))
    start = time.perf_counter()
    exception, out = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = target.call(fn, inputs)
        except Exception as exc:  # the user's function: reported, never aborting the run
            exception = _exception_text(exc)
    fn_warnings = tuple(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    fn_seconds = time.perf_counter() - start
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
    conic_seconds = time.perf_counter() - start
    base = dict(
        inputs=inputs,
        status=conic.status,
        conic=conic,
        output=out,
        exception=exception,
        fn_warnings=fn_warnings,
        conic_exception=conic_exception,
        fn_seconds=fn_seconds,
        conic_seconds=conic_seconds,
    )
    if conic.status != OPTIMAL:
        reason = f"not compared: the solver reported {conic.status}"
        return Outcome(**base, reason=reason)
    if exception is not None:
        kind = f"raises {exception.split(':')[0]}"
        return Outcome(**base, failed=(kind,), reason=f"fn raised {exception}")
    answer, kind, reason = parse_answer(out, target.expected(prepared, conic))
    if answer is None:
        return Outcome(**base, failed=(kind,), reason=reason)
    try:
        compared = target.compare(prepared, answer, conic)
    except Exception as exc:
        return Outcome(
            **base,
            answer=answer,
            failed=("bad output",),
            reason=f"the answer could not be compared: {_exception_text(exc)}",
        )
    # quantities the user did not return are not compared (nor their certificates)
    for name in list(compared):
        if (answer.x is None and name.startswith("x")) or (
            answer.multiplier is None and name.startswith("multiplier")
        ):
            del compared[name]
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
    _check_fn(fn)
    target = resolve_target(problem, options, fn)
    solver = check_solver(solver)
    rtol, atol = _tolerances(solver, rtol, atol)
    if not isinstance(inputs, Mapping):
        raise OptplanTypeError(f"inputs must be a dict of the problem's inputs, got {inputs!r}")
    inputs = {k: np.asarray(v) if isinstance(v, (list, tuple)) else v for k, v in inputs.items()}
    return _evaluate(target, fn, dict(inputs), solver, solver_options, rtol, atol)


# -- the run ----------------------------------------------------------------------------------


def _key(inputs: dict):
    parts = []
    for k, v in inputs.items():
        a = np.asarray(v)
        parts.append((k, a.dtype.str, a.shape, a.tobytes()))
    return tuple(parts)


class _Found(Exception):
    """Raised inside the shrinking run on an instance of the wanted kind."""

    def __init__(self, outcome: Outcome):
        super().__init__(outcome.reason)
        self.outcome = outcome


@contextlib.contextmanager
def _without_local_constants():
    """Hypothesis (6.131+) mixes into its draws, with probability 0.05 each, constants it
    reads from the source of every *local* module loaded (the project's files, the user's
    module, the running script). Then the instances behind a seed change whenever any of
    those files does, and a counterexample's seed would not reproduce it. During a
    verification run the pool of local constants is empty (its global constants stay), so
    ``seed`` and ``n`` alone fix the instances. A private hook of hypothesis: when it is
    missing, nothing is changed."""
    try:
        from hypothesis.internal.conjecture import providers

        empty = providers.Constants()
        original = providers._get_local_constants
        cache = providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError, TypeError):  # another hypothesis version
        yield
        return
    cache.clear()  # entries built from local constants before this run
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()


def _run_hypothesis(strategy, body, n: int, seed: int, shrink: bool) -> None:
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        derandomize=False,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
    )
    @given(strategy)
    def run(inputs):
        body(inputs)

    with _without_local_constants():
        run()


def verify(
    fn,
    problem,
    n: int = 1000,
    seed: int = 0,
    solver: str | None = "CLARABEL",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    options: dict | None = None,
    solver_options: dict | None = None,
    shrink: int = 3,
    progress: bool = False,
) -> VerifyReport:
    """Check a user's function against the conic formulation of a problem on ``n`` instances
    drawn by hypothesis, and shrink the failures to minimal counterexamples.

    Parameters
    ----------
    fn : callable
        The function under test. For optplan's problems it is called with the problem's
        inputs as positional arguments (see the table in :mod:`optplan.verification`; the MDP
        problems pass ``action_mask=`` by keyword when ``fn`` accepts it, and draw masks only
        then); for a :class:`DeclaredProblem` with the parameters by keyword. It returns the
        value, ``(value, x)``, ``(value, x, multiplier)``, a dict with those keys, or an
        object with ``.value`` (``.x``, ``.multiplier``, ``.status``), e.g. a
        :class:`~optplan.PlanResult`; what it does not return is not compared.
    problem : str or DeclaredProblem
        A stem of optplan's problems (``"kl_ball"``, ``"kl_inf"``, ``"l1_ball"``,
        ``"discounted"``, ``"average_reward"``, ``"finite_horizon"``, ``"k_temperature"``,
        ``"ube"``, ``"moment_matching"``, ``"optimistic"``, ``"clipped_optimistic"``) or a
        declared problem.
    n : int >= 1
        Instances to draw (hypothesis may stop earlier on a small domain).
    seed : int >= 0
        Seeds hypothesis: the same seed draws the same instances.
    solver : {"CLARABEL", "ECOS", "SCS"}
        The conic solver, at optplan's tight settings.
    rtol, atol : float >= 0, optional
        Override the solver's row of :data:`optplan.SOLVER_TOL`. An error is allowed
        ``atol + rtol * scale`` exactly as in :func:`optplan.cross_check` (the same
        ``compare`` of the problem; the optimizer and multiplier of curved problems at the
        square roots of both, the certificates tight).
    options : dict, optional
        Instance settings of the problem (``max_states``, ...; ``ball`` and ``criterion`` for
        ``"optimistic"``).
    solver_options : dict, optional
        Passed to the conic solver.
    shrink : int >= 0
        Failure kinds to shrink (one counterexample each, in order of first appearance);
        later kinds are reported by their first, unshrunk instance.
    progress : bool
        A progress bar with ETA on stderr (tqdm): instances tried of ``n``, with the counts
        compared and failing.

    Returns
    -------
    VerifyReport
        ``ok``, counts by status and outcome, worst error per quantity, exceptions per
        instance, and the counterexamples (each with a literal that rebuilds it).

    Only instances the solver reports ``optimal`` are compared; an exception of ``fn`` counts
    as a failure there and is listed wherever it happens.
    """
    _check_fn(fn)
    target = resolve_target(problem, options, fn)
    n = check_int("n", n, 1)
    seed = check_int("seed", seed, 0)
    shrink = check_int("shrink", shrink, 0)
    solver = check_solver(solver)
    rtol, atol = _tolerances(solver, rtol, atol)
    require_hypothesis()
    strategy = target.strategy()
    name = target.label
    report = VerifyReport(
        problem=name,
        fn=_fn_name(fn),
        solver=solver,
        seed=seed,
        n=n,
        rtol=rtol,
        atol=atol,
        sqrt_tol=tuple(sorted(target.sqrt_tol)),
    )
    if getattr(target, "masks", False) and not target.settings.get("masks"):
        report.notes.append("no action masks drawn: fn takes no action_mask keyword")
    cache: dict = {}
    first: dict[str, int] = {}
    start = time.perf_counter()
    step = max(1, n // 10)

    def evaluate(inputs):
        key = _key(inputs)
        if key not in cache:
            cache[key] = _evaluate(target, fn, inputs, solver, solver_options, rtol, atol)
        return cache[key]

    bar = _progress_bar(name, n) if progress else None

    def record(inputs):
        try:
            _record(inputs)
        finally:
            if bar is not None:
                bar.update(1)
                if report.tried % step == 0:
                    bar.set_postfix(
                        compared=report.compared,
                        failing=report.disagreed + report.raised,
                        refresh=False,
                    )

    def _record(inputs):
        index = report.tried
        report.tried += 1
        fresh = _key(inputs) not in cache
        outcome = evaluate(inputs)
        if fresh:
            report.fn_seconds += outcome.fn_seconds
            report.conic_seconds += outcome.conic_seconds
        if outcome.invalid:
            report.invalid += 1
            return
        for text in outcome.fn_warnings:
            report.fn_warnings[text] += 1
        if outcome.conic_exception is not None:
            report.n_conic_exceptions += 1
            if len(report.conic_exceptions) < MAX_LISTED:
                report.conic_exceptions.append(
                    {"index": index, "exception": outcome.conic_exception}
                )
        report.statuses[outcome.status] += 1
        if outcome.exception is not None:
            report.n_exceptions += 1
            if len(report.exceptions) < MAX_LISTED:
                report.exceptions.append(
                    {
                        "index": index,
                        "exception": outcome.exception,
                        "status": outcome.status,
                        "counted": outcome.compared,
                    }
                )
        if outcome.compared:
            report.compared += 1
            if outcome.exception is not None:
                report.raised += 1
            elif outcome.failed:
                report.disagreed += 1
            else:
                report.agreed += 1
            for qname in outcome.certified:
                report.certified[qname] += 1
            for qname, (err, scale, allowed) in outcome.errors.items():
                if qname in outcome.certified or qname.endswith("_alt"):
                    continue  # proved optimal / a certificate only: not a worst error
                w = report.worst.get(qname)
                cand = Worst(qname, err, scale, allowed, index)
                if w is None or _worse(cand, w):
                    report.worst[qname] = cand
        if outcome.failed:
            report.kinds[outcome.failed[0]] += 1
            first.setdefault(outcome.failed[0], index)
            if len(report.failures) < MAX_LISTED:
                report.failures.append(
                    {"index": index, "kinds": list(outcome.failed), "reason": outcome.reason}
                )
            firsts[outcome.failed[0]] = firsts.get(outcome.failed[0], outcome)

    firsts: dict[str, Outcome] = {}
    try:
        _run_hypothesis(strategy, record, n, seed, shrink=False)
    finally:
        if bar is not None:
            bar.close()
    report.distinct = len(cache)
    shown = set(target.quantities) | set(report.worst)
    report.sqrt_tol = tuple(sorted(q for q in target.sqrt_tol if q in shown))
    for i, kind in enumerate(sorted(first, key=first.get)):
        if i < shrink:
            outcome, shrunk, steps, note = _shrink(strategy, evaluate, kind, n, seed, cache)
        else:
            outcome, shrunk, steps, note = None, False, 0, f"shrink={shrink} kinds shrunk"
        if outcome is None:
            outcome = firsts[kind]
        reference = None
        if outcome.compared:
            try:
                reference = target.reference(target.prepare(outcome.inputs))
            except Exception:  # the reference is context only
                reference = None
        report.counterexamples.append(
            Counterexample(
                kind=kind,
                outcome=outcome,
                first_index=first[kind],
                shrunk=shrunk,
                steps=steps,
                problem=problem,
                seed=seed,
                n=n,
                reference=reference,
                note=note,
                options=options,
            )
        )
    report.seconds = time.perf_counter() - start
    return report


def _worse(a: Worst, b: Worst) -> bool:
    """``a`` is the larger error (by its ratio to the allowance, then absolutely)."""
    ra, rb = a.ratio, b.ratio
    if not np.isfinite(a.abs_err) and np.isfinite(b.abs_err):
        return True
    if ra != rb:
        return bool(ra > rb)
    return bool(a.abs_err > b.abs_err)


def _shrink(strategy, evaluate, kind, n, seed, cache):
    """Hypothesis's shrinker on the first instance of ``kind`` (replayed from the seed):
    ``(outcome, shrunk, new evaluations, note)``, outcome ``None`` when it was not found."""
    before = len(cache)

    def body(inputs):
        outcome = evaluate(inputs)
        if kind in outcome.failed:
            raise _Found(outcome)

    try:
        _run_hypothesis(strategy, body, n, seed, shrink=True)
    except _Found as found:
        return found.outcome, True, len(cache) - before, ""
    except Exception as exc:  # e.g. hypothesis's Flaky: fn answers differently on a replay
        return None, False, 0, f"shrinking failed: {type(exc).__name__}: {_short(exc)}"
    return None, False, 0, "the replay did not meet the kind again"


def _progress_bar(name: str, n: int):
    """A tqdm bar over the ``n`` instances of one verification, on stderr."""
    from tqdm.auto import tqdm

    return tqdm(
        total=n,
        desc=f"verify {name}",
        unit="instance",
        file=sys.stderr,
        dynamic_ncols=True,
        smoothing=0.1,
    )
