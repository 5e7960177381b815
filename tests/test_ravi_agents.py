"""RAVI-UCB agents (tabular, linear mixture), the discounted-reset wrapper and the linear
mixture environment: the defaults and bonuses written out, Sherman-Morrison against exact
inverses after 10^4 updates, seeded runs on RiverSwim-6 and a linear mixture MDP, bad input."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import optplan as op
from optplan._checks import OptplanError
from optplan.agents.ravi import (
    RAVIUCB,
    RAVIUCBLinear,
    default_eta,
    linear_beta,
    sherman_morrison,
    tabular_beta,
)
from optplan.envs import DiscountedResets, LinearMixtureMDP, TabularEnv
from optplan.generators import riverswim


def riverswim_env(gamma=0.9):
    return DiscountedResets(TabularEnv(riverswim(6)), gamma)


# --- defaults and bonuses, written out ---


def test_default_formulas():
    H, T = 10.0, 10**5
    assert default_eta(2, H, T) == pytest.approx(math.sqrt(2 * math.log(2) / (100 * 1e5)))
    assert default_eta(1, H, T) == 1.0
    # Lemma 5.1 with delta = 1/T: 8 H sqrt(S log(S A T^2))
    assert tabular_beta(6, 2, H, T, 1 / T) == pytest.approx(
        8 * 10 * math.sqrt(6 * math.log(6 * 2 * 1e10))
    )
    # Theorem 5.6 (lam = 1, delta = 1/T): H sqrt(2 ((d/2) log(1 + T B^2 H^2 / d) + log T)) + B
    d, B = 4, 2.0
    want = 10 * math.sqrt(2 * (2 * math.log(1 + 1e5 * 4 * 100 / 4) + math.log(1e5))) + 2.0
    assert linear_beta(d, H, T, B, 1.0, 1 / T) == pytest.approx(want, rel=1e-14)
    assert linear_beta(d, H, T, B, 4.0, 0.1) == pytest.approx(
        10 * math.sqrt(2 * (2 * math.log(1 + 1e5 * 4 * 100 / 16) + math.log(10))) + 2 * 2.0
    )


def test_tabular_agent_parameters_and_first_plan():
    agent = RAVIUCB(6, 2, discount=0.9, horizon=1000, beta_scale=0.5)
    assert agent.H == pytest.approx(10.0)
    assert agent.eta == pytest.approx(math.sqrt(2 * math.log(2) / (100 * 1000)))
    assert agent.beta == pytest.approx(0.5 * 8 * 10 * math.sqrt(6 * math.log(12 * 1000 * 1000)))
    assert RAVIUCB(6, 2, discount=0.9, horizon=1000, beta=3.0, beta_scale=2.0).beta == 6.0
    r = np.linspace(0, 1, 12).reshape(6, 2)
    agent = RAVIUCB(6, 2, discount=0.5, horizon=100, rewards=r, beta=0.3, eta=2.0)
    agent.reset(np.random.default_rng(0))
    # epoch 1: Q_1 = 0 gives V_1 = 0, pi_1 = uniform, Q_2 = clip(r + beta / sqrt(1))
    np.testing.assert_array_equal(agent.values, 0.0)
    np.testing.assert_allclose(agent.policy, 0.5)
    np.testing.assert_allclose(agent.q, np.minimum(r + 0.3, 2.0))


def test_tabular_agent_bonus_and_estimate_written_out():
    """After a few transitions and an epoch end: P_hat = N'/N with N from 1, CB = beta /
    sqrt(N), and one regularized step from the previous epoch's policy and Q."""
    r = np.full((3, 2), 0.2)
    agent = RAVIUCB(3, 2, discount=0.8, horizon=100, rewards=r, beta=0.5, eta=1.5)
    agent.reset(np.random.default_rng(1))
    log_pi0, q0 = agent.log_policy.copy(), agent.q.copy()
    for s, a, s2 in [(0, 1, 2), (0, 1, 2), (0, 1, 1), (2, 0, 0)]:
        agent.update(s, a, 0.2, s2, False)
    agent.update(1, 1, 0.2, 0, True)  # epoch ends
    N = np.ones((3, 2))
    N[0, 1], N[2, 0], N[1, 1] = 4, 2, 2
    P = np.zeros((3, 2, 3))
    P[0, 1] = [0, 1 / 4, 2 / 4]
    P[2, 0] = [1 / 2, 0, 0]
    P[1, 1] = [1 / 2, 0, 0]
    np.testing.assert_array_equal(agent.N, N)
    pi0 = np.exp(log_pi0)
    V = np.log((pi0 * np.exp(1.5 * q0)).sum(axis=1)) / 1.5
    Q = np.clip(r + 0.5 / np.sqrt(N) + 0.8 * P @ V, 0, 5.0)
    np.testing.assert_allclose(agent.values, V, rtol=1e-14)
    np.testing.assert_allclose(agent.q, Q, rtol=1e-14)
    assert agent.epochs == 2 and agent.t == 6


