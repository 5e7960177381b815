"""Example scripts never overwrite the committed figures unless asked: every
script that saves a figure takes ``--out``, and no default path points into
``examples/figures`` (the committed ones are replaced only by ``--out examples/figures``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))


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


def _saves_figures(source: str) -> bool:
    return "save_figure(" in source or "savefig(" in source


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_figure_scripts_take_out_and_default_outside_examples(path):
    source = path.read_text()
    if not _saves_figures(source):
        pytest.skip(reason=f"{path.name} writes no figure, so it has no --out to check")
    code = _code_without_docstrings(ast.parse(source))
    if "'--out'" not in code:
        pytest.fail(f"{path.name}: no --out option")
    for committed in ("'examples' / 'figures'", "parent / 'figures'", "'examples/figures"):
        if committed in code:
            pytest.fail(f"{path.name}: a default path into examples/figures ({committed})")


def test_results_dir_is_ignored_by_git():
    ignore = (EXAMPLES.parent / ".gitignore").read_text().split()
    assert "results/" in ignore or "/results/" in ignore
