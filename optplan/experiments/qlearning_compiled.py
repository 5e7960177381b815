r"""The compiled run of the tabular Q-learning baselines, :class:`~optplan.agents.EpsilonGreedyQ`
and :class:`~optplan.agents.SoftQ`, with the generic loop's results **exactly**.

Each step is the agent's action, the environment's step and the agent's update in one compiled
loop, the same operations on the same generators in the generic loop's order:

- epsilon-greedy (:meth:`EpsilonGreedyQ.select_action`): one ``Generator.random()``; below
  ``epsilon``, ``Generator.integers(0, k)`` over the ``k`` admissible actions (what
  ``Generator.choice`` of an array draws), else the greedy action, ties by
  ``Generator.integers(0, m)`` over the ``m`` maximizers;
- soft Q-learning (:meth:`SoftQ.select_action`): ``z = exp((Q - max Q) / tau)`` by NumPy's own
  ``exp`` loop (:func:`optplan.agents._layered_kernels._ufunc`), its pairwise sums, the
  cumulative sum and ``searchsorted(cumsum, u * p.sum())`` with one ``Generator.random()``;
- the update (:meth:`_TabularQ.update`): the same float operations, the greedy sets and
  ``policy_version`` as the agent keeps them;
- the environment's step: DeepSea's or a :class:`~optplan.envs.TabularEnv`'s, as
  :mod:`._episode_kernels` (episodic) and :mod:`._segment_kernels` (continuing) play them.

Episodic runs (the agent's ``n_layers`` equal to the model's horizon, DeepSea or a
finite-horizon model) are played one episode per call, with the generic loop's episode
bookkeeping in between (:func:`.trace.episode_ended`: ``episodes``, ``stop_when_solved``,
``on_episode_end``); continuing runs (no ``n_layers``, a continuing
:class:`~optplan.mdp.TabularMDP`) in chunks of :data:`CHUNK` steps. Declined: subclasses, tracked
runs, other environments, and installations where numba's ``random`` / ``integers`` /
``standard_normal`` or NumPy's ``exp`` loop as called here differ from NumPy's
(:func:`self_check`). ``tests/test_engines_exact_qlearning.py`` compares it with the generic
loop.
"""

from __future__ import annotations

import time

import numpy as np

from .. import _jit
from .._checks import OptplanError
from ..agents import _layered_kernels as LK
from ..agents._layered_kernels import _row_sum, _ufunc
from ..agents.qlearning import EpsilonGreedyQ, SoftQ
from ..mdp import TabularMDP
from . import _episode_kernels as EK
from . import _segment_kernels as SK
from . import episodic_compiled as EC
from . import planning_compiled as PC
from ._segment_kernels import _reward, _search_right
from .trace import episode_ended

__all__ = ["compiled_reason", "compiled_loop", "compiled_oracle_run", "self_check", "EPISODES",
           "CHUNK"]  # fmt: skip

#: :func:`compiled_loop` takes ``episodes``, ``stop_when_solved`` and ``on_episode_end``.
EPISODES = True

#: Steps per compiled call of a continuing run.
CHUNK = 8192

#: The agent kinds.
GREEDY, SOFT = 0, 1

DONE, INADMISSIBLE = 0, 1

_JIT = _jit.Jit(
    "the compiled Q-learning baselines", uses=(LK._JIT, SK._JIT), cache=True, error_model="numpy"
)


@_JIT(inline="always")
def _select(kind, rng, q, mask, row, epsilon, temperature, z, e, c, meta):  # pragma: no cover
    """The agent's action in table row ``row`` (its draws on ``rng``)."""
    A = q.shape[1]
    if kind == GREEDY:
        if rng.random() < epsilon:
            k = 0
            for b in range(A):
                if mask[row, b]:
                    k += 1
            j = rng.integers(0, k)
            for b in range(A):
                if mask[row, b]:
                    if j == 0:
                        return b
                    j -= 1
            return A - 1  # unreachable
        top = q[row, 0]
        for b in range(1, A):
            if q[row, b] > top:
                top = q[row, b]
        m = 0
        first = -1
        for b in range(A):
            if q[row, b] == top:
                if first < 0:
                    first = b
                m += 1
        if m == 1:
            return first
        j = rng.integers(0, m)
        for b in range(A):
            if q[row, b] == top:
                if j == 0:
                    return b
                j -= 1
        return A - 1  # unreachable
    return _boltzmann(q, row, temperature, rng.random(), z, e, c, meta)


