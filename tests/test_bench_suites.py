"""``optplan.bench``: every problem stem has a bench row, and the suite table drives the CLI."""

import inspect
import json

import numpy as np
import pytest

import optplan.problems as problems
from optplan.bench import BENCHED_STEMS, SUITES
from optplan.bench.cases import INDEX_PROBLEMS, deepsea_instance, random_pv
from optplan.bench.indices import INDEX_PATHS, bench_indices
from optplan.bench.planning import PLANNING_PROBLEMS
from optplan.cli import build_parser, main
from optplan.problems.base import Problem


def problem_classes() -> set[type[Problem]]:
    return {
        obj
        for obj in vars(problems).values()
        if inspect.isclass(obj) and issubclass(obj, Problem) and obj is not Problem
    }


def test_every_problem_stem_has_a_bench_row():
    stems = {cls.stem for cls in problem_classes()}
    assert len(stems) >= 7
    assert stems <= BENCHED_STEMS, f"no bench suite times {sorted(stems - BENCHED_STEMS)}"


def test_benched_stems_come_from_the_suites_tables():
    assert BENCHED_STEMS == frozenset().union(*(s.stems for s in SUITES.values()))
    assert SUITES["planning"].stems == {cls.stem for cls, _ in PLANNING_PROBLEMS.values()}
    assert SUITES["indices"].stems == set(INDEX_PATHS) == set(INDEX_PROBLEMS)
    assert tuple(INDEX_PATHS) == INDEX_PROBLEMS  # the CLI's choices, in the table's order
    for stem, (cls, batched) in INDEX_PATHS.items():
        assert cls.stem == stem and callable(batched)
    assert SUITES["k-learning"].stems == {deepsea_instance(2, np.random.default_rng(0)).stem}


def test_the_cli_has_one_subcommand_per_suite():
    assert list(SUITES) == ["planning", "indices", "k-learning", "index-agents"]
    for name, suite in SUITES.items():
        args = build_parser().parse_args(["bench", name])
        assert args.suite == name
        keywords = inspect.signature(suite.bench).parameters
        # every bench keyword but progress is an option; the options that are not keywords
        # are the command's own (and --plot, read by the suite's finish)
        assert set(keywords) - {"progress"} <= set(vars(args))
        assert set(vars(args)) - set(keywords) <= {
            "command",
            "suite",
            "func",
            "json",
            "quiet",
            "plot",
        }
    funcs = {build_parser().parse_args(["bench", name]).func for name in SUITES}
    assert len(funcs) == 1


def test_finite_horizon_rows_on_request(capsys):
    argv = ["bench", "planning", "--sizes", "4", "--repeats", "1", "--solvers", "CLARABEL"]
    assert main([*argv, "--criteria", "finite_horizon", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["criterion"] == "finite_horizon" and row["CLARABEL_fail"] == 0
    assert row["CLARABEL_err"] < 1e-7
    assert main([*argv, "--criteria", "finite_horizon", "average", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "finite horizon 10 layers" in out
    head, rule, fh, avg = out.strip().splitlines()[-4:]
    assert fh.startswith("finite_horizon ") and avg.startswith("average ")
    assert len(head) == len(rule) == len(fh) == len(avg)  # the criterion column widens


def test_unknown_index_problem_is_named():
    with pytest.raises(ValueError, match="problem must be one of"):
        bench_indices(sizes=(5,), instances=1, problems=("kl",), solvers=())


def test_random_pv_shapes_and_structure():
    for seed in range(20):
        p, v = random_pv(seed)
        assert p.shape == v.shape and 1 <= p.size <= 60
        assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
    p, v = random_pv(2, S=10)  # kind 2: the best state has probability zero
    assert p[0] == 0 and v[0] == v.max()
    assert random_pv(7, S=5)[0].shape == (5,)
