"""Tabular MDP models: arrays plus validation, nothing else.

Array naming (used everywhere in optplan):

* ``P[s, a, s']`` transition probabilities, ``R[s, a]`` expected rewards;
* finite horizon adds a leading layer index: ``P[l, s, a, s']``, ``R[l, s, a]``;
* ``action_mask[s, a]`` is ``True`` where action ``a`` is admissible in state ``s``
  (the admissible sets A(x) of accelerating-ucb-indices-mdp §2).

A :class:`TabularMDP` holds ``P`` in one of two formats (:attr:`TabularMDP.P_format`): dense,
an ``(S, A, S)`` array, or sparse, a ``scipy.sparse`` CSR matrix of shape ``(S·A, S)`` whose
row ``s·A + a`` is ``P[s, a, :]`` (the layout in which ``P v`` is one sparse mat-vec and a
policy's chain a row gather). :attr:`TabularMDP.P_rows` is the ``(S·A, S)`` matrix in either
format; :meth:`TabularMDP.dense_P` is the one densifying accessor, and it refuses a dense copy
larger than :data:`DENSE_VIEW_MAX_BYTES`.

Every check runs at construction and raises ``ValueError``/``TypeError`` naming the field and
the offending value, so a model that exists is a valid model.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import numpy as np

from ._checks import (
    ROW_SUM_TOL,
    OptplanError,
    OptplanTypeError,
    check_int,
    check_label,
)
from ._model_checks import (
    MAX_MODEL_BYTES,
    NORMALIZE_TOL,
    _as_float_array,
    _check_initial,
    _check_normalize,
    _check_shapes,
    _check_transitions,
    _dense_bytes,
    _ndim,
    _normalized,
    _sparse_transitions,
    check_action_mask,
    check_bytes,
    check_model_size,
    check_reward_scale,
    is_sparse,
    memory_bytes,
    shape_fault,
)

__all__ = [
    "TabularMDP",
    "FiniteHorizonMDP",
    "ROW_SUM_TOL",
    "NORMALIZE_TOL",
    "CRITERIA",
    "CONTINUING",
    "MAX_MODEL_BYTES",
    "check_model_size",
    "shape_fault",
    "DENSE_VIEW_MAX_BYTES",
    "is_sparse",
]

#: Every planning criterion, in this order everywhere (model files, CLI choices, sweeps). A
#: model's ``criterion`` attribute is its own; :mod:`optplan.problems.criteria` maps a model
#: and a criterion to the planning problem.
CRITERIA = ("average", "discounted", "finite_horizon")
#: The criteria of continuing (stationary, infinite-horizon) models.
CONTINUING = ("average", "discounted")
#: The largest dense ``(S, A, S)`` float64 copy :meth:`TabularMDP.dense_P` makes of a sparse
#: model (512 MiB: S = 4,096 with A = 4); beyond it the accessor raises, naming the size.
DENSE_VIEW_MAX_BYTES = 2**29


class StateActionSizes:
    """``n_states`` and ``n_actions`` of a model or problem, read off one of its arrays.

    A subclass names the array in ``sizes_from`` and the axis of states in ``state_axis``; the
    axis after it counts the actions (``R`` of shape ``(S, A)``: axes 0 and 1).
    """

    sizes_from: ClassVar[str] = "R"
    state_axis: ClassVar[int] = 0

    @property
    def n_states(self) -> int:
        return getattr(self, self.sizes_from).shape[self.state_axis]

    @property
    def n_actions(self) -> int:
        return getattr(self, self.sizes_from).shape[self.state_axis + 1]


class HeldTransitions(StateActionSizes):
    """How a model holds ``P``: dense, or sparse as the rows of :attr:`P_rows`."""

    @property
    def P_format(self) -> str:
        """``"dense"`` (``P`` is an array, ``(S, A, S)`` or with layers ``(L, S, A, S)``) or
        ``"csr"`` (``P`` is a ``scipy.sparse.csr_matrix``, one row per pair: ``(S·A, S)``,
        row ``s·A + a``, or ``(L·S·A, S)``, row ``l·S·A + s·A + a``)."""
        return "csr" if is_sparse(self.P) else "dense"

    @property
    def sparse(self) -> bool:
        """Whether ``P`` is held sparse (:attr:`P_format` ``"csr"``)."""
        return is_sparse(self.P)


@dataclass(frozen=True, eq=False)
class TabularMDP(HeldTransitions):
    """A finite MDP for the discounted or the average-reward criterion.

    Parameters
    ----------
    P : array_like, shape (S, A, S), or scipy.sparse matrix, shape (S·A, S)
        ``P[s, a, s']`` = probability of moving to ``s'`` after action ``a`` in ``s``.
        Rows of admissible ``(s, a)`` must sum to 1; rows of masked-out pairs are ignored
        (they may be all zeros) but must be finite and non-negative. A ``scipy.sparse``
        matrix (any format) is held as a canonical CSR matrix (row ``s·A + a`` is
        ``P[s, a, :]``; duplicates summed, explicit zeros dropped): see :attr:`P_format`,
        :attr:`P_rows` and :meth:`dense_P`. Its errors name ``(s, a)``, ``s'`` and the value.
    R : array_like, shape (S, A)
        Expected one-step reward ``r_{x,a}``.
    discount : float in [0, 1), optional
        Discount factor. ``None`` means the model carries no discount; it can then be solved
        only for the average-reward criterion (accelerating-ucb-indices-mdp Eq. 1).
    initial : array_like, shape (S,), optional
        Start distribution; uniform if omitted.
    action_mask : array_like of bool, shape (S, A), optional
        Admissible actions ``A(x)``; all admissible if omitted. Every state needs one.
    name : str, optional
        A label (model files set it); ``None`` means ``""``.
    normalize : bool, default False
        Rescale each row of ``P`` (and ``initial``) whose sum is within
        :data:`NORMALIZE_TOL` (1e-6) of 1 to sum exactly 1, after casting to float64: for
        ``P`` given in float32 or rounded to a few decimals. Negative entries and rows
        further off are refused all the same. Without it rows must sum to 1 within
        :data:`ROW_SUM_TOL` (1e-9), and the error for a row off by round-off suggests it.
    """

    P: np.ndarray
    R: np.ndarray
    discount: float | None = None
    initial: np.ndarray | None = None
    action_mask: np.ndarray | None = None
    name: str = ""
    criterion: str = field(init=False)
    normalize: InitVar[bool] = False

    def __post_init__(self, normalize=False):
        object.__setattr__(self, "name", check_label("name", self.name))
        normalize = _check_normalize(normalize)
        sparse = is_sparse(self.P)
        P = None if sparse else _as_float_array("P", self.P, 3)
        R = _as_float_array("R", self.R, 2)
        S, A = R.shape
        if not sparse:
            _check_shapes(P, R)
        if S == 0 or A == 0:
            raise OptplanError(
                f"the model needs at least one state and one action, got R {R.shape}"
            )
        mask = check_action_mask(self.action_mask, (S, A))
        if sparse:
            P = _sparse_transitions(self.P, S, A, mask, normalize)
        else:
            if normalize:
                P = _normalized(P)
            _check_transitions(P, mask, "sa")
        discount = self.discount
        if discount is not None:
            if isinstance(discount, bool) or not isinstance(discount, (int, float, np.floating)):
                raise OptplanTypeError(f"discount must be a float, got {discount!r}")
            discount = float(discount)
            if not (0.0 <= discount < 1.0):
                raise OptplanError(f"discount must lie in [0, 1), got {discount!r}")
        if discount is None:
            check_reward_scale(R, mask, 1.0, "the average reward's spans")
        else:
            check_reward_scale(
                R, mask, 1.0 / (1.0 - discount), f"1/(1 - discount), discount {discount!r}"
            )
        initial = _check_initial(self.initial, S, normalize)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "discount", discount)
        object.__setattr__(self, "initial", initial)
        object.__setattr__(self, "action_mask", mask)
        object.__setattr__(self, "criterion", "average" if discount is None else "discounted")

    @property
    def shape(self) -> tuple[int, int]:
        """``(S, A)``."""
        return self.R.shape

    @property
    def P_rows(self):
        """``P`` as the ``(S·A, S)`` matrix of rows ``s·A + a``, in the model's own format
        (a view of the dense array, or the CSR matrix): ``P_rows @ v`` is ``sum_s' P[s, a, s']
        v[s']`` flattened, in either format, without a copy."""
        if self.sparse:
            return self.P
        S, A = self.R.shape
        return self.P.reshape(S * A, S)

    @property
    def nnz(self) -> int:
        """Number of stored transition probabilities (every entry of a dense ``P``)."""
        return int(self.P.nnz) if self.sparse else int(self.P.size)

    def dense_P(self) -> np.ndarray:
        """``P`` as a read-only ``(S, A, S)`` array: the model's own when dense, a copy when
        sparse. A copy larger than :data:`DENSE_VIEW_MAX_BYTES` is refused with an
        ``OptplanError`` naming the size, so no code densifies a large model by accident."""
        if not self.sparse:
            return self.P
        S, A = self.R.shape
        nbytes = _dense_bytes(S, A)
        if nbytes > DENSE_VIEW_MAX_BYTES:
            raise OptplanError(
                f"a dense P of this sparse model (S={S}, A={A}) would take {nbytes:,} bytes "
                f"({nbytes / 2**30:.3g} GiB), above the {DENSE_VIEW_MAX_BYTES / 2**30:g} GiB "
                "of optplan.mdp.DENSE_VIEW_MAX_BYTES: this computation needs a dense model; "
                "the discounted and average-reward fast paths (and their LPs) run sparse"
            )
        out = self.P.toarray().reshape(S, A, S)
        out.setflags(write=False)
        return out

    def to_dense(self) -> TabularMDP:
        """The same model with ``P`` dense (itself when it is; :meth:`dense_P`'s size limit)."""
        if not self.sparse:
            return self
        return TabularMDP(
            self.dense_P(), self.R, self.discount, self.initial, self.action_mask, self.name
        )

    def to_sparse(self) -> TabularMDP:
        """The same model with ``P`` a CSR matrix of shape ``(S·A, S)`` (itself when it is)."""
        if self.sparse:
            return self
        import scipy.sparse as sp

        return TabularMDP(
            sp.csr_matrix(self.P_rows),
            self.R,
            self.discount,
            self.initial,
            self.action_mask,
            self.name,
        )

    def with_mask(self, action_mask) -> TabularMDP:
        """The same model with other admissible action sets (index agents restrict actions)."""
        return TabularMDP(self.P, self.R, self.discount, self.initial, action_mask, self.name)

    def with_discount(self, discount: float | None) -> TabularMDP:
        """The same model for another discount (``None``: average reward)."""
        return TabularMDP(self.P, self.R, discount, self.initial, self.action_mask, self.name)

    def __eq__(self, other) -> bool:
        if not isinstance(other, TabularMDP):
            return NotImplemented
        return (
            self.name == other.name
            and self.discount == other.discount
            and _same_transitions(self, other)
            and np.array_equal(self.R, other.R)
            and np.array_equal(self.initial, other.initial)
            and np.array_equal(self.action_mask, other.action_mask)
        )

    __hash__ = None  # arrays are not hashable; equality is by value

    def __repr__(self) -> str:
        crit = "average" if self.discount is None else f"discount={self.discount}"
        label = f"{self.name!r}, " if self.name else ""
        fmt = f", sparse nnz={self.nnz}" if self.sparse else ""
        return f"TabularMDP({label}S={self.n_states}, A={self.n_actions}, {crit}{fmt})"


def _same_transitions(a, b) -> bool:
    """Equal ``P`` of two models of one kind in any pair of formats (a dense one compared as
    CSR, never densified)."""
    if a.R.shape != b.R.shape:
        return False
    if not a.sparse and not b.sparse:
        return np.array_equal(a.P, b.P)
    x, y = a.to_sparse().P, b.to_sparse().P
    return (x != y).nnz == 0


@dataclass(frozen=True, eq=False)
class FiniteHorizonMDP(HeldTransitions):
    """A layered finite-horizon MDP (k-learning-variational-bayesian-rl §2).

    Parameters
    ----------
    P : array_like, shape (L, S, A, S), or scipy.sparse matrix, shape (L·S·A, S)
        ``P[l, s, a, s']`` transition law at layer (step) ``l``. A ``scipy.sparse`` matrix
        (any format) is held as a canonical CSR matrix whose row ``l·S·A + s·A + a`` is
        ``P[l, s, a, :]`` (as :class:`TabularMDP`'s sparse ``P``, one block of ``S·A`` rows
        per layer): see :attr:`P_format`, :attr:`P_rows`, :meth:`layer_rows` and
        :meth:`dense_P`. Its errors name ``(l, s, a)``, ``s'`` and the value.
    R : array_like, shape (L, S, A)
        Expected reward ``R[l, s, a]``.
    initial : array_like, shape (S,), optional
        Start distribution at layer 0; uniform if omitted.
    action_mask : array_like of bool, shape (S, A) or (L, S, A), optional
        Admissible actions (a 2-D mask applies to every layer).
    name : str, optional
        A label; ``None`` means ``""``.
    normalize : bool, default False
        As for :class:`TabularMDP`: rescale rows of ``P`` (and ``initial``) within
        :data:`NORMALIZE_TOL` of summing to 1 (float32 or rounded input).
    """

    P: np.ndarray
    R: np.ndarray
    initial: np.ndarray | None = None
    action_mask: np.ndarray | None = None
    name: str = ""
    criterion: str = field(init=False, default="finite_horizon")
    normalize: InitVar[bool] = False
    state_axis = 1  # R is (L, S, A)

    def __post_init__(self, normalize=False):
        object.__setattr__(self, "name", check_label("name", self.name))
        normalize = _check_normalize(normalize)
        sparse = is_sparse(self.P)
        if not sparse and _ndim(self.P) == 3 and _ndim(self.R) == 2:
            raise OptplanError(
                f"P has shape {np.shape(self.P)} and R {np.shape(self.R)}, a stationary model; "
                f"a finite-horizon one has P (L, S, A, S) and R (L, S, A): "
                f"FiniteHorizonMDP.from_stationary(TabularMDP(P, R), horizon) repeats it"
            )
        P = None if sparse else _as_float_array("P", self.P, 4)
        R = _as_float_array("R", self.R, 3)
        L, S, A = R.shape
        if not sparse:
            _check_shapes(P, R)
        if L == 0 or S == 0 or A == 0:
            raise OptplanError(f"the model needs L, S, A >= 1, got R {R.shape}")
        mask = self.action_mask
        if mask is not None and np.ndim(mask) == 2:
            mask = (
                np.broadcast_to(np.asarray(mask), (L, S, A)) if np.shape(mask) == (S, A) else mask
            )
        mask = check_action_mask(mask, (L, S, A))
        if sparse:
            P = _sparse_transitions(self.P, S, A, mask, normalize, L=L)
        else:
            if normalize:
                P = _normalized(P)
            _check_transitions(P, mask, "lsa")
        check_reward_scale(R, mask, float(L), f"the horizon {L}")
        initial = _check_initial(self.initial, S, normalize)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "initial", initial)
        object.__setattr__(self, "action_mask", mask)

    @classmethod
    def from_stationary(cls, mdp: TabularMDP, horizon: int) -> FiniteHorizonMDP:
        """Repeat a stationary model over ``horizon`` layers (a sparse model gives a sparse
        one: its CSR rows stacked ``horizon`` times, never densified)."""
        if not isinstance(mdp, TabularMDP):
            raise OptplanTypeError(
                f"mdp must be a TabularMDP, got {type(mdp).__name__}"
                f"{' of shape ' + str(np.shape(mdp)) if isinstance(mdp, np.ndarray) else ''}: "
                "FiniteHorizonMDP.from_stationary(TabularMDP(P, R), horizon) repeats a model"
            )
        L = check_int("horizon", horizon)
        R = np.broadcast_to(mdp.R, (L, *mdp.R.shape))
        if mdp.sparse:
            # the stacked rows (values, column indices, row pointers) and the layered rewards
            rows = mdp.n_states * mdp.n_actions
            nbytes = L * (16 * mdp.P.nnz + 16 * rows)
            subject = f"horizon={L} over the sparse {rows}-row P ({mdp.P.nnz:,} entries)"
            check_bytes(nbytes, subject, "the stacked sparse P and the rewards", memory_bytes())
            return cls(
                _stacked_csr(mdp.P, L),
                R,
                initial=mdp.initial,
                action_mask=mdp.action_mask,
                name=mdp.name,
            )
        check_model_size(mdp.n_states, mdp.n_actions, L)
        P = mdp.dense_P()
        return cls(
            np.broadcast_to(P, (L, *P.shape)),
            R,
            initial=mdp.initial,
            action_mask=mdp.action_mask,
            name=mdp.name,
        )

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(L, S, A)``."""
        return self.R.shape

    @property
    def P_rows(self):
        """``P`` as the ``(L·S·A, S)`` matrix of rows ``l·S·A + s·A + a``, in the model's own
        format (a view of the dense array, or the CSR matrix), without a copy."""
        if self.sparse:
            return self.P
        L, S, A = self.R.shape
        return self.P.reshape(L * S * A, S)

    def layer_rows(self, layer: int):
        """Layer ``layer``'s ``(S·A, S)`` matrix of rows ``s·A + a`` in the model's format:
        a view of the dense array, or a CSR matrix sharing the model's data and indices
        (``layer_rows(l) @ v`` is ``sum_s' P[l, s, a, s'] v[s']`` flattened)."""
        L, S, A = self.R.shape
        layer = check_int("layer", layer, low=0)
        if layer >= L:
            raise OptplanError(f"layer must lie in 0..{L - 1}, got {layer}")
        if not self.sparse:
            return self.P[layer].reshape(S * A, S)
        return csr_block(self.P, layer * S * A, (layer + 1) * S * A)

    @property
    def nnz(self) -> int:
        """Number of stored transition probabilities (every entry of a dense ``P``)."""
        return int(self.P.nnz) if self.sparse else int(self.P.size)

    def dense_P(self) -> np.ndarray:
        """``P`` as a read-only ``(L, S, A, S)`` array: the model's own when dense, a copy
        when sparse, refused (``OptplanError`` naming the size) beyond
        :data:`DENSE_VIEW_MAX_BYTES`."""
        if not self.sparse:
            return self.P
        L, S, A = self.R.shape
        nbytes = _dense_bytes(S, A, L)
        if nbytes > DENSE_VIEW_MAX_BYTES:
            raise OptplanError(
                f"a dense P of this sparse model (L={L}, S={S}, A={A}) would take "
                f"{nbytes:,} bytes ({nbytes / 2**30:.3g} GiB), above the "
                f"{DENSE_VIEW_MAX_BYTES / 2**30:g} GiB of optplan.mdp.DENSE_VIEW_MAX_BYTES: "
                "this computation needs a dense model; finite-horizon planning (backward "
                "induction and its LP) runs sparse"
            )
        out = self.P.toarray().reshape(L, S, A, S)
        out.setflags(write=False)
        return out

    def to_dense(self) -> FiniteHorizonMDP:
        """The same model with ``P`` dense (itself when it is; :meth:`dense_P`'s size limit)."""
        if not self.sparse:
            return self
        return FiniteHorizonMDP(self.dense_P(), self.R, self.initial, self.action_mask, self.name)

    def to_sparse(self) -> FiniteHorizonMDP:
        """The same model with ``P`` a CSR matrix of shape ``(L·S·A, S)`` (itself when it
        is)."""
        if self.sparse:
            return self
        import scipy.sparse as sp

        return FiniteHorizonMDP(
            sp.csr_matrix(self.P_rows), self.R, self.initial, self.action_mask, self.name
        )

    @property
    def horizon(self) -> int:
        return self.R.shape[0]

    @property
    def discount(self) -> None:
        return None

    def __eq__(self, other) -> bool:
        if not isinstance(other, FiniteHorizonMDP):
            return NotImplemented
        return (
            self.name == other.name
            and _same_transitions(self, other)
            and np.array_equal(self.R, other.R)
            and np.array_equal(self.initial, other.initial)
            and np.array_equal(self.action_mask, other.action_mask)
        )

    __hash__ = None

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        fmt = f", sparse nnz={self.nnz}" if self.sparse else ""
        return (
            f"FiniteHorizonMDP({label}L={self.horizon}, S={self.n_states}, A={self.n_actions}{fmt})"
        )


def csr_block(P, start: int, stop: int):
    """Rows ``start:stop`` of a CSR matrix as a CSR matrix sharing its ``data`` and
    ``indices`` (only the row pointers are new; scipy's own slicing and constructor copy a
    view of a much larger array): a layer of a sparse layered ``P``."""
    import scipy.sparse as sp

    lo, hi = int(P.indptr[start]), int(P.indptr[stop])
    out = sp.csr_matrix((stop - start, P.shape[1]), dtype=P.dtype)
    out.indptr = (P.indptr[start : stop + 1] - lo).astype(P.indices.dtype, copy=False)
    out.indices = P.indices[lo:hi]
    out.data = P.data[lo:hi]
    out.has_canonical_format = True
    return out


def _stacked_csr(P, L: int):
    """A CSR matrix stacked ``L`` times (its arrays tiled; never densified)."""
    import scipy.sparse as sp

    n, nnz = P.shape[0], P.nnz
    indptr = (P.indptr[:-1][None, :] + nnz * np.arange(L)[:, None]).ravel()
    indptr = np.append(indptr, L * nnz).astype(np.int64)
    out = sp.csr_matrix(
        (np.tile(P.data, L), np.tile(P.indices, L).astype(np.int64), indptr),
        shape=(L * n, P.shape[1]),
    )
    return out
