"""Known-model planning, two ways each, cross-checked (values, policies, multipliers)."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.bench.cases import planning_cases, random_finite_horizon, random_mdp
from optplan.result import MULTICHAIN

MODELS = Path(__file__).parents[1] / "models"
PROBLEMS = {
    "discounted": op.DiscountedPlanning,
    "average": op.AverageRewardPlanning,
    "finite_horizon": op.FiniteHorizonPlanning,
}


@pytest.fixture(scope="module")
def cowan3():
    return op.load_model(MODELS / "cowan3.toml")


@pytest.mark.parametrize("solver", op.SOLVERS)
def test_cowan3_average_both_ways(cowan3, solver):
    fast = op.solve_average_reward(cowan3, method="fast")
    conic = op.solve_average_reward(cowan3, method="conic", solver=solver)
    # the paper (§5): pi*(x1) = a1, pi*(x2) = a2, pi*(x3) = a1
    assert fast.policy.tolist() == conic.policy.tolist() == [0, 1, 0]
    assert abs(fast.gain - conic.gain) < 1e-7
    np.testing.assert_allclose(fast.bias, conic.bias, atol=1e-7)
    # gain and bias solve Eq. (1) exactly
    np.testing.assert_allclose(fast.gain + fast.bias, fast.q.max(axis=1), atol=1e-12)
    # the stationary frequencies are a distribution on the policy's actions, and R.y = gain
    assert fast.occupancy.sum() == pytest.approx(1.0)
    assert np.sum(fast.occupancy * cowan3.R) == pytest.approx(fast.gain, abs=1e-12)


def test_cowan3_gain_by_brute_force(cowan3):
    """The optimal gain equals the best of the 8 deterministic policies' gains."""
    P, R = cowan3.P, cowan3.R
    gains = []
    for k in range(8):
        pol = np.array([(k >> i) & 1 for i in range(3)])
        P_pi, r_pi = P[np.arange(3), pol], R[np.arange(3), pol]
        w, vec = np.linalg.eig(P_pi.T)
        pi = np.real(vec[:, np.argmin(np.abs(w - 1))])
        gains.append(float(pi @ r_pi / pi.sum()))
    assert op.solve_average_reward(cowan3).gain == pytest.approx(max(gains), abs=1e-12)
    assert int(np.argmax(gains)) == 0b010  # policy [0, 1, 0]


@pytest.mark.slow
@pytest.mark.parametrize("criterion", list(PROBLEMS))
def test_fast_equals_clarabel_on_300_random_models(criterion):
    """S up to 40, A up to 5, dense and sparse P, masks on every other model, ties on a third."""
    worst = {}
    count = 0
    for model in planning_cases(seed=1234, count=300, criterion=criterion):
        chk = op.cross_check(PROBLEMS[criterion](model), solver="CLARABEL")
        assert chk.agree, (model, chk.message)
        for k, v in chk.abs_err.items():
            worst[k] = max(worst.get(k, 0.0), v)
        count += 1
    assert count == 300
    assert {"value", "x", "policy_value"} <= set(worst)
    if criterion != "finite_horizon":
        assert {"multiplier", "occupancy_value", "multiplier_feasibility"} <= set(worst)


@pytest.mark.parametrize("solver", ["ECOS", "SCS"])
@pytest.mark.parametrize("criterion", list(PROBLEMS))
def test_fast_equals_other_solvers(criterion, solver):
    for model in planning_cases(seed=99, count=25, criterion=criterion, max_states=15):
        chk = op.cross_check(PROBLEMS[criterion](model), solver=solver)
        assert chk.agree, (model, chk.message)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 12),
    A=st.integers(1, 4),
    density=st.sampled_from([1.0, 0.3]),
    mask=st.booleans(),
    ties=st.booleans(),
    discount=st.sampled_from([0.0, 0.3, 0.95]),
)
def test_property_discounted_and_average(seed, S, A, density, mask, ties, discount):
    rng = np.random.default_rng(seed)
    model = random_mdp(rng, S, A, discount, density, mask, ties)
    for problem in (op.DiscountedPlanning(model), op.AverageRewardPlanning(model)):
        chk = op.cross_check(problem)
        assert chk.agree, chk.message


def test_value_iteration_matches_policy_iteration():
    rng = np.random.default_rng(5)
    for _ in range(20):
        model = random_mdp(rng, 20, 3, discount=0.9, density=0.3, mask=True)
        pi = op.solve_discounted(model)
        vi = op.solve_discounted(model, algorithm="value_iteration", tol=1e-10)
        assert vi.status == "optimal" and vi.iterations > pi.iterations
        np.testing.assert_allclose(vi.values, pi.values, atol=1e-10)


def test_relative_value_iteration_matches_policy_iteration():
    rng = np.random.default_rng(6)
    for _ in range(20):
        model = random_mdp(rng, 15, 3, density=0.3, mask=True)
        pi = op.solve_average_reward(model)
        rvi = op.solve_average_reward(model, algorithm="relative_value_iteration")
        assert rvi.status == "optimal"
        assert rvi.gain == pytest.approx(pi.gain, abs=1e-9)
        d = rvi.bias - pi.bias
        assert d.max() - d.min() < 1e-8


