"""The environments of the Bayesian-methods study: DeepSeaChain, WideNarrow
and PriorMDP. Their true models follow docs/sources.md's rules, stepping reproduces the models'
statistics, PriorMDP is a function of its seed, the registry builds them, bad input names the
field, and the exact optimal Q-values at gamma = 0.9 are pinned against value iteration."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optplan as op
from optplan._checks import OptplanError
from optplan.envs import DeepSeaChain, PriorMDP, TransitionRewardEnv, WideNarrow
from optplan.posteriors import PRIOR_MDP_PRIOR
from optplan.sweeps import registry

GAMMA = 0.9

#: Optimal Q-values at gamma = 0.9 (optplan's discounted planner, policy iteration), pinned.
DEEPSEA_CHAIN_4_Q = np.array(
    [
        [0.7281655541, 0.8090728379],
        [0.7281655541, 0.9834361386],
        [0.8850925247, 1.2417521395],
        [1.1175769255, 1.5663214110],
    ]
)
WIDE_NARROW_1_6_Q = {  # admissible actions only; the others are -inf
    (0, 0): 1.8450184502,
    (0, 1): 1.3450184502,
    (1, 0): 1.4944649446,
    (2, 0): 1.6605166052,
}


def _value_iteration(P, R, mask, gamma, tol=1e-14):
    """Q* by plain value iteration (independent of optplan's planners)."""
    q = np.zeros(R.shape)
    while True:
        v = np.where(mask, q, -np.inf).max(axis=1)
        q_new = R + gamma * P @ v
        if np.max(np.abs(q_new - q)) < tol:
            return np.where(mask, q_new, -np.inf)
        q = q_new


def _rollout(env, steps, seed, rng):
    """Uniformly random admissible actions; per-(s, a, s') counts, reward sums and squares."""
    mdp = env.mdp
    S, A = mdp.R.shape
    counts = np.zeros((S, A, S))
    sums = np.zeros((S, A, S))
    sq = np.zeros((S, A, S))
    s, _ = env.reset(seed=seed)
    for _ in range(steps):
        a = int(rng.choice(np.flatnonzero(mdp.action_mask[s])))
        s2, r, term, trunc, info = env.step(a)
        assert not (term or trunc)
        assert info["expected_reward"] == mdp.R[s, a]
        counts[s, a, s2] += 1
        sums[s, a, s2] += r
        sq[s, a, s2] += r * r
        s = s2
    return counts, sums, sq


def _check_statistics(env, counts, sums, sq):
    """Empirical transition frequencies and reward means / sds within 5 standard errors."""
    P = env.mdp.P
    mean, sd = env.transition_reward_mean, env.transition_reward_sd
    n_pair = counts.sum(axis=-1)
    assert (counts[P == 0] == 0).all()  # impossible transitions never happen
    ok = n_pair >= 50
    freq = counts[ok] / n_pair[ok][:, None]
    se = np.sqrt(P[ok] * (1 - P[ok]) / n_pair[ok][:, None])
    assert (np.abs(freq - P[ok]) <= 5 * se + 1e-12).all()
    seen = counts >= 30
    assert seen.sum() >= 3
    rbar = sums[seen] / counts[seen]
    assert (np.abs(rbar - mean[seen]) <= 5 * sd[seen] / np.sqrt(counts[seen]) + 1e-12).all()
    var = np.maximum(sq[seen] / counts[seen] - rbar**2, 0.0)
    emp_sd = np.sqrt(var * counts[seen] / (counts[seen] - 1))
    assert (np.abs(emp_sd - sd[seen]) <= 5 * sd[seen] / np.sqrt(2 * counts[seen]) + 1e-9).all()
    exact = seen & (sd == 0)
    np.testing.assert_array_equal(sums[exact], counts[exact] * mean[exact])


# --- DeepSeaChain -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 4, 10, 39])
def test_deepsea_chain_model_follows_the_rules(n):
    env = DeepSeaChain(n)
    P, R = env.mdp.P, env.mdp.R
    delta = 0.1 * math.exp(-n / 4)
    assert env.delta == pytest.approx(delta, rel=1e-15)
    assert P.shape == (n, 2, n) and env.mdp.action_mask.all()
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    p = 1 - 1 / n
    for s in range(n):
        left = max(s - 1, 0)
        assert P[s, 0, left] == 1.0
        assert (env.transition_reward_mean[s, 0] == 0).all()
        if s < n - 1:
            assert P[s, 1, s + 1] == pytest.approx(p)
            assert P[s, 1, left] == pytest.approx(1 / n)
            assert env.transition_reward_mean[s, 1, s + 1] == -delta
            assert env.transition_reward_mean[s, 1, left] == -delta
            assert R[s, 1] == pytest.approx(-delta, rel=1e-14)
    assert P[n - 1, 1, 0] == pytest.approx(p)
    assert P[n - 1, 1, n - 2] == pytest.approx(1 / n)
    assert env.transition_reward_mean[n - 1, 1, 0] == 1.0  # the goal, wrapping to state 0
    assert env.transition_reward_mean[n - 1, 1, n - 2] == -delta
    assert R[n - 1, 1] == pytest.approx(p - delta / n, rel=1e-14)
    np.testing.assert_array_equal(R[:, 0], 0.0)
    np.testing.assert_array_equal(env.transition_reward_sd, delta)  # Gaussian everywhere
    assert env.mdp.initial[0] == 1.0 and env.discount == GAMMA


@pytest.mark.parametrize("n", range(3, 40))
def test_right_is_optimal_everywhere_up_to_39(n):
    """The draft's claim for delta = 0.1 exp(-n/4), at gamma = 0.9 and for average reward."""
    env = DeepSeaChain(n)
    assert (op.solve_discounted(env.mdp, method="fast").policy == 1).all()
    if n <= 12:
        assert (op.solve_average_reward(env.mdp, method="fast").policy == 1).all()


def test_deepsea_chain_steps_reproduce_the_model():
    env = DeepSeaChain(4)
    stats = _rollout(env, 4000, seed=0, rng=np.random.default_rng(0))
    _check_statistics(env, *stats)
    assert stats[0][3, 1, 0] > 30  # the goal was reached


# --- WideNarrow -------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "w"), [(1, 6), (3, 2), (2, 12)])
def test_wide_narrow_model_follows_the_rules(n, w):
    env = WideNarrow(n, w)
    S = 2 * n + 1
    P, R, mask = env.mdp.P, env.mdp.R, env.mdp.action_mask
    mean, sd = env.transition_reward_mean, env.transition_reward_sd
    assert P.shape == (S, w, S)
    np.testing.assert_array_equal(P[mask].sum(-1), 1.0)
    np.testing.assert_array_equal(P[~mask], 0.0)
    for s in range(S):
        if s % 2 == 0 and s < 2 * n:  # wide
            assert mask[s].all()
            np.testing.assert_array_equal(P[s, :, s + 1], 1.0)
            assert mean[s, 0, s + 1] == 0.5 and R[s, 0] == 0.5
            np.testing.assert_array_equal(mean[s, 1:, s + 1], 0.0)
            np.testing.assert_array_equal(sd[s, :, s + 1], 1.0)
        else:
            assert mask[s].tolist() == [True] + [False] * (w - 1)
            target = 0 if s == 2 * n else s + 1
            assert P[s, 0, target] == 1.0
            assert mean[s, 0, target] == 0.0
            assert sd[s, 0, target] == (0.0 if s == 2 * n else 1.0)
    assert env.mdp.initial[0] == 1.0 and env.discount == GAMMA


def test_wide_narrow_steps_reproduce_the_model():
    env = WideNarrow(2, 3)
    _check_statistics(env, *_rollout(env, 4000, seed=1, rng=np.random.default_rng(1)))


def test_masked_action_is_refused():
    env = WideNarrow(1, 6)
    env.reset(seed=0)
    env.step(3)  # wide state: any action
    with pytest.raises(OptplanError, match="not admissible in state 1"):
        env.step(3)


# --- PriorMDP ---------------------------------------------------------------------------------


def test_prior_mdp_is_a_function_of_its_seed():
    a, b, c = PriorMDP(4, 2, 7), PriorMDP(4, 2, np.int64(7)), PriorMDP(4, 2, 8)
    for x, y in [(a.mdp.P, b.mdp.P), (a.mdp.R, b.mdp.R), (a.precision, b.precision)]:
        assert np.array_equal(x, y)
    assert np.array_equal(a.transition_reward_mean, b.transition_reward_mean)
    assert not np.array_equal(a.mdp.P, c.mdp.P)
    assert not np.array_equal(a.transition_reward_mean, c.transition_reward_mean)


def test_prior_mdp_pinned_draws():
    """The generator stream of seed 0 (default_rng(0): P, then tau, then mu), pinned."""
    env = PriorMDP(4, 2, 0)
    np.testing.assert_allclose(
        env.mdp.P[0, 0],
        [0.3949407129162019, 0.5922363751276989, 0.011504765988698002, 0.0013181459674011687],
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        env.transition_reward_mean[0, 0],
        [0.49692343920033794, 1.239134396709069, -0.1416377728343659, -1.6263561538521492],
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        env.precision[0, 0],
        [1.0233146050138244, 0.6379428197628908, 1.3455144354767592, 0.4363874719891931],
        rtol=1e-12,
    )


def test_prior_mdp_public_code_sampler_is_the_repositorys_draw():
    """The public code's PriorMDP, written out with NumPy's global legacy functions (as the
    repository calls them, hence the NPY002 waivers)."""
    saved = np.random.get_state()  # noqa: NPY002
    try:
        np.random.seed(2)  # noqa: NPY002
        S, A = 4, 2
        mu0, lam, alpha, beta = 0.0, 1.0, 4.0, 4.0
        P, mu, tau = np.zeros((S, A, S)), np.zeros((S, A, S)), np.zeros((S, A, S))
        for s in range(S):
            for a in range(A):
                P[s, a] = np.random.dirichlet(np.ones((S,)) * 1.0)  # noqa: NPY002
                for s_ in range(S):
                    t = np.random.gamma(shape=alpha, scale=beta**-1, size=(1,))  # noqa: NPY002
                    scale = (lam * t) ** -0.5
                    m = np.random.normal(loc=mu0, scale=scale, size=(1,))  # noqa: NPY002
                    mu[s, a, s_], tau[s, a, s_] = m[0], t[0]
    finally:
        np.random.set_state(saved)  # noqa: NPY002
    env = PriorMDP(S, A, 2, sampler="public-code")
    np.testing.assert_array_equal(env.mdp.P, P)
    np.testing.assert_array_equal(env.transition_reward_mean, mu)
    np.testing.assert_array_equal(env.precision, tau)
    np.testing.assert_allclose(env.transition_reward_sd, tau**-0.5, rtol=1e-15)


def test_prior_mdp_draws_follow_the_prior():
    """4 500 transitions of one large draw: tau ~ Gamma(4, rate 4) and mu's marginal variance
    beta / (lam (alpha - 1)) = 4/3, Dirichlet(1) rows with mean 1/S."""
    env = PriorMDP(30, 5, 3)
    mu0, lam, alpha, beta = PRIOR_MDP_PRIOR
    tau, mu = env.precision.ravel(), env.transition_reward_mean.ravel()
    n = tau.size
    assert abs(tau.mean() - alpha / beta) < 5 * math.sqrt(alpha / beta**2 / n)
    var = beta / (lam * (alpha - 1))
    assert abs(mu.mean() - mu0) < 5 * math.sqrt(var / n)
    assert abs(mu.var() - var) < 5 * var * math.sqrt((3 + 6 / (2 * alpha - 4) - 1) / n)
    np.testing.assert_allclose(env.mdp.P.sum(-1), 1.0, rtol=1e-13)
    assert abs(env.mdp.P.mean() - 1 / 30) < 1e-15 + 1e-3
    np.testing.assert_allclose(
        env.mdp.R, np.einsum("ijk,ijk->ij", env.mdp.P, env.transition_reward_mean), rtol=1e-13
    )


def test_prior_mdp_steps_reproduce_the_model():
    env = PriorMDP(4, 2, 1)
    _check_statistics(env, *_rollout(env, 5000, seed=2, rng=np.random.default_rng(2)))


# --- exact Q-values ---------------------------------------------------------------------------


def test_optimal_q_values_at_gamma_0_9():
    """optplan's planner against value iteration written here, and the pinned values."""
    chain = DeepSeaChain(4).mdp
    res = op.solve_discounted(chain, method="fast")
    assert res.status == "optimal" and (res.policy == 1).all()
    np.testing.assert_allclose(
        res.q, _value_iteration(chain.P, chain.R, chain.action_mask, GAMMA), rtol=1e-11
    )
    np.testing.assert_allclose(res.q, DEEPSEA_CHAIN_4_Q, rtol=0, atol=1e-10)

    wn = WideNarrow(1, 6).mdp
    res = op.solve_discounted(wn, method="fast")
    vi = _value_iteration(wn.P, wn.R, wn.action_mask, GAMMA)
    np.testing.assert_allclose(res.q[wn.action_mask], vi[wn.action_mask], rtol=1e-11)
    assert np.isneginf(res.q[~wn.action_mask]).all()
    for (s, a), value in WIDE_NARROW_1_6_Q.items():
        assert res.q[s, a] == pytest.approx(value, abs=1e-10)
    # closed form: V(0) = 0.5 / (1 - gamma^3), Q(0, a > 0) = V(0) - 0.5
    v0 = 0.5 / (1 - GAMMA**3)
    assert res.q[0, 0] == pytest.approx(v0, rel=1e-13)
    assert res.q[0, 1] == pytest.approx(v0 - 0.5, rel=1e-13)
    assert res.q[2, 0] == pytest.approx(GAMMA * v0, rel=1e-13)


# --- registry ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "cls"),
    [
        ("deepsea-chain", {"n": 6}, DeepSeaChain),
        ("wide-narrow", {"n": 1, "w": 8}, WideNarrow),
        ("prior-mdp", {"model_seed": 3}, PriorMDP),
        ("prior-mdp", {"sampler": "public-code"}, PriorMDP),
    ],
)
def test_registry_builds_the_environments(name, params, cls):
    comp = registry.get_env(name)
    env = comp.build(2, **comp.resolve(params, "test"))
    assert isinstance(env, cls) and isinstance(env, TransitionRewardEnv)
    assert not registry.env_is_episodic(name, params)
    if name == "prior-mdp":
        assert env.seed == params.get("model_seed", 2)  # unset: the run's seed index
        assert env.sampler == params.get("sampler", "generator")
    trace = op.experiments.run(op.agents.OracleAgent(env.mdp, criterion="discounted"), env, 300)
    assert trace.criterion == "discounted"
    assert trace.gap_regret[-1] == pytest.approx(0.0, abs=1e-9)


