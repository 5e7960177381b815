"""The KL-minimization rate of MDP-DMED (accelerating-ucb-indices-mdp §3.2, §4.2, Thms 3-4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..result import PlanResult
from ._index import IndexProblem, single_instance
from .kl_ball import index_compare, kl_divergence, simplex_residual


@dataclass(frozen=True, eq=False)
class KLInfRate(IndexProblem):
    r"""``D(p, v, rho) = min { KL(p || q) : q in the simplex, q . v >= rho }``.

    ``x = q*``; ``multiplier`` = the multiplier of ``q . v >= rho``, ``dD/drho``. Edge cases
    (Theorem 3): ``rho <= p . v`` gives 0; ``rho > max v``, or ``rho = max v`` with ``v`` not
    constant, gives ``+inf`` with status ``infeasible``. MDP-DMED's discrepancies use
    ``ln t / D - T_x^a``.

    Parameters
    ----------
    p, v : array_like, shape (S,)
        As for every :class:`~optplan.problems._index.IndexProblem`.
    target : float
        The value ``rho`` that ``q . v`` must reach.
    """

    target: float
    stem = "kl_inf"
    sqrt_tol_quantities = frozenset({"x", "multiplier"})
    #: ``q*`` is fixed only up to near-ties of ``v`` (``v = [0, 1, 1 - 1e-12]``): it passes
    #: when ``x_certificate`` proves it optimal.
    certified_by = {"x": ("x_certificate",)}

    def __post_init__(self):
        single_instance(self, "target", "kl_inf_rate")

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        # with v constant on the support and the target at p.v, q = p is the only feasible
        # point with finite divergence and any multiplier >= 0 satisfies the KKT conditions
        support_v = self.v[self.p > 0]
        degenerate = np.ptp(support_v) == 0 and self.target == self.p @ self.v
        out = index_compare(self.p, self.v, a, b, multiplier_unique=not degenerate)
        if a.x is not None:  # a's q* meets the target and attains a's value
            out["x_certificate"] = (
                max(self.target - a.x @ self.v, 0.0)
                + abs(kl_divergence(self.p, a.x) - a.value)
                + simplex_residual(a.x),
                abs(a.value) + abs(self.target),
            )
            # stationarity in q: p_x / q_x + lam v_x = kappa on the support
            m = self.p > 0
            if np.isfinite(a.multiplier) and (a.x[m] > 0).all():
                kappa = self.p[m] / a.x[m] + a.multiplier * self.v[m]
                out["multiplier_certificate"] = (float(np.ptp(kappa)), float(np.abs(kappa).max()))
        return out
