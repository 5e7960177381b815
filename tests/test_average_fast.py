"""The fast average-reward path's evaluation (issue 19 item 3): one factorization for gain,
bias and stationary distribution, iteration on large fast-mixing chains, the aperiodicity
transform only once relative value iteration stalls; exact either way."""

import numpy as np
import pytest

import optplan as op
from optplan import dp
from optplan.bench.cases import random_mdp


def reference(P_pi, r_pi):
    """The pre-issue-19 evaluation: two separate solves."""
    gain, h = dp.evaluate_average(P_pi, r_pi)
    pi = dp.stationary(P_pi)
    return gain, h, pi


@pytest.mark.parametrize(
    "S, density, method",
    [(30, 1.0, "lu"), (120, 0.1, "lu"), (300, 1.0, "iteration"), (400, 0.2, "iteration")],
)
def test_unichain_evaluation_matches_two_solves(S, density, method):
    mdp = random_mdp(np.random.default_rng(S), S, 3, density=density)
    policy = np.random.default_rng(1).integers(3, size=S)
    P_pi, r_pi = dp.policy_model(mdp.P, mdp.R, policy)
    gain, h, pi = reference(P_pi, r_pi)
    ev = dp.evaluate_unichain(P_pi, r_pi)
    assert ev.method == method
    assert ev.gain == pytest.approx(gain, abs=1e-13)
    np.testing.assert_allclose(ev.bias, h, atol=1e-12)  # both with h[0] = 0
    np.testing.assert_allclose(ev.stationary(), pi, atol=1e-14)
    ev.normalize()
    assert abs(pi @ ev.bias) < 1e-13


numba = pytest.importorskip("numba", reason="the fused evaluation step needs the jit extra")


@pytest.mark.parametrize("S, density", [(300, 1.0), (400, 0.2), (600, 0.5)])
def test_joint_evaluation_matches_the_separate_iterations(S, density):
    """``stationary=True`` (one fused pass over P_pi for the bias and the stationary
    distribution) gives the separate iterations' gain, bias and pi, to their accuracy; the
    fused step equals the two BLAS products to round-off."""
    mdp = random_mdp(np.random.default_rng(S + 7), S, 3, density=density)
    policy = np.random.default_rng(2).integers(3, size=S)
    P_pi, r_pi = dp.policy_model(mdp.P, mdp.R, policy)
    gain, h, pi = reference(P_pi, r_pi)
    joint = dp.evaluate_unichain(P_pi, r_pi, stationary=True)
    separate = dp.evaluate_unichain(P_pi, r_pi)
    assert joint.method == separate.method == "iteration"
    assert joint._pi is not None  # computed in the evaluation's loop
    for ev in (joint, separate):
        assert ev.gain == pytest.approx(gain, abs=1e-13)
        np.testing.assert_allclose(ev.bias, h, atol=1e-12)
        np.testing.assert_allclose(ev.stationary(), pi, atol=1e-14)
    step = dp._joint_step()
    x, v = np.random.default_rng(0).dirichlet(np.ones(S)), np.random.default_rng(1).random(S)
    Th, y = np.empty(S), np.empty(S)
    step(P_pi, v, r_pi, x, Th, y)
    np.testing.assert_allclose(Th, r_pi + P_pi @ v, rtol=0, atol=1e-14)
    np.testing.assert_allclose(y, x @ P_pi, rtol=0, atol=1e-16)


def test_joint_evaluation_falls_back_where_it_does_not_converge(monkeypatch):
    """A periodic chain: the fused loop gives up and the factorization answers, as without
    numba (the step forced to None)."""
    mdp = ring(250, 2, np.random.default_rng(0))
    P_pi, r_pi = dp.policy_model(mdp.P, mdp.R, np.zeros(250, int))
    ev = dp.evaluate_unichain(P_pi, r_pi, stationary=True)
    assert ev.method == "lu"
    np.testing.assert_allclose(ev.stationary(), np.full(250, 1 / 250), atol=1e-15)
    dense = random_mdp(np.random.default_rng(5), 300, 2)
    P_pi, r_pi = dp.policy_model(dense.P, dense.R, np.zeros(300, int))
    with_numba = dp.evaluate_unichain(P_pi, r_pi, stationary=True)
    monkeypatch.setattr(dp, "_JOINT", [None])
    without = dp.evaluate_unichain(P_pi, r_pi, stationary=True)
    assert without.method == with_numba.method == "iteration"
    assert without.gain == pytest.approx(with_numba.gain, abs=1e-13)
    np.testing.assert_allclose(without.stationary(), with_numba.stationary(), atol=1e-14)


