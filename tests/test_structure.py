"""The package's shape: imports only go down the layers, and every problem stem is complete.

Layers, bottom to top (DESIGN.md "Layout"): models, results and input checks; shared dynamic
programming, posteriors and soft Bellman pieces; problems (what); conic and fast paths (how);
agents; environments and experiments; benchmarks; the command line. A module may import from
its own layer or below, never above, and the two "how" halves never import each other. Lazy
imports inside functions count too: they are how an upward dependency hides.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import optplan
from optplan.problems.base import Problem

PACKAGE = Path(optplan.__file__).resolve().parent

#: Top-level names of the package (module stems and subpackages), layer by layer.
LAYERS = (
    ("_checks", "_params", "_jit", "mdp", "result"),
    ("dp", "posteriors", "soft", "uncertainty", "generators", "modelfile", "bridges"),
    ("problems",),
    ("conic", "fast", "crosscheck"),
    ("verification", "testing", "describe", "hardness"),
    ("agents",),
    ("envs",),
    ("experiments",),
    ("sweeps",),
    ("plots",),
    ("bench",),
    ("cli",),
    ("__init__", "__main__"),
)
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}
#: Same-layer pairs that must stay apart: the two ways of solving a problem.
SIBLINGS_APART = {frozenset({"conic", "fast"})}
#: The places that load modules by name: ``Problem.solve`` dispatching on the stem,
#: ``optplan verify-fn MODULE:FUNCTION`` loading the user's module (its purpose), and the
#: experiment registry loading a sweep's user modules and ``module:factory`` paths; and the
#: package's own ``__getattr__`` loading ``op.X`` on first use (the top layer: nothing above it).
DYNAMIC_IMPORTS = {
    "problems/base.py",
    "cli/verify_fn.py",
    "experiments/registry.py",
    "__init__.py",
}


def _unit(module: str) -> str:
    """``optplan.fast.kl_ball`` -> ``fast``; ``optplan`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = ["optplan", *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in the file, lazy ones included."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None or target == "optplan":  # `from . import x` imports x
                out += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, target))
    return [(line, mod) for line, mod in out if mod == "optplan" or mod.startswith("optplan.")]


def layer_violations(root: Path = PACKAGE) -> list[str]:
    """Every import that goes up a layer or across the conic/fast line, as readable lines."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        unit = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if unit not in LAYER:
            problems.append(f"{rel}: module {unit!r} has no layer in tests/test_structure.py")
            continue
        for line, target in _imports(path, root):
            other = _unit(target)
            if other not in LAYER:
                problems.append(f"{rel}:{line} imports {target}, which has no layer")
            elif LAYER[other] > LAYER[unit]:
                problems.append(
                    f"{rel}:{line} imports {target}: layer {LAYER[other]} ({other}) is above "
                    f"layer {LAYER[unit]} ({unit})"
                )
            elif frozenset({unit, other}) in SIBLINGS_APART:
                problems.append(f"{rel}:{line} imports {target}: {unit} and {other} stay apart")
    return problems


def test_imports_only_go_down():
    assert layer_violations() == []


def test_no_module_loads_code_by_name_but_the_stem_dispatch():
    found = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "import_module(" in path.read_text() or "__import__(" in path.read_text()
    }
    assert found <= DYNAMIC_IMPORTS


def test_layer_check_sees_an_upward_lazy_import(tmp_path):
    """The check itself can fail: a lazy import of an agent inside ``dp`` is reported."""
    fake = tmp_path / "optplan"
    (fake / "agents").mkdir(parents=True)
    (fake / "agents" / "__init__.py").write_text("")
    (fake / "dp.py").write_text("def f():\n    from .agents import x\n    return x\n")
    violations = layer_violations(fake)
    assert len(violations) == 1 and "dp.py:2 imports optplan.agents" in violations[0]


def problem_classes() -> list[type[Problem]]:
    import optplan.problems as problems

    return sorted(
        {
            obj
            for obj in vars(problems).values()
            if inspect.isclass(obj) and issubclass(obj, Problem) and obj is not Problem
        },
        key=lambda cls: cls.stem,
    )


def stem_gaps(root: Path = PACKAGE) -> list[str]:
    """What each problem stem lacks: its problems/, conic/ and fast/ modules and their
    entry points; and modules of conic/ or fast/ that belong to no problem."""
    gaps = []
    stems = {cls.stem for cls in problem_classes()}
    for stem in sorted(stems):
        for half, functions in (
            ("problems", ()),
            ("conic", ("formulate", "solve")),
            ("fast", ("solve",)),
        ):
            path = root / half / f"{stem}.py"
            if not path.is_file():
                gaps.append(f"{half}/{stem}.py is missing")
                continue
            defined = {
                node.name
                for node in ast.parse(path.read_text()).body
                if isinstance(node, ast.FunctionDef)
            }
            gaps += [f"{half}/{stem}.py defines no {fn}()" for fn in functions if fn not in defined]
    for half in ("conic", "fast"):
        for path in sorted((root / half).glob("[!_]*.py")):
            if path.stem not in stems:
                gaps.append(f"{half}/{path.name} solves no problem stem")
    return gaps


def test_every_problem_stem_has_its_three_modules():
    assert len(problem_classes()) >= 7
    assert stem_gaps() == []


def test_stem_check_sees_a_missing_module(tmp_path):
    """The check itself can fail: a copy of the package without one fast module is reported."""
    import shutil

    copy = tmp_path / "optplan"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "fast" / "kl_inf.py").unlink()
    assert stem_gaps(copy) == ["fast/kl_inf.py is missing"]


@pytest.mark.parametrize("cls", problem_classes(), ids=lambda c: c.stem)
def test_stem_modules_import_and_dispatch(cls):
    for half in ("conic", "fast"):
        module = importlib.import_module(f"optplan.{half}.{cls.stem}")
        assert callable(module.solve)
