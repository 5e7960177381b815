"""What the posterior classes share: checked count arrays broadcast to a posterior's shape,
read-only parameter arrays, and the leading shape of a batch of draws."""

from __future__ import annotations

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    first_bad,
    index_str,
)


def _counts(name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    """Observation counts: finite, non-negative whole numbers, broadcast to ``shape``."""
    n = as_array(name, value)
    if (n < 0).any() or (n != np.round(n)).any():
        idx = first_bad((n < 0) | (n != np.round(n)))
        where = f" at index {index_str(idx)}" if n.ndim else ""
        raise OptplanError(
            f"{name} must hold non-negative whole numbers, got {float(n[idx])!r}{where}"
        )
    return _broadcast(name, n, shape)


def _broadcast(name: str, arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        raise OptplanError(
            f"{name} has shape {arr.shape}, which does not broadcast to the posterior's {shape}"
        ) from None


def _frozen(arr) -> np.ndarray:
    out = np.array(arr, dtype=float)
    out.setflags(write=False)
    return out


def _lead(size) -> tuple[int, ...]:
    return (int(size),) if np.ndim(size) == 0 else tuple(int(k) for k in size)


def _range(x: np.ndarray) -> str:
    return f"{float(np.min(x)):g}, {float(np.max(x)):g}" if x.size else ""
