"""Temporary files of interrupted writes (``.<name>.tmp-PID``) in a result store: a resumed
sweep deletes those whose writer is dead and keeps a live writer's; readers ignore them."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import dead_pid
from test_sweep_exec import small_spec

from optplan.cli import main
from optplan.sweeps import load_results, run_sweep, sweep_from_dict


def small_sweep():
    return sweep_from_dict(small_spec(), source="small.toml")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("strays") / "ref"
    rep = run_sweep(small_sweep(), out, quiet=True)
    assert rep.failed == 0
    return out


def strays(out, pid):
    """Stray temporary files as a SIGKILL leaves them: a partial curve file, a partial
    record, a partial summary and curves file in the directory itself."""
    npz = sorted((out / "tasks").glob("*.npz"))[0]
    paths = [
        npz.with_name(f".{npz.name}.tmp-{pid}"),
        npz.with_name(f".{npz.stem}.json.tmp-{pid}"),
        out / f".summary.csv.tmp-{pid}",
        out / f".curves.npz.tmp-{pid}",
        out / f".sweep.json.tmp-{pid}",
    ]
    paths[0].write_bytes(npz.read_bytes()[:100])
    for p in paths[1:]:
        p.write_bytes(b'{"index": 0, "sta')
    return paths


def test_resume_deletes_strays_of_dead_writers_and_keeps_the_results(reference, tmp_path):
    out = tmp_path / "res"
    shutil.copytree(reference, out)
    dead = strays(out, dead_pid())
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = strays(out, live.pid)
        rep = run_sweep(small_sweep(), out, quiet=True)
        assert rep.ran == 0
        assert not any(p.exists() for p in dead), [p.name for p in dead if p.exists()]
        assert all(p.exists() for p in kept)  # a live writer may still be writing
    finally:
        live.kill()
        live.wait()
    assert load_results(out).compare(load_results(reference)) == []
    run_sweep(small_sweep(), out, quiet=True)
    assert not list(out.rglob("*.tmp-*"))


def test_results_ignore_strays(reference, tmp_path, capsys):
    out = tmp_path / "res"
    shutil.copytree(reference, out)
    assert main(["results", str(out)]) == 0
    clean = capsys.readouterr()
    strays(out, dead_pid())
    assert main(["results", str(out)]) == 0
    assert capsys.readouterr() == clean
    assert len(list(out.rglob("*.tmp-*"))) == 5  # a reader changes nothing on disk
