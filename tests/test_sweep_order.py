"""Dispatch order of a sweep: longest expected task first, results unchanged by the order."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import optplan.sweeps.execute as ex
import optplan.sweeps.order as order_mod
from optplan.cli import main
from optplan.envs.registry import riverswim
from optplan.sweeps import load_results, registry, run_sweep, sweep_from_dict
from optplan.sweeps.order import dispatch_order, task_costs


def spec(**over) -> dict:
    """Grid order puts the smaller environment first; two agents x two seeds per env."""
    out = {
        "name": "order",
        "seed": 3,
        "seeds": 2,
        "steps": 300,
        "curves": {"points": 10},
        "agents": [{"name": "random"}, {"name": "epsilon-greedy", "params": {"epsilon": 0.2}}],
        "envs": [{"name": "riverswim", "params": {"n_states": [3, 6]}}],
    }
    out.update(over)
    return out


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_costs_follow_the_model_size_and_the_run_length():
    continuing = sweep_from_dict(spec(), source="o.toml").tasks()
    # RiverSwim-n: n states x 2 actions, times 300 steps.
    assert task_costs(continuing) == [3 * 2 * 300] * 4 + [6 * 2 * 300] * 4
    data = spec(envs=[{"name": "riverswim-episodic", "params": {"n_states": 4, "horizon": 5}}])
    del data["steps"]
    episodic = sweep_from_dict({**data, "episodes": 7}, source="o.toml").tasks()
    # 4 states x 2 actions x 5 layers, times 7 episodes x 5 steps.
    assert set(task_costs(episodic)) == {4 * 2 * 5 * 7 * 5}


def test_bigger_environments_are_dispatched_first_and_ties_keep_grid_order():
    tasks = sweep_from_dict(spec(), source="o.toml").tasks()
    assert [t.env.params["n_states"] for t in tasks] == [3] * 4 + [6] * 4  # grid: small first
    got = dispatch_order(tasks)
    assert [t.index for t in got] == [4, 5, 6, 7, 0, 1, 2, 3]
    # Three sizes, grid order 5, 3, 8: the ties (agent x seed within a size) stay in order.
    tasks = sweep_from_dict(
        spec(envs=[{"name": "riverswim", "params": {"n_states": [5, 3, 8]}}]), source="o.toml"
    ).tasks()
    assert [t.index for t in dispatch_order(tasks)] == [8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7]


@pytest.fixture
def user_envs(monkeypatch):
    """Two user environments: one whose size depends on the seed index, one that cannot be
    built while ``state["broken"]`` is set (e.g. a resource only the workers have)."""
    state = {"broken": False, "builds": []}

    def by_seed(seed_index, n_states=3):
        state["builds"].append(("by-seed", n_states, seed_index))
        return riverswim(n_states + 2 * seed_index)

    def fragile(seed_index, n_states=3):
        state["builds"].append(("fragile", n_states, seed_index))
        if state["broken"]:
            raise RuntimeError("no such resource here")
        return riverswim(n_states)

    for name, build in (("order-by-seed", by_seed), ("order-fragile", fragile)):
        comp = registry.Component(
            name, build, (registry.Param("n_states", "int", 3, "states"),), "", episodic=False
        )
        monkeypatch.setitem(registry.ENVS, name, comp)
    return state


def test_a_user_environment_is_sized_per_seed_index_once_per_configuration(user_envs):
    tasks = sweep_from_dict(
        spec(seeds=3, envs=[{"name": "order-by-seed", "params": {"n_states": 4}}]),
        source="o.toml",
    ).tasks()
    user_envs["builds"].clear()
    costs = task_costs(tasks)
    # Built once per seed index (not once per task: two agents share each).
    assert sorted(user_envs["builds"]) == [("by-seed", 4, s) for s in range(3)]
    assert costs == [(4 + 2 * t.seed_index) * 2 * 300 for t in tasks]
    # Seed index 2 (the largest model) first, agents in grid order within it.
    got = [(t.seed_index, t.agent.name) for t in dispatch_order(tasks)]
    assert got[:2] == [(2, "random"), (2, "epsilon-greedy")] and got[-2:] == [
        (0, "random"),
        (0, "epsilon-greedy"),
    ]


def test_an_environment_that_fails_to_build_in_the_driver_does_not_stop_the_sweep(
    user_envs, tmp_path
):
    data = spec(
        envs=[
            {"name": "riverswim", "params": {"n_states": 3}},
            {"name": "order-fragile", "params": {"n_states": [4, 5]}},
            {"name": "riverswim", "label": "big", "params": {"n_states": 9}},
        ]
    )
    sweep = sweep_from_dict(data, source="o.toml")  # builds fine while loading
    tasks = sweep.tasks()
    user_envs["broken"] = True
    costs = task_costs(tasks)
    assert [c is None for c in costs] == [False] * 4 + [True] * 8 + [False] * 4
    # Unknown cost first, in grid order among themselves; then the known ones, longest first.
    assert [t.index for t in dispatch_order(tasks)] == [*range(4, 12), *range(12, 16), 0, 1, 2, 3]
    # The sweep runs; the fragile environment's tasks fail in the worker too and are recorded.
    rep = run_sweep(sweep, tmp_path, jobs=1, quiet=True)
    assert (rep.ran, rep.failed) == (16, 8)
    rows = read_rows(rep.summary_path)
    assert [r["status"] for r in rows] == ["ok"] * 4 + ["error"] * 8 + ["ok"] * 4
    assert all("no such resource here" in r["error"] for r in rows[4:12])


def run_recording(monkeypatch, sweep, out, grid_order=False, **kwargs):
    """Run ``sweep``, recording the task indices in the order tasks start."""
    started = []
    real = ex.execute_task

    def recording(task):
        started.append(task["index"])
        return real(task)

    monkeypatch.setattr(ex, "execute_task", recording)
    if grid_order:
        monkeypatch.setattr(ex, "dispatch_order", list)
    try:
        rep = run_sweep(sweep, out, quiet=True, **kwargs)
    finally:
        monkeypatch.setattr(ex, "execute_task", real)
        monkeypatch.setattr(ex, "dispatch_order", order_mod.dispatch_order)
    return rep, started


def test_results_are_those_of_a_grid_order_run(tmp_path, monkeypatch, capsys):
    data = spec(
        envs=[
            {"name": "riverswim", "params": {"n_states": [3, 6]}},
            {"name": "riverswim-episodic", "params": {"n_states": 4, "horizon": 6}},
        ]
    )
    sweep = sweep_from_dict(data, source="o.toml")
    grid, grid_started = run_recording(monkeypatch, sweep, tmp_path / "grid", grid_order=True)
    lpt, lpt_started = run_recording(monkeypatch, sweep, tmp_path / "lpt")
    assert grid_started == list(range(12))
    assert lpt_started == [t.index for t in dispatch_order(sweep.tasks())] != grid_started
    assert lpt_started[:4] == [8, 9, 10, 11]  # the episodic env: 4 x 2 x 6 pairs x 300 steps
    # The summary is ordered by task index, whatever the order tasks ran in.
    rows_grid, rows_lpt = read_rows(grid.summary_path), read_rows(lpt.summary_path)
    assert [r["index"] for r in rows_lpt] == [str(i) for i in range(12)]
    for a, b in zip(rows_grid, rows_lpt, strict=True):
        a.pop("wall_time"), b.pop("wall_time")
        assert a == b
    assert load_results(tmp_path / "lpt").compare(load_results(tmp_path / "grid")) == []
    assert main(["results", str(tmp_path / "lpt"), "--compare", str(tmp_path / "grid")]) == 0
    capsys.readouterr()
    ca, cb = np.load(grid.curves_path), np.load(lpt.curves_path)
    assert sorted(ca.files) == sorted(cb.files)
    for key in ca.files:
        np.testing.assert_array_equal(ca[key], cb[key])


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_both_backends_receive_the_tasks_longest_first(tmp_path, monkeypatch, backend):
    """``_run_pending`` hands each backend its payloads in dispatch order (each submits them in
    the order given); only the pending tasks of a resumed sweep are ordered."""
    sweep = sweep_from_dict(spec(), source="o.toml")
    received = []

    def fake(payloads, jobs, address=None):
        received.append([p["index"] for p in payloads])
        for p in payloads:
            yield ex.execute_task(p)

    monkeypatch.setattr(ex, "_local" if backend == "local" else "_ray", fake)
    if backend == "ray":  # the backend itself is faked: no Ray needed to check the order
        import importlib.util

        real = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda n, *a: object() if n == "ray" else real(n, *a)
        )
    run_sweep(sweep, tmp_path, backend=backend, jobs=2, quiet=True)
    assert received == [[4, 5, 6, 7, 0, 1, 2, 3]]
    # Resume after losing two records: the pending ones only, still longest first.
    for rec in load_results(tmp_path).records:
        if rec["index"] in (1, 6):
            stem = sweep.tasks()[rec["index"]].file_stem
            for f in (tmp_path / "tasks").glob(f"{stem}.*"):
                f.unlink()
    run_sweep(sweep, tmp_path, backend=backend, jobs=2, quiet=True)
    assert received[1] == [6, 1]
