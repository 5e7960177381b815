"""Bayesian Q-learning's compiled engine (optplan.experiments.bql_compiled) equals the generic
Python loop exactly, and so does the agent's own compiled step (optplan.agents._bql_kernels)
equal its NumPy path: on RiverSwim-6, cowan3, a random prior MDP, the DeepSea chain and
wide-narrow, several seeds and priors, both action rules, both moment matches (quadrature and
Monte-Carlo): the whole Trace, the posterior, the generators and the environment left behind.
The compiled special functions equal SciPy's, the compiled pairwise mean NumPy's; runs the
engine does not cover (episodes, subclasses, a Monte-Carlo update whose draws would differ)
are refused (engine="compiled") or take the generic loop (engine="auto")."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special
from test_engines_exact import assert_same_trace, make_env

from optplan.agents import BayesianQLearning, bql
from optplan.agents import _bql_kernels as BK
from optplan.agents.registry import make_agent
from optplan.envs import TabularEnv
from optplan.experiments import bql_compiled, engines, run
from optplan.generators import random_dirichlet
from optplan.mdp import TabularMDP
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(not BK.self_check(), reason="no numba (or NumPy's loops differ)")

# the brief's three, and the Bayesian-methods study's other two (per-transition reward laws)
ENVS = ("riverswim-6", "cowan3", "prior-mdp", "deepsea-chain-6", "wide-narrow")
POSTERIOR = ("mu0", "lam", "alpha", "beta")


def numpy_path(monkeypatch):
    """Make the agent take its NumPy step (the path without numba)."""
    monkeypatch.setattr(BK, "table", lambda: None)
    monkeypatch.setattr(BK, "mc_table", lambda: None)


def one_run(env_name, steps, seed, engine, **params):
    env = make_env(env_name)
    agent = make_agent("bql", env, **params)
    trace = run(agent, env, steps=steps, seed=seed, engine=engine)
    return trace, agent, env


def assert_same_left(ref, got):
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)
    assert ac.steps == ar.steps
    for name in POSTERIOR:
        np.testing.assert_array_equal(getattr(ac, name), getattr(ar, name), err_msg=name)


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize(
    "seed,params",
    [
        (0, {}),
        (3, {"action": "quantile", "quantile": 0.75}),
        (7, {"discount": 0.99, "prior_mu0": 1.5, "prior_alpha": 1.2}),
        (11, {"discount": 0.5, "prior_lam": 0.3, "prior_beta": 9.0}),
    ],
)
def test_engine_equals_numpy_generic_loop(env_name, seed, params, monkeypatch):
    env = make_env(env_name)
    agent = make_agent("bql", env, **params)
    assert engines.select("compiled", agent, env, None, False).name == "Bayesian Q-learning"
    got = one_run(env_name, 400, seed, "compiled", **params)
    compiled_generic = one_run(env_name, 400, seed, "python", **params)
    numpy_path(monkeypatch)
    ref = one_run(env_name, 400, seed, "python", **params)
    for other in (got, compiled_generic):
        assert_same_trace(ref[0], other[0])
        assert_same_left(ref, other)
    # the run visited several states and moved the posterior of several pairs
    assert len(np.unique(ref[0].states)) > 1
    assert (ref[1].lam != ref[1].prior[1]).sum() > 1


@pytest.mark.slow
@pytest.mark.parametrize("env_name", ["riverswim-6", "cowan3"])
def test_bench_length_run_equals_numpy_generic_loop(env_name, monkeypatch):
    """The benchmark's 20,000 steps (several chunks): the same run."""
    got = one_run(env_name, 20_000, 1, "compiled")
    numpy_path(monkeypatch)
    ref = one_run(env_name, 20_000, 1, "python")
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


@pytest.mark.slow
@pytest.mark.parametrize("env_name", ["riverswim-6", "cowan3"])
def test_bench_length_monte_carlo_run_equals_numpy_generic_loop(env_name, monkeypatch):
    """The benchmark's 20,000 steps with the study's Monte-Carlo moment match (1,000 draws per
    update): the same run."""
    params = {"moment_match": "monte-carlo", "n_samples": 1000}
    got = one_run(env_name, 20_000, 1, "compiled", **params)
    numpy_path(monkeypatch)
    ref = one_run(env_name, 20_000, 1, "python", **params)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


