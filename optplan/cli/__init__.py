"""The ``optplan`` command: solve, verify, verify-fn, demo, info, bench, run, sweep, plot, results.

One module per group of commands: :mod:`.solve` (``solve``, ``verify``, ``demo``),
:mod:`.verify_fn` (``verify-fn``: a user's function against a problem's CVXPY formulation),
:mod:`.info` (``info``: a model's hardness report),
:mod:`.bench` (``bench <suite>``, one command driven by :data:`optplan.bench.SUITES`) and
:mod:`.experiments` (``run``, ``sweep``, ``plot``, ``results``).

Exit status 2 with a one-line ``optplan: error: ...`` is for the user's input only: an
:class:`~optplan._checks.OptplanError` (every input check of the package raises one) or a path
that cannot be read. Anything else is a bug in optplan and propagates with its traceback.
Ctrl-C is one line and exit status 130 (a sweep says how many of its tasks finished and where
they are kept).

Start-up: ``optplan`` builds the parser of the command it runs only; the other commands are
listed from :data:`COMMANDS` without importing their modules (so ``optplan --help`` imports
no solver, plotting or environment library).
"""

from __future__ import annotations

import argparse
import re
import sys

__all__ = ["main", "build_parser", "plain", "CLIError", "COMMANDS", "USER_ERRORS", "HelpFormatter"]

#: The errors of a user's input, printed as one line with exit status 2 (``OptplanError``, from
#: :mod:`optplan._checks`, joins them when a command runs: ``--help`` does not import numpy).
_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def _user_errors() -> tuple[type[Exception], ...]:
    from .._checks import OptplanError

    return (OptplanError, *_OS_ERRORS)


#: Every command, in the order ``optplan --help`` lists them: ``(group module, one-line help)``.
#: The group module's parser uses the same help (``tests/test_cli_help.py`` checks it).
COMMANDS = {
    "solve": ("solve", "solve a model file (fast, conic or both)"),
    "verify": ("solve", "cross-check fast vs conic; exit 1 on disagreement"),
    "demo": ("solve", "solve the shipped models both ways (seconds)"),
    "verify-fn": (
        "verify_fn",
        "check your own function against a problem's CVXPY formulation (hypothesis)",
    ),
    "info": ("info", "hardness report: class, diameter, gains, gaps, C(P), mixing"),
    "bench": ("bench", "fast-vs-conic benchmarks"),
    "run": ("experiments", "run one agent on one environment over seeds"),
    "sweep": ("experiments", "run a sweep file into a resumable result directory"),
    "plot": ("experiments", "plot a sweep's results"),
    "results": ("experiments", "summarize a sweep's result directory"),
}


#: A Sphinx role (``:func:`~optplan.verify` ``: its target, the last part where ``~`` asks) and
#: an inline literal (double backticks: the text inside).
_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")


def plain(text: str) -> str:
    """``text`` (a docstring line) without its reST markup, as a terminal shows it:
    ``:func:`optplan.verify``` becomes ``optplan.verify``, ``:class:`~optplan.X``` ``X`` and
    a double-backquoted literal its text."""
    text = _ROLE.sub(lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], text)
    return _LITERAL.sub(r"\1", text)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Plain text (:func:`plain`: descriptions and help taken from docstrings lose their reST
    markup); shows ``(default: ...)`` after an option's help, unless the default is ``None``,
    ``False`` (a flag) or the help already says it."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _get_help_string(self, action: argparse.Action) -> str:
        text = plain(action.help or "")
        unset = action.default is None or action.default is False
        if unset or action.default is argparse.SUPPRESS or "default" in text:
            return text
        return plain(super()._get_help_string(action))


class _Parser(argparse.ArgumentParser):
    """Every parser and subparser of the command shows defaults (:class:`HelpFormatter`)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _add_group(sub, group: str) -> None:
    """The full parsers of one group of commands (imports its module)."""
    if group == "solve":
        from . import solve

        solve.add_parsers(sub)
    elif group == "verify_fn":
        from . import verify_fn

        verify_fn.add_parser(sub)
    elif group == "info":
        from . import info

        info.add_parser(sub)
    elif group == "bench":
        from . import bench

        bench.add_parser(sub)
    else:
        from . import experiments

        experiments.add_parsers(sub)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``optplan`` parser: every command in full (``command=None``), or ``command``'s
    group in full and the others as their one-line help only (``""``: all of them so)."""
    from .._version import __version__

    parser = _Parser(prog="optplan", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"optplan {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    built = set()
    for name, (group, help_line) in COMMANDS.items():
        if command is None or COMMANDS.get(command, ("",))[0] == group:
            if group not in built:
                _add_group(sub, group)
                built.add(group)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command named on the command line: the first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command(argv) or "").parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as exc:
        print(f"optplan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # one line, no traceback; the sweep says what it kept
        print(f"optplan: {str(exc) or 'interrupted'}", file=sys.stderr)
        return 130


def __getattr__(name: str):
    if name == "USER_ERRORS":
        return _user_errors()
    if name == "CLIError":  # defined with the solve commands, loaded with them
        from .solve import CLIError

        return CLIError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
