r"""The compiled run of the RAVI-UCB agents (:class:`~optplan.agents.ravi.RAVIUCB`,
:class:`~optplan.agents.ravi.RAVIUCBLinear`) under discounted resets, with the generic loop's
results **exactly**.

RAVI-UCB plans once per epoch (one regularized optimistic step, when the environment ends an
episode) and in between samples ``a ~ pi_k`` and records each transition. The engine plays
an epoch's steps in one compiled call and makes every plan with the agent's own Python code
(``agent._new_epoch()``), so the plans are the generic loop's by construction; each step is
the same operations on the same generators:

- the action: ``Generator.random`` on the agent's generator times the row's total, the binary
  search of ``searchsorted(cdf, u, side="right")`` and, when that rounds past the last action,
  the last action with mass (:meth:`RAVIUCB.select_action <optplan.agents.ravi.RAVIUCB>`);
- the environment: :class:`~optplan.envs.DiscountedResets` over a
  :class:`~optplan.envs.TabularEnv` (:mod:`._segment_kernels`' transition and reward on the
  wrapped environment's generator), then the reset coin ``random() >= gamma`` on the
  wrapper's generator; an epoch's first state is the wrapped environment's reset draw
  (``searchsorted`` of its initial distribution's cumulative sums);
- the record of a transition: the tabular agent's counts (the same float additions), or the
  linear agent's Sherman-Morrison update of ``Lambda^{-1}`` (``Lambda^{-1} x`` and ``x^T u``
  by numpy's own ``cblas_dgemv`` / ``cblas_ddot``, bound as
  :mod:`optplan.agents._mean_model_kernels` binds them, with the arguments ``@`` passes them:
  ``x = phi_k[x_t, a_t]`` keeps the stride of ``phi_k``'s last axis, einsum's layout, as
  the BLAS increment, since OpenBLAS rounds a strided dot product otherwise than a unit-stride
  one; the division, the outer product and the subtraction entry by entry, as NumPy's
  element-wise loops do them), ``Lambda += x x^T`` and ``b += x V_k(x')``.

Runs counted in episodes are covered (an epoch is an episode: ``episodes``,
``on_episode_end`` and ``stop_when_solved`` behave as in the generic loop; the environments
covered have no goals, so ``stop_when_solved`` never stops a run). The agent's policies are
always recorded (one per epoch that played a step, as the generic loop's ``_track_policy``
records them); scoring reads them only for the discounted criterion, the one under which the
generic loop tracks a policy agent, so the Trace is the same either way. The oracle run of
:attr:`Trace.draft_regret` is compiled too (same draws, resets included).

``tests/test_ravi_exact.py`` compares it with the generic loop.
"""

from __future__ import annotations

import time

import numpy as np

from .. import _jit
from .._checks import OptplanError
from ..agents.ravi import RAVIUCB, RAVIUCBLinear, linear_observe
from ..envs import DiscountedResets
from . import _segment_kernels as SK
from ._engine_env import _arrays, _env_reason
from ._segment_kernels import _reward, _search_right

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "EPISODES", "AGENT_CLASSES"]

#: :func:`compiled_loop` takes ``run``'s ``episodes``, ``stop_when_solved`` and
#: ``on_episode_end``.
EPISODES = True
#: The agent classes this engine covers (exact types).
AGENT_CLASSES = (RAVIUCB, RAVIUCBLinear)
#: Steps a run counted in episodes may take (the generic loop's bound).
MAX_STEPS = 10**7

#: Outcomes of :func:`_epoch`: the steps asked for were played; the agent chose an action the
#: environment does not admit; the environment ended the episode (the epoch) at the last step.
DONE, INADMISSIBLE, EPOCH = 0, 1, 2

_JIT = _jit.Jit(
    "the compiled RAVI-UCB run",
    uses=(SK._JIT,),
    cache=True,
    error_model="numpy",
)


