"""RAVI-UCB's regret ``R_T = sum_t <mu* - mu^{pi_t}, r>``: the occupancy
metric against independent computations, the policy protocol of the agents it scores, the run
loop's bookkeeping (one copy per policy change), the registered agents and environments of the
discounted-reset setting, and the result store's optional curve."""

from __future__ import annotations

import numpy as np
import pytest

import optplan as op
from optplan._checks import OptplanError
from optplan.agents import (
    RAVIUCB,
    UCRL2,
    ContinuingPSRL,
    EpsilonGreedyQ,
    OracleAgent,
    PolicyAgent,
    RandomAgent,
    RAVIUCBLinear,
    SoftQ,
)
from optplan.agents.base import greedy_policy, one_hot_policy
from optplan.envs import DiscountedResets, LinearMixtureMDP, TabularEnv
from optplan.experiments import metrics, run
from optplan.experiments.stats import mean_ci
from optplan.generators import random_dirichlet, riverswim
from optplan.sweeps import load_results, registry, run_sweep
from optplan.sweeps.sweep import sweep_from_dict

# --- independent references ---------------------------------------------------------------------


def occupancy_by_series(mdp, pi, gamma):
    """``(1 - gamma) sum_k gamma^k Pr(x_k = s) pi(a|s)`` by propagating the state distribution
    until ``gamma^k < 1e-17`` (a plain loop; no linear solve)."""
    P_pi = np.einsum("sa,sat->st", pi, mdp.P)
    d, total, w = np.asarray(mdp.initial, float), np.zeros(mdp.n_states), 1.0
    while w > 1e-17:
        total += w * d
        d, w = d @ P_pi, w * gamma
    return (1 - gamma) * total[:, None] * pi


def random_policies(rng, K, S, A, mask=None):
    pi = rng.random((K, S, A)) ** 3
    if mask is not None:
        pi = pi * mask
    return pi / pi.sum(-1, keepdims=True)


# --- the metric -------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.5, 0.9, 0.99])
def test_occupancy_measures_equal_the_power_series(gamma):
    rng = np.random.default_rng(0)
    mdp = random_dirichlet(7, 3, seed=1, support=3).with_discount(gamma)
    pis = random_policies(rng, 5, 7, 3)
    mu = metrics.occupancy_measures(mdp, pis)
    for k in range(5):
        ref = occupancy_by_series(mdp, pis[k], gamma)
        np.testing.assert_allclose(mu[k], ref, atol=1e-13)
    np.testing.assert_allclose(mu.sum(axis=(1, 2)), 1.0, atol=1e-13)
    # <mu, r> = (1 - gamma) nu_0 . V^pi, the identity occupancy_gaps uses
    V = metrics.discounted_policy_values(mdp, pis)
    np.testing.assert_allclose(
        (mu * mdp.R).sum(axis=(1, 2)), (1 - gamma) * V @ mdp.initial, atol=1e-13
    )


def test_optimal_occupancy_equals_the_lp_dual():
    """mu* from the linear solve equals the dual of the discounted LP (Clarabel), whose weights
    are the model's full-support initial distribution."""
    mdp = random_dirichlet(8, 3, seed=4).with_discount(0.9)
    lp = op.solve_discounted(mdp, method="conic", solver="CLARABEL")
    assert lp.status == "optimal"
    star = one_hot_policy(op.solve_discounted(mdp).policy, 3)
    mu = metrics.occupancy_measures(mdp, star)[0]
    np.testing.assert_allclose(mu, lp.occupancy, atol=1e-7)
    assert metrics.occupancy_gaps(mdp, star)[0] == pytest.approx(0.0, abs=1e-14)


