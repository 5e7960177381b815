"""Progress bars: on stderr where asked (the CLI), silent by default in library calls and
with ``--quiet`` / ``--json``."""

from __future__ import annotations

import io
import json
import subprocess
import sys

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


# --- stderr that is not a terminal: plain lines, no "\r", a bounded number of them ---------


def _assert_plain(err: str, most: int) -> None:
    """``err`` holds only whole lines of progress, no in-place redraws, at most ``most``."""
    assert "\r" not in err, "progress redrawn in place on a non-terminal"
    lines = err.splitlines()
    assert 1 <= len(lines) <= most, lines


def test_library_run_on_a_non_terminal_writes_one_plain_line(capsys):
    run(RandomAgent(4, 2), _env(), steps=20_000, seed=1, progress=True)
    err = capsys.readouterr().err
    _assert_plain(err, 1)  # a run of well under INTERVAL seconds: the closing line only
    assert "20000/20000" in err


def test_verify_progress_on_a_non_terminal_is_plain(capsys):
    from optplan import KLBallIndex, verify

    def fn(p, v, radius):
        return KLBallIndex(p, v, radius).solve()

    assert verify(fn, problem="kl_ball", n=30, progress=True).ok
    _assert_plain(capsys.readouterr().err, 1)


def test_bench_on_a_non_terminal_prints_its_row_lines_and_no_redraws(capsys):
    argv = ["bench", "planning", "--sizes", "3", "--repeats", "1", "--solvers", "CLARABEL"]
    assert main(argv) == 0
    _assert_plain(capsys.readouterr().err, 3)  # one line per row, and the closing one


def test_sweep_on_a_non_terminal_is_plain(tmp_path, capsys):
    sweep = tmp_path / "tiny.toml"
    sweep.write_text(
        'name = "tiny"\nseed = 1\nseeds = 3\nsteps = 200\n'
        '[[agents]]\nname = "random"\n[[envs]]\nname = "riverswim"\n'
    )
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out")]) == 0
    _assert_plain(capsys.readouterr().err, 1)


def test_optplan_run_with_stderr_in_a_file(tmp_path):
    """The command as a user runs it, ``2> log``: the log gets lines, not redraws."""
    log = tmp_path / "log"
    argv = ["run", "--agent", "random", "--env", "riverswim", "--steps", "200", "--seeds", "3"]
    with log.open("w") as err:
        subprocess.run([sys.executable, "-m", "optplan.cli", *argv], stderr=err, check=True)
    text = log.read_bytes().decode()  # read_text would turn "\r" into "\n"
    _assert_plain(text, 1)
    assert "3/3" in text


def test_lines_come_at_most_every_interval(monkeypatch):
    """Over 95 s of updates, one line per INTERVAL (10 s) and the closing one: 10 lines."""
    from optplan import _progress

    clock = [0.0]
    monkeypatch.setattr(_progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    bar = _progress.LineProgress(total=950, desc="work", unit="step", file=out)
    for _ in range(950):
        clock[0] += 0.1
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and "\r" not in out.getvalue()
    assert lines[-1].startswith("work: 100% 950/950")


def test_a_terminal_still_gets_the_tqdm_bar():
    from tqdm.auto import tqdm

    from optplan._progress import LineProgress, progress_bar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(progress_bar(total=3, file=Terminal()), tqdm)
    assert isinstance(progress_bar(total=3, file=io.StringIO()), LineProgress)
