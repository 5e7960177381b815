"""The continuing posterior agents (continuing PSRL, the UBE without unrolling, moment
matching) in their compiled loop equal the generic Python loop exactly on every environment:
the whole Trace (actions, rewards, regret curves, the oracle run, tracked policies), the
agent's counts and posterior, the generators and the environment left behind; plans in Python
(the conic method, a subclass's own NumPy plan) run within the compiled loop."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import optplan as op
from optplan.agents import ContinuingPSRL, MomentMatching
from optplan.agents.registry import make_agent
from optplan.envs import TabularEnv
from optplan.envs.registry import ENVS
from optplan.experiments import compiled, engines, run

POSTERIOR_AGENTS = ("psrl-continuing", "ube-continuing", "moment-matching")
# name -> (registry environment, its parameters); cowan3 is the model file
ENVIRONMENTS = {
    "riverswim-6": ("riverswim", {"n_states": 6}),
    "riverswim-6-noisy": ("riverswim", {"n_states": 6, "reward_noise": 0.5}),
    "cowan3": (None, {}),
    "deepsea-chain-6": ("deepsea-chain", {"n": 6}),
    "wide-narrow": ("wide-narrow", {}),
    "prior-mdp": ("prior-mdp", {}),
}


def make_env(name):
    reg, params = ENVIRONMENTS[name]
    if reg is None:
        return TabularEnv(op.load_model("models/cowan3.toml"))
    comp = ENVS[reg]
    return comp.build(0, **comp.resolve(params, name))


def both_loops(build_env, agent_name, seed, run_kw, **params):
    """``(trace, agent, env)`` of the generic loop and of the compiled one, each run on its own
    ``build_env()``."""
    out = {}
    for engine in ("python", "compiled"):
        env = build_env()
        agent = make_agent(agent_name, env, **params)
        out[engine] = (run(agent, env, seed=seed, engine=engine, **run_kw), agent, env)
    return out["python"], out["compiled"]


def both(agent_name, env_name, steps, seed, run_kw=None, **params):
    """:func:`both_loops` of ``steps`` steps on the named environment."""
    run_kw = {"steps": steps, **(run_kw or {})}
    return both_loops(lambda: make_env(env_name), agent_name, seed, run_kw, **params)


def assert_same_trace(tr, tc):
    for f in dataclasses.fields(tr):
        if f.name == "wall_time":
            continue
        a, b = getattr(tr, f.name), getattr(tc, f.name)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            np.testing.assert_array_equal(b, a, err_msg=f.name)
        elif isinstance(a, float) and np.isnan(a):
            assert np.isnan(b), f.name
        else:
            assert b == a, f.name


def assert_same_left(ref, got):
    """Agent, generators and environment left alike."""
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)
    np.testing.assert_array_equal(ac.policy, ar.policy)
    assert (ac.steps, ac.plans, ac._pending) == (ar.steps, ar.plans, ar._pending)
    np.testing.assert_array_equal(ac.transitions.alpha, ar.transitions.alpha)
    for x, y in zip(ac.rewards.params, ar.rewards.params, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(ac.q, ar.q)
    if isinstance(ar, ContinuingPSRL):
        assert ac.policy_version == ar.policy_version
    else:
        np.testing.assert_array_equal(ac.noise_sd, ar.noise_sd)


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize("agent_name", POSTERIOR_AGENTS)
@pytest.mark.parametrize("seed,update_every", [(0, 2), (5, 4), (9, 11)])
def test_posterior_agents_equal_python_loop(agent_name, env_name, seed, update_every):
    ref, got = both(agent_name, env_name, 250, seed, update_every=update_every)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_engine_is_taken_and_tracks_policies():
    """DeepSea-chain is discounted: UCRL2 and PSRL (policy agents) have their policies tracked
    by both loops, and engine="auto" picks their compiled steps."""
    env = make_env("deepsea-chain-6")
    for name, params, engine in (
        ("ucrl2", {}, "the agent's compiled steps"),
        ("psrl-continuing", {"update_every": 7}, "the agent's compiled steps"),
    ):
        agent = make_agent(name, env, **params)
        chosen = engines.select("auto", agent, env, None, True)
        assert chosen is not None and chosen.name == engine
    ref, got = both("psrl-continuing", "deepsea-chain-6", 300, 1, update_every=7)
    assert ref[0].occupancy_regret is not None
    np.testing.assert_array_equal(got[0].occupancy_regret, ref[0].occupancy_regret)
    assert_same_left(ref, got)


def test_long_run_with_zeta_zero_equals_python_loop():
    """UBE without Thompson noise."""
    ref, got = both("ube-continuing", "wide-narrow", 200, 2, zeta=0.0, update_every=3)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_thompson_argmax_takes_numpy_rule():
    """The compiled Thompson action is numpy's argmax of ``q + zeta eps sd`` after the same
    draws, ties and -inf (masked) entries included."""
    from typing import NamedTuple

    from optplan.agents._posterior_agent import thompson_act
    from optplan.agents.base import thompson_action

    class Rows(NamedTuple):
        forced: np.ndarray
        policy: np.ndarray
        qm: np.ndarray
        sd: np.ndarray
        params: np.ndarray

    S = 4
    inf = np.inf
    q = np.array(
        [
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, -inf, 1.0, 0.5, -inf],
            [-inf, -inf, 2.0, -inf, -inf],
            [3.0, 2.0, 1.0, 0.0, -1.0],
        ]
    )
    sd = np.where(np.isfinite(q), np.array([0.0, 1.0, 2.0, 0.5, 3.0]), 0.0)
    forced = np.array([-1, -1, 2, -1], dtype=np.int64)
    policy = np.zeros(S, dtype=np.int64)
    for zeta in (0.0, 1e-3, 1.0, 10.0):
        r1, r2 = np.random.default_rng(11), np.random.default_rng(11)
        for k in range(200):
            x = k % S
            want = thompson_action(r1, forced[x], policy[x], q[x], zeta, sd[x])
            got = thompson_act(Rows(forced, policy, q, sd, np.array([0, 0, 0, zeta])), x, r2)
            assert got == want
        assert r1.bit_generator.state == r2.bit_generator.state


def test_python_plans_run_within_the_compiled_loop():
    """The conic method, and a subclass with its own NumPy plan method, plan in Python from
    within the compiled loop: the same runs as the generic loop's. A subclass that keeps
    every step is the compiled loop's too; one that overrides a step is not."""

    class Keeps(MomentMatching):
        pass

    class OwnNoise(MomentMatching):
        def _noise_sd(self, P):
            return 0.5 * super()._noise_sd(P)

    class OwnAction(MomentMatching):
        def select_action(self, state):
            return super().select_action(state)

    env = make_env("riverswim-6")
    assert "overrides select_action" in compiled.compiled_reason(OwnAction(6, 2), env)
    makers = (
        lambda: MomentMatching(6, 2, update_every=20, method="conic"),
        lambda: Keeps(6, 2, update_every=3),
        lambda: OwnNoise(6, 2, update_every=3),
    )
    for make in makers:
        agents, traces = [], []
        for engine in ("python", "compiled"):
            agents.append(make())
            assert compiled.compiled_reason(agents[-1], env) is None
            traces.append(run(agents[-1], make_env("riverswim-6"), steps=200, seed=3,
                              engine=engine))  # fmt: skip
        assert_same_trace(traces[0], traces[1])
        np.testing.assert_array_equal(agents[0].noise_sd, agents[1].noise_sd)
    assert agents[0].state.flags[3]  # OwnNoise plans in Python (PYTHON_PLAN)
