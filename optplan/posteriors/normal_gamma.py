"""Mean rewards with unknown noise precision, per ``(s, a, s')``: the Normal-Gamma
``NG(mu0, lam, alpha, beta)`` of bayesian-methods-tabular-rl (:class:`NormalGamma`,
:func:`normal_gamma_update`, :func:`transition_statistics`).

Conventions (docs/sources.md §1): ``tau ~ Gamma(alpha, rate beta)``, ``mu | tau ~ N(mu0, 1 / (lam
tau))``; rewards ``r ~ N(mu, 1 / tau)``. The marginal of ``mu`` is a Student-t with ``2 alpha``
degrees of freedom, location ``mu0`` and scale ``sqrt(beta / (lam alpha))``, so ``Var[mu] =
beta / (lam (alpha - 1))`` (``alpha > 1``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    check_choice,
    check_int,
    first_bad,
    index_str,
)
from ._common import _broadcast, _counts, _frozen, _lead

#: Ways to form the spread term of the Normal-Gamma batch update (:func:`normal_gamma_update`).
SUM_OF_SQUARES = ("correct", "public-code")

#: ``(mu0, lam, alpha, beta)`` of the reward prior of the Bayesian-methods write-up's agents
#: (App. A; docs/sources.md §1), per ``(s, a, s')``.
DRAFT_REWARD_PRIOR = (0.0, 4.0, 3.0, 3.0)

#: ``(mu0, lam, alpha, beta)`` PriorMDP's rewards are drawn from (write-up and code;
#: the draft's ``lam = 300`` is not used, docs/sources.md Ambiguities 5).
PRIOR_MDP_PRIOR = (0.0, 1.0, 4.0, 4.0)

_NG_FIELDS = ("mu0", "lam", "alpha", "beta")


class StudentT(NamedTuple):
    """A location-scale Student-t: ``loc + scale * T_df`` (``scipy.stats.t(df, loc, scale)``)."""

    df: np.ndarray
    loc: np.ndarray
    scale: np.ndarray


def normal_gamma_update(
    mu0, lam, alpha, beta, counts, sums, sums_sq=None, sum_of_squares: str = "correct"
):
    """The Normal-Gamma batch update of docs/sources.md §1 (bayesian-methods-tabular-rl), entry by
    entry, after ``n = counts`` rewards summing to ``sums`` (sum of squares ``sums_sq``):

    ``mu0' = (lam mu0 + n rbar) / (lam + n)``, ``lam' = lam + n``, ``alpha' = alpha + n / 2``,
    ``beta' = beta + S / 2 + n lam (rbar - mu0)^2 / (2 (lam + n))``, ``rbar = sums / n``.

    ``sum_of_squares`` chooses the spread ``S``:

    ``"correct"`` (default)
        ``S = sum_i (r_i - rbar)^2 = sums_sq - sums rbar`` (clipped at 0 against round-off).
    ``"public-code"``
        the public code's slip (``update_posterior`` with ``M2 = (sum r)^2 / n`` in place of
        ``sum r^2 / n``): ``S = n (M2 - rbar^2) = (n - 1) sums rbar = n (n - 1) rbar^2``.
        ``sums_sq`` is not used. Only ``beta`` differs from the correct update:
        ``beta'_public - beta'_correct = (n (n - 1) rbar^2 - sum_i (r_i - rbar)^2) / 2``,
        zero for ``n <= 1``; so for ``n >= 2`` one batch of ``n`` is not ``n`` single updates.

    Entries with ``n = 0`` are returned unchanged, bit for bit. Returns the four new arrays.
    The parameters are not checked here (see :class:`NormalGamma`).
    """
    check_choice("sum_of_squares", sum_of_squares, SUM_OF_SQUARES)
    n = np.asarray(counts, dtype=float)
    sums = np.asarray(sums, dtype=float)
    seen = n > 0
    rbar = sums / np.where(seen, n, 1.0)  # 0 where unseen (sums = 0 there)
    if sum_of_squares == "correct":
        if sums_sq is None:
            raise OptplanError(
                "sums_sq is required for sum_of_squares='correct' (the sum of squared rewards)"
            )
        spread = np.maximum(np.asarray(sums_sq, dtype=float) - sums * rbar, 0.0)
    else:
        spread = (n - 1.0) * sums * rbar
    spread = np.where(seen, spread, 0.0)
    lam_n = lam + n
    mu0_n = np.where(seen, (lam * mu0 + sums) / lam_n, mu0)
    beta_n = beta + 0.5 * spread + np.where(seen, lam * n * (rbar - mu0) ** 2 / (2.0 * lam_n), 0.0)
    return mu0_n, lam_n, alpha + 0.5 * n, beta_n


def transition_statistics(states, actions, rewards, next_states, n_states: int, n_actions: int):
    """Per-``(s, a, s')`` sufficient statistics of a batch of transitions: ``counts``,
    ``sums`` and ``sums_sq`` of the rewards, each ``(S, A, S)`` (unbuffered ``np.add.at``,
    no Python loop), ready for :meth:`NormalGamma.update`; ``counts`` is also the Dirichlet
    update."""
    S = check_int("n_states", n_states)
    A = check_int("n_actions", n_actions)
    s = np.asarray(states, dtype=np.intp)
    a = np.asarray(actions, dtype=np.intp)
    s2 = np.asarray(next_states, dtype=np.intp)
    r = as_array("rewards", rewards, 1)
    if not (s.shape == a.shape == s2.shape == r.shape):
        raise OptplanError(
            f"states, actions, rewards and next_states must have one shape, got {s.shape}, "
            f"{a.shape}, {r.shape} and {s2.shape}"
        )
    for name, idx, k in (("states", s, S), ("actions", a, A), ("next_states", s2, S)):
        if idx.size and (idx.min() < 0 or idx.max() >= k):
            raise OptplanError(
                f"{name} must lie in [0, {k}), got values in [{idx.min()}, {idx.max()}]"
            )
    counts = np.zeros((S, A, S))
    sums = np.zeros((S, A, S))
    sums_sq = np.zeros((S, A, S))
    np.add.at(counts, (s, a, s2), 1.0)
    np.add.at(sums, (s, a, s2), r)
    np.add.at(sums_sq, (s, a, s2), r * r)
    return counts, sums, sums_sq


def _ng_param(name: str, value, positive: bool) -> np.ndarray:
    arr = as_array(f"Normal-Gamma {name}", value)
    if positive and (arr <= 0).any():
        idx = first_bad(arr <= 0)
        where = f" at index {index_str(idx)}" if arr.ndim else ""
        raise OptplanError(f"Normal-Gamma {name} must be > 0, got {float(arr[idx])!r}{where}")
    return arr


class NormalGamma:
    """``NG(mu0, lam, alpha, beta)`` on the mean ``mu`` and precision ``tau`` of Gaussian
    rewards, one per entry (per ``(s, a, s')`` in the Bayesian-methods agents), vectorized.
    Immutable: updates return a new posterior.

    ``tau ~ Gamma(alpha, rate beta)`` and ``mu | tau ~ N(mu0, 1 / (lam tau))``.

    Parameters
    ----------
    mu0 : array_like, finite
    lam, alpha, beta : array_like, finite, > 0
        Broadcast together (and to ``shape``). E.g.
        ``NormalGamma(*DRAFT_REWARD_PRIOR, shape=(S, A, S))``.
    shape : tuple of int, optional
        Broadcast the parameters to this shape.
    sum_of_squares : {"correct", "public-code"}, default "correct"
        The spread term of :meth:`update` (see :func:`normal_gamma_update`): ``"public-code"``
        reproduces the public code's ``(sum r)^2 / n`` slip (docs/sources.md §2, Ambiguities 3).

    Attributes
    ----------
    mu0, lam, alpha, beta : ndarray, read-only, all of one shape
    shape : tuple of int
    sum_of_squares : str

    Raises
    ------
    OptplanError
        A non-finite parameter, ``lam``, ``alpha`` or ``beta <= 0`` (the message names the
        field, the value and its index), shapes that do not broadcast, an unknown
        ``sum_of_squares``.
    """

    __slots__ = ("mu0", "lam", "alpha", "beta", "shape", "sum_of_squares")

    def __init__(
        self, mu0, lam, alpha, beta, *, shape=None, sum_of_squares: str = "correct"
    ) -> None:
        check_choice("sum_of_squares", sum_of_squares, SUM_OF_SQUARES)
        arrays = [
            _ng_param(name, value, name != "mu0")
            for name, value in zip(_NG_FIELDS, (mu0, lam, alpha, beta), strict=True)
        ]
        try:
            target = np.broadcast_shapes(*(x.shape for x in arrays), *([shape] if shape else []))
        except ValueError:
            shapes = ", ".join(f"{n} {x.shape}" for n, x in zip(_NG_FIELDS, arrays, strict=True))
            extra = "" if shape is None else f" and shape {tuple(shape)}"
            raise OptplanError(
                f"Normal-Gamma parameters do not broadcast: {shapes}{extra}"
            ) from None
        if shape is not None and tuple(target) != tuple(shape):
            raise OptplanError(
                f"Normal-Gamma parameters broadcast to {tuple(target)}, not to shape {tuple(shape)}"
            )
        self._set(*(np.broadcast_to(x, target) for x in arrays), sum_of_squares)

    def _set(self, mu0, lam, alpha, beta, mode) -> None:
        for name, value in zip(_NG_FIELDS, (mu0, lam, alpha, beta), strict=True):
            setattr(self, name, _frozen(value))
        self.shape = self.mu0.shape
        self.sum_of_squares = mode

    @classmethod
    def _trusted(cls, mu0, lam, alpha, beta, mode) -> NormalGamma:
        out = cls.__new__(cls)
        out._set(mu0, lam, alpha, beta, mode)
        return out

    @property
    def params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(mu0, lam, alpha, beta)``."""
        return self.mu0, self.lam, self.alpha, self.beta

    # --- updates -------------------------------------------------------------------------

    def update(self, counts, sums, sums_sq=None) -> NormalGamma:
        """The posterior after a batch: ``counts`` rewards per entry summing to ``sums``, with
        sum of squares ``sums_sq`` (:func:`normal_gamma_update`; each broadcasts to
        :attr:`shape`; ``sums_sq`` is unused, and may be omitted, under ``"public-code"``).
        :func:`transition_statistics` builds the three arrays from transitions."""
        n = _counts("counts", counts, self.shape)
        total = _broadcast("sums", as_array("sums", sums), self.shape)
        if (total[n == 0] != 0).any():
            raise OptplanError("sums must be 0 where counts is 0 (no reward was observed there)")
        sq = None
        if sums_sq is not None:
            sq = _broadcast("sums_sq", as_array("sums_sq", sums_sq), self.shape)
            if (sq < 0).any():
                idx = first_bad(sq < 0)
                raise OptplanError(
                    f"sums_sq must be >= 0 (a sum of squares), got {float(sq[idx])!r} at "
                    f"index {index_str(idx)}"
                )
        new = normal_gamma_update(*self.params, n, total, sq, self.sum_of_squares)
        return NormalGamma._trusted(*new, self.sum_of_squares)

    def update_single(self, reward, index=None) -> NormalGamma:
        """The posterior after one reward: ``mu0' = (lam mu0 + r) / (lam + 1)``,
        ``lam' = lam + 1``, ``alpha' = alpha + 1/2``,
        ``beta' = beta + lam (r - mu0)^2 / (2 (lam + 1))``.

        ``index`` (e.g. ``(s, a, s')``) picks the entries that observe ``reward``; ``None``:
        every entry observes its entry of ``reward`` (broadcast to :attr:`shape`). An index
        array must not repeat an entry (each selected entry observes one reward; use
        :meth:`update` for batches). Both ``sum_of_squares`` modes agree on a single reward.
        """
        r = as_array("reward", reward)
        mu0, lam, alpha, beta = (x.copy() for x in self.params)
        sel = (...,) if index is None else index
        try:
            m, l = mu0[sel], lam[sel]
            r = np.broadcast_to(r, np.shape(m))
        except (IndexError, TypeError, ValueError) as exc:
            raise OptplanError(
                f"cannot apply reward of shape {r.shape} at index {index!r} of a posterior of "
                f"shape {self.shape}: {exc}"
            ) from None
        beta[sel] = beta[sel] + l * (r - m) ** 2 / (2.0 * (l + 1.0))
        mu0[sel] = (l * m + r) / (l + 1.0)
        lam[sel] = l + 1.0
        alpha[sel] = alpha[sel] + 0.5
        return NormalGamma._trusted(mu0, lam, alpha, beta, self.sum_of_squares)

    # --- moments and draws -----------------------------------------------------------------

    @property
    def mean(self) -> np.ndarray:
        """``E[mu] = mu0``."""
        return self.mu0

    @property
    def precision_mean(self) -> np.ndarray:
        """``E[tau] = alpha / beta``."""
        return self.alpha / self.beta

    @property
    def variance(self) -> np.ndarray:
        """``Var[mu] = beta / (lam (alpha - 1))``; needs ``alpha > 1`` everywhere (the
        Student-t marginal has no variance otherwise): :class:`OptplanError` naming the first
        entry with ``alpha <= 1``."""
        low = self.alpha <= 1.0
        if low.any():
            idx = first_bad(low)
            where = f" at index {index_str(idx)}" if self.alpha.ndim else ""
            raise OptplanError(
                f"the variance of mu needs alpha > 1 (a Student-t with 2 alpha > 2 degrees of "
                f"freedom), got alpha={float(self.alpha[idx])!r}{where}"
            )
        return self.beta / (self.lam * (self.alpha - 1.0))

    def marginal(self) -> StudentT:
        """The marginal of ``mu``: Student-t, ``df = 2 alpha``, ``loc = mu0``,
        ``scale = sqrt(beta / (lam alpha))``."""
        return StudentT(2.0 * self.alpha, self.mu0, np.sqrt(self.beta / (self.lam * self.alpha)))

    def predictive(self) -> StudentT:
        """The posterior predictive of one reward ``r ~ N(mu, 1/tau)``: Student-t,
        ``df = 2 alpha``, ``loc = mu0``, ``scale = sqrt(beta (lam + 1) / (lam alpha))``
        (the next-state return draw of the draft's BQL)."""
        scale = np.sqrt(self.beta * (self.lam + 1.0) / (self.lam * self.alpha))
        return StudentT(2.0 * self.alpha, self.mu0, scale)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...] | None = None):
        """Draws ``(mu, tau)``: ``tau ~ Gamma(alpha, rate beta)`` (all of them first), then
        ``mu = mu0 + z / sqrt(lam tau)`` with ``z ~ N(0, 1)``. Each is shaped like the
        parameters, or ``(*size, *shape)``."""
        out = self.shape if size is None else _lead(size) + self.shape
        tau = rng.gamma(self.alpha, 1.0 / self.beta, size=out)
        mu = self.mu0 + rng.standard_normal(out) / np.sqrt(self.lam * tau)
        return mu, tau

    def __repr__(self) -> str:
        mode = "" if self.sum_of_squares == "correct" else ", sum_of_squares='public-code'"
        if self.mu0.size == 1:
            vals = ", ".join(
                f"{n}={float(x.reshape(-1)[0]):g}"
                for n, x in zip(_NG_FIELDS, self.params, strict=True)
            )
            return f"NormalGamma({vals}, shape={self.shape}{mode})"
        return f"NormalGamma(shape={self.shape}{mode})"
