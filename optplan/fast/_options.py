"""Validation of the fast paths' options."""

from __future__ import annotations

from .._checks import OptplanError


def check_algorithm(algorithm: str, allowed: tuple[str, ...]) -> str:
    if algorithm not in allowed:
        raise OptplanError(f"algorithm must be one of {allowed}, got {algorithm!r}")
    return algorithm


def check_tol_iter(tol: float, max_iter: int) -> None:
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise OptplanError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise OptplanError(f"max_iter must be a positive integer, got {max_iter!r}")
