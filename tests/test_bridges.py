"""Gymnasium toy-text and pymdptoolbox bridges.

Gymnasium 1.x deprecates ``Taxi-v3`` (``gym.make`` refuses it and names ``Taxi-v4``, the same
model plus an ``is_rainy`` option), so Taxi is tested as ``Taxi-v4``.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import optplan as op
from optplan.bridges import from_gymnasium, from_mdptoolbox, to_mdptoolbox
from optplan.dp import classify
from optplan.experiments import run
from optplan.sweeps.registry import get_agent

GAMMA = 0.95
CASES = [
    ("FrozenLake-v1", {"is_slippery": True}),
    ("FrozenLake-v1", {"is_slippery": False}),
    ("Taxi-v4", {}),
    ("CliffWalking-v1", {}),
]
IDS = ["frozenlake-slippery", "frozenlake-deterministic", "taxi", "cliffwalking"]


def make(env_id, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return gym.make(env_id, **kwargs)


@pytest.mark.parametrize(("env_id", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize("terminal", ["absorbing", "restart"])
def test_discounted_values_fast_vs_clarabel(env_id, kwargs, terminal):
    mdp = from_gymnasium(make(env_id, **kwargs), terminal=terminal, discount=GAMMA)
    fast = op.solve_discounted(mdp, method="fast")
    conic = op.solve_discounted(mdp, method="conic", solver="CLARABEL")
    assert fast.status == conic.status == "optimal"
    np.testing.assert_allclose(fast.values, conic.values, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize(("env_id", "kwargs"), CASES, ids=IDS)
def test_discounted_values_match_pymdptoolbox_policy_iteration(env_id, kwargs):
    mtb = pytest.importorskip(
        "mdptoolbox.mdp", reason="pymdptoolbox is not installed (pip install pymdptoolbox)"
    )
    mdp = from_gymnasium(make(env_id, **kwargs), discount=GAMMA)
    pi = mtb.PolicyIteration(*to_mdptoolbox(mdp)[:2], GAMMA)
    pi.run()
    fast = op.solve_discounted(mdp, method="fast")
    np.testing.assert_allclose(np.asarray(pi.V), fast.values, rtol=1e-9, atol=1e-9)
    # Same optimal values; where actions tie the policies may differ, the values may not.
    q = mdp.R + GAMMA * (mdp.P_rows @ fast.values).reshape(mdp.R.shape)
    np.testing.assert_allclose(q[np.arange(mdp.n_states), pi.policy], fast.values, atol=1e-9)


def test_frozenlake_structure_absorbing_and_restart():
    env = make("FrozenLake-v1")  # 4x4, slippery
    start = env.unwrapped.initial_state_distrib
    absorbing = from_gymnasium(env)
    assert absorbing.shape == (17, 4) and absorbing.discount is None
    assert absorbing.name == "FrozenLake-v1"
    np.testing.assert_array_equal(absorbing.initial[:16], start)
    assert absorbing.initial[16] == 0.0
    np.testing.assert_array_equal(absorbing.P[16, :, 16], 1.0)  # the appended terminal state
    np.testing.assert_array_equal(absorbing.R[16], 0.0)
    goal, hole = 15, 5
    # From 14, "right" (2) slips up, right (goal, reward 1, terminated) or down (stays).
    np.testing.assert_allclose(absorbing.P[14, 2, 16], 1 / 3)
    np.testing.assert_allclose(absorbing.R[14, 2], 1 / 3)
    np.testing.assert_array_equal(absorbing.P[hole, :, 16], 1.0)  # P[hole] terminates
    restart = from_gymnasium(env, terminal="restart")
    assert restart.shape == (16, 4)
    np.testing.assert_array_equal(restart.P[goal, :, 0], 1.0)  # back to the start cell
    np.testing.assert_allclose(restart.P[14, 2, 0], 1 / 3)
    np.testing.assert_allclose(restart.P[14, 2, 14], 1 / 3)


def test_initial_distributions_of_taxi_and_cliffwalking():
    taxi = from_gymnasium(make("Taxi-v4"), terminal="restart")
    # Taxi stores counts; 300 start states (passenger at a location other than the goal).
    assert np.count_nonzero(taxi.initial) == 300
    np.testing.assert_allclose(taxi.initial[taxi.initial > 0], 1 / 300)
    cliff = from_gymnasium(make("CliffWalking-v1"))
    assert cliff.initial[36] == 1.0 and cliff.shape == (49, 4)
    # Into the cliff: reward -100 and back to the start, not terminated.
    assert cliff.R[36, 1] == -100.0 and cliff.P[36, 1, 36] == 1.0


def test_id_string_with_make_kwargs_and_explicit_initial():
    mdp = from_gymnasium("FrozenLake-v1", map_name="8x8", is_slippery=False, discount=0.9)
    assert mdp.shape == (65, 4) and mdp.discount == 0.9
    rho = np.full(16, 1 / 16)
    mdp = from_gymnasium("FrozenLake-v1", terminal="restart", initial=rho, name="lake")
    assert mdp.name == "lake" and mdp.shape == (16, 4)
    np.testing.assert_allclose(mdp.P[15, 0], rho)  # the goal restarts to the given initial
    with pytest.raises(TypeError, match="apply only when env_or_id is an id string"):
        from_gymnasium(make("FrozenLake-v1"), is_slippery=False)


class TableEnv:
    """A user environment of the toy-text form: only ``P`` (no ``initial_state_distrib``)."""

    def __init__(self, P):
        self.P = P

    @property
    def unwrapped(self):
        return self


def test_user_table_without_initial_distribution_is_uniform():
    P = {
        0: {0: [(0.5, 0, 1.0, False), (0.5, 1, 3.0, False)], 1: [(1.0, 1, 0.0, True)]},
        1: {0: [(1.0, 0, 2.0, False)], 1: [(1.0, 1, -1.0, False)]},
    }
    mdp = from_gymnasium(TableEnv(P))
    assert mdp.shape == (3, 2)
    np.testing.assert_allclose(mdp.R[:2], [[2.0, 0.0], [2.0, -1.0]])
    np.testing.assert_allclose(mdp.initial, [0.5, 0.5, 0.0])
    restart = from_gymnasium(TableEnv(P), terminal="restart")
    np.testing.assert_allclose(restart.P[0, 1], [0.5, 0.5])


def test_bad_tables_are_named():
    with pytest.raises(TypeError, match=r"env.unwrapped.P, a dict P\[s\]\[a\].*CartPoleEnv"):
        from_gymnasium(make("CartPole-v1"))
    P = {0: {0: [(0.5, 0, 0.0, False), (0.4, 0, 0.0, False)]}}
    with pytest.raises(ValueError, match=r"P\[0\]\[0\] \(state 0, action 0\) sum to 0.9"):
        from_gymnasium(TableEnv(P))
    P = {0: {0: [(1.0, 0, 0.0, False)]}, 1: {0: [(1.0, 0, 0.0, False)], 1: []}}
    with pytest.raises(ValueError, match=r"P\[1\] has 2 actions, expected 1"):
        from_gymnasium(TableEnv(P))
    P = {0: {0: [(1.0, 3, 0.0, False)]}}
    with pytest.raises(ValueError, match=r"moves to state 3, outside \[0, 1\)"):
        from_gymnasium(TableEnv(P))
    with pytest.raises(ValueError, match="terminal must be one of"):
        from_gymnasium(TableEnv(P), terminal="reset")


def test_a_table_too_large_is_refused_before_allocation():
    class Huge(dict):
        def __len__(self):
            return 200_000

    table = Huge({0: {a: [(1.0, 0, 0.0, False)] for a in range(4)}})
    with pytest.raises(ValueError, match=r"200000 states and 4 actions needs .* bytes"):
        from_gymnasium(TableEnv(table), sparse=False)
    # by default such a table would be read sparse: its entries are checked, not its size
    with pytest.raises(ValueError, match="has no state 1"):
        from_gymnasium(TableEnv(table))


def test_mdptoolbox_round_trip_both_reward_layouts():
    rng = np.random.default_rng(0)
    A, S = 3, 5
    P = rng.dirichlet(np.ones(S), size=(A, S))
    R_sa = rng.normal(size=(S, A))
    mdp = from_mdptoolbox(P, R_sa, discount=0.9)
    assert mdp.shape == (S, A)
    np.testing.assert_array_equal(mdp.P[2, 1], P[1, 2])
    P2, R2 = to_mdptoolbox(mdp)[:2]
    np.testing.assert_array_equal(P2, P)
    np.testing.assert_array_equal(R2, R_sa)
    R_ass = rng.normal(size=(A, S, S))
    mdp = from_mdptoolbox(list(P), R_ass)
    np.testing.assert_allclose(mdp.R[4, 2], P[2, 4] @ R_ass[2, 4])
    mdp = from_mdptoolbox(P, np.arange(S, dtype=float))
    np.testing.assert_array_equal(mdp.R[:, 0], mdp.R[:, 2])
    with pytest.raises(ValueError, match=r"R has shape \(5, 4\)"):
        from_mdptoolbox(P, np.zeros((S, 4)))
    masked = op.TabularMDP(mdp.P, mdp.R, action_mask=np.eye(S, A, dtype=bool) | (np.arange(A) == 0))
    with pytest.raises(ValueError, match="pymdptoolbox has no action masks.*allow_masked=True"):
        to_mdptoolbox(masked)
    np.testing.assert_array_equal(
        to_mdptoolbox(masked, allow_masked=True).action_mask, masked.action_mask
    )


def _round_trip_models():
    rng = np.random.default_rng(7)
    S, A = 4, 3
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.normal(size=(S, A))
    mask = np.ones((S, A), dtype=bool)
    mask[1, 0] = mask[3, 2] = False
    P_masked = np.where(mask[:, :, None], P, 0.0)  # masked rows may be all zeros
    return {
        "average": op.TabularMDP(P, R),
        "discounted": op.TabularMDP(P, R, discount=0.9, name="random"),
        "initial": op.TabularMDP(P, R, 0.5, initial=[0.7, 0.1, 0.2, 0.0]),
        "masked": op.TabularMDP(P_masked, R, 0.9, [0.0, 1.0, 0.0, 0.0], mask, "masked"),
        "riverswim": op.generators.riverswim(6, discount=0.95),
        **{
            name: from_gymnasium(make(env_id, **kwargs), terminal=terminal, discount=discount)
            for name, (env_id, kwargs), terminal, discount in [
                ("frozenlake", CASES[0], "absorbing", GAMMA),
                ("frozenlake-deterministic", CASES[1], "absorbing", None),
                ("taxi", CASES[2], "restart", GAMMA),
                ("cliffwalking", CASES[3], "restart", None),
            ]
        },
    }


@pytest.mark.parametrize("name", list(_round_trip_models()))
def test_mdptoolbox_round_trip_is_lossless(name):
    mdp = _round_trip_models()[name]
    masked = not mdp.action_mask.all()
    tb = to_mdptoolbox(mdp, allow_masked=True) if masked else to_mdptoolbox(mdp)
    same = from_mdptoolbox(*tb)
    assert same == mdp and same.criterion == mdp.criterion
    assert from_mdptoolbox(**tb._asdict()) == mdp


def test_mdptoolbox_round_trip_of_the_readme_lake_keeps_its_value():
    lake = from_gymnasium(make("FrozenLake-v1", is_slippery=False), discount=GAMMA)
    same = from_mdptoolbox(*to_mdptoolbox(lake))
    assert same == lake
    value = op.solve_discounted(same).values @ same.initial
    assert value == pytest.approx(op.solve_discounted(lake).values @ lake.initial, abs=1e-12)


def test_to_mdptoolbox_names_its_parts_and_leads_with_pymdptoolbox_arrays():
    mdp = op.generators.riverswim(5, discount=0.9)
    tb = to_mdptoolbox(mdp)
    assert tb._fields == ("P", "R", "discount", "initial", "action_mask", "name")
    assert tb.P.shape == (2, 5, 5) and tb.R.shape == (5, 2) and tb.discount == 0.9
    np.testing.assert_array_equal(tb.P, np.transpose(mdp.P, (1, 0, 2)))
    np.testing.assert_array_equal(tb.initial, mdp.initial)
    assert tb.action_mask is None  # every action admissible: nothing pymdptoolbox lacks


def test_mdptoolbox_forest_example_values_agree():
    example = pytest.importorskip(
        "mdptoolbox.example", reason="pymdptoolbox is not installed (pip install pymdptoolbox)"
    )
    mtb = pytest.importorskip("mdptoolbox.mdp")
    P, R = example.forest(S=6)
    mdp = from_mdptoolbox(P, R, discount=GAMMA)
    vi = mtb.PolicyIteration(P, R, GAMMA)
    vi.run()
    np.testing.assert_allclose(op.solve_discounted(mdp).values, vi.V, rtol=1e-9)


@pytest.mark.parametrize("slippery", [True, False])
def test_run_accepts_a_toy_text_env_directly(slippery):
    env = make("FrozenLake-v1", is_slippery=slippery)
    comp = get_agent("epsilon-greedy")
    agent = comp.build(env, None, **comp.resolve({}, "test"))
    trace = run(agent, env, steps=300, seed=0)
    assert trace.criterion == "average" and trace.steps == 300 and trace.episodes > 0
    assert trace.visits.shape == (16,)


def test_run_without_a_model_says_what_is_needed():
    env = make("CartPole-v1")
    agent = op.agents.RandomAgent(2, 2)
    with pytest.raises(TypeError, match=r"\.mdp .* or a toy-text transition table"):
        run(agent, env, steps=5)


@pytest.mark.parametrize(("env_id", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize("terminal", ["absorbing", "restart"])
def test_average_reward_any_model_fast_vs_clarabel(env_id, kwargs, terminal):
    """Per-state optimal gain and the largest optimal bias, multichain policy
    iteration vs Clarabel's multichain LP and bias LP, in both terminal modes (absorbing:
    every model here is multichain; restart: FrozenLake and CliffWalking are weakly
    communicating, Taxi's unreachable states keep it multichain)."""
    mdp = from_gymnasium(make(env_id, **kwargs), terminal=terminal)
    kind = classify(mdp.dense_P(), mdp.action_mask).kind
    assert kind == "multichain" or (terminal == "restart" and kind == "weakly_communicating")
    chk = op.cross_check(op.AverageRewardPlanning(mdp, multichain="solve"), solver="CLARABEL")
    assert chk.fast.status == chk.conic.status == "optimal", chk.message
    assert chk.agree and {"gain", "x"} <= set(chk.abs_err), chk.message
    np.testing.assert_allclose(chk.fast.gain, chk.conic.gain, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(chk.fast.bias, chk.conic.bias, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize(("env_id", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize("terminal", ["absorbing", "restart"])
def test_average_reward_default_scalar_gain_both_paths(env_id, kwargs, terminal):
    """The default (multichain="refuse") on the same models: the optimal gain is the same
    from every state, so both paths return it as the scalar gain with status optimal (the
    issue's report: CliffWalking fast multichain / conic -1.0, Taxi fast 0.6067 / conic
    multichain). A unichain method that meets a multichain policy hands over to the
    multichain solution, which decides."""
    mdp = from_gymnasium(make(env_id, **kwargs), terminal=terminal)
    chk = op.cross_check(op.AverageRewardPlanning(mdp), solver="CLARABEL")
    assert chk.fast.status == chk.conic.status == "optimal", chk.message
    assert chk.agree and "x" in chk.abs_err, chk.message
    solved = op.solve_average_reward(mdp, multichain="solve")
    assert chk.fast.gain == pytest.approx(solved.gain.max(), abs=1e-9)


def _discounted(mdp):
    # the iterative paths certify ||V - V*|| <= tol max|V| (1e-10 by default: 7e-9 on Taxi's
    # values of about 70); 1e-12 certifies the 1e-10 the comparison below asks
    res = op.DiscountedPlanning(mdp).solve(method="fast", tol=1e-12)
    return np.asarray(res.values), np.asarray(res.policy)


def _assert_same_plan(mdp, v_sparse, pi_sparse, v_dense, pi_dense):
    """Values to 1e-10; policies equal up to ties (each one's action optimal to 1e-10)."""
    np.testing.assert_allclose(v_sparse, v_dense, rtol=0, atol=1e-10)
    q = mdp.R + mdp.discount * (mdp.P_rows @ v_dense).reshape(mdp.R.shape)
    states = np.arange(q.shape[0])
    for pi in (pi_sparse, pi_dense):
        assert np.all(q[states, pi] >= q.max(axis=1) - 1e-10)
    ties = np.sort(q, axis=1)[:, -1] - np.sort(q, axis=1)[:, -2] <= 1e-10
    np.testing.assert_array_equal(pi_sparse[~ties], pi_dense[~ties])


@pytest.mark.parametrize(
    ("env_id", "kwargs", "by_rule"),
    [
        ("Taxi-v4", {}, True),  # 501 states, 0.2% of P nonzero
        ("FrozenLake-v1", {"map_name": "8x8", "is_slippery": True}, False),  # 65 states < 200
    ],
    ids=["taxi", "frozenlake8x8"],
)
@pytest.mark.parametrize("terminal", ["absorbing", "restart"])
def test_sparse_conversion_by_the_rule_equals_the_dense_one(env_id, kwargs, by_rule, terminal):
    env = make(env_id, **kwargs)
    auto = from_gymnasium(env, terminal=terminal, discount=0.99)
    dense = from_gymnasium(env, terminal=terminal, discount=0.99, sparse=False)
    forced = from_gymnasium(env, terminal=terminal, discount=0.99, sparse=True)
    assert auto.sparse is by_rule and not dense.sparse and forced.sparse
    np.testing.assert_array_equal(forced.dense_P(), dense.dense_P())
    np.testing.assert_array_equal(forced.R, dense.R)
    np.testing.assert_array_equal(forced.initial, dense.initial)
    _assert_same_plan(dense, *_discounted(forced), *_discounted(dense))


def test_small_gymnasium_models_stay_dense():
    for (env_id, kwargs), name in zip(CASES, IDS, strict=True):
        mdp = from_gymnasium(make(env_id, **kwargs), discount=GAMMA)
        assert mdp.sparse is (name == "taxi"), name
    with pytest.raises(TypeError, match="sparse must be None, True or False"):
        from_gymnasium(make("FrozenLake-v1"), sparse="yes")


def _sparse_toolbox(S, A, seed, successors=3):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    mats = []
    for _ in range(A):
        cols = rng.integers(0, S, size=(S, successors))
        vals = rng.dirichlet(np.ones(successors), size=S)
        rows = np.repeat(np.arange(S), successors)
        mats.append(sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(S, S)))
    return mats, rng.random((S, A))


def test_mdptoolbox_sparse_matrices_follow_the_rule():
    import scipy.sparse as sp

    mats, R = _sparse_toolbox(300, 3, 0)
    auto = from_mdptoolbox(mats, R, 0.95)
    dense = from_mdptoolbox(mats, R, 0.95, sparse=False)
    assert auto.sparse and not dense.sparse
    expected = np.stack([m.toarray() for m in mats], axis=1)  # P[s, a, s']
    np.testing.assert_array_equal(auto.dense_P(), expected)
    np.testing.assert_array_equal(dense.dense_P(), expected)
    _assert_same_plan(dense, *_discounted(auto), *_discounted(dense))
    # per-transition rewards R[a] (S, S), sparse or dense: their expectation under P
    Rt = [sp.random(300, 300, density=0.1, random_state=a, format="csr") for a in range(3)]
    got = from_mdptoolbox(mats, Rt, 0.95).R
    dense_P, dense_R = (np.stack([m.toarray() for m in ms]) for ms in (mats, Rt))
    want = np.einsum("ast,ast->sa", dense_P, dense_R)
    np.testing.assert_allclose(got, want, atol=1e-12)
    # a dense (A, S, S) array of low density also comes out sparse; a small one stays dense
    assert from_mdptoolbox(np.stack([m.toarray() for m in mats]), R, 0.95).sparse
    small, Rs = _sparse_toolbox(20, 2, 1)
    assert not from_mdptoolbox(small, Rs, 0.9).sparse
    assert from_mdptoolbox(small, Rs, 0.9, sparse=True).sparse
    with pytest.raises(ValueError, match=r"P\[1\] has shape \(4, 4\), expected \(20, 20\)"):
        from_mdptoolbox([small[0], sp.eye(4, format="csr")], Rs, 0.9)
