r"""The compiled continuing plan of :class:`~optplan.agents.CountBonus`.

A continuing count-bonus plan (every ``update_every`` steps) is the posterior-mean model's
refresh (mean rewards and their variances, mean transitions, the bonus) and Howard policy
iteration on ``R = mean + beta log(t) bonus``, warm-started from the last policy: in NumPy
some fifty array calls on arrays of a few dozen entries. :func:`_plan` does it in one
compiled call, which the agent's compiled steps make
(:mod:`optplan.agents._count_bonus_steps`). It computes what the NumPy plan
(:meth:`MeanModelAgent.plan <optplan.agents._mean_model.MeanModelAgent>`, for the cases it
does not cover) computes:

- the reward posterior of :func:`optplan.posteriors.gaussian_mean_posterior` (flat prior:
  ``sum / max(n, 1)`` and ``sd^2 / max(n, 1)``; a proper prior: ``precision = 1 / prior_var +
  n / sd^2``, mean ``sum / sd^2 / precision``; a noise sd of 0 with a proper prior plans in
  NumPy);
- the Dirichlet mean ``alpha / sum(alpha)`` (known transitions: the agent's, unchanged);
- the bonus ``sd / sqrt(max(n, 1))`` (0 where inadmissible) and ``R = mean + scale bonus``;
- policy iteration: :func:`optplan.agents._psrl_kernels._policy_iteration` (the start policy of
  :func:`optplan.dp.policy_iteration`: the last one when warm and admissible, else greedy
  in ``R``).

``tests/test_mean_model_compiled.py`` compares the compiled plan with the NumPy one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _jit
from ..fast import _agent_kernels as _ak
from ..fast._agent_kernels import _pw_sum
from . import _psrl_kernels as K

__all__ = ["Model", "new_model", "applies"]


_JIT = _jit.Jit(
    "the compiled count-bonus plan",
    uses=(K._JIT, _ak._JIT),
    cache=True,
    nogil=True,
    error_model="numpy",
)


# inlined into the compiled step that plans: its tuples of arrays are not built at each
# plan, and numba compiles one level less
@_JIT(inline="always")
def _plan(post, known, mask, scale, discount, policy, warm, model, w,
          max_iter):  # fmt: skip  # pragma: no cover - compiled by numba
    """Refresh ``model = (mean, var, P, bonus, R, q, values)``: ``mean``, ``var``, ``P``
    (unless ``known``) and ``bonus`` from the posterior ``post = (counts, sums, next_counts,
    tprior, sd, prior_var, improper)``, ``R = mean + scale bonus``, then policy iteration
    from ``policy`` (updated in place) with the scratch ``w``
    (:class:`optplan.agents._psrl_kernels.Scratch`). Returns ``(status, iterations, classes,
    gain)``."""
    counts, sums, next_counts, tprior, sd, prior_var, improper = post
    mean, var, P, bonus, R, q, values = model
    row = w.row
    S, A = counts.shape
    for s in range(S):
        for a in range(A):
            n = counts[s, a]
            sig = sd[s, a]
            if improper:
                m = n if n > 1.0 else 1.0
                if math.isnan(n):
                    m = n
                mean[s, a] = sums[s, a] / m
                var[s, a] = (sig * sig) / m
            else:
                sd2 = sig * sig
                precision = 1.0 / prior_var + n / sd2
                mean[s, a] = sums[s, a] / sd2 / precision
                var[s, a] = 1.0 / precision
            if not known:
                for k in range(S):
                    row[k] = next_counts[s, a, k] + tprior
                total = _pw_sum(row, 0, S)
                for k in range(S):
                    P[s, a, k] = row[k] / total
            if mask[s, a]:
                c = n if n > 1.0 else 1.0
                if math.isnan(n):
                    c = n
                bonus[s, a] = sig / math.sqrt(c)
            else:
                bonus[s, a] = 0.0
            R[s, a] = mean[s, a] + scale * bonus[s, a]
    K._start_policy(R, mask, policy, warm)
    return K._policy_iteration(P, R, mask, discount, False, policy, q, values, w, max_iter)


class Model(NamedTuple):
    """The posterior-mean model a plan refreshes (``mean``, ``var``, ``P``, ``bonus``) and its
    ``R``, ``q`` and values."""

    mean: np.ndarray
    var: np.ndarray
    P: np.ndarray
    bonus: np.ndarray
    R: np.ndarray
    q: np.ndarray
    values: np.ndarray


def new_model(agent, bonus: np.ndarray) -> Model:
    """The agent's own ``mean``, ``var`` and ``P`` (known transitions are read-only on the
    agent: a copy), ``bonus``, and zeroed ``R``, ``q``, values."""
    S, A = agent.n_states, agent.n_actions
    P = np.array(agent._P, dtype=np.float64) if agent.known else agent.P
    return Model(agent.mean, agent.var, P, bonus, np.zeros((S, A)), np.zeros((S, A)),
                 np.zeros(S))  # fmt: skip


def applies(agent) -> bool:
    """Whether the agent's continuing plans can be compiled: a continuing agent of fewer than
    :data:`optplan.agents._psrl_kernels.MAX_STATES` states, Dirichlet (or known) transitions,
    no exact (sd 0) rewards under a proper prior."""
    post = agent.posterior
    if not (agent.n_layers is None and agent.n_states < K.MAX_STATES):
        return False
    if post.deterministic:
        return False
    return post.improper or bool(np.all(np.asarray(agent._sd) > 0))


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()
