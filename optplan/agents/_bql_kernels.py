r"""The compiled step of :class:`~optplan.agents.BayesianQLearning` (optional: needs ``numba``).

A BQL step is an action drawn from each admissible action's Student-t marginal and, after the
transition, the moment-matched mixture update of one pair (:mod:`optplan.agents.bql`): in
NumPy some fifty array and special-function calls on arrays of about a hundred entries.
:func:`select` and :func:`update` do each in one compiled call; the agent calls them, and so
does the compiled run of :mod:`optplan.experiments.bql_compiled`, so the two give the same
bits by construction. They give the NumPy path's bits too (the path without numba), because
every operation is the one NumPy, SciPy and CPython call:

- elementwise arithmetic in the NumPy path's order (``k y y`` is ``(k y) y``);
- NumPy's own loops for ``sinh``, ``log1p``, ``exp`` and ``log`` of an array (on a CPU with
  AVX-512 NumPy's SIMD loops round differently from the C library's scalar functions): the
  ``d->d`` inner loop each ufunc holds, called on the whole array;
- the dot products ``w @ v`` by the ``cblas_ddot`` of the OpenBLAS NumPy bundles (numba's own
  ``np.dot`` goes to SciPy's);
- ``digamma``, ``betaln`` and ``stdtrit`` by SciPy's compiled functions
  (``scipy.special.cython_special``); the trigamma ``zeta(2, x)``, which SciPy exports to no
  C caller, by Cephes' Euler-Maclaurin summation as SciPy's ``special.zeta`` computes it
  (:func:`_hurwitz_zeta`);
- Python's ``x ** 2`` of a float is the C library's ``pow(x, 2.0)``, which is not always
  ``x * x``: called as ``pow`` (numba would otherwise multiply); ``math.log``, ``exp``,
  ``sqrt``, ``acosh`` and ``ceil`` are the C library's in both;
- the draws: ``Generator.standard_t`` on the agent's generator, one per action in order, as
  NumPy's ``standard_t`` of an array; numba implements it with NumPy's algorithm (a normal,
  then a gamma) on the same bit generator.

The Monte-Carlo moment match (``moment_match="monte-carlo"``, :func:`_update_mc` and its
:func:`_monte_carlo`) draws what
the NumPy path draws, in its order: ``n`` Student-t draws (``standard_t(nu, n)``), ``n``
gammas of shape ``a`` and scales ``1 / b`` (``gamma(a, 1.0 / b)``, one per scale in order),
``n`` standard normals (``standard_normal(n)``), each by numba's implementation of NumPy's
algorithm on the same bit generator. The elementwise expressions keep the Python ones' order
(``beta + k y y`` is ``beta + (k y) y``, ``mu0 + y / lam1 + z / sqrt(lam1 tau)``); ``sqrt`` is
correctly rounded in both; ``log tau`` is NumPy's ``log`` loop on the whole array. The four
``ndarray.mean`` are NumPy's reduction of a contiguous array: ``0.0 +`` its pairwise sum
(``pairwise_sum`` of ``loops_utils.h``: eight interleaved partial sums on blocks of at most
128 terms, longer runs split in two halves whose first has a multiple of 8 terms, recursively;
:func:`_pw_sum`), divided by ``n``.

:func:`self_check` compares each of these with NumPy / SciPy once per process; where one
differs (or numba is missing) :func:`table` is ``None``: the agent takes the NumPy path and
the compiled run declines. :func:`self_check_mc` does the same for the Monte-Carlo update's
draws (the numbers and the generator's state after them) and means: where they differ,
:func:`mc_table` is ``None`` and the Monte-Carlo update takes the NumPy path.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..fast._pairwise import _JIT as _PAIRWISE
from ..fast._pairwise import _pw_block

__all__ = ["AVAILABLE", "table", "mc_table", "self_check", "self_check_mc", "select", "update",
           "update_mc", "f_inv", "trigamma", "pairwise_mean", "MAX_NODES"]  # fmt: skip

#: numba is installed (the ``jit`` extra).
AVAILABLE = _jit.AVAILABLE

#: The draft's guards: ``alpha >= 1 + ALPHA_FLOOR``, ``lam = 1 / (LAM_JITTER + ...)``, and the
#: search domain of ``f^-1`` (pynverse's ``domain=[1e-12, 1e12]`` in the public code).
ALPHA_FLOOR = 1e-6
LAM_JITTER = 1e-12
F_INV_LO, F_INV_HI = 1e-12, 1e12
#: Quadrature: largest step in u, steps per unit of the peak's half-width, tail cut-off
#: (density below e^-TAIL), cap on the number of nodes.
H_MAX = 0.3
STEPS_PER_WIDTH = 5.0
TAIL = 40.0
MAX_NODES = 20_001
#: ``log x - digamma(x)`` and its derivative by their asymptotic series from this x on.
SERIES_FROM = 100.0
#: Newton steps of ``f^-1``.
NEWTON_STEPS = 60
#: :func:`_update`'s outcomes: the posterior updated; the projection divided by zero (a
#: degenerate mixture, e.g. one Monte-Carlo draw: ``E[mu^2 tau] - E[tau] mu0^2`` cancels
#: exactly), where the NumPy path raises ``ZeroDivisionError``: nothing written.
OK, ZERO_DIVISION = 0, 1
#: NumPy's pairwise summation block (``PW_BLOCKSIZE`` of ``loops_utils.h``).
PW_BLOCK = 128
# Room for the pairwise sum's pending halves: two per level, at most 64 levels.
_PW_STACK = 130

# Cephes' Euler-Maclaurin coefficients (2k)! / B_2k and its stopping threshold.
_ZETA_A = np.array([
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
    -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
    1.8152105401943546773e17, -7.1661652561756670113e18,
])  # fmt: skip
_MACHEP = 1.11022302462515654042e-16


def _zeta2() -> float:
    """SciPy's ``zeta(2, 1)`` (its Riemann zeta, not the Hurwitz sum), a constant of the
    compiled code."""
    from scipy import special

    return float(special.zeta(2.0, 1.0))


_ZETA2 = _zeta2()

# The NumPy ufuncs whose ``d->d`` loops the compiled code calls, by the name it binds.
_UFUNCS = {"_np_sinh": "sinh", "_np_log1p": "log1p", "_np_exp": "exp", "_np_log": "log"}


def _cython_special(name: str) -> int:
    """Address of ``scipy.special.cython_special``'s ``double`` version of ``name`` (a fused
    function's versions are ``__pyx_fuse_<i><name>``: the one whose signature starts with
    ``double (double``)."""
    import ctypes
    import re

    from numba.extending import get_cython_function_address
    from scipy.special import cython_special

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    for key, capsule in cython_special.__pyx_capi__.items():
        if key == name or re.fullmatch(r"__pyx_fuse_\d+" + name, key):
            if get_name(capsule).decode().startswith("double (double"):
                return get_cython_function_address("scipy.special.cython_special", key)
    raise ImportError(f"scipy.special.cython_special has no double {name}")


def _ufunc_loop(name: str) -> int:
    """Address of the ``d->d`` inner loop of ``numpy.<name>`` (``PyUFuncObject.functions``,
    numpy's public ufunc struct); ``ImportError`` when the loop needs ``data``."""
    import ctypes

    uf = getattr(np, name)
    i = uf.types.index("d->d")
    # PyObject_HEAD, then nin, nout, nargs, identity (4 ints), functions, data, ntypes
    head = id(uf) + object.__basicsize__ + 4 * ctypes.sizeof(ctypes.c_int)
    ptr = ctypes.sizeof(ctypes.c_void_p)
    functions = ctypes.c_void_p.from_address(head).value
    data = ctypes.c_void_p.from_address(head + ptr).value
    nin = ctypes.c_int.from_address(id(uf) + object.__basicsize__).value
    ntypes = ctypes.c_int.from_address(head + 2 * ptr).value
    if (nin, ntypes) != (uf.nin, uf.ntypes) or not functions:
        raise ImportError(f"numpy.{name}: unexpected ufunc layout")
    if data and ctypes.c_void_p.from_address(data + ptr * i).value:
        raise ImportError(f"numpy.{name}: its d->d loop takes data")
    return ctypes.c_void_p.from_address(functions + ptr * i).value


def _setup(numba) -> dict:
    """The external functions of the compiled code, bound by symbol (numba's cache then keeps
    no address): SciPy's ``psi``, ``betaln``, ``stdtrit``; the C library's ``pow``; NumPy's
    ``sinh``, ``log1p``, ``exp``, ``log`` loops and bundled ``cblas_ddot``."""
    import ctypes
    import ctypes.util

    import llvmlite.binding as ll
    from numba.core import types

    from ._mean_model_kernels import _numpy_blas

    blas = _numpy_blas()
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    if blas is None:  # pragma: no cover - another numpy build
        raise ImportError("numpy's bundled OpenBLAS (numpy.libs/libscipy_openblas64_*) not found")
    vp, i64, i32, f64 = types.voidptr, types.int64, types.int32, types.float64
    found = {
        "_sp_psi": (_cython_special("psi"), f64(f64, i32)),
        "_sp_betaln": (_cython_special("betaln"), f64(f64, f64, i32)),
        "_sp_stdtrit": (_cython_special("stdtrit"), f64(f64, f64, i32)),
        "_c_pow": (ctypes.cast(libm.pow, ctypes.c_void_p).value, f64(f64, f64)),
        "_np_ddot": (
            ctypes.cast(blas.scipy_cblas_ddot64_, ctypes.c_void_p).value,
            f64(i64, vp, i64, vp, i64),
        ),
    }
    for key, name in _UFUNCS.items():
        found[key] = (_ufunc_loop(name), types.void(vp, vp, vp, i64))
    out = {}
    for key, (address, sig) in found.items():
        alias = "optplan_bql" + key
        ll.add_symbol(alias, address)
        out[key] = types.ExternalFunction(alias, sig)
    return out


_JIT = _jit.Jit(
    "the compiled BQL step", uses=(_PAIRWISE,), setup=_setup, cache=True, error_model="numpy"
)


@_JIT
def _hurwitz_zeta(x, q):  # pragma: no cover - compiled by numba
    """SciPy's ``special.zeta(x, q)`` for ``x > 1``, ``q > 0``: Cephes' Euler-Maclaurin
    summation (``zeta(x, 1)`` is SciPy's Riemann zeta: only ``x = 2`` is supported there)."""
    if q == 1.0:
        return _ZETA2 if x == 2.0 else math.nan
    if q > 1e8:
        return (1.0 / (x - 1.0) + 1.0 / (2.0 * q)) * _c_pow(q, 1.0 - x)  # noqa: F821
    s = _c_pow(q, -x)  # noqa: F821 (bound by _setup)
    a = q
    i = 0
    b = 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = _c_pow(a, -x)  # noqa: F821
        s += b
        if abs(b / s) < _MACHEP:
            return s
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    a = 1.0
    k = 0.0
    for j in range(12):
        a *= x + k
        b /= w
        t = a * b / _ZETA_A[j]
        s = s + t
        t = abs(t / s)
        if t < _MACHEP:
            return s
        k += 1.0
        a *= x + k
        b /= w
        k += 1.0
    return s


@_JIT
def _f_inv(y, path):  # pragma: no cover - compiled by numba
    """:func:`optplan.agents.bql._f_inv` (``path``: room for the iterates, ``NEWTON_STEPS``)."""
    if not y > 0:
        return F_INV_HI
    d = y - 3.0
    x = (3.0 - y + math.sqrt(_c_pow(d, 2.0) + 24.0 * y)) / (12.0 * y)  # noqa: F821
    for k in range(NEWTON_STEPS):
        first = -1
        for j in range(k):  # the dict of iterates: the first step that started on x
            if path[j] == x:
                first = j
                break
        if first >= 0:
            x = path[first + (NEWTON_STEPS - first) % (k - first)]
            break
        path[k] = x
        if x >= SERIES_FROM:
            i2 = 1.0 / (x * x)
            f = 0.5 / x + i2 * (1 / 12 - i2 * (1 / 120 - i2 * (1 / 252 - i2 / 240)))
            fp = -i2 * (0.5 + (1 / 6 - i2 * (1 / 30 - i2 / 42)) / x)
        else:
            f = math.log(x) - _sp_psi(x, 0)  # noqa: F821
            fp = 1.0 / x - _hurwitz_zeta(2.0, x)
        new = x - (f - y) / fp
        if not new > 0:
            new = 0.5 * x
        if abs(new - x) <= 1e-14 * x:
            x = new
            break
        x = new
    lo = F_INV_LO if F_INV_LO > x else x  # min(max(x, lo), hi), Python's rules
    return F_INV_HI if F_INV_HI < lo else lo


@_JIT(inline="always")
def _loop(which, x, out, n, meta):  # pragma: no cover - compiled by numba
    """NumPy's ``d->d`` loop ``which`` (0 sinh, 1 log1p, 2 exp, 3 log) on ``x[:n]`` into
    ``out[:n]`` (``meta``: room for the loop's argument, length and stride arrays)."""
    meta[0] = x.ctypes.data
    meta[1] = out.ctypes.data
    meta[2] = n
    meta[3] = 8
    meta[4] = 8
    args, dims, steps = meta[0:2].ctypes, meta[2:3].ctypes, meta[3:5].ctypes
    if which == 0:
        _np_sinh(args, dims, steps, 0)  # noqa: F821 (bound by _setup)
    elif which == 1:
        _np_log1p(args, dims, steps, 0)  # noqa: F821
    elif which == 2:
        _np_exp(args, dims, steps, 0)  # noqa: F821
    else:
        _np_log(args, dims, steps, 0)  # noqa: F821


@_JIT(inline="always")
def _dot(u, v, n):  # pragma: no cover - compiled by numba
    """``u[:n] @ v[:n]`` by NumPy's ``cblas_ddot``."""
    return _np_ddot(n, u.ctypes, 1, v.ctypes, 1)  # noqa: F821 (bound by _setup)


@_JIT
def _exact(mu0, lam, alpha, beta, reward):  # pragma: no cover - compiled by numba
    """The four moments of one exact Normal-Gamma update by ``reward``."""
    a = alpha + 0.5
    lam1 = lam + 1.0
    k = lam / (2.0 * lam1)
    b = beta + k * _c_pow(reward - mu0, 2.0)  # noqa: F821
    m = (lam * mu0 + reward) / lam1
    return a / b, a * m / b, a * m * m / b + 1.0 / lam1, _sp_psi(a, 0) - math.log(b)  # noqa: F821


@_JIT
def _quadrature(mu0, lam, alpha, beta, reward, discount, m2, l2, a2, b2,
                meta):  # fmt: skip  # pragma: no cover - compiled by numba
    """:func:`optplan.agents.bql._moments` with ``method="quadrature"`` and a following
    pair, and its ``_student_t_nodes``."""
    a = alpha + 0.5
    lam1 = lam + 1.0
    k = lam / (2.0 * lam1)
    nu = 2.0 * a2
    scale = math.sqrt(b2 * (l2 + 1.0) / (a2 * l2))
    shift = reward + discount * m2 - mu0
    spread = discount * scale
    if spread == 0.0:
        return _exact(mu0, lam, alpha, beta, reward + discount * m2)
    half_width = math.sqrt(beta / k)
    sn = math.sqrt(nu)
    w = half_width / spread
    t_star = -shift / spread
    h = w / math.sqrt(1.0 + t_star * t_star / nu) / STEPS_PER_WIDTH
    if not h < H_MAX:  # min(H_MAX, h)
        h = H_MAX
    r = TAIL / nu
    u_max = sn * (math.acosh(math.exp(r)) if r < 700 else r + math.log(2.0))
    n = int(math.ceil(u_max / h))
    if 2 * n + 1 > MAX_NODES:
        n = (MAX_NODES - 1) // 2
        h = u_max / n
    m_nodes = 2 * n + 1
    buf = np.empty((5, m_nodes))
    x, t, wt, y, p = buf[0], buf[1], buf[2], buf[3], buf[4]
    c = h / sn
    for i in range(m_nodes):
        x[i] = c * float(i - n)
        t[i] = 0.5 * x[i]
    _loop(0, t, t, m_nodes, meta)  # sinh(x / 2)
    for i in range(m_nodes):
        t[i] = 2.0 * (t[i] * t[i])
    _loop(1, t, t, m_nodes, meta)  # log cosh(x) = log1p(2 sinh(x / 2)^2)
    log_c = -0.5 * math.log(nu) - _sp_betaln(0.5 * nu, 0.5, 0)  # noqa: F821
    for i in range(m_nodes):
        wt[i] = log_c - nu * t[i]
    _loop(2, wt, wt, m_nodes, meta)
    _loop(0, x, y, m_nodes, meta)  # sinh(x)
    ss = spread * sn
    for i in range(m_nodes):
        wt[i] = h * wt[i]
        yi = shift + ss * y[i]
        b = beta + k * yi * yi
        x[i] = b  # log b below
        ib = 1.0 / b
        t[i] = ib
        m = mu0 + yi / lam1
        y[i] = m * ib
        p[i] = m * m * ib
    _loop(3, x, x, m_nodes, meta)
    return (
        a * _dot(wt, t, m_nodes),
        a * _dot(wt, y, m_nodes),
        a * _dot(wt, p, m_nodes) + 1.0 / lam1,
        _sp_psi(a, 0) - _dot(wt, x, m_nodes),  # noqa: F821
    )


@_JIT
def _pw_sum(a, n):  # pragma: no cover - compiled by numba
    """NumPy's pairwise sum of ``a[:n]``: a block (:func:`_pw_block`) up to ``PW_BLOCK``
    terms, else ``sum(first n2) + sum(the rest)`` with ``n2 = n // 2`` rounded down to a
    multiple of 8. NumPy recurses; here a stack of pending halves does (numba's cache
    mishandles recursion): a pending half is ``(start, length)``, a length ``-1`` adds the
    last two sums, left + right."""
    if n <= PW_BLOCK:
        return _pw_block(a, 0, n)
    starts = np.empty(_PW_STACK, dtype=np.int64)
    lengths = np.empty(_PW_STACK, dtype=np.int64)
    sums = np.empty(_PW_STACK)
    starts[0], lengths[0] = 0, n
    top, k = 1, 0
    while top > 0:
        top -= 1
        lo, m = starts[top], lengths[top]
        if m < 0:
            k -= 1
            sums[k - 1] = sums[k - 1] + sums[k]
        elif m <= PW_BLOCK:
            sums[k] = _pw_block(a, lo, m)
            k += 1
        else:
            m2 = m // 2
            m2 -= m2 % 8
            lengths[top] = -1  # then add them
            starts[top + 1], lengths[top + 1] = lo + m2, m - m2  # the second half
            starts[top + 2], lengths[top + 2] = lo, m2  # the first half, summed first
            top += 3
    return sums[0]


@_JIT(inline="always")
def _mean(a, n):  # pragma: no cover - compiled by numba
    """``a[:n].mean()`` of a contiguous float64 array: NumPy's ``add.reduce`` (from its
    identity ``0.0``) divided by ``n``."""
    return (0.0 + _pw_sum(a, n)) / n


@_JIT
def _monte_carlo(rng, mu0, lam, alpha, beta, reward, discount, m2, l2, a2, b2, work,
                 meta):  # fmt: skip  # pragma: no cover - compiled by numba
    """:func:`optplan.agents.bql._moments` with ``method="monte-carlo"`` and a following
    pair: ``n = work.shape[1]`` draws on ``rng`` (``work``: room for ``y``, ``tau``, ``mu``
    and the products, ``(4, n)``)."""
    a = alpha + 0.5
    lam1 = lam + 1.0
    k = lam / (2.0 * lam1)
    nu = 2.0 * a2
    scale = math.sqrt(b2 * (l2 + 1.0) / (a2 * l2))
    shift = reward + discount * m2 - mu0
    spread = discount * scale
    n = work.shape[1]
    y, tau, mu, p = work[0], work[1], work[2], work[3]
    for i in range(n):  # rng.standard_t(nu, n)
        y[i] = rng.standard_t(nu)
    for i in range(n):
        yi = shift + spread * y[i]
        y[i] = yi
        tau[i] = 1.0 / (beta + k * yi * yi)  # 1.0 / b
    for i in range(n):  # rng.gamma(a, 1.0 / b)
        tau[i] = rng.gamma(a, tau[i])
    for i in range(n):  # rng.standard_normal(n)
        mu[i] = rng.standard_normal()
    for i in range(n):
        mu[i] = mu0 + y[i] / lam1 + mu[i] / math.sqrt(lam1 * tau[i])
    e_tau = _mean(tau, n)
    for i in range(n):
        p[i] = mu[i] * tau[i]
    e_mu_tau = _mean(p, n)
    for i in range(n):
        p[i] = mu[i] * mu[i] * tau[i]
    e_mu2_tau = _mean(p, n)
    _loop(3, tau, p, n, meta)  # np.log(tau)
    return e_tau, e_mu_tau, e_mu2_tau, _mean(p, n)


@_JIT(inline="always")
def _greedy_next(mu0, mask, s2):  # pragma: no cover - compiled by numba
    """``argmax`` of state ``s2``'s masked means, as NumPy's (the first NaN wins)."""
    A = mu0.shape[1]
    nxt, top = -1, 0.0
    for b in range(A):
        val = mu0[s2, b] if mask[s2, b] else -math.inf
        if nxt >= 0 and math.isnan(top):
            continue
        if nxt < 0 or math.isnan(val) or val > top:
            nxt, top = b, val
    return nxt


@_JIT(inline="always")
def _project(mu0, lam, alpha, beta, s, act, e_tau, e_mu_tau, e_mu2_tau, e_log_tau,
             path):  # fmt: skip  # pragma: no cover - compiled by numba
    """:func:`optplan.agents.bql.kl_projection` of the four moments into pair ``(s, act)``.
    Returns :data:`OK`, or :data:`ZERO_DIVISION` where ``kl_projection`` divides by zero (the
    posterior left as it was)."""
    if e_tau == 0.0:  # Python's float division raises
        return ZERO_DIVISION
    m = e_mu_tau / e_tau
    den = LAM_JITTER + e_mu2_tau - e_tau * m * m
    if den == 0.0:
        return ZERO_DIVISION
    new_lam = 1.0 / den
    new_alpha = _f_inv(math.log(e_tau) - e_log_tau, path)
    floor = 1.0 + ALPHA_FLOOR
    if not new_alpha > floor:  # max(floor, f_inv(...))
        new_alpha = floor
    mu0[s, act] = m
    lam[s, act] = new_lam
    alpha[s, act] = new_alpha
    beta[s, act] = new_alpha / e_tau
    return OK


@_JIT
def _update(mu0, lam, alpha, beta, mask, s, act, reward, s2, done, discount, path,
            meta):  # fmt: skip  # pragma: no cover - compiled by numba
    """:meth:`BayesianQLearning.update <optplan.agents.BayesianQLearning.update>` with
    ``moment_match="quadrature"``, in place; :func:`_project`'s outcome. (No generator
    argument: numba takes several microseconds to unbox one.)"""
    c0, c1, c2, c3 = mu0[s, act], lam[s, act], alpha[s, act], beta[s, act]
    if done:
        e_tau, e_mu_tau, e_mu2_tau, e_log_tau = _exact(c0, c1, c2, c3, reward)
    else:
        nxt = _greedy_next(mu0, mask, s2)
        e_tau, e_mu_tau, e_mu2_tau, e_log_tau = _quadrature(
            c0, c1, c2, c3, reward, discount, mu0[s2, nxt], lam[s2, nxt], alpha[s2, nxt],
            beta[s2, nxt], meta,
        )  # fmt: skip
    return _project(mu0, lam, alpha, beta, s, act, e_tau, e_mu_tau, e_mu2_tau, e_log_tau, path)


@_JIT
def _update_mc(rng, mu0, lam, alpha, beta, mask, s, act, reward, s2, done, discount, path, meta,
               work):  # fmt: skip  # pragma: no cover - compiled by numba
    """:meth:`BayesianQLearning.update <optplan.agents.BayesianQLearning.update>` with
    ``moment_match="monte-carlo"``, in place: ``work.shape[1]`` draws on ``rng``
    (:func:`_monte_carlo`; ``work``: their room); :func:`_project`'s outcome."""
    c0, c1, c2, c3 = mu0[s, act], lam[s, act], alpha[s, act], beta[s, act]
    if done:
        e_tau, e_mu_tau, e_mu2_tau, e_log_tau = _exact(c0, c1, c2, c3, reward)
    else:
        nxt = _greedy_next(mu0, mask, s2)
        e_tau, e_mu_tau, e_mu2_tau, e_log_tau = _monte_carlo(
            rng, c0, c1, c2, c3, reward, discount, mu0[s2, nxt], lam[s2, nxt], alpha[s2, nxt],
            beta[s2, nxt], work, meta,
        )  # fmt: skip
    return _project(mu0, lam, alpha, beta, s, act, e_tau, e_mu_tau, e_mu2_tau, e_log_tau, path)


@_JIT
def _select(rng, mu0, lam, alpha, beta, mask, forced, s, sample, quantile,
            t):  # fmt: skip  # pragma: no cover - compiled by numba
    """:meth:`BayesianQLearning.select_action <optplan.agents.BayesianQLearning.select_action>`
    in state ``s`` (``sample``: Thompson, else the upper ``quantile``; ``t``: room for the
    ``A`` draws)."""
    if forced[s] >= 0:
        return forced[s]
    A = mu0.shape[1]
    for b in range(A):
        df = 2.0 * alpha[s, b]
        t[b] = rng.standard_t(df) if sample else _sp_stdtrit(df, quantile, 0)  # noqa: F821
    best, top = -1, 0.0
    for b in range(A):
        val = mu0[s, b] + t[b] * math.sqrt(beta[s, b] / (lam[s, b] * alpha[s, b]))
        if not mask[s, b]:
            val = -math.inf
        if best >= 0 and math.isnan(top):
            continue
        if best < 0 or math.isnan(val) or val > top:
            best, top = b, val
    return best


@_JIT
def _draws_t(rng, df, out):  # pragma: no cover - compiled by numba
    """``standard_t(df[i])`` into ``out[i]`` (:func:`self_check`)."""
    for i in range(df.shape[0]):
        out[i] = rng.standard_t(df[i])


@_JIT
def _apply(which, x, out, meta):  # pragma: no cover - compiled by numba
    """NumPy's loop ``which`` on ``x`` into ``out`` (:func:`self_check`)."""
    _loop(which, x, out, x.shape[0], meta)


@_JIT
def _scalars(x, out):  # pragma: no cover - compiled by numba
    """Per ``x[i]`` (positive): ``psi``, ``zeta(2, .)``, ``betaln(x / 2, 1/2)``,
    ``stdtrit(x, 0.9)``, ``pow(x - 3, 2)``, the C library's ``log``, ``exp(-x)``,
    ``acosh(1 + x)``, ``sqrt``, and ``f^-1(x)`` into the rows of ``out``, and ``ddot`` of
    ``x`` with itself in ``out[10, 0]`` (:func:`self_check`, :func:`trigamma`)."""
    path = np.empty(NEWTON_STEPS)
    for i in range(x.shape[0]):
        v = x[i]
        out[0, i] = _sp_psi(v, 0)  # noqa: F821
        out[1, i] = _hurwitz_zeta(2.0, v)
        out[2, i] = _sp_betaln(0.5 * v, 0.5, 0)  # noqa: F821
        out[3, i] = _sp_stdtrit(v, 0.9, 0)  # noqa: F821
        out[4, i] = _c_pow(v - 3.0, 2.0)  # noqa: F821
        out[5, i] = math.log(v)
        out[6, i] = math.exp(-v)
        out[7, i] = math.acosh(1.0 + v)
        out[8, i] = math.sqrt(v)
        out[9, i] = _f_inv(v, path)
    out[10, 0] = _dot(x, x, x.shape[0])


@_JIT
def _draws_mc(rng, nu, a, scale, out):  # pragma: no cover - compiled by numba
    """``standard_t(nu)``, then ``gamma(a, scale[i])``, then ``standard_normal()``, each
    ``n`` times, into the rows of ``out`` (:func:`self_check_mc`)."""
    n = scale.shape[0]
    for i in range(n):
        out[0, i] = rng.standard_t(nu)
    for i in range(n):
        out[1, i] = rng.gamma(a, scale[i])
    for i in range(n):
        out[2, i] = rng.standard_normal()


@_JIT
def _mean_of(x):  # pragma: no cover - compiled by numba
    """``x.mean()`` (:func:`pairwise_mean`)."""
    return _mean(x, x.shape[0])


def _compiled() -> dict:
    return _JIT.table or _JIT.compiled()


_CHECK: list = []


def self_check(n: int = 3000, seed: int = 7) -> bool:
    """Whether the compiled step's pieces give NumPy's, SciPy's and CPython's numbers on this
    installation (checked once per process, on ``n`` random inputs each): NumPy's loops
    (through the ufunc's loop and as NumPy calls it), ``ddot``, the special functions, the C
    library's functions and the Student-t draws (and the generator's state after them).
    ``tests/test_engines_exact_bql.py`` compares the whole step with the NumPy path."""
    if _CHECK:
        return _CHECK[0]
    ok = False
    if AVAILABLE:
        try:
            fns = _compiled()
            from scipy import special

            rng = np.random.default_rng(seed)
            x = np.concatenate([rng.uniform(-30.0, 30.0, n), rng.standard_normal(n) * 1e-3])
            pos = np.concatenate([
                np.exp(rng.uniform(-12.0, 12.0, n)), rng.uniform(0.5, 120, n), [1.0, 2.0, 1e9],
            ])  # fmt: skip
            meta = np.empty(5, dtype=np.int64)
            ok = True
            for which, (fn, arg) in enumerate(
                ((np.sinh, x), (np.log1p, pos), (np.exp, -pos), (np.log, pos))
            ):
                out = np.empty_like(arg)
                fns["_apply"](which, arg, out, meta)
                ok = ok and np.array_equal(out, fn(arg), equal_nan=True)
            out = np.empty((11, pos.shape[0]))
            fns["_scalars"](pos, out)
            want = (
                special.digamma(pos),
                special.zeta(2.0, pos),
                special.betaln(0.5 * pos, 0.5),
                special.stdtrit(pos, 0.9),
                np.array([(v - 3.0) ** 2 for v in pos.tolist()]),
                np.array([math.log(v) for v in pos.tolist()]),
                np.array([math.exp(-v) for v in pos.tolist()]),
                np.array([math.acosh(1.0 + v) for v in pos.tolist()]),
                np.sqrt(pos),
            )
            for row, ref in zip(out[:9], want, strict=True):
                ok = ok and np.array_equal(row, ref)
            ok = ok and out[10, 0] == pos @ pos
            df = rng.choice([0.5, 1.0, 2.000002, 3.0, 7.5, 61.0, 1e6], n)
            ref, got = np.random.default_rng(seed), np.random.default_rng(seed)
            draws = np.empty(n)
            fns["_draws_t"](got, df, draws)
            ok = ok and np.array_equal(draws, ref.standard_t(df))
            ok = ok and got.bit_generator.state == ref.bit_generator.state
        except (ImportError, AttributeError, ValueError, OSError):  # a library not as expected
            ok = False
    _CHECK.append(bool(ok))
    return _CHECK[0]


#: The draws of :func:`self_check_mc`: ``(nu, a)`` of the Student-t and the gamma (the agent's
#: ``nu = 2 alpha' >= 2 + 2e-6``, ``a = alpha + 1/2 >= 1.5``; a gamma shape below 1 too).
_MC_CASES = ((2.000002, 1.5000005), (2.5, 0.7), (7.0, 3.5), (61.0, 30.5), (2e6, 1e6 + 0.5))
#: Lengths of :func:`self_check_mc`'s means: every branch of the pairwise sum.
_MEAN_LENGTHS = (1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1000, 4096, 8193,
                 20_011)  # fmt: skip

_CHECK_MC: list = []


def self_check_mc(n: int = 600, seed: int = 11) -> bool:
    """Whether the Monte-Carlo update's pieces give NumPy's numbers on this installation
    (checked once per process, on top of :func:`self_check`): numba's ``standard_t``,
    ``gamma`` (one shape, an array of scales) and ``standard_normal`` against NumPy's
    ``standard_t(nu, n)``, ``gamma(a, scale)`` and ``standard_normal(n)``, the generator's
    state after them, and the pairwise mean against ``ndarray.mean`` (:data:`_MEAN_LENGTHS`)."""
    if _CHECK_MC:
        return _CHECK_MC[0]
    ok = False
    if self_check():
        try:
            fns = _compiled()
            rng = np.random.default_rng(seed)
            ok = True
            for nu, a in _MC_CASES:
                scale = np.exp(rng.uniform(-12.0, 12.0, n))
                state = int(rng.integers(1 << 62))
                ref, got = np.random.default_rng(state), np.random.default_rng(state)
                out = np.empty((3, n))
                fns["_draws_mc"](got, nu, a, scale, out)
                ok = ok and np.array_equal(out[0], ref.standard_t(nu, n))
                ok = ok and np.array_equal(out[1], ref.gamma(a, scale))
                ok = ok and np.array_equal(out[2], ref.standard_normal(n))
                ok = ok and got.bit_generator.state == ref.bit_generator.state
            for m in _MEAN_LENGTHS:
                for x in (
                    rng.standard_normal(m) * np.exp(rng.uniform(-30.0, 30.0, m)),
                    rng.gamma(1.5, 1.0, m),
                    -np.zeros(m),
                ):
                    got_mean = np.float64(fns["_mean_of"](x))
                    ok = ok and got_mean.tobytes() == x.mean().tobytes()  # -0.0 too
        except (ImportError, AttributeError, ValueError, OSError):  # a library not as expected
            ok = False
    _CHECK_MC.append(bool(ok))
    return _CHECK_MC[0]


def table() -> dict | None:
    """``{name: compiled function}`` where the compiled step gives the NumPy path's bits on
    this installation (:func:`self_check`), else ``None``."""
    return _compiled() if self_check() else None


def mc_table() -> dict | None:
    """:func:`table` where the Monte-Carlo update gives the NumPy path's bits too
    (:func:`self_check_mc`), else ``None``."""
    return _compiled() if self_check() and self_check_mc() else None


def pairwise_mean(x) -> float:
    """:func:`_mean` of ``x`` (compiled; for tests): ``x.mean()`` of a float64 array."""
    return float(_compiled()["_mean_of"](np.ascontiguousarray(x, dtype=float).ravel()))


def trigamma(x) -> np.ndarray:
    """:func:`_hurwitz_zeta` ``(2, x)`` of each ``x`` (compiled; for tests)."""
    x = np.ascontiguousarray(x, dtype=float).ravel()
    out = np.empty((11, x.shape[0]))
    _compiled()["_scalars"](x, out)
    return out[1]


def f_inv(y: float) -> float:
    """:func:`_f_inv`, compiled (for tests)."""
    return float(_compiled()["_f_inv"](float(y), np.empty(NEWTON_STEPS)))


def select(*args) -> int:
    """:func:`_select`, compiled."""
    return int(_compiled()["_select"](*args))


def update(*args) -> int:
    """:func:`_update`, compiled."""
    return int(_compiled()["_update"](*args))


def update_mc(*args) -> int:
    """:func:`_update_mc`, compiled."""
    return int(_compiled()["_update_mc"](*args))
