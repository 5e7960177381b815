"""Sparse transition models: the same model held dense and sparse gives the same answers,
the sparse paths never densify, and bad sparse input is refused where it enters."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import optplan as op
from optplan import mdp as mdp_module
from optplan._checks import OptplanError, OptplanTypeError
from optplan.dp import discounted_policy_iteration
from optplan.problems.discounted import DiscountedPlanning


def random_model(seed: int, discount: float | None = 0.9, dense_rows: bool = False):
    """A random model with rows of a few successors, sometimes a mask."""
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(2, 40)), int(rng.integers(1, 5))
    k = S if dense_rows else int(rng.integers(1, min(S, 6) + 1))
    P = np.zeros((S, A, S))
    for s in range(S):  # test data only
        for a in range(A):
            succ = rng.choice(S, size=k, replace=False)
            P[s, a, succ] = rng.dirichlet(np.ones(k))
    R = rng.normal(size=(S, A))
    mask = None
    if A > 1 and rng.random() < 0.5:
        mask = rng.random((S, A)) < 0.7
        mask[np.arange(S), rng.integers(0, A, S)] = True
    return op.TabularMDP(P, R, discount=discount, action_mask=mask)


def sparse_of(mdp):
    S, A = mdp.shape
    return op.TabularMDP(
        sp.csr_matrix(mdp.P.reshape(S * A, S)),
        mdp.R,
        mdp.discount,
        mdp.initial,
        mdp.action_mask,
    )


def close(a, b, tol):
    scale = max(1.0, float(np.abs(a).max()))
    return float(np.abs(np.asarray(a) - np.asarray(b)).max()) <= tol * scale


# -- the model ------------------------------------------------------------------------------


def test_sparse_model_interface():
    dense = random_model(0)
    sparse = sparse_of(dense)
    S, A = dense.shape
    assert (dense.P_format, sparse.P_format) == ("dense", "csr")
    assert sparse.sparse and not dense.sparse
    assert sparse.P.shape == (S * A, S) and sparse.nnz == np.count_nonzero(dense.P)
    assert np.array_equal(sparse.dense_P(), dense.P)
    assert np.array_equal(dense.P_rows, dense.P.reshape(S * A, S))
    assert sparse == dense and dense == sparse
    assert sparse.to_dense() == dense and dense.to_sparse() == sparse
    assert sparse.to_sparse() is sparse and dense.to_dense() is dense
    # passed on, not copied: with_mask / with_discount keep the validated matrix
    assert sparse.with_discount(0.5).P is sparse.P
    assert "sparse" in repr(sparse)
    # read-only: a validated model cannot be changed through its arrays
    with pytest.raises(ValueError):
        sparse.P.data[0] = 2.0


def test_sparse_input_is_copied_and_canonical():
    S, A = 3, 2
    rows = np.array([0, 0, 1, 2, 3, 4, 5, 0])
    cols = np.array([0, 1, 2, 0, 1, 2, 0, 0])
    vals = np.array([0.25, 0.5, 1, 1, 1, 1, 1, 0.25])  # (0, 0) given twice: summed
    coo = sp.coo_matrix((vals, (rows, cols)), shape=(S * A, S))
    m = op.TabularMDP(coo, np.zeros((S, A)), discount=0.5)
    assert m.P.format == "csr" and m.P.has_canonical_format
    assert m.dense_P()[0, 0, 0] == 0.5
    coo.data[:] = 7.0
    assert m.dense_P()[0, 0, 0] == 0.5


def test_sparse_normalize():
    dense = random_model(3)
    S, A = dense.shape
    P = sp.csr_matrix(dense.P.reshape(S * A, S) * (1 + 1e-8))
    with pytest.raises(OptplanError, match="normalize=True"):
        op.TabularMDP(P, dense.R)
    m = op.TabularMDP(P, dense.R, normalize=True)
    assert np.allclose(np.asarray(m.P.sum(axis=1)).ravel(), 1.0, atol=1e-15, rtol=0)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            lambda P: P.__setitem__((3, 1), P[3, 1] + 0.1),
            r"row P\[\(s, a\) = \(1, 1\)\].* sums to 1\.1",
        ),
        (
            lambda P: P.__setitem__((3, 1), np.nan),
            r"non-finite entry nan at \(s, a\) = \(1, 1\), s'=1",
        ),
        (
            lambda P: (P.__setitem__((3, 1), -0.1), P.__setitem__((3, 2), P[3, 2] + 0.1)),
            r"negative entry -0\.1 at \(s, a\) = \(1, 1\), s'=1",
        ),
    ],
)
def test_sparse_bad_entries(edit, match):
    rng = np.random.default_rng(1)
    S, A = 4, 2
    P = rng.dirichlet(np.ones(S), size=S * A)
    edit(P)
    with pytest.raises(OptplanError, match=match):
        op.TabularMDP(sp.csr_matrix(P), rng.random((S, A)))


def test_sparse_bad_shape_mask_and_type():
    S, A = 4, 2
    P = sp.csr_matrix(np.full((S * A, S), 1 / S))
    with pytest.raises(OptplanError, match=r"shape \(4, 8\), expected \(S\*A, S\) = \(8, 4\)"):
        op.TabularMDP(P.T.tocsr(), np.zeros((S, A)))
    with pytest.raises(OptplanError, match=r"shape \(8, 4\), expected .* \(12, 4\)"):
        op.TabularMDP(P, np.zeros((S, 3)))
    mask = np.ones((S, A), bool)
    mask[2] = False
    with pytest.raises(OptplanError, match=r"leaves state 2 with no action .*\[False, False\]"):
        op.TabularMDP(P, np.zeros((S, A)), action_mask=mask)
    with pytest.raises(OptplanTypeError, match="real numeric"):
        op.TabularMDP(P.astype(complex), np.zeros((S, A)))
    # a masked-out row may be empty
    Q = P.tolil()
    Q[1, :] = 0
    mask = np.ones((S, A), bool)
    mask[0, 1] = False
    assert op.TabularMDP(Q.tocsr(), np.zeros((S, A)), action_mask=mask).nnz == S * A * S - S


def test_dense_view_is_refused_above_the_limit(monkeypatch):
    sparse = sparse_of(random_model(2))
    S, A = sparse.shape
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", S * A * S * 8 - 1)
    with pytest.raises(OptplanError, match=rf"S={S}, A={A}\) would take {S * A * S * 8:,} bytes"):
        sparse.dense_P()
    # the sparse paths never ask for it
    fast = DiscountedPlanning(sparse).solve()
    assert fast.status == "optimal"


# -- discounted ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_discounted_dense_and_sparse_agree(seed):
    dense = random_model(seed, discount=float(np.random.default_rng(seed).choice([0.5, 0.9, 0.99])))
    sparse = sparse_of(dense)
    a = DiscountedPlanning(dense).solve()
    b = DiscountedPlanning(sparse).solve()
    assert a.status == b.status == "optimal"
    assert np.array_equal(a.policy, b.policy)
    assert close(a.values, b.values, 1e-10)
    assert close(a.occupancy, b.occupancy, 1e-10)
    assert np.allclose(a.q, b.q, rtol=0, atol=1e-10 * max(1.0, np.abs(a.values).max()))
    vi = DiscountedPlanning(sparse).solve(algorithm="value_iteration", tol=1e-11)
    assert close(vi.values, a.values, 1e-10)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_iterative_evaluation_certifies_its_accuracy(seed, fmt):
    dense = random_model(seed, discount=0.99)
    model = dense if fmt == "dense" else sparse_of(dense)
    rows, R, mask = model.P_rows, model.R, model.action_mask
    exact = DiscountedPlanning(dense).solve(evaluation="direct")
    rounding = 1e-12 * np.abs(exact.values).max()  # the LU's own error at discount 0.99
    for tol in (1e-6, 1e-10):
        out = discounted_policy_iteration(rows, R, mask, 0.99, tol=tol, evaluation="iterative")
        assert out.status == "optimal" and out.iterative
        err = float(np.abs(out.values - exact.values).max())
        assert err <= out.bound + rounding
        assert out.bound <= tol * np.abs(out.values).max()
    fast = DiscountedPlanning(model).solve(evaluation="iterative")
    assert "certified" in fast.message
    assert close(fast.occupancy, exact.occupancy, 1e-10)


def test_inexact_policy_iteration_on_a_slow_chain_falls_back_to_gmres():
    # a ring: the policy's chain mixes slowly, the fixed point stalls, GMRES finishes
    S = 400
    P = sp.lil_matrix((S, S))
    for s in range(S):  # test data only
        P[s, (s + 1) % S] = 0.99
        P[s, s] = 0.01
    R = np.sin(np.arange(S))[:, None]
    m = op.TabularMDP(P.tocsr(), R, discount=0.999)
    out = discounted_policy_iteration(
        m.P_rows, m.R, m.action_mask, 0.999, tol=1e-10, evaluation="iterative"
    )
    exact = discounted_policy_iteration(m.P_rows, m.R, m.action_mask, 0.999, evaluation="direct")
    assert out.status == "optimal"
    assert np.abs(out.values - exact.values).max() <= out.bound


def test_cross_check_on_a_sparse_model():
    sparse = sparse_of(random_model(5, discount=0.95))
    result = op.cross_check(DiscountedPlanning(sparse))
    assert result.agree, result.message


def local_sparse_model(S: int, A: int = 2, K: int = 5, discount=0.9, seed: int = 0):
    """Each pair moves to ``K`` states near its own (a ring): sparse, with a sparse LP whose
    factorization does not fill in (random successors make Clarabel's KKT system dense)."""
    rng = np.random.default_rng(seed)
    own = np.repeat(np.arange(S), A * K).reshape(S * A, K)
    indices = ((own + rng.integers(-8, 9, size=own.shape)) % S).ravel()
    data = rng.dirichlet(np.ones(K), size=S * A).ravel()
    P = sp.csr_matrix((data, indices, np.arange(0, S * A * K + 1, K)), shape=(S * A, S))
    return op.TabularMDP(P, rng.random((S, A)), discount=discount)


@pytest.mark.slow
def test_cross_check_sparse_discounted_at_ten_thousand_states():
    m = local_sparse_model(10_000)
    assert m.sparse
    result = op.cross_check(DiscountedPlanning(m))
    assert result.agree, result.message


# -- model files ---------------------------------------------------------------------------


def test_model_file_round_trip_is_compact_and_sparse(tmp_path):
    from optplan.modelfile import load_model, save_model

    sparse = sparse_of(random_model(4, discount=0.9))
    path = save_model(sparse, tmp_path / "m.toml")
    text = path.read_text()
    assert "P_csr" in text and "\nP = " not in text
    back = load_model(path)
    assert back.sparse and back == sparse


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ("P_csr = {indptr = [0, 1, 2], indices = [0, 5], data = [1.0, 1.0]}", r"state 5, outside"),
        ("P_csr = {indptr = [0, 1], indices = [0], data = [1.0]}", r"S\*A \+ 1 = 3 entries"),
        ("P_csr = {indptr = [0, 1, 2], indices = [0, 1], data = [1.0, 0.5]}", r"sums to 0\.5"),
        ("P_csr = {indptr = [0, 1, 2], indices = [0, 1]}", r"needs 'data'"),
        (
            "P_csr = {indptr = [0, 1, 2], indices = [0, 1], data = [1.0, 1.0]}\nP = [[[1.0]]]",
            r"two forms",
        ),
    ],
)
def test_model_file_bad_csr(tmp_path, table, match):
    from optplan.modelfile import load_model

    path = tmp_path / "bad.toml"
    path.write_text(f'criterion = "average"\nR = [[0.0], [1.0]]\n{table}\n')
    with pytest.raises(OptplanError, match=match):
        load_model(path)


