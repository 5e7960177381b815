"""The ``optplan`` command: solve, verify, verify-fn, demo, info, bench, run, sweep, plot, results.

One module per group of commands: :mod:`.solve` (``solve``, ``verify``, ``demo``),
:mod:`.verify_fn` (``verify-fn``: a user's function against a problem's CVXPY formulation),
:mod:`.info` (``info``: a model's hardness report),
:mod:`.bench` (``bench <suite>``, one command driven by :data:`optplan.bench.SUITES`) and
:mod:`.experiments` (``run``, ``sweep``, ``plot``, ``results``).

Exit status 2 with a one-line ``optplan: error: ...`` is for the user's input only: an
:class:`~optplan._checks.OptplanError` (every input check of the package raises one) or a path
that cannot be read. Anything else is a bug in optplan and propagates with its traceback.
"""

from __future__ import annotations

import argparse
import sys

from .._checks import OptplanError
from . import bench, experiments, info, solve, verify_fn
from .solve import CLIError

__all__ = ["main", "build_parser", "CLIError", "USER_ERRORS"]

#: The exceptions reported as a user's error (exit status 2, no traceback).
USER_ERRORS = (
    OptplanError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


def build_parser() -> argparse.ArgumentParser:
    """The ``optplan`` argument parser; each command sets ``func(args) -> exit status``."""
    parser = argparse.ArgumentParser(prog="optplan", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    solve.add_parsers(sub)
    verify_fn.add_parser(sub)
    info.add_parser(sub)
    bench.add_parser(sub)
    experiments.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one ``optplan`` command; its exit status (2: the user's input was refused)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        print(f"optplan: error: {exc}", file=sys.stderr)
        return 2
