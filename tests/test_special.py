"""The compiled special functions (:mod:`optplan.fast._special`) against SciPy and mpmath.

Tolerances are what the methods reach (recurrence and asymptotic series; Lentz's continued
fraction; Newton in a bracket): where SciPy itself is less accurate (``betaln`` of a large
first argument; ``stdtrit``'s lower tail) mpmath at 40 digits is the reference.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from scipy import special, stats

from optplan.fast import _special as S

mp.mp.dps = 40


def _positive(rng, n):
    return np.concatenate([np.exp(rng.uniform(-12.0, 28.0, n)), rng.uniform(0.5, 120.0, n),
                           [1e-12, 1.0, 9.999999, 10.0, 10.000001]])  # fmt: skip


def test_digamma_and_trigamma_match_scipy():
    x = _positive(np.random.default_rng(0), 2000)
    psi = np.array([S.digamma(v) for v in x])
    np.testing.assert_allclose(psi, special.digamma(x), rtol=5e-14, atol=1e-15)
    psi1 = np.array([S.trigamma(v) for v in x])
    np.testing.assert_allclose(psi1, special.polygamma(1, x), rtol=5e-15)


def test_log_beta_half_matches_mpmath():
    """``log B(a, 1/2)`` on both sides of the switch to Stirling's series, and at ``a`` where
    SciPy's ``betaln`` loses digits (1.8e-9 absolute at 4.7e5)."""
    rng = np.random.default_rng(1)
    a = np.concatenate([np.exp(rng.uniform(-10.0, 28.0, 150)), [9.999, 10.0, 10.001, 4.7e5]])
    got = np.array([S.log_beta_half(v) for v in a])
    want = np.array([float(mp.log(mp.beta(mp.mpf(float(v)), mp.mpf(0.5)))) for v in a])
    err = np.abs(got - want)
    assert np.all(err <= 2e-14 * np.maximum(1.0, np.abs(want))), err.max()


def test_student_t_quantile_matches_scipy_and_mpmath():
    """``stdtrit(nu, p)`` from 0.5 to 2e12 degrees of freedom (BQL's ``2 alpha`` reaches 2e12),
    both tails; at 7 degrees of freedom and ``p = 1e-9`` mpmath decides (SciPy is 4e-9 off)."""
    rng = np.random.default_rng(2)
    nu = np.exp(rng.uniform(np.log(0.5), np.log(2e12), 4000))
    p = rng.uniform(1e-6, 1.0 - 1e-6, 4000)
    got = np.array([S.student_t_quantile(a, b) for a, b in zip(nu, p, strict=True)])
    np.testing.assert_allclose(got, special.stdtrit(nu, p), rtol=2e-11)
    assert S.student_t_quantile(3.0, 0.5) == 0.0
    t = S.student_t_quantile(7.0, 1e-9)

    def sf(v):
        return mp.betainc(mp.mpf(3.5), mp.mpf(0.5), 0, 7 / (7 + mp.mpf(v) ** 2), regularized=True)

    want = float(mp.findroot(lambda v: sf(v) / 2 - mp.mpf(1e-9), mp.mpf(-t)))
    assert t == pytest.approx(-want, rel=1e-14)


def test_student_t_sf_and_pdf_match_scipy():
    rng = np.random.default_rng(3)
    nu = np.exp(rng.uniform(np.log(0.5), np.log(1e5), 3000))
    t = np.exp(rng.uniform(-8.0, 6.0, 3000))
    got = np.array([S.student_t_sf(a, b) for a, b in zip(t, nu, strict=True)])
    np.testing.assert_allclose(got, special.stdtr(nu, -t), rtol=1e-10)
    pdf = np.array([S.student_t_pdf(a, b) for a, b in zip(t, nu, strict=True)])
    np.testing.assert_allclose(pdf, stats.t.pdf(t, nu), rtol=1e-10)


def test_normal_quantile_matches_scipy():
    p = np.concatenate([np.random.default_rng(4).uniform(0.0, 1.0, 3000), [1e-300, 1e-20, 0.5,
                        0.02425, 1.0 - 1e-16]])  # fmt: skip
    got = np.array([S.normal_quantile(v) for v in p])
    np.testing.assert_allclose(got, special.ndtri(p), rtol=1e-13, atol=1e-15)
