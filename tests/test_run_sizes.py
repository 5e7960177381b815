"""experiments.run refuses an agent built for another model size."""

from __future__ import annotations

from pathlib import Path

import pytest

import optplan as op
from optplan.agents import EpsilonGreedyQ, OracleAgent, RandomAgent
from optplan.envs import DeepSea, TabularEnv
from optplan.experiments import run
from optplan.experiments.run import agent_shape
from optplan.generators import riverswim

MODELS = Path(__file__).resolve().parents[1] / "models"


def test_cowan3_oracle_on_riverswim6_is_refused_naming_both():
    oracle = OracleAgent(op.load_model(MODELS / "cowan3.toml"))
    env = TabularEnv(riverswim(6))
    with pytest.raises(ValueError) as err:
        run(oracle, env, steps=10)
    msg = str(err.value)
    assert "agent OracleAgent does not fit the environment: n_states differ" in msg
    assert "built for n_states=3, n_actions=2, continuing (its model 'cowan3')" in msg
    assert "model 'riverswim' has n_states=6, n_actions=2, continuing" in msg


def test_action_count_mismatch():
    env = TabularEnv(riverswim(4))
    with pytest.raises(ValueError, match="n_actions differ.*n_states=4, n_actions=3"):
        run(RandomAgent(4, 3), env, steps=10)


def test_layer_count_mismatch_and_layered_agent_on_continuing_model():
    env = DeepSea(4)
    agent = EpsilonGreedyQ(4, 2, n_layers=5)
    assert agent_shape(agent) == (4, 2, 5)
    with pytest.raises(ValueError, match="n_layers differ.*n_layers=5.*n_layers=4"):
        run(agent, env, episodes=1)
    with pytest.raises(ValueError, match="n_layers differ.*n_layers=5.*continuing"):
        run(agent, TabularEnv(riverswim(4)), steps=5)
    oracle = OracleAgent(riverswim(4))
    with pytest.raises(ValueError, match="n_layers differ.*continuing.*n_layers=4"):
        run(oracle, env, episodes=1)


def test_agents_that_fit_run():
    env = TabularEnv(riverswim(6))
    trace = run(OracleAgent(env.mdp), env, steps=50)
    assert trace.steps == 50
    env = DeepSea(4)
    trace = run(EpsilonGreedyQ(4, 2, n_layers=4), env, episodes=2)
    assert trace.episodes == 2
