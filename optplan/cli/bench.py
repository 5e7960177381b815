"""``optplan bench <suite>``: one command for every suite of :data:`optplan.bench.SUITES`."""

from __future__ import annotations

import argparse
import json
import sys

from .._progress import progress_bar
from ..bench import SUITES
from ..bench._options import nonneg_int
from ..experiments.threads import blas_threads, describe

__all__ = ["add_parser", "cmd_bench"]


def cmd_bench(args: argparse.Namespace) -> int:
    """Check the options, time the suite, print its header and table (or ``--json``)."""
    suite = SUITES[args.suite]
    if suite.check is not None:  # before minutes of timing, not after
        suite.check(args)
    options = suite.options(args)
    limit = args.blas_threads or None
    with blas_threads(limit):
        threads = describe(limit)
        if args.json or args.quiet:
            rows = suite.bench(**options, progress=None)
        else:
            with _Progress(args.suite, suite.total(args) if suite.total else None) as progress:
                rows = suite.bench(**options, progress=progress)
    note = suite.finish(rows, args) if suite.finish is not None else None
    if args.json:
        meta = suite.meta(args) if suite.meta is not None else {}
        out = {"benchmark": args.suite, "blas_threads": threads} | meta | {"rows": rows}
        print(json.dumps(out, indent=2))
    else:
        # on the header's first line: the line count stays what scripts expect
        first, sep, rest = suite.header(args).partition("\n")
        print(f"{first}; blas threads: {threads['threads']} ({threads['by']}){sep}{rest}")
        print(suite.table(rows, args))
        if note:
            print(note)
    return 0


class _Progress:
    """The suite's progress lines printed above a progress bar on stderr (rows done, elapsed,
    rate, and the ETA when the suite says how many rows it times; plain lines when stderr is
    not a terminal, :func:`~optplan._progress.progress_bar`)."""

    def __init__(self, name: str, total: int | None) -> None:
        self.bar = progress_bar(total=total, desc=name, unit="row", smoothing=0)

    def __call__(self, line: str) -> None:
        self.bar.write(line, file=sys.stderr)
        self.bar.update(1)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def add_parser(sub) -> None:
    """Add ``bench`` and one subcommand per suite to the ``optplan`` subparsers."""
    p = sub.add_parser(
        "bench",
        help="fast-vs-conic benchmarks",
        description="Benchmarks: each suite times optplan's fast paths against the conic "
        "path or the peers on the same instances and prints medians and ratios measured in "
        "one run (optplan bench SUITE --help for its options).",
    )
    suites = p.add_subparsers(dest="suite", required=True)
    for name, suite in SUITES.items():
        b = suites.add_parser(name, help=suite.help, description=suite.help)
        suite.add_arguments(b)
        b.add_argument("--seed", type=nonneg_int, default=0, help="root seed of the instances")
        b.add_argument("--json", action="store_true", help="machine-readable output")
        b.add_argument("--quiet", action="store_true", help="no progress lines")
        b.add_argument(
            "--blas-threads",
            type=nonneg_int,
            default=1,
            help="BLAS threads while timing, set by threadpoolctl (0: the library default; "
            "default: %(default)s)",
        )
        b.set_defaults(func=cmd_bench)
