"""Import path of :func:`register_gymnasium` used by ``optplan/__init__.py``; the ids come
from the environment table, :mod:`optplan.envs.registry`."""

from .registry import GYMNASIUM_IDS, NAMESPACE, register_gymnasium

__all__ = ["NAMESPACE", "GYMNASIUM_IDS", "register_gymnasium"]
