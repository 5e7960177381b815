"""The fast average-reward path's evaluation: one factorization for gain,
bias and stationary distribution, iteration on large fast-mixing chains, the aperiodicity
transform only once relative value iteration stalls; exact either way."""

import numpy as np
import pytest

import optplan as op
from optplan import dp
from optplan.bench.cases import random_mdp
from optplan.dp import _average_iteration


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
    step = _average_iteration._joint_step()
    x, v = np.random.default_rng(0).dirichlet(np.ones(S)), np.random.default_rng(1).random(S)
    # the chain's rows read in place from the model, or from the gathered P_pi (one row per
    # state, action 0): the same products as BLAS, to round-off
    for P, pol in ((mdp.P, policy.astype(np.intp)), (P_pi[:, None], np.zeros(S, np.intp))):
        Th, y = np.full(S, np.nan), np.full(S, np.nan)
        step(P, pol, v, r_pi, x, Th, y)
        np.testing.assert_allclose(Th, r_pi + P_pi @ v, rtol=0, atol=1e-14)
        np.testing.assert_allclose(y, x @ P_pi, rtol=0, atol=1e-16)
        Th = np.full(S, np.nan)
        _average_iteration._value_step(P, pol, v, r_pi, Th)
        np.testing.assert_allclose(Th, r_pi + P_pi @ v, rtol=0, atol=1e-14)
    in_place = dp.evaluate_unichain(mdp.P, r_pi, stationary=True, policy=policy)
    assert in_place._P_pi is None  # nothing gathered
    assert in_place.gain == pytest.approx(gain, abs=1e-13)
    np.testing.assert_allclose(in_place.bias, h, atol=1e-12)
    np.testing.assert_allclose(in_place.stationary(), pi, atol=1e-14)
    loose = dp.evaluate_unichain(mdp.P, r_pi, None, dp.LOOSE_TOL, policy=policy)
    assert loose.method == "iteration" and loose._pi is None
    np.testing.assert_allclose(loose.stationary(), pi, atol=1e-14)  # gathered on demand
    np.testing.assert_allclose(loose._chain(), P_pi, rtol=0, atol=0)


