"""Test configuration: hypothesis runs derandomized (fixed seeds) everywhere, no deadlines."""

import os
import subprocess
import sys

import pytest
from hypothesis import settings

# No "numba is compiling" notice (optplan/_jit.py) in tests that read stderr, here and in the
# commands they start: which test compiles a kernel first depends on the order and the cache.
# tests/test_jit_notice.py turns it on where it checks it.
os.environ["OPTPLAN_JIT_NOTICE"] = "0"

settings.register_profile("optplan", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("optplan")


@pytest.fixture
def tiny_results(tmp_path, capsys):
    """A finished one-task sweep (random on RiverSwim-3, 20 steps): its result directory."""
    from optplan import cli

    sweep = tmp_path / "tiny.toml"
    sweep.write_text(
        'name = "tiny"\nseed = 1\nseeds = 1\nsteps = 20\n[[agents]]\nname = "random"\n'
        '[[envs]]\nname = "riverswim"\nparams = { n_states = 3 }\n'
    )
    res = tmp_path / "res"
    assert cli.main(["sweep", str(sweep), "--out", str(res), "--quiet"]) == 0
    capsys.readouterr()
    return res


def dead_pid() -> int:
    """The pid of a process that has exited (a test planting a stray ``*.tmp-PID`` file must
    not name a pid that may be alive, such as a kernel thread's)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
