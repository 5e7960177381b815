"""Random index instances for the KL tests: sizes 1..60, sparse and dense p, ties, zeros."""

import numpy as np


def instance(seed: int, S: int | None = None):
    """``(p, v)`` with a variety of structure chosen by ``seed``."""
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
