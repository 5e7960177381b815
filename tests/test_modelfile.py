"""Tests of optplan.modelfile: shipped models, exact round trips, and one test per bad input."""

from __future__ import annotations

import dataclasses
import itertools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from optplan.generators import random_dirichlet, riverswim
from optplan.mdp import FiniteHorizonMDP, TabularMDP
from optplan.modelfile import load_model, save_model

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODELS = Path(__file__).parents[1] / "models"

#: A small valid explicit-array model; bad files are this with one thing broken.
BASE = {
    "name": "tiny",
    "criterion": "average",
    "P": [[[0.5, 0.5], [1.0, 0.0]], [[0.0, 1.0], [0.25, 0.75]]],
    "R": [[0.0, 1.0], [1.0, 0.5]],
}


def _write(tmp_path: Path, doc: dict, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return path


def _names(path: Path, key: str) -> str:
    """Regex: the message starts with the file and names the key."""
    return re.escape(f"{path}: key '{key}'")


def _average_gain(mdp: TabularMDP, policy) -> float:
    """Gain of a deterministic policy of an irreducible chain (stationary distribution)."""
    S = mdp.n_states
    states = np.arange(S)
    P_pi, r_pi = mdp.P[states, policy], mdp.R[states, policy]
    M = np.vstack([(np.eye(S) - P_pi).T, np.ones(S)])
    b = np.zeros(S + 1)
    b[-1] = 1.0
    mu = np.linalg.lstsq(M, b, rcond=None)[0]
    return float(mu @ r_pi)


# --- shipped models ------------------------------------------------------------------------


def test_cowan3_matches_the_paper():
    m = load_model(MODELS / "cowan3.toml")
    assert isinstance(m, TabularMDP)
    assert m.name == "cowan3" and m.criterion == "average" and m.shape == (3, 2)
    # accelerating-ucb-indices-mdp §5: P[a1] row x2 and the R table (rows = actions)
    np.testing.assert_array_equal(m.P[1, 0], [0.88, 0.01, 0.11])
    np.testing.assert_array_equal(m.P[2, 1], [0.43, 0.35, 0.22])
    np.testing.assert_array_equal(m.R.T, [[0.13, 0.47, 0.89], [0.18, 0.71, 0.63]])
    gains = {pol: _average_gain(m, pol) for pol in itertools.product(range(2), repeat=3)}
    assert max(gains, key=gains.get) == (0, 1, 0)


def test_riverswim6_model_file():
    m = load_model(MODELS / "riverswim6.toml")
    assert m == dataclasses.replace(riverswim(n_states=6), name="riverswim6")
    assert m.criterion == "average"


def test_random_dirichlet_model_file():
    m = load_model(MODELS / "random-dirichlet.toml")
    doc = tomllib.loads((MODELS / "random-dirichlet.toml").read_text(encoding="utf-8"))
    assert m.shape == (10, 3) and m.criterion == "average" and m.name == "random-dirichlet"
    expected = random_dirichlet(n_states=10, n_actions=3, seed=doc["seed"])
    np.testing.assert_array_equal(m.P, expected.P)
    np.testing.assert_array_equal(m.R, expected.R)


@pytest.mark.parametrize("stem", ["cowan3", "riverswim6", "random-dirichlet"])
def test_shipped_models_round_trip(tmp_path, stem):
    m = load_model(MODELS / f"{stem}.toml")
    assert load_model(save_model(m, tmp_path / "copy.toml")) == m


# --- round trips ---------------------------------------------------------------------------


def test_round_trip_discounted_with_mask_and_initial(tmp_path):
    S, A = 4, 3
    P = np.zeros((S, A, S))
    P[:, :, 0] = 0.1 + 0.2
    P[:, :, 1] = 1 / 3
    P[:, :, 2] = 1e-300
    P[:, :, 3] = 1.0 - P[:, :, :3].sum(axis=-1)
    R = np.array([[0.1 + 0.2, 1 / 3, 1e-300], [-2.5, 7e22, 0.0], [1 / 7, 2 / 3, -0.0], [1, 2, 3]])
    mask = np.ones((S, A), dtype=bool)
    mask[0, 2] = mask[3, 0] = False
    initial = np.array([0.1, 0.2, 0.3, 0.4])
    m = TabularMDP(P, R, discount=0.9 + 0.09, initial=initial, action_mask=mask, name="odd floats")
    path = save_model(m, tmp_path / "m.toml", description="round trip")
    back = load_model(path)
    assert back == m
    assert back.criterion == "discounted" and back.discount == 0.9 + 0.09
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert doc["description"] == "round trip"
    assert doc["action_mask"][0] == [True, True, False]


def test_round_trip_defaults_are_not_written(tmp_path):
    m = TabularMDP(np.full((3, 2, 3), 1 / 3), np.arange(6.0).reshape(3, 2))
    path = save_model(m, tmp_path / "plain.toml")
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert set(doc) == {"name", "criterion", "P", "R"}
    assert doc["criterion"] == "average" and doc["name"] == ""
    assert load_model(path) == m


def test_round_trip_random_models(tmp_path):
    for seed in range(5):
        m = random_dirichlet(n_states=6, n_actions=2, seed=seed, support=3, discount=0.5)
        assert load_model(save_model(m, tmp_path / f"r{seed}.toml")) == m


def test_round_trip_finite_horizon(tmp_path):
    rng = np.random.default_rng(7)
    L, S, A = 3, 4, 2
    P = rng.dirichlet(np.ones(S), size=(L, S, A))
    R = rng.uniform(size=(L, S, A))
    mask = np.ones((L, S, A), dtype=bool)
    mask[1, 2, 0] = False
    m = FiniteHorizonMDP(P, R, initial=np.array([0.5, 0.5, 0.0, 0.0]), action_mask=mask, name="fh")
    path = save_model(m, tmp_path / "fh.toml")
    back = load_model(path)
    assert isinstance(back, FiniteHorizonMDP)
    assert back == m and back.horizon == L
    assert tomllib.loads(path.read_text(encoding="utf-8"))["criterion"] == "finite_horizon"
    stationary = FiniteHorizonMDP.from_stationary(riverswim(n_states=3), 5)
    assert load_model(save_model(stationary, tmp_path / "st.toml")) == stationary


def test_explicit_finite_horizon_with_two_dimensional_mask(tmp_path):
    doc = dict(BASE, criterion="finite_horizon", P=[BASE["P"]] * 2, R=[BASE["R"]] * 2)
    doc["action_mask"] = [[True, False], [True, True]]
    m = load_model(_write(tmp_path, doc, "fh2.toml"))
    assert isinstance(m, FiniteHorizonMDP) and m.horizon == 2
    np.testing.assert_array_equal(m.action_mask[:, 0, 1], [False, False])


def test_name_defaults_to_file_stem(tmp_path):
    doc = {k: v for k, v in BASE.items() if k != "name"}
    assert load_model(_write(tmp_path, doc, "my-model.toml")).name == "my-model"


def test_generator_file_discounted_and_finite_horizon(tmp_path):
    doc = {"generator": "riverswim", "n_states": 4, "discount": 0.9, "start": [0, 1]}
    m = load_model(_write(tmp_path, doc, "rs.toml"))
    assert m == dataclasses.replace(riverswim(n_states=4, discount=0.9, start=[0, 1]), name="rs")
    doc = {"generator": "random_dirichlet", "criterion": "finite_horizon", "horizon": 4, "seed": 1}
    fh = load_model(_write(tmp_path, doc, "rd.toml"))
    assert isinstance(fh, FiniteHorizonMDP) and fh.horizon == 4
    np.testing.assert_array_equal(fh.P[3], random_dirichlet(seed=1).P)


# --- bad files -----------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "nope.toml")


def test_not_valid_toml(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('criterion = "average"\nP = [[[1.0]]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: not valid TOML: ")):
        load_model(path)


@pytest.mark.parametrize("key", ["criterion", "P", "R"])
def test_missing_required_key(tmp_path, key):
    doc = {k: v for k, v in BASE.items() if k != key}
    path = _write(tmp_path, doc)
    with pytest.raises(ValueError, match=_names(path, key) + ": is required"):
        load_model(path)


def test_discounted_without_discount(tmp_path):
    path = _write(tmp_path, dict(BASE, criterion="discounted"))
    with pytest.raises(ValueError, match=_names(path, "discount") + ": is required"):
        load_model(path)


def test_discount_with_average_criterion(tmp_path):
    path = _write(tmp_path, dict(BASE, discount=0.9))
    with pytest.raises(ValueError, match=_names(path, "discount") + ": is only allowed"):
        load_model(path)


@pytest.mark.parametrize(
    ("key", "value", "detail"),
    [
        ("name", 3, "must be a string, got int 3"),
        ("description", ["x"], "must be a string, got list"),
        ("criterion", 1, "must be a string, got int 1"),
        ("P", "identity", "must be a 3-dimensional array of numbers, got str"),
        (
            "P",
            [[["a", "b"], [1.0, 0.0]], [[0.0, 1.0], [0.5, 0.5]]],
            "must hold numbers only, found str",
        ),
        ("R", [[True, 1.0], [1.0, 0.5]], "must hold numbers only, found bool"),
        ("initial", 0.5, "must be a 1-dimensional array of numbers, got float"),
        ("action_mask", [[1, 1], [1, 0]], "must hold bools only, found int"),
    ],
)
def test_wrong_type(tmp_path, key, value, detail):
    path = _write(tmp_path, dict(BASE, **{key: value}))
    with pytest.raises(ValueError, match=_names(path, key) + ": " + re.escape(detail)):
        load_model(path)


def test_wrong_type_discount(tmp_path):
    path = _write(tmp_path, dict(BASE, criterion="discounted", discount="0.9"))
    with pytest.raises(ValueError, match=_names(path, "discount") + ": must be a number, got str"):
        load_model(path)


@pytest.mark.parametrize(
    ("key", "value", "detail"),
    [
        ("P", [[[0.5, 0.5], [1.0]], [[0.0, 1.0], [0.25, 0.75]]], "nested lists of equal length"),
        ("P", [[0.5, 0.5], [1.0, 0.0]], "must be a 3-dimensional array"),
        ("P", [[[1.0], [1.0]], [[1.0], [1.0]]], "has shape (2, 2, 1), expected (2, 2, 2)"),
        ("R", [[0.0, 1.0, 2.0], [1.0, 0.5, 0.0]], "has shape (2, 3), expected (2, 2) = (S, A)"),
        ("initial", [1.0, 0.0, 0.0], "has shape (3,), expected (2,)"),
        ("action_mask", [[True, True]], "has shape (1, 2), expected (2, 2)"),
    ],
)
def test_wrong_shape(tmp_path, key, value, detail):
    path = _write(tmp_path, dict(BASE, **{key: value}))
    with pytest.raises(ValueError, match=_names(path, key) + ": .*" + re.escape(detail)):
        load_model(path)


def test_wrong_shape_finite_horizon(tmp_path):
    doc = dict(BASE, criterion="finite_horizon", P=[BASE["P"]] * 2, R=[BASE["R"]] * 3)
    path = _write(tmp_path, doc)
    with pytest.raises(ValueError, match=_names(path, "P") + r": has shape \(2, 2, 2, 2\)"):
        load_model(path)


def test_unknown_criterion(tmp_path):
    path = _write(tmp_path, dict(BASE, criterion="total"))
    with pytest.raises(ValueError, match=_names(path, "criterion") + ": unknown criterion 'total'"):
        load_model(path)


def test_unknown_top_level_key(tmp_path):
    path = _write(tmp_path, dict(BASE, gamma=0.9))
    with pytest.raises(ValueError, match=_names(path, "gamma") + ": unknown key"):
        load_model(path)


def test_unknown_generator(tmp_path):
    path = _write(tmp_path, {"generator": "gridworld", "n_states": 4})
    with pytest.raises(
        ValueError, match=_names(path, "generator") + ": unknown generator 'gridworld'"
    ):
        load_model(path)


def test_unknown_generator_parameter(tmp_path):
    path = _write(tmp_path, {"generator": "riverswim", "n_states": 4, "n_actions": 2})
    with pytest.raises(
        ValueError, match=_names(path, "n_actions") + ": not a parameter of generator 'riverswim'"
    ):
        load_model(path)


def test_generator_bad_parameter_value(tmp_path):
    path = _write(tmp_path, {"generator": "riverswim", "n_states": 1})
    match = re.escape(f"{path}: generator 'riverswim': n_states must be >= 2, got 1")
    with pytest.raises(ValueError, match=match):
        load_model(path)


def test_generator_finite_horizon_needs_horizon(tmp_path):
    path = _write(tmp_path, {"generator": "riverswim", "criterion": "finite_horizon"})
    with pytest.raises(ValueError, match=_names(path, "horizon") + ": is required"):
        load_model(path)
    path = _write(tmp_path, {"generator": "riverswim", "horizon": 3})
    with pytest.raises(ValueError, match=_names(path, "horizon") + ": is only allowed"):
        load_model(path)


def test_model_validation_errors_are_prefixed_with_the_file(tmp_path):
    P = [[[0.5, 0.6], [1.0, 0.0]], [[0.0, 1.0], [0.25, 0.75]]]
    path = _write(tmp_path, dict(BASE, P=P))
    match = re.escape(f"{path}: row P[s=0, a=0, :] sums to 1.1, not 1")
    with pytest.raises(ValueError, match=match):
        load_model(path)
    path = _write(tmp_path, dict(BASE, criterion="discounted", discount=1.5))
    with pytest.raises(
        ValueError, match=re.escape(f"{path}: discount must lie in [0, 1), got 1.5")
    ):
        load_model(path)
    path = _write(tmp_path, dict(BASE, action_mask=[[False, False], [True, True]]))
    with pytest.raises(
        ValueError, match=re.escape(f"{path}: action_mask leaves state 0 with no action")
    ):
        load_model(path)


def test_save_model_rejects_other_objects(tmp_path):
    with pytest.raises(TypeError, match="model must be a TabularMDP or FiniteHorizonMDP"):
        save_model({"P": 1}, tmp_path / "x.toml")


def test_a_huge_sparse_index_is_reported_as_written(tmp_path):
    """An index too large for int64 is named as the file has it, not as the wrapped integer."""
    path = tmp_path / "huge.toml"
    path.write_text(
        'name = "huge"\ncriterion = "average"\nR = [[0.0], [0.0]]\n'
        "[P_csr]\nindptr = [0, 1, 2]\nindices = [0, 1e30]\ndata = [1.0, 1.0]\n"
    )
    with pytest.raises(ValueError, match=r"'P_csr.indices': holds 1e\+30, far outside"):
        load_model(path)


def test_saved_rows_read_as_rows(tmp_path):
    """A row of ``P`` is one line (up to 96 columns; longer rows wrap, still round-trip)."""
    import optplan as op

    model = op.load_model("models/riverswim6.toml")
    text = op.save_model(model, tmp_path / "m.toml").read_text()
    assert "        [0.4, 0.6, 0.0, 0.0, 0.0, 0.0],\n" in text
    assert len(text.splitlines()) < 40
    rng = np.random.default_rng(1)
    wide = op.TabularMDP(rng.dirichlet(np.ones(60), size=(60, 2)), rng.random((60, 2)),
                         discount=0.9)  # fmt: skip
    back = op.load_model(op.save_model(wide, tmp_path / "w.toml"))
    np.testing.assert_array_equal(back.P, wide.P)
    assert max(map(len, (tmp_path / "w.toml").read_text().splitlines())) <= 96
