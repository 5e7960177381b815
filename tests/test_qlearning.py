"""Q-learning baselines: they learn, act by their rule, and reject bad parameters."""

from pathlib import Path

import numpy as np
import pytest

import optplan as op
from optplan.agents import Agent, EpsilonGreedyQ, SoftQ

COWAN = op.load_model(Path(__file__).parents[1] / "models" / "cowan3.toml")


@pytest.mark.parametrize("make", [lambda: EpsilonGreedyQ(3, 2), lambda: SoftQ(3, 2)])
def test_protocol(make):
    assert isinstance(make(), Agent)


def test_update_is_the_sample_average_of_targets():
    agent = EpsilonGreedyQ(2, 2, discount=0.5)
    agent.reset(np.random.default_rng(0))
    agent.update(0, 1, 1.0, 1, done=True)
    agent.update(0, 1, 3.0, 1, done=True)
    assert agent.q[0, 1] == pytest.approx(2.0)  # 1/n step sizes average the targets
    agent.q[1] = [4.0, 1.0]
    agent.update(0, 0, 1.0, 1, done=False)
    assert agent.q[0, 0] == pytest.approx(1.0 + 0.5 * 4.0)


def test_greedy_and_masked_actions():
    mask = np.array([[True, False, True], [True, True, True]])
    agent = EpsilonGreedyQ(2, 3, epsilon=1.0, action_mask=mask)
    agent.reset(np.random.default_rng(1))
    picks = {agent.select_action(0) for _ in range(200)}
    assert picks == {0, 2}  # uniform among the admissible actions only
    agent.epsilon = 0.0
    agent.q[0] = [0.0, -np.inf, 5.0]
    assert agent.select_action(0) == 2


def test_soft_policy_is_boltzmann_and_stable():
    agent = SoftQ(1, 3, temperature=0.5)
    agent.q[0] = [0.0, 1.0, 2.0]
    expected = np.exp(np.array([0.0, 1.0, 2.0]) / 0.5)
    np.testing.assert_allclose(agent.policy(0), expected / expected.sum())
    cold = SoftQ(1, 3, temperature=1e-8)
    cold.q[0] = [1e3, 1e3 + 1e-6, 0.0]
    p = cold.policy(0)
    assert np.all(np.isfinite(p)) and p.argmax() == 1 and p.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: EpsilonGreedyQ(3, 2, epsilon=0.1, discount=0.9),
        lambda: SoftQ(3, 2, temperature=0.05, discount=0.9),
    ],
)
def test_learns_cowan3_better_than_random(make):
    """Mean pseudo-regret after 5,000 steps over 5 seeds: well below the random agent's."""
    env = op.envs.TabularEnv(COWAN)
    random = [
        op.experiments.run(op.agents.RandomAgent(3, 2), env, 5000, seed=s).regret[-1]
        for s in range(5)
    ]
    learned = [op.experiments.run(make(), env, 5000, seed=s).regret[-1] for s in range(5)]
    assert np.mean(learned) < 0.5 * np.mean(random)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"epsilon": 1.5}, r"epsilon must lie in \[0, 1\], got 1.5"),
        ({"discount": -0.1}, r"discount must lie in \[0, 1\]"),
        ({"learning_rate": 0.0}, r"learning_rate must lie in \(0, 1\]"),
        ({"q_init": float("nan")}, "q_init must be a finite number"),
        ({"action_mask": [[True, False]]}, r"action_mask has shape \(1, 2\)"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EpsilonGreedyQ(3, 2, **kwargs)


def test_bad_temperature():
    for t in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="temperature must be a positive number"):
            SoftQ(3, 2, temperature=t)
