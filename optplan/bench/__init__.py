"""Fast-vs-conic benchmarks (``optplan bench <suite>``), on the random cases the tests use.

One module per suite (:mod:`.planning`, :mod:`.indices`, :mod:`.k_temperature`,
:mod:`.index_agents`, :mod:`.ube`, :mod:`.optimistic`, :mod:`.ravi`) and one collection of
seeded random instances, :mod:`.cases`, shared with the tests. :data:`SUITES` says, per
suite, everything the command line needs, so ``optplan bench`` is one command for all of them;
:data:`BENCHED_STEMS` is the set of problem stems some suite times, read off the suites' own
tables, and :data:`STEM_SUITES` (:func:`bench_row`) says which suite times each stem of the
problems' table (:mod:`optplan.problems.stems`).

Every ratio printed comes from timings taken in the same run, interleaved instance by
instance, so machine noise hits both paths alike. Medians, not means.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from .._checks import OptplanError
from ..problems import stems as _stems
from . import agents, index_agents, indices, k_temperature, optimistic, planning, ravi, ube
from ._common import Runs
from ._options import solver_name

__all__ = ["Suite", "SUITES", "BENCHED_STEMS", "STEM_SUITES", "bench_row", "solver_name", "Runs"]


@dataclass(frozen=True)
class Suite:
    """What ``optplan bench <name>`` needs from one benchmark suite.

    ``add_arguments`` adds the suite's options to its subparser; :meth:`options` makes
    ``bench``'s keywords of them (passed with ``progress``); the options no keyword takes
    (``--plot``) are for ``check``/``finish``. The command adds ``--seed``, ``--json`` and
    ``--quiet``.
    """

    #: One line for ``optplan bench --help``.
    help: str
    #: ``bench(**options, progress=None) -> rows``: the measurement, one dict per row.
    bench: Callable[..., list[dict]]
    #: ``table(rows, args) -> str``: the text table of the rows.
    table: Callable[[list[dict], argparse.Namespace], str]
    #: ``header(args) -> str``: what was measured, printed above the table.
    header: Callable[[argparse.Namespace], str]
    #: ``add_arguments(parser)``: the suite's own command-line options.
    add_arguments: Callable[[argparse.ArgumentParser], None]
    #: The problem stems the suite times (from the suite's own table of problems).
    stems: frozenset[str]
    #: ``check(args)``: input checks before any timing (raises ``OptplanError``).
    check: Callable[[argparse.Namespace], None] | None = None
    #: ``finish(rows, args) -> line or None``: after timing (e.g. draw a plot); the line is
    #: printed under the table.
    finish: Callable[[list[dict], argparse.Namespace], str | None] | None = None
    #: ``meta(args) -> dict``: the run's settings, ahead of the rows in ``--json`` output.
    meta: Callable[[argparse.Namespace], dict] | None = None
    #: ``total(args) -> int``: how many progress lines ``bench`` will report (one per row),
    #: for the progress bar's ETA; without it the bar counts and times, with no ETA.
    total: Callable[[argparse.Namespace], int] | None = None

    def options(self, args: argparse.Namespace) -> dict:
        """The keywords of ``bench`` (all but ``progress``) the parsed options give: an option
        object (a keyword whose default is a dataclass: :class:`Runs`, ``bench ravi``'s
        ``RaviAgents``) made of the options its fields name, any other keyword the option of
        its name."""
        options = {}
        for name, parameter in inspect.signature(self.bench).parameters.items():
            default = parameter.default
            if dataclasses.is_dataclass(default):
                fields = dataclasses.fields(default)
                options[name] = type(default)(**{f.name: getattr(args, f.name) for f in fields})
            elif name != "progress" and hasattr(args, name):
                options[name] = getattr(args, name)
        return options

    @classmethod
    def of(cls, module: ModuleType, bench: Callable[..., list[dict]]) -> Suite:
        """The suite of a bench module: its ``HELP``, ``STEMS``, ``table``, ``header`` and
        ``add_arguments``, and the ``check``, ``finish``, ``meta`` and ``total`` it defines."""
        optional = {k: getattr(module, k, None) for k in ("check", "finish", "meta", "total")}
        return cls(
            help=module.HELP,
            bench=bench,
            table=module.table,
            header=module.header,
            add_arguments=module.add_arguments,
            stems=module.STEMS,
            **optional,
        )


#: ``optplan bench <name>``: the suites, in the order of ``optplan bench --help``.
SUITES: dict[str, Suite] = {
    name: Suite.of(module, bench)
    for name, module, bench in (
        ("planning", planning, planning.bench_planning),
        ("indices", indices, indices.bench_indices),
        ("k-learning", k_temperature, k_temperature.bench_k_temperature),
        ("index-agents", index_agents, index_agents.bench_index_agents),
        ("ube", ube, ube.bench_ube),
        ("optimistic", optimistic, optimistic.bench_optimistic),
        ("ravi", ravi, ravi.bench_ravi),
        ("agents", agents, agents.bench_agents),
    )
}

#: Every problem stem timed by some suite.
BENCHED_STEMS: frozenset[str] = frozenset().union(*(s.stems for s in SUITES.values()))

#: ``stem -> the suite that times it`` (the first of :data:`SUITES` that does), for the stems
#: of the problems' table (:mod:`optplan.problems.stems`) in its order; a stem no suite times
#: is missing.
STEM_SUITES: dict[str, str] = {
    stem: next(name for name, suite in SUITES.items() if stem in suite.stems)
    for stem in _stems.stems()
    if stem in BENCHED_STEMS
}


def bench_row(stem: str) -> str:
    """The suite (a key of :data:`SUITES`) whose rows time the problem ``stem``: ``optplan
    bench <suite>``. A stem of the problems' table that no suite times is an error."""
    _stems.row(stem)  # an unknown stem: the table's error, with its suggestion
    if stem not in STEM_SUITES:
        raise OptplanError(f"no bench suite times the problem {stem!r}")
    return STEM_SUITES[stem]
