"""UCBVI's plan (optplan.agents.ucbvi, which keeps its count sums and transition estimates
between plans and acts from a table of each row's unique maximizer) gives, bit for bit, the
results of the plain NumPy form of the algorithm: ``ReferenceUCBVI`` below is a verbatim copy
(renamed only) of that form of the class, which recomputes every estimate from the whole count
array at each plan and draws every action through ``greedy_action``. On several seeds x
{DeepSea L = 20 as ``optplan bench agents`` builds it, random layered models with masks and
reward noise, a stationary model repeated over its layers} x {Hoeffding, Bernstein} x
{per-step, stationary} x {empirical, known rewards} x {paper constants, small bonus scale,
declared episodes}: every recorded Trace column, the agent's arrays after the run and the
generator left behind are equal (np.array_equal, no tolerance)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from optplan._checks import OptplanError, as_numeric, check_choice, check_positive, check_real
from optplan.agents import UCBVI, make_agent
from optplan.agents.base import LayerClock, check_count, check_rng
from optplan.agents.qlearning import check_episodes, greedy_action, layered_mask
from optplan.agents.ucbvi import UCBVI_BONUSES
from optplan.bench.agents import _agent as bench_agent
from optplan.bench.agents import _env as bench_env
from optplan.bench.cases import random_finite_horizon, random_mdp
from optplan.envs import TabularEnv
from optplan.experiments import run
from optplan.mdp import FiniteHorizonMDP


class ReferenceUCBVI:
    """UCBVI (Azar, Osband, Munos 2017, Algorithm 1 with UCBVI-CH or UCBVI-BF bonuses) for
    episodic layered models; the algorithm and its data are in the module docstring.

    Parameters
    ----------
    n_states, n_actions : int
        States per step (layer), actions (counts: to build from an environment use
        ``make_agent("ucbvi", env)``).
    n_layers : int
        The horizon ``H``.
    bonus : {"hoeffding", "bernstein"}, default "hoeffding"
        UCBVI-CH or UCBVI-BF.
    beta_scale : float >= 0, default 1.0
        Multiplies the bonus (1: the paper's constants; 0: greedy on the empirical model,
        optimistic only where unvisited).
    delta : float in (0, 1), default 0.1
        Confidence of ``L = ln(5 S A T / delta)``.
    episodes : int, optional
        The number of episodes ``K`` of the run (``T = K H``); unset: ``T = k H`` at the
        ``k``-th episode.
    stationary : bool, default False
        Pool the data of ``(x, a)`` over the steps (every layer has the same law); ``False``:
        one estimate per step.
    rewards : array (H, S, A) or (S, A), optional
        The true mean rewards, if known (the paper); else the empirical means.
    action_mask : bool array (S, A) or (H, S, A), optional

    Attributes
    ----------
    q : ndarray (H, S, A)
        ``Q_{k,h}`` of the current episode (``-inf`` on inadmissible pairs; ``H - h`` where
        unvisited).
    values : ndarray (H + 1, S)
        ``V_{k,h}``, with ``V_{k,H} = 0``.
    bonus_values : ndarray (H, S, A)
        The bonus ``b_{k,h}`` of the last plan (scaled; 0 where unvisited or inadmissible).
    counts : ndarray (H, S, A, S) of int
        Transitions observed at each step.
    """

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        n_layers,
        bonus="hoeffding",
        beta_scale=1.0,
        delta=0.1,
        episodes=None,
        stationary=False,
        rewards=None,
        action_mask=None,
    ):
        self.n_states = S = check_count("n_states", n_states)
        self.n_actions = A = check_count("n_actions", n_actions)
        self.n_layers = H = check_count("n_layers", n_layers)
        self.bonus = check_choice("bonus", bonus, UCBVI_BONUSES)
        self.beta_scale = check_positive("beta_scale", beta_scale, allow_zero=True)
        self.delta = check_real("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        self.episodes = check_episodes(episodes)
        if not isinstance(stationary, (bool, np.bool_)):
            raise OptplanError(f"stationary must be True or False, got {stationary!r}")
        self.stationary = bool(stationary)
        self.action_mask = layered_mask(action_mask, H, S, A)
        if rewards is not None:
            rewards = as_numeric("rewards", rewards)
            if rewards.shape not in ((S, A), (H, S, A)):
                raise OptplanError(
                    f"rewards has shape {rewards.shape}, expected ({S}, {A}) or ({H}, {S}, {A})"
                )
            rewards = np.broadcast_to(rewards, (H, S, A))
        self.rewards = rewards
        self.clock = LayerClock(H)
        self.rng: np.random.Generator | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        H, S, A = self.n_layers, self.n_states, self.n_actions
        self.clock.reset()
        self.episode = 0
        self.counts = np.zeros((H, S, A, S), dtype=np.int64)
        self.reward_sums = np.zeros((H, S, A))
        remaining = (H - np.arange(H, dtype=float))[:, None, None]  # H - h
        self.q = np.where(self.action_mask, remaining, -np.inf)
        self.plan()

    def log_term(self) -> float:
        """``L = ln(5 S A T / delta)`` with ``T = K H`` (declared ``episodes``) or ``k H``."""
        k = self.episodes if self.episodes is not None else self.episode + 1
        H, S, A = self.n_layers, self.n_states, self.n_actions
        return math.log(5.0 * S * A * k * H / self.delta)

    def _data(self):
        """``(N, next counts, reward sums)``, pooled over the steps when stationary."""
        nxt, rs = self.counts, self.reward_sums
        if self.stationary:
            nxt = np.broadcast_to(nxt.sum(axis=0), nxt.shape)
            rs = np.broadcast_to(rs.sum(axis=0), rs.shape)
        return nxt.sum(axis=-1), nxt, rs

    def plan(self) -> None:
        """Backward induction of the episode that starts now (module docstring)."""
        H, S, A = self.n_layers, self.n_states, self.n_actions
        n, nxt, rs = self._data()
        visited = n > 0
        inv_n = 1.0 / np.maximum(n, 1)
        R = rs * inv_n if self.rewards is None else self.rewards
        Lg = self.log_term()
        visits = self.counts.sum(axis=(-1, -2))  # N'_{k,h}(y): visits to y at step h
        values = np.zeros((H + 1, S))
        bonuses = np.zeros((H, S, A))
        for h in range(H - 1, -1, -1):  # a loop over steps only
            cap = float(H - h)
            P = nxt[h] * inv_n[h][..., None]  # P_hat(. | x, a), (S, A, S)
            v = values[h + 1]
            pv = (P.reshape(S * A, S) @ v).reshape(S, A)
            if self.bonus == "hoeffding":
                b = 7.0 * H * Lg * np.sqrt(inv_n[h])
            else:
                var = np.maximum((P.reshape(S * A, S) @ (v * v)).reshape(S, A) - pv * pv, 0.0)
                b = np.sqrt(8.0 * Lg * var * inv_n[h]) + 14.0 * H * Lg * inv_n[h] / 3.0
                if h + 1 < H:
                    seen = visits[h + 1]
                    with np.errstate(divide="ignore"):
                        w = np.where(
                            seen > 0,
                            np.minimum(100.0**2 * H**3 * S**2 * A * Lg**2 / seen, H * H),
                            float(H * H),
                        )
                    b = b + np.sqrt(8.0 * (P.reshape(S * A, S) @ w).reshape(S, A) * inv_n[h])
            b = self.beta_scale * np.where(visited[h], b, 0.0)
            fresh = np.minimum(self.q[h], np.minimum(cap, R[h] + pv + b))
            q = np.where(visited[h], fresh, cap)
            self.q[h] = np.where(self.action_mask[h], q, -np.inf)
            bonuses[h] = np.where(self.action_mask[h], b, 0.0)
            values[h] = self.q[h].max(axis=-1)
        self.values = values
        self.bonus_values = bonuses

    def select_action(self, state: int) -> int:
        return greedy_action(self.rng, self.q[self.clock.current(), state])

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        h = self.clock.current()
        self.counts[h, state, action, next_state] += 1
        self.reward_sums[h, state, action] += reward
        self.clock.tick(done)
        if done:
            self.episode += 1
            self.plan()

    def __repr__(self) -> str:
        return (
            f"UCBVI(L={self.n_layers}, S={self.n_states}, A={self.n_actions}, "
            f"bonus={self.bonus!r}, beta_scale={self.beta_scale})"
        )


# --- the comparison ---------------------------------------------------------------------------

#: The arrays of the agent compared after a run.
ARRAYS = ("q", "values", "bonus_values", "counts", "reward_sums")


def reference_of(agent: UCBVI) -> ReferenceUCBVI:
    """The reference agent with ``agent``'s sizes, parameters, rewards and mask."""
    return ReferenceUCBVI(
        agent.n_states,
        agent.n_actions,
        n_layers=agent.n_layers,
        bonus=agent.bonus,
        beta_scale=agent.beta_scale,
        delta=agent.delta,
        episodes=agent.episodes,
        stationary=agent.stationary,
        rewards=agent.rewards,
        action_mask=agent.action_mask,
    )


