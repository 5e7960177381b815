"""MkDocs hook: every name of ``optplan.__all__`` has an entry in the built API reference.

The reference pages (docs/api/*.md) render objects with mkdocstrings, which gives each one an
HTML id equal to the path it was rendered under (``optplan.mdp.TabularMDP``,
``optplan.agents``). After the build, a public name without such an id is a warning, so
``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import importlib.util
import logging
import re

import optplan

log = logging.getLogger("mkdocs.hooks.api_names")
ID = re.compile(r'\bid="(optplan[\w.]*)"')
_ids: set[str] = set()


def on_pre_build(config) -> None:
    _ids.clear()


def on_page_content(html: str, page, config, files) -> str:
    if page.file.src_uri.startswith("api/"):
        _ids.update(ID.findall(html))
    return html


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def missing_names(ids: set[str]) -> list[str]:
    """The names of ``optplan.__all__`` that no id in ``ids`` documents: an id ``M.X`` with
    ``M`` a module documents ``X`` (a method ``C.X`` of a class ``C`` does not)."""
    found = set()
    for i in ids:
        module, _, name = i.rpartition(".")
        if name in optplan.__all__ and name not in found and _is_module(module):
            found.add(name)
    return [n for n in optplan.__all__ if n not in found]


def on_post_build(config) -> None:
    missing = missing_names(_ids)
    if missing:
        log.warning("optplan.__all__ names missing from the built API reference: %s", missing)
