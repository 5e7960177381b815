r"""Fast path of ``KLearningTemperature``: K-learning's optimal temperature (problem 11).

The K-values, Boltzmann policy and terms at one temperature are in :mod:`optplan.soft` (numpy
reference) and :mod:`optplan.fast._k_kernels` (compiled).

Optimal temperature (problem 11). Minimizing over ``K`` leaves ``f(tau) = rho . V_0`` (the
Bellman inequalities are tight at the optimum because ``P >= 0``). Unrolling Eq. 8 along the
Boltzmann policy gives, with ``lambda`` its occupancy measure from ``rho``,

    f(tau) = M + tau A + B / tau,   M = <lambda, mu>,  A = <lambda, H(pi)>,  B = <lambda, c>,

and by the envelope theorem ``f'(tau) = A - B / tau^2``. ``f`` is convex (a maximum over
occupancies of functions convex in ``tau``), so ``tau*`` is the root of ``f'``, found here by
Brent's method in ``log tau`` after a geometric bracket search. The dual of Appendix A.4
(Eq. 27) evaluated at ``lambda(tau)`` is ``D = M + 2 sqrt(A B)`` (its inner minimum over tau,
at ``sqrt(B / A)``); ``f(tau) - D >= 0`` is the primal-dual gap, zero exactly when
``tau = sqrt(B / A)``, i.e. at ``tau*``.

With the compiled kernel the whole search runs in one compiled call
(:func:`optplan.fast._k_kernels.solve`: the same bracket and a port of SciPy's ``brentq``,
giving the same ``tau*`` to the bit); where that search would not end in a converged root it
hands over to :func:`_scipy_search`, the search in Python with SciPy's ``brentq``, which
then decides (messages, statuses and errors as always). ``info["search"]`` says which ran.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import brentq

from .._checks import check_positive
from ..result import MAX_ITER, OPTIMAL, PlanResult
from ..soft import layered_occupancy, temperature_terms
from . import _k_kernels
from ._options import KERNELS, check_tol_iter, choose_kernel
from ._result import fast_result

#: The bracket search for ``log tau`` stays within ``tau`` in [1e-300, 1e300].
_U_MIN, _U_MAX = math.log(1e-300), math.log(1e300)

__all__ = ["solve", "KERNELS"]


def _hard_max_result(problem, R, P, rho, start):
    """tau* = 0 (no bonus anywhere: every numerator c is 0, e.g. sigma = 0 and L = 1): K = mu,
    value = rho . max_a mu."""
    K = R.copy()
    V = K.max(axis=-1)
    pi = (K == V[..., None]).astype(float)
    pi /= pi.sum(axis=-1, keepdims=True)
    lam = layered_occupancy(pi, P, rho)
    value = float(rho @ V[0])
    message = "no bonus on any pair (every bonus numerator is 0): tau* = 0, K = mean rewards"
    info = {"dual_value": value, "gap": 0.0, "tau": 0.0, "evaluations": 0}
    return _optimal(value, 0.0, message, 0, start, K, V, pi, lam, info)


def _optimal(value, tau, message, iterations, start, K, V, pi, lam, info) -> PlanResult:
    """The optimal result at ``tau``: ``q = K``, ``values = V``, ``policy = pi``,
    ``occupancy = multiplier = lam``."""
    return fast_result(
        "brent",
        start,
        iterations,
        value=value,
        x=tau,
        status=OPTIMAL,
        message=message,
        values=V,
        q=K,
        policy=pi,
        occupancy=lam,
        multiplier=lam,
        info=info,
    )


def _max_iter(message: str, iterations: int, start: float) -> PlanResult:
    return fast_result(
        "brent",
        start,
        iterations,
        value=float("nan"),
        x=float("nan"),
        status=MAX_ITER,
        message=message,
    )


def _terms_function(kernel: str, R, P, c, rho):
    """``tau -> temperature_terms(tau, ...)`` for ``kernel``, and the kernel's name."""
    if choose_kernel(kernel, _k_kernels.AVAILABLE) == "numpy":
        return (lambda tau, final=False: temperature_terms(tau, R, P, c, rho)), "numpy"
    R, P, c, rho = (np.ascontiguousarray(x, dtype=float) for x in (R, P, c, rho))
    L, S, A = R.shape
    buffers = (np.empty((L, S, A)), np.empty((L, S)), np.empty((L, S, A)), np.empty((L, S, A)))
    PT = _k_kernels.transposed(P)

    def terms(tau, final=False):
        # Root-finding passes reuse the buffers; the last pass gets arrays of its own.
        return _k_kernels.terms(tau, R, P, c, rho, out=None if final else buffers, PT=PT)

    return terms, "numba"