@_JIT
def _epoch(n, state, fresh, linear, pcdf, policy, agent_rng, true_mask, cdf, initial, rmean,
           rsd, env_rng, coin_rng, discount, phi, values, inv, lam, b, u, w, N, N_next,
           reward_sums, states, actions, rewards, layers, policy_index, index, offset,
           layer):  # fmt: skip  # pragma: no cover - compiled by numba
    """Up to ``n`` steps of the current epoch from ``state`` (``fresh``: from the wrapped
    environment's reset draw instead), recorded at ``offset + i``; stops after the step whose
    reset coin ends the episode. Returns ``(status, steps played, state, action, layer)``."""
    A = pcdf.shape[1]
    if fresh:
        state = _search_right(initial, env_rng.random())
        layer = 0
    for i in range(n):
        x = state
        row = pcdf[x]
        a = _search_right(row, agent_rng.random() * row[A - 1])
        if a >= A:  # u * total rounded up to total: the last action with mass
            a = A - 1
            while a > 0 and not policy[x, a] > 0.0:
                a -= 1
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a, layer
        y = _search_right(cdf[x, a], env_rng.random())
        r = _reward(rmean, rsd, x, a, y, env_rng)
        reset = coin_rng.random() >= discount
        at = offset + i
        states[at] = x
        actions[at] = a
        rewards[at] = r
        layers[at] = layer
        policy_index[at] = index
        if linear:
            linear_observe(inv, lam, b, phi[x, a], values[y], u, w)
        else:
            N[x, a] += 1.0
            N_next[x, a, y] += 1.0
            reward_sums[x, a] += r
        state = y
        layer += 1
        if reset:
            return EPOCH, i + 1, state, a, layer
    return DONE, n, state, -1, layer


@_JIT
def _oracle(n, state, policy, cdf, initial, rmean, rsd, env_rng, coin_rng, discount,
            rewards):  # fmt: skip  # pragma: no cover - compiled by numba
    """:func:`optplan.experiments.run.oracle_run` under discounted resets."""
    for i in range(n):
        a = policy[state]
        y = _search_right(cdf[state, a], env_rng.random())
        rewards[i] = _reward(rmean, rsd, state, a, y, env_rng)
        if coin_rng.random() >= discount:
            state = _search_right(initial, env_rng.random())
        else:
            state = y
    return state


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


def _resets_reason(env) -> str | None:
    """Why the environment is not one this engine plays, or ``None``."""
    if type(env) is not DiscountedResets:
        return (
            f"the environment is a {type(env).__name__}, not DiscountedResets over a TabularEnv "
            "(the RAVI-UCB engine plays discounted resets)"
        )
    return _env_reason(env.env)


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    cls = type(agent)
    if cls not in AGENT_CLASSES:
        names = ", ".join(c.__name__ for c in AGENT_CLASSES)
        return f"{cls.__name__} is not one of {names} (subclasses take the generic loop)"
    reason = _resets_reason(env)
    if reason is not None:
        return reason
    if not SK.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not SK.self_check():
        return "numba's random draws differ from numpy's on this installation"
    return None


