"""Environments (Gymnasium API) that also expose their true model as ``.mdp``.

:mod:`.registry` is their one table (sweeps, ``optplan run`` and ``gymnasium.make`` read it);
importing this package registers them with Gymnasium as ``optplan/...`` ids (import paths
only: Gymnasium imports an environment's module when it makes one).
"""

from .deepsea import VARIANTS as DEEPSEA_VARIANTS
from .deepsea import DeepSea
from .deepsea_chain import DeepSeaChain
from .linear_mixture import LinearMixtureMDP
from .prior_mdp import PriorMDP
from .registry import ENV_TABLE, ENVS, GYMNASIUM_IDS, EnvSpec, register_env, register_gymnasium
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
    "ENV_TABLE",
    "ENVS",
    "EnvSpec",
    "register_env",
    "GYMNASIUM_IDS",
    "register_gymnasium",
]

register_gymnasium()