@_JIT(inline="always")
def _boltzmann(q, row, temperature, u, z, e, c, meta):  # pragma: no cover - compiled by numba
    """SoftQ's Boltzmann choice in table row ``row`` at the uniform draw ``u`` (NumPy's own
    ``exp`` loop and pairwise sums; ``z``, ``e``, ``c``: work space of ``A`` entries)."""
    A = q.shape[1]
    top = q[row, 0]
    for b in range(1, A):
        if q[row, b] > top:
            top = q[row, b]
    for b in range(A):
        z[b] = (q[row, b] - top) / temperature
    _ufunc(0, z, e, A, meta)
    s = _row_sum(e, 0, A)
    for b in range(A):
        z[b] = e[b] / s  # p
    acc = z[0]
    c[0] = acc
    for b in range(1, A):
        acc = acc + z[b]
        c[b] = acc
    u = u * _row_sum(z, 0, A)
    lo, hi = 0, A  # searchsorted(c, u, side="left")
    while lo < hi:
        mid = (lo + hi) >> 1
        if c[mid] < u:
            lo = mid + 1
        else:
            hi = mid
    return min(lo, A - 1)


@_JIT(inline="always")
def _update(kind, q, counts, best, row, a, r, nxt, terminal, discount, rate):  # pragma: no cover
    """The agent's update of ``(row, a)`` (``nxt``: the next state's row); returns the
    increment of ``policy_version``."""
    A = q.shape[1]
    counts[row, a] += 1
    if terminal:
        target = r
    else:
        top = q[nxt, 0]
        for b in range(1, A):
            if q[nxt, b] > top:
                top = q[nxt, b]
        target = r + discount * top
    lr = 1.0 / counts[row, a] if rate < 0.0 else rate
    q[row, a] += lr * (target - q[row, a])
    if kind == SOFT:
        return 1
    top = q[row, 0]
    for b in range(1, A):
        if q[row, b] > top:
            top = q[row, b]
    changed = False
    for b in range(A):
        if (q[row, b] == top) != best[row, b]:
            changed = True
    if changed:
        for b in range(A):
            best[row, b] = q[row, b] == top
        return 1
    return 0


@_JIT
def _episode(kind, n, state, reset, initial_cdf, env_kind, env_rng, R, env_cdf, mask, noise,
             goals, mapping, noise_mask, windy, size, agent_rng, q, counts, best, agent_mask,
             epsilon, temperature, discount, rate, S, states, actions, rewards, layers, offset,
             scratch, meta):  # fmt: skip  # pragma: no cover - compiled by numba
    """The first ``n`` steps of an episode (layered agent, ``L`` layers), as
    :func:`._episode_kernels._episode`. Returns ``(status, played, state, reached, action,
    policy_version increment)``."""
    L = R.shape[0]
    reached = False
    version = 0
    x = state
    if reset:
        x = _search_right(initial_cdf, env_rng.random())
    z, e, c = scratch[0], scratch[1], scratch[2]
    for i in range(n):
        l = i
        row = l * S + x
        a = _select(kind, agent_rng, q, agent_mask, row, epsilon, temperature, z, e, c, meta)
        if env_kind == EK.DEEPSEA:
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
                return INADMISSIBLE, i, x, reached, a, version
            expected = R[l, x, a]
            y = _search_right(env_cdf[l, x, a], env_rng.random())
            if noise > 0.0:
                r = expected + noise * env_rng.standard_normal()
            else:
                r = expected
            if goals[y]:
                reached = True
        terminal = l + 1 >= L
        version += _update(kind, q, counts, best, row, a, r, row + S - x + y, terminal,
                           discount, rate)  # fmt: skip
        states[offset + i] = x
        actions[offset + i] = a
        rewards[offset + i] = r
        layers[offset + i] = l
        x = y
    return DONE, n, x, reached, -1, version


