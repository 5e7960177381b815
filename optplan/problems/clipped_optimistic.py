r"""RAVI-UCB's clipped optimistic fixed point (ravi-ucb-optimistic-planning-regularized-dp
Algorithm 1 with the data frozen): ``Q = Pi_H[r + CB + gamma P_hat max_a Q]``."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._checks import OptplanError, as_array, check_real
from ..dp import masked
from ..mdp import check_action_mask
from ..result import OPTIMAL, PlanResult
from ..soft import check_substochastic, check_unit_rewards
from ._compare import answer_errors, diff
from .base import EstimatedKernel, Problem, store_readonly
from .optimistic import _per_pair


@dataclass(frozen=True, eq=False)
class ClippedOptimisticPlanning(EstimatedKernel, Problem):
    r"""The fixed point of RAVI-UCB's optimistic operator with the data frozen:

    .. math:: Q(s, a) = \Pi_H\big[r(s, a) + CB(s, a) + \gamma \textstyle\sum_{s'}
              \hat P(s'|s, a) \max_{a'} Q(s', a')\big], \qquad H = \frac{1}{1 - \gamma},

    ``Pi_H`` the truncation to ``[0, H]``. With ``r`` in ``[0, 1]``, ``CB >= 0`` and
    ``P_hat >= 0`` the lower truncation never acts, so in values ``V = max_a Q`` this is ``V =
    min(H, T V)`` with ``T`` the Bellman optimality operator of the substochastic model
    ``(P_hat, r + CB)``: a ``gamma``-contraction with one fixed point.

    Repeating RAVI-UCB's regularized step (:func:`optplan.soft.ravi_step`) on frozen data
    converges to this fixed point for every ``eta > 0`` (no averaging, no ``eta -> inf``: with
    ``pi_0`` uniform, ``pi_k ~ exp(eta sum_i Q_i)`` concentrates on the maximizers, and its
    soft value ``V_k`` tends to ``max_a Q``); transiently like ``1/(eta k)``, eventually
    geometrically at rate ``max(gamma, exp(-eta * action gap))``, so slowly for small ``eta``
    or near-ties. It is the fast path's ``algorithm="ravi"``, checked against the exact ones.

    **No single convex program.** ``min(H, max_a T_a V)`` is a stopping game: the max player
    picks actions, the min player may stop at ``H``. In one state with ``P_hat = 1``, ``V =
    H min(1, max_a (r_a + CB_a))`` is neither convex nor concave in the rewards, whereas the
    optimal value of an LP or conic program whose right-hand side is affine in them (every
    planning LP) is convex. For a fixed *clipped set* ``U`` it is an LP: ``V = H`` on ``U`` and
    the least ``V`` with ``V(s) >= r + CB + gamma P_hat V`` elsewhere. Both paths iterate on
    ``U``: from ``U = {}`` (the unclipped LP), ``U <- {s : max_a T_a V(s) > H}``; the values
    decrease and ``U`` shrinks after the first round, so at most ``S + 1`` rounds, and the last
    round's ``V`` is the fixed point (its residual ``|min(H, TV) - V|`` is checked). The conic
    path solves each round's LP with CVXPY; the fast path by Howard policy iteration.

    Parameters
    ----------
    p_hat : array (S, A, S)
        Estimated transitions: nonnegative, rows summing to at most 1 (Algorithm 2's ``N'/N``,
        counts from ``N = 1``; the missing mass ends the trajectory with value 0).
    r : array (S, A)
        Known rewards in ``[0, 1]``.
    bonus : float or array (S, A)
        ``CB >= 0`` (Algorithm 2: ``beta / sqrt(N)``).
    discount : float in (0, 1)
    action_mask : bool array (S, A), optional

    Notes
    -----
    Results: ``value`` (mean of ``V``: uniform weights), ``x = values`` (``V``), ``q``
    (masked actions ``-inf``), ``policy`` (greedy in ``q``), ``info["clipped"]`` (bool (S,):
    states with ``V = H``), ``info["rounds"]`` (clipped-set rounds).
    """

    p_hat: np.ndarray
    r: np.ndarray
    bonus: np.ndarray | float = 0.0
    discount: float = 0.9
    action_mask: np.ndarray | None = None
    stem = "clipped_optimistic"

    def __post_init__(self):
        P = as_array("p_hat", self.p_hat, 3)
        S, A, S2 = P.shape
        if S2 != S:
            raise OptplanError(f"p_hat must have shape (S, A, S), got {P.shape}")
        check_substochastic("p_hat", P)
        r = as_array("r", self.r, 2)
        if r.shape != (S, A):
            raise OptplanError(f"r has shape {r.shape}, expected {(S, A)}")
        check_unit_rewards("r", r)
        bonus = _per_pair("bonus", self.bonus, (S, A))
        gamma = check_real("discount", self.discount, 0.0, 1.0, low_open=True, high_open=True)
        mask = check_action_mask(self.action_mask, (S, A))
        store_readonly(self, p_hat=P, r=r, bonus=bonus, action_mask=mask)
        object.__setattr__(self, "discount", gamma)

    @property
    def horizon(self) -> float:
        """``H = 1 / (1 - gamma)``, the truncation level."""
        return 1.0 / (1.0 - self.discount)

    def backup(self, v: np.ndarray) -> np.ndarray:
        """``r + CB + gamma P_hat v`` per pair, unclipped (masked pairs ``-inf``)."""
        pv = np.einsum("sat,t->sa", self.p_hat, v)
        return masked(self.r + self.bonus + self.discount * pv, self.action_mask)

    def operator(self, v: np.ndarray) -> np.ndarray:
        """The clipped optimistic ``Q = Pi_H[r + CB + gamma P_hat v]`` (masked pairs ``-inf``)."""
        return np.minimum(self.backup(v), self.horizon)

    def residual(self, v: np.ndarray) -> float:
        """``max_s |max_a Pi_H[r + CB + gamma P_hat v](s) - v(s)|``: 0 at the fixed point, and
        ``|v - V*| <= residual / (1 - gamma)``."""
        return float(np.max(np.abs(self.operator(v).max(axis=1) - v)))

    def policy_values(self, policy: np.ndarray) -> PlanResult:
        """The clipped values of a deterministic ``policy``: the fixed point of ``V = min(H,
        r_pi + CB_pi + gamma P_hat_pi V)``, i.e. this problem with only its actions admissible."""
        mask = np.zeros_like(self.action_mask)
        mask[np.arange(self.n_states), policy] = True
        return replace(self, action_mask=mask).solve(method="fast")

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Value; values ``V``; ``Q`` on the admissible pairs; each returned policy's own clipped
        values (any policy greedy in the fixed point's ``Q`` attains ``V*``, ties included)."""
        mask = self.action_mask
        out = {
            "value": diff(a.value, b.value),
            "x": diff(a.values, b.values),
            "q": diff(np.asarray(a.q)[mask], np.asarray(b.q)[mask]),
        }
        policies = [r.policy for r in (a, b) if r.policy is not None]
        if len(policies) == 2:
            own = [self.policy_values(pi) for pi in policies]
            if all(r.status == OPTIMAL for r in own):
                out["policy_value"] = diff(own[0].values, own[1].values)
        return out

    def answer_x(self, result: PlanResult):
        return result.values

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value and ``V``."""
        return answer_errors(self, answer, reference)
