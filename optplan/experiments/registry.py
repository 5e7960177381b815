"""Named agents and environments that sweeps, ``optplan run`` and the figures refer to.

A :class:`Component` is a builder plus its typed, documented parameters. Environment builders
take ``(seed_index, **params)`` and return a Gymnasium environment that exposes its true model
as ``.mdp``; agent builders take ``(env, criterion, **params)`` and see only the environment's
shape and action mask (the oracle alone reads the true model). New agents and environments
register here with :func:`register_agent` / :func:`register_env` and are then usable from
every sweep file and the CLI.

The agents live in :mod:`optplan.agents.factory`: :data:`AGENTS` is its table and
:func:`make_agent` its builder, so a sweep's agent and a user's
``make_agent(name, env, **params)`` are built by the same code with the same defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._checks import OptplanError
from ..agents.factory import (
    AGENTS,
    Component,
    Param,
    env_shape,
    register_agent,
)
from ..agents.factory import make_agent as _make_agent
from ..envs import (
    DeepSea,
    DeepSeaChain,
    DiscountedResets,
    LinearMixtureMDP,
    PriorMDP,
    TabularEnv,
    UBEChain,
    WideNarrow,
)
from ..generators import random_dirichlet, riverswim
from ..mdp import FiniteHorizonMDP
from .oracle import true_model

__all__ = [
    "Param",
    "Component",
    "AGENTS",
    "ENVS",
    "register_agent",
    "register_env",
    "get_agent",
    "get_env",
    "make_agent",
    "check_params",
    "env_shape",
]

ENVS: dict[str, Component] = {}


def register_env(name: str, build: Callable, params=(), doc: str = "", episodic=False):
    """Add an environment builder ``build(seed_index, **params) -> env``.

    ``episodic``: whether its episodes end; ``None`` when a ``horizon`` parameter decides
    (episodic when it is positive).
    """
    comp = Component(name, build, tuple(params), doc, episodic=episodic)
    ENVS[name] = comp
    return comp


def _get(table: dict, kind: str, name) -> Component:
    if isinstance(name, str) and ":" in name and name not in table:
        table[name] = load_component(name, "agent" if table is AGENTS else "environment")
    if not isinstance(name, str) or name not in table:
        known = ", ".join(sorted(table))
        raise OptplanError(f"unknown {kind} {name!r} (known: {known})")
    return table[name]


def get_agent(name: str) -> Component:
    """The registered agent ``name``; ``ValueError`` listing the known ones otherwise."""
    return _get(AGENTS, "agent", name)


def get_env(name: str) -> Component:
    """The registered environment ``name``; ``ValueError`` listing the known ones otherwise."""
    return _get(ENVS, "environment", name)


def make_agent(name: str, env, criterion: str | None = None, **params):
    """Build agent ``name`` for ``env`` by :func:`optplan.agents.make_agent`, after loading an
    import path ``"package.module:factory"`` (:func:`load_component`) as :func:`get_agent`
    does. The sweeps, ``optplan run`` and the figures build their agents here."""
    get_agent(name)
    return _make_agent(name, env, criterion=criterion, **params)


def check_params(comp: Component, params: Mapping[str, Any], where: str) -> dict:
    """Shorthand for ``comp.resolve(params, where)``."""
    return comp.resolve(params, where)


# --- environments -----------------------------------------------------------------------------


def _riverswim(seed_index, n_states, reward_noise):
    return TabularEnv(riverswim(n_states), reward_noise=reward_noise)


def _riverswim_episodic(seed_index, n_states, horizon, reward_noise):
    mdp = FiniteHorizonMDP.from_stationary(riverswim(n_states), horizon)
    return TabularEnv(mdp, reward_noise=reward_noise, goal_states=[n_states - 1])


def _random_dirichlet(seed_index, n_states, n_actions, alpha, support, model_seed, reward_noise):
    seed = seed_index if model_seed is None else model_seed
    mdp = random_dirichlet(n_states, n_actions, seed=seed, alpha=alpha, support=support)
    return TabularEnv(mdp, reward_noise=reward_noise)


def _model_file(seed_index, path, horizon, reward_noise):
    from ..modelfile import load_model

    if not path:
        raise OptplanError("path must name a model file (.toml)")
    mdp = load_model(path)
    if horizon:
        mdp = FiniteHorizonMDP.from_stationary(mdp, horizon)
    return TabularEnv(mdp, reward_noise=reward_noise)


_NOISE = Param("reward_noise", "float", 0.0, "std of Gaussian noise added to rewards")


def _deepsea(seed_index, size, deterministic, mapping_seed, variant, reward_noise):
    seed = seed_index if mapping_seed is None else mapping_seed
    return DeepSea(
        size,
        deterministic=deterministic,
        mapping_seed=seed,
        variant=variant,
        reward_noise=reward_noise,
    )


register_env(
    "deepsea",
    _deepsea,
    [
        Param("size", "int", 10, "depth L = width of the grid"),
        Param("deterministic", "bool", True, "false: bsuite's stochastic ('windy') version"),
        Param("mapping_seed", "int", None, "action-mapping seed; unset: the run's seed index"),
        Param("variant", "str", "bsuite", "'bsuite' or 'k-learning' (noisy rewards)"),
        Param("reward_noise", "float", None, "noise std; unset: the variant's default"),
    ],
    "DeepSea (k-learning §4, bsuite deep_sea); goal = bottom-right cell",
    episodic=True,
)


def _ube_chain(seed_index, length, mu1, mu2, sigma, discount, layered):
    return UBEChain(length, mu1, mu2, sigma, discount, layered)


register_env(
    "ube-chain",
    _ube_chain,
    [
        Param("length", "int", 50, "chain states after the root (the paper's chain is infinite)"),
        Param("mu1", "float", 1.0, "mean reward of the stop action (the paper's action 1)"),
        Param("mu2", "float", 0.0, "mean reward of every chain step (action 2)"),
        Param("sigma", "float", 1.0, "stop reward sd; chain rewards have sd sigma sqrt(1-g^2)"),
        Param("discount", "float", 0.9, "gamma: the chain's noise and the agents' discount"),
        Param("layered", "bool", True, "true: finite-horizon model; false: discounted chain"),
    ],
    "the two-action chain of uncertainty-bellman-equation §3.2 (Fig. 1, Fig. 2)",
    episodic=True,
)

_GAMMA = Param("discount", "float", 0.9, "the true model's discount (the draft's gamma)")


def _deepsea_chain(seed_index, n, discount):
    return DeepSeaChain(n, discount=discount)


def _wide_narrow(seed_index, n, w, mu_high, mu_low, sigma, discount):
    return WideNarrow(n, w, mu_high=mu_high, mu_low=mu_low, sigma=sigma, discount=discount)


def _prior_mdp(seed_index, n_states, n_actions, model_seed, sampler, discount):
    seed = seed_index if model_seed is None else model_seed
    return PriorMDP(n_states, n_actions, seed, sampler=sampler, discount=discount)


register_env(
    "deepsea-chain",
    _deepsea_chain,
    [Param("n", "int", 4, "number of states N (2 < N < 40)"), _GAMMA],
    "the continuing DeepSea chain of bayesian-methods-tabular-rl (not bsuite's grid)",
)
register_env(
    "wide-narrow",
    _wide_narrow,
    [
        Param("n", "int", 1, "wide-narrow pairs N (2N + 1 states)"),
        Param("w", "int", 6, "actions in a wide state W (>= 2)"),
        Param("mu_high", "float", 0.5, "mean reward of action 0 in a wide state"),
        Param("mu_low", "float", 0.0, "mean reward of the other noisy transitions"),
        Param("sigma", "float", 1.0, "reward sd (the return to state 0 pays exactly 0)"),
        _GAMMA,
    ],
    "WideNarrow of bayesian-methods-tabular-rl",
)
register_env(
    "prior-mdp",
    _prior_mdp,
    [
        Param("n_states", "int", 4, "number of states"),
        Param("n_actions", "int", 2, "number of actions"),
        Param("model_seed", "int", None, "seed of the model; unset: the run's seed index"),
        Param("sampler", "str", "generator", "'generator' or 'public-code' (the repo's draws)"),
        _GAMMA,
    ],
    "an MDP drawn from the Dirichlet / Normal-Gamma prior of bayesian-methods-tabular-rl",
)
register_env(
    "riverswim",
    _riverswim,
    [Param("n_states", "int", 6, "number of states"), _NOISE],
    "RiverSwim (Strehl & Littman 2008), continuing",
)
register_env(
    "riverswim-episodic",
    _riverswim_episodic,
    [
        Param("n_states", "int", 6, "number of states"),
        Param("horizon", "int", 20, "episode length L"),
        _NOISE,
    ],
    "RiverSwim repeated over L layers; the goal is the rightmost state",
    episodic=True,
)
register_env(
    "random-dirichlet",
    _random_dirichlet,
    [
        Param("n_states", "int", 10, "number of states"),
        Param("n_actions", "int", 3, "number of actions"),
        Param("alpha", "float", 1.0, "Dirichlet concentration of each transition row"),
        Param("support", "int", None, "next states per row (sparse, unichain); all if unset"),
        Param("model_seed", "int", None, "seed of the model; unset: the run's seed index"),
        _NOISE,
    ],
    "random MDP with Dirichlet rows and U(0,1) rewards (one model per seed index)",
)
register_env(
    "model",
    _model_file,
    [
        Param("path", "str", "", "model file (.toml), see optplan.modelfile"),
        Param("horizon", "int", 0, "0: continuing; L > 0: episodes of L layers"),
        _NOISE,
    ],
    "a model file",
    episodic=None,
)


# --- RAVI-UCB's discounted setting: resets to nu_0 w.p. 1 - gamma (issue 16) --------------------

_RESETS = Param(
    "discount", "float", 0.9, "gamma: each step resets to nu_0 w.p. 1 - gamma; scored discounted"
)


def _riverswim_resets(seed_index, n_states, discount, reward_noise):
    env = TabularEnv(riverswim(n_states), reward_noise=reward_noise)
    return DiscountedResets(env, discount)


def _random_dirichlet_resets(
    seed_index, n_states, n_actions, alpha, support, model_seed, discount, reward_noise
):
    env = _random_dirichlet(
        seed_index, n_states, n_actions, alpha, support, model_seed, reward_noise
    )
    return DiscountedResets(env, discount)


def _linear_mixture(
    seed_index, n_states, n_actions, d, model_seed, concentration, discount, reward_noise
):
    seed = seed_index if model_seed is None else model_seed
    env = LinearMixtureMDP.random(
        n_states, n_actions, d, seed, concentration=concentration, reward_noise=reward_noise
    )
    return DiscountedResets(env, discount)


register_env(
    "riverswim-resets",
    _riverswim_resets,
    [Param("n_states", "int", 6, "number of states"), _RESETS, _NOISE],
    "RiverSwim with discounted resets to its start state (RAVI-UCB's Algorithm 1 setting)",
)
register_env(
    "random-dirichlet-resets",
    _random_dirichlet_resets,
    [
        Param("n_states", "int", 10, "number of states"),
        Param("n_actions", "int", 3, "number of actions"),
        Param("alpha", "float", 1.0, "Dirichlet concentration of each transition row"),
        Param("support", "int", None, "next states per row (sparse, unichain); all if unset"),
        Param("model_seed", "int", None, "seed of the model; unset: the run's seed index"),
        _RESETS,
        _NOISE,
    ],
    "random Dirichlet MDP with discounted resets to nu_0 (uniform)",
)
register_env(
    "linear-mixture",
    _linear_mixture,
    [
        Param("n_states", "int", 20, "number of states"),
        Param("n_actions", "int", 2, "number of actions"),
        Param("d", "int", 4, "feature dimension: a mixture of d Dirichlet base kernels"),
        Param("model_seed", "int", None, "seed of the model; unset: the run's seed index"),
        Param("concentration", "float", 0.5, "Dirichlet concentration of the base kernels"),
        _RESETS,
        _NOISE,
    ],
    "linear mixture MDP P = sum_i theta_i P_i (LinearMixtureMDP.random) with discounted resets; "
    "exposes its features for ravi-ucb-linear",
)


def env_is_episodic(name: str, params: Mapping[str, Any]) -> bool:
    """Whether episodes end in environment ``name`` with resolved ``params``."""
    comp = get_env(name)
    if comp.episodic is None:  # decided by a parameter
        return bool(params.get("horizon"))
    if comp.episodic == "model":  # a factory by import path: build it once and look
        return isinstance(true_model(comp.build(0, **params)), FiniteHorizonMDP)
    return comp.episodic


# --- factories by import path, and user components in worker processes ----------------------


def import_user_module(name: str):
    """Import a user's module by name (a sweep's ``imports``, an import path's module, a
    worker's preparation): the one place experiments load code by name."""
    import importlib

    return importlib.import_module(name)


