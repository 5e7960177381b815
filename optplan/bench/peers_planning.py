"""pymdptoolbox as a peer of ``optplan bench planning --peers``.

pymdptoolbox (S. Cordwell et al., https://github.com/sawcordwell/pymdptoolbox, the Python
port of INRA's MDPtoolbox) is run on the same instances as optplan's fast path, in the
same run, interleaved instance by instance:

- average reward: ``mdptoolbox.mdp.RelativeValueIteration`` with ``epsilon`` =
  :data:`RVI_EPSILON`. It stops when ``span(V_{k+1} - V_k) < epsilon`` and reports
  ``gain + min(V_{k+1} - V_k)``; the optimal gain lies between that minimum and the
  maximum, so its error is below ``epsilon``. Its default ``epsilon = 0.01`` stops after a
  few iterations with the gain far off optplan's: not a comparison of equals.
- discounted: ``mdptoolbox.mdp.PolicyIteration`` (exact evaluation by a linear solve, the
  default ``eval_type``), at the suite's discount. pymdptoolbox's policy iteration is for
  discounted models only (its evaluation solves ``(I - gamma P) V = R``, singular at
  ``gamma = 1``), so it has no average-reward row.

Only ``run()`` is timed: building the object (pymdptoolbox's input checks and its
conversion of ``P`` to per-action matrices) is not. pymdptoolbox's stochasticity check
wants row sums within 10 ulps of 1, which Dirichlet rows of 2,000 doubles can miss; the
check is then skipped (``TabularMDP`` has checked the same rows to 1e-9). Agreement is
``|gain_peer - gain_fast|`` (average) and ``max_s |V_peer - V_fast|`` (discounted).
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import MissingDependency

__all__ = ["RVI_EPSILON", "PEERS", "require", "run_peer"]

#: pymdptoolbox's ``RelativeValueIteration(epsilon=)``: the gain it reports is within this of
#: the optimal gain, far below the 1e-9 agreement the planning rows check.
RVI_EPSILON = 1e-12

#: ``criterion -> peer names`` (pymdptoolbox classes, see the module docstring).
PEERS: dict[str, tuple[str, ...]] = {"average": ("RVI",), "discounted": ("PI",)}


def require():
    """``mdptoolbox.mdp``, or :class:`MissingDependency` naming the ``bench`` extra."""
    try:
        import mdptoolbox.error
        import mdptoolbox.mdp
        import mdptoolbox.util
    except ImportError:
        raise MissingDependency(
            'optplan bench planning --peers needs pymdptoolbox: pip install "optplan[bench]"'
        ) from None
    return mdptoolbox


def _build(mdptoolbox, cls, *args):
    try:
        return cls(*args)
    except mdptoolbox.error.StochasticError:
        # rows off 1 by more than pymdptoolbox's 10 ulps (TabularMDP checked them to 1e-9)
        real = mdptoolbox.util.check
        mdptoolbox.util.check = lambda *a, **k: None
        try:
            return cls(*args)
        finally:
            mdptoolbox.util.check = real


def run_peer(name: str, mdp, fast) -> tuple[float, float]:
    """``(wall seconds of run(), agreement with the fast result)`` for peer ``name`` on the
    model ``mdp`` that optplan's fast path solved to ``fast`` (a ``PlanResult``)."""
    mdptoolbox = require()
    if name not in ("RVI", "PI"):
        raise ValueError(f"peer must be one of ('RVI', 'PI'), got {name!r}")
    if not mdp.action_mask.all():
        raise ValueError("pymdptoolbox has no admissible-action sets: the model masks actions")
    P = np.ascontiguousarray(np.transpose(mdp.dense_P(), (1, 0, 2)))  # pymdptoolbox: P[a, s, s']
    R = np.array(mdp.R)
    if name == "RVI":
        peer = _build(mdptoolbox, mdptoolbox.mdp.RelativeValueIteration, P, R, RVI_EPSILON)
    else:
        peer = _build(mdptoolbox, mdptoolbox.mdp.PolicyIteration, P, R, mdp.discount)
    start = time.perf_counter()
    peer.run()
    seconds = time.perf_counter() - start
    if name == "RVI":
        return seconds, abs(float(peer.average_reward) - float(fast.gain))
    return seconds, float(np.abs(np.asarray(peer.V) - np.asarray(fast.values)).max())
