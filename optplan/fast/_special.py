r"""Special functions for compiled code: ``digamma``, ``trigamma``, ``log B(a, 1/2)`` and the
Student-t quantile, as ``numba`` functions of floats (SciPy's are not callable from numba).

Each is a textbook method, checked against ``scipy.special`` in ``tests/test_special.py``:

- :func:`digamma`, :func:`trigamma`: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to
  ``x >= 10``, then the asymptotic series in Bernoulli numbers (error below 1e-16 there);
- :func:`log_beta_half`: ``lgamma`` differences below ``a = 10``; above, Stirling's series of
  ``lgamma(a + 1/2) - lgamma(a)`` (no cancellation of two large logarithms at ``a = 10^12``);
- :func:`student_t_sf`: ``I_x(nu/2, 1/2) / 2`` by the continued fraction of the incomplete
  beta function (Lentz's method), from whichever side converges;
- :func:`student_t_quantile`: Newton's method on :func:`student_t_sf` inside a bracket that
  bisection keeps, from the Cornish-Fisher start; for ``nu > 10^5`` the Cornish-Fisher
  expansion itself (Abramowitz and Stegun 26.7.5, error ``O(nu^-5)``) around the normal
  quantile (:func:`normal_quantile`: Acklam's rational start refined by Halley steps on
  ``erfc``).
"""

from __future__ import annotations

import math

from .._jit import njit

__all__ = ["digamma", "trigamma", "log_beta_half", "student_t_sf", "student_t_pdf",
           "student_t_quantile", "normal_quantile"]  # fmt: skip

_LGAMMA_HALF = 0.5 * math.log(math.pi)
_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)
#: Above this many degrees of freedom the quantile is the Cornish-Fisher expansion.
NORMAL_FROM = 1e5
# Acklam's rational approximation of the normal quantile (relative error 1.15e-9).
_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
      1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)  # fmt: skip
_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
      6.680131188771972e01, -1.328068155288572e01)  # fmt: skip
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
      -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)  # fmt: skip
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
      3.754408661907416e00)  # fmt: skip


@njit
def digamma(x):  # pragma: no cover - compiled by numba
    """``psi(x)`` for ``x > 0``."""
    r = 0.0
    while x < 10.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    t = f * (-1 / 12 + f * (1 / 120 + f * (-1 / 252 + f * (1 / 240 + f * (-1 / 132 + f * (
        691 / 32760 - f / 12))))))  # fmt: skip
    return r + math.log(x) - 0.5 / x + t


@njit
def trigamma(x):  # pragma: no cover - compiled by numba
    """``psi'(x)`` for ``x > 0``."""
    r = 0.0
    while x < 10.0:
        r += 1.0 / (x * x)
        x += 1.0
    f = 1.0 / (x * x)
    t = f * (1 / 6 + f * (-1 / 30 + f * (1 / 42 + f * (-1 / 30 + f * (5 / 66 + f * (
        -691 / 2730 + f * 7 / 6))))))  # fmt: skip
    return r + 1.0 / x + 0.5 * f + t / x


@njit
def _stirling(x):  # pragma: no cover - compiled by numba
    """``lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2)`` for ``x >= 10``."""
    f = 1.0 / (x * x)
    return (1 / 12 - f * (1 / 360 - f * (1 / 1260 - f * (1 / 1680 - f / 1188)))) / x


@njit
def log_beta_half(a):  # pragma: no cover - compiled by numba
    """``log B(a, 1/2)`` for ``a > 0``."""
    if a < 10.0:
        return math.lgamma(a) + _LGAMMA_HALF - math.lgamma(a + 0.5)
    d = 0.5 * math.log(a) + (a * math.log1p(0.5 / a) - 0.5) + _stirling(a + 0.5) - _stirling(a)
    return _LGAMMA_HALF - d


