r"""Many seeds of the UBE agents on :class:`~optplan.envs.UBEChain` at once, exactly.

The generic loop (:func:`optplan.experiments.run`) costs about 0.1 ms per episode that stops
at the root and 1 to 1.5 ms per episode along a 50-state chain (Python steps and a re-plan
over 51 layers), so the paper's Fig. 2 (500 seeds x 10^4 episodes x six agent
configurations, some of which walk the chain thousands of times per seed) would take hours of
CPU. This module runs the same agents on the same environment for a whole batch of run seeds
at once, with per-seed arrays in place of per-seed objects, and reproduces the generic loop
**exactly**: for every run seed it derives the environment's and the agent's random streams as
:func:`~optplan.experiments.run` does, consumes them in the same order (one reward draw per
step, two Thompson draws per root decision) and evaluates the same floating-point expressions
as :class:`~optplan.agents.UBE` / :class:`~optplan.agents.CountBonus` with known transitions and
the flat prior (every chain pair is visited once per chain episode, so one count and one
reward sum per layer describe the posterior). ``tests/test_ube_agent.py`` checks that its
actions equal the generic loop's, episode by episode.

What it covers, and refuses otherwise: ``"ube"`` (``zeta``) and ``"count-bonus"`` (``beta``)
with ``transitions="known"``, the flat prior, the chain's own noise sd and discount, on the
layered chain.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gymnasium.utils import seeding

from .._checks import OptplanError, check_int, check_positive
from ..envs.ube_chain import CHAIN, ON_CHAIN, STOP, UBEChain

__all__ = ["ChainBatch", "run_chain_batch", "batch_runner", "AGENTS"]

#: The agents the batch reproduces, with the parameter each takes.
AGENTS = {"ube": "zeta", "count-bonus": "beta"}
_DEFAULTS = {"zeta": 1.0, "beta": 0.1}
#: Parameters that must keep these values (the configuration reproduced) ...
_FIXED = {"transitions": "known", "prior_var": None, "sigma": None, "local": None, "method": "fast"}
#: ... and parameters that play no part in it (Dirichlet prior, local rule's bound, solver).
_UNUSED = {"transition_prior", "reward_bound", "solver", "update_every"}

_BUFFER = 4096  # reward draws held per seed


@dataclass(frozen=True, eq=False)
class ChainBatch:
    """Per-episode record of a batch of runs.

    Attributes
    ----------
    seeds : ndarray of int, shape (n,)
        The run seeds (as :func:`~optplan.experiments.run`'s ``seed``).
    actions : ndarray of int8, shape (n, episodes)
        The root action of every episode (1 = along the chain).
    regret : ndarray, shape (n, episodes)
        Cumulative pseudo-regret after each episode: the sum of ``env.root_gaps[a]``, the
        root choice's gap in discounted return (equal to the generic loop's finite-horizon
        regret when ``mu2 = 0``, see :mod:`optplan.envs.ube_chain`).
    wall_time : float
        Seconds.
    """

    seeds: np.ndarray
    actions: np.ndarray
    regret: np.ndarray
    wall_time: float


def _check_covered(agent: str, params: dict, env: UBEChain) -> None:
    """Refuse a configuration the batch does not reproduce, naming the parameter."""
    why = (
        f"the batched chain runs cover {agent} with transitions='known', the flat prior "
        "(prior_var unset), the chain's own noise sd (sigma unset) and discount, the fast path"
    )
    for name, value in params.items():
        if name == AGENTS[agent] or name in _UNUSED:
            continue
        if name in _FIXED and value == _FIXED[name]:
            continue
        if name == "mode" and value in ("auto", "episodic"):
            continue
        if name == "discount" and value in (None, env.discount):
            continue
        raise OptplanError(f"{why}; got {name}={value!r}")
    if params.get("transitions") != "known":
        raise OptplanError(f"{why}; got transitions={params.get('transitions')!r}")


class _Streams:
    """Each seed's reward stream (the environment's ``np_random``), drawn in blocks."""

    def __init__(self, gens: list[np.random.Generator]) -> None:
        self.gens = gens
        self.buf = np.stack([g.standard_normal(_BUFFER) for g in gens])
        self.ptr = np.zeros(len(gens), dtype=np.intp)

    def take(self, idx: np.ndarray, k: int) -> np.ndarray:
        """The next ``k`` draws of each seed in ``idx``, shape ``(len(idx), k)``."""
        low = idx[self.ptr[idx] + k > _BUFFER]
        for i in low:  # refill: keep the unread draws, append the stream's next ones
            rest = self.buf[i, self.ptr[i] :]
            fresh = self.gens[i].standard_normal(_BUFFER - rest.size)
            self.buf[i] = np.concatenate([rest, fresh])
            self.ptr[i] = 0
        cols = self.ptr[idx, None] + np.arange(k)
        out = self.buf[idx[:, None], cols]
        self.ptr[idx] += k
        return out


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The environment's and the agent's generators of ``run(..., seed=seed)``."""
    env_ss, agent_ss = np.random.SeedSequence(seed).spawn(2)
    env_seed = int(env_ss.generate_state(1, dtype=np.uint64)[0])
    env_rng, _ = seeding.np_random(env_seed)
    return env_rng, np.random.default_rng(agent_ss)


