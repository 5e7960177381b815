"""TabularEnv: the Gymnasium contract, sampling laws, seeding and argument checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

from optplan.envs import TabularEnv
from optplan.mdp import FiniteHorizonMDP, TabularMDP

#: p-value below which a goodness-of-fit test fails. The seeds are fixed, so the tests are
#: deterministic; the threshold says that a correct sampler would fail for at most one seed
#: in a thousand, so a failure here is a sampling bug, not bad luck.
ALPHA = 1e-3


def random_mdp(S=4, A=3, seed=0, concentration=2.0, **kwargs) -> TabularMDP:
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(S, concentration), size=(S, A))
    R = rng.random((S, A))
    return TabularMDP(P, R, **kwargs)


def random_layered(L=3, S=4, A=3, seed=0) -> FiniteHorizonMDP:
    rng = np.random.default_rng(seed)
    return FiniteHorizonMDP(rng.dirichlet(np.ones(S), size=(L, S, A)), rng.random((L, S, A)))


def rollout(env: TabularEnv, n: int, seed: int, actions_seed: int = 99):
    """``n`` steps with uniform random actions; resets whenever an episode ends."""
    act_rng = np.random.default_rng(actions_seed)
    s, _ = env.reset(seed=seed)
    out = []
    for _ in range(n):
        a = int(act_rng.integers(env.action_space.n))
        s2, r, term, trunc, info = env.step(a)
        out.append((s, a, s2, r, term, trunc, info.get("layer")))
        s = s2 if not (term or trunc) else env.reset()[0]
    return out


# --- Gymnasium contract --------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        TabularEnv(random_mdp()),
        TabularEnv(random_mdp(), reward_noise=0.5, max_steps=7),
        TabularEnv(random_layered()),
    ],
    ids=["continuing", "noisy-truncated", "finite-horizon"],
)
def test_gymnasium_env_checker(env):
    # The render check is skipped because it can only run on an env made by gymnasium.make
    # (it needs a spec) and TabularEnv has no render modes; every other warning is an error.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_spaces_and_model():
    mdp = random_mdp(S=5, A=2)
    env = TabularEnv(mdp)
    assert env.observation_space.n == 5 and env.action_space.n == 2
    assert env.mdp is mdp
    s, info = env.reset(seed=0)
    assert isinstance(s, int) and info == {}
    s2, r, term, trunc, info = env.step(np.int64(1))
    assert isinstance(s2, int) and isinstance(r, float)
    assert term is False and trunc is False
    assert info == {"expected_reward": mdp.R[s, 1]}
    assert r == mdp.R[s, 1]  # no noise: the expected reward exactly


# --- sampling laws -------------------------------------------------------------------------


def pooled_chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    """p-value of the pooled Pearson test of every row of ``counts`` against ``probs``."""
    n = counts.sum(axis=-1, keepdims=True)
    expected = n * probs
    assert expected.min() >= 5, "too few samples for the chi-square approximation"
    stat = float(((counts - expected) ** 2 / expected).sum())
    dof = counts[..., 0].size * (counts.shape[-1] - 1)
    return float(stats.chi2.sf(stat, dof))


def test_transition_frequencies_match_P():
    mdp = random_mdp(S=4, A=3, seed=1)
    steps = rollout(TabularEnv(mdp), 40_000, seed=2)
    counts = np.zeros(mdp.P.shape)
    for s, a, s2, *_ in steps:
        counts[s, a, s2] += 1
    assert pooled_chi_square(counts, mdp.P) > ALPHA
    # The test has power: the same counts against a neighbour's law are rejected outright.
    assert pooled_chi_square(counts, np.roll(mdp.P, 1, axis=0)) < 1e-12


def test_initial_distribution_matches():
    initial = np.array([0.1, 0.0, 0.6, 0.3])
    mdp = random_mdp(S=4, A=2, seed=3, initial=initial)
    env = TabularEnv(mdp)
    env.reset(seed=4)
    starts = np.array([env.reset()[0] for _ in range(5_000)])
    counts = np.bincount(starts, minlength=4)
    assert counts[1] == 0  # a zero-probability start is never drawn
    support = initial > 0
    assert pooled_chi_square(counts[support], initial[support]) > ALPHA


def test_zero_probability_successors_never_sampled():
    P = np.zeros((3, 1, 3))
    P[0, 0] = [0.0, 1.0, 0.0]
    P[1, 0] = [0.5, 0.0, 0.5]
    P[2, 0] = [0.0, 0.0, 1.0]
    mdp = TabularMDP(P, np.zeros((3, 1)), initial=[1.0, 0.0, 0.0])
    for s, a, s2, *_ in rollout(TabularEnv(mdp, max_steps=20), 5_000, seed=5):
        assert P[s, a, s2] > 0


def test_reward_noise_moments():
    sigma, n = 0.7, 20_000
    mdp = random_mdp(seed=6)
    noise = np.array([r - mdp.R[s, a] for s, a, _, r, *_ in rollout(TabularEnv(mdp, sigma), n, 7)])
    # 5 standard errors of the sample mean and of the sample standard deviation.
    assert abs(noise.mean()) < 5 * sigma / np.sqrt(n)
    assert abs(noise.std() - sigma) < 5 * sigma / np.sqrt(2 * n)


# --- episodes, layers, truncation ----------------------------------------------------------


def test_finite_horizon_uses_layer_laws_and_terminates():
    L, S, A = 3, 3, 2
    P = np.zeros((L, S, A, S))
    for l in range(L):
        P[l, :, :, (l + 1) % S] = 1.0  # layer l sends every pair to state l + 1 (mod S)
    R = np.arange(L * S * A, dtype=float).reshape(L, S, A)
    env = TabularEnv(FiniteHorizonMDP(P, R, initial=[1.0, 0.0, 0.0]))
    for episode in range(2):
        s, info = env.reset(seed=episode)
        assert (s, info) == (0, {"layer": 0})
        for l in range(L):
            a = l % A
            s2, r, term, trunc, info = env.step(a)
            assert s2 == (l + 1) % S
            assert r == info["expected_reward"] == R[l, s, a]
            assert info["layer"] == l + 1
            assert term is (l == L - 1) and trunc is False
            s = s2
        with pytest.raises(RuntimeError, match="reset"):
            env.step(0)


def test_max_steps_truncates():
    env = TabularEnv(random_mdp(), max_steps=4)
    env.reset(seed=0)
    flags = [env.step(0)[2:4] for _ in range(4)]
    assert flags == [(False, False)] * 3 + [(False, True)]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    assert env.step(0)[3] is False


def test_max_steps_shorter_than_horizon():
    env = TabularEnv(random_layered(L=5), max_steps=2)
    env.reset(seed=0)
    env.step(0)
    _, _, term, trunc, info = env.step(0)
    assert (term, trunc, info["layer"]) == (False, True, 2)


# --- seeding -------------------------------------------------------------------------------


@pytest.mark.parametrize("mdp", [random_mdp(), random_layered()], ids=["continuing", "finite"])
def test_same_seed_same_trajectory(mdp):
    a = rollout(TabularEnv(mdp, reward_noise=0.3), 300, seed=11)
    b = rollout(TabularEnv(mdp, reward_noise=0.3), 300, seed=11)
    c = rollout(TabularEnv(mdp, reward_noise=0.3), 300, seed=12)
    assert a == b
    assert a != c


def test_reseeding_restarts_the_stream():
    env = TabularEnv(random_mdp(), reward_noise=1.0)
    first = rollout(env, 50, seed=3)
    assert rollout(env, 50, seed=3) == first


# --- errors --------------------------------------------------------------------------------


def masked_mdp() -> TabularMDP:
    mask = np.array([[True, False, True], [True, True, True]])
    rng = np.random.default_rng(0)
    return TabularMDP(
        rng.dirichlet(np.ones(2), size=(2, 3)),
        rng.random((2, 3)),
        initial=[1.0, 0.0],
        action_mask=mask,
    )


@pytest.mark.parametrize(
    "action, match",
    [
        (1, "action 1 is not admissible in state 0"),
        (3, r"action 3 is out of range \[0, 3\) in state 0"),
        (-1, r"action -1 is out of range \[0, 3\) in state 0"),
        (1.0, "action must be an integer, got 1.0 in state 0"),
        ("0", "action must be an integer, got '0' in state 0"),
    ],
)
def test_bad_action_raises(action, match):
    env = TabularEnv(masked_mdp())
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(action)


def test_masked_action_in_a_layer():
    mask = np.ones((2, 2, 2), dtype=bool)
    mask[1, :, 0] = False
    mdp = FiniteHorizonMDP(np.full((2, 2, 2, 2), 0.5), np.zeros((2, 2, 2)), action_mask=mask)
    env = TabularEnv(mdp)
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(ValueError, match="action 0 is not admissible in state .* at layer 1"):
        env.step(0)


def test_step_before_reset():
    with pytest.raises(RuntimeError, match="reset"):
        TabularEnv(random_mdp()).step(0)


@pytest.mark.parametrize("noise", [-0.1, float("nan"), float("inf"), "0.1", None, True])
def test_bad_reward_noise(noise):
    with pytest.raises(ValueError, match="reward_noise"):
        TabularEnv(random_mdp(), reward_noise=noise)


@pytest.mark.parametrize("max_steps", [0, -3, 2.5, True, "10"])
def test_bad_max_steps(max_steps):
    with pytest.raises(ValueError, match="max_steps"):
        TabularEnv(random_mdp(), max_steps=max_steps)


def test_bad_model():
    with pytest.raises(TypeError, match="mdp"):
        TabularEnv(np.ones((2, 2, 2)))
