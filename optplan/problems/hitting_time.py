"""Shortest expected hitting times of a known MDP, and its diameter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanTypeError
from ..mdp import TabularMDP
from ..result import PlanResult
from ._compare import diff
from .base import Problem


def sure_reachability(P: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``reach[t, s]``: some policy reaches ``t`` from ``s`` with probability 1 (``reach[s,
    s]`` is True). Per target, the greatest fixed point of: keep the states that reach ``t``
    with positive probability using only actions that never leave the kept set (de Alfaro
    1997's almost-sure reachability). A loop over targets and fixed-point rounds; each round
    is vectorized."""
    S = P.shape[0]
    support = (P > 0) & mask[:, :, None]
    reach = np.zeros((S, S), dtype=bool)
    for t in range(S):  # loop over targets
        keep = np.ones(S, dtype=bool)
        while True:  # fixed-point rounds
            allowed = mask & ~(support & ~keep[None, None, :]).any(axis=2)
            edges = support & allowed[:, :, None]
            back = np.zeros(S, dtype=bool)
            back[t] = True
            while True:  # backward breadth-first search from t
                wider = back | (edges & back[None, None, :]).any(axis=(1, 2))
                if np.array_equal(wider, back):
                    break
                back = wider
            back &= keep
            if np.array_equal(back, keep):
                break
            keep = back
        reach[t] = keep
    return reach


@dataclass(frozen=True, eq=False)
class HittingTimes(Problem):
    r"""Minimal expected hitting times ``T[t, s] = min_pi E[steps from s to t]`` for every
    target ``t`` (a stochastic-shortest-path problem per target, unit cost per step), and the
    diameter ``D = max_{s != t} T[t, s]`` (Jaksch, Ortner and Auer 2010, the ``D`` of
    UCRL2's regret bound).

    For each target: ``T[t, t] = 0`` and ``T[t, s] = 1 + min_a P(s, a) T[t]`` on the states
    from which some policy reaches ``t`` with probability 1 (``T = inf`` on the others,
    decided by graph algorithms: :func:`sure_reachability`). Only actions that keep the chain
    among those states count (the others have an infinite expected time).

    Fast path: policy iteration per target from a proper policy (a step towards ``t`` in the
    graph), evaluated exactly (Bertsekas and Tsitsiklis 1991: improvements stay proper).
    Conic path: the LP ``max sum_{t, s} T[t, s]  s.t.  T[t, s] <= 1 + P(s, a) T[t]`` over the
    admissible pairs that stay, ``T[t, t] = 0`` (all targets in one LP).

    Results: ``value = diameter`` (``inf`` when some state cannot reach another);
    ``x = values = T[t, s]``; ``policy[t, s]`` (the fastest action, ``-1`` where undefined).
    """

    mdp: TabularMDP
    stem = "hitting_time"
    plus_inf_ok = True

    def __post_init__(self):
        if not isinstance(self.mdp, TabularMDP):
            raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(self.mdp).__name__}")
        # its paths are dense: a sparse model's dense copy (refused, naming the size, when large)
        object.__setattr__(self, "mdp", self.mdp.to_dense())

    @property
    def reach(self) -> np.ndarray:
        """``reach[t, s]`` (:func:`sure_reachability`)."""
        return sure_reachability(self.mdp.P, self.mdp.action_mask)

    def stays(self) -> np.ndarray:
        """``stays[t, s, a]``: action ``a`` at ``s`` never leaves the states that reach ``t``."""
        reach = self.reach
        out = (self.mdp.P[None] > 0) & ~reach[:, None, None, :]
        return self.mdp.action_mask[None] & ~out.any(axis=3)

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Diameter and every finite hitting time; the infinite ones must coincide."""
        finite = np.isfinite(b.values)
        if not np.array_equal(np.isfinite(a.values), finite):
            return {"x": (np.inf, 0.0)}
        if np.isfinite(b.value):
            value = diff(a.value, b.value)
        else:
            value = (0.0 if a.value == b.value else np.inf, 0.0)
        return {"value": value, "x": diff(a.values[finite], b.values[finite])}

    def answer_x(self, result: PlanResult):
        return result.values

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """The diameter and, where given, the finite hitting times; the infinite ones must
        coincide (as :meth:`compare`)."""
        b = reference
        if np.isfinite(b.value):
            out = {"value": diff(answer.value, b.value)}
        else:
            out = {"value": (0.0 if answer.value == b.value else np.inf, 0.0)}
        if answer.x is not None:
            finite = np.isfinite(b.values)
            if not np.array_equal(np.isfinite(answer.x), finite):
                out["x"] = (np.inf, 0.0)
            else:
                out["x"] = diff(answer.x[finite], b.values[finite])
        return out