@njit
def _beta_cf(a, b, x):  # pragma: no cover - compiled by numba
    """The continued fraction of ``I_x(a, b)`` (Lentz's method), for
    ``x < (a + 1) / (a + b + 2)``."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2.0 * m
        for aa in (m * (b - m) * x / ((a - 1.0 + m2) * (a + m2)),
                   -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2))):  # fmt: skip
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return h


@njit
def student_t_sf(t, nu):  # pragma: no cover - compiled by numba
    """``P(T > t)`` of a Student-t with ``nu > 0`` degrees of freedom, for ``t >= 0``:
    ``I_x(nu/2, 1/2) / 2`` with ``x = nu / (nu + t^2)`` (and ``1 - x = t^2 / (nu + t^2)``
    computed as such)."""
    if t <= 0.0:
        return 0.5
    a = 0.5 * nu
    x = nu / (nu + t * t)
    y = t * t / (nu + t * t)
    front = math.exp(a * math.log(x) + 0.5 * math.log(y) - log_beta_half(a))
    if x < (a + 1.0) / (a + 2.5):
        return 0.5 * front * _beta_cf(a, 0.5, x) / a
    return 0.5 - front * _beta_cf(0.5, a, y)  # 1 - I_y(1/2, a), halved


@njit
def student_t_pdf(t, nu):  # pragma: no cover - compiled by numba
    """The density of a Student-t with ``nu`` degrees of freedom at ``t``."""
    return math.exp(-log_beta_half(0.5 * nu) - 0.5 * math.log(nu)
                    - 0.5 * (nu + 1.0) * math.log1p(t * t / nu))  # fmt: skip


@njit
def normal_quantile(p):  # pragma: no cover - compiled by numba
    """The standard normal quantile at ``p`` in ``(0, 1)``."""
    sign = 1.0
    if p > 0.5:
        sign, p = -1.0, 1.0 - p
    if p < 0.02425:
        q = math.sqrt(-2.0 * math.log(p))
        z = (((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]) / (
            (((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0)  # fmt: skip
    else:
        q = p - 0.5
        r = q * q
        z = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q / (
            ((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0)  # fmt: skip
    for _ in range(2):  # Halley on the lower tail 0.5 erfc(-z / sqrt 2) = p
        e = 0.5 * math.erfc(-z / _SQRT2) - p
        u = e * _SQRT2PI * math.exp(0.5 * z * z)
        z = z - u / (1.0 + 0.5 * z * u)
    return sign * z


@njit
def _cornish_fisher(z, nu):  # pragma: no cover - compiled by numba
    """The Student-t quantile from the normal one ``z`` (A&S 26.7.5)."""
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    return z + (g1 + (g2 + (g3 + g4 / nu) / nu) / nu) / nu


@njit
def student_t_quantile(nu, p):  # pragma: no cover - compiled by numba
    """``t`` with ``P(T <= t) = p`` for a Student-t with ``nu > 0`` degrees of freedom,
    ``p`` in ``(0, 1)`` (SciPy's ``stdtrit(nu, p)``)."""
    if p == 0.5:
        return 0.0
    # the upper tail's probability, exact from either side (1 - (1 - p) would round)
    sign, target = (-1.0, p) if p < 0.5 else (1.0, 1.0 - p)
    t = _cornish_fisher(-normal_quantile(target), nu)
    if nu > NORMAL_FROM:
        return sign * t
    lo, hi = 0.0, math.inf
    if not (t > 0.0 and t < 1e300):
        t = 1.0
    for _ in range(200):
        g = student_t_sf(t, nu) - target  # decreasing in t
        if g > 0.0:
            lo = t
        else:
            hi = t
        step = g / student_t_pdf(t, nu)
        new = t + step
        if not (new > lo and new < hi):  # Newton left the bracket: bisect (or grow)
            new = 0.5 * (lo + hi) if hi < math.inf else 2.0 * t + 1.0
        if abs(new - t) <= 4e-16 * new:
            return sign * new
        t = new
    return sign * t
