"""API conventions: ``normalize=`` for float32 / rounded ``P``, ``run(..., episodes=)``
refused at once on an environment that never ends an episode, the ``py.typed`` marker, and
the package logger (a null handler; fallbacks and path switches logged once)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import optplan
from optplan.agents import RandomAgent
from optplan.envs import DiscountedResets, TabularEnv
from optplan.experiments import run
from optplan.experiments.run import never_ends_episodes
from optplan.generators import riverswim
from optplan.mdp import NORMALIZE_TOL, FiniteHorizonMDP, TabularMDP


def _rows(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])


# --- normalize= --------------------------------------------------------------------------


def test_float32_rows_refused_with_a_hint_then_accepted_with_normalize():
    P32 = _rows((5, 3, 5)).astype(np.float32)
    R = np.random.default_rng(1).random((5, 3))
    assert np.abs(P32.astype(float).sum(-1) - 1).max() > 1e-9  # really off in float64
    with pytest.raises(ValueError, match=r"sums to .*normalize=True"):
        TabularMDP(P32, R)
    mdp = TabularMDP(P32, R, discount=0.9, normalize=True)
    assert mdp.P.dtype == np.float64 and not mdp.P.flags.writeable
    np.testing.assert_allclose(mdp.P.sum(-1), 1.0, rtol=0, atol=1e-15)
    # a rescaling, not a replacement: within float32 round-off of the input
    np.testing.assert_allclose(mdp.P, P32.astype(float), rtol=0, atol=1e-6)
    assert mdp.discount == 0.9 and mdp == mdp.with_discount(0.9)


def test_rounded_rows_and_initial_normalized():
    P = np.round(_rows((4, 2, 4), seed=2), 7)  # rows off by up to ~2e-7
    init = np.round(np.array([1, 1, 1]) / 3, 7)
    with pytest.raises(ValueError, match="normalize=True"):
        TabularMDP(P, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="initial.*normalize=True"):
        TabularMDP(_rows((3, 2, 3)), np.zeros((3, 2)), initial=init)
    mdp = TabularMDP(P, np.zeros((4, 2)), normalize=True)
    np.testing.assert_allclose(mdp.P.sum(-1), 1.0, rtol=0, atol=1e-15)
    m3 = TabularMDP(_rows((3, 2, 3)), np.zeros((3, 2)), initial=init, normalize=True)
    assert abs(m3.initial.sum() - 1) < 1e-15
    fh = FiniteHorizonMDP(
        np.round(_rows((2, 4, 2, 4), seed=3), 7), np.zeros((2, 4, 2)), normalize=True
    )
    np.testing.assert_allclose(fh.P.sum(-1), 1.0, rtol=0, atol=1e-15)


def test_normalize_still_refuses_wrong_rows_and_negatives():
    P = _rows((3, 2, 3))
    far = P.copy()
    far[1, 0] *= 1 + 10 * NORMALIZE_TOL  # a wrong row, not a rounded one
    with pytest.raises(ValueError, match=r"row P\[s=1, a=0, :\] sums to") as err:
        TabularMDP(far, np.zeros((3, 2)), normalize=True)
    assert "normalize=True" not in str(err.value)  # the hint only where it would help
    neg = P.copy()
    neg[2, 1] = [1.0 + 1e-8, -1e-8, 0.0]
    with pytest.raises(ValueError, match="negative entry"):
        TabularMDP(neg, np.zeros((3, 2)), normalize=True)
    with pytest.raises(TypeError, match="normalize must be True or False, got 'yes'"):
        TabularMDP(P, np.zeros((3, 2)), normalize="yes")


def test_normalize_leaves_exact_rows_alone_and_is_not_a_field():
    P = _rows((3, 2, 3), seed=4)
    a = TabularMDP(P, np.zeros((3, 2)))
    b = TabularMDP(P, np.zeros((3, 2)), normalize=True)
    np.testing.assert_allclose(a.P, b.P, rtol=0, atol=1e-15)
    assert "normalize" not in {f.name for f in dataclasses.fields(TabularMDP)}


# --- run(..., episodes=) on a continuing environment ----------------------------------------


def test_episodes_on_a_continuing_env_refused_at_once():
    env = TabularEnv(riverswim(6))
    agent = RandomAgent.for_mdp(env.mdp)
    assert never_ends_episodes(env)
    with pytest.raises(ValueError, match=r"episodes=10 needs an environment whose episodes end"):
        run(agent, env, episodes=10)
    # the same model where episodes do end is accepted
    assert not never_ends_episodes(TabularEnv(riverswim(6), max_steps=5))
    assert run(agent, TabularEnv(riverswim(6), max_steps=5), episodes=3).episodes == 3
    resets = DiscountedResets(TabularEnv(riverswim(6)), 0.5)
    assert not never_ends_episodes(resets)
    assert run(agent, resets, episodes=3, criterion="average").episodes == 3


def test_episodes_refusal_sees_through_gymnasium_make():
    gym = pytest.importorskip("gymnasium")
    import optplan.envs  # noqa: F401  registers optplan/...

    env = gym.make("optplan/RiverSwim-v0")  # OrderEnforcing(PassiveEnvChecker(TabularEnv))
    assert never_ends_episodes(env)
    with pytest.raises(ValueError, match="episodes=2 needs"):
        run(RandomAgent.for_mdp(env.unwrapped.mdp), env, episodes=2)
    assert not never_ends_episodes(gym.make("optplan/RiverSwim-v0", max_episode_steps=7))
    assert not never_ends_episodes(gym.make("optplan/RiverSwimResets-v0"))
    assert not never_ends_episodes(gym.make("optplan/DeepSea-v0"))


# --- py.typed ---------------------------------------------------------------------------


def test_py_typed_marker_shipped():
    pkg = Path(optplan.__file__).resolve().parent
    assert (pkg / "py.typed").is_file()
    pyproject = (pkg.parent / "pyproject.toml").read_text()
    assert 'optplan = ["py.typed"]' in pyproject  # package data: installed wheels carry it


# --- logging ----------------------------------------------------------------------------


def test_package_logger_has_a_null_handler_only():
    import logging

    handlers = logging.getLogger("optplan").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    assert all(isinstance(h, logging.NullHandler) for h in handlers)  # no config at import


class _FailingProblem:
    """A problem whose conic path always fails (what a solver error looks like to an agent)."""

    def solve(self, method, solver=None):
        from optplan.result import SOLVER_ERROR, PlanResult

        return PlanResult(
            float("nan"), status=SOLVER_ERROR, message="ECOS: numerical trouble", solver=solver
        )


def test_conic_fallback_logged_once_per_status_then_debug(caplog):
    import logging

    from optplan.agents.base import ConicFallback

    agent = ConicFallback()
    agent.init_fallback("conic", "ECOS")
    with caplog.at_level(logging.DEBUG, logger="optplan"):
        assert agent.solve_conic(_FailingProblem()) is None
        assert agent.solve_conic(_FailingProblem()) is None
    recs = [r for r in caplog.records if r.name == "optplan.agents.base"]
    assert [r.levelno for r in recs] == [logging.WARNING, logging.DEBUG]
    assert "conic _FailingProblem by ECOS ended 'solver_error'" in recs[0].getMessage()
    assert "using the fast answer instead (fallback 1)" in recs[0].getMessage()
    assert agent.fallbacks == 2
    agent.reset_fallback()  # a new run warns again
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="optplan"):
        agent.solve_conic(_FailingProblem())
    assert len([r for r in caplog.records if r.name == "optplan.agents.base"]) == 1


def test_policy_iteration_switch_to_rvi_logged(caplog):
    import logging

    from optplan.problems import solve_average_reward

    P = np.zeros((2, 1, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0  # two absorbing states: a policy with 2 recurrent classes
    mdp = TabularMDP(P, np.ones((2, 1)))
    with caplog.at_level(logging.INFO, logger="optplan"):
        res = solve_average_reward(mdp, method="fast")
    assert res.status == "optimal" and res.gain == pytest.approx(1.0)
    (rec,) = [r for r in caplog.records if r.name == "optplan.fast.average_reward"]
    assert rec.levelno == logging.INFO
    assert (
        "2 recurrent classes" in rec.getMessage() and "relative value iteration" in rec.getMessage()
    )