# -- average reward ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("algorithm", ["policy_iteration", "relative_value_iteration"])
def test_average_reward_dense_and_sparse_agree(seed, algorithm):
    from optplan.problems.average_reward import AverageRewardPlanning

    dense = random_model(seed, discount=None)
    a = AverageRewardPlanning(dense).solve(algorithm=algorithm)
    b = AverageRewardPlanning(sparse_of(dense)).solve(algorithm=algorithm)
    assert a.status == b.status
    if a.status == "optimal":
        assert np.array_equal(a.policy, b.policy)
        assert close(a.gain, b.gain, 1e-10)
        assert close(a.bias, b.bias, 1e-10)
        assert close(a.occupancy, b.occupancy, 1e-10)


def test_average_reward_large_sparse_chain_is_evaluated_iteratively():
    from optplan.dp import SPARSE_DIRECT_MAX_STATES
    from optplan.problems.average_reward import AverageRewardPlanning

    S, A, K = SPARSE_DIRECT_MAX_STATES + 500, 3, 4
    rng = np.random.default_rng(7)
    indices = rng.integers(0, S, size=S * A * K)
    data = rng.dirichlet(np.ones(K), size=S * A).ravel()
    P = sp.csr_matrix((data, indices, np.arange(0, S * A * K + 1, K)), shape=(S * A, S))
    sparse = op.TabularMDP(P, rng.random((S, A)))
    b = AverageRewardPlanning(sparse).solve()
    a = AverageRewardPlanning(sparse.to_dense()).solve()
    assert a.status == b.status == "optimal"
    assert np.array_equal(a.policy, b.policy)
    assert close(a.gain, b.gain, 1e-10)
    assert close(a.bias, b.bias, 1e-8)
    assert close(a.occupancy, b.occupancy, 1e-10)


