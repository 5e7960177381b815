"""The documentation site (mkdocs.yml, docs/api/): every public name has its reference, and the
navigation names only pages that exist.

The strict build itself (``mkdocs build --strict``, warnings as errors) runs in ``.ci/run``: it
takes seconds, and it also checks every link, anchor and docstring the reference renders.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import optplan

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api"
DIRECTIVE = re.compile(r"^:::\s+(\S+)", re.M)


def _directives() -> list[str]:
    return [m for page in sorted(API.glob("*.md")) for m in DIRECTIVE.findall(page.read_text())]


def _resolve(dotted: str):
    """The object a ``::: a.b.C`` directive renders: the longest importable module prefix, then
    attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _rendered_members(module: ModuleType) -> dict[str, object]:
    """The members mkdocstrings renders for a module directive: its ``__all__`` (or, without one,
    its public names)."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return {n: getattr(module, n) for n in names}


def test_every_directive_resolves():
    directives = _directives()
    assert directives, "docs/api has no ::: directives"
    for dotted in directives:
        _resolve(dotted)  # raises for a name that moved or was renamed


def test_every_public_name_is_in_the_api_reference():
    documented = [_resolve(d) for d in _directives()]
    modules = [m for m in documented if isinstance(m, ModuleType)]
    missing = []
    for name in optplan.__all__:
        obj = getattr(optplan, name)
        direct = any(d is obj for d in documented)
        member = any(_rendered_members(m).get(name, None) is obj for m in modules)
        if not (direct or member):
            missing.append(name)
    assert not missing, f"optplan.__all__ names without a ::: directive under docs/api: {missing}"


def _nav_files(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [f for item in nav for f in _nav_files(item)]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return []


def _config() -> dict:
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        """mkdocs.yml's tags (``!relative``, ``!ENV``) read as plain values."""

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def test_nav_names_existing_pages():
    config = _config()
    files = _nav_files(config["nav"])
    assert len(files) > 10
    missing = [f for f in files if not (ROOT / config["docs_dir"] / f).is_file()]
    assert not missing, f"mkdocs.yml nav names missing pages: {missing}"
    api_pages = {p.relative_to(DOCS).as_posix() for p in API.glob("*.md")}
    assert api_pages <= set(files), f"API pages left out of the nav: {api_pages - set(files)}"


def _hook():
    spec = importlib.util.spec_from_file_location("docs_links_hook", DOCS / "hooks" / "links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_links_leaving_docs_point_at_the_site_copies():
    """docs/hooks/links.py: a figure outside docs/ is served from ``repo/``, the README's links
    go to the home page, links inside docs/ and code blocks stay as written."""
    pytest.importorskip("mkdocs")
    hook = _hook()
    figure = sorted((ROOT / "examples" / "figures").glob("*.png"))[0].name
    text = (
        f"![a](../../examples/figures/{figure}) [r](../../README.md#anchor) [m](../math.md)\n"
        f"```\n[c](../../examples/figures/{figure})\n```\n"
    )
    page = SimpleNamespace(
        file=SimpleNamespace(abs_src_path=str(DOCS / "api" / "x.md"), src_uri="api/x.md")
    )
    config = {"docs_dir": str(DOCS), "config_file_path": str(ROOT / "mkdocs.yml")}
    out = hook.on_page_markdown(text, page, config, files=None)
    assert f"![a](../repo/examples/figures/{figure})" in out
    assert "[r](../index.md)" in out
    assert "[m](../math.md)" in out
    assert f"[c](../../examples/figures/{figure})" in out


def test_docstring_rest_reads_as_markdown():
    """docs/hooks/griffe_rst.py: ``.. math::`` becomes a ``$$`` block, ``Example::`` ends in a
    colon, a top-level name's reference points where the name is defined."""
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("docs_rst_hook", DOCS / "hooks" / "griffe_rst.py")
    rst = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rst)
    text = "Intro.\n\n.. math:: a = b\n    + c\n\nExample::\n\n    x = 1\n"
    assert rst._literal_markers(rst._math(text)) == (
        "Intro.\n\n\n$$\na = b\n+ c\n$$\n\nExample:\n\n    x = 1\n"
    )
    assert rst._identifier(None, "optplan.verify") == "optplan.verification.verify"
    assert rst._identifier(None, "optplan.mdp.TabularMDP") == "optplan.mdp.TabularMDP"


def test_built_reference_check_names_module_level_entries():
    """docs/hooks/api_names.py (the build's own check): ``M.X`` with ``M`` a module documents
    ``X``; a method of the same name does not."""
    spec = importlib.util.spec_from_file_location("docs_api_hook", DOCS / "hooks" / "api_names.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    everything = {"optplan.agents", "optplan.mdp.TabularMDP"}
    missing = hook.missing_names(everything)
    assert "agents" not in missing and "TabularMDP" not in missing
    assert "describe" in missing
    assert "describe" in hook.missing_names({"optplan.sweeps.Sweep.describe"})
    assert "describe" not in hook.missing_names({"optplan.hardness.describe"})
