r"""What the compiled index kernels share: the :class:`~optplan._jit.Jit` collection they are
compiled in, their constants, the input check of one instance, the leftover mass and the
safeguarded root-finding step of the KL ball and KL-inf.

Every kernel is compiled with ``cache=True, nogil=True, error_model="numpy"`` (IEEE: ``1/0 =
inf``); the small helpers with ``inline="always"`` (inlined in numba's IR: no call boundary,
no reference counting of the array arguments per call, a large part of a short row's
cost), the sums with ``fastmath={"reassoc", "nsz"}`` (the order of a sum: it lets LLVM
vectorize them).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _jit

#: numba is installed (optional dependency: pip install "optplan[jit]"). It is imported, and
#: the kernels compiled (or loaded from numba's cache), on the first call, not with optplan.
AVAILABLE = _jit.AVAILABLE

# The constants of optplan.fast._roots and optplan.fast.kl_ball (copied as plain floats so
# the compiled code sees literals; test_index_kernels checks they match).
_EPS = 2.220446049250313e-16
STEP_RTOL = 4 * _EPS
G_RTOL = 8 * _EPS
SQRT_G_RTOL = math.sqrt(G_RTOL)
FINAL_STEP = 1e-9
LARGE_S = 20.0
S_CAP = 1e300
FAR_S = 16.0
TINY = 2.2250738585072014e-308
#: Rows with at least this many supported states use the vectorized loops
#: (:func:`optplan.fast._kernels.logs._fill`).
VECTOR_N = 64
#: Rows with at least this many supported states start from a sample's root
#: (:func:`optplan.fast._kernels.kl_ball._sample_start`) of this many states.
SUB_N = 4096
SUB_M = 512
#: The L1 kernel's quicksort sorts segments of at most this many states by insertion.
L1_INSERTION_N = 16
#: Rows of at most this many states get their drain order by an insertion sort (no
#: allocation, no tie fix-up: it is stable by construction).
SORT_SMALL_N = 16
#: optplan._checks.ROW_SUM_TOL
ROW_SUM_TOL = 1e-9

#: Per-row outcome codes of the compiled kernels (the wrappers map them to statuses).
DONE, INFEASIBLE_ROW, LEFT = 0, 1, -1


def _bitcasts(numba):
    """``float64 <-> int64`` reinterpretation (LLVM ``bitcast``), for :func:`_log_pos`."""
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def f2i(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.int64))

        return types.int64(types.float64), codegen

    @intrinsic
    def i2f(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float64))

        return types.float64(types.int64), codegen

    return f2i, i2f


def _setup(numba) -> dict:
    """The globals the kernels read that exist only with numba (:func:`_bitcasts`)."""
    f2i, i2f = _bitcasts(numba)
    return {"_f2i": f2i, "_i2f": i2f}


#: The compiled index kernels, all modules of :mod:`optplan.fast._kernels` together.
jit = _jit.Jit('kernel "numba"', setup=_setup, cache=True, nogil=True, error_model="numpy")


@jit(inline="always")
def _leftover(p, v, q, S, V):  # pragma: no cover - compiled by numba
    """``1 - sum(q)`` (if positive) onto the first zero-probability state at ``V``
    (:func:`optplan.fast._simplex.with_leftover`)."""
    total = 0.0
    for x in range(S):
        total += q[x]
    left = max(1.0 - total, 0.0)
    if left > 0.0:
        for x in range(S):
            if p[x] == 0.0 and v[x] == V:
                q[x] += left
                break


@jit(inline="always")
def _bracketed(x, xn, g, scale, lo, hi):  # pragma: no cover - compiled by numba
    """One step of the safeguarded iteration of :func:`optplan.fast._roots.newton_bracketed`
    at ``x``, where the function is ``g`` (of size ``scale``) and the Newton (or Halley) step
    proposes ``xn``: the bracket ``[lo, hi]`` shrunk by the sign of ``g``, ``xn`` replaced by
    the bracket's midpoint when outside it, and the stopping rule (an exact root, a small
    final step near one, a step or a bracket below ``STEP_RTOL``). Returns ``(x, lo, hi,
    done)``, ``x`` the next point (unchanged at an exact root)."""
    if g < 0.0:
        lo = x
    else:
        hi = x
    bad = not (xn > lo and xn < hi)
    if bad:
        xn = 0.5 * (lo + hi)
    ag = abs(g)
    ax = max(1.0, abs(x))
    step = abs(xn - x)
    root = ag <= G_RTOL * scale
    done = (
        root
        or ((not bad) and step <= FINAL_STEP * ax and ag <= SQRT_G_RTOL * scale)
        or step <= STEP_RTOL * ax
        or (hi - lo) <= STEP_RTOL * ax
    )
    return (x if root else xn), lo, hi, done


@jit(fastmath={"reassoc", "nsz"})
def _valid_one(p, v, param):  # pragma: no cover - compiled by numba (fastmath: reassoc)
    """Whether ``check_index_inputs`` surely accepts one instance: finite entries, ``p >= 0``,
    ``|sum p - 1|`` at most half its tolerance (summation order aside: the sum's order is
    the compiler's, which lets the loop vectorize). ``False`` sends the caller to the Python
    checks, which raise the error naming the field and value."""
    if not math.isfinite(param):
        return False
    S = p.shape[0]
    bad = 0
    total = 0.0
    for x in range(S):
        px = p[x]
        # (a NaN in p fails its comparisons; v[x] - v[x] is NaN for an infinite or NaN v[x])
        bad += (not px >= 0.0) | (not px <= 1.0 + ROW_SUM_TOL) | (not v[x] - v[x] == 0.0)
        total += px
    return bad == 0 and abs(total - 1.0) <= 0.5 * ROW_SUM_TOL


def valid_one(p, v, param: float) -> bool:
    """See :func:`_valid_one`."""
    return (jit.table or jit.compiled())["_valid_one"](p, v, param)


def _floats(a):
    """``a`` as a C-contiguous float array, writable: a read-only array is another numba type,
    and another compile of the kernel (copied only where needed)."""
    out = np.ascontiguousarray(a, dtype=float)
    return out if out.flags.writeable else out.copy()


def call_rows(name: str, p, v, param, max_iter, outputs: tuple, flags: np.ndarray):
    """The batched kernel ``name`` on rows ``p, v`` (``(B, S)``) with parameters ``param``
    (``(B,)``), filling ``outputs`` (``value, q, lam, iterations``) and the per-row ``flags``
    in place; returns ``flags``."""
    kernel = (jit.table or jit.compiled())[name]
    kernel(_floats(p), _floats(v), _floats(param), int(max_iter), *outputs, flags)
    return flags
