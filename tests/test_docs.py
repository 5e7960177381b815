"""README.md and docs/*.md: every committed figure is linked, and every relative link resolves.

A figure in ``examples/figures/`` that no page links is one a reader never finds; a link to a
file or a heading that does not exist is a broken page. Anchors are checked against GitHub's
heading slugs (lowercase, punctuation dropped, spaces to hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); the target ends at whitespace or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return LINK.findall(text)


def _slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.*)$", text, re.M)}


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("//")


def test_pages_exist():
    assert (ROOT / "docs").is_dir()
    assert len(PAGES) >= 6, [p.name for p in PAGES]  # README + one page per paper


def test_every_figure_is_linked():
    linked = set()
    for page in PAGES:
        for target in _links(page):
            if _relative(target):
                linked.add((page.parent / target.split("#")[0]).resolve())
    figures = sorted((ROOT / "examples" / "figures").glob("*.png"))
    assert figures
    missing = [f.name for f in figures if f.resolve() not in linked]
    # Figures git ignores (``*-quick.png``) are a local run's output, not committed ones.
    missing = [m for m in missing if not m.endswith("-quick.png")]
    assert not missing, f"figures linked from neither README.md nor docs/*.md: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: links to missing files or headings: {broken}"


def test_slug_matches_github():
    assert _slug("UBE on the §3.2 chain") == "ube-on-the-32-chain"
    assert _slug("Bayesian methods (bayesian-methods-tabular-rl)") == (
        "bayesian-methods-bayesian-methods-tabular-rl"
    )
