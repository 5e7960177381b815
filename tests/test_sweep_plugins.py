"""User agents and environments in parallel sweeps.

A user's module registers an agent and an environment (or exposes factories named by import
path); worker processes (joblib/loky with ``jobs=2``, Ray) must know them. Each test writes
its module under a fresh name into ``tmp_path``, so no worker can have imported it before.
"""

from __future__ import annotations

import itertools
import json
import os
import textwrap
import uuid

import pytest

from optplan.sweeps import SweepError, registry, run_sweep, sweep_from_dict
from optplan.sweeps.execute import worker_payloads

USER_MODULE = """
import gymnasium as gym

from optplan.agents import RandomAgent
from optplan.envs import TabularEnv
from optplan.sweeps.registry import Param, env_shape, register_agent, register_env
from optplan.generators import riverswim


def make_agent(env, criterion, sticky=0):
    _, S, A, mask = env_shape(env)
    return RandomAgent(S, A, action_mask=mask)


def make_env(seed_index, n_states=4):
    return TabularEnv(riverswim(n_states))


def make_lake(seed_index, slippery=True):
    return gym.make("FrozenLake-v1", is_slippery=slippery)


register_env("{name}-frozenlake", make_lake, [Param("slippery", "bool", True, "slippery ice")])
register_agent("{name}-agent", make_agent, [Param("sticky", "int", 0, "unused")])
register_env("{name}-env", make_env, [Param("n_states", "int", 4, "RiverSwim size")])
"""

_counter = itertools.count()


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A fresh importable module ``userlab_<id>`` in ``tmp_path``; its name."""
    name = f"userlab_{uuid.uuid4().hex[:8]}_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE.format(name=name)))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for table in (registry.AGENTS, registry.ENVS):
        for key in [k for k in table if k.startswith(name)]:
            del table[key]


def spec(agent: str, env: str, **over) -> dict:
    out = {
        "name": "plugins",
        "seed": 3,
        "seeds": 2,
        "steps": 50,
        "curves": {"points": 5},
        "agents": [{"name": agent, "label": "user-agent"}],
        "envs": [{"name": env, "label": "user-env", "params": {"n_states": [3, 4]}}],
    }
    out.update(over)
    return out


def records(out) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "tasks").glob("*.json"))]


def check_ran_in_workers(report, out, n_tasks: int) -> None:
    recs = records(out)
    errors = [r["error"] for r in recs if r["status"] != "ok"]
    assert report.failed == 0 and not errors, errors
    assert report.ran == len(recs) == n_tasks
    assert all(r["pid"] != os.getpid() for r in recs)  # really in worker processes


def test_registered_in_a_listed_module_with_jobs_2(user_module, tmp_path):
    sweep = sweep_from_dict(
        spec(f"{user_module}-agent", f"{user_module}-env", imports=[user_module]),
        source="plugins.toml",
    )
    assert sweep.to_dict()["imports"] == [user_module]
    report = run_sweep(sweep, tmp_path / "out", jobs=2, quiet=True)
    check_ran_in_workers(report, tmp_path / "out", 4)


def test_registered_in_an_imported_module_is_recorded_for_the_workers(user_module, tmp_path):
    __import__(user_module)  # the user's script imports it; the sweep does not list it
    sweep = sweep_from_dict(spec(f"{user_module}-agent", f"{user_module}-env"), source="p.toml")
    payload = worker_payloads(sweep, sweep.tasks())[0]
    assert payload["imports"] == [user_module] and str(tmp_path) in payload["sys_path"]
    report = run_sweep(sweep, tmp_path / "out", jobs=2, quiet=True)
    check_ran_in_workers(report, tmp_path / "out", 4)


def test_a_user_registered_gymnasium_frozenlake_with_jobs_2(user_module, tmp_path):
    # The report: "unknown environment 'frozenlake'" in every task with --jobs 2.
    data = spec("epsilon-greedy", f"{user_module}-frozenlake", imports=[user_module])
    data["envs"][0]["params"] = {"slippery": [True, False]}
    report = run_sweep(
        sweep_from_dict(data, source="lake.toml"), tmp_path / "out", jobs=2, quiet=True
    )
    check_ran_in_workers(report, tmp_path / "out", 4)


def test_factories_by_import_path_with_jobs_2(user_module, tmp_path):
    sweep = sweep_from_dict(
        spec(f"{user_module}:make_agent", f"{user_module}:make_env"), source="paths.toml"
    )
    assert sweep.agents[0].name == f"{user_module}:make_agent"
    report = run_sweep(sweep, tmp_path / "out", jobs=2, quiet=True)
    check_ran_in_workers(report, tmp_path / "out", 4)


def test_a_component_from_the_drivers_script_is_shipped(tmp_path):
    from optplan.agents import RandomAgent

    def build(env, criterion):
        _, S, A, mask = registry.env_shape(env)
        return RandomAgent(S, A, action_mask=mask)

    build.__module__ = "__main__"  # as if defined in the user's script: not importable
    name = f"script-agent-{uuid.uuid4().hex[:8]}"
    registry.register_agent(name, build)
    try:
        sweep = sweep_from_dict(spec(name, "riverswim"), source="script.toml")
        assert worker_payloads(sweep, sweep.tasks())[0]["components"][0][1].name == name
        report = run_sweep(sweep, tmp_path / "out", jobs=2, quiet=True)
        check_ran_in_workers(report, tmp_path / "out", 4)
    finally:
        del registry.AGENTS[name]


@pytest.mark.slow
def test_user_components_on_ray(user_module, tmp_path):
    pytest.importorskip("ray", reason="the Ray backend needs the optional extra optplan[ray]")
    sweep = sweep_from_dict(
        {
            **spec(f"{user_module}-agent", f"{user_module}:make_env", imports=[user_module]),
            "agents": [
                {"name": f"{user_module}-agent", "label": "registered"},
                {"name": f"{user_module}:make_agent", "label": "by-path"},
            ],
        },
        source="ray.toml",
    )
    report = run_sweep(sweep, tmp_path / "out", backend="ray", jobs=1, quiet=True)
    check_ran_in_workers(report, tmp_path / "out", 8)


def test_bad_import_paths_name_the_file_and_key(user_module):
    with pytest.raises(
        SweepError,
        match=r"bad.toml: agents\[0\].name: import path "
        r"'no_such_mod_xyz:make'.*cannot import 'no_such_mod_xyz'",
    ):
        sweep_from_dict(spec("no_such_mod_xyz:make", "riverswim"), source="bad.toml")
    with pytest.raises(SweepError, match=r"bad.toml: envs\[0\].name: .*has no 'nothing'"):
        sweep_from_dict(spec("random", f"{user_module}:nothing"), source="bad.toml")
    with pytest.raises(SweepError, match=r"bad.toml: imports\[1\]: cannot import 'nope_mod_q'"):
        sweep_from_dict(
            spec("random", "riverswim", imports=["json", "nope_mod_q"]), source="bad.toml"
        )
    with pytest.raises(SweepError, match=r"agents\[0\].params: unknown parameter 'eps'.*sticky"):
        sweep_from_dict(
            {
                **spec(f"{user_module}:make_agent", "riverswim"),
                "agents": [{"name": f"{user_module}:make_agent", "params": {"eps": 1}}],
            },
            source="bad.toml",
        )


def test_cli_sweep_file_with_imports_and_import_paths_jobs_2(user_module, tmp_path):
    from optplan.cli import main

    path = tmp_path / "mine.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "mine"
            seeds = 2
            steps = 40
            imports = ["{user_module}"]

            [[agents]]
            name = "{user_module}-agent"

            [[agents]]
            name = "{user_module}:make_agent"
            label = "by-path"

            [[envs]]
            name = "{user_module}:make_env"
            params = {{ n_states = 5 }}
            """
        )
    )
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--jobs", "2", "--quiet"]) == 0
    recs = records(tmp_path / "out")
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text().replace(f"{user_module}:make_agent", f"{user_module}:nope"))
    assert main(["sweep", str(bad), "--out", str(tmp_path / "bad"), "--quiet"]) != 0


