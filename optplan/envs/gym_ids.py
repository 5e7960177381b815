"""optplan's environments registered with Gymnasium under the ``optplan/`` namespace.

After ``import optplan.envs`` (or ``import gymnasium`` then ``import optplan``; a bare
``import optplan`` does not load Gymnasium, so it registers nothing)::

    env = gymnasium.make("optplan/DeepSea-v0", size=12)
    env = gymnasium.make("optplan/RiverSwim-v0", n_states=8)

Without importing optplan first, Gymnasium's module prefix does it:
``gymnasium.make("optplan:optplan/DeepSea-v0")``.

Every entry point is an import path (``"module:callable"``), so registering costs no import:
Gymnasium loads the environment's module at ``make`` time. Each environment exposes its true
model as ``env.unwrapped.mdp``, so :func:`optplan.experiments.run` scores it exactly, also
through the wrappers ``gymnasium.make`` adds.

``DiscountedResets`` is a wrapper (it needs an inner environment) and is reachable as
``optplan/RiverSwimResets-v0``; other models go through ``optplan/Tabular-v0`` with
``mdp=`` (a :class:`~optplan.mdp.TabularMDP` or :class:`~optplan.mdp.FiniteHorizonMDP`).
"""

from __future__ import annotations

__all__ = ["NAMESPACE", "GYMNASIUM_IDS", "register_gymnasium"]

NAMESPACE = "optplan"

#: id -> (entry point, default kwargs). The kwargs are what ``gymnasium.make(id)`` passes
#: when the caller gives none; every environment here builds with them.
GYMNASIUM_IDS: dict[str, tuple[str, dict]] = {
    "optplan/DeepSea-v0": ("optplan.envs.deepsea:DeepSea", {"size": 10}),
    "optplan/DeepSeaChain-v0": ("optplan.envs.deepsea_chain:DeepSeaChain", {}),
    "optplan/UBEChain-v0": ("optplan.envs.ube_chain:UBEChain", {}),
    "optplan/WideNarrow-v0": ("optplan.envs.wide_narrow:WideNarrow", {}),
    "optplan/PriorMDP-v0": ("optplan.envs.prior_mdp:PriorMDP", {}),
    "optplan/RiverSwim-v0": ("optplan.envs.gym_ids:make_riverswim", {}),
    "optplan/RandomDirichlet-v0": ("optplan.envs.gym_ids:make_random_dirichlet", {}),
    "optplan/LinearMixture-v0": ("optplan.envs.gym_ids:make_linear_mixture", {}),
    "optplan/RiverSwimResets-v0": ("optplan.envs.gym_ids:make_riverswim_resets", {}),
    "optplan/Tabular-v0": ("optplan.envs.tabular:TabularEnv", {}),
}


def register_gymnasium() -> None:
    """Register every id of :data:`GYMNASIUM_IDS` with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for env_id, (entry_point, kwargs) in GYMNASIUM_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs))


def make_riverswim(
    n_states: int = 6,
    discount: float | None = None,
    reward_noise: float = 0.0,
    render_mode: str | None = None,
):
    """RiverSwim (:func:`optplan.generators.riverswim`) as a continuing
    :class:`~optplan.envs.TabularEnv`."""
    from ..generators import riverswim
    from .tabular import TabularEnv

    _no_render(render_mode)
    return TabularEnv(riverswim(n_states, discount=discount), reward_noise=reward_noise)


def make_random_dirichlet(
    n_states: int = 10,
    n_actions: int = 3,
    seed: int = 0,
    alpha: float = 1.0,
    support: int | None = None,
    discount: float | None = None,
    reward_noise: float = 0.0,
    render_mode: str | None = None,
):
    """A random Dirichlet MDP (:func:`optplan.generators.random_dirichlet`); ``seed`` is the
    model's seed (the environment's stream is seeded by ``reset(seed=...)``)."""
    from ..generators import random_dirichlet
    from .tabular import TabularEnv

    _no_render(render_mode)
    mdp = random_dirichlet(n_states, n_actions, seed=seed, alpha=alpha, support=support)
    if discount is not None:
        mdp = mdp.with_discount(discount)
    return TabularEnv(mdp, reward_noise=reward_noise)


def make_linear_mixture(render_mode: str | None = None, **kwargs):
    """:meth:`optplan.envs.LinearMixtureMDP.random` with its keyword arguments."""
    from .linear_mixture import LinearMixtureMDP

    _no_render(render_mode)
    return LinearMixtureMDP.random(**kwargs)


def make_riverswim_resets(
    n_states: int = 6,
    discount: float = 0.9,
    reward_noise: float = 0.0,
    render_mode: str | None = None,
):
    """RiverSwim with discounted resets (:class:`~optplan.envs.DiscountedResets`): each step
    ends the episode with probability ``1 - discount`` (RAVI-UCB's setting)."""
    from .resets import DiscountedResets

    env = make_riverswim(n_states, reward_noise=reward_noise, render_mode=render_mode)
    return DiscountedResets(env, discount)


def _no_render(render_mode) -> None:
    if render_mode is not None:
        from .._checks import OptplanError

        raise OptplanError(f"optplan environments do not render, got render_mode={render_mode!r}")
