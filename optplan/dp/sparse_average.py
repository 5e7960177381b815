"""The unichain average-reward criterion on sparse models: a policy's recurrent classes from
the sparse graph, and its gain, bias and stationary distribution without densifying the model.

A chain ``P_pi`` here is a ``scipy.sparse`` CSR matrix (a row gather of a sparse model's
``P_rows``). Up to :data:`~optplan.dp.SPARSE_DIRECT_MAX_STATES` states the chain (``S x S``,
not the model) is made dense and evaluated by :func:`~optplan.dp.evaluate_unichain`, exactly
as a dense model's; above, by iterations on the aperiodic transform ``tau I + (1 - tau) P_pi``
(same gain and stationary distribution), one sparse mat-vec a step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import OptplanError
from ._common import EvaluationError
from ._linear import SPARSE_DIRECT_MAX_STATES
from .average import evaluate_unichain

#: The aperiodic transform's ``tau`` and the iterations' budget.
SPARSE_TAU = 0.5
SPARSE_MAX_ITER = 20_000
#: The power iteration for the stationary law runs on ``P_pi`` itself for
#: ``UNDAMPED_STEPS`` steps and goes on so if its step shrank below ``UNDAMPED_SHRINK`` times
#: the first; otherwise (a periodic or slowly mixing chain) on the transform.
UNDAMPED_STEPS = 30
UNDAMPED_SHRINK = 1e-3
STALL_STEPS = 200


def sparse_recurrent_classes(P_pi) -> int:
    """Number of recurrent classes of a sparse chain: strongly connected components (scipy's
    ``csgraph``) that no transition leaves."""
    from scipy.sparse.csgraph import connected_components

    n, labels = connected_components(P_pi, directed=True, connection="strong")
    coo = P_pi.tocoo()
    leaving = labels[coo.row] != labels[coo.col]
    closed = np.ones(n, dtype=bool)
    closed[labels[coo.row[leaving]]] = False
    return int(closed.sum())


class SparseUnichainEvaluation(NamedTuple):
    """Gain, bias (normalized: ``stationary @ bias = 0``) and stationary distribution."""

    gain: float
    bias: np.ndarray
    stationary: np.ndarray


def evaluate_sparse_unichain(
    P_pi, r_pi: np.ndarray, tol: float, bias: bool = True, start=None
) -> SparseUnichainEvaluation:
    """Gain, bias and stationary distribution of a unichain sparse chain.

    Small chains: dense, :func:`~optplan.dp.evaluate_unichain` (one factorization). Large:
    power iteration ``pi <- pi P_pi`` (``pi P_tau`` once it shows no geometric decrease,
    :data:`UNDAMPED_STEPS`) until ``||pi_{k+1} - pi_k||_1 <= 1e-14``, gain
    ``pi @ r``, then the fixed-policy relative value iteration ``h <- h + (1 - tau)(r - g +
    P h - h)`` recentred to ``pi @ h = 0`` until the residual ``||r - g + P h - h||_inf`` is
    at most ``tol`` (``bias=False``: not computed, zeros). When either does not converge in
    :data:`SPARSE_MAX_ITER` steps, or the bias residual stops shrinking (by half in
    :data:`STALL_STEPS` steps: a chain that mixes too slowly for iterations), one sparse LU
    of the bordered system gives all three; :class:`EvaluationError` when that is singular.
    ``start``: ``(stationary, bias)`` to start the iterations from (a neighbouring policy's,
    in policy iteration); either may be ``None`` (uniform, zeros)."""
    S = r_pi.shape[0]
    start = (None, None) if start is None else tuple(start)
    if len(start) != 2:
        raise OptplanError(f"start must be (stationary, bias), got {len(start)} entries")
    for name, x in zip(("stationary", "bias"), start, strict=True):
        if x is not None and np.shape(x) != (S,):
            raise OptplanError(f"start's {name} must have shape ({S},), got {np.shape(x)}")
    if S <= SPARSE_DIRECT_MAX_STATES:
        ev = evaluate_unichain(P_pi.toarray(), r_pi, stationary=True)
        pi = ev.stationary()
        ev.normalize()
        return SparseUnichainEvaluation(ev.gain, ev.bias, pi)
    try:
        return _iterate(P_pi, r_pi, tol, bias, *start)
    except EvaluationError:  # a slowly mixing chain: structured, its sparse LU fills in little
        return _factorize(P_pi, r_pi)


def _factorize(P_pi, r_pi: np.ndarray) -> SparseUnichainEvaluation:
    """The bordered system ``[[I - P_pi, 1], [e_0^T, 0]] (h, g) = (r, 0)`` by one sparse LU
    (SuperLU); its transpose solve with ``e_S`` gives ``(pi, 0)`` (as the dense
    :class:`~optplan.dp.UnichainEvaluation` does). :class:`EvaluationError` when singular."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    S = r_pi.shape[0]
    G = sp.identity(S, format="csr") - P_pi
    e0 = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, S))
    M = sp.bmat([[G, np.ones((S, 1))], [e0, None]], format="csc")
    try:
        lu = splu(M)
    except RuntimeError as exc:
        raise EvaluationError(f"the bordered unichain system is singular ({exc})") from None
    x = lu.solve(np.append(r_pi, 0.0))
    end = np.zeros(S + 1)
    end[S] = 1.0
    pi = np.clip(lu.solve(end, trans="T")[:S], 0.0, None)
    if not (np.isfinite(x).all() and np.isfinite(pi).all() and pi.sum() > 0):
        raise EvaluationError("the bordered unichain system is singular in double precision")
    pi /= pi.sum()
    h = x[:S]
    return SparseUnichainEvaluation(float(x[S]), h - pi @ h, pi)


