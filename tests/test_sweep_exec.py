"""Sweep execution: backends agree bit for bit, resume after a kill, refusal, failures, CLI."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import dead_pid

from optplan.cli import main
from optplan.sweeps import StoreMismatch, load_results, load_sweep, run_sweep, sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "models" / "sweeps" / "smoke.toml"


def small_spec(**over) -> dict:
    spec = {
        "name": "small",
        "seed": 7,
        "seeds": 3,
        "steps": 400,
        "curves": {"points": 20},
        "agents": [{"name": "random"}, {"name": "epsilon-greedy", "params": {"epsilon": 0.2}}],
        "envs": [
            {"name": "riverswim", "params": {"n_states": [3, 5]}},
            {"name": "riverswim-episodic", "params": {"n_states": 4, "horizon": 6}},
        ],
    }
    spec.update(over)
    return spec


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def without_timing(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, v) for k, v in r.items() if k != "wall_time")) for r in rows)


def test_local_jobs_and_order_do_not_change_results(tmp_path):
    sweep = sweep_from_dict(small_spec(), source="small.toml")
    a = run_sweep(sweep, tmp_path / "a", jobs=1, quiet=True)
    b = run_sweep(sweep, tmp_path / "b", jobs=2, quiet=True)
    assert a.ran == b.ran == len(sweep) == 18 and a.failed == b.failed == 0
    rows_a, rows_b = read_csv(a.summary_path), read_csv(b.summary_path)
    assert len(rows_a) == 18 and without_timing(rows_a) == without_timing(rows_b)
    assert load_results(tmp_path / "a").compare(load_results(tmp_path / "b")) == []
    # Curves bit for bit, too.
    ca, cb = np.load(a.curves_path), np.load(b.curves_path)
    for key in ("task", "t", "episodes", "regret", "realized_regret"):
        np.testing.assert_array_equal(ca[key], cb[key])


def test_summary_and_curves_are_consistent(tmp_path):
    sweep = sweep_from_dict(small_spec(), source="small.toml")
    rep = run_sweep(sweep, tmp_path, quiet=True)
    rows = read_csv(rep.summary_path)
    tasks = sweep.tasks()
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    for col in ("agent.epsilon", "env.n_states", "env.horizon", "regret", "time_to_solve"):
        assert col in rows[0]
    res = load_results(tmp_path)
    curves = np.load(rep.curves_path)
    for rec, row in zip(res.records, rows, strict=True):
        arr = res.arrays(rec)
        sel = curves["task"] == rec["index"]
        np.testing.assert_array_equal(curves["regret"][sel], arr["regret"])
        assert arr["t"][-1] == rec["summary"]["steps"] == 400
        assert float(row["regret"]) == arr["regret"][-1]  # last stored point is the final one
        assert arr["visits"].sum() == 400
    episodic = [r for r in rows if r["env"].startswith("riverswim-episodic")]
    assert all(r["criterion"] == "finite_horizon" and r["goal_rate"] != "" for r in episodic)
    continuing = [r for r in rows if not r["env"].startswith("riverswim-episodic")]
    assert all(r["criterion"] == "average" and r["time_to_solve"] == "" for r in continuing)


def test_resume_skips_finished_tasks(tmp_path):
    full = sweep_from_dict(small_spec(), source="small.toml")
    reference = run_sweep(full, tmp_path / "ref", quiet=True)
    # A first run that "crashed" after 5 tasks: simulated by writing 5 records, then the rest.
    from optplan.sweeps.execute import execute_task
    from optplan.sweeps.store import ResultStore

    store = ResultStore(tmp_path / "out")
    store.prepare(full)
    first = full.tasks()[:5]
    for t in first:
        store.save(t.file_stem, *execute_task(t.to_dict()))
    before = {p.name: p.read_bytes() for p in (tmp_path / "out" / "tasks").iterdir()}
    stray = tmp_path / "out" / "tasks" / f".abc.json.tmp-{dead_pid()}"
    stray.write_text("{half")  # a crashed write
    rep = run_sweep(full, tmp_path / "out", quiet=True)
    assert (rep.skipped, rep.ran, rep.failed) == (5, 13, 0)
    after = {p.name: p.read_bytes() for p in (tmp_path / "out" / "tasks").iterdir()}
    assert all(after[k] == v for k, v in before.items())  # not run again, not rewritten
    assert not any(k.startswith(".") for k in after)  # the stray temporary file is gone
    assert without_timing(read_csv(rep.summary_path)) == without_timing(
        read_csv(reference.summary_path)
    )
    again = run_sweep(full, tmp_path / "out", quiet=True)
    assert (again.skipped, again.ran) == (18, 0)


@pytest.mark.slow
def test_killed_sweep_resumes_to_the_uninterrupted_result(tmp_path):
    """Kill the CLI mid-sweep (SIGKILL), re-run the same command: same summary, no rework."""
    spec = tmp_path / "kill.toml"
    spec.write_text(
        'name = "kill"\nseeds = 4\nsteps = 30000\n'
        '[[agents]]\nname = "epsilon-greedy"\n[[agents]]\nname = "soft-q"\n'
        '[[envs]]\nname = "riverswim"\nparams = { n_states = [4, 6, 8] }\n'
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "optplan.cli", "sweep", str(spec), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tasks_dir = out / "tasks"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if tasks_dir.is_dir() and len(list(tasks_dir.glob("*.json"))) >= 4:
            break
        assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read()}"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = {p.name: p.read_bytes() for p in tasks_dir.glob("*")}
    n_done = sum(name.endswith(".json") for name in finished)
    assert 4 <= n_done < 24, n_done
    assert not (out / "summary.csv").exists()

    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    m = re.search(r"24 tasks: (\d+) already finished, (\d+) run \(0 failed\)", resumed.stdout)
    assert m, resumed.stdout
    assert (int(m[1]), int(m[2])) == (n_done, 24 - n_done)
    for name, data in finished.items():
        if not name.startswith("."):
            assert (tasks_dir / name).read_bytes() == data, f"{name} was rewritten"

    ref = run_sweep(load_sweep(spec), tmp_path / "ref", jobs=2, quiet=True)
    assert without_timing(read_csv(out / "summary.csv")) == without_timing(
        read_csv(ref.summary_path)
    )


@pytest.mark.slow
def test_ray_backend_matches_local(tmp_path):
    pytest.importorskip("ray", reason="the Ray backend needs the optional extra optplan[ray]")
    sweep = load_sweep(SMOKE)
    local = run_sweep(sweep, tmp_path / "local", jobs=2, quiet=True)
    ray_rep = run_sweep(sweep, tmp_path / "ray", backend="ray", jobs=2, quiet=True)
    assert ray_rep.ran == local.ran == len(sweep) and ray_rep.failed == 0
    assert without_timing(read_csv(ray_rep.summary_path)) == without_timing(
        read_csv(local.summary_path)
    )
    assert {json.loads(p.read_text())["pid"] for p in (tmp_path / "ray" / "tasks").glob("*.json")}
    assert main(["results", str(tmp_path / "ray"), "--compare", str(tmp_path / "local")]) == 0


def test_a_different_sweep_is_refused_before_running(tmp_path, capsys):
    run_sweep(sweep_from_dict(small_spec(), source="small.toml"), tmp_path, quiet=True)
    other = sweep_from_dict(small_spec(steps=500), source="other.toml")
    with pytest.raises(StoreMismatch, match=r"(?s)different sweep.*steps: 400 there, 500 here"):
        run_sweep(other, tmp_path, quiet=True)
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(StoreMismatch, match="not empty and holds no sweep.json"):
        run_sweep(other, stray, quiet=True)
    assert (stray / "notes.txt").read_text() == "mine"
    # The CLI reports it as an error (exit 2) before any task runs.
    bad = tmp_path / "other.toml"
    bad.write_text(SMOKE.read_text())
    assert main(["sweep", str(bad), "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "different sweep" in err
    assert max(map(len, err.splitlines()[1:])) <= 110, err  # one short line per difference


def test_a_failing_task_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    """A task that raises (here: seed index 1 asks for an unknown agent) is recorded."""
    spec = small_spec(agents=[{"name": "random"}], seeds=3)
    sweep = sweep_from_dict(spec, source="x.toml")

    import optplan.sweeps.execute as ex

    real = ex.execute_task

    def flaky(task):
        if task["seed_index"] == 1:
            task = {**task, "agent": {**task["agent"], "name": "no-such-agent"}}
        return real(task)

    monkeypatch.setattr(ex, "execute_task", flaky)
    rep = run_sweep(sweep, tmp_path, quiet=True)
    assert (rep.ran, rep.failed) == (9, 3)
    rows = read_csv(rep.summary_path)
    bad = [r for r in rows if r["status"] == "error"]
    assert {r["seed_index"] for r in bad} == {"1"} and len(bad) == 3
    assert all("unknown agent 'no-such-agent'" in r["error"] for r in bad)
    assert all(r["regret"] == "" for r in bad)
    good = [r for r in rows if r["status"] == "ok"]
    assert len(good) == 6 and all(float(r["regret"]) >= 0 for r in good)
    # Failed tasks count as finished unless retried; retrying with the real code fixes them.
    monkeypatch.setattr(ex, "execute_task", real)
    assert run_sweep(sweep, tmp_path, quiet=True).ran == 0
    retry = run_sweep(sweep, tmp_path, quiet=True, retry_failed=True)
    assert (retry.ran, retry.failed) == (3, 0)


def test_cli_run_sweep_results_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code = main(
        [
            "run",
            "--agent",
            "epsilon-greedy",
            "--env",
            "riverswim",
            "--param",
            "epsilon=0.2",
            "--param",
            "n_states=5",
            "--seeds",
            "2",
            "--steps",
            "300",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tasks"]) == 2 and out["tasks"][0]["agent.epsilon"] == 0.2
    assert out["tasks"][0]["env.n_states"] == 5 and out["groups"][0]["tasks"] == 2

    assert main(["run", "--agent", "random", "--env", "riverswim", "--param", "zeta=1"]) == 2
    assert "'zeta': not a parameter" in capsys.readouterr().err
    assert main(["run", "--agent", "nope", "--env", "riverswim", "--steps", "5"]) == 2
    assert "unknown agent 'nope'" in capsys.readouterr().err
    assert main(["run", "--agent", "random", "--env", "riverswim", "--steps", "-5"]) == 2
    assert "steps must be >= 1" in capsys.readouterr().err
    assert main(["run", "--list"]) == 0 and "epsilon-greedy" in capsys.readouterr().out

    res_dir = tmp_path / "smoke"
    assert main(["sweep", str(SMOKE), "--out", str(res_dir), "--jobs", "2", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["results", str(res_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["tasks"]) == len(load_sweep(SMOKE))
    assert main(["results", str(res_dir)]) == 0
    assert "final regret (95% CI)" in capsys.readouterr().out
    for kind, extra in (
        ("regret", ["--logx"]),
        ("scaling", ["--metric", "normalized_regret", "--reference", "2**(x-1)"]),
        ("heatmap", []),
    ):
        png = tmp_path / f"{kind}.png"
        assert main(["plot", str(res_dir), "--kind", kind, "--out", str(png), *extra]) == 0
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a continuing environment has no layers: bars per state, not a one-row image
    from optplan.plots import figures
    from optplan.sweeps import load_results

    fig = figures.heatmap_figure(load_results(res_dir), env="riverswim(n_states=4)")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert shown and all(ax.containers for ax in shown)
    assert not any(ax.images for ax in fig.axes)
    assert (
        main(
            [
                "plot",
                str(res_dir),
                "--kind",
                "scaling",
                "--out",
                "x.png",
                "--reference",
                "__import__('os')",
            ]
        )
        == 2
    )
    assert "unknown name '__import__'" in capsys.readouterr().err


def test_run_sweep_bad_arguments_fail_before_anything_is_written(tmp_path):
    sweep = sweep_from_dict(small_spec(), source="small.toml")
    out = tmp_path / "never"
    with pytest.raises(ValueError, match="backend must be one of"):
        run_sweep(sweep, out, backend="dask")
    with pytest.raises(ValueError, match="jobs must be a positive integer, got 0"):
        run_sweep(sweep, out, jobs=0)
    with pytest.raises(ValueError, match="address applies to the ray backend only"):
        run_sweep(sweep, out, address="auto")
    assert not out.exists()