def test_registry_defaults():
    env = registry.get_env("deepsea-chain").build(
        0, **registry.get_env("deepsea-chain").resolve({}, "t")
    )
    assert env.n == 4 and env.discount == GAMMA
    wn = registry.get_env("wide-narrow")
    env = wn.build(0, **wn.resolve({}, "t"))
    assert (env.n, env.w, env.mu_high, env.mu_low, env.sigma) == (1, 6, 0.5, 0.0, 1.0)
    with pytest.raises(OptplanError, match="w must be int"):
        wn.resolve({"w": 2.5}, "t")


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: DeepSeaChain(2), r"n must satisfy 2 < n < 40.*got 2"),
        (lambda: DeepSeaChain(40), r"n must satisfy 2 < n < 40.*got 40"),
        (lambda: DeepSeaChain(4.0), r"n must be an integer, got 4.0"),
        (lambda: DeepSeaChain(4, discount=1.0), r"discount must lie in \[0, 1\)"),
        (lambda: WideNarrow(0, 6), r"n must be a positive integer, got 0"),
        (lambda: WideNarrow(1, 1), r"w must be an integer >= 2.*got 1"),
        (lambda: WideNarrow(1, True), r"w must be an integer, got True"),
        (lambda: WideNarrow(1, 6, sigma=-1.0), r"sigma must be a finite number >= 0"),
        (lambda: PriorMDP(4, 2, 1.5), r"seed must be an integer, got 1.5"),
        (lambda: PriorMDP(4, 2, "0"), r"seed must be an integer, got '0'"),
        (lambda: PriorMDP(4, 2, -1), r"seed must be a non-negative integer, got -1"),
        (lambda: PriorMDP(4, 2, 0, sampler="numpy"), r"sampler must be one of"),
        (lambda: PriorMDP(4, 2, 2**32, sampler="public-code"), r"seed must be below 2\*\*32"),
        (lambda: PriorMDP(0, 2, 0), r"n_states must be a positive integer, got 0"),
        (lambda: PriorMDP(4, 2, 0, kappa=0.0), r"kappa must be a finite number > 0"),
    ],
)
def test_bad_input_names_the_field(build, pattern):
    with pytest.raises(OptplanError, match=pattern):
        build()