def ring(S, A, rng):
    """Every action moves s -> s + 1 (mod S): every policy's chain is one cycle, period S."""
    P = np.zeros((S, A, S))
    P[np.arange(S), :, (np.arange(S) + 1) % S] = 1.0
    return op.TabularMDP(P, rng.random((S, A)))


def test_periodic_chain_is_factorized_exactly():
    mdp = ring(250, 2, np.random.default_rng(0))
    P_pi, r_pi = dp.policy_model(mdp.P, mdp.R, np.zeros(250, int))
    ev = dp.evaluate_unichain(P_pi, r_pi)
    assert ev.method == "lu"  # the iteration does not contract on a cycle
    assert ev.gain == pytest.approx(r_pi.mean(), abs=1e-13)
    np.testing.assert_allclose(ev.stationary(), np.full(250, 1 / 250), atol=1e-15)


def test_periodic_optimal_policy_exact_against_clarabel():
    mdp = ring(220, 3, np.random.default_rng(3))
    fast = op.solve_average_reward(mdp)
    conic = op.solve_average_reward(mdp, method="conic", solver="CLARABEL")
    assert fast.status == conic.status == "optimal"
    assert fast.gain == pytest.approx(mdp.R.max(axis=1).mean(), abs=1e-13)
    assert fast.gain == pytest.approx(conic.gain, abs=1e-8)
    np.testing.assert_allclose(fast.bias, conic.bias, atol=1e-6)
    np.testing.assert_allclose(fast.occupancy, conic.occupancy, atol=1e-6)


def bipartite(half, A, rng):
    """States 0..half-1 move to the other half and back: every policy has period 2."""
    S = 2 * half
    P = np.zeros((S, A, S))
    P[:half, :, half:] = rng.dirichlet(np.ones(half), size=(half, A))
    P[half:, :, :half] = rng.dirichlet(np.ones(half), size=(half, A))
    return op.TabularMDP(P, rng.random((S, A)))


def test_relative_value_iteration_switches_transform_on_periodic_model():
    mdp = bipartite(20, 3, np.random.default_rng(5))
    rvi = op.solve_average_reward(mdp, algorithm="relative_value_iteration")
    conic = op.solve_average_reward(mdp, method="conic", solver="CLARABEL")
    assert rvi.status == "optimal"
    # the plain iteration's span cannot shrink on a period-2 chain: the switch came after
    # APERIODIC_WINDOW iterations
    assert rvi.iterations > dp.APERIODIC_WINDOW
    assert rvi.gain == pytest.approx(conic.gain, abs=1e-8)
    np.testing.assert_allclose(rvi.bias, conic.bias, atol=1e-6)


def test_relative_value_iteration_without_transform_on_aperiodic_model():
    mdp = random_mdp(np.random.default_rng(7), 60, 4)
    rvi = op.solve_average_reward(mdp, algorithm="relative_value_iteration")
    pi = op.solve_average_reward(mdp)
    # tau = 1/2 from the start contracts by at best 1/2 per step: > 30 iterations to 1e-10
    assert rvi.status == "optimal" and rvi.iterations < 20
    assert rvi.gain == pytest.approx(pi.gain, abs=1e-12)


