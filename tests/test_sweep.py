"""Sweep files: grid expansion, deterministic task seeds, and errors naming file and key."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from optplan.generators import random_dirichlet
from optplan.modelfile import save_model
from optplan.sweeps import SweepError, load_sweep, sweep_from_dict
from optplan.sweeps.registry import AGENTS

ROOT = Path(__file__).parents[1]


def spec(**overrides) -> dict:
    """A small valid sweep: 2 agent configurations x 3 environment configurations x 3 seeds."""
    data = {
        "name": "t",
        "seed": 7,
        "seeds": 3,
        "steps": 50,
        "agents": [
            {"name": "random"},
            {"name": "epsilon-greedy", "label": "eps", "params": {"epsilon": [0.05, 0.2]}},
        ],
        "envs": [
            {
                "name": "riverswim",
                "params": {"n_states": {"start": 3, "stop": 5}, "reward_noise": 0.1},
            },
        ],
    }
    data.update(overrides)
    return data


def check_error(data, *keys, source="x.toml"):
    """``sweep_from_dict`` raises a SweepError naming the file and every one of ``keys``."""
    with pytest.raises(SweepError) as info:
        sweep_from_dict(data, source=source)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "x.toml" in msg, msg
    for key in keys:
        assert key in msg, (key, msg)
    return msg


# --- valid specifications ----------------------------------------------------------------------


def test_grids_expand():
    sweep = sweep_from_dict(spec(), source="x.toml")
    assert [a.label for a in sweep.agents] == ["random", "eps(epsilon=0.05)", "eps(epsilon=0.2)"]
    assert [a.params["epsilon"] for a in sweep.agents[1:]] == [0.05, 0.2]
    assert sweep.agents[1].params["discount"] == 0.99  # defaults filled in
    assert [e.label for e in sweep.envs] == [
        "riverswim(n_states=3)",
        "riverswim(n_states=4)",
        "riverswim(n_states=5)",
    ]
    # reward_noise is given but does not vary: no suffix for it.
    assert all(e.params["reward_noise"] == 0.1 for e in sweep.envs)
    assert sweep.seeds == (0, 1, 2) and sweep.steps == 50 and sweep.episodes is None
    assert len(sweep) == 3 * 3 * 3 == len(sweep.tasks())
    assert sweep.curve_points == 100 and sweep.curve_scale == "log"


def test_range_step_and_two_varying_params():
    data = spec(
        agents=[
            {
                "name": "soft-q",
                "params": {"temperature": [0.05, 0.5], "q_init": 1.0, "discount": [0.9, 0.99]},
            }
        ],
        envs=[{"name": "riverswim", "params": {"n_states": {"start": 4, "stop": 9, "step": 2}}}],
        seeds=[0, 3, 7],
    )
    sweep = sweep_from_dict(data, source="x.toml")
    assert [e.params["n_states"] for e in sweep.envs] == [4, 6, 8]  # 9 is not on the grid
    assert [a.label for a in sweep.agents] == [
        "soft-q(temperature=0.05, discount=0.9)",
        "soft-q(temperature=0.05, discount=0.99)",
        "soft-q(temperature=0.5, discount=0.9)",
        "soft-q(temperature=0.5, discount=0.99)",
    ]
    assert all(a.params["q_init"] == 1.0 for a in sweep.agents)
    assert sweep.seeds == (0, 3, 7)
    assert len(sweep) == 4 * 3 * 3
    assert {t.seed_index for t in sweep.tasks()} == {0, 3, 7}
    # A range whose stop equals its start is one value; a one-element list adds no suffix.
    one = sweep_from_dict(
        spec(envs=[{"name": "riverswim", "params": {"n_states": {"start": 4, "stop": 4}}}]),
        source="x.toml",
    )
    assert [e.label for e in one.envs] == ["riverswim"]


def test_tasks_ids_and_seeds():
    sweep = sweep_from_dict(spec(), source="x.toml")
    tasks = sweep.tasks()
    ids = [t.task_id for t in tasks]
    assert len(set(ids)) == len(ids) == len(sweep)
    assert [t.index for t in tasks] == list(range(len(tasks)))
    assert len({t.file_stem for t in tasks}) == len(tasks)
    seeds = [t.seed for t in tasks]
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2**63 for s in seeds)
    # Deterministic: the same specification gives the same seeds.
    again = sweep_from_dict(spec(), source="x.toml").tasks()
    assert [t.seed for t in again] == seeds and [t.task_id for t in again] == ids
    # A task's seed depends on its id and the sweep seed, not on which other tasks exist.
    fewer = sweep_from_dict(spec(seeds=[2]), source="x.toml").tasks()
    by_id = dict(zip(ids, seeds, strict=True))
    assert all(by_id[t.task_id] == t.seed for t in fewer)
    other = sweep_from_dict(spec(seed=8), source="x.toml").tasks()
    assert not set(t.seed for t in other) & set(seeds)
    # Every task carries the horizon and curve settings.
    assert all(t.steps == 50 and t.episodes is None and t.curve_points == 100 for t in tasks)


def test_fingerprint():
    a = sweep_from_dict(spec(), source="x.toml")
    b = sweep_from_dict(copy.deepcopy(spec()), source="y.toml")
    assert a.fingerprint() == b.fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", a.fingerprint())
    assert sweep_from_dict(spec(steps=51), source="x.toml").fingerprint() != a.fingerprint()
    assert sweep_from_dict(spec(seeds=4), source="x.toml").fingerprint() != a.fingerprint()
    # Defaults written out change nothing.
    explicit = spec(curves={"points": 100, "scale": "log"}, stop_when_solved=False)
    assert sweep_from_dict(explicit, source="x.toml").fingerprint() == a.fingerprint()


def test_episodes_horizon_and_criterion():
    data = spec(
        episodes=5,
        stop_when_solved=True,
        envs=[{"name": "riverswim-episodic", "params": {"n_states": 3, "horizon": [4, 6]}}],
    )
    del data["steps"]
    sweep = sweep_from_dict(data, source="x.toml")
    assert sweep.episodes == 5 and sweep.steps is None and sweep.stop_when_solved
    assert [e.params["horizon"] for e in sweep.envs] == [4, 6]
    data = spec(
        envs=[{"name": "random-dirichlet", "criterion": "average", "params": {"n_states": 4}}]
    )
    sweep = sweep_from_dict(data, source="x.toml")
    assert {t.criterion for t in sweep.tasks()} == {"average"}


def test_criterion_discounted_on_a_discounted_model_file(tmp_path):
    discounted = save_model(random_dirichlet(4, 2, seed=0, discount=0.9), tmp_path / "d.toml")
    plain = save_model(random_dirichlet(4, 2, seed=0), tmp_path / "p.toml")
    env = {"name": "model", "criterion": "discounted", "params": {"path": str(discounted)}}
    sweep = sweep_from_dict(spec(envs=[env]), source="x.toml")
    assert {t.criterion for t in sweep.tasks()} == {"discounted"}
    env["params"]["path"] = str(plain)
    check_error(spec(envs=[env]), "'model'", "criterion 'discounted'", "discount")
    # A horizon makes the model file episodic: episodes are fine, a criterion is not.
    episodic = {"name": "model", "params": {"path": str(plain), "horizon": 5}}
    data = {**_without_horizon(), "episodes": 2, "envs": [episodic]}
    assert sweep_from_dict(data, source="x.toml").episodes == 2
    check_error(spec(envs=[{**episodic, "criterion": "average"}]), "episodic", "criterion")


def test_load_sweep_from_file(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(
        'seeds = [1, 4]\nsteps = 20\n[curves]\npoints = 10\nscale = "linear"\n'
        '[[agents]]\nname = "random"\n[[agents]]\nname = "oracle"\n'
        '[[envs]]\nname = "riverswim"\nparams = { n_states = [3, 4] }\n'
    )
    sweep = load_sweep(path)
    assert sweep.name == "grid"  # the file's stem when no name is given
    assert sweep.source == str(path)
    assert len(sweep) == 2 * 2 * 2
    assert (sweep.curve_points, sweep.curve_scale) == (10, "linear")


# --- invalid specifications ----------------------------------------------------------------


def _without_horizon():
    data = spec()
    del data["steps"]
    return data


BAD = {
    "unknown top-level key": (spec(stepz=10), ["stepz"]),
    "unknown env name": (spec(envs=[{"name": "nope"}]), ["envs[0].name", "nope"]),
    "unknown agent key": (spec(agents=[{"name": "random", "eps": 1}]), ["agents[0]", "eps"]),
    "unknown param name": (
        spec(agents=[{"name": "random", "params": {"foo": 1}}]),
        ["agents[0].params", "foo"],
    ),
    "unknown env param": (
        spec(envs=[{"name": "riverswim", "params": {"horizon": 5}}]),
        ["envs[0].params", "horizon"],
    ),
    "wrong type": (
        spec(agents=[{"name": "epsilon-greedy", "params": {"epsilon": "a"}}]),
        ["agents[0].params", "epsilon", "'a'"],
    ),
    "bool for int": (
        spec(envs=[{"name": "riverswim", "params": {"n_states": True}}]),
        ["envs[0].params", "n_states", "True"],
    ),
    "float for int": (
        spec(envs=[{"name": "riverswim", "params": {"n_states": 4.0}}]),
        ["envs[0].params", "n_states"],
    ),
    "out of range (built)": (
        spec(agents=[{"name": "epsilon-greedy", "params": {"epsilon": 2.0}}]),
        ["epsilon-greedy", "epsilon", "2.0"],
    ),
    "env out of range (built)": (
        spec(envs=[{"name": "riverswim", "params": {"n_states": 1}}]),
        ["riverswim", "n_states"],
    ),
    "negative steps": (spec(steps=-5), ["steps", "-5"]),
    "zero steps": (spec(steps=0), ["steps"]),
    "float steps": (spec(steps=10.0), ["steps"]),
    "steps and episodes": (spec(episodes=3), ["steps", "episodes"]),
    "neither steps nor episodes": (_without_horizon(), ["steps", "episodes"]),
    "negative seed": (spec(seed=-1), ["seed", "-1"]),
    "zero seeds": (spec(seeds=0), ["seeds"]),
    "negative seeds list entry": (spec(seeds=[0, -2]), ["seeds[1]"]),
    "duplicate seeds": (spec(seeds=[1, 2, 1]), ["seeds", "distinct"]),
    "empty seeds": (spec(seeds=[]), ["seeds"]),
    "empty param list": (
        spec(agents=[{"name": "epsilon-greedy", "params": {"epsilon": []}}]),
        ["agents[0].params.epsilon", "empty"],
    ),
    "range stop below start": (
        spec(envs=[{"name": "riverswim", "params": {"n_states": {"start": 6, "stop": 4}}}]),
        ["envs[0].params.n_states", "stop"],
    ),
    "range zero step": (
        spec(
            envs=[{"name": "riverswim", "params": {"n_states": {"start": 3, "stop": 4, "step": 0}}}]
        ),
        ["envs[0].params.n_states.step"],
    ),
    "range bad key": (
        spec(envs=[{"name": "riverswim", "params": {"n_states": {"start": 3, "end": 4}}}]),
        ["envs[0].params.n_states", "start, stop"],
    ),
    "no agents": (spec(agents=[]), ["agents"]),
    "no envs": (spec(envs=None), ["envs"]),
    "stop_when_solved not bool": (spec(stop_when_solved=1), ["stop_when_solved"]),
    "curves scale": (spec(curves={"scale": "cubic"}), ["curves.scale", "cubic"]),
    "curves points": (spec(curves={"points": 1}), ["curves.points"]),
    "curves key": (spec(curves={"size": 3}), ["[curves]", "size"]),
    "label not a string": (spec(agents=[{"name": "random", "label": 3}]), ["agents[0].label"]),
    "duplicate labels": (
        spec(agents=[{"name": "random"}, {"name": "random"}]),
        ["agents", "label", "'random'", "twice"],
    ),
    "duplicate labels across names": (
        spec(agents=[{"name": "random", "label": "a"}, {"name": "oracle", "label": "a"}]),
        ["agents", "'a'", "twice"],
    ),
    "episodes with a continuing env": (
        {**_without_horizon(), "episodes": 3},
        ["riverswim", "continuing", "episodes"],
    ),
    "criterion on an episodic env": (
        spec(envs=[{"name": "riverswim-episodic", "criterion": "average"}]),
        ["riverswim-episodic", "episodic", "criterion", "'average'"],
    ),
    "criterion finite_horizon": (
        spec(envs=[{"name": "riverswim", "criterion": "finite_horizon"}]),
        ["envs[0].criterion", "finite_horizon"],
    ),
    "discounted without discount": (
        spec(envs=[{"name": "riverswim", "criterion": "discounted"}]),
        ["riverswim", "criterion 'discounted'", "discount"],
    ),
    "model file missing": (
        spec(envs=[{"name": "model", "params": {"path": "/nonexistent/m.toml"}}]),
        ["model", "m.toml"],
    ),
    "not a table": ([1, 2], ["table"]),
}


@pytest.mark.parametrize("data, keys", list(BAD.values()), ids=list(BAD))
def test_bad_specs(data, keys):
    check_error(data, *keys)


def test_unknown_agent_lists_known_ones():
    msg = check_error(spec(agents=[{"name": "ucrl9"}]), "agents[0].name", "ucrl9")
    for name in AGENTS:
        assert name in msg
    assert {"random", "oracle", "epsilon-greedy", "soft-q"} <= set(AGENTS)


def test_validate_false_skips_building():
    data = spec(agents=[{"name": "epsilon-greedy", "params": {"epsilon": 2.0}}])
    sweep = sweep_from_dict(data, source="x.toml", validate=False)
    assert sweep.agents[0].params["epsilon"] == 2.0


def test_load_sweep_errors(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text("steps = = 3\n")
    with pytest.raises(SweepError, match=r"x\.toml: not valid TOML"):
        load_sweep(bad)
    missing = tmp_path / "sub" / "x.toml"
    with pytest.raises(SweepError, match=r"cannot read sweep file .*x\.toml"):
        load_sweep(missing)
    bad.write_text('steps = 10\nepsilon = 0.1\n[[agents]]\nname = "random"\n')
    with pytest.raises(SweepError, match=r"x\.toml: unknown key 'epsilon'"):
        load_sweep(bad)
    bad.write_text(
        'steps = 10\n[[agents]]\nname = "epsilon-greedy"\nparams = { epsilon = 2.0 }\n'
        '[[envs]]\nname = "riverswim"\n'
    )
    with pytest.raises(SweepError, match=r"x\.toml: .*epsilon") as info:
        load_sweep(bad)
    assert "epsilon must lie in [0, 1], got 2.0" in str(info.value)
    assert load_sweep(bad, validate=False).agents[0].params["epsilon"] == 2.0


# --- labels and messages ------------------------------------------------------------------------


def test_param_error_names_the_file_once():
    msg = check_error(spec(agents=[{"name": "random", "params": {"foo": 1}}]), "foo")
    assert msg.count("x.toml") == 1, msg


def test_close_float_values_get_distinct_labels():
    data = spec(agents=[{"name": "epsilon-greedy", "params": {"epsilon": [0.1, 0.1000001]}}])
    sweep = sweep_from_dict(data, source="x.toml")
    assert len({a.label for a in sweep.agents}) == 2


def test_labels_cannot_hold_task_id_separators():
    """Task ids join labels with ' @ ' and ' # ': a label holding them could collide."""
    data = spec(
        agents=[{"name": "random", "label": "a @ b"}, {"name": "random", "label": "a"}],
        envs=[{"name": "riverswim", "label": "c"}, {"name": "riverswim", "label": "b @ c"}],
    )
    with pytest.raises(SweepError, match=r"x\.toml: agents\[0\]\.label .*without '@' or '#'"):
        sweep_from_dict(data, source="x.toml")


# --- the shipped sweep -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", sorted((ROOT / "models" / "sweeps").glob("*.toml")), ids=lambda p: p.stem
)
def test_every_shipped_sweep_loads(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # model and count files are named relative to the repository root
    sweep = load_sweep(path)
    assert sweep.name == path.stem
    assert len(sweep.tasks()) == len(sweep.agents) * len(sweep.envs) * len(sweep.seeds)


def test_k_learning_fig2_sweep_is_the_papers_setup():
    sweep = load_sweep(ROOT / "models" / "sweeps" / "k-learning-fig2.toml")
    assert sweep.stop_when_solved and len(sweep.seeds) == 5
    agents = {(a.name, a.params.get("temperature")) for a in sweep.agents}
    assert agents == {
        ("epsilon-greedy", None),
        ("soft-q", 0.05),
        ("psrl", None),
        ("k-learning", "schedule"),
        ("k-learning", "optimal"),
    }
    assert [e.params["size"] for e in sweep.envs][-1] == 50


def test_smoke_sweep_loads():
    sweep = load_sweep(ROOT / "models" / "sweeps" / "smoke.toml")
    assert sweep.name == "smoke"
    assert len(sweep.agents) >= 3 and len(sweep.envs) >= 2 and len(sweep.seeds) >= 5
    tasks = sweep.tasks()
    assert len(tasks) == len(sweep) == len(sweep.agents) * len(sweep.envs) * len(sweep.seeds)
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert load_sweep(ROOT / "models" / "sweeps" / "smoke.toml").fingerprint() == (
        sweep.fingerprint()
    )
