"""mdpsolver next to pymdptoolbox on the dense discounted rows of ``optplan bench planning
--peers``: its values checked before it is timed, its column, its settings in ``--json``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optplan.bench import Runs
from optplan.bench import planning as planning_suite
from optplan.bench.planning import bench_planning, format_table
from optplan.cli import main

pytest.importorskip("mdptoolbox")
pytest.importorskip("mdpsolver")


def test_mdpsolver_times_the_dense_discounted_rows():
    rows = bench_planning(
        Runs(sizes=[12, 60], repeats=2, solvers=[]), criteria=["discounted"], peers=True
    )
    assert [r["S"] for r in rows] == [12, 60]
    for r in rows:
        assert r["peer_mdpsolver_err"] <= 1e-8 * 20  # |V| <= 1 / (1 - 0.95)
        assert r["peer_mdpsolver_s"] > 0 and r["peer_mdpsolver_ratio"] > 0
        assert r["peer_PI_err"] <= 1e-9 and "peer_mdpsolver_skip" not in r
    text = format_table(rows, [])
    header = text.splitlines()[0]
    assert "pymdp PI s" in header and "mdpsolver s" in header and "pymdp mdpsolver" not in text


def test_average_rows_have_no_mdpsolver_column():
    rows = bench_planning(Runs(sizes=[10], repeats=1, solvers=[]), criteria=["average"], peers=True)
    assert "peer_mdpsolver_s" not in rows[0] and "mdpsolver" not in format_table(rows, [])


def test_a_disagreeing_peer_is_not_timed(monkeypatch):
    real = planning_suite.run_peer
    calls = []

    def wrong(name, mdp, fast, built=None):
        seconds, err = real(name, mdp, fast, built)
        calls.append(name)
        return seconds, (1.0 if name == "mdpsolver" else err)

    monkeypatch.setattr(planning_suite, "run_peer", wrong)
    rows = bench_planning(
        Runs(sizes=[10], repeats=2, solvers=[]), criteria=["discounted"], peers=True
    )
    assert "values differ from optplan's by 1.00e+00" in rows[0]["peer_mdpsolver_skip"]
    assert "peer_mdpsolver_s" not in rows[0] and rows[0]["peer_PI_s"] > 0
    # the warm-up's run, then one checking run on the first instance: none timed, none after
    assert calls.count("mdpsolver") == 2
    text = format_table(rows, [])
    assert "skipped" in text and "mdpsolver not timed" in text


def test_discount_zero_is_refused_before_timing():
    with pytest.raises(ValueError, match="discount in \\(0, 1\\)"):
        bench_planning(
            Runs(sizes=[8], repeats=1, solvers=[]), criteria=["discounted"], peers=True, gamma=0.0
        )


def test_json_names_mdpsolver_settings(capsys):
    argv = ["bench", "planning", "--sizes", "8", "--repeats", "1", "--solvers", "--peers"]
    assert main([*argv, "--criteria", "discounted", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    settings = out["peers"]["mdpsolver"]
    assert settings == {"algorithm": "mpi", "parallel": False, "relative_tolerance": 1e-10}
    assert "mdpsolver" in out["peers"]["by_criterion"]["discounted"]
    assert np.isfinite(out["rows"][0]["peer_mdpsolver_ratio"])
    assert main([*argv, "--criteria", "discounted"]) == 0
    assert "mdpsolver (modified policy iteration, one thread" in capsys.readouterr().out
