"""Dynamic programming on known tabular models, shared by every layer above.

Bellman backups, policy evaluation (discounted, average reward, layered), Howard policy
iteration with a warm start (discounted and average reward), value iteration, relative value
iteration, backward induction, occupancy measures and recurrent classes. The fast planning
paths, the conic paths' post-processing, ``compare``, the agents and the metrics all use these
one implementations.

All are vectorized over states and actions; the only Python loops are over iterations
(policy/value iteration), layers (finite horizon) or recurrent classes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .result import MAX_ITER, MULTICHAIN, NUMERICAL_ERROR, OPTIMAL


def masked(q: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``q`` with inadmissible actions set to ``-inf``."""
    return np.where(mask, q, -np.inf)


def backup(P: np.ndarray, R: np.ndarray, v: np.ndarray, discount: float = 1.0) -> np.ndarray:
    """``Q[s, a] = R[s, a] + discount * sum_s' P[s, a, s'] v[s']``."""
    S, A = R.shape
    return R + discount * (P.reshape(S * A, -1) @ v).reshape(S, A)


def greedy(qm: np.ndarray, prev: np.ndarray | None = None, tol: float = 0.0) -> np.ndarray:
    """Argmax over the last axis; where ``prev`` is within ``tol`` of the max, keep it.

    Keeping the incumbent on ties is what makes policy iteration terminate (Puterman §6.4, §8.6).
    """
    best = qm.argmax(axis=-1)
    if prev is None:
        return best
    top = np.take_along_axis(qm, best[..., None], -1)[..., 0]
    incumbent = np.take_along_axis(qm, prev[..., None], -1)[..., 0]
    return np.where(incumbent >= top - tol * (1.0 + np.abs(top)), prev, best)


