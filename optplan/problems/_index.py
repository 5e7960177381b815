"""Input validation shared by the index problems (KL ball, KL-inf, L1 ball) and their batched
functional forms: errors name the argument, the batch index and the value."""

from __future__ import annotations

import time

import numpy as np

from ..mdp import ROW_SUM_TOL


def _finite(name: str, arr: np.ndarray) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f" at index {idx}" if arr.ndim else ""
        raise ValueError(f"{name} has a non-finite entry {float(arr[idx])}{where}")


def _numeric(name: str, value) -> np.ndarray:
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be numeric, got {type(value).__name__}: {value!r}") from None


def check_distribution_rows(name: str, p) -> np.ndarray:
    """``p[..., S]``: finite, non-negative rows summing to one (within ``ROW_SUM_TOL``)."""
    p = _numeric(name, p)
    if p.ndim < 1 or p.shape[-1] < 1:
        raise ValueError(
            f"{name} must have a last axis of length >= 1 (states), got shape {p.shape}"
        )
    _finite(name, p)
    neg = p < 0
    if neg.any():
        idx = tuple(int(i) for i in np.argwhere(neg)[0])
        raise ValueError(f"{name} has a negative entry {float(p[idx])!r} at index {idx}")
    sums = p.sum(axis=-1)
    bad = np.abs(sums - 1.0) > ROW_SUM_TOL
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if sums.ndim else ()
        where = f" (row {idx})" if idx else ""
        raise ValueError(
            f"{name} must sum to 1 along its last axis{where}, sums to {float(sums[idx])!r}"
        )
    return p


def check_index_inputs(p, v, param, param_name: str):
    """Validate and broadcast ``p[..., S]``, ``v[..., S]`` and ``param[...]``.

    Returns ``(p, v, param)`` with ``p`` and ``v`` of shape ``batch + (S,)`` and ``param`` of
    shape ``batch``, where ``batch`` is the broadcast of ``p.shape[:-1]``, ``v.shape[:-1]``
    and ``param.shape``.
    """
    p = check_distribution_rows("p", p)
    v = _numeric("v", v)
    if v.ndim < 1:
        raise ValueError(f"v must have a last axis of states, got a scalar {float(v)!r}")
    _finite("v", v)
    if v.shape[-1] != p.shape[-1]:
        raise ValueError(
            f"v has {v.shape[-1]} states (shape {v.shape}) but p has "
            f"{p.shape[-1]} (shape {p.shape})"
        )
    param = _numeric(param_name, param)
    _finite(param_name, param)
    try:
        batch = np.broadcast_shapes(p.shape[:-1], v.shape[:-1], param.shape)
    except ValueError:
        raise ValueError(
            f"shapes do not broadcast: p {p.shape}, v {v.shape}, {param_name} "
            f"{param.shape} (batch shapes {p.shape[:-1]}, {v.shape[:-1]}, "
            f"{param.shape})"
        ) from None
    return _broadcast(p, v, param, batch)


def broadcast_index_inputs(p, v, param):
    """:func:`check_index_inputs` without the checks, for inputs that already passed them
    (a problem object's fields)."""
    p, v, param = np.asarray(p, float), np.asarray(v, float), np.asarray(param, float)
    return _broadcast(p, v, param, np.broadcast_shapes(p.shape[:-1], v.shape[:-1], param.shape))


def _broadcast(p, v, param, batch):
    S = p.shape[-1]
    return (
        np.broadcast_to(p, batch + (S,)),
        np.broadcast_to(v, batch + (S,)),
        np.broadcast_to(param, batch),
    )


def flat_batch(p, v, param, name: str, validate: bool = True):
    """The prologue of every batched index kernel.

    Returns ``(p, v, param, batch, outputs)`` with ``p``, ``v`` of shape ``(B, S)``, ``param``
    of shape ``(B,)``, the original ``batch`` shape, and ``outputs`` = fresh
    ``(value, x, multiplier, status, iterations)`` arrays (NaN, NaN, NaN, "optimal", 0).
    """
    if validate:
        p, v, param = check_index_inputs(p, v, param, name)
    else:
        p, v, param = broadcast_index_inputs(p, v, param)
    batch, S = param.shape, p.shape[-1]
    p, v, param = p.reshape(-1, S), v.reshape(-1, S), param.reshape(-1).astype(float)
    B = param.shape[0]
    outputs = (
        np.full(B, np.nan),
        np.full((B, S), np.nan),
        np.full(B, np.nan),
        np.full(B, "optimal", dtype="<U20"),
        np.zeros(B, dtype=int),
    )
    return p, v, param, batch, outputs


def single_instance(problem, param_name: str, batched_name: str) -> None:
    """Validate a problem object's ``p``, ``v`` and parameter and store them as arrays."""
    p, v, param = check_index_inputs(problem.p, problem.v, getattr(problem, param_name), param_name)
    if p.ndim != 1:
        raise ValueError(
            f"{type(problem).__name__} takes one instance (p of shape (S,)), got p "
            f"{p.shape}; use op.{batched_name} for batches"
        )
    object.__setattr__(problem, "p", np.array(p))
    object.__setattr__(problem, "v", np.array(v))
    object.__setattr__(problem, param_name, float(param))


def batch_result(batch: tuple, outputs: tuple, start: float, solver: str):
    """The epilogue of every batched index kernel: ``outputs`` (from :func:`flat_batch`)
    reshaped to ``batch`` as a :class:`~optplan.result.BatchResult`."""
    from ..result import BatchResult

    value, x, multiplier, status, iterations = outputs
    return BatchResult(
        value=value.reshape(batch),
        x=x.reshape(batch + x.shape[-1:]),
        multiplier=multiplier.reshape(batch),
        status=status.reshape(batch),
        iterations=iterations.reshape(batch),
        solve_time=time.perf_counter() - start,
        method="fast",
        solver=solver,
    )
