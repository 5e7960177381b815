"""The compiled plan of the UBE without unrolling (optplan.agents._ube_kernels).

- the compiled plan equals the NumPy plan (``_plan_numpy``, the path without numba) on random
  posteriors, both local rules, several discounts, warm and cold starts: the same policy,
  ``Pbar`` bit for bit, ``q``, values, ``nu``, ``u`` and the noise sd within 1e-12 (the
  mean reward is summed in order, ``np.einsum`` may group it otherwise);
- whole runs with the compiled plan equal runs planning in NumPy on the continuing
  environments, ``update_every`` 1 and more: the same actions, rewards and generator states."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import ENVIRONMENTS, assert_same_trace, make_env
from test_psrl_compiled import random_posterior

from optplan.agents import ContinuingUBE
from optplan.agents import _ube_kernels as UK
from optplan.agents.registry import make_agent
from optplan.experiments import engines, run, ube_compiled

pytestmark = pytest.mark.skipif(not UK.AVAILABLE, reason="numba not installed")


def agent_pair(rng, S, A, discount, local):
    """Two agents in one random posterior state, one planning compiled, one in NumPy."""
    mask = rng.random((S, A)) < 0.8
    mask[np.arange(S), rng.integers(0, A, S)] = True
    dirichlet, ng = random_posterior(rng, S, A)
    policy = np.where(mask, rng.random((S, A)), -1.0).argmax(axis=1)
    if rng.random() < 0.2:  # a warm start taking an inadmissible action: greedy in R instead
        bad = ~mask
        if bad.any():
            s, a = np.argwhere(bad)[0]
            policy[s] = a
    planned = bool(rng.random() < 0.8)
    out = []
    for compiled in (True, False):
        agent = ContinuingUBE(S, A, discount=discount, local=local, action_mask=mask)
        agent.reset(np.random.default_rng(0))
        if not compiled:
            agent._work = None
        agent.transitions, agent.rewards = dirichlet, ng
        agent.policy, agent._planned = policy.copy(), planned
        out.append(agent)
    return out


def assert_close(x, y, name):
    np.testing.assert_array_equal(np.isinf(x), np.isinf(y), err_msg=name)
    finite = np.isfinite(y)
    scale = max(1.0, float(np.abs(y[finite]).max(initial=0.0)))
    np.testing.assert_allclose(x[finite], y[finite], rtol=0, atol=1e-12 * scale, err_msg=name)


@pytest.mark.parametrize("local", ["draft", "lemma1"])
@pytest.mark.parametrize("discount", [0.9, 0.0, 0.99])
def test_compiled_plan_equals_numpy_plan(local, discount):
    rng = np.random.default_rng(int(discount * 100) + (local == "draft"))
    for _ in range(200):
        S, A = int(rng.integers(1, 11)), int(rng.integers(1, 5))
        fast, ref = agent_pair(rng, S, A, discount, local)
        assert fast._work is not None
        fast.plan()
        ref.plan()
        np.testing.assert_array_equal(fast.policy, ref.policy)
        assert fast.policy.dtype == ref.policy.dtype
        for name in ("q", "values", "local", "u", "noise_sd"):
            assert_close(getattr(fast, name), getattr(ref, name), name)
        np.testing.assert_array_equal(fast.problem.mean_transitions, ref.problem.mean_transitions)
        np.testing.assert_array_equal(fast.problem.policy, ref.problem.policy)
        assert_close(fast.problem.local, ref.problem.local, "problem.local")


def runs(env_name, steps, seed, monkeypatch, **params):
    out = []
    for compiled in (True, False):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(UK, "available", lambda n_states: False)
            env = make_env(env_name)
            agent = make_agent("ube-continuing", env, **params)
            trace = run(agent, env, steps=steps, seed=seed, engine="python")
            assert (agent._work is not None) == compiled
            out.append((trace, agent, env))
    return out


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize(
    "seed,update_every,local", [(0, 1, "draft"), (5, 1, "lemma1"), (9, 3, "draft")]
)
def test_runs_with_compiled_plan_equal_numpy_plan(env_name, seed, update_every, local,
                                                  monkeypatch):  # fmt: skip
    got, ref = runs(env_name, 200, seed, monkeypatch, update_every=update_every, local=local)
    assert_same_trace(ref[0], got[0])
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    np.testing.assert_array_equal(ac.policy, ar.policy)
    assert_close(ac.u, ar.u, "u")
    assert ac.plans == ar.plans > 50


def test_conic_and_large_plan_in_numpy():
    agent = ContinuingUBE(4, 2, method="conic")
    agent.reset(np.random.default_rng(0))
    assert agent._work is None
    big = ContinuingUBE(UK.MAX_STATES, 2)
    big.reset(np.random.default_rng(0))
    assert big._work is None


def both(env_name, steps, seed, **params):
    out = {}
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent("ube-continuing", env, **params)
        trace = run(agent, env, steps=steps, seed=seed, engine=engine)
        out[engine] = (trace, agent, env)
    return out["python"], out["compiled"]


def assert_same_agent(ref, got):
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)
    for name in ("policy", "q", "values", "local", "u", "noise_sd", "_buf_s", "_buf_a",
                 "_buf_r", "_buf_s2"):  # fmt: skip
        np.testing.assert_array_equal(getattr(ac, name), getattr(ar, name), err_msg=name)
    np.testing.assert_array_equal(ac.transitions.alpha, ar.transitions.alpha)
    for x, y in zip(ac.rewards.params, ar.rewards.params, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(ac.problem.mean_transitions, ar.problem.mean_transitions)
    assert (ac.plans, ac.steps, ac._pending, ac._planned) == (
        ar.plans, ar.steps, ar._pending, ar._planned
    )  # fmt: skip


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize(
    "seed,update_every,local",
    [(0, 1, "draft"), (3, 1, "lemma1"), (7, 3, "draft"), (9, 5, "lemma1")],
)
def test_compiled_run_equals_python_loop(env_name, seed, update_every, local):
    env = make_env(env_name)
    agent = make_agent("ube-continuing", env, update_every=update_every, local=local)
    assert engines.select("compiled", agent, env, None, False).name == "continuing UBE"
    ref, got = both(env_name, 300, seed, update_every=update_every, local=local)
    assert_same_trace(ref[0], got[0])
    assert_same_agent(ref, got)
    assert ref[1].plans > 50


@pytest.mark.parametrize("mode", ["correct", "public-code"])
def test_compiled_run_equals_python_loop_across_chunks(monkeypatch, mode):
    monkeypatch.setattr(ube_compiled, "CHUNK", 64)
    ref, got = both("riverswim-6-noisy", 400, 4, update_every=2, sum_of_squares=mode, zeta=1.0)
    assert_same_trace(ref[0], got[0])
    assert_same_agent(ref, got)


def test_failed_compiled_plans_are_redone_in_numpy(monkeypatch):
    """Compiled plans that fail (here: one policy iteration allowed, so every plan whose
    policy changes stops) are redone by the NumPy plan, in ``plan()`` and in the compiled
    run alike: both runs equal the run without failures."""
    ref = both("deepsea-chain-6", 300, 2, zeta=1.0)
    monkeypatch.setattr(UK, "MAX_ITER", 1)
    calls = {"n": 0}
    numpy_plan = ContinuingUBE._plan_numpy

    def counted(self):
        calls["n"] += 1
        numpy_plan(self)

    monkeypatch.setattr(ContinuingUBE, "_plan_numpy", counted)
    got = both("deepsea-chain-6", 300, 2, zeta=1.0)
    assert calls["n"] >= 2 * 8  # eleven policy changes in each loop, each redone
    for r, g in zip(ref, got, strict=True):
        assert_same_trace(r[0], g[0])
        assert_same_agent(r, g)


def test_uncovered_runs():
    env = make_env("riverswim-6")
    assert "NumPy" in ube_compiled.compiled_reason(ContinuingUBE(UK.MAX_STATES, 2), env)

    class Sub(ContinuingUBE):
        pass

    assert "subclasses" in ube_compiled.compiled_reason(Sub(6, 2), env)
    assert "episodes" in ube_compiled.compiled_reason(ContinuingUBE(6, 2), env, episodes=3)
    assert "conic" in ube_compiled.compiled_reason(ContinuingUBE(6, 2, method="conic"), env)
    assert "tracked" in ube_compiled.compiled_reason(ContinuingUBE(6, 2), env, track=True)
    assert ube_compiled.compiled_reason(ContinuingUBE(6, 2), env) is None
