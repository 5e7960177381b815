"""The KL-ball index of MDP-UCB (accelerating-ucb-indices-mdp §3.1, §4.1, Theorems 1-2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..result import PlanResult
from ._compare import diff
from ._index import single_instance
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
    sqrt_tol_quantities = frozenset({"x", "multiplier"})

    def __post_init__(self):
        single_instance(self, "radius", "kl_ball_index")

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Value, ``q*`` and the multiplier (:func:`index_compare`), and certificates of ``a``.

        At ``d = 0`` the ball is the single point ``p`` (no Slater point): a finite KKT
        multiplier exists only when ``v`` is constant on the support of ``p``, and then every
        ``lam >= max v - max_{p > 0} v`` is one (moving mass ``e`` off the support gains
        ``e`` times that gap and costs ``-log(1 - e) >= e`` of KL). There the key is
        ``multiplier_range``: how far either multiplier lies below that bound (found by
        ``op.verify``: ``p = [1], v = [0], d = 0``, fast 0 and Clarabel 1.21, both right).
        """
        degenerate = self.radius == 0
        out = index_compare(self.p, self.v, a, b, multiplier_unique=not degenerate)
        mults = [r.multiplier for r in (a, b) if r.multiplier is not None]
        if degenerate and all(np.isfinite(m) for m in mults) and len(mults) == 2:
            support = self.p > 0
            low = max(float(self.v.max() - self.v[support].max()), 0.0)
            out["multiplier_range"] = (max(max(low - m, 0.0) for m in mults), low)
        if a.x is not None:  # a's q* is feasible and attains a's value
            out["x_certificate"] = (
                max(kl_divergence(self.p, a.x) - self.radius, 0.0)
                + abs(a.x @ self.v - a.value)
                + simplex_residual(a.x),
                abs(a.value) + self.radius,
            )
            # stationarity in q: v_x + lam p_x / q_x = eta on the support (q_x > 0)
            m = (self.p > 0) & (a.x > 1e-290)  # (entries stored at the double floor excluded)
            if np.isfinite(a.multiplier) and m.any():
                eta = self.v[m] + a.multiplier * self.p[m] / a.x[m]
                out["multiplier_certificate"] = (float(np.ptp(eta)), float(np.abs(eta).max()))
        return out


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """``sum_{p_x > 0} p_x log(p_x / q_x)`` (``inf`` if ``q_x = 0 < p_x``)."""
    m = p > 0
    with np.errstate(divide="ignore"):
        return float(np.sum(p[m] * (np.log(p[m]) - np.log(q[m]))))


def simplex_residual(q: np.ndarray) -> float:
    """How far ``q`` is from the simplex: ``|sum q - 1| + max(-min q, 0)``."""
    return abs(float(q.sum()) - 1.0) + max(-float(q.min()), 0.0)


def index_compare(
    p, v, a: PlanResult, b: PlanResult, multiplier_unique: bool = True
) -> dict[str, tuple[float, float]]:
    """Value, ``q*`` and the multiplier of a KL index problem.

    ``q*`` is unique except for how mass is split among several states tied at ``max v``
    (zero-probability ones, or any of them once the constraint is slack): with such ties the
    tied group is compared by its total mass.
    """
    out = {"value": diff(a.value, b.value)}
    if a.x is not None and b.x is not None:
        top = v == v.max()
        qa, qb = a.x, b.x
        if top.sum() > 1:
            qa = np.append(qa[~top], qa[top].sum())
            qb = np.append(qb[~top], qb[top].sum())
        out["x"] = diff(qa, qb)
    if multiplier_unique and np.isfinite(a.multiplier) and np.isfinite(b.multiplier):
        out["multiplier"] = diff(a.multiplier, b.multiplier)
    return out
