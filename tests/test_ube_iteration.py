"""UncertaintyBellman's value iteration against an exact rational solve: every entry of ``u`` and
of the dual ``y`` within the requested relative ``tol`` wherever the status is ``optimal``, for
local terms and weights at any scale (1e-300 to 1e300, mixed across states)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import optplan as op
from optplan.result import OPTIMAL

EPS = np.finfo(float).eps


def exact_solve(M: list[list[Fraction]], b: list[Fraction]) -> list[Fraction]:
    """Gaussian elimination in rationals (``M`` nonsingular)."""
    n = len(b)
    rows = [list(M[i]) + [b[i]] for i in range(n)]
    for c in range(n):
        p = next(r for r in range(c, n) if rows[r][c] != 0)
        rows[c], rows[p] = rows[p], rows[c]
        for r in range(n):
            if r != c and rows[r][c] != 0:
                f = rows[r][c] / rows[c][c]
                rows[r] = [a - f * e for a, e in zip(rows[r], rows[c], strict=True)]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def exact_ube(problem) -> tuple[np.ndarray, np.ndarray]:
    """``u`` and ``y`` of the problem's float data, in exact rationals (returned as objects)."""
    P, pi = problem.mean_transitions, problem.policy
    nu, w = problem.local, problem.weights
    S, A, _ = P.shape
    g2 = Fraction(float(problem.discount**2))
    F = np.vectorize(Fraction, otypes=[object])
    P, pi, nu, w = F(P), F(pi), F(nu), F(w)
    P_pi = [[sum(pi[s, a] * P[s, a, t] for a in range(A)) for t in range(S)] for s in range(S)]
    M = [[Fraction(s == t) - g2 * P_pi[s][t] for t in range(S)] for s in range(S)]
    v = exact_solve(M, [sum(pi[s, a] * nu[s, a] for a in range(A)) for s in range(S)])
    u = np.array(
        [
            [nu[s, a] + g2 * sum(P[s, a, t] * v[t] for t in range(S)) for a in range(A)]
            for s in range(S)
        ],
        dtype=object,
    )
    inflow = [sum(P[s, a, t] * w[s, a] for s in range(S) for a in range(A)) for t in range(S)]
    z = exact_solve([[M[t][s] for t in range(S)] for s in range(S)], inflow)
    y = np.array(
        [[w[s, a] + g2 * pi[s, a] * z[s] for a in range(A)] for s in range(S)], dtype=object
    )
    return u, y


def scaled(draw, shape, zeros: bool, top: int) -> np.ndarray:
    mant = draw(
        st.lists(st.integers(1, 9), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
    )
    exps = draw(st.lists(st.integers(-300, top), min_size=len(mant), max_size=len(mant)))
    out = np.array([m * 10.0**e for m, e in zip(mant, exps, strict=True)]).reshape(shape)
    if zeros:
        keep = draw(st.lists(st.booleans(), min_size=out.size, max_size=out.size))
        out = np.where(np.reshape(keep, shape), out, 0.0)
    return out


@st.composite
def instances(draw):
    S, A = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    counts = draw(st.lists(st.integers(0, 4), min_size=S * A * S, max_size=S * A * S))
    P = np.reshape(counts, (S, A, S)).astype(float)
    P[..., 0] += P.sum(axis=-1) == 0
    pi = np.reshape(draw(st.lists(st.integers(0, 3), min_size=S * A, max_size=S * A)), (S, A))
    pi = pi.astype(float)
    pi[:, 0] += pi.sum(axis=-1) == 0
    problem = op.UncertaintyBellman(
        mean_transitions=P / P.sum(axis=-1, keepdims=True),
        policy=pi / pi.sum(axis=-1, keepdims=True),
        local=scaled(draw, (S, A), zeros=True, top=299),
        weights=scaled(draw, (S, A), zeros=False, top=0),  # w u stays finite
        discount=draw(st.sampled_from([0.1, 0.5, 0.9, 0.95])),
    )
    return problem, draw(st.sampled_from([1e-4, 1e-8, 1e-12]))


def assert_relative(name, got, exact, tol, slack):
    for idx in np.ndindex(exact.shape):
        ref = exact[idx]
        if ref == 0:
            assert got[idx] == 0.0, f"{name}{idx}: {got[idx]!r} against exactly 0"
            continue
        err = abs(Fraction(float(got[idx])) - ref) / ref
        assert err <= tol + slack, (
            f"{name}{idx}: {got[idx]!r} against {float(ref)!r} (rel. {float(err):.3g})"
        )


@settings(max_examples=300, deadline=None)
@given(instances())
def test_iteration_is_relatively_accurate_at_any_scale(case):
    problem, tol = case
    res = problem.solve(algorithm="iteration", tol=tol)
    if res.status != OPTIMAL:
        return
    u, y = exact_ube(problem)
    g2 = problem.discount**2
    slack = 64 * EPS / (1.0 - g2)  # rounding of the double iterates, not the stop test's
    assert_relative("u", res.x, u, tol, slack)
    assert_relative("y", res.multiplier, y, tol, slack)


def test_tiny_local_term_single_state():
    """S = A = 1, P = 1, gamma = 0.9: u = nu / (1 - 0.81) at every scale."""
    for nu in (1e-300, 1e-12, 1e-6, 1.0, 1e300):
        problem = op.UncertaintyBellman(
            mean_transitions=np.ones((1, 1, 1)), policy=np.ones((1, 1)), local=[[nu]], discount=0.9
        )
        res = problem.solve(algorithm="iteration", tol=1e-10)
        assert res.status == OPTIMAL
        exact = Fraction(nu) / (1 - Fraction(float(0.9**2)))
        assert abs(Fraction(float(res.x[0, 0])) - exact) / exact <= 1e-10 + 1e-14