def test_unknown_rewards_are_empirical_means():
    agent = RAVIUCB(2, 1, discount=0.5, horizon=10, beta=0.0, eta=1.0)
    agent.reset(np.random.default_rng(0))
    agent.update(0, 0, 0.3, 0, False)
    agent.update(0, 0, 0.5, 1, True)
    # V_2 = soft value of Q_2 = clip(0 + 0) = 0, so Q_3 = r_hat = (0.4, 0) (no bonus, beta = 0)
    np.testing.assert_allclose(agent.q[:, 0], [0.4, 0.0])


def test_linear_agent_written_out():
    env = LinearMixtureMDP.random(5, 2, 3, seed=2)
    psi, r = env.features, env.mdp.R
    agent = RAVIUCBLinear(psi, r, discount=0.75, horizon=500, eta=0.8, lam=2.0)
    assert agent.B == pytest.approx(math.sqrt(3))  # each base kernel sums to 1
    assert agent.beta == pytest.approx(linear_beta(3, 4.0, 500, math.sqrt(3), 2.0, 1 / 500))
    agent.reset(np.random.default_rng(0))
    rng = np.random.default_rng(5)
    X, targets = [], []
    log_pi, q = agent.log_policy.copy(), agent.q.copy()
    V_prev = agent.values.copy()
    for t in range(30):  # one epoch of 30 transitions, then its end
        s, a, s2 = int(rng.integers(5)), int(rng.integers(2)), int(rng.integers(5))
        X.append(np.einsum("jd,j->d", psi[s, a], V_prev))
        targets.append(V_prev[s2])
        agent.update(s, a, 0.0, s2, t == 29)
    X = np.array(X)
    Lam = 2.0 * np.eye(3) + X.T @ X
    b = X.T @ np.array(targets)
    theta = np.linalg.solve(Lam, b)
    np.testing.assert_allclose(agent.theta_hat, theta, rtol=1e-10)
    pi = np.exp(log_pi)
    V = np.log((pi * np.exp(0.8 * q)).sum(axis=1)) / 0.8
    phi = np.einsum("sajd,j->sad", psi, V)
    width = np.einsum("sad,sad->sa", phi, np.linalg.solve(Lam, phi[..., None])[..., 0])
    Q = np.clip(r + agent.beta * np.sqrt(width) + 0.75 * phi @ theta, 0.0, 4.0)
    np.testing.assert_allclose(agent.values, V, rtol=1e-13)
    np.testing.assert_allclose(agent.q, Q, rtol=1e-10)


# --- Sherman-Morrison ---


def exact_inverse(X: np.ndarray, lam: float) -> np.ndarray:
    """``(lam I + X^T X)^{-1}`` in 40 digits."""
    mpmath.mp.dps = 40
    d = X.shape[1]
    Xm = mpmath.matrix(X.tolist())
    M = mpmath.eye(d) * lam + Xm.T * Xm
    return np.array((M**-1).tolist(), dtype=float)


