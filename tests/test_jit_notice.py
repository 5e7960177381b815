"""The one-line notice while numba compiles a collection of kernels on first use: printed on
stderr when numba really compiles (nothing in its on-disk cache), once per collection, and
not when a later process loads the compiled code from the cache.

Each run is a fresh interpreter with its own ``NUMBA_CACHE_DIR``; the collection is a small
module written for the test (optplan's own kernels take seconds to compile, see
``optplan/_jit.py``), compiled through the same :class:`optplan._jit.Jit`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

MODULE = textwrap.dedent(
    """
    from optplan._jit import Jit

    jit = Jit("toy kernels", cache=True)

    @jit
    def _twice(x):
        return 2.0 * x

    @jit
    def _thrice(x):
        return 3.0 * x
    """
)

CALLER = textwrap.dedent(
    """
    import optplan  # its package logger is silent: the notice must not depend on logging
    import optplan._checks
    import toy_kernels
    table = toy_kernels.jit.compiled()
    print(table["_twice"](1.5), table["_thrice"](1.5), float(table["_twice"](2)))
    """
)


def _path(tmp_path) -> str:
    """``PYTHONPATH`` of a run: the test's module, then the optplan under test."""
    import optplan

    return os.pathsep.join([str(tmp_path), str(Path(optplan.__file__).parents[1])])


def _run(tmp_path, cache) -> str:
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(cache),
        "PYTHONPATH": _path(tmp_path),
        "OPTPLAN_JIT_NOTICE": "1",  # the test suite turns it off (tests/conftest.py)
    }
    out = subprocess.run(
        [sys.executable, "-c", CALLER],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.stdout.split() == ["3.0", "4.5", "4.0"]
    return out.stderr


def test_notice_on_the_first_compile_only(tmp_path):
    (tmp_path / "toy_kernels.py").write_text(MODULE)
    cache = tmp_path / "numba-cache"
    first = _run(tmp_path, cache)
    notices = [line for line in first.splitlines() if "compiling" in line]
    # one line for the collection, although three functions (two signatures) compiled
    assert len(notices) == 1, first
    assert notices[0].startswith("optplan: numba is compiling")
    assert "toy_kernels" in notices[0] and " s " in notices[0]
    second = _run(tmp_path, cache)  # the same cache: loaded, not compiled
    assert "compiling" not in second, second


def test_notice_again_when_the_source_changes(tmp_path):
    """A changed source file is compiled again (numba's cache is stale): the notice says so."""
    (tmp_path / "toy_kernels.py").write_text(MODULE)
    cache = tmp_path / "numba-cache"
    _run(tmp_path, cache)
    (tmp_path / "toy_kernels.py").write_text(MODULE.replace("2.0 * x", "x + x"))
    assert "compiling" in _run(tmp_path, cache)


def test_the_environment_variable_silences_it(tmp_path):
    (tmp_path / "toy_kernels.py").write_text(MODULE)
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),
        "PYTHONPATH": _path(tmp_path),
        "OPTPLAN_JIT_NOTICE": "0",
    }
    out = subprocess.run(
        [sys.executable, "-c", CALLER], capture_output=True, text=True, check=True, env=env
    )
    assert "compiling" not in out.stderr


LITERALS = textwrap.dedent(
    """
    from optplan._jit import Jit

    jit = Jit("toy kernels", cache=True)

    @jit
    def _add(x, n):
        return x + n

    @jit
    def _loop(x):
        n = 0
        for _ in range(3):
            x = _add(x, n)
            n += 1
        return _add(x, 1) + _add(x, True)
    """
)

COUNTED = textwrap.dedent(
    """
    import optplan._jit as J
    import toy_literals
    table = toy_literals.jit.compiled()
    before = J.compile_seconds()
    print(table["_loop"](0.5), len(table["_add"].signatures), J.compile_seconds() > before)
    """
)


def test_compiled_for_plain_types_and_compile_seconds(tmp_path):
    """A kernel called from compiled code with constants (``0``, ``1``, ``True``) is compiled
    once, for ``int64`` / ``bool`` rather than once per literal; ``compile_seconds`` counts a
    real compile and not a load from the cache."""
    (tmp_path / "toy_literals.py").write_text(LITERALS)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),
           "PYTHONPATH": _path(tmp_path), "OPTPLAN_JIT_NOTICE": "0"}  # fmt: skip

    def run() -> list[str]:
        out = subprocess.run([sys.executable, "-c", COUNTED], capture_output=True, text=True,
                             check=True, env=env, cwd=tmp_path, timeout=300)  # fmt: skip
        return out.stdout.split()

    # 0.5 + 0 + 1 + 2 = 3.5, then (3.5 + 1) + (3.5 + True); _add(float64, int64) and
    # _add(float64, bool): two signatures, no Literal[int](0) / Literal[int](1) ones
    assert run() == ["9.0", "2", "True"]
    cached = run()  # loaded from the cache: no compile (and _add not even loaded)
    assert cached[0] == "9.0" and cached[2] == "False"
