"""The compiled K-learning kernel (numba, optional) against the numpy reference: the terms of
``f = M + tau A + B / tau`` with K, V, pi and lambda at any temperature, and ``tau*`` from
``solve(kernel=...)``, on random and edge-case instances. The CVXPY cross-checks in
``test_k_learning.py`` run on ``kernel="auto"``, i.e. on this kernel whenever numba is
installed (it is, in the ``test`` extra)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_k_learning import FIXED, SHAPE, make_instance, problem

import optplan as op
from optplan import soft as fk
from optplan._checks import OptplanError, OptplanTypeError
from optplan.fast import _k_kernels

numba_only = pytest.mark.skipif(
    not _k_kernels.AVAILABLE, reason='numba not installed (pip install "optplan[jit]")'
)


def both_terms(p, tau):
    c = fk.k_bonus(p.counts, p.sigma)
    args = (p.mean_rewards, p.mean_transitions, c, p.initial)
    return fk.temperature_terms(tau, *args), _k_kernels.terms(tau, *args)


def assert_terms_equal(ref, got):
    f, M, A, B, K, V, pi, lam = ref
    g = got
    for name, a, b in zip("fMAB", (f, M, A, B), g[:4], strict=True):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-12), name
    for name, a, b in zip(("K", "V", "pi", "lam"), (K, V, pi, lam), g[4:], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-13, err_msg=name)


@numba_only
@pytest.mark.parametrize("tau", [1e-8, 1e-3, 0.3, 1.0, 40.0, 1e8])
@pytest.mark.parametrize("index", range(len(FIXED)))
def test_kernel_terms_match_numpy(index, tau):
    seed, L, S, A, sigma, kinds = FIXED[index]
    ref, got = both_terms(problem(seed, L, S, A, sigma, **kinds), tau)
    assert all(np.isfinite(x).all() for x in got)
    assert_terms_equal(ref, got)


@numba_only
@settings(max_examples=60, deadline=None)
@given(
    **SHAPE,
    sigma=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    log_tau=st.floats(-6.0, 6.0),
    transitions=st.sampled_from(["dense", "sparse", "posterior"]),
    counts=st.sampled_from(["small", "zero", "large"]),
    initial=st.sampled_from(["uniform", "random"]),
)
def test_kernel_terms_property(seed, L, S, A, sigma, log_tau, transitions, counts, initial):
    p = problem(seed, L, S, A, sigma, transitions=transitions, counts=counts, initial=initial)
    ref, got = both_terms(p, 10.0**log_tau)
    assert_terms_equal(ref, got)


@numba_only
@settings(max_examples=60, deadline=None)
@given(
    **SHAPE,
    sigma=st.sampled_from([0.5, 1.0, 3.0]),
    rewards=st.sampled_from(["unit", "negative", "large"]),
    transitions=st.sampled_from(["dense", "sparse", "posterior"]),
    counts=st.sampled_from(["small", "zero", "large"]),
)
def test_kernel_tau_star_matches_numpy(seed, L, S, A, sigma, rewards, transitions, counts):
    p = problem(seed, L, S, A, sigma, rewards=rewards, transitions=transitions, counts=counts)
    ref = p.solve("fast", kernel="numpy")
    got = p.solve("fast", kernel="numba")
    assert ref.info["kernel"] == "numpy" and got.info["kernel"] == "numba"
    assert ref.status == got.status == "optimal"
    # Both stop Brent at |d log tau| <= 1e-15 on f' evaluated with different summation orders.
    assert got.x == pytest.approx(ref.x, rel=1e-9)
    assert got.value == pytest.approx(ref.value, rel=1e-12, abs=1e-12)
    assert abs(got.info["gap"]) <= 1e-8 * (1 + abs(got.value))
    np.testing.assert_allclose(got.q, ref.q, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.occupancy, ref.occupancy, rtol=1e-8, atol=1e-12)


@numba_only
def test_kernel_deepsea_shapes():
    """DeepSea-shaped posteriors (bench instances), L up to 30."""
    from optplan.bench.cases import deepsea_instance

    rng = np.random.default_rng(3)
    for L in (5, 12, 30):
        p = deepsea_instance(L, rng)
        ref, got = p.solve("fast", kernel="numpy"), p.solve("fast", kernel="numba")
        assert got.x == pytest.approx(ref.x, rel=1e-9)
        assert got.value == pytest.approx(ref.value, rel=1e-12)


@numba_only
def test_auto_picks_numba_and_buffers_are_not_shared():
    p = problem(*FIXED[2][:5], **FIXED[2][5])
    r1, r2 = p.solve("fast"), p.solve("fast")
    assert r1.info["kernel"] == "numba"
    assert r1.q is not r2.q and r1.occupancy is not r2.occupancy
    np.testing.assert_array_equal(r1.q, r2.q)


def test_numpy_kernel_always_available():
    p = problem(*FIXED[1][:5], **FIXED[1][5])
    res = p.solve("fast", kernel="numpy")
    assert res.info["kernel"] == "numpy" and res.status == "optimal" and res.x > 0


@pytest.mark.parametrize("kernel", ["cuda", "", None, "NUMPY"])
def test_bad_kernel(kernel):
    p = problem(*FIXED[1][:5], **FIXED[1][5])
    with pytest.raises(ValueError, match="kernel must be one of"):
        p.solve("fast", kernel=kernel)


def test_numba_kernel_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_k_kernels, "AVAILABLE", False)
    p = problem(*FIXED[1][:5], **FIXED[1][5])
    with pytest.raises(ValueError, match=r"needs numba.*optplan\[jit\]"):
        p.solve("fast", kernel="numba")
    res = p.solve("fast")  # auto falls back to numpy
    assert res.info["kernel"] == "numpy"


@numba_only
def test_kernel_no_overflow_extreme():
    """Huge rewards and tiny tau: the max-shift keeps every term finite in both kernels."""
    R, P, N, rho = make_instance(9, 4, 3, 2, rewards="large", counts="zero")
    p = op.KLearningTemperature(R * 1e3, P, N, 2.0, rho)
    ref, got = both_terms(p, 1e-6)
    assert all(math.isfinite(x) for x in got[:4])
    assert_terms_equal(ref, got)


# --- the compiled search against the SciPy search, both on the compiled recursion ----------


def assert_same_search(p, guess=None):
    """The compiled search (``solve``'s default with numba) returns the SciPy search's result
    bit for bit: the same tau*, Brent iterations, K, V, pi, lambda and terms (both started
    around ``guess`` when given)."""
    from optplan.fast import k_temperature as kt

    got = p.solve("fast", kernel="numba", guess=guess)
    ref = kt._scipy_search(p, 1e-15, 200, "numba", kt._bracket_start(guess))
    assert got.status == ref.status
    if got.info.get("search") != "compiled":  # handed over: the SciPy search decided
        assert got.x == ref.x or (math.isnan(got.x) and math.isnan(ref.x))
        return got
    assert got.x == ref.x and got.value == ref.value and got.iterations == ref.iterations
    for name in ("q", "values", "policy", "occupancy"):
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), err_msg=name)
    for key in ("dual_value", "gap", "derivative", "entropy_term", "bonus_term", "reward_term"):
        assert got.info[key] == ref.info[key], key
    # the SciPy search evaluates brentq's two ends and the root again; the compiled one keeps
    # those passes
    assert got.info["evaluations"] == ref.info["evaluations"] - 3 or ref.iterations == 0
    return got


@numba_only
@pytest.mark.parametrize("index", range(len(FIXED)))
def test_compiled_search_is_scipy_search(index):
    seed, L, S, A, sigma, kinds = FIXED[index]
    p = problem(seed, L, S, A, sigma, **kinds)
    got = assert_same_search(p)
    assert got.info["search"] == "compiled" or not p.bonus_numerators().any()


@numba_only
@settings(max_examples=80, deadline=None)
@given(
    **SHAPE,
    sigma=st.sampled_from([0.0, 0.1, 1.0, 3.0]),
    rewards=st.sampled_from(["unit", "negative", "large"]),
    transitions=st.sampled_from(["dense", "sparse", "posterior"]),
    counts=st.sampled_from(["small", "zero", "large"]),
    initial=st.sampled_from(["uniform", "random"]),
)
def test_compiled_search_property(seed, L, S, A, sigma, rewards, transitions, counts, initial):
    kinds = dict(rewards=rewards, transitions=transitions, counts=counts, initial=initial)
    assert_same_search(problem(seed, L, S, A, sigma, **kinds))


@numba_only
def test_compiled_search_deepsea_and_extremes():
    """DeepSea-shaped posteriors, and bonuses so small or large that the bracket walks far."""
    from optplan.bench.cases import deepsea_instance

    rng = np.random.default_rng(5)
    for L in (4, 12, 20):
        assert_same_search(deepsea_instance(L, rng))
    R, P, N, rho = make_instance(11, 5, 4, 3)
    for scale in (1e-12, 1e-4, 1e4, 1e12):
        c = np.full(R.shape, scale)
        assert_same_search(op.KLearningTemperature(R, P, N, 1.0, rho, bonus=c))
    # no bonus anywhere: tau* = 0, answered by the SciPy search's closed form
    res = op.KLearningTemperature(R, P, N, 1.0, rho, bonus=np.zeros(R.shape)).solve("fast")
    assert res.x == 0.0 and res.info.get("search") is None


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**9), log_tau=st.floats(-6.0, 6.0), scale=st.sampled_from([1.0, 1e3]))
def test_policy_and_values_equal_the_two_functions(seed, log_tau, scale):
    """K-learning's plan takes pi and V from one shared exponential: bit for bit
    ``boltzmann_policy`` and ``soft_values``."""
    K = np.random.default_rng(seed).normal(size=(4, 3, 3)) * scale
    tau = 10.0**log_tau
    pi, V = fk.boltzmann_policy_and_values(K, tau)
    np.testing.assert_array_equal(pi, fk.boltzmann_policy(K, tau))
    np.testing.assert_array_equal(V, fk.soft_values(K, tau))


def test_trusted_problem_keeps_only_handed_over_arrays():
    """``_trusted`` keeps a read-only float array that owns its data (the plan's fresh
    arrays) and copies anything else (the posterior's live counts)."""
    R, P, N, rho = make_instance(2, 3, 2, 2)
    fresh = np.array(R, dtype=float)
    fresh.setflags(write=False)
    counts = np.array(N, dtype=float)  # writeable: copied
    p = op.KLearningTemperature._trusted(fresh, P, counts, 1.0, rho)
    assert p.mean_rewards is fresh
    assert p.counts is not counts and not p.counts.flags.writeable
    P_ro = np.array(P, dtype=float)
    P_ro.setflags(write=False)
    q = op.KLearningTemperature._trusted(fresh, P_ro[:], counts, 1.0, rho)  # a view: copied
    assert q.mean_transitions.base is None and q.mean_transitions is not P_ro


# --- layers summed through their rows' exceptions, and a search started from a guess -------


@numba_only
@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**9),
    L=st.integers(2, 6),
    S=st.integers(4, 16),
    A=st.integers(2, 3),
    sigma=st.sampled_from([0.0, 0.5, 3.0]),
    rewards=st.sampled_from(["unit", "negative", "large"]),
    counts=st.sampled_from(["small", "zero", "large"]),
    log_tau=st.floats(-6.0, 6.0),
)
def test_kernel_sparse_layers_match_numpy(seed, L, S, A, sigma, rewards, counts, log_tau):
    """Posterior-mean rows (a pseudo-count everywhere, counts on one or two next states):
    the layers whose rows differ from their smallest entry in at most S / 4 places are summed
    through those places; the terms and tau* agree with the numpy reference."""
    kinds = dict(rewards=rewards, transitions="posterior", counts=counts)
    p = problem(seed, L, S, A, sigma, **kinds)
    sparse = _k_kernels.transposed(p.mean_transitions)[4]
    assert sparse.any() or S < 8  # one or two next states: at most S / 4 once S >= 8
    ref, got = both_terms(p, 10.0**log_tau)
    assert_terms_equal(ref, got)
    a, b = p.solve("fast", kernel="numpy"), p.solve("fast", kernel="numba")
    assert a.status == b.status
    if a.status == "optimal":
        assert b.x == pytest.approx(a.x, rel=1e-9)
        assert b.value == pytest.approx(a.value, rel=1e-12, abs=1e-12)