def test_gaps_are_nonnegative_and_zero_only_at_the_optimum():
    rng = np.random.default_rng(2)
    mdp = riverswim(6).with_discount(0.9)
    pis = random_policies(rng, 50, 6, 2)
    gaps = metrics.occupancy_gaps(mdp, pis)
    assert gaps.shape == (50,) and (gaps > 0).all()
    opt = op.solve_discounted(mdp)
    given = metrics.occupancy_gaps(mdp, pis, optimal_value=float(mdp.initial @ opt.values))
    np.testing.assert_allclose(given, gaps, rtol=1e-12)
    # a gap is (1 - gamma) nu_0 . (V* - V^pi), V^pi of a deterministic policy by dp
    det = rng.integers(2, size=(4, 6))
    for p, g in zip(
        det, metrics.occupancy_gaps(mdp, np.stack([one_hot_policy(x, 2) for x in det])), strict=True
    ):
        idx = np.arange(6)
        V = op.dp.evaluate_discounted(mdp.P[idx, p], mdp.R[idx, p], 0.9)
        assert g == pytest.approx(0.1 * mdp.initial @ (opt.values - V), abs=1e-14)


def test_batches_equal_single_policies_across_chunks(monkeypatch):
    rng = np.random.default_rng(3)
    mdp = random_dirichlet(5, 2, seed=0).with_discount(0.8)
    pis = random_policies(rng, 40, 5, 2)
    monkeypatch.setattr(metrics, "_CHUNK_BYTES", 8 * 25 * 7)  # chunks of 7 policies
    batched = metrics.occupancy_gaps(mdp, pis)
    singles = [metrics.occupancy_gaps(mdp, p)[0] for p in pis]
    np.testing.assert_allclose(batched, singles, rtol=1e-13, atol=1e-16)
    np.testing.assert_array_equal(
        metrics.occupancy_regret(batched, [0, 0, 3]), np.cumsum(batched[[0, 0, 3]])
    )


def test_metric_bad_input_names_the_field():
    mdp = riverswim(3).with_discount(0.9)
    good = np.full((3, 2), 0.5)
    with pytest.raises(OptplanError, match=r"policies must have shape \(K, 3, 2\)"):
        metrics.occupancy_gaps(mdp, np.full((3, 3), 1 / 3))
    with pytest.raises(OptplanError, match="policy 0 is not a distribution in state 1"):
        metrics.occupancy_gaps(mdp, good * [[1], [1.2], [1]])
    with pytest.raises(OptplanError, match="negative or non-finite entry"):
        metrics.occupancy_gaps(
            mdp, np.where([[True, True], [True, False], [True, True]], good, np.nan)
        )
    mask = np.ones((3, 2), bool)
    mask[1, 1] = False
    masked = TabularMDP_with_mask(mask)
    with pytest.raises(OptplanError, match=r"puts mass 0.5 on inadmissible \(1, 1\)"):
        metrics.occupancy_gaps(masked, good)
    with pytest.raises(OptplanError, match="the model has no discount"):
        metrics.occupancy_gaps(riverswim(3), good)
    with pytest.raises(OptplanError, match="discount must lie in"):
        metrics.occupancy_gaps(mdp, good, discount=1.0)
    with pytest.raises(OptplanError, match="policy_index must be 1-D indices into 2 gaps"):
        metrics.occupancy_regret([0.1, 0.2], [0, 2])


def TabularMDP_with_mask(mask):
    base = riverswim(3)
    return op.TabularMDP(base.P, base.R, discount=0.9, action_mask=mask)


# --- the policy protocol -----------------------------------------------------------------------


def _env(gamma=0.9, S=6):
    return DiscountedResets(TabularEnv(riverswim(S)), gamma)


def _agents(env):
    mdp = env.mdp
    R = mdp.R
    return {
        "ravi": RAVIUCB(6, 2, discount=0.9, horizon=500, rewards=R, beta_scale=0.01, eta=1.0),
        "ucrl2": UCRL2(6, 2, criterion="discounted", discount=0.9, rewards=R),
        "psrl": ContinuingPSRL(6, 2, discount=0.9, update_every=7),
        "eps": EpsilonGreedyQ(6, 2, epsilon=0.2, discount=1.0),
        "soft": SoftQ(6, 2, temperature=0.1, discount=1.0),
        "oracle": OracleAgent(mdp),
        "random": RandomAgent(6, 2),
    }