def assert_same_runs(make_env, make, steps, seed):
    """``make(env)`` (a registry-built UCBVI) and its reference, each on a fresh environment,
    leave equal Traces, arrays and generators; returns the agent's Trace."""
    env = make_env()
    agent = make(env)
    assert type(agent) is UCBVI
    ref = reference_of(make(make_env()))
    ref_env = make_env()
    got = run(agent, env, steps=steps, seed=seed, engine="python")
    want = run(ref, ref_env, steps=steps, seed=seed, engine="python")
    for f in dataclasses.fields(want):
        if f.name == "wall_time":
            continue
        a, b = getattr(want, f.name), getattr(got, f.name)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            assert np.array_equal(a, b), f.name
        elif isinstance(a, float) and math.isnan(a):
            assert math.isnan(b), f.name
        else:
            assert b == a, f.name
    for name in ARRAYS:
        x, y = getattr(ref, name), getattr(agent, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert agent.episode == ref.episode and agent.clock.layer == ref.clock.layer
    assert agent.rng.bit_generator.state == ref.rng.bit_generator.state
    assert env.np_random.bit_generator.state == ref_env.np_random.bit_generator.state
    return got


VARIANTS = [
    {},
    {"bonus": "bernstein"},
    {"stationary": True},
    {"bonus": "bernstein", "stationary": True, "known_rewards": True},
    {"known_rewards": True, "beta_scale": 0.01},
    {"beta_scale": 0.002, "episodes": 400},
    {"bonus": "bernstein", "beta_scale": 0.001},
    {"bonus": "bernstein", "beta_scale": 1e-4, "stationary": True, "episodes": 300},
    {"beta_scale": 0.0},
]


def _name(params):
    return ",".join(f"{k}={v}" for k, v in params.items()) or "default"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("params", VARIANTS, ids=_name)
def test_deepsea_20_as_benched(params, seed):
    """DeepSea L = 20 built by the bench's own helpers; 60 episodes and a cut one."""
    trace = assert_same_runs(
        lambda: bench_env("deepsea", {"size": 20}),
        lambda env: bench_agent("ucbvi", env, {"steps": 1210, **params})[0],
        steps=1210,
        seed=seed,
    )
    assert trace.episodes == 60


def _layered_env(seed, stationary_model):
    rng = np.random.default_rng(100 + seed)
    if stationary_model:
        mdp = FiniteHorizonMDP.from_stationary(random_mdp(rng, 6, 3, density=0.5), 5)
    else:
        mdp = random_finite_horizon(rng, 5, 6, 3, density=0.5, mask=True, ties=seed % 2 == 0)
    return TabularEnv(mdp, reward_noise=0.3)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("stationary_model", [False, True], ids=["layered", "from-stationary"])
@pytest.mark.parametrize("params", VARIANTS, ids=_name)
def test_random_layered_models(params, stationary_model, seed):
    """Random layered models (masks, ties, sparse rows, noisy rewards) and a stationary one."""
    assert_same_runs(
        lambda: _layered_env(seed, stationary_model),
        lambda env: make_agent("ucbvi", env, **params),
        steps=1503,
        seed=seed,
    )


def test_direct_updates_and_reset_match():
    """Updates fed by hand (no run loop), a reset in between: the same arrays at every plan."""
    rng = np.random.default_rng(7)
    H, S, A = 4, 3, 2
    mask = rng.random((H, S, A)) < 0.8
    mask[..., 0] = True
    known = rng.random((S, A))
    for kwargs in (
        {},
        {"bonus": "bernstein", "beta_scale": 0.01},
        {"stationary": True},
        {"rewards": known, "beta_scale": 0.05},
        {"rewards": known, "bonus": "bernstein", "stationary": True, "beta_scale": 1e-3},
    ):
        agent = UCBVI(S, A, n_layers=H, action_mask=mask, **kwargs)
        ref = ReferenceUCBVI(S, A, n_layers=H, action_mask=mask, **kwargs)
        for round_ in range(2):
            agent.reset(np.random.default_rng(round_))
            ref.reset(np.random.default_rng(round_))
            for _ in range(40):
                s = int(rng.integers(S))
                for h in range(H):
                    a = ref.select_action(s)
                    assert agent.select_action(s) == a
                    nxt = int(rng.integers(S))
                    r = float(rng.random())
                    agent.update(s, a, r, nxt, h == H - 1)
                    ref.update(s, a, r, nxt, h == H - 1)
                    s = nxt
                for name in ARRAYS:
                    assert np.array_equal(getattr(agent, name), getattr(ref, name)), name
