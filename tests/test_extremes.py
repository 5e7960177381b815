"""No silent wrong number at extreme scales: every fast path against an independent reference
(50+ digit arithmetic, or an exact certificate) where the scales are extreme, seeded.

KL ball: the best supported state holding down to 1e-300 of the mass, radii up to the largest
double. Instances and the measured worst errors are in the test names and docstrings.
"""

import numpy as np
import pytest
from reference import kl_ball_reference

import optplan as op
from optplan._checks import OptplanError
from optplan.problems.kl_ball import kl_divergence
from optplan.result import OPTIMAL


def tiny_best(seed: int):
    """``(p, v, d)`` whose best supported state has mass 10^-U(8, 300); a quarter of them with
    a zero-probability state above every value (the boundary / leftover case)."""
    rng = np.random.default_rng(seed)
    S = int(rng.integers(2, 7))
    scale = float(rng.choice([1e-3, 1.0, 1e3, 1e6]))
    v = rng.random(S) * scale
    best = int(np.argmax(v))
    p = rng.dirichlet(np.ones(S))
    p_best = 10.0 ** -rng.uniform(8, 300)
    p[best] = 0.0
    p = p / p.sum() * (1.0 - p_best)
    p[best] = p_best
    if seed % 4 == 1 and S > 2:
        other = (best + 1) % S
        p[best] += p[other]
        p[other] = 0.0
        v[other] = v.max() + rng.random() * scale
        p[best] = p_best
        p = p / p.sum()
    return p, v, 10.0 ** rng.uniform(-6, 2)


def huge_radius(seed: int):
    """``(p, v, d)`` with ``d = 10^U(1, 300)``; a third with tied values."""
    rng = np.random.default_rng(seed)
    S = int(rng.integers(2, 7))
    p = rng.dirichlet(np.full(S, float(rng.choice([0.3, 1.0, 5.0]))))
    v = rng.random(S) * float(rng.choice([1e-3, 1.0, 1e6]))
    if seed % 3 == 1:
        v = np.round(v * 3) / 3
    return p, v, 10.0 ** rng.uniform(1, 300)


#: |fast - reference| / span(v): the value is a convex combination of v, so its round-off is
#: a few eps * span(v). Measured worst over the 200 + 200 instances: 4.2e-15 (19 eps; tiny best
#: mass), 0 (huge radii).
KL_BALL_TOL = 1e-14


def _check_kl_ball(p, v, d):
    res = op.KLBallIndex(p, v, d).solve()
    ref = kl_ball_reference(p, v, d)
    assert res.status == OPTIMAL, res
    span = float(np.ptp(v)) or 1.0
    assert abs(res.value - ref) <= KL_BALL_TOL * span, (res.value, ref)
    q = res.x
    assert q.min() >= 0 and abs(q.sum() - 1.0) <= 1e-12
    assert kl_divergence(p, q) <= d * (1 + 1e-9) + 1e-12
    assert abs(q @ v - res.value) <= 1e-12 * max(1.0, float(np.abs(v).max()))
    return abs(res.value - ref) / span


@pytest.mark.slow
def test_kl_ball_tiny_best_mass_against_60_digits():
    errors = [_check_kl_ball(*tiny_best(seed)) for seed in range(200)]
    assert len(errors) == 200 and max(errors) <= KL_BALL_TOL


@pytest.mark.slow
def test_kl_ball_huge_radii_against_60_digits():
    errors = [_check_kl_ball(*huge_radius(seed)) for seed in range(200)]
    assert len(errors) == 200 and max(errors) <= KL_BALL_TOL


@pytest.mark.parametrize(
    "p, v, d, answer",
    [
        # the audit's repros: p_best = 1e-20 gave 0.7330 (KL of q* 1.32 > 0.01)
        ([1e-20, 1.0], [1.0, 0.0], 0.01, 0.0099501662508319466),
        ([1e-300, 1.0], [1.0, 0.0], 0.01, 0.0099501662508319466),
        ([1e-12, 1.0 - 1e-12], [1.0, 0.0], 0.01, 0.0099501662746231644),
        # radius 1e18 gave 0.5, 1e100 NaN
        ([0.5, 0.5], [0.0, 1.0], 1e18, 1.0),
        (np.array([41, 24, 36]) / 101, [4.0, 2.0, 4.0], 1e100, 4.0),
        (np.array([41, 24, 36]) / 101, [4.0, 2.0, 4.0], np.finfo(float).max, 4.0),
    ],
)
def test_kl_ball_audit_repros(p, v, d, answer):
    res = op.KLBallIndex(p, v, d).solve()
    assert res.status == OPTIMAL
    assert abs(res.value - answer) <= KL_BALL_TOL * np.ptp(v)
    assert kl_divergence(np.asarray(p, float), res.x) <= d + 1e-9 * min(d, 1e300)


# -- average reward: tiny transition probabilities, large reward scales -------------------------


