"""Validation of the fast paths' options."""

from __future__ import annotations

from .._checks import OptplanError, check_int, check_tolerance


def check_algorithm(algorithm: str, allowed: tuple[str, ...]) -> str:
    if algorithm not in allowed:
        raise OptplanError(f"algorithm must be one of {allowed}, got {algorithm!r}")
    return algorithm


def check_tol_iter(tol: float, max_iter: int | None, tol_name: str = "tol") -> None:
    """``tol`` a finite number > 0 (``tol_name`` in the message), ``max_iter`` a positive
    integer or ``None`` (the path's default)."""
    check_tolerance(tol_name, tol)
    if max_iter is not None:
        check_int("max_iter", max_iter)


#: Accepted values of a fast path's ``kernel=`` option.
KERNELS = ("auto", "numpy", "numba")


def choose_kernel(kernel: str, available: bool) -> str:
    """``"numpy"`` or ``"numba"`` for ``kernel`` (``"auto"``: numba when installed)."""
    if kernel not in KERNELS:
        raise OptplanError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "numba" and not available:
        raise OptplanError(
            'kernel="numba" needs numba, which is not installed: pip install "optplan[jit]"'
        )
    return "numba" if kernel != "numpy" and available else "numpy"