def solve(
    problem,
    xtol: float = 1e-15,
    max_iter: int = 200,
    kernel: str = "auto",
    guess: float | None = None,
) -> PlanResult:
    """Optimal temperature of problem (11) by Brent's method on ``f'`` in ``log tau``.

    Parameters
    ----------
    problem : KLearningTemperature
    xtol : float
        Absolute tolerance on ``log tau`` (so relative on ``tau``).
    max_iter : int
        Bracket expansions and Brent iterations, each.
    guess : float > 0, optional
        A temperature near ``tau*``, e.g. the answer to a nearby problem (K-learning's last
        episode): the bracket search then starts at ``guess * exp(+-1/64)`` and widens from
        there (steps doubling from ``1/32`` in ``log tau``), instead of around the scale found
        at ``tau = 1`` (``[u0 - 1/2, u0 + 1/2]``, steps from ``log 4``). The same root to the
        tolerance, usually in fewer passes; a poor guess costs a few more. A guess outside
        ``[1e-150, 1e150]`` counts as that bound.
    kernel : {"auto", "numpy", "numba"}
        Who evaluates the recursion at each trial ``tau``: the numpy reference, or the
        compiled kernel of :mod:`optplan.fast._k_kernels` (optional dependency ``numba``,
        ``pip install "optplan[jit]"``). ``"auto"``: numba when installed. ``info["kernel"]``
        says which ran; with numba the search itself is compiled too (module docstring;
        ``info["search"]``: ``"compiled"`` or ``"scipy"``).

    Returns
    -------
    PlanResult
        ``x = tau*``, ``value = f(tau*)``, ``q = K``, ``values = V`` (Eq. 14), ``policy`` the
        Boltzmann policy ``(L, S, A)``, ``occupancy = multiplier = lambda`` (the dual
        variables of the Bellman inequalities), ``info``: ``dual_value``, ``gap`` (primal
        minus dual), ``derivative`` (``f'(tau*)``), ``evaluations`` (passes of the recursion
        made), ``kernel``, ``search``.
    """
    check_tol_iter(xtol, max_iter, "xtol")
    bracket = _bracket_start(guess)
    if choose_kernel(kernel, _k_kernels.AVAILABLE) == "numba":
        found = _compiled_search(problem, xtol, max_iter, bracket)
        if found is not None:
            return found
    return _scipy_search(problem, xtol, max_iter, kernel, bracket)


#: Brent's relative tolerance on ``log tau``.
_RTOL = 4 * np.finfo(float).eps

#: The bracket search's first half-width and step in ``log tau``: around the scale found at
#: ``tau = 1``, and around a caller's guess.
_HALF, _STEP = 0.5, math.log(4.0)
_GUESS_HALF, _GUESS_STEP = 1.0 / 64.0, 1.0 / 32.0
#: A guess counts within ``tau`` in [1e-150, 1e150] (``tau**2`` a normal double there).
_GUESS_U = math.log(1e150)


def _bracket_start(guess) -> tuple[float, float, float]:
    """``(u_guess, half, step)`` of the bracket search: ``u_guess = log(guess)``, NaN without
    a guess (the centre then comes from ``tau = 1``); ``guess`` checked here."""
    if guess is None:
        return math.nan, _HALF, _STEP
    u = math.log(check_positive("guess", guess))
    return min(max(u, -_GUESS_U), _GUESS_U), _GUESS_HALF, _GUESS_STEP


def _compiled_search(problem, xtol: float, max_iter: int, bracket) -> PlanResult | None:
    """The search in one compiled call (:func:`optplan.fast._k_kernels.solve`), or ``None``
    where it hands over to :func:`_scipy_search` (no bonus, or no converged root)."""
    start = time.perf_counter()
    c = problem.bonus_numerators()
    if not c.any():
        return None
    R, P, c, rho = (
        np.ascontiguousarray(x, dtype=float)
        for x in (problem.mean_rewards, problem.mean_transitions, c, problem.initial)
    )
    status, tau, iterations, evals, f, M, A, B, K, V, pi, lam = _k_kernels.solve(
        R, P, c, rho, xtol, _RTOL, max_iter, _U_MIN, _U_MAX, bracket
    )
    if status != _k_kernels.SOLVED:
        return None
    return _found(tau, iterations, evals, start, (f, M, A, B, K, V, pi, lam), "numba", "compiled")


def _found(tau, iterations, evals, start, terms, kernel, search):
    """The optimal result at ``tau*`` from its ``terms = (f, M, A, B, K, V, pi, lam)``."""
    f, M, A, B, K, V, pi, lam = terms
    dual = M + 2.0 * math.sqrt(A * B)
    info = {
        "tau": tau,
        "dual_value": dual,
        "gap": f - dual,
        "derivative": A - B / tau**2,
        "entropy_term": A,
        "bonus_term": B,
        "reward_term": M,
        "evaluations": evals,
        "kernel": kernel,
        "search": search,
    }
    return _optimal(f, tau, "", iterations, start, K, V, pi, lam, info)


