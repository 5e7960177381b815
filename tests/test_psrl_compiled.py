"""Continuing PSRL's compiled steps and plan (optplan.agents.psrl, optplan.agents._psrl_kernels).

- numba's Generator draws are NumPy's: the compiled draw of a plan gives the bits of
  ``Dirichlet.sample`` then ``NormalGamma.sample`` and leaves the generator in the same state,
  on many seeds and shapes;
- the compiled plan agrees with the NumPy plan (``_plan_numpy``: :meth:`sample_model`,
  :func:`optplan.dp.policy_iteration`) on random posteriors: the same model bit for bit, the
  same policy and policy version, ``q`` within 1e-12 (the sampled reward is summed in order,
  ``np.einsum`` may group it otherwise);
- the compiled batch update equals the posteriors' checked updates;
- the compiled loop equals the generic loop exactly on the continuing environments, for
  ``update_every`` 1 and more, discounted and average reward, both Normal-Gamma updates,
  tracked policies and models of ``MAX_STATES`` states (planned in NumPy) included."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import ENVIRONMENTS, assert_same_left, assert_same_trace, make_env

import optplan as op
from optplan.agents import ContinuingPSRL
from optplan.agents import _posterior_agent as PA
from optplan.agents import _psrl_kernels as K
from optplan.agents import psrl as PS
from optplan.agents.registry import make_agent
from optplan.envs import TabularEnv
from optplan.experiments import compiled, engines, run
from optplan.experiments.run import _loop
from optplan.experiments.trace import Record
from optplan.posteriors import Dirichlet, NormalGamma, transition_statistics


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


def set_posterior(agent, dirichlet, ng):
    st = agent.state
    st.alpha[...] = dirichlet.alpha
    for x, y in zip(st[1:5], ng.params, strict=True):
        x[...] = y


def agent_pair(rng, S, A, discount):
    """Two agents in one random posterior state (one to plan compiled, one in NumPy)."""
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
    for _ in range(2):
        agent = ContinuingPSRL(S, A, discount=discount, action_mask=mask)
        agent.reset(np.random.default_rng(0))
        set_posterior(agent, dirichlet, ng)
        agent.state.policy[...] = policy
        agent.state.flags[PA.PLANNED], agent.state.flags[PA.VERSION] = planned, 5
        agent.rng = np.random.default_rng(seed)
        out.append(agent)
    return out


@pytest.mark.parametrize("discount", [0.9, 0.0, 0.99, None])
def test_compiled_plan_agrees_with_numpy_plan(discount):
    rng = np.random.default_rng(17 if discount is None else int(discount * 100))
    for _ in range(200):
        S, A = int(rng.integers(1, 11)), int(rng.integers(1, 5))
        fast, ref = agent_pair(rng, S, A, discount)
        assert not PS.psrl_plan_now(fast.state, fast.rng)  # planned, no Python needed
        ref._plan_numpy()
        for x, y in zip(fast.model, ref.model, strict=True):
            np.testing.assert_array_equal(x, y)
        assert fast.rng.bit_generator.state == ref.rng.bit_generator.state
        np.testing.assert_array_equal(fast.policy, ref.policy)
        assert fast.policy_version == ref.policy_version
        np.testing.assert_array_equal(np.isinf(fast.q), np.isinf(ref.q))
        finite = np.isfinite(ref.q)
        scale = max(1.0, float(np.abs(ref.q[finite]).max()))
        np.testing.assert_allclose(fast.q[finite], ref.q[finite], rtol=0, atol=1e-12 * scale)


def test_multichain_sample_fails_alike():
    """A sampled model whose policy has two recurrent classes (tiny pseudo-counts: the gammas
    off the observed self-loops underflow to 0) stops both plans with the same error."""
    messages = []
    for compiled_plan in (True, False):
        agent = ContinuingPSRL(2, 1, discount=None, transition_prior=1e-300)
        agent.reset(np.random.default_rng(3))
        agent.state.alpha[...] = np.array([[[5.0, 1e-300]], [[1e-300, 5.0]]])
        with pytest.raises(RuntimeError, match="2 recurrent classes") as info:
            if compiled_plan:
                assert PS.psrl_plan_now(agent.state, agent.rng)
                agent.plan()
            else:
                agent._plan_numpy()
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("mode", ["correct", "public-code"])
def test_compiled_batch_update_equals_the_checked_updates(mode):
    """The compiled batch update against ``transition_statistics`` and the Dirichlet and
    Normal-Gamma posteriors' own (checked) updates, on random batches (repeated pairs, noisy
    rewards, empty rows), three batches in a row."""
    rng = np.random.default_rng(4)
    for trial in range(30):
        S, A = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        n = int(rng.integers(1, 25))
        agent = ContinuingPSRL(S, A, update_every=n, sum_of_squares=mode)
        agent.reset(np.random.default_rng(trial))
        dirichlet, ng = agent.transitions, agent.rewards
        for _ in range(3):
            k = int(rng.integers(1, n + 1))
            batch = (rng.integers(0, S, k), rng.integers(0, A, k), rng.normal(0, 3, k),
                     rng.integers(0, S, k))  # fmt: skip
            st = agent.state
            st.buf_s[:k], st.buf_a[:k], st.buf_r[:k], st.buf_s2[:k] = batch
            st.flags[PA.PENDING] = k
            PA.absorb(st)
            counts, sums, squares = transition_statistics(*batch, S, A)
            dirichlet, ng = dirichlet.update(counts), ng.update(counts, sums, squares)
            np.testing.assert_array_equal(agent.transitions.alpha, dirichlet.alpha)
            for x, y in zip(agent.rewards.params, ng.params, strict=True):
                np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13)
            assert agent._pending == 0


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
                rec = compiled.compiled_loop(
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
    chosen = engines.select("compiled", agent, env, None, False)
    assert chosen.name == "the agent's compiled steps"
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
    monkeypatch.setattr(compiled, "CHUNK", 64)
    ref, got = both("deepsea-chain-6", 500, 2, track=True, update_every=update_every)
    assert len(ref[0].policies) > 1
    assert got[0].policy_index == ref[0].policy_index
    assert len(got[0].policies) == len(ref[0].policies)
    for a, b in zip(got[0].policies, ref[0].policies, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0].actions, np.asarray(ref[0].actions))
    assert_same_left(ref, got)


def test_a_large_model_plans_in_numpy_within_the_compiled_loop():
    """From ``MAX_STATES`` states the plan is the NumPy one (iterative evaluation), called
    from the compiled loop: the same run as the generic loop's."""
    rng = np.random.default_rng(6)
    S = K.MAX_STATES
    P = np.zeros((S, 2, S))
    for s in range(S):
        P[s, :, rng.choice(S, 3, replace=False)] = 1.0 / 3.0
    mdp = op.TabularMDP(P, rng.random((S, 2)), discount=0.9)
    traces, agents = [], []
    for engine in ("python", "compiled"):
        agents.append(ContinuingPSRL(S, 2, update_every=40))
        traces.append(run(agents[-1], TabularEnv(mdp), steps=120, seed=1, engine=engine))
    assert agents[0].state.flags[PA.PYTHON_PLAN] and agents[1].plans == 4
    np.testing.assert_array_equal(traces[0].actions, traces[1].actions)
    np.testing.assert_array_equal(agents[0].policy, agents[1].policy)


def test_a_subclass_that_overrides_a_step_takes_the_generic_loop():
    env = make_env("riverswim-6")

    class Sub(ContinuingPSRL):
        def update(self, state, action, reward, next_state, done):
            super().update(state, action, reward, next_state, done)

    assert "overrides update" in compiled.compiled_reason(Sub(6, 2), env)
    assert compiled.compiled_reason(ContinuingPSRL(6, 2), env) is None
