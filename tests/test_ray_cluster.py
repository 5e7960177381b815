"""A sweep on a two-node Ray cluster that loses a node midway: the lost node's tasks run again
elsewhere, the model files reach the workers, and the results are the local run's.

Both nodes run on this machine (``ray start --head``, then a second ``ray start --address``),
in a temporary directory of their own; the test kills the second node's raylet once some tasks
are recorded, and at the end every process of that directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from optplan.cli import main
from optplan.sweeps import load_results, run_sweep, sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]

SPEC = {
    "name": "cluster",
    "seed": 5,
    "seeds": 4,
    "steps": 30000,
    "curves": {"points": 10},
    "agents": [
        {"name": "ucrl2", "label": "UCRL2"},
        {"name": "mdp-ucb", "params": {"initial_counts": "models/cowan3-rigged.toml"}},
    ],
    "envs": [{"name": "model", "label": "cowan3", "params": {"path": "models/cowan3.toml"}}],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pids(marker: str, *also: str) -> list[int]:
    """Processes whose command line holds ``marker`` and every string of ``also``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd and all(a in cmd for a in also):
            out.append(int(entry))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the raylets in /proc")
def test_a_cluster_that_loses_a_node_gives_the_local_results(tmp_path):
    pytest.importorskip("ray", reason="the Ray backend needs the optional extra optplan[ray]")
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        pytest.skip(reason="no `ray` command next to this Python or on PATH")
    # a short directory: Ray's socket paths must stay under the OS limit (107 bytes)
    temp = tempfile.mkdtemp(prefix="opr", dir="/tmp")
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "OPENBLAS_NUM_THREADS": "1"}
    common = ["--num-cpus=1", "--disable-usage-stats"]
    spec = tmp_path / "cluster.toml"
    import tomli_w

    spec.write_text(tomli_w.dumps(SPEC))
    try:
        subprocess.run(
            [ray, "start", "--head", f"--port={port}", f"--temp-dir={temp}",
             "--include-dashboard=false", *common],
            env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        subprocess.run(
            [ray, "start", f"--address=127.0.0.1:{port}", *common],
            env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        second = _pids(temp, "/raylet ", "sockets/raylet.1")
        assert len(second) == 1, "the second node's raylet"
        out = tmp_path / "cluster"
        driver = subprocess.Popen(
            [sys.executable, "-c", "import sys; from optplan.cli import main; sys.exit(main())",
             "sweep", str(spec), "--out", str(out),
             "--backend", "ray", "--address", f"127.0.0.1:{port}", "--quiet"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while len(list((out / "tasks").glob("*.json"))) < 2 and driver.poll() is None:
            assert time.monotonic() < deadline, "no task recorded in 300 s"
            time.sleep(0.2)
        assert driver.poll() is None, "the sweep ended before the node could be killed"
        os.kill(second[0], signal.SIGKILL)  # the second node dies midway
        output, _ = driver.communicate(timeout=600)
        assert driver.returncode == 0, output
    finally:
        for pid in _pids(temp):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)
    rows = load_results(out).rows
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    # the same sweep in this process, from the repository root
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        run_sweep(sweep_from_dict(SPEC, source="cluster.toml"), tmp_path / "local", quiet=True)
    finally:
        os.chdir(cwd)
    assert main(["results", str(out), "--compare", str(tmp_path / "local")]) == 0
