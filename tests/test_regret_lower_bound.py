"""The regret lower bound C(P) (accelerating-ucb-indices-mdp §2.2): fast vs conic on cowan3 and
random ergodic models, its properties (C >= 0, C = 0 when no sub-optimal pair can become
optimal, one row's change moves C as Delta / K predicts), the Honda-Takemura dual as an
independent reference for the rates, and the models where C is not defined."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

import optplan as op
from optplan._checks import OptplanError, OptplanTypeError
from optplan.generators import riverswim
from optplan.problems.regret_lower_bound import (
    CRITICAL_PAIR,
    NEVER_PAIR,
    OPTIMAL_PAIR,
    not_ergodic,
)
from optplan.verification.strategies import ergodic_mdps

COWAN3 = op.load_model("models/cowan3.toml")


def random_ergodic(rng: np.random.Generator, S: int, A: int, zeros: float = 0.3):
    """A random ergodic model: Dirichlet rows with about ``zeros`` of their entries set to 0,
    mixed into the cycle ``s -> s + 1`` (so every policy's chain is irreducible)."""
    P = rng.dirichlet(np.ones(S), size=(S, A)) * (rng.random((S, A, S)) >= zeros)
    w = rng.uniform(0.05, 0.5)
    cycle = np.zeros((S, A, S))
    cycle[np.arange(S), :, (np.arange(S) + 1) % S] = 1.0
    P = (1.0 - w) * P / np.maximum(P.sum(axis=2, keepdims=True), 1e-300) + w * cycle
    P /= P.sum(axis=2, keepdims=True)
    return op.TabularMDP(P, rng.random((S, A)))


def relative_difference(fast, conic) -> float:
    return abs(fast.value - conic.value) / max(abs(conic.value), 1e-300)


def honda_takemura(p, v, t) -> float:
    """``K_inf(p, v, t) = max_{0 <= lam <= 1/(max v - t)} sum_y p_y ln(1 - lam (v_y - t))``
    by bounded scalar maximization (scipy), written out from the dual (Honda & Takemura)."""
    m = p > 0
    hi = 1.0 / (v.max() - t)

    def neg(lam):
        return -float(np.sum(p[m] * np.log1p(-lam * (v[m] - t))))

    res = minimize_scalar(
        neg, bounds=(0.0, hi * (1.0 - 1e-12)), method="bounded", options={"xatol": 1e-13 * hi}
    )
    return -float(res.fun)


# -- cowan3 ------------------------------------------------------------------------------


def test_cowan3_fast_and_conic_agree_and_match_the_independent_value():
    problem = op.RegretLowerBound(COWAN3)
    check = op.cross_check(problem)
    assert check.agree, check.message
    fast, conic = check.fast, check.conic
    # C ~ 1.13 computed independently of optplan; C ln 10^4 ~ 10.4
    assert fast.value == pytest.approx(1.13, abs=0.005)
    assert relative_difference(fast, conic) < 1e-9
    # the optimal policy [0, 1, 0] of the paper; (2, 1) can never become optimal
    assert fast.policy.tolist() == [0, 1, 0]
    assert fast.info["classes"].tolist() == [
        [OPTIMAL_PAIR, CRITICAL_PAIR],
        [CRITICAL_PAIR, OPTIMAL_PAIR],
        [OPTIMAL_PAIR, NEVER_PAIR],
    ]
    assert np.isinf(fast.info["rates"][2, 1]) and fast.x[2, 1] == 0.0
    assert fast.value == pytest.approx(fast.x.sum(), rel=1e-15)


def test_cowan3_rates_match_the_honda_takemura_dual():
    res = op.RegretLowerBound(COWAN3).solve()
    v = res.bias
    for s, a in np.argwhere(res.info["critical"]):
        ref = honda_takemura(COWAN3.P[s, a], v, res.info["targets"][s, a])
        assert res.info["rates"][s, a] == pytest.approx(ref, rel=1e-8)


# -- fast vs conic on random ergodic models --------------------------------------------------


def _compare_many(n: int, seed: int):
    """Cross-check ``n`` random ergodic models: ``(worst relative difference of C, that
    model's smallest critical gap, its condition number sum(sensitivity) / C, the largest gap
    difference over all models, the number of models whose conic answer is ``optimal``)``;
    every model (``optimal_inaccurate`` conic answers included) must agree."""
    rng = np.random.default_rng(seed)
    worst, compared, gap_err = (0.0, None, None), 0, 0.0
    for _ in range(n):
        S, A = int(rng.integers(2, 7)), int(rng.integers(2, 4))
        problem = op.RegretLowerBound(random_ergodic(rng, S, A))
        check = op.cross_check(problem)
        assert check.conic.success and check.agree, (S, A, check.message)
        compared += check.conic.status == "optimal"
        fast, conic = check.fast, check.conic
        gap_err = max(gap_err, float(np.abs(fast.info["gaps"] - conic.info["gaps"]).max()))
        if conic.value > 0 and relative_difference(fast, conic) > worst[0]:
            condition = problem.sensitivity(conic).sum() / conic.value
            smallest = float(conic.info["gaps"][conic.info["critical"]].min())
            worst = (relative_difference(fast, conic), smallest, condition)
    assert compared >= 0.8 * n
    return (*worst, gap_err, compared)


def test_fast_and_conic_agree_on_random_ergodic_models():
    worst = _compare_many(25, seed=36)[0]
    assert worst < 1e-5


@pytest.mark.slow
def test_fast_and_conic_agree_on_500_random_ergodic_models():
    worst, smallest, condition, gap_err, compared = _compare_many(500, seed=2026)
    print(
        f"\nall 500 models agree ({compared} with a conic answer 'optimal', the others "
        f"'optimal_inaccurate'); worst relative |C_fast - C_conic| / C_conic: {worst:.3g} (that "
        f"model: smallest critical gap {smallest:.3g}, condition number of C {condition:.3g}); "
        f"largest gap difference over all models: {gap_err:.3g}"
    )
    assert worst < 1e-5


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ergodic_mdps(max_states=8, max_actions=3))
def test_c_is_nonnegative_and_the_sum_of_its_contributions(inputs):
    res = op.RegretLowerBound(op.TabularMDP(inputs["P"], inputs["R"])).solve()
    assert res.status == "optimal", res.message
    assert res.value >= 0.0
    assert (res.x >= 0).all() and res.value == pytest.approx(res.x.sum(), rel=1e-12, abs=0)
    classes = res.info["classes"]
    rates = res.info["rates"]
    assert (rates[classes == CRITICAL_PAIR] > 0).all()
    assert np.isinf(rates[classes == NEVER_PAIR]).all()
    assert (res.x[classes != CRITICAL_PAIR] == 0).all()
    # every state keeps an optimal action
    assert (classes == OPTIMAL_PAIR).any(axis=1).all()


