"""Agents: the :class:`Agent` protocol and one module per algorithm family, each ending with
its builders; build any of them from an environment or a model with :func:`make_agent`
(``make_agent("mdp-ucb", env)``), whose table is :mod:`optplan.agents.registry`."""

from ._env import env_model, env_shape
from .base import Agent, PolicyAgent
from .baselines import OracleAgent, RandomAgent
from .bql import BayesianQLearning
from .index_agents import IMEDRL, MDPDMED, MDPPS, MDPUCB, OLP, TransitionEstimator
from .k_learning import KLearning, LayeredPosterior
from .moment_matching import MomentMatching
from .psrl import PSRL, ContinuingPSRL, OptimisticPSRL
from .qlearning import EpsilonGreedyQ, SoftQ
from .qlearning_ucb import QLearningUCB
from .ravi import RAVIUCB, RAVIUCBLinear
from .registry import AGENTS, agent_names, get_agent, make_agent, register_agent
from .rlsvi import RLSVI
from .ube import UBE, ContinuingUBE, CountBonus
from .ucbvi import UCBVI
from .ucrl import KLUCRL, UCRL2

__all__ = [
    "Agent",
    "PolicyAgent",
    "OracleAgent",
    "RandomAgent",
    "EpsilonGreedyQ",
    "SoftQ",
    "KLearning",
    "PSRL",
    "LayeredPosterior",
    "MDPUCB",
    "OLP",
    "MDPDMED",
    "MDPPS",
    "IMEDRL",
    "TransitionEstimator",
    "UBE",
    "CountBonus",
    "UCRL2",
    "KLUCRL",
    "RAVIUCB",
    "RAVIUCBLinear",
    "BayesianQLearning",
    "ContinuingPSRL",
    "OptimisticPSRL",
    "ContinuingUBE",
    "MomentMatching",
    "UCBVI",
    "QLearningUCB",
    "RLSVI",
    "AGENTS",
    "make_agent",
    "agent_names",
    "register_agent",
    "get_agent",
    "env_model",
    "env_shape",
]
