"""``optplan.bench``: every problem stem has a bench row, and the suite table drives the CLI."""

import dataclasses
import inspect
import json

import numpy as np
import pytest

import optplan.problems as problems
from optplan._checks import OptplanError
from optplan.bench import BENCHED_STEMS, SUITES, Runs
from optplan.bench._common import forkable
from optplan.bench.cases import (
    INDEX_PROBLEMS,
    deepsea_instance,
    garnet_transitions,
    random_moment_matching,
    random_pv,
    random_ube,
)
from optplan.bench.indices import INDEX_PATHS, bench_indices
from optplan.bench.planning import PLANNING_PROBLEMS
from optplan.bench.ube import UBE_PROBLEMS, bench_ube
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
    assert SUITES["ube"].stems == set(UBE_PROBLEMS) == {"ube", "moment_matching"}
    for stem, make in UBE_PROBLEMS.items():
        assert make(np.random.default_rng(0), 3, 2).stem == stem


def test_the_cli_has_one_subcommand_per_suite():
    assert list(SUITES) == [
        "planning",
        "indices",
        "k-learning",
        "index-agents",
        "ube",
        "optimistic",
        "ravi",
        "agents",
    ]
    for name, suite in SUITES.items():
        args = build_parser().parse_args(["bench", name])
        assert args.suite == name
        keywords = inspect.signature(suite.bench).parameters
        # every bench keyword but progress is made of options (an option object such as Runs
        # of the options its fields name); the options no keyword takes are the command's own
        # (and --plot, read by the suite's finish)
        options = suite.options(args)
        assert set(options) == set(keywords) - {"progress"}
        used = set(options)
        for value in options.values():
            if dataclasses.is_dataclass(value):
                used |= {f.name for f in dataclasses.fields(value)}
        assert set(vars(args)) - used <= {
            "command",
            "suite",
            "func",
            "json",
            "quiet",
            "blas_threads",
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


def test_garnet_cases_are_sparse_distributions():
    rng = np.random.default_rng(3)
    P = garnet_transitions(rng, (30, 4), 30, next_states=3)
    assert P.shape == (30, 4, 30) and P.min() >= 0
    assert np.allclose(P.sum(-1), 1, atol=1e-12, rtol=0)
    assert 1 <= (P > 0).sum(-1).min() and (P > 0).sum(-1).max() <= 3
    ube = random_ube(rng, 30, 4, discount=0.9, next_states=2)
    assert ube.discount == 0.9 and (ube.mean_transitions > 0).sum(-1).max() <= 2
    mm = random_moment_matching(rng, 30, 4, next_states=2)
    assert (mm.alpha > 0).sum(-1).max() <= 2  # the mean model keeps the Garnet support
    assert (mm.bellman.mean_transitions > 0).sum(-1).max() <= 2


def test_ube_suite_tiny_run(capsys):
    argv = ["bench", "ube", "--sizes", "10", "20", "--instances", "2", "--mm-pairs", "10"]
    argv += ["--solvers", "CLARABEL", "ECOS", "--mm-solvers", "CLARABEL", "SCS"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "ube" and out["sizes"] == [10, 20] and out["actions"] == 5
    rows = out["rows"]
    assert [(r["problem"], r["fast"], r["pairs"], r["S"]) for r in rows] == [
        ("ube", "direct", 10, 2),
        ("ube", "iteration", 10, 2),
        ("ube", "direct", 20, 4),
        ("ube", "iteration", 20, 4),
        ("moment_matching", "direct", 10, 2),
    ]
    for r in rows:
        assert r["fast_fail"] == 0 and r["fast_s"] > 0
        for s in ("CLARABEL", "ECOS") if r["problem"] == "ube" else ("CLARABEL",):
            assert r[f"{s}_timed"] == 2 and r[f"{s}_fail"] == 0 and r[f"{s}_skipped"] is None
            assert r[f"{s}_ratio"] == pytest.approx(r[f"{s}_s"] / r["fast_s"])
            assert r[f"{s}_u_rel"] < 1e-7 and r[f"{s}_y_rel"] < 1e-7
            assert r[f"{s}_beyond_tol"] == 0
            assert sum(r[f"{s}_statuses"].values()) == 2
        solved = [r[f"{s}_ok_s"] for s in ("CLARABEL", "ECOS") if r[f"{s}_ok"]]
        assert all(t is not None for t in solved)
        assert r["best_ratio"] == (min(solved) / r["fast_s"] if solved else None)
        assert r["best_ratio_any"] == min(
            r[f"{s}_ratio"] for s in ("CLARABEL", "ECOS") if r[f"{s}_ratio"] is not None
        )
    mm = rows[-1]
    assert mm["ECOS_s"] is None and mm["ECOS_skipped"] == "not run (--mm-solvers)"
    assert "SCS_s" not in mm  # SCS is not one of --solvers: no column, not run
    # the iteration rows share the direct rows' conic solves
    assert rows[0]["CLARABEL_s"] == rows[1]["CLARABEL_s"]
    assert main([*argv, "--quiet"]) == 0
    text = capsys.readouterr().out.splitlines()
    rule = next(i for i, line in enumerate(text) if set(line) == {"-"})
    lines = [line for line in text if line.startswith(("ube ", "moment_matching "))]
    assert len(lines) == 5 and text[rule + 1 : rule + 6] == lines
    assert all(len(line) == len(text[rule]) == len(text[rule - 1]) for line in lines)
    assert "not run (--mm-solvers)" in lines[-1]


@pytest.mark.skipif(not forkable(), reason="the cap interrupts a solve only where fork exists")
def test_ube_time_cap_kills_a_solve_in_progress():
    rows = bench_ube(
        Runs(sizes=(10, 20), n_actions=5, repeats=2, solvers=("CLARABEL",)), max_conic_seconds=0.0
    )
    first, _, second, _, mm = rows
    assert first["CLARABEL_s"] is None and first["CLARABEL_timed"] == 0
    assert first["CLARABEL_skipped"] == "killed mid-solve at 0 s (0 of 2 instances timed)"
    assert second["CLARABEL_skipped"] == "skipped after 0 s at pairs=10"
    assert first["best_ratio"] is None and first["best_ratio_any"] is None
    assert mm["problem"] == "moment_matching" and mm["CLARABEL_timed"] == 0


def test_ube_bad_sizes_are_named_before_timing():
    with pytest.raises(OptplanError, match="sizes counts state-action pairs .* got 12"):
        bench_ube(Runs(sizes=(10, 12), n_actions=5))
    with pytest.raises(OptplanError, match="mm_pairs counts state-action pairs"):
        bench_ube(Runs(sizes=(10,), n_actions=5), mm_pairs=7)
    with pytest.raises(OptplanError, match="model too large"):
        bench_ube(Runs(sizes=(10**6,), n_actions=2))


def test_bench_optimistic_tiny_run():
    from optplan.bench.optimistic import bench_optimistic, format_table

    rows = bench_optimistic(
        Runs(sizes=[3], repeats=1, solvers=["CLARABEL"]), variants=["l1-discounted", "kl-average"]
    )
    assert [r["variant"] for r in rows] == ["l1-discounted", "kl-average"]
    for r in rows:
        assert r["fast_s"] > 0 and r["CLARABEL_ratio"] > 0 and r["CLARABEL_skipped"] is None
        assert r["CLARABEL_err"] <= 1e-6
        # the fastest successful solver, instance by instance (None if nothing was optimal)
        if r["CLARABEL_optimal"]:
            assert r["best_ratio"] == r["CLARABEL_ok_ratio"] > 0
        else:
            assert r["best_ratio"] is None and r["CLARABEL_ok_ratio"] is None
    assert "l1-discounted" in format_table(rows, ["CLARABEL"])
    with pytest.raises(OptplanError, match="variants"):
        bench_optimistic(Runs(sizes=[3]), variants=["l2-discounted"])


@pytest.mark.skipif(not forkable(), reason="the cap interrupts a solve only where fork exists")
def test_bench_optimistic_cap_cuts_a_solver_off():
    from optplan.bench.optimistic import bench_optimistic, format_table

    rows = bench_optimistic(
        Runs(sizes=[3, 4], repeats=1, solvers=["SCS"]),
        variants=["kl-discounted"],
        max_conic_seconds=1e-3,
    )
    first, second = rows
    assert "cap at S = 3" in first["SCS_skipped"] and "cap at S = 3" in second["SCS_skipped"]
    assert first["SCS_ratio_above"] == pytest.approx(1e-3 / first["fast_s"])
    assert "SCS_ratio_above" not in second and first["best_ratio"] is None
    table = format_table(rows, ["SCS"])
    assert "over cap, ratio >" in table and "skipped (over cap below)" in table


def test_bench_ravi_tiny_run():
    from optplan.bench.ravi import bench_ravi, format_table

    (row,) = bench_ravi(Runs(sizes=[4], repeats=1, solvers=["CLARABEL"]), parts=["planning"])
    assert row["part"] == "planning"
    assert row["fast_s"] > 0 and row["ravi_steps"] >= 1 and row["ravi_err"] < 1e-7
    assert row["CLARABEL_optimal"] == 1 and row["CLARABEL_err"] <= 1e-6
    assert row["CLARABEL_skipped"] is None
    assert "RAVI s" in format_table([row], ["CLARABEL"])
    with pytest.raises(OptplanError, match="eta"):
        bench_ravi(Runs(sizes=[3]), eta=0.0)


def test_bench_ravi_agents_tiny_run(capsys):
    from optplan.bench.ravi import RaviAgents, bench_ravi, bench_ravi_agents

    rows = bench_ravi_agents(
        RaviAgents(agent_sizes=[4, 7], dims=[2, 3], agent_steps=300, agent_repeats=2)
    )
    assert [(r["agent"], r["S"], r["d"]) for r in rows] == [
        ("ravi-ucb", 4, None),
        ("ravi-ucb-linear", 4, 2),
        ("ravi-ucb-linear", 4, 3),
        ("ravi-ucb", 7, None),
        ("ravi-ucb-linear", 7, 2),
        ("ravi-ucb-linear", 7, 3),
    ]
    for r in rows:
        assert r["part"] == "agents" and r["A"] == 2 and r["steps"] == 300 and r["repeats"] == 2
        # the agent's own time is part of the loop's: fewer loop steps per second
        assert r["agent_steps_per_s"] > r["loop_steps_per_s"] > 0
        assert 300 * 0.1 * 0.5 < r["epochs"] < 300 * 0.1 * 1.5  # one epoch per reset (gamma 0.9)
    argv = ["bench", "ravi", "--parts", "agents", "--agent-sizes", "5", "--dims", "2"]
    assert main([*argv, "--agent-steps", "200", "--agent-repeats", "1", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("RAVI-UCB agents: steps per second, median of 1 runs of 200 steps")
    head = out[1]
    assert "agent steps/s" in head and len(out) == 5
    assert out[3].startswith("ravi-ucb            5    -") and out[4].startswith("ravi-ucb-linear")
    with pytest.raises(OptplanError, match="parts must hold entries of"):
        bench_ravi(parts=["speed"])
    with pytest.raises(OptplanError, match="agent_steps must be a positive integer"):
        bench_ravi(parts=["agents"], agents=RaviAgents(agent_steps=0))
    with pytest.raises(OptplanError, match=r"dims\[0\] must be a positive integer"):
        bench_ravi(parts=["agents"], agents=RaviAgents(dims=[0]))
    with pytest.raises(OptplanError, match="agent_discount must lie in"):
        bench_ravi(parts=["agents"], agents=RaviAgents(agent_discount=1.0))


_TINY = {
    "agents": ["--agents", "ucrl2", "oracle", "--steps", "30", "--warmup", "5"],
    "planning": ["--sizes", "3", "--criteria", "discounted", "--solvers", "CLARABEL"],
    "k-learning": ["--sizes", "3", "4", "--instances", "1", "--solvers", "CLARABEL"],
    "index-agents": [
        *("--sizes", "3", "--fast-steps", "5", "--conic-steps", "2", "--compiled-steps", "5"),
    ],
    "ube": ["--sizes", "10", "--instances", "1", "--mm-pairs", "10", "--solvers", "CLARABEL"],
    "optimistic": ["--sizes", "3", "4", "--repeats", "1", "--solvers", "CLARABEL"],
    "ravi": [
        *("--sizes", "3", "--repeats", "1", "--solvers", "CLARABEL", "--agent-sizes", "3"),
        *("--dims", "2", "3", "--agent-steps", "20", "--agent-repeats", "1"),
    ],
}


@pytest.mark.parametrize("name", sorted(_TINY))
def test_suite_total_counts_its_progress_lines(name):
    """The bar's ETA comes from ``Suite.total``: it must equal the progress lines the suite
    reports, or the bar ends early or never fills."""
    suite = SUITES[name]
    assert suite.total is not None
    args = build_parser().parse_args(["bench", name, *_TINY[name]])
    lines: list[str] = []
    suite.bench(**suite.options(args), progress=lines.append)
    assert len(lines) == suite.total(args) > 0


def test_bench_agents_rows_and_table():
    """``bench agents``: a row per (agent, case) it fits, the compiled rate where an engine
    covers the run and the engine's reason where none does; bad options refused first."""
    from optplan.bench.agents import bench_agents, format_agents_table

    names = ["ucrl2", "k-learning", "ucbvi"]
    rows = bench_agents(agents=names, steps=40, warmup=5, param=["delta=0.1"])
    cases = [(r["agent"], r["case"]) for r in rows]
    assert cases == [
        ("ucrl2", "riverswim-6"),
        ("ucrl2", "cowan3"),
        ("k-learning", "deepsea-20"),
        ("ucbvi", "deepsea-20"),
    ]
    for r in rows[:3]:
        assert r["compiled_steps_per_s"] > 0 and r["generic_steps_per_s"] > 0
        assert r["ratio"] == r["compiled_steps_per_s"] / r["generic_steps_per_s"]
    assert rows[3]["compiled_steps_per_s"] is None and rows[3]["ratio"] is None
    assert rows[3]["compiled_note"] == "no engine for UCBVI"
    lines = format_agents_table(rows).splitlines()
    head = ["agent", "case", "compiled/s", "compile", "s", "generic/s", "compile", "s"]
    assert lines[0].split()[:8] == head
    # numba's compile seconds of each warm-up: a number where the loop ran, none where it did not
    for r in rows[:3]:
        assert r["compile_s"] >= 0.0 and r["generic_compile_s"] >= 0.0
    assert rows[3]["compile_s"] is None and rows[3]["generic_compile_s"] >= 0.0
    assert lines[5].startswith("ucbvi             deepsea-20") and "no engine" in lines[5]
    with pytest.raises(OptplanError, match="unknown agent 'nope'"):
        bench_agents(agents=["nope"])
    with pytest.raises(OptplanError, match="param 'zeta' is a parameter of none"):
        bench_agents(agents=["ucrl2"], param=["zeta=1"])
    with pytest.raises(OptplanError, match="NAME=VALUE"):
        bench_agents(agents=["ucrl2"], param=["delta"])
    with pytest.raises(OptplanError, match="steps"):
        bench_agents(agents=["ucrl2"], steps=0)
