r"""The compiled steps between two plans of the planning agents (optional: needs ``numba``).

The continuing posterior agents (PSRL, UBE, moment
matching) plan every ``update_every`` steps and in between follow a fixed policy, or Thompson
noise around fixed action values. A *segment* is the run of steps between two plans: these
kernels play a segment in one call (action, environment step, the agent's per-step update) and
hand back to Python, which makes the next plan with the agent's own code. The plans are the
generic loop's by construction; the segments give the same bits because each step is the same
operations on the same generators:

- the next state: ``Generator.random`` on the environment's generator and the binary search
  of ``searchsorted(cdf, u, side="right")``, as :meth:`optplan.envs.TabularEnv.step`;
- the reward: ``mean[s, a, s'] + sd[s, a, s'] * z``, ``z = Generator.standard_normal()`` drawn
  after the uniform, and no draw when the sd is 0 (:class:`~optplan.envs.TabularEnv`'s
  ``R[s, a] + reward_noise z`` and :class:`~optplan.envs.transition_rewards.TransitionRewardEnv`'s
  per-transition law are both of this form); numba implements both draws with NumPy's
  algorithms on the same bit generator, so the streams and the states left behind are
  NumPy's (:func:`self_check` verifies it once per process; the engine is not used where it
  fails);
- Thompson actions (:func:`optplan.agents.base.thompson_action`): ``A`` standard normals from
  the agent's generator, ``argmax(q + (zeta eps) sd)`` with NumPy's ``argmax`` rule (first
  maximum; the first NaN if any);
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..envs.kernels import search_right as _search_right  # noqa: F401 (the engines import it)

__all__ = ["AVAILABLE", "POLICY", "THOMPSON", "DONE", "INADMISSIBLE", "PLAN", "follow",
           "oracle", "self_check"]  # fmt: skip

#: numba is installed (the ``jit`` extra).
AVAILABLE = _jit.AVAILABLE

#: How :func:`follow` picks actions: the policy's; Thompson noise around ``q``.
POLICY, THOMPSON = 0, 1
#: Segment outcomes: the steps asked for were played; the agent chose an action the
#: environment does not admit (the environment raises); the agent plans next.
DONE, INADMISSIBLE, PLAN = 0, 1, 2

_JIT = _jit.Jit("the compiled planning-agent segments", cache=True, error_model="numpy")


@_JIT(inline="always")
def _reward(mean, sd, x, a, y, rng):  # pragma: no cover - compiled by numba
    """The reward of ``(x, a) -> y``: a normal draw only when its sd is positive."""
    s = sd[x, a, y]
    if s > 0.0:
        return mean[x, a, y] + s * rng.standard_normal()
    return mean[x, a, y]


@_JIT
def _thompson(x, forced, policy, q, zeta, sd, rng):  # pragma: no cover - compiled by numba
    """:func:`optplan.agents.base.thompson_action` in state ``x``."""
    if forced[x] >= 0:
        return forced[x]
    if zeta == 0.0:
        return policy[x]
    A = q.shape[1]
    best, top = -1, 0.0
    for b in range(A):
        val = q[x, b] + zeta * rng.standard_normal() * sd[x, b]
        if best >= 0 and math.isnan(top):
            continue  # numpy's argmax: the first NaN wins (the draws still happen)
        if best < 0 or math.isnan(val) or val > top:
            best, top = b, val
    return best


@_JIT
def _follow(kind, n, state, policy, forced, q, zeta, sd, true_mask, cdf, mean, rsd, env_rng,
            agent_rng, states, actions, rewards, offset, buf_s, buf_a, buf_r, buf_s2,
            k0):  # fmt: skip  # pragma: no cover - compiled by numba
    """``n`` steps from ``state``; each step recorded at ``offset + i`` and stored in the
    agent's batch buffers at ``k0 + i``. Returns ``(status, steps played, state, action)``."""
    for i in range(n):
        x = state
        if kind == POLICY:
            a = policy[x]
        else:
            a = _thompson(x, forced, policy, q, zeta, sd, agent_rng)
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a
        y = _search_right(cdf[x, a], env_rng.random())
        r = _reward(mean, rsd, x, a, y, env_rng)
        states[offset + i] = x
        actions[offset + i] = a
        rewards[offset + i] = r
        buf_s[k0 + i] = x
        buf_a[k0 + i] = a
        buf_r[k0 + i] = r
        buf_s2[k0 + i] = y
        state = y
    return DONE, n, state, -1


@_JIT
def _oracle(n, state, policy, cdf, mean, rsd, rng, rewards):  # pragma: no cover - compiled
    """:func:`optplan.experiments.run.oracle_run` on a continuing environment."""
    for i in range(n):
        a = policy[state]
        y = _search_right(cdf[state, a], rng.random())
        rewards[i] = _reward(mean, rsd, state, a, y, rng)
        state = y
    return state


@_JIT
def _draws(rng, out):  # pragma: no cover - compiled by numba
    """Alternate ``random()`` and ``standard_normal()`` into ``out`` (:func:`self_check`)."""
    for i in range(0, out.shape[0] - 1, 2):
        out[i] = rng.random()
        out[i + 1] = rng.standard_normal()


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


_CHECK: list = []


def self_check(n: int = 4096, seed: int = 12345) -> bool:
    """Whether numba's ``Generator.random`` and ``standard_normal`` give NumPy's numbers and
    leave NumPy's state on this installation (checked once per process on ``n`` draws)."""
    if _CHECK:
        return _CHECK[0]
    ref, got = np.random.default_rng(seed), np.random.default_rng(seed)
    want = np.empty(n)
    for i in range(0, n - 1, 2):
        want[i] = ref.random()
        want[i + 1] = ref.standard_normal()
    out = np.empty(n)
    _compiled()["_draws"](got, out)
    same = np.array_equal(out, want) and got.bit_generator.state == ref.bit_generator.state
    _CHECK.append(bool(same))
    return _CHECK[0]


def follow(*args):
    """:func:`_follow`, compiled."""
    return _compiled()["_follow"](*args)


def oracle(steps: int, state: int, policy, cdf, mean, rsd, rng) -> np.ndarray:
    """Rewards of ``policy`` for ``steps`` steps from ``state`` (see :func:`_oracle`)."""
    rewards = np.empty(steps)
    _compiled()["_oracle"](steps, int(state), policy, cdf, mean, rsd, rng, rewards)
    return rewards