def test_policy_iteration_ties_terminate_and_ties_are_allowed():
    """All rewards equal: every policy is optimal; the paths may return different ones."""
    rng = np.random.default_rng(7)
    model = op.TabularMDP(rng.dirichlet(np.ones(6), size=(6, 3)), np.ones((6, 3)))
    chk = op.cross_check(op.AverageRewardPlanning(model))
    assert chk.agree and chk.fast.gain == pytest.approx(1.0)
    assert "multiplier" not in chk.abs_err  # not unique under ties: checked by feasibility
    assert chk.abs_err["multiplier_feasibility"] < 1e-8


def test_masks_are_respected():
    rng = np.random.default_rng(8)
    model = random_mdp(rng, 10, 4, discount=0.8, mask=True)
    for method in ("fast", "conic"):
        for res in (
            op.solve_discounted(model, method=method),
            op.solve_average_reward(model, method=method),
        ):
            assert model.action_mask[np.arange(10), res.policy].all()
            assert np.all(np.isneginf(res.q[~model.action_mask]))
            assert np.all(res.occupancy[~model.action_mask] == 0)


def test_masking_the_best_action_lowers_the_gain(cowan3):
    restricted = cowan3.with_mask([[True, True], [True, False], [True, True]])
    full, res = op.solve_average_reward(cowan3), op.solve_average_reward(restricted)
    assert res.policy[1] == 0 and res.gain < full.gain
    assert op.cross_check(op.AverageRewardPlanning(restricted)).agree


def test_discounted_occupancy_is_normalized_and_consistent():
    rng = np.random.default_rng(9)
    model = random_mdp(rng, 8, 3, discount=0.9, density=0.5)
    for method in ("fast", "conic"):
        res = op.solve_discounted(model, method=method)
        assert res.occupancy.sum() == pytest.approx(1.0, abs=1e-8)
        # R . occupancy / (1 - gamma) = w . V (strong duality)
        w = op.DiscountedPlanning(model).weights
        assert np.sum(res.occupancy * model.R) / 0.1 == pytest.approx(w @ res.values, abs=1e-7)


def test_initial_without_full_support():
    rng = np.random.default_rng(10)
    P, R = rng.dirichlet(np.ones(5), size=(5, 2)), rng.random((5, 2))
    model = op.TabularMDP(P, R, discount=0.9, initial=[1, 0, 0, 0, 0])
    chk = op.cross_check(op.DiscountedPlanning(model))
    assert chk.agree, chk.message
    assert chk.fast.value == pytest.approx(chk.fast.values[0])


def test_edge_sizes():
    one = op.TabularMDP(np.ones((1, 1, 1)), np.array([[0.3]]), discount=0.5)
    assert op.solve_discounted(one).value == pytest.approx(0.6)
    assert op.solve_discounted(one, method="conic").value == pytest.approx(0.6, abs=1e-8)
    assert op.solve_average_reward(one).gain == pytest.approx(0.3)
    assert op.solve_average_reward(one, method="conic").gain == pytest.approx(0.3, abs=1e-8)
    zero = random_mdp(np.random.default_rng(0), 5, 3, discount=0.0)
    res = op.solve_discounted(zero)
    np.testing.assert_allclose(res.values, zero.R.max(axis=1))


def test_finite_horizon_equals_stationary_discounted_limit():
    """Backward induction over L layers of a stationary model = L steps of value iteration."""
    rng = np.random.default_rng(11)
    model = random_mdp(rng, 6, 3)
    fh = op.solve_finite_horizon(op.FiniteHorizonMDP.from_stationary(model, 4))
    V = np.zeros(6)
    for _ in range(4):
        V = (model.R + model.P @ V).max(axis=1)
    np.testing.assert_allclose(fh.values[0], V, atol=1e-12)
    assert fh.occupancy.sum(axis=(1, 2)) == pytest.approx(np.ones(4))


def test_finite_horizon_masks_per_layer():
    rng = np.random.default_rng(12)
    model = random_finite_horizon(rng, 5, 7, 3, density=0.4, mask=True)
    chk = op.cross_check(op.FiniteHorizonPlanning(model))
    assert chk.agree, chk.message
    layers = np.arange(5)[:, None]
    assert model.action_mask[layers, np.arange(7)[None, :], chk.conic.policy].all()


def two_absorbing():
    """Two absorbing states with rewards 0 and 1: the optimal gain depends on the start."""
    return op.TabularMDP(np.eye(2)[:, None, :], np.array([[0.0], [1.0]]))


def test_multichain_returns_status_not_a_number():
    for method in ("fast", "conic"):
        res = op.solve_average_reward(two_absorbing(), method=method)
        assert res.status == MULTICHAIN and not res.success
        assert "multichain" in res.message and "recurrent classes" in res.message
        assert np.isnan(res.value)
    chk = op.cross_check(op.AverageRewardPlanning(two_absorbing()))
    assert chk.agree  # both say multichain
    rvi = op.solve_average_reward(two_absorbing(), algorithm="relative_value_iteration")
    assert rvi.status == "max_iter" and np.isnan(rvi.value)