@pytest.mark.parametrize("params", [{}, {"moment_match": "monte-carlo", "n_samples": 33}])
def test_chunks(params, monkeypatch):
    """Chunks of 64 steps: the same run."""
    monkeypatch.setattr(bql_compiled, "CHUNK", 64)
    got = one_run("riverswim-6", 500, 2, "compiled", **params)
    numpy_path(monkeypatch)
    ref = one_run("riverswim-6", 500, 2, "python", **params)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def random_agent(rng, S=5, A=3, **kw):
    mask = rng.random((S, A)) < 0.8
    mask[:, 0] = True
    mask[1] = [True] + [False] * (A - 1)  # a forced state
    agent = BayesianQLearning(S, A, action_mask=mask, **kw)
    agent.reset(np.random.default_rng(int(rng.integers(1 << 30))))
    agent.mu0 = rng.normal(0.0, 3.0, (S, A))
    agent.lam = np.exp(rng.uniform(-6.0, 8.0, (S, A)))
    agent.alpha = 1.0 + np.exp(rng.uniform(-14.0, 12.0, (S, A)))
    agent.beta = np.exp(rng.uniform(-6.0, 8.0, (S, A)))
    return agent


@pytest.mark.parametrize("seed", range(4))
def test_compiled_step_equals_numpy_step(seed, monkeypatch):
    """Random posteriors over many orders of magnitude, random transitions (ends of episodes,
    a zero discount, both action rules): each select_action and update of the compiled step
    gives the NumPy step's action, posterior and generator state."""
    rng = np.random.default_rng(seed)
    table = BK.table()
    for trial in range(40):
        kw = {"discount": float(rng.choice([0.0, 0.5, 0.9, 0.999]))}
        if trial % 3 == 0:
            kw.update(action="quantile", quantile=float(rng.uniform(0.05, 0.95)))
        agents = [random_agent(np.random.default_rng([seed, trial]), **kw) for _ in range(2)]
        for _ in range(5):
            s, s2 = (int(v) for v in rng.integers(0, 5, 2))
            reward = float(rng.normal(0.0, 2.0))
            acts = []
            for agent, compiled in zip(agents, (False, True), strict=True):
                monkeypatch.setattr(BK, "table", (lambda t=table: t) if compiled else lambda: None)
                a = agent.select_action(s)
                acts.append(a)
                agent.update(s, a, reward, s2, s2 == 4)
            assert acts[0] == acts[1]
            ref, got = agents
            assert got.rng.bit_generator.state == ref.rng.bit_generator.state
            for name in POSTERIOR:
                np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), name)


def test_special_functions_equal_scipy():
    rng = np.random.default_rng(5)
    x = np.concatenate([
        np.exp(rng.uniform(-20.0, 20.0, 20_000)), rng.uniform(0.5, 120.0, 20_000),
        [1.0, 2.0, 9.0, 10.0, 99.999, 100.0, 1e8, 2e8, 1e-300],
    ])  # fmt: skip
    np.testing.assert_array_equal(BK.trigamma(x), special.zeta(2.0, x))
    # y = log E[tau] - E[log tau] of the agent: from ~1e-16 (a nearly degenerate mixture)
    y = np.concatenate([np.exp(rng.uniform(-36.0, 5.0, 3000)), [0.0, -1.0, np.nan]])
    got = np.array([BK.f_inv(v) for v in y.tolist()])
    want = np.array([bql._f_inv(v) for v in y.tolist()])
    np.testing.assert_array_equal(got, want)
    inside = got[:3000] < 1e12  # f^-1 is clipped to [1e-12, 1e12]
    assert inside.sum() > 2000
    np.testing.assert_allclose(bql.log_minus_digamma(got[:3000][inside]), y[:3000][inside],
                               rtol=1e-9)  # fmt: skip


