"""The index agents' compiled steps against independent references: each agent's scores in
recorded states against the batched fast paths (``kl_ball_index``, ``l1_ball_index``,
``kl_inf_rate``) and the paper's conventions written out in NumPy; the Python policy
iteration of large models in both loops; the runs the compiled loop leaves to the generic one.
(The same run in both loops, for each agent and kind of environment:
tests/test_compiled_loop.py.)"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import optplan as op
from optplan.agents.index_agents import IMEDRL, MDPDMED, MDPPS, MDPUCB, OLP
from optplan.dp import ITERATIVE_MIN_STATES
from optplan.envs import TabularEnv
from optplan.experiments import compiled, run
from optplan.fast import _agent_kernels
from optplan.fast.kl_ball import kl_ball_index
from optplan.fast.kl_inf import kl_inf_rate
from optplan.fast.l1_ball import l1_ball_index
from optplan.generators import random_dirichlet
from optplan.mdp import TabularMDP
from optplan.posteriors import sample_dirichlet
from optplan.result import OptplanError

COWAN3 = op.load_model("models/cowan3.toml")


def reference(agent, x: int, rng=None) -> np.ndarray:
    """The agent's scores in state ``x`` from its estimator, in NumPy (§3 of
    accelerating-ucb-indices-mdp; IMED-RL of Pesquerel & Maillard 2022)."""
    e = agent.estimator
    R, mask, T, p, v = e.R[x], e.mask[x], e.Txa[x], e.p_hat[x], e.v
    log_t = math.log(e.t)
    tried = mask & (T > 0)
    if isinstance(agent, (MDPUCB, OLP)):
        u = np.where(mask, R + v.max(), -np.inf)
        if tried.any():
            if isinstance(agent, MDPUCB):
                val = kl_ball_index(p[tried], v, log_t / T[tried]).value
            else:
                val = l1_ball_index(p[tried], v, np.sqrt(2 * log_t / T[tried])).value
            u[tried] = R[tried] + val
        return u
    L = np.where(mask, R + p @ v, -np.inf)
    if isinstance(agent, MDPDMED):
        best = int(np.argmax(L))
        others = mask & (np.arange(len(R)) != best)
        D = np.full(len(R), -np.inf)
        if others.any():
            K = kl_inf_rate(p[others], v, L[best] - R[others]).value
            with np.errstate(divide="ignore"):
                D[others] = np.where(
                    K <= 0, np.inf, np.where(np.isinf(K), -T[others], log_t / K - T[others])
                )
        D[best] = 0.0
        return D
    if isinstance(agent, IMEDRL):
        with np.errstate(divide="ignore"):
            index = np.where(tried, np.log(T), np.inf)
        index[mask & (T == 0)] = -np.inf
        sub = tried & (L < L.max())
        if sub.any():
            K = kl_inf_rate(p[sub], v, L.max() - R[sub]).value
            index[sub] = T[sub] * K + np.log(T[sub])
        return index
    Q = sample_dirichlet(e.T[x] + 1.0, rng)
    return np.where(mask, R + Q @ v, -np.inf)


def close(got, want):
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_array_equal(
        np.sign(got[~np.isfinite(got)]), np.sign(want[~np.isfinite(want)])
    )
    f = np.isfinite(want)
    np.testing.assert_allclose(
        got[f], want[f], rtol=1e-9, atol=1e-9 * max(1.0, np.abs(want[f]).max(initial=0))
    )


@pytest.mark.parametrize("cls", [MDPUCB, OLP, MDPDMED, IMEDRL, MDPPS], ids=lambda c: c.name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_equal_the_numpy_reference_on_visited_states(cls, seed):
    """Random transitions (every action tried unevenly, some never), an inadmissible action,
    and the scores of every state compared every 25 steps."""
    rng = np.random.default_rng(seed)
    S, A = 6, 3
    base = random_dirichlet(S, A, seed=seed)
    mask = np.ones((S, A), dtype=bool)
    mask[0, 2] = False
    agent = cls(base.R, action_mask=mask)
    agent.reset(np.random.default_rng(seed))
    compared = 0
    for step in range(300):
        x = int(rng.integers(S))
        a = int(rng.choice(np.flatnonzero(mask[x]), p=None if x % 2 else None))
        if step < 150 and a == A - 1 and x > 3:  # leave some pairs untried for a while
            continue
        agent.update(x, a, 0.0, int(rng.integers(S)), False)
        if step % 25 == 0:
            for y in range(S):
                draws = copy.deepcopy(agent.rng)
                got = agent.indices(y)
                close(got, reference(agent, y, draws))
                compared += 1
    assert compared >= 60


def test_dmed_choice_and_imed_choice_follow_the_scores():
    agent = MDPDMED(COWAN3.R)
    agent.reset(np.random.default_rng(0))
    for x, a, y in [(0, 0, 1), (0, 1, 2), (1, 0, 0), (1, 1, 2), (2, 0, 0), (2, 1, 1)] * 3:
        agent.update(x, a, 0.0, y, False)
    for x in range(3):
        chosen = agent.select_action(x)
        D = agent.last_indices.copy()
        best = agent.best_action
        others = D.copy()
        others[best] = -np.inf
        j = int(np.argmax(others))
        assert chosen == (j if others[j] > 0 else best)
    imed = IMEDRL(COWAN3.R)
    imed.reset(np.random.default_rng(0))
    assert imed.select_action(0) == int(np.argmin(imed.last_indices))


def test_large_models_solve_in_python_between_compiled_steps():
    """From ITERATIVE_MIN_STATES states the estimator's policy iteration is
    optplan.dp.policy_iteration: both loops give the same run, and the gain agrees with a cold
    average-reward solve of p_hat on the good actions."""
    S = ITERATIVE_MIN_STATES
    mdp = random_dirichlet(S, 2, seed=3)
    traces, agents = [], []
    for engine in ("python", "compiled"):
        agents.append(MDPUCB(mdp.R))
        traces.append(run(agents[-1], TabularEnv(mdp), steps=40, seed=0, engine=engine))
    np.testing.assert_array_equal(traces[0].actions, traces[1].actions)
    # MDP-PS's draws over rows longer than a pairwise-summation block
    big = random_dirichlet(300, 2, seed=4)
    ps = run(MDPPS(big.R), TabularEnv(big), steps=5, seed=0, engine="compiled")
    assert ps.steps == 5
    e = agents[1].estimator
    ref = op.solve_average_reward(op.TabularMDP(e.p_hat, mdp.R, action_mask=e.good_actions()))
    assert abs(ref.gain - e.gain) <= 1e-8 * max(1.0, abs(ref.gain))


def test_runs_the_compiled_loop_leaves_to_the_generic_one():
    conic = MDPUCB(COWAN3.R, method="conic")
    assert "conic" in compiled.compiled_reason(conic, TabularEnv(COWAN3))
    with pytest.raises(OptplanError, match='engine="compiled" does not cover.*conic'):
        run(conic, TabularEnv(COWAN3), steps=5, seed=0, engine="compiled")
    assert "episodes" not in (
        compiled.compiled_reason(MDPUCB(COWAN3.R), TabularEnv(COWAN3), 3) or ""
    )


def test_inadmissible_action_raises_alike_in_both_loops():
    """An agent that admits what the environment forbids: the same error at the same step."""
    base = random_dirichlet(3, 2, seed=0)
    mask = np.ones((3, 2), dtype=bool)
    mask[1, 1] = False
    mdp = TabularMDP(base.P, base.R, action_mask=mask)
    errors = []
    for engine in ("python", "compiled"):
        agent = MDPUCB(mdp.R)  # no mask: tries action 1 in state 1
        with pytest.raises(OptplanError, match="not admissible") as info:
            run(agent, TabularEnv(mdp), steps=100, seed=0, engine=engine)
        errors.append((str(info.value), agent.estimator.t, agent.estimator.T.copy()))
    assert errors[0][:2] == errors[1][:2]
    np.testing.assert_array_equal(errors[0][2], errors[1][2])


def test_pairwise_sum_and_products_against_numpy():
    """The helpers' row sums (up to 256 terms) and products on badly scaled inputs, within the
    round-off of a sum of n terms."""
    k = _agent_kernels._compiled()
    rng = np.random.default_rng(5)
    for n in list(range(1, 40)) + [127, 128, 129, 136, 199, 255, 256]:
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n)
        scale = np.abs(x).sum()
        assert abs(k["_row_sum"](x) - math.fsum(x)) <= 4 * n * np.finfo(float).eps * scale, n
        M = rng.random((3, n))
        out = np.empty(3)
        k["_matvec"](M, x, out)
        want = np.array([math.fsum(M[i] * x) for i in range(3)])
        np.testing.assert_allclose(out, want, rtol=0, atol=4 * n * np.finfo(float).eps * scale)
    with pytest.raises(ValueError, match="256"):
        k["_row_sum"](np.ones(257))
