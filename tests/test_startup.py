"""Start-up weight: ``import optplan`` and ``optplan --help`` load no heavy library.

Each check runs a fresh interpreter (this test process has imported everything already) and
reads ``sys.modules`` there, so it fails as soon as some module imports, say, scipy.optimize
or gymnasium at its top. Times are not asserted (``optplan bench`` measures, tests do not).
"""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import optplan as op

#: What ``import optplan`` and ``optplan --help`` must leave unloaded (each costs 0.1-3 s).
HEAVY = (
    "numpy",
    "cvxpy",
    "scipy.optimize",
    "scipy.sparse",
    "scipy.stats",
    "matplotlib",
    "gymnasium",
    "ray",
    "numba",
    "hypothesis",
    "joblib",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return eval(out.stdout.strip().splitlines()[-1])


def test_import_optplan_loads_no_heavy_library():
    assert _loaded_after("import optplan") == []


def test_optplan_help_loads_no_heavy_library():
    code = "from optplan.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(code) == []


def test_the_probe_can_fail():
    """The check sees a heavy import: building a problem's CVXPY formulation loads cvxpy."""
    code = (
        "import numpy as np, optplan as op\n"
        "op.KLBallIndex(np.array([0.5, 0.5]), np.array([0.0, 1.0]), 0.1).formulate()"
    )
    assert "cvxpy" in _loaded_after(code)


def test_every_public_name_resolves_and_is_listed():
    for name in op.__all__:
        assert getattr(op, name) is not None, name
    assert set(op.__all__) <= set(dir(op))
    assert isinstance(op.agents, types.ModuleType) and op.agents.PSRL is not None
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        op.not_a_name  # noqa: B018


def test_a_submodule_does_not_shadow_the_function_of_the_same_name():
    """``op.describe`` is the function of the module ``optplan.hardness``, whichever loads
    first (the import system binds each loaded submodule on its package)."""
    code = (
        "import optplan.hardness, optplan as op\n"
        "assert callable(op.describe) and op.describe.__name__ == 'describe', op.describe\n"
        "import optplan.mdp\n"
        "assert op.mdp.TabularMDP is op.TabularMDP"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize(
    "code",
    [
        "import gymnasium as gym\ngym.make('optplan:optplan/DeepSea-v0')",
        "import gymnasium as gym\nimport optplan\ngym.make('optplan/RiverSwim-v0')",
        "import optplan as op\nimport gymnasium as gym\nop.envs\ngym.make('optplan/RiverSwim-v0')",
    ],
    ids=["module-prefix", "gymnasium-first", "op.envs"],
)
def test_gymnasium_ids_are_registered_without_eager_imports(code):
    """The ``optplan/`` ids exist whenever Gymnasium is there to use them."""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True)
