"""MkDocs hook: links from docs/*.md to files outside docs/ work on the site too.

The pages link the repository's own files relative to themselves (``../examples/figures/x.png``,
``../models/sweep.toml``, ``../README.md#section``) so that they read right on GitHub. MkDocs only
knows the files under ``docs_dir``, so with ``--strict`` such a link fails the build. This hook

- copies every file outside ``docs/`` (inside the repository) that a page links into the site
  under ``repo/<its path in the repository>``, and points the link at the copy; images show,
  other files download;
- points links to Markdown files outside ``docs/`` at the page that holds their content on the
  site (``README.md`` -> the home page, ``CHANGELOG.md`` -> the changelog page); a README heading
  has no counterpart there, so the anchor is dropped.

A target that does not exist is left as written, so MkDocs still reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

#: Markdown files outside docs/ -> the site page (relative to docs/) that shows their content.
OUTSIDE_PAGES = {"README.md": "index.md", "CHANGELOG.md": "changelog.md"}
#: Where the copies of linked files outside docs/ go in the site.
COPIES = "repo"

# [text](target) and ![alt](target), an optional "title" after the target.
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def _is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith(("/", "#"))


def _outside(page_src: Path, target: str, docs: Path, root: Path) -> tuple[Path, str] | None:
    """The linked file and anchor if ``target`` leaves ``docs/`` for a file in the repository."""
    if not _is_relative(target):
        return None
    path, _, anchor = target.partition("#")
    dest = (page_src.parent / path).resolve()
    if dest.is_relative_to(docs) or not dest.is_relative_to(root) or not dest.is_file():
        return None
    return dest, anchor


def _outside_links(markdown: str, page_src: Path, docs: Path, root: Path):
    """Yield (match, linked file, anchor) for each link leaving docs/, outside code fences."""
    fences = [m.span() for m in FENCE.finditer(markdown)]
    for m in LINK.finditer(markdown):
        if any(a <= m.start() < b for a, b in fences):
            continue
        found = _outside(page_src, m.group(2), docs, root)
        if found is not None:
            yield m, *found


def _dirs(config) -> tuple[Path, Path]:
    docs = Path(config["docs_dir"]).resolve()
    return docs, Path(config["config_file_path"]).resolve().parent


def on_files(files: Files, config) -> Files:
    """Add a copy under ``repo/`` of every non-Markdown file outside docs/ that a page links."""
    docs, root = _dirs(config)
    wanted: set[Path] = set()
    for file in files.documentation_pages():
        src = Path(file.abs_src_path)
        for _, dest, _ in _outside_links(src.read_text(encoding="utf-8"), src, docs, root):
            if dest.suffix != ".md":
                wanted.add(dest)
    for dest in sorted(wanted):
        uri = posixpath.join(COPIES, dest.relative_to(root).as_posix())
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(dest)))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    """Point each link leaving docs/ at its copy under ``repo/`` or at the page that shows it."""
    docs, root = _dirs(config)
    src = Path(page.file.abs_src_path)
    here = posixpath.dirname(page.file.src_uri)
    out, last = [], 0
    for m, dest, anchor in _outside_links(markdown, src, docs, root):
        rel = dest.relative_to(root).as_posix()
        if dest.suffix == ".md":
            if rel not in OUTSIDE_PAGES:
                continue
            uri, anchor = OUTSIDE_PAGES[rel], ""
        else:
            uri = posixpath.join(COPIES, rel)
        target = posixpath.relpath(uri, here or ".") + (f"#{anchor}" if anchor else "")
        out += [markdown[last : m.start()], m.group(1), target, m.group(3)]
        last = m.end()
    out.append(markdown[last:])
    return "".join(out)
