r"""The L1-ball index of OLP (accelerating-ucb-indices-mdp §3.3, §4.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..result import PlanResult
from ._compare import diff
from ._index import IndexProblem, single_instance
from .kl_ball import simplex_residual

#: Values of ``v`` closer than ``TIE_TOL * max(1, max |v|)`` form one tie class when ``q*`` is
#: compared: misplacing mass ``m`` between states ``delta`` apart costs only ``m * delta`` in
#: the objective, so a solver accurate to ``1e-12 * max(1, |B|)`` (Clarabel's gap tolerance)
#: places the mass only to ``1e-12 / delta``; classes at least ``TIE_TOL`` apart keep that
#: below ``1e-7``.
TIE_TOL = 1e-5
#: Within ``KINK_TOL`` (in mass, ``d/2``) of a kink of ``B(d)``, ``d = 0`` included, the
#: multiplier is compared as a range: an LP solver's dual is only as accurate as its objective
#: divided by the distance to the kink (at ``d = 1e-6`` Clarabel's is off by ``3e-7``).
KINK_TOL = 1e-5


@dataclass(frozen=True, eq=False)
class L1BallIndex(IndexProblem):
    r"""``B(p, v, d) = max { q . v : q in the simplex, ||q - p||_1 <= d }``.

    An LP (the paper gives it in ``q+``/``q-`` form, §4.3) with a greedy solution: move
    ``eps = min(d/2, 1 - p_b)`` onto the best state ``b = argmax v`` (any state, also one with
    ``p_b = 0``) and take it from the worst states upward. ``x = q*``; ``multiplier`` = the L1
    constraint's multiplier ``dB/dd = (v_b - v_m) / 2``, ``m`` the state drained at the margin
    (0 once all mass is on ``b``). ``B`` is concave and piecewise linear in ``d``; at a kink
    (the margin moves to the next state, ``d = 0``, or ``d/2 = 1 - p_b``) every value in
    ``[right, left]`` derivative is an LP dual, and the fast path reports the right derivative.
    Edge cases: ``d < 0`` is infeasible (value ``-inf``); ``d = 0`` gives ``p . v``; ``v``
    constant gives ``v[0]``. OLP's index is ``r + B(p_hat, v_hat, sqrt(2 ln t / T_x^a))``.

    Parameters
    ----------
    p, v : array_like, shape (S,)
        As for every :class:`~optplan.problems._index.IndexProblem`.
    radius : float
        How far ``q`` may lie from ``p`` in L1 norm: ``||q - p||_1 <= d``.
    """

    radius: float
    stem = "l1_ball"

    def __post_init__(self):
        single_instance(self, "radius", "l1_ball_index")

    def derivatives(self, radius: float | None = None) -> tuple[float, float]:
        """``(right, left)`` derivative of ``B`` in the radius (default: this radius).

        The LP duals of the L1 constraint are exactly ``[right, left]``; ``left = inf`` at
        ``radius <= 0`` (the ball is empty below 0), ``right = nan`` below 0.
        """
        eps = (self.radius if radius is None else float(radius)) / 2.0
        return _slope(self.p, self.v, eps, right=True), _slope(self.p, self.v, eps, right=False)

    def dual_function(self, multiplier: float) -> float:
        """The LP's dual function ``g(lam) = lam d + p.v + sum_x p_x (v_b - v_x - 2 lam)_+``.

        ``max_q q.v - lam (||q - p||_1 - d)`` over the simplex: each unit of ``p_x`` either
        stays or moves to the best state, gaining ``v_b - v_x`` at the price ``2 lam``.
        ``g(lam) >= B`` for ``lam >= 0`` (``inf`` below), with equality exactly on the LP's
        duals ``[right, left]`` (see :meth:`derivatives`).
        """
        lam = float(multiplier)
        if lam < 0:
            return np.inf
        gain = np.maximum(self.v.max() - self.v - 2.0 * lam, 0.0)
        return float(lam * self.radius + self.p @ self.v + self.p @ gain)

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Value; ``q*`` summed over tie classes of ``v``; the multiplier.

        ``q*`` is unique unless ``v`` ties among the states that matter: several best states
        (the added mass may go to any of them, or be shuffled among them once they hold all
        the mass), or several states with ``p > 0`` at the margin level (the partial drain
        may come from any of them). The mass per tie class is unique in every case (it solves
        the same LP with the tied states merged, whose values are distinct), so ``x`` compares
        that; without ties it is ``q*`` itself. Values within ``TIE_TOL * max(1, max |v|)``
        count as tied. The multiplier is compared as a number where it is unique (no kink
        within ``KINK_TOL`` of ``d/2``, ``d = 0`` included); near a kink the key is
        ``multiplier_range``: how far either multiplier lies outside ``[right, left]``, the
        derivatives ``KINK_TOL`` beyond it on either side. Value and multiplier errors are
        relative to ``max |v|``, the data scale of the LP. Certificates of ``a`` (the fast
        result in :func:`optplan.cross_check`), exact for an LP: ``x_certificate`` (``q*``
        feasible, attaining the value) and ``multiplier_certificate`` (duality gap
        ``g(lam) - B``); together they prove ``a`` optimal with ``lam`` an optimal dual.
        """
        # the LP's data scale: a solver's error in the value and the dual scales with max |v|
        scale = float(np.abs(self.v).max())
        out = {"value": _scaled(diff(a.value, b.value), scale)}
        if a.x is not None and b.x is not None:
            out["x"] = diff(_by_tie_class(self.v, a.x), _by_tie_class(self.v, b.x))
        if a.x is not None:  # a's q* is feasible and attains a's value
            out["x_certificate"] = (
                max(float(np.abs(a.x - self.p).sum()) - self.radius, 0.0)
                + abs(float(a.x @ self.v) - a.value)
                + simplex_residual(a.x),
                scale + self.radius,
            )
        if a.multiplier is not None and np.isfinite(a.multiplier):
            # zero duality gap: with a feasible q* of value B, a's multiplier is an LP dual
            out["multiplier_certificate"] = (
                abs(self.dual_function(a.multiplier) - a.value),
                scale,
            )
        if a.multiplier is None or b.multiplier is None:
            return out
        eps = self.radius / 2.0
        lo = _slope(self.p, self.v, eps + KINK_TOL, right=True)
        hi = _slope(self.p, self.v, eps - KINK_TOL, right=False)
        if lo == hi:
            out["multiplier"] = _scaled(diff(a.multiplier, b.multiplier), scale)
        else:
            outside = [max(lo - m, m - hi, 0.0) for m in (a.multiplier, b.multiplier)]
            out["multiplier_range"] = (max(outside), scale)
        return out


