"""Average reward on any model: classification by graph algorithms, and the
per-state optimal gain and the (largest) optimal bias, by multichain policy iteration and by
the multichain LP, cross-checked."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import optplan as op
from optplan.dp import classify, evaluate_multichain, policy_model
from optplan.result import MULTICHAIN, OPTIMAL, SOLUTION_PRESENT


def random_multichain(rng, S=None, A=None):
    """Several closed classes (2 to 4 blocks, sparse inside), transient states leaving
    anywhere, rewards rounded (ties), admissible-action masks on half the instances."""
    S = S or int(rng.integers(4, 16))
    A = A or int(rng.integers(1, 4))
    cuts = np.sort(
        rng.choice(np.arange(1, S), size=min(int(rng.integers(2, 4)), S - 1), replace=False)
    )
    *closed, transient = np.split(rng.permutation(S), cuts)
    P = np.zeros((S, A, S))
    for grp in closed:  # loop over classes
        sub = rng.dirichlet(np.full(grp.size, 0.5), size=(grp.size, A))
        sub *= rng.random(sub.shape) < 0.6
        sub[..., 0] += 1e-3 * (sub.sum(-1) == 0)
        P[np.ix_(grp, np.arange(A), grp)] = sub / sub.sum(-1, keepdims=True)
    if transient.size:
        p = rng.dirichlet(np.full(S, 0.3), size=(transient.size, A))
        p *= rng.random(p.shape) < 0.5
        p[
            np.arange(transient.size)[:, None],
            np.arange(A),
            rng.integers(S, size=(transient.size, A)),
        ] += 0.05
        P[transient] = p / p.sum(-1, keepdims=True)
    R = rng.normal(size=(S, A)).round(int(rng.integers(1, 4)))
    mask = rng.random((S, A)) < 0.7
    mask[np.arange(S), rng.integers(A, size=S)] = True
    return op.TabularMDP(P, R, action_mask=mask if rng.random() < 0.5 else None)


def two_absorbing():
    return op.TabularMDP(np.eye(2)[:, None, :], np.array([[0.0], [1.0]]))


def loop_beside_goal():
    """State 0: stay (reward 0) or step to the absorbing state 1 (reward 1). Both policies
    have gain 0 everywhere; staying has bias 0 at state 0, stepping bias 1: the largest
    bias of a gain-optimal policy is 1 (Puterman §9.2's two-level iteration may stop at
    either; both paths here return 1)."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = P[1, :, 1] = 1.0
    R = np.array([[0.0, 1.0], [0.0, 0.0]])
    return op.TabularMDP(P, R, action_mask=np.array([[True, True], [True, False]]))


def test_classify_examples():
    c = classify(two_absorbing().P, two_absorbing().action_mask)
    assert c.kind == "multichain" and len(c.closed_sets) == 2 and not c.weakly_communicating
    weak = loop_beside_goal()
    c = classify(weak.P, weak.action_mask)
    # state 0 can stay forever: a policy with two recurrent classes, not weakly communicating
    assert c.kind == "multichain" and [s.tolist() for s in c.closed_sets] == [[1]]
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = P[1, 0, 1] = P[1, 1, 0] = 1.0  # (stay, stay) has two classes
    c = classify(P, np.ones((2, 2), bool))
    assert c.kind == "communicating" and c.communicating and c.unichain is False
    P2 = P.copy()
    P2[0, 0] = [0.5, 0.5]
    c = classify(P2, np.ones((2, 2), bool))
    assert c.kind == "unichain" and c.unichain and c.communicating
    P3 = np.zeros((3, 1, 3))
    P3[0, 0, 1] = P3[1, 0, 2] = P3[2, 0, 2] = 1.0  # 0 -> 1 -> 2 absorbing
    c = classify(P3, np.ones((3, 1), bool))
    assert c.kind == "unichain" and not c.communicating and c.transient.tolist() == [1, 1, 0]
    c = classify(P3, np.ones((3, 1), bool), max_policies=0)
    assert c.kind == "weakly_communicating" and c.unichain is None


