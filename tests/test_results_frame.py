"""A sweep's results into pandas and files: ``Results.to_frame`` and ``optplan results
--csv/--parquet``, checked against the store's own summary rows and curve files."""

from __future__ import annotations

import csv
import importlib.util

import numpy as np
import pytest
from test_sweep_exec import small_spec

from optplan.cli import main
from optplan.sweeps import load_results, run_sweep, sweep_from_dict

pd = pytest.importorskip("pandas", reason="Results.to_frame needs the pandas extra")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A finished small sweep (18 tasks: agents x environments x seeds)."""
    out = tmp_path_factory.mktemp("frame") / "sweep"
    rep = run_sweep(sweep_from_dict(small_spec(), source="small.toml"), out, quiet=True)
    assert (rep.ran, rep.failed) == (18, 0)
    return out


def test_frame_has_one_row_per_task_with_the_summary_rows_values(store):
    res = load_results(store)
    frame = res.to_frame()
    rows = res.rows
    assert len(frame) == len(rows) == 18
    assert list(frame["task_id"]) == [r["task_id"] for r in rows]
    np.testing.assert_array_equal(frame["regret"].to_numpy(), [r["regret"] for r in rows])
    assert any(c.startswith("agent.") for c in frame.columns)
    # grouping as a reader would: one mean per agent x environment, over its seeds
    means = frame.groupby(["agent", "env"])["regret"].mean()
    for (agent, env), mean in means.items():
        mine = [r["regret"] for r in rows if (r["agent"], r["env"]) == (agent, env)]
        assert mean == pytest.approx(np.mean(mine), rel=1e-12)


def test_curves_in_long_form_are_the_stored_curves(store):
    res = load_results(store)
    long = res.to_frame(curves=True)
    first = res.records[0]
    arrays = res.arrays(first)
    mine = long[long["task_id"] == first["task_id"]]
    np.testing.assert_array_equal(mine["t"].to_numpy(), arrays["t"])
    np.testing.assert_array_equal(mine["regret"].to_numpy(), arrays["regret"])
    assert len(long) == sum(res.arrays(r)["t"].size for r in res.records)


def test_cli_writes_the_table_and_the_curves_as_csv(store, tmp_path, capsys):
    table, curves = tmp_path / "table.csv", tmp_path / "curves.csv"
    assert main(["results", str(store), "--csv", str(table)]) == 0
    assert main(["results", str(store), "--curves", "--csv", str(curves)]) == 0
    assert "wrote" in capsys.readouterr().out
    with open(table, newline="") as fh:
        rows = list(csv.DictReader(fh))
    res = load_results(store)
    assert [r["task_id"] for r in rows] == [r["task_id"] for r in res.rows]
    assert [float(r["regret"]) for r in rows] == [r["regret"] for r in res.rows]
    read = pd.read_csv(curves)
    np.testing.assert_allclose(read["regret"], res.to_frame(curves=True)["regret"], rtol=1e-15)


def test_parquet_without_an_engine_names_the_package(store, tmp_path, capsys):
    if importlib.util.find_spec("pyarrow") or importlib.util.find_spec("fastparquet"):
        path = tmp_path / "table.parquet"
        assert main(["results", str(store), "--parquet", str(path)]) == 0
        assert len(pd.read_parquet(path)) == 18
        return
    assert main(["results", str(store), "--parquet", str(tmp_path / "t.parquet")]) == 2
    assert "--parquet needs a Parquet engine: pip install pyarrow" in capsys.readouterr().err


def test_bad_export_options_are_one_line_errors(store, tmp_path, capsys):
    assert main(["results", str(store), "--curves"]) == 2
    assert "--curves says what --csv or --parquet writes" in capsys.readouterr().err
    missing = tmp_path / "no-such-dir" / "t.csv"
    assert main(["results", str(store), "--csv", str(missing)]) == 2
    assert "no-such-dir" in capsys.readouterr().err
