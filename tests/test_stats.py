"""Statistics over seeds (:mod:`optplan.experiments.stats`): no matplotlib needed."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from optplan.experiments.stats import aggregate, mean_ci


def _hand_ci(column, level=0.95):
    col = np.asarray(column, dtype=float)
    n = col.size
    mean = sum(col) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in col) / (n - 1))
    return mean, stats.t.ppf((1 + level) / 2, n - 1) * sd / math.sqrt(n)


# --- mean_ci --------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_mean_ci_matches_hand_computation(level):
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    mean, half = mean_ci(values, level=level)
    expected = [_hand_ci(values[:, j], level) for j in range(2)]
    np.testing.assert_allclose(mean, [e[0] for e in expected])
    np.testing.assert_allclose(half, [e[1] for e in expected])
    # Column 0: mean 3, sd 2, n 3 -> t_{0.975, 2} * 2 / sqrt(3).
    if level == 0.95:
        np.testing.assert_allclose(half[0], 4.302652729911275 * 2 / math.sqrt(3))


def test_mean_ci_other_axis():
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    mean_t, half_t = mean_ci(values.T, axis=1)
    mean, half = mean_ci(values, axis=0)
    np.testing.assert_allclose(mean_t, mean)
    np.testing.assert_allclose(half_t, half)


def test_mean_ci_nan_handling_without_warnings():
    nan = np.nan
    values = np.array(
        [
            [1.0, 2.0, nan, nan],
            [3.0, nan, nan, 7.0],
            [5.0, nan, nan, 8.0],
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, half = mean_ci(values)
    np.testing.assert_allclose(mean[[0, 1, 3]], [3.0, 2.0, 7.5])
    assert np.isnan(mean[2])  # all-NaN column
    assert np.isnan(half[1])  # a single value: no interval
    assert np.isnan(half[2])
    np.testing.assert_allclose(half[0], _hand_ci([1.0, 3.0, 5.0])[1])
    np.testing.assert_allclose(half[3], _hand_ci([7.0, 8.0])[1])


def test_mean_ci_empty_and_single_row_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, half = mean_ci(np.empty((0, 3)))
        one_mean, one_half = mean_ci(np.array([[1.0, 2.0, 3.0]]))
    assert mean.shape == half.shape == (3,)
    assert np.all(np.isnan(mean)) and np.all(np.isnan(half))
    np.testing.assert_array_equal(one_mean, [1.0, 2.0, 3.0])
    assert np.all(np.isnan(one_half))


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_mean_ci_rejects_bad_level(level):
    with pytest.raises(ValueError, match="level") as info:
        mean_ci([[1.0], [2.0]], level=level)
    assert repr(level) in str(info.value)


# --- aggregate ------------------------------------------------------------------------------


def _row(agent, env, status="ok", regret=1.0, normalized=0.5, wall=2.0, **extra):
    return {
        "agent": agent,
        "env": env,
        "status": status,
        "regret": regret if status == "ok" else None,
        "normalized_regret": normalized if status == "ok" else None,
        "wall_time": wall,
        "time_to_solve": None,
        "goal_rate": None,
    } | extra


def test_aggregate_groups_counts_failures_and_means_over_ok_tasks():
    rows = [
        _row("a", "e", regret=1.0, normalized=0.1, wall=1.0),
        _row("a", "e", regret=3.0, normalized=0.3, wall=3.0),
        _row("a", "e", regret=5.0, normalized=0.5, wall=5.0),
        _row("a", "e", status="error"),
        _row("b", "e", regret=2.0, goal_rate=1.0, time_to_solve=40),
        _row("b", "e", regret=4.0, goal_rate=0.5, time_to_solve=None),
        _row("b", "e", regret=6.0, goal_rate=1.0, time_to_solve=60),
    ]
    a, b = aggregate(rows)
    assert (a["agent"], a["env"], a["tasks"], a["failed"]) == ("a", "e", 4, 1)
    assert a["regret"] == pytest.approx(3.0) and a["normalized_regret"] == pytest.approx(0.3)
    assert a["regret_ci95"] == pytest.approx(_hand_ci([1.0, 3.0, 5.0])[1])
    assert a["wall_time_mean"] == pytest.approx(3.0) and "solved" not in a
    assert (b["tasks"], b["failed"], b["solved"], b["time_to_solve_median"]) == (3, 0, "2/3", 50)


def test_aggregate_all_failed_and_single_task():
    failed, single = aggregate([_row("a", "e", status="error"), _row("b", "e", regret=2.0)])
    assert failed["failed"] == 1 and failed["regret"] is None and failed["regret_ci95"] is None
    assert failed["wall_time_mean"] is None
    assert single["regret"] == 2.0 and single["regret_ci95"] is None  # one seed: no interval
