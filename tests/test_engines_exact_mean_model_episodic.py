"""The episodic agents' compiled engine (optplan.experiments.episodic_compiled) equals the
generic Python loop exactly for the episodic UBE (Thompson actions on the agent's generator)
and count-bonus agents on every environment of tests/test_engines_exact_episodic.py: the
whole Trace, the agent's posterior, plan, counters and generator, the environment left
behind; runs ending mid-episode and runs counted in episodes."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import assert_same_trace
from test_engines_exact_episodic import ENVIRONMENTS, both

from optplan.agents import UBE, CountBonus
from optplan.envs import DeepSea
from optplan.experiments import _segment_kernels, engines, episodic_compiled

pytestmark = pytest.mark.skipif(not _segment_kernels.AVAILABLE, reason="numba not installed")

VARIANTS = {
    "ube": [
        {},
        {"zeta": 0.0},
        {"local": "lemma1", "prior_var": 2.0},
        {"transitions": "known", "zeta": 0.5},
    ],
    "count-bonus": [{}, {"beta": 2.0, "transition_prior": 0.5}, {"transitions": "known"}],
}
CASES = [(name, p) for name, ps in VARIANTS.items() for p in ps]


def assert_same_left(ref, got):
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    assert (ac.episode, ac.clock.layer, ac.steps, ac.plans, ac._top) == (
        ar.episode,
        ar.clock.layer,
        ar.steps,
        ar.plans,
        ar._top,
    )
    for name in ("counts", "reward_sums", "next_counts"):
        np.testing.assert_array_equal(
            getattr(ac.posterior, name), getattr(ar.posterior, name), err_msg=name
        )
    names = ["policy", "q", "mean", "var", "P", "_QA", "_VA"]
    names += ["u", "local", "_sqrt_u"] if isinstance(ar, UBE) else ["bonus", "_QB", "_VB"]
    for name in names:
        np.testing.assert_array_equal(getattr(ac, name), getattr(ar, name), err_msg=name)
    assert ac._scale == ar._scale
    assert (ec._state, ec._t, ec._done) == (er._state, er._t, er._done)
    if isinstance(er, DeepSea):
        assert (ec._row, ec._column, ec._running) == (er._row, er._column, er._running)


@pytest.mark.parametrize("env_name", list(ENVIRONMENTS))
@pytest.mark.parametrize("agent_name,params", CASES, ids=lambda x: str(x))
def test_equals_python_loop(agent_name, params, env_name):
    ref, got = both(agent_name, env_name, 2, {"steps": 903}, **params)
    engine = engines.select("compiled", got[1], got[2], None, False)
    assert engine.name == "episodic agents"
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    assert ref[0].episodes > 20


@pytest.mark.parametrize("agent_name", ["ube", "count-bonus"])
def test_runs_counted_in_episodes(agent_name):
    ref, got = both(agent_name, "deepsea-6", 5, {"episodes": 60})
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_continuing_agents_are_not_this_engines():
    agent = CountBonus(3, 2)
    assert "continuing" in episodic_compiled._agent_reason(agent)
