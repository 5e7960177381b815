"""Fast-vs-conic benchmarks (``optplan bench <suite>``), on the random cases the tests use.

One module per suite (:mod:`.planning`, :mod:`.indices`, :mod:`.k_temperature`,
:mod:`.index_agents`, :mod:`.ube`, :mod:`.optimistic`, :mod:`.ravi`) and one collection of
seeded random instances, :mod:`.cases`, shared with the tests. :data:`SUITES` says, per
suite, everything the command line needs, so ``optplan bench`` is one command for all of them;
:data:`BENCHED_STEMS` is the set of problem stems some suite times, read off the suites' own
tables.

Every ratio printed comes from timings taken in the same run, interleaved instance by
instance, so machine noise hits both paths alike. Medians, not means.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from . import index_agents, indices, k_temperature, optimistic, planning, ravi, ube
from ._common import solver_name

__all__ = ["Suite", "SUITES", "BENCHED_STEMS", "solver_name"]


@dataclass(frozen=True)
class Suite:
    """What ``optplan bench <name>`` needs from one benchmark suite.

    ``add_arguments`` adds the suite's options to its subparser; every option whose ``dest``
    is a keyword of ``bench`` is passed to it (with ``progress``), the others (``--plot``) are
    for ``check``/``finish``. The command adds ``--seed``, ``--json`` and ``--quiet``.
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


SUITES: dict[str, Suite] = {
    "planning": Suite(
        help="known-model planning: fast DP vs LP solvers",
        bench=planning.bench_planning,
        table=lambda rows, args: planning.format_table(rows, args.solvers),
        header=planning.header,
        add_arguments=planning.add_arguments,
        stems=planning.STEMS,
        total=lambda args: len(args.criteria) * len(args.sizes),
        meta=planning.meta,
    ),
    "indices": Suite(
        help="index problems (KL ball, KL-inf, L1 ball): compute time vs |S| (paper Figs. 1-2)",
        bench=indices.bench_indices,
        table=lambda rows, args: indices.format_index_table(rows, args.solvers),
        header=indices.header,
        add_arguments=indices.add_arguments,
        stems=indices.STEMS,
        check=indices.check,
        finish=indices.finish,
        meta=indices.meta,
    ),
    "k-learning": Suite(
        help="K-learning optimal temperature (problem 11): fast vs conic solvers",
        bench=k_temperature.bench_k_temperature,
        table=lambda rows, args: k_temperature.format_k_table(rows, args.solvers),
        header=k_temperature.header,
        add_arguments=k_temperature.add_arguments,
        stems=k_temperature.STEMS,
        total=lambda args: len(args.sizes),
    ),
    "index-agents": Suite(
        help="MDP-UCB / OLP / MDP-DMED / MDP-PS steps per second, fast vs conic",
        bench=index_agents.bench_index_agents,
        table=lambda rows, args: index_agents.format_index_agents_table(rows),
        header=index_agents.header,
        add_arguments=index_agents.add_arguments,
        stems=index_agents.STEMS,
        total=index_agents.total,
    ),
    "ube": Suite(
        help="uncertainty Bellman equation and moment matching: fast vs LP solvers",
        bench=ube.bench_ube,
        table=lambda rows, args: ube.format_ube_table(rows, args.solvers),
        header=ube.header,
        add_arguments=ube.add_arguments,
        stems=ube.STEMS,
        meta=ube.meta,
        total=ube.total,
    ),
    "optimistic": Suite(
        help="optimistic planning over L1/KL confidence sets: EVI vs the convex program",
        bench=optimistic.bench_optimistic,
        table=lambda rows, args: optimistic.format_table(rows, args.solvers),
        header=optimistic.header,
        add_arguments=optimistic.add_arguments,
        stems=optimistic.STEMS,
        total=lambda args: len(args.variants) * len(args.sizes),
    ),
    "ravi": Suite(
        help="RAVI-UCB's clipped optimistic fixed point: exact DP and RAVI's iteration vs LPs",
        bench=ravi.bench_ravi,
        table=lambda rows, args: ravi.format_table(rows, args.solvers),
        header=ravi.header,
        add_arguments=ravi.add_arguments,
        stems=ravi.STEMS,
        total=ravi.total,
    ),
}

#: Every problem stem timed by some suite.
BENCHED_STEMS: frozenset[str] = frozenset().union(*(s.stems for s in SUITES.values()))
