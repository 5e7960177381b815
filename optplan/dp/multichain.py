"""Chains and models with several recurrent classes: each class's gain, multichain policy
evaluation and policy iteration (to a bias-optimal policy), the limiting matrix, and the
classification of a model's communication structure."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL
from ._common import (
    DENSE_CLASSES_MAX_STATES,
    EvaluationError,
    backup,
    closed_classes,
    finite_scale,
    greedy,
    masked,
    n_recurrent_classes,
    policy_model,
    solve_system,
    start_policy,
)
from .average import evaluate_average, stationary
from .sparse_average import sparse_recurrent_classes


def class_gains(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """Gain of each recurrent class of a deterministic policy's chain (one entry if unichain)."""
    P_pi, r_pi = policy_model(P, R, policy)
    if n_recurrent_classes(P_pi) == 1:
        return np.array([evaluate_average(P_pi, r_pi)[0]])
    _, labels, closed = closed_classes(P_pi)
    gains = []
    for c in np.flatnonzero(closed):  # loop over recurrent classes, not states
        idx = np.flatnonzero(labels == c)
        gains.append(evaluate_average(P_pi[np.ix_(idx, idx)], r_pi[idx])[0])
    return np.array(gains)


class MultichainEvaluation(NamedTuple):
    """Gain and bias of a deterministic policy on any chain (:func:`evaluate_multichain`)."""

    gain: np.ndarray
    bias: np.ndarray
    labels: np.ndarray
    recurrent: np.ndarray
    stationary: np.ndarray


def evaluate_multichain(P_pi: np.ndarray, r_pi: np.ndarray) -> MultichainEvaluation:
    """Gain ``g`` and bias ``h`` of a chain with any number of recurrent classes (Puterman
    §8.2.3, §9.2.1): ``(I - P) g = 0``, ``g + (I - P) h = r``, ``P* h = 0``.

    On each recurrent class ``C`` (stationary distribution ``mu_C``): ``g_C = mu_C @ r_C``
    (constant) and ``h_C`` is the class's bias with ``mu_C @ h_C = 0``, one normalization per
    class. On the transient states ``T``: ``(I - P_TT) g_T = P_TR g_R`` and
    ``(I - P_TT) h_T = r_T - g_T + P_TR h_R``. Then ``P* h = 0`` holds (rows of ``P*`` are
    mixtures of the ``mu_C``), so ``h`` is the bias ``H_P r``. Returns also ``labels[s]``
    (class of each state, ``-1`` transient), the recurrent mask and ``stationary[s]``
    (``mu_C`` on each class, 0 on transient states).
    """
    S = r_pi.shape[0]
    n, labels, closed = closed_classes(P_pi)
    recurrent = closed[labels]
    g = np.zeros(S)
    h = np.zeros(S)
    mu = np.zeros(S)
    out_labels = np.full(S, -1)
    for k, c in enumerate(np.flatnonzero(closed)):  # loop over recurrent classes
        idx = np.flatnonzero(labels == c)
        P_c, r_c = P_pi[np.ix_(idx, idx)], r_pi[idx]
        gain_c, h_c = evaluate_average(P_c, r_c)
        mu_c = stationary(P_c)
        g[idx] = gain_c
        h[idx] = h_c - mu_c @ h_c
        mu[idx] = mu_c
        out_labels[idx] = k
    T = np.flatnonzero(~recurrent)
    if T.size:
        Rc = np.flatnonzero(recurrent)
        M = np.eye(T.size) - P_pi[np.ix_(T, T)]
        P_TR = P_pi[np.ix_(T, Rc)]
        g[T] = solve_system(M, P_TR @ g[Rc], "the transient states' gain")
        h[T] = solve_system(M, r_pi[T] - g[T] + P_TR @ h[Rc], "the transient states' bias")
    return MultichainEvaluation(g, h, out_labels, recurrent, mu)


def near_max(x: np.ndarray, tol: float, scale: float | None = None) -> np.ndarray:
    """``x >= max(x) - tol * size`` along the last axis (``-inf`` entries never): within
    ``tol`` of the row's maximum, ``size`` being ``scale`` when given (policy iteration passes
    the size of the whole array, :func:`finite_scale`, so its sets are scale-free) and
    ``1 + |max|`` of the row otherwise."""
    top = x.max(axis=-1, keepdims=True)
    size = 1.0 + np.abs(top) if scale is None else scale
    return np.isfinite(x) & (x >= top - tol * size)