def test_average_reward_multichain_sparse_goes_dense():
    from optplan.problems.average_reward import AverageRewardPlanning

    # two absorbing states: every policy has two recurrent classes
    P = np.zeros((3, 1, 3))
    P[0, 0, [0, 2]] = 0.5
    P[1, 0, 1] = P[2, 0, 2] = 1.0
    dense = op.TabularMDP(P, np.array([[0.0], [1.0], [0.0]]))
    for multichain in ("refuse", "solve"):
        a = AverageRewardPlanning(dense, multichain=multichain).solve()
        b = AverageRewardPlanning(sparse_of(dense), multichain=multichain).solve()
        assert a.status == b.status
        assert np.allclose(a.gain, b.gain, equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
def test_cross_check_average_reward_on_a_sparse_model(seed):
    from optplan.problems.average_reward import AverageRewardPlanning

    result = op.cross_check(AverageRewardPlanning(sparse_of(random_model(seed, discount=None))))
    assert result.agree, result.message


# -- dense-only computations take a dense copy, within the size limit -------------------------


def test_dense_only_computations_on_a_sparse_model(monkeypatch):
    from optplan.problems.hitting_time import HittingTimes

    dense = random_model(1, discount=None)
    sparse = sparse_of(dense)
    a, b = op.describe(dense, method="fast"), op.describe(sparse, method="fast")
    assert a.structure == b.structure and a.gain["min"] == b.gain["min"]
    ha, hb = HittingTimes(dense).solve(), HittingTimes(sparse).solve()
    assert np.allclose(ha.x, hb.x, rtol=1e-10, atol=0)
    S, A = sparse.shape
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", S * A * S * 8 - 1)
    with pytest.raises(OptplanError, match="would take"):
        op.describe(sparse, method="fast")
    assert HittingTimes(sparse).mdp.sparse  # hitting times run sparse, no copy to refuse


def test_dense_discounted_path_evaluates_iteratively_from_the_threshold():
    from optplan.dp import DENSE_ITERATIVE_MIN_STATES

    rng = np.random.default_rng(11)
    S, A = DENSE_ITERATIVE_MIN_STATES, 3
    m = op.TabularMDP(rng.dirichlet(np.ones(S) * 0.3, size=(S, A)), rng.random((S, A)), 0.99)
    auto = DiscountedPlanning(m).solve()
    exact = DiscountedPlanning(m).solve(evaluation="direct")
    assert "certified" in auto.message and "certified" not in exact.message
    assert np.array_equal(auto.policy, exact.policy)
    assert close(auto.values, exact.values, 1e-10)
    assert close(auto.occupancy, exact.occupancy, 1e-10)


def test_slowly_mixing_grid_is_solved_by_the_factorization_fallback():
    # a 30 x 30 grid with slips: chains mix slowly at discount 0.99, the fixed point hands
    # over to the sparse LU (values and occupancy), the answer still certified
    n, A = 30, 4
    S = n * n
    r, c = np.divmod(np.arange(S), n)
    moves = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])
    dest = [np.clip(r + dr, 0, n - 1) * n + np.clip(c + dc, 0, n - 1) for dr, dc in moves]
    rows = np.concatenate([np.arange(S) * A + a for a in range(A) for _ in range(4)])
    cols = np.concatenate([dest[m] for a in range(A) for m in range(4)])
    vals = np.concatenate(
        [np.full(S, 0.925 if m == a else 0.025) for a in range(A) for m in range(4)]
    )
    P = sp.csr_matrix((vals, (rows, cols)), shape=(S * A, S))
    R = np.full((S, A), -0.01)
    R[S - 1] = 1.0
    m = op.TabularMDP(P, R, discount=0.99)
    out = DiscountedPlanning(m).solve(evaluation="iterative", tol=1e-9)
    exact = DiscountedPlanning(m).solve(evaluation="direct")
    assert out.status == exact.status == "optimal"
    assert close(out.values, exact.values, 1e-9)
    # the grid's symmetric moves tie: optimal policies (and their occupancies) may differ,
    # their occupancies' values may not; each occupancy is its own policy's
    value = [float(np.sum(x.occupancy * R)) / (1 - 0.99) for x in (out, exact)]
    assert abs(value[0] - value[1]) <= 1e-9 * abs(value[1])
    from optplan.problems._compare import flow_residual

    source = (1 - 0.99) * DiscountedPlanning(m).weights
    assert flow_residual(out.occupancy, m.P_rows, source, 0.99) <= 1e-12


