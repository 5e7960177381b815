r"""The compiled run of the index agents: :func:`~optplan.experiments.run`'s loop for MDP-UCB,
OLP, MDP-DMED, MDP-PS and IMED-RL in one numba call, with the generic loop's results **exactly**.

:func:`~optplan.experiments.run` (``engine="auto"``, the default) takes this path, a row of
:data:`optplan.experiments.engines.RUN_ENGINES`, when :func:`compiled_reason` finds nothing
against it, and the generic Python loop otherwise;
``engine="python"`` forces the generic loop, ``engine="compiled"`` refuses (``ValueError``
with the reason) what this path does not cover. What it covers:

- the agent is an instance of exactly :class:`~optplan.agents.MDPUCB`, :class:`~optplan.agents.OLP`,
  :class:`~optplan.agents.MDPDMED`, :class:`~optplan.agents.MDPPS` or
  :class:`~optplan.agents.index_agents.IMEDRL` (not a subclass) with
  ``method="fast"``, on fewer than :data:`optplan.dp.ITERATIVE_MIN_STATES` states (where the
  reference factorizes its evaluations);
- the environment is exactly a :class:`~optplan.envs.TabularEnv` (no wrapper, no subclass) over
  a continuing :class:`~optplan.mdp.TabularMDP`, without reward noise, ``max_steps`` or goal
  states, run for ``steps`` (not ``episodes``);
- numba is installed (the ``jit`` extra) and :func:`optplan.fast._agent_kernels.self_check`
  found numba's BLAS/LAPACK calls equal to numpy's.

The loop (:mod:`optplan.fast._agent_kernels`) consumes the environment's and the agent's
generators as the generic loop does and leaves the agent (counts, ``p_hat``, policy, gain,
bias, ``last_indices``, ``last_rates``), the environment (state, generator) and both
generators as the generic loop leaves them. The oracle run of :attr:`Trace.draft_regret` is
compiled too (same draws). Both loops run under :func:`~optplan.experiments.run`'s one BLAS
thread: with several, OpenBLAS's blocked LU may round differently from one call to the next
(seen from about 150 states), and neither loop would be reproducible bit for bit.

3-state example (cowan3), ``optplan bench index-agents``: see docs/benchmarks.md.
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import OptplanError
from ..agents import MDPDMED, MDPPS, MDPUCB, OLP
from ..agents.index_agents import IMEDRL
from ..dp import ITERATIVE_MIN_STATES
from ..envs import TabularEnv
from ..fast import _agent_kernels as K
from ..mdp import TabularMDP

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run"]

_KINDS = {MDPUCB: K.UCB, OLP: K.OLP, MDPDMED: K.DMED, MDPPS: K.PS, IMEDRL: K.IMED}


def _env_reason(env) -> str | None:
    if type(env) is not TabularEnv:
        return (
            f"the environment is a {type(env).__name__}, not a plain TabularEnv (wrappers and "
            "subclasses take the generic loop)"
        )
    if not isinstance(env.mdp, TabularMDP):
        return "the model is not a continuing TabularMDP"
    if env.reward_noise != 0.0:
        return "the environment has reward noise"
    if env.max_steps is not None:
        return "the environment truncates episodes (max_steps)"
    if env.goal_states:
        return "the environment reports goals"
    return None


def _cdf(env) -> np.ndarray:
    """The environment's transition CDFs as a writable C array (a read-only one is another
    numba type: another compile of the loop's helpers)."""
    return np.array(env._cdf, dtype=float, order="C", copy=True)


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    kind = _KINDS.get(type(agent))
    if kind is None:
        return (
            f"{type(agent).__name__} is not one of MDPUCB, OLP, MDPDMED, MDPPS, IMEDRL "
            "(subclasses take the generic loop)"
        )
    if agent.method != "fast":
        return f'method={agent.method!r} (only "fast" is compiled)'
    reason = _env_reason(env)
    if reason is not None:
        return reason
    if episodes is not None:
        return "the run counts episodes (give steps=)"
    if track:
        return "the run tracks the agent's policies"
    if agent.n_states >= ITERATIVE_MIN_STATES:
        return (
            f"{agent.n_states} states: from {ITERATIVE_MIN_STATES} on the reference evaluates "
            "policies by iteration, which is not compiled"
        )
    if not K.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not K.self_check(logs=kind == K.IMED):
        return "numba's BLAS/LAPACK results differ from numpy's on this machine"
    return None


def compiled_loop(agent, env, env_seed: int, agent_rng, steps: int, record, bar=None):
    """Fill ``record`` (a :class:`~optplan.experiments.trace.Record`) with ``steps`` steps of
    the compiled loop; the caller has checked :func:`compiled_reason`."""
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    e = agent.estimator
    good = np.ascontiguousarray(e.good_actions())
    policy = np.array(e.policy, dtype=np.int64)
    mdp = env.mdp
    # fresh writable copies of the read-only inputs: one set of argument types for numba
    # (a read-only array is another type, and another ~20 s compile)
    R, mask, true_mask = (np.array(x, copy=True, order="C") for x in (e.R, e.mask, mdp.action_mask))
    kind = _KINDS[type(agent)]
    # IMED-RL's ln T[x, a]: numpy's logs of every integral count the run can reach
    logs = K.log_table(steps + int(e.Txa.max()) + 2) if kind == K.IMED else None
    out = K.run_index_loop(
        kind, steps, int(state), int(e.t), R.astype(float), mask.astype(bool),
        good, e.T, e.Txa, e.Tx, e.p_hat, policy, np.array(e.v, dtype=float), _cdf(env),
        true_mask.astype(bool), env.np_random, agent.rng, logs,
    )  # fmt: skip
    status, n, t, gain, v, best, action, state, states, actions, u, rates = out
    # leave the agent and the environment as the generic loop leaves them
    e.t, e.policy = int(t), policy
    if n > 0 or status != K.DONE:
        e.gain, e.v = float(gain), v
        agent.last_indices = u
        if isinstance(agent, MDPDMED):
            agent.best_action, agent.last_rates = int(best), rates
        elif isinstance(agent, IMEDRL):
            agent.last_rates = rates
    env._t += n
    if status == K.INADMISSIBLE:
        env._state = int(state)
        raise OptplanError(f"action {int(action)} is not admissible in state {int(state)}")
    env._state = int(state)
    if status == K.PI_MAX_ITER:
        raise RuntimeError(
            "policy iteration on the estimated model: policy iteration did not stop in 100 "
            "iterations"
        )
    states, actions = states[:n], actions[:n]
    record.states = states
    record.actions = actions
    record.rewards = np.asarray(mdp.R, dtype=float)[states, actions]
    record.layers = np.arange(n)
    record.wall_time = time.perf_counter() - start
    if bar is not None:
        bar.update(n - bar.n)
    return record


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """:func:`~optplan.experiments.run.oracle_run` compiled, for the environments
    :func:`compiled_reason` accepts (``None`` for others: the caller runs the generic one)."""
    if _env_reason(env) is not None or oracle.criterion == "finite_horizon":
        return None
    policy = np.ascontiguousarray(oracle.result.policy, dtype=np.int64)
    state, _ = env.reset(seed=env_seed)
    R = np.ascontiguousarray(env.mdp.R, dtype=float)
    return K.oracle_loop(steps, state, policy, R, _cdf(env), env.np_random)
