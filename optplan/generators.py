"""Model generators: plain functions that build a :class:`~optplan.mdp.TabularMDP`.

Every generator takes only scalar (or list-of-int) keyword parameters, so a model file can name
it and list its parameters as top-level keys (``generator = "riverswim"``, ``n_states = 6``; see
:mod:`optplan.modelfile`). :data:`GENERATORS` maps those names to the functions.

Every bad parameter raises ``ValueError`` naming the parameter and the offending value; a model
whose transition array would exceed :data:`optplan.mdp.MAX_MODEL_BYTES` is refused before
anything is allocated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ._checks import OptplanError, OptplanTypeError, check_int
from .mdp import TabularMDP, check_model_size

__all__ = ["riverswim", "random_dirichlet", "sparse_goal_dirichlet", "GENERATORS"]


def _check_int(name: str, value, minimum: int) -> int:
    value = check_int(name, value, None)
    if value < minimum:
        raise OptplanError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def _check_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise OptplanTypeError(f"{name} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise OptplanError(f"{name} must be finite, got {value!r}")
    return float(value)


def _check_prob(name: str, value) -> float:
    p = _check_real(name, value)
    if not 0.0 <= p <= 1.0:
        raise OptplanError(f"{name} must lie in [0, 1], got {value!r}")
    return p


def _check_discount(discount) -> float | None:
    if discount is None:
        return None
    d = _check_real("discount", discount)
    if not 0.0 <= d < 1.0:
        raise OptplanError(f"discount must lie in [0, 1) or be None, got {discount!r}")
    return d


def riverswim(
    n_states: int = 6,
    discount: float | None = None,
    r_left: float = 0.005,
    r_right: float = 1.0,
    p_right: float = 0.35,
    p_stay: float = 0.6,
    p_right_first: float = 0.6,
    p_stay_last: float = 0.6,
    start: int | Sequence[int] = 0,
    sparse: bool = False,
) -> TabularMDP:
    """RiverSwim: a chain where the rewarding end lies against the current.

    The chain of Strehl & Littman (2008, "An analysis of model-based interval estimation for
    Markov decision processes", JCSS 74(8), Fig. 3) with the numbers of Osband, Russo & Van Roy
    (2013, "(More) efficient reinforcement learning via posterior sampling", Fig. 2), which most
    later work uses. States ``0 .. S-1`` run from the river bank (left) to the source (right);
    two actions:

    * action 0 (*left*, with the current): move to ``s - 1`` with probability 1 (stay at 0);
    * action 1 (*right*, against the current):

      - leftmost state 0: move right with ``p_right_first`` (0.6), else stay;
      - interior states: right ``p_right`` (0.35), stay ``p_stay`` (0.6),
        left ``1 - p_right - p_stay`` (0.05);
      - rightmost state ``S-1``: stay with ``p_stay_last`` (0.6), else move left.

    Rewards: ``R[0, left] = r_left`` (0.005 = 5/1000), ``R[S-1, right] = r_right`` (1), zero
    elsewhere. Greedy play collects ``r_left`` at the bank; the optimal policy swims right.

    Parameters
    ----------
    n_states : int, >= 2
        Chain length ``S`` (6 in both papers).
    discount : float in [0, 1), optional
        ``None`` (default) gives an average-reward model.
    r_left, r_right : float
        Rewards of swimming left at the bank and right at the source.
    p_right, p_stay : float in [0, 1], ``p_right + p_stay <= 1``
        Interior outcome probabilities of swimming right.
    p_right_first : float in [0, 1]
        Probability that swimming right in state 0 succeeds.
    p_stay_last : float in [0, 1]
        Probability that swimming right in state ``S-1`` keeps the agent there.
    start : int or sequence of int
        Start state(s); the initial distribution is uniform over them. The default ``0``
        (the leftmost state) follows Osband et al. (2013); ``[0, 1]`` gives the uniform start
        over the two leftmost states of Strehl & Littman (2008).
    sparse : bool
        Hold ``P`` as a CSR matrix of ``(S·2, S)`` rows (at most 3 entries each): long
        chains (``S`` in the millions) without the ``2 S^2`` dense array.

    Returns
    -------
    TabularMDP
        ``P`` of shape ``(S, 2, S)`` (``sparse``: its ``(S·2, S)`` rows, CSR), named
        ``"riverswim"``.

    Notes
    -----
    The original Strehl & Littman numbers (right: 0.3 / 0.6 / 0.1, rewards 5 and 10000, with
    0.7 / 0.3 at the ends) are the parameters ``p_right=0.3, p_stay=0.6, p_right_first=0.3,
    p_stay_last=0.3, r_left=5, r_right=10000, start=[0, 1]``.
    """
    S = _check_int("n_states", n_states, 2)
    if not isinstance(sparse, (bool, np.bool_)):
        raise OptplanError(f"sparse must be True or False, got {sparse!r}")
    if not sparse:
        check_model_size(S, 2)
    gamma = _check_discount(discount)
    r_left = _check_real("r_left", r_left)
    r_right = _check_real("r_right", r_right)
    swim = _swim_right(p_right, p_stay, p_right_first, p_stay_last)
    initial = _uniform_start(start, S)
    R = np.zeros((S, 2))
    R[0, 0] = r_left
    R[S - 1, 1] = r_right
    P = _river_transitions(S, *swim, sparse=sparse)
    return TabularMDP(P, R, discount=gamma, initial=initial, name="riverswim")


def _swim_right(p_right, p_stay, p_right_first, p_stay_last) -> tuple[float, ...]:
    """:func:`riverswim`'s probabilities of swimming right, checked: ``(p_right, p_stay,
    p_left, p_right_first, p_stay_last)`` with ``p_left = 1 - p_right - p_stay``."""
    p_right = _check_prob("p_right", p_right)
    p_stay = _check_prob("p_stay", p_stay)
    p_right_first = _check_prob("p_right_first", p_right_first)
    p_stay_last = _check_prob("p_stay_last", p_stay_last)
    p_left = 1.0 - p_right - p_stay
    if p_left < -1e-12:
        raise OptplanError(f"p_right + p_stay must be <= 1, got {p_right!r} + {p_stay!r}")
    return p_right, p_stay, max(p_left, 0.0), p_right_first, p_stay_last


def _uniform_start(start, S: int) -> np.ndarray:
    """The uniform distribution over ``start`` (a state index or a non-empty list of them)."""
    if isinstance(start, np.ndarray):
        start = start.tolist()
    starts = (
        [start] if isinstance(start, (int, np.integer)) and not isinstance(start, bool) else start
    )
    if isinstance(starts, (str, bytes)) or not isinstance(starts, Sequence) or len(starts) == 0:
        raise OptplanError(
            f"start must be a state index or a non-empty list of them, got {start!r}"
        )
    starts = [_check_int("start", s, 0) for s in starts]
    if max(starts) >= S:
        raise OptplanError(f"start must contain states in [0, {S - 1}], got {start!r}")
    initial = np.zeros(S)
    initial[np.unique(starts)] = 1.0
    initial /= initial.sum()
    return initial


def _river_transitions(S: int, p_right, p_stay, p_left, p_right_first, p_stay_last, sparse):
    """:func:`riverswim`'s ``P`` ``(S, 2, S)`` (``sparse``: its ``(S·2, S)`` rows, CSR):
    action 0 drifts left, action 1 swims right."""
    s = np.arange(S)
    mid = s[1:-1]
    left = np.maximum(s - 1, 0)
    # (state, action, next state, probability) of every transition, by kind
    parts = [
        (s, 0, left, np.ones(S)),
        (mid, 1, mid + 1, np.full(mid.size, p_right)),
        (mid, 1, mid, np.full(mid.size, p_stay)),
        (mid, 1, mid - 1, np.full(mid.size, p_left)),
        (np.array([0, 0]), 1, np.array([1, 0]), np.array([p_right_first, 1.0 - p_right_first])),
        (np.array([S - 1, S - 1]), 1, np.array([S - 1, S - 2]),
         np.array([p_stay_last, 1.0 - p_stay_last])),
    ]  # fmt: skip
    if sparse:
        import scipy.sparse as sp

        rows = np.concatenate([frm * 2 + a for frm, a, _, _ in parts])
        cols = np.concatenate([to for _, _, to, _ in parts])
        vals = np.concatenate([p for _, _, _, p in parts])
        keep = vals > 0
        return sp.coo_matrix((vals[keep], (rows[keep], cols[keep])), shape=(2 * S, S)).tocsr()
    P = np.zeros((S, 2, S))
    for frm, a, to, p in parts:
        np.add.at(P, (frm, a, to), p)
    return P


#: Reward models of :func:`random_dirichlet`.
REWARD_MODELS = ("uniform", "sparse")


def _dirichlet_inputs(n_states, n_actions, seed, alpha):
    """The checked ``(S, A, seed, alpha)`` of a random Dirichlet model (the size within
    :data:`~optplan.mdp.MAX_MODEL_BYTES`, a seed or a Generator, ``alpha > 0``)."""
    S = _check_int("n_states", n_states, 1)
    A = _check_int("n_actions", n_actions, 1)
    check_model_size(S, A)
    if not isinstance(seed, np.random.Generator):
        seed = _check_int("seed", seed, 0)
    alpha = _check_real("alpha", alpha)
    if alpha <= 0.0:
        raise OptplanError(f"alpha must be > 0, got {alpha!r}")
    return S, A, seed, alpha


def random_dirichlet(
    n_states: int = 10,
    n_actions: int = 3,
    seed: int | np.random.Generator = 0,
    alpha: float = 1.0,
    support: int | None = None,
    discount: float | None = None,
    reward: str = "uniform",
) -> TabularMDP:
    """A random MDP with Dirichlet transition rows (the usual random tabular benchmark).

    ``P[s, a, :] ~ Dirichlet(alpha, ..., alpha)`` independently for every pair; with
    ``alpha = 1`` this is the uniform prior over the simplex that MDP-PS starts from
    (accelerating-ucb-indices-mdp §3.4), so the model is a draw from that prior. All
    randomness comes from ``np.random.default_rng(seed)``, drawn in a fixed order (support,
    then transitions, then rewards), so a seed fixes the model.

    Parameters
    ----------
    n_states, n_actions : int, >= 1
        ``S`` and ``A``.
    seed : int >= 0 or numpy.random.Generator
        Seed of :func:`numpy.random.default_rng` (or a generator to draw from).
    alpha : float > 0
        Dirichlet concentration; small ``alpha`` gives peaked rows. For ``alpha`` far below
        0.01 entries can underflow to exact zeros.
    support : int in [1, S], optional
        Sparse transitions: each row puts positive mass on ``support`` next states only,
        namely state 0 and ``support - 1`` states drawn uniformly without replacement from
        ``1 .. S-1``; the weights are ``Dirichlet(alpha)`` over those states. State 0 is in
        every row's support, so it is reachable in one step from every state under every
        action: every stationary policy has a single recurrent class (the one containing 0),
        i.e. the model is unichain and the average-reward optimality equation (Eq. 1 there)
        has a scalar gain. ``None`` (default): dense rows.
    discount : float in [0, 1), optional
        ``None`` (default) gives an average-reward model.
    reward : {"uniform", "sparse"}
        ``"uniform"``: ``R[s, a] ~ U(0, 1)`` i.i.d.; ``"sparse"``: ``R = 0`` except one
        uniformly drawn pair with ``R = 1``.

    Returns
    -------
    TabularMDP
        Named ``"random_dirichlet"``, uniform initial distribution, all actions admissible.
    """
    S, A, seed, alpha = _dirichlet_inputs(n_states, n_actions, seed, alpha)
    if support is not None:
        support = _check_int("support", support, 1)
        if support > S:
            raise OptplanError(f"support must lie in [1, n_states={S}], got {support!r}")
    gamma = _check_discount(discount)
    if reward not in REWARD_MODELS:
        raise OptplanError(f"reward must be one of {REWARD_MODELS}, got {reward!r}")

    rng = np.random.default_rng(seed)
    if support is None or support == S:
        P = rng.dirichlet(np.full(S, alpha), size=(S, A))
    else:
        # A uniformly random (support - 1)-subset of 1..S-1 per row: the first entries of an
        # argsort of i.i.d. uniforms are a uniform random permutation.
        others = np.argsort(rng.random((S, A, S - 1)), axis=-1)[..., : support - 1] + 1
        cols = np.concatenate([np.zeros((S, A, 1), dtype=others.dtype), others], axis=-1)
        P = np.zeros((S, A, S))
        np.put_along_axis(P, cols, rng.dirichlet(np.full(support, alpha), size=(S, A)), axis=-1)
    if reward == "uniform":
        R = rng.uniform(size=(S, A))
    else:
        R = np.zeros(S * A)
        R[rng.integers(S * A)] = 1.0
        R = R.reshape(S, A)
    return TabularMDP(P, R, discount=gamma, name="random_dirichlet")


def sparse_goal_dirichlet(
    n_states: int = 20,
    n_actions: int = 3,
    seed: int | np.random.Generator = 0,
    alpha: float = 0.1,
    n_goals: int | None = None,
    distractor: float = 0.1,
    discount: float | None = None,
) -> TabularMDP:
    """A random MDP in which the reward-greedy policy is far from optimal: peaked Dirichlet
    rows, a few rewarding goal pairs, small distracting rewards everywhere else.

    ``P[s, a, :] ~ Dirichlet(alpha, ..., alpha)`` independently for every pair; with the default
    ``alpha = 0.1`` most of a row's mass sits on a few next states, so where an action leads
    matters and has to be learned. ``n_goals`` distinct goal states are drawn uniformly; in each,
    one uniformly drawn action has reward 1. Every other pair has a distracting reward
    ``R[s, a] ~ U(0, distractor)``. The policy that maximizes the immediate reward collects the
    distractors and reaches the goals only by chance, whereas the optimal policy steers towards
    them: at ``gamma = 0.9`` the reward-greedy policy loses on average about 0.1 (``S = 20``,
    ``A = 3``) to 0.07 (``S = 50``, ``A = 4``) per step in normalized discounted occupancy
    (``<mu* - mu^greedy, r>`` from the uniform start), against 0.002 for
    :func:`random_dirichlet`'s dense uniform-reward models. All randomness comes from
    ``np.random.default_rng(seed)``, drawn in a fixed order (transitions, goal states, goal
    actions, distractors), so a seed fixes the model.

    Parameters
    ----------
    n_states, n_actions : int, >= 1
        ``S`` and ``A``.
    seed : int >= 0 or numpy.random.Generator
        Seed of :func:`numpy.random.default_rng` (or a generator to draw from).
    alpha : float > 0
        Dirichlet concentration of every transition row (small: peaked rows; entries far below
        machine precision can underflow to exact zeros for ``alpha`` well below 0.1).
    n_goals : int in [1, S], optional
        Number of goal states; default ``max(1, S // 10)``.
    distractor : float in [0, 1)
        Upper end of the uniform distracting rewards (below the goal reward 1).
    discount : float in [0, 1), optional
        ``None`` (default) gives an average-reward model.

    Returns
    -------
    TabularMDP
        Named ``"sparse_goal_dirichlet"``, uniform initial distribution, all actions
        admissible, rewards in ``[0, 1]``.
    """
    S, A, seed, alpha = _dirichlet_inputs(n_states, n_actions, seed, alpha)
    goals = max(1, S // 10) if n_goals is None else _check_int("n_goals", n_goals, 1)
    if goals > S:
        raise OptplanError(f"n_goals must lie in [1, n_states={S}], got {n_goals!r}")
    distractor = _check_real("distractor", distractor)
    if not 0.0 <= distractor < 1.0:
        raise OptplanError(f"distractor must lie in [0, 1), got {distractor!r}")
    gamma = _check_discount(discount)

    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(S, alpha), size=(S, A))
    goal_states = rng.choice(S, size=goals, replace=False)
    goal_actions = rng.integers(A, size=goals)
    R = distractor * rng.uniform(size=(S, A))
    R[goal_states, goal_actions] = 1.0
    return TabularMDP(P, R, discount=gamma, name="sparse_goal_dirichlet")


#: Generator name (the ``generator`` key of a model file) -> function.
GENERATORS: dict[str, Callable[..., TabularMDP]] = {
    "riverswim": riverswim,
    "random_dirichlet": random_dirichlet,
    "sparse_goal_dirichlet": sparse_goal_dirichlet,
}
