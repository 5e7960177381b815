"""What a reader meets at the command line: ``--version``, descriptions on ``--help``, a
Gymnasium id for ``optplan run --env``, a one-line error for a ``verify-fn`` module that does
not import, and a legend under the results table."""

from __future__ import annotations

import re

import numpy as np
import pytest

import optplan as op
from optplan.cli import main
from optplan.envs import ENVS


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"optplan {op.__version__}"


def test_version_is_the_packages():
    """``optplan.__version__`` is ``pyproject.toml``'s, and the CHANGELOG's top entry is that
    version (``0.2.0.dev0``: the unreleased 0.2.0)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    version = re.search(r'^version = "(.+)"', (root / "pyproject.toml").read_text(), re.M)
    assert version.group(1) == op.__version__
    top = re.search(r"^## (\S+)", (root / "CHANGELOG.md").read_text(), re.M).group(1)
    assert op.__version__.startswith(top)


@pytest.mark.parametrize("argv", [["run", "--help"], ["bench", "--help"],
                                  ["bench", "agents", "--help"], ["sweep", "--help"]])  # fmt: skip
def test_commands_describe_themselves(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    text = capsys.readouterr().out
    usage, rest = text.split("\n\n", 1)
    assert rest.strip() and not rest.lstrip().startswith(("positional", "options")), text


def test_run_takes_a_gymnasium_id(capsys):
    """``--env FrozenLake-v1`` runs on the toy-text table, as the ``gymnasium`` environment
    with ``id=FrozenLake-v1`` does."""
    argv = ["run", "--agent", "ucrl2", "--steps", "300", "--seeds", "1", "--quiet", "--json"]
    assert main([*argv, "--env", "FrozenLake-v1"]) == 0
    by_id = capsys.readouterr().out
    assert main([*argv, "--env", "gymnasium", "--param", "env.id=FrozenLake-v1"]) == 0
    by_row = capsys.readouterr().out
    regret = [re.search(r'"regret": ([0-9.e+-]+)', t).group(1) for t in (by_id, by_row)]
    assert regret[0] == regret[1]
    env = ENVS["gymnasium"].build(0, **ENVS["gymnasium"].resolve({"id": "FrozenLake-v1"}, "g"))
    want = op.from_gymnasium("FrozenLake-v1", terminal="restart")
    np.testing.assert_array_equal(env.mdp.P, want.P)


def test_run_names_an_unknown_env(capsys):
    code = main(["run", "--agent", "ucrl2", "--env", "NoSuchThing-v9", "--steps", "10"])
    assert code == 2
    assert "NoSuchThing-v9" in capsys.readouterr().err


@pytest.mark.parametrize(
    "source, match",
    [("import numpy\nx = 1 / 0\ndef f(p, v, d):\n    return 0\n",
      r"does not import: ZeroDivisionError: division by zero \(.*broken.py:2\)"),
     ("def f(p v):\n    pass\n", r"does not import: SyntaxError: .*broken.py:1\)")],
)  # fmt: skip
def test_verify_fn_module_that_does_not_import(tmp_path, capsys, source, match):
    path = tmp_path / "broken.py"
    path.write_text(source)
    assert main(["verify-fn", f"{path}:f", "--problem", "kl_ball"]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err) and len(err.strip().splitlines()) == 1, err


def test_results_table_has_a_legend(capsys):
    assert main(["run", "--agent", "random", "--env", "riverswim", "--steps", "200",
                 "--seeds", "2", "--quiet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "normalized (95% CI)" in out
    assert "draft normalized: " in out and "population sd" in out


@pytest.mark.parametrize(
    "params, match",
    [({}, "id must name a Gymnasium environment"),
     ({"id": "FrozenLake-v1", "terminal": "loop"}, "terminal")],
)  # fmt: skip
def test_the_gymnasium_environment_names_bad_input(params, match):
    spec = ENVS["gymnasium"]
    with pytest.raises(op.OptplanError, match=match):
        spec.build(0, **spec.resolve(params, "gymnasium"))
