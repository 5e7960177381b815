r"""The compiled episodes of the episodic posterior agents (optional: needs ``numba``).

K-learning and the episodic PSRL plan once per episode (:meth:`plan`, at the episode's start)
and in between act from that plan and count what they see. An *episode* here is those steps:
this module plays one in a single call (the agent's action, the environment's step, the
posterior's update, the record) and hands back to Python, which makes the next plan with the
agent's own code (:mod:`optplan.experiments.episodic_compiled`). The plans are the generic
loop's by construction; the steps give the same bits because each is the same operations on
the same generators, in the same order:

- K-learning's Boltzmann action (:meth:`optplan.agents.KLearning.select_action`): one
  ``Generator.random()`` of the agent's generator ``u``, then ``searchsorted(cdf, u cdf[-1],
  side="right")`` on the row of the plan's cumulative policy, capped at ``A - 1``. The agent
  draws nothing else within an episode (its plan draws nothing), so the episode's ``u`` are
  drawn before it by one ``Generator.random(n)``, the same numbers as ``n`` calls of
  ``random()``; PSRL's action is its policy's, without a draw (the episodic count-bonus
  agent's too);
- the UBE's Thompson action (:func:`optplan.agents.base.thompson_action`): the forced action
  of a state with one admissible action, the greedy one at ``zeta = 0``, else ``A``
  ``standard_normal()`` of the agent's generator (NumPy's ``standard_normal(A)``) and the
  first maximum of ``q + zeta eps sqrt(u)``;
- DeepSea's step (:meth:`optplan.envs.DeepSea.step`): the expected reward, then a standard
  normal (times the noise sd) where the variant puts noise, then, for a "right" of the windy
  version, one uniform against ``1 / size``;
- a finite-horizon :class:`~optplan.envs.TabularEnv`'s step: one uniform and the binary search
  of ``searchsorted(cdf, u, side="right")`` in the transition row, then a standard normal
  times ``reward_noise`` when it is positive;
- the posterior's update (:meth:`optplan.posteriors.LayeredPosterior.update`): the same float
  additions; a next state contradicting the deterministic prior stops the episode before
  that update (:data:`CONTRADICTED`), so that Python makes the update and raises its error.

numba implements ``Generator.random`` and ``standard_normal`` with NumPy's algorithms on the
same bit generator (:func:`optplan.experiments._segment_kernels.self_check` verifies it).
The environment's ``reset()`` between two episodes (one uniform, searched in the start
distribution's cumulative sums: DeepSea's start is fixed, and it still draws) is the first
thing of the next episode's call.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..agents import _layered_kernels as _PLANS
from ..agents._layered_kernels import _psrl
from ._segment_kernels import _JIT as _SEGMENTS
from ._segment_kernels import _search_right

__all__ = ["AVAILABLE", "BOLTZMANN", "POLICY", "THOMPSON", "DEEPSEA", "TABULAR", "DONE",
           "INADMISSIBLE", "CONTRADICTED", "episode", "psrl_episode", "policy_run"]  # fmt: skip

#: numba is installed (the ``jit`` extra).
AVAILABLE = _jit.AVAILABLE

#: How the agent acts: K-learning's Boltzmann draw from a cumulative policy; a deterministic
#: policy (PSRL, the episodic count-bonus agent); the UBE's Thompson action.
BOLTZMANN, POLICY, THOMPSON = 0, 1, 2
#: The environment's step: DeepSea's; a finite-horizon TabularEnv's.
DEEPSEA, TABULAR = 0, 1
#: Episode outcomes: the steps asked for were played; the agent chose an action the
#: environment does not admit (the environment raises); a next state contradicts the
#: deterministic transition prior (the posterior raises).
DONE, INADMISSIBLE, CONTRADICTED = 0, 1, 2

_JIT = _jit.Jit(
    "the compiled episodes of the episodic agents", uses=(_SEGMENTS, _PLANS._JIT), cache=True,
    error_model="numpy",
)  # fmt: skip


@_JIT
def _episode(act, n, state, reset, initial_cdf, cdf, policy, uniforms, env_kind, env_rng, R,
             env_cdf, mask, noise, goals, mapping, noise_mask, windy, size, counts, reward_sums,
             next_counts, deterministic_prior, states, actions, rewards, layers, offset,
             agent_rng, forced, qv, sd, zeta, eps):  # fmt: skip  # pragma: no cover - compiled
    """The first ``n`` steps of an episode from ``state`` at layer 0, each recorded at
    ``offset + i``; ``uniforms``: the agent's draws of the episode (Boltzmann actions).
    ``reset``: the environment's ``reset()`` first (one uniform, the start state searched in
    ``initial_cdf``), in place of ``state``.
    Returns ``(status, steps played, state, reached the goal, action, next
    state)``; the last two name the step that stopped the episode (``INADMISSIBLE``,
    ``CONTRADICTED``)."""
    L = counts.shape[0]
    A = counts.shape[2]
    S = counts.shape[1]
    reached = False
    x = state
    if reset:
        x = _search_right(initial_cdf, env_rng.random())
    for i in range(n):
        l = i
        if act == BOLTZMANN:
            row = cdf[l, x]
            a = _search_right(row, uniforms[i] * row[A - 1])
            if a > A - 1:
                a = A - 1
        elif act == THOMPSON:  # optplan.agents.base.thompson_action
            a = forced[l, x]
            if a < 0:
                a = policy[l, x]
                if zeta != 0.0:
                    for b in range(A):
                        eps[b] = agent_rng.standard_normal()
                    a = -1
                    top = 0.0
                    for b in range(A):
                        val = qv[l, x, b] + zeta * eps[b] * sd[l, x, b]
                        if a >= 0 and math.isnan(top):
                            continue
                        if a < 0 or math.isnan(val) or val > top:
                            a, top = b, val
        else:
            a = policy[l, x]
        if env_kind == DEEPSEA:
            right = a == mapping[l, x]
            if right and x == size - 1:
                reached = True
            r = R[l, x, a]
            if noise > 0.0 and noise_mask[l, x]:
                r = r + noise * env_rng.standard_normal()
            y = x
            if right:
                if not windy or env_rng.random() > 1.0 / size:
                    y = min(x + 1, size - 1)
            else:
                y = max(x - 1, 0)
        else:
            if not mask[l, x, a]:
                return INADMISSIBLE, i, x, reached, a, -1
            expected = R[l, x, a]
            y = _search_right(env_cdf[l, x, a], env_rng.random())
            if noise > 0.0:
                r = expected + noise * env_rng.standard_normal()
            else:
                r = expected
            if goals[y]:
                reached = True
        recorded = l + 1 < L
        if recorded and deterministic_prior:
            seen = 0.0
            for t in range(S):
                seen += next_counts[l, x, a, t]
            if seen > 0 and next_counts[l, x, a, y] == 0:
                return CONTRADICTED, i, x, reached, a, y
        states[offset + i] = x
        actions[offset + i] = a
        rewards[offset + i] = r
        layers[offset + i] = l
        counts[l, x, a] += 1
        reward_sums[l, x, a] += r
        if recorded:
            next_counts[l, x, a, y] += 1
        x = y
    return DONE, n, x, reached, -1, -1


@_JIT
def _psrl_episode(n, state, reset, initial_cdf, policy, env_kind, env_rng, R, env_cdf, mask,
                  noise, goals, mapping, noise_mask, windy, size, counts, reward_sums,
                  next_counts, states, actions, rewards, layers, offset, agent_rng, mode,
                  inv_prior, sd2, prior_var, mean, var, alpha0, model_R, model_P, values, Q,
                  new_policy):  # fmt: skip  # pragma: no cover - compiled by numba
    """A PSRL episode (:func:`_episode` with the policy's actions, a Dirichlet prior), then,
    when it ended (all ``L`` steps played), the agent's next plan: the compiled plan its
    ``plan()`` calls (:func:`optplan.agents._layered_kernels._psrl`, on the agent's generator
    ``agent_rng``) into ``Q`` and ``new_policy``. Returns :func:`_episode`'s tuple."""
    no_cdf = np.zeros((1, 1, 1))
    no_draws = np.zeros(0)
    no_forced = np.zeros((1, 1), dtype=np.int64)
    out = _episode(
        POLICY, n, state, reset, initial_cdf, no_cdf, policy, no_draws, env_kind, env_rng, R,
        env_cdf, mask, noise, goals, mapping, noise_mask, windy, size, counts, reward_sums,
        next_counts, False, states, actions, rewards, layers, offset, agent_rng, no_forced,
        no_cdf, no_cdf, 0.0, no_draws,
    )  # fmt: skip
    if out[0] == DONE and out[1] == counts.shape[0]:
        _psrl(agent_rng, counts, reward_sums, next_counts, mode, inv_prior, sd2, prior_var,
              mean, var, alpha0, model_R, model_P, values, Q, new_policy)  # fmt: skip
    return out


@_JIT
def _policy_run(steps, state, initial_cdf, policy, env_kind, env_rng, R, env_cdf, mask, noise,
                goals, mapping, noise_mask, windy, size, counts, reward_sums, next_counts,
                states, actions, rewards, layers):  # fmt: skip  # pragma: no cover - compiled
    """``steps`` steps of the deterministic layered ``policy`` from ``state``, episode after
    episode, as successive :func:`_episode` calls (``POLICY``, no prior test) would play them:
    each episode after the first starts with the environment's reset. Returns ``(status,
    steps played, steps of the last episode, state)``; a status other than ``DONE`` stops the
    run at that step."""
    L = counts.shape[0]
    no_cdf = np.zeros((1, 1, 1))
    no_draws = np.zeros(0)
    no_forced = np.zeros((1, 1), dtype=np.int64)
    t = 0
    played = 0
    reset = False
    while t < steps:
        n = min(L, steps - t)
        status, played, state, _, _, _ = _episode(
            POLICY, n, state, reset, initial_cdf, no_cdf, policy, no_draws, env_kind, env_rng,
            R, env_cdf, mask, noise, goals, mapping, noise_mask, windy, size, counts,
            reward_sums, next_counts, False, states, actions, rewards, layers, t, env_rng,
            no_forced, no_cdf, no_cdf, 0.0, no_draws,
        )  # fmt: skip
        t += played
        if status != DONE:
            return status, t, played, state
        reset = played == L
    return DONE, t, played, state


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


def episode(*args):
    """:func:`_episode`, compiled."""
    return _compiled()["_episode"](*args)


def psrl_episode(*args):
    """:func:`_psrl_episode`, compiled."""
    return _compiled()["_psrl_episode"](*args)


def policy_run(*args):
    """:func:`_policy_run`, compiled."""
    return _compiled()["_policy_run"](*args)
