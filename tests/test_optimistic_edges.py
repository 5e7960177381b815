"""OptimisticPlanning (average reward) at its edges: models that are not weakly communicating
but whose optimistic gain is constant (solved, on both paths), models whose optimistic gain
differs between states (refused), and the span certificate behind every ``optimal``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.dp import masked
from optplan.result import MULTICHAIN, OPTIMAL, OPTIMAL_INACCURATE

SOLVED = (OPTIMAL, OPTIMAL_INACCURATE)


def two_states(reward_0: float, ball: str = "l1", radius: float = 1.55):
    """State 0 a self-loop with a ball, state 1 absorbing (known) with reward 0.46306583."""
    P = np.zeros((2, 1, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    return op.OptimisticPlanning(
        p_hat=P,
        r_hat=np.array([[reward_0], [0.46306583]]),
        radius=np.array([[radius], [0.0]]),
        ball=ball,
        criterion="average",
    )


def span_residual(problem, h) -> float:
    """``span(T h - h)`` of the optimistic Bellman operator, pair by pair with the index
    problems at ``h - h(s)`` (no round-off of ``eps * |h|`` when the bias is huge)."""
    h = np.asarray(h, dtype=float)
    index = op.l1_ball_index if problem.ball == "l1" else op.kl_ball_index
    S, A = problem.r_hat.shape
    sigma = np.full((S, A), -np.inf)
    for s, a in zip(*np.nonzero(problem.action_mask), strict=True):
        p, d = problem.p_hat[s, a], float(problem.radius[s, a])
        v = h - h[s]
        sigma[s, a] = float(index(p, v, d).value) if d > 0 else float(p @ v)
    c = problem.r_hat + problem.reward_radius
    return float(np.ptp(masked(c + sigma, problem.action_mask).max(axis=1)))


def scale(problem) -> float:
    c = problem.r_hat + problem.reward_radius
    return 1.0 + float(np.abs(np.where(problem.action_mask, c, 0.0)).max())


def test_pinned_two_state_constant_gain():
    prob = two_states(0.0)
    assert "keep states [0]" in prob.communication()
    for method in ("fast", "conic"):
        res = prob.solve(method=method)
        assert res.status == OPTIMAL, (method, res.status, res.message)
        assert abs(res.value - 0.46306583) <= 1e-9
        # the optimistic kernel moves d / 2 = 0.775 of state 0's mass to state 1 per step
        assert abs(res.bias[1] - res.bias[0] - 0.46306583 / 0.775) <= 1e-7
    assert op.cross_check(prob).agree


def test_pinned_two_state_gain_differs():
    """State 0 worth more than state 1 keeps its self-loop: gains 0.9 and 0.463."""
    prob = two_states(0.9)
    for method in ("fast", "conic"):
        res = prob.solve(method=method)
        assert res.status == MULTICHAIN and np.isnan(res.value), (method, res.status)
        assert "not weakly communicating" in res.message


def several_classes(seed, n_classes, size, A, ball, best_reward):
    """``n_classes`` closed classes of ``size`` states in ``p_hat`` (each a dense block) and
    one absorbing known state ``S - 1`` with reward ``best_reward``; every other pair has a
    ball, so the optimistic kernel can leave its class. With ``best_reward`` above every other
    reward the optimistic gain is ``best_reward`` everywhere."""
    rng = np.random.default_rng(seed)
    S = n_classes * size + 1
    P = np.zeros((S, A, S))
    for k in range(n_classes):
        block = slice(k * size, (k + 1) * size)
        P[block, :, block] = rng.dirichlet(np.full(size, 0.7), size=(size, A))
    P[S - 1, :, S - 1] = 1.0
    R = rng.uniform(0.0, 0.8, (S, A))
    R[S - 1] = best_reward
    radius = rng.choice([1e-3, 0.05, 0.5, 2.0], size=(S, A))
    radius[S - 1] = 0.0
    return op.OptimisticPlanning(
        p_hat=P,
        r_hat=R,
        radius=radius,
        reward_radius=rng.uniform(0.0, 0.05, (S, A)) * (np.arange(S) < S - 1)[:, None],
        ball=ball,
        criterion="average",
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_classes=st.integers(1, 3),
    size=st.integers(1, 3),
    A=st.integers(1, 2),
    ball=st.sampled_from(["l1", "kl"]),
)
def test_constant_gain_with_several_recurrent_classes(seed, n_classes, size, A, ball):
    prob = several_classes(seed, n_classes, size, A, ball, best_reward=1.0)
    assert prob.communication()  # p_hat's classes can stay closed: not weakly communicating
    fast = prob.solve(method="fast")
    assert fast.status == OPTIMAL, fast.message
    assert abs(fast.value - 1.0) <= 1e-6 * scale(prob)
    assert span_residual(prob, fast.bias) <= 1e-6 * scale(prob)
    conic = prob.solve(method="conic")
    assert conic.status in SOLVED, conic.message
    assert abs(conic.value - fast.value) <= 1e-6 * scale(prob)
    if conic.status == OPTIMAL:
        chk = op.cross_check(prob)
        assert chk.agree, chk.message


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 3), ball=st.sampled_from(["l1", "kl"]))
def test_gain_that_differs_is_refused(seed, size, ball):
    """A class of known transitions (radius 0) whose rewards beat the absorbing state keeps
    its own, higher gain: both paths refuse."""
    prob = several_classes(seed, 2, size, 1, ball, best_reward=0.0)
    radius = np.array(prob.radius)
    radius[:size] = 0.0
    r_hat = np.array(prob.r_hat)
    r_hat[:size] = 0.9
    from dataclasses import replace

    prob = replace(prob, radius=radius, r_hat=r_hat)
    for method in ("fast", "conic"):
        res = prob.solve(method=method)
        assert res.status == MULTICHAIN and np.isnan(res.value), (method, res.message)


def tied_absorbing(seed, S, ball):
    """States 1 and 2 may stay put (known, the same reward 1) or leave through a ball at a
    lower reward: weakly communicating, but the optimistic policy has two recurrent classes,
    so the exact finish cannot evaluate it and the gain is EVI's."""
    rng = np.random.default_rng(seed)
    A = 2
    P = rng.dirichlet(np.full(S, 0.7), size=(S, A))
    P[1, 0], P[2, 0] = np.eye(S)[1], np.eye(S)[2]
    R = rng.uniform(0.0, 0.9, (S, A))
    R[1, 0] = R[2, 0] = 1.0
    radius = rng.choice([0.01, 0.3, 1.0], size=(S, A))
    radius[1, 0] = radius[2, 0] = 0.0
    return op.OptimisticPlanning(p_hat=P, r_hat=R, radius=radius, ball=ball, criterion="average")


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    S=st.integers(3, 6),
    ball=st.sampled_from(["l1", "kl"]),
    tol=st.sampled_from([1e-6, 1e-5, 1e-4, 1e-3]),
)
def test_optimal_is_certified_at_tol(seed, S, ball, tol):
    """``optimal`` implies ``span(T h - h) <= tol * scale`` at the returned bias, and a gain
    within that of the true one (1 here)."""
    prob = tied_absorbing(seed, S, ball)
    assert prob.communication() == ""
    res = prob.solve(method="fast", tol=tol)
    assert res.status in SOLVED, res.message
    if res.status == OPTIMAL:
        limit = tol * scale(prob)
        assert span_residual(prob, res.bias) <= limit, (span_residual(prob, res.bias), limit)
        assert abs(res.value - 1.0) <= limit


