"""RAVI-UCB's experiments: the sweep files are the paper's settings, every
RAVI agent's horizon is the run's T, PSRL plans at the environment's gamma, the tuned constants
are the sensitivity grids' cells, and the example's growth exponent is a log-log slope."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from optplan.sweeps import load_sweep

ROOT = Path(__file__).parents[1]
SWEEPS = ROOT / "models" / "sweeps"


def example():
    spec = importlib.util.spec_from_file_location(
        "ravi_ucb_experiments", ROOT / "examples" / "ravi_ucb_experiments.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ravi_ucb_experiments"] = mod  # sweeps import a user environment's module
    spec.loader.exec_module(mod)
    return mod


MAIN = {
    "ravi-tabular-gamma09": (
        0.9,
        {"riverswim-resets": {"n_states": 6}, "random-dirichlet-resets": {"n_states": 10}},
    ),
    "ravi-tabular-gamma099": (
        0.99,
        {"riverswim-resets": {"n_states": 6}, "random-dirichlet-resets": {"n_states": 10}},
    ),
    "ravi-linear": (0.9, {"linear-mixture": {"n_states": 20}}),
}


@pytest.mark.parametrize("name", list(MAIN))
def test_comparison_sweeps_are_the_issues_settings(name):
    gamma, envs = MAIN[name]
    sweep = load_sweep(SWEEPS / f"{name}.toml")
    assert sweep.steps == 10**5 and sweep.seeds == tuple(range(20))
    for e in sweep.envs:
        assert e.params["discount"] == gamma and e.criterion is None
        assert {k: e.params[k] for k in envs[e.name]} == envs[e.name]
        if e.name != "riverswim-resets":
            assert e.params["model_seed"] == 0  # one model: seeds vary the agent only
    if name == "ravi-linear":
        assert sorted(e.params["d"] for e in sweep.envs) == [2, 4, 8]
    names = {a.name for a in sweep.agents}
    assert {"ucrl2-discounted", "psrl-continuing", "epsilon-greedy"} <= names
    assert "ravi-ucb" in names and (name != "ravi-linear" or "ravi-ucb-linear" in names)
    for a in sweep.agents:
        if a.name.startswith("ravi-ucb"):
            assert a.params["horizon"] == sweep.steps  # the T of the paper's eta and beta
        if a.name == "psrl-continuing":
            assert a.params["discount"] == gamma
            assert a.params["update_every"] == round(1 / (1 - gamma))
        if a.name == "epsilon-greedy":
            assert a.params["discount"] == 1.0 and a.params["epsilon"] == 0.1
    paper = [a for a in sweep.agents if a.label.endswith("(paper)")]
    assert paper and all(a.params["beta_scale"] == a.params["eta_scale"] == 1.0 for a in paper)


def test_tuned_constants_are_cells_of_the_sensitivity_grids():
    grids = {}
    for kind in ("tabular", "linear"):
        sweep = load_sweep(SWEEPS / f"ravi-sensitivity-{kind}.toml")
        assert sweep.steps == 10**4 and len(sweep.seeds) == 5
        assert all(a.params["horizon"] == sweep.steps for a in sweep.agents)
        grids[kind] = {(a.params["beta_scale"], a.params["eta_scale"]) for a in sweep.agents}
        assert (1.0, 1.0) in grids[kind]  # the paper's constants
    for name in MAIN:
        for a in load_sweep(SWEEPS / f"{name}.toml").agents:
            if a.label.endswith("(tuned)"):
                kind = "linear" if a.name == "ravi-ucb-linear" else "tabular"
                assert (a.params["beta_scale"], a.params["eta_scale"]) in grids[kind]


def test_growth_exponent_is_the_log_log_slope():
    ex = example()
    t = np.geomspace(1, 1e5, 80)
    assert ex.slope(t, 3.0 * t**0.5) == pytest.approx(0.5, abs=1e-12)
    assert ex.slope(t, 7.0 * t) == pytest.approx(1.0, abs=1e-12)
    y = 3.0 * t**0.5
    y[t < 2e3] = 0.0  # still 0 at t = 10^3: no exponent
    assert math.isnan(ex.slope(t, y))
    # the mean curve's exponent with its bootstrap interval over seeds
    Y = np.vstack([3.0 * t**0.5, 5.0 * t**0.5, 4.0 * t**0.5])
    assert ex.exponent_cell(t, Y) == "0.50 [0.50, 0.50]"
    assert ex.exponent_cell(t, np.zeros((3, t.size))) == "-"


def test_best_shared_cell_normalizes_by_the_paper_constants():
    ex = example()
    bs, es = [0.1, 1.0], [1.0, 10.0]
    a = (bs, es, np.array([[100.0, 10.0], [100.0, 100.0]]), 5)  # best (0.1, 10): 0.1 of paper
    b = (bs, es, np.array([[1000.0, 900.0], [1000.0, 1000.0]]), 5)  # best (0.1, 10) too
    assert ex.best_shared({"a": a, "b": b}) == (0.1, 10.0)
    c = (bs, es, np.array([[10.0, 1000.0], [1000.0, 1000.0]]), 5)  # (0.1, 1): 0.01 of paper
    assert ex.best_shared({"a": a, "c": c}) == (0.1, 1.0)


# --- the fair comparison -----------------------------------------------------------------------


def test_fair_protocol_tunes_one_knob_per_baseline_on_held_out_models():
    ex = example()
    assert not set(ex.TUNE_MODELS) & set(range(ex.EVAL_SEEDS))  # seed i plays model i
    assert ex.TUNE_SEED != ex.EVAL_SEED  # fresh agent seeds
    assert ex.T_TUNE <= ex.T_EVAL
    knobs = {agent: tuple(grid) for agent, (_, _, grid) in ex.GRIDS.items()}
    assert knobs.pop("RAVI-UCB") == ("beta_scale", "eta_scale")
    assert knobs == {
        "UCRL2 (discounted)": ("delta",),
        "PSRL": ("transition_prior",),
        "eps-greedy": ("epsilon",),
    }
    for setting in ex.SETTINGS:
        sweep = ex.tune_sweep(setting)
        assert {e.params["model_seed"] for e in sweep.envs} == set(ex.TUNE_MODELS)
        assert sweep.steps == ex.T_TUNE and sweep.seed == ex.TUNE_SEED
        cells = sum(len(ex.cells(g)) for _, _, g in ex.GRIDS.values())
        assert len(sweep.agents) == cells
        # RAVI-UCB's constants are the same absolute numbers in tuning and evaluation
        assert all(a.params["horizon"] == ex.T_EVAL for a in sweep.agents if a.name == "ravi-ucb")


def test_fair_protocol_end_to_end_on_a_tiny_grid(tmp_path, monkeypatch):
    """``tune`` writes each agent's lowest-mean cell; ``eval_sweep`` runs exactly those
    constants on the evaluation models (model seed = seed index, never a tuning model)."""
    ex = example()
    monkeypatch.setattr(ex, "FAIR", tmp_path)
    monkeypatch.setattr(ex, "TUNED", tmp_path / "tuned.json")
    monkeypatch.setattr(ex, "T_TUNE", 300)
    monkeypatch.setattr(ex, "TUNE_MODELS", (1000, 1001))
    monkeypatch.setattr(ex, "SETTINGS", {"goal-dirichlet-20": ex.SETTINGS["goal-dirichlet-20"]})
    monkeypatch.setattr(
        ex,
        "GRIDS",
        {
            "RAVI-UCB": (
                "ravi-ucb",
                {"horizon": 300},
                {"beta_scale": [1e-4], "eta_scale": [1.0, 1e4]},
            ),
            "eps-greedy": ("epsilon-greedy", {"discount": 1.0}, {"epsilon": [0.01, 0.3]}),
        },
    )
    tuned = ex.tune(jobs=1)["goal-dirichlet-20"]
    stored = json.loads((tmp_path / "tuned.json").read_text())
    assert stored["tuned"]["goal-dirichlet-20"] == tuned
    assert stored["protocol"]["tune_models"] == [1000, 1001]
    for t in tuned.values():
        means = [m for _, m, n in t["grid"]]
        assert all(n == 2 for _, _, n in t["grid"])
        assert t["mean_R"] == min(means)
        assert t["params"] == t["grid"][int(np.argmin(means))][0]
    sweep = ex.eval_sweep("goal-dirichlet-20", {"goal-dirichlet-20": tuned})
    assert sweep.seed == ex.EVAL_SEED and sweep.seeds == tuple(range(ex.EVAL_SEEDS))
    assert all(e.params.get("model_seed") is None for e in sweep.envs)  # model = seed index
    by_label = {a.label: a.params for a in sweep.agents}
    assert (
        by_label["RAVI-UCB (paper)"]["beta_scale"] == by_label["RAVI-UCB (paper)"]["eta_scale"] == 1
    )
    for agent, t in tuned.items():
        assert {k: by_label[f"{agent} (tuned)"][k] for k in t["params"]} == t["params"]
    from optplan.envs.registry import ENVS

    (env,) = sweep.envs
    for i in (0, 3):  # the evaluation task of seed index i plays model i
        played = ENVS[env.name].build(i, **env.params).unwrapped.mdp
        np.testing.assert_array_equal(played.P, ex.env_model("goal-dirichlet-20", i).P)


def test_greedy_loss_of_the_harder_family():
    """The harder family's evaluation models: the reward-greedy policy loses >= 0.05 per step on
    average (what learning has to recover); the dense family's greedy policy is near optimal."""
    ex = example()
    goal = [ex.greedy_loss(ex.env_model("goal-dirichlet-20", m))[0] for m in range(5)]
    dense = [ex.greedy_loss(ex.env_model("dirichlet-10", m))[0] for m in range(5)]
    assert np.mean(goal) >= 0.05 and np.mean(dense) < 0.02


def test_a_pick_at_the_end_of_a_grid_extends_it():
    ex = example()
    grid = {"beta_scale": [1e-4, 1e-3], "eta_scale": [10.0, 100.0, 1000.0]}
    assert ex.extend(grid, {"beta_scale": 1e-4, "eta_scale": 100.0}) == {
        "beta_scale": [1e-5, 1e-4, 1e-3],
        "eta_scale": [10.0, 100.0, 1000.0],
    }
    assert ex.extend(grid, {"beta_scale": 1e-3, "eta_scale": 1000.0}) == {
        "beta_scale": [1e-4, 1e-3, 1e-2],
        "eta_scale": [10.0, 100.0, 1000.0, 10000.0],
    }
    assert ex.extend({"epsilon": [0.01, 0.1]}, {"epsilon": 0.05}) is None  # inside: no change
    # a probability never leaves (0, 1): delta = 0.99 * 0.99 / 0.1 is not a confidence level
    assert ex.extend({"delta": [0.1, 0.99]}, {"delta": 0.99}) is None
    assert ex.extend({"delta": [0.001, 0.1]}, {"delta": 0.001}) == {"delta": [1e-5, 0.001, 0.1]}