@pytest.mark.parametrize("S, density", [(300, 1.0), (300, 0.05), (500, 0.02)])
def test_large_policy_iteration_matches_exact_evaluation(S, density):
    """Loose evaluations while the policy changes, then the final policy exactly: the result
    equals two separate solves of the returned policy, and that policy is greedy in them."""
    mdp = random_mdp(np.random.default_rng([S, 1]), S, 4, density=density)
    res = op.solve_average_reward(mdp)
    assert res.status == "optimal"
    P_pi, r_pi = dp.policy_model(mdp.P, mdp.R, res.policy)
    gain, h, pi = reference(P_pi, r_pi)
    h = h - pi @ h
    q = dp.masked(dp.backup(mdp.P, mdp.R, h), mdp.action_mask)
    assert res.gain == pytest.approx(gain, abs=1e-13)
    np.testing.assert_allclose(res.bias, h, atol=1e-12)
    np.testing.assert_allclose(res.q, q, atol=1e-12)
    np.testing.assert_allclose(res.occupancy.sum(axis=1), pi, atol=1e-14)
    assert (q.max(axis=1) - q[np.arange(S), res.policy] <= 1e-12).all()


def test_models_share_immutable_arrays_and_copy_writable_ones():
    """No defensive copy of another model's arrays (issue 19 item 4); a caller's writable
    array, or a read-only view of one, is still copied: writing into it later cannot change
    a validated model."""
    rng = np.random.default_rng(0)
    P, R = rng.dirichlet(np.ones(4), size=(4, 2)), rng.random((4, 2))
    mdp = op.TabularMDP(P, R)
    assert not np.shares_memory(mdp.P, P) and not np.shares_memory(mdp.R, R)
    P[0, 0] = [1.0, 0.0, 0.0, 0.0]
    assert mdp.P[0, 0, 1] > 0  # unchanged by the caller's write
    other = mdp.with_discount(0.9)
    assert other.P is mdp.P and other.R is mdp.R
    view = P.view()
    view.flags.writeable = False
    assert not np.shares_memory(op.TabularMDP(view, R).P, P)
    horizon = op.FiniteHorizonMDP.from_stationary(mdp, 3)
    assert not np.shares_memory(horizon.P, mdp.P)  # a broadcast view is copied, as before
    bad = np.array(mdp.P)
    bad[0, 0, 0] = np.nan
    bad.flags.writeable = False
    with pytest.raises(ValueError, match="P has a non-finite entry"):
        op.TabularMDP(bad, R)


@pytest.mark.parametrize("seed", [0, 1])
def test_iterative_path_agrees_with_clarabel_including_occupancy(seed):
    """From ITERATIVE_MIN_STATES states the fast path evaluates by iteration (tightened early,
    bias and stationary distribution in one fused loop with numba): gain, bias and the
    occupancy multipliers against Clarabel's LP."""
    S = dp.ITERATIVE_MIN_STATES + 20
    problem = op.AverageRewardPlanning(random_mdp(np.random.default_rng(seed), S, 3))
    chk = op.cross_check(problem, solver="CLARABEL")
    assert chk.fast.status == chk.conic.status == "optimal"
    assert chk.agree, chk.message
    assert "multiplier" in chk.abs_err and chk.abs_err["multiplier"] < 1e-7


def test_joint_loop_hands_an_overflowing_evaluation_to_the_factorization(monkeypatch):
    """Rewards at the edge of double precision: the compiled loop stops at the first
    non-finite step (as the Python iterations do), and the factorization's error is raised
    alike with and without numba."""
    mdp = random_mdp(np.random.default_rng(0), 250, 2)
    P_pi, _ = dp.policy_model(mdp.P, mdp.R, np.zeros(250, int))
    r = np.where(np.arange(250) % 2 == 0, 1.7e308, -1.7e308)
    assert dp._iterate_joint(P_pi, r, dp._joint_loop(), dp.ITERATIVE_BUDGET) is None
    with pytest.raises(dp.EvaluationError, match="cannot be computed in double precision"):
        dp.evaluate_unichain(P_pi, r, stationary=True)
    monkeypatch.setattr(dp, "_JOINT", [None])
    with pytest.raises(dp.EvaluationError, match="cannot be computed in double precision"):
        dp.evaluate_unichain(P_pi, r, stationary=True)
