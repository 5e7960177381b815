"""Griffe extension: the reST of optplan's docstrings read as Markdown in the API reference.

The docstrings follow numpydoc, whose inline markup is reST: cross-reference roles
(``:func:`make_agent```, ``:class:`~optplan.mdp.TabularMDP```), ``.. math::`` directives and
``Example::`` literal blocks. mkdocstrings renders Markdown, so before the docstrings are parsed

- a role becomes a link to the object's entry in the reference where the site has one, and code
  text otherwise (an *optional* cross-reference: an object outside the reference is no error);
- a ``.. math::`` directive becomes a ``$$ ... $$`` block (pymdownx.arithmatex, MathJax);
- a paragraph ending in ``::`` ends in ``:`` (the indented block after it is code already).
"""

from __future__ import annotations

import html
import re
import textwrap

import griffe

from optplan import _LAZY  # public name -> the module that defines it (imports nothing heavy)

ROLE = re.compile(r":(?:py:)?(?:class|func|mod|attr|meth|data|obj|exc|const):`(~?)([^`]+?)`")
MATH = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<rest>.*)$")


def _identifier(obj: griffe.Object, name: str) -> str:
    """The full path ``name`` names as seen from ``obj``'s docstring (best effort)."""
    if name.startswith("optplan."):
        # a top-level name (``optplan.verify``) is documented where it is defined
        top, _, rest = name[len("optplan.") :].partition(".")
        where = _LAZY.get(top)
        return f"optplan{where}.{name[len('optplan.') :]}" if where else name
    if name.startswith("."):
        return obj.module.path + name
    head, _, tail = name.partition(".")
    for scope in (obj, obj.module):
        try:
            path = scope.resolve(head)
        except Exception:  # noqa: BLE001 - griffe raises several kinds for unknown names
            continue
        return f"{path}.{tail}" if tail else path
    return name


def _role(obj: griffe.Object, match: re.Match) -> str:
    short, name = match.group(1) == "~", match.group(2).strip()
    shown = name.rsplit(".", 1)[-1] if short else name.lstrip(".")
    ident = html.escape(_identifier(obj, name), quote=True)
    return f'<autoref identifier="{ident}" optional><code>{html.escape(shown)}</code></autoref>'


def _math(text: str) -> str:
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = MATH.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, body = m.group("indent"), [m.group("rest")] if m.group("rest") else []
        i += 1
        block = []
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
        ):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        body += textwrap.dedent("\n".join(block)).strip("\n").split("\n") if block else []
        out += ["", f"{indent}$$", *(f"{indent}{b.strip()}" for b in body if b.strip())]
        out += [f"{indent}$$", ""]
    return "\n".join(out)


def _literal_markers(text: str) -> str:
    text = re.sub(r"^[ \t]*::[ \t]*$", "", text, flags=re.M)
    return re.sub(r"(\S)::[ \t]*$", r"\1:", text, flags=re.M)


def markdown(obj: griffe.Object, text: str) -> str:
    """``text``, a docstring of ``obj``, with its reST roles, math and literal markers as
    Markdown."""
    text = _math(text)
    text = _literal_markers(text)
    return ROLE.sub(lambda m: _role(obj, m), text)


class ReSTToMarkdown(griffe.Extension):
    """Rewrite every docstring of the package once it is loaded (names resolve then)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = markdown(obj, obj.docstring.value)
            stack += [m for m in obj.members.values() if not m.is_alias]

    # griffe before on_package: the same hook under its earlier name (the rewrite is idempotent)
    on_package_loaded = on_package