def test_weakly_communicating_model_falls_back_to_relative_value_iteration():
    """Policy (stay, stay) has two recurrent classes, yet every state can reach state 1."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = P[1, 0, 1] = P[1, 1, 0] = 1.0
    model = op.TabularMDP(P, np.array([[0.0, 0.0], [1.0, 0.0]]))
    res = op.solve_average_reward(model)
    assert res.status == "optimal" and "relative value iteration" in res.message
    assert res.gain == pytest.approx(1.0) and res.policy.tolist() == [1, 0]
    assert op.cross_check(op.AverageRewardPlanning(model)).agree


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (
            lambda m: op.solve_discounted(m, method="magic"),
            ValueError,
            r"method must be one of \('fast', 'conic'\), got 'magic'",
        ),
        (
            lambda m: op.solve_discounted(m, method="conic", solver="MOSEK"),
            ValueError,
            r"solver must be one of \('CLARABEL', 'ECOS', 'SCS'\), got 'MOSEK'",
        ),
        (lambda m: op.solve_discounted(m, solver="GUROBI"), ValueError, "got 'GUROBI'"),
        (
            lambda m: op.solve_discounted(m, algorithm="newton"),
            ValueError,
            r"algorithm must be one of \('policy_iteration', 'value_iteration'\), got 'newton'",
        ),
        (
            lambda m: op.solve_average_reward(m, algorithm="value_iteration"),
            ValueError,
            "algorithm must be one of .*relative_value_iteration.*got 'value_iteration'",
        ),
        (lambda m: op.solve_discounted(m, tol=-1), ValueError, "tol must be a positive number"),
        (lambda m: op.solve_discounted(m, max_iter=0), ValueError, "max_iter must be a positive"),
        (lambda m: op.solve_discounted(m.with_discount(None)), ValueError, "mdp.discount is None"),
        (lambda m: op.solve_finite_horizon(m), TypeError, "mdp must be a FiniteHorizonMDP"),
        (lambda m: op.cross_check(m), TypeError, "problem must be an optplan problem object"),
    ],
)
def test_bad_method_solver_and_options(call, exc, match):
    model = random_mdp(np.random.default_rng(0), 3, 2, discount=0.9)
    with pytest.raises(exc, match=match):
        call(model)


def test_cross_check_catches_a_wrong_fast_answer():
    """A loose value iteration (tol=0.05) must be caught by the Clarabel comparison."""
    model = random_mdp(np.random.default_rng(3), 10, 3, discount=0.99)
    loose = {"algorithm": "value_iteration", "tol": 0.05}
    chk = op.cross_check(op.DiscountedPlanning(model), fast_options=loose)
    assert not chk.agree and "x:" in chk.message
    assert chk.abs_err["x"] > 1e-5


def test_conic_reports_max_iter_honestly():
    """A solver stopped early gives a status, a message and NaN, not its last iterate."""
    model = random_mdp(np.random.default_rng(4), 30, 3, discount=0.9)
    res = op.solve_discounted(
        model, method="conic", solver="CLARABEL", solver_options={"max_iter": 1}
    )
    assert res.status == "max_iter" and not res.success
    assert "user_limit" in res.message and np.isnan(res.value) and res.policy is None
    with warnings.catch_warnings():  # reported by the status, not by cvxpy's warning
        warnings.filterwarnings("error", message="Solution may be inaccurate")
        res = op.solve_discounted(
            model, method="conic", solver="SCS", solver_options={"max_iters": 2}
        )
    assert res.status == "optimal_inaccurate" and "optimal_inaccurate" in res.message


def test_formulate_returns_the_cvxpy_problem(cowan3):
    import cvxpy as cp

    prob = op.AverageRewardPlanning(cowan3).formulate()
    assert isinstance(prob, cp.Problem) and prob.is_dcp()
    prob.solve(solver="CLARABEL")
    assert prob.value == pytest.approx(op.solve_average_reward(cowan3).gain, abs=1e-7)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(1, 40),
    density=st.floats(0.0, 0.3),
    self_loops=st.booleans(),
)
def test_dense_recurrent_classes_equal_scipys(seed, S, density, self_loops):
    """The dense transitive closure (S <= 128) finds the same strongly connected components
    and the same closed ones as scipy's ``connected_components`` (the path beyond 128)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    from optplan.dp._common import _closed_classes_dense

    rng = np.random.default_rng(seed)
    P = (rng.random((S, S)) < density) * rng.random((S, S))
    if self_loops:
        P[np.arange(S), rng.integers(0, S, S)] += 1.0
    n, labels, closed = _closed_classes_dense(P > 0)
    rows, cols = np.nonzero(P > 0)
    graph = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(S, S))
    m, ref = connected_components(graph, directed=True, connection="strong")
    leaving = ref[rows] != ref[cols]
    ref_closed = np.ones(m, dtype=bool)
    ref_closed[ref[rows[leaving]]] = False
    assert (len(closed), n) == (m, int(ref_closed.sum()))
    assert (np.equal.outer(labels, labels) == np.equal.outer(ref, ref)).all()
    assert (closed[labels] == ref_closed[ref]).all()
