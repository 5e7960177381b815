"""K-learning and PSRL agents: posterior, planning, end-to-end runs on DeepSea, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import optplan as op
from optplan.agents import PSRL, KLearning, LayeredPosterior
from optplan.envs import DeepSea
from optplan.experiments import run


def test_posterior_means_and_samples():
    post = LayeredPosterior(2, 3, 2, sigma=0.5, prior_var=2.0, transition_prior=0.1)
    for r in (1.0, 2.0, 0.0):
        post.update(0, 1, 1, r, next_state=2)
    mean, var = post.reward_posterior()
    precision = 1 / 2.0 + 3 / 0.25
    assert mean[0, 1, 1] == pytest.approx((3.0 / 0.25) / precision)
    assert var[0, 1, 1] == pytest.approx(1 / precision) and var[1, 0, 0] == 2.0
    P = post.mean_transitions()
    np.testing.assert_allclose(P[0, 1, 1], np.array([0.1, 0.1, 3.1]) / 3.3)
    np.testing.assert_allclose(P.sum(-1), 1.0)
    R, Ps = post.sample(np.random.default_rng(0))
    assert R.shape == (2, 3, 2) and np.allclose(Ps.sum(-1), 1.0) and (Ps >= 0).all()
    post.update(1, 0, 0, 5.0, next_state=1)  # last layer: no transition recorded
    assert post.next_counts[1].sum() == 0 and post.counts[1, 0, 0] == 1


def test_k_learning_plans_with_the_optimal_temperature():
    env = DeepSea(5, mapping_seed=3)
    agent = KLearning(5, 2, n_layers=5, initial=env.mdp.initial)
    agent.reset(np.random.default_rng(0))
    prob = op.KLearningTemperature(
        np.zeros((5, 5, 2)),
        agent.posterior.mean_transitions(),
        np.zeros((5, 5, 2)),
        1.0,
        env.mdp.initial,
    )
    res = prob.solve()
    assert agent.tau == pytest.approx(res.x, rel=1e-12)
    np.testing.assert_allclose(agent.pi, op.boltzmann_policy(res.q, res.x))
    np.testing.assert_allclose(agent.values, op.soft_values(res.q, res.x))
    sched = KLearning(5, 2, n_layers=5, temperature="schedule")
    sched.reset(np.random.default_rng(0))
    assert sched.tau == pytest.approx(op.temperature_schedule(1, 1.0, 5, 25, 2))


def test_psrl_solves_a_small_deepsea():
    """Deep exploration: PSRL solves depth 6 within 3000 episodes on every seed (a uniformly
    random agent reaches the goal once in 2**6 = 64 episodes, never 10% of them)."""
    env = DeepSea(6, mapping_seed=0)
    for seed in range(3):
        tr = run(PSRL(6, 2, n_layers=6), env, episodes=3000, seed=seed, stop_when_solved=True)
        assert tr.stopped_early and tr.time_to_solve is not None and tr.time_to_solve < 3000


@pytest.mark.slow
def test_k_learning_explores_deepsea_far_better_than_random():
    """K-learning reaches the goal of depth 6 much more often than a random agent (2**-6).

    It is far slower than the paper reports at larger depths (depth 10 is not solved within
    3000 episodes); see the issue notes. This checks deep exploration, not speed.
    """
    env = DeepSea(6, mapping_seed=0)
    rates = [
        run(
            KLearning(6, 2, n_layers=6, initial=env.mdp.initial), env, episodes=1500, seed=seed
        ).successes.mean()
        for seed in range(3)
    ]
    assert min(rates) > 4 * 2.0**-6, rates


def test_k_learning_conic_path_runs_and_matches_fast():
    env = DeepSea(3, mapping_seed=1)
    fast = KLearning(3, 2, n_layers=3, method="fast")
    conic = KLearning(3, 2, n_layers=3, method="conic", solver="CLARABEL")
    a = run(fast, env, episodes=15, seed=4)
    b = run(conic, env, episodes=15, seed=4)
    assert conic.statuses.get("optimal", 0) + conic.fallbacks == 16  # one plan per episode + 1
    assert abs(conic.tau - fast.tau) <= 1e-4 * fast.tau
    assert a.steps == b.steps == 45


def test_bad_agent_parameters():
    with pytest.raises(ValueError, match="temperature must be one of"):
        KLearning(3, 2, n_layers=3, temperature="hot")
    with pytest.raises(ValueError, match="method must be one of"):
        KLearning(3, 2, n_layers=3, method="magic")
    with pytest.raises(ValueError, match="solver must be one of"):
        KLearning(3, 2, n_layers=3, method="conic", solver="MOSEK2")
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0"):
        PSRL(3, 2, n_layers=3, sigma=-1.0)
    with pytest.raises(ValueError, match="transition_prior must be a finite number > 0"):
        PSRL(3, 2, n_layers=3, transition_prior=0.0)
    with pytest.raises(ValueError, match="initial must be a distribution"):
        KLearning(3, 2, n_layers=3, initial=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="at least 2 actions"):
        KLearning(3, 1, n_layers=3)


# --- the registry's noise default: the environment's known reward noise --------------------


@pytest.mark.parametrize("name", ["psrl", "k-learning"])
@pytest.mark.parametrize(
    ("env_params", "noise"),
    [
        ({}, 0.0),  # bsuite's deterministic DeepSea: exact rewards
        ({"variant": "k-learning", "reward_noise": 0.1}, 0.1),  # the Fig. 2 setting
        ({"variant": "k-learning"}, 1.0),
        ({"deterministic": False}, 1.0),  # bsuite's stochastic version: sd 1 where noisy
    ],
)
def test_default_sigma_is_the_environments_noise_and_an_explicit_one_wins(name, env_params, noise):
    comp = op.sweeps.registry.get_env("deepsea")
    env = comp.build(0, **comp.resolve({"size": 5, **env_params}, "test"))
    assert env.unwrapped.reward_noise == noise
    agent = op.agents.make_agent(name, env)
    assert agent.posterior.sigma == noise
    assert op.agents.make_agent(name, env, sigma=0.3).posterior.sigma == 0.3


def test_default_sigma_reads_a_per_pair_reward_sd():
    """An environment declaring its noise per pair (``reward_sd``, as UBEChain does) gives
    PSRL's posterior that sd per pair, and K-learning (whose temperature problem takes one
    number) the largest."""

    class PerPairNoise:
        mdp = op.envs.registry.riverswim_episodic(3, horizon=4).mdp
        reward_sd = np.linspace(0.0, 1.0, 4 * 3 * 2).reshape(4, 3, 2)

    env = op.envs.registry.riverswim_episodic(3, horizon=4)
    psrl = op.agents.make_agent("psrl", PerPairNoise())
    np.testing.assert_array_equal(psrl.posterior.sigma, PerPairNoise.reward_sd)
    k = op.agents.make_agent("k-learning", PerPairNoise())
    assert k.posterior.sigma == 1.0 == PerPairNoise.reward_sd.max()
    for agent in (psrl, k):
        assert run(agent, env, episodes=5, seed=0).episodes == 5
    chain = op.envs.UBEChain(length=4, sigma=2.0, discount=0.9)
    assert op.agents._env.env_reward_sd(chain) is chain.reward_sd


@pytest.mark.parametrize("name", ["psrl", "k-learning"])
def test_a_model_without_declared_noise_assumes_one_and_says_so(name):
    env = op.envs.registry.riverswim_episodic(4, horizon=5)
    with pytest.warns(
        UserWarning, match=name + r": sigma is unset .* assuming a reward noise sd of 1"
    ):
        assert op.agents.make_agent(name, env.mdp).posterior.sigma == 1.0


def test_psrl_with_default_parameters_learns_deepsea_at_the_pace_of_its_noise():
    """``optplan run --agent psrl --env deepsea --param size=8``: told the environment's
    (zero) noise, PSRL solves depth 8 within 150 episodes on every seed; a noise scale of 1
    ignores it and takes about 270."""
    comp = op.sweeps.registry.get_env("deepsea")
    for seed in range(3):
        env = comp.build(seed, **comp.resolve({"size": 8}, "test"))
        agent = op.agents.make_agent("psrl", env)
        tr = run(agent, env, episodes=300, seed=seed)
        assert tr.time_to_solve is not None and tr.time_to_solve < 150, tr.time_to_solve