def run_chain_batch(
    agent: str,
    params: dict,
    env: UBEChain,
    seeds: Sequence[int],
    episodes: int,
) -> ChainBatch:
    """Run ``agent`` (registered name) with ``params`` on ``env`` for every run seed.

    Parameters
    ----------
    agent : {"ube", "count-bonus"}
    params : dict
        The registered agent's parameters (unset ones at their defaults); only ``zeta`` /
        ``beta`` may differ from the configuration this module reproduces (see the module
        docstring), anything else is refused naming the parameter.
    env : UBEChain
        A layered chain (its ``length``, means, noise and discount are used).
    seeds : sequence of int
        Run seeds (:func:`~optplan.experiments.run`'s ``seed``; a sweep's ``Task.seed``).
    episodes : int

    Returns
    -------
    ChainBatch
    """
    if agent not in AGENTS:
        raise OptplanError(f"agent must be one of {tuple(AGENTS)}, got {agent!r}")
    if not isinstance(env, UBEChain) or not env.layered:
        raise OptplanError(f"env must be a layered UBEChain, got {env!r}")
    key = AGENTS[agent]
    scale = check_positive(key, params.get(key, _DEFAULTS[key]), allow_zero=True)
    _check_covered(agent, params, env)
    episodes = check_int("episodes", episodes, 1)
    seeds = np.array([check_int("seeds", s, 0) for s in seeds], dtype=np.int64)
    start = time.perf_counter()
    if agent == "ube":
        actions = _ube(env, scale, seeds, episodes)
    else:
        actions = _count_bonus(env, scale, seeds, episodes)
    regret = np.cumsum(env.root_gaps[actions], axis=1)
    return ChainBatch(seeds, actions, regret, time.perf_counter() - start)


def batch_runner(agent: str, params: dict, env):
    """``runner(seeds, episodes)``: :func:`run_chain_batch` of ``agent`` with ``params`` on
    ``env``, when ``agent`` is one of :data:`AGENTS` and ``env`` a :class:`UBEChain` (its
    configuration is checked when it runs); ``None`` otherwise. A row of
    :data:`optplan.experiments.engines.BATCH_ENGINES`."""
    if agent not in AGENTS or not isinstance(env, UBEChain):
        return None

    def runner(seeds, episodes: int) -> ChainBatch:
        return run_chain_batch(agent, params, env, seeds, episodes)

    return runner