DYING_MODULE = """
import os
from pathlib import Path

from optplan.agents import make_agent as _make

MARK = Path({mark!r})
DRIVER = {driver}  # the test's process, which builds the agent once to check the sweep


def make_agent(env, criterion):
    if os.getpid() != DRIVER and not MARK.exists():  # a worker's first attempt: it dies
        MARK.write_text("died once")
        os._exit(1)
    return _make("random", env)
"""


def test_ray_retries_a_task_whose_worker_died(tmp_path, monkeypatch):
    """A worker that dies (a system failure: a killed process, a lost node) has its task run
    again; the sweep ends with every task ok."""
    pytest.importorskip("ray", reason="the Ray backend needs the optional extra optplan[ray]")
    name = f"dying_{uuid.uuid4().hex[:8]}"
    module = DYING_MODULE.format(mark=str(tmp_path / "mark"), driver=os.getpid())
    (tmp_path / f"{name}.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    sweep = sweep_from_dict(
        {**spec(f"{name}:make_agent", "riverswim"), "seeds": 1,
         "envs": [{"name": "riverswim", "params": {"n_states": 3}}]},
        source="dying.toml",
    )  # fmt: skip
    report = run_sweep(sweep, tmp_path / "out", backend="ray", jobs=1, quiet=True)
    assert (tmp_path / "mark").exists()  # the first attempt did die
    assert (report.ran, report.failed) == (1, 0)
    assert [r["status"] for r in records(tmp_path / "out")] == ["ok"]