def test_sherman_morrison_equals_the_direct_inverse_after_10k_updates():
    rng = np.random.default_rng(1)
    d = 8
    inv = np.eye(d) / 2.0
    X = rng.normal(size=(10_000, d)) * rng.uniform(0, 10, (10_000, 1))
    for x in X:
        sherman_morrison(inv, x)
    direct = np.linalg.inv(2.0 * np.eye(d) + X.T @ X)
    assert np.max(np.abs(inv - direct)) <= 1e-10
    assert np.max(np.abs(inv - inv.T)) <= 1e-15


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["spread", "nearly-parallel"])
def test_sherman_morrison_after_10k_updates(kind):
    """10^4 rank-one updates with feature vectors of norm up to 20 (d = 6): the O(d^2) update
    equals the direct inverse to 1e-10 and the 40-digit inverse to 1e-12. With nearly
    parallel features (Lambda's condition number ~1e7, as when RAVI's values are flat) the
    update is the more accurate of the two."""
    rng = np.random.default_rng(0)
    d = 6
    inv = np.eye(d)
    if kind == "spread":
        X = rng.normal(size=(10_000, d)) * rng.uniform(0, 10, (10_000, 1))
    else:
        X = 10.0 + 0.01 * rng.normal(size=(10_000, d))
    for x in X:
        sherman_morrison(inv, x)
    direct = np.linalg.inv(np.eye(d) + X.T @ X)
    exact = exact_inverse(X, 1.0)
    assert np.max(np.abs(inv - exact)) <= 1e-12
    if kind == "spread":
        assert np.max(np.abs(inv - direct)) <= 1e-10
    else:  # the direct inverse loses cond(Lambda) * eps; the rank-one updates do not
        assert np.max(np.abs(inv - direct)) <= 1e-8
        assert np.max(np.abs(inv - exact)) <= 0.01 * np.max(np.abs(direct - exact))


class _Recording(RAVIUCBLinear):
    def update(self, state, action, reward, next_state, done):
        self.recorded.append(self.phi[state, action].copy())  # the epoch's phi, as recorded
        super().update(state, action, reward, next_state, done)


@pytest.mark.slow
def test_linear_agent_inverse_after_10k_steps():
    env = LinearMixtureMDP.random(8, 2, 4, seed=3)
    agent = _Recording(env.features, env.mdp.R, discount=0.9, horizon=10_000, beta_scale=0.05)
    agent.recorded = []
    op.experiments.run(agent, DiscountedResets(env, 0.9), steps=10_000, seed=0)
    X = np.array(agent.recorded)
    assert X.shape == (10_000, 4)
    exact = exact_inverse(X, 1.0)
    assert np.max(np.abs(agent.Lambda_inv - exact)) <= 1e-10
    assert np.max(np.abs(agent.Lambda_inv - np.linalg.inv(agent.Lambda))) <= 1e-10


# --- runs ---


def test_tabular_agent_runs_on_riverswim():
    env = riverswim_env(0.9)
    agent = RAVIUCB(6, 2, discount=0.9, horizon=3000, beta_scale=0.05)
    trace = op.experiments.run(agent, env, steps=3000, seed=4)
    again = op.experiments.run(
        RAVIUCB(6, 2, discount=0.9, horizon=3000, beta_scale=0.05), env, 3000, seed=4
    )
    np.testing.assert_array_equal(trace.actions, again.actions)
    assert trace.criterion == "discounted" and np.isfinite(trace.regret).all()
    assert agent.epochs == trace.episodes + 1  # the first epoch, then one per reset
    assert 3000 * 0.1 * 0.8 < trace.episodes < 3000 * 0.1 * 1.2
    assert agent.N.sum() == 12 + 3000 and agent.stats()["epochs"] == agent.epochs
    assert np.all((agent.q >= 0) & (agent.q <= agent.H))


def test_tabular_agent_respects_the_action_mask():
    mdp = riverswim(6)
    mask = np.ones((6, 2), bool)
    mask[2:4, 0] = False
    agent = RAVIUCB(6, 2, discount=0.8, horizon=500, action_mask=mask, beta_scale=0.1)
    trace = op.experiments.run(agent, DiscountedResets(TabularEnv(mdp), 0.8), 500, seed=1)
    assert not np.any((trace.states >= 2) & (trace.states < 4) & (trace.actions == 0))
    assert np.all(agent.policy[~mask] == 0)


