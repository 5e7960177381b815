"""One map from (model, criterion) to a planning problem, and the layer clock of episodic
agents: answers and input errors."""

import numpy as np
import pytest

import optplan as op
from optplan.agents.base import LayerClock
from optplan.problems.criteria import CONTINUING, CRITERIA, planning_problem, resolve_criterion

COWAN3 = op.load_model("models/cowan3.toml")


def test_criteria_are_listed_once_in_one_order():
    assert CRITERIA == ("average", "discounted", "finite_horizon")
    assert CONTINUING == CRITERIA[:2]


def test_each_model_gets_its_own_criterion_by_default():
    assert resolve_criterion(COWAN3) == "average"
    assert resolve_criterion(COWAN3.with_discount(0.9)) == "discounted"
    layered = op.FiniteHorizonMDP.from_stationary(COWAN3, 4)
    assert resolve_criterion(layered) == "finite_horizon"
    assert isinstance(planning_problem(layered), op.FiniteHorizonPlanning)


def test_planning_problem_builds_the_problem_the_criterion_names():
    avg = planning_problem(COWAN3.with_discount(0.9), "average")
    assert isinstance(avg, op.AverageRewardPlanning) and avg.mdp.discount is None
    disc = planning_problem(COWAN3, "discounted", discount=0.95)
    assert isinstance(disc, op.DiscountedPlanning) and disc.mdp.discount == 0.95
    fh = planning_problem(COWAN3, "finite_horizon", horizon=5)
    assert isinstance(fh, op.FiniteHorizonPlanning) and fh.mdp.horizon == 5
    # the same answers as the direct calls
    assert avg.solve().gain == op.solve_average_reward(COWAN3).gain


@pytest.mark.parametrize(
    "model, criterion, kwargs, error, match",
    [
        (COWAN3, "bogus", {}, ValueError, "criterion must be one of"),
        (COWAN3, "discounted", {}, ValueError, "needs a model with a discount"),
        (COWAN3, "finite_horizon", {}, ValueError, "does not apply"),
        (COWAN3, "finite_horizon", {"horizon": 0}, ValueError, "horizon must be a positive"),
        (COWAN3, "discounted", {"discount": 1.5}, ValueError, "discount must lie in"),
        ("cowan3", None, {}, TypeError, "model must be a TabularMDP or FiniteHorizonMDP"),
        (
            op.FiniteHorizonMDP.from_stationary(COWAN3, 3),
            "average",
            {},
            ValueError,
            "does not apply",
        ),
    ],
)
def test_planning_problem_refuses_what_does_not_fit(model, criterion, kwargs, error, match):
    with pytest.raises(error, match=match):
        planning_problem(model, criterion, **kwargs)


def test_layer_clock_counts_and_complains_past_the_horizon():
    clock = LayerClock(2)
    assert clock.current() == 0 and not clock.last
    clock.tick(done=False)
    assert clock.current() == 1 and clock.last
    clock.tick(done=False)
    with pytest.raises(RuntimeError, match="2 steps without done, but the model has 2 layers"):
        clock.current()
    clock.tick(done=True)
    assert clock.current() == 0
    continuing = LayerClock()
    for _ in range(5):
        continuing.tick(done=False)
    assert continuing.current() == 5 and not continuing.last


def test_posterior_sampling_never_gives_nan_rows():
    from optplan.posteriors import dirichlet_mean, sample_dirichlet

    alpha = np.array([[1e-300, 1e-300, 1e-300], [1.0, 2.0, 3.0]])
    draw = sample_dirichlet(alpha, np.random.default_rng(0))
    assert np.isfinite(draw).all() and np.allclose(draw.sum(axis=1), 1.0)
    assert np.allclose(dirichlet_mean(alpha[1]), [1 / 6, 2 / 6, 3 / 6])
