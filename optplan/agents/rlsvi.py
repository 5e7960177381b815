r"""Tabular randomized least-squares value iteration (RLSVI; Osband, Van Roy, Wen, ICML 2016;
Osband, Van Roy, Russo, Wen, JMLR 2019, §5) for episodic layered models.

At the start of each episode (and once before the first) the agent draws a value function
``Q~`` backward for ``h = H - 1, ..., 0``, with ``Q~_H = 0``: for every pair ``(x, a)`` with
``n`` observations at step ``h``, targets ``y_i = r_i + max_a' Q~_{h+1}(x'_i, a')`` (no
continuation for a transition that ended the episode), and

.. math:: \tilde Q_h(x, a) \sim \mathcal N\Big(\frac{\sum_i y_i / \sigma^2}{n / \sigma^2
          + \lambda},\ \frac{1}{n / \sigma^2 + \lambda}\Big), \qquad \lambda = 1 /
          \text{prior\_var},

the Bayesian linear regression of the targets on one indicator feature per pair, with noise
variance ``sigma^2`` and prior ``N(0, prior_var)`` (an unvisited pair draws from the prior).
It then acts greedily on ``Q~`` through the episode.

Data is **per step**, not pooled over steps: the regression at step ``h`` uses only the
transitions observed at step ``h`` (the JMLR paper's time-inhomogeneous tabular RLSVI; a layered
model's observations are states within a layer, so pooling would mix DeepSea's rows, whose
action mappings differ). The targets need only sufficient statistics, kept per step: the pair
counts, the reward sums and the next-state counts, ``sum_i y_i = sum_i r_i + sum_y n(x, a, y)
max_a' Q~_{h+1}(y, a')``. Each draw is vectorized over states and actions (one
``standard_normal((S, A))`` per step, drawn from ``h = H - 1`` down to 0); the only loop is over
the ``H`` steps.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_positive
from .._params import Component, Param
from .base import LayerClock, check_count, check_rng
from .qlearning import episodic_args, layered_mask

__all__ = ["RLSVI"]


class RLSVI:
    """Tabular RLSVI (Osband et al. 2016, 2019) on layered models, data per step; the draw is in
    the module docstring.

    Parameters
    ----------
    n_states, n_actions : int
        States per step (layer), actions (counts: to build from an environment use
        ``make_agent("rlsvi", env)``).
    n_layers : int
        The horizon ``H``.
    sigma : float > 0, default 1.0
        Standard deviation of the regression noise (noise variance ``sigma^2``) of the targets
        ``r + max Q~'``.
    prior_var : float > 0, default 1.0
        Variance of the Gaussian prior of each ``Q~_h(x, a)`` (the prior precision ``lambda``
        is ``1 / prior_var``).
    action_mask : bool array (S, A) or (H, S, A), optional

    Attributes
    ----------
    q : ndarray (H, S, A)
        The value function ``Q~`` drawn for the current episode (``-inf`` on inadmissible
        pairs).
    mean, sd : ndarray (H, S, A)
        The mean and standard deviation of each pair's draw (the mean of step ``h`` depends on
        the draw of step ``h + 1``).
    counts : ndarray (H, S, A) of int
        Observations of each pair at each step.
    """

    def __init__(
        self, n_states, n_actions, *, n_layers, sigma=1.0, prior_var=1.0, action_mask=None
    ):
        self.n_states = S = check_count("n_states", n_states)
        self.n_actions = A = check_count("n_actions", n_actions)
        self.n_layers = H = check_count("n_layers", n_layers)
        self.sigma = check_positive("sigma", sigma)
        self.prior_var = check_positive("prior_var", prior_var)
        self.action_mask = layered_mask(action_mask, H, S, A)
        self.clock = LayerClock(H)
        self.rng: np.random.Generator | None = None
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        H, S, A = self.n_layers, self.n_states, self.n_actions
        self.clock.reset()
        self.episode = 0
        self.counts = np.zeros((H, S, A), dtype=np.int64)
        self.reward_sums = np.zeros((H, S, A))
        self.next_counts = np.zeros((H, S, A, S), dtype=np.int64)
        self.plan()

    def plan(self) -> None:
        """Draw ``Q~`` for the episode that starts now (module docstring)."""
        H, S, A = self.n_layers, self.n_states, self.n_actions
        noise_var = self.sigma**2
        precision = self.counts / noise_var + 1.0 / self.prior_var
        self.sd = 1.0 / np.sqrt(precision)
        self.mean = np.zeros((H, S, A))
        self.q = np.empty((H, S, A))
        v = np.zeros(S)
        for h in range(H - 1, -1, -1):  # a loop over steps only
            sums = self.reward_sums[h] + (self.next_counts[h].reshape(S * A, S) @ v).reshape(S, A)
            self.mean[h] = sums / noise_var / precision[h]
            draw = self.mean[h] + self.sd[h] * self.rng.standard_normal((S, A))
            self.q[h] = np.where(self.action_mask[h], draw, -np.inf)
            v = self.q[h].max(axis=-1)

    def select_action(self, state: int) -> int:
        return int(np.argmax(self.q[self.clock.current(), state]))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        h = self.clock.current()
        self.counts[h, state, action] += 1
        self.reward_sums[h, state, action] += reward
        if not done and h + 1 < self.n_layers:
            self.next_counts[h, state, action, next_state] += 1
        self.clock.tick(done)
        if done:
            self.episode += 1
            self.plan()

    def __repr__(self) -> str:
        return (
            f"RLSVI(L={self.n_layers}, S={self.n_states}, A={self.n_actions}, "
            f"sigma={self.sigma}, prior_var={self.prior_var})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _rlsvi(env, criterion, **params):
    return RLSVI(**episodic_args(env, "rlsvi"), **params)


BUILDERS = (
    Component(
        "rlsvi",
        _rlsvi,
        (
            Param("sigma", "float", 1.0, "sd of the regression noise of the targets r + max Q~'"),
            Param("prior_var", "float", 1.0, "prior variance of each Q~_h(x, a) (1 / lambda)"),
        ),
        "tabular RLSVI (Osband et al. 2016/2019), data per step, episodic",
    ),
)
