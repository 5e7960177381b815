"""The sparse discounted solve's strategies: Jacobi value iteration from 0 that certifies on
terminating models, modified policy iteration with Gauss-Seidel sweeps in flow order from
the kept rewards on goal-directed ones, the hand-over to policy iteration, and the
Gauss-Seidel policy evaluations; each checked against an exact (factorized) answer."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import optplan as op
from optplan.bench.planning import gridworld_mdp, random_sparse_mdp
from optplan.dp import _flow as F
from optplan.dp import _linear as L
from optplan.dp import discounted as D
from optplan.dp._sweeps import sweeps

pytestmark = pytest.mark.skipif(sweeps() is None, reason="needs numba (optplan[jit])")


def _exact(mdp):
    """Howard's policy iteration with exact evaluations (dense LU) on the densified model."""
    dense = op.TabularMDP(mdp.dense_P(), mdp.R, mdp.discount, action_mask=mdp.action_mask)
    return op.DiscountedPlanning(dense).solve(method="fast", evaluation="direct")


def _chain_mdp(n: int, discount: float):
    """A deterministic path 0 -> 1 -> ... -> n-1 (absorbing): action 0 stays put, action 1
    moves on, reward 1 for the move into n-1 and 0 otherwise. Terminating, like Taxi: value
    iteration from 0 is exact after n sweeps, the one state that learns of the reward each
    sweep changing its greedy action."""
    S, A = n, 2
    nxt = np.minimum(np.arange(S) + 1, S - 1)
    rows = np.arange(S * A)
    cols = np.empty(S * A, dtype=np.int64)
    cols[0::2], cols[1::2] = np.arange(S), nxt
    P = sp.csr_matrix((np.ones(S * A), (rows, cols)), shape=(S * A, S))
    R = np.zeros((S, A))
    R[S - 2, 1] = 1.0
    return op.TabularMDP(P, R, discount)


def test_flow_order_visits_each_state_after_its_successor():
    mdp = _chain_mdp(6, 0.9)
    order = L.flow_order(mdp.P_rows, np.ones(6, dtype=np.intp), 2)
    assert order.tolist() == [5, 4, 3, 2, 1, 0]