def _scaled(err_scale: tuple[float, float], scale: float) -> tuple[float, float]:
    return err_scale[0], max(err_scale[1], scale)


def _drain_order(p: np.ndarray, v: np.ndarray):
    """The best state ``b`` (first argmax), then ``p`` and ``v`` of the others, worst first."""
    b = int(np.argmax(v))
    key = v.copy()
    key[b] = np.inf
    order = np.argsort(key, kind="stable")[:-1]
    return b, p[order], v[order]


def _slope(p: np.ndarray, v: np.ndarray, eps: float, right: bool) -> float:
    """``dB/dd`` just above (``right``) or below ``d = 2 eps``: ``(v_b - v_m) / 2``."""
    if not right and eps <= 0:
        return np.inf  # B = -inf below d = 0
    if eps < 0:
        return np.nan
    b, ps, vs = _drain_order(p, v)
    cum = np.cumsum(ps)
    # the margin state: the first whose cumulative mass passes eps (reaches it, from the left)
    beyond = cum > eps if right else cum >= eps
    if not beyond.any():
        return 0.0
    return float((v[b] - vs[np.argmax(beyond)]) / 2.0)


def _by_tie_class(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``q`` summed over classes of (nearly) equal ``v``, in increasing ``v``."""
    order = np.argsort(v, kind="stable")
    vs = v[order]
    gap = TIE_TOL * max(1.0, float(np.abs(vs).max()))
    starts = np.flatnonzero(np.r_[True, np.diff(vs) > gap])
    return np.add.reduceat(np.asarray(q, dtype=float)[order], starts)
