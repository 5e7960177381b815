"""Agents: the :class:`Agent` protocol and one module per algorithm family; build any of them
from an environment or a model with :func:`make_agent` (``make_agent("mdp-ucb", env)``)."""

from .base import Agent, PolicyAgent
from .baselines import OracleAgent, RandomAgent
from .bayes_models import ContinuingPSRL, ContinuingUBE, MomentMatching
from .bql import BayesianQLearning
from .factory import agent_names, make_agent
from .index_agents import MDPDMED, MDPPS, MDPUCB, OLP, TransitionEstimator
from .k_learning import PSRL, KLearning, LayeredPosterior
from .qlearning import EpsilonGreedyQ, SoftQ
from .ravi import RAVIUCB, RAVIUCBLinear
from .ube import UBE, CountBonus
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
    "TransitionEstimator",
    "UBE",
    "CountBonus",
    "UCRL2",
    "KLUCRL",
    "RAVIUCB",
    "RAVIUCBLinear",
    "BayesianQLearning",
    "ContinuingPSRL",
    "ContinuingUBE",
    "MomentMatching",
    "make_agent",
    "agent_names",
]
