"""The continuing UBE of Eq. 3 (optplan.agents.UBE with n_layers=None, registered ``ube``):
its compiled plan (optplan.agents._ube_steps.plan_now) and its compiled steps in the compiled
loop.

- the compiled plan equals the NumPy plan (the path without numba) on random posteriors:
  every local rule (tabular, lemma1, draft) and known transitions, the flat and a proper
  reward prior, one noise sd or one per pair (0 included), discounts 0 to 0.99, warm and cold
  starts, random action masks: the same policy, the posterior-mean model, ``q``, the local
  term, ``u`` and ``sqrt(u)`` within 1e-12 of their scale;
- runs planning compiled equal runs planning in NumPy (both by the generic loop);
- the compiled loop gives the generic loop's run (both play the same compiled steps) on
  several seeds x {RiverSwim-6, cowan3, a random prior MDP} and the other continuing
  environments: the whole Trace, the agent's posterior and plan, the generators and the
  environment left behind; across chunk boundaries; with compiled plans that fail and are
  redone in NumPy;
- runs the compiled steps do not cover are refused with their reason, and ``optplan bench
  agents`` lists the compiled loop for ``ube`` on its continuing cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engines_exact import ENVIRONMENTS, assert_same_trace, both_loops, make_env

from optplan._checks import OptplanError
from optplan.agents import UBE
from optplan.agents import _ube_kernels as UK
from optplan.agents import _ube_steps as US
from optplan.agents._mean_model import MeanModelAgent
from optplan.agents.registry import make_agent
from optplan.experiments import compiled as compiled_loop
from optplan.experiments import engines, run

#: The compiled loop's row in RUN_ENGINES.
ENGINE = "the agent's compiled steps"
#: What a plan leaves on the agent.
PLANNED = ("q", "mean", "var", "P", "local", "u", "_sqrt_u")


def random_agents(rng, rule, discount, prior):
    """Two UBE agents (continuing) in one random posterior state, one planning compiled,
    one in NumPy."""
    S, A = int(rng.integers(1, 11)), int(rng.integers(1, 5))
    mask = rng.random((S, A)) < 0.8
    mask[np.arange(S), rng.integers(0, A, S)] = True
    sigma = float(rng.choice([0.0, 0.3, 1.0, 4.0])) if rng.random() < 0.5 else None
    if sigma is None:  # one per pair, some 0 (exact rewards) under the flat prior
        sigma = rng.choice([0.5, 1.0, 2.0], (S, A))
        if prior is None:
            sigma = np.where(rng.random((S, A)) < 0.2, 0.0, sigma)
    if prior is not None and np.any(np.asarray(sigma) == 0):
        sigma = 1.0  # exact rewards under a proper prior plan in NumPy (see the refusals)
    kw = {
        "discount": discount,
        "sigma": sigma,
        "prior_var": prior,
        "action_mask": mask,
        "transition_prior": float(rng.choice([0.05, 0.5, 1.0 / S, 2.0])),
    }
    if rule == "known":
        kw["known_transitions"] = rng.dirichlet(np.full(S, 0.7), (S, A))
        kw.pop("transition_prior")
    else:
        kw.update(local=rule, reward_bound=float(rng.choice([0.5, 1.0, 3.0])))
    counts = rng.integers(0, 25, (S, A)).astype(float)
    sums = rng.normal(0.0, 2.0, (S, A)) * counts
    nxt = rng.integers(0, 10, (S, A, S)).astype(float) * (rng.random((S, A, S)) < 0.6)
    policy = np.where(mask, rng.random((S, A)), -1.0).argmax(axis=1)
    if rng.random() < 0.2 and (~mask).any():  # a warm start taking an inadmissible action
        s, a = np.argwhere(~mask)[0]
        policy[s] = a
    planned = bool(rng.random() < 0.8)
    out = []
    for compiled in (True, False):
        agent = UBE(S, A, **kw)
        agent.reset(np.random.default_rng(0))
        assert (agent._work is not None) is True
        if not compiled:
            agent._work = None
        post = agent.posterior
        post.counts[...], post.reward_sums[...], post.next_counts[...] = counts, sums, nxt
        agent.policy, agent._planned = policy.copy(), planned
        agent.state.policy[:], agent.state.flags[US.PLANNED] = policy, planned
        out.append(agent)
    return out


def assert_close(x, y, name):
    np.testing.assert_array_equal(np.isinf(x), np.isinf(y), err_msg=name)
    finite = np.isfinite(y)
    scale = max(1.0, float(np.abs(y[finite]).max(initial=0.0)))
    np.testing.assert_allclose(x[finite], y[finite], rtol=0, atol=1e-12 * scale, err_msg=name)


RULES = ("tabular", "lemma1", "draft", "known")


@settings(max_examples=150)
@given(
    seed=st.integers(0, 2**32 - 1),
    rule=st.sampled_from(RULES),
    discount=st.sampled_from([0.0, 0.5, 0.9, 0.95, 0.99]),
    prior=st.sampled_from([None, 0.5, 2.0]),
)
def test_compiled_plan_equals_numpy_plan(seed, rule, discount, prior):
    fast, ref = random_agents(np.random.default_rng(seed), rule, discount, prior)
    fast.plan()
    ref.plan()
    np.testing.assert_array_equal(fast.policy, ref.policy)
    assert fast.policy.dtype == ref.policy.dtype
    for name in PLANNED:
        assert_close(getattr(fast, name), getattr(ref, name), name)
    assert fast.plans == ref.plans
    assert (fast._planned, fast._scale) == (ref._planned, ref._scale)


@pytest.mark.parametrize("rule", RULES)
def test_one_state_and_one_action(rule):
    """The smallest models: one state (the UBE is a scalar equation), one action (no
    choice: no draw)."""
    for S, A in ((1, 1), (1, 3), (4, 1)):
        rng = np.random.default_rng(S * 10 + A)
        kw = {"known_transitions": rng.dirichlet(np.ones(S), (S, A))} if rule == "known" else {}
        if rule != "known":
            kw.update(local=rule, reward_bound=1.0)
        agents = []
        for compiled in (True, False):
            agent = UBE(S, A, discount=0.9, **kw)
            agent.reset(np.random.default_rng(0))
            if not compiled:
                agent._work = None
            agent.posterior.counts[...] = 3.0
            agent.posterior.reward_sums[...] = 1.5
            agent.posterior.next_counts[..., 0] = 3.0
            agent.plan()
            agents.append(agent)
        np.testing.assert_array_equal(agents[0].policy, agents[1].policy)
        for name in PLANNED:
            assert_close(getattr(agents[0], name), getattr(agents[1], name), name)


def numpy_or_compiled_plans(env_name, steps, seed, monkeypatch, **params):
    out = []
    for compiled in (True, False):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(UK, "available", lambda n_states: False)
            env = make_env(env_name)
            agent = make_agent("ube", env, **params)
            trace = run(agent, env, steps=steps, seed=seed, engine="python")
            assert (agent._work is not None) == compiled
            out.append((trace, agent, env))
    return out


@pytest.mark.parametrize("env_name", ["riverswim-6", "cowan3", "prior-mdp"])
@pytest.mark.parametrize(
    "seed,params",
    [(0, {}), (1, {"local": "lemma1", "update_every": 3}), (2, {"local": "draft"}),
     (3, {"transitions": "known", "prior_var": 1.0})],
)  # fmt: skip
def test_runs_with_compiled_plan_equal_numpy_plan(env_name, seed, params, monkeypatch):
    got, ref = numpy_or_compiled_plans(env_name, 200, seed, monkeypatch, **params)
    assert_same_trace(ref[0], got[0])
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    np.testing.assert_array_equal(ac.policy, ar.policy)
    for name in PLANNED:
        assert_close(getattr(ac, name), getattr(ar, name), name)
    assert ac.plans == ar.plans > 50


def both(env_name, steps, seed, **params):
    """``(trace, agent, env)`` of the generic loop and of the compiled engine."""
    return both_loops(lambda: make_env(env_name), "ube", seed, {"steps": steps}, **params)


def assert_same_left(ref, got):
    """Agent, generators and environment left alike, bit for bit."""
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)
    for name in ("policy", *PLANNED):
        x, y = getattr(ac, name), getattr(ar, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    for name in ("counts", "reward_sums", "next_counts"):
        np.testing.assert_array_equal(
            getattr(ac.posterior, name), getattr(ar.posterior, name), err_msg=name
        )
    assert (ac.steps, ac.plans, ac._scale, ac._planned, ac.episode) == (
        ar.steps, ar.plans, ar._scale, ar._planned, ar.episode
    )  # fmt: skip


#: (seed, parameters) of the exactness runs: every local rule, known transitions, a proper
#: prior, per-pair noise, plans every step and every few steps, greedy (zeta 0) and noisier.
RUNS = [
    (0, {}),
    (1, {"local": "lemma1"}),
    (2, {"local": "draft", "update_every": 3}),
    (3, {"transitions": "known"}),
    (4, {"prior_var": 2.0, "transition_prior": 0.5, "zeta": 2.0}),
    (5, {"zeta": 0.0, "update_every": 4}),
    (6, {"sigma": 0.5, "discount": 0.99}),
]


@pytest.mark.parametrize("env_name", ["riverswim-6", "cowan3", "prior-mdp"])
@pytest.mark.parametrize("seed,params", RUNS)
def test_compiled_run_equals_python_loop(env_name, seed, params):
    env = make_env(env_name)
    agent = make_agent("ube", env, **params)
    assert engines.select("compiled", agent, env, None, False).name == ENGINE
    ref, got = both(env_name, 300, seed, **params)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    assert ref[1].plans > 50


@pytest.mark.parametrize("env_name", sorted(set(ENVIRONMENTS) - {"riverswim-6", "cowan3"}))
def test_compiled_run_equals_python_loop_other_environments(env_name):
    ref, got = both(env_name, 300, 7, local="lemma1", update_every=2)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_compiled_run_equals_python_loop_across_chunks(monkeypatch):
    """Chunks of 64 steps (a plan every 5 steps straddles them): the same run."""
    monkeypatch.setattr(compiled_loop, "CHUNK", 64)
    ref, got = both("riverswim-6-noisy", 500, 4, update_every=5)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_failed_compiled_plans_are_redone_in_numpy(monkeypatch):
    """Compiled plans that fail (here: one policy iteration allowed, so every plan whose
    policy changes stops) are redone by the NumPy plan, in ``plan()`` and in the compiled
    run alike: both runs equal the run without failures."""
    ref = both("deepsea-chain-6", 300, 2)
    monkeypatch.setattr(UK, "MAX_ITER", 1)
    calls = {"n": 0}
    numpy_plan = MeanModelAgent.plan

    def counted(self, top=None):
        calls["n"] += 1
        numpy_plan(self, top)

    monkeypatch.setattr(MeanModelAgent, "plan", counted)
    got = both("deepsea-chain-6", 300, 2)
    assert calls["n"] >= 2 * 4  # several policy changes in each loop, each redone
    for r, g in zip(ref, got, strict=True):
        assert_same_trace(r[0], g[0])
        assert_same_left(r, g)


def test_uncovered_runs():
    env = make_env("riverswim-6")
    reason = compiled_loop.compiled_reason
    assert reason(make_agent("ube", env), env) is None
    assert reason(make_agent("ube", env), env, episodes=3) is None
    assert "NumPy" in reason(UBE(UK.MAX_STATES, 2, reward_bound=1.0), env)
    assert "conic" in reason(make_agent("ube", env, method="conic"), env)
    assert "tracks" in reason(make_agent("ube", env), env, track=True)
    exact = make_agent("ube", env, sigma=0.0, prior_var=1.0)
    assert "NumPy" in reason(exact, env)
    with pytest.raises(OptplanError, match="transition_prior='deterministic'"):
        UBE(6, 2, reward_bound=1.0, transition_prior="deterministic")

    class Sub(UBE):
        pass

    assert reason(Sub(6, 2, reward_bound=1.0), env) is None  # it keeps UBE's steps
    deepsea = make_agent_on("deepsea", {"size": 5})
    assert reason(deepsea[0], deepsea[1]) is None  # the episodic steps
    for agent in (exact, make_agent("ube", env, method="conic")):
        agent.reset(np.random.default_rng(0))
        assert agent._work is None


def test_subclass_with_its_own_plan_plans_in_numpy():
    """A subclass that changes the plan's local term plans with it, in NumPy."""

    class Doubled(UBE):
        def local_uncertainty(self, head=()):
            return 2.0 * UBE.local_uncertainty(self, head)

    a, b = Doubled(4, 2, reward_bound=1.0), UBE(4, 2, reward_bound=1.0)
    for agent in (a, b):
        agent.reset(np.random.default_rng(0))
    assert a._work is None and b._work is not None
    np.testing.assert_allclose(a.local, 2.0 * b.local, rtol=1e-15)


def make_agent_on(name, params):
    from optplan.envs.registry import ENVS

    comp = ENVS[name]
    env = comp.build(0, **comp.resolve(params, name))
    return make_agent("ube", env), env


def test_bench_lists_the_engine():
    """``optplan bench agents --agents ube``: the agent's compiled steps on every case (found
    without timing anything)."""
    from optplan.bench import agents as bench

    cases = bench._cases_of("ube", {"steps": 10})
    found = {label: bench._engine(agent, bench._env(env_name, env_params))
             for label, env_name, env_params, agent in cases}  # fmt: skip
    assert set(found) == {"riverswim-6", "cowan3", "deepsea-20"}
    for label in ("riverswim-6", "cowan3"):
        chosen, why = found[label]
        assert chosen.name == ENGINE and why is None
    assert found["deepsea-20"][0].name == ENGINE