@pytest.mark.parametrize("S, A", [(203, 3), (250, 5), (1, 2), (7, 1)])
def test_compiled_improvement_is_backup_then_greedy(S, A):
    """The improvement's one pass over P (q and the greedy policy with its tie rule): q is
    the BLAS backup's to round-off, and the policy is ``greedy(masked(q, mask), pol,
    1e-12)`` of that q, on masked actions, exact duplicates of the incumbent (ties kept),
    values within the tie tolerance and a NaN row (taken as the maximum, as argmax)."""
    rng = np.random.default_rng([S, A])
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.random((S, A))
    mask = rng.random((S, A)) < 0.7
    mask[np.arange(S), rng.integers(A, size=S)] = True
    pol = np.array([rng.choice(np.flatnonzero(m)) for m in mask], dtype=np.intp)
    if A > 1:  # a duplicate of the incumbent, and one 1e-13 better (inside the tolerance)
        dup = (pol + 1) % A
        P[np.arange(S), dup] = P[np.arange(S), pol]
        R[np.arange(S), dup] = R[np.arange(S), pol]
        R[: S // 2, dup[0]] += np.where(np.arange(S // 2) % 2 == 0, 1e-13, 0.0)
    h = rng.normal(size=S)
    improve = _average_iteration._improve()
    q, new = np.full((S, A), np.nan), np.full(S, -1, np.intp)
    n = improve(P, R, mask, h, pol, q, new)
    np.testing.assert_allclose(q, dp.backup(P, R, h), rtol=0, atol=1e-13)
    expected = dp.greedy(dp.masked(q, mask), pol, tol=1e-12)
    np.testing.assert_array_equal(new, expected)
    assert n == np.count_nonzero(expected != pol)
    assert mask[np.arange(S), new].all()
    if A > 1:
        R[0, :] = np.nan  # a NaN q: argmax takes the first NaN, the tie test fails
        improve(P, R, mask, h, pol, q, new)
        assert new[0] == dp.greedy(dp.masked(q, mask), pol, tol=1e-12)[0]
        assert new[0] == np.flatnonzero(mask[0])[0]


@pytest.mark.parametrize("density", [1.0, 0.03])
def test_policy_iteration_with_and_without_the_compiled_passes(density, monkeypatch):
    """Large average-reward policy iteration: the compiled path (chains read in place, one
    pass per improvement) and the NumPy path (gathered chains, BLAS backups) return the same
    policy, gain, bias, q and stationary distribution, masked actions included."""
    mdp = random_mdp(np.random.default_rng(11), 260, 4, density=density)
    mask = np.random.default_rng(12).random((260, 4)) < 0.8
    mask[:, 0] = True
    P, R = mdp.P, mdp.R
    compiled, ev_c = dp.average_policy_iteration(P, R, mask)
    monkeypatch.setattr(_average_iteration._JIT, "compiled_or_none", lambda: None)
    plain, ev_p = dp.average_policy_iteration(P, R, mask)
    assert compiled.status == plain.status == "optimal"
    np.testing.assert_array_equal(compiled.policy, plain.policy)
    assert compiled.gain == pytest.approx(plain.gain, abs=1e-13)
    np.testing.assert_allclose(compiled.values, plain.values, atol=1e-12)
    np.testing.assert_allclose(compiled.q, plain.q, atol=1e-12)
    np.testing.assert_allclose(ev_c.stationary(), ev_p.stationary(), atol=1e-14)


def test_large_multichain_policy_is_found_without_the_shortcut():
    """Two closed blocks of 120 states: the in-place path's O(S) shortcut fails, the
    gathered chain's classes say 2, and policy iteration stops with ``multichain`` as the
    NumPy path does."""
    rng = np.random.default_rng(4)
    S, half = 240, 120
    P = np.zeros((S, 2, S))
    P[:half, :, :half] = rng.dirichlet(np.ones(half), size=(half, 2))
    P[half:, :, half:] = rng.dirichlet(np.ones(half), size=(half, 2))
    out, ev = dp.average_policy_iteration(P, rng.random((S, 2)), np.ones((S, 2), bool))
    assert out.status == "multichain" and ev is None
    assert "2 recurrent classes" in out.message


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
    monkeypatch.setattr(_average_iteration._JIT, "compiled_or_none", lambda: None)
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
    """No defensive copy of another model's arrays; a caller's writable
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
    rows, pol = P_pi[:, None], np.zeros(250, np.intp)
    loop = _average_iteration._joint_loop()
    for power in (True, False):
        assert _average_iteration._iterate_joint(rows, pol, r, loop, 48, power=power) is None
    with pytest.raises(dp.EvaluationError, match="cannot be computed in double precision"):
        dp.evaluate_unichain(P_pi, r, stationary=True)
    monkeypatch.setattr(_average_iteration._JIT, "compiled_or_none", lambda: None)
    with pytest.raises(dp.EvaluationError, match="cannot be computed in double precision"):
        dp.evaluate_unichain(P_pi, r, stationary=True)


def test_in_place_evaluation_refuses_rows_outside_the_model():
    """The compiled iteration reads ``P[s, policy[s]]`` without bounds checks: a policy of
    the wrong length, a non-integer one or an action outside ``P`` is a ValueError naming
    it, before any read."""
    mdp = random_mdp(np.random.default_rng(3), 210, 3)
    r = mdp.R[:, 0]
    with pytest.raises(ValueError, match=r"policy\[5\] = 3 is not an action of P \(A = 3\)"):
        dp.evaluate_unichain(mdp.P, r, policy=np.where(np.arange(210) == 5, 3, 0))
    with pytest.raises(ValueError, match=r"policy\[0\] = -1"):
        dp.evaluate_unichain(mdp.P, r, policy=np.full(210, -1))
    with pytest.raises(ValueError, match="policy must be 210 integer actions, got shape"):
        dp.evaluate_unichain(mdp.P, r, policy=np.zeros(209, int))
    with pytest.raises(ValueError, match="dtype float64"):
        dp.evaluate_unichain(mdp.P, r, policy=np.zeros(210))
    with pytest.raises(ValueError, match=r"P must have shape \(S, A, S\) with S = 210"):
        dp.evaluate_unichain(mdp.P[:, 0], r, policy=np.zeros(210, int))