def test_linear_agent_runs_on_a_linear_mixture():
    env = DiscountedResets(LinearMixtureMDP.random(20, 2, 4, seed=0), 0.9)
    agent = RAVIUCBLinear(env.features, env.mdp.R, discount=0.9, horizon=3000, beta_scale=0.05)
    trace = op.experiments.run(agent, env, steps=3000, seed=2)
    again = RAVIUCBLinear(env.features, env.mdp.R, discount=0.9, horizon=3000, beta_scale=0.05)
    np.testing.assert_array_equal(
        op.experiments.run(again, env, 3000, seed=2).actions, trace.actions
    )
    assert np.isfinite(trace.regret).all() and agent.epochs == trace.episodes + 1
    # the ridge estimate points at the mixture weights
    assert np.abs(agent.theta_hat - env.theta).max() < 0.2


# --- environments ---


def test_discounted_resets():
    env = riverswim_env(0.8)
    assert env.mdp.discount == 0.8 and env.unwrapped is env
    assert op.experiments.oracle.true_model(env) is env.mdp
    state, _ = env.reset(seed=11)
    lengths, n = [], 0
    for _ in range(20_000):
        state, _, terminated, truncated, info = env.step(1)
        n += 1
        if truncated:
            assert info["discounted_reset"] and not terminated
            lengths.append(n)
            n = 0
            state, _ = env.reset()
    assert np.mean(lengths) == pytest.approx(5.0, rel=0.05)  # geometric, mean H = 5
    first = [env.reset(seed=3)[0]] + [env.step(1)[0] for _ in range(20)]
    second = [env.reset(seed=3)[0]] + [env.step(1)[0] for _ in range(20)]
    assert first == second


def test_discounted_resets_bad_input():
    with pytest.raises(OptplanError, match="discount must lie in"):
        DiscountedResets(TabularEnv(riverswim(6)), 1.0)
    with pytest.raises(OptplanError, match="discount must lie in"):
        DiscountedResets(TabularEnv(riverswim(6)), 0.0)
    layered = op.envs.DeepSea(4)
    with pytest.raises(TypeError, match="continuing environment"):
        DiscountedResets(layered, 0.9)


def test_linear_mixture_model():
    env = LinearMixtureMDP.random(7, 3, 5, seed=4, discount=0.9)
    np.testing.assert_allclose(env.mdp.P, env.features @ env.theta, atol=1e-15)
    np.testing.assert_allclose(env.mdp.P.sum(-1), 1.0, atol=1e-15)
    assert env.features.shape == (7, 3, 7, 5) and env.dim == 5 and env.mdp.discount == 0.9
    same = LinearMixtureMDP.random(7, 3, 5, seed=4, discount=0.9)
    assert same.mdp == env.mdp
    given = LinearMixtureMDP.random(7, 3, 5, seed=4, theta=[1, 0, 0, 0, 0])
    np.testing.assert_allclose(given.mdp.P, env.features[..., 0], atol=1e-15)
    # the general form: signed features whose combination is a kernel
    psi = np.stack([env.features[..., 0], env.features[..., 1] - env.features[..., 0]], -1)
    general = LinearMixtureMDP(psi, [1.0, 0.5], env.mdp.R, mixture=False)
    np.testing.assert_allclose(
        general.mdp.P, 0.5 * (env.features[..., 0] + env.features[..., 1]), atol=1e-15
    )


def _psi(S=3, A=2, d=2):
    return op.envs.linear_mixture.mixture_features(S, A, d, np.random.default_rng(0))


LINEAR_BAD = [
    (dict(features=np.ones((3, 2, 3))), "features must have 4 dimensions"),
    (dict(features=np.ones((3, 2, 4, 2)) / 4), r"features must have shape \(S, A, S, d\)"),
    (dict(theta=[0.5, 0.25, 0.25]), r"theta has shape \(3,\), expected \(2,\)"),
    (dict(theta=[1.5, -0.5]), "theta .mixture weights, in the simplex. has a negative entry"),
    (dict(theta=[0.5, 0.4]), "theta .mixture weights, in the simplex. must sum to 1"),
    (dict(features=np.ones((3, 2, 3, 2))), r"features\[..., 0\] \(base kernel 0\) must sum"),
    (dict(rewards=np.zeros((3, 3))), r"rewards has shape \(3, 3\), expected \(3, 2\)"),
]