class MultichainPolicyIteration(NamedTuple):
    """Outcome of :func:`multichain_policy_iteration` (``evaluation`` of the last policy)."""

    status: str
    message: str
    policy: np.ndarray
    evaluation: MultichainEvaluation | None
    iterations: int


def multichain_policy_iteration(
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
    tol: float = 1e-12,
) -> MultichainPolicyIteration:
    """Multichain policy iteration (Puterman §9.2.1) carried one level further, to a
    bias-optimal policy (Puterman §10.3, n-discount policy iteration with n = 0).

    Evaluate ``d``: gain ``g`` and bias ``h`` by :func:`evaluate_multichain`, and ``w`` with
    ``h + (I - P_d) w = 0`` (the same evaluation with reward ``-h``). Improve first on the
    gain: ``d'(s)`` in ``argmax_a P(s, a) g``, keeping ``d(s)`` when it attains the maximum
    (within ``tol``, relative). Only when that changes nothing, improve on the bias among
    those actions (``A1``): ``argmax_{A1} r + P h``; only when that changes nothing, on
    ``argmax_{A2} P w`` among the bias-maximizing actions ``A2``. Stop when the policy
    repeats. Then ``g`` is the optimal gain from every state, ``(g, h)`` solves the
    multichain optimality equations ``g = max_a P g``, ``g + h = max_{A1} (r + P h)``, and
    ``h`` is the largest bias of any gain-optimal policy (a bias-optimal policy, Puterman
    §10.3): unique, whichever optimal policy is returned (checked against every policy of
    small models in ``tests/test_multichain.py``). The first two levels alone are Puterman §9.2's
    multichain policy iteration; they stop at a gain-optimal policy whose bias solves the
    equations but may be smaller (a zero-reward loop beside an absorbing goal).
    """
    policy = start_policy(R, mask, policy)
    ev = None
    zero = np.zeros_like(R)
    for it in range(1, max_iter + 1):
        P_pi, r_pi = policy_model(P, R, policy)
        try:
            ev = evaluate_multichain(P_pi, r_pi)
        except EvaluationError as exc:
            message = f"multichain policy iteration, iteration {it}: {exc}"
            return MultichainPolicyIteration(NUMERICAL_ERROR, message, policy, None, it)
        pg = masked(backup(P, zero, ev.gain), mask)
        new = greedy(pg, policy, tol=tol, scale=finite_scale(pg))
        if np.array_equal(new, policy):
            a1 = mask & near_max(pg, tol, finite_scale(pg))
            q = masked(backup(P, R, ev.bias), a1)
            new = greedy(q, policy, tol=tol, scale=finite_scale(q))
            if np.array_equal(new, policy):
                try:
                    w = evaluate_multichain(P_pi, -ev.bias).bias
                except EvaluationError as exc:
                    message = f"multichain policy iteration, iteration {it}: {exc}"
                    return MultichainPolicyIteration(NUMERICAL_ERROR, message, policy, ev, it)
                pw = masked(backup(P, zero, w), a1 & near_max(q, tol, finite_scale(q)))
                # ties relative to the action values too: where every gain-optimal policy has
                # the same bias, h and so w are round-off, and a tie test relative to w alone
                # would compare noise with noise (and cycle)
                size = max(finite_scale(pw), finite_scale(q))
                new = greedy(pw, policy, tol=tol, scale=size)
                if np.array_equal(new, policy):
                    return MultichainPolicyIteration(OPTIMAL, "", policy, ev, it)
        evaluated, policy = policy, new
    message = f"multichain policy iteration did not stop in {max_iter} iterations"
    # the last evaluated policy, with its evaluation (``new`` has none)
    return MultichainPolicyIteration(MAX_ITER, message, evaluated, ev, max_iter)


class ModelClass(NamedTuple):
    """Communication structure of a model (:func:`classify`; Puterman §8.3.1).

    ``kind`` is the most specific of ``"unichain"`` (proved: every deterministic policy has
    one recurrent class), ``"communicating"``, ``"weakly_communicating"``, ``"multichain"``
    (some policy has two or more recurrent classes); a unichain model is also weakly
    communicating, and ``communicating`` is reported beside it. ``unichain`` is ``None`` when
    undecided: deciding it is NP-hard in general (Tsitsiklis 2007), and :func:`classify`
    enumerates policies only up to ``max_policies``. ``closed_sets`` are the closed
    strongly connected components of the graph of all admissible transitions (each holds a
    recurrent class of every policy); ``transient`` marks the states transient under every
    policy (every state outside the closed sets that no policy can keep out of them; the
    rest may still be transient under every policy when there are several closed sets).
    """

    kind: str
    communicating: bool
    weakly_communicating: bool
    unichain: bool | None
    closed_sets: list
    transient: np.ndarray


