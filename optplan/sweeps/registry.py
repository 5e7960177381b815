"""The named agents and environments as sweeps, ``optplan run`` and the figures see them.

A :class:`Component` is a builder plus its typed, documented parameters. Environment builders
take ``(seed_index, **params)`` and return a Gymnasium environment that exposes its true model
as ``.mdp``; agent builders take ``(env, criterion, **params)`` and see only the environment's
shape and action mask (the oracle alone reads the true model). New agents and environments
register with :func:`register_agent` / :func:`register_env` and are then usable from every
sweep file and the CLI.

The tables are the packages': :data:`AGENTS` is :mod:`optplan.agents`' (built by its
:func:`~optplan.agents.make_agent`, so a sweep's agent and a user's
``make_agent(name, env, **params)`` are built by the same code with the same defaults) and
:data:`ENVS` is :mod:`optplan.envs.registry`'s. This module adds what sweeps need on top:
look-up with a readable error, components by import path ``"package.module:factory"``
(:func:`load_component`), the user modules a worker imports, and :func:`describe`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._checks import OptplanError
from .._params import Component, Param
from ..agents import AGENTS, env_shape, register_agent
from ..agents import make_agent as _make_agent
from ..envs.registry import ENVS, register_env
from ..experiments.oracle import true_model
from ..mdp import FiniteHorizonMDP

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
    worker's preparation): the one place sweeps load code by name."""
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
