"""The RAVI-UCB agents' compiled loop under discounted resets (``play_resets``) equals the
generic loop, which calls the same compiled steps: the whole Trace (states, actions, rewards,
regret curves, episode ends, the oracle run, the occupancy regret of the tracked policies), the
agent left behind (Lambda^-1, Lambda, b, theta_hat, phi, V_k, pi_k, Q, counts, clocks), the
generators and the environment's state; on the linear mixture (d = 1, 4, 8; reward noise) and
RiverSwim (known and learned rewards) under discounted resets, for runs counted in steps and
in episodes (buffers grown, the end-of-episode hook called alike); and runs it does not cover
take the generic loop. The steps themselves are checked by hand: the action against NumPy's
``searchsorted``, the linear record against ``numpy.linalg.inv``."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import assert_same_trace, both_loops

from optplan._checks import OptplanError
from optplan.agents.ravi import RAVIUCB, RAVIUCBLinear, ravi_act, ravi_observe
from optplan.agents.registry import make_agent
from optplan.envs import DiscountedResets, LinearMixtureMDP, TabularEnv
from optplan.envs.registry import ENVS
from optplan.experiments import compiled, engines, run
from optplan.generators import riverswim

LINEAR_LEFT = ("Lambda_inv", "Lambda", "b", "theta_hat", "phi", "values", "q", "log_policy")
TABULAR_LEFT = ("N", "N_next", "reward_sums", "values", "q", "log_policy")


def make_env(name, **params):
    comp = ENVS[name]
    return comp.build(0, **comp.resolve(params, name))


def both(agent_name, make, seed, run_kw, **params):
    """``(trace, agent, env)`` of the generic loop and of the compiled one."""
    return both_loops(make, agent_name, seed, run_kw, **params)


def assert_same_left(ref, got):
    (_, ar, er), (_, ac, ec) = ref, got
    assert ac.rng.bit_generator.state == ar.rng.bit_generator.state
    assert ec.np_random.bit_generator.state == er.np_random.bit_generator.state
    ir, ic = er.env, ec.env
    assert ic.np_random.bit_generator.state == ir.np_random.bit_generator.state
    assert (ic._state, ic._t, ic._done) == (ir._state, ir._t, ir._done)
    assert (ac.t, ac.epochs) == (ar.t, ar.epochs)
    names = LINEAR_LEFT if isinstance(ar, RAVIUCBLinear) else TABULAR_LEFT
    for name in (*names, "policy", "_cdf"):
        x, y = getattr(ac, name), getattr(ar, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)


LINEAR_CASES = [
    # (environment parameters, agent parameters)
    ({}, {}),
    ({"d": 1, "n_states": 8}, {"beta_scale": 0.1}),
    ({"d": 8, "reward_noise": 0.3, "discount": 0.8}, {"eta": 0.5, "lam": 2.0}),
    ({"n_states": 5, "n_actions": 3}, {"beta": 0.5, "eta_scale": 100.0}),
]


@pytest.mark.parametrize("env_params,params", LINEAR_CASES)
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_linear_agent_equals_python_loop(env_params, params, seed):
    steps = 1500
    ref, got = both(
        "ravi-ucb-linear",
        lambda: make_env("linear-mixture", **env_params),
        seed,
        {"steps": steps},
        horizon=steps,
        **params,
    )
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)
    assert ref[0].occupancy_regret is not None and ref[0].episodes > 50


@pytest.mark.parametrize("known_rewards", [True, False])
@pytest.mark.parametrize("seed", [0, 4])
def test_tabular_agent_equals_python_loop(known_rewards, seed):
    ref, got = both(
        "ravi-ucb",
        lambda: make_env("riverswim-resets", reward_noise=0.2),
        seed,
        {"steps": 1200},
        horizon=1200,
        known_rewards=known_rewards,
        beta_scale=0.05,
    )
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref, got)


def test_runs_counted_in_episodes_and_the_hook():
    """500 episodes (about 5000 steps: the buffers grow past 4096) with the hook seeing the
    agent after each epoch's plan; independent oracle noise."""
    seen = {}
    for engine in ("python", "compiled"):
        env = make_env("linear-mixture")
        agent = make_agent("ravi-ucb-linear", env, horizon=5000)
        calls = []

        def hook(n, a, calls=calls):
            calls.append((n, a.epochs, a.t, float(a.q.sum())))

        trace = run(agent, env, episodes=500, seed=3, engine=engine, on_episode_end=hook,
                    oracle_noise="independent")  # fmt: skip
        seen[engine] = (trace, agent, env, calls)
    ref, got = seen["python"], seen["compiled"]
    assert_same_trace(ref[0], got[0])
    assert_same_left(ref[:3], got[:3])
    assert got[3] == ref[3] and len(ref[3]) == 500
    assert ref[0].steps > 4096


