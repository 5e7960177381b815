r"""Compiled row kernels for the three index problems (optional: needs ``numba``).

One module per problem (:mod:`.kl_ball`, :mod:`.kl_inf`, :mod:`.l1_ball`), the pieces they
share beside them (:mod:`.common`: constants, the input check, the safeguarded root step;
:mod:`.logs`: the vectorizable ``log`` and the KL ball's sums; :mod:`.sorting`: the L1 drain
order), all compiled together in one :class:`optplan._jit.Jit` collection
(:data:`.common.jit`) on the first call. The numpy kernels of :mod:`optplan.fast.kl_ball`,
:mod:`optplan.fast.kl_inf` and :mod:`optplan.fast.l1_ball` are the reference:
``tests/test_index_kernels.py`` compares every kernel with them on random and edge-case rows
(values, ``q``, multipliers, statuses) and the fast ``log`` with numpy's.
"""

from __future__ import annotations

import threading

from .common import (
    AVAILABLE,
    DONE,
    FAR_S,
    FINAL_STEP,
    G_RTOL,
    INFEASIBLE_ROW,
    L1_INSERTION_N,
    LARGE_S,
    LEFT,
    S_CAP,
    SORT_SMALL_N,
    STEP_RTOL,
    SUB_M,
    SUB_N,
    TINY,
    VECTOR_N,
    jit,
    valid_one,
)
from .kl_ball import kl_ball_gathered, kl_ball_one, kl_ball_rows
from .kl_inf import kl_inf_one, kl_inf_rows
from .l1_ball import l1_one, l1_rows

__all__ = [
    "AVAILABLE",
    "DONE",
    "FAR_S",
    "FINAL_STEP",
    "G_RTOL",
    "INFEASIBLE_ROW",
    "L1_INSERTION_N",
    "LANES",
    "LARGE_S",
    "LEFT",
    "MAX_ITER_CAP",
    "S_CAP",
    "SORT_SMALL_N",
    "STEP_RTOL",
    "SUB_M",
    "SUB_N",
    "TINY",
    "VECTOR_N",
    "kernels",
    "kl_ball_gathered",
    "kl_ball_one",
    "kl_ball_rows",
    "kl_inf_one",
    "kl_inf_rows",
    "l1_one",
    "l1_rows",
    "lanes",
    "valid_one",
]


def kernels() -> dict:
    """``name -> compiled function`` of every kernel and helper, made on first use (compiled,
    or loaded from numba's cache); ``RuntimeError`` without numba."""
    return jit.table or jit.compiled()


#: ``name -> entry point`` of the one-instance lanes (``_*_into``) for the one signature the
#: public functions call them with (1-d C float64 arrays, a float, an int, a bool): numba's
#: compiled wrapper without the dispatcher's per-call typing of six arguments (a noticeable
#: part of a short call). :func:`optplan.fast._batch.single_row` vouches for the types.
LANES: dict = {}

#: ``max_iter`` passed to a lane is capped here (an int64 argument).
MAX_ITER_CAP = 2**62


def lanes() -> dict:
    """:data:`LANES`, made on first use (compiled, or loaded from numba's cache)."""
    if LANES:
        return LANES
    k = kernels()
    from numba import types

    arr = types.float64[::1]
    f, i, b = types.float64, types.int64, types.boolean
    sigs = {
        "_kl_ball_into": (arr, arr, f, i, b, arr),
        "_kl_inf_into": (arr, arr, f, i, b, arr),
        "_l1_into": (arr, arr, f, b, arr),
    }
    with _LANES_LOCK:
        if not LANES:
            LANES.update({name: k[name].compile(sig) for name, sig in sigs.items()})
    return LANES


_LANES_LOCK = threading.Lock()
