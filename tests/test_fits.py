"""Growth exponents of regret curves: the log-log slope of a curve, and the exponent of the mean
curve over seeds with its bootstrap interval, on synthetic curves of known exponent."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optplan._checks import OptplanError
from optplan.experiments.fits import growth_exponent, mean_curve_exponent

T = np.geomspace(1, 1e5, 80)


@pytest.mark.parametrize("k", [0.0, 0.5, 2 / 3, 1.0])
def test_growth_exponent_of_a_power_law(k):
    assert growth_exponent(T, 3.0 * T**k, 1e3, 1e5) == pytest.approx(k, abs=1e-12)


def test_growth_exponent_uses_the_window_only():
    y = np.where(T < 1e3, 5.0 * T, 5e3 * (T / 1e3) ** 0.25)  # linear, then t^(1/4)
    assert growth_exponent(T, y, 1e3, 1e5) == pytest.approx(0.25, abs=1e-12)
    assert growth_exponent(T, y, 1.0, 9e2) == pytest.approx(1.0, abs=1e-12)


def test_no_exponent_for_a_curve_at_zero_or_a_short_window():
    y = 3.0 * T**0.5
    y[T < 2e3] = 0.0
    assert math.isnan(growth_exponent(T, y, 1e3, 1e5))
    assert math.isnan(growth_exponent(T, 3.0 * T, 1e3, 1.1e3))  # fewer than 3 points


def test_mean_curve_exponent_covers_the_true_exponent():
    """Seeds ``c_i t^k`` times log-normal noise per point: the mean curve's exponent is ``k`` up
    to the noise; the 95% interval covers ``k`` in nearly all of 40 repetitions and shrinks with
    more seeds."""
    gen = np.random.default_rng(5)
    k, hits, widths = 0.5, 0, {}
    for rep in range(40):
        for seeds in (10, 40):
            c = gen.uniform(0.5, 2.0, size=(seeds, 1))
            Y = c * T**k * np.exp(0.1 * gen.standard_normal((seeds, T.size)))
            est, lo, hi = mean_curve_exponent(T, Y, 1e3, 1e5, n_boot=400, rng=rep)
            assert lo <= est <= hi
            widths.setdefault(seeds, []).append(hi - lo)
            hits += seeds == 10 and lo <= k <= hi
    assert hits >= 34  # 95% nominal coverage, 40 trials
    assert np.mean(widths[40]) < np.mean(widths[10])


def test_mean_curve_exponent_is_not_the_mean_of_per_seed_exponents():
    """Half the seeds flat (exponent 0), half linear: the mean curve grows like the linear half
    (exponent near 1), while the per-seed exponents average 0.5."""
    flat = np.full((10, T.size), 100.0)
    linear = np.tile(0.1 * T, (10, 1))
    Y = np.vstack([flat, linear])
    per_seed = np.mean([growth_exponent(T, y, 1e3, 1e5) for y in Y])
    est, lo, hi = mean_curve_exponent(T, Y, 1e3, 1e5, n_boot=500)
    assert per_seed == pytest.approx(0.5, abs=1e-12)
    assert 0.8 < est < 1.0 and lo < est < hi
    # every seed identical: the interval collapses onto the exponent
    est, lo, hi = mean_curve_exponent(T, linear, 1e3, 1e5, n_boot=50)
    assert est == pytest.approx(1.0, abs=1e-12) and hi - lo < 1e-12


def test_mean_curve_exponent_of_a_zero_curve_is_nan():
    est, lo, hi = mean_curve_exponent(T, np.zeros((4, T.size)), 1e3, 1e5, n_boot=20)
    assert all(math.isnan(x) for x in (est, lo, hi))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: growth_exponent(T[::-1], T, 1e3, 1e5), "increasing"),
        (lambda: growth_exponent(-T, T, 1e3, 1e5), "positive"),
        (lambda: growth_exponent(T, T[:-1], 1e3, 1e5), "shape of t"),
        (lambda: growth_exponent(T, T, 1e5, 1e3), "lo < hi"),
        (lambda: mean_curve_exponent(T, T, 1e3, 1e5), r"shape \(seeds"),
        (lambda: mean_curve_exponent(T, T[None], 1e3, 1e5, level=1.0), "level"),
        (lambda: mean_curve_exponent(T, T[None], 1e3, 1e5, n_boot=0), "n_boot"),
    ],
)
def test_bad_input_is_refused_by_name(call, match):
    with pytest.raises(OptplanError, match=match):
        call()
