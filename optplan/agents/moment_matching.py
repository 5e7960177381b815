r"""Moment matching across the Bellman equation (bayesian-methods-tabular-rl App. MM; the
write-up's App. A.4): :class:`MomentMatching`, registered ``moment-matching``.

On the Dirichlet / Normal-Gamma posterior per ``(s, a, s')`` of
:mod:`optplan.agents._posterior_agent`: the posterior-mean model's ``Qbar`` and greedy policy
``pi`` by policy iteration, and the epistemic variance ``sigma~^2`` of
:class:`~optplan.problems.MomentMatchingVariance` (exact Dirichlet moments, the same linear
solve as the UBE's); actions ``argmax_b Qbar_sb + zeta eps_b sigma~_sb`` (``/ gamma`` as in the
public code, see ``std``).
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, check_choice
from .._params import Component, Param
from ..problems.moment_matching import MomentMatchingVariance
from . import _ube_kernels as UK
from ._posterior_agent import (
    CONIC_PARAMS,
    DRAFT_GAMMA,
    MODEL_POSTERIOR_PARAMS,
    ThompsonMeanModel,
    model_builder,
)

__all__ = ["MomentMatching", "STD_RULES"]

#: Thompson standard deviation of :class:`MomentMatching` (docs/sources.md, Ambiguities 2).
STD_RULES = ("public-code", "paper")


class MomentMatching(ThompsonMeanModel):
    r"""Moment matching across the Bellman equation (bayesian-methods-tabular-rl App. MM,
    Algorithm tmm; the write-up's App. A.4; the public code's ``MomentMatchingAgent``):
    ``a = argmax_b Qbar_sb + zeta eps_b sd_sb``, ``eps_b ~ N(0, 1)``.

    At every plan: ``Qbar``, ``pi`` and ``V(s) = Qbar(s, pi(s))`` of the posterior-mean model by
    policy iteration, then ``sigma~^2`` = :class:`~optplan.problems.MomentMatchingVariance`
    ``(alpha, mu0, Var mu, pi, gamma, values=V)`` solved: the local term
    ``w = A + B + 2 gamma C + gamma^2 D`` from exact Dirichlet moments and
    ``sigma~^2 = w + gamma^2 Pbar_pi sigma~^2``.

    Parameters
    ----------
    n_states, n_actions : int
    zeta : float >= 0, default 1.0
        Thompson noise scale (the draft: 1.0 throughout).
    std : {"public-code", "paper"}, default "public-code"
        ``sd = sigma~ / gamma`` as the public code draws it (docs/sources.md, Ambiguities 2:
        reproduce with it), or ``sigma~`` as the draft and write-up write it.
    discount : float in (0, 1), default 0.9
    update_every, reward_prior, transition_prior, sum_of_squares, action_mask, method, solver :
        As :class:`~optplan.agents.ContinuingUBE`.

    Attributes
    ----------
    q, policy, values : the posterior-mean model's ``Qbar``, greedy policy and ``V``.
    variance : ndarray (S, A)
        ``sigma~^2`` (0 on inadmissible pairs).
    problem : MomentMatchingVariance
        The last problem solved (``problem.terms``: ``w`` and ``A``, ``B``, ``C``, ``D``).
    """

    def __init__(self, n_states, n_actions, *, zeta=1.0, std="public-code", discount=0.9, **model):
        self.std = check_choice("std", std, STD_RULES)
        if isinstance(discount, (int, float)) and discount == 0 and std == "public-code":
            raise OptplanError("discount must be > 0 with std='public-code' (sd = sigma~ / gamma)")
        super().__init__(n_states, n_actions, zeta=zeta, discount=discount, **model)

    def _kernel_rule(self) -> tuple:
        """The compiled plan's ``(rule, coef, div)`` (:func:`optplan.agents._ube_kernels._plan`)."""
        return UK.MOMENT, 0.0, self.discount if self.std == "public-code" else 1.0

    @property
    def variance(self) -> np.ndarray:
        """``sigma~^2`` (0 on inadmissible pairs)."""
        return np.where(self.action_mask, self.state.u, 0.0)

    @variance.setter
    def variance(self, value) -> None:
        self.state.u[...] = value

    @property
    def problem(self) -> MomentMatchingVariance:
        """The last problem solved (built on first read after a compiled plan)."""
        if self._problem_plan != self.plans:
            t, r = self.transitions, self.rewards
            self._problem = MomentMatchingVariance._trusted(
                t.alpha, r.mu0, r.variance, self.policy.copy(), self.discount,
                self.values.copy(),
            )  # fmt: skip
            self._problem_plan = self.plans
        return self._problem

    @problem.setter
    def problem(self, value: MomentMatchingVariance) -> None:
        self._problem, self._problem_plan = value, self.plans

    def _noise_sd(self, P: np.ndarray) -> np.ndarray:
        # the agent's own posterior and plan: valid by construction, so built unchecked
        self.problem = MomentMatchingVariance._trusted(
            self.transitions.alpha,
            self.rewards.mu0,
            self.rewards.variance,
            self.policy.copy(),
            self.discount,
            self.values.copy(),
        )
        self.variance = np.where(self.action_mask, np.asarray(self._solve(self.problem).x), 0.0)
        sd = np.sqrt(self.variance)
        return sd / self.discount if self.std == "public-code" else sd

    def __repr__(self) -> str:
        return (
            f"MomentMatching(S={self.n_states}, A={self.n_actions}, zeta={self.zeta}, "
            f"std={self.std!r}, discount={self.discount}, update_every={self.update_every})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


BUILDERS = (
    Component(
        "moment-matching",
        model_builder(MomentMatching, "moment-matching"),
        (
            Param("zeta", "float", 1.0, "Thompson noise scale (the draft: 1)"),
            Param("std", "str", "public-code", "noise sd: 'public-code' (sigma/gamma) or 'paper'"),
            DRAFT_GAMMA,
            *MODEL_POSTERIOR_PARAMS,
            *CONIC_PARAMS,
        ),
        "moment matching across the Bellman equation (bayesian-methods App. MM / write-up A.4)",
    ),
)