def test_the_engine_is_taken():
    env = make_env("linear-mixture")
    agent = make_agent("ravi-ucb-linear", env, horizon=100)
    assert engines.select("auto", agent, env, None, True).name == ENGINE
    env = make_env("riverswim-resets")
    agent = make_agent("ravi-ucb", env, horizon=100)
    assert engines.select("compiled", agent, env, 10, False).name == ENGINE


ENGINE = "the agent's compiled steps"


def test_uncovered_runs_take_the_generic_loop():
    class Sub(RAVIUCB):
        def update(self, state, action, reward, next_state, done):
            super().update(state, action, reward, next_state, done)

    env = make_env("riverswim-resets")
    sub = Sub(6, 2, discount=0.9, horizon=100)
    assert "Sub overrides update" in compiled.compiled_reason(sub, env, None, True)
    assert engines.select("auto", sub, env, None, True) is None
    # an agent without a loop under discounted resets
    other = make_agent("epsilon-greedy", env)
    assert "no compiled loop under discounted resets" in compiled.compiled_reason(other, env)
    # no discounted resets: the linear agent on the continuing mixture plays one epoch
    inner = LinearMixtureMDP.random(6, 2, 2, 0)
    agent = RAVIUCBLinear(inner.features, inner.mdp.R, discount=0.9, horizon=100)
    assert compiled.compiled_reason(agent, inner, None, False) is None


def test_steps_by_hand():
    """The action: ``searchsorted`` of one uniform times the row's total; the linear agent's
    record: ``Lambda^{-1}`` equal to ``inv(Lambda)`` after the Sherman-Morrison updates."""
    env = make_env("linear-mixture", d=3, n_states=5)
    agent = make_agent("ravi-ucb-linear", env, horizon=100)
    agent.reset(np.random.default_rng(4))
    s = agent.state
    twin, rng = np.random.default_rng(9), np.random.default_rng(9)
    for x in range(5):
        row = agent._cdf[x]
        assert ravi_act(s, x, rng) == int(row.searchsorted(twin.random() * row[-1], "right"))
    gen = np.random.default_rng(1)
    for _ in range(40):
        x, a, y = int(gen.integers(5)), int(gen.integers(2)), int(gen.integers(5))
        assert not ravi_observe(s, x, a, 0.0, y, False, rng)
    np.testing.assert_allclose(agent.Lambda_inv, np.linalg.inv(agent.Lambda), rtol=1e-10,
                               atol=1e-12)  # fmt: skip
    assert agent.t == 41


def test_an_inadmissible_action_is_refused_alike():
    """An agent whose policy puts mass where the environment admits no action: both loops
    raise the environment's error at the same step."""
    mdp = riverswim(6)
    mask = np.ones((6, 2), dtype=bool)
    mask[3, 1] = False
    masked = type(mdp)(mdp.P, mdp.R, discount=mdp.discount, initial=mdp.initial,
                       action_mask=mask)  # fmt: skip
    errors = {}
    for engine in ("python", "compiled"):
        env = DiscountedResets(TabularEnv(masked), 0.9)
        agent = RAVIUCB(6, 2, discount=0.9, horizon=500, rewards=mdp.R)
        with pytest.raises(OptplanError, match="not admissible") as info:
            run(agent, env, steps=500, seed=2, engine=engine)
        errors[engine] = (str(info.value), agent.t, env.env._state)
    assert errors["compiled"] == errors["python"]
