"""The KL-ball index of MDP-UCB (accelerating-ucb-indices-mdp §3.1, §4.1, Theorems 1-2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..result import PlanResult
from ._compare import diff
from ._index import IndexProblem, single_instance


@dataclass(frozen=True, eq=False)
class KLBallIndex(IndexProblem):
    r"""``C(p, v, d) = max { q . v : q in the simplex, KL(p || q) <= d }``.

    ``KL(p||q) = sum_{p_x > 0} p_x log(p_x / q_x)``; ``p`` may have zeros (mass may move to a
    zero-probability state). ``x = q*``; ``multiplier`` = the KL constraint's multiplier
    ``lam = dC/dd``. Edge cases (Theorem 1): ``d < 0`` is infeasible (value ``-inf``); ``d = 0``
    or ``v`` constant gives ``p . v``. MDP-UCB's index is ``r + C(p_hat, v_hat, ln t / T_x^a)``
    (Eq. 2).

    Parameters
    ----------
    p, v : array_like, shape (S,)
        As for every :class:`~optplan.problems._index.IndexProblem`.
    radius : float
        The bound ``d`` on ``KL(p || q)``.
    """

    radius: float
    stem = "kl_ball"
    sqrt_tol_quantities = frozenset({"x", "multiplier"})
    #: ``q*`` is fixed only up to near-ties of ``v`` (``v = [1, 0, 1 - 1e-12]``: any split of
    #: the mass between the two is optimal to 1e-12), and ``lam`` only as well as the dual
    #: function's curvature allows (flat at tiny radii: at ``p = [1], v = [1], d = 1e-16`` both
    #: 0 and Clarabel's 1.17 are optimal to 1.2e-16): they pass when proved optimal
    #: (``x_certificate``; ``multiplier_alt``, the duality gap of the multiplier).
    certified_by = {"x": ("x_certificate",), "multiplier": ("multiplier_alt",)}

    def __post_init__(self):
        single_instance(self, "radius", "kl_ball_index")

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Value, ``q*`` and the multiplier (:func:`index_compare`), and certificates of ``a``.

        At ``d = 0`` the ball is the single point ``p`` (no Slater point): a finite KKT
        multiplier exists only when ``v`` is constant on the support of ``p``, and then every
        ``lam >= max v - max_{p > 0} v`` is one (moving mass ``e`` off the support gains
        ``e`` times that gap and costs ``-log(1 - e) >= e`` of KL). There the key is
        ``multiplier_range``: how far either multiplier lies below that bound (``p = [1],
        v = [0], d = 0``: fast 0 and Clarabel 1.21, both right).
        """
        degenerate = self.radius == 0
        out = index_compare(self.p, self.v, a, b, multiplier_unique=not degenerate)
        mults = [r.multiplier for r in (a, b) if r.multiplier is not None]
        if degenerate and all(np.isfinite(m) for m in mults) and len(mults) == 2:
            support = self.p > 0
            low = max(float(self.v.max() - self.v[support].max()), 0.0)
            out["multiplier_range"] = (max(max(low - m, 0.0) for m in mults), low)
        if a.x is not None:  # a's q* is feasible and attains a's value
            # (the KL excess relative to d when d > 1: at d = 1e300 an absolute scale of
            # |value| + d would let any q.v pass)
            out["x_certificate"] = (
                max(kl_divergence(self.p, a.x) - self.radius, 0.0) / max(self.radius, 1.0)
                + abs(a.x @ self.v - a.value)
                + simplex_residual(a.x),
                abs(a.value) + min(self.radius, 1.0),
            )
            # stationarity in q: v_x + lam p_x / q_x = eta on the support (q_x > 0), weighted
            # by q_x (the value at stake: q_x = p_x = 5e-201 against an optimum of ~0 is off
            # by nothing that matters)
            m = (self.p > 0) & (a.x > 1e-290)  # (entries stored at the double floor excluded)
            if np.isfinite(a.multiplier) and m.any():
                eta = self.v[m] + a.multiplier * self.p[m] / a.x[m]
                w = a.x[m] / a.x[m].sum()
                out["multiplier_certificate"] = (
                    float(w @ np.abs(eta - w @ eta)),
                    float(np.abs(eta).max()),
                )
        if a.multiplier is not None and np.isfinite(a.multiplier) and a.multiplier >= 0:
            # weak duality: D(lam) >= C* for every lam >= 0, with equality at the optimal ones
            gap = kl_ball_dual(self.p, self.v, self.radius, float(a.multiplier)) - b.value
            out["multiplier_alt"] = (abs(gap), abs(b.value))
        return out


def kl_ball_dual(p: np.ndarray, v: np.ndarray, d: float, lam: float) -> float:
    """The Lagrange dual function of :class:`KLBallIndex` at ``lam >= 0``:
    ``D(lam) = min_eta eta + lam d + lam sum_{p>0} p_x log(lam / (eta - v_x))`` over
    ``eta >= max v`` (``eta > v_x`` on the support); ``D(0) = max v``. Weak duality gives
    ``D(lam) >= C*``, with equality exactly at the optimal multipliers.

    The stationary ``eta`` solves ``sum p_x lam / (eta - v_x) = 1``; it is found by bisection
    in the variable that keeps its digits:

    - ``lam >= 2 * spread`` (spread: ``max - min`` of ``v`` on the support): ``eta = lam + m``
      with ``m`` in ``[min v, max v]``, and ``D = m + lam d - lam sum p_x log1p((m - v_x) /
      lam)``, exact for any ``lam`` (1e150 at ``d = 1e-300``: no cancellation);
    - otherwise ``eta = max v + e`` with ``e`` in ``(0, lam]`` (geometric bisection: ``e`` may
      be 1e-200 when the top state has ``p = 2e-201``), ``D = max v + e - lam + lam d - lam
      sum p_x log(u_x / lam)`` with ``u_x = e + (max v - v_x)``.
    """
    if lam == 0.0:
        return float(v.max())
    sup = p > 0
    ps, vs = p[sup], v[sup]
    top, spread = float(vs.max()), float(np.ptp(vs))
    floor = float(v.max()) - top  # eta >= v_x off the support: e >= floor
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if lam >= 2.0 * spread:
            lo, hi = float(vs.min()), top
            for _ in range(200):  # f(m) = sum p / (1 + (m - v) / lam) - 1 decreases in m
                mid = 0.5 * (lo + hi)
                if not lo < mid < hi:
                    break
                if np.sum(ps / (1.0 + (mid - vs) / lam)) > 1.0:
                    lo = mid
                else:
                    hi = mid
            m = max(0.5 * (lo + hi), top + floor - lam)
            return float(m + lam * d - lam * np.sum(ps * np.log1p((m - vs) / lam)))
        gaps = top - vs
        lo, hi = np.finfo(float).tiny, lam
        for _ in range(400):  # f(e) = sum p lam / (e + gaps) - 1 decreases in e
            mid = np.sqrt(lo * hi) if hi > 4.0 * lo else 0.5 * (lo + hi)
            if not lo < mid < hi:
                break
            if np.sum(ps * lam / (mid + gaps)) > 1.0:
                lo = mid
            else:
                hi = mid
        e = max(0.5 * (lo + hi), floor)
        return float(top + e - lam + lam * d - lam * np.sum(ps * np.log((e + gaps) / lam)))


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