class _Chain:
    """Posterior statistics of every seed: the root's stop action and the chain's layers."""

    def __init__(self, env: UBEChain, n: int) -> None:
        sd = env.reward_sd
        self.L = env.mdp.horizon
        self.g = env.discount
        self.g2 = env.discount**2  # as the UBE problem squares its discount
        self.mu1, self.mu2 = float(env.mdp.R[0, ON_CHAIN, STOP]), env.mu2
        self.sd_stop = float(sd[0, ON_CHAIN, STOP])
        self.sd_chain = sd[:, ON_CHAIN, CHAIN].copy()  # (L,): root action 1, then the chain
        self.n_stop = np.zeros(n)
        self.sum_stop = np.zeros(n)
        self.n_chain = np.zeros(n)
        self.sums = np.zeros((n, self.L))

    def stop_values(self):
        """``Qbar``, ``Var mu`` and the bonus per unit scale of the stop action."""
        n = np.maximum(self.n_stop, 1.0)
        # Qbar = mean + gamma * 0.0 (the terminated state's value) in the agents' backup
        return (
            self.sum_stop / n + self.g * 0.0,
            np.square(self.sd_stop) / n,
            self.sd_stop / np.sqrt(n),
        )

    def chain_values(self, idx: np.ndarray):
        """The chain's ``Qbar``, ``u`` and compounded bonus at the root for seeds ``idx``, by
        the agents' backward recursions, ``X_l = x_l + c X_{l+1}`` from ``X_L = 0`` (the
        terminated state contributes exact zeros; ``u_{L-1} = nu_{L-1} + 0.0`` too)."""
        n = np.maximum(self.n_chain[idx], 1.0)[:, None]
        local = np.stack(  # (L, 3, seeds): mean reward, Var mu, bonus per unit scale
            [self.sums[idx] / n, np.square(self.sd_chain) / n, self.sd_chain / np.sqrt(n)],
            axis=1,
        ).T.copy()
        c = np.array([self.g, self.g2, self.g])[:, None]
        X = np.zeros(local.shape[1:])
        for l in range(self.L - 1, -1, -1):  # loop over layers only
            X = local[l] + c * X
        return X[0], X[1], X[2]

    def record(self, stop: np.ndarray, chain: np.ndarray, z_stop, z_chain) -> None:
        """Add the rewards of the episode: one draw at the root, or one per chain layer."""
        self.n_stop[stop] += 1
        self.sum_stop[stop] += self.mu1 + self.sd_stop * z_stop
        self.n_chain[chain] += 1
        self.sums[chain] += self.mu2 + self.sd_chain * z_chain


def _play(env, seeds, episodes, choose) -> np.ndarray:
    """The episode loop shared by both agents; ``choose(e, stop_q, chain_q, cache)`` returns
    each seed's root action for episode ``e`` (1-based)."""
    n = seeds.size
    env_rngs, agent_rngs = zip(*(_streams(int(s)) for s in seeds), strict=True)
    streams = _Streams(list(env_rngs))
    post = _Chain(env, n)
    actions = np.zeros((n, episodes), dtype=np.int8)
    everyone = np.arange(n)
    cache = post.chain_values(everyone)  # recomputed only for seeds that walked the chain
    agent_rngs = list(agent_rngs)
    for e in range(1, episodes + 1):
        a = choose(e, post.stop_values(), cache, agent_rngs)
        actions[:, e - 1] = a
        chain = np.flatnonzero(a == CHAIN)
        stop = np.flatnonzero(a == STOP)
        z_stop = streams.take(stop, 1)[:, 0]
        z_chain = streams.take(chain, post.L)
        post.record(stop, chain, z_stop, z_chain)
        if chain.size:
            W, U, B = post.chain_values(chain)
            cache[0][chain], cache[1][chain], cache[2][chain] = W, U, B
    return actions


def _ube(env, zeta: float, seeds, episodes) -> np.ndarray:
    chunk = 1024
    eps = {}

    def choose(e, stop, chain, agent_rngs):
        if zeta == 0.0:
            return np.where(chain[0] > stop[0], CHAIN, STOP)
        block, k = divmod(e - 1, chunk)
        if k == 0:  # two draws per root decision, drawn ahead in blocks of episodes
            eps["now"] = np.stack(
                [r.standard_normal((min(chunk, episodes - block * chunk), 2)) for r in agent_rngs]
            )
        d = eps["now"][:, k]
        x_stop = stop[0] + zeta * d[:, 0] * np.sqrt(stop[1])
        x_chain = chain[0] + zeta * d[:, 1] * np.sqrt(chain[1])
        return np.where(x_chain > x_stop, CHAIN, STOP)

    return _play(env, seeds, episodes, choose)


def _count_bonus(env, beta: float, seeds, episodes) -> np.ndarray:
    policy = {}

    def choose(e, stop, chain, agent_rngs):
        c = beta * math.log(e)
        q_stop = stop[0] + c * (stop[2] + env.discount * 0.0)
        q_chain = chain[0] + c * chain[2]
        best = np.where(q_chain > q_stop, CHAIN, STOP)
        if "prev" in policy:  # the incumbent keeps ties
            prev = policy["prev"]
            q_prev = np.where(prev == CHAIN, q_chain, q_stop)
            q_best = np.where(best == CHAIN, q_chain, q_stop)
            best = np.where(q_prev >= q_best, prev, best)
        policy["prev"] = best
        return best

    return _play(env, seeds, episodes, choose)