def _bellman_residual(mdp, res):
    """``max |max_a (r + P h) - h - g|`` of an answer: zero exactly at a solution of Eq. (1)."""
    q = np.where(mdp.action_mask, mdp.R + mdp.P @ res.bias, -np.inf)
    return float(np.max(np.abs(q.max(axis=1) - res.bias - res.gain)))


@pytest.mark.slow
def test_average_reward_tiny_probabilities_never_raise():
    """Dirichlet(1e-3) rows (entries down to 4e-320): the audit saw LinAlgError on 50 of 200
    seeds. Now every seed ends with a status; every optimal answer solves Eq. (1) (its own
    Bellman residual is at round-off), and the two paths agree where both are optimal."""
    from optplan.generators import random_dirichlet

    statuses = {}
    both = 0
    for seed in range(200):
        mdp = random_dirichlet(5, 3, seed=seed, alpha=1e-3)
        fast = op.solve_average_reward(mdp)
        conic = op.solve_average_reward(mdp, method="conic")
        statuses[fast.status] = statuses.get(fast.status, 0) + 1
        if fast.status == OPTIMAL:
            # round-off of r + P h grows with |h|: a state left with probability 1e-16 has a
            # bias near 1e15, and an absolute residual of 1e-3 is then 1e-18 of it
            scale = 1.0 + float(np.abs(mdp.R).max())
            bound = 1e-12 * scale + 64 * np.finfo(float).eps * float(np.abs(fast.bias).max())
            assert _bellman_residual(mdp, fast) <= bound, seed
        else:  # multichain (the last iterate's numbers) or numerical_error (NaN), explained
            assert fast.message and fast.status in ("multichain", "numerical_error"), seed
        if fast.status == OPTIMAL and conic.status == OPTIMAL:
            both += 1
            assert abs(fast.gain - conic.gain) <= 1e-7 * (1 + abs(conic.gain)), seed
    assert statuses.get(OPTIMAL, 0) >= 190 and both >= 150, (statuses, both)


@pytest.mark.parametrize("shift", [1e3, 1e6])
def test_average_reward_status_does_not_depend_on_the_reward_scale(shift):
    """A weakly communicating model whose policy iteration meets multichain policies is solved
    by relative value iteration; its stopping rule is relative to the reward scale, so adding a
    constant to every reward changes the gain by that constant and nothing else (the audit saw
    `multichain` at R + 1e6: span(T h - h) cannot fall below 1e-10 there)."""
    from optplan.bench.cases import random_mdp

    checked = 0
    for seed in range(150):
        mdp = random_mdp(np.random.default_rng(seed), 3, 2, density=0.4, unichain=False)
        base = op.solve_average_reward(mdp)
        shifted = op.solve_average_reward(op.TabularMDP(mdp.P, mdp.R + shift))
        assert shifted.status == base.status, seed
        if base.status == OPTIMAL:
            checked += 1
            assert abs(shifted.gain - shift - base.gain) <= 1e-9 * shift, seed
    assert checked >= 100


@pytest.mark.slow
def test_conic_average_reward_optimal_means_a_small_bellman_residual():
    """Rewards around 2e6 and transition probabilities down to 1e-9 (the audit's Clarabel
    'optimal' gain was 27% off): every conic answer called optimal has a Bellman residual within
    the solver tolerance and the fast path's gain; the others say optimal_inaccurate."""
    from optplan.generators import random_dirichlet

    for seed in range(60):
        rng = np.random.default_rng(seed)
        base = random_dirichlet(16, 3, seed=seed, alpha=float(rng.choice([0.01, 0.03, 0.1])))
        mdp = op.TabularMDP(base.P, 2e6 * (1 + rng.random(base.R.shape)))
        fast = op.solve_average_reward(mdp)
        conic = op.solve_average_reward(mdp, method="conic")
        assert fast.status == OPTIMAL, seed
        if conic.status == OPTIMAL:
            scale = 1.0 + float(np.abs(mdp.R).max())
            assert conic.info["bellman_residual"] <= 2e-7 * scale
            assert abs(fast.gain - conic.gain) <= 1e-7 * (1 + abs(fast.gain)), seed
        else:  # the solver's own verdict, or a residual check's
            assert conic.status == "optimal_inaccurate", (seed, conic)


# -- K-learning's optimal temperature at large reward scales -------------------------------------


def k_instance(seed: int, reward_scale: float):
    rng = np.random.default_rng(seed)
    L, S, A = int(rng.integers(2, 5)), int(rng.integers(1, 4)), int(rng.integers(2, 4))
    R = reward_scale * rng.standard_normal((L, S, A))
    P = rng.dirichlet(np.ones(S), size=(L, S, A))
    counts = rng.integers(0, 50, size=(L, S, A)).astype(float)
    return op.KLearningTemperature(R, P, counts, 1.0)