# -- properties ----------------------------------------------------------------------------


def _never_optimal_model(rng, S: int, A: int, margin: float):
    """A model whose action 0 is optimal everywhere and every other action's reward is
    ``g + v_x - max v - margin`` (``v`` the bias of "always 0"): with ``margin > 0`` no
    sub-optimal pair can become optimal; with ``margin < 0`` each can."""
    mdp = random_ergodic(rng, S, A)
    R = mdp.R.copy()
    R[:, 1:] = -10.0  # action 0 optimal: its gain and bias do not depend on the others
    plan = op.AverageRewardPlanning(op.TabularMDP(mdp.P, R)).solve()
    assert (plan.policy == 0).all()
    g, v = plan.gain, plan.bias
    R[:, 1:] = (g + v - v.max() - margin)[:, None]
    return op.TabularMDP(mdp.P, R)


@pytest.mark.parametrize("seed", range(8))
def test_c_is_zero_when_no_suboptimal_pair_can_become_optimal(seed):
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(2, 6)), int(rng.integers(2, 4))
    problem = op.RegretLowerBound(_never_optimal_model(rng, S, A, margin=1e-3))
    for method in ("fast", "conic"):
        res = problem.solve(method=method)
        assert res.value == 0.0
        assert (res.info["classes"][:, 1:] == NEVER_PAIR).all()
    # a hair the other way round: every sub-optimal pair can become optimal, C > 0
    rng = np.random.default_rng(seed)
    res = op.RegretLowerBound(_never_optimal_model(rng, S, A, margin=-1e-3)).solve()
    assert (res.info["classes"] == CRITICAL_PAIR).any() and res.value > 0