def grid_model(n: int, discount=None):
    """``n x n`` grid, four moves that slip to a random move with probability 0.1, reward
    1 in the last cell, -0.01 elsewhere: sparse, slowly mixing."""
    A, S = 4, n * n
    r, c = np.divmod(np.arange(S), n)
    moves = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])
    dest = [np.clip(r + dr, 0, n - 1) * n + np.clip(c + dc, 0, n - 1) for dr, dc in moves]
    rows = np.concatenate([np.arange(S) * A + a for a in range(A) for _ in range(4)])
    cols = np.concatenate([dest[m] for a in range(A) for m in range(4)])
    vals = np.concatenate(
        [np.full(S, 0.925 if m == a else 0.025) for a in range(A) for m in range(4)]
    )
    R = np.full((S, A), -0.01)
    R[S - 1] = 1.0
    return op.TabularMDP(sp.csr_matrix((vals, (rows, cols)), shape=(S * A, S)), R, discount)


def test_average_reward_on_a_slowly_mixing_large_grid():
    from optplan.problems.average_reward import AverageRewardPlanning

    sparse = grid_model(34)  # 1156 states: above the dense-chain size, iterations or the LU
    a = AverageRewardPlanning(sparse.to_dense()).solve()
    b = AverageRewardPlanning(sparse).solve()
    assert a.status == b.status == "optimal"
    assert close(a.gain, b.gain, 1e-10)
    # the grid's symmetric moves tie (the policies may differ); the optimal bias does not
    assert close(b.bias, a.bias, 1e-8)


