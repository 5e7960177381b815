"""``optplan demo --json``: the demo's numbers, machine-readable, and the same verdict."""

from __future__ import annotations

import json

import pytest

from optplan.cli import main


@pytest.mark.slow
def test_demo_json_has_every_check_and_the_verdict(capsys):
    status = main(["demo", "--json"])
    out = capsys.readouterr().out
    report = json.loads(out)  # stdout is the JSON document only
    assert {r["criterion"] for r in report["models"]} == {"average", "disc. 0.95", "horizon 10"}
    assert len(report["models"]) == 9 and len(report["indices"]) == 3
    checks = [*report["models"], *report["indices"], report["k_learning"]]
    for chk in checks:
        assert set(chk) >= {"value_fast", "value_conic", "max_abs_err", "fast_ms", "agree"}
        assert abs(chk["value_fast"] - chk["value_conic"]) <= 1e-6 * (1 + abs(chk["value_conic"]))
    assert report["all_cross_checks_agree"] is all(c["agree"] for c in checks)
    assert report["all_cross_checks_agree"] is (status == 0)
    assert report["cowan3_policy"] == [0, 1, 0] and report["cowan3_matches_paper"] is True
    assert report["k_learning"]["tau_fast"] == pytest.approx(
        report["k_learning"]["tau_conic"], rel=1e-6
    )
