"""RAVI-UCB's regularized optimistic step (``op.ravi_step``) and the clipped optimistic fixed
point (``op.ClippedOptimisticPlanning``): the step against its formulas and 60-digit
references at extreme ``eta`` and ``Q``; the frozen-data RAVI iteration against an independent
solve of the fixed point; the exact fast path against the clipped-set LPs (Clarabel) and,
where nothing clips, against OptimisticPlanning's bonus LP; bad input."""

from __future__ import annotations

import collections

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan._checks import OptplanError
from optplan.bench.cases import random_clipped_optimistic
from optplan.result import OPTIMAL
from optplan.soft import mirror_step


def uniform_log_policy(S, A):
    return np.full((S, A), -np.log(A))


def small_step_inputs(seed=0, S=4, A=3):
    rng = np.random.default_rng(seed)
    log_pi = np.log(rng.dirichlet(np.ones(A), size=S))
    q = rng.uniform(0, 5, (S, A))
    p_hat = rng.dirichlet(np.ones(S), size=(S, A)) * rng.uniform(0.5, 1, (S, A, 1))
    return log_pi, q, p_hat, rng.uniform(0, 1, (S, A)), rng.random((S, A))


def exact_fixed_point(problem):
    """An independent solve: value iteration on ``min(H, max_a (r + CB + gamma P V))`` until
    it no longer moves (1e-15 H); ``|V - V*| <= gamma/(1-gamma) 1e-15 H``."""
    P, c, g = problem.p_hat, problem.r + problem.bonus, problem.discount
    H = 1.0 / (1.0 - g)
    mask = problem.action_mask
    V = np.zeros(problem.n_states)
    for _ in range(100_000):
        Q = np.minimum(H, c + g * (P @ V))
        new = np.where(mask, Q, -np.inf).max(axis=1)
        if np.max(np.abs(new - V)) <= 1e-15 * H:
            V = new
            break
        V = new
    return V, np.minimum(H, c + g * (P @ V))


# --- the step ----------------------------------------------------------------------------------


def test_step_is_algorithm_1_written_out():
    log_pi, q, p_hat, bonus, r = small_step_inputs()
    eta, gamma = 0.7, 0.9
    out = op.ravi_step(log_pi, q, p_hat, bonus, r, eta, gamma)
    pi = np.exp(log_pi)
    V = np.log((pi * np.exp(eta * q)).sum(axis=1)) / eta  # naive: fine at these scales
    new_pi = pi * np.exp(eta * (q - V[:, None]))
    Q_next = np.clip(r + bonus + gamma * p_hat @ V, 0.0, 1.0 / (1.0 - gamma))
    np.testing.assert_allclose(out.values, V, rtol=1e-14)
    np.testing.assert_allclose(np.exp(out.log_policy), new_pi, rtol=1e-13)
    np.testing.assert_allclose(out.q, Q_next, rtol=1e-14)
    np.testing.assert_allclose(np.exp(out.log_policy).sum(axis=1), 1.0, rtol=1e-15)


def reference_values(log_pi, q, eta):
    """``(1/eta) log (sum pi e^{eta q} / sum pi)`` in 60 digits."""
    mpmath.mp.dps = 60
    out = []
    for lp_row, q_row in zip(log_pi, q, strict=True):
        terms = [
            (mpmath.mpf(lp), mpmath.mpf(x))
            for lp, x in zip(lp_row, q_row, strict=True)
            if lp > -np.inf
        ]
        norm = mpmath.fsum(mpmath.exp(lp) for lp, _ in terms)
        total = mpmath.fsum(mpmath.exp(lp + mpmath.mpf(eta) * x) for lp, x in terms)
        out.append(float(mpmath.log(total / norm) / eta))
    return np.array(out)


