"""``optplan bench indices`` (the paper's §4.5 timing experiment) and its random instances."""

import dataclasses
import json
import sys

import numpy as np
import pytest

from optplan.bench import SUITES
from optplan.bench import indices as bench
from optplan.bench.cases import INDEX_PROBLEMS, random_index_instance
from optplan.bench.indices import bench_indices, format_index_table
from optplan.cli import main
from optplan.problems import SOLVERS


@pytest.mark.parametrize("problem", INDEX_PROBLEMS)
@pytest.mark.parametrize("zeros", [0.0, 0.5])
def test_random_index_instance(problem, zeros):
    rng = np.random.default_rng(3)
    for S in (1, 2, 7, 50) if problem != "kl_inf" else (2, 7, 50):
        p, v, param = random_index_instance(rng, S, problem, zeros)
        assert p.shape == v.shape == (S,)
        assert p.min() >= 0 and p.max() > 0 and abs(p.sum() - 1) < 1e-12
        assert 0 <= v.min() and v.max() < 1
        if problem == "kl_inf":
            assert p @ v < param < v.max()
        else:
            assert 0.01 <= param <= 1
    if zeros:
        p, _, _ = random_index_instance(rng, 200, problem, zeros)
        assert 50 < (p == 0).sum() < 150


def test_random_index_instance_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="problem must be one of"):
        random_index_instance(rng, 5, "kl")
    with pytest.raises(ValueError, match="no target strictly between"):
        random_index_instance(rng, 1, "kl_inf")


def _no_nan(const):
    raise ValueError(f"JSON holds {const}")


