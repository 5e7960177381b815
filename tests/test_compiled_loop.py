"""The compiled loop (:mod:`optplan.envs.kernels`, :mod:`optplan.experiments.compiled`): every
agent with compiled steps gives the same run in it as in the generic loop, on every kind of
environment it plays, and the loops' bookkeeping (episode ends, goals, hooks, inadmissible
actions, the oracle run) is the generic loop's."""

import numpy as np
import pytest

import optplan as op
from optplan.agents import EpsilonGreedyQ, SoftQ, make_agent
from optplan.agents.base import CompiledAgent
from optplan.envs import DeepSea, TabularEnv
from optplan.envs.kernels import env_arrays
from optplan.envs.registry import ENVS
from optplan.experiments import compiled, run
from optplan.experiments.oracle import solve_oracle
from optplan.experiments.run import oracle_run


def _leaves(state) -> list:
    """The arrays of a compiled agent's state, nested tuples (scratch) flattened."""
    out = []
    for x in state:
        out.extend(_leaves(x) if isinstance(x, tuple) else [x])
    return out


def _env(name, **params):
    spec = ENVS[name]
    return spec.build(0, **spec.resolve(params, name))


def _finite_env(noise=0.3, **kw):
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(4), size=(3, 4, 2))
    mdp = op.FiniteHorizonMDP(P, rng.normal(size=(3, 4, 2)))
    return TabularEnv(mdp, reward_noise=noise, **kw)


def _transition_env():
    from optplan.envs import TransitionRewardEnv

    rng = np.random.default_rng(8)
    P = rng.dirichlet(np.ones(5), size=(5, 2))
    sd = rng.choice([0.0, 0.4], size=P.shape)
    return TransitionRewardEnv(P, rng.normal(size=P.shape), sd, discount=None)


#: (environment factory, run length) of each kind a compiled loop plays.
ENVIRONMENTS = {
    "riverswim-noisy": (lambda: _env("riverswim", n_states=6, reward_noise=0.5), {"steps": 3000}),
    "cowan3": (lambda: _env("model", path="models/cowan3.toml"), {"steps": 3000}),
    "deepsea-windy": (lambda: DeepSea(8, deterministic=False), {"episodes": 200}),
    "deepsea-k-learning": (lambda: DeepSea(6, variant="k-learning"), {"steps": 1500}),
    "finite-horizon": (lambda: _finite_env(), {"episodes": 300}),
    "transition-rewards": (lambda: _transition_env(), {"steps": 2000}),
}

#: Agents with compiled steps.
COMPILED_AGENTS = ("epsilon-greedy", "soft-q", "q-learning-ucb", "ucrl2", "kl-ucrl", "bql",
                   "psrl-continuing", "ube-continuing", "moment-matching", "mdp-ucb", "olp",
                   "mdp-dmed", "mdp-ps", "imed-rl", "count-bonus", "ube", "k-learning",
                   "psrl")  # fmt: skip


def _fits(agent, make_env) -> bool:
    env = make_env()
    try:
        make_agent(agent, env)
    except ValueError:  # e.g. UCRL on a layered model: refused, naming why
        return False
    return True


def _pairs():
    return [
        pytest.param(agent, make_env, length, id=f"{agent}-{label}")
        for agent in COMPILED_AGENTS
        for label, (make_env, length) in ENVIRONMENTS.items()
        if _fits(agent, make_env)
    ]