def test_agents_expose_the_policy_they_sample_from():
    """Drive each agent 300 steps, then draw 4,000 actions in every state from a copy of it
    and compare with current_policy (deterministic agents: exactly; stochastic: within 5
    binomial standard errors, fixed seeds)."""
    import copy

    env = _env()
    for name, agent in _agents(env).items():
        assert isinstance(agent, PolicyAgent), name
        run(agent, env, steps=300, seed=1)
        pi = agent.current_policy()
        assert pi.shape == (6, 2) and np.allclose(pi.sum(1), 1.0), name
        for s in range(6):
            probe = copy.deepcopy(agent)
            probe.rng = np.random.default_rng(s)
            if hasattr(probe, "_rng"):
                probe._rng = np.random.default_rng(s)
            draws = np.array([probe.select_action(s) for _ in range(4000)])
            freq = np.bincount(draws, minlength=2) / 4000
            se = np.sqrt(pi[s] * (1 - pi[s]) / 4000)
            assert np.all(np.abs(freq - pi[s]) <= 5 * se + 1e-12), (name, s, freq, pi[s])


def test_versions_change_with_the_policy_only():
    q = EpsilonGreedyQ(3, 2, epsilon=0.1, discount=0.5)
    q.reset(np.random.default_rng(0))
    v0 = q.policy_version
    q.update(0, 0, 1.0, 1, False)  # row 0: greedy set {0, 1} -> {0}
    assert q.policy_version == v0 + 1
    q.update(0, 0, 1.0, 1, False)  # still {0}
    assert q.policy_version == v0 + 1
    np.testing.assert_allclose(q.current_policy()[0], [0.95, 0.05])
    np.testing.assert_allclose(q.current_policy()[1], [0.5, 0.5])
    soft = SoftQ(3, 2, temperature=0.1)
    soft.reset(np.random.default_rng(0))
    soft.update(0, 0, 0.0, 1, False)
    soft.update(0, 0, 0.0, 1, False)
    assert soft.policy_version == 2
    ravi = RAVIUCB(3, 2, discount=0.9, horizon=100, beta=0.1, eta=1.0)
    ravi.reset(np.random.default_rng(0))
    assert ravi.policy_version == 1
    ravi.update(0, 1, 0.0, 2, False)
    assert ravi.policy_version == 1
    ravi.update(2, 1, 0.0, 2, True)
    assert ravi.policy_version == 2 and ravi.current_policy() is ravi.policy
    mask = np.array([[True, False], [True, True]])
    np.testing.assert_allclose(
        greedy_policy(np.array([[0.0, 5.0], [1.0, 1.0]]), mask, 0.2), [[1.0, 0.0], [0.5, 0.5]]
    )


def test_run_copies_a_policy_only_when_its_version_changes():
    """The loop's occupancy regret equals the sum over steps of each step's policy gap, with
    the epochs' policies recorded independently through on_episode_end."""
    env = _env()
    agent = RAVIUCB(6, 2, discount=0.9, horizon=2000, rewards=env.mdp.R, beta_scale=0.002, eta=2.0)
    policies = []
    trace = run(
        agent, env, steps=2000, seed=3, on_episode_end=lambda n, a: policies.append(a.policy.copy())
    )
    assert trace.policy_gaps.size == trace.episodes + 1 == agent.epochs
    # the first epoch's policy is uniform; each later one starts after an episode end
    first = np.full((6, 2), 0.5)
    gaps = metrics.occupancy_gaps(env.mdp, np.stack([first, *policies]))
    np.testing.assert_allclose(trace.policy_gaps, gaps[: trace.policy_gaps.size], rtol=1e-12)
    epoch = np.searchsorted(trace.episode_ends, np.arange(2000), side="right")
    np.testing.assert_allclose(trace.occupancy_regret, np.cumsum(gaps[epoch]), rtol=1e-10)
    assert trace.summary()["occupancy_regret"] == trace.occupancy_regret[-1]
    assert trace.summary()["policies"] == agent.epochs
    # learning: the last epochs' policies are better than the first ones
    assert gaps[-20:].mean() < 0.5 * gaps[:20].mean()


