"""The episodic agents' compiled steps (optplan.agents._episodic_steps): K-learning, the
episodic PSRL, UBE and count-bonus agents.

The steps are checked against the posterior's own update and NumPy's ``searchsorted``; the
compiled loop against the generic loop, which calls the same steps (runs counted in steps or
in episodes, ``stop_when_solved``, ``on_episode_end``, the same errors); runs it does not
cover take the generic loop (engine="auto") or are refused (engine="compiled").

The agents' compiled plans (optplan.agents._layered_kernels, _layered_ube_kernels) are
compared with their NumPy plans (``_plan_numpy``, :func:`optplan.dp.backward_induction`,
``KLearningTemperature.solve``, :func:`optplan.soft.k_values`) on random posteriors and on
the posteriors of runs, within stated tolerances."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from test_engines_exact import assert_same_trace, both_loops

from optplan.agents import PSRL, UBE, KLearning
from optplan.agents import _episodic_steps as ES
from optplan.agents import _layered_kernels as LK
from optplan.agents.registry import make_agent
from optplan.envs import DeepSea, TabularEnv
from optplan.envs.registry import ENVS
from optplan.experiments import compiled, engines, run
from optplan.posteriors import LayeredPosterior
from optplan.result import OptplanError

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


def _random_posterior(gen, case: int, deterministic: bool = False):
    """A random :class:`~optplan.posteriors.LayeredPosterior` for the checks (every reward
    mode, pseudo-counts below and above 1, DeepSea's 20 x 20 x 2 among the shapes)."""
    L, S, A = (20, 20, 2) if case < 3 else tuple(int(x) for x in gen.integers(2, 9, 3))
    sigma = (0.0, 0.7, None, np.full((L, S, A), 0.3))[case % 4]
    prior = "deterministic" if deterministic else (None, 0.5, 2.5)[case % 3]
    post = LayeredPosterior(
        L, S, A, 1.0 if sigma is None else sigma, None if sigma is None else 1.0 + case, prior
    )
    _visit(gen, post, int(gen.integers(0, 4 * L * S)))
    return post


def _case_options(case: int) -> tuple:
    """``(bonus, span, unvisited)`` of K-learning check ``case``: both bonus kinds, the default
    and a set span, both unvisited terms."""
    bonus = ("paper", "posterior")[(case // 4) % 2]
    span = 1.01 if case % 3 == 0 else None
    unvisited = ("hoeffding", "paper")[(case // 8) % 2]
    return bonus, span, unvisited


def _visit(gen, post, n: int) -> None:
    """``n`` random visits recorded in ``post`` (a deterministic prior's next state is
    ``(s + a) % S``)."""
    L, S, A = post.shape
    for _ in range(n):
        l, s, a = (int(gen.integers(0, m)) for m in (L, S, A))
        y = (s + a) % S if post.deterministic else int(gen.integers(0, S))
        post.update(l, s, a, float(gen.normal()), y)


def make_env(name):
    reg, params = ENVIRONMENTS[name]
    comp = ENVS[reg]
    return comp.build(0, **comp.resolve(params, reg))


@contextmanager
def numpy_plans(on: bool = True):
    """Within: PSRL and K-learning plan in NumPy (their paths without numba)."""
    with pytest.MonkeyPatch.context() as mp:
        if on:
            mp.setattr(PSRL, "_compiled_work", lambda self: None)
            mp.setattr(KLearning, "_compiled_plan", lambda self: False)
            mp.setattr(UBE, "_layered_plan", lambda self: None)
        yield


def compiled_plans_used(agent) -> bool:
    """Whether ``agent`` (after its run) planned with its compiled plan."""
    if isinstance(agent, PSRL):
        return agent._work is not None
    if isinstance(agent, UBE):
        return agent._layered is not None
    return agent._compiled


def both(agent_name, env_name, seed, run_kw, **params):
    """``(trace, agent, env)`` of the generic loop and of the compiled one."""
    return both_loops(lambda: make_env(env_name), agent_name, seed, run_kw, **params)


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
    elif isinstance(ar, UBE):
        assert (ac.plans, ac._top, ac._scale) == (ar.plans, ar._top, ar._scale)
        for name in ("policy", "q", "mean", "var", "P", "_QA", "_VA", "u", "local", "_sqrt_u"):
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
@pytest.mark.parametrize("seed", [4])
def test_k_learning_equals_python_loop(params, env_name, seed):
    # a step count that ends within an episode: the run stops mid-episode in both loops
    trace = check("k-learning", env_name, seed, {"steps": 1203}, **params)
    assert trace.episodes > 30


def test_compiled_plans_are_taken():
    """The compiled runs above planned compiled: K-learning at tau* (fast method) or the
    schedule, and PSRL with a Dirichlet prior; the conic method and PSRL's deterministic
    prior plan in NumPy."""
    env = make_env("deepsea-6")
    for name, params, planned in (
        ("psrl", {}, True),
        ("psrl", {"transitions": "deterministic"}, False),
        ("k-learning", {}, True),
        ("k-learning", {"transitions": "deterministic", "bonus": "posterior"}, True),
        ("k-learning", {"temperature": "schedule"}, True),
        ("k-learning", {"temperature": "schedule", "method": "conic"}, True),
        ("k-learning", {"method": "conic"}, False),
        ("ube", {}, True),
        ("ube", {"local": "lemma1"}, False),
        ("ube", {"transitions": "known"}, False),
    ):
        agent = make_agent(name, env, **params)
        if name != "k-learning":
            agent.reset(np.random.default_rng(0))
            assert compiled_plans_used(agent) == planned, params
        else:  # a conic reset would plan with CVXPY: the choice alone
            assert agent._compiled_plan() == planned, params


@pytest.mark.parametrize(
    "agent_name,params",
    [
        ("psrl", {"sigma": np.full((6, 6, 2), 0.2)}),
        ("psrl", {"prior_var": None, "sigma": 0.3}),
        ("psrl", {"transition_prior": 2.5, "sigma": 0.0, "prior_var": 3.0}),
        ("k-learning", {"prior_var": None, "sigma": 0.3}),
        ("k-learning", {"transition_prior": 2.5, "sigma": 0.0, "bonus": "posterior"}),
        ("k-learning", {"sigma": 0.2, "bonus": "posterior", "span": 1.01, "prior_var": 0.5}),
        ("ube", {"sigma": 0.0, "prior_var": 2.0}),
        ("ube", {"sigma": 0.4, "prior_var": 0.5, "discount": 0.9, "transition_prior": 1.5}),
        ("ube", {"sigma": 0.3, "action_mask": np.array([[True, False]] + [[True, True]] * 5)}),
    ],
    ids=[
        "psrl-pair-sigma",
        "psrl-flat-prior",
        "psrl-counts-above-1",
        "k-flat-prior",
        "k-exact-rewards",
        "k-posterior-span",
        "ube-exact-rewards",
        "ube-noisy-discounted",
        "ube-masked",
    ],  # fmt: skip
)
def test_compiled_plans_equal_numpy_plans(agent_name, params):
    """Each reward posterior the compiled plans take (NumPy's handed in: a per-pair sigma, the
    flat prior; sigma = 0; sigma > 0), Gamma shapes above 1, both bonus kinds; the UBE's
    proper priors, a discount below 1 and a masked action: after a run, the agent's next plan
    made compiled and in NumPy from the same posterior and generator. The draws and the
    generator's state are equal; the values agree to 1e-12 (products and sums in another
    order), and so the greedy policies."""
    import copy

    env = make_env("deepsea-6")
    if agent_name == "ube":
        agent = UBE(6, 2, n_layers=6, reward_bound=1.0, **params)
    else:
        cls = PSRL if agent_name == "psrl" else KLearning
        agent = cls(6, 2, n_layers=6, initial=env.mdp.initial, **params)
    run(agent, env, steps=900, seed=3)
    assert compiled_plans_used(agent)
    twin = copy.deepcopy(agent)
    with numpy_plans():
        twin.plan()
    agent.plan()
    assert agent.rng.bit_generator.state == twin.rng.bit_generator.state
    if isinstance(agent, KLearning):
        assert agent.tau == pytest.approx(twin.tau, rel=1e-10)
        names = ("K", "pi", "values", "c", "_cdf")
    elif isinstance(agent, UBE):
        names = ("q", "mean", "var", "P", "u", "local")
    else:
        names = ("Q",)
    for name in names:
        np.testing.assert_allclose(getattr(agent, name), getattr(twin, name), rtol=1e-12,
                                   atol=1e-12, err_msg=name)  # fmt: skip
    if not isinstance(agent, KLearning):
        np.testing.assert_array_equal(agent.policy, twin.policy)


@pytest.mark.parametrize("deterministic", [False, True], ids=["dirichlet", "deterministic"])
def test_k_schedule_plan_equals_numpy_plan(deterministic):
    """The compiled schedule plan (:func:`LK.k_schedule_plan`) agrees with the NumPy plan to
    1e-12 (``soft.k_values`` at Eq. 10's temperature, ``soft.boltzmann_policy_and_values``, the
    cumulative policy) on random posteriors: every reward mode with one sigma, both bonus
    kinds and unvisited terms, spans, temperatures from early and late episodes, DeepSea's
    20 x 20 x 2 and random shapes (A up to 8, S up to 8; S = 20 rows of more than 8 terms
    in the products)."""
    from optplan import soft

    gen = np.random.default_rng(29 + deterministic)
    compared = 0
    for case in range(48):
        post = _random_posterior(gen, case, deterministic)
        if np.ndim(post.sigma) != 0:
            continue
        L, S, A = post.shape
        bonus = ("paper", "posterior")[case % 2]
        span = (None, 1.01, 3.0)[case % 3]
        unvisited = ("hoeffding", "paper")[(case // 2) % 2]
        episode = int(gen.choice([1, 2, 7, 300, 10**4, 10**6]))
        tau = soft.temperature_schedule(episode, post.sigma, L, L * S, A)
        R, _ = post.reward_posterior()
        P = post.mean_transitions()
        c = post.bonus_numerators(bonus, span, unvisited)
        K = soft.k_values(tau, R, P, post.counts, post.sigma, c)
        pi, values = soft.boltzmann_policy_and_values(K, tau)
        work = LK.KWork(post, np.full(S, 1.0 / S), bonus, span, unvisited)
        got = LK.k_schedule_plan(work, tau)
        want = (K, c, pi, values, np.cumsum(pi, axis=-1))
        for name, g, w in zip(("K", "c", "pi", "values", "cdf"), got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg=f"case {case}: {name}")
        compared += 1
    assert compared >= 30


@pytest.mark.parametrize("deterministic", [False, True], ids=["dirichlet", "deterministic"])
def test_k_plans_of_one_posterior_are_incremental_and_exact(deterministic):
    """One :class:`LK.KWork` kept over a posterior that grows between plans (the agent's
    case: a row of the mean transitions and its groups computed again only where a count
    changed): every plan equals the NumPy plan made from scratch, ``tau*`` searched from the
    last one as ``solve("fast", guess=...)`` searches, and the schedule's plan too."""
    from optplan import soft
    from optplan.problems.k_temperature import KLearningTemperature

    gen = np.random.default_rng(41 + deterministic)
    searched = 0
    for case in (0, 1, 5, 6, 9, 10):
        post = _random_posterior(gen, case, deterministic)
        if np.ndim(post.sigma) != 0:
            continue
        L, S, A = post.shape
        initial = gen.dirichlet(np.ones(S))
        bonus = ("paper", "posterior")[case % 2]
        work, sched = (LK.KWork(post, initial, bonus, None, "hoeffding") for _ in range(2))
        guess = None
        for plan in range(8):
            _visit(gen, post, int(gen.integers(0, 3 * L)))  # 0 to 3 L visits, rows repeat
            R, P = post.reward_posterior()[0], post.mean_transitions()
            c = post.bonus_numerators(bonus, None, "hoeffding")
            got = LK.k_plan(work, guess)
            want = KLearningTemperature(R, P, post.counts, post.sigma, initial, c).solve(
                "fast", guess=guess
            )
            if got is not None:
                assert got[0] == want.x, (case, plan)
                np.testing.assert_array_equal(got[1], want.q)
                np.testing.assert_array_equal(got[2], c)
                guess = got[0]
                searched += 1
            tau = soft.temperature_schedule(plan + 1, post.sigma, L, L * S, A)
            K = soft.k_values(tau, R, P, post.counts, post.sigma, c)
            pi, values = soft.boltzmann_policy_and_values(K, tau)
            for g, w in zip(LK.k_schedule_plan(sched, tau), (K, c, pi, values), strict=False):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(work.P, P)
    assert searched >= 16


SCHEDULE_RUNS = [
    (env, params)
    for env in ("deepsea-6", "deepsea-10-k", "deepsea-7-windy")
    for params in (
        {"temperature": "schedule"},
        {"temperature": "schedule", "bonus": "posterior", "sigma": 0.3},
        {"temperature": "schedule", "transitions": "deterministic", "bonus": "posterior"},
    )
    if not (env.endswith("windy") and "transitions" in params)  # it contradicts that prior
]


@pytest.mark.parametrize("env_name,params", SCHEDULE_RUNS)
def test_k_schedule_engine_equals_python_loop(env_name, params):
    """Schedule K-learning on DeepSea: the compiled engine equals the generic loop, both
    transition priors and bonus kinds."""
    ref, got = both("k-learning", env_name, 8, {"episodes": 150}, **params)
    assert compiled_plans_used(got[1]) and compiled_plans_used(ref[1])
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


@pytest.mark.parametrize("env_name", DETERMINISTIC_ENVS)
@pytest.mark.parametrize(
    "params", DETERMINISTIC_VARIANTS, ids=lambda p: ",".join(map(str, p.values()))
)
@pytest.mark.parametrize("seed", [6])
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

        trace = run(
            agent,
            env,
            episodes=400,
            seed=2,
            engine=engine,
            stop_when_solved=stop,
            on_episode_end=hook,
        )
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
        assert chosen is not None and chosen.name == "the agent's compiled steps", name


def test_uncovered_runs_take_the_generic_loop():
    class MyKLearning(KLearning):
        def select_action(self, state):
            return super().select_action(state)

    class MyEnv(TabularEnv):
        def step(self, action):
            return super().step(action)

    env = make_env("deepsea-6")
    sub = MyKLearning(6, 2, n_layers=6, initial=env.mdp.initial)
    assert "MyKLearning overrides select_action" in compiled.compiled_reason(sub, env)
    assert engines.select("auto", sub, env, None, False) is None
    with pytest.raises(OptplanError, match="does not cover this run"):
        run(sub, env, steps=20, engine="compiled")
    own = MyEnv(env.mdp)
    agent = make_agent("k-learning", own)
    assert "has its own step or reset" in compiled.compiled_reason(agent, own)
    other = make_env("riverswim-episodic")
    assert "has 8 layers, the agent 6" in compiled.compiled_reason(agent, other)


def test_steps_update_the_posterior_as_its_python_update():
    """:func:`ES.observe` on a random stream of transitions (last layers, repeated pairs)
    leaves the counts, reward sums and next-state counts of
    :meth:`LayeredPosterior.update` and counts layers, steps and episodes."""
    gen = np.random.default_rng(5)
    L, S, A = 3, 4, 2
    agent = PSRL(S, A, n_layers=L, transition_prior="deterministic")
    agent.reset(np.random.default_rng(0))
    ref = LayeredPosterior(L, S, A, 1.0, 1.0, 0.5)
    s = agent.state
    s.flags[ES.DETERMINISTIC] = 0  # the stream is stochastic
    for t in range(300):
        l, x, a, y = t % L, int(gen.integers(S)), int(gen.integers(A)), int(gen.integers(S))
        r = float(gen.normal())
        assert s.clock[0] == l
        due = ES.observe(s, x, a, r, y, l == L - 1, agent.rng)
        assert due == (l == L - 1)
        ref.update(l, x, a, r, y)
    for name in ("counts", "reward_sums", "next_counts"):
        np.testing.assert_array_equal(getattr(agent.posterior, name), getattr(ref, name))
    assert (s.flags[ES.STEPS], s.flags[ES.EPISODES], s.clock[0]) == (300, 100, 0)


def test_boltzmann_action_searches_the_cumulative_row():
    """K-learning's action: the row of the plan's cumulative policy searched for one uniform
    of the agent's generator times the row's total (``np.searchsorted``, side right)."""
    agent = KLearning(3, 4, n_layers=2)
    agent.reset(np.random.default_rng(1))
    s = agent.state
    s.cdf[...] = np.cumsum(np.random.default_rng(2).dirichlet(np.ones(4), size=6), axis=1)
    twin = np.random.default_rng(7)
    rng = np.random.default_rng(7)
    for l in (0, 1):
        s.clock[0] = l
        for x in range(3):
            row = s.cdf[l * 3 + x]
            want = min(int(np.searchsorted(row, twin.random() * row[-1], side="right")), 3)
            assert ES.act(s, x, rng) == want


def row_exceptions(P):
    """Each row of ``P`` (L, S, A, S) as its smallest entry plus the entries above it (one
    group per row, ``s A + a``), and which layers have at most ``S / 4`` of those per row:
    ``(sparse, base, nnz, idx, val)`` as ``optplan.fast._k_kernels._rows`` lays them out."""
    L, S, A, _ = P.shape
    rows = P.reshape(L, S * A, S)
    base = rows.min(axis=-1)
    above = rows != base[..., None]
    nnz = above.sum(axis=-1)
    idx = np.zeros((L, S * A, S), dtype=np.int64)
    val = np.zeros((L, S * A, S))
    for l, j in np.ndindex(L, S * A):
        (where,) = np.nonzero(above[l, j])
        idx[l, j, : where.size] = where
        val[l, j, : where.size] = rows[l, j, where] - base[l, j]
    return 4 * nnz.max(axis=-1) <= S, base, nnz, idx, val


@pytest.mark.parametrize("deterministic", [False, True])
def test_k_search_equal_rows_summed_once_is_exact(deterministic):
    """The temperature search sums each layer's distinct transition rows once
    (optplan.fast._k_kernels._rows: an unvisited pair's uniform row and its copies): every
    pass equals the pass that sums every row, bit for bit (DeepSea-sized posteriors, both
    priors, many unvisited pairs, an agent's)."""
    from optplan.fast import _k_kernels

    table = _k_kernels._table()
    gen = np.random.default_rng(5)
    env = make_env("deepsea-10-k")  # and an agent's posterior
    params = {"transitions": "deterministic"} if deterministic else {}
    agent = make_agent("k-learning", env, **params)
    run(agent, env, episodes=150, seed=1)
    for case in (0, 1, 4, 5, 8, "agent"):
        if case == "agent":
            post = agent.posterior
        else:
            post = _random_posterior(gen, case, deterministic)
        R, _ = post.reward_posterior()
        P = post.mean_transitions()
        c = post.bonus_numerators("paper")
        rho = gen.dirichlet(np.ones(post.S))
        L, S, A = post.shape
        PT, group, nrep, flat, sparse, *_ = _k_kernels.transposed(P)
        assert flat.any() and (nrep < S * A).all()  # rows were merged
        every = (  # one group per row: the pass that sums every row
            np.ascontiguousarray(np.transpose(P, (0, 3, 1, 2)).reshape(L, S, S * A)),
            np.tile(np.arange(S * A), (L, 1)),
            np.full(L, S * A),
            np.zeros((L, S, A), dtype=bool),
            *row_exceptions(P),
        )
        np.testing.assert_array_equal(every[4], sparse)
        for tau in (1e-3, 0.4, 25.0):
            got = _k_kernels.terms(tau, R, P, c, rho)
            out = tuple(np.empty_like(x) for x in (R, R[..., 0], R, R))
            ref = table["_terms"](tau, R, P, every, c, rho, *out, np.empty_like(R))
            assert got[:4] == ref
            for a, b in zip(got[4:], out, strict=True):
                np.testing.assert_array_equal(a, b)


def test_k_search_repeated_state_takes_the_previous_states_numbers():
    """A state whose K row equals the previous state's takes that state's exponentials, soft
    value, policy and entropy (optplan.fast._k_kernels._terms): one layer (no sums over next
    states), states repeated next to each other and apart give the same per-state numbers, bit
    for bit, and the same sums up to their order."""
    from optplan.fast import _k_kernels

    gen = np.random.default_rng(9)
    base_R, base_c = gen.normal(size=(3, 3)), gen.random((3, 3))
    adjacent = [0, 0, 1, 1, 1, 2]  # states 1, 3, 4 repeat the previous state
    apart = [0, 1, 2, 0, 1, 1]  # the same rows, one repeat adjacent
    outs = []
    for order in (adjacent, apart):
        R = np.ascontiguousarray(base_R[order][None])
        c = np.ascontiguousarray(base_c[order][None])
        P = np.full((1, 6, 3, 6), 1 / 6)
        rho = np.full(6, 1 / 6)
        outs.append((order, _k_kernels.terms(0.3, R, P, c, rho)))
    (o1, t1), (o2, t2) = outs
    for i in range(6):  # each state, copied or not, against its row computed afresh
        j = o2.index(o1[i])  # states 0, 1, 2 of ``apart`` repeat no neighbour
        for a, b in zip(t1[4:], t2[4:], strict=True):  # K, V, pi, lambda
            np.testing.assert_array_equal(a[0, i], b[0, j])
    np.testing.assert_allclose(t1[:4], t2[:4], rtol=1e-14)
