"""A dense model's policy chain read in place (optplan.dp._linear.DenseChain): its
products against the gathered matrix, the iterative solves and the factorization fallback
through it, and the dense discounted path built on it against exact policy iteration."""

from __future__ import annotations

import numpy as np
import pytest

from optplan.bench.cases import random_mdp
from optplan.dp import _linear as dd
from optplan.dp._common import policy_model
from optplan.mdp import TabularMDP
from optplan.problems import DiscountedPlanning

pytest.importorskip("numba")


def _chain(S=40, A=3, seed=0):
    mdp = random_mdp(np.random.default_rng(seed), S, A)
    policy = np.random.default_rng(seed + 1).integers(0, A, S)
    chain, r_pi = dd.dense_chain(mdp.P, mdp.R, policy)
    P_pi, r_gather = policy_model(mdp.P, mdp.R, policy)
    assert isinstance(chain, dd.DenseChain)
    np.testing.assert_array_equal(r_pi, r_gather)
    return chain, P_pi, r_pi


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_products_match_the_gathered_chain(seed):
    chain, P_pi, _ = _chain(seed=seed)
    x = np.random.default_rng(seed).normal(size=P_pi.shape[0])
    np.testing.assert_allclose(chain @ x, P_pi @ x, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(chain.T @ x, P_pi.T @ x, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(chain.T.T @ x, P_pi @ x, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(chain), P_pi)
    np.testing.assert_array_equal(np.asarray(chain.T), P_pi.T)
    np.testing.assert_array_equal(0.9 * chain, 0.9 * P_pi)
    np.testing.assert_array_equal(np.float64(0.9) * chain.T, 0.9 * P_pi.T)
    assert chain.shape == P_pi.shape


def test_solves_through_the_chain_match_the_factorization():
    chain, P_pi, r_pi = _chain(S=60)
    gamma = 0.9
    exact = np.linalg.solve(np.eye(60) - gamma * P_pi, r_pi)
    x0 = np.zeros(60)
    V = dd._krylov(chain, r_pi, gamma, x0, 1e-12, "test", True)
    np.testing.assert_allclose(V, exact, atol=1e-10)
    np.testing.assert_allclose(dd._direct(chain, r_pi, gamma, x0), exact, atol=1e-10)
    np.testing.assert_allclose(dd._gmres(chain, r_pi, gamma, x0, 1e-12, "test"), exact, atol=1e-10)
    start = np.full(60, 1 / 60)
    occ = dd.discounted_occupancy(chain, start, gamma, iterative=True)
    np.testing.assert_allclose(occ, dd.discounted_occupancy(P_pi, start, gamma), atol=1e-12)


def test_falls_back_to_the_gather(monkeypatch):
    mdp = random_mdp(np.random.default_rng(3), 10, 2)
    policy = np.zeros(10, dtype=int)
    P_pi, _ = policy_model(mdp.P, mdp.R, policy)
    strided = np.asfortranarray(mdp.P.reshape(20, 10))  # rows not C-contiguous: gathered
    out, _ = dd.dense_chain(strided, mdp.R, policy)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, P_pi)
    monkeypatch.setattr(dd._JIT, "compiled_or_none", lambda: None)  # as without numba
    out, _ = dd.dense_chain(mdp.P, mdp.R, policy)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, P_pi)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("gamma", [0.5, 0.95, 0.99])
def test_iterative_dense_path_matches_exact_policy_iteration(seed, gamma):
    mdp = random_mdp(np.random.default_rng(seed), 220, 3, mask=True).with_discount(gamma)
    it = DiscountedPlanning(mdp).solve(method="fast", evaluation="iterative")
    ex = DiscountedPlanning(mdp).solve(method="fast", evaluation="direct")
    assert it.status == "optimal" and ex.status == "optimal"
    scale = np.abs(ex.values).max()
    np.testing.assert_allclose(it.values, ex.values, atol=1e-9 * scale)
    np.testing.assert_allclose(it.occupancy, ex.occupancy, atol=1e-10)
    assert mdp.action_mask[np.arange(220), it.policy].all()


def test_slowly_mixing_dense_chain_uses_the_factorization():
    """A deterministic cycle (period S) never mixes: the fixed point hands over to the
    factorization, which gathers the chain's rows."""
    S, A = 210, 2
    P = np.zeros((S, A, S))
    P[np.arange(S), 0, (np.arange(S) + 1) % S] = 1.0
    P[np.arange(S), 1, (np.arange(S) + 2) % S] = 1.0
    R = np.zeros((S, A))
    R[0] = 1.0
    mdp = TabularMDP(P, R, 0.99)
    it = DiscountedPlanning(mdp).solve(method="fast", evaluation="iterative")
    ex = DiscountedPlanning(mdp).solve(method="fast", evaluation="direct")
    assert it.status == "optimal"
    np.testing.assert_allclose(it.values, ex.values, atol=1e-9 * np.abs(ex.values).max())
