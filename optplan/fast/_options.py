"""Validation of the fast paths' options."""

from __future__ import annotations

from .._checks import OptplanError, check_int


def check_algorithm(algorithm: str, allowed: tuple[str, ...]) -> str:
    if algorithm not in allowed:
        raise OptplanError(f"algorithm must be one of {allowed}, got {algorithm!r}")
    return algorithm


def check_tol_iter(tol: float, max_iter: int) -> None:
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise OptplanError(f"tol must be a positive number, got {tol!r}")
    check_int("max_iter", max_iter)
