"""One way to build an agent: ``make_agent(name, env_or_model, **params)``
builds every registered agent, the experiments registry goes through it, and misuse errors
say what was expected."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import optplan.agents
from optplan.agents import MDPUCB, PSRL, UCRL2, RandomAgent, agent_names, make_agent
from optplan.experiments import run
from optplan.generators import riverswim
from optplan.sweeps import registry


def _env(name, **params):
    comp = registry.get_env(name)
    return comp.build(0, **comp.resolve(params, "test"))


#: Agents for episodic (layered) models; the RAVI-UCB agents and ucrl2-discounted need a
#: discounted model (resets), ravi-ucb-linear its features; every other one is continuing.
EPISODIC = {"k-learning", "psrl", "ucbvi", "q-learning-ucb", "rlsvi"}
#: Parameters some agents require or that keep the test fast.
PARAMS = {
    "ravi-ucb": {"horizon": 50},
    "ravi-ucb-linear": {"horizon": 50},
    "k-learning": {"temperature": "schedule"},
}


def _suitable_env(name):
    if name in EPISODIC:
        return _env("riverswim-episodic", n_states=4, horizon=5), None
    if name == "ravi-ucb-linear":
        return _env("linear-mixture", n_states=5, d=2), "discounted"
    return _env("riverswim-resets", n_states=4), "discounted"


def test_one_table():
    assert registry.AGENTS is optplan.agents.AGENTS
    assert set(agent_names()) == set(registry.AGENTS)
    assert len(agent_names()) >= 21


@pytest.mark.parametrize("name", sorted(optplan.agents.AGENTS))
def test_every_registered_agent_builds_from_an_env_and_runs(name):
    env, criterion = _suitable_env(name)
    agent = make_agent(name, env, **PARAMS.get(name, {}))
    tr = run(agent, env, steps=25, seed=3, criterion=criterion)
    assert tr.steps == 25
    # the registry's path (what sweeps use) builds the same agent: same actions, same seed
    again = registry.make_agent(name, env, criterion, **PARAMS.get(name, {}))
    assert type(again) is type(agent)
    np.testing.assert_array_equal(
        run(again, env, steps=25, seed=3, criterion=criterion).actions, tr.actions
    )


@pytest.mark.parametrize("name", ["random", "mdp-ucb", "olp", "mdp-dmed", "ucrl2", "psrl"])
def test_a_model_works_as_well_as_an_env(name):
    env, criterion = _suitable_env(name)
    # a model declares no reward noise: psrl is told the environment's (none)
    noise = {"sigma": env.unwrapped.reward_noise} if name == "psrl" else {}
    from_model = make_agent(name, env.unwrapped.mdp, **noise)
    from_env = make_agent(name, env)
    a = run(from_model, env, steps=30, seed=1, criterion=criterion).actions
    b = run(from_env, env, steps=30, seed=1, criterion=criterion).actions
    np.testing.assert_array_equal(a, b)


def test_index_agent_gets_the_known_reward_matrix():
    mdp = riverswim(5)
    agent = make_agent("mdp-ucb", mdp, method="fast")
    assert isinstance(agent, MDPUCB)
    np.testing.assert_array_equal(agent.estimator.R, mdp.R)


def test_unknown_name_parameter_and_kind_named():
    env = riverswim(4)
    with pytest.raises(ValueError, match=r"unknown agent 'nope' \(known: .*mdp-ucb"):
        make_agent("nope", env)
    with pytest.raises(
        ValueError,
        match=r"make_agent\('mdp-ucb'\): unknown parameter 'foo'.*"
        r"known: method, solver, initial_counts",
    ):
        make_agent("mdp-ucb", env, foo=1)
    with pytest.raises(
        TypeError,
        match=r"make_agent\('epsilon-greedy'\): epsilon must be float, "
        r"got 'x'",
    ):
        make_agent("epsilon-greedy", env, epsilon="x")
    with pytest.raises(TypeError, match=r"env must be a TabularMDP.*got the int 3"):
        make_agent("mdp-ucb", 3)
    with pytest.raises(ValueError, match="psrl is for episodic"):
        make_agent("psrl", env)


def test_constructor_misuse_says_what_was_expected():
    mdp = riverswim(4)
    msg = (
        "MDPUCB(rewards=...) expects the known mean-reward matrix R of shape (S, A); got the "
        "int 3. To build from an environment or a model use make_agent('mdp-ucb', env)"
    )
    with pytest.raises(ValueError) as err:
        MDPUCB(3)
    assert str(err.value) == msg
    with pytest.raises(
        ValueError,
        match=r"MDPUCB\(rewards=\.\.\.\).*got an object of type "
        r"TabularMDP.*make_agent\('mdp-ucb', env\)",
    ):
        MDPUCB(mdp)
    for build, field in (
        (lambda: RandomAgent(mdp, 2), "n_states"),
        (lambda: PSRL(4, 2, n_layers=mdp), "n_layers"),
        (lambda: UCRL2(mdp, 2), "n_states"),
    ):
        with pytest.raises(
            TypeError,
            match=rf"{field} must be a positive integer.*TabularMDP.*"
            r"make_agent",
        ):
            build()


def test_every_agent_class_documents_its_parameters():
    classes = {type(make_agent(n, _suitable_env(n)[0], **PARAMS.get(n, {}))) for n in agent_names()}
    for cls in classes:
        doc = inspect.getdoc(cls) or ""
        assert "Parameters\n----------" in doc, cls.__name__
    for cls_name in ("MDPUCB", "OLP", "MDPDMED", "MDPPS"):
        doc = inspect.getdoc(getattr(optplan.agents, cls_name))
        assert "rewards : array_like, shape (S, A)" in doc
        assert "known mean-reward matrix" in doc
