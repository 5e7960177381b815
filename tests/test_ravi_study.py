"""RAVI-UCB's experiments: the sweep files are the paper's settings, every
RAVI agent's horizon is the run's T, PSRL plans at the environment's gamma, the tuned constants
are the sensitivity grids' cells, and the example's growth exponent is a log-log slope."""

import importlib.util
import math
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
