"""``optplan bench planning --peers`` (pymdptoolbox on the same instances) and the BLAS thread
limit of the benchmarks, agent runs and sweep workers."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
