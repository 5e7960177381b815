"""CITATION.cff and the citation block at the top of each paper page agree.

CITATION.cff lists the five papers as references, each naming its page (``docs/<page>.md``) in
its notes; that page opens, right under its title, with a "Cite as:" reference carrying the same
title and a BibTeX entry.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
PAPER_PAGES = [
    "k-learning.md",
    "accelerating-ucb-indices.md",
    "uncertainty-bellman-equation.md",
    "bayesian-methods.md",
    "ravi-ucb.md",
]


def _cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _citation_block(page: str) -> str:
    """The text between the page's title and its "Paper:" paragraph."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    title, _, rest = text.partition("\n")
    assert title.startswith("# "), page
    block, sep, _ = rest.partition("\nPaper:")
    assert sep, f"{page}: no 'Paper:' paragraph below the citation block"
    return block


def test_cff_describes_this_package():
    cff = _cff()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["cff-version"] == "1.2.0"
    assert str(cff["version"]) == project["version"]
    assert cff["license"] == "MIT"
    assert cff["authors"] and cff["title"] and cff["message"]


def test_cff_references_the_five_paper_pages():
    pages = []
    for ref in _cff()["references"]:
        assert ref["title"] and ref["authors"] and ref["type"], ref
        named = re.findall(r"docs/([\w-]+\.md)", ref["notes"])
        assert len(named) == 1, ref["title"]
        pages.append(named[0])
        assert ref["title"] in " ".join(_citation_block(named[0]).split()), named[0]
    assert sorted(pages) == sorted(PAPER_PAGES)


@pytest.mark.parametrize("page", PAPER_PAGES)
def test_page_opens_with_a_citation(page):
    block = _citation_block(page)
    assert block.lstrip().startswith("**Cite as:**"), page
    entries = re.findall(r"^```bibtex\n(.*?)^```$", block, re.M | re.S)
    assert entries, f"{page}: no bibtex fence in the citation block"
    for entry in entries:
        assert re.match(r"@\w+\{[\w-]+,", entry), entry
        assert "title" in entry
        assert entry.count("{") == entry.count("}"), entry
