"""Every option of every ``optplan`` subcommand has a help text, and its help shows the default.

The walk covers the full parser (every command's group built), so an option added later
without ``help=`` fails here, whichever command it belongs to.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from optplan.cli import COMMANDS, build_parser


def _parsers(parser: argparse.ArgumentParser, prefix: str = "optplan"):
    """``(command path, parser)`` for the parser and every subparser below it."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prefix} {name}")


def _options(parser: argparse.ArgumentParser):
    return [
        action
        for action in parser._actions
        if not isinstance(
            action, (argparse._SubParsersAction, argparse._HelpAction, argparse._VersionAction)
        )
    ]


PARSERS = dict(_parsers(build_parser()))


def test_the_walk_reaches_every_command_and_bench_suite():
    assert {f"optplan {name}" for name in COMMANDS} <= set(PARSERS)
    assert sum(path.startswith("optplan bench ") for path in PARSERS) >= 7


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_every_option_has_help(path):
    missing = [
        "/".join(a.option_strings) or a.dest
        for a in _options(PARSERS[path])
        if not (a.help or "").strip()
    ]
    assert missing == [], f"{path}: options without help"


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_help_shows_every_set_default(path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # no wrapping (it breaks lists at hyphens)
    text = PARSERS[path].format_help()
    for action in _options(PARSERS[path]):
        if action.default is None or action.default is False:
            continue
        shown = f"(default: {action.default})" in " ".join(text.split())
        assert shown or "default" in action.help, (path, action.option_strings or action.dest)


def test_command_list_matches_each_commands_own_help():
    """``optplan --help`` lists the commands from COMMANDS without importing them: the lines
    must be the ones each command's parser declares."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    declared = {choice.dest: choice.help for choice in sub._choices_actions}
    assert declared == {name: help_line for name, (_, help_line) in COMMANDS.items()}


def test_the_walk_sees_an_option_without_help():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bare")
    assert [a.dest for a in _options(parser) if not a.help] == ["bare"]


#: reST markup that has no place in a terminal: double backticks and Sphinx roles.
MARKUP = re.compile(r"``|:(?:func|mod|class|meth|attr|data|exc|obj|ref|doc):")


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_help_is_plain_text(path):
    """Help built from docstrings shows no reST markup (``optplan``, :func:`...`)."""
    text = PARSERS[path].format_help()
    assert MARKUP.findall(text) == [], f"{path} --help shows reST markup"


def test_top_level_help_is_plain_text_as_the_command_prints_it():
    """``optplan --help`` as a user runs it (the parser of no command in full)."""
    out = subprocess.run(
        [sys.executable, "-m", "optplan.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "optplan command" in out and MARKUP.findall(out) == []


@pytest.mark.parametrize(
    ("rst", "plain"),
    [
        ("The ``optplan`` command", "The optplan command"),
        (":func:`optplan.verify` from the shell", "optplan.verify from the shell"),
        ("a :class:`~optplan.DeclaredProblem`", "a DeclaredProblem"),
        ("see :mod:`.solve` and :data:`SUITES`", "see .solve and SUITES"),
    ],
)
def test_plain_strips_roles_and_literals(rst, plain):
    from optplan.cli import plain as cli_plain

    assert cli_plain(rst) == plain