@_JIT
def _steps(kind, n, state, true_mask, cdf, rmean, rsd, env_rng, agent_rng, q, counts, best,
           agent_mask, epsilon, temperature, discount, rate, states, actions, rewards, offset,
           scratch, meta):  # fmt: skip  # pragma: no cover - compiled by numba
    """``n`` continuing steps from ``state``. Returns ``(status, played, state, action,
    policy_version increment)``."""
    version = 0
    x = state
    z, e, c = scratch[0], scratch[1], scratch[2]
    for i in range(n):
        a = _select(kind, agent_rng, q, agent_mask, x, epsilon, temperature, z, e, c, meta)
        if not true_mask[x, a]:
            return INADMISSIBLE, i, x, a, version
        y = _search_right(cdf[x, a], env_rng.random())
        r = _reward(rmean, rsd, x, a, y, env_rng)
        version += _update(kind, q, counts, best, x, a, r, y, False, discount, rate)
        states[offset + i] = x
        actions[offset + i] = a
        rewards[offset + i] = r
        x = y
    return DONE, n, x, -1, version


@_JIT
def _check_draws(rng, bounds, out):  # pragma: no cover - compiled by numba
    for i in range(bounds.shape[0]):
        out[2 * i] = rng.random()
        out[2 * i + 1] = rng.integers(0, bounds[i])


@_JIT
def _check_soft(q, temperature, us, out, scratch, meta):  # pragma: no cover - compiled by numba
    """SoftQ's choices per row of ``q`` at the draws ``us`` (a generator replaced by ``u``)."""
    z, e, c = scratch[0], scratch[1], scratch[2]
    for row in range(q.shape[0]):
        out[row] = _boltzmann(q, row, temperature, us[row], z, e, c, meta)


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


_CHECK: list = []


def self_check(n: int = 4096, seed: int = 2024) -> bool:
    """Whether numba's ``Generator.random`` and ``integers(0, k)`` give NumPy's numbers and
    leave NumPy's state, and the compiled Boltzmann choice gives :meth:`SoftQ.select_action`'s
    (NumPy's ``exp``, sums and search) on random tables; checked once per process."""
    if _CHECK:
        return _CHECK[0]
    try:
        fns = _compiled()
        gen = np.random.default_rng(seed)
        bounds = gen.integers(1, 12, n).astype(np.int64)
        bounds[::7] = np.int64(1) << np.int64(40)
        ref, got = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
        want = np.empty(2 * n)
        for i, k in enumerate(bounds):
            want[2 * i] = ref.random()
            want[2 * i + 1] = ref.integers(0, k)
        out = np.empty(2 * n)
        fns["_check_draws"](got, bounds, out)
        same = np.array_equal(out, want) and got.bit_generator.state == ref.bit_generator.state
        for A, tau in ((2, 0.05), (3, 0.5), (9, 1e-3), (17, 3.0)):
            q = gen.normal(size=(256, A)) * gen.choice([1e-3, 1.0, 50.0], (256, 1))
            q[gen.random(q.shape) < 0.2] = -np.inf
            q[:, 0] = np.where(np.isinf(q[:, 0]), 0.0, q[:, 0])
            us = gen.random(256)
            agent = SoftQ(1, A, temperature=tau)
            expect = np.empty(256, dtype=np.int64)
            for row in range(256):
                agent.q = q[row : row + 1]
                p = agent.policy(0)
                expect[row] = min(np.searchsorted(np.cumsum(p), us[row] * p.sum()), A - 1)
            res = np.empty(256, dtype=np.int64)
            fns["_check_soft"](q, tau, us, res, np.empty((3, A)), np.empty(5, dtype=np.int64))
            same = same and np.array_equal(res, expect)
    except Exception:  # noqa: BLE001 - a kernel that fails to compile declines the engine
        same = False
    _CHECK.append(bool(same))
    return _CHECK[0]


