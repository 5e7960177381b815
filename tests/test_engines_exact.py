"""The continuing posterior agents' compiled engine (optplan.experiments.planning_compiled)
equals the generic Python loop exactly on every agent x environment it covers: the whole
Trace (actions, rewards, regret curves, the oracle run, tracked policies), the agent's counts
and posterior, the generators and the environment left behind; and runs it does not cover
take the generic loop (engine="auto") or are refused (engine="compiled")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import optplan as op
from optplan.agents import ContinuingPSRL, ContinuingUBE, MomentMatching
from optplan.agents.registry import make_agent
from optplan.envs import TabularEnv
from optplan.envs.registry import ENVS
from optplan.experiments import _segment_kernels as K
from optplan.experiments import engines, planning_compiled, run
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(not K.AVAILABLE, reason="numba not installed")

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


def both(agent_name, env_name, steps, seed, run_kw=None, **params):
    """``(trace, agent, env)`` of the generic loop and of the compiled one."""
    out = {}
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent(agent_name, env, **params)
        trace = run(agent, env, steps=steps, seed=seed, engine=engine, **(run_kw or {}))
        out[engine] = (trace, agent, env)
    return out["python"], out["compiled"]


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


def test_self_check_passes_and_fails_closed(monkeypatch):
    """numba's draws equal numpy's here; where the check fails the engine steps aside."""
    assert K.self_check() is True
    env = make_env("riverswim-6")
    monkeypatch.setattr(K, "_CHECK", [False])
    agent = ContinuingUBE(6, 2, update_every=2)
    assert "random draws differ" in planning_compiled.compiled_reason(agent, env)
    assert engines.select("auto", MomentMatching(6, 2, update_every=2), env, None, False) is None


def test_thompson_argmax_takes_numpy_rule():
    """The compiled Thompson action is numpy's argmax of ``q + zeta eps sd`` after the same
    draws, ties and -inf (masked) entries included."""
    from optplan.agents.base import thompson_action

    c = K._compiled()
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
            got = c["_thompson"](x, forced, policy, q, zeta, sd, r2)
            assert got == want
        assert r1.bit_generator.state == r2.bit_generator.state


def test_uncovered_runs_take_the_generic_loop():
    env = make_env("riverswim-6")
    agent = MomentMatching(6, 2, update_every=2, method="conic")
    assert "method" in planning_compiled.compiled_reason(agent, env)

    class Sub(MomentMatching):
        pass

    two = {"update_every": 2}
    assert "subclasses" in planning_compiled.compiled_reason(Sub(6, 2, **two), env)
    agent = MomentMatching(6, 2, **two)
    assert "episodes" in planning_compiled.compiled_reason(agent, env, episodes=3)
    truncated = TabularEnv(env.mdp, max_steps=10)
    assert "max_steps" in planning_compiled.compiled_reason(agent, truncated)
    with pytest.raises(OptplanError, match="does not cover"):
        run(agent, truncated, steps=20, engine="compiled")
    for cls in (ContinuingUBE, MomentMatching):
        assert planning_compiled.compiled_reason(cls(6, 2, update_every=2), env) is None
        assert "update_every=1" in planning_compiled.compiled_reason(cls(6, 2), env)


@pytest.mark.parametrize("mode", ["correct", "public-code"])
def test_unchecked_absorb_equals_the_checked_updates(mode):
    """The posterior agents' batch update (ContinuingUBE's; MomentMatching's is the same
    code) skips the public updates' input checks: the same posterior, bit for bit, on random
    batches (repeated pairs, noisy rewards, empty rows)."""
    rng = np.random.default_rng(4)
    for trial in range(30):
        S, A = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        n = int(rng.integers(1, 25))
        agents = [ContinuingUBE(S, A, update_every=n, sum_of_squares=mode) for _ in range(2)]
        for agent in agents:
            agent.reset(np.random.default_rng(trial))
        for _ in range(3):  # three batches: later ones update a non-prior posterior
            k = int(rng.integers(1, n + 1))
            batch = (rng.integers(0, S, k), rng.integers(0, A, k), rng.normal(0, 3, k),
                     rng.integers(0, S, k))  # fmt: skip
            for agent in agents:
                agent._buf_s[:k], agent._buf_a[:k], agent._buf_r[:k], agent._buf_s2[:k] = batch
                agent._pending = k
            agents[0].absorb()
            agents[1].absorb_checked()
            np.testing.assert_array_equal(agents[0].transitions.alpha, agents[1].transitions.alpha)
            for x, y in zip(agents[0].rewards.params, agents[1].rewards.params, strict=True):
                np.testing.assert_array_equal(x, y)
            assert agents[0]._pending == agents[1]._pending == 0


def test_independent_oracle_noise_and_progress_bar():
    """The oracle run on its own seed (noisy rewards: PriorMDP) and a run under a progress bar
    give the generic loop's trace too."""
    ref, got = both("ube-continuing", "prior-mdp", 300, 4, {"oracle_noise": "independent"},
                    update_every=3)  # fmt: skip
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    ref, got = both("moment-matching", "riverswim-6-noisy", 600, 6, {"progress": True},
                    update_every=3)  # fmt: skip
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def _f_inv_reference(y: float) -> float:
    """BQL's Newton inverse of ``log x - digamma(x)`` as a plain 60-step loop on SciPy's
    ``digamma`` and ``zeta(2, x)``."""
    import math

    from scipy import special

    from optplan.agents import bql

    lo, hi = bql.F_INV_DOMAIN
    if not y > 0:
        return hi
    x = (3.0 - y + math.sqrt((y - 3.0) ** 2 + 24.0 * y)) / (12.0 * y)
    for _ in range(60):
        if x >= 100.0:
            i2 = 1.0 / (x * x)
            f = 0.5 / x + i2 * (1 / 12 - i2 * (1 / 120 - i2 * (1 / 252 - i2 / 240)))
            fp = -i2 * (0.5 + (1 / 6 - i2 * (1 / 30 - i2 / 42)) / x)
        else:
            f = math.log(x) - float(special.digamma(x))
            fp = 1.0 / x - float(special.zeta(2.0, x))
        new = x - (f - y) / fp
        if not new > 0:
            new = 0.5 * x
        if abs(new - x) <= 1e-14 * x:
            x = new
            break
        x = new
    return min(max(x, lo), hi)


def test_bql_inverse_agrees_with_a_plain_newton_loop_on_scipy():
    """BQL's compiled ``f^-1`` (its own digamma and trigamma; a cycling Newton iteration left
    early) against the full 60-step loop on SciPy's functions: within 1e-11 relative on a wide
    random range and at the domain's edges (near ``x = 100``, where ``log x - digamma(x)`` is a
    difference of two numbers 900 times larger, the roots' digits are that much fewer)."""
    from optplan.agents import bql

    rng = np.random.default_rng(8)
    ys = np.concatenate([np.exp(rng.uniform(np.log(1e-13), np.log(1e3), 3000)),
                         [0.0, -1.0, 1e-12, 5.0e-3, 1e3]])  # fmt: skip
    got = bql.inverse_log_minus_digamma(ys)
    want = np.array([_f_inv_reference(float(y)) for y in ys])
    np.testing.assert_allclose(got, want, rtol=1e-11)
    # where the plain loop divides by zero (f' underflows), the domain's edge
    assert bql.inverse_log_minus_digamma(1e-300) == bql.F_INV_DOMAIN[1]
