"""K-learning's bonus as a declared input derived from the posterior actually held,
and the deterministic transition prior (k-learning-variational-bayesian-rl Eq. 6, Lemma 2)."""

from __future__ import annotations

import numpy as np
import pytest

import optplan as op
from optplan._checks import OptplanError
from optplan.agents.k_learning import KLearning
from optplan.agents.psrl import PSRL
from optplan.envs import DeepSea
from optplan.posteriors import LayeredPosterior, k_bonus_numerators
from optplan.soft import k_bonus


def visited_posterior(prior, sigma=0.5, prior_var=2.0, L=4, S=3, A=2, seed=0, steps=30):
    """A layered posterior after ``steps`` random transitions, deterministic ones (next state
    ``(s + a) % S``) so that both priors accept them."""
    rng = np.random.default_rng(seed)
    post = LayeredPosterior(L, S, A, sigma=sigma, prior_var=prior_var, transition_prior=prior)
    for _ in range(steps):
        l, s, a = int(rng.integers(L)), int(rng.integers(S)), int(rng.integers(A))
        post.update(l, s, a, float(rng.normal(0.3, sigma)), (s + a) % S)
    return post


def test_paper_bonus_is_eq6_as_printed():
    post = visited_posterior(0.2)
    np.testing.assert_array_equal(post.bonus_numerators("paper"), k_bonus(post.counts, 0.5))


@pytest.mark.parametrize("prior", [0.2, 1.0, "deterministic"])
def test_posterior_bonus_at_n0_is_the_prior_variance_term(prior):
    """An unvisited pair: reward term = the prior variance (not sigma^2), transition term =
    Span^2 / (S alpha) (Dirichlet) or Span^2 / 4 (deterministic, Hoeffding)."""
    L, S = 4, 3
    post = visited_posterior(prior, sigma=0.5, prior_var=2.0, L=L, S=S)
    c = post.bonus_numerators("posterior")
    p = (L - 1 - np.arange(L))[:, None, None].astype(float)
    unvisited = post.counts == 0
    assert unvisited.any() and (~unvisited).any()
    transition = p**2 / 4 if prior == "deterministic" else p**2 / (S * prior)
    expected = (2.0 + transition) / 2
    np.testing.assert_allclose(c[unvisited], np.broadcast_to(expected, c.shape)[unvisited])
    # a visited pair: the exact posterior variance 1 / (1/prior_var + n/sigma^2)
    _, var = post.reward_posterior()
    n = post.counts
    np.testing.assert_allclose(var, 1.0 / (1.0 / 2.0 + n / 0.25), rtol=1e-14)
    m = post.next_counts.sum(axis=-1)
    seen = m > 0
    if prior == "deterministic":
        trans_seen = np.zeros_like(c)
    else:
        trans_seen = np.broadcast_to(p**2, c.shape) / (m + S * prior)
    np.testing.assert_allclose(c[seen], ((var + trans_seen) / 2)[seen], rtol=1e-14)


def test_declared_span_and_last_layer():
    post = visited_posterior("deterministic", L=3)
    c = post.bonus_numerators("posterior", span=1.01, unvisited="paper")
    _, var = post.reward_posterior()
    seen = post.next_counts.sum(axis=-1) > 0
    expect = (var + np.where(seen, 0.0, 1.01**2)) / 2
    expect[-1] = var[-1] / 2  # no next value after the last layer
    np.testing.assert_allclose(c, expect, rtol=1e-14)


def test_sigma_zero_reward_term():
    """sigma = 0: a visited pair's mean reward is known (term 0); an unvisited one keeps the
    prior variance. Eq. 6 as printed gives the last layer no bonus at all there."""
    post = visited_posterior(0.5, sigma=0.0, prior_var=1.5, L=2)
    c = post.bonus_numerators("posterior")
    last = c[-1]
    np.testing.assert_allclose(last, np.where(post.counts[-1] > 0, 0.0, 0.75))
    assert (post.bonus_numerators("paper")[-1] == 0).all()


def test_sigma_zero_no_longer_collapses_tau():
    """sigma = 0 under the deterministic prior, everything visited but one last-layer pair.
    The old reward term ``sigma^2 / max(n, 1)`` claims variance 0 even where n = 0, so every
    numerator is 0 and tau* collapses to 0 (the greedy policy, which never tries that pair).
    The posterior's term keeps the unvisited pair's prior variance: c = prior_var / 2 there and
    tau* > 0."""
    L, S, A = 3, 2, 2
    post = LayeredPosterior(L, S, A, sigma=0.0, prior_var=1.5, transition_prior="deterministic")
    for l in range(L):
        for s in range(S):
            for a in range(A):
                if (l, s, a) != (L - 1, S - 1, A - 1):
                    post.update(l, s, a, 0.1, (s + a) % S)
    c = post.bonus_numerators("posterior")
    assert c[L - 1, S - 1, A - 1] == 0.75 and np.count_nonzero(c) == 1
    old = np.square(post.sigma) / (2 * np.maximum(post.counts, 1))  # the old reward term
    assert not old.any()
    R, P = post.reward_posterior()[0], post.mean_transitions()
    collapsed = op.KLearningTemperature(R, P, post.counts, 0.0, bonus=old).solve()
    kept = op.KLearningTemperature(R, P, post.counts, 0.0, bonus=c).solve()
    assert collapsed.x == 0.0 and kept.status == "optimal" and kept.x > 1e-2, kept.x