def _agent_reason(agent) -> str | None:
    if type(agent) not in (EpsilonGreedyQ, SoftQ):
        return (
            f"{type(agent).__name__} is not one of EpsilonGreedyQ, SoftQ (subclasses take the "
            "generic loop)"
        )
    return None


def _episodic(env) -> bool:
    return EC._env_reason(env) is None


def compiled_reason(agent, env, episodes=None, track: bool = False) -> str | None:
    """Why :func:`compiled_loop` does not apply to this run, or ``None`` when it does."""
    reason = _agent_reason(agent)
    if reason is not None:
        return reason
    if track:
        return "the run tracks the agent's policies"
    mdp = getattr(env, "mdp", None)
    if _episodic(env):
        if agent.n_layers != mdp.horizon:
            return f"the agent's n_layers={agent.n_layers}, the model's horizon {mdp.horizon}"
        if episodes is not None and episodes * mdp.horizon > EC.MAX_STEPS:
            return f"{episodes} episodes of {mdp.horizon} steps exceed {EC.MAX_STEPS} steps"
    else:
        reason = PC._env_reason(env)
        if reason is not None:
            return f"episodic: {EC._env_reason(env)}; continuing: {reason}"
        if type(mdp) is not TabularMDP:
            return f"the model is a {type(mdp).__name__}, not a continuing TabularMDP"
        if agent.n_layers is not None:
            return "the agent is layered (n_layers) on a continuing model"
        if episodes is not None:
            return "the run counts episodes on a continuing model (give steps=)"
    if (agent.n_states, agent.n_actions) != (mdp.n_states, mdp.n_actions):
        return "the agent's table does not match the model's states and actions"
    if not EK.AVAILABLE:
        return 'numba is not installed (pip install "optplan[jit]")'
    if not (SK.self_check() and self_check()):
        return (
            "numba's random / integers / standard_normal draws, or NumPy's exp loop as the "
            "compiled Boltzmann choice calls it, differ from NumPy's here"
        )
    return None


def _agent_args(agent):
    kind = SOFT if type(agent) is SoftQ else GREEDY
    rate = -1.0 if agent.learning_rate is None else float(agent.learning_rate)
    return (
        kind,
        np.ascontiguousarray(agent.action_mask, dtype=np.bool_),
        float(getattr(agent, "epsilon", 0.0)),
        float(getattr(agent, "temperature", 1.0)),
        float(agent.discount),
        rate,
    )


def _state_arrays(agent):
    """The agent's table, counts and greedy sets as the kernel's types (the agent's own
    arrays when they are, else converted and put back in the agent)."""
    agent.q = np.ascontiguousarray(agent.q, dtype=float)
    agent.counts = np.ascontiguousarray(agent.counts, dtype=np.int64)
    agent._best = np.ascontiguousarray(agent._best, dtype=np.bool_)
    return agent.q, agent.counts, agent._best


def compiled_loop(agent, env, env_seed: int, agent_rng, steps, record, bar=None, *,
                  episodes=None, stop_when_solved=False, on_episode_end=None):  # fmt: skip
    """Fill ``record`` as the generic loop would; the caller has checked
    :func:`compiled_reason`."""
    if _episodic(env):
        return _episodic_loop(agent, env, env_seed, agent_rng, steps, record, bar, episodes,
                              stop_when_solved, on_episode_end)  # fmt: skip
    return _continuing_loop(agent, env, env_seed, agent_rng, steps, record, bar)


