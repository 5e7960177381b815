"""The agents of the Bayesian-methods study: BQL, continuing PSRL, the UBE
without unrolling, moment matching and the epsilon-greedy baseline run on the study's three
environments; PSRL samples its posterior; the UBE and moment-matching agents' uncertainties are
the problem objects' solutions on their posterior; BQL's deterministic moment match equals an
adaptive-quadrature reference and the draft's Monte-Carlo one within its error; PSRL learns
DeepSea-chain; the draft's normalized regret (the oracle run on the same seed); bad input names
the field."""

from __future__ import annotations

import math
import warnings

import gymnasium
import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

import optplan as op
from optplan._checks import OptplanError
from optplan.agents import (
    BayesianQLearning,
    ContinuingPSRL,
    ContinuingUBE,
    EpsilonGreedyQ,
    MomentMatching,
    OracleAgent,
    RandomAgent,
)
from optplan.agents.bql import (
    MixtureMoments,
    inverse_log_minus_digamma,
    kl_projection,
    log_minus_digamma,
    mixture_moments,
)
from optplan.envs import DeepSeaChain, PriorMDP, WideNarrow
from optplan.experiments import metrics, run
from optplan.experiments.stats import aggregate
from optplan.posteriors import DRAFT_REWARD_PRIOR, NormalGamma, dirichlet_variance
from optplan.sweeps import registry
from optplan.uncertainty import local_draft

GAMMA = 0.9

ENVS = {
    "deepsea-chain-4": lambda: DeepSeaChain(4),
    "wide-narrow-1-6": lambda: WideNarrow(1, 6),
    "prior-mdp-4x2-seed1": lambda: PriorMDP(4, 2, 1),
}

AGENTS = {
    "bql": lambda S, A, m: BayesianQLearning(S, A, action_mask=m),
    "bql-monte-carlo": lambda S, A, m: BayesianQLearning(
        S, A, action_mask=m, moment_match="monte-carlo", n_samples=200
    ),
    "bql-quantile": lambda S, A, m: BayesianQLearning(S, A, action_mask=m, action="quantile"),
    "psrl": lambda S, A, m: ContinuingPSRL(S, A, action_mask=m, update_every=S + 1),
    "psrl-average": lambda S, A, m: ContinuingPSRL(S, A, discount=None, action_mask=m),
    "ube": lambda S, A, m: ContinuingUBE(S, A, action_mask=m, update_every=3),
    "ube-lemma1": lambda S, A, m: ContinuingUBE(S, A, action_mask=m, local="lemma1"),
    "mm": lambda S, A, m: MomentMatching(S, A, action_mask=m, update_every=3),
    "mm-paper": lambda S, A, m: MomentMatching(S, A, action_mask=m, std="paper"),
    "epsilon-greedy": lambda S, A, m: EpsilonGreedyQ(
        S, A, epsilon=0.5, discount=GAMMA, learning_rate=0.1, action_mask=m
    ),
}


def build(agent: str, env):
    mdp = env.mdp
    return AGENTS[agent](mdp.n_states, mdp.n_actions, mdp.action_mask)


# --- every agent on every environment --------------------------------------------------------


@pytest.mark.parametrize("env_name", list(ENVS))
@pytest.mark.parametrize("agent", list(AGENTS))
def test_agents_run_on_the_study_environments(agent, env_name):
    env = ENVS[env_name]()
    a = build(agent, env)
    tr = run(a, env, steps=300, seed=7)
    mask = env.mdp.action_mask
    assert mask[tr.states, tr.actions].all()
    assert np.isfinite(tr.regret).all() and np.isfinite(tr.summary()["draft_regret"])
    again = run(build(agent, ENVS[env_name]()), ENVS[env_name](), steps=300, seed=7)
    np.testing.assert_array_equal(tr.actions, again.actions)  # a function of the seed
    np.testing.assert_array_equal(tr.rewards, again.rewards)
    if hasattr(a, "plans"):
        every = a.update_every
        assert a.plans == 1 + 300 // every  # the first plan at reset, then one per batch


