"""The optplan command: solve, verify, demo, bench, and its errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optplan._checks import MissingDependency, OptplanError
from optplan.cli import main

MODELS = Path(__file__).parents[1] / "models"
COWAN = str(MODELS / "cowan3.toml")


def test_solve_both_json_agrees_to_1e7(capsys):
    code = main(["solve", COWAN, "--criterion", "average", "--method", "both", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["cross_check"]["agree"]
    fast, conic = out["results"]["fast"], out["results"]["conic"]
    assert conic["solver"] == "CLARABEL" and fast["policy"] == conic["policy"] == [0, 1, 0]
    assert abs(fast["gain"] - conic["gain"]) < 1e-7
    assert max(abs(a - b) for a, b in zip(fast["bias"], conic["bias"], strict=True)) < 1e-7


def test_solve_text_and_criteria(capsys):
    assert main(["solve", COWAN]) == 0
    assert "gain" in capsys.readouterr().out
    assert (
        main(
            [
                "solve",
                COWAN,
                "--criterion",
                "discounted",
                "--discount",
                "0.9",
                "--method",
                "conic",
                "--solver",
                "ecos",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "ECOS" in out and "initial @ V" in out
    assert (
        main(
            ["solve", COWAN, "--criterion", "finite_horizon", "--horizon", "5", "--method", "both"]
        )
        == 0
    )
    assert "AGREE" in capsys.readouterr().out
    assert (
        main(["solve", str(MODELS / "riverswim6.toml"), "--algorithm", "relative_value_iteration"])
        == 0
    )


def test_verify_all_solvers(capsys):
    assert main(["verify", COWAN]) == 0
    out = capsys.readouterr().out
    assert out.count("AGREE") == 3 and "all solvers agree" in out
    assert main(["verify", str(MODELS / "riverswim6.toml"), "--solver", "CLARABEL", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["agree"] is True


def test_verify_exits_nonzero_on_disagreement(tmp_path, capsys):
    # zero tolerance: the solvers' 1e-11 round-off is a disagreement
    assert main(["verify", COWAN, "--solver", "ECOS", "--rtol", "0", "--atol", "0"]) == 1
    assert "DISAGREE" in capsys.readouterr().out
    multi = tmp_path / "multi.toml"
    multi.write_text(
        'criterion = "average"\nP = [[[1.0, 0.0]], [[0.0, 1.0]]]\nR = [[0.0], [1.0]]\n'
    )
    assert main(["solve", str(multi)]) == 1
    assert "multichain" in capsys.readouterr().out


def test_demo(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "matches the paper" in out and "all cross-checks agree: True" in out
    assert "KL ball C(p, v, 0.1)" in out and out.count("  agree") == 4
    assert "K-learning temperature tau*" in out and "primal-dual gap" in out
    assert out.count("cowan3") >= 3


def test_bench_planning_json(capsys):
    assert main(["bench", "planning", "--sizes", "5", "8", "--repeats", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["S"] for r in rows] == [5, 8, 5, 8]
    for r in rows:
        assert r["fast_s"] > 0 and r["CLARABEL_fail"] == 0 and r["CLARABEL_err"] < 1e-7
        assert r["best_ratio"] == min(r[f"{s}_ratio"] for s in ("CLARABEL", "ECOS", "SCS"))


def test_bench_k_learning_json(capsys):
    argv = ["bench", "k-learning", "--sizes", "4", "6", "--instances", "2", "--json"]
    assert main([*argv, "--solvers", "CLARABEL"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "k-learning" and [r["L"] for r in out["rows"]] == [4, 6]
    for r in out["rows"]:
        assert r["kernel"] in ("numpy", "numba")
        assert r["fast_median_s"] > 0 and r["fast_numpy_median_s"] > 0
        assert r["kernel_max_rel_tau_diff"] <= 1e-9
        assert r["fast_max_gap"] <= 1e-8
        clarabel = r["solvers"]["CLARABEL"]
        assert sum(clarabel["statuses"].values()) == 2
        if clarabel["max_rel_tau_diff"] is not None:
            assert clarabel["max_rel_tau_diff"] <= 1e-4


def test_bench_k_learning_table(capsys):
    argv = ["bench", "k-learning", "--sizes", "4", "--instances", "1", "--solvers", "ECOS"]
    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "numpy ms" in out and "ECOS" in out and out.strip().splitlines()[-1].startswith("  4")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["solve", "missing.toml"], "missing.toml"),
        (["solve", COWAN, "--criterion", "discounted"], "needs.*--discount|has no discount"),
        (["solve", COWAN, "--criterion", "discounted", "--discount", "1.0"], "discount must lie"),
        (["solve", COWAN, "--criterion", "finite_horizon"], "needs --horizon"),
        (["solve", COWAN, "--algorithm", "simplex"], "algorithm must be one of"),
    ],
)
def test_errors_exit_2_with_message(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("optplan: error:")
    import re

    assert re.search(match, err), err


@pytest.mark.parametrize(
    "error", [ZeroDivisionError("bug"), TypeError("bug"), ValueError("bug"), ImportError("bug")]
)
def test_internal_errors_propagate_with_a_traceback(error, monkeypatch, capsys):
    """Exit 2 is for the user's input (OptplanError, unreadable paths); a bug in optplan, even
    a plain ValueError/TypeError/ImportError, is not turned into a one-line usage error."""
    import optplan.cli.solve

    def broken(path):
        raise error

    monkeypatch.setattr(optplan.cli.solve, "load_model", broken)
    with pytest.raises(type(error), match="bug"):
        main(["solve", COWAN])
    assert "optplan: error" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "error",
    [OptplanError("bad input"), MissingDependency("bad input"), IsADirectoryError("bad input")],
)
def test_user_errors_exit_2(error, monkeypatch, capsys):
    import optplan.cli.solve

    def refused(path):
        raise error

    monkeypatch.setattr(optplan.cli.solve, "load_model", refused)
    assert main(["solve", COWAN]) == 2
    assert capsys.readouterr().err == "optplan: error: bad input\n"


def test_unknown_solver_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["solve", COWAN, "--solver", "MOSEK"])
    assert exc.value.code == 2 and "unknown solver 'MOSEK'" in capsys.readouterr().err


def test_console_script_runs():
    out = subprocess.run(
        [sys.executable, "-m", "optplan.cli", "solve", COWAN, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["results"]["fast"]["policy"] == [0, 1, 0]