def policy_long_double(q, c, tau):
    """The Boltzmann policy of the backward recursion in ``np.longdouble`` (64-bit mantissa
    on x86: a reference 2048 times finer than float64)."""
    R, P, c = (np.asarray(x, dtype=np.longdouble) for x in (q.mean_rewards, q.mean_transitions, c))
    t = np.longdouble(tau)
    V = np.zeros(R.shape[1], dtype=np.longdouble)
    pi = np.empty(R.shape, dtype=np.longdouble)
    for l in range(R.shape[0] - 1, -1, -1):
        K = R[l] + c[l] / t + P[l] @ V
        m = K.max(axis=-1, keepdims=True)
        z = np.exp((K - m) / t)
        pi[l] = z / z.sum(axis=-1, keepdims=True)
        V = m[:, 0] + t * np.log(z.sum(axis=-1))
    return pi


@numba_only
def test_kernel_sparse_and_dense_layers_deepsea():
    """DeepSea posteriors (every layer sparse from L = 8) and the same with one dense row in a
    layer (that layer summed densely): as the numpy reference from tau = 1; below, the policy
    amplifies the rounding of K by 1 / tau in both kernels (numpy's and numba's policies then
    differ by up to 2e-11 on these instances, a dense kernel's as much), so at every tau each
    policy is held to a long-double recursion, numba no further from it than numpy (up to
    round-off)."""
    from optplan.bench.cases import deepsea_instance

    rng = np.random.default_rng(8)
    for L in (8, 20, 30):
        p = deepsea_instance(L, rng)
        P = np.array(p.mean_transitions)
        assert _k_kernels.transposed(P)[4].all()
        P[L // 2, 1, 0] = rng.dirichlet(np.ones(L))
        sparse = _k_kernels.transposed(P)[4]
        assert not sparse[L // 2] and sparse.sum() == L - 1
        mixed = op.KLearningTemperature(p.mean_rewards, P, p.counts, p.sigma, p.initial)
        for q in (p, mixed):
            c = fk.k_bonus(q.counts, q.sigma)
            for tau in (1e-3, 0.05, 0.3, 1.0, 30.0):
                ref, got = both_terms(q, tau)
                if tau >= 1.0:
                    assert_terms_equal(ref, got)
                exact = policy_long_double(q, c, tau)
                err_numpy = float(np.abs(ref[6] - exact).max())
                err_numba = float(np.abs(got[6] - exact).max())
                assert err_numba <= 2.0 * err_numpy + 1e-13, (L, tau, err_numpy, err_numba)


@numba_only
@settings(max_examples=60, deadline=None)
@given(
    **SHAPE,
    sigma=st.sampled_from([0.1, 1.0, 3.0]),
    transitions=st.sampled_from(["dense", "sparse", "posterior"]),
    counts=st.sampled_from(["small", "zero", "large"]),
    log_guess=st.floats(-12.0, 12.0),
)
def test_guess_search_is_scipy_search(seed, L, S, A, sigma, transitions, counts, log_guess):
    """Started from a guess, the compiled search is still the SciPy search bit for bit, and
    it finds the root the search without a guess finds."""
    p = problem(seed, L, S, A, sigma, transitions=transitions, counts=counts)
    got = assert_same_search(p, guess=10.0**log_guess)
    plain = p.solve("fast")
    assert got.status == plain.status
    if plain.status == "optimal":
        assert got.x == pytest.approx(plain.x, rel=1e-12, abs=1e-300)
        assert got.value == pytest.approx(plain.value, rel=1e-12, abs=1e-12)


@numba_only
def test_guess_saves_passes_and_far_guesses_still_bracket():
    """A guess at tau* itself takes fewer passes than the search from tau = 1; guesses at the
    ends of the range still find the root."""
    from optplan.bench.cases import deepsea_instance

    rng = np.random.default_rng(12)
    for L in (6, 20):
        p = deepsea_instance(L, rng)
        plain = p.solve("fast")
        near = p.solve("fast", guess=plain.x * 1.001)
        assert near.info["evaluations"] < plain.info["evaluations"]
        assert near.x == pytest.approx(plain.x, rel=1e-12)
        for guess in (1e-250, 1e-8, 1e8, 1e250):
            far = assert_same_search(p, guess=guess)
            assert far.x == pytest.approx(plain.x, rel=1e-12)


@pytest.mark.parametrize(
    "guess, error",
    [(0.0, OptplanError), (-1.0, OptplanError), (math.nan, OptplanError),
     (math.inf, OptplanError), ("1", OptplanTypeError), (True, OptplanTypeError)],
)  # fmt: skip
def test_bad_guess(guess, error):
    p = problem(*FIXED[2][:5], **FIXED[2][5])
    with pytest.raises(error, match="guess"):
        p.solve("fast", guess=guess)
