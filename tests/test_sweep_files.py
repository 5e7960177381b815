"""The files a sweep names (model files, initial counts) travel with its tasks: a worker in
another directory, or on another machine, builds the same task from the driver's copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optplan import modelfile
from optplan.sweeps import load_results, run_sweep, sweep_from_dict
from optplan.sweeps.execute import execute_task, worker_payloads
from optplan.sweeps.sweep import SweepError

MODELS = Path(__file__).resolve().parents[1] / "models"


def _spec() -> dict:
    return {
        "name": "files",
        "seed": 3,
        "seeds": 2,
        "steps": 300,
        "curves": {"points": 10},
        "agents": [
            {"name": "mdp-ucb", "params": {"initial_counts": "data/rigged.toml"}},
            {"name": "random"},
        ],
        "envs": [{"name": "model", "label": "cowan3", "params": {"path": "data/cowan3.toml"}}],
    }


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A directory holding ``data/cowan3.toml`` and ``data/rigged.toml``, the sweep's working
    directory (its paths are relative to it, as a sweep file's are)."""
    (tmp_path / "data").mkdir()
    shutil.copy(MODELS / "cowan3.toml", tmp_path / "data" / "cowan3.toml")
    shutil.copy(MODELS / "cowan3-rigged.toml", tmp_path / "data" / "rigged.toml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_tasks_carry_the_files_their_parameters_name(project):
    sweep = sweep_from_dict(_spec(), source="files.toml")
    payloads = worker_payloads(sweep, sweep.tasks())
    by_agent = {p["agent"]["name"]: p for p in payloads}
    model = (project / "data" / "cowan3.toml").read_bytes()
    assert by_agent["mdp-ucb"]["files"] == {
        "data/cowan3.toml": model,
        "data/rigged.toml": (project / "data" / "rigged.toml").read_bytes(),
    }
    assert by_agent["random"]["files"] == {"data/cowan3.toml": model}


def test_a_worker_elsewhere_builds_the_task_from_the_shipped_files(project, tmp_path_factory,
                                                                   monkeypatch):  # fmt: skip
    sweep = sweep_from_dict(_spec(), source="files.toml")
    payloads = worker_payloads(sweep, sweep.tasks())
    here = [execute_task(p)[0] for p in payloads]
    assert all(r["status"] == "ok" for r in here), [r["error"] for r in here]
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # the worker's own directory
    there = [execute_task(p)[0] for p in payloads]
    assert [r["summary"]["regret"] for r in there] == [r["summary"]["regret"] for r in here]
    # without the shipped copies the same worker cannot find the files
    bare = [{k: v for k, v in p.items() if k != "files"} for p in payloads]
    failed = [execute_task(p)[0] for p in bare]
    assert all(r["status"] == "error" for r in failed)
    assert "data/cowan3.toml" in failed[0]["error"]
    assert modelfile.SHIPPED == {}  # nothing left behind in the process


def test_a_sweep_in_worker_processes_equals_one_in_the_driver(project):
    sweep = sweep_from_dict(_spec(), source="files.toml")
    a = run_sweep(sweep, project / "a", jobs=1, quiet=True)
    b = run_sweep(sweep, project / "b", jobs=2, quiet=True)
    assert a.failed == b.failed == 0 and a.ran == b.ran == 4
    assert load_results(project / "a").compare(load_results(project / "b")) == []


def test_a_missing_file_is_refused_when_the_sweep_is_read(project):
    spec = _spec()
    spec["envs"][0]["params"]["path"] = "data/missing.toml"
    with pytest.raises(SweepError, match="envs 'cowan3': .*data/missing.toml"):
        sweep_from_dict(spec, source="files.toml")