@pytest.mark.parametrize("change, match", LINEAR_BAD)
def test_linear_mixture_bad_input(change, match):
    args = dict(features=_psi(), theta=[0.5, 0.5], rewards=np.zeros((3, 2)))
    args.update(change)
    with pytest.raises(OptplanError, match=match):
        LinearMixtureMDP(**args)


def test_linear_mixture_bad_input_general_and_generator():
    psi = _psi()
    with pytest.raises(OptplanError, match="features @ theta must sum to 1"):
        LinearMixtureMDP(psi, [0.7, 0.7], np.zeros((3, 2)), mixture=False)
    with pytest.raises(OptplanError, match="features @ theta has a negative entry"):
        LinearMixtureMDP(psi, [2.0, -1.0], np.zeros((3, 2)), mixture=False)
    with pytest.raises(OptplanError, match="in the simplex"):
        LinearMixtureMDP.random(4, 2, 3, theta=[0.6, 0.6, -0.2])
    with pytest.raises(OptplanError, match="dim must be a positive integer"):
        LinearMixtureMDP.random(4, 2, 0)
    with pytest.raises(OptplanError, match="concentration"):
        LinearMixtureMDP.random(4, 2, 2, concentration=0.0)


AGENT_BAD = [
    (dict(discount=0.0), "discount must lie in"),
    (dict(discount=1.0), "discount must lie in"),
    (dict(horizon=0), "horizon must be a positive integer"),
    (dict(eta=0.0), "eta must lie in"),
    (dict(eta=-1.0), "eta must lie in"),
    (dict(beta=-1.0), "beta must be a finite number >= 0"),
    (dict(beta_scale=-0.5), "beta_scale must be a finite number >= 0"),
    (dict(delta=1.0), "delta must lie in"),
    (dict(rewards=np.zeros((6, 3))), "rewards has shape"),
    (dict(rewards=np.full((6, 2), 1.5)), r"rewards must lie in \[0, 1\]"),
    (dict(action_mask=np.ones((2, 6, 2), bool)), "continuing"),
]


@pytest.mark.parametrize("change, match", AGENT_BAD)
def test_tabular_agent_bad_input(change, match):
    args = dict(n_states=6, n_actions=2, discount=0.9, horizon=100)
    args.update(change)
    with pytest.raises(OptplanError, match=match):
        RAVIUCB(**args)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(features=np.ones((3, 2, 3))), "features must have 4 dimensions"),
        (dict(features=np.ones((3, 2, 2, 2))), r"features must have shape \(S, A, S, d\)"),
        (dict(rewards=np.zeros((2, 2))), "rewards has shape"),
        (dict(lam=0.0), "lam must be a finite number > 0"),
        (dict(theta_bound=-1.0), "theta_bound must be a finite number > 0"),
        (dict(beta=-0.1), "beta must be a finite number >= 0"),
        (dict(discount=1.2), "discount must lie in"),
    ],
)
def test_linear_agent_bad_input(change, match):
    args = dict(features=_psi(), rewards=np.zeros((3, 2)), discount=0.9, horizon=100)
    args.update(change)
    with pytest.raises(OptplanError, match=match):
        RAVIUCBLinear(**args)


@pytest.mark.parametrize("linear", [False, True])
def test_agents_never_return_an_overflowed_step(linear):
    """Overflow in the soft step is never silent in either agent: at eta = 1e-306 with
    Q = +-1e308 and the best action at probability e^-700, V_k overflows although it is
    finite; the epoch's planning raises FloatingPointError instead of acting on -inf."""
    if linear:
        agent = RAVIUCBLinear(
            _psi(2, 2, 2), np.zeros((2, 2)), discount=0.9, horizon=100, eta=1e-306
        )
    else:
        agent = RAVIUCB(2, 2, discount=0.9, horizon=100, eta=1e-306)
    agent.reset(np.random.default_rng(0))
    agent.log_policy = np.array([[0.0, -700.0], [-np.log(2), -np.log(2)]])
    agent.q = np.array([[-1e308, 1e308], [0.0, 1.0]])
    with pytest.raises(FloatingPointError, match="is not finite"):
        agent.update(0, 0, 0.0, 1, True)  # the epoch ends: the next one is planned
