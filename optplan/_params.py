"""Typed, documented parameters of a named builder: :class:`Param` and :class:`Component`.

Agents (:mod:`optplan.agents`) and environments (:mod:`optplan.envs`) declare their builders'
parameters with these two classes, and sweeps, ``optplan run`` and ``make_agent`` check a
user's parameters through :meth:`Component.resolve` (names, kinds, defaults), so one table
serves every way in.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._checks import OptplanError, OptplanTypeError

__all__ = ["Param", "Component"]

_KINDS = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


@dataclass(frozen=True)
class Param:
    """One parameter of a component: name, kind (``int``/``float``/``bool``/``str``),
    default (``None`` = the builder decides), and a one-line description. ``file``: a
    ``str`` naming a file the builder reads (a model file, counts), which a sweep's driver
    reads and sends with each task (:func:`optplan.modelfile.shipped`), so that workers on
    other machines or in other directories build the same component."""

    name: str
    kind: str
    default: Any
    doc: str
    file: bool = False

    def check(self, value, where: str):
        """``value`` converted to this kind, or ``TypeError`` naming ``where`` and the value."""
        ok = isinstance(value, _KINDS[self.kind]) and (
            self.kind == "bool" or not isinstance(value, bool)
        )
        if not ok:
            raise OptplanTypeError(
                f"{where}: {self.name} must be {self.kind}, got {value!r} ({type(value).__name__})"
            )
        if self.kind == "float":
            value = float(value)
            if not math.isfinite(value):
                raise OptplanError(f"{where}: {self.name} must be finite, got {value!r}")
        return value


@dataclass(frozen=True)
class Component:
    """A named agent or environment builder with its parameters.

    Attributes
    ----------
    name : str
    build : callable
    params : tuple of Param
    doc : str
    episodic : bool, None or "model"
        Environments: whether episodes end (``None`` for agents; for environments ``None``
        means a ``horizon`` parameter decides, ``"model"`` that the built model does).
    open_params : bool
        A factory named by import path: its keyword parameters are taken from its signature
        and passed through unchecked (see :func:`load_component`).
    """

    name: str
    build: Callable
    params: tuple[Param, ...]
    doc: str
    episodic: bool | None | str = None
    _by_name: dict = field(init=False, repr=False, compare=False)
    open_params: bool = False

    def __post_init__(self):
        object.__setattr__(self, "_by_name", {p.name: p for p in self.params})

    def resolve(self, params: Mapping[str, Any], where: str) -> dict:
        """Defaults filled in, names and kinds checked; errors name ``where`` and the key.

        ``None`` for a parameter whose default is ``None`` ("unset: the builder decides")
        means unset, so resolving a resolved mapping again gives the same mapping.
        """
        if self.open_params:
            return _open_params(self, params, where)
        unknown = sorted(set(params) - set(self._by_name))
        if unknown:
            known = ", ".join(self._by_name) or "none"
            raise OptplanError(
                f"{where}: unknown parameter {unknown[0]!r} for {self.name!r} (known: {known})"
            )
        out = {}
        for p in self.params:
            if p.name in params and not (params[p.name] is None and p.default is None):
                out[p.name] = p.check(params[p.name], where)
            else:
                out[p.name] = p.default
        return out


def _open_params(comp: Component, params: Mapping[str, Any], where: str) -> dict:
    """Parameters of a factory by import path: names checked against its signature."""
    try:
        sig = inspect.signature(comp.build)
    except (TypeError, ValueError):  # no signature (a builtin): pass everything
        return dict(params)
    skip = 1 if comp.episodic == "model" else 2  # (seed_index) or (env, criterion)
    names = [
        p.name
        for p in list(sig.parameters.values())[skip:]
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise OptplanError(
                f"{where}: unknown parameter {unknown[0]!r} for {comp.name!r} "
                f"(known: {', '.join(names) or 'none'})"
            )
    return dict(params)