def _iterate(
    P_pi, r_pi: np.ndarray, tol: float, bias: bool, pi0=None, h0=None
) -> SparseUnichainEvaluation:
    """The iterations of :func:`evaluate_sparse_unichain` (from ``pi0`` and ``h0`` when
    given)."""
    S = r_pi.shape[0]
    tau = SPARSE_TAU
    PT = P_pi.T  # CSC view: pi P as a mat-vec, no transposed copy
    pi = np.full(S, 1.0 / S) if pi0 is None else np.clip(pi0, 0.0, None)
    if not pi.sum() > 0:
        pi = np.full(S, 1.0 / S)
    pi = pi / pi.sum()
    checkpoint = np.inf
    # undamped first (a mixing chain converges at its own rate, twice as fast as through the
    # transform); a periodic one does not shrink its steps: the transform takes over
    damping, first = 0.0, None
    for it in range(SPARSE_MAX_ITER):
        new = (PT @ pi) if damping == 0.0 else damping * pi + (1.0 - damping) * (PT @ pi)
        new /= new.sum()
        step = float(np.abs(new - pi).sum())
        pi = new
        if step <= 1e-14:
            break
        first = step if first is None else first
        if damping == 0.0 and it == UNDAMPED_STEPS and step > UNDAMPED_SHRINK * first:
            damping = tau
        if it % STALL_STEPS == 0:
            if step > 0.5 * checkpoint:
                raise EvaluationError(
                    f"the power iteration stalled at step {step:.3g} after {it} iterations"
                )
            checkpoint = step
    else:
        raise EvaluationError(
            f"the stationary distribution did not converge in {SPARSE_MAX_ITER} power "
            f"iterations (last step {step:.3g}): the chain mixes too slowly"
        )
    gain = float(pi @ r_pi)
    h = np.zeros(S) if h0 is None or not np.isfinite(h0).all() else h0 - pi @ h0
    if not bias:
        return SparseUnichainEvaluation(gain, h, pi)
    checkpoint = np.inf
    for it in range(SPARSE_MAX_ITER):
        res = r_pi - gain + P_pi @ h - h
        err = float(np.abs(res).max())
        if err <= tol:
            break
        if it % STALL_STEPS == 0:
            if err > 0.5 * checkpoint:
                raise EvaluationError(
                    f"the bias stalled at residual {err:.3g} above {tol:.3g} after {it} "
                    "iterations: the chain mixes too slowly, or the accuracy asked is below "
                    "the rounding floor"
                )
            checkpoint = err
        h = h + (1.0 - tau) * res
        h -= pi @ h
    else:
        raise EvaluationError(
            f"the bias did not converge in {SPARSE_MAX_ITER} iterations (residual {err:.3g} "
            f"above {tol:.3g}): the chain mixes too slowly"
        )
    return SparseUnichainEvaluation(gain, h - pi @ h, pi)
