r"""Verify your own solver: a user's closed form checked against the CVXPY formulation on
instances hypothesis draws from the hard regions, with shrunk counterexamples.

::

    import optplan as op
    report = op.verify(my_kl_ucb, "kl_ball", n=2000, seed=0)   # .ok, .worst, .counterexamples
    print(report)

**The call.** For optplan's problems ``fn`` receives the problem's inputs positionally and
its answer means (``value``; ``x``; ``multiplier``, ``-`` where none is compared):

- ``kl_ball``: ``fn(p, v, radius)``; ``C = max {q.v : KL(p||q) <= d}``; ``q*`` (S,); ``dC/dd``
- ``kl_inf``: ``fn(p, v, target)``; ``D = min {KL(p||q) : q.v >= rho}``; ``q*``; ``dD/drho``
- ``l1_ball``: ``fn(p, v, radius)``; ``B = max {q.v : ||q - p||_1 <= d}``; ``q*``; ``dB/dd``
  (at a kink any value between the one-sided derivatives)
- ``discounted``: ``fn(P, R, discount[, action_mask=])``; ``mean(V)``; ``V`` (S,); the
  normalized discounted occupancy (S, A) from the uniform start
- ``average_reward``: ``fn(P, R[, action_mask=])``; the gain; the bias (S,), up to a
  constant; the stationary state-action frequencies (S, A)
- ``finite_horizon``: ``fn(P, R[, action_mask=])`` with ``P[l, s, a, s']``; ``mean(V[0])``;
  ``V`` (L, S); -
- ``k_temperature``: ``fn(mean_rewards, mean_transitions, counts, sigma)`` (Eq. 6's bonus
  numerators, the problem's default); the objective of problem (11) at ``tau*``; ``tau*``; -
- ``ube``: ``fn(mean_transitions, policy, local, discount)``; ``sum(u)``; ``u`` (S, A); ``y``
  (S, A), the gamma^2-discounted pair occupancy
- ``moment_matching``: ``fn(alpha, reward_mean, reward_var, policy, discount)``;
  ``sum(sigma~^2)``; ``sigma~^2`` (S, A); ``y`` (S, A)
- ``optimistic``: ``fn(p_hat, r_hat, radius, reward_radius[, discount][, action_mask=])``;
  ``mean(V)`` or the gain; ``V`` (S,) or the bias (S,) up to a constant; -
- ``clipped_optimistic``: ``fn(p_hat, r, bonus, discount[, action_mask=])``; ``mean(V)``;
  ``V`` (S,); -
- ``regret_lower_bound``: ``fn(P, R)`` of an ergodic model, every action admissible;
  ``C(P)``; the contributions ``Delta / K`` (S, A); -

(``optimistic``: ``options={"ball": "l1"|"kl", "criterion": "discounted"|"average"}``; no
``discount`` argument under ``"average"``.) Masks are drawn only when ``fn`` accepts an
``action_mask`` keyword. ``fn`` returns the value, ``(value, x)`` or ``(value, x,
multiplier)``, a dict with those keys, or an object with ``.value`` / ``.x`` /
``.multiplier`` (an optplan ``PlanResult``); what it leaves out is not compared.

**Bring your own problem**: :class:`DeclaredProblem` (a CVXPY formulation and the domains
:class:`Box`, :class:`Nonnegative`, :class:`Simplex` of its parameters).

**In a test suite**: :func:`optplan.testing.assert_agrees` and the strategies of
:mod:`optplan.verification.strategies` (re-exported by :mod:`optplan.testing`).

hypothesis is an optional dependency (the ``[verify]`` extra, included in ``[test]``): it is
imported when a verification runs, never by ``import optplan``.
"""

from __future__ import annotations

from .builtin import BUILTIN, optplan_fast
from .declared import Box, DeclaredProblem, Nonnegative, Simplex
from .engine import verify
from .instance import check_instance, parse_answer
from .outcome import Answer, Outcome, Worst
from .report import Counterexample, VerifyReport

#: The stems :func:`verify` knows.
PROBLEMS = tuple(BUILTIN)

__all__ = [
    "verify",
    "check_instance",
    "parse_answer",
    "optplan_fast",
    "PROBLEMS",
    "DeclaredProblem",
    "Box",
    "Nonnegative",
    "Simplex",
    "VerifyReport",
    "Counterexample",
    "Outcome",
    "Answer",
    "Worst",
]
