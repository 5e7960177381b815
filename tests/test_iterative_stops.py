"""Stop tests of the iterative fast paths at any reward scale: relative value iteration's gain
within its relative ``tol`` of policy iteration's, for rewards from 1e-300 to 1e300."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.result import OPTIMAL

#: A random model (seed, states, actions) and the power of ten its rewards are scaled by.
SCALED_MODELS = dict(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(2, 5),
    A=st.integers(2, 3),
    exponent=st.integers(-300, 299),
)


@settings(max_examples=60, deadline=None)
@given(**SCALED_MODELS)
def test_relative_value_iteration_gain_is_relative_at_any_scale(seed, S, A, exponent):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.random((S, A))
    # the gain is linear in R: the unit-scale policy iteration's, scaled, is the reference
    unit = op.AverageRewardPlanning(op.TabularMDP(P, R)).solve()
    assert unit.status == OPTIMAL
    exact, R = unit.value * 10.0**exponent, R * 10.0**exponent
    tol = 1e-10
    res = op.AverageRewardPlanning(op.TabularMDP(P, R)).solve(
        algorithm="relative_value_iteration", tol=tol
    )
    if res.status != OPTIMAL:
        return
    # the gain of a tol-optimal policy (Puterman Thm 8.5.5), up to the evaluations' round-off
    scale = float(np.abs(R).max())
    assert exact - res.value <= tol * scale + 1e-13 * exact, (res.value, exact)
    assert res.value - exact <= 1e-13 * exact, (res.value, exact)


@settings(max_examples=60, deadline=None)
@given(**SCALED_MODELS)
def test_policy_iteration_is_scale_free(seed, S, A, exponent):
    """Policy iteration's tie test is relative: the optimal values scale with the rewards."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.random((S, A))
    scale = 10.0**exponent
    for problem in (op.AverageRewardPlanning, op.DiscountedPlanning):
        unit = problem(op.TabularMDP(P, R, discount=0.9)).solve()
        scaled = problem(op.TabularMDP(P, R * scale, discount=0.9)).solve()
        assert unit.status == scaled.status == OPTIMAL
        assert abs(scaled.value - unit.value * scale) <= 1e-9 * abs(unit.value * scale), (
            problem.__name__,
            scaled.value,
            unit.value * scale,
        )


def test_policy_iteration_small_rewards_pinned():
    """A 4-state model with rewards near 1e-10: the first greedy policy is 1e-3 short."""
    rng = np.random.default_rng(211)
    P = rng.dirichlet(np.ones(4), size=(4, 2))
    R = rng.random((4, 2))
    unit = op.AverageRewardPlanning(op.TabularMDP(P, R)).solve()
    small = op.AverageRewardPlanning(op.TabularMDP(P, R * 1e-10)).solve()
    assert small.status == OPTIMAL
    assert abs(small.value - unit.value * 1e-10) <= 1e-12 * unit.value * 1e-10


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(2, 5),
    exponent=st.integers(-300, 299),
)
def test_multichain_policy_iteration_is_scale_free(seed, S, exponent):
    """Sparse models (several recurrent classes): every state's optimal gain scales with the
    rewards."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(S, 0.2), size=(S, 2))
    P[P < 0.2] = 0.0
    P[..., 0] += P.sum(axis=-1) == 0
    P /= P.sum(axis=-1, keepdims=True)
    R = rng.random((S, 2))
    scale = 10.0**exponent
    unit = op.AverageRewardPlanning(op.TabularMDP(P, R), multichain="solve").solve()
    scaled = op.AverageRewardPlanning(op.TabularMDP(P, R * scale), multichain="solve").solve()
    assert unit.status == scaled.status == OPTIMAL
    expected = unit.gain * scale
    assert np.max(np.abs(scaled.gain - expected)) <= 1e-9 * np.max(np.abs(expected))


def test_multichain_iteration_cap_returns_the_evaluated_policy():
    """At the cap, the policy returned is the one the evaluation belongs to."""
    rng = np.random.default_rng(94)
    P = rng.dirichlet(np.full(5, 0.2), size=(5, 2))
    P[P < 0.2] = 0.0
    P[..., 0] += P.sum(axis=-1) == 0
    P /= P.sum(axis=-1, keepdims=True)
    problem = op.AverageRewardPlanning(op.TabularMDP(P, rng.random((5, 2))), multichain="solve")
    res = problem.solve(max_iter=1)
    assert res.status == "max_iter"
    assert np.isfinite(res.gain).all() and np.isfinite(res.occupancy).all()