def load_component(path: str, kind: str = "agent") -> Component:
    """The component an import path ``"package.module:name"`` names.

    ``name`` may be a :class:`Component` (used as is) or a factory with the signature of a
    registered builder: ``make(env, criterion, **params)`` for an agent,
    ``make(seed_index, **params)`` for an environment. A factory's keyword parameters are
    read from its signature (``**kwargs`` accepts any) and passed through as the sweep gives
    them. An environment factory's episodes end iff it builds a
    :class:`~optplan.mdp.FiniteHorizonMDP`. The module is imported here, so a worker process
    resolves the same path by itself.

    Raises
    ------
    ValueError
        The path is malformed, the module cannot be imported or has no such attribute, or it
        is not callable (the message names the path).
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr or ":" in attr:
        raise OptplanError(f"import path {path!r} must have the form 'package.module:name'")
    try:
        module = import_user_module(module_name)
    except ImportError as exc:
        raise OptplanError(f"import path {path!r}: cannot import {module_name!r}: {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise OptplanError(f"import path {path!r}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, Component):
        return obj
    if not callable(obj):
        raise OptplanError(f"import path {path!r} names a {type(obj).__name__}, not a factory")
    doc = (getattr(obj, "__doc__", None) or "").strip().split("\n")[0]
    episodic = "model" if kind == "environment" else None
    return Component(path, obj, (), doc, episodic=episodic, open_params=True)


def is_builtin(comp: Component) -> bool:
    """Whether ``comp`` is one of optplan's own (its builder lives in the package)."""
    module = getattr(comp.build, "__module__", "") or ""
    return module == "optplan" or module.startswith("optplan.")


def ensure_registered(kind: str, comp: Component) -> None:
    """Register ``comp`` under its name in a worker process if the name is not known there
    (a component registered by a user's script, shipped with the task)."""
    table = AGENTS if kind == "agents" else ENVS
    table.setdefault(comp.name, comp)


def describe() -> str:
    """A plain-text list of every registered agent and environment with its parameters."""
    lines = []
    for title, table in (("agents", AGENTS), ("environments", ENVS)):
        lines.append(f"{title}:")
        for comp in table.values():
            lines.append(f"  {comp.name:<20} {comp.doc}")
            for p in comp.params:
                default = "unset" if p.default is None else repr(p.default)
                lines.append(f"      {p.name} ({p.kind}, default {default}): {p.doc}")
    return "\n".join(lines)
