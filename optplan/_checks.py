"""Input checks shared by every layer, and the error family they raise.

Every check names the argument and the offending value (and, for arrays, the first bad
index), and raises an :class:`OptplanError`. The family derives from the built-in exceptions
callers already catch (``ValueError``, ``TypeError``, ``ImportError``), so ``except
ValueError`` keeps working, while the command line can tell a user's input error (exit code 2,
one line) from a bug in optplan (a traceback).
"""

from __future__ import annotations

import logging
import math
import os
from numbers import Integral, Real
from pathlib import Path

import numpy as np

__all__ = [
    "OptplanError",
    "OptplanTypeError",
    "MissingDependency",
    "ROW_SUM_TOL",
    "first_bad",
    "index_str",
    "check_int",
    "check_real",
    "check_positive",
    "check_tolerance",
    "check_choice",
    "as_array",
    "as_numeric",
    "check_finite",
    "check_distribution",
    "check_label",
    "check_writable",
    "write_error",
]

# Notices that are not errors (a conic solve replaced by the fast answer, an algorithm that
# takes over from another) go to the "optplan.<module>" loggers. The package logger gets a
# NullHandler only, so nothing prints unless the application configures logging, e.g.
# ``logging.basicConfig(level="INFO")``. Warnings the user must act on stay ``warnings.warn``.
logging.getLogger("optplan").addHandler(logging.NullHandler())

#: Probability vectors (rows of ``P``, ``initial``, ``p``) must sum to 1 within this tolerance.
ROW_SUM_TOL = 1e-9


class OptplanError(ValueError):
    """A user's input that optplan refuses: the message names the argument and the value."""


class OptplanTypeError(OptplanError, TypeError):
    """An input of the wrong type (also a ``TypeError``)."""


class MissingDependency(OptplanError, ImportError):
    """An optional dependency is not installed; the message says which extra provides it."""


def index_str(idx: tuple[int, ...]) -> str:
    """``3`` for a one-dimensional index, ``(1, 2)`` otherwise."""
    return str(idx[0]) if len(idx) == 1 else str(idx)


def first_bad(bad: np.ndarray) -> tuple[int, ...]:
    """Index of the first ``True`` entry of a boolean array (``()`` for a scalar)."""
    bad = np.asarray(bad)
    if bad.ndim == 0:
        return ()
    return tuple(int(i) for i in np.argwhere(bad)[0])


def first_negative(arr: np.ndarray) -> tuple[int, ...] | None:
    """Index of the first negative entry of ``arr`` (:func:`first_bad`), ``None`` if none."""
    neg = arr < 0
    return first_bad(neg) if neg.any() else None


def check_int(name: str, value, low: int | None = 1) -> int:
    """An integer (``bool`` refused) ``>= low``; ``low=None`` for any integer."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise OptplanTypeError(f"{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        kind = {1: "a positive integer", 0: "a non-negative integer"}.get(low, f">= {low}")
        raise OptplanError(f"{name} must be {kind}, got {value!r}")
    return int(value)


def check_real(
    name: str,
    value,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    finite: bool = True,
) -> float:
    """A real number (``bool`` refused) in ``[low, high]`` (ends open on request)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise OptplanTypeError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if math.isnan(x) or (finite and math.isinf(x)):
        raise OptplanError(f"{name} must be a finite number, got {value!r}")
    below = low is not None and (x <= low if low_open else x < low)
    above = high is not None and (x >= high if high_open else x > high)
    if below or above:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        interval = f"{'(' if low_open or low is None else '['}{lo}, {hi}"
        interval += ")" if high_open or high is None else "]"
        raise OptplanError(f"{name} must lie in {interval}, got {value!r}")
    return x


