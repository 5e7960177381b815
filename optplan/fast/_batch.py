"""The dispatch shared by the three index kernels (``kl_ball``, ``kl_inf``, ``l1_ball``): the
kernel chosen (:func:`use_compiled`), one plain instance sent to a compiled lane
(:func:`single_row`, :func:`lane_result`), the batch validated or broadcast to ``(B, S)``
rows (:func:`flat_batch`), solved by the compiled kernel with the reference on the rows it
leaves (:func:`solve_rows`), and the per-row outputs reshaped back to the caller's batch shape
as a :class:`~optplan.result.BatchResult` (:func:`batch_result`)."""

from __future__ import annotations

import math
import time

import numpy as np

from ..problems._index import broadcast_to_batch, check_index_inputs
from ..result import INFEASIBLE, NUMERICAL_ERROR, OPTIMAL, BatchResult
from ._kernels.common import INFEASIBLE_ROW, LEFT
from ._options import choose_kernel


def use_compiled(kernel: str, available: bool) -> bool:
    """Whether an index kernel runs compiled: ``kernel`` checked by :func:`choose_kernel`
    (``"auto"``, the default, without the call: whether numba is ``available``)."""
    if kernel == "auto":
        return available
    return choose_kernel(kernel, available) == "numba"


def broadcast_index_inputs(p, v, param):
    """:func:`check_index_inputs` without the checks, for inputs that already passed them
    (a problem object's fields)."""
    p, v, param = np.asarray(p, float), np.asarray(v, float), np.asarray(param, float)
    return broadcast_to_batch(
        p, v, param, np.broadcast_shapes(p.shape[:-1], v.shape[:-1], param.shape)
    )


def flag_overflow(value: np.ndarray, status: np.ndarray) -> None:
    """A solution claimed with a value that overflowed (inputs near 1e308) is not one:
    ``numerical_error`` (in place)."""
    status[(status == OPTIMAL) & ~np.isfinite(value)] = NUMERICAL_ERROR


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


def batch_result(batch: tuple, outputs: tuple, start: float, solver: str):
    """The epilogue of every batched index kernel: ``outputs`` (from :func:`flat_batch`)
    reshaped to ``batch`` as a :class:`~optplan.result.BatchResult`."""
    value, x, multiplier, status, iterations = outputs
    flag_overflow(value, status)
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


def solve_rows(p, v, param, name, validate, max_iter, compiled_rows, numpy_rows, start, solver):
    """The batched path of an iterative index kernel: the rows as ``(B, S)`` (:func:`flat_batch`,
    ``name``: the parameter's name in errors), ``compiled_rows(p, v, param, max_iter,
    outputs)`` on them (``None``: numpy only), which fills the outputs of the rows it solves
    and returns the indices of those it leaves, the reference ``numpy_rows`` (same arguments)
    on those or on all, and the :class:`~optplan.result.BatchResult` (:func:`batch_result`)."""
    p, v, param, batch, outputs = flat_batch(p, v, param, name, validate)
    if compiled_rows is None:
        numpy_rows(p, v, param, max_iter, outputs)
    else:
        rest = compiled_rows(p, v, param, max_iter, outputs)
        if rest.size:  # the rows the compiled kernel leaves to the reference
            sub = tuple(out[rest] for out in outputs)
            numpy_rows(p[rest], v[rest], param[rest], max_iter, sub)
            for out, part in zip(outputs, sub, strict=True):
                out[rest] = part
    return batch_result(batch, outputs, start, solver)


def single_row(p, v, param):
    """``(p, v, param)`` for a compiled kernel's one-row lane, or ``None`` when the inputs are
    not one plain instance (``p``, ``v`` contiguous, aligned float64 arrays of shape ``(S,)``,
    ``param`` a real scalar): those take the general path. The lane's compiled call checks the
    values (:func:`optplan.fast._kernels.common._valid_one`) and sends what it cannot vouch for
    to the general path too, whose checks raise the errors naming the field and value. No copy,
    no ``asarray``: the lane exists for its per-call overhead."""
    # cheapest tests first (dtype identity: numpy's float64 dtype is a singleton)
    if type(p) is not np.ndarray or type(v) is not np.ndarray or p.ndim != 1 or v.ndim != 1:
        return None
    if p.dtype is not _F64 or v.dtype is not _F64 or v.size != p.size:
        return None
    fp, fv = p.flags, v.flags  # (aligned: the lanes' compiled signature assumes it)
    if not (fp.c_contiguous and fv.c_contiguous and fp.aligned and fv.aligned):
        return None
    if type(param) is not float:
        if isinstance(param, (bool, np.bool_)) or not isinstance(
            param, (int, np.integer, np.floating)
        ):
            return None
        try:
            param = float(param)
        except OverflowError:
            return None
    return p, v, param


_F64 = np.dtype(np.float64)

#: One read-only 0-d status array per status the one-instance lane returns (shared).
_STATUS_0D: dict = {}


def _status_0d(status: str) -> np.ndarray:
    arr = _STATUS_0D.get(status)
    if arr is None:
        arr = np.array(status, dtype="<U20")
        arr.flags.writeable = False
        _STATUS_0D[status] = arr
    return arr


def lane_result(code, value, x, multiplier, iterations, start: float, solver: str):
    """:func:`single_result` of a compiled lane's outcome ``code`` (``DONE`` or
    ``INFEASIBLE_ROW``), or ``None`` when the lane left the instance to the general path
    (``LEFT``)."""
    if code == LEFT:
        return None
    status = INFEASIBLE if code == INFEASIBLE_ROW else OPTIMAL
    return single_result(value, x, multiplier, iterations, start, solver, status)


def single_result(value, x, multiplier, iterations, start: float, solver: str, status=OPTIMAL):
    """The :class:`~optplan.result.BatchResult` of one instance (batch shape ``()``), as
    :func:`batch_result` makes it, from a compiled kernel's scalars (``status``: a read-only
    0-d array shared between results).

    Built without the frozen dataclass's ``__init__`` (eight ``object.__setattr__`` calls,
    as much as the compiled solve). ``value``, which nearly every caller reads, is made at
    once (``np.array`` is cheaper than the descriptor's first access); ``multiplier``
    and ``iterations`` are not made up front: the instance dict keeps the scalars, and a
    descriptor of :class:`BatchResult` makes each 0-d array (the same dtype and value as
    :func:`batch_result`'s) on its first access."""
    if status == OPTIMAL and not math.isfinite(value):
        status = NUMERICAL_ERROR
    res = _new(BatchResult)
    _set(
        res,
        "__dict__",
        {
            "value": _array(value),
            "x": x,
            "status": _STATUS_0D.get(status) or _status_0d(status),
            "solve_time": _clock() - start,
            "method": "fast",
            "solver": solver,
            "_scalars": (value, multiplier, iterations),
        },
    )
    return res


_new = object.__new__
_set = object.__setattr__
_array = np.array
_clock = time.perf_counter