def _continuing_loop(agent, env, env_seed, agent_rng, steps, record, bar):
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    cdf, true_mask, rmean, rsd = PC._arrays(env)
    kind, mask, epsilon, temperature, discount, rate = _agent_args(agent)
    q, counts, best = _state_arrays(agent)
    states = np.empty(steps, dtype=np.int64)
    actions = np.empty(steps, dtype=np.int64)
    rewards = np.empty(steps)
    scratch = np.empty((3, agent.n_actions))
    meta = np.empty(5, dtype=np.int64)
    done, status, action = 0, DONE, -1
    fn = _compiled()["_steps"]
    while done < steps and status == DONE:
        n = min(CHUNK, steps - done)
        status, played, state, action, bumps = fn(
            kind, n, int(state), true_mask, cdf, rmean, rsd, env.np_random, agent.rng, q,
            counts, best, mask, epsilon, temperature, discount, rate, states, actions, rewards,
            done, scratch, meta,
        )  # fmt: skip
        agent.policy_version += int(bumps)
        agent._clock.layer += played
        done += played
        if bar is not None:
            bar.update(done - bar.n)
    PC.finish_run(record, env, states, actions, rewards, done, state, action,
                  status == INADMISSIBLE, start)  # fmt: skip
    return record


def _episodic_loop(agent, env, env_seed, agent_rng, steps, record, bar, episodes,
                   stop_when_solved, on_episode_end):  # fmt: skip
    start = time.perf_counter()
    state, _ = env.reset(seed=env_seed)
    agent.reset(agent_rng)
    E = EC._Env(env)
    L = E.L
    max_steps = steps if steps is not None else EC.MAX_STEPS
    capacity = steps if steps is not None else min(episodes * L, EC.MAX_STEPS)
    buf = EC._Buffers(min(capacity, 1 << 16))
    kind, mask, epsilon, temperature, discount, rate = _agent_args(agent)
    q, counts, best = _state_arrays(agent)
    scratch = np.empty((3, agent.n_actions))
    meta = np.empty(5, dtype=np.int64)
    ends = (episodes, stop_when_solved, on_episode_end)
    fn = _compiled()["_episode"]
    S = agent.n_states
    t = 0
    shown = 0
    reset = False
    while t < max_steps:
        n = min(L, max_steps - t)
        buf.fit(t + n)
        status, played, state, reached, action, bumps = fn(
            kind, n, int(state), reset, E.initial_cdf, E.kind, env.np_random, E.R, E.cdf, E.mask,
            E.noise, E.goals, E.mapping, E.noise_mask, E.windy, E.size, agent.rng, q, counts,
            best, mask, epsilon, temperature, discount, rate, S, buf.states, buf.actions,
            buf.rewards, buf.layers, t, scratch, meta,
        )  # fmt: skip
        agent.policy_version += int(bumps)
        t += played
        if played and E.reports_goals:
            record.goal_seen = True
        if status != DONE:
            E.leave(played, state)
            agent._clock.layer = played
            raise OptplanError(
                f"action {int(action)} is not admissible in state {int(state)} at layer {played}"
            )
        E.leave(played, state)
        if played < L:
            agent._clock.layer = played
            break
        agent._clock.tick(True)
        if bar is not None and steps is not None and t - shown >= EC._BAR_STRIDE:
            bar.update(t - shown)
            shown = t
        if episode_ended(record, t, bool(reached), agent, *ends, bar):
            break
        if t < max_steps:
            reset = True
            E.start()
        else:
            state, _ = env.reset()
    else:
        EC._too_few_episodes(record, episodes, max_steps)
    return EC.finish_episodes(record, buf, t, start, bar, steps)


def compiled_oracle_run(env, oracle, env_seed: int, steps: int) -> np.ndarray | None:
    """The oracle run compiled by the episodic or the planning engine (same environments)."""
    if _episodic(env):
        return EC.compiled_oracle_run(env, oracle, env_seed, steps)
    return PC.compiled_oracle_run(env, oracle, env_seed, steps)