def test_occupancy_regret_is_the_expected_realized_regret():
    """A fixed policy kept for whole reset episodes: E[realized discounted regret] = R_T.
    The uniform policy on RiverSwim-6 (gamma 0.9), 40 seeds x 3,000 steps: the occupancy
    regret (no noise) lies within the 95% CI of the realized regret's mean (fixed seeds)."""
    env = _env()
    realized, occ = [], None
    for seed in range(40):
        tr = run(RandomAgent(6, 2), env, steps=3000, seed=seed)
        realized.append(tr.realized_regret[-1])
        occ = tr.occupancy_regret[-1]
    m, h = mean_ci(np.array(realized))
    assert abs(m - occ) <= h, (m, h, occ)
    assert occ == pytest.approx(3000 * metrics.occupancy_gaps(env.mdp, np.full((6, 2), 0.5))[0])


def test_no_occupancy_regret_without_the_discounted_criterion_or_a_policy():
    tr = run(RandomAgent(6, 2), TabularEnv(riverswim(6)), steps=100, seed=0)
    assert tr.criterion == "average" and tr.occupancy_regret is None
    assert tr.summary()["occupancy_regret"] is None
    ube = op.agents.ContinuingUBE(6, 2)
    tr = run(ube, _env(), steps=50, seed=0)
    assert not isinstance(ube, PolicyAgent) and tr.occupancy_regret is None


# --- UCRL2 for the discounted criterion --------------------------------------------------------


def test_ucrl2_discounted_plans_the_discounted_optimistic_mdp():
    env = _env()
    agent = UCRL2(6, 2, criterion="discounted", discount=0.9, rewards=env.mdp.R)
    tr = run(agent, env, steps=3000, seed=0)
    prob = agent.problem()
    assert prob.criterion == "discounted" and prob.discount == 0.9
    np.testing.assert_array_equal(prob.r_hat, env.mdp.R)
    assert np.all(prob.reward_radius == 0.0)
    # the doubling rule is unchanged: few episodes
    assert agent.episodes < 60 and tr.policy_gaps.size <= agent.episodes + 1
    # the policy it follows is the plan of the optimistic MDP (fast == conic on the last one)
    fast = prob.solve("fast")
    np.testing.assert_array_equal(agent.current_policy().argmax(1), agent.policy)
    conic = prob.solve("conic", solver="CLARABEL")
    np.testing.assert_allclose(conic.values, fast.values, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(criterion="discounted"), "discount is required"),
        (dict(criterion="average", discount=0.9), "discount is for criterion='discounted'"),
        (dict(criterion="discounted", discount=1.0), "discount must lie in"),
        (dict(criterion="gain"), "criterion must be one of"),
        (dict(rewards=np.zeros((6, 3))), r"rewards has shape \(6, 3\), expected \(6, 2\)"),
    ],
)
def test_ucrl2_criterion_bad_input(kwargs, match):
    with pytest.raises(OptplanError, match=match):
        UCRL2(6, 2, **kwargs)


# --- registry, sweeps, the store ------------------------------------------------------------------


def _build(agent, env, agent_params=None, env_params=None):
    e = registry.get_env(env)
    env_obj = e.build(0, **e.resolve(env_params or {}, "t"))
    a = registry.get_agent(agent)
    return env_obj, a.build(env_obj, None, **a.resolve(agent_params or {}, "t"))


def test_registered_agents_and_environments():
    env, agent = _build("ravi-ucb", "riverswim-resets", {"horizon": 1000, "eta_scale": 10.0})
    assert isinstance(env, DiscountedResets) and env.mdp.discount == 0.9
    assert isinstance(agent, RAVIUCB) and agent.discount == 0.9
    assert agent.eta == pytest.approx(10 * op.agents.ravi.default_eta(2, 10.0, 1000))
    np.testing.assert_array_equal(agent.rewards, env.mdp.R)
    _, agent = _build(
        "ravi-ucb", "riverswim-resets", {"horizon": 10, "known_rewards": False, "eta": 0.5}
    )
    assert agent.rewards is None and agent.eta == 0.5
    env, agent = _build(
        "ravi-ucb-linear",
        "linear-mixture",
        {"horizon": 100},
        {"d": 3, "model_seed": 5, "discount": 0.8},
    )
    assert isinstance(env.unwrapped.env, LinearMixtureMDP) and env.features.shape == (20, 2, 20, 3)
    assert isinstance(agent, RAVIUCBLinear) and agent.discount == 0.8 and agent.dim == 3
    same = LinearMixtureMDP.random(20, 2, 3, 5)
    np.testing.assert_array_equal(env.mdp.P, same.mdp.P)
    env, agent = _build(
        "ucrl2-discounted", "random-dirichlet-resets", {}, {"model_seed": 1, "discount": 0.95}
    )
    assert agent.criterion == "discounted" and agent.discount == 0.95 and agent.rewards is not None
    np.testing.assert_array_equal(env.mdp.P, random_dirichlet(10, 3, seed=1).P)
    text = registry.describe()
    for name in (
        "ravi-ucb",
        "ravi-ucb-linear",
        "ucrl2-discounted",
        "linear-mixture",
        "riverswim-resets",
    ):
        assert name in text


