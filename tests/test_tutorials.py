"""The tutorials' code runs: every ```python block of each docs/tutorials/*.md (and of the
home page, docs/index.md), in order.

One namespace per page, as a reader pasting the blocks into one Python interpreter has; the
working directory is a temporary one holding a link to the repository's ``models/`` (the pages
read ``models/*.toml`` as from the repository root, and write their own files where they
stand); the blocks run as ``__main__``, as a script does; matplotlib draws with Agg.

A ```text block right after a python block is what that block prints: the test compares them.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\s*\n)?(?:^```text\n(.*?)^```)?", re.M | re.S)
#: Pages whose blocks take more than a few seconds together.
SLOW = {"verify.md", "agents.md", "compiled-agent.md"}


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """The page's ```python blocks: the line each starts on, its code, and what it prints
    (the ```text block that follows it, ``None`` when none does)."""
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1), m.group(2)) for m in BLOCK.finditer(text)
    ]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _param(page: Path):
    marks = [pytest.mark.slow] if page.name in SLOW else []
    return pytest.param(page, id=page.stem, marks=marks)


TUTORIAL_PAGES = sorted(TUTORIALS.glob("*.md"))
PAGES = [*TUTORIAL_PAGES, ROOT / "docs" / "index.md"]


def test_the_three_tutorials_exist():
    assert {p.name for p in TUTORIAL_PAGES} >= {"solve.md", "verify.md", "agents.md"}
    for page in TUTORIAL_PAGES:
        assert len(python_blocks(page)) >= 3, page.name


@pytest.mark.parametrize("page", [_param(p) for p in PAGES])
def test_tutorial_runs(page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    (tmp_path / "models").symlink_to(ROOT / "models", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    # A page may register its own agents or environments: the tables are restored after it.
    from optplan.agents.registry import AGENTS
    from optplan.envs.registry import ENVS

    tables = [(AGENTS, dict(AGENTS)), (ENVS, dict(ENVS))]
    namespace: dict = {"__name__": "__main__"}  # as a script run by python
    try:
        for line, code, expected in python_blocks(page):
            # Each block compiled under the page's name with its own line numbers, so a
            # traceback points at the page and line a reader sees.
            padded = "\n" * (line - 1) + code
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(padded, str(page.relative_to(ROOT)), "exec"), namespace)
            except Exception as err:
                raise AssertionError(
                    f"{page.name}: the block starting on line {line} raised {err!r}"
                ) from err
            printed = out.getvalue()
            sys.stdout.write(printed)  # shown with pytest -s
            if expected is not None:
                assert _lines(printed) == _lines(expected), (
                    f"{page.name}: the block starting on line {line} printed\n{printed}"
                    f"where the page shows\n{expected}"
                )
    finally:
        for table, saved in tables:
            table.clear()
            table.update(saved)
        import matplotlib.pyplot as plt

        plt.close("all")