# -- the benchmark's sparse rows -------------------------------------------------------------


def test_bench_planning_sparse_rows():
    from optplan.bench import Runs
    from optplan.bench.planning import bench_planning, format_table, random_sparse_mdp

    m = random_sparse_mdp(np.random.default_rng(0), 50, 3)
    assert m.sparse and m.nnz <= 50 * 3 * 10
    rows = bench_planning(
        Runs(sizes=(40,), n_actions=2, repeats=2, solvers=("CLARABEL",)), sparse=True
    )
    assert [r["criterion"] for r in rows] == ["discounted", "average"]
    for r in rows:
        assert r["CLARABEL_fail"] == 0 and r["CLARABEL_err"] < 1e-7
        assert r["nnz"] > 0 and r["peak_rss_gib"] > 0
    assert "peak GiB" in format_table(rows, ("CLARABEL",))
    with pytest.raises(OptplanError, match="--sparse times the criteria"):
        bench_planning(Runs(sizes=(10,)), criteria=("hitting_time",), sparse=True)


# -- readers of P outside the planning paths: dense copies of a sparse model, same numbers --


def unmasked_model(seed: int, discount=None):
    """A random unmasked model with rows of every successor (ergodic), dense and sparse."""
    dense = random_model(seed, discount=discount, dense_rows=True)
    dense = op.TabularMDP(dense.P, dense.R, discount=discount)
    return dense, sparse_of(dense)


