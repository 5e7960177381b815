"""optplan.bench.peers (the transcriptions timed by ``optplan bench indices --peers``) against
optplan's indices, and the ``--peers`` rows and table."""

import numpy as np
import pytest

from optplan.bench import peers
from optplan.bench.cases import random_index_instance
from optplan.bench.indices import bench_indices, format_index_table
from optplan.fast.kl_ball import kl_ball_index
from optplan.fast.l1_ball import l1_ball_index

pytestmark = pytest.mark.skipif(not peers.available(), reason="numba not installed")


@pytest.mark.parametrize("zeros", [0.0, 0.5])
@pytest.mark.parametrize("S", [1, 2, 10, 300])
def test_peers_agree_with_optplan(S, zeros):
    rng = np.random.default_rng([S, int(zeros * 10)])
    for _ in range(15):
        p, v, r = random_index_instance(rng, S, "kl_ball", zeros)
        ref = float(kl_ball_index(p, v, r, kernel="numpy").value)
        for name, fn in peers.PEERS["kl_ball"]:
            assert fn(p, v, r) == pytest.approx(ref, abs=1e-11), name
        ref = float(l1_ball_index(p, v, r, kernel="numpy").value)
        for name, fn in peers.PEERS["l1_ball"]:
            assert fn(p, v, r) == pytest.approx(ref, abs=1e-13), name


def test_peers_at_the_boundary_and_with_ties():
    # the best state has probability zero and a large radius: the optimum leaves mass there
    p, v = np.array([0.2, 0.8, 0.0]), np.array([0.0, 1.0, 1.5])
    ref = float(kl_ball_index(p, v, 50.0).value)
    for name, fn in peers.PEERS["kl_ball"]:
        assert fn(p, v, 50.0) == pytest.approx(ref, abs=1e-11), name
    p, v = np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.0, 0.5, 0.5, 1.0])
    for d in (0.1, 0.6, 1.2, 2.0):
        assert peers.max_proba_l1(p, v, d) == pytest.approx(float(l1_ball_index(p, v, d).value))


def test_bench_rows_and_table_with_peers():
    rows = bench_indices(
        sizes=[5],
        instances=2,
        problems=["kl_ball", "l1_ball", "kl_inf"],
        solvers=["CLARABEL"],
        batch=20,
        peers=True,
    )
    by = {r["problem"]: r for r in rows}
    assert set(by["kl_ball"]["peers"]) == {"rl-agents", "filippi"}
    assert set(by["l1_ball"]["peers"]) == {"colosseum"}
    assert by["kl_inf"]["peers"] == {}
    for r in rows:
        assert r["optplan_s"] > 0 and r["kernel_s"] > 0
        # the kernel lane computes the public function's value
        assert r["kernel_max_abs_diff"] == 0.0
        for entry in r["peers"].values():
            assert entry["ratio"] == pytest.approx(entry["s"] / r["optplan_s"])
            assert entry["ratio_kernel"] == pytest.approx(entry["s"] / r["kernel_s"])
            assert entry["max_abs_diff"] < 1e-10
    table = format_index_table(rows, ["CLARABEL"])
    assert "rl-agents us" in table and "colosseum us" in table
    assert "public us" in table and "kernel us" in table and "/kernel" in table


def test_kernel_lanes_give_the_public_values():
    """The bench's kernel column times the public functions' compiled lane without the input
    check and the result object: the same value, bit for bit."""
    from optplan.bench.indices import INDEX_PATHS, kernel_lanes

    lanes = kernel_lanes()
    rng = np.random.default_rng(4)
    for problem, (_, fn) in INDEX_PATHS.items():
        for S in (2, 10, 200):
            for _ in range(5):
                p, v, r = random_index_instance(
                    rng, S, problem, 0.0 if problem == "kl_inf" else 0.3
                )
                assert lanes[problem](p, v, r) == float(fn(p, v, r).value), problem


def test_peers_without_numba_refused_before_timing(monkeypatch):
    from optplan._checks import MissingDependency
    from optplan.fast import _kernels

    monkeypatch.setattr(_kernels, "AVAILABLE", False)
    with pytest.raises(MissingDependency, match="--peers needs numba"):
        bench_indices(sizes=[5], instances=1, solvers=["CLARABEL"], peers=True)
