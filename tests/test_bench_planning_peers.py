"""``optplan bench planning --peers`` (pymdptoolbox on the same instances) and the BLAS thread
limit of the benchmarks, agent runs and sweep workers."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optplan as op
from optplan.bench import Runs
from optplan.bench.planning import bench_planning
from optplan.cli import main
from optplan.envs import TabularEnv
from optplan.experiments import run
from optplan.experiments.threads import blas_threads, describe
from optplan.mdp import TabularMDP

pytest.importorskip("mdptoolbox")
threadpoolctl = pytest.importorskip("threadpoolctl")


def blas_now() -> int:
    return max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")


def test_peers_agree_on_the_same_instances():
    rows = bench_planning(
        Runs(sizes=[12, 40], repeats=2, solvers=[]), criteria=["average", "discounted"], peers=True
    )
    assert [(r["criterion"], r["S"]) for r in rows] == [
        ("average", 12),
        ("average", 40),
        ("discounted", 12),
        ("discounted", 40),
    ]
    for r in rows:
        name = "RVI" if r["criterion"] == "average" else "PI"
        other = "PI" if name == "RVI" else "RVI"
        assert r[f"peer_{name}_err"] <= 1e-9  # RVI at epsilon 1e-12; PI exact
        assert r[f"peer_{name}_s"] > 0 and r[f"peer_{name}_ratio"] > 0
        assert f"peer_{other}_s" not in r and r["best_ratio"] is None


def test_peer_run_measures_disagreement():
    """The agreement column is a real comparison: a wrong fast gain is reported as such."""
    from types import SimpleNamespace

    from optplan.bench.peers_planning import run_peer

    rng = np.random.default_rng(1)
    mdp = TabularMDP(rng.dirichlet(np.ones(6), size=(6, 2)), rng.random((6, 2)))
    right = SimpleNamespace(gain=__import__("optplan").solve_average_reward(mdp).gain)
    wrong = SimpleNamespace(gain=right.gain + 1e-3)
    assert run_peer("RVI", mdp, right)[1] <= 1e-11
    assert run_peer("RVI", mdp, wrong)[1] == pytest.approx(1e-3, abs=1e-11)
    with pytest.raises(ValueError, match="peer must be one of"):
        run_peer("VI", mdp, right)


def test_bench_reports_its_blas_threads(capsys):
    argv = ["bench", "planning", "--sizes", "6", "--repeats", "1", "--solvers", "--peers"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["blas_threads"]["threads"] == 1 and out["blas_threads"]["by"] == "threadpoolctl"
    assert out["peers"]["RVI_epsilon"] == 1e-12
    assert out["rows"][0]["peer_PI_err"] <= 1e-9 and out["rows"][1]["peer_RVI_err"] <= 1e-9
    assert main([*argv, "--quiet", "--blas-threads", "0"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("planning benchmark: random dense MDPs")
    assert first.endswith(f"; blas threads: {describe()['threads']} (library default)")


def test_agent_runs_use_one_blas_thread():
    seen = []

    class Probe:  # a random agent that looks at the BLAS threads while it runs
        def __init__(self):
            self.rng = None

        def reset(self, rng):
            self.rng = rng

        def select_action(self, state):
            seen.append(blas_now())
            return int(self.rng.integers(2))

        def update(self, *args):
            pass

    rng = np.random.default_rng(0)
    mdp = TabularMDP(rng.dirichlet(np.ones(3), size=(3, 2)), rng.random((3, 2)), discount=0.9)
    with blas_threads(None):
        run(Probe(), TabularEnv(mdp), steps=5, seed=0)
    assert seen == [1] * 5
    with blas_threads(2):
        assert blas_now() <= 2


def test_bad_blas_thread_count_is_named():
    with pytest.raises(ValueError, match="blas threads"):
        with blas_threads(0):
            pass


def test_gridworld_is_sparse_stochastic_and_matches_a_dense_build():
    from optplan.bench.planning import gridworld_mdp

    mdp = gridworld_mdp(5, discount=0.9)
    assert mdp.sparse and (mdp.n_states, mdp.n_actions) == (25, 4)
    P = mdp.dense_P()
    # from the middle cell 12, action "right": 0.9 + 0.025 to 13, 0.025 to each other neighbour
    np.testing.assert_allclose(P[12, 1, [7, 13, 17, 11]], [0.025, 0.925, 0.025, 0.025])
    # the corner 0, action "up": blocked moves (up, left) stay
    np.testing.assert_allclose(P[0, 0, [0, 1, 5]], [0.925 + 0.025, 0.025, 0.025])
    np.testing.assert_array_equal(P[24, :, 24], 1.0)  # the goal absorbs
    assert mdp.R[24].tolist() == [0.0] * 4 and (mdp.R[:24] == -1).all()
    res = op.DiscountedPlanning(mdp).solve(method="fast")
    assert np.all(np.diff(res.values.reshape(5, 5)[0]) > 0)  # closer to the goal: better
    with pytest.raises(ValueError, match="grid must be an integer >= 2, got 1"):
        gridworld_mdp(1)


def test_sparse_named_rows_check_peers_and_say_where_they_are_skipped():
    rows = bench_planning(
        Runs(sizes=[10], repeats=1, solvers=[]),
        criteria=["discounted"],
        peers=True,
        sparse=True,
        models=["taxi", "frozenlake", "grid"],
        grid=4,
        gamma=0.9,
    )
    assert [(r["model"], r["S"]) for r in rows] == [("taxi", 501), ("frozenlake", 65), ("grid", 16)]
    from optplan.bench.peers_planning import SPARSE_PEERS, sparse_peer_skip

    for r in rows:
        assert r["nnz"] > 0 and r["peak_rss_gib"] > 0 and r["fast_s"] > 0
        for peer in SPARSE_PEERS:
            if sparse_peer_skip(peer, r["S"]) is not None:  # a peer that does not import
                assert "does not import" in r[f"peer_{peer}_skip"]
                continue
            if (r["model"], peer) == ("taxi", "QE-PI"):  # cycles among Taxi's tied policies
                assert "stopped at its iteration limit" in r[f"peer_{peer}_skip"]
                continue
            assert r[f"peer_{peer}_err"] <= 1e-8 * 100  # checked to 1e-8 max(1, max|V|)
            assert r[f"peer_{peer}_ratio"] > 0
    text = __import__("optplan.bench.planning", fromlist=["x"]).format_table(rows, [])
    assert "taxi" in text and "pymdp VI s" in text and "mdpsolver s" in text
    assert "QuantEcon MPI s" in text and "iteration limit" in text


def test_sparse_structured_families_and_grid_sides_get_a_row_each():
    rows = bench_planning(
        Runs(sizes=[150], repeats=3, solvers=[]),
        criteria=["discounted", "average"],
        peers=True,
        sparse=True,
        models=["queue", "chain", "grid"],
        grid=[5, 12],
        gamma=0.99,
        tol=1e-8,
        sparse_peers=["QE-MPI"],
    )
    got = [(r["criterion"], r["model"], r["S"], r["instances"]) for r in rows]
    assert got == [("discounted", "queue", 150, 1), ("discounted", "chain", 150, 1),
                   ("discounted", "grid", 25, 1), ("discounted", "grid", 144, 1)]  # fmt: skip
    for r in rows:  # QuantEcon at the same relative accuracy, its values checked first
        assert r["peer_QE-MPI_err"] <= 1e-8 * max(1.0, 100.0)
        assert not any(k.startswith("peer_mdpsolver") for k in r)
    with pytest.raises(ValueError, match="grid must be an integer >= 2, got 1"):
        bench_planning(Runs(sizes=[10]), sparse=True, models=["grid"], grid=[5, 1])
    with pytest.raises(ValueError, match="sparse_peers must hold entries of"):
        bench_planning(Runs(sizes=[10]), sparse=True, peers=True, sparse_peers=["QE"])


def test_sparse_random_rows_time_the_peers_on_the_discounted_criterion():
    rows = bench_planning(
        Runs(sizes=[30], repeats=1, solvers=[]),
        criteria=["discounted", "average"],
        peers=True,
        sparse=True,
        models=["random"],
        gamma=0.9,
    )
    discounted, average = rows
    assert discounted["criterion"] == "discounted" and discounted["model"] == "random"
    assert discounted["peer_mdpsolver_err"] <= 1e-8 * 100
    assert discounted["peer_mdpsolver_ratio"] > 0
    assert discounted["peer_QE-MPI_err"] <= 1e-8 * 100 and discounted["peer_QE-PI_ratio"] > 0
    assert not any(k.startswith("peer_") for k in average)  # peers: discounted rows only


def test_sparse_peers_skip_large_models_with_a_reason():
    from optplan.bench.peers_planning import PI_MAX_STATES, VI_MAX_STATES, sparse_peer_skip
    from optplan.bench.planning import format_table

    assert sparse_peer_skip("PI", PI_MAX_STATES) is None
    assert "dense S x S" in sparse_peer_skip("PI", PI_MAX_STATES + 1)
    assert "cap" in sparse_peer_skip("VI", VI_MAX_STATES + 1)
    row = {"criterion": "discounted", "model": "grid", "S": 10**6, "fast_s": 1.0, "nnz": 5}
    row |= {"peak_rss_gib": 1.0, "peer_PI_skip": sparse_peer_skip("PI", 10**6)}
    text = format_table([row], [])
    assert "skipped" in text and "grid S=1000000: pymdp PI skipped above" in text
    assert "hiive PI skipped" in sparse_peer_skip("hiive-PI", 10**6)  # cap, or not installed


def test_sparse_options_are_checked_before_timing():
    with pytest.raises(ValueError, match="gamma must be a discount"):
        bench_planning(Runs(sizes=[10], repeats=1, solvers=[]), sparse=True, gamma=1.0)
    with pytest.raises(ValueError, match="add --sparse"):
        bench_planning(Runs(sizes=[10], repeats=1, solvers=[]), models=["taxi"])
    with pytest.raises(ValueError, match="models"):
        bench_planning(Runs(sizes=[10], repeats=1, solvers=[]), sparse=True, models=["maze"])


def test_cli_sparse_named_models_with_gamma(capsys):
    assert (
        main(
            ["bench", "planning", "--sparse", "--models", "frozenlake", "grid", "--grid", "3"]
            + ["--gamma", "0.99", "--solvers"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "discount 0.99" in out and "frozenlake" in out and "gridworlds 3x3" in out
