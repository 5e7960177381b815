"""What :func:`optplan.verify` returns: per-instance outcomes, shrunk counterexamples and the
report that sums them up."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..result import PlanResult, _jsonable
from .instance import check_instance
from .outcome import MAX_LISTED, Answer, Outcome, Worst, worse

__all__ = ["Answer", "Outcome", "Worst", "Counterexample", "VerifyReport", "literal"]


def _literal_value(value) -> str:
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            body = repr(value.tolist())
        elif value.dtype.kind in "iu":
            return f"np.array({value.tolist()!r})"
        else:
            body = _float_list(value.astype(float).tolist())
        return f"np.array({body})"
    if isinstance(value, (float, np.floating)):
        return _float(float(value))
    return repr(value)


def _float(x: float) -> str:
    if np.isnan(x):
        return "np.nan"
    if np.isinf(x):
        return "np.inf" if x > 0 else "-np.inf"
    return repr(x)


def _float_list(obj) -> str:
    if isinstance(obj, list):
        return "[" + ", ".join(_float_list(o) for o in obj) + "]"
    return _float(obj)


def literal(inputs: dict) -> str:
    """Python source that rebuilds ``inputs`` exactly (``repr`` of a float round-trips)."""
    return "\n".join(f"{k} = {_literal_value(v)}" for k, v in inputs.items())


def _shorten(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _size(inputs: dict) -> int:
    return sum(int(np.size(v)) for v in inputs.values())


def _fmt_answer(ans: Answer | PlanResult | None, keys) -> str:
    if ans is None:
        return "-"
    parts = []
    for key in keys:
        val = getattr(ans, key, None)
        if val is None:
            continue
        arr = np.asarray(val)
        if arr.ndim == 0:
            parts.append(f"{key} {float(arr)!r}")
        elif arr.size <= 12:
            parts.append(f"{key} {np.array2string(arr, precision=12, separator=', ')}")
        else:
            parts.append(f"{key} <array {arr.shape}>")
    return "; ".join(parts) or "-"


@dataclass(frozen=True)
class Counterexample:
    """A failing instance, shrunk by hypothesis to a minimal one of its kind.

    ``inputs`` rebuilds it (``literal`` is the same as source code), ``first_index`` is where
    the unshrunk kind first appeared in the run (``op.verify(..., seed=seed)`` draws the same
    instances again), ``reference`` is optplan's own fast answer on it (optplan's problems).
    """

    kind: str
    outcome: Outcome
    first_index: int
    shrunk: bool
    steps: int
    problem: Any
    seed: int
    n: int
    reference: PlanResult | None = None
    note: str = ""
    options: dict | None = None

    @property
    def inputs(self) -> dict:
        return self.outcome.inputs

    @property
    def literal(self) -> str:
        return literal(self.inputs)

    def check(self, fn, **kwargs):
        """Run ``fn`` on this instance again (:func:`optplan.verification.check_instance`)."""
        kwargs.setdefault("options", self.options)
        return check_instance(fn, self.problem, self.inputs, **kwargs)

    def describe(self, max_numbers: int = 120) -> str:
        o = self.outcome
        how = (
            f"shrunk from instance {self.first_index} in {self.steps} new evaluations"
            if self.shrunk
            else f"instance {self.first_index}, not shrunk ({self.note or 'no smaller instance'})"
        )
        lines = [f"counterexample [{self.kind}] ({how}):"]
        if _size(self.inputs) <= max_numbers:
            lines += ["  " + line for line in self.literal.splitlines()]
        else:
            shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in self.inputs.items())
            lines.append(f"  ({_size(self.inputs)} numbers: {shapes}; see .literal)")
        keys = ("value", "x", "multiplier")
        if o.exception:
            lines.append(f"  fn raised   {o.exception}")
        else:
            lines.append(
                f"  fn          {_fmt_answer(o.answer, keys) if o.answer else repr(o.output)[:200]}"
            )
        if o.conic is not None:
            lines.append(
                f"  conic       {_fmt_answer(o.conic, keys)}  [{o.conic.solver}: {o.status}]"
            )
        if self.reference is not None:
            ref = self.reference
            lines.append(f"  optplan     {_fmt_answer(ref, keys)}  [fast: {ref.status}]")
        lines.append(f"  why         {o.reason}")
        what = repr(self.problem) if isinstance(self.problem, str) else "problem"
        opts = f", options={self.options!r}" if self.options else ""
        lines.append(
            f"  reproduce   the literal above, or op.verify(fn, {what}, n={self.n}, "
            f"seed={self.seed}{opts}) again"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def to_dict(self) -> dict:
        o = self.outcome
        return {
            "kind": self.kind,
            "shrunk": self.shrunk,
            "steps": self.steps,
            "first_index": self.first_index,
            "inputs": {k: _jsonable(v) for k, v in self.inputs.items()},
            "literal": self.literal,
            "reason": o.reason,
            "exception": o.exception,
            "fn": None
            if o.answer is None
            else {k: _jsonable(getattr(o.answer, k)) for k in ("value", "x", "multiplier")},
            "conic": None
            if o.conic is None
            else {
                "status": o.status,
                **{k: _jsonable(getattr(o.conic, k)) for k in ("value", "x", "multiplier")},
            },
            "optplan_fast": None
            if self.reference is None
            else {
                "status": self.reference.status,
                **{k: _jsonable(getattr(self.reference, k)) for k in ("value", "x", "multiplier")},
            },
            "errors": {k: _jsonable(list(v)) for k, v in o.errors.items()},
        }


@dataclass
class VerifyReport:
    """The outcome of :func:`optplan.verify`.

    Attributes
    ----------
    problem, fn, solver, seed, n, rtol, atol
        What was run (``n`` instances requested; ``rtol``/``atol`` from the solver's row of
        :data:`optplan.SOLVER_TOL` unless given; quantities of ``sqrt_tol`` at their square
        roots).
    tried : int
        Instances drawn and evaluated (hypothesis may stop short of ``n`` on a small domain).
    statuses : Counter
        The conic solver's status per instance; only ``optimal`` instances are compared.
    compared, agreed, disagreed, raised : int
        Instances the solver called optimal; of those, where every quantity is within
        tolerance, where some is not (or the answer is malformed), where ``fn`` raised.
    exceptions : list of dict
        Every instance (up to 100 listed; ``n_exceptions`` counts all) where ``fn`` raised:
        ``index``, ``exception``, ``status`` (the conic status: an exception counts as a
        failure only where the solver found the instance ``optimal``).
    failures : list of dict
        Failing instances (up to 100 listed): ``index``, ``kinds``, ``reason``.
    kinds : Counter
        Failures by kind (a quantity name, ``"bad output"``, ``"status"``, ``"raises T"``).
    certified : Counter
        Per quantity, the agreeing instances where it differs from the solver's beyond
        tolerance but its certificates prove it optimal (``Problem.certified_by``: ``q*``
        under near-ties, a multiplier where the dual is flat); such errors are left out of
        ``worst``.
    fn_warnings : Counter
        Warnings ``fn`` emitted (``"RuntimeWarning: overflow ..."``), by the number of
        instances; they are recorded, not failures (the conic path's own are silenced: its
        status reports its trouble).
    worst : dict
        Per compared quantity, the :class:`Worst` error (largest ``abs_err / allowed``).
    counterexamples : list of Counterexample
        One shrunk counterexample per failure kind (the first ``shrink`` kinds).
    seconds, fn_seconds, conic_seconds : float
        Wall time of the run, of ``fn`` and of the conic solves (generation phase).
    """

    problem: str
    fn: str
    solver: str
    seed: int
    n: int
    rtol: float
    atol: float
    sqrt_tol: tuple = ()
    tried: int = 0
    distinct: int = 0
    invalid: int = 0
    statuses: Counter = field(default_factory=Counter)
    compared: int = 0
    agreed: int = 0
    disagreed: int = 0
    raised: int = 0
    n_exceptions: int = 0
    exceptions: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)
    certified: Counter = field(default_factory=Counter)
    fn_warnings: Counter = field(default_factory=Counter)
    n_conic_exceptions: int = 0
    conic_exceptions: list = field(default_factory=list)
    worst: dict = field(default_factory=dict)
    counterexamples: list = field(default_factory=list)
    seconds: float = 0.0
    fn_seconds: float = 0.0
    conic_seconds: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """At least one instance compared, none disagreed, ``fn`` never raised on one."""
        return self.compared > 0 and self.disagreed == 0 and self.raised == 0

    def __bool__(self) -> bool:
        return self.ok

    def record(self, index: int, outcome: Outcome) -> None:
        """Count instance ``index``'s outcome: statuses, exceptions, agreement, certificates,
        the worst error per quantity and the failures by kind."""
        if outcome.invalid:
            self.invalid += 1
            return
        for text in outcome.fn_warnings:
            self.fn_warnings[text] += 1
        if outcome.conic_exception is not None:
            self.n_conic_exceptions += 1
            if len(self.conic_exceptions) < MAX_LISTED:
                self.conic_exceptions.append({"index": index, "exception": outcome.conic_exception})
        self.statuses[outcome.status] += 1
        if outcome.exception is not None:
            self.n_exceptions += 1
            if len(self.exceptions) < MAX_LISTED:
                self.exceptions.append(
                    {
                        "index": index,
                        "exception": outcome.exception,
                        "status": outcome.status,
                        "counted": outcome.compared,
                    }
                )
        if outcome.compared:
            self._count_compared(index, outcome)
        if outcome.failed:
            self.kinds[outcome.failed[0]] += 1
            if len(self.failures) < MAX_LISTED:
                self.failures.append(
                    {"index": index, "kinds": list(outcome.failed), "reason": outcome.reason}
                )

    def _count_compared(self, index: int, outcome: Outcome) -> None:
        """Agreement, certificates and the worst errors of a compared instance."""
        self.compared += 1
        if outcome.exception is not None:
            self.raised += 1
        elif outcome.failed:
            self.disagreed += 1
        else:
            self.agreed += 1
        for qname in outcome.certified:
            self.certified[qname] += 1
        for qname, (err, scale, allowed) in outcome.errors.items():
            if qname in outcome.certified or qname.endswith("_alt"):
                continue  # proved optimal / a certificate only: not a worst error
            w = self.worst.get(qname)
            cand = Worst(qname, err, scale, allowed, index)
            if w is None or worse(cand, w):
                self.worst[qname] = cand

    def summary(self, counterexamples: bool = True) -> str:
        verdict = "AGREE" if self.ok else "DISAGREE"
        if self.compared == 0:
            verdict = "NOTHING COMPARED"
        lines = [
            f"verify {self.fn} against {self.problem} ({self.solver}, seed {self.seed}, "
            f"rtol {self.rtol:g}, atol {self.atol:g}"
            + (f"; {', '.join(self.sqrt_tol)} at their square roots" if self.sqrt_tol else "")
            + f"): {verdict}",
            f"  instances {self.tried} (of n = {self.n}; {self.distinct} distinct)"
            + (f", invalid {self.invalid}" if self.invalid else ""),
            "  conic status  "
            + ", ".join(
                f"{k} {v}" for k, v in sorted(self.statuses.items(), key=lambda kv: -kv[1])
            ),
            f"  compared {self.compared} (solver optimal): agree {self.agreed}, disagree "
            f"{self.disagreed}, fn raised {self.raised}",
        ]
        if self.n_exceptions:
            shown = Counter(e["exception"].split(":")[0] for e in self.exceptions)
            lines.append(
                f"  fn raised on {self.n_exceptions} instance(s) in all: "
                + ", ".join(f"{k} x{v}" for k, v in shown.items())
            )
        if self.n_conic_exceptions:
            first = self.conic_exceptions[0]
            lines.append(
                f"  the conic path raised on {self.n_conic_exceptions} instance(s) (not "
                f"compared), first at {first['index']}: {_shorten(first['exception'])}"
            )
        for text, count in self.fn_warnings.most_common(3):
            lines.append(f"  fn warned on {count} instance(s): {_shorten(text)}")
        if self.kinds:
            lines.append(
                "  failures by kind  " + ", ".join(f"{k} {v}" for k, v in self.kinds.most_common())
            )
        if self.certified:
            lines.append(
                "  proved optimal, not equal to the solver's (certified_by)  "
                + ", ".join(f"{k} {v}" for k, v in self.certified.most_common())
            )
        if self.worst:
            lines.append(
                "  quantity                  worst |fn - conic|     allowed   ratio  (instance)"
            )
            for name, w in self.worst.items():
                lines.append(
                    f"  {name:<24} {w.abs_err:>18.3e} {w.allowed:>11.3e} {w.ratio:>7.3g}"
                    f"  ({w.index})"
                )
        lines.append(
            f"  time {self.seconds:.1f} s (fn {self.fn_seconds:.2f} s, conic "
            f"{self.conic_seconds:.1f} s)"
        )
        lines += [f"  note: {note}" for note in self.notes]
        if counterexamples:
            for ce in self.counterexamples:
                lines.append(ce.describe())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict:
        return {
            "problem": self.problem,
            "fn": self.fn,
            "solver": self.solver,
            "seed": self.seed,
            "n": self.n,
            "rtol": self.rtol,
            "atol": self.atol,
            "sqrt_tol": list(self.sqrt_tol),
            "ok": self.ok,
            "tried": self.tried,
            "distinct": self.distinct,
            "invalid": self.invalid,
            "statuses": dict(self.statuses),
            "compared": self.compared,
            "agreed": self.agreed,
            "disagreed": self.disagreed,
            "raised": self.raised,
            "n_exceptions": self.n_exceptions,
            "exceptions": self.exceptions,
            "failures": self.failures,
            "kinds": dict(self.kinds),
            "certified": dict(self.certified),
            "fn_warnings": dict(self.fn_warnings),
            "n_conic_exceptions": self.n_conic_exceptions,
            "conic_exceptions": self.conic_exceptions,
            "worst": {
                k: {
                    "abs_err": _jsonable(w.abs_err),
                    "scale": _jsonable(w.scale),
                    "allowed": _jsonable(w.allowed),
                    "ratio": _jsonable(w.ratio),
                    "index": w.index,
                }
                for k, w in self.worst.items()
            },
            "counterexamples": [c.to_dict() for c in self.counterexamples],
            "seconds": self.seconds,
            "fn_seconds": self.fn_seconds,
            "conic_seconds": self.conic_seconds,
            "notes": self.notes,
        }