@pytest.mark.slow
def test_temperature_at_large_reward_scales_is_the_root():
    """Rewards of 1e3 to 1e6 make the Boltzmann policy deterministic to round-off: the audit saw
    max_iter (a bracket that never found a sign change) and tau* off by up to 7e-4. Every
    instance now ends optimal, and f' changes sign within 1e-9 of tau* in 50-digit arithmetic."""
    from reference import k_temperature_derivative

    from optplan.soft import k_bonus

    checked = 0
    for seed in range(300):
        problem = k_instance(seed, float([1e3, 1e4, 1e6][seed % 3]))
        res = problem.solve()
        assert res.status == OPTIMAL, (seed, res.message)
        if seed % 3 == 0 or seed < 30:
            args = (
                problem.mean_rewards,
                problem.mean_transitions,
                k_bonus(problem.counts, problem.sigma),
                problem.initial,
            )
            below = k_temperature_derivative(res.x * (1 - 1e-9), *args)
            above = k_temperature_derivative(res.x * (1 + 1e-9), *args)
            assert below <= 0 <= above, (seed, res.x, below, above)
            checked += 1
    assert checked >= 100


@pytest.mark.parametrize("counts", [1e100, 1e300])
def test_temperature_with_huge_counts_is_the_root(counts):
    """Counts of 1e300 make the bonus ~1e-300 (the audit: NaN with max_iter)."""
    from reference import k_temperature_derivative

    from optplan.soft import k_bonus

    problem = k_instance(0, 1.0)
    huge = op.KLearningTemperature(
        problem.mean_rewards, problem.mean_transitions, np.full(problem.shape, counts), 1.0
    )
    res = huge.solve()
    assert res.status == OPTIMAL and np.isfinite(res.value) and res.x > 0
    c = k_bonus(huge.counts, huge.sigma)
    args = (huge.mean_rewards, huge.mean_transitions, c, huge.initial)
    assert k_temperature_derivative(res.x * (1 - 1e-9), *args) <= 0
    assert k_temperature_derivative(res.x * (1 + 1e-9), *args) >= 0


# -- overflow is a status, not an optimal infinity -----------------------------------------------


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_overflow_is_reported_not_optimal():
    """The audit's repros returned +-inf with status optimal."""
    assert op.KLInfRate([0.5, 0.5], [-1e308, 1e308], 1e307).solve().status == "numerical_error"
    assert op.L1BallIndex([0.5, 0.5], [-1e308, 1e308], 0.5).solve().status == "numerical_error"
    with pytest.raises(OptplanError, match=r"R has an entry 1e\+308 at \(0, 0\)"):
        op.TabularMDP(np.ones((1, 1, 1)), np.array([[1e308]]), discount=0.99)
    batch = op.l1_ball_index([[0.5, 0.5], [0.5, 0.5]], [[-1e308, 1e308], [0.0, 1.0]], 0.5)
    assert batch.status.tolist() == ["numerical_error", "optimal"]


# -- conic statuses tell the truth ---------------------------------------------------------------


def test_conic_run_statuses_combine_and_downgrade():
    from optplan.conic._common import NOT_FEASIBLE_OR_BOUNDED, ConicRun

    ok = ConicRun("optimal", "", "CLARABEL", 10, 0.1)
    rough = ConicRun("optimal_inaccurate", "almost", "CLARABEL", 5, 0.2)
    both = ok.then(rough, "stage 2")
    assert both.status == "optimal_inaccurate" and both.iterations == 15
    assert "stage 2: almost" in both.message
    assert ok.then(ConicRun("solver_error", "x", "CLARABEL", 1, 0.0), "s2").status == "solver_error"
    # an answer whose own residual is far above the solver tolerance is not optimal
    assert ok.checked(1e-3, 1.0, "Bellman residual").status == "optimal_inaccurate"
    assert ok.checked(1e-9, 1.0, "Bellman residual").status == "optimal"
    # a bounded, feasible LP called unbounded is the solver's trouble
    bad = ConicRun("unbounded", "", "SCS", 3, 0.0).cannot_be(NOT_FEASIBLE_OR_BOUNDED, "why")
    assert bad.status == "solver_error" and "cannot be" in bad.message


def test_clarabel_is_optimal_on_95_percent_of_random_index_instances():
    """The tight settings made Clarabel optimal_inaccurate on 25% (KL ball) and 17% (KL-inf)
    of these; answers it calls optimal pass the cross-check (test_kl_ball / test_kl_inf)."""
    from optplan.bench.cases import random_index_instance

    for stem, cls in (("kl_ball", op.KLBallIndex), ("kl_inf", op.KLInfRate)):
        rng = np.random.default_rng(4)
        statuses = [
            cls(*random_index_instance(rng, [3, 10, 100][i % 3], stem, zeros=0.3 * (i % 2)))
            .solve("conic", solver="CLARABEL")
            .status
            for i in range(120)
        ]
        assert statuses.count(OPTIMAL) >= 0.95 * len(statuses), (stem, statuses.count(OPTIMAL))
