"""``optplan bench <suite>``: one command for every suite of :data:`optplan.bench.SUITES`."""

from __future__ import annotations

import argparse
import inspect
import json
import sys

from ..bench import SUITES
from ..bench._common import nonneg_int

__all__ = ["add_parser", "cmd_bench"]


def cmd_bench(args: argparse.Namespace) -> int:
    """Check the options, time the suite, print its header and table (or ``--json``)."""
    suite = SUITES[args.suite]
    if suite.check is not None:  # before minutes of timing, not after
        suite.check(args)
    keywords = inspect.signature(suite.bench).parameters
    options = {k: v for k, v in vars(args).items() if k in keywords and k != "progress"}
    if args.json or args.quiet:
        rows = suite.bench(**options, progress=None)
    else:
        with _Progress(args.suite, suite.total(args) if suite.total else None) as progress:
            rows = suite.bench(**options, progress=progress)
    note = suite.finish(rows, args) if suite.finish is not None else None
    if args.json:
        meta = suite.meta(args) if suite.meta is not None else {}
        print(json.dumps({"benchmark": args.suite} | meta | {"rows": rows}, indent=2))
    else:
        print(suite.header(args))
        print(suite.table(rows, args))
        if note:
            print(note)
    return 0


class _Progress:
    """The suite's progress lines printed above a tqdm bar on stderr (rows done, elapsed,
    rate, and the ETA when the suite says how many rows it times)."""

    def __init__(self, name: str, total: int | None) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=total, desc=name, unit="row", file=sys.stderr, dynamic_ncols=True, smoothing=0
        )

    def __call__(self, line: str) -> None:
        self.bar.write(line, file=sys.stderr)
        self.bar.update(1)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def add_parser(sub) -> None:
    """Add ``bench`` and one subcommand per suite to the ``optplan`` subparsers."""
    p = sub.add_parser("bench", help="fast-vs-conic benchmarks")
    suites = p.add_subparsers(dest="suite", required=True)
    for name, suite in SUITES.items():
        b = suites.add_parser(name, help=suite.help)
        suite.add_arguments(b)
        b.add_argument("--seed", type=nonneg_int, default=0)
        b.add_argument("--json", action="store_true", help="machine-readable output")
        b.add_argument("--quiet", action="store_true", help="no progress lines")
        b.set_defaults(func=cmd_bench)
