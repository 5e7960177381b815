"""K-learning (k-learning-variational-bayesian-rl §3): the optimal temperature of problem (11),
fast (Brent on f') vs conic (exponential cones), the identities behind the fast path, the
K-value recursion (Eq. 6), Eq. 9, 10, 14, the dual of Appendix A.4 (Eq. 27), and bad inputs."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp
from scipy.special import softmax as sp_softmax

import optplan as op
from optplan import soft as fk
from optplan.result import OPTIMAL, SOLUTION_PRESENT

#: Statuses a conic solve may honestly report instead of "optimal" (problem 11 is always
#: feasible and bounded below, so no infeasible/unbounded status is honest).
HONEST = {"optimal_inaccurate", "max_iter", "solver_error"}


# ---------------------------------------------------------------------------------------------
# instances


def make_instance(
    seed,
    L,
    S,
    A,
    rewards="unit",
    transitions="dense",
    counts="small",
    initial="uniform",
):
    """``(R, P, N, rho)``: rewards unit/negative/large, transitions dense/sparse (exact zeros,
    some deterministic rows)/posterior (Dirichlet posterior means: a pseudo-count on every next
    state plus counts on one or two of them, some rows never visited, so most entries of a
    row equal its smallest), counts small (0..20)/zero/large, initial uniform (None)/random
    (possibly with zeros)."""
    rng = np.random.default_rng(seed)
    if rewards == "unit":
        R = rng.random((L, S, A))
    elif rewards == "negative":
        R = rng.uniform(-3.0, 0.5, (L, S, A))
    elif rewards == "large":
        R = rng.uniform(-50.0, 100.0, (L, S, A))
    else:
        raise AssertionError(rewards)
    P = rng.dirichlet(np.full(S, float(rng.choice([0.3, 1.0]))), size=(L, S, A))
    if transitions == "sparse" and S > 1:
        P[rng.random(P.shape) < 0.5] = 0.0
        dead = P.sum(axis=-1) == 0
        P[dead, 0] = 1.0
        one_hot = rng.random((L, S, A)) < 0.2  # deterministic rows
        P[one_hot] = np.eye(S)[rng.integers(0, S, int(one_hot.sum()))]
        P /= P.sum(axis=-1, keepdims=True)
    if transitions == "posterior":
        alpha = float(rng.choice([1.0 / S, 0.5]))
        rows = np.arange(L * S * A)
        seen = np.zeros((rows.size, S))
        for _ in range(int(rng.integers(1, 3))):  # counts on one or two next states (or 0)
            seen[rows, rng.integers(0, S, rows.size)] += rng.integers(0, 30, rows.size)
        seen = seen.reshape(L, S, A, S)
        P = (seen + alpha) / (seen.sum(axis=-1, keepdims=True) + S * alpha)
    if counts == "small":
        N = rng.integers(0, 21, (L, S, A))
    elif counts == "zero":
        N = np.zeros((L, S, A), dtype=int)
    elif counts == "large":
        N = rng.integers(1000, 100_000, (L, S, A))
    else:
        raise AssertionError(counts)
    if initial == "uniform":
        rho = None
    else:
        rho = rng.dirichlet(np.ones(S))
        if S > 1:
            rho[rng.random(S) < 0.3] = 0.0
            if rho.sum() == 0:
                rho[0] = 1.0
            rho /= rho.sum()
    return R, P, N, rho


def problem(seed, L, S, A, sigma, **kinds):
    R, P, N, rho = make_instance(seed, L, S, A, **kinds)
    return op.KLearningTemperature(R, P, N, sigma, rho)


#: Hypothesis strategies for the size of a random layered instance (L <= 8, S <= 6, A <= 4).
SHAPE = {
    "seed": st.integers(0, 10**9),
    "L": st.integers(1, 8),
    "S": st.integers(1, 6),
    "A": st.integers(2, 4),
}

#: Fixed instances for the non-property tests: (seed, L, S, A, sigma, kinds).
FIXED = [
    (0, 1, 1, 2, 1.0, {}),
    (1, 3, 2, 2, 0.5, {"transitions": "sparse"}),
    (2, 5, 4, 3, 3.0, {"initial": "random"}),
    (3, 8, 6, 4, 1.0, {"rewards": "negative", "transitions": "sparse", "initial": "random"}),
    (4, 2, 3, 3, 0.0, {"counts": "zero"}),
    (5, 4, 3, 2, 0.5, {"counts": "large", "rewards": "large"}),
    (6, 6, 5, 4, 3.0, {"transitions": "sparse", "counts": "zero"}),
]


def fixed_problems():
    return [problem(seed, L, S, A, sigma, **kinds) for seed, L, S, A, sigma, kinds in FIXED]


def terms(p, tau):
    """``(f, M, A, B, K, V, pi, lam)`` of ``p`` at ``tau`` (the fast module's own terms)."""
    c = fk.k_bonus(p.counts, p.sigma)
    return fk.temperature_terms(tau, p.mean_rewards, p.mean_transitions, c, p.initial)


def rel(a, b):
    return abs(a - b) / max(1.0, abs(a), abs(b))


# ---------------------------------------------------------------------------------------------
# independent reference implementations (written from the paper, not from the library)


def bonus_paper(L, l0, n, sigma):
    """Eq. 6's bonus numerator over 2 (n v 1), with the paper's 1-based layer l = l0 + 1."""
    l_paper = l0 + 1
    return (sigma**2 + (L - l_paper) ** 2) / (2.0 * max(n, 1))


def k_values_loop(tau, R, P, N, sigma):
    """Eq. 6 / Eq. 14 by plain loops, math.log/math.exp with a max-shift."""
    L, S, A = R.shape
    K = np.zeros((L, S, A))
    v_next = [0.0] * S
    for l0 in range(L - 1, -1, -1):
        v = [0.0] * S
        for s in range(S):
            for a in range(A):
                future = math.fsum(P[l0, s, a, t] * v_next[t] for t in range(S))
                K[l0, s, a] = R[l0, s, a] + bonus_paper(L, l0, N[l0, s, a], sigma) / tau + future
            m = max(K[l0, s])
            v[s] = m + tau * math.log(
                math.fsum(math.exp((K[l0, s, a] - m) / tau) for a in range(A))
            )
        v_next = v
    return K


def dual_value(p, lam):
    """Eq. 27's objective at a feasible ``lam``: ``<lam, mu> + min_tau (tau A + B / tau)``
    with ``A = sum_{l,s} d_l(s) H(lam_l(s, .) / d_l(s))`` and ``B = <lam, c>``."""
    c = fk.k_bonus(p.counts, p.sigma)
    d = lam.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d > 0, lam / d, 0.0)
        h = -np.where(q > 0, q * np.log(q), 0.0).sum(axis=-1)
    A_term = float((d[..., 0] * h).sum())
    B_term = float((lam * c).sum())
    return float((lam * p.mean_rewards).sum()) + 2.0 * math.sqrt(A_term * B_term)


