"""The Normal-Gamma and Dirichlet posteriors of the Bayesian-methods study:
conjugate-update identities, the batch update against single updates, Monte-Carlo moments on
10^5 draws (fixed seeds) and scipy's t / gamma / normal distributions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import optplan.uncertainty as unc
from optplan._checks import OptplanError
from optplan.posteriors import (
    DRAFT_REWARD_PRIOR,
    PRIOR_MDP_PRIOR,
    Dirichlet,
    NormalGamma,
    dirichlet_covariance,
    dirichlet_variance,
    normal_gamma_update,
    transition_statistics,
)

N_DRAWS = 100_000

positive = st.floats(0.05, 20.0)
rewards_st = st.lists(st.floats(-10.0, 10.0), min_size=1, max_size=25)


def _ng_logpdf(mu, tau, mu0, lam, alpha, beta):
    """log NG(mu, tau) from scipy's gamma and normal densities (independent of optplan)."""
    return stats.gamma.logpdf(tau, alpha, scale=1.0 / beta) + stats.norm.logpdf(
        mu, mu0, 1.0 / np.sqrt(lam * tau)
    )


# --- batch update, single updates, conjugacy ---------------------------------------------------


@given(st.floats(-5.0, 5.0), positive, positive, positive, rewards_st)
def test_batch_update_equals_n_single_updates(mu0, lam, alpha, beta, rewards):
    prior = NormalGamma(mu0, lam, alpha, beta)
    seq = prior
    for r in rewards:
        seq = seq.update_single(r)
    r = np.array(rewards)
    batch = prior.update(r.size, r.sum(), np.sum(r * r))
    for a, b in zip(batch.params, seq.params, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 2),
                          st.floats(-3.0, 3.0)), min_size=1, max_size=40))  # fmt: skip
def test_vectorized_batch_update_equals_single_updates_by_index(transitions):
    """Over all (s, a, s'): transition_statistics + one batch update = a single update per
    transition at its index."""
    s, a, s2, r = (np.array(x) for x in zip(*transitions, strict=True))
    prior = NormalGamma(*DRAFT_REWARD_PRIOR, shape=(3, 2, 3))
    seq = prior
    for i in range(len(r)):
        seq = seq.update_single(r[i], (s[i], a[i], s2[i]))
    batch = prior.update(*transition_statistics(s, a, r, s2, 3, 2))
    for x, y in zip(batch.params, seq.params, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)


def test_transition_statistics_match_a_loop():
    rng = np.random.default_rng(3)
    s, a, s2 = rng.integers(0, 4, 200), rng.integers(0, 3, 200), rng.integers(0, 4, 200)
    r = rng.normal(size=200)
    counts, sums, sq = transition_statistics(s, a, r, s2, 4, 3)
    ref = np.zeros((3, 4, 3, 4))
    for i in range(200):
        ref[:, s[i], a[i], s2[i]] += (1.0, r[i], r[i] ** 2)
    np.testing.assert_allclose(counts, ref[0])
    np.testing.assert_allclose(sums, ref[1], rtol=1e-12)
    np.testing.assert_allclose(sq, ref[2], rtol=1e-12)