@pytest.mark.parametrize("eta", [1e-12, 1e-3, 1.0, 1e6, 1e12])
@pytest.mark.parametrize("q_scale", [1.0, 1e6])
def test_step_is_stable_at_extreme_eta_and_q(eta, q_scale):
    """``eta`` up to 1e12 and ``Q`` of 1e6 (``eta Q`` up to 1e18): no overflow, ``V`` within
    1e-14 (relative) of a 60-digit reference, policies normalized."""
    rng = np.random.default_rng(1)
    log_pi = np.log(rng.dirichlet(np.ones(4), size=6))
    log_pi[0, 1] = -np.inf  # an action outside the support
    log_pi[0] -= np.log(np.exp(log_pi[0]).sum())
    q = rng.normal(size=(6, 4)) * q_scale
    q[0, 1] = -np.inf  # its q is ignored
    V, new = mirror_step(log_pi, q, eta)
    assert np.isfinite(V).all()
    ref = reference_values(log_pi, q, eta)
    assert np.max(np.abs(V - ref)) <= 1e-14 * (1.0 + np.abs(ref).max())
    assert new[0, 1] == -np.inf and np.isfinite(np.delete(new, 1, axis=1)).all()
    np.testing.assert_allclose(np.exp(new).sum(axis=1), 1.0, atol=1e-15)
    assert np.all(V <= np.where(log_pi > -np.inf, q, -np.inf).max(axis=1) + 1e-15 * q_scale)
    # and the full step at eta = 1e6 with Q = 1e6: finite, clipped to [0, H]
    P = np.full((6, 4, 6), 1.0 / 6)
    out = op.ravi_step(log_pi, q, P, 0.5, rng.random((6, 4)), eta, 0.99)
    assert np.isfinite(out.q).all() and out.q.min() >= 0 and out.q.max() <= 100.0


def test_large_eta_concentrates_on_the_best_action():
    log_pi = uniform_log_policy(1, 3)
    q = np.array([[1.0, 2.0, 1.5]])
    V, new = mirror_step(log_pi, q, 1e6)
    assert V[0] == pytest.approx(2.0 - np.log(3) / 1e6, rel=1e-15)
    assert new[0, 1] == pytest.approx(0.0, abs=1e-15) and new[0, 0] < -1e5


def test_overflow_is_never_silent():
    """At the edge of the double range (``eta = 1e-306``, ``Q = +-1e308``, the best action of
    probability e^-700) ``max Q + log(...) / eta`` overflows although ``V = -1e308`` is
    finite: the step raises rather than return ``-inf``."""
    log_pi = np.array([[0.0, -700.0], [-np.log(2), -np.log(2)]])
    q = np.array([[-1e308, 1e308], [0.0, 1.0]])
    with pytest.raises(FloatingPointError, match=r"V_k\(0\) = -inf is not finite"):
        op.ravi_step(log_pi, q, np.zeros((2, 2, 2)), 0.0, np.zeros((2, 2)), 1e-306, 0.9)


STEP_BAD = [
    (dict(eta=0.0), "eta must lie in"),
    (dict(eta=-1.0), "eta must lie in"),
    (dict(eta=np.inf), "eta must be a finite"),
    (dict(gamma=0.0), "gamma must lie in"),
    (dict(gamma=1.0), "gamma must lie in"),
    (dict(gamma=1.5), "gamma must lie in"),
    (dict(bonus=-0.1), "bonus must be >= 0"),
    (dict(bonus=np.full((4, 3), -1.0)), r"bonus must be >= 0, got -1.0 at \(s, a\)"),
    (dict(bonus=np.zeros((3, 3))), "bonus has shape"),
    (dict(q=np.zeros((4, 2))), "q has shape"),
    (dict(q=np.full((4, 3), np.nan)), "q has a non-finite entry"),
    (dict(p_hat=np.zeros((4, 3, 5))), "p_hat has shape"),
    (dict(p_hat=np.full((4, 3, 4), 0.5)), "p_hat rows must sum to at most 1"),
    (dict(p_hat=np.full((4, 3, 4), -0.1)), "p_hat has a negative entry"),
    (dict(r=np.zeros((4,))), "r must have 2 dimensions"),
    (dict(r=np.full((4, 3), 2.0)), r"r must lie in \[0, 1\]"),
    (dict(log_policy=np.zeros((4, 3))), "log_policy row 0 is not a log-distribution"),
    (dict(log_policy=np.full((4, 3), np.nan)), "log_policy has entry nan"),
    (dict(log_policy=np.zeros(3)), "log_policy must have 2 dimensions"),
]


