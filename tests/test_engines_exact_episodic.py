"""The episodic agents' compiled engine (optplan.experiments.episodic_compiled) equals the
generic Python loop exactly for every K-learning variant and the episodic PSRL on every
environment they run on (DeepSea: bsuite's and the k-learning variant, deterministic and
windy; RiverSwim-episodic; a finite-horizon model file): the whole Trace, the agent's
posterior and plan, the generators and the environment left behind, runs counted in steps or
in episodes (``stop_when_solved``, ``on_episode_end``); the same errors; and runs it does not
cover take the generic loop (engine="auto") or are refused (engine="compiled")."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import assert_same_trace

from optplan.agents import PSRL, UBE, CountBonus, KLearning
from optplan.agents.registry import make_agent
from optplan.envs import DeepSea, TabularEnv
from optplan.envs.registry import ENVS
from optplan.experiments import _segment_kernels, engines, episodic_compiled, run
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(not _segment_kernels.AVAILABLE, reason="numba not installed")

#: name -> (registry environment, its parameters)
ENVIRONMENTS = {
    "deepsea-6": ("deepsea", {"size": 6}),
    "deepsea-10-k": ("deepsea", {"size": 10, "variant": "k-learning", "reward_noise": 0.1}),
    "deepsea-7-windy": ("deepsea", {"size": 7, "deterministic": False}),
    "deepsea-5-k-windy": (
        "deepsea",
        {"size": 5, "variant": "k-learning", "deterministic": False, "mapping_seed": 3},
    ),
    "riverswim-episodic": ("riverswim-episodic", {"horizon": 8, "reward_noise": 0.3}),
    "cowan3-5": ("model", {"path": "models/cowan3.toml", "horizon": 5, "reward_noise": 0.2}),
}
DETERMINISTIC_ENVS = ("deepsea-6", "deepsea-10-k")

#: The registered K-learning variants (every temperature x bonus x transition prior), PSRL.
K_VARIANTS = [
    {},
    {"temperature": "schedule"},
    {"bonus": "posterior"},
    {"bonus": "posterior", "temperature": "schedule", "unvisited": "paper"},
    {"transition_prior": 0.5, "prior_var": 2.0},
]
DETERMINISTIC_VARIANTS = [
    {"transitions": "deterministic"},
    {"transitions": "deterministic", "bonus": "posterior", "span": 1.01},
    {"transitions": "deterministic", "bonus": "posterior", "temperature": "schedule"},
]


def make_env(name):
    reg, params = ENVIRONMENTS[name]
    comp = ENVS[reg]
    return comp.build(0, **comp.resolve(params, reg))


def both(agent_name, env_name, seed, run_kw, **params):
    """``(trace, agent, env)`` of the generic loop and of the compiled one."""
    out = {}
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent(agent_name, env, **params)
        trace = run(agent, env, seed=seed, engine=engine, **run_kw)
        out[engine] = (trace, agent, env)
    return out["python"], out["compiled"]


def assert_same_left(ref, got):
    """Agent (posterior, plan, clock), generators and environment left alike."""
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ac.episode, ac.clock.layer) == (ar.episode, ar.clock.layer)
    for name in ("counts", "reward_sums", "next_counts"):
        np.testing.assert_array_equal(
            getattr(ac.posterior, name), getattr(ar.posterior, name), err_msg=name
        )
    if isinstance(ar, KLearning):
        assert ac.tau == ar.tau
        for name in ("K", "pi", "values", "c", "_cdf"):
            np.testing.assert_array_equal(getattr(ac, name), getattr(ar, name), err_msg=name)
    else:
        np.testing.assert_array_equal(ac.policy, ar.policy)
        np.testing.assert_array_equal(ac.Q, ar.Q)
    assert (ec._state, ec._t, ec._done) == (er._state, er._t, er._done)
    if isinstance(er, DeepSea):
        assert (ec._row, ec._column, ec._running) == (er._row, er._column, er._running)


def check(agent_name, env_name, seed, run_kw, **params):
    ref, got = both(agent_name, env_name, seed, run_kw, **params)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    return ref[0]


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize("params", K_VARIANTS, ids=lambda p: ",".join(map(str, p.values())))
@pytest.mark.parametrize("seed", [0, 4])
def test_k_learning_equals_python_loop(params, env_name, seed):
    # a step count that ends within an episode: the run stops mid-episode in both loops
    trace = check("k-learning", env_name, seed, {"steps": 1203}, **params)
    assert trace.episodes > 30


@pytest.mark.parametrize("env_name", DETERMINISTIC_ENVS)
@pytest.mark.parametrize(
    "params", DETERMINISTIC_VARIANTS, ids=lambda p: ",".join(map(str, p.values()))
)
@pytest.mark.parametrize("seed", [1, 6])
def test_k_learning_deterministic_prior_equals_python_loop(params, env_name, seed):
    check("k-learning", env_name, seed, {"steps": 1500}, **params)


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize("seed", [0, 3])
def test_psrl_equals_python_loop(env_name, seed):
    check("psrl", env_name, seed, {"steps": 1100})


@pytest.mark.parametrize("agent_name", ["k-learning", "psrl"])
@pytest.mark.parametrize("stop", [False, True])
def test_episodes_stop_when_solved_and_hook(agent_name, stop):
    """Runs counted in episodes, stopped once solved (DeepSea's goal), with a hook that
    records the agent after each episode: the same calls with the same agent states."""
    seen = {}
    out = {}
    for engine in ("python", "compiled"):
        env = make_env("deepsea-6")
        agent = make_agent(agent_name, env, sigma=0.1)
        snaps = seen[engine] = []

        def hook(n, a, snaps=snaps):
            snaps.append((n, a.episode, a.clock.layer, a.posterior.counts.sum()))

        trace = run(agent, env, episodes=400, seed=2, engine=engine, stop_when_solved=stop,
                    on_episode_end=hook)  # fmt: skip
        out[engine] = (trace, agent, env)
    assert_same_trace(out["python"][0], out["compiled"][0])
    assert_same_left(out["python"], out["compiled"])
    assert seen["compiled"] == seen["python"]
    assert out["python"][0].stopped_early == stop


def test_conic_method_equals_python_loop():
    """The plan is the agent's own, whatever its method: K-learning's conic tau* too."""
    pytest.importorskip("cvxpy")
    ref, got = both("k-learning", "deepsea-6", 5, {"episodes": 4}, method="conic")
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    assert got[1].statuses == ref[1].statuses


def test_contradicted_prior_raises_the_same_error():
    """The deterministic prior on windy DeepSea: both loops raise the posterior's error."""
    messages = []
    for engine in ("python", "compiled"):
        env = make_env("deepsea-7-windy")
        agent = make_agent("k-learning", env, transitions="deterministic")
        with pytest.raises(OptplanError, match="deterministic transition prior") as err:
            run(agent, env, steps=5000, seed=0, engine=engine)
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_engine_is_taken_for_the_episodic_agents():
    env = make_env("deepsea-6")
    for name in ("k-learning", "psrl", "ube", "count-bonus"):
        agent = make_agent(name, env)
        chosen = engines.select("auto", agent, env, None, False)
        assert chosen is not None and chosen.name == "episodic agents"
    assert episodic_compiled.AGENT_CLASSES == (KLearning, PSRL, UBE, CountBonus)


def test_uncovered_runs_take_the_generic_loop():
    class MyKLearning(KLearning):
        pass

    class MyEnv(TabularEnv):
        def step(self, action):
            return super().step(action)

    env = make_env("deepsea-6")
    sub = MyKLearning(6, 2, n_layers=6, initial=env.mdp.initial)
    reason = episodic_compiled.compiled_reason(sub, env)
    assert "MyKLearning is not one of KLearning, PSRL" in reason
    assert engines.select("auto", sub, env, None, False) is None
    with pytest.raises(OptplanError, match="does not cover this run"):
        run(sub, env, steps=20, engine="compiled")
    own = MyEnv(env.mdp)
    agent = make_agent("k-learning", own)
    assert "has its own step or reset" in episodic_compiled.compiled_reason(agent, own)
    chain = ENVS["ube-chain"].build(0, **ENVS["ube-chain"].resolve({"length": 4}, "ube-chain"))
    assert "own step or reset" in episodic_compiled.compiled_reason(agent, chain)
    many = episodic_compiled.compiled_reason(agent, env, episodes=10**7)
    assert "exceed" in many
