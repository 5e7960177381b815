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
import time

import numpy as np

from .._checks import MissingDependency, check_int
from .._progress import progress_bar
from ..crosscheck import solver_tolerances
from ..problems.base import check_solver
from .instance import (
    check_fn,
    check_instance,
    evaluate,
    parse_answer,
    resolve_target,
    short,
)
from .outcome import Outcome
from .report import Counterexample, VerifyReport

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


def _fn_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}:{name}" if module and module != "__main__" else name


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


class _Run:
    """The state of one verification: the evaluations by instance (hypothesis replays them
    while shrinking), the report, and the first index and outcome of each failure kind."""

    def __init__(self, target, fn, report: VerifyReport, solver_options, progress: bool):
        self.target, self.fn, self.report = target, fn, report
        self.solver_options = solver_options
        self.cache: dict = {}
        self.first: dict[str, int] = {}
        self.firsts: dict[str, Outcome] = {}
        self.bar = _progress_bar(target.label, report.n) if progress else None
        self.step = max(1, report.n // 10)

    def evaluate(self, inputs) -> Outcome:
        key = _key(inputs)
        if key not in self.cache:
            r = self.report
            self.cache[key] = evaluate(
                self.target, self.fn, inputs, r.solver, self.solver_options, r.rtol, r.atol
            )
        return self.cache[key]

    def record(self, inputs) -> None:
        """Evaluate and count one instance of the generation phase."""
        try:
            self._record(inputs)
        finally:
            if self.bar is not None:
                self._advance()

    def _record(self, inputs) -> None:
        report = self.report
        index = report.tried
        report.tried += 1
        fresh = _key(inputs) not in self.cache
        outcome = self.evaluate(inputs)
        if fresh:
            report.fn_seconds += outcome.fn_seconds
            report.conic_seconds += outcome.conic_seconds
        report.record(index, outcome)
        if outcome.failed and not outcome.invalid:
            self.first.setdefault(outcome.failed[0], index)
            self.firsts[outcome.failed[0]] = self.firsts.get(outcome.failed[0], outcome)

    def _advance(self) -> None:
        report = self.report
        self.bar.update(1)
        if report.tried % self.step == 0:
            self.bar.set_postfix(
                compared=report.compared,
                failing=report.disagreed + report.raised,
                refresh=False,
            )

    def generate(self, strategy) -> None:
        """The generation phase: every instance evaluated once and counted."""
        try:
            _run_hypothesis(strategy, self.record, self.report.n, self.report.seed, shrink=False)
        finally:
            if self.bar is not None:
                self.bar.close()

    def conclude(self, strategy, shrink: int, problem, options) -> None:
        """After the generation phase: the distinct instances, the square-root quantities
        shown, and one counterexample per failure kind (the first ``shrink`` kinds shrunk)."""
        report, target = self.report, self.target
        report.distinct = len(self.cache)
        shown = set(target.quantities) | set(report.worst)
        report.sqrt_tol = tuple(sorted(q for q in target.sqrt_tol if q in shown))
        for i, kind in enumerate(sorted(self.first, key=self.first.get)):
            skipped = f"shrink={shrink} kinds shrunk"
            ce = self.counterexample(strategy, kind, i < shrink, skipped, problem, options)
            report.counterexamples.append(ce)

    def counterexample(self, strategy, kind: str, shrink: bool, skipped: str, problem, options):
        """The counterexample of ``kind``: shrunk when ``shrink``, else its first instance
        (with the note ``skipped``)."""
        report = self.report
        if shrink:
            outcome, shrunk, steps, note = _shrink(
                strategy, self.evaluate, kind, report.n, report.seed, self.cache
            )
        else:
            outcome, shrunk, steps, note = None, False, 0, skipped
        if outcome is None:
            outcome = self.firsts[kind]
        reference = None
        if outcome.compared:
            try:
                reference = self.target.reference(self.target.prepare(outcome.inputs))
            except Exception:  # the reference is context only
                reference = None
        return Counterexample(
            kind=kind,
            outcome=outcome,
            first_index=self.first[kind],
            shrunk=shrunk,
            steps=steps,
            problem=problem,
            seed=report.seed,
            n=report.n,
            reference=reference,
            note=note,
            options=options,
        )


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
        compared and failing; when stderr is not a terminal, a plain line every 10 s instead.

    Returns
    -------
    VerifyReport
        ``ok``, counts by status and outcome, worst error per quantity, exceptions per
        instance, and the counterexamples (each with a literal that rebuilds it).

    Only instances the solver reports ``optimal`` are compared; an exception of ``fn`` counts
    as a failure there and is listed wherever it happens.
    """
    check_fn(fn)
    target = resolve_target(problem, options, fn)
    n, seed = check_int("n", n, 1), check_int("seed", seed, 0)
    shrink = check_int("shrink", shrink, 0)
    solver = check_solver(solver)
    rtol, atol = solver_tolerances(solver, rtol, atol)
    require_hypothesis()
    strategy = target.strategy()
    report = _new_report(target, _fn_name(fn), solver, seed, n, rtol, atol)
    start = time.perf_counter()
    run = _Run(target, fn, report, solver_options, progress)
    run.generate(strategy)
    run.conclude(strategy, shrink, problem, options)
    report.seconds = time.perf_counter() - start
    return report


def _new_report(target, fn_name: str, solver, seed, n, rtol, atol) -> VerifyReport:
    """The empty report of a run (with a note when masks are not drawn)."""
    report = VerifyReport(
        problem=target.label,
        fn=fn_name,
        solver=solver,
        seed=seed,
        n=n,
        rtol=rtol,
        atol=atol,
        sqrt_tol=tuple(sorted(target.sqrt_tol)),
    )
    if getattr(target, "masks", False) and not target.settings.get("masks"):
        report.notes.append("no action masks drawn: fn takes no action_mask keyword")
    return report


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
        return None, False, 0, f"shrinking failed: {type(exc).__name__}: {short(exc)}"
    return None, False, 0, "the replay did not meet the kind again"


def _progress_bar(name: str, n: int):
    """A progress bar over the ``n`` instances of one verification, on stderr (plain lines
    when stderr is not a terminal)."""
    return progress_bar(total=n, desc=f"verify {name}", unit="instance")