def test_f_inv_on_the_arguments_a_run_meets(monkeypatch):
    """The compiled ``f^-1`` on every argument the NumPy path of a run passes to
    ``bql._f_inv``: the same floats."""
    seen = []
    original = bql._f_inv

    def record(y):
        seen.append(y)
        return original(y)

    numpy_path(monkeypatch)
    monkeypatch.setattr(bql, "_f_inv", record)
    one_run("riverswim-6", 400, 3, "python")
    assert len(seen) == 400
    assert [BK.f_inv(y) for y in seen] == [original(y) for y in seen]


def test_runs_it_does_not_cover(monkeypatch):
    env = make_env("riverswim-6")
    mc = make_agent("bql", env, moment_match="monte-carlo", n_samples=20)
    assert bql_compiled.compiled_reason(mc, env, None, False) is None
    agent = make_agent("bql", env)
    assert "episodes" in bql_compiled.compiled_reason(agent, env, 5, False)
    assert "tracks" in bql_compiled.compiled_reason(agent, env, None, True)

    class Sub(BayesianQLearning):
        pass

    assert "subclasses" in bql_compiled.compiled_reason(Sub(6, 2), env, None, False)
    monkeypatch.setattr(BK, "self_check", lambda: False)
    assert "differ" in bql_compiled.compiled_reason(agent, env, None, False)


def test_monte_carlo_declined_where_its_draws_differ(monkeypatch):
    """Where numba's draws or the pairwise mean are not NumPy's, the Monte-Carlo run is refused
    with the reason (engine="compiled") or takes the generic loop (engine="auto"), which then
    runs the NumPy update; the quadrature run stays compiled."""
    monkeypatch.setattr(BK, "self_check_mc", lambda: False)
    monkeypatch.setattr(BK, "mc_table", lambda: None)
    env = make_env("riverswim-6")
    mc = make_agent("bql", env, moment_match="monte-carlo", n_samples=20)
    why = bql_compiled.compiled_reason(mc, env, None, False)
    assert "monte-carlo" in why and "differ" in why
    with pytest.raises(OptplanError, match="monte-carlo"):
        run(mc, env, steps=10, seed=0, engine="compiled")
    got = (run(mc, env, steps=30, seed=0, engine="auto"), mc, env)  # generic loop
    assert bql_compiled.compiled_reason(make_agent("bql", env), env, None, False) is None
    numpy_path(monkeypatch)
    env2 = make_env("riverswim-6")
    ref_agent = make_agent("bql", env2, moment_match="monte-carlo", n_samples=20)
    ref = (run(ref_agent, env2, steps=30, seed=0, engine="python"), ref_agent, env2)
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


# n_samples on every branch of NumPy's pairwise sum: fewer than 8 terms, one block of 8
# accumulators (+ a remainder), one split, several levels of splits
MC_SAMPLES = (1, 7, 8, 9, 127, 128, 129, 1000, 4096)


@pytest.mark.parametrize("n_samples", MC_SAMPLES)
def test_compiled_monte_carlo_step_equals_numpy_step(n_samples, monkeypatch):
    """Random posteriors over many orders of magnitude, random transitions (ends of episodes,
    a zero discount): each Monte-Carlo update of the compiled step gives the NumPy step's
    posterior and leaves the generator in the same state (the same draws)."""
    rng = np.random.default_rng(n_samples)
    table = BK.mc_table()
    trials = 24 if n_samples < 1000 else 8
    moved = divisions = 0
    for trial in range(trials):
        kw = {"discount": float(rng.choice([0.0, 0.5, 0.9, 0.999])),
              "moment_match": "monte-carlo", "n_samples": n_samples}  # fmt: skip
        agents = [random_agent(np.random.default_rng([n_samples, trial]), **kw) for _ in range(2)]
        for _ in range(5):
            s, s2 = (int(v) for v in rng.integers(0, 5, 2))
            a = int(rng.integers(0, 3))
            reward = float(rng.normal(0.0, 2.0))
            done = bool(rng.random() < 0.1)
            raised = []
            for agent, compiled in zip(agents, (False, True), strict=True):
                monkeypatch.setattr(
                    BK, "mc_table", (lambda t=table: t) if compiled else lambda: None
                )
                before = agent.mu0[s, a]
                try:  # one draw may cancel E[mu^2 tau] - E[tau] mu0^2 exactly: both raise
                    agent.update(s, a, reward, s2, done)
                    raised.append(None)
                except ZeroDivisionError as err:
                    raised.append(str(err))
            assert raised[0] == raised[1]
            divisions += raised[0] is not None
            moved += agent.mu0[s, a] != before
            ref, got = agents
            assert got.steps == ref.steps
            assert got.rng.bit_generator.state == ref.rng.bit_generator.state
            for name in POSTERIOR:
                np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), name)
    assert moved > trials  # the updates did something
    assert divisions < trials


