"""The one-line notice while numba compiles a collection of kernels on first use: printed on
stderr when numba really compiles (nothing in its on-disk cache), once per collection, and
not when a later process loads the compiled code from the cache.

Each run is a fresh interpreter with its own ``NUMBA_CACHE_DIR``; the collection is a small
module written for the test (optplan's own kernels take 15-35 s of CPU to compile, see
``optplan/_jit.py``), compiled through the same :class:`optplan._jit.Jit`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

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


def _run(tmp_path, cache) -> str:
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(cache),
        "PYTHONPATH": str(tmp_path),
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
        "PYTHONPATH": str(tmp_path),
        "OPTPLAN_JIT_NOTICE": "0",
    }
    out = subprocess.run(
        [sys.executable, "-c", CALLER], capture_output=True, text=True, check=True, env=env
    )
    assert "compiling" not in out.stderr
