"""The mdpsolver adapter (optplan.bench.mdpsolver_peer): its input from dense and sparse
models, masked actions, its values against optplan's, and its errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from optplan._checks import MissingDependency, OptplanError
from optplan.bench import mdpsolver_peer as peer
from optplan.bench.cases import random_mdp
from optplan.mdp import TabularMDP
from optplan.problems import DiscountedPlanning


def _masked(mdp: TabularMDP, seed: int) -> TabularMDP:
    rng = np.random.default_rng(seed)
    mask = rng.random(mdp.shape) < 0.6
    mask[np.arange(mdp.n_states), rng.integers(0, mdp.n_actions, mdp.n_states)] = True
    return mdp.with_mask(mask)


def _agree(mdp: TabularMDP, algorithm: str = peer.ALGORITHM) -> None:
    fast = DiscountedPlanning(mdp).solve(method="fast")
    run = peer.solve(mdp, algorithm=algorithm)
    V = np.asarray(fast.values)
    assert run.values.shape == V.shape and run.policy.shape == V.shape
    assert np.abs(run.values - V).max() <= 1e-8 * max(1.0, np.abs(V).max())
    assert mdp.action_mask[np.arange(mdp.n_states), run.policy].all()
    # mdpsolver's policy is optimal: its own values (exact evaluation) are optplan's
    P_pi = mdp.dense_P()[np.arange(mdp.n_states), run.policy]
    r_pi = mdp.R[np.arange(mdp.n_states), run.policy]
    V_pi = np.linalg.solve(np.eye(mdp.n_states) - mdp.discount * P_pi, r_pi)
    assert np.abs(V_pi - V).max() <= 1e-8 * max(1.0, np.abs(V).max())
    assert run.seconds > 0 and run.setup_seconds > 0


pytest.importorskip("mdpsolver")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma", [0.5, 0.95, 0.99])
def test_dense_and_sparse_agree_with_optplan(seed, gamma):
    mdp = random_mdp(np.random.default_rng(seed), 30, 3).with_discount(gamma)
    _agree(mdp)
    _agree(mdp.to_sparse())


@pytest.mark.parametrize("algorithm", peer.ALGORITHMS)
def test_each_algorithm(algorithm):
    mdp = random_mdp(np.random.default_rng(7), 25, 4).with_discount(0.9)
    _agree(mdp, algorithm)


@pytest.mark.parametrize("seed", [3, 4])
def test_masked_actions_map_back(seed):
    mdp = _masked(random_mdp(np.random.default_rng(seed), 20, 4).with_discount(0.9), seed)
    # masked pairs reward more than any admissible one: taking one would show in the values
    R = np.where(mdp.action_mask, mdp.R, 50.0)
    mdp = TabularMDP(mdp.P, R, 0.9, action_mask=mdp.action_mask)
    _agree(mdp)
    _agree(mdp.to_sparse())


def test_sparse_input_keeps_the_csr_rows():
    """The sparse lists are the CSR rows' own entries (no densified zeros)."""
    P = np.zeros((3, 2, 3))
    P[0, 0, 1] = P[0, 1, 2] = P[1, 0, 0] = P[1, 1, 1] = P[2, 0, 2] = 1.0
    P[2, 1, [0, 2]] = 0.5
    mdp = TabularMDP(sp.csr_matrix(P.reshape(6, 3)), np.arange(6.0).reshape(3, 2), 0.8)
    built = peer.build_input(mdp)
    assert "tranMatWithZeros" not in built.kwargs
    assert built.kwargs["tranMatColumns"] == [[[1], [2]], [[0], [1]], [[2], [0, 2]]]
    assert built.kwargs["tranMatProbs"][2] == [[1.0], [0.5, 0.5]]
    dense = peer.build_input(mdp.to_dense())
    assert np.asarray(dense.kwargs["tranMatWithZeros"]).shape == (3, 2, 3)
    # a reused input gives the same answer as a fresh one, and each solve starts cold
    a = peer.solve(mdp, built=built)
    b = peer.solve(mdp, built=built)
    assert np.array_equal(a.values, b.values) and np.array_equal(a.policy, b.policy)
    _agree(mdp)


def test_bad_input_is_refused():
    mdp = random_mdp(np.random.default_rng(0), 5, 2)
    with pytest.raises(OptplanError, match="discount"):
        peer.solve(mdp)  # no discount: average reward
    with pytest.raises(OptplanError, match="discount"):
        peer.solve(mdp.with_discount(0.0))
    g = mdp.with_discount(0.9)
    with pytest.raises(OptplanError, match="algorithm"):
        peer.solve(g, algorithm="lp")
    with pytest.raises(OptplanError, match="tolerance"):
        peer.solve(g, tolerance=0.0)
    other = peer.build_input(random_mdp(np.random.default_rng(0), 6, 2).with_discount(0.9))
    with pytest.raises(OptplanError, match="6 states"):
        peer.solve(g, built=other)
    assert peer.default_tolerance(g) == pytest.approx(peer.RELATIVE_TOLERANCE * 10.0)


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mdpsolver", None)
    assert not peer.available()
    with pytest.raises(MissingDependency, match=r"optplan\[bench\]"):
        peer.solve(random_mdp(np.random.default_rng(0), 4, 2).with_discount(0.9))