@pytest.mark.parametrize("seed", range(10))
def test_one_row_perturbed_moves_c_as_delta_over_k_predicts(seed):
    """Changing the row of a sub-optimal pair leaves the optimal bias and every other pair
    alone: C moves by ``Delta' / K' - Delta / K`` of that pair alone, with ``Delta'`` and
    ``K' = D(p', v, rho)`` computed directly."""
    rng = np.random.default_rng(100 + seed)
    crit = np.zeros((0, 2))
    while crit.size == 0:  # a model with a critical pair (most have several)
        mdp = random_ergodic(rng, int(rng.integers(3, 7)), int(rng.integers(2, 4)), zeros=0.0)
        before = op.RegretLowerBound(mdp).solve()
        crit = np.argwhere(before.info["critical"])
    s, a = crit[rng.integers(len(crit))]
    v, rho = before.bias, before.info["targets"][s, a]
    p = mdp.P[s, a]
    # move a little mass towards the best state (the rate shrinks) or away from it
    best, worst = np.eye(mdp.n_states)[v.argmax()], np.eye(mdp.n_states)[v.argmin()]
    for eps in (0.02, -0.02):
        p_new = (1 - abs(eps)) * p + abs(eps) * (best if eps > 0 else worst)
        P = mdp.P.copy()
        P[s, a] = p_new
        after = op.RegretLowerBound(op.TabularMDP(P, mdp.R)).solve()
        gap_new = rho - p_new @ v
        if gap_new <= 0:  # the pair became optimal: no longer a prediction of 1/K
            continue
        K_new = op.KLInfRate(p_new, v, rho).solve().value
        predicted = before.value - before.x[s, a] + gap_new / K_new
        assert after.value == pytest.approx(predicted, rel=1e-9)
        assert after.info["rates"][s, a] == pytest.approx(K_new, rel=1e-12)
        others = np.ones_like(before.x, bool)
        others[s, a] = False
        np.testing.assert_allclose(after.x[others], before.x[others], rtol=1e-9, atol=1e-12)
        # mass moved to the worst state makes the alternative harder to reach: K grows
        if eps < 0:
            assert after.info["rates"][s, a] > before.info["rates"][s, a]


@pytest.mark.parametrize("seed", range(5))
def test_rates_match_the_honda_takemura_dual_on_random_models(seed):
    rng = np.random.default_rng(200 + seed)
    mdp = random_ergodic(rng, 5, 3)
    res = op.RegretLowerBound(mdp).solve()
    crit = np.argwhere(res.info["critical"])
    assert crit.size
    for s, a in crit[:4]:
        ref = honda_takemura(mdp.P[s, a], res.bias, res.info["targets"][s, a])
        assert res.info["rates"][s, a] == pytest.approx(ref, rel=1e-7)


# -- where C is not defined --------------------------------------------------------------


def test_multichain_model_is_refused_with_the_reason():
    P = np.zeros((3, 2, 3))
    P[:, 0] = np.eye(3)  # action 0 stays put: every state is its own recurrent class
    P[:, 1] = np.roll(np.eye(3), 1, axis=1)
    with pytest.raises(OptplanError, match="not ergodic.*never leaves the states"):
        op.RegretLowerBound(op.TabularMDP(P, np.zeros((3, 2))))