def test_bench_indices_json_and_plot(capsys, tmp_path):
    png = tmp_path / "indices.png"
    argv = ["bench", "indices", "--sizes", "5", "20", "--instances", "3", "--batch", "50"]
    assert main(argv + ["--json", "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # no progress lines, no solver warnings with --json
    out = json.loads(captured.out, parse_constant=_no_nan)
    assert out["benchmark"] == "indices" and out["instances"] == 3
    assert out["solvers"] == list(SOLVERS) and out["problems"] == list(INDEX_PROBLEMS)
    rows = out["rows"]
    assert [(r["problem"], r["S"]) for r in rows] == [
        (p, S) for p in INDEX_PROBLEMS for S in (5, 20)
    ]
    for r in rows:
        assert r["fast_fail"] == r["batch_fail"] == r["bigbatch_fail"] == 0
        assert r["fast_messages"] == []
        assert r["fast_q25"] <= r["fast_s"] <= r["fast_q75"]
        assert r["batch_s"] > 0 and r["bigbatch_s"] > 0 and r["bigbatch_n"] == 50
        assert r["batch_err"] < 1e-12  # batched = loop of single calls
        for s in SOLVERS:
            assert r[f"{s}_timed"] == 3 and r[f"{s}_skipped"] is None
            assert r[f"{s}_ratio"] > 0 and r[f"{s}_ratio_batch"] > 0
            assert r[f"{s}_q25"] <= r[f"{s}_s"] <= r[f"{s}_q75"]
            assert sum(r[f"{s}_statuses"].values()) == 3
            assert len(r[f"{s}_messages"]) <= min(r[f"{s}_fail"] + r[f"{s}_inaccurate"], 3)
            assert r[f"{s}_fail"] == sum(
                n for st, n in r[f"{s}_statuses"].items() if st not in bench.SOLUTION_PRESENT
            )
            assert r[f"{s}_inaccurate"] == r[f"{s}_statuses"].get("optimal_inaccurate", 0)
        assert r["CLARABEL_fail"] == 0
        assert r["CLARABEL_err"] < 1e-7 and r["CLARABEL_rel_err"] <= r["CLARABEL_err"]
        assert r["best_ratio"] == min(r[f"{s}_ratio"] for s in SOLVERS)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_indices_table_and_progress(capsys):
    argv = ["bench", "indices", "--sizes", "5", "--instances", "2", "--problems", "l1_ball"]
    assert main(argv + ["--solvers", "clarabel", "--batch", "0"]) == 0
    captured = capsys.readouterr()
    assert "CLARABEL s" in captured.out and "l1_ball" in captured.out
    assert captured.err.count("l1_ball S=5") == 2  # one line for the fast path, one per solver


def test_time_cap_skips_and_reports():
    rows = bench_indices(
        sizes=(5, 20, 30),
        instances=3,
        problems=("l1_ball",),
        solvers=("ECOS", "CLARABEL"),
        batch=0,
        max_conic_seconds=0.0,
    )
    first, second, third = rows
    for s in ("ECOS", "CLARABEL"):
        assert first[f"{s}_timed"] == 1 and first[f"{s}_s"] > 0
        assert first[f"{s}_skipped"] == "skipped after 0 s (1 of 3 instances timed)"
        for later in (second, third):
            assert later[f"{s}_timed"] == 0 and later[f"{s}_s"] is None
            assert later[f"{s}_ratio"] is None
            assert later[f"{s}_skipped"] == "skipped after 0 s at S=5"
    assert first["bigbatch_s"] is None and second["best_ratio"] is None
    table = format_index_table(rows, ("ECOS", "CLARABEL"))
    assert table.count("skipped after 0 s at S=5") == 4
    assert "* ECOS at l1_ball S=5: skipped after 0 s (1 of 3 instances timed)" in table


def test_large_batch_only_below_element_cap(monkeypatch):
    monkeypatch.setattr(bench, "MAX_BATCH_ELEMENTS", 100)
    rows = bench_indices(sizes=(5, 30), instances=2, problems=("kl_ball",), solvers=(), batch=20)
    assert rows[0]["bigbatch_s"] > 0 and rows[1]["bigbatch_s"] is None


def test_missing_matplotlib_is_a_cli_error_before_timing(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    never = dataclasses.replace(SUITES["indices"], bench=None)  # never reached
    monkeypatch.setitem(SUITES, "indices", never)
    argv = ["bench", "indices", "--sizes", "5", "--instances", "1", "--problems", "kl_ball"]
    assert main(argv + ["--solvers", "ECOS", "--quiet", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'optplan[plot]'" in capsys.readouterr().err


def _capped_rows():
    """Rows shaped like ``bench_indices``'s: SCS hits its time cap at the largest size it ran
    (3 of 15 instances timed, near the top of the panel) and is skipped above it."""
    rows = []
    for S, fast, conic in ((10, 1e-4, 5e-3), (100, 1e-4, 2e-2), (1000, 1.2e-4, 59.4)):
        row = {"problem": "kl_inf", "S": S, "instances": 15, "bigbatch_n": 1000}
        row.update(fast_s=fast, fast_q25=0.9 * fast, fast_q75=1.1 * fast)
        row.update(batch_s=fast / 10, bigbatch_s=fast / 20)
        capped = S == 1000
        row.update(
            SCS_s=conic,
            SCS_q25=0.5 * conic,
            SCS_q75=(2.0 if capped else 1.1) * conic,
            SCS_skipped="skipped after 120 s" if capped else None,
            SCS_timed=3 if capped else 15,
        )
        rows.append(row)
    rows.append(
        {
            "problem": "kl_inf",
            "S": 10000,
            "instances": 15,
            "bigbatch_n": 1000,
            "fast_s": 3e-4,
            "fast_q25": 2.8e-4,
            "fast_q75": 3.2e-4,
            "batch_s": 2e-4,
            "bigbatch_s": None,
            "SCS_s": None,
            "SCS_q25": None,
            "SCS_q75": None,
            "SCS_skipped": "skipped after 120 s at S=1000",
            "SCS_timed": None,
        }
    )
    return rows


def test_capped_note_crosses_no_frame_and_no_curve(tmp_path, monkeypatch):
    """The "k/n timed; larger S not run" note sits where no axis frame, line or band crosses
    it: its rendered box does not overlap the panel (frame included)."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from optplan.bench import index_plot

    drawn = []

    class Keep(Figure):
        def savefig(self, *args, **kwargs):
            drawn.append(self)
            return super().savefig(*args, **kwargs)

    monkeypatch.setattr(index_plot, "require_matplotlib", lambda: Keep)
    index_plot.plot_indices(_capped_rows(), tmp_path / "i.png", ["SCS"])
    (fig,) = drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    (ax,) = fig.axes
    notes = [t for t in fig.findobj(lambda a: hasattr(a, "get_text")) if "timed" in a_text(t)]
    assert notes, "the capped size's note is drawn"
    frame = ax.get_window_extent(renderer)
    for note in notes:
        box = note.get_window_extent(renderer)
        assert not box.overlaps(frame), (note.get_text(), box, frame)
    assert any("3/15" in a_text(t) and "1,000" in a_text(t) for t in notes)


def a_text(artist) -> str:
    return artist.get_text() if hasattr(artist, "get_text") else ""