def occupancy_of(pi, P, rho):
    """Occupancy of a layered policy by a plain loop."""
    L, S, A = pi.shape
    lam = np.zeros((L, S, A))
    d = np.array(rho, dtype=float)
    for l in range(L):
        for s in range(S):
            for a in range(A):
                lam[l, s, a] = d[s] * pi[l, s, a]
        d_next = np.zeros(S)
        for s in range(S):
            for a in range(A):
                for t in range(S):
                    d_next[t] += lam[l, s, a] * P[l, s, a, t]
        d = d_next
    return lam


def assert_flow(lam, P, rho, tol):
    """Eq. 27's constraints: sum_a lam_0 = rho, sum_a lam_{l+1}(s') = sum P_l(s'|s,a) lam_l."""
    L = lam.shape[0]
    assert lam.min() >= -tol
    np.testing.assert_allclose(lam[0].sum(axis=-1), rho, rtol=0, atol=tol)
    for l in range(L - 1):
        inflow = np.einsum("sa,sat->t", lam[l], P[l])
        np.testing.assert_allclose(lam[l + 1].sum(axis=-1), inflow, rtol=0, atol=tol)


# ---------------------------------------------------------------------------------------------
# 1. fast vs conic (Clarabel), property test


@pytest.mark.slow
def test_fast_equals_clarabel_property():
    stats = {"runs": 0, "clarabel_optimal": 0, "non_optimal": 0, "max_rel_tau": 0.0}
    stats["max_rel_obj"] = 0.0
    stats["statuses"] = {}
    stats["non_optimal_by_counts"] = {}
    stats["inaccurate_max_rel_tau"] = stats["inaccurate_max_rel_obj"] = 0.0

    @settings(max_examples=250, deadline=None)
    @given(
        **SHAPE,
        sigma=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
        rewards=st.sampled_from(["unit", "unit", "negative", "large"]),
        transitions=st.sampled_from(["dense", "sparse", "posterior"]),
        counts=st.sampled_from(["small", "small", "zero", "large"]),
        initial=st.sampled_from(["uniform", "random"]),
    )
    def check(seed, L, S, A, sigma, rewards, transitions, counts, initial):
        assume(not (sigma == 0.0 and L == 1))  # tau* = 0: test_no_bonus_*
        p = problem(
            seed,
            L,
            S,
            A,
            sigma,
            rewards=rewards,
            transitions=transitions,
            counts=counts,
            initial=initial,
        )
        fast = p.solve()
        assert fast.status == OPTIMAL, fast.message
        tau = fast.x
        assert math.isfinite(tau) and tau > 0
        # the fast half's own certificates
        assert abs(fast.info["gap"]) <= 1e-8 * (1 + abs(fast.value)), fast.info
        scale = fast.info["entropy_term"] + fast.info["bonus_term"] / tau**2
        assert abs(fast.info["derivative"]) <= 1e-9 * scale, fast.info
        assert fast.value == pytest.approx(p.objective(tau), rel=1e-13, abs=1e-13)
        assert_flow(fast.occupancy, p.mean_transitions, p.initial, 1e-12)

        conic = p.solve(method="conic", solver="CLARABEL")
        stats["runs"] += 1
        stats["statuses"][conic.status] = stats["statuses"].get(conic.status, 0) + 1
        if conic.status == OPTIMAL:
            stats["clarabel_optimal"] += 1
            rt = abs(conic.x - tau) / tau
            ro = abs(conic.value - fast.value) / max(abs(fast.value), 1e-300)
            stats["max_rel_tau"] = max(stats["max_rel_tau"], rt)
            stats["max_rel_obj"] = max(stats["max_rel_obj"], ro)
            if rt > 1e-4:
                # a flat minimum (tiny bonuses: f'' = 2 B / tau^3 ~ 1e-7) fixes tau only to
                # about sqrt(value accuracy / f''): Clarabel's tau is then as good as the
                # fast one in objective, to 1e-9, and not better
                gap = p.objective(conic.x) - fast.value
                scale = max(abs(fast.value), 1.0)
                assert -1e-12 * scale <= gap <= 1e-9 * scale, (tau, conic.x, gap)
                stats["flat"] = stats.get("flat", 0) + 1
            assert abs(conic.value - fast.value) <= 1e-6 * max(abs(fast.value), 1.0), (
                fast.value,
                conic.value,
            )
            # the conic value can't beat the true minimum (up to solver accuracy)
            assert conic.value >= fast.value - 1e-6 * max(abs(fast.value), 1.0)
        else:
            stats["non_optimal"] += 1
            by = stats["non_optimal_by_counts"]
            by[counts] = by.get(counts, 0) + 1
            assert conic.status in HONEST, (conic.status, conic.message)
            if conic.status in SOLUTION_PRESENT:  # recorded for the report, not asserted
                rt, ro = abs(conic.x - tau) / tau, rel(conic.value, fast.value)
                stats["inaccurate_max_rel_tau"] = max(stats["inaccurate_max_rel_tau"], rt)
                stats["inaccurate_max_rel_obj"] = max(stats["inaccurate_max_rel_obj"], ro)
            assert conic.message
            if conic.status not in SOLUTION_PRESENT:
                assert math.isnan(conic.value)
        if seed % 3 == 0:
            chk = op.cross_check(p, solver="CLARABEL")
            stats["cross_checks"] = stats.get("cross_checks", 0) + 1
            if chk.conic.status == OPTIMAL:
                assert chk.agree, chk.message

    check()
    print(f"\nK-learning fast vs Clarabel: {stats}")
    assert stats["runs"] >= 200
    # At least 100 instances compared where Clarabel reports optimal.
    assert stats["clarabel_optimal"] >= 100, stats
    # Not a small minority: with optplan's tight Clarabel settings (gap/feasibility 1e-12, needed
    # because tau* is fixed only to about the square root of the value accuracy) Clarabel stops
    # at "optimal_inaccurate" on 30-55% of these instances (the derandomized examples move with
    # this file's source), most often with counts >= 1000 (tiny bonuses) or rewards ~1e2; its
    # inaccurate answers are still close (tau ~1e-5, value ~1e-9 relative). The bound keeps the
    # comparison from becoming vacuous; the honesty of each status is asserted above.
    assert stats["clarabel_optimal"] >= 0.3 * stats["runs"], stats