def test_communicating_but_not_ergodic_model_is_refused():
    with pytest.raises(OptplanError, match="not ergodic.*state 1 is never reached"):
        op.RegretLowerBound(riverswim(6))


def test_masked_model_is_refused_naming_the_pair():
    P = np.broadcast_to(np.full(3, 1 / 3), (3, 2, 3)).copy()
    mask = np.array([[True, True], [True, False], [True, True]])
    with pytest.raises(
        OptplanError, match=r"action_mask excludes 1 pair\(s\), e.g. \(s, a\) = \(1, 1\)"
    ):
        op.RegretLowerBound(op.TabularMDP(P, np.zeros((3, 2)), action_mask=mask))


@pytest.mark.parametrize(
    "args, error, match",
    [
        (("models/cowan3.toml",), OptplanTypeError, "mdp must be a TabularMDP"),
        ((COWAN3, -1e-3), OptplanError, "tie_tol"),
        ((COWAN3, 1.0), OptplanError, r"tie_tol must lie in \[0, 1\)"),
        ((COWAN3, float("nan")), OptplanError, "tie_tol"),
    ],
)
def test_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        op.RegretLowerBound(*args)


def test_not_ergodic_on_a_long_chain_and_its_cycled_version():
    S = 200
    idx = np.arange(S)
    P = np.zeros((S, 2, S))
    P[idx, 0, np.maximum(idx - 1, 0)] = 1.0
    P[idx, 1, np.minimum(idx + 1, S - 1)] += 0.6
    P[idx, 1, idx] += 0.4
    assert "not ergodic" in not_ergodic(P)
    P[idx, :, (idx + 1) % S] += 0.1
    P /= P.sum(axis=2, keepdims=True)
    assert not_ergodic(P) is None


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_not_ergodic_agrees_with_enumerating_every_policy(S, A, seed):
    """The peeling test against brute force: every deterministic policy's chain checked for
    irreducibility (reachability by matrix powers)."""
    rng = np.random.default_rng(seed)
    P = rng.random((S, A, S)) * (rng.random((S, A, S)) < 0.4)
    P[P.sum(axis=2) == 0, 0] = 1.0
    P /= P.sum(axis=2, keepdims=True)
    irreducible = True
    for k in range(A**S):  # every deterministic policy (at most 3^6)
        policy = np.array([(k // A**s) % A for s in range(S)])
        reach = (P[np.arange(S), policy] > 0) | np.eye(S, dtype=bool)
        for _ in range(S):
            reach = reach | ((reach.astype(int) @ reach.astype(int)) > 0)
        irreducible &= bool(reach.all())
    assert (not_ergodic(P) is None) == irreducible


# -- runs report regret against the bound ----------------------------------------------------


def test_trace_carries_c_and_the_ratio_on_cowan3_and_none_on_riverswim():
    from optplan.agents import make_agent
    from optplan.envs import TabularEnv
    from optplan.experiments import run

    env = TabularEnv(COWAN3)
    tr = run(make_agent("mdp-ucb", env), env, steps=300, seed=3)
    C = op.RegretLowerBound(COWAN3).solve().value
    assert tr.lower_bound == C and tr.lower_bound_note == ""
    t = np.arange(1, 301)
    assert np.isnan(tr.lower_bound_ratio[0])
    np.testing.assert_allclose(tr.lower_bound_ratio[1:], tr.regret[1:] / (C * np.log(t[1:])))
    np.testing.assert_allclose(
        tr.gap_lower_bound_ratio[1:], tr.gap_regret[1:] / (C * np.log(t[1:]))
    )
    s = tr.summary()
    assert s["lower_bound"] == C
    assert s["lower_bound_ratio"] == pytest.approx(tr.regret[-1] / (C * np.log(300)))
    assert s["gap_lower_bound_ratio"] == pytest.approx(tr.gap_regret[-1] / (C * np.log(300)))

    river = TabularEnv(riverswim(4))
    tr = run(make_agent("random", river), river, steps=20, seed=0)
    assert tr.lower_bound is None and "not ergodic" in tr.lower_bound_note
    assert tr.lower_bound_ratio is None and tr.summary()["lower_bound_ratio"] is None


def test_sweep_results_carry_c_the_ratio_curves_and_the_figure_line(tmp_path, capsys):
    from optplan import cli
    from optplan.plots.figures import lower_bound_figure, regret_figure
    from optplan.sweeps import load_results

    sweep = tmp_path / "lb.toml"
    sweep.write_text(
        'name = "lb"\nseed = 1\nseeds = 2\nsteps = 200\n[[agents]]\nname = "mdp-dmed"\n'
        '[[envs]]\nname = "model"\nlabel = "cowan3"\nparams = { path = "models/cowan3.toml" }\n'
    )
    out = tmp_path / "res"
    assert cli.main(["sweep", str(sweep), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    results = load_results(out)
    C = op.RegretLowerBound(COWAN3).solve().value
    rows = results.rows
    assert [r["lower_bound"] for r in rows] == [C, C]
    assert all(r["lower_bound_ratio"] > 0 for r in rows)
    recs = results.groups()[("mdp-dmed", "cowan3")]
    t, ratio = results.curve_matrix(recs, "gap_lower_bound_ratio")
    _, gap = results.curve_matrix(recs, "gap_regret")
    inside = t > 1
    np.testing.assert_allclose(ratio[:, inside], gap[:, inside] / (C * np.log(t[inside])))
    fig = regret_figure(results, metric="gap_regret", lower_bound=True)
    line = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "C(P) ln t (lower bound)"]
    assert len(line) == 1
    np.testing.assert_allclose(line[0].get_ydata(), C * np.log(line[0].get_xdata()))
    fig = regret_figure(results, metric="lower_bound_ratio", lower_bound=True)
    assert fig.axes[0].get_ylabel() == "regret / (C(P) ln t)"
    fig = lower_bound_figure(results, t_min=10.0)
    for ax in fig.axes:
        (bound,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("C(P) = ")]
        assert bound.get_ydata()[0] == pytest.approx(C)
    gap_panel = fig.axes[0].get_lines()[0]  # mdp-dmed's mean gap regret / ln t
    keep = t >= 10.0
    np.testing.assert_allclose(gap_panel.get_ydata(), gap[:, keep].mean(axis=0) / np.log(t[keep]))


def test_bench_planning_times_the_lower_bound_and_both_paths_agree():
    from optplan.bench import STEM_SUITES
    from optplan.bench._common import Runs
    from optplan.bench.planning import bench_planning

    assert STEM_SUITES["regret_lower_bound"] == "planning"
    runs = Runs(sizes=(4,), n_actions=2, repeats=2, solvers=("CLARABEL",), seed=1)
    (row,) = bench_planning(runs, criteria=("lower_bound",))
    assert row["criterion"] == "lower_bound" and row["CLARABEL_fail"] == 0
    assert row["CLARABEL_err"] < 1e-6 and row["fast_s"] > 0


@pytest.mark.parametrize("scale", [1e-300, 1e-100, 1e100, 1e300])
def test_the_bound_at_extreme_reward_scales(scale):
    """``C(P)`` scales with the rewards (gaps over scale-free rates): solved at every scale,
    where squares of the bias once overflowed in the rates' root finding."""
    mdp = op.load_model("models/cowan3.toml")
    base = op.RegretLowerBound(mdp).solve()
    res = op.RegretLowerBound(op.TabularMDP(mdp.P, mdp.R * scale)).solve()
    assert res.status == "optimal", res.message
    np.testing.assert_allclose(res.value / scale, base.value, rtol=1e-12)