def test_classify_agrees_with_policy_enumeration():
    """``multichain`` iff some deterministic policy has two recurrent classes or the model is
    not weakly communicating; checked against every policy of 200 small random models."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        S, A = int(rng.integers(2, 6)), int(rng.integers(1, 3))
        P = rng.random((S, A, S)) * (rng.random((S, A, S)) < 0.35)
        P[np.arange(S)[:, None], np.arange(A), rng.integers(S, size=(S, A))] += 0.1
        P /= P.sum(-1, keepdims=True)
        mask = np.ones((S, A), bool)
        c = classify(P, mask)
        counts = [
            op.dp.n_recurrent_classes(P[np.arange(S), list(pol)])
            for pol in itertools.product(range(A), repeat=S)
        ]
        assert c.unichain == (max(counts) == 1)
        assert (c.kind == "multichain") == (not c.weakly_communicating)
        if not c.weakly_communicating:
            assert max(counts) > 1


@pytest.mark.parametrize("method", ["fast", "conic"])
def test_two_absorbing_states_solved_per_state(method):
    res = op.solve_average_reward(two_absorbing(), method=method, multichain="solve")
    assert res.status == OPTIMAL
    np.testing.assert_allclose(res.gain, [0.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(res.bias, [0.0, 0.0], atol=1e-9)
    assert res.value == pytest.approx(0.5)  # initial @ gain, uniform initial
    # the default still refuses: one scalar gain does not exist
    assert op.solve_average_reward(two_absorbing(), method=method).status == MULTICHAIN


@pytest.mark.parametrize("method", ["fast", "conic"])
def test_largest_bias_of_a_gain_optimal_policy(method):
    res = op.solve_average_reward(loop_beside_goal(), method=method, multichain="solve")
    assert res.status == OPTIMAL and res.policy[0] == 1
    np.testing.assert_allclose(res.gain, [0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(res.bias, [1.0, 0.0], atol=1e-9)


def brute_force(mdp):
    """Per-state optimal gain and the largest bias among gain-optimal policies, by evaluating
    every deterministic policy."""
    choices = [np.flatnonzero(m) for m in mdp.action_mask]
    evs = [
        evaluate_multichain(*policy_model(mdp.P, mdp.R, np.array(pol)))
        for pol in itertools.product(*choices)
    ]
    gains = np.array([e.gain for e in evs])
    g = gains.max(axis=0)
    optimal = np.all(gains >= g - 1e-9, axis=1)
    return g, np.array([e.bias for e, ok in zip(evs, optimal, strict=True) if ok]).max(axis=0)


def test_both_paths_equal_brute_force_on_small_models():
    rng = np.random.default_rng(11)
    for i in range(40):
        mdp = random_multichain(rng, S=int(rng.integers(3, 7)), A=2)
        g, h = brute_force(mdp)
        problem = op.AverageRewardPlanning(mdp, multichain="solve")
        for res in (problem.solve(), problem.solve(method="conic")):
            assert res.status in SOLUTION_PRESENT, (i, res.method, res.message)
            np.testing.assert_allclose(res.gain, g, atol=1e-7, err_msg=f"{i} {res.method}")
            np.testing.assert_allclose(res.bias, h, atol=1e-6, err_msg=f"{i} {res.method}")


def test_fast_multichain_needs_policy_iteration():
    with pytest.raises(
        ValueError, match="multichain='solve' is solved by multichain policy iteration"
    ):
        op.solve_average_reward(
            two_absorbing(), multichain="solve", algorithm="relative_value_iteration"
        )
    with pytest.raises(
        ValueError, match=r"multichain must be one of \('refuse', 'solve'\), got 'yes'"
    ):
        op.AverageRewardPlanning(two_absorbing(), multichain="yes")


def multichain_cross_checks(n, seed):
    rng = np.random.default_rng(seed)
    stats = {"inaccurate": 0, "gain": 0.0, "bias": 0.0}
    for i in range(n):
        mdp = random_multichain(rng)
        chk = op.cross_check(op.AverageRewardPlanning(mdp, multichain="solve"), solver="CLARABEL")
        assert chk.fast.status == OPTIMAL, (i, chk.fast.message)
        assert chk.conic.status in SOLUTION_PRESENT, (i, chk.conic.message)
        assert chk.agree and "x" in chk.abs_err, (i, chk.message)
        stats["inaccurate"] += chk.conic.status != OPTIMAL
        stats["gain"] = max(stats["gain"], chk.abs_err["gain"])
        stats["bias"] = max(stats["bias"], chk.abs_err["x"])
    return stats


def test_multichain_cross_check_quick():
    multichain_cross_checks(20, seed=5)


@pytest.mark.slow
def test_300_random_multichain_models_fast_vs_clarabel():
    """300 models with several closed classes, transient states and masks: per-state gain
    and bias within Clarabel's row of the tolerance table (1e-7 + 1e-7 |b|)."""
    stats = multichain_cross_checks(300, seed=1234)
    print(stats)
    assert stats["inaccurate"] <= 15  # Clarabel's bias LP, each still within tolerance


