"""Conjugate posteriors of tabular models, shared by the Bayesian agents.

Pure functions on arrays of sufficient statistics (counts, sums), vectorized over any leading
shape, two small immutable posterior classes, and :class:`LayeredPosterior`, the
per-``(layer, state, action)`` posterior of the episodic agents (K-learning, PSRL, UBE; with
``n_layers=None`` the per-``(state, action)`` posterior of continuing ones):

- mean rewards ``mu ~ N(0, prior_var)`` observed with Gaussian noise of standard deviation
  ``sigma`` (:func:`gaussian_mean_posterior`), or under a flat (improper) prior;
- mean rewards with unknown noise precision, per ``(s, a, s')``: the Normal-Gamma
  ``NG(mu0, lam, alpha, beta)`` of bayesian-methods-tabular-rl (:class:`NormalGamma`,
  :func:`normal_gamma_update`, :func:`transition_statistics`);
- transitions ``P(. | s, a) ~ Dirichlet(alpha)``, posterior ``Dirichlet(alpha + counts)``
  (:class:`Dirichlet`, :func:`dirichlet_mean`, :func:`sample_dirichlet`) and its exact moments
  (:func:`dirichlet_variance`, :func:`dirichlet_covariance`, :func:`dirichlet_variance_sum`,
  :func:`dirichlet_variance_ratio_sum`).

Normal-Gamma conventions (wave2.md §1): ``tau ~ Gamma(alpha, rate beta)``,
``mu | tau ~ N(mu0, 1 / (lam tau))``; rewards ``r ~ N(mu, 1 / tau)``. The marginal of ``mu`` is
a Student-t with ``2 alpha`` degrees of freedom, location ``mu0`` and scale
``sqrt(beta / (lam alpha))``, so ``Var[mu] = beta / (lam (alpha - 1))`` (``alpha > 1``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._checks import (
    OptplanError,
    as_array,
    check_choice,
    check_int,
    check_positive,
    first_bad,
    index_str,
)

__all__ = [
    "gaussian_mean_posterior",
    "dirichlet_mean",
    "sample_dirichlet",
    "check_dirichlet",
    "dirichlet_variance",
    "dirichlet_covariance",
    "dirichlet_variance_sum",
    "dirichlet_variance_ratio_sum",
    "Dirichlet",
    "NormalGamma",
    "StudentT",
    "SUM_OF_SQUARES",
    "DRAFT_REWARD_PRIOR",
    "PRIOR_MDP_PRIOR",
    "normal_gamma_update",
    "transition_statistics",
    "LayeredPosterior",
    "k_bonus_numerators",
    "K_BONUSES",
    "UNVISITED_TERMS",
]


def gaussian_mean_posterior(
    sums: np.ndarray, counts: np.ndarray, sigma: float, prior_var: float
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of a mean reward with prior ``N(0, prior_var)``, after
    ``counts`` observations summing to ``sums`` with Gaussian noise ``sigma``:
    precision ``1/prior_var + n/sigma^2``, mean ``(sum / sigma^2) / precision``.

    ``sigma`` is a scalar or an array broadcasting against ``counts`` (a noise sd per pair).
    ``sigma = 0`` (exact observations): the sample mean and variance 0 once observed, the
    prior before. ``prior_var = inf`` is the flat prior: mean ``sum / n``, variance
    ``sigma^2 / n``, defined for ``n >= 1`` only.
    """
    if prior_var == np.inf:  # the flat prior, counts >= 1
        return sums / counts, np.square(sigma) / counts
    exact = np.equal(sigma, 0)
    if not exact.any():
        precision = 1.0 / prior_var + counts / sigma**2
        return sums / sigma**2 / precision, 1.0 / precision
    n = np.maximum(counts, 1)
    mean = np.where(counts > 0, sums / n, 0.0)
    var = np.where(counts > 0, 0.0, prior_var)
    if exact.all():
        return mean, var
    sd2 = np.where(exact, 1.0, np.square(sigma))  # any positive stand-in where exact
    precision = 1.0 / prior_var + counts / sd2
    return (
        np.where(exact, mean, sums / sd2 / precision),
        np.where(exact, var, 1.0 / precision),
    )


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


