"""The model classification and ``op.describe`` on sparse models: the same classification as
the dense model (and as a brute-force reference on the transition graph), multichain models
included, and ``describe`` of a large sparse model without a dense copy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import optplan as op
from optplan import hardness
from optplan import mdp as mdp_module
from optplan._checks import OptplanError
from optplan.dp import classify


def random_structured(seed: int):
    """A random model, often multichain: states split into blocks, some closed (their pairs
    stay in the block), the others free to go anywhere; a few successors per pair, sometimes
    a mask, sometimes absorbing states."""
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    mode = seed % 4
    if mode >= 2:  # a ring through a core (communicating), the rest leaving it (weakly)
        return ring_model(rng, S + 1, A, core=S + 1 if mode == 2 else (S + 2) // 2)
    n_blocks = int(rng.integers(1, 5))
    block = rng.integers(0, n_blocks, S)
    closed_block = rng.random(n_blocks) < 0.6
    P = np.zeros((S, A, S))
    for s in range(S):  # test data only
        if closed_block[block[s]]:
            pool = np.flatnonzero(block == block[s])
        else:
            pool = np.arange(S)
        if rng.random() < 0.1:
            pool = np.array([s])  # absorbing
        for a in range(A):
            k = int(rng.integers(1, min(len(pool), 3) + 1))
            succ = rng.choice(pool, size=k, replace=False)
            P[s, a, succ] = rng.dirichlet(np.ones(k))
    mask = None
    if A > 1 and rng.random() < 0.5:
        mask = rng.random((S, A)) < 0.6
        mask[np.arange(S), rng.integers(0, A, S)] = True
    R = rng.random((S, A))
    return op.TabularMDP(P, R, action_mask=mask)


def ring_model(rng, S: int, A: int, core: int):
    """States ``0..core-1`` on a ring (every pair steps to the next with probability 1/2,
    elsewhere in the core with the rest): communicating; states from ``core`` on move into
    the core only, so they are transient under every policy (weakly communicating)."""
    P = np.zeros((S, A, S))
    for s in range(S):  # test data only
        for a in range(A):
            target = np.flatnonzero(np.arange(S) < core)
            k = int(rng.integers(1, min(len(target), 3) + 1))
            succ = rng.choice(target, size=k, replace=False)
            P[s, a, succ] = rng.dirichlet(np.ones(k)) * (0.5 if s < core else 1.0)
            if s < core:
                P[s, a, (s + 1) % core] += 0.5
    mask = None
    if A > 1 and rng.random() < 0.5:
        mask = rng.random((S, A)) < 0.6
        mask[np.arange(S), rng.integers(0, A, S)] = True
    return op.TabularMDP(P, rng.random((S, A)), action_mask=mask)


def reference_classes(P: np.ndarray, mask: np.ndarray):
    """Closed sets, transient states, communicating and weakly communicating by brute force:
    the transitive closure of the graph by repeated squaring, the staying set by removing
    states one round at a time."""
    S = P.shape[0]
    reach = (P > 0) & mask[:, :, None]
    edges = reach.any(axis=1)
    R = edges | np.eye(S, dtype=bool)
    for _ in range(S.bit_length() + 1):
        R = (R.astype(int) @ R.astype(int)) > 0
    mutual = R & R.T
    closed_state = ~(R & ~mutual).any(axis=1)
    sets = {tuple(np.flatnonzero(mutual[s])) for s in range(S) if closed_state[s]}
    closed_sets = sorted(sets)
    outside = ~closed_state
    X = outside.copy()
    while True:
        stays = np.array(
            [
                X[s] and any(mask[s, a] and not (reach[s, a] & ~X).any() for a in range(P.shape[1]))
                for s in range(S)
            ],
            dtype=bool,
        )
        if np.array_equal(stays, X):
            break
        X = stays
    communicating = bool(mutual.all())
    weakly = len(closed_sets) == 1 and not X.any()
    return closed_sets, outside & ~X, communicating, weakly


def assert_same_class(a, b):
    assert (a.kind, a.communicating, a.weakly_communicating, a.unichain) == (
        b.kind,
        b.communicating,
        b.weakly_communicating,
        b.unichain,
    )
    assert [s.tolist() for s in a.closed_sets] == [s.tolist() for s in b.closed_sets]
    assert np.array_equal(a.transient, b.transient)


@pytest.mark.parametrize("seed", range(60))
def test_classification_dense_equals_sparse_equals_reference(seed):
    dense = random_structured(seed)
    sparse = dense.to_sparse()
    a = classify(dense.P, dense.action_mask)
    b = classify(sparse.P_rows, sparse.action_mask)
    c = classify(dense.P_rows, dense.action_mask)  # the dense row matrix
    assert_same_class(a, b)
    assert_same_class(a, c)
    closed_sets, transient, communicating, weakly = reference_classes(dense.P, dense.action_mask)
    assert [tuple(s) for s in a.closed_sets] == closed_sets
    assert np.array_equal(a.transient, transient)
    assert (a.communicating, a.weakly_communicating) == (communicating, weakly)
    assert (a.kind == "multichain") == (not weakly)


def test_the_suite_covers_every_kind():
    kinds = {classify(m.P, m.action_mask).kind for m in map(random_structured, range(60))}
    assert kinds >= {"multichain", "communicating", "unichain", "weakly_communicating"}


def test_a_long_removal_chain_is_classified_sparse():
    # state i > 0 can only step to i - 1, state 0 is absorbing: every state but 0 is
    # transient under every policy; the staying set is emptied one state a round
    S = 2_000
    rows = np.arange(S)
    cols = np.maximum(rows - 1, 0)
    P = sp.csr_matrix((np.ones(S), (rows, cols)), shape=(S, S))
    c = classify(P, np.ones((S, 1), bool))
    assert c.kind == "unichain" and c.transient[1:].all() and not c.transient[0]
    assert [s.tolist() for s in c.closed_sets] == [[0]]
    # a second action staying put, admissible in the even states: those can stay outside
    # the closed set {0} (multichain), and so can the odd ones (by stepping to an even one)
    # but state 1, whose only move enters the closed set
    step = np.column_stack([cols, rows]).ravel()  # row s*2 + a: a = 0 steps, a = 1 stays
    P2 = sp.csr_matrix((np.ones(2 * S), step, np.arange(2 * S + 1)), shape=(2 * S, S))
    mask = np.ones((S, 2), bool)
    mask[1::2, 1] = False
    c = classify(P2, mask)
    assert c.kind == "multichain" and [s.tolist() for s in c.closed_sets] == [[0]]
    assert np.array_equal(c.transient, rows == 1)
    dense = P2.toarray().reshape(S, 2, S)
    assert_same_class(c, classify(dense, mask))
    small = 60  # the reference, on the first states (a model of its own: 0..59)
    closed_sets, transient, _, weakly = reference_classes(dense[:small, :, :small], mask[:small])
    assert closed_sets == [(0,)] and np.array_equal(transient, rows[:small] == 1) and not weakly


def test_unichain_enumeration_on_a_large_sparse_model_with_one_policy():
    # one action a state: one policy, checked by its strongly connected components
    S = 500
    rng = np.random.default_rng(1)
    cols = rng.integers(0, S, size=(S, 3))
    vals = rng.dirichlet(np.ones(3), size=S)
    ring = np.column_stack([cols, (np.arange(S) + 1) % S])
    data = np.column_stack([vals * 0.5, np.full(S, 0.5)])
    P = sp.csr_matrix((data.ravel(), ring.ravel(), np.arange(S + 1) * 4), shape=(S, S))
    c = classify(P, np.ones((S, 1), bool))
    assert c.kind == "unichain" and c.unichain is True


# -- describe -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_describe_dense_equals_sparse(seed):
    dense = random_structured(100 + seed)
    sparse = dense.to_sparse()
    da, db = op.describe(dense, method="fast"), op.describe(sparse, method="fast")
    assert da.structure == db.structure
    scale = 1.0 + float(np.abs(dense.R).max())
    assert np.abs(np.asarray(da.gain["per_state"]) - np.asarray(db.gain["per_state"])).max() <= (
        1e-9 * scale
    )
    assert abs(da.bias_span - db.bias_span) <= 1e-8 * scale * max(1.0, da.bias_span)
    assert da.mixing["recurrent_classes"] == db.mixing["recurrent_classes"]
    assert da.mixing["t_mix"] == db.mixing["t_mix"]
    if da.diameter["value"] is not None and np.isfinite(da.diameter["value"]):
        assert abs(da.diameter["value"] - db.diameter["value"]) <= 1e-8 * da.diameter["value"]
    assert (da.lower_bound.get("value") is None) == (db.lower_bound.get("value") is None)
    assert da.gaps["gain"]["pairs"] == db.gaps["gain"]["pairs"]
    assert da.gaps["gain"]["zero"] == db.gaps["gain"]["zero"]


def large_sparse(S: int, A: int = 3, k: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, S, size=(S * A, k))
    vals = rng.dirichlet(np.ones(k), size=S * A)
    P = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(S * A + 1) * k), shape=(S * A, S))
    return op.TabularMDP(P, rng.random((S, A)))


def test_describe_a_large_sparse_model_without_a_dense_copy(monkeypatch):
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", 8)  # any dense copy is refused
    m = large_sparse(5_000)
    d = op.describe(m, method="fast")
    assert d.structure["kind"] in {"communicating", "unichain"}
    assert d.gain["constant"] and d.gain["status"] == "optimal"
    assert d.mixing["t_mix"] is None and "not computed" in d.mixing["why"]
    assert d.mixing["recurrent_classes"] == 1
    assert d.lower_bound["value"] is None and "sparse" in d.lower_bound["why"]
    text = str(d)
    assert "mixing - (not computed" in text
    # the gain and bias: the sparse average-reward path's
    avg = op.AverageRewardPlanning(m).solve()
    assert abs(d.gain["min"] - avg.gain) <= 1e-12 * max(1.0, abs(avg.gain))


def test_describe_refuses_a_large_sparse_multichain_model_naming_why():
    S = hardness.SPARSE_DENSE_PARTS_MAX_STATES + 1
    rows = np.arange(S)
    P = sp.csr_matrix((np.ones(S), (rows, rows)), shape=(S, S))  # every state absorbing
    m = op.TabularMDP(P, np.random.default_rng(0).random((S, 1)))
    with pytest.raises(OptplanError, match=rf"sparse model \(S={S}\) is multichain \({S} closed"):
        op.describe(m, method="fast")


@pytest.mark.slow
def test_describe_a_sparse_model_of_a_hundred_thousand_states(monkeypatch):
    monkeypatch.setattr(mdp_module, "DENSE_VIEW_MAX_BYTES", 8)
    d = op.describe(large_sparse(100_000), method="fast")
    assert d.n_states == 100_000 and d.structure["weakly_communicating"]
    assert d.gain["constant"]
