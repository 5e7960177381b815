"""The package's shape (docs/architecture.md): imports only go down the layers, no module
imports itself round a circle, and every stem of the problems' table is complete.

Layers, bottom to top: models, results, input checks and shared plumbing; shared dynamic
programming, posteriors and soft Bellman pieces; problems (what); conic and fast paths (how);
verification; agents; environments; the run loop; sweeps; plots; benchmarks; the command line.
A module may import from its own layer or below, never above, and the two "how" halves never
import each other. Lazy imports inside functions count too: they are how an upward dependency
hides.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import optplan
from optplan._checks import OptplanError
from optplan.bench import STEM_SUITES, SUITES, bench_row
from optplan.problems import stems

PACKAGE = Path(optplan.__file__).resolve().parent

#: Top-level names of the package (module stems and subpackages), layer by layer.
LAYERS = (
    ("_checks", "_params", "_jit", "_progress", "_model_checks", "_version", "mdp", "result"),
    ("dp", "posteriors", "soft", "uncertainty", "generators", "modelfile", "bridges"),
    ("problems",),
    ("conic", "fast", "crosscheck"),
    ("verification", "testing", "hardness"),
    ("envs",),
    ("agents",),
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
#: The places that load modules by name: the stem table (``Problem.solve``, verification and
#: the bench suites find a stem's modules through it), ``optplan verify-fn MODULE:FUNCTION``
#: loading the user's module (its purpose), the sweep registry loading a sweep's user modules
#: and ``module:factory`` paths; and the package's own ``__getattr__`` loading ``op.X`` on
#: first use (the top layer: nothing above it).
DYNAMIC_IMPORTS = {
    "problems/stems.py",
    "cli/verify_fn.py",
    "sweeps/registry.py",
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


def _defined(path: Path) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _module_path(root: Path, dotted: str) -> Path:
    """``optplan.fast.kl_ball`` -> ``root/fast/kl_ball.py`` (or its package ``__init__``)."""
    rel = Path(*dotted.split(".")[1:])
    path = (root / rel).with_suffix(".py")
    return path if path.is_file() else root / rel / "__init__.py"


def stem_gaps(root: Path = PACKAGE, table=None, bench_rows=None) -> list[str]:
    """What each row of the stem table lacks: its problem class, its fast module with
    ``solve()``, its conic module with ``formulate()`` and ``solve()``, a bench suite that
    times it; and modules of conic/ or fast/ that no row names. Read from the source files
    (``root``), so a copy of the package with a piece removed can be checked too."""
    table = stems.STEMS if table is None else table
    bench_rows = STEM_SUITES if bench_rows is None else bench_rows
    gaps = []
    for stem, row in table.items():
        module, _, cls = row.problem.rpartition(".")
        path = _module_path(root, module)
        if not path.is_file():
            gaps.append(f"{stem}: problem module {module} is missing")
        elif cls not in _defined(path):
            gaps.append(f"{stem}: {module} defines no {cls}")
        for half, dotted, functions in (
            ("fast", row.fast, ("solve",)),
            ("conic", row.conic, ("formulate", "solve")),
        ):
            path = _module_path(root, dotted)
            if not path.is_file():
                gaps.append(f"{stem}: {half} module {dotted} is missing")
                continue
            defined = _defined(path)
            gaps += [f"{stem}: {dotted} defines no {fn}()" for fn in functions if fn not in defined]
        if stem not in bench_rows:
            gaps.append(f"{stem}: no bench suite times it")
    named = {row.fast for row in table.values()} | {row.conic for row in table.values()}
    for half in ("conic", "fast"):
        for path in sorted((root / half).glob("[!_]*.py")):
            if f"optplan.{half}.{path.stem}" not in named:
                gaps.append(f"{half}/{path.name} solves no stem of the table")
    return gaps


def test_every_stem_has_its_problem_modules_and_bench_row():
    assert len(stems.STEMS) >= 12
    assert stem_gaps() == []


def test_stem_check_sees_a_missing_piece(tmp_path):
    """The check itself can fail: a copy of the package without one fast module, a stem no
    suite times and a module no row names are each reported."""
    import shutil

    copy = tmp_path / "optplan"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "fast" / "kl_inf.py").unlink()
    (copy / "conic" / "extra.py").write_text("def solve(problem):\n    return None\n")
    rows = {k: v for k, v in STEM_SUITES.items() if k != "ube"}
    assert stem_gaps(copy, bench_rows=rows) == [
        "kl_inf: fast module optplan.fast.kl_inf is missing",
        "ube: no bench suite times it",
        "conic/extra.py solves no stem of the table",
    ]


@pytest.mark.parametrize("stem", list(stems.STEMS))
def test_stem_rows_import_and_agree(stem):
    """Each row's class carries its stem, and its modules import and solve."""
    assert stems.problem_class(stem).stem == stem
    assert callable(stems.fast_module(stem).solve)
    assert callable(stems.conic_module(stem).solve)
    assert callable(stems.conic_module(stem).formulate)
    assert bench_row(stem) in SUITES


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``module -> modules it imports`` inside the package (lazy imports included), each
    target resolved to the module file that defines it (a package's ``__init__``, or the
    submodule when ``from package import submodule``)."""
    modules = {_module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for _, target in _imports(path, root):
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]  # `from m import name`: the module m
            if target in modules and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


#: The package's own ``__init__`` re-exports (lazily) the public names of every layer, and
#: ``optplan/__main__`` calls the command line: edges out of them are the top layer's.
_TOP = {"optplan", "optplan.__main__"}


def test_no_import_circle():
    graph = {m: t - _TOP for m, t in import_graph().items() if m not in _TOP}
    assert import_cycles(graph) == []


def test_cycle_check_sees_a_circle():
    """The check itself can fail: two modules that import each other are one component."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_every_problem_class_has_a_row_and_a_verification_target():
    """The table is complete both ways: every problem class optplan exports has a row, and
    ``op.verify`` has a built-in target for each row, in the table's order."""
    import optplan.problems as problems
    from optplan.problems.base import Problem
    from optplan.verification import BUILTIN

    exported = {
        obj
        for obj in vars(problems).values()
        if inspect.isclass(obj) and issubclass(obj, Problem) and obj is not Problem
    }
    assert exported == {stems.problem_class(stem) for stem in stems.stems()}
    assert tuple(BUILTIN) == stems.stems()


@pytest.mark.parametrize(
    ("lookup", "name", "says"),
    [
        (stems.row, "kl_bal", "did you mean 'kl_ball'"),
        (stems.problem_class, 3, "unknown problem stem 3"),
        (stems.fast_module, "nope", "unknown problem stem 'nope'"),
        (bench_row, "nope", "unknown problem stem 'nope'"),
    ],
)
def test_an_unknown_stem_is_refused_by_name(lookup, name, says):
    with pytest.raises(OptplanError) as err:
        lookup(name)
    assert says in str(err.value) and "stems: kl_ball" in str(err.value)
