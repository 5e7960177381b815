"""What an agent's builder may read from an environment: its model, its shape, its discount.

The environment is duck-typed (this layer never imports :mod:`optplan.envs`): anything exposing
its true model as ``.unwrapped.mdp`` or ``.mdp`` (every optplan environment), a Gymnasium
toy-text environment (its table is converted by :func:`~optplan.bridges.from_gymnasium`), or a
:class:`~optplan.mdp.TabularMDP` / :class:`~optplan.mdp.FiniteHorizonMDP` itself. A builder
reads the sizes, the admissible actions and what its algorithm assumes known (the mean rewards
of the index agents, the discount of a discounted model, the start distribution of an
episodic one), never the transitions it is meant to learn.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from .._checks import OptplanError, OptplanTypeError
from .._params import Param
from ..mdp import FiniteHorizonMDP, TabularMDP

__all__ = [
    "env_model",
    "env_shape",
    "continuing_shape",
    "env_discount",
    "env_reward_sd",
    "env_transitions",
    "DISCOUNT_FROM_ENV",
]

#: Toy-text environments converted once (agents' builders and the oracle ask for the model).
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def env_model(env) -> TabularMDP | FiniteHorizonMDP:
    """The true model of ``env``: ``env`` itself when it is a model, else what it exposes as
    ``env.unwrapped.mdp`` (or ``env.mdp``).

    An environment without one but with a toy-text transition table ``env.unwrapped.P``
    (Gymnasium's FrozenLake, Taxi, CliffWalking, or a user environment of that form) is
    converted by :func:`~optplan.bridges.from_gymnasium` with ``terminal="restart"``: the
    continuing view of a run loop that resets the environment when an episode terminates.

    Raises
    ------
    TypeError
        ``env`` is neither a model nor an environment exposing one (the message says what was
        expected and what was given).
    """
    if isinstance(env, (TabularMDP, FiniteHorizonMDP)):
        return env
    from ..bridges import from_gymnasium, table_of

    inner = getattr(env, "unwrapped", env)
    mdp = getattr(inner, "mdp", None)
    if mdp is None and table_of(env) is not None:
        try:
            mdp = _CONVERTED.get(inner)
        except TypeError:  # not weakly referenceable: convert each time
            return from_gymnasium(env, terminal="restart")
        if mdp is None:
            mdp = _CONVERTED[inner] = from_gymnasium(env, terminal="restart")
        return mdp
    if not isinstance(mdp, (TabularMDP, FiniteHorizonMDP)):
        what = (
            f"the {type(env).__name__} {env!r}"
            if isinstance(env, (int, float, str))
            else f"{type(env).__name__} wrapping {type(inner).__name__}"
        )
        raise OptplanTypeError(
            f"env must be a TabularMDP / FiniteHorizonMDP or expose its true model as .mdp "
            f"(an optplan environment) or a toy-text transition table as .unwrapped.P (dict "
            f"P[s][a] = [(prob, next_state, reward, terminated), ...]); got {what}"
        )
    return mdp


def env_shape(env):
    """``(n_layers, n_states, n_actions, action_mask)`` of an environment's (or a model's) model.

    ``n_layers`` is ``None`` for a continuing model (mask ``(S, A)``) and ``L`` for a
    finite-horizon one (mask ``(L, S, A)``): observations there are indices within a layer,
    so learning agents index their tables by ``(layer, state)``.
    """
    mdp = env_model(env)
    L = mdp.horizon if isinstance(mdp, FiniteHorizonMDP) else None
    return L, mdp.n_states, mdp.n_actions, mdp.action_mask


def continuing_shape(env, refusal: str):
    """``(n_states, n_actions, action_mask)`` of a continuing environment; ``ValueError(refusal)``
    for a finite-horizon one (the agent's own words for why it does not fit)."""
    L, S, A, mask = env_shape(env)
    if L is not None:
        raise OptplanError(refusal)
    return S, A, mask


def env_transitions(model: TabularMDP | FiniteHorizonMDP) -> np.ndarray:
    """The model's transitions as a dense array, ``(S, A, S)`` or ``(L, S, A, S)``: a sparse
    model's dense copy (:meth:`~optplan.mdp.TabularMDP.dense_P`,
    :meth:`~optplan.mdp.FiniteHorizonMDP.dense_P`, refused with an ``OptplanError`` naming
    the size when too large)."""
    return model.dense_P()


def env_discount(env, who: str, discount) -> float:
    """``discount`` if given, else the discount of the environment's model (the ``gamma`` of
    :class:`~optplan.envs.DiscountedResets`)."""
    if discount is None:
        discount = env_model(env).discount
        if discount is None:
            raise OptplanError(
                f"{who}: set discount (the environment's model has none; use an environment "
                "with discounted resets, e.g. riverswim-resets)"
            )
    return discount


def env_reward_sd(
    env, sigma=None, default: float = 1.0, scalar: bool = False, who: str | None = None
):
    """``sigma`` if given, else the reward-noise standard deviation ``env`` declares, else
    ``default`` (with a warning naming ``who`` and the assumption when ``who`` is given); with
    ``scalar``, one number (the largest of a per-pair declaration) for an agent that takes
    one.

    What an environment declares: ``reward_sd`` (one per pair, or one number:
    :class:`~optplan.envs.UBEChain`), else ``reward_noise`` (the sd of the Gaussian noise it
    adds to the expected rewards: :class:`~optplan.envs.TabularEnv`,
    :class:`~optplan.envs.DeepSea`, whose bsuite variant adds it only at the ends of the
    last row). A model, or an environment declaring neither, gives ``default``: its noise is
    not known.
    """
    if sigma is not None:
        return sigma
    base = getattr(env, "unwrapped", env)
    for attribute in ("reward_sd", "reward_noise"):
        declared = getattr(base, attribute, None)
        if declared is not None:
            return float(np.max(declared)) if scalar and np.ndim(declared) else declared
    if who is not None:
        warnings.warn(
            f"{who}: sigma is unset and {type(base).__name__} declares no reward noise (no "
            f"reward_sd or reward_noise attribute): assuming a reward noise sd of {default:g}; "
            f"set sigma to the noise's sd",
            UserWarning,
            stacklevel=5,  # the caller of make_agent
        )
    return default


#: The registry parameter of the agents that take their discount from :func:`env_discount`.
DISCOUNT_FROM_ENV = Param(
    "discount", "float", None, "planning gamma; unset: the environment's (its resets' gamma)"
)
