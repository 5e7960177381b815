"""Stop tests of the iterative fast paths at any reward scale: relative value iteration's gain
within its relative ``tol`` of policy iteration's, for rewards from 1e-300 to 1e300."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.result import OPTIMAL


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(2, 5),
    A=st.integers(2, 3),
    exponent=st.integers(-300, 299),
)
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
