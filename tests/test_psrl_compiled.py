"""Continuing PSRL's compiled plan (optplan.agents._psrl_kernels) and whole-run engine
(optplan.experiments.psrl_compiled).

- numba's Generator draws are NumPy's: the compiled draw of a plan gives the bits of
  ``Dirichlet.sample`` then ``NormalGamma.sample`` and leaves the generator in the same state,
  on many seeds and shapes;
- the compiled plan equals the NumPy plan (``_plan_numpy``, the path without numba) on random
  posteriors: the same model bit for bit, the same policy and policy version, ``q`` within
  1e-12 (the sampled reward is summed in order, ``np.einsum`` may group it otherwise);
- the compiled run equals the generic loop exactly (which itself plans through the compiled
  plan) on the continuing environments, for ``update_every`` 1 and more, discounted and
  average reward, both Normal-Gamma updates, tracked policies included."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import ENVIRONMENTS, assert_same_left, assert_same_trace, make_env

from optplan.agents import ContinuingPSRL
from optplan.agents import _psrl_kernels as K
from optplan.agents.registry import make_agent
from optplan.experiments import engines, psrl_compiled, run
from optplan.experiments.run import _loop
from optplan.experiments.trace import Record
from optplan.posteriors import Dirichlet, NormalGamma

pytestmark = pytest.mark.skipif(not K.AVAILABLE, reason="numba not installed")


def random_posterior(rng, S, A):
    """Dirichlet and Normal-Gamma posteriors as an agent's batch updates leave them."""
    alpha = rng.choice([0.05, 0.5, 1.0, 2.0], (S, A, S)) + rng.integers(0, 30, (S, A, S))
    n = rng.integers(0, 20, (S, A, S)).astype(float)
    mu0 = np.where(n > 0, rng.normal(0.0, 2.0, (S, A, S)), 0.0)
    lam, nalpha = 4.0 + n, 3.0 + 0.5 * n
    nbeta = 3.0 + rng.random((S, A, S)) * 10.0 * n
    return Dirichlet(alpha), NormalGamma(mu0, lam, nalpha, nbeta)


@pytest.mark.parametrize("seed", range(40))
def test_compiled_draws_are_numpys(seed):
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(1, 14)), int(rng.integers(1, 5))
    dirichlet, ng = random_posterior(rng, S, A)
    ref, got = np.random.default_rng(seed + 99), np.random.default_rng(seed + 99)
    P_ref = dirichlet.sample(ref)
    mu_ref, _ = ng.sample(ref)
    P, mu = np.empty((S, A, S)), np.empty((S, A, S))
    arrays = (dirichlet.alpha, *ng.params)
    K._compiled()["_sample"](got, *(np.array(x) for x in arrays), P, mu)
    np.testing.assert_array_equal(P, P_ref)
    np.testing.assert_array_equal(mu, mu_ref)
    assert got.bit_generator.state == ref.bit_generator.state


def test_self_check_passes():
    assert K.self_check()


def agent_pair(rng, S, A, discount):
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
    seed = int(rng.integers(2**32))
    out = []
    for compiled in (True, False):
        agent = ContinuingPSRL(S, A, discount=discount, action_mask=mask)
        agent.reset(np.random.default_rng(0))
        if not compiled:
            agent._work = None
        agent.transitions, agent.rewards = dirichlet, ng
        agent.policy, agent._planned, agent.policy_version = policy.copy(), planned, 5
        agent.rng = np.random.default_rng(seed)
        out.append(agent)
    return out


@pytest.mark.parametrize("discount", [0.9, 0.0, 0.99, None])
def test_compiled_plan_equals_numpy_plan(discount):
    rng = np.random.default_rng(17 if discount is None else int(discount * 100))
    for _ in range(200):
        S, A = int(rng.integers(1, 11)), int(rng.integers(1, 5))
        fast, ref = agent_pair(rng, S, A, discount)
        assert fast._work is not None
        fast.plan()
        ref.plan()
        for x, y in zip(fast.model, ref.model, strict=True):
            np.testing.assert_array_equal(x, y)
        assert fast.rng.bit_generator.state == ref.rng.bit_generator.state
        np.testing.assert_array_equal(fast.policy, ref.policy)
        assert fast.policy.dtype == ref.policy.dtype
        assert fast.policy_version == ref.policy_version
        np.testing.assert_array_equal(np.isinf(fast.q), np.isinf(ref.q))
        finite = np.isfinite(ref.q)
        scale = max(1.0, float(np.abs(ref.q[finite]).max()))
        np.testing.assert_allclose(fast.q[finite], ref.q[finite], rtol=0, atol=1e-12 * scale)