BONUS_KINDS = ("uniform", "spread", "sparse", "posterior")


def bonus_array(rng, L, S, A, kind):
    """Bonus numerators of several shapes: uniform in [0, 5]; spread over 1e-6 .. 1e2 (log);
    sparse (most entries exactly 0, as the posterior bonus of a deterministic prior once
    visited); the posterior bonus of a random layered posterior."""
    if kind == "uniform":
        return rng.uniform(0.0, 5.0, (L, S, A))
    if kind == "spread":
        return 10.0 ** rng.uniform(-6.0, 2.0, (L, S, A))
    if kind == "sparse":
        c = rng.uniform(0.0, 3.0, (L, S, A))
        c[rng.random((L, S, A)) < 0.7] = 0.0
        c.flat[0] = max(c.flat[0], 0.5)  # at least one bonus: tau* > 0
        return c
    post = op.posteriors.LayeredPosterior(
        L, S, A, sigma=0.5, transition_prior=rng.choice([0.1, 1.0])
    )
    for _ in range(int(rng.integers(0, 40))):
        post.update(
            int(rng.integers(L)),
            int(rng.integers(S)),
            int(rng.integers(A)),
            float(rng.random()),
            int(rng.integers(S)),
        )
    return post.bonus_numerators("posterior")


@pytest.mark.slow
def test_fast_equals_clarabel_for_declared_bonus_arrays():
    """The bonus as a declared input. Arbitrary numerator arrays (uniform, spread
    over eight decades, mostly zero, posterior-derived): fast vs Clarabel on tau* (1e-4
    relative) and the objective (1e-6) where Clarabel says optimal; at least 100 of those."""
    stats = {"runs": 0, "optimal": 0, "max_rel_tau": 0.0, "max_rel_obj": 0.0, "statuses": {}}

    @settings(max_examples=200, deadline=None)
    @given(
        **SHAPE,
        kind=st.sampled_from(BONUS_KINDS),
        rewards=st.sampled_from(["unit", "negative"]),
        transitions=st.sampled_from(["dense", "sparse", "posterior"]),
    )
    def check(seed, L, S, A, kind, rewards, transitions):
        R, P, N, rho = make_instance(seed, L, S, A, rewards=rewards, transitions=transitions)
        c = bonus_array(np.random.default_rng(seed + 1), L, S, A, kind)
        p = op.KLearningTemperature(R, P, N, 1.0, rho, bonus=c)
        fast = p.solve()
        assert fast.status == OPTIMAL, fast.message
        if not c.any():
            assert fast.x == 0.0
            return
        assert fast.value == pytest.approx(p.objective(fast.x), rel=1e-13, abs=1e-13)
        np.testing.assert_allclose(
            fast.q, op.k_values(fast.x, R, P, N, 1.0, bonus=c), rtol=1e-12, atol=1e-12
        )
        conic = p.solve(method="conic", solver="CLARABEL")
        stats["runs"] += 1
        stats["statuses"][conic.status] = stats["statuses"].get(conic.status, 0) + 1
        if conic.status != OPTIMAL:
            assert conic.status in HONEST, (conic.status, conic.message)
            return
        stats["optimal"] += 1
        rt = abs(conic.x - fast.x) / fast.x
        ro = abs(conic.value - fast.value) / max(abs(fast.value), 1.0)
        stats["max_rel_tau"] = max(stats["max_rel_tau"], rt)
        stats["max_rel_obj"] = max(stats["max_rel_obj"], ro)
        assert rt <= 1e-4, (fast.x, conic.x)
        assert ro <= 1e-6, (fast.value, conic.value)

    check()
    print(f"\nK-learning with declared bonus arrays, fast vs Clarabel: {stats}")
    assert stats["optimal"] >= 100, stats