@pytest.mark.parametrize(
    "agent, env, params, match",
    [
        ("ravi-ucb", "riverswim-resets", {}, "ravi-ucb: set horizon"),
        ("ravi-ucb", "riverswim-resets", {"horizon": 0}, "horizon must be a positive integer"),
        ("ravi-ucb", "riverswim-resets", {"horizon": 9, "eta_scale": 0.0}, "eta_scale must lie in"),
        ("ravi-ucb", "riverswim-resets", {"horizon": 9, "eta": -1.0}, "eta must lie in"),
        ("ravi-ucb", "riverswim-resets", {"horizon": 9, "beta_scale": -1.0}, "beta_scale must be"),
        (
            "ravi-ucb-linear",
            "riverswim-resets",
            {"horizon": 9},
            "needs an environment with known features",
        ),
        ("ravi-ucb", "riverswim", {"horizon": 9}, "set discount .the environment's model has none"),
        ("ucrl2-discounted", "riverswim", {}, "ucrl2-discounted: set discount"),
        ("ravi-ucb", "deepsea", {"horizon": 9}, "continuing environments"),
    ],
)
def test_registry_bad_input_names_the_field(agent, env, params, match):
    with pytest.raises(OptplanError, match=match):
        _build(agent, env, params)


def test_linear_mixture_env_bad_input():
    with pytest.raises(OptplanError, match="discount must lie in"):
        _build("random", "linear-mixture", {}, {"discount": 1.0})
    with pytest.raises(OptplanError, match="dim must be a positive integer"):
        _build("random", "linear-mixture", {}, {"d": 0})


def test_sweep_stores_the_occupancy_curve(tmp_path):
    spec = {
        "name": "ravi-tiny",
        "seed": 1,
        "seeds": 2,
        "steps": 400,
        "curves": {"points": 20, "scale": "linear"},
        "agents": [
            {"name": "ravi-ucb", "params": {"horizon": 400, "beta_scale": 0.01}},
            {"name": "ube-continuing"},
        ],
        "envs": [{"name": "riverswim-resets", "label": "rs6"}],
    }
    report = run_sweep(sweep_from_dict(spec), tmp_path / "out", jobs=1, quiet=True)
    assert report.ran == 4 and report.failed == 0
    res = load_results(tmp_path / "out")
    groups = res.groups()
    t, Y = res.curve_matrix(groups[("ravi-ucb", "rs6")], "occupancy_regret")
    assert Y.shape == (2, 20) and np.all(np.diff(Y, axis=1) >= 0)
    rows = {r["task_id"]: r for r in res.rows}
    for r in rows.values():
        if r["agent"] == "ravi-ucb":
            assert r["occupancy_regret"] > 0
        else:
            assert r["occupancy_regret"] is None
    with pytest.raises(OptplanError, match="have no occupancy_regret curve"):
        res.curve_matrix(groups[("ube-continuing", "rs6")], "occupancy_regret")
    with np.load(tmp_path / "out" / "curves.npz") as npz:
        occ, task = npz["occupancy_regret"], npz["task"]
    ube_tasks = [r["index"] for r in res.rows if r["agent"] == "ube-continuing"]
    assert np.isnan(occ[np.isin(task, ube_tasks)]).all()
    assert np.isfinite(occ[~np.isin(task, ube_tasks)]).all()
    from optplan.cli.experiments import format_aggregate
    from optplan.experiments.stats import aggregate

    text = format_aggregate(aggregate(res.rows))
    assert "occupancy regret (95% CI)" in text.splitlines()[0]
