"""Input validation shared by the index problems (KL ball, KL-inf, L1 ball) and their batched
functional forms: errors name the argument, the batch index and the value."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import OptplanError, as_numeric, check_distribution, check_finite
from .base import Problem


def check_distribution_rows(name: str, p) -> np.ndarray:
    """``p[..., S]``: finite, non-negative rows summing to one (within ``ROW_SUM_TOL``)."""
    p = as_numeric(name, p)
    if p.ndim < 1 or p.shape[-1] < 1:
        raise OptplanError(
            f"{name} must have a last axis of length >= 1 (states), got shape {p.shape}"
        )
    check_finite(name, p)
    check_distribution(name, p)
    return p


def check_index_inputs(p, v, param, param_name: str):
    """Validate and broadcast ``p[..., S]``, ``v[..., S]`` and ``param[...]``.

    Returns ``(p, v, param)`` with ``p`` and ``v`` of shape ``batch + (S,)`` and ``param`` of
    shape ``batch``, where ``batch`` is the broadcast of ``p.shape[:-1]``, ``v.shape[:-1]``
    and ``param.shape``.
    """
    p = check_distribution_rows("p", p)
    v = as_numeric("v", v)
    if v.ndim < 1:
        raise OptplanError(f"v must have a last axis of states, got a scalar {float(v)!r}")
    check_finite("v", v)
    if v.shape[-1] != p.shape[-1]:
        raise OptplanError(
            f"v has {v.shape[-1]} states (shape {v.shape}) but p has "
            f"{p.shape[-1]} (shape {p.shape})"
        )
    param = as_numeric(param_name, param)
    check_finite(param_name, param)
    try:
        batch = np.broadcast_shapes(p.shape[:-1], v.shape[:-1], param.shape)
    except ValueError:
        raise OptplanError(
            f"shapes do not broadcast: p {p.shape}, v {v.shape}, {param_name} "
            f"{param.shape} (batch shapes {p.shape[:-1]}, {v.shape[:-1]}, "
            f"{param.shape})"
        ) from None
    return broadcast_to_batch(p, v, param, batch)


def broadcast_to_batch(p, v, param, batch):
    """Broadcast ``p``, ``v`` to ``batch + (S,)`` and ``param`` to ``batch`` (views)."""
    S = p.shape[-1]
    return (
        np.broadcast_to(p, batch + (S,)),
        np.broadcast_to(v, batch + (S,)),
        np.broadcast_to(param, batch),
    )


def single_instance(problem, param_name: str, batched_name: str) -> None:
    """Validate a problem object's ``p``, ``v`` and parameter and store them as arrays."""
    p, v, param = check_index_inputs(problem.p, problem.v, getattr(problem, param_name), param_name)
    if p.ndim != 1:
        raise OptplanError(
            f"{type(problem).__name__} takes one instance (p of shape (S,)), got p "
            f"{p.shape}; use op.{batched_name} for batches"
        )
    object.__setattr__(problem, "p", np.array(p))
    object.__setattr__(problem, "v", np.array(v))
    object.__setattr__(problem, param_name, float(param))


@dataclass(frozen=True, eq=False)
class IndexProblem(Problem):
    """An index problem of one instance: a distribution ``p`` and values ``v`` over ``S``
    next states (each subclass adds its scalar parameter and validates all three with
    :func:`single_instance`).

    Parameters
    ----------
    p : array_like, shape (S,)
        A distribution over the next states: finite, ``>= 0``, summing to one (zeros allowed).
    v : array_like, shape (S,)
        A finite value of each next state.
    """

    p: np.ndarray
    v: np.ndarray