@pytest.mark.parametrize(("agent_name", "make_env", "length"), _pairs())
def test_a_seed_gives_the_same_run_in_both_loops(agent_name, make_env, length):
    env = make_env()
    agent = make_agent(agent_name, env)
    assert compiled.compiled_reason(agent, env, length.get("episodes")) is None
    agents, traces = [], []
    for engine in ("python", "compiled"):
        env = make_env()
        agents.append(make_agent(agent_name, env))
        traces.append(run(agents[-1], env, seed=11, engine=engine, **length))
    a, b = traces
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_allclose(a.rewards, b.rewards, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.regret, b.regret, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.draft_regret, b.draft_regret, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(a.episode_ends, b.episode_ends)
    np.testing.assert_array_equal(a.successes, b.successes)
    for x, y in zip(
        _leaves(agents[0].state), _leaves(agents[1].state), strict=True
    ):  # all the agent learned
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    versions = [getattr(agent, "policy_version", None) for agent in agents]
    assert versions[0] == versions[1]


@pytest.mark.parametrize(
    "params", [{"moment_match": "monte-carlo", "n_samples": 50}, {"action": "quantile"}]
)
def test_bql_variants_give_the_same_run_in_both_loops(params):
    """The Monte-Carlo update draws on the agent's generator after the environment's step, in
    both loops; the quantile rule keeps each pair's quantile in the state."""
    traces, agents = [], []
    for engine in ("python", "compiled"):
        env = _env("riverswim", n_states=6, reward_noise=0.5)
        agents.append(make_agent("bql", env, **params))
        traces.append(run(agents[-1], env, steps=1500, seed=4, engine=engine))
    np.testing.assert_array_equal(traces[0].actions, traces[1].actions)
    np.testing.assert_array_equal(traces[0].rewards, traces[1].rewards)
    for x, y in zip(_leaves(agents[0].state), _leaves(agents[1].state), strict=True):
        np.testing.assert_array_equal(x, y)
    assert agents[0].steps == 1500


def test_a_degenerate_bql_update_stops_both_loops_alike():
    """One Monte-Carlo draw per update: ``E[mu^2 tau] - E[tau] mu0^2`` cancels to ``-1e-12``
    and the projection divides by zero (at update 5 of this run): the run ends with the same
    error in both loops, the posteriors alike and that pair's left as it was."""
    params = {"moment_match": "monte-carlo", "n_samples": 1, "prior_mu0": 1e3, "prior_beta": 1e3}
    agents = []
    for engine in ("python", "compiled"):
        env = _env("riverswim", n_states=6)
        agents.append(make_agent("bql", env, **params))
        with pytest.raises(ZeroDivisionError, match=r"divides by zero.*n_samples=1"):
            run(agents[-1], env, steps=300, seed=2, engine=engine)
    assert agents[0].steps == agents[1].steps == 5
    for x, y in zip(_leaves(agents[0].state), _leaves(agents[1].state), strict=True):
        np.testing.assert_array_equal(x, y)


def test_policies_changed_by_plans_are_tracked_in_the_compiled_loop():
    """DeepSea-chain is discounted: the occupancy regret needs the policy of every step."""
    traces = []
    for engine in ("python", "compiled"):
        env = _env("deepsea-chain", n=6)
        traces.append(run(make_agent("ucrl2", env), env, steps=1500, seed=3, engine=engine))
    a, b = traces
    assert a.occupancy_regret is not None and a.occupancy_regret[-1] != 0
    np.testing.assert_allclose(a.occupancy_regret, b.occupancy_regret, rtol=1e-12, atol=1e-12)
    env = _env("deepsea-chain", n=6)
    why = compiled.compiled_reason(make_agent("soft-q", env), env, None, track=True)
    assert "policies" in why  # soft Q-learning's policy changes at every compiled step


def test_ucrl_plans_in_python_between_compiled_segments():
    env = _env("riverswim", n_states=6)
    agent = make_agent("kl-ucrl", env, method="conic")
    trace = run(agent, env, steps=300, seed=0, engine="compiled")
    assert agent.episodes > 3 and agent.t == 301
    assert agent.N.sum() == 300 == len(trace.states)


def test_the_agent_state_after_both_loops_is_the_same():
    made = []
    for engine in ("python", "compiled"):
        env = _env("riverswim", n_states=6)
        agent = make_agent("epsilon-greedy", env)
        run(agent, env, steps=4000, seed=2, engine=engine)
        made.append(agent)
    for x, y in zip(_leaves(made[0].state), _leaves(made[1].state), strict=True):
        np.testing.assert_array_equal(x, y)
    assert made[0].policy_version == made[1].policy_version > 0


@pytest.mark.parametrize("stop", [False, True])
def test_hooks_see_each_episode_in_the_compiled_loop(stop):
    seen = {}
    for engine in ("python", "compiled"):
        calls = []
        env = DeepSea(5)
        agent = make_agent("epsilon-greedy", env)
        hook = calls.append
        trace = run(agent, env, episodes=400, seed=4, engine=engine, stop_when_solved=stop,
                    on_episode_end=lambda n, ag, hook=hook: hook((n, ag.layer)))  # fmt: skip
        seen[engine] = (calls, trace.episode_ends.tolist(), trace.stopped_early)
    assert seen["python"] == seen["compiled"]
    calls = seen["compiled"][0]
    assert calls[0] == (1, 0)  # after the done update: the agent is back at layer 0
    assert len(calls) == len(seen["compiled"][1])


def test_truncated_episodes_of_a_continuing_model():
    runs = []
    for engine in ("python", "compiled"):
        mdp = op.load_model("models/cowan3.toml")
        env = TabularEnv(mdp, max_steps=7, goal_states=[2])
        agent = EpsilonGreedyQ(3, mdp.n_actions, n_layers=None, epsilon=0.3,
                               action_mask=mdp.action_mask)  # fmt: skip
        runs.append(run(agent, env, episodes=50, seed=0, engine=engine))
    a, b = runs
    assert a.episode_ends.tolist() == b.episode_ends.tolist() == list(range(7, 351, 7))
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.successes, b.successes)