@pytest.mark.parametrize("discount", [0.9, 0.99])
def test_terminating_model_is_certified_by_value_iteration(discount):
    mdp = _chain_mdp(40, discount)
    assert not F._kept_start(mdp.P_rows, mdp.R, mdp.action_mask, discount)
    res = op.DiscountedPlanning(mdp).solve(method="fast")
    assert res.status == "optimal"
    assert res.message.startswith("value iteration: ")
    exact = _exact(mdp)
    np.testing.assert_allclose(res.values, exact.values, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(res.policy, exact.policy)


@pytest.mark.parametrize("discount", [0.9, 0.99])
def test_gridworld_takes_gauss_seidel_from_the_kept_rewards(discount):
    mdp = gridworld_mdp(14, discount=discount)
    assert F._kept_start(mdp.P_rows, mdp.R, mdp.action_mask, discount)
    out = D.discounted_policy_iteration(mdp.P_rows, mdp.R, mdp.action_mask, discount)
    assert out.status == "optimal"
    assert out.message.startswith("modified policy iteration (Gauss-Seidel, flow order)")
    exact = _exact(mdp)
    scale = np.abs(exact.values).max()
    # the certificate: ||V - V*|| <= bound <= tol max|V|, and it holds against the exact V*
    assert out.bound <= 1e-10 * scale
    assert np.abs(out.values - exact.values).max() <= out.bound + 1e-12 * scale
    # the policy's own values are within the bound as well
    own = L.evaluate_discounted(*op.dp.policy_model(mdp.dense_P(), mdp.R, out.policy), discount)
    assert np.abs(own - exact.values).max() <= 2 * out.bound + 1e-12 * scale


def _goal_at(mdp, goal: int):
    """``mdp`` with its states relabelled so that its goal (the last state) is ``goal``."""
    S, A = mdp.n_states, mdp.n_actions
    perm = np.arange(S)
    perm[[goal, S - 1]] = perm[[S - 1, goal]]  # old state perm[i] is new state i
    inv = np.argsort(perm)
    P = mdp.P_rows.tocoo()
    old_s, a = np.divmod(P.row, A)
    rows = inv[old_s] * A + a
    P = sp.csr_matrix((P.data, (rows, inv[P.col])), shape=(S * A, S))
    return op.TabularMDP(P, mdp.R[perm], mdp.discount)


def test_reach_order_is_breadth_first_backwards_from_the_sources():
    mdp = _chain_mdp(6, 0.9)  # 0 -> 1 -> ... -> 5 (stays put under action 0)
    order = F.reach_order(mdp.P_rows, np.array([3]), 2)
    assert order[:4].tolist() == [3, 2, 1, 0]  # 4 and 5 cannot reach 3: last, in order
    assert order[4:].tolist() == [4, 5]
    grid = gridworld_mdp(5)
    order = F.reach_order(grid.P_rows, np.array([24]), 4)
    r, c = np.divmod(order, 5)
    assert (np.diff((4 - r) + (4 - c)) >= 0).all()  # by Manhattan distance to the goal


@pytest.mark.parametrize("goal", [0, 37, 143])
def test_flow_iteration_equals_policy_iteration_wherever_the_goal_is(goal):
    mdp = _goal_at(gridworld_mdp(12, discount=0.97), goal)
    out = D.discounted_policy_iteration(mdp.P_rows, mdp.R, mdp.action_mask, 0.97)
    pi = D.discounted_policy_iteration(
        mdp.P_rows, mdp.R, mdp.action_mask, 0.97, evaluation="direct", warm_sweeps=0
    )
    assert out.message.startswith("modified policy iteration (Gauss-Seidel, flow order)")
    np.testing.assert_allclose(out.values, pi.values, rtol=0, atol=1e-10 * 33.4)
    # ties (right or down) may differ; the policy's own values may not
    own = L.evaluate_discounted(*op.dp.policy_model(mdp.dense_P(), mdp.R, out.policy), 0.97)
    np.testing.assert_allclose(own, pi.values, rtol=0, atol=2e-10 * 33.4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_models_hand_over_to_policy_iteration_and_match_the_dense_path(seed):
    mdp = random_sparse_mdp(np.random.default_rng(seed), 300, 3).with_discount(0.95)
    assert not F._kept_start(mdp.P_rows, mdp.R, mdp.action_mask, 0.95)
    res = op.DiscountedPlanning(mdp).solve(method="fast")
    assert res.status == "optimal" and res.message.startswith("inexact policy iteration")
    exact = _exact(mdp).values
    # within the certificate, 1e-10 max|V| (test_sparse's rule for dense = sparse)
    np.testing.assert_allclose(res.values, exact, rtol=0, atol=1e-10 * np.abs(exact).max())


def test_slow_gauss_seidel_hands_over_and_stays_exact(monkeypatch):
    monkeypatch.setattr(F, "FLOW_WINDOW", 0)  # every iteration counts as slow: hand over at once
    monkeypatch.setattr(F, "FLOW_SLOW", 0.0)
    mdp = gridworld_mdp(10, discount=0.95)
    out = D.discounted_policy_iteration(mdp.P_rows, mdp.R, mdp.action_mask, 0.95)
    assert out.status == "optimal" and out.evaluations > 0
    np.testing.assert_allclose(out.values, _exact(mdp).values, rtol=0, atol=1e-10 * 20)


@pytest.mark.parametrize("stochastic", [True, False])
def test_gauss_seidel_linear_solve_meets_its_residual(stochastic):
    mdp = gridworld_mdp(9, discount=0.99)
    policy = _exact(mdp).policy  # a goal-directed chain, where Gauss-Seidel is the method
    P_pi, r_pi = op.dp.policy_model(mdp.P_rows, mdp.R, policy)
    M = P_pi if stochastic else P_pi.T
    b = r_pi if stochastic else np.full(mdp.n_states, 1.0 / mdp.n_states)
    x = L._gauss_seidel(M, b, 0.99, np.zeros(mdp.n_states), 1e-11, stochastic)
    assert x is not None
    residual = b - (x - 0.99 * (M @ x))
    assert np.abs(residual).max() <= 1e-11
    exact = np.linalg.solve(np.eye(mdp.n_states) - 0.99 * M.toarray(), b)
    bound = 1e-11 / (1 - 0.99) * (1 if stochastic else M.sum(axis=0).max())
    np.testing.assert_allclose(x, exact, rtol=0, atol=2 * bound)


def test_gauss_seidel_linear_solve_gives_up_on_a_slowly_contracting_chain():
    rng = np.random.default_rng(3)
    mdp = gridworld_mdp(9, discount=0.99)
    P_pi, _ = op.dp.policy_model(mdp.P_rows, mdp.R, rng.integers(0, 4, mdp.n_states))
    b = np.full(mdp.n_states, 1.0 / mdp.n_states)
    x = L._gauss_seidel(P_pi.T, b, 0.99, np.zeros(mdp.n_states), 1e-11, False)
    if x is not None:  # it may get there; then it met the residual
        assert np.abs(b - (x - 0.99 * (P_pi.T @ x))).max() <= 1e-11
    # the evaluation that falls back from it is exact either way
    d = L.discounted_occupancy(P_pi, b * mdp.n_states / mdp.n_states, 0.99, iterative=True)
    exact = np.linalg.solve((np.eye(mdp.n_states) - 0.99 * P_pi.toarray()).T, 0.01 * b)
    np.testing.assert_allclose(d, exact, rtol=0, atol=1e-11)


def test_small_sparse_chains_are_solved_densely_and_exactly():
    mdp = random_sparse_mdp(np.random.default_rng(4), 60, 3).with_discount(0.9)
    P_pi, r_pi = op.dp.policy_model(mdp.P_rows, mdp.R, np.zeros(60, dtype=int))
    v = L.evaluate_discounted(P_pi, r_pi, 0.9)
    exact = np.linalg.solve(np.eye(60) - 0.9 * P_pi.toarray(), r_pi)
    np.testing.assert_allclose(v, exact, rtol=0, atol=1e-12)
    d = L.discounted_occupancy(P_pi, np.full(60, 1 / 60), 0.9)
    assert abs(d.sum() - 1.0) < 1e-12 and (d >= 0).all()


def test_masked_actions_are_never_chosen_by_the_sweeps():
    mdp = gridworld_mdp(8, discount=0.95)
    mask = np.ones((64, 4), dtype=bool)
    mask[:, 1] = False  # no "right"
    masked = op.TabularMDP(mdp.P_rows, mdp.R, 0.95, action_mask=mask)
    res = op.DiscountedPlanning(masked).solve(method="fast")
    assert res.status == "optimal" and not (res.policy == 1).any()
    np.testing.assert_allclose(res.values, _exact(masked).values, rtol=0, atol=1e-10 * 20)


@pytest.mark.parametrize("model", ["grid", "chain", "random"])
def test_start_choice_on_a_sample_of_states_equals_the_full_one(monkeypatch, model):
    """Above ``START_SAMPLE`` states the two starts are compared on evenly spaced states;
    the choice is the one the full comparison makes."""
    if model == "grid":
        mdp, discount = gridworld_mdp(30, discount=0.99), 0.99
    elif model == "chain":
        mdp, discount = _chain_mdp(900, 0.95), 0.95
    else:
        mdp, discount = random_sparse_mdp(np.random.default_rng(3), 900, 4).with_discount(0.9), 0.9
    args = (mdp.P_rows, mdp.R, mdp.action_mask, discount)
    full = F._kept_start(*args)
    monkeypatch.setattr(F, "START_SAMPLE", 50)
    assert F._kept_start(*args) == full
    assert full == (model == "grid")