@pytest.mark.parametrize("change, match", STEP_BAD)
def test_step_bad_input_names_the_field(change, match):
    log_pi, q, p_hat, bonus, r = small_step_inputs()
    args = dict(log_policy=log_pi, q=q, p_hat=p_hat, bonus=bonus, r=r, eta=1.0, gamma=0.9)
    args.update(change)
    with pytest.raises(OptplanError, match=match):
        op.ravi_step(**args)


# --- the fixed point -----------------------------------------------------------------------------


def unclipped_as_optimistic(problem):
    """The same fixed point as OptimisticPlanning's bonus form (radius 0, reward radius = CB),
    valid when nothing clips: the missing mass of ``p_hat`` goes to an absorbing sink with
    reward 0 (value 0), which OptimisticPlanning needs (its rows are distributions)."""
    S, A = problem.n_states, problem.n_actions
    P = np.zeros((S + 1, A, S + 1))
    P[:S, :, :S] = problem.p_hat
    P[:S, :, S] = np.clip(1.0 - problem.p_hat.sum(axis=2), 0.0, None)
    P[S, :, S] = 1.0
    pad = lambda x: np.vstack([x, np.zeros((1, A))])  # noqa: E731
    mask = np.vstack([problem.action_mask, np.ones((1, A), bool)])
    return op.OptimisticPlanning(
        p_hat=P,
        r_hat=pad(problem.r),
        radius=0.0,
        reward_radius=pad(problem.bonus),
        discount=problem.discount,
        action_mask=mask,
    )


def test_one_state_closed_form():
    """One state, ``P_hat = 1``: ``V = H min(1, max_a (r_a + CB_a))`` (clipped or not)."""
    for c in ([0.2, 0.5], [0.3, 0.9], [0.4, 1.5]):
        c = np.array([c])
        prob = op.ClippedOptimisticPlanning(
            p_hat=np.ones((1, 2, 1)),
            r=np.minimum(c, 1.0),
            bonus=c - np.minimum(c, 1.0),
            discount=0.8,
        )
        want = 5.0 * min(1.0, c.max())
        for algorithm in ("policy_iteration", "value_iteration", "ravi"):
            res = prob.solve(algorithm=algorithm)
            assert res.status == OPTIMAL and res.values[0] == pytest.approx(want, rel=1e-9)
        chk = op.cross_check(prob)
        assert chk.agree, chk.message
        assert chk.conic.info["clipped"][0] == (c.max() > 1)


def test_clipped_and_unclipped_instances_agree_with_clarabel():
    """Exact fast path vs the clipped-set LPs, 24 instances with masks; some clip, some do
    not, several need more than one round; where none clips, OptimisticPlanning's bonus LP
    gives the same values."""
    rounds = collections.Counter()
    rng = np.random.default_rng(7)
    compared = 0
    for i in range(24):
        S, A = int(rng.integers(1, 12)), int(rng.integers(1, 4))
        prob = random_clipped_optimistic(
            rng,
            S,
            A,
            discount=float(rng.choice([0.5, 0.9, 0.95])),
            bonus_scale=[0.2, 1, 3][i % 3],
            mask=bool(i % 2),
        )
        chk = op.cross_check(prob)
        assert chk.fast.status == OPTIMAL and chk.conic.status == OPTIMAL, chk.message
        assert chk.agree, chk.message
        rounds[chk.conic.info["rounds"]] += 1
        np.testing.assert_array_equal(chk.fast.info["clipped"], chk.conic.info["clipped"])
        if not chk.fast.info["clipped"].any():
            bonus_lp = unclipped_as_optimistic(prob).solve("conic")
            assert np.max(np.abs(bonus_lp.values[:S] - chk.fast.values)) <= 1e-7 * prob.horizon
            compared += 1
    assert rounds[1] >= 3 and sum(v for k, v in rounds.items() if k >= 2) >= 3, rounds
    assert compared >= 3


