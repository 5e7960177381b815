"""The Q-learning baselines' compiled engine (optplan.experiments.qlearning_compiled) equals
the generic Python loop exactly for epsilon-greedy and soft Q-learning: on DeepSea counted in
episodes with ``stop_when_solved`` (as the k-learning Fig. 2 sweep runs them), on a windy
DeepSea and an episodic model file, and on continuing RiverSwim and Cowan's 3-state model
counted in steps: every Trace column, the agent's table, counts, greedy sets,
``policy_version``, clock and generator, and the environment's generator."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import assert_same_trace

from optplan.agents import EpsilonGreedyQ, SoftQ
from optplan.agents.registry import make_agent
from optplan.envs.registry import ENVS
from optplan.experiments import _segment_kernels, engines, qlearning_compiled, run
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(not _segment_kernels.AVAILABLE, reason="numba not installed")

#: name -> (registry environment, its parameters, run arguments)
ENVIRONMENTS = {
    "deepsea-6": (
        "deepsea",
        {"size": 6, "variant": "k-learning", "reward_noise": 0.1},
        {"episodes": 300, "stop_when_solved": True},
    ),
    "deepsea-10": (
        "deepsea",
        {"size": 10, "variant": "k-learning", "reward_noise": 0.1},
        {"episodes": 200, "stop_when_solved": True},
    ),
    "deepsea-5-windy": ("deepsea", {"size": 5, "deterministic": False}, {"steps": 1003}),
    "cowan3-episodic": (
        "model",
        {"path": "models/cowan3.toml", "horizon": 5, "reward_noise": 0.2},
        {"episodes": 150},
    ),
    "riverswim-6": ("riverswim", {"n_states": 6, "reward_noise": 0.2}, {"steps": 3000}),
    "cowan3": ("model", {"path": "models/cowan3.toml"}, {"steps": 2500}),
}

AGENTS = [
    ("epsilon-greedy", {}),
    ("epsilon-greedy", {"epsilon": 0.3, "learning_rate": 0.2}),
    ("epsilon-greedy", {"epsilon": 0.0, "q_init": 1.0}),
    ("soft-q", {}),
    ("soft-q", {"temperature": 0.5, "discount": 0.9}),
    ("soft-q", {"temperature": 2.0, "learning_rate": 0.5, "q_init": 0.3}),
]


def make_env(name):
    reg, params, _ = ENVIRONMENTS[name]
    comp = ENVS[reg]
    return comp.build(0, **comp.resolve(params, reg))


def both(agent_name, params, env_name, seed):
    out = []
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent(agent_name, env, **params)
        trace = run(agent, env, seed=seed, engine=engine, **ENVIRONMENTS[env_name][2])
        out.append((trace, agent, env))
    return out


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize("agent_name,params", AGENTS)
def test_compiled_equals_generic(agent_name, params, env_name):
    for seed in (0, 7):
        (tr, ar, er), (tc, ac, ec) = both(agent_name, params, env_name, seed)
        assert_same_trace(tr, tc)
        for name in ("q", "counts", "_best"):
            np.testing.assert_array_equal(getattr(ac, name), getattr(ar, name), err_msg=name)
        assert ac.policy_version == ar.policy_version
        assert ac._clock.layer == ar._clock.layer
        assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
        assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state


def test_the_sweep_runs_take_the_engine():
    assert qlearning_compiled.self_check()
    for env_name in ("deepsea-10", "riverswim-6"):
        env = make_env(env_name)
        for agent_name in ("epsilon-greedy", "soft-q"):
            agent = make_agent(agent_name, env)
            episodes = ENVIRONMENTS[env_name][2].get("episodes")
            chosen = engines.select("auto", agent, env, episodes, False)
            assert chosen is not None and chosen.name == "Q-learning baselines"


def test_declines_what_it_does_not_cover():
    env = make_env("riverswim-6")
    agent = EpsilonGreedyQ(6, 2)

    class Sub(SoftQ):
        pass

    reason = qlearning_compiled.compiled_reason(Sub(6, 2), env)
    assert "subclasses" in reason
    assert "tracks" in qlearning_compiled.compiled_reason(agent, env, None, True)
    assert "episodes" in qlearning_compiled.compiled_reason(agent, env, 10)
    deep = make_env("deepsea-6")
    assert "n_layers" in qlearning_compiled.compiled_reason(EpsilonGreedyQ(6, 2), deep)
    with pytest.raises(OptplanError, match="does not cover"):
        run(Sub(6, 2), env, steps=10, engine="compiled")