def classify(P, mask: np.ndarray, max_policies: int = 4096) -> ModelClass:
    """Classify a model by graph algorithms on ``G`` (an edge ``s -> s'`` when some admissible
    action reaches ``s'`` with positive probability).

    ``P`` is dense ``(S, A, S)`` or the ``(S·A, S)`` matrix of rows ``s·A + a`` (a sparse
    model's :attr:`~optplan.mdp.TabularMDP.P_rows`, dense or ``scipy.sparse``): only the
    support's entries are read, so a sparse model is never densified. ``G``'s strongly
    connected components come from ``scipy.sparse.csgraph``; ``closed_sets`` are listed in
    the order of their smallest state, each sorted.

    * communicating iff ``G`` is strongly connected;
    * two or more closed components of ``G`` make every policy multichain;
    * with one closed component ``C`` (strongly connected, so communicating within), the
      model is weakly communicating iff the other states are transient under every policy,
      i.e. no nonempty set ``X`` outside ``C`` in which every state has an action staying in
      ``X`` (the greatest such set is the fixed point of removing the states without one,
      computed by propagating each removal to the pairs that reach the removed state);
      otherwise a policy staying in ``X`` has a recurrent class there besides ``C``'s;
    * unichain: refuted or proved by enumerating the deterministic policies when there are at
      most ``max_policies``; a weakly communicating model is then unichain iff no policy has
      two recurrent classes.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    mask = np.asarray(mask, dtype=bool)
    S, A = mask.shape
    if hasattr(P, "tocsr") and not (P.format == "csr" and P.has_canonical_format):
        # a model's rows are canonical; raw input is made so (scipy's strongly connected
        # components do not return on a CSR matrix with unsorted duplicate entries)
        P = P.tocsr(copy=True)
        P.sum_duplicates()
    rows, cols = _support(P, S, A)
    keep = mask.reshape(-1)[rows]
    rows, cols = rows[keep], cols[keep]  # the admissible pairs' entries
    src = rows // A
    graph = csr_matrix((np.ones(rows.size), (src, cols)), shape=(S, S))
    n, labels = connected_components(graph, directed=True, connection="strong")
    closed = np.ones(n, dtype=bool)
    closed[labels[src[labels[src] != labels[cols]]]] = False
    closed_sets = _closed_sets(labels, closed)
    communicating = bool(n == 1)
    outside = ~closed[labels]
    X = _staying_set(rows, cols, outside, mask)
    transient = outside & ~X
    if len(closed_sets) > 1:
        return ModelClass("multichain", False, False, False, closed_sets, transient)
    weakly = not X.any()
    if not weakly:
        return ModelClass("multichain", False, False, False, closed_sets, transient)
    unichain = _unichain_by_enumeration(P, mask, max_policies)
    kind = "unichain" if unichain else "communicating" if communicating else "weakly_communicating"
    return ModelClass(kind, communicating, True, unichain, closed_sets, transient)


def _support(P, S: int, A: int) -> tuple[np.ndarray, np.ndarray]:
    """``(row, s')`` of every positive entry of ``P`` (rows ``s·A + a``), in row order."""
    if P.ndim == 3:
        P = P.reshape(S * A, S)
    if hasattr(P, "tocoo"):  # scipy.sparse: its stored entries
        coo = P.tocoo()
        pos = coo.data > 0
        rows, cols = coo.row[pos].astype(np.int64), coo.col[pos].astype(np.int64)
        order = np.argsort(rows, kind="stable")
        return rows[order], cols[order]
    rows, cols = np.nonzero(P > 0)
    return rows.astype(np.int64), cols.astype(np.int64)


def _closed_sets(labels: np.ndarray, closed: np.ndarray) -> list:
    """The states of each closed component, sorted, the components ordered by their smallest
    state (grouped by one sort: no loop over components)."""
    order = np.argsort(labels, kind="stable")  # states grouped by component, increasing
    counts = np.bincount(labels, minlength=closed.size)
    groups = np.split(order, np.cumsum(counts)[:-1])
    sets = [g for g, c in zip(groups, closed, strict=True) if c]
    sets.sort(key=lambda g: int(g[0]))
    return sets


def _staying_set(rows, cols, X: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The greatest subset of ``X`` whose every state has an admissible action with all its
    successors in the subset: states without one are removed, and each removal is propagated
    to the pairs that reach the removed states only (entries grouped by successor), so the
    work is one pass over the entries whatever the number of rounds."""
    S, A = mask.shape
    X = X.copy()
    flat_mask = mask.reshape(-1)
    # out[r]: entries of pair r whose successor is outside the current X
    out = np.bincount(rows, weights=~X[cols], minlength=S * A)
    ok = flat_mask & (out == 0)
    n_ok = ok.reshape(S, A).sum(axis=1)
    by_col = np.argsort(cols, kind="stable")
    col_ptr = np.searchsorted(cols[by_col], np.arange(S + 1))
    frontier = np.flatnonzero(X & (n_ok == 0))
    while frontier.size:  # rounds of removals; each entry is visited once over all rounds
        X[frontier] = False
        starts, ends = col_ptr[frontier], col_ptr[frontier + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if total == 0:
            break
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        hit = rows[by_col[offsets + np.arange(total)]]
        pairs, times = np.unique(hit, return_counts=True)
        newly = flat_mask[pairs] & (out[pairs] == 0)  # pairs that stayed in X until now
        out[pairs] += times
        states = np.unique(pairs[newly] // A)
        lost = np.bincount(pairs[newly] // A, minlength=S)[states]
        n_ok[states] -= lost
        frontier = states[X[states] & (n_ok[states] == 0)]
    return X


def _unichain_by_enumeration(P, mask, max_policies):
    """True/False by checking every deterministic policy, ``None`` when there are more than
    ``max_policies`` (a loop over policies: a classification, not a hot path). ``P`` in
    either layout of :func:`classify`; a sparse policy chain is checked by its strongly
    connected components, or densely (``S x S``) up to
    :data:`~optplan.dp.DENSE_CLASSES_MAX_STATES` states."""
    counts = mask.sum(axis=1)
    with np.errstate(over="ignore"):  # inf on a large model: more than max_policies
        if float(np.prod(counts.astype(float))) > max_policies:
            return None
    S, A = mask.shape
    # table[s, i]: the i-th admissible action of s; every policy as a row of choices, the
    # policy's number read in the mixed radix of the counts (any number of states)
    table = np.argsort(~mask, axis=1, kind="stable")
    n_policies = int(np.prod(counts))
    strides = np.concatenate(([1], np.cumprod(counts[::-1])[:-1]))[::-1]
    idx = np.arange(S)
    policies = (table[idx, (k // strides) % counts] for k in range(n_policies))
    rows = P if P.ndim == 2 else None
    sparse = hasattr(P, "tocsr")
    for policy in policies:  # loop over policies (bounded by max_policies)
        if rows is None:
            chain = P[idx, policy]
        else:
            chain = rows[idx * A + policy]
            if sparse:
                if S > DENSE_CLASSES_MAX_STATES:
                    if sparse_recurrent_classes(chain.tocsr()) > 1:
                        return False
                    continue
                chain = chain.toarray()
        if n_recurrent_classes(chain) > 1:
            return False
    return True


def limiting_matrix(P_pi: np.ndarray, ev: MultichainEvaluation | None = None) -> np.ndarray:
    """``P* = lim (1/n) sum_{k<n} P^k`` (Puterman §A.4): on a recurrent class every row is the
    class's stationary distribution; a transient row mixes them with the absorption
    probabilities ``(I - P_TT)^{-1} P_TR``."""
    if ev is None:
        ev = evaluate_multichain(P_pi, np.zeros(P_pi.shape[0]))
    rec, T = np.flatnonzero(ev.recurrent), np.flatnonzero(~ev.recurrent)
    S = P_pi.shape[0]
    star = np.zeros((S, S))
    same = ev.labels[rec][:, None] == ev.labels[rec][None, :]
    star[np.ix_(rec, rec)] = same * ev.stationary[rec][None, :]
    if T.size:
        absorb = solve_system(
            np.eye(T.size) - P_pi[np.ix_(T, T)], P_pi[np.ix_(T, rec)], "absorption probabilities"
        )
        star[T] = absorb @ star[rec]
    return star
