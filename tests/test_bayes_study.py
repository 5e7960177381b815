"""The Bayesian-methods study's sweep files are the draft's setup, and the
example prints the pinned exact Q-values."""

import subprocess
import sys
from pathlib import Path

import pytest

from optplan.envs import PriorMDP
from optplan.sweeps import load_sweep

ROOT = Path(__file__).parents[1]
SWEEPS = ROOT / "models" / "sweeps"
DEEPSEA = {n: 1250 * n for n in (4, 6, 8, 10, 12)}
WIDE = {w: 1000 * w for w in (6, 8, 10, 12)}

CASES = (
    [(f"bayes-deepsea-n{n}", "deepsea-chain", {"n": n}, T, n + 1) for n, T in DEEPSEA.items()]
    + [(f"bayes-widenarrow-w{w}", "wide-narrow", {"n": 1, "w": w}, T, 3) for w, T in WIDE.items()]
    + [
        (
            f"bayes-priormdp-s{s}",
            "prior-mdp",
            {"n_states": 4, "n_actions": 2, "model_seed": s},
            5000,
            3,
        )
        for s in range(4)
    ]
)


@pytest.mark.parametrize("name, env, params, T, update_every", CASES, ids=[c[0] for c in CASES])
def test_study_sweep_is_the_drafts_setup(name, env, params, T, update_every):
    sweep = load_sweep(SWEEPS / f"{name}.toml")
    assert sweep.steps == T and sweep.seeds == tuple(range(10))
    (e,) = sweep.envs
    assert e.name == env and e.criterion == "discounted"
    assert {k: e.params[k] for k in params} == params and e.params["discount"] == 0.9
    agents = {a.label: a for a in sweep.agents}
    assert [a.name for a in sweep.agents] == [
        "psrl-continuing",
        "bql",
        "bql",
        "ube-continuing",
        "moment-matching",
        "epsilon-greedy",
    ]
    for label in ("PSRL", "UBE (zeta = 0.1)", "MM (zeta = 1)"):
        assert agents[label].params["update_every"] == update_every
        assert agents[label].params["discount"] == 0.9
    assert agents["UBE (zeta = 0.1)"].params["zeta"] == 0.1
    assert agents["MM (zeta = 1)"].params["zeta"] == 1.0
    assert agents["BQL"].params["prior_mu0"] == 0.0
    assert agents["BQL (mu0 = 1.5)"].params["prior_mu0"] == 1.5
    eps = agents["eps-greedy (0.5)"].params
    assert (eps["epsilon"], eps["learning_rate"], eps["discount"]) == (0.5, 0.1, 0.9)
    # UBE's Q_max from the largest true mean reward, as the public code reads it
    bound = agents["UBE (zeta = 0.1)"].params["reward_bound"]
    if env == "prior-mdp":
        true_max = PriorMDP(4, 2, params["model_seed"]).transition_reward_mean.max()
        assert bound == true_max
    else:
        assert bound == {"deepsea-chain": 1.0, "wide-narrow": 0.5}[env]


def test_example_prints_the_pinned_q_values():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "bayes_methods_study.py"), "--q-values"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "0.7281655541 0.8090728379" in out and "1.1175769255 1.566321411" in out
    assert "1.8450184502 1.3450184502" in out and "1.6605166052" in out


def _example():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bayes_methods_study", ROOT / "examples" / "bayes_methods_study.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_names_both_settings_sweep_files():
    ex = _example()
    for setting, prefix in (("optplan", "bayes-"), ("published", "bayes-published-")):
        names = ex.sweep_names(setting)
        assert len(names) == 13 and all(n.startswith(prefix) for n in names)
        for name in names:
            assert load_sweep(SWEEPS / f"{name}.toml").name == name
            assert ex.config_of(name) in ex.CONFIGS
    assert ex.config_of("quick-bayes-published-priormdp-s3") == "priormdp-s3"


def test_example_side_by_side_table_has_both_settings_per_environment():
    import numpy as np

    ex = _example()
    row = lambda xs: {"draft": np.array(xs), "n": len(xs)}  # noqa: E731
    ours = {"env-a": {"_family": "deepsea", "PSRL": row([0.1, 0.3]), "BQL": row([0.1, 0.3])}}
    pub = {"env-a": {"_family": "deepsea", "PSRL": row([0.0, 0.4]), "BQL": row([0.1, 0.5])}}
    lines = ex.side_by_side({"optplan": ours, "published": pub}, "draft", ".3f")
    assert lines[0] == "| environment | setting | PSRL | BQL |"
    assert lines[2] == "| env-a | optplan (n=2) | 0.200 ± 0.100 | 0.200 ± 0.100 |"
    assert lines[3] == "| env-a | published (n=2) | 0.200 ± 0.200 | 0.300 ± 0.200 |"
    contrasts = ex.setting_contrasts({"optplan": ours, "published": pub})
    assert contrasts[0].startswith("PSRL: sd published / optplan, median over 1 environments 2.00")
