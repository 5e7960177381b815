"""The KL-ball index of MDP-UCB (accelerating-ucb-indices-mdp §3.1, §4.1, Theorems 1-2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..result import PlanResult
from ._compare import diff
from ._index import check_index_inputs
from .base import Problem


@dataclass(frozen=True, eq=False)
class KLBallIndex(Problem):
    r"""``C(p, v, d) = max { q . v : q in the simplex, KL(p || q) <= d }``.

    ``KL(p||q) = sum_{p_x > 0} p_x log(p_x / q_x)``; ``p`` may have zeros (mass may move to a
    zero-probability state). ``x = q*``; ``multiplier`` = the KL constraint's multiplier
    ``lam = dC/dd``. Edge cases (Theorem 1): ``d < 0`` is infeasible (value ``-inf``); ``d = 0``
    or ``v`` constant gives ``p . v``. MDP-UCB's index is ``r + C(p_hat, v_hat, ln t / T_x^a)``
    (Eq. 2).

    Parameters
    ----------
    p : array_like, shape (S,)
    v : array_like, shape (S,)
    radius : float
    """

    p: np.ndarray
    v: np.ndarray
    radius: float
    stem = "kl_ball"

    def __post_init__(self):
        p, v, radius = check_index_inputs(self.p, self.v, self.radius, "radius")
        if p.ndim != 1:
            raise ValueError(
                f"KLBallIndex takes one instance (p of shape (S,)), got p {p.shape}; "
                "use op.kl_ball_index for batches"
            )
        object.__setattr__(self, "p", np.array(p))
        object.__setattr__(self, "v", np.array(v))
        object.__setattr__(self, "radius", float(radius))

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        return index_compare(self.p, self.v, a, b)


def index_compare(p, v, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
    """Value, ``q*`` and the multiplier; ``q*`` on the support only when several
    zero-probability states tie for the best value (the leftover may split among them)."""
    out = {"value": diff(a.value, b.value)}
    if a.x is not None and b.x is not None:
        zero_best = (p == 0) & (v == v.max())
        qa, qb = a.x, b.x
        if zero_best.sum() > 1:
            qa = np.append(qa[~zero_best], qa[zero_best].sum())
            qb = np.append(qb[~zero_best], qb[zero_best].sum())
        out["x"] = diff(qa, qb)
    if np.isfinite(a.multiplier) and np.isfinite(b.multiplier):
        out["multiplier"] = diff(a.multiplier, b.multiplier)
    return out
