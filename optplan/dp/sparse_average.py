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

from ._common import EvaluationError
from .average import evaluate_unichain
from .discounted import SPARSE_DIRECT_MAX_STATES

#: The aperiodic transform's ``tau`` and the iterations' budget.
SPARSE_TAU = 0.5
SPARSE_MAX_ITER = 100_000
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
    P_pi, r_pi: np.ndarray, tol: float, bias: bool = True
) -> SparseUnichainEvaluation:
    """Gain, bias and stationary distribution of a unichain sparse chain.

    Small chains: dense, :func:`~optplan.dp.evaluate_unichain` (one factorization). Large:
    power iteration ``pi <- pi P_tau`` until ``||pi_{k+1} - pi_k||_1 <= 1e-14``, gain
    ``pi @ r``, then the fixed-policy relative value iteration ``h <- h + (1 - tau)(r - g +
    P h - h)`` recentred to ``pi @ h = 0`` until the residual ``||r - g + P h - h||_inf`` is
    at most ``tol`` (``bias=False``: not computed, zeros). :class:`EvaluationError` when
    either does not converge in :data:`SPARSE_MAX_ITER` steps, or the residual stops
    shrinking (by half in :data:`STALL_STEPS` steps: a chain that mixes too slowly for
    iterations, or a ``tol`` below the rounding floor)."""
    S = r_pi.shape[0]
    if S <= SPARSE_DIRECT_MAX_STATES:
        ev = evaluate_unichain(P_pi.toarray(), r_pi, stationary=True)
        pi = ev.stationary()
        ev.normalize()
        return SparseUnichainEvaluation(ev.gain, ev.bias, pi)
    tau = SPARSE_TAU
    PT = P_pi.T  # CSC view: pi P as a mat-vec, no transposed copy
    pi = np.full(S, 1.0 / S)
    for _ in range(SPARSE_MAX_ITER):
        new = tau * pi + (1.0 - tau) * (PT @ pi)
        new /= new.sum()
        step = float(np.abs(new - pi).sum())
        pi = new
        if step <= 1e-14:
            break
    else:
        raise EvaluationError(
            f"the stationary distribution did not converge in {SPARSE_MAX_ITER} power "
            f"iterations (last step {step:.3g}): the chain mixes too slowly"
        )
    gain = float(pi @ r_pi)
    h = np.zeros(S)
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
