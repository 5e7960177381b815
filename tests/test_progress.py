"""Progress bars: on stderr where asked (the CLI), silent by default in library calls and
with ``--quiet`` / ``--json``."""

from __future__ import annotations

import json

import pytest

from optplan._checks import OptplanError
from optplan.agents import RandomAgent
from optplan.cli import main
from optplan.envs import TabularEnv
from optplan.experiments import run
from optplan.generators import riverswim


def _env():
    return TabularEnv(riverswim(4))


def test_run_is_silent_by_default_and_shows_a_bar_on_request(capsys):
    plain = run(RandomAgent(4, 2), _env(), steps=3000, seed=1)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    shown = run(RandomAgent(4, 2), _env(), steps=3000, seed=1, progress=True)
    err = capsys.readouterr().err
    assert "3000/3000" in err and "step" in err
    assert shown.regret[-1] == plain.regret[-1]  # the bar changes nothing


def test_run_progress_must_be_a_bool():
    with pytest.raises(OptplanError, match="progress must be True or False, got 'yes'"):
        run(RandomAgent(4, 2), _env(), steps=10, progress="yes")


def test_bench_bar_on_stderr_with_an_eta_total_and_silent_when_quiet_or_json(capsys):
    argv = ["bench", "planning", "--sizes", "3", "--repeats", "1", "--solvers", "CLARABEL"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "planning: 100%" in err and "2/2" in err  # 2 criteria x 1 size: the bar's total
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and len(json.loads(out.out)["rows"]) == 2


def test_cli_run_bar_over_seeds_and_quiet(capsys):
    argv = ["run", "--agent", "random", "--env", "riverswim", "--steps", "200", "--seeds", "2"]
    assert main(argv) == 0
    assert "2/2" in capsys.readouterr().err
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