def test_monte_carlo_moments_equal_numpy():
    """The compiled update against ``bql.kl_projection(bql._moments(...))`` called directly on
    the same generator state: the same posterior, bit for bit, and the same draws consumed
    (state 0's pair is updated, state 1's only action follows)."""
    update = BK.mc_table()["_update_mc"]
    rng = np.random.default_rng(42)
    for n in (1, 129, 1000):
        for _ in range(20):
            cur, nxt = (
                (rng.normal(0, 3), np.exp(rng.uniform(-4, 6)), 1.0 + np.exp(rng.uniform(-10, 8)),
                 np.exp(rng.uniform(-4, 6)))
                for _ in range(2)
            )  # fmt: skip
            reward, discount = float(rng.normal()), float(rng.uniform(0.0, 0.999))
            seed = int(rng.integers(1 << 40))
            ref_rng, got_rng = np.random.default_rng(seed), np.random.default_rng(seed)
            want = bql.kl_projection(
                bql._moments(cur, reward, discount, nxt, "monte-carlo", ref_rng, n)
            )
            mu0, lam, alpha, beta = (np.array([[c], [f]]) for c, f in zip(cur, nxt, strict=True))
            status = update(
                got_rng, mu0, lam, alpha, beta, np.ones((2, 1), dtype=bool), 0, 0, reward, 1,
                False, discount, np.empty(BK.NEWTON_STEPS), np.empty(5, dtype=np.int64),
                np.empty((4, n)),
            )  # fmt: skip
            assert status == BK.OK
            assert (mu0[0, 0], lam[0, 0], alpha[0, 0], beta[0, 0]) == want
            assert got_rng.bit_generator.state == ref_rng.bit_generator.state
            assert (mu0[1, 0], lam[1, 0], alpha[1, 0], beta[1, 0]) == nxt


def test_pairwise_mean_equals_numpy():
    """The compiled mean is NumPy's ``ndarray.mean`` bit for bit, on lengths around every
    branch of the pairwise sum (a plain left-to-right sum is not: it differs on most)."""
    rng = np.random.default_rng(3)
    plain_differs = 0
    lengths = [*range(1, 300), 511, 512, 513, 1000, 1023, 1024, 1025, 4095, 4096, 4097, 8192,
               8193, 65_537]  # fmt: skip
    for n in lengths:
        x = rng.standard_normal(n) * np.exp(rng.uniform(-25.0, 25.0, n))
        want = x.mean()
        assert BK.pairwise_mean(x) == want, n
        plain_differs += float(np.cumsum(x)[-1] / n) != want
    assert plain_differs > len(lengths) // 4
    assert np.signbit(BK.pairwise_mean(-np.zeros(3))) == np.signbit(np.mean(-np.zeros(3)))


MC_ENVS = ("riverswim-6", "cowan3", "deepsea-chain-6", "wide-narrow")


