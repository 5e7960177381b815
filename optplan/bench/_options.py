"""The command-line options of the bench suites: argument types that refuse a bad value with a
message naming the flag (before any timing), and the options most suites share, defined once so
every suite's ``--help`` reads alike."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from ..problems import SOLVERS

__all__ = [
    "solver_name",
    "positive_int",
    "nonneg_int",
    "fraction",
    "open_fraction",
    "positive_float",
    "nonneg_seconds",
    "nonneg_float",
    "add_sizes",
    "add_actions",
    "add_count",
    "add_fraction",
    "add_solvers",
    "add_choices",
    "add_conic_cap",
]


def solver_name(value: str) -> str:
    """A conic solver name for the command line, case-insensitive, as the upper-case name."""
    if value.upper() not in SOLVERS:
        raise argparse.ArgumentTypeError(f"unknown solver {value!r}; choose from {SOLVERS}")
    return value.upper()


def _integer(text: str, low: int, kind: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """Argument type: an integer >= 1."""
    return _integer(text, 1, "a positive integer")


def nonneg_int(text: str) -> int:
    """Argument type: an integer >= 0."""
    return _integer(text, 0, "a non-negative integer")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def fraction(text: str) -> float:
    """Argument type: a number in ``[0, 1)``."""
    value = _number(text)
    if value is None or not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), got {text!r}")
    return value


def open_fraction(text: str) -> float:
    """Argument type: a discount in ``(0, 1)``."""
    value = _number(text)
    if value is None or not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a discount in (0, 1), got {text!r}")
    return value


def positive_float(text: str) -> float:
    """Argument type: a finite number > 0 (a learning rate)."""
    value = _number(text)
    if value is None or not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a learning rate > 0, got {text!r}")
    return value


def nonneg_seconds(text: str) -> float:
    """Argument type: a number of seconds >= 0 (``inf``: no cap)."""
    value = _number(text)
    if value is None or not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def nonneg_float(text: str) -> float:
    """Argument type: a finite number >= 0 (tolerances)."""
    value = _number(text)
    if value is None or not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def add_sizes(
    parser: argparse.ArgumentParser, default: list[int], help: str, flag: str = "--sizes"
) -> None:
    """``--sizes N [N ...]`` (or another ``flag``): the problem sizes timed."""
    parser.add_argument(flag, type=positive_int, nargs="+", default=default, help=help)


def add_actions(parser: argparse.ArgumentParser, default: int) -> None:
    """``--actions A`` (``dest="n_actions"``): actions per state."""
    parser.add_argument(
        "--actions",
        dest="n_actions",
        metavar="ACTIONS",
        type=positive_int,
        default=default,
        help="actions per state",
    )


def add_count(
    parser: argparse.ArgumentParser,
    flag: str,
    default: int,
    help: str,
    metavar: str | None = None,
    zero: bool = False,
    dest: str | None = None,
) -> None:
    """A positive count such as ``--repeats`` or ``--instances`` (``zero``: 0 allowed; ``dest``:
    the attribute it sets, by default the flag's)."""
    kind = nonneg_int if zero else positive_int
    parser.add_argument(flag, type=kind, default=default, help=help, metavar=metavar, dest=dest)


def add_fraction(parser: argparse.ArgumentParser, flag: str, default: float, help: str) -> None:
    """A number in ``[0, 1)`` such as ``--discount``."""
    parser.add_argument(flag, type=fraction, default=default, help=help)


def add_solvers(
    parser: argparse.ArgumentParser,
    nargs: str = "+",
    help: str = "conic solvers to time",
    flag: str = "--solvers",
    default: Sequence[str] = SOLVERS,
    metavar: str | None = None,
) -> None:
    """``--solvers NAME [NAME ...]`` (or another ``flag``; case-insensitive), by default all
    of them."""
    parser.add_argument(
        flag, type=solver_name, nargs=nargs, default=list(default), metavar=metavar, help=help
    )


def add_choices(
    parser: argparse.ArgumentParser, flag: str, choices: Sequence[str], help: str, default=None
) -> None:
    """``flag NAME [NAME ...]``, entries of ``choices`` (default: all of them)."""
    default = list(choices if default is None else default)
    parser.add_argument(flag, nargs="+", choices=choices, default=default, help=help)


def add_conic_cap(
    parser: argparse.ArgumentParser, default: float, help: str, metavar: str | None = None
) -> None:
    """``--max-conic-seconds T``: the suite's time cap on a conic solver."""
    parser.add_argument(
        "--max-conic-seconds",
        dest="max_conic_seconds",
        type=nonneg_seconds,
        default=default,
        metavar=metavar,
        help=help,
    )