def escaping(seed, ball):
    """States that leave their self-loop with probability ``1e-12..1e-4`` (biases up to
    ``1e12``) and tiny radii: the certificate is where round-off in the bias shows."""
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(2, 7)), int(rng.integers(1, 3))
    P = rng.dirichlet(np.full(S, 0.5), size=(S, A))
    eps = 10 ** rng.uniform(-12, -4)
    for s in range(S):
        if rng.random() < 0.6:
            P[s] = 0.0
            P[s, :, s], P[s, :, (s + 1) % S] = 1.0 - eps, eps
    radius = rng.choice([0.0, 0.0, 1e-9, 1e-6, 0.1], size=(S, A))
    return op.OptimisticPlanning(
        p_hat=P, r_hat=rng.random((S, A)), radius=radius, ball=ball, criterion="average"
    )


def test_pinned_escaping_instance_is_certified():
    """A bias of -7e10 whose Bellman residual is only known to round-off: not ``optimal``
    unless the span certificate holds."""
    prob = escaping(70, "l1")
    res = prob.solve(method="fast")
    assert res.status in SOLVED, res.message
    if res.status == OPTIMAL:
        assert span_residual(prob, res.bias) <= 1e-6 * scale(prob)
    else:
        assert "span(T h - h)" in res.message


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ball=st.sampled_from(["l1", "kl"]))
def test_optimal_is_certified_with_huge_biases(seed, ball):
    prob = escaping(seed, ball)
    res = prob.solve(method="fast")
    if res.status == OPTIMAL:
        assert span_residual(prob, res.bias) <= 1e-6 * scale(prob), res.message