@pytest.mark.parametrize("name", ["bql", "psrl-continuing", "ube-continuing", "moment-matching"])
@pytest.mark.parametrize("env_name, params", [("deepsea-chain", {"n": 4}), ("wide-narrow", {})])
def test_registry_builds_the_agents(name, env_name, params):
    comp = registry.get_env(env_name)
    env = comp.build(0, **comp.resolve(params, "t"))
    agent_comp = registry.get_agent(name)
    agent = agent_comp.build(env, "discounted", **agent_comp.resolve({}, "t"))
    assert run(agent, env, steps=50, seed=0).steps == 50
    text = registry.describe()
    assert name in text and "update_every" in text and "moment_match" in text


def test_registry_defaults_are_the_drafts():
    env = DeepSeaChain(4)
    build_ = lambda name, **p: registry.get_agent(name).build(  # noqa: E731
        env, "discounted", **registry.get_agent(name).resolve(p, "t")
    )
    ube = build_("ube-continuing")
    assert (ube.zeta, ube.discount, ube.local_rule, ube.reward_prior) == (
        0.1,
        0.9,
        "draft",
        (0, 4, 3, 3),
    )
    mm = build_("moment-matching")
    assert (mm.zeta, mm.std, mm.transition_prior) == (1.0, "public-code", 1.0)
    bql = build_("bql")
    assert (bql.moment_match, bql.n_samples, bql.action, bql.prior) == (
        "quadrature",
        1000,
        "sample",
        DRAFT_REWARD_PRIOR,
    )
    assert build_("psrl-continuing", planning="average").discount is None
    with pytest.raises(OptplanError, match="planning"):
        build_("psrl-continuing", planning="gain")
    q = registry.get_agent("epsilon-greedy")  # the draft's baseline is a parametrization
    eg = q.build(
        env, "discounted", **q.resolve({"epsilon": 0.5, "learning_rate": 0.1, "discount": 0.9}, "t")
    )
    assert (eg.epsilon, eg.learning_rate, eg.discount) == (0.5, 0.1, 0.9)


def test_registry_refuses_episodic_environments():
    comp = registry.get_env("deepsea")
    env = comp.build(0, **comp.resolve({"size": 4}, "t"))
    for name in ("bql", "psrl-continuing", "ube-continuing", "moment-matching"):
        a = registry.get_agent(name)
        with pytest.raises(OptplanError, match=f"{name} is for continuing"):
            a.build(env, "finite_horizon", **a.resolve({}, "t"))


# --- the posterior of the model-based agents ---------------------------------------------------


def _drive(agent, env, steps, seed):
    """Run ``agent`` by hand; return the transitions it saw."""
    agent.reset(np.random.default_rng(seed))
    s, _ = env.reset(seed=seed)
    out = []
    for _ in range(steps):
        a = agent.select_action(s)
        s2, r, *_ = env.step(a)
        agent.update(s, a, r, s2, False)
        out.append((s, a, r, s2))
        s = s2
    return [np.array(x) for x in zip(*out, strict=True)]


