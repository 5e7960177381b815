"""Validation of a tabular model's arrays, for :mod:`optplan.mdp`: shapes, the rows of a dense
or sparse transition matrix, initial distributions, action masks, reward scales and model
sizes. Each error names the field, the index and the value; the public names are re-exported
by :mod:`optplan.mdp`."""

from __future__ import annotations

import math

import numpy as np

from ._checks import (
    ROW_SUM_TOL,
    OptplanError,
    OptplanTypeError,
    as_array,
    check_distribution,
    check_finite,
    first_bad,
    first_negative,
    index_str,
)

#: The largest transition array (bytes, float64) a generator or a model file may ask for:
#: ``L * S * A * S * 8``. A model beyond it is refused before anything is allocated.
MAX_MODEL_BYTES = 2 * 2**30
#: With ``normalize=True`` a model rescales rows of ``P`` (and ``initial``) whose sums are
#: within this of 1: float32 round-off (about 1e-7 per entry) or decimals rounded to a few
#: places. A row further off is a wrong row, not a rounded one, and is refused either way.
NORMALIZE_TOL = 1e-6


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


def check_bytes(nbytes: int, subject: str, what: str, budget: int | None = None) -> None:
    """Refuse an allocation of ``nbytes`` above ``budget`` (default :data:`MAX_MODEL_BYTES`)
    before it is made, naming ``subject`` (the sizes that set it), ``what`` is allocated and
    the bytes."""
    limit = MAX_MODEL_BYTES if budget is None else budget
    if nbytes > limit:
        source = "(optplan.mdp.MAX_MODEL_BYTES)" if budget is None else "(this machine's memory)"
        raise OptplanError(
            f"model too large: {subject} needs {what}, {nbytes:,} bytes "
            f"({nbytes / 2**30:.3g} GiB), above the {limit / 2**30:.3g} GiB budget {source}"
        )


