"""Hypothesis strategies for optplan's inputs, drawn to hit the hard regions on purpose.

What a closed-form solver usually gets wrong is rare under uniform sampling: probabilities of
exactly zero or of 1e-300, values tied or 1e-12 apart, radii of 0, 1e-300 or 1e300, values of
magnitude 1e6, one state, many states, masked actions. Every strategy here mixes such values
in with ordinary ones, and is ordered so that hypothesis shrinks towards the plain case
(uniform ``p``, value 1, radius 1, one state): a shrunk counterexample keeps only the hard
features the failure needs.

Small instances (up to :data:`SMALL_STATES` states) are drawn entry by entry, so a failure
shrinks to a short literal. Larger ones are drawn from a seed (numpy), so that ``S`` in the
hundreds costs a few draws: the arrays are generated at the largest shape and cut to the drawn
one (``P_full[:S, :A, :S]``, renormalized), so when hypothesis shrinks ``S`` or ``A`` the
instance keeps its leading entries, like deleting its last states. Both kinds are mixed with
the entrywise branch first, which shrinking prefers.

Arrays follow the package's naming (``P[s, a, s']``, ``R[s, a]``, ``p[s]``, ``v[s]``).
Importing this module imports hypothesis (the ``[verify]`` extra).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

__all__ = [
    "SMALL_STATES",
    "WEIGHTS",
    "BASE_VALUES",
    "SCALES",
    "RADII",
    "DISCOUNTS",
    "distributions",
    "values",
    "radii",
    "discounts",
    "index_instances",
    "kl_inf_instances",
    "mdps",
    "ergodic_mdps",
    "layered_mdps",
    "policies",
    "dirichlet_posteriors",
    "k_learning_posteriors",
    "ube_instances",
    "moment_matching_instances",
    "optimistic_instances",
    "clipped_optimistic_instances",
]

#: Up to this many states an instance is drawn entry by entry (it shrinks to a literal).
SMALL_STATES = 8
#: Unnormalized probability weights: 1 first (shrinking goes to uniform), then zeros and tiny
#: masses down to 1e-300.
WEIGHTS = (1.0, 0.0, 2.0, 1e-300, 1e-200, 1e-100, 1e-30, 1e-12, 1e-6, 0.5, 3.0)
#: Values before scaling: repeats make ties likely; ``1 - 1e-12`` makes near-ties.
BASE_VALUES = (1.0, 0.0, -1.0, 0.5, 2.0, 1.0 - 1e-12)
#: Scales of a value vector: up to 1e6 in magnitude.
SCALES = (1.0, 1e6, 1e-6, 1e3, 1e-3)
#: Radii from 0 to 1e300 (radius 1 first).
RADII = (
    1.0,
    0.0,
    1e-300,
    1e-100,
    1e-16,
    1e-12,
    1e-8,
    1e-4,
    0.01,
    0.1,
    0.5,
    2.0,
    10.0,
    1e3,
    1e8,
    1e100,
    1e300,
)
DISCOUNTS = (0.9, 0.0, 0.5, 0.99, 0.999)


def _weight():
    return st.one_of(st.sampled_from(WEIGHTS), st.floats(1e-3, 1.0))


def _normalize(w: np.ndarray) -> np.ndarray:
    """Rows of ``w`` divided by their sums; an all-zero row becomes a point mass on entry 0."""
    w = np.array(w, dtype=float)
    empty = ~(w > 0).any(axis=-1)
    w[empty, 0] = 1.0
    return w / w.sum(axis=-1, keepdims=True)


def _weight_array(draw, shape, positive_first: bool = False) -> np.ndarray:
    w = np.array(
        draw(st.lists(_weight(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    )
    w = w.reshape(shape)
    if positive_first:  # every row reaches state 0 (unichain models)
        w[..., 0] = np.where(w[..., 0] > 0, w[..., 0], 1.0)
    return w


def _value_array(draw, shape, pool=BASE_VALUES, scales=SCALES) -> np.ndarray:
    size = int(np.prod(shape))
    entry = st.one_of(st.sampled_from(pool), st.floats(-1.0, 1.0))
    v = np.array(draw(st.lists(entry, min_size=size, max_size=size)), dtype=float)
    return (v * draw(st.sampled_from(scales))).reshape(shape)


def _seeded_kernel(draw, max_states: int, max_actions: int):
    """``(S, A, full, rng, w)``: drawn sizes, the full shape ``(max_states, max_actions,
    max_states)``, the seeded generator and transition weights of a drawn style cut to
    ``(S, A, S)`` (the instance depends on the sizes only through the cut)."""
    S, A = _sizes(draw, (1, max_states), (1, max_actions))
    full = (max_states, max_actions, max_states)
    rng = _rng(draw)
    return S, A, full, rng, _seeded_weights(rng, full, draw(st.sampled_from(_STYLES)))[:S, :A, :S]


def _seeded_weights(rng: np.random.Generator, shape, style: str) -> np.ndarray:
    """Unnormalized weights of one structural style at the full ``shape`` (the seeded branch;
    every entry depends on its own draws, so a leading slice is a smaller instance)."""
    w = rng.gamma(float(rng.choice([0.1, 1.0, 10.0])), size=shape)  # Dirichlet rows, unnormalized
    drop = rng.random(shape) < 0.6
    tiny = (rng.random(shape) < 0.2, 10.0 ** rng.uniform(-300, -6, shape))
    if style in ("sparse", "tiny"):
        w = np.where(drop, 0.0, w)
    if style == "tiny":
        w = np.where(tiny[0], tiny[1], w)
    return w


def _seeded_values(rng: np.random.Generator, shape, style: str, scale: float) -> np.ndarray:
    v = rng.uniform(-1.0, 1.0, shape)
    if style == "ties":
        v = np.round(v * 2) / 2
    return v * scale


def _seeded_mask(rng: np.random.Generator, shape) -> np.ndarray:
    """Each pair admissible with probability 0.7 (full ``shape`` ``(..., A_max)``); cut with
    :func:`_cut_mask`."""
    return rng.random(shape) < 0.7


def _cut_mask(mask: np.ndarray, A: int) -> np.ndarray:
    mask = np.array(mask[..., :A])
    mask[~mask.any(axis=-1), 0] = True
    return mask


_STYLES = ("dense", "sparse", "tiny")
_VALUE_STYLES = ("plain", "ties")


def _large(draw, max_states: int, small: int = SMALL_STATES) -> bool:
    """Whether to take the seeded branch (``False`` first: shrinking goes to entrywise)."""
    return max_states > small and draw(st.booleans())


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


@st.composite
def distributions(draw, min_states: int = 1, max_states: int = SMALL_STATES, states=None):
    """A probability vector ``p[S]``: zeros, tiny masses (to 1e-300), point masses.

    ``states`` (an int) fixes ``S``; otherwise ``S`` is drawn from ``[min_states,
    max_states]``. Entry by entry up to :data:`SMALL_STATES` states, from a seed above.
    """
    if states is not None:
        if states <= SMALL_STATES:
            return _normalize(_weight_array(draw, (states,)))
        return _normalize(_seeded_weights(_rng(draw), (states,), draw(st.sampled_from(_STYLES))))
    if not _large(draw, max_states):
        S = draw(st.integers(min_states, min(SMALL_STATES, max_states)))
        return _normalize(_weight_array(draw, (S,)))
    S = draw(st.integers(max(min_states, 1), max_states))
    w = _seeded_weights(_rng(draw), (max_states,), draw(st.sampled_from(_STYLES)))
    return _normalize(w[:S])


@st.composite
def values(draw, states: int, scales=SCALES):
    """A value vector ``v[S]``: ties, near-ties, zeros, magnitudes from 1e-6 to 1e6."""
    if states <= SMALL_STATES:
        return _value_array(draw, (states,), scales=scales)
    rng = _rng(draw)
    style = draw(st.sampled_from(_VALUE_STYLES))
    return _seeded_values(rng, (states,), style, draw(st.sampled_from(scales)))


def radii(low: float = 0.0, high: float = 1e300):
    """Radii in ``[low, high]``: the exact values of :data:`RADII`, uniform ones in
    ``[0, 5]`` and log-uniform ones from 1e-300 to 1e300."""
    pool = [r for r in RADII if low <= r <= high]
    logs = st.floats(-300.0, 300.0).map(lambda e: 10.0**e)
    return st.one_of(st.sampled_from(pool), st.floats(0.0, 5.0), logs).filter(
        lambda r: low <= r <= high
    )


def discounts(pool=DISCOUNTS):
    """Discount factors in ``[0, 1)``: 0.9 first, then 0, 0.5, 0.99, 0.999 and uniform ones."""
    return st.one_of(st.sampled_from(pool), st.floats(0.0, 0.99))


@st.composite
def index_instances(draw, max_states: int = 500, param=None):
    """``{"p", "v", "radius"}`` of an index problem (KL ball, L1 ball): one to
    ``max_states`` states, hard ``p`` and ``v``, radii from 0 to 1e300 (or ``param``)."""
    if not _large(draw, max_states):
        S = draw(st.integers(1, min(SMALL_STATES, max_states)))
        p = _normalize(_weight_array(draw, (S,)))
        v = _value_array(draw, (S,))
    else:
        S = draw(st.integers(1, max_states))
        rng = _rng(draw)
        p = _normalize(_seeded_weights(rng, (max_states,), draw(st.sampled_from(_STYLES)))[:S])
        style = draw(st.sampled_from(_VALUE_STYLES))
        v = _seeded_values(rng, (max_states,), style, draw(st.sampled_from(SCALES)))[:S]
    return {"p": p, "v": v, "radius": draw(param if param is not None else radii())}


#: Where a KL-inf target sits between ``p . v`` (0) and ``max v`` (1): on both ends, just
#: inside them, and below ``p . v`` (rate 0).
TARGET_FRACTIONS = (0.5, 0.0, -1.0, 1e-12, 1e-6, 0.9, 1.0 - 1e-9, 1.0)


@st.composite
def kl_inf_instances(draw, max_states: int = 500):
    """``{"p", "v", "target"}``: targets below ``p . v``, at it, just above, across the gap,
    just below ``max v`` and at it (infeasible unless ``v`` is constant)."""
    inst = draw(index_instances(max_states, param=st.just(0.0)))
    p, v = inst["p"], inst["v"]
    frac = draw(st.one_of(st.sampled_from(TARGET_FRACTIONS), st.floats(0.0, 1.0)))
    mean, top = float(p @ v), float(v.max())
    target = mean + frac * (top - mean) if frac < 1.0 else top
    return {"p": p, "v": v, "target": float(min(target, top))}


@st.composite
def _mask(draw, shape) -> np.ndarray:
    """A boolean mask over the last axis (actions), every row keeping one."""
    n = int(np.prod(shape))
    mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(shape)
    mask[~mask.any(axis=-1), 0] = True
    return mask


def _sizes(draw, *ranges):
    return tuple(draw(st.integers(lo, hi)) for lo, hi in ranges)


@st.composite
def mdps(
    draw,
    max_states: int = 40,
    max_actions: int = 5,
    discount: bool = True,
    masks: bool = False,
    unichain: bool = False,
):
    """``{"P", "R", "discount"?, "action_mask"?}`` of a tabular MDP (``P[s, a, s']``,
    ``R[s, a]``): sparse and tiny transition rows, rewards with ties and magnitudes to 1e6,
    ``S = 1`` up to ``max_states``; ``discount`` from :func:`discounts`; ``masks``: an
    admissible-action mask (every state keeps one) on about half the instances; ``unichain``:
    every row reaches state 0 (so every policy has one recurrent class)."""
    if not _large(draw, max_states, 5):
        S, A = _sizes(draw, (1, min(5, max_states)), (1, min(3, max_actions)))
        P = _normalize(_weight_array(draw, (S, A, S), positive_first=unichain))
        R = _value_array(draw, (S, A))
        mask = draw(_mask((S, A))) if masks and draw(st.booleans()) else None
    else:
        S, A, full, rng, w = _seeded_kernel(draw, max_states, max_actions)
        if unichain:
            w[..., 0] = np.maximum(w[..., 0], 1e-3)
        P = _normalize(w)
        style = draw(st.sampled_from(_VALUE_STYLES))
        R = _seeded_values(rng, full[:2], style, draw(st.sampled_from(SCALES)))[:S, :A]
        full_mask = _seeded_mask(rng, full[:2])
        mask = _cut_mask(full_mask[:S], A) if masks and draw(st.booleans()) else None
    out = {"P": P, "R": R}
    if discount:
        out["discount"] = draw(discounts())
    if mask is not None:
        out["action_mask"] = mask
    return out


@st.composite
def ergodic_mdps(draw, max_states: int = 12, max_actions: int = 4):
    """``{"P", "R"}`` of an ergodic MDP with every action admissible (the models
    :class:`~optplan.problems.regret_lower_bound.RegretLowerBound` takes): :func:`mdps`'s
    kernels, sparse and tiny rows included, mixed with weight ``w`` into the cycle
    ``s -> s + 1 (mod S)`` under every action, so every policy's chain holds the cycle and is
    irreducible (``w = 1`` first: the plain cycle, then weights down to 1e-6)."""
    base = draw(mdps(max_states, max_actions, discount=False))
    P, R = base["P"], base["R"]
    S = P.shape[0]
    w = draw(st.sampled_from((1.0, 0.5, 0.1, 0.01, 1e-6)))
    cycle = np.zeros_like(P)
    cycle[np.arange(S), :, (np.arange(S) + 1) % S] = 1.0
    return {"P": _normalize((1.0 - w) * P + w * cycle), "R": R}


@st.composite
def layered_mdps(
    draw, max_layers: int = 8, max_states: int = 15, max_actions: int = 4, masks: bool = False
):
    """``{"P", "R", "action_mask"?}`` of a finite-horizon MDP (``P[l, s, a, s']``,
    ``R[l, s, a]``), one to ``max_layers`` layers."""
    if not _large(draw, max_states * max_layers, 9):
        L, S, A = _sizes(
            draw, (1, min(3, max_layers)), (1, min(3, max_states)), (1, min(3, max_actions))
        )
        P = _normalize(_weight_array(draw, (L, S, A, S)))
        R = _value_array(draw, (L, S, A))
        mask = draw(_mask((L, S, A))) if masks and draw(st.booleans()) else None
    else:
        L, S, A = _sizes(draw, (1, max_layers), (1, max_states), (1, max_actions))
        full = (max_layers, max_states, max_actions, max_states)
        rng = _rng(draw)
        w = _seeded_weights(rng, full, draw(st.sampled_from(_STYLES)))
        P = _normalize(w[:L, :S, :A, :S])
        style = draw(st.sampled_from(_VALUE_STYLES))
        R = _seeded_values(rng, full[:3], style, draw(st.sampled_from(SCALES)))[:L, :S, :A]
        full_mask = _seeded_mask(rng, full[:3])
        mask = _cut_mask(full_mask[:L, :S], A) if masks and draw(st.booleans()) else None
    out = {"P": P, "R": R}
    if mask is not None:
        out["action_mask"] = mask
    return out


@st.composite
def policies(draw, S: int, A: int, deterministic=None):
    """A policy: probabilities ``(S, A)`` (rows with zeros and tiny masses) or action
    indices ``(S,)`` (integers)."""
    if deterministic is None:
        deterministic = draw(st.booleans())
    if deterministic:
        return np.array(draw(st.lists(st.integers(0, A - 1), min_size=S, max_size=S)), dtype=int)
    return _normalize(_weight_array(draw, (S, A)))


#: Visit counts: none, one, a few, many.
COUNTS = (1.0, 0.0, 5.0, 100.0, 1e6)


@st.composite
def dirichlet_posteriors(draw, S: int, A: int, sparse: bool = True):
    """Dirichlet parameters ``alpha[s, a, s']`` (``alpha >= 0``, no all-zero row): a prior
    of 1, 0.5, 1/S or 1e-3 plus counts from 0 to 1e6, zero outside a sparse support."""
    prior = draw(st.sampled_from((1.0, 0.5, 1.0 / S, 1e-3)))
    n = S * A * S
    counts = np.array(
        draw(st.lists(st.sampled_from(COUNTS), min_size=n, max_size=n)), dtype=float
    ).reshape(S, A, S)
    alpha = prior + counts
    if sparse and draw(st.booleans()):
        keep = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(S, A, S)
        keep[~keep.any(axis=-1), 0] = True
        alpha = np.where(keep, alpha, 0.0)
    return alpha


@st.composite
def k_learning_posteriors(draw, max_layers: int = 6, max_states: int = 5, max_actions: int = 4):
    """``{"mean_rewards", "mean_transitions", "counts", "sigma"}`` of a layered posterior for
    K-learning (k-learning-variational-bayesian-rl Eq. 6): means ``(L, S, A)`` with ties and
    scales to 1e3, mean transitions ``(L, S, A, S)`` with zeros and tiny masses, counts from 0
    to 1e6, ``sigma`` 0 to 10; at least two actions."""
    if not _large(draw, max_layers * max_states, 9):
        L, S, A = _sizes(
            draw, (1, min(3, max_layers)), (1, min(3, max_states)), (2, max(2, min(3, max_actions)))
        )
        P = _normalize(_weight_array(draw, (L, S, A, S)))
        R = _value_array(draw, (L, S, A), scales=(1.0, 1e-3, 1e3, 0.1))
        n = L * S * A
        N = np.array(
            draw(st.lists(st.sampled_from(COUNTS), min_size=n, max_size=n)), dtype=float
        ).reshape(L, S, A)
    else:
        L, S, A = _sizes(draw, (1, max_layers), (1, max_states), (2, max(2, max_actions)))
        full = (max_layers, max_states, max(2, max_actions), max_states)
        rng = _rng(draw)
        w = _seeded_weights(rng, full, draw(st.sampled_from(_STYLES)))
        P = _normalize(w[:L, :S, :A, :S])
        style = draw(st.sampled_from(_VALUE_STYLES))
        R = _seeded_values(rng, full[:3], style, 1.0)[:L, :S, :A]
        N = rng.choice(np.array(COUNTS), size=full[:3])[:L, :S, :A]
    sigma = draw(st.sampled_from((1.0, 0.0, 0.1, 10.0)))
    return {"mean_rewards": R, "mean_transitions": P, "counts": N, "sigma": sigma}


#: Local uncertainties of the UBE: zero, tiny, ordinary and huge (to 1e6).
LOCALS = (1.0, 0.0, 1e-300, 1e-12, 0.5, 1e3, 1e6)


def _locals(draw, shape) -> np.ndarray:
    n = int(np.prod(shape))
    entry = st.one_of(st.sampled_from(LOCALS), st.floats(0, 1))
    return np.array(draw(st.lists(entry, min_size=n, max_size=n)), dtype=float).reshape(shape)


@st.composite
def ube_instances(draw, max_states: int = 40, max_actions: int = 5):
    """``{"mean_transitions", "policy", "local", "discount"}`` of the continuing UBE."""
    if not _large(draw, max_states, 5):
        S, A = _sizes(draw, (1, min(5, max_states)), (1, min(3, max_actions)))
        P = _normalize(_weight_array(draw, (S, A, S)))
        local = _locals(draw, (S, A))
        policy = draw(policies(S, A))
    else:
        S, A, full, rng, w = _seeded_kernel(draw, max_states, max_actions)
        P = _normalize(w)
        local = rng.random(full[:2])[:S, :A] * draw(st.sampled_from((1.0, 1e-6, 1e6)))
        actions = rng.integers(0, 2**31, size=max_states)[:S] % A
        probs = _seeded_weights(rng, full[:2], draw(st.sampled_from(_STYLES)))[:S, :A]
        policy = actions if draw(st.booleans()) else _normalize(probs)
    return {"mean_transitions": P, "policy": policy, "local": local, "discount": draw(discounts())}


@st.composite
def moment_matching_instances(draw, max_states: int = 4, max_actions: int = 3):
    """``{"alpha", "reward_mean", "reward_var", "policy", "discount"}`` of the moment-matching
    variance equation (bayesian-methods-tabular-rl App. MM), entry by entry."""
    S, A = _sizes(draw, (1, max_states), (1, max_actions))
    return {
        "alpha": draw(dirichlet_posteriors(S, A)),
        "reward_mean": _value_array(draw, (S, A, S), scales=(1.0, 1e-3, 1e3)),
        "reward_var": _locals(draw, (S, A, S)),
        "policy": draw(policies(S, A)),
        "discount": draw(discounts((0.9, 0.0, 0.5, 0.99))),
    }


#: Confidence radii of the optimistic problems (per pair).
OPTIMISTIC_RADII = (0.1, 0.0, 1e-12, 1e-4, 0.5, 2.0, 10.0, 1e3)


@st.composite
def optimistic_instances(
    draw,
    criterion: str = "discounted",
    max_states: int = 12,
    max_actions: int = 4,
    masks: bool = True,
):
    """``{"p_hat", "r_hat", "radius", "reward_radius", "discount"?, "action_mask"?}`` of
    :class:`~optplan.OptimisticPlanning`: sparse ``p_hat`` with tiny masses, rewards with
    ties, radii per pair from 0 to 1e3 (0: known transitions), masks."""
    if not _large(draw, max_states, 4):
        S, A = _sizes(draw, (1, min(4, max_states)), (1, min(3, max_actions)))
        P = _normalize(_weight_array(draw, (S, A, S)))
        R = _value_array(draw, (S, A), scales=(1.0, 1e-3, 1e3))
        n = S * A
        radius = np.array(
            draw(st.lists(st.sampled_from(OPTIMISTIC_RADII), min_size=n, max_size=n))
        ).reshape(S, A)
        beta = np.array(
            draw(st.lists(st.sampled_from((0.0, 0.1, 1e-6, 1.0)), min_size=n, max_size=n))
        ).reshape(S, A)
        mask = draw(_mask((S, A))) if masks and draw(st.booleans()) else None
    else:
        S, A, full, rng, w = _seeded_kernel(draw, max_states, max_actions)
        P = _normalize(w)
        R = rng.random(full[:2])[:S, :A]
        n = rng.integers(1, 501, size=full[:2])[:S, :A]
        radius = np.sqrt(2.0 * S / n) * draw(st.sampled_from((1.0, 0.01, 10.0)))
        beta = np.sqrt(1.0 / n)
        full_mask = _seeded_mask(rng, full[:2])
        mask = _cut_mask(full_mask[:S], A) if masks and draw(st.booleans()) else None
    out = {"p_hat": P, "r_hat": R, "radius": radius, "reward_radius": beta}
    if criterion == "discounted":
        out["discount"] = draw(discounts((0.9, 0.0, 0.5, 0.99)))
    if mask is not None:
        out["action_mask"] = mask
    return out


@st.composite
def clipped_optimistic_instances(
    draw, max_states: int = 20, max_actions: int = 4, masks: bool = True
):
    """``{"p_hat", "r", "bonus", "discount", "action_mask"?}`` of RAVI-UCB's clipped fixed
    point: substochastic ``p_hat`` (rows summing to 1 or less), rewards in ``[0, 1]`` (0 and
    1 included), bonuses from 0 to 100 (clipping at ``H`` or not)."""
    if not _large(draw, max_states, 4):
        S, A = _sizes(draw, (1, min(4, max_states)), (1, min(3, max_actions)))
        n = S * A
        keep = np.array(
            draw(st.lists(st.sampled_from((1.0, 0.5, 0.0, 0.99)), min_size=n, max_size=n))
        ).reshape(S, A, 1)
        P = _normalize(_weight_array(draw, (S, A, S))) * keep
        r = np.array(
            draw(
                st.lists(
                    st.one_of(st.sampled_from((0.5, 0.0, 1.0)), st.floats(0, 1)),
                    min_size=n,
                    max_size=n,
                )
            )
        ).reshape(S, A)
        bonus = np.array(
            draw(st.lists(st.sampled_from((0.0, 0.1, 1.0, 100.0, 1e-9)), min_size=n, max_size=n))
        ).reshape(S, A)
        mask = draw(_mask((S, A))) if masks and draw(st.booleans()) else None
    else:
        S, A, full, rng, w = _seeded_kernel(draw, max_states, max_actions)
        N = np.floor(np.exp(rng.uniform(0.0, np.log(500.0), full[:2])))[:S, :A]
        P = _normalize(w) * ((N - 1) / N)[..., None]
        r = (rng.random(full[:2]) ** 3)[:S, :A]
        scale = draw(st.sampled_from((1.0, 10.0)))
        bonus = rng.uniform(0.0, 3.0, full[:2])[:S, :A] / np.sqrt(N) * scale
        full_mask = _seeded_mask(rng, full[:2])
        mask = _cut_mask(full_mask[:S], A) if masks and draw(st.booleans()) else None
    out = {
        "p_hat": P,
        "r": r,
        "bonus": bonus,
        "discount": draw(st.sampled_from((0.9, 0.5, 0.99, 0.3))),
    }
    if mask is not None:
        out["action_mask"] = mask
    return out