def unpinned_instance():
    """fast occupancy of K[0, 0, 1] is 4.9e-32: the program leaves that K slack (any value
    above its Bellman bound is optimal), so solvers return K[0, 0, 1] ~ -17 .. -50 where the
    recursion gives -53.3."""
    R = np.array([[[45.5, -9.5]], [[-43.9, -47.5]]])
    return op.KLearningTemperature(R, np.ones((2, 1, 2, 1)), [[[17, 11]], [[0, 16]]], 0.0)


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_cross_check_ignores_unpinned_k(solver):
    """K is compared only where the occupancy pins it (PINNED_OCCUPANCY), not wherever the
    occupancy is positive (1e-32 included): on large-reward instances fast and conic agree on
    tau* and the value while K at such pairs is not determined."""
    p = unpinned_instance()
    chk = op.cross_check(p, solver=solver)
    assert chk.fast.status == chk.conic.status == OPTIMAL
    assert chk.fast.occupancy[0, 0, 1] < 1e-30
    assert chk.agree, chk.message
    fast, conic = chk.fast, chk.conic
    assert abs(fast.x - conic.x) <= 1e-3 * fast.x
    # the unpinned K is not the recursion's value, but it satisfies its Bellman inequality
    c = fk.k_bonus(p.counts, p.sigma)
    nxt = np.zeros_like(conic.values)
    nxt[:-1] = conic.values[1:]
    bound = p.mean_rewards + c / conic.x + np.einsum("lsat,lt->lsa", p.mean_transitions, nxt)
    assert (conic.q >= bound - 1e-6 * (1 + np.abs(bound))).all()
    reach = fast.occupancy >= 1e-6
    np.testing.assert_allclose(conic.q[reach], fast.q[reach], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("index", range(len(FIXED)))
def test_cross_check_fixed(index):
    """``op.cross_check`` agrees on every fixed instance where Clarabel reports optimal."""
    seed, L, S, A, sigma, kinds = FIXED[index]
    chk = op.cross_check(problem(seed, L, S, A, sigma, **kinds), solver="CLARABEL")
    assert chk.fast.status == OPTIMAL
    if chk.conic.status == OPTIMAL:
        assert chk.agree, chk.message
        assert abs(chk.fast.x - chk.conic.x) <= 1e-4 * chk.fast.x
        assert rel(chk.fast.value, chk.conic.value) <= 1e-6
    else:
        assert chk.conic.status in HONEST


def test_conic_duals_are_the_occupancy():
    """The duals of the Bellman rows (conic ``multiplier``) satisfy Eq. 27's flow constraints
    and equal the fast occupancy of the Boltzmann policy at tau*."""
    for p in fixed_problems()[:4]:
        fast = p.solve()
        conic = p.solve(method="conic", solver="CLARABEL")
        if conic.status != OPTIMAL:
            continue
        assert_flow(conic.multiplier, p.mean_transitions, p.initial, 1e-6)
        np.testing.assert_allclose(conic.multiplier, fast.occupancy, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# 2. identities of the fast path


@pytest.mark.parametrize("index", range(len(FIXED)))
def test_objective_is_m_plus_tau_a_plus_b_over_tau(index):
    p = fixed_problems()[index]
    for tau in (1e-3, 0.05, 0.3, 1.0, 2.7, 40.0, 1e3):
        f, M, A_term, B_term, K, V, pi, lam = terms(p, tau)
        assert f == pytest.approx(M + tau * A_term + B_term / tau, rel=1e-12, abs=1e-12)
        assert f == pytest.approx(p.objective(tau), rel=1e-15, abs=0)
        # f = rho . V_0 with V from the K-values of Eq. 6 at this tau
        K_ref = k_values_loop(tau, p.mean_rewards, p.mean_transitions, p.counts, p.sigma)
        np.testing.assert_allclose(K, K_ref, rtol=1e-11, atol=1e-11)
        assert f == pytest.approx(p.initial @ V[0], rel=1e-14, abs=1e-14)
        # M, A, B recomputed from the occupancy of the Boltzmann policy by hand
        lam_ref = occupancy_of(pi, p.mean_transitions, p.initial)
        np.testing.assert_allclose(lam, lam_ref, rtol=1e-12, atol=1e-15)
        assert M == pytest.approx(float((lam_ref * p.mean_rewards).sum()), rel=1e-12, abs=1e-12)
        c = fk.k_bonus(p.counts, p.sigma)
        assert B_term == pytest.approx(float((lam_ref * c).sum()), rel=1e-12, abs=1e-15)
        H = -np.where(pi > 0, pi * np.log(np.where(pi > 0, pi, 1.0)), 0.0).sum(axis=-1)
        assert A_term == pytest.approx(float((lam_ref.sum(-1) * H).sum()), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("index", range(len(FIXED)))
def test_objective_convex_and_minimized_at_tau_star(index):
    p = fixed_problems()[index]
    res = p.solve()
    tau_star = res.x
    grid = tau_star * np.logspace(-3, 3, 241)
    f = np.array([p.objective(t) for t in grid])
    slopes = np.diff(f) / np.diff(grid)
    tol = 1e-11 * (1 + np.abs(f).max()) / np.diff(grid)[:-1]
    assert (np.diff(slopes) >= -tol).all(), np.diff(slopes).min()
    assert f.min() >= res.value - 1e-12 * (1 + abs(res.value))
    for factor in (1 - 1e-3, 1 + 1e-3, 0.5, 2.0):
        assert p.objective(tau_star * factor) >= res.value - 1e-14 * (1 + abs(res.value))
    # and the minimum is strict away from tau*
    assert p.objective(tau_star * 2.0) > res.value
    assert p.objective(tau_star * 0.5) > res.value


@pytest.mark.parametrize("index", range(len(FIXED)))
def test_derivative_matches_finite_difference(index):
    p = fixed_problems()[index]
    tau_star = p.solve().x
    for tau in tau_star * np.array([0.1, 0.7, 1.0, 1.6, 9.0]):
        f, _, A_term, B_term, *_ = terms(p, tau)
        h = 1e-5 * tau
        fd = (p.objective(tau + h) - p.objective(tau - h)) / (2 * h)
        deriv = A_term - B_term / tau**2
        tol = 1e-6 * (A_term + B_term / tau**2) + 1e-9 * (1 + abs(f)) / tau
        assert abs(fd - deriv) <= tol, (tau, fd, deriv)


@pytest.mark.parametrize("index", range(len(FIXED)))
def test_weak_and_strong_duality(index):
    """Eq. 27: D(lambda) <= f(tau) for every feasible lambda and tau; equality at tau*."""
    p = fixed_problems()[index]
    res = p.solve()
    L, S, A = p.shape
    rng = np.random.default_rng(index)
    lams = [terms(p, t)[7] for t in res.x * np.array([0.01, 0.3, 1.0, 3.0, 100.0])]
    for _ in range(5):  # occupancies of random (and some deterministic) policies
        pi = rng.dirichlet(np.ones(A), size=(L, S))
        if rng.random() < 0.5:
            pi = np.eye(A)[pi.argmax(axis=-1)]
        lam = occupancy_of(pi, p.mean_transitions, p.initial)
        assert_flow(lam, p.mean_transitions, p.initial, 1e-12)
        lams.append(lam)
    taus = res.x * np.array([1e-2, 0.2, 0.9, 1.0, 1.1, 5.0, 1e2])
    f_vals = [p.objective(t) for t in taus]
    for lam in lams:
        D = dual_value(p, lam)
        for f in f_vals:
            assert D <= f + 1e-12 * (1 + abs(f))
    # strong duality at tau*: the occupancy lambda(tau*) attains f(tau*)
    D_star = dual_value(p, res.occupancy)
    assert D_star == pytest.approx(res.value, rel=1e-10, abs=1e-10)
    assert res.info["dual_value"] == pytest.approx(D_star, rel=1e-12, abs=1e-12)
    # and the reported lambda is the occupancy of the reported (Boltzmann) policy
    np.testing.assert_allclose(
        res.occupancy, occupancy_of(res.policy, p.mean_transitions, p.initial), atol=1e-14
    )
    assert_flow(res.occupancy, p.mean_transitions, p.initial, 1e-12)
    assert res.multiplier is not None
    np.testing.assert_array_equal(res.multiplier, res.occupancy)


@pytest.mark.parametrize("index", range(len(FIXED)))
def test_fast_result_fields_consistent(index):
    p = fixed_problems()[index]
    res = p.solve()
    tau = res.x
    assert res.info["tau"] == tau
    K = op.k_values(tau, p.mean_rewards, p.mean_transitions, p.counts, p.sigma)
    np.testing.assert_allclose(res.q, K, rtol=1e-14, atol=1e-14)
    # V and pi of the returned K. (Against pi of the recomputed K, a 1e-16 rounding difference
    # of K, e.g. the compiled kernel's summation order, is amplified by 1/tau in exp(K/tau).)
    np.testing.assert_allclose(res.values, op.soft_values(res.q, tau), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(res.policy, op.boltzmann_policy(res.q, tau), rtol=1e-14, atol=1e-300)
    assert res.value == pytest.approx(p.initial @ res.values[0], rel=1e-14, abs=1e-14)
    assert res.q.shape == res.policy.shape == res.occupancy.shape == p.shape
    assert res.values.shape == p.shape[:2]


# ---------------------------------------------------------------------------------------------
# 3. K-values, Boltzmann policy, soft values


@pytest.mark.parametrize("tau", [1e-3, 0.1, 1.0, 25.0])
@pytest.mark.parametrize("index", range(len(FIXED)))
def test_k_values_match_loop(index, tau):
    p = fixed_problems()[index]
    R, P, N, sigma = p.mean_rewards, p.mean_transitions, p.counts, p.sigma
    K = op.k_values(tau, R, P, N, sigma)
    K_ref = k_values_loop(tau, R, P, N, sigma)
    scale = np.abs(K_ref).max()
    np.testing.assert_allclose(K, K_ref, rtol=1e-12, atol=1e-13 * scale)


def test_k_values_bonus_layer_offset():
    """L = 3, S = 1, A = 2 with zero rewards, P trivial: the bonus of (0-based) layer l is
    (sigma^2 + (L - 1 - l)^2) / (2 tau max(n, 1)), the paper's (L - l)^2 with 1-based l."""
    L, tau, sigma = 3, 2.0, 0.5
    R = np.zeros((L, 1, 2))
    P = np.ones((L, 1, 2, 1))
    N = np.array([[[0, 4]], [[1, 2]], [[3, 0]]])
    K = op.k_values(tau, R, P, N, sigma)
    V = np.zeros(L + 1)
    for l in range(L - 1, -1, -1):
        for a in range(2):
            expect = (sigma**2 + (L - 1 - l) ** 2) / (2 * tau * max(N[l, 0, a], 1)) + V[l + 1]
            assert K[l, 0, a] == pytest.approx(expect, rel=1e-15)
        V[l] = tau * logsumexp(K[l, 0] / tau)
    # the last layer's bonus is sigma^2 / (2 tau n) only
    assert K[2, 0, 0] == pytest.approx(sigma**2 / (2 * tau * 3), rel=1e-15)


@pytest.mark.parametrize("tau", [1e-8, 1e8])
def test_k_values_finite_at_extreme_tau(tau):
    rng = np.random.default_rng(7)
    for L, S, A, sigma in [(8, 5, 4, 3.0), (3, 2, 2, 0.0), (1, 3, 3, 1.0)]:
        R = 1e3 * rng.uniform(-1, 1, (L, S, A))
        P = rng.dirichlet(np.full(S, 0.3), size=(L, S, A))
        for N in (np.zeros((L, S, A)), rng.integers(0, 10**6, (L, S, A))):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                K = op.k_values(tau, R, P, N, sigma)
                pi = op.boltzmann_policy(K, tau)
                V = op.soft_values(K, tau)
            assert np.isfinite(K).all() and np.isfinite(pi).all() and np.isfinite(V).all()
            np.testing.assert_allclose(pi.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
            K_ref = k_values_loop(tau, R, P, N, sigma)
            np.testing.assert_allclose(K, K_ref, rtol=1e-11, atol=0)


def test_k_values_tend_to_optimal_q():
    """tau -> 0+ with huge counts (bonus -> 0): K -> Q* of backward induction (§3.2)."""
    rng = np.random.default_rng(11)
    for L, S, A, sigma in [(1, 3, 2, 1.0), (4, 3, 3, 0.5), (8, 5, 4, 3.0)]:
        R = rng.random((L, S, A))
        P = rng.dirichlet(np.ones(S), size=(L, S, A))
        Q = op.solve_finite_horizon(op.FiniteHorizonMDP(P, R)).q
        tau = 1e-9
        # bonus / tau = (sigma^2 + (L-1-l)^2) / (2 n tau): n = 1e18 makes it <= 3e-8
        K = op.k_values(tau, R, P, np.full((L, S, A), 1e18), sigma)
        np.testing.assert_allclose(K, Q, rtol=0, atol=1e-6)
        # n = 1e12 at tau = 1e-9 leaves a bonus of order 1/2000 per layer: K is then Q* of
        # the bonus-augmented rewards R + c / tau (hard max at tau -> 0)
        N = np.full((L, S, A), 1e12)
        K = op.k_values(tau, R, P, N, sigma)
        c = fk.k_bonus(N, sigma)
        Qb = op.solve_finite_horizon(op.FiniteHorizonMDP(P, R + c / tau)).q
        np.testing.assert_allclose(K, Qb, rtol=0, atol=1e-6)


def test_boltzmann_policy_and_soft_values():
    rng = np.random.default_rng(3)
    K = rng.normal(size=(4, 5, 3)) * 10
    K[0, 0] = [1.0, 1.0, 1.0]  # ties
    K[1, 1] = [1e3, -1e3, 0.0]
    for tau in (1e-6, 0.01, 1.0, 100.0):
        pi = op.boltzmann_policy(K, tau)
        np.testing.assert_allclose(pi.sum(axis=-1), 1.0, rtol=0, atol=1e-14)
        assert (pi >= 0).all()
        np.testing.assert_allclose(pi, sp_softmax(K / tau, axis=-1), rtol=1e-12, atol=1e-300)
        V = op.soft_values(K, tau)
        np.testing.assert_allclose(V, tau * logsumexp(K / tau, axis=-1), rtol=1e-13, atol=0)
        # Eq. 8: V = <pi, K> + tau H(pi) (the variational form of the soft max)
        H = -np.where(pi > 0, pi * np.log(np.where(pi > 0, pi, 1.0)), 0.0).sum(axis=-1)
        np.testing.assert_allclose(V, (pi * K).sum(axis=-1) + tau * H, rtol=1e-11, atol=1e-11)
        assert (V >= K.max(axis=-1) - 1e-12).all()
        assert (V <= K.max(axis=-1) + tau * math.log(3) + 1e-12).all()
    np.testing.assert_allclose(op.boltzmann_policy(K, 1.0)[0, 0], [1 / 3] * 3, rtol=1e-15)


@pytest.mark.parametrize("sigma", [0.0, 0.7, 2.0])
def test_gaussian_bandit(sigma):
    """§3.1: L = S = 1 gives K(a) = mu_a + sigma^2 / (2 tau n_a) and V = tau log sum e^(K/tau)."""
    mu = np.array([0.3, -1.2, 0.9, 0.0])
    n = np.array([1, 7, 30, 2])
    R, P, N = mu[None, None], np.ones((1, 1, 4, 1)), n[None, None]
    for tau in (0.01, 0.5, 3.0):
        K = op.k_values(tau, R, P, N, sigma)
        np.testing.assert_allclose(K[0, 0], mu + sigma**2 / (2 * tau * n), rtol=1e-15, atol=0)
        V = op.soft_values(K, tau)
        assert V[0, 0] == pytest.approx(tau * logsumexp(K[0, 0] / tau), rel=1e-14)
    if sigma > 0:
        p = op.KLearningTemperature(R, P, N, sigma)
        res = p.solve()
        tau = res.x
        K = mu + sigma**2 / (2 * tau * n)
        assert res.value == pytest.approx(tau * logsumexp(K / tau), rel=1e-13)
        np.testing.assert_allclose(res.q[0, 0], K, rtol=1e-13)
        np.testing.assert_allclose(res.policy[0, 0], sp_softmax(K / tau), rtol=1e-12)
        # f'(tau*) = 0: H(pi) = sum_a pi_a sigma^2 / (2 n_a tau^2)
        pi = sp_softmax(K / tau)
        H = -(pi * np.log(pi)).sum()
        assert H == pytest.approx((pi * sigma**2 / (2 * n)).sum() / tau**2, rel=1e-9)


def test_gaussian_bandit_zero_count_uses_one():
    mu = np.array([0.1, 0.2])
    K = op.k_values(0.5, mu[None, None], np.ones((1, 1, 2, 1)), [[[0, 0]]], 1.5)
    np.testing.assert_allclose(K[0, 0], mu + 1.5**2 / (2 * 0.5 * 1), rtol=1e-15)


# ---------------------------------------------------------------------------------------------
# 4. temperature schedule (Eq. 10)


@pytest.mark.parametrize(
    "t, sigma, L, S, A",
    [(1, 1.0, 3, 10, 2), (100, 0.0, 5, 20, 4), (7, 2.5, 1, 1, 3), (10**6, 0.5, 8, 48, 2)],
)
def test_temperature_schedule_eq10(t, sigma, L, S, A):
    expect = math.sqrt((sigma**2 + L**2) * S * A * (1 + math.log(t)) / (4 * L * t * math.log(A)))
    assert op.temperature_schedule(t, sigma, L, S, A) == pytest.approx(expect, rel=1e-15)


def test_temperature_schedule_decreasing_in_t():
    taus = [op.temperature_schedule(t, 1.0, 4, 12, 3) for t in range(1, 200)]
    assert (np.diff(taus) < 0).all()
    # t = 1: log t = 0
    assert taus[0] == pytest.approx(math.sqrt(17 * 12 * 3 / (16 * math.log(3))), rel=1e-15)


@pytest.mark.parametrize(
    "args, name",
    [
        ((5, 1.0, 3, 4, 1), "A"),
        ((0, 1.0, 3, 4, 2), "t"),
        ((-3, 1.0, 3, 4, 2), "t"),
        ((2.0, 1.0, 3, 4, 2), "t"),
        ((True, 1.0, 3, 4, 2), "t"),
        ((5, 1.0, 0, 4, 2), "L"),
        ((5, 1.0, 3, 0, 2), "S"),
        ((5, -1.0, 3, 4, 2), "sigma"),
        ((5, float("nan"), 3, 4, 2), "sigma"),
        ((5, True, 3, 4, 2), "sigma"),
    ],
)
def test_temperature_schedule_rejects(args, name):
    with pytest.raises(ValueError, match=name):
        op.temperature_schedule(*args)


# ---------------------------------------------------------------------------------------------
# 5. sigma = 0, L = 1: no bonus, tau* = 0


def no_bonus_instances():
    out = []
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        S, A = int(rng.integers(1, 6)), int(rng.integers(2, 5))
        R = rng.random((1, S, A))
        if seed == 2:
            R = np.round(R * 2) / 2  # ties in the max
        if seed == 3:
            R = 1e2 * R - 30
        P = rng.dirichlet(np.ones(S), size=(1, S, A))
        N = rng.integers(0, 21, (1, S, A))
        rho = None if seed % 2 else rng.dirichlet(np.ones(S))
        out.append(op.KLearningTemperature(R, P, N, 0.0, rho))
    return out


def test_no_bonus_fast_gives_tau_zero():
    for p in no_bonus_instances():
        res = p.solve()
        mu = p.mean_rewards[0]
        assert res.status == OPTIMAL
        assert res.x == 0.0
        assert res.value == pytest.approx(p.initial @ mu.max(axis=-1), rel=1e-15, abs=1e-15)
        assert res.info["gap"] == 0.0
        np.testing.assert_allclose(res.policy.sum(axis=-1), 1.0)
        # the policy puts its mass on maximizing actions only
        assert (res.policy[0][mu < mu.max(axis=-1, keepdims=True)] == 0).all()
        assert_flow(res.occupancy, p.mean_transitions, p.initial, 1e-14)
        # f(tau) decreases to the hard max as tau -> 0
        fs = [p.objective(t) for t in (1.0, 0.1, 1e-2, 1e-4)]
        assert (np.diff(fs) <= 0).all()
        assert all(f >= res.value - 1e-12 for f in fs)


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_no_bonus_conic_is_honest(solver):
    """The conic path can't reach tau = 0 (w >= 1 / tau): it must either report optimal with
    the hard-max value and a tau whose objective is that value, or an honest non-optimal
    status -- never "optimal" with a wrong value."""
    for p in no_bonus_instances():
        fast = p.solve()
        conic = p.solve(method="conic", solver=solver)
        if conic.status == OPTIMAL:
            tol = 1e-6 * max(1.0, abs(fast.value))
            assert abs(conic.value - fast.value) <= tol, (conic.value, fast.value)
            assert conic.x >= 0
            if conic.x > 0:
                assert terms(p, conic.x)[0] <= fast.value + tol
        else:
            assert conic.status in HONEST, (conic.status, conic.message)
            assert conic.message
            if conic.status not in SOLUTION_PRESENT:
                assert math.isnan(conic.value)


# ---------------------------------------------------------------------------------------------
# 6. bad input


def good(L=2, S=3, A=2):
    rng = np.random.default_rng(0)
    return {
        "mean_rewards": rng.random((L, S, A)),
        "mean_transitions": rng.dirichlet(np.ones(S), size=(L, S, A)),
        "counts": rng.integers(0, 5, (L, S, A)),
        "sigma": 1.0,
        "initial": np.full(S, 1 / S),
    }


def _bad_cases():
    cases = []

    def case(label, exc, pattern, **changes):
        cases.append(pytest.param(changes, exc, pattern, id=label))

    g = good()
    case("P wrong shape", ValueError, "mean_transitions", mean_transitions=np.ones((2, 3, 2, 2)))
    case("P wrong ndim", ValueError, "mean_transitions", mean_transitions=np.ones((2, 3, 2)))
    case("N wrong shape", ValueError, "counts", counts=np.zeros((2, 3, 3)))
    case("rho wrong length", ValueError, "initial", initial=np.full(4, 0.25))
    case("R wrong ndim", ValueError, "mean_rewards", mean_rewards=np.zeros((3, 2)))
    N = g["counts"].copy()
    N[1, 2, 0] = -1
    case("negative counts", ValueError, r"counts.*\(1, 2, 0\)", counts=N)
    case("sigma < 0", ValueError, "sigma", sigma=-0.5)
    case("sigma nan", ValueError, "sigma", sigma=float("nan"))
    case("sigma inf", ValueError, "sigma", sigma=float("inf"))
    case("sigma bool", TypeError, "sigma", sigma=True)
    case("sigma str", TypeError, "sigma", sigma="1")
    for bad in (float("nan"), float("inf"), -float("inf")):
        R = g["mean_rewards"].copy()
        R[1, 0, 1] = bad
        case(f"R {bad}", ValueError, r"mean_rewards.*\(1, 0, 1\)", mean_rewards=R)
    N = g["counts"].astype(float)
    N[0, 1, 1] = float("nan")
    case("N nan", ValueError, r"counts.*\(0, 1, 1\)", counts=N)
    P = g["mean_transitions"].copy()
    P[1, 2, 0] *= 1.01
    case("P row sum", ValueError, r"mean_transitions\[1, 2, 0, :\]", mean_transitions=P)
    P = g["mean_transitions"].copy()
    P[0, 1, 1] = [1.2, -0.2, 0.0]
    case("P negative", ValueError, r"mean_transitions.*\(0, 1, 1, 1\)", mean_transitions=P)
    P = g["mean_transitions"].copy()
    P[0, 0, 0, 0] = float("nan")
    case("P nan", ValueError, r"mean_transitions.*\(0, 0, 0, 0\)", mean_transitions=P)
    case("rho not summing to 1", ValueError, "initial", initial=np.array([0.5, 0.2, 0.2]))
    case("rho negative", ValueError, "initial", initial=np.array([1.2, -0.2, 0.0]))
    case("rho nan", ValueError, "initial", initial=np.array([0.5, np.nan, 0.5]))
    case("R not numbers", TypeError, "mean_rewards", mean_rewards=[[["a", "b"]]])
    return cases


@pytest.mark.parametrize("changes, exc, pattern", _bad_cases())
def test_bad_input_problem(changes, exc, pattern):
    kwargs = {**good(), **changes}
    with pytest.raises(exc, match=pattern):
        op.KLearningTemperature(**kwargs)
    # k_values validates the same way (it takes no initial distribution)
    if "initial" not in changes:
        kw = {k: v for k, v in kwargs.items() if k != "initial"}
        with pytest.raises(exc, match=pattern):
            op.k_values(0.5, **kw)


def test_one_action_rejected():
    kw = good(A=1)
    with pytest.raises(ValueError, match="2 actions"):
        op.KLearningTemperature(**kw)
    # K-values themselves are fine with one action
    K = op.k_values(1.0, kw["mean_rewards"], kw["mean_transitions"], kw["counts"], 1.0)
    assert K.shape == (2, 3, 1)


@pytest.mark.parametrize(
    "tau, exc",
    [
        (0.0, ValueError),
        (-1.0, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (True, TypeError),
        ("1", TypeError),
        (None, TypeError),
    ],
)
def test_bad_tau(tau, exc):
    g = good()
    p = op.KLearningTemperature(**g)
    args = (g["mean_rewards"], g["mean_transitions"], g["counts"], g["sigma"])
    with pytest.raises(exc, match="tau"):
        op.k_values(tau, *args)
    with pytest.raises(exc, match="tau"):
        p.objective(tau)
    K = op.k_values(1.0, *args)
    with pytest.raises(exc, match="tau"):
        op.boltzmann_policy(K, tau)
    with pytest.raises(exc, match="tau"):
        op.soft_values(K, tau)


def test_inputs_are_copied_and_read_only():
    g = good()
    p = op.KLearningTemperature(**g)
    before = p.solve().x
    g["mean_rewards"][:] = 100.0
    g["counts"][:] = 10**6
    assert p.solve().x == before
    with pytest.raises(ValueError):
        p.mean_rewards[0, 0, 0] = 1.0
    assert p.initial.flags.writeable is False
    q = op.KLearningTemperature(g["mean_rewards"], g["mean_transitions"], g["counts"], 1)
    np.testing.assert_allclose(q.initial, np.full(3, 1 / 3))
    assert isinstance(q.sigma, float)


# ---------------------------------------------------------------------------------------------
# 7. ECOS and SCS


@pytest.mark.parametrize("solver, tol", [("ECOS", 1e-3), ("SCS", 1e-3)])
def test_conic_other_solvers(solver, tol):
    optimal = 0
    for p in fixed_problems()[:5]:
        fast = p.solve()
        conic = p.solve(method="conic", solver=solver)
        if conic.status == OPTIMAL:
            optimal += 1
            assert abs(conic.x - fast.x) <= tol * fast.x, (conic.x, fast.x)
            assert rel(conic.value, fast.value) <= tol, (conic.value, fast.value)
        else:
            assert conic.status in HONEST, (conic.status, conic.message)
            if conic.status not in SOLUTION_PRESENT:
                assert math.isnan(conic.value)
    print(f"\n{solver}: {optimal}/5 optimal")
    assert optimal >= 3