def test_sigma_zero_k_learning_solves_small_deepsea():
    """The agent with sigma = 0, the deterministic prior and the posterior bonus finds the goal
    of the noiseless DeepSea L = 8 within 60 episodes (measured: episode 21), tau* staying
    above 1e-2 until then."""
    L = 8
    env = DeepSea(L, mapping_seed=0, variant="bsuite", reward_noise=0.0)
    m = env.unwrapped.mdp
    agent = KLearning(
        m.n_states, m.n_actions, n_layers=L, sigma=0.0, transition_prior="deterministic",
        bonus="posterior", span=1.01, initial=m.initial,
    )  # fmt: skip
    agent.reset(np.random.default_rng(0))
    env.reset(seed=0)
    taus, found = [], None
    for episode in range(60):
        obs, _ = env.reset()
        done = False
        while not done:
            a = agent.select_action(obs)
            nxt, r, term, trunc, info = env.step(a)
            done = term or trunc
            agent.update(obs, a, r, nxt, done)
            obs = nxt
            found = episode if info["goal_reached"] and found is None else found
        if found is not None:
            break
        taus.append(agent.tau)
    assert found is not None and min(taus) > 1e-2, (found, min(taus))


def test_deterministic_prior_means_and_samples():
    post = LayeredPosterior(3, 4, 2, transition_prior="deterministic")
    post.update(0, 1, 0, 0.0, 2)
    post.update(0, 1, 0, 0.0, 2)
    post.update(2, 1, 1, 0.0, 3)  # the last layer: no transition recorded
    P = post.mean_transitions()
    np.testing.assert_array_equal(P[0, 1, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(P[0, 0, 0], [0.25] * 4)
    np.testing.assert_array_equal(P[2, 1, 1], [0.25] * 4)
    _, Ps = post.sample(np.random.default_rng(1))
    np.testing.assert_array_equal(Ps[0, 1, 0], [0, 0, 1, 0])
    assert set(np.unique(Ps)) <= {0.0, 1.0} and (Ps.sum(axis=-1) == 1).all()
    # unvisited rows are one-hot at uniformly drawn states
    draws = np.array(
        [post.sample(np.random.default_rng(k))[1][1, 0, 0].argmax() for k in range(400)]
    )
    counts = np.bincount(draws, minlength=4)
    assert counts.min() > 60, counts


def test_psrl_takes_the_same_prior():
    agent = PSRL(4, 2, n_layers=3, transition_prior="deterministic")
    assert agent.posterior.deterministic


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: KLearning(2, 2, n_layers=2, bonus="exact"), "bonus must be one of"),
        (lambda: KLearning(2, 2, n_layers=2, unvisited="half"), "unvisited must be one of"),
        (lambda: KLearning(2, 2, n_layers=2, span=0.0), "span must be a finite number > 0"),
        (
            lambda: KLearning(2, 2, n_layers=2, span=float("inf")),
            "span must be a finite number > 0",
        ),
        (lambda: LayeredPosterior(2, 2, 2, transition_prior="point"), "transition_prior"),
        (
            lambda: LayeredPosterior(2, 2, 2).bonus_numerators("posterior", span=-1.0),
            "span must be a finite number > 0",
        ),
    ],
)
def test_bad_names_and_spans(make, match):
    with pytest.raises((OptplanError, TypeError), match=match):
        make()


def test_contradicted_deterministic_prior_names_the_pair():
    post = LayeredPosterior(3, 4, 2, transition_prior="deterministic")
    post.update(1, 2, 1, 0.0, 3)
    with pytest.raises(OptplanError, match="layer 1, state 2, action 1: next state 0 observed"):
        post.update(1, 2, 1, 0.0, 0)
    cont = LayeredPosterior(None, 4, 2, transition_prior="deterministic")
    cont.update(None, 0, 1, 0.0, 1)
    with pytest.raises(OptplanError, match="state 0, action 1"):
        cont.update(None, 0, 1, 0.0, 2)


@pytest.mark.parametrize(
    "bonus, match",
    [
        (np.ones((2, 2, 3)), r"bonus has shape \(2, 2, 3\), expected"),
        (-np.ones((2, 2, 2)), "bonus must be >= 0"),
        (np.full((2, 2, 2), np.nan), "bonus"),
        (np.full((2, 2, 2), np.inf), "bonus"),
    ],
)
def test_bad_bonus_arrays(bonus, match):
    R, P, N = np.zeros((2, 2, 2)), np.full((2, 2, 2, 2), 0.5), np.zeros((2, 2, 2))
    with pytest.raises(OptplanError, match=match):
        op.KLearningTemperature(R, P, N, 1.0, bonus=bonus)
    with pytest.raises(OptplanError, match=match):
        op.k_values(1.0, R, P, N, 1.0, bonus=bonus)


def test_declared_bonus_is_used_by_both_paths():
    """A declared bonus changes tau* (fast and conic alike) from Eq. 6's."""
    rng = np.random.default_rng(3)
    R = rng.random((3, 2, 2))
    P = rng.dirichlet(np.ones(2), size=(3, 2, 2))
    N = rng.integers(0, 5, (3, 2, 2))
    c = rng.uniform(0.1, 2.0, (3, 2, 2))
    default = op.KLearningTemperature(R, P, N, 0.5).solve()
    declared = op.KLearningTemperature(R, P, N, 0.5, bonus=c)
    fast, conic = declared.solve(), declared.solve(method="conic", solver="CLARABEL")
    assert abs(fast.x - default.x) > 1e-3
    if conic.status == "optimal":
        assert conic.x == pytest.approx(fast.x, rel=1e-4)
    assert k_bonus_numerators("paper", N, 0.5, None, None, None, 2).shape == (3, 2, 2)