def huge_kl_radii(seed):
    """KL balls with radii up to 1e6: the optimistic kernel keeps ``q`` below the double
    range as the smallest normal double, so the exact finish's bias reaches 1e306."""
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(2, 9)), int(rng.integers(1, 4))
    P = rng.dirichlet(np.full(S, rng.choice([0.1, 0.5, 1])), size=(S, A))
    if rng.random() < 0.5:
        P = np.where(rng.random(P.shape) < 0.4, P, 0)
        P[..., 0] += 1e-3 * (P.sum(-1) == 0)
        P /= P.sum(-1, keepdims=True)
    if rng.random() < 0.3:
        eps = 10 ** rng.uniform(-12, -3)
        for s in range(S):
            if rng.random() < 0.5:
                P[s] = 0
                P[s, :, s], P[s, :, (s + 1) % S] = 1 - eps, eps
    radius = 10 ** rng.uniform(-6, 6, size=(S, A))
    if rng.random() < 0.5:
        radius = np.where(rng.random((S, A)) < 0.3, 0, radius)
    crit = str(rng.choice(["average", "discounted"]))
    return op.OptimisticPlanning(
        p_hat=P,
        r_hat=rng.random((S, A)),
        radius=radius,
        ball="kl",
        criterion=crit,
        discount=0.9 if crit == "discounted" else None,
    )


def test_kl_index_at_values_near_the_largest_double():
    """The row the huge-radius instance hands the KL kernel: the stationarity equation is
    scale-invariant in v, and so is its solve."""
    p = np.array([0.0, 0.72171621, 0.0, 0.27828379])
    v = np.array([0.0, 8.13936522e-001, 2.57757331e302, 4.59636469e306])
    for d in (0.1, 10.0, 7078.486595863079, 1e6):
        for kernel in ("numpy", "auto"):
            res = op.kl_ball_index(p, v, d, kernel=kernel)
            small = op.kl_ball_index(p, v * 1e-300, d, kernel=kernel)
            assert res.status == OPTIMAL and small.status == OPTIMAL, (d, kernel)
            assert abs(res.value * 1e-300 - small.value) <= 1e-12 * abs(small.value)


def test_huge_kl_radii_instance():
    prob = huge_kl_radii(24)
    assert prob.criterion == "average" and prob.radius.max() > 1e3
    res = prob.solve(method="fast")
    assert res.status in SOLVED, res.message
    if res.status == OPTIMAL:
        assert span_residual(prob, res.bias) <= 1e-6 * scale(prob)


def leaking_kl_instance():
    """25 states, one action, each pair's ``p_hat`` half on two random states, KL radii up
    to 57.6 on about half the pairs (``radius = 0`` elsewhere). States 2 and 22 form a
    closed class of radius-0 pairs (rewards 0.25 and 0.77); every other state reaches it, but
    a ball can keep a state in place with a leak of order ``e^(-2 radius)``: the optimal gain
    is the class's, ``(r_2 + r_22) / 2``, everywhere, and the bias reaches ``1e22``."""
    rng = np.random.default_rng(3)
    for _ in range(96):
        P = np.zeros((25, 1, 25))
        for s in range(25):
            P[s, 0, rng.choice(25, 2, replace=False)] = 0.5
        r = rng.normal(size=(25, 1))
        radius = rng.uniform(0, 57.6, (25, 1)) * (rng.random((25, 1)) < 0.5)
    return op.OptimisticPlanning(P, r, radius, ball="kl", criterion="average")


def test_a_bias_beyond_double_precision_gets_the_right_gain_and_says_why():
    prob = leaking_kl_instance()
    P, r = prob.p_hat, prob.r_hat
    assert prob.radius[2, 0] == prob.radius[22, 0] == 0
    assert set(np.flatnonzero(P[2, 0])) == set(np.flatnonzero(P[22, 0])) == {2, 22}
    res = prob.solve(method="fast")
    assert res.status == "optimal_inaccurate", res.message
    assert abs(res.gain - (r[2, 0] + r[22, 0]) / 2) <= 1e-9
    assert np.abs(res.bias).max() > 1e20
    assert "known only to its rounding" in res.message
    assert "reached the fixed point" not in res.message  # the finish's claim is not made