def test_normal_gamma_update_formulas():
    """docs/sources.md §1 written out: mu0', lam', alpha', beta' from n, rbar and the spread."""
    mu0, lam, alpha, beta = 0.3, 4.0, 3.0, 3.0
    r = np.array([1.2, -0.4, 0.9, 2.5])
    n, rbar = r.size, r.mean()
    post = NormalGamma(mu0, lam, alpha, beta).update(n, r.sum(), np.sum(r**2))
    assert post.mu0 == pytest.approx((lam * mu0 + n * rbar) / (lam + n), rel=1e-14)
    assert post.lam == lam + n and post.alpha == alpha + n / 2
    expect = beta + 0.5 * np.sum((r - rbar) ** 2) + n * lam * (rbar - mu0) ** 2 / (2 * (lam + n))
    assert post.beta == pytest.approx(expect, rel=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_posterior_is_prior_times_likelihood(seed):
    """Conjugacy: log NG(post) - log NG(prior) - sum log N(r | mu, 1/tau) is one constant (the
    log evidence) at every (mu, tau)."""
    rng = np.random.default_rng(seed)
    prior = (rng.normal(), *rng.uniform(0.5, 5.0, 3))
    r = rng.normal(0.7, 1.5, size=rng.integers(1, 12))
    post = NormalGamma(*prior).update(r.size, r.sum(), np.sum(r**2))
    mu = rng.normal(0.0, 2.0, 50)
    tau = rng.uniform(0.1, 4.0, 50)
    loglik = stats.norm.logpdf(r[:, None], mu, 1.0 / np.sqrt(tau)).sum(axis=0)
    diff = _ng_logpdf(mu, tau, *post.params) - _ng_logpdf(mu, tau, *prior) - loglik
    np.testing.assert_allclose(diff, diff[0], rtol=0, atol=1e-9)


def test_updates_compose_and_zero_counts_change_nothing():
    rng = np.random.default_rng(7)
    r1, r2 = rng.normal(size=5), rng.normal(size=8)
    prior = NormalGamma(*DRAFT_REWARD_PRIOR)
    two = prior.update(5, r1.sum(), np.sum(r1**2)).update(8, r2.sum(), np.sum(r2**2))
    r = np.concatenate([r1, r2])
    one = prior.update(13, r.sum(), np.sum(r**2))
    for x, y in zip(one.params, two.params, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12)

    ng = NormalGamma(rng.normal(size=(2, 3)), rng.uniform(0.1, 3, (2, 3)), 2.0, 1.5)
    counts = np.array([[0, 2, 0], [1, 0, 3]])
    sums = np.where(counts > 0, rng.normal(size=(2, 3)), 0.0)
    post = ng.update(counts, sums, sums**2 + 1.0)
    for x, y in zip(post.params, ng.params, strict=True):
        assert np.array_equal(x[counts == 0], y[counts == 0])  # bit for bit


def test_public_code_option_differs_exactly_as_documented():
    rng = np.random.default_rng(11)
    prior = (0.0, 4.0, 3.0, 3.0)
    for n in (1, 2, 5, 30):
        r = rng.normal(0.4, 1.0, n)
        correct = NormalGamma(*prior).update(n, r.sum(), np.sum(r**2))
        public = NormalGamma(*prior, sum_of_squares="public-code").update(n, r.sum())
        # the public code's update_posterior, written out (M2 = (sum r)^2 / n)
        mu0, lam, alpha, beta = prior
        M1, M2 = r.sum() / n, r.sum() ** 2 / n
        beta_code = beta + 0.5 * n * (M2 - M1**2) + n * lam * (M1 - mu0) ** 2 / (2 * (lam + n))
        assert public.beta == pytest.approx(beta_code, rel=1e-13)
        for field in ("mu0", "lam", "alpha"):
            assert getattr(public, field) == getattr(correct, field)
        rbar = r.mean()
        gap = 0.5 * (n * (n - 1) * rbar**2 - np.sum((r - rbar) ** 2))
        assert public.beta - correct.beta == pytest.approx(gap, rel=1e-9, abs=1e-12)
        if n == 1:
            assert public.beta == pytest.approx(correct.beta, rel=1e-15)
    # n single updates agree with the correct batch, not with the public-code one
    r = np.array([1.0, 2.0, 3.0])
    seq = NormalGamma(*prior, sum_of_squares="public-code")
    for x in r:
        seq = seq.update_single(x)
    public = NormalGamma(*prior, sum_of_squares="public-code").update(3, r.sum())
    correct = NormalGamma(*prior).update(3, r.sum(), np.sum(r**2))
    assert seq.beta == pytest.approx(correct.beta, rel=1e-14)
    assert public.beta - seq.beta == pytest.approx(0.5 * (3 * 2 * 4.0 - 2.0), rel=1e-13)
    # the pure function: the default is the correct sum of squares
    assert normal_gamma_update(*prior, 3, r.sum(), np.sum(r**2))[3] == correct.beta


# --- moments: closed forms, Monte Carlo, scipy ------------------------------------------------


def test_closed_forms_agree_with_scipy():
    ng = NormalGamma(np.array([0.0, 1.5]), np.array([4.0, 0.5]), np.array([3.0, 1.7]), 2.5)
    t = ng.marginal()
    np.testing.assert_allclose(ng.variance, stats.t.var(t.df, t.loc, t.scale), rtol=1e-13)
    np.testing.assert_allclose(ng.mean, stats.t.mean(t.df, t.loc, t.scale), rtol=1e-13)
    np.testing.assert_allclose(ng.precision_mean, stats.gamma.mean(ng.alpha, scale=1 / ng.beta))
    p = ng.predictive()
    np.testing.assert_allclose(p.scale**2, ng.beta * (ng.lam + 1) / (ng.lam * ng.alpha))
    # the write-up's priors
    assert NormalGamma(*DRAFT_REWARD_PRIOR).variance == pytest.approx(3 / (4 * 2))
    assert NormalGamma(*PRIOR_MDP_PRIOR).variance == pytest.approx(4 / 3)


@pytest.mark.parametrize("params", [(0.0, 4.0, 3.0, 3.0), (1.3, 0.7, 5.5, 2.0)])
def test_sampled_moments_match_closed_forms(params):
    ng = NormalGamma(*params)
    mu, tau = ng.sample(np.random.default_rng(2024), size=N_DRAWS)
    assert mu.shape == tau.shape == (N_DRAWS,)
    var = float(ng.variance)
    alpha, beta = params[2], params[3]
    # mean of mu: standard error sqrt(Var / N); 5 se
    assert abs(mu.mean() - params[0]) < 5 * np.sqrt(var / N_DRAWS)
    # variance of mu (Student-t, df = 2 alpha > 4: kurtosis 3 + 6 / (df - 4))
    df = 2 * alpha
    kurt = 3 + 6 / (df - 4)
    assert abs(mu.var() - var) < 5 * var * np.sqrt((kurt - 1) / N_DRAWS)
    # tau ~ Gamma(alpha, rate beta): mean alpha / beta, variance alpha / beta^2
    assert abs(tau.mean() - alpha / beta) < 5 * np.sqrt(alpha / beta**2 / N_DRAWS)
    kurt_g = 3 + 6 / alpha
    assert abs(tau.var() - alpha / beta**2) < 5 * (alpha / beta**2) * np.sqrt(
        (kurt_g - 1) / N_DRAWS
    )


def test_sampled_distributions_are_scipys_t_gamma_and_normal():
    """KS tests on 10^5 draws: mu ~ t(2 alpha, mu0, sqrt(beta / (lam alpha))), tau ~ Gamma,
    and (mu - mu0) sqrt(lam tau) ~ N(0, 1) given tau."""
    ng = NormalGamma(0.5, 2.0, 2.5, 1.5)
    mu, tau = ng.sample(np.random.default_rng(5), size=N_DRAWS)
    t = ng.marginal()
    assert stats.kstest(mu, stats.t(t.df, t.loc, t.scale).cdf).pvalue > 1e-3
    assert stats.kstest(tau, stats.gamma(2.5, scale=1 / 1.5).cdf).pvalue > 1e-3
    z = (mu - 0.5) * np.sqrt(2.0 * tau)
    assert stats.kstest(z, stats.norm().cdf).pvalue > 1e-3
    # and the KS test does see a wrong scale
    assert stats.kstest(mu, stats.t(t.df, t.loc, 1.1 * t.scale).cdf).pvalue < 1e-6


def test_vectorized_sampling_per_entry():
    """Each (s, a, s') entry is sampled from its own parameters."""
    mu0 = np.array([[-2.0, 0.0], [1.0, 3.0]])
    ng = NormalGamma(mu0, 10.0, np.array([[3.0, 4.0], [6.0, 9.0]]), 2.0)
    mu, tau = ng.sample(np.random.default_rng(9), size=N_DRAWS)
    assert mu.shape == (N_DRAWS, 2, 2)
    se = np.sqrt(ng.variance / N_DRAWS)
    assert (np.abs(mu.mean(axis=0) - mu0) < 5 * se).all()
    se_tau = np.sqrt(ng.alpha / ng.beta**2 / N_DRAWS)
    assert (np.abs(tau.mean(axis=0) - ng.precision_mean) < 5 * se_tau).all()
    one_mu, one_tau = ng.sample(np.random.default_rng(0))
    assert one_mu.shape == one_tau.shape == (2, 2)


def test_sampling_is_reproducible():
    ng = NormalGamma(*DRAFT_REWARD_PRIOR, shape=(3, 2, 3))
    a = ng.sample(np.random.default_rng(4))
    b = ng.sample(np.random.default_rng(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


# --- Dirichlet --------------------------------------------------------------------------------


def test_dirichlet_moments_match_draws():
    alpha = np.array([[1.0, 2.0, 0.5, 3.0], [4.0, 4.0, 1.0, 0.0]])
    d = Dirichlet(alpha)
    draws = d.sample(np.random.default_rng(8), size=N_DRAWS)
    assert draws.shape == (N_DRAWS, 2, 4)
    np.testing.assert_allclose(draws.sum(-1), 1.0, rtol=1e-12)
    se = np.sqrt(d.variance / N_DRAWS)
    assert (np.abs(draws.mean(axis=0) - d.mean) <= 5 * se + 1e-15).all()
    # covariances: each within 5 Monte-Carlo standard errors of its product terms
    c = draws - draws.mean(axis=0)
    prod = c[..., :, None] * c[..., None, :]  # (N, 2, 4, 4)
    se_cov = prod.std(axis=0) / np.sqrt(N_DRAWS)
    assert (np.abs(prod.mean(axis=0) - d.covariance) <= 5 * se_cov + 1e-15).all()
    np.testing.assert_allclose(np.diagonal(d.covariance, axis1=-2, axis2=-1), d.variance)
    assert (draws[:, 1, 3] == 0).all()  # out of the support
    # scipy's Dirichlet agrees on one row
    np.testing.assert_allclose(d.variance[0], stats.dirichlet.var(alpha[0]), rtol=1e-13)
    np.testing.assert_allclose(d.mean[0], stats.dirichlet.mean(alpha[0]), rtol=1e-13)


def test_dirichlet_moments_agree_with_the_covariance_helper():
    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.1, 5.0, (3, 2, 4))
    d = Dirichlet(alpha)
    x, y = rng.normal(size=4), rng.normal(size=4)
    np.testing.assert_allclose(
        np.einsum("...i,...ij,...j->...", x, d.covariance, y),
        dirichlet_covariance(alpha, x, y),
        rtol=1e-11,
        atol=1e-15,
    )
    np.testing.assert_allclose(d.variance, dirichlet_variance(alpha))
    np.testing.assert_allclose(d.variance.sum(-1), unc.dirichlet_variance_sum(alpha), rtol=1e-13)
    # moved, not copied: optplan.uncertainty re-exports the posteriors' helpers
    assert unc.dirichlet_covariance is dirichlet_covariance


def test_dirichlet_updates():
    d = Dirichlet(np.ones((2, 2, 3)))
    counts = np.zeros((2, 2, 3))
    counts[1, 0] = [2, 0, 5]
    up = d.update(counts)
    np.testing.assert_array_equal(up.alpha[1, 0], [3.0, 1.0, 6.0])
    np.testing.assert_array_equal(up.alpha[0], d.alpha[0])
    one = d.update_single((1, 0, 2))
    assert one.alpha[1, 0, 2] == 2.0 and one.alpha.sum() == d.alpha.sum() + 1
    assert d.alpha.sum() == 12  # immutable
    with pytest.raises(ValueError):
        d.alpha[0, 0, 0] = 5.0


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field", "value"),
    [
        ((0.0, -1.0, 3.0, 3.0), "lam", "-1.0"),
        ((0.0, 4.0, 0.0, 3.0), "alpha", "0.0"),
        ((0.0, 4.0, 3.0, -2.5), "beta", "-2.5"),
        ((0.0, 4.0, 3.0, [1.0, 0.0]), "beta", "0.0 at index 1"),
    ],
)
def test_non_positive_parameters_are_named(params, field, value):
    with pytest.raises(OptplanError, match=rf"Normal-Gamma {field} must be > 0, got {value}"):
        NormalGamma(*params)


def test_other_bad_input():
    with pytest.raises(OptplanError, match=r"Normal-Gamma mu0 has a non-finite entry"):
        NormalGamma(np.nan, 1.0, 2.0, 2.0)
    with pytest.raises(OptplanError, match="do not broadcast"):
        NormalGamma(np.zeros(2), np.ones(3), 2.0, 2.0)
    with pytest.raises(OptplanError, match="sum_of_squares must be one of"):
        NormalGamma(0.0, 1.0, 2.0, 2.0, sum_of_squares="repo")
    ng = NormalGamma(0.0, 1.0, 2.0, 2.0, shape=(2,))
    with pytest.raises(OptplanError, match="counts must hold non-negative whole numbers"):
        ng.update([-1, 0], [0.0, 0.0], [0.0, 0.0])
    with pytest.raises(OptplanError, match="counts must hold non-negative whole numbers"):
        ng.update([0.5, 0], [0.0, 0.0], [0.0, 0.0])
    with pytest.raises(OptplanError, match="sums must be 0 where counts is 0"):
        ng.update([0, 1], [1.0, 0.0], [1.0, 0.0])
    with pytest.raises(OptplanError, match="sums_sq is required"):
        ng.update([1, 1], [1.0, 0.0])
    with pytest.raises(OptplanError, match="sums_sq must be >= 0"):
        ng.update([1, 1], [1.0, 0.0], [-1.0, 0.0])
    with pytest.raises(OptplanError, match="does not broadcast"):
        ng.update(np.ones(3), np.zeros(3), np.zeros(3))
    with pytest.raises(OptplanError, match="index"):
        ng.update_single(1.0, (5,))
    with pytest.raises(OptplanError, match="alpha has a negative entry"):
        Dirichlet([1.0, -1.0])


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_variance_needs_alpha_above_one(alpha):
    ng = NormalGamma(0.0, 1.0, [3.0, alpha], 1.0)
    with pytest.raises(OptplanError, match=rf"needs alpha > 1.*alpha={alpha}.* at index 1"):
        _ = ng.variance
    # one update of alpha + 1/2 does not always help; two do
    assert np.isfinite(ng.update_single(0.0).update_single(0.0).variance).all()