def policy_model(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Markov chain ``P_pi[s, s']`` and reward ``r_pi[s]`` of a deterministic policy."""
    idx = np.arange(R.shape[0])
    return P[idx, policy], R[idx, policy]


#: Up to this many states, :func:`closed_classes` takes the dense transitive closure (a few
#: boolean matrix products, ~20 us at S = 50) instead of scipy's strongly connected
#: components (~0.5 ms of sparse-matrix setup at any size): optimistic policy iteration asks
#: once per step.
DENSE_CLASSES_MAX_STATES = 128


def closed_classes(P_pi: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Recurrent classes of a chain: ``(count, labels[s], closed[label])``.

    A strongly connected component is recurrent iff no transition leaves it. Labels number
    the components in the order of their smallest state up to
    :data:`DENSE_CLASSES_MAX_STATES` states (scipy's order beyond).
    """
    S = P_pi.shape[0]
    if S <= DENSE_CLASSES_MAX_STATES:
        return _closed_classes_dense(P_pi > 0)
    # scipy.sparse here, not at the top: it is most of the cost of importing optplan.dp
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    rows, cols = np.nonzero(P_pi > 0)
    graph = csr_matrix((np.ones(rows.size), (rows, cols)), shape=P_pi.shape)
    n, labels = connected_components(graph, directed=True, connection="strong")
    leaving = labels[rows] != labels[cols]
    closed = np.ones(n, dtype=bool)
    closed[labels[rows[leaving]]] = False
    return int(closed.sum()), labels, closed


def _closed_classes_dense(edges: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """:func:`closed_classes` from the reflexive-transitive closure ``R`` by repeated
    squaring (float32 products are exact: entries count paths through at most 128 states):
    ``s ~ t`` iff ``R[s, t]`` and ``R[t, s]``; a component is closed iff every state it
    reaches is in it."""
    S = edges.shape[0]
    reach = edges | np.eye(S, dtype=bool)
    while True:  # at most log2(S) + 1 squarings
        f = reach.astype(np.float32)
        wider = (f @ f) > 0
        if (wider == reach).all():
            break
        reach = wider
    mutual = reach & reach.T
    first, labels = np.unique(mutual.argmax(axis=1), return_inverse=True)
    closed = ~(reach & ~mutual).any(axis=1)[first]
    return int(closed.sum()), labels, closed


def n_recurrent_classes(P_pi: np.ndarray) -> int:
    """Number of recurrent classes; O(S^2) shortcut when some state is entered from every state."""
    if (P_pi > 0).all(axis=0).any():
        return 1
    return closed_classes(P_pi)[0]


def evaluate_discounted(P_pi: np.ndarray, r_pi: np.ndarray, discount: float) -> np.ndarray:
    """``V = (I - discount P_pi)^{-1} r_pi``."""
    S = r_pi.shape[0]
    return np.linalg.solve(np.eye(S) - discount * P_pi, r_pi)


def discounted_occupancy(P_pi: np.ndarray, start: np.ndarray, discount: float) -> np.ndarray:
    """Normalized discounted state occupancy ``(1-discount) start^T (I - discount P_pi)^{-1}``."""
    S = start.shape[0]
    return np.linalg.solve((np.eye(S) - discount * P_pi).T, (1.0 - discount) * start)


def generator(P_pi: np.ndarray) -> np.ndarray:
    """``I - P_pi`` with the diagonal computed as the off-diagonal row sums (Grassmann, Taksar
    and Heyman's device): no subtraction ``1 - P_ss``, which would turn a state left with
    probability 1e-20 (or 4e-320) into an absorbing one and make the system singular."""
    M = -P_pi.copy()
    idx = np.arange(P_pi.shape[0])
    M[idx, idx] = 0.0
    M[idx, idx] = -M.sum(axis=1)
    return M


class EvaluationError(ArithmeticError):
    """Policy evaluation cannot be carried out in double precision (a singular system, or a
    bias beyond the double range); the message says which and why."""


def stationary(P_pi: np.ndarray) -> np.ndarray:
    """Stationary distribution of a unichain chain: ``pi (I - P_pi) = 0``, ``sum pi = 1``.

    For a unichain chain the left null space of ``I - P_pi`` is one-dimensional and any row of
    ``(I - P_pi)^T`` may be replaced by the normalization.
    """
    S = P_pi.shape[0]
    M = generator(P_pi).T
    M[-1, :] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    pi = solve_system(M, b, "the stationary distribution")
    return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()


def evaluate_average(P_pi: np.ndarray, r_pi: np.ndarray) -> tuple[float, np.ndarray]:
    """Gain and a bias of a unichain policy: ``g + h = r_pi + P_pi h`` with ``h[0] = 0``.

    The caller must have checked that the chain is unichain (:func:`closed_classes`); then the
    bordered system is non-singular in exact arithmetic. In double precision a chain whose
    only links are tiny (1e-320) can still be singular or give a bias beyond the double range:
    :class:`EvaluationError`, never a wrong number.
    """
    S = r_pi.shape[0]
    M = np.zeros((S + 1, S + 1))
    M[:S, :S] = generator(P_pi)
    M[:S, S] = 1.0
    M[S, 0] = 1.0
    sol = solve_system(M, np.append(r_pi, 0.0), "the policy's gain and bias")
    return float(sol[S]), sol[:S]


def solve_system(M: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
    """``M^{-1} b``, or :class:`EvaluationError` (naming ``what``) when ``M`` is singular in
    double precision or the solution overflows: never a NaN or inf returned."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            x = np.linalg.solve(M, b)
        except np.linalg.LinAlgError:
            x = None
    if x is None or not np.isfinite(x).all():
        off = M[M != 0]
        smallest = float(np.abs(off).min()) if off.size else 0.0
        raise EvaluationError(
            f"{what} cannot be computed in double precision: the linear system is singular or "
            f"its solution overflows (its smallest nonzero coefficient is {smallest:.3g}; "
            "transitions that small make the chain numerically multichain)"
        )
    return x


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


class PolicyIteration(NamedTuple):
    """Outcome of :func:`policy_iteration`.

    ``values`` and ``q`` belong to the last evaluated policy (``None`` when the first
    policy was multichain); ``gain`` is ``NaN`` for the discounted criterion.
    """

    status: str
    message: str
    policy: np.ndarray
    values: np.ndarray | None
    q: np.ndarray | None
    gain: float
    iterations: int


def policy_iteration(
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    discount: float | None = None,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
) -> PolicyIteration:
    """Howard policy iteration (Puterman §6.4 discounted, §8.6 unichain average reward).

    Evaluate the policy exactly, improve greedily keeping the incumbent on ties (tie
    tolerance ``1e-12``, relative), stop when the policy repeats.

    Parameters
    ----------
    P, R, mask : arrays (S, A, S), (S, A), (S, A)
    discount : float in [0, 1), optional
        ``None`` for the average-reward criterion: each policy is evaluated by the bordered
        unichain system, and a policy with several recurrent classes stops the iteration with
        status ``multichain``.
    policy : array (S,) of int, optional
        Warm start; ignored (greedy in ``R`` instead) when it takes an inadmissible action.
    max_iter : int
    """
    rows = np.arange(R.shape[0])
    if policy is None or not mask[rows, policy].all():
        policy = greedy(masked(R, mask))
    values = q = None
    gain = float("nan")
    for it in range(1, max_iter + 1):
        P_pi, r_pi = policy_model(P, R, policy)
        if discount is None:
            n_classes = n_recurrent_classes(P_pi)
            if n_classes > 1:
                message = (
                    f"policy iteration met a policy with {n_classes} recurrent classes at "
                    f"iteration {it}"
                )
                return PolicyIteration(MULTICHAIN, message, policy, values, q, gain, it)
            try:
                gain, values = evaluate_average(P_pi, r_pi)
            except EvaluationError as exc:
                message = f"policy iteration, iteration {it}: {exc}"
                return PolicyIteration(NUMERICAL_ERROR, message, policy, None, None, gain, it)
            q = backup(P, R, values)
        else:
            values = evaluate_discounted(P_pi, r_pi, discount)
            q = backup(P, R, values, discount)
        new = greedy(masked(q, mask), policy, tol=1e-12)
        if np.array_equal(new, policy):
            return PolicyIteration(OPTIMAL, "", policy, values, q, gain, it)
        policy = new
    message = f"policy iteration did not stop in {max_iter} iterations"
    return PolicyIteration(MAX_ITER, message, policy, values, q, gain, max_iter)


def value_iteration(
    P: np.ndarray, R: np.ndarray, mask: np.ndarray, discount: float, tol: float, max_iter: int
) -> tuple[str, str, np.ndarray, int]:
    """Discounted value iteration from ``V = 0``; ``(status, message, V, iterations)``.

    Stops when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which guarantees
    ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1).
    """
    V = np.zeros(R.shape[0])
    threshold = tol * (1.0 - discount) / (2.0 * discount) if discount > 0 else np.inf
    step = np.inf
    for it in range(1, max_iter + 1):
        V_new = masked(backup(P, R, V, discount), mask).max(axis=1)
        step = np.max(np.abs(V_new - V))
        V = V_new
        if step < threshold:
            return OPTIMAL, "", V, it
    message = (
        f"value iteration did not reach tol={tol} in {max_iter} iterations (last step {step:.3g})"
    )
    return MAX_ITER, message, V, max_iter


#: Relative value iteration gives up when span(T h - h) shrinks by less than STALL_DECREASE over
#: STALL_WINDOW iterations.
STALL_WINDOW = 1_000
STALL_DECREASE = 1e-3


def relative_value_iteration(
    P: np.ndarray, R: np.ndarray, mask: np.ndarray, tol: float, max_iter: int, tau: float
) -> tuple[str, str, np.ndarray, int]:
    """Relative value iteration (Puterman §8.5.5) on the aperiodic transform
    ``tau I + (1 - tau) P`` (same gain, bias scaled by ``1/(1-tau)``); stops when
    ``span(T h - h) < tol``. Returns ``(status, message, greedy policy, iterations)``."""
    S = R.shape[0]
    h = np.zeros(S)
    checkpoint = np.inf
    for it in range(1, max_iter + 1):
        # aperiodic transform: T~h = tau h + (1 - tau) (max_a r + P h) with r unscaled keeps the
        # gain and scales the bias by 1 / (1 - tau)
        Th = masked(backup(P, R, (1.0 - tau) * h), mask).max(axis=1) + tau * h
        delta = Th - h
        span = delta.max() - delta.min()
        h = Th - Th[0]
        if span < tol:
            policy = greedy(masked(backup(P, R, (1.0 - tau) * h), mask))
            return OPTIMAL, "", policy, it
        if it % STALL_WINDOW == 0:
            # converging spans shrink geometrically; a span that stops shrinking is the
            # difference between recurrent-class gains of a multichain model
            if span > (1.0 - STALL_DECREASE) * checkpoint:
                max_iter = it
                break
            checkpoint = span
    policy = greedy(masked(backup(P, R, (1.0 - tau) * h), mask))
    return (
        MAX_ITER,
        f"relative value iteration stopped after {max_iter} iterations with "
        f"span(T h - h) = {span:.3g} above tol={tol} (the optimal gain is not constant "
        "across states in a multichain model, or the chain mixes very slowly); ",
        policy,
        max_iter,
    )


def backward_induction(P: np.ndarray, R: np.ndarray, action_mask=None):
    """``Q[l, s, a]`` and ``V[l, s]`` of a layered model: ``V_L = 0``,
    ``Q_l = R_l + P_l V_{l+1}`` (masked actions ``-inf``), ``V_l = max_a Q_l``."""
    L, S, A = R.shape
    V = np.zeros((L + 1, S))
    Q = np.empty((L, S, A))
    for l in range(L - 1, -1, -1):  # loop over layers only
        q = backup(P[l], R[l], V[l + 1])
        Q[l] = q if action_mask is None else masked(q, action_mask[l])
        V[l] = Q[l].max(axis=1)
    return Q, V[:L]


def evaluate_layered(P: np.ndarray, R: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``V^pi[l, s]`` of a deterministic layered policy ``policy[l, s]``."""
    L, S, _ = R.shape
    idx = np.arange(S)
    V = np.zeros((L + 1, S))
    for l in range(L - 1, -1, -1):
        a = policy[l]
        V[l] = R[l, idx, a] + P[l, idx, a] @ V[l + 1]
    return V[:L]


def forward_occupancy(P: np.ndarray, initial: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``d[l, s, a]``: probability of being in ``s`` at layer ``l`` and taking ``a`` under a
    deterministic layered ``policy[l, s]`` started from ``initial``."""
    L, S, A = P.shape[:3]
    idx = np.arange(S)
    occ = np.zeros((L, S, A))
    d = np.asarray(initial, dtype=float)
    for l in range(L):
        occ[l, idx, policy[l]] = d
        d = d @ P[l, idx, policy[l]]
    return occ


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


def near_max(x: np.ndarray, tol: float) -> np.ndarray:
    """``x >= max(x) - tol (1 + |max|)`` along the last axis (``-inf`` entries never)."""
    top = x.max(axis=-1, keepdims=True)
    return np.isfinite(x) & (x >= top - tol * (1.0 + np.abs(top)))


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
    rows = np.arange(R.shape[0])
    if policy is None or not mask[rows, policy].all():
        policy = greedy(masked(R, mask))
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
        new = greedy(pg, policy, tol=tol)
        if np.array_equal(new, policy):
            a1 = mask & near_max(pg, tol)
            q = masked(backup(P, R, ev.bias), a1)
            new = greedy(q, policy, tol=tol)
            if np.array_equal(new, policy):
                try:
                    w = evaluate_multichain(P_pi, -ev.bias).bias
                except EvaluationError as exc:
                    message = f"multichain policy iteration, iteration {it}: {exc}"
                    return MultichainPolicyIteration(NUMERICAL_ERROR, message, policy, ev, it)
                pw = masked(backup(P, zero, w), a1 & near_max(q, tol))
                new = greedy(pw, policy, tol=tol)
                if np.array_equal(new, policy):
                    return MultichainPolicyIteration(OPTIMAL, "", policy, ev, it)
        policy = new
    message = f"multichain policy iteration did not stop in {max_iter} iterations"
    return MultichainPolicyIteration(MAX_ITER, message, policy, ev, max_iter)


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


def classify(P: np.ndarray, mask: np.ndarray, max_policies: int = 4096) -> ModelClass:
    """Classify a model by graph algorithms on ``G`` (an edge ``s -> s'`` when some admissible
    action reaches ``s'`` with positive probability).

    * communicating iff ``G`` is strongly connected;
    * two or more closed components of ``G`` make every policy multichain;
    * with one closed component ``C`` (strongly connected, so communicating within), the
      model is weakly communicating iff the other states are transient under every policy,
      i.e. no nonempty set ``X`` outside ``C`` in which every state has an action staying in
      ``X`` (the greatest such set is the fixed point of removing the states without one);
      otherwise a policy staying in ``X`` has a recurrent class there besides ``C``'s;
    * unichain: refuted or proved by enumerating the deterministic policies when there are at
      most ``max_policies``; a weakly communicating model is then unichain iff no policy has
      two recurrent classes.
    """
    S = P.shape[0]
    reach = (P > 0) & mask[:, :, None]
    edges = reach.any(axis=1)
    n, labels, closed = closed_classes(edges.astype(float))
    closed_sets = [np.flatnonzero(labels == c) for c in np.flatnonzero(closed)]
    communicating = bool(np.unique(labels).size == 1)
    outside = np.ones(S, dtype=bool)
    outside[np.concatenate(closed_sets)] = False
    X = outside.copy()
    while True:  # greatest set whose every state has an action staying inside it
        stays = (mask & ~(reach & ~X[None, None, :]).any(axis=2)).any(axis=1) & X
        if np.array_equal(stays, X):
            break
        X = stays
    transient = outside & ~X
    if len(closed_sets) > 1:
        return ModelClass("multichain", False, False, False, closed_sets, transient)
    weakly = not X.any()
    if not weakly:
        return ModelClass("multichain", False, False, False, closed_sets, transient)
    unichain = _unichain_by_enumeration(P, mask, max_policies)
    kind = "unichain" if unichain else "communicating" if communicating else "weakly_communicating"
    return ModelClass(kind, communicating, True, unichain, closed_sets, transient)


def _unichain_by_enumeration(P, mask, max_policies):
    """True/False by checking every deterministic policy, ``None`` when there are more than
    ``max_policies`` (a loop over policies: a classification, not a hot path)."""
    counts = mask.sum(axis=1)
    if float(np.prod(counts.astype(float))) > max_policies:
        return None
    S = P.shape[0]
    # table[s, i]: the i-th admissible action of s; every policy as a row of choices
    table = np.argsort(~mask, axis=1, kind="stable")
    choices = np.indices(tuple(counts)).reshape(S, -1).T
    policies = table[np.arange(S)[None, :], choices]
    idx = np.arange(S)
    for policy in policies:  # loop over policies (bounded by max_policies)
        if n_recurrent_classes(P[idx, policy]) > 1:
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
