"""Howard policy iteration with a warm start, for the discounted and the unichain
average-reward criteria (on large chains the evaluations iterate and, with numba, each
improvement is one compiled pass over ``P``)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..result import MAX_ITER, MULTICHAIN, NUMERICAL_ERROR, OPTIMAL
from ._average_iteration import (
    ITERATIVE_MIN_STATES,
    ITERATIVE_TOL,
    LOOSE_TOL,
    TIGHTEN_FRACTION,
    _improve,
)
from ._common import (
    EvaluationError,
    backup,
    greedy,
    masked,
    n_recurrent_classes,
    policy_model,
    start_policy,
)
from ._linear import evaluate_discounted
from .average import UnichainEvaluation, evaluate_unichain


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
        ``None`` for the average-reward criterion: each policy is evaluated by
        :func:`evaluate_unichain` (the bordered unichain system, or iteration on large fast
        mixing chains), and a policy with several recurrent classes stops the iteration with
        status ``multichain``.
    policy : array (S,) of int, optional
        Warm start; ignored (greedy in ``R`` instead) when it takes an inadmissible action.
    max_iter : int
    """
    return _policy_iteration(P, R, mask, discount, policy, max_iter)[0]


def average_policy_iteration(
    P: np.ndarray,
    R: np.ndarray,
    mask: np.ndarray,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
) -> tuple[PolicyIteration, UnichainEvaluation | None]:
    """:func:`policy_iteration` for the average-reward criterion, with the
    :class:`UnichainEvaluation` of the returned policy when the status is ``optimal``
    (``None`` otherwise): its gain and bias are the result's, and its
    :meth:`~UnichainEvaluation.stationary` reuses the evaluation's factorization."""
    return _policy_iteration(P, R, mask, None, policy, max_iter)


def _policy_iteration(P, R, mask, discount, policy, max_iter):
    S, A = R.shape
    rows = np.arange(S)
    policy = start_policy(R, mask, policy)
    values = q = ev = P_pi = None
    gain = float("nan")
    # On large chains the average-reward evaluations iterate (evaluate_unichain): loosely
    # (LOOSE_TOL) while the policy changes much, then to ITERATIVE_TOL (once it changed in
    # few states, TIGHTEN_FRACTION, or once it repeated), normalized by its stationary
    # distribution so that its q is the final one; from then on every evaluation is tight.
    large = discount is None and S >= ITERATIVE_MIN_STATES
    # With numba, those evaluations read the chain's rows of P in place (no gathered P_pi)
    # and each improvement is one compiled pass over P (q and the greedy policy together).
    improve = _improve() if large else None
    if improve is not None:
        P, R = np.ascontiguousarray(P, dtype=np.float64), np.ascontiguousarray(R, np.float64)
        mask, policy = np.ascontiguousarray(mask, dtype=np.bool_), policy.astype(np.intp)
    tol = LOOSE_TOL if large else ITERATIVE_TOL
    for it in range(1, max_iter + 1):
        if improve is not None:
            r_pi = R[rows, policy]
        elif P_pi is None or not large:
            P_pi, r_pi = policy_model(P, R, policy)
        if discount is None:
            if improve is not None:  # the chain gathered only when the shortcut fails
                n_classes = _policy_classes(P, policy) or n_recurrent_classes(P[rows, policy])
            else:
                n_classes = n_recurrent_classes(P_pi)
            if n_classes > 1:
                message = (
                    f"policy iteration met a policy with {n_classes} recurrent classes at "
                    f"iteration {it}"
                )
                return PolicyIteration(MULTICHAIN, message, policy, values, q, gain, it), None
            try:
                if improve is not None:
                    ev = evaluate_unichain(P, r_pi, values, tol, stationary=True, policy=policy)
                else:
                    ev = evaluate_unichain(P_pi, r_pi, values, tol, stationary=large)
                if large and ev.exact:
                    ev.normalize()
            except EvaluationError as exc:
                message = f"policy iteration, iteration {it}: {exc}"
                out = PolicyIteration(NUMERICAL_ERROR, message, policy, None, None, gain, it)
                return out, None
            gain, values = ev.gain, ev.bias
        else:
            values = evaluate_discounted(P_pi, r_pi, discount)
        if improve is not None:
            q, new = np.empty((S, A)), np.empty(S, np.intp)
            n_changed = improve(P, R, mask, values, policy, q, new)
        else:
            q = backup(P, R, values, 1.0 if discount is None else discount)
            new = greedy(masked(q, mask), policy, tol=1e-12)
            n_changed = int(np.count_nonzero(new != policy))
        if n_changed == 0:
            if ev is None or ev.exact:
                return PolicyIteration(OPTIMAL, "", policy, values, q, gain, it), ev
            tol = ITERATIVE_TOL  # the same policy again, evaluated to the last digits
            continue
        if large and improve is None:  # only the rows of the states whose action changed
            changed = np.flatnonzero(new != policy)
            P_pi[changed] = P[changed, new[changed]]
            r_pi[changed] = R[changed, new[changed]]
        if large and n_changed <= TIGHTEN_FRACTION * S:  # likely the last policy: evaluate
            tol = ITERATIVE_TOL  # it tightly now, not loosely and then again (one backup)
        policy = new
    message = f"policy iteration did not stop in {max_iter} iterations"
    # values and q belong to the policy before the last improvement
    return PolicyIteration(MAX_ITER, message, policy, values, q, gain, max_iter), None


def _policy_classes(P: np.ndarray, policy: np.ndarray) -> int | None:
    """1 when some state is entered from every state of the chain ``P[s, policy[s]]``,
    tried in ``O(S)`` on the state that state 0 enters most likely (as
    :func:`n_recurrent_classes`, without gathering the chain), else ``None``."""
    j = P[0, policy[0]].argmax()
    return 1 if (P[np.arange(P.shape[0]), policy, j] > 0).all() else None