def test_algorithms_agree_and_ravi_certifies_its_error():
    rng = np.random.default_rng(3)
    for _ in range(5):
        prob = random_clipped_optimistic(rng, 8, 3, discount=0.9)
        exact = prob.solve()
        vi = prob.solve(algorithm="value_iteration", tol=1e-11)
        ravi = prob.solve(algorithm="ravi", eta=5.0, tol=1e-10)
        assert exact.status == vi.status == ravi.status == OPTIMAL
        assert np.max(np.abs(vi.values - exact.values)) <= 1e-11
        err = np.max(np.abs(ravi.q - exact.q)[prob.action_mask])
        assert err <= ravi.info["error_bound"] <= 1e-10
        # the iteration's policy concentrates on the greedy actions of the fixed point
        pi = np.exp(ravi.info["log_policy"])
        greedy = exact.q >= exact.q.max(axis=1, keepdims=True) - 1e-9
        assert pi[greedy].sum() == pytest.approx(prob.n_states, rel=1e-6)


def test_ravi_converges_for_small_eta_too_but_slowly():
    """No averaging and no eta -> inf needed: eta = 0.05 reaches the same fixed point, after
    many more steps (the transient decays like 1 / (eta k))."""
    prob = random_clipped_optimistic(np.random.default_rng(11), 5, 2, discount=0.8)
    exact = prob.solve()
    fast = prob.solve(algorithm="ravi", eta=50.0, tol=1e-9)
    slow = prob.solve(algorithm="ravi", eta=0.05, tol=1e-9, max_iter=200_000)
    assert fast.status == slow.status == OPTIMAL
    assert slow.iterations > 5 * fast.iterations
    assert np.max(np.abs(slow.values - exact.values)) <= 1e-9
    capped = prob.solve(algorithm="ravi", eta=0.05, tol=1e-9, max_iter=50)
    assert capped.status == "max_iter" and "did not reach tol" in capped.message
    assert capped.info["error_bound"] > 1e-9


@pytest.mark.slow
def test_frozen_data_ravi_converges_to_the_fixed_point_200(capsys):
    """The acceptance test: on 200 random instances (S <= 15, A <= 4, gamma 0.5-0.97, bonus
    scales 0 to 3, masks; eta from 0.3 to 1000) the frozen-data RAVI iteration (tol 1e-11)
    reaches the fixed point computed independently (value iteration to 1e-15 in this file),
    within its own certified error bound; the exact fast path agrees too. The largest error is
    printed (pytest -s)."""
    worst = {"ravi": 0.0, "exact": 0.0}
    stats = collections.Counter()

    @settings(max_examples=200)
    @given(
        seed=st.integers(0, 2**32 - 1),
        S=st.integers(1, 15),
        A=st.integers(1, 4),
        gamma=st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.97]),
        scale=st.sampled_from([0.0, 0.3, 1.0, 3.0]),
        mask=st.booleans(),
        eta=st.sampled_from([0.3, 1.0, 3.0, 10.0, 100.0, 1000.0]),
    )
    def check(seed, S, A, gamma, scale, mask, eta):
        rng = np.random.default_rng(seed)
        prob = random_clipped_optimistic(rng, S, A, gamma, bonus_scale=scale, mask=mask)
        V, Q = exact_fixed_point(prob)
        res = prob.solve(algorithm="ravi", eta=eta, tol=1e-11, max_iter=300_000)
        assert res.status == OPTIMAL, res.message
        m = prob.action_mask
        err = float(np.max(np.abs(res.q - Q)[m]))
        assert err <= res.info["error_bound"] + 1e-13 and err <= 1e-11
        worst["ravi"] = max(worst["ravi"], err)
        exact = prob.solve()
        assert exact.status == OPTIMAL
        worst["exact"] = max(worst["exact"], float(np.max(np.abs(exact.q - Q)[m])))
        stats["clipped" if exact.info["clipped"].any() else "unclipped"] += 1
        stats["steps"] += res.iterations

    check()
    assert worst["exact"] <= 1e-10
    assert stats["clipped"] >= 40 and stats["unclipped"] >= 40, stats
    with capsys.disabled():
        print(
            f"\n200 frozen-data RAVI runs ({stats['clipped']} with clipping, "
            f"{stats['unclipped']} without; {stats['steps']} steps in all): largest "
            f"|Q_ravi - Q*| = {worst['ravi']:.2e}, exact path {worst['exact']:.2e}"
        )


