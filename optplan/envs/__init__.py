"""Environments (Gymnasium API) that also expose their true model as ``.mdp``."""

from .deepsea import VARIANTS as DEEPSEA_VARIANTS
from .deepsea import DeepSea
from .tabular import TabularEnv
from .ube_chain import UBEChain

__all__ = ["TabularEnv", "DeepSea", "DEEPSEA_VARIANTS", "UBEChain"]
