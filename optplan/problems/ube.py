"""The uncertainty Bellman equation (uncertainty-bellman-equation Theorem 1, Eq. 2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import (
    OptplanError,
    OptplanTypeError,
    as_array,
    check_distribution,
    check_real,
    first_bad,
    first_negative,
    index_str,
)
from .._model_checks import _sparse_transitions, is_sparse
from ..dp import layer_block
from ..result import PlanResult
from ._compare import answer_errors, diff
from .base import Problem, store_readonly


@dataclass(frozen=True, eq=False)
class UncertaintyBellman(Problem):
    r"""The uncertainty Bellman equation of a policy (UBE paper Theorem 1):

    .. math:: u_{sa} = \nu_{sa} + \gamma^2 \sum_{s'} \bar P(s'|s,a) \sum_{a'} \pi(a'|s') u_{s'a'}.

    **Continuing form** (arrays ``(S, A, S)``, ``(S, A)``): a ``gamma^2``-contraction with a
    unique fixed point for ``discount`` in ``[0, 1)``. **Layered form** (a leading layer axis:
    ``(L, S, A, S)``, ``(L, S, A)``; the paper's DAG assumption):
    ``u_l = nu_l + gamma^2 Pbar_l pi_{l+1} u_{l+1}``, ``u_L = 0``; ``discount`` may be 1.

    Fast path: a direct linear solve on the states, ``v = (I - gamma^2 Pbar_pi)^{-1} nu_pi``,
    ``u = nu + gamma^2 Pbar v`` (or value iteration, ``algorithm="iteration"``, for large sparse
    models), backward recursion for the layered form. Conic path: the LP

    .. math:: \min_u\ w^\top u \quad\text{s.t.}\quad u \ge \nu + \gamma^2 \bar P_\pi u,

    whose least feasible point is the fixed point (the operator is monotone) and whose dual
    ``y = (I - gamma^2 Pbar_pi)^{-T} w`` is the ``gamma^2``-discounted (unnormalized) occupancy
    of state-action pairs under ``pi`` started from ``w``; ``w`` is :attr:`weights` (ones by
    default, the LP of docs/math.md). Both paths return ``y`` as ``multiplier``.

    Parameters
    ----------
    mean_transitions : array (S, A, S) or (L, S, A, S), or scipy.sparse matrix
        Posterior-mean transitions ``E[P(s'|s,a) | F_t]``; rows are distributions. In the
        layered form the last layer's transitions leave the horizon and are not used. A
        ``scipy.sparse`` matrix is the ``(S·A, S)`` matrix of rows ``s·A + a`` (layered:
        ``(L·S·A, S)``, rows ``l·S·A + s·A + a``; the form is read off ``local``), held as a
        canonical CSR matrix (:attr:`sparse`); both paths then run on it without a dense copy.
    policy : array (S, A) / (L, S, A), or int array (S,) / (L, S)
        A stochastic policy (rows are distributions) or a deterministic one (action indices).
    local : array (S, A) or (L, S, A)
        The local uncertainty ``nu >= 0`` (:mod:`optplan.uncertainty`).
    discount : float
        ``gamma``, in ``[0, 1)``; ``[0, 1]`` in the layered form.
    weights : array like ``local``, optional
        Positive LP objective weights ``w`` (default ones).

    Notes
    -----
    Results: ``x = u``; ``value = w . u`` (``= y . nu``, the dual objective);
    ``multiplier = y``; ``values`` ``v[s] = sum_a pi u`` (continuing form).
    """

    mean_transitions: np.ndarray
    policy: np.ndarray
    local: np.ndarray
    discount: float
    weights: np.ndarray | None = None
    stem = "ube"

    def __post_init__(self):
        if is_sparse(self.mean_transitions):
            local = as_array("local", self.local, (2, 3))
            if 0 in local.shape:
                raise OptplanError(
                    f"local needs at least one state and one action (and layer), got shape "
                    f"{local.shape}"
                )
            L = local.shape[0] if local.ndim == 3 else None
            S, A = local.shape[-2:]
            P = _sparse_transitions(
                self.mean_transitions,
                S,
                A,
                np.ones(local.shape, dtype=bool),
                False,
                L=L,
                name="mean_transitions",
                sizes_from="local",
            )
            layered = L is not None
            shape = local.shape
        else:
            P, layered = self._dense_transitions()
            shape = P.shape[:-1]
        local = as_array("local", self.local)
        if local.shape != shape:
            raise OptplanError(
                f"local has shape {local.shape}, expected {shape} (as mean_transitions)"
            )
        if (idx := first_negative(local)) is not None:
            raise OptplanError(
                f"local must be >= 0 (a variance), got {float(local[idx])!r} at index "
                f"{index_str(idx)}"
            )
        policy = as_policy(self.policy, shape)
        gamma = check_real("discount", self.discount, 0.0, 1.0)
        if gamma == 1.0 and not layered:
            raise OptplanError(
                "discount must lie in [0, 1) in the continuing form, got 1.0: at gamma = 1 the "
                "UBE has a fixed point only on a DAG, so give the model layered, "
                "mean_transitions (L, S, A, S), where u_L = 0 ends the recursion"
            )
        if self.weights is None:
            w = np.ones(shape)
        else:
            w = as_array("weights", self.weights)
            if w.shape != shape:
                raise OptplanError(f"weights has shape {w.shape}, expected {shape}")
            if not (w > 0).all():
                idx = first_bad(~(w > 0))
                raise OptplanError(
                    f"weights must be > 0, got {float(w[idx])!r} at index {index_str(idx)}"
                )
        if is_sparse(P):  # already read-only (its data, indices and row pointers)
            object.__setattr__(self, "mean_transitions", P)
        else:
            store_readonly(self, mean_transitions=P)
        store_readonly(self, local=local, policy=policy, weights=w)
        object.__setattr__(self, "discount", gamma)

    def _dense_transitions(self) -> tuple[np.ndarray, bool]:
        P = as_array("mean_transitions", self.mean_transitions, (3, 4))
        layered = P.ndim == 4
        S = P.shape[-1]
        if P.shape[-3] != S:
            raise OptplanError(
                f"mean_transitions must have shape (S, A, S) or (L, S, A, S), got {P.shape}"
            )
        if 0 in P.shape:
            raise OptplanError(
                f"mean_transitions needs at least one state and one action (and layer), got "
                f"shape {P.shape}"
            )
        check_distribution("mean_transitions", P)
        return P, layered

    @classmethod
    def _trusted(cls, mean_transitions, policy, local, discount: float) -> UncertaintyBellman:
        """The problem of an agent's own arrays, already valid (float ``mean_transitions``
        with distribution rows, ``local >= 0`` of the matching shape, a policy of action
        indices or probabilities, a checked ``discount``), built without the checks: the
        arrays the public constructor would store (float copies, read-only; unit weights).
        Not part of the public API: a user's input goes through the constructor."""
        out = cls.__new__(cls)
        P = np.array(mean_transitions, dtype=float)
        shape = P.shape[:-1]
        pi = np.asarray(policy)
        if pi.dtype.kind in "iu":
            pi = np.eye(shape[-1])[pi]
        else:
            pi = np.array(pi, dtype=float)
        store_readonly(
            out,
            mean_transitions=P,
            local=np.array(local, dtype=float),
            policy=pi,
            weights=np.ones(shape),
        )
        object.__setattr__(out, "discount", float(discount))
        return out

    @property
    def layered(self) -> bool:
        """True for the layered (finite-horizon, DAG) form."""
        return self.local.ndim == 3

    @property
    def sparse(self) -> bool:
        """Whether ``mean_transitions`` is held sparse: the CSR matrix of rows ``s·A + a``
        (``l·S·A + s·A + a`` in the layered form)."""
        return is_sparse(self.mean_transitions)

    @property
    def transition_rows(self):
        """``mean_transitions`` as the ``(S·A, S)`` (layered: ``(L·S·A, S)``) matrix of its
        rows, in its own format (a dense view or the CSR matrix), without a copy."""
        if self.sparse:
            return self.mean_transitions
        return self.mean_transitions.reshape(-1, self.local.shape[-2])

    def layer_transitions(self, layer: int):
        """Layer ``layer``'s ``(S·A, S)`` rows (layered form), in their format."""
        S, A = self.local.shape[-2:]
        return layer_block(self.transition_rows, layer, S, A)

    def residual(self, u: np.ndarray) -> float:
        """``max |u - nu - gamma^2 Pbar_pi u|``: how far ``u`` is from the fixed point."""
        return float(np.max(np.abs(u - self.apply(u)), initial=0.0))

    def apply(self, u: np.ndarray) -> np.ndarray:
        """The UBE operator ``nu + gamma^2 Pbar_pi u`` (``u_L = 0`` in the layered form)."""
        g2 = self.discount**2
        v = np.sum(self.policy * u, axis=-1)  # v[..., s] = sum_a pi u
        if not self.layered:
            return self.local + g2 * propagate(self.transition_rows, v, self.local.shape)
        L, S, A = self.local.shape
        out = self.local.copy()
        for l in range(L - 1):  # loop over layers only: u_L = 0
            out[l] += g2 * propagate(self.layer_transitions(l), v[l + 1], (S, A))
        return out

    def dual_residual(self, y: np.ndarray) -> float:
        """``max |y - w - gamma^2 (Pbar_pi)^T y|``: how far ``y`` is from the dual fixed point."""
        return float(np.max(np.abs(y - self.apply_transpose(y)), initial=0.0))

    def apply_transpose(self, y: np.ndarray) -> np.ndarray:
        """``w + gamma^2 (Pbar_pi)^T y``: ``(Pbar_pi^T y)[s', a'] = pi(a'|s') sum_{s,a} y Pbar``."""
        g2 = self.discount**2
        if not self.layered:
            inflow = inflow_of(self.transition_rows, y)
            return self.weights + g2 * self.policy * inflow[:, None]
        inflow = np.zeros(y.shape[:2])
        for l in range(y.shape[0] - 1):  # loop over layers only
            inflow[l + 1] = inflow_of(self.layer_transitions(l), y[l])
        return self.weights + g2 * self.policy * inflow[..., None]

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        return {
            "value": diff(a.value, b.value),
            "x": diff(a.x, b.x),
            "multiplier": diff(a.multiplier, b.multiplier),
            # each answer's own distance from its fixed point, relative to its size
            "x_certificate": (max(self.residual(r.x) for r in (a, b)), float(np.abs(b.x).max())),
            "multiplier_certificate": (
                max(self.dual_residual(r.multiplier) for r in (a, b)),
                float(np.abs(b.multiplier).max()),
            ),
        }

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value, ``u`` and the occupancy ``y``."""
        return answer_errors(self, answer, reference, multiplier=True)


def propagate(P, v: np.ndarray, shape: tuple[int, int] | None = None) -> np.ndarray:
    """``(P v)[s, a] = sum_s' P[s, a, s'] v[s']``: ``P`` dense ``(S, A, S)``, or the
    ``(S·A, S)`` matrix of rows ``s·A + a`` (dense or sparse) with ``shape = (S, A)``."""
    if P.ndim == 3:
        shape = P.shape[:2]
        P = P.reshape(shape[0] * shape[1], -1)
    return np.asarray(P @ v).reshape(shape)


def inflow_of(P, y: np.ndarray) -> np.ndarray:
    """``sum_{s,a} y[s, a] P[s, a, s']`` for the ``(S·A, S)`` rows ``P`` (dense or sparse):
    one transposed mat-vec."""
    return np.asarray(P.T @ y.reshape(-1)).ravel()


def as_policy(policy, shape: tuple[int, ...]) -> np.ndarray:
    """A policy as probabilities of shape ``shape`` (``(S, A)`` or ``(L, S, A)``).

    Accepts probabilities of that shape or integer action indices of shape ``shape[:-1]``.
    """
    if policy is None:
        raise OptplanTypeError("policy is required, got None")
    try:
        arr = np.asarray(policy)
    except (TypeError, ValueError):  # ragged: as_array names it
        arr = as_array("policy", policy)
    A = shape[-1]
    if arr.dtype.kind in "iu" and arr.shape == shape[:-1]:
        if ((arr < 0) | (arr >= A)).any():
            idx = first_bad((arr < 0) | (arr >= A))
            raise OptplanError(
                f"policy names action {int(arr[idx])} at index {index_str(idx)}; "
                f"actions are 0..{A - 1}"
            )
        return np.eye(A)[arr]
    pi = as_array("policy", policy)
    if pi.shape != shape:
        raise OptplanError(
            f"policy has shape {pi.shape}, expected probabilities {shape} or action indices "
            f"{shape[:-1]} (integers)"
        )
    check_distribution("policy", pi)
    return pi