def _grown(arrays: list, size: int) -> list:
    out = []
    for x in arrays:
        y = np.empty(size, dtype=x.dtype)
        y[: x.size] = x
        out.append(y)
    return out


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int | None, record, bar=None, *,
                  episodes=None, stop_when_solved=False, on_episode_end=None):  # fmt: skip
    """Fill ``record`` (a :class:`~optplan.experiments.trace.Record`) as the generic loop
    does, for ``steps`` steps or ``episodes`` episodes; the caller has checked
    :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    inner = env.env
    cdf, true_mask, rmean, rsd = _arrays(inner)
    initial = np.array(inner._initial_cdf, dtype=float, order="C", copy=True)
    linear = type(agent) is RAVIUCBLinear
    if linear:
        d = agent.dim
        N, N_next, sums = np.empty((0, 0)), np.empty((0, 0, 0)), np.empty((0, 0))
        inv, lam, b = agent.Lambda_inv, agent.Lambda, agent.b
        for name, x in (("Lambda_inv", inv), ("Lambda", lam), ("b", b)):
            if not (x.flags.c_contiguous and x.dtype == np.float64):  # pragma: no cover
                raise RuntimeError(f"the agent's {name} is not a C-contiguous float64 array")
    else:
        d = 1
        N, N_next, sums = agent.N, agent.N_next, agent.reward_sums
        inv, lam, b = np.zeros((1, 1)), np.zeros((1, 1)), np.zeros(1)
    u, w = np.empty(d), np.empty(d)
    # a strided blank (phi's own layout is einsum's, seldom C): one compiled signature
    blank_phi, blank_values = np.zeros((1, 1, 2 * d))[:, :, ::2], np.zeros(1)
    limit = steps if steps is not None else MAX_STEPS
    size = limit if steps is not None else min(4096, limit)
    bufs = [
        np.empty(size, dtype=np.int64),  # states
        np.empty(size, dtype=np.int64),  # actions
        np.empty(size),  # rewards
        np.empty(size, dtype=np.int64),  # layers
        np.empty(size, dtype=np.int64),  # policy index
    ]
    fn = _compiled()["_epoch"]
    coin_rng, env_rng = env.np_random, inner.np_random
    discount = float(env.discount)
    done, layer, fresh, stopped, status, action = 0, 0, False, False, DONE, -1
    version = object()  # equal to no version
    while done < limit:
        if done == bufs[0].size:
            bufs = _grown(bufs, min(2 * done, limit))
        if agent.policy_version != version:
            version = agent.policy_version
            record.policies.append(np.array(agent.current_policy(), dtype=float))
        phi = agent.phi if linear else blank_phi
        values = agent.values if linear else blank_values
        status, played, state, action, layer = fn(
            bufs[0].size - done, int(state), fresh, linear, agent._cdf, agent.policy, agent.rng,
            true_mask, cdf, initial, rmean, rsd, env_rng, coin_rng, discount, phi,
            np.ascontiguousarray(values), inv, lam, b, u, w, N, N_next, sums, *bufs,
            len(record.policies) - 1, done, layer,
        )  # fmt: skip
        fresh = False
        done += played
        agent.t += played
        if status == INADMISSIBLE:
            break
        if status == EPOCH:
            agent._new_epoch()
            record.episode_ends.append(done)
            record.successes.append(False)
            n_done = len(record.episode_ends)
            if bar is not None and episodes is not None:
                bar.update(1)
            if on_episode_end is not None:
                on_episode_end(n_done, agent)
            if episodes is not None and n_done >= episodes:
                stopped = True
                break
            fresh = True
        if bar is not None and steps is not None and done - bar.n >= 1024:
            bar.update(done - bar.n)
    if fresh:  # the generic loop resets after an episode's last step
        state, _ = env.reset()
    else:
        inner._state, inner._t, inner._done = int(state), int(layer), False
    if status == INADMISSIBLE:
        raise OptplanError(f"action {int(action)} is not admissible in state {int(state)}")
    if episodes is not None and not stopped:
        raise RuntimeError(
            f"only {len(record.episode_ends)} of {episodes} episodes ended within {limit} steps"
        )
    states, actions, rewards, layers, index = (x[:done] for x in bufs)
    record.states, record.actions, record.rewards = states, actions, rewards
    record.layers, record.policy_index = layers, index
    record.wall_time = time.perf_counter() - start
    if bar is not None and steps is not None:
        bar.update(done - bar.n)
    return record


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """:func:`~optplan.experiments.run.oracle_run` compiled, for the environments
    :func:`compiled_reason` accepts (``None`` for others: the caller runs the generic one)."""
    if _resets_reason(env) is not None or oracle.criterion == "finite_horizon":
        return None
    if not (SK.AVAILABLE and SK.self_check()):
        return None
    policy = np.ascontiguousarray(oracle.result.policy, dtype=np.int64)
    state, _ = env.reset(seed=env_seed)
    inner = env.env
    cdf, _, rmean, rsd = _arrays(inner)
    initial = np.array(inner._initial_cdf, dtype=float, order="C", copy=True)
    rewards = np.empty(steps)
    fn = _compiled()["_oracle"]
    fn(steps, int(state), policy, cdf, initial, rmean, rsd, inner.np_random, env.np_random,
       float(env.discount), rewards)  # fmt: skip
    return rewards
