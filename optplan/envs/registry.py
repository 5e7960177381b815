"""The one table of optplan's environments: sweeps, ``optplan run`` and ``gymnasium.make``.

Each row (:class:`EnvSpec`) names an environment, its builder (a function or class called with
keyword arguments), its typed, documented parameters (:class:`~optplan._params.Param`), a
one-line description, whether its episodes end, and its Gymnasium id. From the rows come

- :data:`ENVS`, the components sweeps and ``optplan run`` build (``build(seed_index,
  **params)``: a parameter named by the row's ``seed_param`` that is unset takes the run's seed
  index, so each seed index draws its own model);
- :data:`GYMNASIUM_IDS`, registered with Gymnasium under the ``optplan/`` namespace by
  :func:`register_gymnasium`. ``import optplan`` is enough, before or after ``import
  gymnasium``: the ids are registered as soon as both are loaded (``import optplan`` itself
  loads neither Gymnasium nor the environments)::

      import optplan, gymnasium
      env = gymnasium.make("optplan/DeepSea-v0", size=12)
      env = gymnasium.make("optplan/RiverSwim-v0", n_states=8)

  Without importing optplan at all, Gymnasium's module prefix does it:
  ``gymnasium.make("optplan:optplan/DeepSea-v0")``. Every entry point is an import path
  (``"module:callable"``): Gymnasium loads the builder's module at ``make`` time. The defaults
  ``gymnasium.make(id)`` passes are the row's parameter defaults; a parameter whose default is
  unset (a model seed) takes the builder's own default. Keyword arguments the builder takes
  beyond the row's parameters (e.g. RiverSwim's ``discount``) reach it only through
  ``gymnasium.make``.

Every environment exposes its true model as ``env.unwrapped.mdp``, so
:func:`optplan.experiments.run` scores it exactly, also through the wrappers
``gymnasium.make`` adds. A model without a row of its own goes through ``optplan/Tabular-v0``
with ``mdp=`` (a :class:`~optplan.mdp.TabularMDP` or :class:`~optplan.mdp.FiniteHorizonMDP`),
or through the row ``model`` (a model file) in sweeps.

The model's seed is ``model_seed`` everywhere in this table (DeepSea's action mapping:
``mapping_seed``); the classes and generators keep their own positional ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._checks import OptplanError
from .._params import Component, Param
from .deepsea import DeepSea
from .deepsea_chain import DeepSeaChain
from .ube_chain import UBEChain
from .wide_narrow import WideNarrow

__all__ = [
    "NAMESPACE",
    "EnvSpec",
    "ENV_TABLE",
    "ENVS",
    "GYMNASIUM_IDS",
    "register_env",
    "register_gymnasium",
    "riverswim",
    "riverswim_episodic",
    "riverswim_resets",
    "random_dirichlet",
    "random_dirichlet_resets",
    "sparse_goal_dirichlet",
    "sparse_goal_dirichlet_resets",
    "linear_mixture",
    "linear_mixture_resets",
    "prior_mdp",
    "model_file",
    "gymnasium_env",
]

NAMESPACE = "optplan"


# --- builders of the environments that have no class of their own ---------------------------


def riverswim(n_states: int = 6, reward_noise: float = 0.0, *, discount=None, render_mode=None):
    """RiverSwim (:func:`optplan.generators.riverswim`) as a continuing
    :class:`~optplan.envs.TabularEnv` (``discount``: the model's, unset: none)."""
    from ..generators import riverswim as model
    from .tabular import TabularEnv

    _no_render(render_mode)
    return TabularEnv(model(n_states, discount=discount), reward_noise=reward_noise)


def riverswim_episodic(
    n_states: int = 6, horizon: int = 20, reward_noise: float = 0.0, render_mode: str | None = None
):
    """RiverSwim repeated over ``horizon`` layers; the goal is the rightmost state."""
    from ..generators import riverswim as model
    from ..mdp import FiniteHorizonMDP
    from .tabular import TabularEnv

    _no_render(render_mode)
    mdp = FiniteHorizonMDP.from_stationary(model(n_states), horizon)
    return TabularEnv(mdp, reward_noise=reward_noise, goal_states=[n_states - 1])


def random_dirichlet(
    n_states: int = 10,
    n_actions: int = 3,
    alpha: float = 1.0,
    support: int | None = None,
    model_seed: int = 0,
    reward_noise: float = 0.0,
    *,
    discount: float | None = None,
    render_mode: str | None = None,
):
    """A random Dirichlet MDP (:func:`optplan.generators.random_dirichlet`) drawn from
    ``model_seed`` (the environment's stream is seeded by ``reset(seed=...)``)."""
    from ..generators import random_dirichlet as model

    _no_render(render_mode)
    mdp = model(n_states, n_actions, seed=model_seed, alpha=alpha, support=support)
    return _env(mdp, discount, reward_noise)


def sparse_goal_dirichlet(
    n_states: int = 20,
    n_actions: int = 3,
    alpha: float = 0.1,
    n_goals: int | None = None,
    distractor: float = 0.1,
    model_seed: int = 0,
    reward_noise: float = 0.0,
    *,
    discount: float | None = None,
    render_mode: str | None = None,
):
    """A sparse goal Dirichlet MDP (:func:`optplan.generators.sparse_goal_dirichlet`: peaked
    rows, a few goal pairs, small distracting rewards) drawn from ``model_seed``."""
    from ..generators import sparse_goal_dirichlet as model

    _no_render(render_mode)
    mdp = model(
        n_states, n_actions, seed=model_seed, alpha=alpha, n_goals=n_goals, distractor=distractor
    )
    return _env(mdp, discount, reward_noise)


def _env(mdp, discount, reward_noise):
    """The environment of a drawn model, with ``discount`` when one is given."""
    from .tabular import TabularEnv

    if discount is not None:
        mdp = mdp.with_discount(discount)
    return TabularEnv(mdp, reward_noise=reward_noise)


def linear_mixture(
    n_states: int = 20,
    n_actions: int = 2,
    d: int = 4,
    model_seed: int = 0,
    concentration: float = 0.5,
    reward_noise: float = 0.0,
    *,
    discount: float | None = None,
    theta=None,
    render_mode: str | None = None,
):
    """:meth:`optplan.envs.LinearMixtureMDP.random` (``d`` base kernels, drawn from
    ``model_seed``), continuing."""
    from .linear_mixture import LinearMixtureMDP

    _no_render(render_mode)
    return LinearMixtureMDP.random(
        n_states,
        n_actions,
        d,
        model_seed,
        theta=theta,
        concentration=concentration,
        discount=discount,
        reward_noise=reward_noise,
    )


def _with_resets(build: Callable, doc: str) -> Callable:
    """``build``'s environment wrapped in :class:`~optplan.envs.DiscountedResets`: each step
    ends the episode with probability ``1 - discount`` (RAVI-UCB's setting)."""

    def resets(*args, discount: float = 0.9, render_mode: str | None = None, **params):
        from .resets import DiscountedResets

        return DiscountedResets(build(*args, render_mode=render_mode, **params), discount)

    resets.__name__ = resets.__qualname__ = f"{build.__name__}_resets"
    resets.__doc__ = doc
    return resets


riverswim_resets = _with_resets(riverswim, "RiverSwim with discounted resets to its start state.")
random_dirichlet_resets = _with_resets(
    random_dirichlet, "A random Dirichlet MDP with discounted resets to nu_0 (uniform)."
)
sparse_goal_dirichlet_resets = _with_resets(
    sparse_goal_dirichlet,
    "A sparse goal Dirichlet MDP with discounted resets to nu_0 (uniform).",
)
linear_mixture_resets = _with_resets(
    linear_mixture, "A random linear mixture MDP with discounted resets to nu_0 (uniform)."
)


def prior_mdp(
    n_states: int = 4,
    n_actions: int = 2,
    model_seed: int = 0,
    sampler: str = "generator",
    discount: float | None = 0.9,
    *,
    kappa: float = 1.0,
):
    """:class:`~optplan.envs.PriorMDP` drawn from ``model_seed``."""
    from .prior_mdp import PriorMDP

    return PriorMDP(
        n_states, n_actions, model_seed, sampler=sampler, kappa=kappa, discount=discount
    )


def model_file(path: str = "", horizon: int = 0, reward_noise: float = 0.0):
    """The model of a model file (:mod:`optplan.modelfile`), over ``horizon`` layers if
    positive, as a :class:`~optplan.envs.TabularEnv`."""
    from ..mdp import FiniteHorizonMDP
    from ..modelfile import load_model
    from .tabular import TabularEnv

    if not path:
        raise OptplanError("path must name a model file (.toml)")
    mdp = load_model(path)
    if horizon:
        mdp = FiniteHorizonMDP.from_stationary(mdp, horizon)
    return TabularEnv(mdp, reward_noise=reward_noise)


def gymnasium_env(id: str = "", terminal: str = "restart", horizon: int = 0,
                  reward_noise: float = 0.0):  # fmt: skip
    """A Gymnasium toy-text environment (``FrozenLake-v1``, ``CliffWalking-v1``, ``Taxi-v4``)
    as a :class:`~optplan.envs.TabularEnv` over its transition table
    (:func:`optplan.from_gymnasium`): ``terminal="restart"`` (the continuing view: a
    terminating transition leads to the start distribution) or ``"absorbing"``; over
    ``horizon`` layers if positive."""
    from ..bridges import from_gymnasium
    from ..mdp import FiniteHorizonMDP
    from .tabular import TabularEnv

    if not id:
        raise OptplanError("id must name a Gymnasium environment, e.g. id=FrozenLake-v1")
    mdp = from_gymnasium(id, terminal=terminal)
    if horizon:
        mdp = FiniteHorizonMDP.from_stationary(mdp, horizon)
    return TabularEnv(mdp, reward_noise=reward_noise)


def _no_render(render_mode) -> None:
    if render_mode is not None:
        raise OptplanError(f"optplan environments do not render, got render_mode={render_mode!r}")


# --- the table ---------------------------------------------------------------------------------


class _SeedIndexBuild:
    """``build(seed_index, **params)`` of a row: ``make(**params)``, with the parameter
    ``seed_param`` taking ``seed_index`` when it is unset."""

    def __init__(self, make: Callable, seed_param: str | None) -> None:
        self.make, self.seed_param = make, seed_param
        self.__doc__ = make.__doc__

    def __call__(self, seed_index: int, **params):
        if self.seed_param is not None and params.get(self.seed_param) is None:
            params[self.seed_param] = seed_index
        return self.make(**params)


@dataclass(frozen=True)
class EnvSpec:
    """One environment of the table.

    Attributes
    ----------
    name : str
        The name sweeps and ``optplan run`` use.
    make : callable
        The builder, called with the parameters as keyword arguments.
    params : tuple of Param
        What sweeps and ``optplan run`` may set (checked, with defaults).
    episodic : bool or None
        Whether episodes end; ``None``: a ``horizon`` parameter decides (episodic when > 0).
    gym : str or None
        The Gymnasium id's name, ``"optplan/<gym>-v0"``; ``None``: no id.
    doc : str
    seed_param : str or None
        The parameter that takes the run's seed index when unset (a model seed).
    """

    name: str
    make: Callable
    params: tuple[Param, ...]
    episodic: bool | None
    gym: str | None
    doc: str
    seed_param: str | None = None

    @property
    def component(self) -> Component:
        """The :class:`~optplan._params.Component` sweeps build (``build(seed_index, ...)``)."""
        build = _SeedIndexBuild(self.make, self.seed_param)
        return Component(self.name, build, self.params, self.doc, episodic=self.episodic)

    @property
    def gym_id(self) -> str | None:
        return None if self.gym is None else f"{NAMESPACE}/{self.gym}-v0"

    @property
    def entry_point(self) -> str:
        """The builder as an import path ``"module:name"`` (Gymnasium imports it at ``make``)."""
        return f"{self.make.__module__}:{self.make.__qualname__}"

    @property
    def gym_kwargs(self) -> dict:
        """The defaults ``gymnasium.make`` passes: every parameter default that is set."""
        return {p.name: p.default for p in self.params if p.default is not None}


_NOISE = Param("reward_noise", "float", 0.0, "std of Gaussian noise added to rewards")
_GAMMA = Param("discount", "float", 0.9, "the true model's discount (the draft's gamma)")
_RESETS = Param(
    "discount", "float", 0.9, "gamma: each step resets to nu_0 w.p. 1 - gamma; scored discounted"
)
_MODEL_SEED = Param("model_seed", "int", None, "seed of the model; unset: the run's seed index")
_RIVERSWIM = (Param("n_states", "int", 6, "number of states"),)
_GOAL_DIRICHLET = (
    Param("n_states", "int", 20, "number of states"),
    Param("n_actions", "int", 3, "number of actions"),
    Param("alpha", "float", 0.1, "Dirichlet concentration of each transition row"),
    Param("n_goals", "int", None, "goal states (reward 1); unset: max(1, S // 10)"),
    Param("distractor", "float", 0.1, "distracting rewards ~ U(0, distractor)"),
    _MODEL_SEED,
)
_DIRICHLET = (
    Param("n_states", "int", 10, "number of states"),
    Param("n_actions", "int", 3, "number of actions"),
    Param("alpha", "float", 1.0, "Dirichlet concentration of each transition row"),
    Param("support", "int", None, "next states per row (sparse, unichain); all if unset"),
    _MODEL_SEED,
)
_MIXTURE = (
    Param("n_states", "int", 20, "number of states"),
    Param("n_actions", "int", 2, "number of actions"),
    Param("d", "int", 4, "feature dimension: a mixture of d Dirichlet base kernels"),
    _MODEL_SEED,
    Param("concentration", "float", 0.5, "Dirichlet concentration of the base kernels"),
)
_DEEPSEA = (
    Param("size", "int", 10, "depth L = width of the grid"),
    Param("deterministic", "bool", True, "false: bsuite's stochastic ('windy') version"),
    Param("mapping_seed", "int", None, "action-mapping seed; unset: the run's seed index"),
    Param("variant", "str", "bsuite", "'bsuite' or 'k-learning' (noisy rewards)"),
    Param("reward_noise", "float", None, "noise std; unset: the variant's default"),
)
_UBE_CHAIN = (
    Param("length", "int", 50, "chain states after the root (the paper's chain is infinite)"),
    Param("mu1", "float", 1.0, "mean reward of the stop action (the paper's action 1)"),
    Param("mu2", "float", 0.0, "mean reward of every chain step (action 2)"),
    Param("sigma", "float", 1.0, "stop reward sd; chain rewards have sd sigma sqrt(1-g^2)"),
    Param("discount", "float", 0.9, "gamma: the chain's noise and the agents' discount"),
    Param("layered", "bool", True, "true: finite-horizon model; false: discounted chain"),
)
_WIDE_NARROW = (
    Param("n", "int", 1, "wide-narrow pairs N (2N + 1 states)"),
    Param("w", "int", 6, "actions in a wide state W (>= 2)"),
    Param("mu_high", "float", 0.5, "mean reward of action 0 in a wide state"),
    Param("mu_low", "float", 0.0, "mean reward of the other noisy transitions"),
    Param("sigma", "float", 1.0, "reward sd (the return to state 0 pays exactly 0)"),
    _GAMMA,
)
_PRIOR_MDP = (
    Param("n_states", "int", 4, "number of states"),
    Param("n_actions", "int", 2, "number of actions"),
    _MODEL_SEED,
    Param("sampler", "str", "generator", "'generator' or 'public-code' (the repo's draws)"),
    _GAMMA,
)
_MODEL = (
    Param("path", "str", "", "model file (.toml), see optplan.modelfile", file=True),
    Param("horizon", "int", 0, "0: continuing; L > 0: episodes of L layers"),
    _NOISE,
)
_GYMNASIUM = (
    Param("id", "str", "", "Gymnasium id of a toy-text environment (FrozenLake-v1)"),
    Param("terminal", "str", "restart", "'restart' (continuing) or 'absorbing'"),
    Param("horizon", "int", 0, "0: continuing; L > 0: episodes of L layers"),
    _NOISE,
)
_DEEPSEA_CHAIN = (Param("n", "int", 4, "number of states N (2 < N < 40)"), _GAMMA)
_EPISODIC_RIVERSWIM = (*_RIVERSWIM, Param("horizon", "int", 20, "episode length L"), _NOISE)

#: Every environment: name, builder, parameters, episodic, Gymnasium id, description, seed.
# fmt: off
ENV_TABLE: tuple[EnvSpec, ...] = (
    EnvSpec("deepsea", DeepSea, _DEEPSEA, True, "DeepSea",
            "DeepSea (k-learning §4, bsuite deep_sea); goal = bottom-right cell", "mapping_seed"),
    EnvSpec("ube-chain", UBEChain, _UBE_CHAIN, True, "UBEChain",
            "the two-action chain of uncertainty-bellman-equation §3.2 (Fig. 1, Fig. 2)"),
    EnvSpec("deepsea-chain", DeepSeaChain, _DEEPSEA_CHAIN, False, "DeepSeaChain",
            "the continuing DeepSea chain of bayesian-methods-tabular-rl (not bsuite's grid)"),
    EnvSpec("wide-narrow", WideNarrow, _WIDE_NARROW, False, "WideNarrow",
            "WideNarrow of bayesian-methods-tabular-rl"),
    EnvSpec("prior-mdp", prior_mdp, _PRIOR_MDP, False, "PriorMDP",
            "an MDP drawn from the Dirichlet / Normal-Gamma prior of bayesian-methods-tabular-rl",
            "model_seed"),
    EnvSpec("riverswim", riverswim, (*_RIVERSWIM, _NOISE), False, "RiverSwim",
            "RiverSwim (Strehl & Littman 2008), continuing"),
    EnvSpec("riverswim-episodic", riverswim_episodic, _EPISODIC_RIVERSWIM, True,
            "RiverSwimEpisodic",
            "RiverSwim repeated over L layers; the goal is the rightmost state"),
    EnvSpec("random-dirichlet", random_dirichlet, (*_DIRICHLET, _NOISE), False, "RandomDirichlet",
            "random MDP with Dirichlet rows and U(0,1) rewards (one model per seed index)",
            "model_seed"),
    EnvSpec("model", model_file, _MODEL, None, None, "a model file"),
    EnvSpec("gymnasium", gymnasium_env, _GYMNASIUM, None, None,
            "a Gymnasium toy-text environment by its id (its transition table)"),
    EnvSpec("riverswim-resets", riverswim_resets, (*_RIVERSWIM, _RESETS, _NOISE), False,
            "RiverSwimResets",
            "RiverSwim with discounted resets to its start state (RAVI-UCB's Algorithm 1 setting)"),
    EnvSpec("random-dirichlet-resets", random_dirichlet_resets, (*_DIRICHLET, _RESETS, _NOISE),
            False, "RandomDirichletResets",
            "random Dirichlet MDP with discounted resets to nu_0 (uniform)", "model_seed"),
    EnvSpec("sparse-goal-dirichlet-resets", sparse_goal_dirichlet_resets,
            (*_GOAL_DIRICHLET, _RESETS, _NOISE), False, "SparseGoalDirichletResets",
            "sparse goal Dirichlet MDP (reward-greedy play loses) with discounted resets to "
            "nu_0 (uniform)", "model_seed"),
    EnvSpec("linear-mixture", linear_mixture_resets, (*_MIXTURE, _RESETS, _NOISE), False,
            "LinearMixtureResets",
            "linear mixture MDP P = sum_i theta_i P_i (LinearMixtureMDP.random) with discounted "
            "resets; exposes its features for ravi-ucb-linear", "model_seed"),
    EnvSpec("linear-mixture-continuing", linear_mixture, (*_MIXTURE, _NOISE), False,
            "LinearMixture",
            "linear mixture MDP P = sum_i theta_i P_i (LinearMixtureMDP.random), continuing",
            "model_seed"),
)
# fmt: on

#: name -> component, for sweeps and ``optplan run``; :func:`register_env` adds to it.
ENVS: dict[str, Component] = {spec.name: spec.component for spec in ENV_TABLE}

#: id -> (entry point, default kwargs), generated from :data:`ENV_TABLE`; plus
#: ``optplan/Tabular-v0``, any model given as ``mdp=`` (a model is no sweep parameter: sweeps
#: name a model file, row ``model``).
GYMNASIUM_IDS: dict[str, tuple[str, dict]] = {
    **{s.gym_id: (s.entry_point, s.gym_kwargs) for s in ENV_TABLE if s.gym is not None},
    f"{NAMESPACE}/Tabular-v0": ("optplan.envs.tabular:TabularEnv", {}),
}


def register_env(name: str, build: Callable, params=(), doc: str = "", episodic=False):
    """Add an environment builder ``build(seed_index, **params) -> env`` under ``name`` (for
    sweeps and ``optplan run``).

    ``episodic``: whether its episodes end; ``None`` when a ``horizon`` parameter decides
    (episodic when it is positive).
    """
    comp = Component(name, build, tuple(params), doc, episodic=episodic)
    ENVS[name] = comp
    return comp


def register_gymnasium() -> None:
    """Register every id of :data:`GYMNASIUM_IDS` with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for env_id, (entry_point, kwargs) in GYMNASIUM_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs))
