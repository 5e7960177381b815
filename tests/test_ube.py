"""UncertaintyBellman and MomentMatchingVariance: fast paths against Clarabel (values, u and the
dual occupancies) on random and edge-case instances, the layered recursion against the direct
solve on DAGs, the local-uncertainty rules against their definitions, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan import uncertainty as unc
from optplan.result import NUMERICAL_ERROR, OPTIMAL

# ---------------------------------------------------------------- instances


def transitions(rng, shape, S, density):
    """Rows over ``S`` next states; ``density < 1`` keeps a random few (at least one)."""
    P = rng.random((*shape, S)) ** 3
    if density < 1.0:
        keep = rng.random((*shape, S)) < density
        keep[..., 0] |= ~keep.any(axis=-1)  # every row keeps a state
        P = np.where(keep, P + 1e-3, 0.0)
    return P / P.sum(axis=-1, keepdims=True)


def policy(rng, shape, kind):
    *lead, A = shape
    if kind == "deterministic":
        return rng.integers(0, A, size=lead)
    pi = rng.random(shape) ** 2
    if kind == "sparse":
        pi[rng.random(shape) < 0.5] = 0.0
        pi[..., 0] += pi.sum(axis=-1) == 0
    return pi / pi.sum(axis=-1, keepdims=True)


def local(rng, shape, kind):
    if kind == "zero":
        return np.zeros(shape)
    nu = rng.random(shape)
    if kind == "some_zero":
        nu[rng.random(shape) < 0.5] = 0.0
    if kind == "spread":  # tabular 1/n over counts 1..10^4
        nu = 1.0 / rng.integers(1, 10_000, size=shape)
    return nu


def continuing(seed, S, A, density, pi_kind, nu_kind, discount, absorbing):
    rng = np.random.default_rng(seed)
    P = transitions(rng, (S, A), S, density)
    if absorbing:  # the last state is absorbing under every action
        P[-1] = 0.0
        P[-1, :, -1] = 1.0
    return op.UncertaintyBellman(
        mean_transitions=P,
        policy=policy(rng, (S, A), pi_kind),
        local=local(rng, (S, A), nu_kind),
        discount=discount,
    )


def layered(seed, L, S, A, density, pi_kind, nu_kind, discount):
    rng = np.random.default_rng(seed)
    return op.UncertaintyBellman(
        mean_transitions=transitions(rng, (L, S, A), S, density),
        policy=policy(rng, (L, S, A), pi_kind),
        local=local(rng, (L, S, A), nu_kind),
        discount=discount,
        weights=rng.uniform(0.5, 2.0, size=(L, S, A)),
    )


def flattened(prob: op.UncertaintyBellman, discount: float) -> op.UncertaintyBellman:
    """The layered ``prob`` as a continuing DAG: states ``(l, s)`` and an absorbing terminal
    state with zero local uncertainty, which the last layer enters."""
    P, pi, nu, w = prob.mean_transitions, prob.policy, prob.local, prob.weights
    L, S, A, _ = P.shape
    n = L * S + 1
    Q = np.zeros((n, A, n))
    for l in range(L):
        rows = slice(l * S, (l + 1) * S)
        if l + 1 < L:
            Q[rows, :, (l + 1) * S : (l + 2) * S] = P[l]
        else:
            Q[rows, :, -1] = 1.0
    Q[-1, :, -1] = 1.0
    flat_pi = np.vstack([pi.reshape(L * S, A), np.full((1, A), 1.0 / A)])
    flat_nu = np.vstack([nu.reshape(L * S, A), np.zeros((1, A))])
    flat_w = np.vstack([w.reshape(L * S, A), np.ones((1, A))])
    return op.UncertaintyBellman(
        mean_transitions=Q, policy=flat_pi, local=flat_nu, discount=discount, weights=flat_w
    )


def assert_cross_check(prob, stats, solver="CLARABEL"):
    chk = op.cross_check(prob, solver=solver)
    assert chk.fast.status == OPTIMAL, chk.fast.message
    assert chk.agree, chk.message
    stats.setdefault("statuses", {}).setdefault(chk.conic.status, 0)
    stats["statuses"][chk.conic.status] += 1
    for k in ("x", "multiplier"):
        stats[k] = max(stats.get(k, 0.0), chk.rel_err[k])
    return chk


SHAPES = dict(
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([1.0, 0.15]),
    pi_kind=st.sampled_from(["stochastic", "deterministic", "sparse"]),
    nu_kind=st.sampled_from(["random", "random", "zero", "some_zero", "spread"]),
)

# ---------------------------------------------------------------- cross-checks


@pytest.mark.slow
def test_continuing_fast_equals_clarabel_300():
    """300 instances, S up to 40, A up to 5, dense and sparse, absorbing states, gamma 0..0.99."""
    stats = {}

    @settings(max_examples=300)
    @given(
        **SHAPES,
        S=st.integers(1, 40),
        A=st.integers(1, 5),
        discount=st.sampled_from([0.0, 0.3, 0.9, 0.99]),
        absorbing=st.booleans(),
    )
    def check(seed, S, A, density, pi_kind, nu_kind, discount, absorbing):
        prob = continuing(seed, S, A, density, pi_kind, nu_kind, discount, absorbing)
        chk = assert_cross_check(prob, stats)
        stats["runs"] = stats.get("runs", 0) + 1
        # value = w.u = y.nu: primal and dual objectives agree on the fast path
        assert chk.fast.value == pytest.approx(float(np.sum(chk.fast.multiplier * prob.local)))

    check()
    print(stats)
    assert stats["runs"] == 300
    assert stats["statuses"].get(OPTIMAL, 0) >= 290, stats


@pytest.mark.slow
def test_layered_fast_equals_clarabel_and_the_flat_dag_300():
    """300 layered instances (discount up to 1): the recursion equals Clarabel's LP and the
    direct solve of the same model written as a continuing DAG with a terminal state."""
    stats = {}

    @settings(max_examples=300)
    @given(
        **SHAPES,
        L=st.integers(1, 6),
        S=st.integers(1, 12),
        A=st.integers(1, 4),
        discount=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    )
    def check(seed, L, S, A, density, pi_kind, nu_kind, discount):
        prob = layered(seed, L, S, A, density, pi_kind, nu_kind, discount)
        chk = assert_cross_check(prob, stats)
        stats["runs"] = stats.get("runs", 0) + 1
        if discount < 1.0:  # the continuing form needs gamma < 1
            flat = flattened(prob, discount).solve()
            assert flat.status == OPTIMAL
            scale_u = 1.0 + np.abs(chk.fast.x).max()
            scale_y = 1.0 + np.abs(chk.fast.multiplier).max()
            d_u = np.abs(flat.x[:-1].reshape(prob.local.shape) - chk.fast.x).max()
            d_y = np.abs(flat.multiplier[:-1].reshape(prob.local.shape) - chk.fast.multiplier)
            assert d_u <= 1e-12 * scale_u and d_y.max() <= 1e-12 * scale_y
            stats["dag"] = stats.get("dag", 0) + 1

    check()
    print(stats)
    assert stats["runs"] == 300 and stats["dag"] >= 200
    assert stats["statuses"].get(OPTIMAL, 0) >= 290, stats


def mm_problem(seed, S, A, counts, pi_kind, discount, values):
    rng = np.random.default_rng(seed)
    alpha = 1.0 + (rng.integers(0, 50, size=(S, A, S)) if counts == "data" else np.zeros((S, A, S)))
    if counts == "sparse":  # support of the Dirichlet on a few states
        alpha = np.where(rng.random((S, A, S)) < 0.3, 0.0, rng.uniform(0.1, 3.0, (S, A, S)))
        alpha[..., 0] += (alpha.sum(axis=-1) == 0) * 1.0
    return op.MomentMatchingVariance(
        alpha=alpha,
        reward_mean=rng.normal(size=(S, A, S)),
        reward_var=rng.random((S, A, S)) / (1.0 + rng.integers(0, 20, size=(S, A, S))),
        policy=policy(rng, (S, A), pi_kind),
        discount=discount,
        values=None if values == "evaluated" else rng.normal(size=S) * 5,
    )


@pytest.mark.slow
def test_moment_matching_fast_equals_clarabel_300():
    stats = {}

    @settings(max_examples=300)
    @given(
        seed=st.integers(0, 2**32 - 1),
        S=st.integers(1, 40),
        A=st.integers(1, 5),
        counts=st.sampled_from(["prior", "data", "sparse"]),
        pi_kind=st.sampled_from(["stochastic", "deterministic"]),
        discount=st.sampled_from([0.0, 0.5, 0.9]),
        values=st.sampled_from(["evaluated", "given"]),
    )
    def check(seed, S, A, counts, pi_kind, discount, values):
        prob = mm_problem(seed, S, A, counts, pi_kind, discount, values)
        chk = assert_cross_check(prob, stats)
        stats["runs"] = stats.get("runs", 0) + 1
        terms = chk.fast.info
        np.testing.assert_allclose(
            terms["w"],
            terms["A"] + terms["B"] + 2 * discount * terms["C"] + discount**2 * terms["D"],
            rtol=1e-12,
            atol=1e-14,
        )

    check()
    print(stats)
    assert stats["runs"] == 300
    assert stats["statuses"].get(OPTIMAL, 0) >= 290, stats


@pytest.mark.parametrize("solver", ["ECOS", "SCS"])
def test_other_solvers_agree(solver):
    stats = {}
    for seed in range(15):
        prob = continuing(
            seed, 1 + seed % 12, 1 + seed % 4, 0.3, "stochastic", "random", 0.9, seed % 2
        )
        assert_cross_check(prob, stats, solver)
        lay = layered(seed, 1 + seed % 4, 1 + seed % 6, 1 + seed % 3, 1.0, "sparse", "random", 1.0)
        assert_cross_check(lay, stats, solver)


# ---------------------------------------------------------------- edge cases and paths


def test_iteration_equals_direct():
    for seed in range(20):
        prob = continuing(
            seed, 30, 4, 0.1, "stochastic", "random", [0.5, 0.9, 0.99][seed % 3], True
        )
        d, it = prob.solve(), prob.solve(algorithm="iteration", tol=1e-13)
        assert it.status == OPTIMAL and it.iterations > 1
        np.testing.assert_allclose(it.x, d.x, rtol=1e-11, atol=0)
        np.testing.assert_allclose(it.multiplier, d.multiplier, rtol=1e-11, atol=0)


def test_iteration_cap_is_a_status():
    prob = continuing(3, 10, 2, 1.0, "stochastic", "random", 0.99, False)
    res = prob.solve(algorithm="iteration", max_iter=5)
    assert res.status == "max_iter" and "5 iterations" in res.message


def test_edge_cases_have_their_closed_forms():
    rng = np.random.default_rng(0)
    S, A = 7, 3
    P = rng.dirichlet(np.ones(S), size=(S, A))
    nu = rng.random((S, A))
    pi = rng.integers(0, A, size=S)
    for method in ("fast", "conic"):
        # gamma = 0: u = nu, y = w
        res = op.UncertaintyBellman(P, pi, nu, 0.0).solve(method=method)
        np.testing.assert_allclose(res.x, nu, atol=1e-8)
        np.testing.assert_allclose(res.multiplier, np.ones((S, A)), atol=1e-8)
        # zero local uncertainty: u = 0
        res = op.UncertaintyBellman(P, pi, np.zeros((S, A)), 0.9).solve(method=method)
        np.testing.assert_allclose(res.x, 0.0, atol=1e-8)
        # every state absorbing, constant local c: u = c / (1 - gamma^2)
        absorbing = np.broadcast_to(np.eye(S)[:, None, :], (S, A, S))
        res = op.UncertaintyBellman(absorbing, pi, np.full((S, A), 2.0), 0.9).solve(method=method)
        np.testing.assert_allclose(res.x, 2.0 / (1 - 0.81), rtol=1e-8)


def test_deterministic_policy_equals_its_one_hot_form():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(5), size=(5, 3))
    nu = rng.random((5, 3))
    a = rng.integers(0, 3, size=5)
    idx = op.UncertaintyBellman(P, a, nu, 0.8).solve()
    hot = op.UncertaintyBellman(P, np.eye(3)[a], nu, 0.8).solve()
    np.testing.assert_array_equal(idx.x, hot.x)


def test_ill_conditioned_system_is_a_status_not_a_wrong_number():
    """gamma^2 = 1 - 2^-52 with a closed class: I - gamma^2 P_pi is singular to double
    precision (the largest discount below 1 squares to 1 - 2^-52... or rounds to 1)."""
    gamma = np.nextafter(1.0, 0.0)
    P = np.zeros((2, 1, 2))
    P[0, 0, 1] = P[1, 0, 0] = 1.0  # a 2-cycle
    prob = op.UncertaintyBellman(P, np.zeros(2, dtype=int), np.ones((2, 1)), gamma)
    res = prob.solve()
    if res.status == OPTIMAL:  # then it must be the right number
        assert prob.residual(res.x) <= 1e-10 * (1 + np.abs(res.x).max())
    else:
        assert res.status == NUMERICAL_ERROR and np.isnan(res.value) and res.message


def test_moment_matching_is_the_ube_with_its_local_term():
    prob = mm_problem(4, 6, 2, "data", "deterministic", 0.9, "evaluated")
    direct = op.UncertaintyBellman(
        prob.alpha / prob.alpha.sum(-1, keepdims=True), prob.bellman.policy, prob.terms.w, 0.9
    ).solve()
    np.testing.assert_array_equal(prob.solve().x, direct.x)


def test_moment_matching_values_default_to_the_policy_value_of_the_mean_model():
    prob = mm_problem(5, 5, 3, "data", "stochastic", 0.8, "evaluated")
    pbar = prob.alpha / prob.alpha.sum(-1, keepdims=True)
    rbar = np.sum(pbar * prob.reward_mean, -1)
    pi = prob.bellman.policy
    V = prob.values
    Q = rbar + 0.8 * pbar @ V
    np.testing.assert_allclose(V, np.sum(pi * Q, -1), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- local terms


def test_moment_matching_local_matches_monte_carlo():
    """The closed-form Dirichlet moments against 400k posterior draws (the test oracle)."""
    rng = np.random.default_rng(11)
    S, gamma = 4, 0.9
    alpha = rng.uniform(0.5, 4.0, size=(1, 1, S))
    mean, var = rng.normal(size=(1, 1, S)), rng.uniform(0.1, 1.0, size=(1, 1, S))
    V = rng.normal(size=S) * 3
    t = unc.moment_matching_local(alpha, mean, var, V, gamma)
    n = 400_000
    P = rng.dirichlet(alpha[0, 0], size=n)
    Pm, PV = P @ mean[0, 0], P @ V
    mc = {
        "A": Pm.var(),
        "B": (P @ var[0, 0]).mean(),
        "C": np.cov(Pm, PV)[0, 1],
        "D": PV.var(),
    }
    for k, v in mc.items():
        sd = np.sqrt(2.0 / n) * max(abs(v), Pm.var() + PV.var())  # a few MC standard errors
        assert abs(float(getattr(t, k)[0, 0]) - v) <= 5 * sd, (k, float(getattr(t, k)[0, 0]), v)
    # B is an expectation of a linear function: exact in the mean
    assert float(t.B[0, 0]) == pytest.approx(float((alpha[0, 0] / alpha.sum()) @ var[0, 0]))


def test_dirichlet_sums_match_their_definitions():
    rng = np.random.default_rng(2)
    alpha = rng.uniform(0.2, 5.0, size=(3, 2, 6))
    alpha[0, 0, :2] = 0.0  # a smaller support
    a0 = alpha.sum(-1, keepdims=True)
    p = alpha / a0
    var = p * (1 - p) / (a0 + 1)
    np.testing.assert_allclose(unc.dirichlet_variance_sum(alpha), var.sum(-1), rtol=1e-13)
    ratio = np.where(p > 0, var / np.where(p > 0, p, 1), 0).sum(-1)
    np.testing.assert_allclose(unc.dirichlet_variance_ratio_sum(alpha), ratio, rtol=1e-13)
    x = rng.normal(size=6)
    cov = np.einsum("...i,...ij,j->...", x, _dirichlet_cov(alpha), x)
    np.testing.assert_allclose(unc.dirichlet_covariance(alpha, x, x), cov, rtol=1e-12)


def _dirichlet_cov(alpha):
    a0 = alpha.sum(-1, keepdims=True)
    p = alpha / a0
    eye = np.eye(alpha.shape[-1])
    return (eye * p[..., None, :] - p[..., :, None] * p[..., None, :]) / (a0[..., None] + 1)


def test_local_rules_by_name():
    rng = np.random.default_rng(3)
    S, A, gamma, rmax = 5, 2, 0.9, 1.0
    qm = unc.q_max(rmax, discount=gamma)
    assert qm == pytest.approx(10.0) and unc.q_max(2.0, horizon=7) == 14.0
    counts = rng.integers(0, 30, size=(S, A, S)).astype(float)
    alpha = counts + 1.0
    n = counts.sum(-1)
    tab = unc.local_uncertainty("tabular", counts=n, reward_sd=0.5, q_max=qm, discount=gamma)
    np.testing.assert_allclose(tab, (0.25 + 0.81 * 100) / np.maximum(n, 1))
    rvar = 0.25 / np.maximum(n, 1)
    lem = unc.local_uncertainty("lemma1", reward_var=rvar, alpha=alpha, q_max=qm, discount=gamma)
    # Lemma 1 with a Dirichlet posterior never exceeds the tabular bound (sum Var P <= 1/n)
    assert (lem <= tab + 1e-12).all()
    mean, var = rng.normal(size=(S, A, S)), rng.random((S, A, S))
    draft = unc.local_uncertainty("draft", alpha=alpha, reward_mean=mean, reward_var=var, q_max=qm)
    p = alpha / alpha.sum(-1, keepdims=True)
    expect = (
        (p * var).sum(-1)
        + unc.dirichlet_covariance(alpha, mean, mean)
        + qm**2 * (S - 1) / (alpha.sum(-1) + 1)
    )
    np.testing.assert_allclose(draft, expect, rtol=1e-13)


# ---------------------------------------------------------------- bad input


def _ok():
    rng = np.random.default_rng(0)
    return rng.dirichlet(np.ones(3), size=(3, 2)), np.full((3, 2), 0.5), np.ones((3, 2))


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(policy=np.full((3, 2), 0.7)), "policy must sum to 1"),
        (dict(policy=np.ones((2, 2)) / 2), "policy has shape"),
        (dict(policy=np.array([0, 1, 2])), "policy names action 2"),
        (dict(local=-np.ones((3, 2))), "local must be >= 0"),
        (dict(local=np.ones((3, 3))), "local has shape"),
        (dict(discount=1.0), r"discount must lie in \[0, 1\)"),
        (dict(discount=-0.1), "discount must lie in"),
        (dict(mean_transitions=np.ones((3, 2, 3))), "mean_transitions must sum to 1"),
        (dict(mean_transitions=np.ones((3, 2, 4)) / 4), r"mean_transitions must have shape"),
        (dict(local=np.full((3, 2), np.nan)), "local .*finite"),
        (dict(weights=np.zeros((3, 2))), "weights must be > 0"),
    ],
)
def test_bad_ube_input_names_the_field(change, match):
    P, pi, nu = _ok()
    kw = dict(mean_transitions=P, policy=pi, local=nu, discount=0.9) | change
    with pytest.raises(ValueError, match=match):
        op.UncertaintyBellman(**kw)


def test_layered_form_accepts_discount_one_and_refuses_more():
    P, pi, nu = _ok()
    ok = op.UncertaintyBellman(
        P[None].repeat(3, 0), pi[None].repeat(3, 0), nu[None].repeat(3, 0), 1.0
    )
    assert ok.solve().status == OPTIMAL
    with pytest.raises(ValueError, match=r"discount must lie in \[0, 1\]"):
        op.UncertaintyBellman(P[None], pi[None], nu[None], 1.5)


@pytest.mark.parametrize(
    "kind, kwargs, match",
    [
        ("tabular", dict(counts=np.ones(3), reward_sd=1.0, q_max=-1.0, discount=0.9), "q_max"),
        ("tabular", dict(counts=-np.ones(3), reward_sd=1.0, q_max=1.0, discount=0.9), "counts"),
        (
            "lemma1",
            dict(reward_var=np.ones((2, 1)), alpha=-np.ones((2, 1, 2)), q_max=1.0, discount=0.5),
            "alpha",
        ),
        (
            "draft",
            dict(
                alpha=np.ones((2, 1, 2)),
                reward_mean=np.zeros((2, 1, 3)),
                reward_var=np.zeros((2, 1, 2)),
                q_max=1.0,
            ),
            "reward_mean has shape",
        ),
        ("nonsense", {}, "kind must be one of"),
    ],
)
def test_bad_local_input_names_the_field(kind, kwargs, match):
    with pytest.raises(ValueError, match=match):
        unc.local_uncertainty(kind, **kwargs)


@pytest.mark.parametrize("bound", [0.0, -1.0, np.inf, np.nan])
def test_reward_bound_must_be_positive_and_finite(bound):
    with pytest.raises(ValueError, match="reward_bound"):
        unc.q_max(bound, discount=0.9)


def test_bad_moment_matching_input():
    alpha = np.ones((3, 2, 3))
    z = np.zeros((3, 2, 3))
    with pytest.raises(ValueError, match="reward_var must be >= 0"):
        op.MomentMatchingVariance(alpha, z, -np.ones((3, 2, 3)), np.zeros(3, dtype=int), 0.9)
    with pytest.raises(ValueError, match="alpha has a negative entry"):
        op.MomentMatchingVariance(-alpha, z, z, np.zeros(3, dtype=int), 0.9)
    with pytest.raises(ValueError, match="values has 2 entries"):
        op.MomentMatchingVariance(alpha, z, z, np.zeros(3, dtype=int), 0.9, values=np.zeros(2))


def test_tabular_rule_takes_a_per_pair_sd():
    n = np.array([[1.0, 4.0], [0.0, 10.0]])
    sd = np.array([[1.0, 2.0], [0.5, 0.0]])
    out = unc.local_tabular(n, sd, q_max=3.0, discount=0.5)
    np.testing.assert_allclose(out, (sd**2 + 0.25 * 9.0) / np.maximum(n, 1))
    with pytest.raises(ValueError, match="reward_sd has shape"):
        unc.local_tabular(n, np.ones(3), q_max=3.0, discount=0.5)
    with pytest.raises(ValueError, match="reward_sd must be >= 0"):
        unc.local_tabular(n, -1.0, q_max=3.0, discount=0.5)
