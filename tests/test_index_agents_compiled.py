"""The compiled run of the index agents (optplan.experiments.index_compiled) equals the generic
Python loop exactly: actions, states, rewards, regret curves, the oracle run, and the agent,
environment and generators left behind; and the runs it does not cover take the generic loop
(engine="auto") or are refused (engine="compiled")."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import optplan as op
from optplan.agents.index_agents import IMEDRL, MDPDMED, MDPPS, MDPUCB, OLP
from optplan.envs import TabularEnv
from optplan.experiments import index_compiled, run
from optplan.fast import _agent_kernels
from optplan.generators import random_dirichlet
from optplan.mdp import TabularMDP
from optplan.modelfile import load_counts
from optplan.result import OptplanError

pytestmark = pytest.mark.skipif(
    not _agent_kernels.AVAILABLE, reason="numba not installed (pip install 'optplan[jit]')"
)

AGENTS = (MDPUCB, OLP, MDPDMED, MDPPS, IMEDRL)
COWAN3 = op.load_model("models/cowan3.toml")
RIGGED = load_counts("models/cowan3-rigged.toml", 3, 2)
TRACE_FIELDS = (
    "states",
    "actions",
    "rewards",
    "expected_rewards",
    "regret",
    "realized_regret",
    "gap_regret",
    "oracle_cumulative",
    "oracle_run_rewards",
    "visits",
    "episode_ends",
)
ESTIMATOR_FIELDS = ("T", "Txa", "Tx", "p_hat", "policy", "v")


def both(cls, mdp, steps, seed, env_kw=None, **kw):
    """``(trace, agent, env)`` of the generic loop and of the compiled one."""
    out = {}
    for engine in ("python", "compiled"):
        agent = cls(mdp.R, **kw)
        env = TabularEnv(mdp, **(env_kw or {}))
        out[engine] = (run(agent, env, steps=steps, seed=seed, engine=engine), agent, env)
    return out["python"], out["compiled"]


def assert_same(ref, got):
    (tr, ar, er), (tc, ac, ec) = ref, got
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(getattr(tc, name), getattr(tr, name), err_msg=name)
    assert tc.optimal_rate == tr.optimal_rate and tc.steps == tr.steps
    for name in ESTIMATOR_FIELDS:
        np.testing.assert_array_equal(
            getattr(ac.estimator, name), getattr(ar.estimator, name), err_msg=name
        )
    assert ac.estimator.t == ar.estimator.t and ac.estimator.gain == ar.estimator.gain
    np.testing.assert_array_equal(ac.last_indices, ar.last_indices)
    if isinstance(ar, MDPDMED):
        assert ac.best_action == ar.best_action
    if isinstance(ar, (MDPDMED, IMEDRL)):
        np.testing.assert_array_equal(ac.last_rates, ar.last_rates)
    # the generators were consumed alike, and the environment stands where the loop left it
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ec._state, ec._t) == (er._state, er._t)


@pytest.mark.parametrize("cls", AGENTS, ids=lambda c: c.name)
@pytest.mark.parametrize("seed", [0, 7])
def test_cowan3_equals_python_loop(cls, seed):
    ref, got = both(cls, COWAN3, 600, seed)
    assert_same(ref, got)
    # not a trivial run: every state visited, both actions played
    assert set(ref[0].states.tolist()) == {0, 1, 2} and set(ref[0].actions.tolist()) == {0, 1}


@pytest.mark.parametrize("cls", AGENTS, ids=lambda c: c.name)
def test_cowan3_rigged_start_equals_python_loop(cls):
    assert_same(*both(cls, COWAN3, 400, 3, initial_counts=RIGGED))


def masked_model(S, A, seed):
    """A Dirichlet MDP whose last action is inadmissible in every other state (A > 1)."""
    base = random_dirichlet(S, A, seed=seed)
    mask = np.ones((S, A), dtype=bool)
    if A > 1:
        mask[::2, A - 1] = False
    return TabularMDP(base.P, base.R, action_mask=mask), mask


@pytest.mark.parametrize("cls", AGENTS, ids=lambda c: c.name)
@pytest.mark.parametrize(
    "S, A, seed, counts",
    [
        (2, 2, 1, None),
        (5, 3, 2, "int"),
        (9, 4, 3, "frac"),
        (4, 1, 4, None),
        (12, 3, 5, "int"),
        # rows of > 128 terms (numpy's pairwise sums split them); ~20 ms a Python step
        pytest.param(140, 2, 6, "int", marks=pytest.mark.slow),
    ],
)
def test_random_models_equal_python_loop(cls, S, A, seed, counts):
    mdp, mask = masked_model(S, A, seed)
    kw = {"action_mask": mask}
    if counts is not None:
        rng = np.random.default_rng(seed)
        init = rng.integers(0, 4, size=(S, A, S)).astype(float)
        if counts == "frac":
            init = init * 0.37 + rng.random((S, A, S)) * 0.1
        init[~mask] = 0.0
        kw["initial_counts"] = init
    assert_same(*both(cls, mdp, 250 if S < 100 else 60, seed, **kw))


@pytest.mark.parametrize("cls", AGENTS, ids=lambda c: c.name)
def test_discounted_model_equals_python_loop(cls):
    base = random_dirichlet(4, 2, seed=11)
    mdp = TabularMDP(base.P, base.R, discount=0.9)  # scored by the discounted criterion
    assert_same(*both(cls, mdp, 200, 1))


@pytest.mark.slow
@pytest.mark.parametrize("cls", AGENTS, ids=lambda c: c.name)
def test_cowan3_long_run_equals_python_loop(cls):
    """A Fig. 3 run length: 10^4 steps (the good-action sets shrink, policies settle)."""
    assert_same(*both(cls, COWAN3, 10_000, 2019))


def test_inadmissible_action_raises_as_the_python_loop():
    """An agent that admits what the environment forbids: the same error at the same step."""
    base = random_dirichlet(3, 2, seed=0)
    mask = np.ones((3, 2), dtype=bool)
    mask[1, 1] = False
    mdp = TabularMDP(base.P, base.R, action_mask=mask)
    errors = []
    for engine in ("python", "compiled"):
        agent = MDPUCB(mdp.R)  # no mask: tries action 1 in state 1
        env = TabularEnv(mdp)
        with pytest.raises(OptplanError, match="not admissible") as info:
            run(agent, env, steps=100, seed=0, engine=engine)
        errors.append((str(info.value), agent.estimator.t, agent.estimator.T.copy()))
    assert errors[0][:2] == errors[1][:2]
    np.testing.assert_array_equal(errors[0][2], errors[1][2])


def test_auto_takes_the_compiled_loop_when_it_applies(monkeypatch):
    calls = []
    real = index_compiled.compiled_loop

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(index_compiled, "compiled_loop", spy)
    run(MDPUCB(COWAN3.R), TabularEnv(COWAN3), steps=20, seed=0)
    assert calls == [1]
    run(MDPUCB(COWAN3.R), TabularEnv(COWAN3), steps=20, seed=0, engine="python")
    assert calls == [1]


class _Sub(MDPUCB):
    pass


class _SubEnv(TabularEnv):
    pass


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: (_Sub(COWAN3.R), TabularEnv(COWAN3)), "not one of"),
        (lambda: (MDPUCB(COWAN3.R, method="conic"), TabularEnv(COWAN3)), "method="),
        (lambda: (MDPUCB(COWAN3.R), _SubEnv(COWAN3)), "not a plain TabularEnv"),
        (lambda: (MDPUCB(COWAN3.R), TabularEnv(COWAN3, reward_noise=0.1)), "reward noise"),
        (lambda: (MDPUCB(COWAN3.R), TabularEnv(COWAN3, max_steps=50)), "max_steps"),
        (lambda: (MDPUCB(COWAN3.R), TabularEnv(COWAN3, goal_states=[2])), "goals"),
    ],
)
def test_runs_it_does_not_cover(make, reason):
    agent, env = make()
    assert reason in index_compiled.compiled_reason(agent, env)
    with pytest.raises(OptplanError, match=f'engine="compiled" does not cover.*{reason}'):
        run(agent, env, steps=5, seed=0, engine="compiled")
    # "auto" runs them with the generic loop, as "python" does
    a2, e2 = copy.deepcopy(agent), copy.deepcopy(env)
    auto = run(agent, env, steps=30, seed=0)
    ref = run(a2, e2, steps=30, seed=0, engine="python")
    np.testing.assert_array_equal(auto.actions, ref.actions)
    np.testing.assert_array_equal(auto.rewards, ref.rewards)


def test_many_states_and_episodes_take_the_generic_loop():
    big = random_dirichlet(200, 2, seed=0)
    assert "200 states" in index_compiled.compiled_reason(MDPUCB(big.R), TabularEnv(big))
    env = TabularEnv(COWAN3)
    assert "episodes" in index_compiled.compiled_reason(MDPUCB(COWAN3.R), env, episodes=3)


def test_engine_is_checked():
    with pytest.raises(OptplanError, match="engine must be"):
        run(MDPUCB(COWAN3.R), TabularEnv(COWAN3), steps=5, engine="numba")


def test_pairwise_sum_and_products_match_numpy():
    """The pieces the exactness rests on, beyond the self-check's sizes: numpy's pairwise row
    sum up to 256 terms and BLAS products, on badly scaled inputs."""
    assert _agent_kernels.self_check()
    k = _agent_kernels._compiled()
    rng = np.random.default_rng(5)
    for n in list(range(1, 40)) + [127, 128, 129, 136, 199, 255, 256]:
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n)
        assert k["_row_sum"](x) == x.sum(), n
        M = rng.random((3, n))
        out = np.empty(3)
        k["_matvec"](M, x, out)
        np.testing.assert_array_equal(out, M @ x)
    with pytest.raises(ValueError, match="256"):
        k["_row_sum"](np.ones(257))


def test_good_actions_at_a_tie_agree_with_the_reference():
    """An action whose count is exactly the threshold ``(ln T[x])^2`` as the reference computes
    it (``np.log``) is good for the reference and for the compiled loop alike, whichever way
    this machine's ``np.log`` and libm's ``log`` round ``ln 9170``."""
    from optplan.agents.index_agents import TransitionEstimator

    Tx = np.array([9170.0, 5.0])
    thr = float(np.log(Tx)[0] ** 2)
    counts = np.zeros((2, 2, 2))
    counts[0, 0, 0], counts[0, 1, 0] = thr, 9170.0 - thr
    counts[1, :, 1] = 2.5
    e = TransitionEstimator(np.zeros((2, 2)), initial_counts=counts)
    good = np.zeros((2, 2), dtype=bool)
    k = _agent_kernels._compiled()
    k["_good_row"](0, e.Tx, e.Txa, e.mask, good)
    assert e.Tx[0] == 9170.0 and e.Txa[0, 0] == thr
    np.testing.assert_array_equal(good[0], e.good_actions()[0])
    assert good[0, 0]


@pytest.mark.parametrize("S", [30, 77, 150, 199])
def test_bordered_solve_matches_the_reference_up_to_199_states(S):
    """The gain and bias of the compiled loop's evaluation (numba's LAPACK dgesv) equal
    optplan.dp.evaluate_unichain's (SciPy's dgetrf + dgetrs) bit for bit, up to the last size
    the compiled loop covers (the self-check stops at 40 states), with one BLAS thread as
    ``run`` sets it: with two, OpenBLAS's blocked dgetrf rounds differently between the two
    calls from about 150 states (CI=true .ci/run, which sets no thread count, failed at 150
    and 199)."""
    from threadpoolctl import threadpool_limits

    from optplan.dp import evaluate_unichain

    k = _agent_kernels._compiled()
    rng = np.random.default_rng(S)
    for _ in range(3):
        P = rng.dirichlet(np.full(S, 0.3) + rng.random(S), size=(S, 1))
        r = rng.random((S, 1))
        work = (np.empty((S + 1, S + 1)), np.empty(S + 1), np.empty(S))
        with threadpool_limits(1):
            ev = evaluate_unichain(P[:, 0], r[:, 0])
            sol = k["_evaluate"](P, r, np.zeros(S, np.int64), *work)
        assert sol[S] == ev.gain
        np.testing.assert_array_equal(sol[:S], ev.bias)
