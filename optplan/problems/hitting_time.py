"""Shortest expected hitting times of a known MDP, and its diameter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

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


def support_rows(mdp: TabularMDP):
    """The admissible support as a boolean CSR matrix ``(S·A, S)``: row ``s·A + a`` holds the
    states ``P(s, a)`` reaches when ``a`` is admissible at ``s`` (an empty row otherwise)."""
    rows = mdp.P_rows
    supp = sp.csr_matrix(rows > 0) if not sp.issparse(rows) else (rows > 0).tocsr()
    supp = sp.diags(mdp.action_mask.reshape(-1).astype(np.float64)) @ supp.astype(np.float64)
    supp.eliminate_zeros()
    return supp.tocsr()


def reaching(support, mask: np.ndarray, t: int) -> np.ndarray:
    """``reach[s]``: some policy reaches ``t`` from ``s`` with probability 1, on the sparse
    ``support`` of :func:`support_rows` (the same greatest fixed point as
    :func:`sure_reachability`, one target). Each round is a mat-vec (the admissible actions
    that stay) and a breadth-first search in C (``scipy.sparse.csgraph``) on the reversed
    graph of those actions."""
    from scipy.sparse.csgraph import breadth_first_order

    S, A = mask.shape
    keep = np.ones(S, dtype=bool)
    while True:  # fixed-point rounds
        leaves = (support @ (~keep).astype(np.float64)).reshape(S, A) > 0
        allowed = mask & ~leaves
        rows = sp.diags(allowed.reshape(-1).astype(np.float64)) @ support
        graph = (sp.kron(sp.eye(S, format="csr"), np.ones((1, A))) @ rows).tocsr()  # (S, S)
        order = breadth_first_order(graph.T.tocsr(), t, directed=True, return_predecessors=False)
        back = np.zeros(S, dtype=bool)
        back[order] = True
        back &= keep
        if np.array_equal(back, keep):
            return keep
        keep = back


def staying(support, mask: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """``stays[s, a]``: ``a`` is admissible at ``s`` and never leaves the states in ``reach``
    (one mat-vec on the sparse support)."""
    S, A = mask.shape
    leaves = (support @ (~reach).astype(np.float64)).reshape(S, A) > 0
    return mask & ~leaves


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

    A sparse model stays sparse: both paths then work on its ``(S·A, S)`` rows (per-target
    graph searches, sparse evaluations and a sparse LP), never on a dense ``(S, A, S)`` copy.

    Results: ``value = diameter`` (``inf`` when some state cannot reach another);
    ``x = values = T[t, s]``; ``policy[t, s]`` (the fastest action, ``-1`` where undefined).
    """

    mdp: TabularMDP
    stem = "hitting_time"
    plus_inf_ok = True

    def __post_init__(self):
        if not isinstance(self.mdp, TabularMDP):
            raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(self.mdp).__name__}")

    @property
    def reach(self) -> np.ndarray:
        """``reach[t, s]`` (:func:`sure_reachability`; per target on the sparse support,
        :func:`reaching`, for a sparse model)."""
        mdp = self.mdp
        if not mdp.sparse:
            return sure_reachability(mdp.P, mdp.action_mask)
        support = support_rows(mdp)
        return np.stack([reaching(support, mdp.action_mask, t) for t in range(mdp.n_states)])

    def stays(self) -> np.ndarray:
        """``stays[t, s, a]``: action ``a`` at ``s`` never leaves the states that reach ``t``."""
        reach = self.reach
        mdp = self.mdp
        if mdp.sparse:
            support = support_rows(mdp)
            return np.stack([staying(support, mdp.action_mask, r) for r in reach])
        out = (mdp.P[None] > 0) & ~reach[:, None, None, :]
        return mdp.action_mask[None] & ~out.any(axis=3)

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
