"""Transitions ``P(. | s, a) ~ Dirichlet(alpha)``, posterior ``Dirichlet(alpha + counts)``:
the mean, draws, the exact moments, and the immutable :class:`Dirichlet`."""

from __future__ import annotations

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    first_bad,
    index_str,
)
from ._common import _counts, _frozen, _lead, _range


def dirichlet_mean(alpha: np.ndarray) -> np.ndarray:
    """Mean of ``Dirichlet(alpha)`` along the last axis."""
    return alpha / alpha.sum(axis=-1, keepdims=True)


def sample_dirichlet(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw of ``Dirichlet(alpha)`` per row (last axis), by normalized Gamma variates.

    A row whose gammas all underflow to 0 (tiny pseudo-counts) is uniform, not NaN.
    """
    g = rng.standard_gamma(alpha)
    total = g.sum(axis=-1, keepdims=True)
    return np.where(total > 0, g / np.where(total > 0, total, 1.0), 1.0 / alpha.shape[-1])


def check_dirichlet(alpha) -> np.ndarray:
    """Dirichlet parameters along the last axis: finite, ``>= 0``, no all-zero row."""
    a = as_array("alpha", alpha)
    if a.ndim < 1:
        raise OptplanError(f"alpha must have at least one dimension, got shape {a.shape}")
    if (a < 0).any():
        idx = first_bad(a < 0)
        raise OptplanError(
            f"alpha has a negative entry {float(a[idx])!r} at index {index_str(idx)}"
        )
    total = a.sum(axis=-1)
    if (total <= 0).any():
        idx = first_bad(total <= 0)
        raise OptplanError(f"alpha has a row of zeros at index {index_str(idx)}")
    return a


def dirichlet_covariance(alpha, x, y) -> np.ndarray:
    """``Cov[P.x, P.y]`` for ``P ~ Dirichlet(alpha)`` (last axis), exactly:
    ``(sum pbar x y - (pbar.x)(pbar.y)) / (alpha_0 + 1)``."""
    a = np.asarray(alpha, dtype=float)
    a0 = a.sum(axis=-1)
    p = a / a0[..., None]
    px, py = np.sum(p * x, axis=-1), np.sum(p * y, axis=-1)
    # the centred form: no cancellation between two large sums when x, y are large constants
    return np.sum(p * (x - px[..., None]) * (y - py[..., None]), axis=-1) / (a0 + 1.0)


def dirichlet_variance_sum(alpha) -> np.ndarray:
    """``sum_s' Var P(s')`` for ``P ~ Dirichlet(alpha)``: ``(1 - sum pbar^2) / (alpha_0 + 1)``."""
    a = np.asarray(alpha, dtype=float)
    a0 = a.sum(axis=-1)
    p = a / a0[..., None]
    return (1.0 - np.sum(p * p, axis=-1)) / (a0 + 1.0)


def dirichlet_variance_ratio_sum(alpha) -> np.ndarray:
    """``sum_{s': pbar > 0} Var P(s') / E P(s')`` for ``P ~ Dirichlet(alpha)``:
    ``(k - 1) / (alpha_0 + 1)``, ``k`` the number of states with ``alpha > 0``."""
    a = np.asarray(alpha, dtype=float)
    k = np.count_nonzero(a > 0, axis=-1)
    return (k - 1.0) / (a.sum(axis=-1) + 1.0)


def dirichlet_variance(alpha) -> np.ndarray:
    """``Var P(s')`` for ``P ~ Dirichlet(alpha)`` (last axis), entry by entry:
    ``pbar (1 - pbar) / (alpha_0 + 1)``."""
    a = np.asarray(alpha, dtype=float)
    a0 = a.sum(axis=-1, keepdims=True)
    p = a / a0
    return p * (1.0 - p) / (a0 + 1.0)


class Dirichlet:
    """``Dirichlet(alpha)`` along the last axis, one per leading index (e.g. per ``(s, a)``
    over all next states, ``alpha`` of shape ``(S, A, S)``). Immutable: updates return a new
    posterior.

    Parameters
    ----------
    alpha : array_like, shape (..., K)
        Concentrations: finite, ``>= 0`` (a zero takes that entry out of the support), no
        all-zero row. The write-up's prior is all ones over all states (docs/sources.md §1).

    Attributes
    ----------
    alpha : ndarray, read-only
    shape : tuple of int
    """

    __slots__ = ("alpha", "shape")

    def __init__(self, alpha) -> None:
        self.alpha = _frozen(check_dirichlet(alpha))
        self.shape = self.alpha.shape

    @classmethod
    def _trusted(cls, alpha) -> Dirichlet:
        """``Dirichlet(alpha)`` without the checks, for parameters known valid (an update of a
        valid posterior by counts known to be non-negative whole numbers)."""
        out = cls.__new__(cls)
        out.alpha = _frozen(alpha)
        out.shape = out.alpha.shape
        return out

    def update(self, counts) -> Dirichlet:
        """The posterior after ``counts[..., k]`` observations of outcome ``k``:
        ``Dirichlet(alpha + counts)``."""
        return Dirichlet(self.alpha + _counts("counts", counts, self.shape))

    def update_single(self, index) -> Dirichlet:
        """The posterior after one observation at ``index``, a full index into ``alpha``
        (e.g. ``(s, a, s')``)."""
        alpha = self.alpha.copy()
        try:
            alpha[index] += 1.0
        except (IndexError, TypeError) as exc:
            raise OptplanError(
                f"index {index!r} is not an index into alpha of shape {self.shape}: {exc}"
            ) from None
        return Dirichlet(alpha)

    @property
    def mean(self) -> np.ndarray:
        """``E P``, shaped like ``alpha``."""
        return dirichlet_mean(self.alpha)

    @property
    def variance(self) -> np.ndarray:
        """``Var P(k)`` entry by entry, shaped like ``alpha``."""
        return dirichlet_variance(self.alpha)

    @property
    def covariance(self) -> np.ndarray:
        """``Cov[P(j), P(k)] = (delta_jk pbar_j - pbar_j pbar_k) / (alpha_0 + 1)``,
        shape ``(..., K, K)``."""
        a0 = self.alpha.sum(axis=-1)[..., None, None]
        p = dirichlet_mean(self.alpha)
        eye = np.eye(self.shape[-1])
        return (eye * p[..., None, :] - p[..., :, None] * p[..., None, :]) / (a0 + 1.0)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...] | None = None):
        """Draws of ``P``: shape ``alpha.shape``, or ``(*size, *alpha.shape)``
        (:func:`sample_dirichlet`)."""
        alpha = (
            self.alpha if size is None else np.broadcast_to(self.alpha, _lead(size) + self.shape)
        )
        return sample_dirichlet(alpha, rng)

    def __repr__(self) -> str:
        return f"Dirichlet(shape={self.shape}, alpha_0 in [{_range(self.alpha.sum(-1))}])"
