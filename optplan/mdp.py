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

import math
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import numpy as np

from ._checks import (
    ROW_SUM_TOL,
    OptplanError,
    OptplanTypeError,
    as_array,
    check_distribution,
    check_finite,
    check_int,
    check_label,
    first_bad,
    first_negative,
    index_str,
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
#: The largest transition array (bytes, float64) a generator or a model file may ask for:
#: ``L * S * A * S * 8``. A model beyond it is refused before anything is allocated.
MAX_MODEL_BYTES = 2 * 2**30
#: With ``normalize=True`` a model rescales rows of ``P`` (and ``initial``) whose sums are
#: within this of 1: float32 round-off (about 1e-7 per entry) or decimals rounded to a few
#: places. A row further off is a wrong row, not a rounded one, and is refused either way.
NORMALIZE_TOL = 1e-6
#: The largest dense ``(S, A, S)`` float64 copy :meth:`TabularMDP.dense_P` makes of a sparse
#: model (512 MiB: S = 4,096 with A = 4); beyond it the accessor raises, naming the size.
DENSE_VIEW_MAX_BYTES = 2**29


def is_sparse(value) -> bool:
    """Whether ``value`` is a ``scipy.sparse`` matrix or array (without importing scipy)."""
    return type(value).__module__.startswith("scipy.sparse")


def check_model_size(
    n_states: int, n_actions: int, n_layers: int = 1, subject: str | None = None
) -> None:
    """Refuse a model whose transition array would exceed :data:`MAX_MODEL_BYTES`, naming the
    sizes and the bytes (before a generator allocates it). ``subject`` replaces the default
    description of the sizes (``n_states=..., n_actions=...``) in the message."""
    nbytes = n_layers * n_states * n_actions * n_states * 8
    if nbytes > MAX_MODEL_BYTES:
        dims = f"n_states={n_states}, n_actions={n_actions}"
        shape = f"({n_states}, {n_actions}, {n_states})"
        if n_layers != 1:
            dims = f"horizon={n_layers}, " + dims
            shape = f"({n_layers}, {n_states}, {n_actions}, {n_states})"
        dims = subject or dims
        raise OptplanError(
            f"model too large: {dims} needs a transition array P of shape {shape}, "
            f"{nbytes:,} bytes ({nbytes / 2**30:.3g} GiB), above the "
            f"{MAX_MODEL_BYTES / 2**30:g} GiB budget (optplan.mdp.MAX_MODEL_BYTES)"
        )


def shape_fault(P_shape: tuple[int, ...], R_shape: tuple[int, ...]) -> tuple[str, str] | None:
    """Which of ``P`` and ``R`` has the wrong shape, and why: ``(name, "has shape ...")``, or
    ``None`` when ``P`` is ``R``'s ``(S, A, S)`` (``(L, S, A, S)`` for ``R`` of ``(L, S, A)``).

    ``P`` consistent with itself (its first and last state axes agree) and ``R`` not of its
    ``(S, A)``: ``R`` is named (with a hint when it is transposed). Otherwise ``P`` is named,
    with a hint when it is in pymdptoolbox's layout ``P[a, s, s']`` (actions before states).
    :class:`TabularMDP`, :class:`FiniteHorizonMDP` and model files report through it.
    """
    P_shape, R_shape = tuple(P_shape), tuple(R_shape)
    lead, (S, A) = R_shape[:-2], R_shape[-2:]
    expected = (*lead, S, A, S)
    if P_shape == expected:
        return None
    layered = len(R_shape) == 3
    p_layout, r_layout = ("(L, S, A, S)", "(L, S, A)") if layered else ("(S, A, S)", "(S, A)")
    if len(P_shape) == len(expected) and P_shape[-3] == P_shape[-1]:
        implied = P_shape[:-1]  # the R that P implies: (S, A) or (L, S, A)
        if R_shape[-2:] != implied[-2:]:
            hint = ""
            if R_shape[-2:] == implied[-2:][::-1]:
                hint = "; R looks transposed (actions before states): R[s, a] is wanted"
            return "R", (
                f"has shape {R_shape}, expected {implied} = {r_layout} from P of shape "
                f"{P_shape}{hint}"
            )
    hint = ""
    if P_shape == (*lead, A, S, S):
        hint = (
            "; it looks like pymdptoolbox's layout P[a, s, s'] (actions first): "
            "op.from_mdptoolbox(P, R, ...) converts it, or np.transpose(P, (1, 0, 2))"
            if not layered
            else "; it looks like P[l, a, s, s'] (actions before states): "
            "np.transpose(P, (0, 2, 1, 3)) gives P[l, s, a, s']"
        )
    return (
        "P",
        f"has shape {P_shape}, expected {expected} = {p_layout} from R of shape {R_shape}{hint}",
    )


def _check_shapes(P: np.ndarray, R: np.ndarray) -> None:
    fault = shape_fault(P.shape, R.shape)
    if fault is not None:
        raise OptplanError(" ".join(fault))


def _as_float_array(name: str, value, ndim: int) -> np.ndarray:
    """``value`` as a read-only float64 array: itself when nothing can change it (another
    model's array, as ``with_discount`` / ``with_mask`` pass on: 128 MB at S = 2000, A = 4),
    else a copy, so that a caller who later writes into their array cannot change a
    validated model (a read-only view of a writable array is copied too)."""
    if _immutable_float64(value):
        if value.ndim != ndim:
            raise OptplanError(f"{name} must have {ndim} dimensions, got shape {value.shape}")
        check_finite(name, value)
        return value
    return as_array(name, value, ndim, readonly=True)


def _ndim(value) -> int | None:
    """``np.ndim(value)``, ``None`` for input numpy cannot shape (ragged: refused later, by
    :func:`as_array`, with the field's name)."""
    try:
        return np.ndim(value)
    except (TypeError, ValueError):
        return None


def _immutable_float64(value) -> bool:
    """A C-contiguous float64 ndarray that no one can write: read-only, and so is every
    array it views, down to one that owns its memory (or to immutable ``bytes``). Broadcast
    views (``FiniteHorizonMDP.from_stationary``) are not contiguous: copied, as before."""
    if not (
        isinstance(value, np.ndarray) and value.dtype == np.float64 and value.flags.c_contiguous
    ):
        return False
    arr = value
    while isinstance(arr, np.ndarray):
        if arr.flags.writeable:
            return False
        arr = arr.base
    return arr is None or isinstance(arr, bytes)


def _check_distribution(name: str, arr: np.ndarray) -> None:
    if arr.ndim != 1:
        raise OptplanError(f"{name} must be a vector, got shape {arr.shape}")
    check_distribution(name, arr)


def _check_normalize(normalize) -> bool:
    if not isinstance(normalize, (bool, np.bool_)):
        raise OptplanTypeError(f"normalize must be True or False, got {normalize!r}")
    return bool(normalize)


def _normalized(arr: np.ndarray) -> np.ndarray:
    """``arr`` (float64) with each last-axis row whose sum is within :data:`NORMALIZE_TOL` of
    1 divided by its sum; negative entries are left for the checks to refuse, other rows are
    left as they are (a row off by more is refused by the checks that follow)."""
    sums = arr.sum(axis=-1, keepdims=True)
    near = (np.abs(sums - 1.0) <= NORMALIZE_TOL) & (arr >= 0).all(axis=-1, keepdims=True)
    out = np.where(near, arr / np.where(near, sums, 1.0), arr)
    out.setflags(write=False)
    return out


def _hint(off: float) -> str:
    """What to add to a row-sum error: the ``normalize=True`` hint when the row is off by
    round-off only."""
    if off <= NORMALIZE_TOL:
        return (
            f"; every such row is off by at most {off:.3g}, within {NORMALIZE_TOL:g} (float32 "
            "or rounded input?): pass normalize=True to rescale them to sum 1"
        )
    return ""


def _check_initial(initial, S: int, normalize: bool = False) -> np.ndarray:
    """The start distribution: uniform if ``None``, else a validated read-only copy."""
    if initial is None:
        out = np.full(S, 1.0 / S)
        out.setflags(write=False)
        return out
    out = _as_float_array("initial", initial, 1)
    if out.shape != (S,):
        raise OptplanError(f"initial has shape {out.shape}, expected ({S},)")
    if normalize:
        out = _normalized(out)
    try:
        _check_distribution("initial", out)
    except OptplanError as exc:
        off = abs(float(out.sum()) - 1.0)
        if normalize or (out < 0).any() or not _hint(off):
            raise
        raise OptplanError(f"{exc}{_hint(off)}") from None
    return out


def _check_transitions(P: np.ndarray, mask: np.ndarray, axes: str) -> None:
    """Check P >= 0 and that admissible rows sum to one; ``axes`` names the leading axes."""

    def where(idx):
        return "P[" + ", ".join(f"{n}={i}" for n, i in zip(axes, idx, strict=False)) + "]"

    idx = first_negative(P)
    if idx is not None:
        raise OptplanError(
            f"P has a negative entry {float(P[idx])!r} at {where(idx[:-1])[:-1]}, s'={idx[-1]}]"
        )
    sums = P.sum(axis=-1)
    bad = (np.abs(sums - 1.0) > ROW_SUM_TOL) & mask
    if bad.any():
        idx = first_bad(bad)
        off = float(np.abs(sums - 1.0)[bad].max())
        raise OptplanError(
            f"row {where(idx)[:-1]}, :] sums to {float(sums[idx])!r}, "
            f"not 1 (tolerance {ROW_SUM_TOL}){_hint(off)}"
        )


def _sparse_transitions(P, S: int, A: int, mask: np.ndarray, normalize: bool):
    """A sparse ``P`` as a validated, read-only, canonical float64 CSR matrix of shape
    ``(S·A, S)`` (row ``s·A + a``): entries finite and non-negative, duplicate entries summed,
    explicit zeros dropped, admissible rows summing to 1 (``normalize``: rescaled when within
    :data:`NORMALIZE_TOL`). Errors name ``(s, a)``, ``s'`` and the value. The input is copied
    unless it is already such a matrix (``with_mask`` / ``with_discount`` pass it on)."""
    import scipy.sparse as sp

    if P.ndim != 2:
        raise OptplanError(f"P (sparse) must be 2-D of shape (S*A, S), got shape {P.shape}")
    if P.shape != (S * A, S):
        hint = ""
        if P.shape == (A * S, S) or P.shape == (S, A * S):
            hint = "; row s*A + a holds P[s, a, :]"
        raise OptplanError(
            f"P (sparse) has shape {P.shape}, expected (S*A, S) = ({S * A}, {S}) from R of "
            f"shape ({S}, {A}){hint}"
        )
    if P.dtype.kind not in "biuf":
        raise OptplanTypeError(f"P must be a real numeric sparse matrix, got dtype {P.dtype}")
    copied = not _frozen_csr(P)
    if copied:
        P = sp.csr_matrix(P, dtype=np.float64, copy=True)
        P.sum_duplicates()
    data = P.data

    def where(k: int) -> str:
        row = int(np.searchsorted(P.indptr, k, side="right")) - 1
        s, a = divmod(row, A)
        return f"(s, a) = ({s}, {a}), s'={int(P.indices[k])}"

    bad = ~np.isfinite(data)
    if bad.any():
        k = int(np.argmax(bad))
        raise OptplanError(f"P has a non-finite entry {float(data[k])!r} at {where(k)}")
    neg = data < 0
    if neg.any():
        k = int(np.argmax(neg))
        raise OptplanError(f"P has a negative entry {float(data[k])!r} at {where(k)}")
    if copied:
        P.eliminate_zeros()
        data = P.data
    sums = np.add.reduceat(data, P.indptr[:-1]) if data.size else np.zeros(S * A)
    sums = np.where(np.diff(P.indptr) > 0, sums, 0.0)  # reduceat repeats a value for empty rows
    if normalize and copied:
        near = np.abs(sums - 1.0) <= NORMALIZE_TOL
        scale = np.where(near & (sums > 0), 1.0 / np.where(sums > 0, sums, 1.0), 1.0)
        data *= np.repeat(scale, np.diff(P.indptr))
        sums = np.where(near & (sums > 0), 1.0, sums)
    off = np.abs(sums - 1.0)
    bad = (off > ROW_SUM_TOL) & mask.reshape(-1)
    if bad.any():
        row = int(np.argmax(bad))
        s, a = divmod(row, A)
        raise OptplanError(
            f"row P[(s, a) = ({s}, {a})] (sparse row {row}) sums to {float(sums[row])!r}, "
            f"not 1 (tolerance {ROW_SUM_TOL}){_hint(float(off[bad].max()))}"
        )
    for arr in (P.data, P.indices, P.indptr):
        arr.setflags(write=False)
    return P


def _frozen_csr(P) -> bool:
    """A canonical float64 ``csr_matrix`` whose arrays no one can write (a validated model's)."""
    import scipy.sparse as sp

    return (
        isinstance(P, sp.csr_matrix)
        and P.dtype == np.float64
        and P.has_canonical_format
        and not any(a.flags.writeable for a in (P.data, P.indices, P.indptr))
    )


def _dense_bytes(S: int, A: int) -> int:
    return S * A * S * 8


def check_reward_scale(R: np.ndarray, mask: np.ndarray, horizon: float, what: str) -> None:
    """Refuse rewards whose values would overflow float64: the largest admissible ``|R|``
    times ``max(2, horizon)`` (a value sums up to ``horizon`` rewards, a span or a gap
    subtracts two of them) must be finite. ``what`` says where ``horizon`` comes from."""
    if not mask.any():
        return
    mag = np.where(mask, np.abs(R), 0.0)
    big = float(mag.max())
    factor = max(2.0, horizon)
    if math.isfinite(big * factor):
        return
    idx = first_bad(mag == big)
    limit = np.finfo(float).max / factor
    raise OptplanError(
        f"R has an entry {float(R[idx])!r} at {index_str(idx)} too large for the values: "
        f"|R| times {factor:.6g} ({what}) overflows float64; rewards of magnitude at most "
        f"{limit:.3g} fit (rescale R)"
    )


def check_action_mask(mask, shape: tuple[int, ...]) -> np.ndarray:
    """``action_mask`` as a read-only bool array of ``shape`` (all True when None), every
    state with an admissible action."""
    if mask is None:
        out = np.ones(shape, dtype=bool)
    else:
        out = np.array(mask)
        if out.dtype != bool:
            if out.dtype.kind not in "iu" or not np.isin(out, (0, 1)).all():
                raise OptplanTypeError(f"action_mask must be boolean, got dtype {out.dtype}")
            out = out.astype(bool)
        if out.shape != shape:
            raise OptplanError(f"action_mask has shape {out.shape}, expected {shape} to match R")
    empty = ~out.any(axis=-1)
    if empty.any():
        idx = first_bad(empty)
        row = out[idx].tolist()
        raise OptplanError(
            f"action_mask leaves state {index_str(idx)} with no action "
            f"(action_mask[{index_str(idx)}] = {row})"
        )
    out.setflags(write=False)
    return out


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


@dataclass(frozen=True, eq=False)
class TabularMDP(StateActionSizes):
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
    def P_format(self) -> str:
        """``"dense"`` (``P`` is an ``(S, A, S)`` array) or ``"csr"`` (``P`` is a
        ``scipy.sparse.csr_matrix`` of shape ``(S·A, S)``, row ``s·A + a``)."""
        return "csr" if is_sparse(self.P) else "dense"

    @property
    def sparse(self) -> bool:
        """Whether ``P`` is held sparse (:attr:`P_format` ``"csr"``)."""
        return is_sparse(self.P)

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


def _same_transitions(a: TabularMDP, b: TabularMDP) -> bool:
    """Equal ``P`` in any pair of formats (a dense one compared as CSR, never densified)."""
    if a.R.shape != b.R.shape:
        return False
    if not a.sparse and not b.sparse:
        return np.array_equal(a.P, b.P)
    x, y = a.to_sparse().P, b.to_sparse().P
    return (x != y).nnz == 0


@dataclass(frozen=True, eq=False)
class FiniteHorizonMDP(StateActionSizes):
    """A layered finite-horizon MDP (k-learning-variational-bayesian-rl §2).

    Parameters
    ----------
    P : array_like, shape (L, S, A, S)
        ``P[l, s, a, s']`` transition law at layer (step) ``l``.
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
        if _ndim(self.P) == 3 and _ndim(self.R) == 2:
            raise OptplanError(
                f"P has shape {np.shape(self.P)} and R {np.shape(self.R)}, a stationary model; "
                f"a finite-horizon one has P (L, S, A, S) and R (L, S, A): "
                f"FiniteHorizonMDP.from_stationary(TabularMDP(P, R), horizon) repeats it"
            )
        P = _as_float_array("P", self.P, 4)
        R = _as_float_array("R", self.R, 3)
        L, S, A = R.shape
        _check_shapes(P, R)
        if L == 0 or S == 0 or A == 0:
            raise OptplanError(f"the model needs L, S, A >= 1, got R {R.shape}")
        mask = self.action_mask
        if mask is not None and np.ndim(mask) == 2:
            mask = (
                np.broadcast_to(np.asarray(mask), (L, S, A)) if np.shape(mask) == (S, A) else mask
            )
        mask = check_action_mask(mask, (L, S, A))
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
        """Repeat a stationary model over ``horizon`` layers."""
        if not isinstance(mdp, TabularMDP):
            raise OptplanTypeError(
                f"mdp must be a TabularMDP, got {type(mdp).__name__}"
                f"{' of shape ' + str(np.shape(mdp)) if isinstance(mdp, np.ndarray) else ''}: "
                "FiniteHorizonMDP.from_stationary(TabularMDP(P, R), horizon) repeats a model"
            )
        L = check_int("horizon", horizon)
        check_model_size(mdp.n_states, mdp.n_actions, L)
        P = mdp.dense_P()
        return cls(
            np.broadcast_to(P, (L, *P.shape)),
            np.broadcast_to(mdp.R, (L, *mdp.R.shape)),
            initial=mdp.initial,
            action_mask=mdp.action_mask,
            name=mdp.name,
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
            and np.array_equal(self.P, other.P)
            and np.array_equal(self.R, other.R)
            and np.array_equal(self.initial, other.initial)
            and np.array_equal(self.action_mask, other.action_mask)
        )

    __hash__ = None

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"FiniteHorizonMDP({label}L={self.horizon}, S={self.n_states}, A={self.n_actions})"
