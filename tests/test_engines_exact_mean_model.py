"""The continuing count-bonus agent's compiled engine (optplan.experiments.mean_model_compiled)
equals the generic Python loop exactly on every continuing environment of
tests/test_engines_exact.py (RiverSwim plain and noisy, cowan3, the DeepSea chain,
wide-narrow, a prior MDP): the whole Trace, the agent's posterior and plan, the generators and
the environment left behind; across chunk boundaries; and runs it does not cover are refused
(engine="compiled") or take the generic loop (engine="auto")."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import ENVIRONMENTS, assert_same_trace, make_env

from optplan.agents.registry import make_agent
from optplan.experiments import engines, mean_model_compiled, run

LEFT = ("policy", "q", "mean", "var", "P", "bonus")


def both(env_name, steps, seed, **params):
    out = {}
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent("count-bonus", env, **params)
        trace = run(agent, env, steps=steps, seed=seed, engine=engine)
        out[engine] = (trace, agent, env)
    return out["python"], out["compiled"]


def assert_same_left(ref, got):
    (_, ar, er), (_, ac, ec) = ref, got
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    for name in LEFT:
        x, y = getattr(ac, name), getattr(ar, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    for name in ("counts", "reward_sums", "next_counts"):
        np.testing.assert_array_equal(
            getattr(ac.posterior, name), getattr(ar.posterior, name), err_msg=name
        )
    assert (ac.steps, ac.plans, ac._scale) == (ar.steps, ar.plans, ar._scale)


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize(
    "seed,params",
    [
        (0, {}),
        (3, {"update_every": 3, "beta": 1.0}),
        (5, {"prior_var": 2.0, "transition_prior": 0.5}),
        (8, {"transitions": "known", "beta": 0.5}),
    ],
)
def test_compiled_run_equals_python_loop(env_name, seed, params):
    env = make_env(env_name)
    agent = make_agent("count-bonus", env, **params)
    assert engines.select("compiled", agent, env, None, False).name == "continuing count-bonus"
    ref, got = both(env_name, 300, seed, **params)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    assert ref[1].plans > 50


def test_chunks(monkeypatch):
    """Chunks of 64 steps (a plan every 5 steps straddles them): the same run."""
    monkeypatch.setattr(mean_model_compiled, "CHUNK", 64)
    ref, got = both("riverswim-6-noisy", 500, 2, update_every=5)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_runs_it_does_not_cover():
    env = make_env("riverswim-6")
    agent = make_agent("count-bonus", env)
    why = mean_model_compiled.compiled_reason(agent, env, None, True)
    assert why is not None and "tracks" in why
    assert "episodes" in mean_model_compiled.compiled_reason(agent, env, 5, False)
    exact = make_agent("count-bonus", env, sigma=0.0, prior_var=1.0)
    assert "NumPy" in mean_model_compiled.compiled_reason(exact, env, None, False)
    episodic_env = make_env_deepsea()
    episodic = make_agent("count-bonus", episodic_env)
    assert "episodic" in mean_model_compiled.compiled_reason(episodic, episodic_env, None, False)
    ube = make_agent("ube", env)
    assert "is not one of CountBonus" in mean_model_compiled.compiled_reason(ube, env, None, False)


def make_env_deepsea():
    from optplan.envs.registry import ENVS

    comp = ENVS["deepsea"]
    return comp.build(0, **comp.resolve({"size": 5}, "deepsea"))