def traces_equal(a, b) -> bool:
    """The same run: identical states, actions and rewards; the regrets within round-off (the
    oracle's values come from the sparse or the dense planning path)."""
    same = all(
        np.array_equal(getattr(a, f), getattr(b, f))
        for f in ("states", "actions", "rewards", "expected_rewards")
    )
    fields = ("regret", "gap_regret", "realized_regret", "oracle_cumulative")
    return same and all(close(getattr(a, f), getattr(b, f), 1e-12) for f in fields)


@pytest.mark.parametrize("agent", ["mdp-ucb", "psrl-continuing"])
def test_agent_run_on_a_sparse_env_matches_dense(agent):
    from optplan.agents import make_agent
    from optplan.envs import TabularEnv
    from optplan.experiments import run

    dense, sparse = unmasked_model(4)
    traces = []
    for model in (dense, sparse):
        env = TabularEnv(model)
        traces.append(run(make_agent(agent, env), env, steps=300, seed=7))
    assert traces[0].states.size == 300 and traces_equal(*traces)


def test_known_transition_agents_and_metrics_on_a_sparse_model():
    from optplan.agents import make_agent
    from optplan.envs import TabularEnv
    from optplan.experiments import metrics, run

    dense, sparse = unmasked_model(5, discount=0.9)
    traces = []
    for model in (dense, sparse):
        env = TabularEnv(model)
        agent = make_agent("ube", env, transitions="known")
        traces.append(run(agent, env, steps=150, seed=2, criterion="discounted"))
    assert traces_equal(*traces)
    S, A = dense.shape
    rng = np.random.default_rng(0)
    pols = rng.dirichlet(np.ones(A), size=(3, S))
    det = rng.integers(0, A, S)
    for f in (metrics.discounted_policy_values, metrics.occupancy_measures):
        assert np.array_equal(f(dense, pols), f(sparse, pols))
    # the optimal value: policy iteration on the same dense copy
    assert np.array_equal(metrics.occupancy_gaps(dense, pols), metrics.occupancy_gaps(sparse, pols))
    a, b = metrics.oracle_step_rewards(dense, det, 50), metrics.oracle_step_rewards(sparse, det, 50)
    assert close(a, b, 1e-13)
    ta, tb = op.to_mdptoolbox(dense), op.to_mdptoolbox(sparse)
    assert np.array_equal(ta.P, tb.P) and ta.P.shape == (A, S, S)


