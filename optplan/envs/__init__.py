"""Environments (Gymnasium API) that also expose their true model as ``.mdp``."""

from .tabular import TabularEnv

__all__ = ["TabularEnv"]