def _scipy_search(problem, xtol: float, max_iter: int, kernel: str, bracket) -> PlanResult:
    """The search in Python: the bracket, then SciPy's ``brentq`` on ``f'`` in ``log tau``,
    each trial ``tau`` evaluated by ``kernel`` (the reference of the compiled search)."""
    start = time.perf_counter()
    R, P, rho = problem.mean_rewards, problem.mean_transitions, problem.initial
    c = problem.bonus_numerators()
    terms, kernel = _terms_function(kernel, R, P, c, rho)
    if not c.any():
        return _hard_max_result(problem, R, P, rho, start)
    dfdu = _Derivative(terms)
    u_guess, half, step = bracket
    u0 = _start(dfdu, c, R) if math.isnan(u_guess) else min(max(u_guess, _U_MIN + 1), _U_MAX - 1)
    found = _bracket(dfdu, u0, half, step, max_iter, start)
    if isinstance(found, PlanResult):
        return found
    u_star, iterations = _root(dfdu, *found, xtol, max_iter)
    if u_star is None:
        return _max_iter(
            f"Brent's method did not converge in {max_iter} iterations", iterations, start
        )
    tau = math.exp(u_star)
    return _found(tau, iterations, dfdu.evals + 1, start, terms(tau, final=True), kernel, "scipy")


class _Derivative:
    """``u -> f'(tau)`` at ``tau = e^u`` (``A - B / tau^2``), counting the evaluations of the
    recursion (``evals``)."""

    def __init__(self, terms):
        self.terms = terms
        self.evals = 0

    def __call__(self, u: float) -> float:
        self.evals += 1
        tau = math.exp(u)
        _, _, A, B, *_ = self.terms(tau)
        return A - B / tau**2


def _start(dfdu: _Derivative, c, R) -> float:
    """The bracket's centre in ``log tau``: the problem's own scale, ``sqrt(B / A)`` at
    ``tau = 1`` (the one-step fixed point), or ``sqrt(mean bonus / log A)`` (B over the
    largest entropy) when the policy at ``tau = 1`` is deterministic to round-off."""
    _, _, A1, B1, *_ = dfdu.terms(1.0)
    dfdu.evals += 1
    if A1 > 0 and B1 > 0 and math.isfinite(B1 / A1):
        u0 = 0.5 * math.log(B1 / A1)
    else:
        u0 = 0.5 * (math.log(max(float(c.mean()), 1e-300)) - math.log(math.log(R.shape[2])))
    return min(max(u0, _U_MIN + 1.0), _U_MAX - 1.0)


def _bracket(dfdu: _Derivative, u0: float, half: float, step: float, max_iter: int, start):
    """``(lo, hi, f'(lo), f'(hi))`` around a sign change of ``f'`` (or a zero at an end),
    widened from ``[u0 - half, u0 + half]`` with steps in ``log tau`` doubling from ``step``,
    the other end moved in as the sign tells, within ``tau`` in ``[1e-300, 1e300]``; the
    ``max_iter`` result when there is none."""
    lo, hi = u0 - half, u0 + half
    g_lo, g_hi = dfdu(lo), dfdu(hi)
    for _ in range(max_iter):
        if g_lo < 0 < g_hi or g_lo == 0 or g_hi == 0:
            return lo, hi, g_lo, g_hi
        stuck = (g_lo > 0 and lo <= _U_MIN) or (g_hi < 0 and hi >= _U_MAX)
        if stuck or not (math.isfinite(g_lo) and math.isfinite(g_hi)):
            return _max_iter(
                f"no sign change of f'(tau) for tau in [{math.exp(lo):.3g}, "
                f"{math.exp(hi):.3g}] (f' = {g_lo:.3g}, {g_hi:.3g})",
                dfdu.evals,
                start,
            )
        if g_lo > 0:  # the root is below lo
            hi, g_hi = lo, g_lo
            lo = max(lo - step, _U_MIN)
            g_lo = dfdu(lo)
        else:  # g_hi < 0: the root is above hi
            lo, g_lo = hi, g_hi
            hi = min(hi + step, _U_MAX)
            g_hi = dfdu(hi)
        step *= 2.0
    return _max_iter(
        f"no sign change of f'(tau) for tau in [{math.exp(lo):.3g}, {math.exp(hi):.3g}] "
        f"after {max_iter} expansions",
        max_iter,
        start,
    )


def _root(dfdu, lo, hi, g_lo, g_hi, xtol: float, max_iter: int):
    """``(u*, iterations)``: the zero of ``f'`` in ``[lo, hi]`` by Brent's method (an end
    where ``f'`` is 0 there); ``u* = None`` when Brent's method did not converge."""
    if g_lo == 0:
        return lo, 0
    if g_hi == 0:
        return hi, 0
    u_star, rr = brentq(
        dfdu,
        lo,
        hi,
        xtol=xtol,
        rtol=_RTOL,
        maxiter=max_iter,
        full_output=True,
        disp=False,
    )
    return (u_star if rr.converged else None), rr.iterations