def _counts(name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    """Observation counts: finite, non-negative whole numbers, broadcast to ``shape``."""
    n = as_array(name, value)
    if (n < 0).any() or (n != np.round(n)).any():
        idx = first_bad((n < 0) | (n != np.round(n)))
        where = f" at index {index_str(idx)}" if n.ndim else ""
        raise OptplanError(
            f"{name} must hold non-negative whole numbers, got {float(n[idx])!r}{where}"
        )
    return _broadcast(name, n, shape)


def _broadcast(name: str, arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        raise OptplanError(
            f"{name} has shape {arr.shape}, which does not broadcast to the posterior's {shape}"
        ) from None


def _frozen(arr) -> np.ndarray:
    out = np.array(arr, dtype=float)
    out.setflags(write=False)
    return out


class Dirichlet:
    """``Dirichlet(alpha)`` along the last axis, one per leading index (e.g. per ``(s, a)``
    over all next states, ``alpha`` of shape ``(S, A, S)``). Immutable: updates return a new
    posterior.

    Parameters
    ----------
    alpha : array_like, shape (..., K)
        Concentrations: finite, ``>= 0`` (a zero takes that entry out of the support), no
        all-zero row. The write-up's prior is all ones over all states (wave2.md §1).

    Attributes
    ----------
    alpha : ndarray, read-only
    shape : tuple of int
    """

    __slots__ = ("alpha", "shape")

    def __init__(self, alpha) -> None:
        self.alpha = _frozen(check_dirichlet(alpha))
        self.shape = self.alpha.shape

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


def _lead(size) -> tuple[int, ...]:
    return (int(size),) if np.ndim(size) == 0 else tuple(int(k) for k in size)


def _range(x: np.ndarray) -> str:
    return f"{float(np.min(x)):g}, {float(np.max(x)):g}" if x.size else ""


#: Ways to form the spread term of the Normal-Gamma batch update (:func:`normal_gamma_update`).
SUM_OF_SQUARES = ("correct", "public-code")

#: ``(mu0, lam, alpha, beta)`` of the reward prior of the Bayesian-methods write-up's agents
#: (App. A; wave2.md §1), per ``(s, a, s')``.
DRAFT_REWARD_PRIOR = (0.0, 4.0, 3.0, 3.0)

#: ``(mu0, lam, alpha, beta)`` PriorMDP's rewards are drawn from (write-up and code;
#: the draft's ``lam = 300`` is not used, wave2.md Ambiguities 5).
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
    """The Normal-Gamma batch update of wave2.md §1 (bayesian-methods-tabular-rl), entry by
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
        reproduces the public code's ``(sum r)^2 / n`` slip (wave2.md §2, Ambiguities 3).

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


class LayeredPosterior:
    """Gaussian rewards and Dirichlet transitions per ``(layer, state, action)``.

    Parameters
    ----------
    n_layers : int or None
        ``L``; ``None`` for a continuing model: arrays are ``(S, A)`` and every transition is
        recorded (in the layered form the last layer's transitions leave the horizon).
    n_states, n_actions : int
    sigma : float >= 0, or array of such
        Reward-noise standard deviation, one for all pairs or one per pair (an array
        broadcasting to ``(L, S, A)``, ``(S, A)`` without layers). 0: rewards are observed
        exactly; the reward posterior then is the sample mean once visited.
    prior_var : float > 0 or None
        Prior variance of each mean reward (prior mean 0). ``None``: the flat (improper)
        prior, posterior ``N(sum / n, sigma^2 / n)``; an unvisited pair counts as one
        observation of the prior mean, ``N(0, sigma^2)``, so that its uncertainty is finite
        (the largest a visited pair can have).
    transition_prior : float > 0 or "deterministic", optional
        Dirichlet pseudo-count per next state; default ``1 / S``. ``"deterministic"``: each
        pair has one next state, unknown and uniform a priori (the ``alpha -> 0`` limit of the
        symmetric Dirichlet): a visited pair's mean transition is its observed next state, an
        unvisited pair's is uniform, and a sample puts it on one uniformly drawn state. A
        second, different next state for a pair contradicts the prior: :meth:`update` raises,
        naming the layer, state and action.
    """

    #: ``transition_prior`` of the deterministic-transition prior.
    DETERMINISTIC = "deterministic"

    def __init__(
        self, n_layers, n_states, n_actions, sigma=1.0, prior_var=1.0, transition_prior=None
    ):
        self.L = None if n_layers is None else check_int("n_layers", n_layers)
        self.S = check_int("n_states", n_states)
        self.A = check_int("n_actions", n_actions)
        self.shape = (self.S, self.A) if self.L is None else (self.L, self.S, self.A)
        if np.ndim(sigma) == 0:
            self.sigma = check_positive("sigma", sigma, allow_zero=True)
        else:
            self.sigma = _per_pair_sd(sigma, self.shape)
        self.improper = prior_var is None
        self.prior_var = np.inf if self.improper else check_positive("prior_var", prior_var)
        self.deterministic = isinstance(transition_prior, str)
        if self.deterministic:
            check_choice("transition_prior", transition_prior, (self.DETERMINISTIC,))
            self.transition_prior = self.DETERMINISTIC
        else:
            alpha = 1.0 / self.S if transition_prior is None else transition_prior
            self.transition_prior = check_positive("transition_prior", alpha)
        self.reset()

    def reset(self) -> None:
        shape = self.shape
        self.counts = np.zeros(shape)
        self.reward_sums = np.zeros(shape)
        self.next_counts = np.zeros((*shape, self.S))

    def update(self, layer: int | None, state: int, action: int, reward: float, next_state: int):
        """Record one transition (``layer`` is ignored without layers)."""
        pair = (state, action) if self.L is None else (layer, state, action)
        recorded = self.L is None or layer + 1 < self.L
        if recorded and self.deterministic:
            seen = self.next_counts[pair]
            if seen.sum() > 0 and seen[next_state] == 0:
                where = ", ".join(
                    f"{k} {v}"
                    for k, v in zip(("layer", "state", "action")[-len(pair) :], pair, strict=True)
                )
                raise OptplanError(
                    f"the deterministic transition prior is contradicted at {where}: next state "
                    f"{next_state} observed after {int(np.argmax(seen))}; use a Dirichlet "
                    "transition_prior (a pseudo-count) for stochastic transitions"
                )
        self.counts[pair] += 1
        self.reward_sums[pair] += reward
        if recorded:
            self.next_counts[(*pair, next_state)] += 1

    def reward_posterior(self, index=()) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of every mean reward, each shaped like ``counts``
        (``counts[index]`` with an ``index``, e.g. a slice of layers)."""
        counts = self.counts[index]
        if self.improper:
            counts = np.maximum(counts, 1.0)
        sigma = self.sigma if np.ndim(self.sigma) == 0 else self.sigma[index]
        return gaussian_mean_posterior(self.reward_sums[index], counts, sigma, self.prior_var)

    def mean_transitions(self, index=()) -> np.ndarray:
        """Posterior mean transitions, ``counts.shape + (S,)`` (or of ``counts[index]``)."""
        counts = self.next_counts[index]
        if not self.deterministic:
            return dirichlet_mean(counts + self.transition_prior)
        n = counts.sum(axis=-1, keepdims=True)
        return np.where(n > 0, counts / np.maximum(n, 1.0), 1.0 / self.S)

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One model from the posterior: rewards (L, S, A) and transitions (L, S, A, S)."""
        mean, var = self.reward_posterior()
        R = mean + np.sqrt(var) * rng.standard_normal(mean.shape)
        if not self.deterministic:
            return R, sample_dirichlet(self.next_counts + self.transition_prior, rng)
        P = self.mean_transitions()
        unseen = self.next_counts.sum(axis=-1) == 0
        draws = rng.integers(0, self.S, size=unseen.shape)
        P[unseen] = 0.0
        P[unseen, draws[unseen]] = 1.0
        return R, P

    def bonus_numerators(self, kind: str = "paper", span=None, unvisited: str = "hoeffding"):
        """K-learning's bonus numerators ``c`` in ``K = E mu + c / tau + E P . V`` (layered
        posteriors only), shape ``(L, S, A)``; see :func:`k_bonus_numerators`."""
        if self.L is None:
            raise OptplanError("bonus_numerators needs a layered posterior (n_layers set)")
        _, reward_var = self.reward_posterior()
        return k_bonus_numerators(
            kind,
            self.counts,
            self.sigma,
            reward_var,
            self.next_counts.sum(axis=-1),
            self.transition_prior,
            self.S,
            span,
            unvisited,
        )


#: Names of :func:`k_bonus_numerators`' bonuses and of its unvisited-pair terms.
K_BONUSES = ("paper", "posterior")
UNVISITED_TERMS = ("hoeffding", "paper")


def k_bonus_numerators(
    kind,
    counts,
    sigma,
    reward_var,
    transition_counts,
    transition_prior,
    n_states,
    span=None,
    unvisited="hoeffding",
) -> np.ndarray:
    r"""K-learning's bonus numerators ``c_l(s, a)`` (shape of ``counts``, ``(L, S, A)``).

    - ``"paper"``: Eq. 6 as printed, ``(sigma^2 + p_l^2) / (2 max(n, 1))`` with
      ``p_l = L - 1 - l``, whatever the posterior.
    - ``"posterior"``: from the posterior actually held, ``(v_n + t) / 2``: ``v_n`` the exact
      posterior variance of the mean reward (``reward_var``; the prior variance when
      ``n = 0``, 0 once visited when ``sigma = 0``) and ``t`` Lemma 2's transition term,
      ``Span_l^2 / (m + sum alpha)`` for a Dirichlet prior (``m`` observed transitions, ``sum
      alpha = S alpha``), and for the deterministic prior 0 once the pair's transition was
      seen, before it ``Span_l^2 / 4`` (Hoeffding: a value in a range of width ``Span``, the
      default ``unvisited="hoeffding"``) or ``Span_l^2`` (``unvisited="paper"``, the paper's
      ``p_l^2``, 4x conservative).

    ``span``: the value span ``Span_l`` of layer ``l + 1``'s values; default ``p_l = L-1-l``
    (rewards in [0, 1]); a positive finite number declares it for every layer but the last
    (DeepSea's return lies in [-0.01, 1]: 1.01). The last layer has no next value: 0 there.
    """
    check_choice("bonus", kind, K_BONUSES)
    check_choice("unvisited", unvisited, UNVISITED_TERMS)
    L = counts.shape[0]
    remaining = L - 1 - np.arange(L, dtype=float)
    if kind == "paper":
        return (np.square(sigma) + remaining[:, None, None] ** 2) / (2.0 * np.maximum(counts, 1.0))
    if span is None:
        spans = remaining
    else:
        spans = np.where(remaining > 0, check_positive("span", span), 0.0)
    span2 = (spans**2)[:, None, None]
    if transition_prior == LayeredPosterior.DETERMINISTIC:
        before = span2 / 4.0 if unvisited == "hoeffding" else span2
        transition = np.where(transition_counts > 0, 0.0, before)
    else:
        transition = span2 / (transition_counts + n_states * transition_prior)
    return (reward_var + transition) / 2.0


def _per_pair_sd(sigma, shape: tuple[int, ...]) -> np.ndarray:
    """A per-pair noise sd: finite, ``>= 0``, broadcast (read-only) to ``shape``."""
    sd = as_array("sigma", sigma)
    try:
        sd = np.broadcast_to(sd, shape)
    except ValueError:
        raise OptplanError(
            f"sigma has shape {sd.shape}, which does not broadcast to the posterior's {shape}"
        ) from None
    if (sd < 0).any():
        idx = first_bad(sd < 0)
        raise OptplanError(
            f"sigma must be >= 0 (a standard deviation), got {float(sd[idx])!r} at index "
            f"{index_str(idx)}"
        )
    return sd
