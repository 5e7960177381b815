"""Environments (Gymnasium API) that also expose their true model as ``.mdp``.

Importing this package registers them with Gymnasium as ``optplan/...`` ids
(:mod:`.gym_ids`: import paths only, nothing more is imported).
"""

from .deepsea import VARIANTS as DEEPSEA_VARIANTS
from .deepsea import DeepSea
from .deepsea_chain import DeepSeaChain
from .gym_ids import GYMNASIUM_IDS, register_gymnasium
from .linear_mixture import LinearMixtureMDP
from .prior_mdp import PriorMDP
from .resets import DiscountedResets
from .tabular import TabularEnv
from .transition_rewards import TransitionRewardEnv
from .ube_chain import UBEChain
from .wide_narrow import WideNarrow

__all__ = [
    "TabularEnv",
    "TransitionRewardEnv",
    "DeepSea",
    "DEEPSEA_VARIANTS",
    "UBEChain",
    "DeepSeaChain",
    "WideNarrow",
    "PriorMDP",
    "DiscountedResets",
    "LinearMixtureMDP",
    "GYMNASIUM_IDS",
    "register_gymnasium",
]

register_gymnasium()