def check_positive(name: str, value, allow_zero: bool = False) -> float:
    """A finite real number ``> 0`` (``>= 0`` with ``allow_zero``)."""
    bound = ">= 0" if allow_zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise OptplanTypeError(f"{name} must be a finite number {bound}, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise OptplanError(f"{name} must be a finite number {bound}, got {value!r}")
    return x


def check_tolerance(name: str, value) -> float:
    """A solver tolerance (``tol``, ``xtol``): a finite real number ``> 0``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise OptplanTypeError(f"{name} must be a positive number (finite), got {value!r}")
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise OptplanError(f"{name} must be a positive number (finite), got {value!r}")
    return x


def check_choice(name: str, value, choices) -> str:
    """``value`` is one of ``choices``."""
    if value not in choices:
        raise OptplanError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def as_array(
    name: str,
    value,
    ndim: int | tuple[int, ...] | None = None,
    *,
    finite: bool = True,
    readonly: bool = False,
) -> np.ndarray:
    """A float array copy of ``value`` with ``ndim`` dimensions (one of them), finite entries.

    Errors: not numeric (type error), wrong number of dimensions, first non-finite entry.
    """
    if value is None:
        raise OptplanTypeError(f"{name} is required, got None")
    arr = _to_float(name, value, copy=True, what="a numeric array", kind="array")
    if ndim is not None:
        ndims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in ndims:
            want = " or ".join(str(n) for n in ndims)
            raise OptplanError(f"{name} must have {want} dimensions, got shape {arr.shape}")
    if finite:
        check_finite(name, arr)
    if readonly:
        arr.setflags(write=False)
    return arr


def as_numeric(name: str, value) -> np.ndarray:
    """``np.asarray(value, dtype=float)`` (no copy when already float), or a clear type error."""
    return _to_float(name, value, copy=False, what="numeric", kind="value")


def ragged_shape(value) -> tuple[int, ...] | None:
    """Where a nested sequence stops being rectangular: the lengths along the first path into
    it up to the level whose items disagree (``[[1, 2], [3]]``: ``(2,)``), ``None`` when it is
    rectangular or not a nested list/tuple."""
    lead: list[int] = []
    level = [value]
    while all(isinstance(x, (list, tuple)) for x in level) and level:
        lengths = {len(x) for x in level}
        if len(lengths) > 1:
            return tuple(lead)
        lead.append(lengths.pop())
        level = [y for x in level for y in x]
        kinds = {isinstance(y, (list, tuple, np.ndarray)) for y in level}
        if len(kinds) > 1:
            return tuple(lead)
    return None


def _to_float(name: str, value, copy: bool, what: str, kind: str) -> np.ndarray:
    """``value`` as a float64 array (a copy with ``copy``), or an :class:`OptplanError` naming
    ``name``: ragged nested sequences (rows of different lengths), complex or non-numeric
    input."""
    try:
        if np.iscomplexobj(value):
            raise OptplanTypeError(f"{name} must be real, got a complex {kind}")
        arr = np.array(value, dtype=float) if copy else np.asarray(value, dtype=float)
    except OptplanError:
        raise
    except (TypeError, ValueError) as exc:
        lead = ragged_shape(value)
        if lead is not None or "inhomogeneous" in str(exc):
            at = f" after shape {lead}" if lead else ""
            raise OptplanError(
                f"{name} is ragged (its rows have different lengths{at}): a rectangular "
                f"array is required, got {_short(value)}"
            ) from None
        raise OptplanTypeError(
            f"{name} must be {what}, got {type(value).__name__}: {_short(value)}"
        ) from None
    return arr


def _short(value, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_finite(name: str, arr: np.ndarray) -> None:
    """Every entry finite, or an error naming the first bad entry and its index."""
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = first_bad(bad)
        where = f" at index {index_str(idx)}" if arr.ndim else ""
        raise OptplanError(f"{name} has a non-finite entry {float(arr[idx])}{where}")


def check_distribution(name: str, p: np.ndarray, tol: float = ROW_SUM_TOL, rows=None) -> None:
    """Rows along the last axis are distributions: entries ``>= 0``, sums within ``tol`` of 1.

    ``rows`` (boolean, ``p.shape[:-1]``) restricts the sum check to some rows (admissible pairs).
    """
    idx = first_negative(p)
    if idx is not None:
        raise OptplanError(
            f"{name} has a negative entry {float(p[idx])!r} at index {index_str(idx)}"
        )
    sums = p.sum(axis=-1)
    off = np.abs(sums - 1.0) > tol
    if rows is not None:
        off &= rows
    if off.any():
        idx = first_bad(off)
        if p.ndim == 1:
            raise OptplanError(f"{name} must sum to 1, sums to {float(sums)!r}")
        where = f" (row {idx})"
        raise OptplanError(
            f"{name} must sum to 1 along its last axis{where}, sums to {float(sums[idx])!r}"
        )


def check_label(name: str, value) -> str:
    """A label such as a model's ``name``: a string, or ``None`` for the empty label."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OptplanTypeError(f"{name} must be a string (or None), got {value!r}")
    return value


def check_writable(name: str, path) -> Path:
    """``path`` names a file optplan can create or overwrite, checked before any work.

    Refused: an existing directory; a path under a regular file (which fails for every user,
    root included); a missing or read-only parent directory. Missing parents are allowed when
    ``os.makedirs`` could create them (the nearest existing ancestor is a writable directory).
    Returns the path.
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise OptplanTypeError(f"{name} must be a file path, got {path!r}")
    out = Path(path)
    if str(path) == "":
        raise OptplanError(f"{name} must be a file path, got ''")
    if out.is_dir():
        raise OptplanError(f"{name} {str(out)!r} is a directory, not a file")
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OptplanError(
            f"cannot write {name} {str(out)!r}: {str(ancestor)!r} is not a directory"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OptplanError(
            f"cannot write {name} {str(out)!r}: directory {str(ancestor)!r} is not writable"
        )
    return out


def write_error(name: str, path, exc: OSError) -> OptplanError:
    """An :class:`OptplanError` for a failed write of ``path`` (``raise write_error(...) from
    exc``), naming the argument, the path and the system's reason."""
    reason = exc.strerror or str(exc)
    return OptplanError(f"cannot write {name} {str(path)!r}: {reason}")