def test_an_inadmissible_action_is_refused_as_the_environment_refuses_it():
    rng = np.random.default_rng(1)
    mask = np.array([[True, True], [True, False], [True, True]])
    mdp = op.TabularMDP(rng.dirichlet(np.ones(3), size=(3, 2)), rng.normal(size=(3, 2)),
                        action_mask=mask)  # fmt: skip
    agent = EpsilonGreedyQ(3, 2, epsilon=1.0)  # knows no mask: plays any action
    errors = []
    for engine in ("python", "compiled"):
        with pytest.raises(ValueError, match=r"action 1 is not admissible in state 1") as err:
            run(agent, TabularEnv(mdp), steps=2000, seed=0, engine=engine)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_the_compiled_oracle_run_is_the_generic_one():
    for env in (_env("riverswim", n_states=6, reward_noise=0.2), DeepSea(6, deterministic=False),
                _finite_env()):  # fmt: skip
        oracle = solve_oracle(env.mdp, None)
        fast = compiled.compiled_oracle_run(env, oracle, 9, 500)
        slow = oracle_run(env, oracle, 9, 500)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


def test_environments_the_compiled_loop_cannot_play_say_why():
    import gymnasium as gym

    from optplan.envs import DiscountedResets

    wrapped = gym.Wrapper(_env("riverswim", n_states=6))
    assert "not a TabularEnv" in env_arrays(wrapped)
    resets = DiscountedResets(_env("riverswim", n_states=6), 0.9)
    assert env_arrays(resets).scalars[2] == 0.9  # played by agents with a resets loop
    assert "no compiled loop under discounted resets" in compiled.compiled_reason(
        make_agent("epsilon-greedy", resets), resets
    )

    class OwnStep(TabularEnv):
        def step(self, action):
            return super().step(action)

    assert "own step" in env_arrays(OwnStep(op.load_model("models/cowan3.toml")))
    agent = make_agent("epsilon-greedy", _env("riverswim", n_states=6))
    why = compiled.compiled_reason(agent, wrapped)
    assert "not a TabularEnv" in why
    with pytest.raises(ValueError, match="does not cover this run"):
        run(agent, wrapped, steps=10, engine="compiled")


def test_a_layered_agent_on_a_continuing_model_is_refused_by_the_compiled_loop():
    env = _env("riverswim", n_states=6)
    agent = EpsilonGreedyQ(6, 2, n_layers=3)
    assert "n_layers=3" in compiled.compiled_reason(agent, env)


def test_every_compiled_agent_of_the_registry_is_in_the_parity_test():
    compiled_names = set()
    for name in op.agents.registry.AGENTS:
        for make_env in (lambda: _env("riverswim", n_states=6), lambda: DeepSea(5)):
            try:
                agent = make_agent(name, make_env())
            except (ValueError, TypeError):
                continue
            if isinstance(agent, CompiledAgent):
                compiled_names.add(name)
    assert compiled_names == set(COMPILED_AGENTS)


# --- the steps against hand computations ------------------------------------------------


def test_q_learning_steps_by_hand():
    agent = EpsilonGreedyQ(2, 2, epsilon=0.0, discount=0.5)
    agent.reset(np.random.default_rng(0))
    agent.update(0, 1, 1.0, 1, False)  # n = 1: Q = target = 1 + 0.5 * max Q(1) = 1
    assert agent.q.tolist() == [[0.0, 1.0], [0.0, 0.0]]
    assert agent.select_action(0) == 1
    agent.update(1, 0, 2.0, 0, False)  # Q(1, 0) = 2 + 0.5 * 1 = 2.5
    agent.update(0, 1, 0.0, 1, False)  # n = 2: Q = 1 + (0 + 0.5 * 2.5 - 1) / 2 = 1.125
    assert agent.q.tolist() == [[0.0, 1.125], [2.5, 0.0]]
    assert agent.counts.tolist() == [[0, 2], [1, 0]]
    agent.update(0, 0, 3.0, 1, True)  # done: no continuation
    assert agent.q[0, 0] == 3.0


def test_soft_q_draws_its_boltzmann_policy():
    agent = SoftQ(1, 3, temperature=0.5)
    agent.reset(np.random.default_rng(3))
    agent.q[0] = [0.0, 0.5, -np.inf]
    picks = np.bincount([agent.select_action(0) for _ in range(20000)], minlength=3) / 20000
    p = np.exp(np.array([0.0, 1.0])) / np.exp(np.array([0.0, 1.0])).sum()
    assert picks[2] == 0.0
    np.testing.assert_allclose(picks[:2], p, atol=0.015)  # about 4.5 standard errors


def test_layered_q_learning_indexes_rows_by_layer():
    agent = EpsilonGreedyQ(2, 2, n_layers=2, epsilon=0.0, discount=1.0)
    agent.reset(np.random.default_rng(0))
    agent.update(1, 0, 1.0, 0, False)  # layer 0, row 1
    assert agent.layer == 1
    agent.update(0, 1, 2.0, 1, True)  # layer 1 (last), row 2 + 0
    assert agent.layer == 0
    assert agent.q_table[0].tolist() == [[0.0, 0.0], [1.0, 0.0]]
    assert agent.q_table[1].tolist() == [[0.0, 2.0], [0.0, 0.0]]