def memory_bytes() -> int | None:
    """The machine's physical memory in bytes, where the system says (``None`` elsewhere)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


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


def _sparse_transitions(
    P,
    S: int,
    A: int,
    mask: np.ndarray,
    normalize: bool,
    L: int | None = None,
    name: str = "P",
    sizes_from: str = "R",
    offer_normalize: bool = True,
):
    """A sparse ``P`` as a validated, read-only, canonical float64 CSR matrix of shape
    ``(S·A, S)`` (row ``s·A + a``), or ``(L·S·A, S)`` for a layered model (``L`` given: row
    ``l·S·A + s·A + a``): entries finite and non-negative, duplicate entries summed, explicit
    zeros dropped, admissible rows summing to 1 (``normalize``: rescaled when within
    :data:`NORMALIZE_TOL`). Errors name ``(s, a)`` (``(l, s, a)``), ``s'`` and the value. The
    input is copied unless it is already such a matrix (``with_mask`` / ``with_discount`` pass
    it on). ``name`` is the field the errors name, ``sizes_from`` the array that gave
    the sizes; ``offer_normalize=False``: a row-sum error does not suggest ``normalize=True``
    (for callers without that option, as :class:`~optplan.OptimisticPlanning`)."""
    import scipy.sparse as sp

    n_rows = S * A * (1 if L is None else L)
    rows_name, lead = ("S*A", "(s, a)") if L is None else ("L*S*A", "(l, s, a)")
    if P.ndim != 2:
        raise OptplanError(
            f"{name} (sparse) must be 2-D of shape ({rows_name}, S), got shape {P.shape}"
        )
    if P.shape != (n_rows, S):
        hint = ""
        if P.shape[::-1] == (n_rows, S):
            hint = (
                f"; row {'l*S*A + ' if L is not None else ''}s*A + a holds {name}[{lead[1:-1]}, :]"
            )
        sizes = f"{sizes_from} of shape " + str((S, A) if L is None else (L, S, A))
        raise OptplanError(
            f"{name} (sparse) has shape {P.shape}, expected ({rows_name}, S) = ({n_rows}, {S}) "
            f"from {sizes}{hint}"
        )
    if P.dtype.kind not in "biuf":
        raise OptplanTypeError(f"{name} must be a real numeric sparse matrix, got dtype {P.dtype}")
    check_sparse_structure(P, name, A, L)  # before SciPy reads the index arrays
    copied = not _frozen_csr(P)
    if copied:
        P = sp.csr_matrix(P, dtype=np.float64, copy=True)
        P.sum_duplicates()
    data = P.data

    def pair(row: int) -> str:
        s, a = divmod(row, A)
        if L is None:
            return f"(s, a) = ({s}, {a})"
        l, s = divmod(s, S)
        return f"(l, s, a) = ({l}, {s}, {a})"

    def where(k: int) -> str:
        row = int(np.searchsorted(P.indptr, k, side="right")) - 1
        return f"{pair(row)}, s'={int(P.indices[k])}"

    bad = ~np.isfinite(data)
    if bad.any():
        k = int(np.argmax(bad))
        raise OptplanError(f"{name} has a non-finite entry {float(data[k])!r} at {where(k)}")
    neg = data < 0
    if neg.any():
        k = int(np.argmax(neg))
        raise OptplanError(f"{name} has a negative entry {float(data[k])!r} at {where(k)}")
    if copied:
        P.eliminate_zeros()
        data = P.data
    # reduceat over the nonempty rows only: it would repeat a value for an empty row, and
    # refuse the start of trailing empty rows (masked-out pairs may have no entries)
    nonempty = np.diff(P.indptr) > 0
    sums = np.zeros(n_rows)
    if data.size:
        sums[nonempty] = np.add.reduceat(data, P.indptr[:-1][nonempty])
    if normalize and copied:
        near = np.abs(sums - 1.0) <= NORMALIZE_TOL
        scale = np.where(near & (sums > 0), 1.0 / np.where(sums > 0, sums, 1.0), 1.0)
        data *= np.repeat(scale, np.diff(P.indptr))
        sums = np.where(near & (sums > 0), 1.0, sums)
    off = np.abs(sums - 1.0)
    bad = (off > ROW_SUM_TOL) & mask.reshape(-1)
    if bad.any():
        row = int(np.argmax(bad))
        raise OptplanError(
            f"row {name}[{pair(row)}] (sparse row {row}) sums to {float(sums[row])!r}, "
            f"not 1 (tolerance {ROW_SUM_TOL})"
            + (_hint(float(off[bad].max())) if offer_normalize else "")
        )
    for arr in (P.data, P.indices, P.indptr):
        arr.setflags(write=False)
    return P


def check_sparse_structure(P, name: str = "P", A: int | None = None, L: int | None = None):
    """Refuse a sparse matrix whose index arrays contradict its shape before SciPy or a kernel
    reads them (a column index out of range, an ``indptr`` that is not a monotone path from 0
    to the number of entries, arrays of unequal lengths): SciPy trusts them, and a compiled
    loop would read outside its arrays. The error names ``name``, the row (as ``(s, a)`` or
    ``(l, s, a)`` when ``A`` is given) and the value. Formats other than CSR, CSC, BSR and COO
    are built through SciPy's checked setters and converted as they are."""
    n_rows, n_cols = P.shape

    def row_of(r: int) -> str:
        if A is None:
            return f"row {r}"
        s, a = divmod(int(r), A)
        if L is None:
            return f"row {r} = (s, a) = ({s}, {a})"
        l, s = divmod(s, n_cols)
        return f"row {r} = (l, s, a) = ({l}, {s}, {a})"

    def ints(label: str, arr) -> np.ndarray:
        arr = np.asarray(arr)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise OptplanError(
                f"{name} (sparse {P.format}) has {label} of dtype {arr.dtype} and shape "
                f"{arr.shape}, expected a 1-D integer array"
            )
        return arr

    def in_range(label: str, idx: np.ndarray, bound: int, rows: np.ndarray) -> None:
        bad = (idx < 0) | (idx >= bound)
        if bad.any():
            k = int(np.argmax(bad))
            raise OptplanError(
                f"{name} (sparse {P.format}) has {label} {int(idx[k])} at {row_of(int(rows[k]))},"
                f" outside [0, {bound})"
            )

    fmt = P.format
    data = np.asarray(P.data)
    if fmt == "coo":
        row, col = ints("row indices", P.row), ints("column indices", P.col)
        if not (row.size == col.size == data.size):
            raise OptplanError(
                f"{name} (sparse coo) has {row.size} row indices, {col.size} column indices "
                f"and {data.size} values: they must be as many"
            )
        in_range("row index", row, n_rows, np.zeros(row.size, dtype=np.int64))
        in_range("column index", col, n_cols, row)
        return
    if fmt not in ("csr", "csc", "bsr"):
        return
    indptr, indices = ints("indptr", P.indptr), ints("indices", P.indices)
    block = P.blocksize if fmt == "bsr" else (1, 1)
    major, minor = (n_rows // block[0], n_cols // block[1]) if fmt != "csc" else (n_cols, n_rows)
    if indptr.size != major + 1:
        raise OptplanError(
            f"{name} (sparse {fmt}) has an indptr of length {indptr.size}, expected "
            f"{major + 1} (one more than its {'columns' if fmt == 'csc' else 'rows'})"
        )
    steps = np.diff(indptr)
    if indptr[0] != 0 or (steps < 0).any():
        k = int(np.argmax(steps < 0)) if indptr[0] == 0 else 0
        raise OptplanError(
            f"{name} (sparse {fmt}) has an indptr that does not rise from 0: indptr[0] = "
            f"{int(indptr[0])}, indptr[{k}:{k + 2}] = {indptr[k : k + 2].tolist()}"
        )
    nnz = int(indptr[-1])
    stored = data.shape[0] if data.ndim else 0
    if indices.size < nnz or stored < nnz:
        raise OptplanError(
            f"{name} (sparse {fmt}) has indptr[-1] = {nnz} entries but {indices.size} indices "
            f"and {stored} values"
        )
    owner = np.repeat(np.arange(major), steps)  # the row (column for CSC) of each entry
    if fmt == "csc":
        in_range("row index", indices[:nnz], minor, indices[:nnz])
        return
    if fmt == "bsr":  # rows of the first row of each block
        owner = owner * block[0]
    in_range("column index", indices[:nnz], minor, owner)


def _frozen_csr(P) -> bool:
    """A canonical float64 ``csr_matrix`` whose arrays no one can write (a validated model's)."""
    import scipy.sparse as sp

    return (
        isinstance(P, sp.csr_matrix)
        and P.dtype == np.float64
        and not any(a.flags.writeable for a in (P.data, P.indices, P.indptr))
        and P.has_canonical_format
    )


def _dense_bytes(S: int, A: int, L: int = 1) -> int:
    return L * S * A * S * 8


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
