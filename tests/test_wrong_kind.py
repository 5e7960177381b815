"""Clear messages for a file of the wrong kind and for a Ray cluster that is not there."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from optplan._checks import OptplanError
from optplan.cli import main
from optplan.modelfile import file_kind, load_counts, load_model, tomllib

MODELS = Path(__file__).resolve().parents[1] / "models"


def _kind(path: Path) -> str:
    return file_kind(tomllib.loads(path.read_text()))


def test_every_shipped_file_has_the_kind_its_folder_says():
    kinds = {p.name: _kind(p) for p in MODELS.glob("*.toml")}
    assert kinds.pop("cowan3-rigged.toml") == "counts"
    assert set(kinds.values()) == {"model"}
    assert {_kind(p) for p in (MODELS / "sweeps").glob("*.toml")} == {"sweep"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["solve", "models/cowan3-rigged.toml"],
            "models/cowan3-rigged.toml: is a counts file (pseudo-counts T[x][a][y] for the "
            "model 'cowan3'), not a model: it is an index agent's initial_counts, e.g. "
            "`optplan run --agent mdp-ucb --env model --param path=MODEL --param "
            "initial_counts=models/cowan3-rigged.toml --steps N`",
        ),
        (
            ["solve", "models/sweeps/smoke.toml"],
            "models/sweeps/smoke.toml: is a sweep file, not a model: run it with "
            "`optplan sweep models/sweeps/smoke.toml --out DIR`",
        ),
        (
            ["info", "models/cowan3-rigged.toml"],
            "models/cowan3-rigged.toml: is a counts file",
        ),
        (
            ["sweep", "models/cowan3.toml", "--out", "{tmp}/out"],
            "models/cowan3.toml: is a model file, not a sweep: solve it with "
            "`optplan solve models/cowan3.toml`",
        ),
        (
            ["sweep", "models/cowan3-rigged.toml", "--out", "{tmp}/out"],
            "models/cowan3-rigged.toml: is a counts file",
        ),
    ],
)
def test_cli_says_what_the_file_is_and_which_command_takes_it(
    argv, message, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(MODELS.parent)
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"optplan: error: {message}") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # refused before the result directory is made


def test_library_loaders_say_it_too():
    with pytest.raises(OptplanError, match="is a counts file .* not a model"):
        load_model(MODELS / "cowan3-rigged.toml")
    with pytest.raises(OptplanError, match="has no key 'T' .*is a model file, not a counts file"):
        load_counts(MODELS / "cowan3.toml", 3, 2)


def test_a_model_file_with_a_typo_is_still_a_model_error(tmp_path):
    """Only files recognizably of another kind get the other-kind message."""
    bad = tmp_path / "m.toml"
    bad.write_text('criterion = "average"\nP = [[[1.0]]]\nR = [[0.0]]\nPP = 1\n')
    with pytest.raises(OptplanError, match="key 'PP': unknown key"):
        load_model(bad)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray")
def test_no_ray_cluster_at_the_address_is_one_line(capsys, tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(
        'name = "s"\nseeds = 1\nsteps = 10\n[[agents]]\nname = "random"\n'
        '[[envs]]\nname = "riverswim"\n'
    )
    argv = ["sweep", str(sweep), "--out", str(tmp_path / "out"), "--backend", "ray"]
    assert main([*argv, "--address", "auto", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optplan: error: no Ray cluster found at address 'auto'")
    assert "`ray start --head`, or drop --address" in err and err.count("\n") == 1