@pytest.mark.parametrize("mode", ["correct", "public-code"])
def test_batches_fold_into_the_conjugate_posterior(mode):
    env = PriorMDP(4, 2, 1)
    agent = ContinuingPSRL(4, 2, update_every=7, sum_of_squares=mode)
    s, a, r, s2 = _drive(agent, env, 70, seed=3)
    assert agent._pending == 0 and agent.plans == 11
    counts, sums, sq = op.posteriors.transition_statistics(s, a, r, s2, 4, 2)
    np.testing.assert_array_equal(agent.transitions.alpha, 1.0 + counts)
    if mode == "correct":  # conjugacy: ten batches = one batch of everything
        whole = NormalGamma(*DRAFT_REWARD_PRIOR, shape=(4, 2, 4)).update(counts, sums, sq)
        for x, y in zip(agent.rewards.params, whole.params, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    else:  # the slip depends on the batches: fold them one by one
        post = NormalGamma(*DRAFT_REWARD_PRIOR, shape=(4, 2, 4), sum_of_squares=mode)
        for k in range(10):
            sl = slice(7 * k, 7 * k + 7)
            c, sm, _ = op.posteriors.transition_statistics(s[sl], a[sl], r[sl], s2[sl], 4, 2)
            post = post.update(c, sm)
        for x, y in zip(agent.rewards.params, post.params, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_psrl_samples_come_from_the_posterior():
    env = PriorMDP(4, 2, 1)
    agent = ContinuingPSRL(4, 2, update_every=5)
    _drive(agent, env, 400, seed=0)
    n = 20_000
    Ps, mus = zip(*(agent.sample_model() for _ in range(n)), strict=True)
    P, mu = np.mean(Ps, axis=0), np.mean(mus, axis=0)
    se_P = np.sqrt(dirichlet_variance(agent.transitions.alpha) / n)
    se_mu = np.sqrt(agent.rewards.variance / n)
    assert np.max(np.abs(P - agent.transitions.mean) / se_P) < 5.0
    assert np.max(np.abs(mu - agent.rewards.mu0) / se_mu) < 5.0
    # the agent plays the optimal policy of its last sample
    P0, mu0 = agent.model
    R0 = np.einsum("ijk,ijk->ij", P0, mu0)
    best = op.solve_discounted(op.TabularMDP(P0, R0, discount=GAMMA), method="fast")
    np.testing.assert_array_equal(agent.policy, best.policy)


def test_psrl_learns_deepsea_chain():
    """Measured (seed 0, update_every = N + 1 = 5): gap regret per step 0.0319 over the first
    1,000 steps, 0.00016 over the last 1,000 of 5,000; a random agent stays at ~0.09."""
    env = DeepSeaChain(4)
    tr = run(ContinuingPSRL(4, 2, update_every=5), env, steps=5000, seed=0)
    gaps = np.diff(tr.gap_regret, prepend=0.0)
    first, last = gaps[:1000].mean(), gaps[-1000:].mean()
    assert first > 0.02 and last < 0.1 * first
    assert (tr.actions[-1000:] == 1).mean() > 0.98  # "right", optimal in every state
    rnd = run(RandomAgent(4, 2), env, steps=5000, seed=0)
    assert np.diff(rnd.gap_regret, prepend=0.0)[-1000:].mean() > 0.05


# --- UBE and moment matching: the problem objects on the agent's posterior ----------------------


def _mean_model(agent):
    P = agent.transitions.mean
    return P, np.einsum("ijk,ijk->ij", P, agent.rewards.mu0)


@pytest.mark.parametrize("env_name", list(ENVS))
def test_ube_agent_solves_the_uncertainty_bellman_equation(env_name, monkeypatch):
    env = ENVS[env_name]()
    mdp = env.mdp
    agent = ContinuingUBE(mdp.n_states, mdp.n_actions, action_mask=mdp.action_mask, update_every=4)
    _drive(agent, env, 200, seed=1)
    assert agent.plans == 51  # the first plan at reset, then one every 4 steps
    P, R = _mean_model(agent)
    best = op.solve_discounted(
        op.TabularMDP(P, R, discount=GAMMA, action_mask=mdp.action_mask), method="fast"
    )
    np.testing.assert_array_equal(agent.policy, best.policy)
    np.testing.assert_allclose(agent.q[mdp.action_mask], best.q[mdp.action_mask], rtol=1e-12)
    q_max = 1.0 / (1.0 - GAMMA)
    nu = local_draft(agent.transitions.alpha, agent.rewards.mu0, agent.rewards.variance, q_max)
    nu = np.where(mdp.action_mask, nu, 0.0)
    u = op.UncertaintyBellman(P, agent.policy, nu, GAMMA).solve("fast").x
    np.testing.assert_allclose(agent.local, nu, rtol=1e-14)
    np.testing.assert_allclose(agent.u, u, rtol=1e-12)
    np.testing.assert_allclose(agent.noise_sd, np.where(mdp.action_mask, np.sqrt(u), 0.0))


@pytest.mark.parametrize("env_name", list(ENVS))
@pytest.mark.parametrize("std", ["public-code", "paper"])
def test_moment_matching_agent_solves_the_variance_equation(env_name, std):
    env = ENVS[env_name]()
    mdp = env.mdp
    agent = MomentMatching(
        mdp.n_states, mdp.n_actions, std=std, action_mask=mdp.action_mask, update_every=4
    )
    _drive(agent, env, 200, seed=2)
    problem = op.MomentMatchingVariance(
        alpha=agent.transitions.alpha,
        reward_mean=agent.rewards.mu0,
        reward_var=agent.rewards.variance,
        policy=agent.policy,
        discount=GAMMA,
    )  # values: evaluated by the problem itself, independently of the agent's
    var = np.where(mdp.action_mask, problem.solve("fast").x, 0.0)
    np.testing.assert_allclose(agent.variance, var, rtol=1e-10, atol=1e-14)
    sd = np.sqrt(var) / (GAMMA if std == "public-code" else 1.0)
    np.testing.assert_allclose(agent.noise_sd, sd, rtol=1e-10, atol=1e-14)


def test_conic_method_agrees_and_counts_fallbacks():
    env = DeepSeaChain(4)
    fast = ContinuingUBE(4, 2, update_every=20)
    conic = ContinuingUBE(4, 2, update_every=20, method="conic", solver="CLARABEL")
    _drive(fast, env, 60, seed=0)
    _drive(conic, env, 60, seed=0)
    np.testing.assert_allclose(conic.u, fast.u, rtol=1e-6)
    st = conic.stats()
    assert st["plans"] == 4 and st["fallbacks"] == 4 - st.get("status_optimal", 0)


def test_thompson_noise_zero_is_greedy():
    env = WideNarrow(1, 6)
    for cls in (ContinuingUBE, MomentMatching):
        agent = cls(3, 6, zeta=0.0, action_mask=env.mdp.action_mask)
        tr = run(agent, env, steps=60, seed=0)
        np.testing.assert_array_equal(tr.actions, agent.policy[tr.states])


# --- BQL: the moment match ---------------------------------------------------------------------


def _reference_moments(current, reward, discount, following) -> np.ndarray:
    """The four mixture moments by adaptive quadrature (scipy.integrate.quad) over z'."""
    mu0, lam, alpha, beta = current
    m2, l2, a2, b2 = following
    dist = stats.t(2 * a2, loc=m2, scale=math.sqrt(b2 * (l2 + 1) / (a2 * l2)))
    a, k = alpha + 0.5, lam / (2 * (lam + 1))
    b = lambda z: beta + k * (reward + discount * z - mu0) ** 2  # noqa: E731
    m = lambda z: (lam * mu0 + reward + discount * z) / (lam + 1)  # noqa: E731
    peak = (mu0 - reward) / discount

    def expect(g):
        edges = [-np.inf, *sorted({peak, m2}), np.inf]
        return sum(
            integrate.quad(lambda z: g(z) * dist.pdf(z), lo, hi, epsabs=0, epsrel=1e-13, limit=500)[
                0
            ]
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        )

    return np.array(
        [
            a * expect(lambda z: 1 / b(z)),
            a * expect(lambda z: m(z) / b(z)),
            a * expect(lambda z: m(z) ** 2 / b(z)) + 1 / (lam + 1),
            special.digamma(a) - expect(lambda z: np.log(b(z))),
        ]
    )


#: (current, reward, following): the prior; posteriors met on DeepSea-chain, WideNarrow and
#: PriorMDP (BQL's own runs); heavy tails (alpha near 1); a far-off next state.
MOMENT_CASES = [
    (DRAFT_REWARD_PRIOR, 0.3, DRAFT_REWARD_PRIOR),
    ((1.5, 4.0, 3.0, 3.0), -1.0, (1.5, 4.0, 3.0, 3.0)),
    ((0.8, 120.0, 60.0, 4.0), 1.0, (1.1, 300.0, 150.0, 20.0)),
    ((0.0, 4.0, 1.000001, 3.0), 0.3, (0.0, 4.0, 1.000001, 3.0)),
    ((10.0, 1e4, 5e3, 1e2), 1.0, (-3.0, 1e4, 5e3, 1e2)),
    ((-0.4, 9.0, 5.3, 98.0), 0.02, (2.0, 921.0, 300.0, 3.4)),
    ((0.0, 4.0, 3.0, 3.0), 5.0, (40.0, 2.0, 1.5, 0.5)),
]


@pytest.mark.parametrize("case", range(len(MOMENT_CASES)))
def test_quadrature_moments_match_adaptive_quadrature(case):
    current, reward, following = MOMENT_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        ref = _reference_moments(current, reward, GAMMA, following)
    got = np.array(mixture_moments(current, reward, GAMMA, following))
    np.testing.assert_allclose(got, ref, rtol=1e-9)


@pytest.mark.parametrize("case", range(3))
def test_quadrature_and_monte_carlo_agree_within_monte_carlo_error(case):
    """The draft's estimate: 40 independent batches of 5,000 draws; the deterministic moments
    lie within 5 standard errors of their mean, and so do the projected parameters."""
    current, reward, following = MOMENT_CASES[case]
    rng = np.random.default_rng(case)
    mc = np.array(
        [
            mixture_moments(current, reward, GAMMA, following, "monte-carlo", rng, 5000)
            for _ in range(40)
        ]
    )
    quad = np.array(mixture_moments(current, reward, GAMMA, following))
    se = mc.std(axis=0, ddof=1) / np.sqrt(len(mc))
    assert np.all(np.abs(mc.mean(axis=0) - quad) < 5 * se), (mc.mean(axis=0), quad, se)
    params = np.array([kl_projection(MixtureMoments(*m)) for m in mc])
    exact = np.array(kl_projection(MixtureMoments(*quad)))
    se_p = params.std(axis=0, ddof=1) / np.sqrt(len(params))
    # the projection is nonlinear: the mean of projected batches carries an O(1/5000) bias
    assert np.all(np.abs(params.mean(axis=0) - exact) < 5 * se_p + 2e-3 * np.abs(exact))


def test_quadrature_reaches_the_gaussian_limit():
    """alpha' = 1e12 (the largest f^-1 returns): z' is Gaussian to 1e-12; Gauss-Hermite is exact."""
    current, reward, following = (0.2, 3.0, 4.0, 2.0), 0.4, (1.0, 50.0, 1e12, 2e12)
    scale = math.sqrt(following[3] * (following[1] + 1) / (following[2] * following[1]))
    x, w = np.polynomial.hermite_e.hermegauss(120)
    z = reward + GAMMA * (following[0] + scale * x)
    mu0, lam, alpha, beta = current
    b = beta + lam * (z - mu0) ** 2 / (2 * (lam + 1))
    m = (lam * mu0 + z) / (lam + 1)
    w = w / w.sum()
    a = alpha + 0.5
    ref = [a * w @ (1 / b), a * w @ (m / b), a * w @ (m * m / b) + 1 / (lam + 1)]
    ref.append(special.digamma(a) - w @ np.log(b))
    got = mixture_moments(current, reward, GAMMA, following)
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_one_exact_observation_projects_onto_itself():
    """``following=None`` (z = r known): q is one Normal-Gamma, the KL projection returns it."""
    cur = (0.4, 2.5, 3.5, 1.7)
    got = kl_projection(mixture_moments(cur, -0.8, GAMMA, None))
    want = NormalGamma(*cur).update_single(-0.8)
    np.testing.assert_allclose(got, [float(x) for x in want.params], rtol=1e-10)


def test_inverse_log_minus_digamma():
    ys = np.geomspace(1e-11, 1e3, 60)
    xs = inverse_log_minus_digamma(ys)
    for y, x in zip(ys, xs, strict=True):
        ref = optimize.brentq(lambda t, y=y: log_minus_digamma(t) - y, 1e-13, 1e13, rtol=1e-15)
        assert x == pytest.approx(ref, rel=1e-13)
    assert inverse_log_minus_digamma(0.0) == 1e12  # the code's domain edge
    assert log_minus_digamma(150.0) == pytest.approx(
        math.log(150.0) - special.digamma(150.0), rel=1e-12
    )


def test_bql_update_is_the_projected_mixture():
    agent = BayesianQLearning(3, 2)
    agent.reset(np.random.default_rng(0))
    agent.mu0[1] = [0.2, 0.7]  # a' = argmax mu0(s', .) = 1
    agent.lam[1, 1], agent.alpha[1, 1], agent.beta[1, 1] = 6.0, 4.0, 2.0
    agent.update(0, 1, 0.5, 1, False)
    want = kl_projection(mixture_moments(DRAFT_REWARD_PRIOR, 0.5, GAMMA, (0.7, 6.0, 4.0, 2.0)))
    got = (agent.mu0[0, 1], agent.lam[0, 1], agent.alpha[0, 1], agent.beta[0, 1])
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert agent.mu0[0, 0] == 0.0  # the other pairs keep the prior


def test_bql_quantile_rule_is_optimistic_and_deterministic():
    agent = BayesianQLearning(1, 2, action="quantile", quantile=0.95)
    agent.reset(np.random.default_rng(0))
    agent.mu0[0] = [0.0, 0.1]
    agent.lam[0] = [1.0, 100.0]  # action 0 far less certain: its upper quantile is higher
    assert {agent.select_action(0) for _ in range(20)} == {0}


# --- the draft's normalized regret --------------------------------------------------------------


def test_draft_normalized_regret_formula():
    oracle = np.array([1.0, 2.0, 3.0, -10.0])
    agent = np.array([1.0, 1.0, 1.0, 0.0])
    # cumsum(oracle - agent) = 0, 1, 3, -7; cumsum(oracle) = 1, 3, 6, -4 (not positive: NaN)
    out = metrics.draft_normalized_regret(oracle, agent)
    np.testing.assert_allclose(out[:3], [0.0, 1 / 3, 3 / 6])
    assert np.isnan(out[3])
    with pytest.raises(OptplanError, match="one length"):
        metrics.draft_normalized_regret([1.0, 2.0], [1.0])


@pytest.mark.parametrize("env_name", list(ENVS))
def test_oracle_scores_zero_and_random_positive(env_name):
    env = ENVS[env_name]()
    o = run(OracleAgent(env.mdp), env, steps=2000, seed=4)
    np.testing.assert_array_equal(o.oracle_run_rewards, o.rewards)  # the oracle run is its run
    s = o.summary()
    assert s["draft_regret"] == 0.0 and s["draft_normalized_regret"] == 0.0
    r = run(RandomAgent.for_mdp(env.mdp), env, steps=2000, seed=4)
    sr = r.summary()
    assert sr["draft_regret"] > 0 and 0.2 < sr["draft_normalized_regret"] < 1.5
    manual = (o.rewards.sum() - r.rewards.sum()) / o.rewards.sum()
    assert sr["draft_normalized_regret"] == pytest.approx(manual, rel=1e-12)
    assert sr["regret"] > 0 and {"regret", "normalized_regret"} <= set(sr)


def test_oracle_run_shares_the_noise_on_deepsea_chain():
    """Every DeepSea-chain step draws one uniform and one normal, so the two runs share step t's
    draws: where the random agent is where the oracle is and does what it does, it gets the
    oracle's reward and next state."""
    env = DeepSeaChain(4)
    o = run(OracleAgent(env.mdp), env, steps=3000, seed=11)
    r = run(RandomAgent(4, 2), env, steps=3000, seed=11)
    same = (o.states == r.states) & (o.actions == r.actions)
    assert same.sum() > 300
    np.testing.assert_array_equal(o.rewards[same], r.rewards[same])
    nxt = np.append(o.states[1:], -1) == np.append(r.states[1:], -1)
    assert nxt[same][:-1].all()


class _CountSteps(gymnasium.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        return self.env.step(action)


def test_the_oracle_runs_in_a_copy():
    """The environment (and a wrapper recording it) sees the agent's steps only."""
    env = _CountSteps(DeepSeaChain(5))
    tr = run(RandomAgent(5, 2), env, steps=200, seed=0)
    assert env.steps == 200
    assert tr.oracle_run_rewards.shape == (200,) and not tr.oracle_run_rewards.flags.writeable


def test_aggregate_reports_the_draft_mean_and_population_sd():
    rows = [
        {
            "agent": "a",
            "env": "e",
            "status": "ok",
            "regret": 1.0,
            "normalized_regret": 0.1,
            "draft_normalized_regret": v,
            "wall_time": 1.0,
            "goal_rate": None,
            "time_to_solve": None,
        }
        for v in (0.1, 0.2, 0.6)
    ]
    rows.append(dict(rows[0], draft_normalized_regret=None))  # an older record: left out
    (g,) = aggregate(rows)
    assert g["draft_normalized_regret"] == pytest.approx(0.3)
    assert g["draft_normalized_regret_sd"] == pytest.approx(np.std([0.1, 0.2, 0.6]))
    from optplan.cli.experiments import format_aggregate

    text = format_aggregate([g])
    assert "draft normalized" in text and "0.3 ± 0.22 sd" in text


def test_sweep_task_records_both_regrets():
    from optplan.sweeps.execute import execute_task

    task = {
        "index": 0,
        "task_id": "t",
        "agent": {
            "name": "psrl-continuing",
            "params": registry.get_agent("psrl-continuing").resolve({"update_every": 5}, "t"),
            "label": "p",
        },
        "env": {
            "name": "deepsea-chain",
            "params": registry.get_env("deepsea-chain").resolve({"n": 4}, "t"),
            "label": "d",
        },
        "seed_index": 0,
        "seed": 5,
        "criterion": None,
        "steps": 400,
        "episodes": None,
        "stop_when_solved": False,
        "curve_points": 10,
        "curve_scale": "log",
    }
    record, arrays = execute_task(task)
    assert record["status"] == "ok", record.get("error")
    s = record["summary"]
    for key in ("regret", "normalized_regret", "draft_regret", "draft_normalized_regret"):
        assert np.isfinite(s[key])
    assert s["agent_plans"] == 81


# --- bad input ---------------------------------------------------------------------------------

BAD = [
    (lambda: ContinuingPSRL(4, 2, update_every=0), "update_every"),
    (lambda: ContinuingUBE(4, 2, update_every=-3), "update_every"),
    (lambda: MomentMatching(4, 2, update_every=1.5), "update_every"),
    (lambda: ContinuingUBE(4, 2, reward_prior=(0, 4, 1.0, 3)), "alpha"),
    (lambda: MomentMatching(4, 2, reward_prior=(0, 4, 0.5, 3)), "alpha"),
    (lambda: ContinuingPSRL(4, 2, reward_prior=(0, 0, 3, 3)), "lam"),
    (lambda: ContinuingPSRL(4, 2, reward_prior=(0, 4, 3, -1)), "beta"),
    (lambda: ContinuingPSRL(4, 2, reward_prior=(0, 4, 3)), "reward_prior"),
    (lambda: ContinuingPSRL(4, 2, transition_prior=0), "transition_prior"),
    (lambda: ContinuingPSRL(4, 2, sum_of_squares="naive"), "sum_of_squares"),
    (lambda: ContinuingPSRL(4, 2, discount=1.0), "discount"),
    (lambda: ContinuingUBE(4, 2, discount=None), "discount"),
    (lambda: ContinuingUBE(4, 2, zeta=-0.1), "zeta"),
    (lambda: ContinuingUBE(4, 2, local="tabular"), "local"),
    (lambda: ContinuingUBE(4, 2, reward_bound=0), "reward_bound"),
    (lambda: ContinuingUBE(4, 2, method="exact"), "method"),
    (lambda: MomentMatching(4, 2, std="sigma"), "std"),
    (lambda: MomentMatching(4, 2, discount=0.0), "discount"),
    (lambda: ContinuingPSRL(4, 2, action_mask=np.ones((3, 4, 2), bool)), "action_mask"),
    (lambda: BayesianQLearning(4, 2, prior=(0, 4, 0, 3)), "alpha"),
    (lambda: BayesianQLearning(4, 2, moment_match="gauss"), "moment_match"),
    (lambda: BayesianQLearning(4, 2, n_samples=0), "n_samples"),
    (lambda: BayesianQLearning(4, 2, action="ucb"), "action"),
    (lambda: BayesianQLearning(4, 2, quantile=1.0), "quantile"),
    (lambda: BayesianQLearning(4, 2, discount=1.0), "discount"),
    (lambda: mixture_moments((0, 4, 3, 3), 0.0, 0.9, (0, 4, 3, 3), "monte-carlo"), "rng"),
    (lambda: mixture_moments((0, -4, 3, 3), 0.0, 0.9, None), "lam"),
]


@pytest.mark.parametrize("make, field", BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_input_names_the_field(make, field):
    with pytest.raises((OptplanError, TypeError), match=field):
        make()
