"""Checks :func:`~optplan.experiments.run` makes before its loop: whether an environment is
known never to end an episode, and whether an agent was built for the environment's model."""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError

__all__ = ["never_ends_episodes", "agent_shape", "check_agent_fits"]


#: Gymnasium wrappers that never end an episode themselves (what ``gymnasium.make`` adds).
_PASSTHROUGH_WRAPPERS = frozenset({"OrderEnforcing", "PassiveEnvChecker", "EnvChecker"})


def never_ends_episodes(env) -> bool:
    """Whether ``env`` is known never to end an episode: a :class:`~optplan.envs.TabularEnv`
    (or a subclass that keeps its ``step``) over a continuing ``TabularMDP`` with
    ``max_steps=None``, under no wrapper other than Gymnasium's pass-through checkers (a
    ``TimeLimit`` with a limit, :class:`~optplan.envs.DiscountedResets` or any unknown
    wrapper may end episodes, so ``False``). Environments it cannot vouch for give ``False``:
    :func:`run` then relies on its step limit."""
    from ..envs import TabularEnv
    from ..mdp import TabularMDP

    inner = env
    while hasattr(inner, "env") and inner is not getattr(inner, "unwrapped", inner):
        name = type(inner).__name__
        limited = name == "TimeLimit" and getattr(inner, "_max_episode_steps", None) is not None
        if limited or (name != "TimeLimit" and name not in _PASSTHROUGH_WRAPPERS):
            return False
        inner = inner.env
    return (
        isinstance(inner, TabularEnv)
        and type(inner).step is TabularEnv.step
        and inner.max_steps is None
        and isinstance(inner.mdp, TabularMDP)
    )


def agent_shape(agent) -> tuple[int | None, int | None, int | None | str]:
    """``(n_states, n_actions, n_layers)`` an agent was built for, as far as it says.

    Read from ``agent.n_states`` / ``agent.n_actions`` / ``agent.n_layers``, else from the
    model it holds (``agent.mdp``, e.g. :class:`~optplan.agents.OracleAgent`), else from its
    layer clock. ``None`` where the agent does not say; ``n_layers`` is ``"continuing"`` when
    the agent is known to be built for a continuing model.
    """
    from ..mdp import FiniteHorizonMDP, TabularMDP

    def count(name):
        value = getattr(agent, name, None)
        return (
            value if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None
        )

    S, A, L = count("n_states"), count("n_actions"), count("n_layers")
    model = getattr(agent, "mdp", None)
    if isinstance(model, (TabularMDP, FiniteHorizonMDP)):
        S = model.n_states if S is None else S
        A = model.n_actions if A is None else A
        if L is None:
            L = model.horizon if isinstance(model, FiniteHorizonMDP) else "continuing"
    if L is None:
        clock = getattr(agent, "_clock", getattr(agent, "clock", None))
        layers = getattr(clock, "n_layers", None)
        L = layers if isinstance(layers, (int, np.integer)) else None
    return S, A, L


def check_agent_fits(agent, mdp) -> None:
    """Refuse an agent built for another model size than ``mdp``'s, naming both.

    Compares :func:`agent_shape` with the model's states, actions and layers (what the agent
    does not state is not compared).

    Raises
    ------
    ValueError
        If the state count, the action count or the layer count differ, or a layered agent
        meets a continuing model (or the reverse).
    """
    from ..mdp import FiniteHorizonMDP

    S, A, L = agent_shape(agent)
    env_L = mdp.horizon if isinstance(mdp, FiniteHorizonMDP) else "continuing"
    wrong = []
    if S is not None and S != mdp.n_states:
        wrong.append("n_states")
    if A is not None and A != mdp.n_actions:
        wrong.append("n_actions")
    if L is not None and L != env_L:
        wrong.append("n_layers")
    if not wrong:
        return

    def describe(S, A, L):
        layers = "continuing" if L == "continuing" else f"n_layers={L}"
        return f"n_states={S}, n_actions={A}, {layers}"

    label = f" {mdp.name!r}" if mdp.name else ""
    own = getattr(getattr(agent, "mdp", None), "name", "")
    own = f" (its model {own!r})" if own else ""
    raise OptplanError(
        f"agent {type(agent).__name__} does not fit the environment: {' and '.join(wrong)} "
        f"differ. The agent was built for {describe(S, A, L)}{own}; the environment's "
        f"model{label} has {describe(mdp.n_states, mdp.n_actions, env_L)}. Build the agent "
        f"for this environment (e.g. from its env.unwrapped.mdp)"
    )