@pytest.mark.parametrize("method", ["fast", "conic"])
def test_default_refuses_only_a_non_constant_gain(method):
    """The default answer is decided by the multichain solution on both paths: a varying
    optimal gain is refused with its range, a constant one is the scalar gain."""
    res = op.solve_average_reward(two_absorbing(), method=method)
    assert res.status == MULTICHAIN and np.isnan(res.value)
    assert "the optimal gain is not constant: it ranges over [0, 1] across states" in res.message
    res = op.solve_average_reward(loop_beside_goal(), method=method)
    assert res.status == OPTIMAL and res.gain == pytest.approx(0.0, abs=1e-9)
    assert res.bias[0] - res.bias[1] == pytest.approx(1.0, abs=1e-9)
    assert op.cross_check(op.AverageRewardPlanning(loop_beside_goal())).agree


@pytest.mark.parametrize("solver", ["ECOS", "SCS"])
def test_multichain_cross_check_other_solvers(solver):
    """Within each solver's row of the tolerance table (25 models each measured: ECOS all
    optimal, bias within 1e-9; SCS 20 optimal and 5 optimal_inaccurate, bias within 2.1e-6)."""
    rng = np.random.default_rng(7)
    for i in range(8):
        mdp = random_multichain(rng)
        chk = op.cross_check(op.AverageRewardPlanning(mdp, multichain="solve"), solver=solver)
        assert chk.conic.status in SOLUTION_PRESENT, (i, chk.conic.message)
        assert chk.agree and "x" in chk.abs_err, (i, chk.message)


@pytest.mark.parametrize("scale", [1e-300, 1e-10, 1.0, 1e10, 1e300])
def test_two_gains_are_told_apart_at_every_reward_scale(scale):
    """Two absorbing states paying ``scale`` and 0: no scalar gain, whatever the scale."""
    P = np.zeros((2, 1, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    res = op.solve_average_reward(op.TabularMDP(P, np.array([[scale], [0.0]])))
    assert res.status == "multichain", (scale, res.status, res.gain)
    assert f"{scale:.6g}" in res.message


def test_constant_rewards_on_multichain_models_give_the_constant_gain():
    """Every policy earns ``c`` per step: the gain is ``c`` from every state and the bias 0,
    for the default path and multichain="solve", at rewards of every size (random multichain
    models with two actions; the bias level's tie test once compared round-off with
    round-off and cycled to max_iter)."""
    rng = np.random.default_rng(1)
    seen = 0
    for _ in range(400):
        S, A = int(rng.integers(2, 5)), 2
        P = rng.dirichlet(np.ones(S), size=(S, A)) * (rng.random((S, A, S)) < 0.3)
        P[np.arange(S)[:, None], np.arange(A), rng.integers(S, size=(S, A))] += 0.2
        P /= P.sum(-1, keepdims=True)
        c = float(rng.choice([0.3, 1.1, 3.3, 7.7, 12.9, 1e3, 1e-4]))
        mdp = op.TabularMDP(P, np.full((S, A), c))
        for multichain in ("refuse", "solve"):
            res = op.AverageRewardPlanning(mdp, multichain=multichain).solve()
            assert res.status == "optimal", (res.status, res.message)
            np.testing.assert_allclose(res.gain, c, rtol=1e-12)
            np.testing.assert_allclose(res.bias, 0.0, atol=1e-9 * c)
        seen += classify(P, mdp.action_mask).kind == "multichain"
    assert seen >= 40  # many of them have policies with several recurrent classes
