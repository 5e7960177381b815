"""Every example script follows one output convention, whatever it writes:

- figures go to ``--out DIR``, by default ``results/figures/`` (git-ignored); the committed
  ones in ``examples/figures`` are replaced only by ``--out examples/figures``;
- data (sweep result directories, JSON tables) go under ``results/`` (git-ignored), or to a
  path the user names;
- ``--quick`` writes the same kinds of files with ``-quick`` in their names (a quick figure
  never replaces a full one, in ``results/figures/`` or in ``examples/figures``, where git
  ignores ``*-quick.png``);
- nothing goes anywhere else (no ``out/``, no default into ``examples/``), and the docstrings
  say so.

The checks read each script's code (its syntax tree): paths built from the repository root,
the ``--out`` options and their defaults, the writes it makes.
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))

#: Calls that write a figure, and calls that write data.
FIGURE_WRITES = ("save_figure", "savefig")
DATA_WRITES = ("run_sweep", "write_text", "write_bytes", "dump", "save", "savez", "to_csv")
#: First directories under the repository root a script may build a path into: its outputs
#: (results/) and its inputs (models/).
ROOT_DIRS = {"results", "models"}


def _code_without_docstrings(tree: ast.Module) -> str:
    """The module's source with every docstring dropped (they may name examples/figures)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def _calls(tree: ast.AST) -> set[str]:
    """Names of the functions and methods the code calls."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return out


def _is_root(node: ast.expr) -> bool:
    """``ROOT`` or ``Path(__file__).resolve().parents[1]``: the repository root."""
    text = ast.unparse(node)
    return text == "ROOT" or text.endswith(".parents[1]")


def _root_dirs(tree: ast.AST) -> list[str]:
    """The first directory of every path built from the repository root (``ROOT / "x"``)."""
    return [
        node.right.value
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and _is_root(node.left)
        and isinstance(node.right, ast.Constant)
        and isinstance(node.right.value, str)
    ]


def _out_options(tree: ast.AST) -> list[ast.Call]:
    """The ``add_argument("--out", ...)`` calls."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "add_argument"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "--out"
    ]


def _resolved(node: ast.expr, tree: ast.Module) -> ast.expr:
    """``node`` with the module-level constants it names (``DEFAULT_OUT``, ``OUT_HELP``,
    ``RESULTS``) replaced by their values, recursively; ``ROOT`` stays."""
    values = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and t.id != "ROOT"
    }

    class Inline(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.AST:
            value = values.get(name.id)
            return name if value is None else self.visit(copy.deepcopy(value))

    return Inline().visit(copy.deepcopy(node))


def _keyword(call: ast.Call, name: str, tree: ast.Module) -> str:
    """The keyword ``name`` of a call as source, its module-level constants resolved (a
    string: its text)."""
    value = next((k.value for k in call.keywords if k.arg == name), None)
    if value is None:
        return ""
    value = _resolved(value, tree)
    try:
        return str(ast.literal_eval(value))
    except ValueError:
        return ast.unparse(value)


def _parsed(path: Path) -> tuple[str, ast.Module, str]:
    source = path.read_text()
    tree = ast.parse(source)
    return source, tree, _code_without_docstrings(ast.parse(source))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_paths_from_the_root_go_to_results_or_read_models(path):
    _, tree, _ = _parsed(path)
    stray = sorted(set(_root_dirs(tree)) - ROOT_DIRS)
    assert stray == [], f"{path.name}: paths into {stray} (outputs go under results/)"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_output_directory_but_results(path):
    """Neither the code nor the docstrings send anything to ``out/`` (or another place)."""
    source, _, _ = _parsed(path)
    found = re.findall(r"(?<![\w./-])out/[\w./-]*", source)
    assert found == [], f"{path.name} names {found}: outputs go under results/"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_figure_scripts_take_out_defaulting_to_results_figures(path):
    _, tree, code = _parsed(path)
    if not _calls(tree) & set(FIGURE_WRITES):
        pytest.skip(reason=f"{path.name} writes no figure, so it has no --out to check")
    options = _out_options(tree)
    assert options, f"{path.name}: no --out option"
    for option in options:
        default = _keyword(option, "default", tree).replace('"', "'")
        assert default.endswith("'results' / 'figures'"), (path.name, default)
        text = _keyword(option, "help", tree)
        assert "results/figures/" in text and "examples/figures" in text, (path.name, text)
    for committed in ("'examples' / 'figures'", "parent / 'figures'", "'examples/figures"):
        assert committed not in code, f"{path.name}: a default path into examples/figures"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_data_scripts_write_under_results(path):
    """A script that writes data (a sweep's results, a JSON table) builds the path under
    results/ or takes it from its command line."""
    _, tree, code = _parsed(path)
    if not _calls(tree) & set(DATA_WRITES):
        pytest.skip(reason=f"{path.name} writes no data")
    takes_path = bool(re.search(r"add_argument\('--json'", code))
    assert "results" in _root_dirs(tree) or takes_path, path.name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_quick_outputs_carry_quick_in_their_names(path):
    """With ``--quick`` (or a ``quick`` subcommand) a script writes ``...-quick`` files and
    directories, never the full run's names."""
    _, tree, code = _parsed(path)
    writes = _calls(tree) & set(FIGURE_WRITES + DATA_WRITES)
    if "quick" not in code or not writes:
        pytest.skip(reason=f"{path.name} has no quick mode that writes")
    assert re.search(r"['\"][\w{}./-]*-quick", code), f"{path.name}: no '-quick' output name"


def test_the_checks_see_a_stray_path_and_a_default_into_examples():
    bad = ast.parse(
        "ROOT = 1\nx = ROOT / 'out' / 'quick'\n"
        "p.add_argument('--out', default=ROOT / 'examples' / 'figures', help='h')\n"
    )
    assert set(_root_dirs(bad)) == {"out", "examples"}
    assert _keyword(_out_options(bad)[0], "default", bad) == "ROOT / 'examples' / 'figures'"
    assert _keyword(_out_options(bad)[0], "help", bad) == "h"


def test_results_dir_is_ignored_by_git():
    ignore = (ROOT / ".gitignore").read_text().split()
    assert "results/" in ignore or "/results/" in ignore
    assert "examples/figures/*-quick.png" in ignore