def test_multichain_sample_fails_alike():
    """A sampled model whose policy has two recurrent classes (tiny pseudo-counts: the gammas
    off the observed self-loops underflow to 0) stops both plans with the same error."""
    messages = []
    for compiled in (True, False):
        agent = ContinuingPSRL(2, 1, discount=None, transition_prior=1e-300)
        agent.reset(np.random.default_rng(3))
        if not compiled:
            agent._work = None
        agent.transitions = Dirichlet(np.array([[[5.0, 1e-300]], [[1e-300, 5.0]]]))
        with pytest.raises(RuntimeError, match="2 recurrent classes") as info:
            agent.plan()
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def both(env_name, steps, seed, track=False, **params):
    out = {}
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent("psrl-continuing", env, **params)
        if track:
            if engine == "python":
                rec = _loop(agent, env, 11, np.random.default_rng(seed), steps, None, False,
                            None, track=True)  # fmt: skip
            else:
                rec = psrl_compiled.compiled_loop(
                    agent, env, 11, np.random.default_rng(seed), steps, Record(), track=True
                )
            out[engine] = (rec, agent, env)
        else:
            trace = run(agent, env, steps=steps, seed=seed, engine=engine)
            out[engine] = (trace, agent, env)
    return out["python"], out["compiled"]


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize(
    "seed,update_every,planning",
    [(0, 1, "discounted"), (3, 1, "average"), (7, 3, "average"), (9, 5, "discounted")],  # fmt: skip
)
def test_compiled_run_equals_python_loop(env_name, seed, update_every, planning):
    env = make_env(env_name)
    agent = make_agent("psrl-continuing", env, update_every=update_every, planning=planning)
    assert engines.select("compiled", agent, env, None, False).name == "continuing PSRL"
    ref, got = both(env_name, 300, seed, update_every=update_every, planning=planning)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    for x, y in zip(got[1].model, ref[1].model, strict=True):
        np.testing.assert_array_equal(x, y)
    assert ref[1].plans > 50


@pytest.mark.parametrize("mode", ["correct", "public-code"])
def test_compiled_run_equals_python_loop_noisy_rewards(mode):
    ref, got = both("riverswim-6-noisy", 400, 4, update_every=2, sum_of_squares=mode)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


@pytest.mark.parametrize("update_every", [1, 4])
def test_tracked_policies_across_chunks(monkeypatch, update_every):
    """Chunks of 64 steps: the policies and their indices recorded as the generic loop does."""
    monkeypatch.setattr(psrl_compiled, "CHUNK", 64)
    ref, got = both("deepsea-chain-6", 500, 2, track=True, update_every=update_every)
    assert len(ref[0].policies) > 1
    assert got[0].policy_index == ref[0].policy_index
    assert len(got[0].policies) == len(ref[0].policies)
    for a, b in zip(got[0].policies, ref[0].policies, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0].actions, np.asarray(ref[0].actions))
    assert_same_left(ref, got)


def test_uncovered_runs():
    env = make_env("riverswim-6")
    big = ContinuingPSRL(K.MAX_STATES, 2)
    assert "NumPy" in psrl_compiled.compiled_reason(big, env)

    class Sub(ContinuingPSRL):
        pass

    assert "subclasses" in psrl_compiled.compiled_reason(Sub(6, 2), env)
    assert "episodes" in psrl_compiled.compiled_reason(ContinuingPSRL(6, 2), env, episodes=3)
    assert psrl_compiled.compiled_reason(ContinuingPSRL(6, 2), env) is None
