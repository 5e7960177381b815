r"""UCBVI (Azar, Osband, Munos, ICML 2017): optimistic backward induction on the empirical
model with a Hoeffding (UCBVI-CH) or Bernstein-Freedman (UCBVI-BF) bonus, for episodic models.

At the start of each episode ``k`` (and once before the first), backward for
``h = H - 1, ..., 0`` with ``V_{k,H} = 0``:

.. math:: Q_{k,h}(x, a) = \min\big(Q_{k-1,h}(x, a),\ H - h,\ \hat R(x, a)
          + \hat P_k(\cdot | x, a) \cdot V_{k,h+1} + b_{k,h}(x, a)\big)
          \ \text{if } N_k(x, a) > 0, \quad H - h \text{ otherwise},
          \qquad V_{k,h}(x) = \max_a Q_{k,h}(x, a),

then the agent plays ``argmax_a Q_{k,h}(x, a)`` (ties uniform at random) through the
episode. The bonuses, with ``L = ln(5 S A T / delta)``:

- ``bonus="hoeffding"`` (UCBVI-CH): ``b = 7 H L sqrt(1 / N)``;
- ``bonus="bernstein"`` (UCBVI-BF): ``b = sqrt(8 L Var_{Y ~ P_hat}(V_{k,h+1}(Y)) / N)
  + 14 H L / (3 N) + sqrt(8 sum_y P_hat(y | x, a) min(100^2 H^3 S^2 A L^2 / N'_{k,h+1}(y),
  H^2) / N)``, ``N'_{k,h+1}(y)`` the visits to ``y`` at step ``h + 1`` (``H^2`` for a state
  never visited there); at the last step ``V_{k,H} = 0`` and the last term, which bounds the
  error of ``V_{k,h+1}``, is 0.

``beta_scale`` multiplies the whole bonus (1: the paper's constants, which are loose: at
``H = 10`` the Hoeffding bonus of a pair seen once is about ``70 L``, far above the value
range ``H``, so the paper-constant agent explores every pair many times before the bonus
stops binding). The cap is ``H - h``, the value range of the ``H - h`` steps left, where the
paper writes ``H``: with the cap ``H`` every pair of the upper steps sits at ``H`` while any
pair below is unexplored, so the greedy choice there is a tie, broken at random, and the agent
cannot steer towards what is unexplored; with ``H - h`` a path to an unexplored pair is worth
more than one through explored pairs whose values are below their caps.

``S`` is the number of states per step and ``T = K H`` for a declared number of episodes
``K``, else ``k H`` at the ``k``-th episode (an anytime form of the paper's known ``T``).

Data. Observations of a layered model are states within a layer, so the estimates are kept
per step: ``N``, ``P_hat`` and ``R_hat`` of ``(h, x, a)``. That is the paper's stationary
algorithm on the layered state ``(h, x)``, right for DeepSea, whose action mapping differs
from row to row. ``stationary=True`` pools the counts, transitions and rewards of ``(x, a)``
over the steps, the paper's estimate when every layer has the same law (a model built by
:meth:`~optplan.mdp.FiniteHorizonMDP.from_stationary`); ``N'`` stays per step. Rewards are the
empirical means unless the true means are given (``rewards``, registry ``known_rewards``: the
paper's known reward function). Rewards are assumed in ``[0, 1]`` (DeepSea's are in
``[-0.01, 1]``), whence the caps.

Planning is vectorized over states and actions; the only loop is over the ``H`` steps. The
integer sums ``N``, ``N'`` (and the pooled counts) and the rows of ``P_hat`` are brought up to
date at each plan from the transitions observed since the last one (each row the same product
``counts / N`` as from scratch), so a plan does not pass over the whole ``(H, S, A, S)`` count
array; acting reads a table of each row's maximizers made by the plan (ties drawn as
:func:`~optplan.agents.qlearning.greedy_action` draws them).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import OptplanError, as_numeric, check_choice, check_positive, check_real
from .._params import Component, Param
from ._env import env_model
from .base import LayerClock, check_count, check_rng
from .qlearning import (
    EPISODIC_CONFIDENCE,
    check_episodes,
    episodic_args,
    greedy_action,
    layered_mask,
)

__all__ = ["UCBVI", "UCBVI_BONUSES"]

#: The bonuses of :class:`UCBVI`: UCBVI-CH and UCBVI-BF.
UCBVI_BONUSES = ("hoeffding", "bernstein")


class UCBVI:
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
        # Kept between plans from the transitions observed since the last one (``_seen``):
        # the integer sums of ``counts`` (exact in any order) and the rows of ``P_hat`` of
        # the pairs whose counts changed (each row the same product as a whole recompute).
        pairs = (S, A) if self.stationary else (H, S, A)
        self._seen: list[tuple[int, int, int, int]] = []
        self._visits = np.zeros((H, S), dtype=np.int64)  # N'_{k,h}(y)
        self._n = np.zeros(pairs, dtype=np.int64)  # N(x, a) (pooled when stationary)
        self._pooled = np.zeros((S, A, S), dtype=np.int64) if self.stationary else None
        self._p_hat = np.zeros((*pairs, S))  # P_hat(. | x, a), 0 where unvisited
        # per step: P_hat as (S A, S) (the matrix of the product P_hat V), Q flat and (S, A)
        self._p_rows = _layers(self._p_hat.reshape(-1, S * A, S), H)
        self._q_flat = list(self.q.reshape(H, S * A))
        self._q_rows = list(self.q)
        self.plan()

    def log_term(self) -> float:
        """``L = ln(5 S A T / delta)`` with ``T = K H`` (declared ``episodes``) or ``k H``."""
        k = self.episodes if self.episodes is not None else self.episode + 1
        H, S, A = self.n_layers, self.n_states, self.n_actions
        return math.log(5.0 * S * A * k * H / self.delta)

    def _data(self):
        """``(N, 1 / max(N, 1), R_hat)``, ``(S, A)`` when stationary, after folding the
        transitions observed since the last plan into the sums and ``P_hat``."""
        changed = None
        if self._seen:
            h, x, a, y = np.array(self._seen, dtype=np.intp).T
            self._seen.clear()
            np.add.at(self._visits, (h, x), 1)
            if self.stationary:
                np.add.at(self._pooled, (x, a, y), 1)
                changed, rows = (x, a), self._pooled
            else:
                changed, rows = (h, x, a), self.counts
            np.add.at(self._n, changed, 1)
        inv_n = 1.0 / np.maximum(self._n, 1)
        if changed is not None:  # the rows of the pairs seen: nxt * inv_n, as from scratch
            self._p_hat[changed] = rows[changed] * inv_n[changed][:, None]
        if self.rewards is not None:
            R = self.rewards
        elif self.stationary:
            R = self.reward_sums.sum(axis=0) * inv_n
        else:
            R = self.reward_sums * inv_n
        return self._n, inv_n, R

    def plan(self) -> None:
        """Backward induction of the episode that starts now (module docstring).

        Per step, on ``(S A,)`` rows: ``Q = min(Q_prev, min(H - h, (R + P V) + b))`` on the
        visited admissible pairs; the others keep the ``H - h`` (unvisited) or ``-inf``
        (inadmissible) of :meth:`reset`."""
        H, S, A = self.n_layers, self.n_states, self.n_actions
        SA = S * A
        n, inv_n, R = self._data()
        visited = n > 0
        mask = self.action_mask
        Lg = self.log_term()
        beta = self.beta_scale
        values = np.zeros((H + 1, S))
        v_rows = list(values)
        p_rows, q_flat, q_rows = self._p_rows, self._q_flat, self._q_rows
        r_rows = _layers(R.reshape(-1, SA), H)
        update = _layers((visited & mask).reshape(H, SA), H)
        if self.bonus == "hoeffding":
            b = 7.0 * H * Lg * np.sqrt(inv_n)
            b = beta * np.where(visited, b, 0.0)
            bonuses = np.where(mask, b, 0.0)
            b_rows = _layers(b.reshape(-1, SA), H)
        else:
            i_rows = _layers(inv_n.reshape(-1, SA), H)
            seen_rows = _layers(visited.reshape(-1, SA), H)
            second = _layers((14.0 * H * Lg * inv_n / 3.0).reshape(-1, SA), H)
            with np.errstate(divide="ignore"):
                seen = self._visits
                w = np.where(
                    seen > 0,
                    np.minimum(100.0**2 * H**3 * S**2 * A * Lg**2 / seen, H * H),
                    float(H * H),
                )
            bonuses = np.zeros((H, S, A))
            bonus_rows = list(bonuses.reshape(H, SA))
            mask_rows = list(mask.reshape(H, SA))
        for h in range(H - 1, -1, -1):  # a loop over steps only
            v = v_rows[h + 1]
            pv = p_rows[h] @ v
            if self.bonus == "hoeffding":
                bh = b_rows[h]
            else:
                ih = i_rows[h]
                var = np.maximum(p_rows[h] @ (v * v) - pv * pv, 0.0)
                bh = np.sqrt(8.0 * Lg * var * ih) + second[h]
                if h + 1 < H:
                    bh = bh + np.sqrt(8.0 * (p_rows[h] @ w[h + 1]) * ih)
                bh = beta * np.where(seen_rows[h], bh, 0.0)
                bonus_rows[h][...] = np.where(mask_rows[h], bh, 0.0)
            fresh = r_rows[h] + pv
            fresh += bh
            np.minimum(float(H - h), fresh, out=fresh)
            np.minimum(q_flat[h], fresh, out=q_flat[h], where=update[h])
            np.maximum.reduce(q_rows[h], axis=-1, out=v_rows[h])
        self.values = values
        self.bonus_values = bonuses
        # the maximizers of each row, ascending, first, and their number (``greedy_action``'s
        # ``flatnonzero``), for select_action
        top = self.q == values[:H, :, None]
        self._ties = top.sum(axis=-1).tolist()
        self._tops = np.argsort(~top, axis=-1, kind="stable").tolist()

    def select_action(self, state: int) -> int:
        h = self.clock.current()
        ties = self._ties[h][state]
        if ties == 1:
            return self._tops[h][state][0]
        if ties > 1:  # greedy_action's draw: rng.choice(best) draws integers(0, len(best))
            return self._tops[h][state][int(self.rng.integers(0, ties))]
        return greedy_action(self.rng, self.q[h, state])  # no maximum (NaN): its error

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        h = self.clock.current()
        self.counts[h, state, action, next_state] += 1
        self.reward_sums[h, state, action] += reward
        self._seen.append((h, state, action, next_state))
        self.clock.tick(done)
        if done:
            self.episode += 1
            self.plan()

    def __repr__(self) -> str:
        return (
            f"UCBVI(L={self.n_layers}, S={self.n_states}, A={self.n_actions}, "
            f"bonus={self.bonus!r}, beta_scale={self.beta_scale})"
        )


def _layers(rows: np.ndarray, n_layers: int) -> list[np.ndarray]:
    """The ``n_layers`` per-step views of ``rows`` (one row: the same view at every step)."""
    out = list(rows)
    return out if len(out) == n_layers else out * n_layers


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _ucbvi(env, criterion, known_rewards, **params):
    args = episodic_args(env, "ucbvi")
    rewards = env_model(env).R if known_rewards else None
    return UCBVI(**args, rewards=rewards, **params)


BUILDERS = (
    Component(
        "ucbvi",
        _ucbvi,
        (
            Param("bonus", "str", "hoeffding", "'hoeffding' (UCBVI-CH) or 'bernstein' (UCBVI-BF)"),
            Param("beta_scale", "float", 1.0, "multiplies the bonus (1: the paper's constants)"),
            *EPISODIC_CONFIDENCE,
            Param("stationary", "bool", False, "pool (x, a) over the steps; else per step"),
            Param("known_rewards", "bool", False, "the true mean rewards; else empirical means"),
        ),
        "UCBVI (Azar et al. 2017), Hoeffding or Bernstein bonus, episodic",
    ),
)
