"""The posterior-mean Thompson agents, the UBE without unrolling and moment matching: their
compiled plan (optplan.agents._ube_kernels) and their compiled steps
(optplan.agents._posterior_agent).

- the compiled plan agrees with the NumPy plan (``_plan_numpy``) on random posteriors, every
  local rule and noise sd, several discounts, warm and cold starts: the same policy, ``Pbar``
  bit for bit, ``q``, values, the local term, ``u`` / ``sigma~^2`` and the noise sd within
  1e-12 (the mean reward is summed in order, ``np.einsum`` may group it otherwise);
- whole runs with the compiled plan equal runs planning in NumPy on the continuing
  environments, ``update_every`` 1 and more: the same actions, rewards and generator states;
- the compiled loop equals the generic loop exactly, plans that fail in the compiled code
  (redone by the NumPy plan) included."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import ENVIRONMENTS, assert_same_trace, make_env
from test_psrl_compiled import random_posterior

from optplan.agents import ContinuingUBE, MomentMatching
from optplan.agents import _posterior_agent as PA
from optplan.agents import _ube_kernels as UK
from optplan.agents.registry import make_agent
from optplan.experiments import compiled, engines, run

#: (registry name, class, its variants' parameters)
AGENTS = {
    "ube-continuing": (ContinuingUBE, [{"local": "draft"}, {"local": "lemma1"}]),
    "moment-matching": (MomentMatching, [{"std": "public-code"}, {"std": "paper"}]),
}
#: Per agent, the attributes its plan sets besides policy, q and values.
NOISE = {ContinuingUBE: ("local", "u", "noise_sd"), MomentMatching: ("variance", "noise_sd")}


def agent_pair(rng, cls, S, A, discount, params):
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
    for _ in range(2):
        agent = cls(S, A, discount=discount, action_mask=mask, **params)
        agent.reset(np.random.default_rng(0))
        st = agent.state
        st.alpha[...] = dirichlet.alpha
        for x, y in zip(st[1:5], ng.params, strict=True):
            x[...] = y
        st.policy[...] = policy
        st.flags[PA.PLANNED] = planned
        out.append(agent)
    return out


def plan_both(fast, ref):
    """The compiled plan on ``fast``, the NumPy plan on ``ref``."""
    assert not fast.state.flags[PA.PYTHON_PLAN]
    assert not PA.thompson_plan_now(fast.state)
    ref.state.flags[PA.PLANS] += 1
    ref._plan_numpy()


def assert_close(x, y, name):
    np.testing.assert_array_equal(np.isinf(x), np.isinf(y), err_msg=name)
    finite = np.isfinite(y)
    scale = max(1.0, float(np.abs(y[finite]).max(initial=0.0)))
    np.testing.assert_allclose(x[finite], y[finite], rtol=0, atol=1e-12 * scale, err_msg=name)


CASES = [(n, i, g) for n in AGENTS for i in range(2) for g in (0.9, 0.5, 0.99)]


@pytest.mark.parametrize("name,variant,discount", CASES)
def test_compiled_plan_equals_numpy_plan(name, variant, discount):
    cls, variants = AGENTS[name]
    params = variants[variant]
    rng = np.random.default_rng(int(discount * 100) + 7 * variant + len(name))
    for _ in range(200):
        S, A = int(rng.integers(1, 11)), int(rng.integers(1, 5))
        fast, ref = agent_pair(rng, cls, S, A, discount, params)
        plan_both(fast, ref)
        np.testing.assert_array_equal(fast.policy, ref.policy)
        for attr in ("q", "values", *NOISE[cls]):
            assert_close(getattr(fast, attr), getattr(ref, attr), attr)
        fp, rp = fast.problem, ref.problem
        if cls is MomentMatching:
            np.testing.assert_array_equal(fp.alpha, rp.alpha)
            fp, rp = fp.bellman, rp.bellman
        np.testing.assert_array_equal(fp.mean_transitions, rp.mean_transitions)
        np.testing.assert_array_equal(fp.policy, rp.policy)
        assert_close(fp.local, rp.local, "problem.local")


def test_ube_discount_zero_plan():
    rng = np.random.default_rng(5)
    for _ in range(50):
        fast, ref = agent_pair(rng, ContinuingUBE, 4, 3, 0.0, {})
        plan_both(fast, ref)
        np.testing.assert_array_equal(fast.policy, ref.policy)
        for attr in ("q", "values", "local", "u", "noise_sd"):
            assert_close(getattr(fast, attr), getattr(ref, attr), attr)


def runs(agent_name, env_name, steps, seed, monkeypatch, **params):
    out = []
    for compiled_plan in (True, False):
        with monkeypatch.context() as m:
            if not compiled_plan:
                m.setattr(UK, "MAX_STATES", 0)  # every plan in NumPy
            env = make_env(env_name)
            agent = make_agent(agent_name, env, **params)
            trace = run(agent, env, steps=steps, seed=seed, engine="python")
            assert bool(agent.state.flags[PA.PYTHON_PLAN]) != compiled_plan
            out.append((trace, agent, env))
    return out


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize(
    "agent_name,seed,update_every,variant",
    [("ube-continuing", 0, 1, 0), ("ube-continuing", 5, 3, 1), ("moment-matching", 2, 1, 0),
     ("moment-matching", 6, 3, 1)],
)  # fmt: skip
def test_runs_with_compiled_plan_equal_numpy_plan(
    agent_name, env_name, seed, update_every, variant, monkeypatch
):
    params = AGENTS[agent_name][1][variant]
    got, ref = runs(
        agent_name, env_name, 200, seed, monkeypatch, update_every=update_every, **params
    )
    assert_same_trace(ref[0], got[0])
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    np.testing.assert_array_equal(ac.policy, ar.policy)
    assert_close(ac.noise_sd, ar.noise_sd, "noise_sd")
    assert ac.plans == ar.plans > 50


def both(agent_name, env_name, steps, seed, **params):
    out = {}
    for engine in ("python", "compiled"):
        env = make_env(env_name)
        agent = make_agent(agent_name, env, **params)
        trace = run(agent, env, steps=steps, seed=seed, engine=engine)
        out[engine] = (trace, agent, env)
    return out["python"], out["compiled"]


def assert_same_agent(ref, got):
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)
    for name in ("policy", "q", "values", *NOISE[type(ar)]):
        np.testing.assert_array_equal(getattr(ac, name), getattr(ar, name), err_msg=name)
    for name in ("buf_s", "buf_a", "buf_r", "buf_s2"):
        np.testing.assert_array_equal(getattr(ac.state, name), getattr(ar.state, name))
    np.testing.assert_array_equal(ac.transitions.alpha, ar.transitions.alpha)
    for x, y in zip(ac.rewards.params, ar.rewards.params, strict=True):
        np.testing.assert_array_equal(x, y)
    pc, pr = ac.problem, ar.problem
    if isinstance(ar, MomentMatching):
        np.testing.assert_array_equal(pc.terms.w, pr.terms.w)
        pc, pr = pc.bellman, pr.bellman
    np.testing.assert_array_equal(pc.mean_transitions, pr.mean_transitions)
    np.testing.assert_array_equal(pc.local, pr.local)
    assert (ac.plans, ac.steps, ac._pending, ac._planned) == (
        ar.plans, ar.steps, ar._pending, ar._planned
    )  # fmt: skip


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize(
    "agent_name,seed,update_every,variant",
    [("ube-continuing", 0, 1, 0), ("ube-continuing", 3, 1, 1), ("ube-continuing", 9, 5, 1),
     ("moment-matching", 1, 1, 0), ("moment-matching", 4, 1, 1), ("moment-matching", 7, 3, 0)],
)  # fmt: skip
def test_compiled_run_equals_python_loop(agent_name, env_name, seed, update_every, variant):
    params = AGENTS[agent_name][1][variant]
    env = make_env(env_name)
    agent = make_agent(agent_name, env, update_every=update_every, **params)
    assert engines.select("compiled", agent, env, None, False).name == "the agent's compiled steps"
    ref, got = both(agent_name, env_name, 300, seed, update_every=update_every, **params)
    assert_same_trace(ref[0], got[0])
    assert_same_agent(ref, got)
    assert ref[1].plans > 50


@pytest.mark.parametrize("agent_name", list(AGENTS))
@pytest.mark.parametrize("mode", ["correct", "public-code"])
def test_compiled_run_equals_python_loop_across_chunks(monkeypatch, agent_name, mode):
    monkeypatch.setattr(compiled, "CHUNK", 64)
    ref, got = both(
        agent_name, "riverswim-6-noisy", 400, 4, update_every=2, sum_of_squares=mode, zeta=1.0
    )
    assert_same_trace(ref[0], got[0])
    assert_same_agent(ref, got)


@pytest.mark.parametrize("agent_name", list(AGENTS))
def test_failed_compiled_plans_are_redone_in_numpy(monkeypatch, agent_name):
    """Compiled plans that fail (here: one policy iteration allowed, so every plan whose
    policy changes stops) are redone by the NumPy plan, in ``plan()`` and in the compiled
    run alike: both runs equal the run without failures."""
    cls = AGENTS[agent_name][0]
    ref = both(agent_name, "deepsea-chain-6", 300, 2, zeta=1.0)
    monkeypatch.setattr(UK, "MAX_ITER", 1)
    calls = {"n": 0}
    numpy_plan = cls._plan_numpy

    def counted(self):
        calls["n"] += 1
        numpy_plan(self)

    monkeypatch.setattr(cls, "_plan_numpy", counted)
    got = both(agent_name, "deepsea-chain-6", 300, 2, zeta=1.0)
    assert calls["n"] >= 2 * 4  # several policy changes in each loop, each redone
    for r, g in zip(ref, got, strict=True):
        assert_same_trace(r[0], g[0])
        assert_same_agent(r, g)


def test_conic_and_large_plan_in_numpy():
    for agent in (ContinuingUBE(4, 2, method="conic"), MomentMatching(UK.MAX_STATES, 2)):
        assert agent.state.flags[PA.PYTHON_PLAN]
    assert not ContinuingUBE(4, 2).state.flags[PA.PYTHON_PLAN]
