"""The agent table: every agent optplan ships, by the name sweeps, ``optplan run`` and the
figures use (``"mdp-ucb"``, ``"psrl"``, ``"ravi-ucb"`` ...), and :func:`make_agent`, the one
way to build any of them from an environment or a model.

Each family module ends with its builders and their typed, documented parameters
(``BUILDERS``, a tuple of :class:`~optplan._params.Component`); this table collects them. A
builder ``build(env, criterion, **params)`` reads from the environment only what the agent is
allowed to know (:mod:`optplan.agents._env`). The sweeps' registry
(:mod:`optplan.sweeps.registry`) holds this same table (:data:`AGENTS`): a sweep's agent and
``make_agent`` go through the same builder with the same defaults.

Examples
--------
>>> from optplan.agents import make_agent
>>> from optplan.generators import riverswim
>>> mdp = riverswim(6)
>>> make_agent("mdp-ucb", mdp)                      # rewards = mdp.R, the known means
MDPUCB(S=6, A=2, method='fast')
>>> type(make_agent("epsilon-greedy", mdp, epsilon=0.05)).__name__
'EpsilonGreedyQ'
"""

from __future__ import annotations

from collections.abc import Callable

from .._checks import OptplanError
from .._params import Component
from . import (
    baselines,
    bql,
    index_agents,
    k_learning,
    moment_matching,
    psrl,
    qlearning,
    qlearning_ucb,
    ravi,
    rlsvi,
    ube,
    ucbvi,
    ucrl,
)
from ._env import env_model

__all__ = ["AGENTS", "register_agent", "get_agent", "make_agent", "agent_names"]

#: The registered agents by name.
AGENTS: dict[str, Component] = {}


def register_agent(name: str, build: Callable, params=(), doc: str = "") -> Component:
    """Add an agent builder ``build(env, criterion, **params) -> Agent``."""
    comp = Component(name, build, tuple(params), doc)
    AGENTS[name] = comp
    return comp


for _family in (
    baselines,  # random, oracle
    qlearning,  # epsilon-greedy, soft-q
    qlearning_ucb,  # q-learning-ucb
    k_learning,  # k-learning
    psrl,  # psrl, psrl-continuing, optimistic-psrl
    ube,  # ube, count-bonus, ube-continuing
    index_agents,  # mdp-ucb, olp, mdp-dmed, mdp-ps, imed-rl
    ucrl,  # ucrl2, kl-ucrl, ucrl2-discounted
    ravi,  # ravi-ucb, ravi-ucb-linear
    bql,  # bql
    moment_matching,  # moment-matching
    ucbvi,  # ucbvi
    rlsvi,  # rlsvi
):
    AGENTS.update((comp.name, comp) for comp in _family.BUILDERS)


def agent_names() -> list[str]:
    """The registered agents' names, sorted."""
    return sorted(AGENTS)


def get_agent(name: str) -> Component:
    """The registered agent ``name``; ``ValueError`` listing the known ones otherwise."""
    if not isinstance(name, str) or name not in AGENTS:
        raise OptplanError(f"unknown agent {name!r} (known: {', '.join(agent_names())})")
    return AGENTS[name]


def make_agent(name: str, env, *, criterion: str | None = None, **params):
    """Build the registered agent ``name`` for ``env``: the one way to build any agent.

    Parameters
    ----------
    name : str
        A registered agent (:func:`agent_names`; ``optplan run --list`` prints them with
        their parameters): ``"random"``, ``"oracle"``, ``"epsilon-greedy"``, ``"soft-q"``,
        ``"k-learning"``, ``"psrl"``, ``"ube"``, ``"count-bonus"``, ``"mdp-ucb"``, ``"olp"``,
        ``"mdp-dmed"``, ``"mdp-ps"``, ``"ucrl2"``, ``"kl-ucrl"``, ``"ucrl2-discounted"``,
        ``"ravi-ucb"``, ``"ravi-ucb-linear"``, ``"bql"``, ``"psrl-continuing"``,
        ``"ube-continuing"``, ``"moment-matching"``, ``"imed-rl"``, ``"optimistic-psrl"``,
        ``"ucbvi"``, ``"q-learning-ucb"``, ``"rlsvi"``, and any added by
        :func:`register_agent`.
    env : environment or model
        What the agent will act in: an optplan environment (or any environment exposing
        ``.unwrapped.mdp``), a Gymnasium toy-text environment, or a ``TabularMDP`` /
        ``FiniteHorizonMDP``. The agent reads its sizes, admissible actions and what its
        algorithm assumes known (e.g. the mean rewards ``R[s, a]`` of the index agents)
        from the model; environment attributes such as ``discount``, ``reward_sd`` or
        ``features`` are used where an agent's defaults come from them.
    criterion : str, optional
        Only the oracle uses it: the criterion whose optimal policy it follows (default:
        the model's own).
    **params
        The agent's parameters, by name, checked against its table (kind, known name);
        unset ones take their defaults (``optplan run --list`` lists them).

    Returns
    -------
    Agent

    Raises
    ------
    ValueError
        Unknown agent name or parameter (the message lists the known ones), a parameter of
        the wrong kind, or an agent that does not fit the environment (e.g. an episodic agent
        on a continuing model).
    TypeError
        ``env`` is neither a model nor an environment exposing one.

    Examples
    --------
    >>> from optplan.agents import make_agent
    >>> from optplan.generators import riverswim
    >>> make_agent("olp", riverswim(6), method="conic", solver="CLARABEL")
    OLP(S=6, A=2, method='conic')
    """
    comp = get_agent(name)
    where = f"make_agent({name!r})"
    env_model(env)  # a clear TypeError before any builder looks at env
    return comp.build(env, criterion, **comp.resolve(params, where))