@pytest.mark.parametrize("env_name", MC_ENVS)
@pytest.mark.parametrize(
    "seed,params",
    [
        (0, {"n_samples": 1000}),
        (5, {"n_samples": 129, "prior_mu0": 1.5}),
        (9, {"n_samples": 7, "action": "quantile", "discount": 0.99}),
    ],
)
def test_monte_carlo_engine_equals_numpy_generic_loop(env_name, seed, params, monkeypatch):
    """moment_match="monte-carlo" (the study's published setting uses n_samples=1000): the
    compiled run, the generic loop with the compiled step, and the generic loop with the
    NumPy step give the same Trace, posterior, generators and environment."""
    params = {"moment_match": "monte-carlo", **params}
    env = make_env(env_name)
    agent = make_agent("bql", env, **params)
    assert engines.select("compiled", agent, env, None, False).name == "Bayesian Q-learning"
    steps = 300
    got = one_run(env_name, steps, seed, "compiled", **params)
    compiled_generic = one_run(env_name, steps, seed, "python", **params)
    numpy_path(monkeypatch)
    ref = one_run(env_name, steps, seed, "python", **params)
    for other in (got, compiled_generic):
        assert_same_trace(ref[0], other[0])
        assert_same_left(ref, other)
    assert len(np.unique(ref[0].states)) > 1
    assert (ref[1].lam != ref[1].prior[1]).sum() > 1


def masked_model(S, A, seed):
    """A Dirichlet MDP whose last action is inadmissible in every other state."""
    base = random_dirichlet(S, A, seed=seed)
    mask = np.ones((S, A), dtype=bool)
    mask[::2, A - 1] = False
    return TabularMDP(base.P, base.R, action_mask=mask), mask


@pytest.mark.parametrize("S, A, seed", [(5, 2, 1), (7, 3, 2)])
def test_masked_model_equals_numpy_generic_loop(S, A, seed, monkeypatch):
    """States with one admissible action (no draw) and masked actions (drawn, never taken)."""
    mdp, mask = masked_model(S, A, seed)
    out = []
    for engine in ("compiled", "python"):
        if engine == "python":
            numpy_path(monkeypatch)
        env = TabularEnv(mdp, reward_noise=0.3)
        agent = BayesianQLearning(S, A, action_mask=mask)
        out.append((run(agent, env, steps=300, seed=seed, engine=engine), agent, env))
    assert_same_trace(out[1][0], out[0][0])
    assert_same_left(out[1], out[0])


def test_inadmissible_action_raises_like_the_generic_loop(monkeypatch):
    """An agent that admits what the environment forbids: the same error at the same step."""
    mdp, _ = masked_model(3, 2, 0)
    errors = []
    for engine in ("compiled", "python"):
        if engine == "python":
            numpy_path(monkeypatch)
        env = TabularEnv(mdp)
        agent = BayesianQLearning(3, 2)  # no mask: tries action 1 in states 0 and 2
        with pytest.raises(OptplanError, match="not admissible") as info:
            run(agent, env, steps=100, seed=0, engine=engine)
        errors.append((str(info.value), agent.steps, agent.mu0.copy(), env._t))
    assert errors[0][:2] == errors[1][:2] and errors[0][3] == errors[1][3]
    np.testing.assert_array_equal(errors[0][2], errors[1][2])


@pytest.mark.parametrize(
    "env_name, params, seed",
    [("riverswim-6", {"prior_mu0": 1e3, "prior_beta": 1e3}, 2),
     ("cowan3", {"prior_mu0": 1e3, "prior_beta": 1e-3}, 2)],
)  # fmt: skip
def test_monte_carlo_division_by_zero_like_the_generic_loop(env_name, params, seed, monkeypatch):
    """One draw per update (n_samples=1): E[mu^2 tau] - E[tau] mu0^2 cancels to -1e-12 and
    kl_projection divides by zero at some step (found on these runs). The compiled run raises
    the same ZeroDivisionError at the same step, leaving the same posterior, step count,
    generators and environment."""
    params = {"moment_match": "monte-carlo", "n_samples": 1, **params}
    left = []
    for engine in ("compiled", "python"):
        if engine == "python":
            numpy_path(monkeypatch)
        env = make_env(env_name)
        agent = make_agent("bql", env, **params)
        with pytest.raises(ZeroDivisionError, match="float division by zero"):
            run(agent, env, steps=300, seed=seed, engine=engine)
        left.append((None, agent, env))
    assert 0 < left[1][1].steps < 300
    assert_same_left(left[1], left[0])
