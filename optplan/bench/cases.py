"""Random problem instances shared by the tests and ``optplan bench`` (scipy's ``_tstutils``).

The one collection of seeded random cases: MDPs for the planning problems, ``(p, v, param)``
instances of the index problems, DeepSea-shaped K-learning temperature problems, and
Garnet-style sparse uncertainty Bellman and moment-matching problems, optimistic planning
problems (UCRL's and RAVI-UCB's).
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError
from ..envs import DeepSea
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..problems.clipped_optimistic import ClippedOptimisticPlanning
from ..problems.k_temperature import KLearningTemperature
from ..problems.moment_matching import MomentMatchingVariance
from ..problems.optimistic import OptimisticPlanning
from ..problems.ube import UncertaintyBellman

__all__ = [
    "random_transitions",
    "random_mask",
    "random_rewards",
    "random_mdp",
    "random_finite_horizon",
    "planning_cases",
    "INDEX_PROBLEMS",
    "random_index_instance",
    "random_pv",
    "deepsea_instance",
    "garnet_transitions",
    "random_ube",
    "random_moment_matching",
    "random_optimistic",
    "random_clipped_optimistic",
]


def random_transitions(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    n_states: int,
    density: float = 1.0,
    unichain: bool = True,
) -> np.ndarray:
    """Dirichlet(1) rows ``P[..., s']`` with about ``density * S`` next states each.

    With ``unichain=True`` every row gives positive probability to state 0, so every policy's
    chain has a single recurrent class (the one holding state 0).
    """
    P = rng.dirichlet(np.ones(n_states), size=shape)
    if density < 1.0:
        keep = rng.random((*shape, n_states)) < density
        if unichain:
            keep[..., 0] = True
        empty = ~keep.any(axis=-1)
        keep[empty, rng.integers(n_states, size=int(empty.sum()))] = True
        P = np.where(keep, P, 0.0)
        P /= P.sum(axis=-1, keepdims=True)
    return P


def random_mask(rng: np.random.Generator, shape: tuple[int, ...], keep: float = 0.7) -> np.ndarray:
    """A random admissible-action mask that leaves every state at least one action."""
    mask = rng.random(shape) < keep
    first = rng.integers(shape[-1], size=shape[:-1])
    np.put_along_axis(mask, first[..., None], True, axis=-1)
    return mask


def random_rewards(
    rng: np.random.Generator, shape: tuple[int, ...], ties: bool = False
) -> np.ndarray:
    """Uniform rewards in [0, 1); with ``ties`` rounded to one decimal so many actions tie."""
    R = rng.random(shape)
    return np.round(R, 1) if ties else R


def random_mdp(
    rng: np.random.Generator,
    n_states: int,
    n_actions: int,
    discount: float | None = None,
    density: float = 1.0,
    mask: bool = False,
    ties: bool = False,
    unichain: bool = True,
) -> TabularMDP:
    """A random ``TabularMDP`` (see :func:`random_transitions` for ``unichain``)."""
    P, R, action_mask = _random_model(
        rng, (n_states, n_actions), n_states, density, mask, ties, unichain
    )
    return TabularMDP(P, R, discount=discount, action_mask=action_mask)


def random_finite_horizon(
    rng: np.random.Generator,
    horizon: int,
    n_states: int,
    n_actions: int,
    density: float = 1.0,
    mask: bool = False,
    ties: bool = False,
) -> FiniteHorizonMDP:
    """A random ``FiniteHorizonMDP``: ``horizon`` layers drawn as :func:`random_mdp` draws one
    (with ``unichain=False``)."""
    P, R, action_mask = _random_model(
        rng, (horizon, n_states, n_actions), n_states, density, mask, ties, unichain=False
    )
    return FiniteHorizonMDP(P, R, action_mask=action_mask)


def _random_model(rng, shape, n_states, density, mask, ties, unichain):
    """``(P, R, action_mask)`` of :func:`random_mdp` and :func:`random_finite_horizon` for
    pairs (or layered pairs) of ``shape``, drawn in that order."""
    P = random_transitions(rng, shape, n_states, density, unichain)
    R = random_rewards(rng, shape, ties)
    action_mask = random_mask(rng, shape) if mask else None
    return P, R, action_mask


def planning_cases(
    seed: int, count: int, criterion: str, max_states: int = 40, max_actions: int = 5
):
    """``count`` varied random models for one criterion: sizes, density, masks, ties."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        S = int(rng.integers(1, max_states + 1))
        A = int(rng.integers(1, max_actions + 1))
        density = float(rng.choice([1.0, 0.5, 0.2, 0.05]))
        mask = bool(i % 2)
        ties = i % 3 == 0
        if criterion == "finite_horizon":
            L = int(rng.integers(1, 8))
            yield random_finite_horizon(rng, L, S, A, density, mask, ties)
        else:
            discount = (
                float(rng.choice([0.0, 0.5, 0.9, 0.99])) if criterion == "discounted" else None
            )
            yield random_mdp(rng, S, A, discount, density, mask, ties)


#: The index problems of accelerating-ucb-indices-mdp (§4.1-4.3), by stem.
INDEX_PROBLEMS = ("kl_ball", "kl_inf", "l1_ball")


def random_index_instance(
    rng: np.random.Generator, S: int, problem: str, zeros: float = 0.0
) -> tuple[np.ndarray, np.ndarray, float]:
    """A random instance ``(p, v, param)`` of an index problem, as in the paper's §4.5.

    ``p ~ Dirichlet(1)`` over ``S`` states; with ``zeros > 0`` about that fraction of the
    states get probability zero (at least one state keeps positive mass) and ``p`` is
    renormalized. ``v ~ U(0, 1)``. ``param`` is the radius ``~ U(0.01, 1)`` for ``"kl_ball"``
    and ``"l1_ball"``, and for ``"kl_inf"`` a target strictly between ``p . v`` and
    ``max v`` (a uniform fraction in ``[0.01, 0.99]`` of the gap; ``S == 1`` or constant ``v``
    leave no gap and raise).
    """
    if problem not in INDEX_PROBLEMS:
        raise OptplanError(f"problem must be one of {INDEX_PROBLEMS}, got {problem!r}")
    p = rng.dirichlet(np.ones(S))
    if zeros > 0:
        drop = rng.random(S) < zeros
        drop[rng.integers(S)] = False
        p = np.where(drop, 0.0, p)
        p /= p.sum()
    v = rng.random(S)
    if problem == "kl_inf":
        mean, top = float(p @ v), float(v.max())
        if not top > mean:
            raise OptplanError(f"no target strictly between p.v = {mean} and max v = {top}")
        param = mean + rng.uniform(0.01, 0.99) * (top - mean)
    else:
        param = float(rng.uniform(0.01, 1.0))
    return p, v, param


def random_pv(seed: int, S: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(p, v)`` for the KL index tests: sizes 1..60, sparse and dense ``p``, ties, zeros.

    The structure is chosen by ``seed % 5``: 0 plain, 1 sparse ``p``, 2 the best state has
    probability zero, 3 ties in ``v``, 4 large magnitudes; ``S`` (default: random in 1..60)
    fixes the size.
    """
    rng = np.random.default_rng(seed)
    S = int(rng.integers(1, 61)) if S is None else S
    p = rng.dirichlet(np.full(S, float(rng.choice([0.3, 1.0, 5.0]))))
    kind = seed % 5
    if kind == 1 and S > 1:  # sparse p
        p[rng.random(S) < 0.5] = 0.0
    if kind == 2 and S > 1:  # the best state has probability zero
        p[0] = 0.0
    if p.sum() == 0:
        p[rng.integers(S)] = 1.0
    p /= p.sum()
    v = rng.random(S)
    if kind == 2:
        v[0] = v.max() + rng.random()
    if kind == 3:  # ties
        v = np.round(v * 3) / 3
    if kind == 4:  # large magnitude
        v = 1e6 * v - 3e5
    return p, v


def deepsea_instance(L: int, rng: np.random.Generator) -> KLearningTemperature:
    """A K-learning temperature problem shaped like a DeepSea posterior of depth ``L``.

    ``L`` layers of ``L`` columns, two actions; posterior-mean transitions from random visit
    counts (half the pairs unvisited) on DeepSea's true moves plus a Dirichlet(1/L) prior,
    random mean rewards on the visited pairs.
    """
    env = DeepSea(L, mapping_seed=int(rng.integers(2**31)))
    P_true = np.asarray(env.mdp.P)
    counts = rng.integers(0, 30, size=(L, L, 2)).astype(float)
    counts[rng.random((L, L, 2)) < 0.5] = 0.0  # half the pairs unvisited
    next_counts = counts[..., None] * P_true
    alpha = 1.0 / L
    P = (next_counts + alpha) / (counts[..., None] + alpha * L)
    R = np.where(counts > 0, rng.normal(0.0, 0.1, (L, L, 2)), 0.0)
    return KLearningTemperature(R, P, counts, 1.0, env.mdp.initial)


def garnet_transitions(
    rng: np.random.Generator, shape: tuple[int, ...], n_states: int, next_states: int = 3
) -> np.ndarray:
    """Garnet-style sparse rows ``P[..., s']``: each row puts Dirichlet(1) weights on
    ``next_states`` next states drawn uniformly at random (with replacement: a repeated draw
    merges, so a row has at most ``next_states`` nonzeros). Dense storage, sparse content."""
    idx = rng.integers(n_states, size=(*shape, next_states))
    weights = rng.dirichlet(np.ones(next_states), size=shape)
    P = np.zeros((*shape, n_states))
    flat = P.reshape(-1, n_states)  # a view: P is fresh and contiguous
    rows = np.repeat(np.arange(flat.shape[0]), next_states)
    np.add.at(flat, (rows, idx.reshape(-1)), weights.reshape(-1))
    return P


def random_ube(
    rng: np.random.Generator,
    n_states: int,
    n_actions: int,
    discount: float = 0.9,
    next_states: int = 3,
) -> UncertaintyBellman:
    """A continuing-form :class:`UncertaintyBellman` on a Garnet model
    (:func:`garnet_transitions`), a Dirichlet(1) stochastic policy and local uncertainty
    ``nu ~ U(0, 1)``."""
    P = garnet_transitions(rng, (n_states, n_actions), n_states, next_states)
    policy = rng.dirichlet(np.ones(n_actions), size=n_states)
    local = rng.random((n_states, n_actions))
    return UncertaintyBellman(P, policy, local, discount)


def random_moment_matching(
    rng: np.random.Generator,
    n_states: int,
    n_actions: int,
    discount: float = 0.9,
    next_states: int = 3,
) -> MomentMatchingVariance:
    """A :class:`MomentMatchingVariance` whose Dirichlet posterior lives on a Garnet support:
    ``alpha = 0.5 + counts`` (counts uniform in 0..19) on the ``next_states`` drawn next
    states of each pair and 0 elsewhere (so the mean model stays sparse); posterior reward
    means ``U(0, 1)``, variances ``U(0, 0.1) / (1 + count)``; a Dirichlet(1) stochastic policy;
    the values are the policy's in the mean model (the problem's default)."""
    support = garnet_transitions(rng, (n_states, n_actions), n_states, next_states) > 0
    counts = rng.integers(0, 20, size=support.shape).astype(float)
    alpha = np.where(support, 0.5 + counts, 0.0)
    reward_mean = rng.random(support.shape)
    reward_var = np.where(support, 0.1 * rng.random(support.shape) / (1.0 + counts), 0.0)
    policy = rng.dirichlet(np.ones(n_actions), size=n_states)
    return MomentMatchingVariance(alpha, reward_mean, reward_var, policy, discount)


def random_optimistic(
    rng: np.random.Generator, S: int, A: int, ball: str = "l1", criterion: str = "discounted"
) -> OptimisticPlanning:
    """An optimistic planning problem as a UCRL agent meets it: a random model (3 next states
    per pair), ``n`` in [1, 500] samples per pair drawn from it, ``p_hat`` their frequencies,
    ``r_hat`` noisy means; radii ``sqrt(2 S / n)`` (L1) or ``S / n`` (KL) and reward radius
    ``sqrt(1 / n)`` (UCRL2's and KL-UCRL's shapes with the logarithms dropped)."""
    P = garnet_transitions(rng, (S, A), S)
    n = rng.integers(1, 501, size=(S, A))
    # A row whose next states all merged into one can sum to 1 + 2e-16, which multinomial
    # refuses as a probability above 1 (S = 3 or 4 draws it): clip, bit-identical otherwise.
    p_hat = rng.multinomial(n, np.minimum(P, 1.0)) / n[..., None]
    r_hat = np.clip(rng.random((S, A)) + rng.normal(0, 1, (S, A)) / np.sqrt(n), 0.0, 1.0)
    radius = np.sqrt(2.0 * S / n) if ball == "l1" else S / n
    return OptimisticPlanning(
        p_hat=p_hat,
        r_hat=r_hat,
        radius=radius,
        reward_radius=np.sqrt(1.0 / n),
        ball=ball,
        criterion=criterion,
        discount=0.95 if criterion == "discounted" else None,
    )


def random_clipped_optimistic(
    rng: np.random.Generator,
    S: int,
    A: int,
    discount: float = 0.95,
    bonus_scale: float = 1.0,
    mask: bool = False,
) -> ClippedOptimisticPlanning:
    """A clipped optimistic fixed point as RAVI-UCB meets it (Algorithm 2): a Garnet model (3
    next states per pair), ``N - 1`` samples per pair with ``N`` log-uniform in [1, 500],
    ``p_hat = N' / N`` (rows sum to ``(N - 1) / N``), rewards ``U(0, 1)^3`` (mostly small),
    bonus ``bonus_scale * beta sqrt(H) / sqrt(N)`` with ``beta ~ U(0, 3)`` per pair: at
    ``bonus_scale = 1`` and ``gamma = 0.95`` most instances clip some states at ``H`` and not
    others, over 2-6 clipped-set rounds; ``mask``: each pair admissible with probability 0.7
    (action 0 always)."""
    P = garnet_transitions(rng, (S, A), S)
    P /= P.sum(axis=-1, keepdims=True)  # a row with one merged state: exactly 1, not 1 + 1e-16
    N = np.floor(np.exp(rng.uniform(0.0, np.log(500.0), (S, A)))).astype(int)
    p_hat = rng.multinomial(N - 1, P) / N[..., None]
    beta = rng.uniform(0.0, 3.0, (S, A)) * np.sqrt(1.0 / (1.0 - discount))
    action_mask = None
    if mask:
        action_mask = rng.random((S, A)) < 0.7
        action_mask[:, 0] = True
    return ClippedOptimisticPlanning(
        p_hat=p_hat,
        r=rng.random((S, A)) ** 3,
        bonus=bonus_scale * beta / np.sqrt(N),
        discount=discount,
        action_mask=action_mask,
    )
