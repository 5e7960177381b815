"""Average-reward (undiscounted, infinite-horizon) planning in a known MDP: unichain (a scalar
gain) by default, any model (a gain per state) with ``multichain="solve"``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanTypeError, check_choice
from ..dp import (
    backup,
    class_gains,
    evaluate_multichain,
    evaluate_sparse_unichain,
    masked,
    near_max,
    policy_model,
    sparse_recurrent_classes,
)
from ..mdp import TabularMDP
from ..result import OPTIMAL, OPTIMAL_INACCURATE, PlanResult
from ._compare import (
    diff,
    diff_up_to_constant,
    floored,
    flow_residual,
    occupancy_errors,
    reward_scale,
    unique_argmax,
)
from .base import Problem


@dataclass(frozen=True, eq=False)
class AverageRewardPlanning(Problem):
    r"""Solve the average-reward optimality equations (accelerating-ucb-indices-mdp Eq. 1).

    .. math:: \phi + v_x = \max_{a \in A(x)} \Big( r_{x,a} + \sum_y p^a_{x,y} v_y \Big).

    The model's ``discount``, if any, is ignored. The methods below assume the model unichain
    (every deterministic policy has one recurrent class), as in the paper. The fast path
    detects a policy with several recurrent classes and falls back to relative value
    iteration (which also solves weakly communicating models); the conic path detects an LP
    policy with several recurrent classes. When either still ends with a multichain policy,
    the multichain solution of the same path (``multichain="solve"`` below) decides
    (:func:`settle_multichain`): a constant optimal gain is returned as the scalar gain,
    status ``optimal``; otherwise status ``multichain`` with NaN and the gain's range.

    Conic path: the LP (Derman 1970; Puterman §8.8) ``min phi s.t. phi + v_x >= r_xa + P v``;
    its dual variables are the stationary state-action frequencies ``y[s, a]`` (sum 1), from
    which the policy is read on the states they visit. ``v`` of that LP is unique only up to a
    constant on the recurrent states; when some Bellman inequality is not tight, a second LP
    (``phi`` fixed, ``min sum v`` subject to the same inequalities and ``pi @ v = 0``) returns
    the solution of the optimality equations.

    Fast path: Howard policy iteration (default) or relative value iteration (with the
    aperiodicity transform once the plain iteration stalls on a periodic chain); the returned
    policy's gain, bias and stationary distribution from one evaluation.

    Results: ``value = gain``; ``x = bias`` normalized by ``pi @ bias = 0`` with ``pi`` the
    stationary distribution of the returned policy (so both paths agree exactly when the
    optimal policy is unique, and up to a constant otherwise); ``q[s, a] = r + P bias``;
    ``policy``; ``occupancy[s, a]`` stationary frequencies; ``multiplier = occupancy``.

    ``multichain="solve"``: any model, the optimal gain per state (Puterman ch. 9). Equations
    ``g_s = max_a P(s, a) g`` and ``g_s + h_s = max_{a in A1(s)} r(s, a) + P(s, a) h`` with
    ``A1(s) = {a: P(s, a) g = g_s}``. Their ``g`` is unique; their ``h`` is not (one free
    constant per recurrent class of an optimal policy, and different optimal policies have
    different biases), so both paths return the same one: ``h*``, the largest bias of a
    gain-optimal policy (a bias-optimal policy's bias, Puterman §10.3), ``h* = h_d`` with
    ``P*_d h* = 0`` for the returned policy ``d``. Fast path: multichain policy iteration
    (Puterman §9.2) carried one level on (:func:`optplan.dp.multichain_policy_iteration`).
    Conic path: the multichain LP (Puterman §9.3) ``min sum_j alpha_j g_j  s.t.  g_s >=
    P(s, a) g,  g_s + h_s >= r(s, a) + P(s, a) h`` over the admissible pairs (``alpha``
    uniform), whose ``g`` is the optimal gain; a gain-optimal policy from its duals; then the
    bias LP (:func:`optplan.conic.average_reward.formulate_multichain_bias`), whose minimal
    ``h`` is ``h*``, certified by the exact bias of a policy read from its duals. Results:
    ``gain[s]`` (a vector), ``value = initial @ gain``, ``x = bias = h*``, ``q = r + P h*``
    (masked), ``policy``; fast: ``occupancy[s, a]`` the limiting state-action frequencies of
    the policy from the uniform start, conic: the multichain LP's dual ``x`` (the same for a
    unique optimal policy; not compared); ``info["recurrent"]``, ``info["stationary"]``.

    Parameters
    ----------
    mdp : TabularMDP
    multichain : {"refuse", "solve"}
        ``"refuse"`` (default): one scalar gain; a model whose optimal gain is not the same
        from every state gets status ``multichain`` and NaN (on both paths: the multichain
        solution decides). ``"solve"``: the multichain equations above, on any model, a
        gain per state.
    """

    mdp: TabularMDP
    multichain: str = "refuse"
    stem = "average_reward"
    #: as :attr:`DiscountedPlanning.answer_certified_by`
    answer_certified_by = {"multiplier": ("multiplier_feasibility", "multiplier_value")}

    def __post_init__(self):
        if not isinstance(self.mdp, TabularMDP):
            raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(self.mdp).__name__}")
        check_choice("multichain", self.multichain, ("refuse", "solve"))

    def policy_gain(self, policy: np.ndarray) -> float:
        """Gain of a deterministic policy (the worst recurrent class's if it is multichain);
        on a sparse model a unichain policy is evaluated sparse, a multichain one densely
        (``mdp.dense_P()``: refused, naming the size, for a large model)."""
        mdp = self.mdp
        if mdp.sparse:
            P_pi, r_pi = policy_model(mdp.P_rows, mdp.R, policy)
            if sparse_recurrent_classes(P_pi) == 1:
                scale = float(np.abs(r_pi).max()) or 1.0
                return evaluate_sparse_unichain(P_pi, r_pi, 1e-13 * scale, bias=False).gain
        return float(class_gains(mdp.dense_P(), mdp.R, policy).min())

    def policy_gains(self, policy: np.ndarray) -> np.ndarray:
        """Gain per state of a deterministic policy (any number of recurrent classes)."""
        return evaluate_multichain(*policy_model(self.mdp.dense_P(), self.mdp.R, policy)).gain

    def optimality_residual(self, gain: np.ndarray, bias: np.ndarray) -> float:
        """``max |max_{a: P g = g} (r + P h) - g - h|`` and ``max (max_a P g - g)``: how far
        ``(gain, bias)`` is from solving the multichain optimality equations (the actions
        with ``P(s, a) g`` within 1e-7 of the best form the inner set)."""
        mdp = self.mdp
        pg = masked(backup(mdp.P_rows, np.zeros_like(mdp.R), gain), mdp.action_mask)
        q = masked(backup(mdp.P_rows, mdp.R, bias), mdp.action_mask & near_max(pg, 1e-7))
        return float(max(np.abs(q.max(axis=1) - gain - bias).max(), (pg.max(axis=1) - gain).max()))

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        if self.multichain == "solve":
            return self._compare_multichain(a, b)
        out = {
            "value": diff(a.value, b.value),
            "gain": diff(a.gain, b.gain),
            "x": diff_up_to_constant(a.bias, b.bias),
            "policy_value": diff(self.policy_gain(a.policy), self.policy_gain(b.policy)),
            "occupancy_value": diff(*(float(np.sum(r.occupancy * self.mdp.R)) for r in (a, b))),
        }
        zero = np.zeros(self.mdp.n_states)
        out["multiplier_feasibility"] = (
            max(
                max(flow_residual(r.occupancy, self.mdp.P_rows, zero), abs(r.occupancy.sum() - 1.0))
                for r in (a, b)
            ),
            1.0,
        )
        if unique_argmax(a.q):
            out["multiplier"] = diff(a.occupancy, b.occupancy)
        return out

    def _compare_multichain(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Gain per state; each policy's exact gain per state; each answer's residual in the
        optimality equations; the bias entry by entry (both paths return the largest bias of
        a gain-optimal policy, which is unique)."""
        scale = float(1.0 + np.abs(self.mdp.R).max())
        out = {
            "value": diff(a.value, b.value),
            "gain": diff(a.gain, b.gain),
            "policy_value": diff(self.policy_gains(a.policy), self.policy_gains(b.policy)),
            "optimality_residual": (
                max(self.optimality_residual(r.gain, r.bias) for r in (a, b)),
                scale,
            ),
        }
        out["x"] = diff(a.bias, b.bias)
        return out

    def answer_x(self, result: PlanResult):
        return result.bias

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Gain and bias (up to a constant) on the reward scale at least; the stationary
        frequencies (:func:`~optplan.problems._compare.occupancy_errors`)."""
        mdp = self.mdp
        floor = reward_scale(mdp.R, mdp.action_mask)
        out = {"value": floored(diff(answer.value, reference.gain), floor)}
        if answer.x is not None:
            out["x"] = floored(diff_up_to_constant(answer.x, reference.bias), floor)
        if answer.multiplier is not None:
            zero = np.zeros(mdp.n_states)
            out |= occupancy_errors(self, answer, reference, zero, 1.0, mdp.R, mdp.action_mask, 1.0)
        return out


#: The per-state optimal gain counts as constant when its range is at most this times the
#: reward scale ``max |R|`` (the largest admissible reward).
CONSTANT_GAIN_TOL = 1e-9


def settle_multichain(refused: PlanResult, solved: PlanResult, mdp) -> PlanResult:
    """The default (``multichain="refuse"``) answer once a unichain method has met a
    multichain policy: the multichain solution ``solved`` decides. A constant optimal gain
    (within :data:`CONSTANT_GAIN_TOL`) is the scalar gain: returned as the unichain
    answer (bias ``h*`` normalized by ``pi @ h = 0``, ``pi`` the policy's limiting state
    frequencies from the uniform start); otherwise the ``refused`` answer (status
    ``multichain``, NaN) with the range of the per-state gain in its message. Shared by both
    paths, so they agree on when a model has no scalar gain."""
    if solved.status not in (OPTIMAL, OPTIMAL_INACCURATE):
        return refused
    g = solved.gain
    # relative to the rewards' size (gains are averages of rewards): an absolute floor would
    # call the gains 1e-10 and 0 of rewards of size 1e-10 one constant gain
    scale = float(np.abs(mdp.R[mdp.action_mask]).max())
    if g.max() - g.min() > CONSTANT_GAIN_TOL * scale:
        message = (
            f"{refused.message}; the optimal gain is not constant: it ranges over "
            f"[{_rounded(g.min()):.6g}, {_rounded(g.max()):.6g}] across states (per-state gains: "
            "AverageRewardPlanning(mdp, multichain='solve'))"
        )
        return refused.replace(message=message.strip("; "))
    occupancy = solved.occupancy / solved.occupancy.sum()
    pi = occupancy.sum(axis=1)
    h = solved.bias - pi @ solved.bias
    gain = float(np.mean(g))
    note = (
        f"{refused.message}; solved as a multichain model ({solved.solver}): the optimal gain "
        "is the same from every state"
    )
    return solved.replace(
        value=gain,
        x=h,
        multiplier=occupancy,
        message=note.strip("; "),
        values=h,
        q=masked(backup(mdp.P_rows, mdp.R, h), mdp.action_mask),
        gain=gain,
        bias=h,
        occupancy=occupancy,
        iterations=(refused.iterations or 0) + (solved.iterations or 0),
        solve_time=refused.solve_time + solved.solve_time,
    )


def _rounded(x: float) -> float:
    """``x`` to 9 decimals (a solver's 8e-14 printed as 0), no negative zero."""
    return round(float(x), 9) + 0.0