@pytest.mark.slow
def test_conic_covers_clipped_and_unclipped_200(capsys):
    """200 instances: the exact fast path against the clipped-set LPs (Clarabel) on every
    instance, clipped or not, and against OptimisticPlanning's bonus LP where none clips."""
    stats = collections.Counter()
    worst = collections.Counter()

    @settings(max_examples=200)
    @given(
        seed=st.integers(0, 2**32 - 1),
        S=st.integers(1, 20),
        A=st.integers(1, 4),
        gamma=st.sampled_from([0.5, 0.9, 0.95, 0.99]),
        scale=st.sampled_from([0.0, 0.3, 1.0, 3.0]),
        mask=st.booleans(),
    )
    def check(seed, S, A, gamma, scale, mask):
        rng = np.random.default_rng(seed)
        prob = random_clipped_optimistic(rng, S, A, gamma, bonus_scale=scale, mask=mask)
        chk = op.cross_check(prob)
        assert chk.fast.status == OPTIMAL
        stats[chk.conic.status] += 1
        if chk.conic.status != OPTIMAL:
            return
        assert chk.agree, chk.message
        worst["x"] = max(worst["x"], chk.rel_err["x"])
        stats[f"rounds={chk.conic.info['rounds']}"] += 1
        if not chk.fast.info["clipped"].any():
            bonus_lp = unclipped_as_optimistic(prob).solve("conic")
            if bonus_lp.status == OPTIMAL:
                err = np.max(np.abs(bonus_lp.values[:S] - chk.fast.values))
                assert err <= 1e-7 * (1 + prob.horizon)
                worst["bonus_lp"] = max(worst["bonus_lp"], err / (1 + prob.horizon))
                stats["bonus_lp"] += 1

    check()
    assert stats[OPTIMAL] >= 190, stats
    with capsys.disabled():
        print(
            f"\nclipped-set LPs vs exact fast path: {dict(sorted(stats.items()))}; largest "
            f"relative difference in V: {worst['x']:.1e} (clipped-set LPs), "
            f"{worst['bonus_lp']:.1e} (OptimisticPlanning's bonus LP, unclipped instances)"
        )


PROBLEM_BAD = [
    (dict(discount=0.0), "discount must lie in"),
    (dict(discount=1.0), "discount must lie in"),
    (dict(bonus=-1.0), "bonus must be >= 0"),
    (dict(bonus=np.zeros((2, 2))), "bonus has shape"),
    (dict(r=np.full((3, 2), 1.5)), r"r must lie in \[0, 1\]"),
    (dict(r=np.zeros((3, 3))), "r has shape"),
    (dict(p_hat=np.full((3, 2, 3), 0.5)), "p_hat rows must sum to at most 1"),
    (dict(p_hat=np.zeros((3, 2, 2))), "p_hat must have shape"),
    (dict(action_mask=np.zeros((3, 2), bool)), "leaves state 0 with no action"),
]


@pytest.mark.parametrize("change, match", PROBLEM_BAD)
def test_problem_bad_input_names_the_field(change, match):
    args = dict(p_hat=np.full((3, 2, 3), 0.3), r=np.zeros((3, 2)), bonus=0.1, discount=0.9)
    args.update(change)
    with pytest.raises(OptplanError, match=match):
        op.ClippedOptimisticPlanning(**args)


def test_solve_options_are_checked():
    prob = op.ClippedOptimisticPlanning(p_hat=np.full((2, 1, 2), 0.4), r=np.ones((2, 1)))
    with pytest.raises(OptplanError, match="eta must lie in"):
        prob.solve(algorithm="ravi", eta=0.0)
    with pytest.raises(OptplanError, match="algorithm must be one of"):
        prob.solve(algorithm="evi")
    with pytest.raises(TypeError, match="has no option"):
        prob.solve(method="conic", eta=1.0)
