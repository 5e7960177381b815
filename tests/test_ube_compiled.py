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
from optplan.experiments import run

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
        np.testing.assert_array_equal(
            fast.problem.mean_transitions, ref.problem.mean_transitions
        )
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