def test_cli_finite_horizon_and_hitting_times_on_a_sparse_model(tmp_path, capsys):
    import json

    from optplan.cli import main
    from optplan.problems.hitting_time import HittingTimes

    dense, sparse = unmasked_model(6, discount=0.9)
    outs = []
    for name, model in (("dense", dense), ("sparse", sparse)):
        path = tmp_path / f"{name}.toml"
        op.save_model(model, path)
        assert op.load_model(path).sparse == (name == "sparse")
        assert main(["solve", str(path), "--criterion", "discounted", "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out)["results"]["fast"])
        flags = ["--criterion", "finite_horizon", "--horizon", "4", "--json"]
        assert main(["solve", str(path), *flags]) == 0
        outs.append(json.loads(capsys.readouterr().out)["results"]["fast"])
    assert close(outs[0]["values"], outs[2]["values"], 1e-10)
    assert outs[0]["policy"] == outs[2]["policy"]
    assert close(outs[1]["values"], outs[3]["values"], 1e-10)
    assert outs[1]["policy"] == outs[3]["policy"]
    fa = op.FiniteHorizonMDP.from_stationary(dense, 5)
    fb = op.FiniteHorizonMDP.from_stationary(sparse, 5)
    ra, rb = op.FiniteHorizonPlanning(fa).solve(), op.FiniteHorizonPlanning(fb).solve()
    assert fb.sparse and fa == fb and close(ra.values, rb.values, 1e-10)
    assert np.allclose(HittingTimes(dense).solve().x, HittingTimes(sparse).solve().x, rtol=1e-10)
    da, db = op.describe(dense, method="fast"), op.describe(sparse, method="fast")
    # the sparse model's report comes from its sparse paths: equal up to round-off
    assert da.structure == db.structure and da.diameter["worst_pair"] == db.diameter["worst_pair"]
    assert close(da.diameter["value"], db.diameter["value"], 1e-10)


def test_dense_only_readers_refuse_a_large_sparse_model(monkeypatch):
    from optplan.agents import CountBonus, make_agent
    from optplan.envs import TabularEnv
    from optplan.experiments import metrics

    dense, sparse = unmasked_model(4, discount=0.9)
    S, A = sparse.shape
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", S * A * S * 8 - 1)
    pols = np.full((S, A), 1.0 / A)
    calls = [
        lambda: TabularEnv(sparse),
        lambda: op.to_mdptoolbox(sparse),
        lambda: metrics.discounted_policy_values(sparse, pols),
        lambda: metrics.occupancy_gaps(sparse, pols),
        lambda: make_agent("ube", sparse, transitions="known"),
    ]
    for call in calls:
        with pytest.raises(OptplanError, match=rf"would take {S * A * S * 8:,} bytes"):
            call()
    # a layered copy stays sparse; the environment built on it asks for the dense rows
    layered = op.FiniteHorizonMDP.from_stationary(sparse, 3)
    assert layered.sparse
    with pytest.raises(OptplanError, match=rf"would take {3 * S * A * S * 8:,} bytes"):
        TabularEnv(layered)
    # the sparse fast path needs no dense copy: the oracle's rewards stay available
    assert metrics.oracle_step_rewards(sparse, np.zeros(S, dtype=np.intp), 5).shape == (5,)
    with pytest.raises(OptplanError, match="known_transitions must be a dense array"):
        CountBonus(S, A, discount=0.9, known_transitions=sparse.P)


def test_multichain_solvers_called_with_a_sparse_model_take_its_dense_copy(monkeypatch):
    from optplan.conic import average_reward as conic_average
    from optplan.fast import average_reward as fast_average

    dense, sparse = unmasked_model(7)
    a = fast_average.solve_multichain(op.AverageRewardPlanning(dense), 100)
    b = fast_average.solve_multichain(op.AverageRewardPlanning(sparse), 100)
    assert a.status == b.status == "optimal" and np.array_equal(a.values, b.values)
    c = conic_average.solve_multichain(op.AverageRewardPlanning(sparse), "CLARABEL")
    assert c.success and close(c.values, a.values, 1e-6)
    S, A = sparse.shape
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", S * A * S * 8 - 1)
    with pytest.raises(OptplanError, match="would take"):
        fast_average.solve_multichain(op.AverageRewardPlanning(sparse), 100)


def _bipartite_chain(n: int, seed: int):
    """A periodic (period 2) chain on halves of ``n`` and ``2 n`` states: each state moves to
    5 random states of the other half, with Dirichlet weights. The stationary law puts 1/2 on
    each half, the uniform start 1/3 and 2/3: the oscillating mode is excited."""
    rng = np.random.default_rng(seed)
    sizes, offsets = (n, 2 * n), (0, n)
    rows, cols, vals = [], [], []
    for half in (0, 1):
        other = 1 - half
        for s in range(sizes[half]):
            succ = rng.choice(sizes[other], 5, replace=False) + offsets[other]
            rows += [s + offsets[half]] * 5
            cols += succ.tolist()
            vals += rng.dirichlet(np.ones(5)).tolist()
    return sp.csr_matrix((vals, (rows, cols)), shape=(3 * n, 3 * n))


@pytest.mark.parametrize("seed", range(3))
def test_sparse_unichain_evaluation_on_a_periodic_chain(seed):
    """The undamped power iteration cannot converge on a periodic chain: the aperiodic
    transform takes over, and gain, bias and stationary law equal the factorized ones."""
    from optplan.dp.sparse_average import _factorize, _iterate

    P = _bipartite_chain(100, seed)
    r = np.random.default_rng(seed + 10).random(300)
    ev = _iterate(P, r, 1e-12, True)  # the iterations themselves (no factorized fallback)
    ref = _factorize(P, r)
    assert ev.gain == pytest.approx(ref.gain, abs=1e-12)
    np.testing.assert_allclose(ev.stationary, ref.stationary, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ev.bias, ref.bias, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_sparse_unichain_evaluation_from_a_start_equals_the_cold_one(seed):
    """``start`` (a neighbouring policy's stationary law and bias) changes the iterates, not
    the answer."""
    from optplan.bench.planning import random_sparse_mdp
    from optplan.dp import evaluate_sparse_unichain

    rng = np.random.default_rng(seed)
    P = random_sparse_mdp(rng, 400, 1).P_rows  # one action: the chain itself
    r = rng.random(400)
    cold = evaluate_sparse_unichain(P, r, 1e-12)
    start = (rng.dirichlet(np.ones(400)), rng.normal(size=400))
    warm = evaluate_sparse_unichain(P, r, 1e-12, start=start)
    assert warm.gain == pytest.approx(cold.gain, abs=1e-12)
    np.testing.assert_allclose(warm.stationary, cold.stationary, rtol=0, atol=1e-12)
    np.testing.assert_allclose(warm.bias, cold.bias, rtol=0, atol=1e-10)


def test_sparse_unichain_evaluation_refuses_a_start_of_the_wrong_shape():
    from optplan.bench.planning import random_sparse_mdp
    from optplan.dp import evaluate_sparse_unichain

    P = random_sparse_mdp(np.random.default_rng(0), 200, 1).P_rows
    with pytest.raises(OptplanError, match=r"start's bias must have shape \(200,\), got \(3,\)"):
        evaluate_sparse_unichain(P, np.ones(200), 1e-10, start=(None, np.zeros(3)))
