"""Fast path of ``OptimisticPlanning``: extended value iteration (EVI) with the batched index
kernels, then an exact finish (optimistic policy iteration: evaluate the optimistic policy on
its optimistic kernel exactly, improve, repeat).

A sparse ``p_hat`` (CSR, rows ``s·A + a``) runs sparse throughout: the ball rows on their
supports plus one state (:class:`_SparseBallRows`), ``p_hat . v`` as a sparse mat-vec, the
optimistic kernel as a CSR matrix, and the finish's policy chain as a CSR row gather evaluated
by :func:`~optplan.dp.evaluate_discounted` / :func:`~optplan.dp.evaluate_sparse_unichain`
(dense up to :data:`~optplan.dp.SPARSE_DIRECT_MAX_STATES` states, where ``S x S`` is small)."""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ..dp import (
    SPARSE_DIRECT_MAX_STATES,
    EvaluationError,
    evaluate_average,
    evaluate_discounted,
    evaluate_sparse_unichain,
    greedy,
    masked,
    n_recurrent_classes,
    sparse_recurrent_classes,
)
from ..result import MAX_ITER, MULTICHAIN, NUMERICAL_ERROR, OPTIMAL, OPTIMAL_INACCURATE, PlanResult
from . import _kernels
from ._options import check_tol_iter
from ._result import fast_result
from .kl_ball import kl_ball_index
from .l1_ball import l1_ball_index

#: Optimistic-policy-iteration steps of the exact finish (L1: finite; KL: converges like Newton).
FINISH_STEPS = 100

#: EVI hands over to the exact finish once its span gap is below this (relative to the
#: scale; or the caller's ``tol`` if larger). A finish step (one ``S x S`` solve and one
#: backup) costs about a sweep and converges like Newton's method, so a coarse hand-over is
#: faster than sweeping to ``tol``: 2-3x fewer backups on ``optplan bench optimistic``. EVI goes
#: on to ``tol`` only when the finish cannot certify its answer.
COARSE_TOL = 1e-2


class _BallRows:
    """The ball pairs of a problem, with their reachable columns precomputed once per solve.

    A maximizing ``q`` over an L1 or KL ball around ``p`` lives on ``supp(p)`` plus one state:
    the best zero-probability one (the L1 ball moves mass to the best state overall, the KL
    ball only to a zero-probability one; Theorem 1 of accelerating-ucb-indices-mdp §4.1). When
    every support is small (UCRL's empirical models: a few observed next states), each sweep
    runs the index kernel on those ``k + 1`` columns instead of all ``S`` and scatters ``q``
    back. Padding slots repeat a support column with probability 0 (value ``<= max`` on the
    support, so no mass lands there except on an exact tie, which the scatter-add folds back
    into the same state).
    """

    def __init__(self, problem):
        P, d = problem.p_hat, problem.radius
        self.ball = (d > 0) & problem.action_mask
        self.all_ball = bool(self.ball.all())
        self.index = l1_ball_index if problem.ball == "l1" else kl_ball_index
        self.lean = problem.ball == "kl" and _kernels.AVAILABLE
        self.p, self.d = P[self.ball], d[self.ball]
        n, S = self.p.shape
        supp = self.p > 0
        n_supp = supp.sum(axis=1)
        k = int(n_supp.max(initial=0))
        self.compact = n > 0 and 2 * (k + 1) <= S
        if not self.compact:
            return
        order = np.argsort(~supp, axis=1, kind="stable")[:, :k]  # support columns first
        real = np.arange(k) < n_supp[:, None]
        self.cols = np.where(real, order, order[:, :1])
        self.pc = np.column_stack(
            [np.where(real, np.take_along_axis(self.p, order, 1), 0.0), np.zeros(n)]
        )
        self.zero = ~supp
        self.has_zero = self.zero.any(axis=1)
        self.flat = np.arange(n)[:, None] * S

    def _gather(self, v: np.ndarray):
        """``(p, v, cols)`` of the index rows at ``v`` (``cols`` None when not compact)."""
        if not self.compact:
            return self.p, np.broadcast_to(v, self.p.shape), None
        best_zero = np.where(self.zero, v, -np.inf).argmax(axis=1)
        cols = np.column_stack([self.cols, np.where(self.has_zero, best_zero, self.cols[:, 0])])
        return self.pc, v[cols], cols

    def __call__(self, v: np.ndarray, statuses: bool = True):
        """``(value, q, status)`` of the ball pairs at ``v`` (``status`` None when not asked
        for and every row was solved by the compiled kernel)."""
        if self.lean and self.compact:
            return self._compiled(v, statuses, with_q=True)
        p, vr, cols = self._gather(v)
        value, q, status = self._index(p, vr, statuses)
        if cols is not None:
            q = self._scatter(q, cols)
        return value, q, status

    def values(self, v: np.ndarray) -> np.ndarray:
        """The ball pairs' ``max_{q in B} q . v`` only, as EVI's sweeps need it (no ``q``, no
        statuses: a row the kernels leave unsolved shows up in the finish, which asks for
        them)."""
        if self.lean and self.compact:
            return self._compiled(v, statuses=False, with_q=False)[0]
        p, vr, _ = self._gather(v)
        return self._index(p, vr, statuses=False)[0]

    def _scatter(self, q, cols):
        n, S = self.p.shape
        q = np.bincount((self.flat + cols).ravel(), weights=q.ravel(), minlength=n * S)
        return q.reshape(n, S)

    def _compiled(self, v, statuses, with_q):
        """Compact KL rows with numba: gather, rows and scatter in compiled calls; the numpy
        kernel on the rows they leave."""
        n, S = self.p.shape
        value = np.empty(n)
        handled, vr, where, q = _kernels.kl_ball_gathered(
            self.pc,
            self.cols,
            self.zero,
            self.has_zero,
            v,
            self.d,
            100,
            value,
            n_states=S if with_q else None,
        )
        if handled.all():
            return value, q, (np.full(n, OPTIMAL, dtype="<U20") if statuses else None)
        rest = np.flatnonzero(~handled)
        res = kl_ball_index(self.pc[rest], vr[rest], self.d[rest], validate=False, kernel="numpy")
        value[rest] = res.value
        if with_q:
            np.add.at(q, (rest[:, None], where[rest]), res.x)  # those rows of q are 0 so far
        status = np.full(n, OPTIMAL, dtype="<U20")
        status[rest] = res.status
        return value, q, status

    def _index(self, p, v, statuses, d=None):
        d = self.d if d is None else d
        if self.lean:  # the compiled KL rows, the numpy reference only on the rows it leaves
            n = p.shape[0]
            value, q, lam = np.empty(n), np.empty(p.shape), np.empty(n)
            handled = _kernels.kl_ball_rows(
                p, v, d, 100, value, q, lam, np.empty(n, dtype=np.int64)
            )
            if handled.all():
                return value, q, (np.full(n, OPTIMAL, dtype="<U20") if statuses else None)
            rest = np.flatnonzero(~handled)
            res = kl_ball_index(p[rest], v[rest], d[rest], validate=False, kernel="numpy")
            value[rest], q[rest] = res.value, res.x
            status = np.full(n, OPTIMAL, dtype="<U20")
            status[rest] = res.status
            return value, q, status
        res = self.index(p, v, d, validate=False)
        return res.value, res.x, res.status


class _SparseBallRows(_BallRows):
    """:class:`_BallRows` of a sparse ``p_hat`` (CSR, rows ``s·A + a``), built from its
    ``indptr`` / ``indices`` without a dense row. The ball rows are grouped into blocks by
    support size (widths up to a power of two), so a few wide rows (a uniform ``p_hat`` row)
    do not pad every row to their width: a block whose width ``k`` has ``2 (k + 1) <= S`` is
    compact (support columns padded with the row's last one, then the best zero-probability
    state, found at each call among the ``k + 1`` best states of ``v``: one of them is outside
    any support of ``k`` states); a wider block holds its rows dense (at most twice their
    stored entries). ``q`` comes back as the entries ``(row, column, value)`` of a CSR kernel,
    padding slots summed into their state."""

    def __init__(self, problem):
        P, d = problem.p_hat, problem.radius
        S, A = problem.n_states, problem.n_actions
        self.n_states, self.n_rows = S, S * A
        self.ball = (d > 0) & problem.action_mask
        self.all_ball = bool(self.ball.all())
        self.index = l1_ball_index if problem.ball == "l1" else kl_ball_index
        self.lean = problem.ball == "kl" and _kernels.AVAILABLE
        self.compact = False  # no dense (n, S) rows: the blocks below instead
        self.rows = np.flatnonzero(self.ball.reshape(-1))  # ascending: the order of P[ball]
        self.d = d.reshape(-1)[self.rows]
        self.state = self.rows // A
        counts = np.diff(P.indptr)
        # the other rows' entries, as they are in every kernel
        other = np.repeat(~self.ball.reshape(-1), counts)
        entry_row = np.repeat(np.arange(S * A), counts)
        self.fixed = (entry_row[other], P.indices[other], P.data[other])
        n_supp = counts[self.rows]
        width = 2 ** np.ceil(np.log2(np.maximum(n_supp, 1))).astype(np.int64)
        self.blocks = []
        for w in np.unique(width):  # loop over support-size classes (at most log2 S + 1)
            ids = np.flatnonzero(width == w)
            k = int(n_supp[ids].max())
            start, cnt = P.indptr[self.rows[ids]], n_supp[ids]
            if 2 * (k + 1) <= S:
                pos = start[:, None] + np.minimum(np.arange(k), cnt[:, None] - 1)
                real = np.arange(k) < cnt[:, None]
                cols = P.indices[pos]  # sorted within a row (canonical CSR), padded with the last
                pc = np.column_stack([np.where(real, P.data[pos], 0.0), np.zeros(ids.size)])
                keys = (np.arange(ids.size)[:, None] * S + cols).ravel()  # non-decreasing
                self.blocks.append(_Block(ids, self.d[ids], k, cols, pc, keys))
            else:
                dense = P[self.rows[ids]].toarray()
                self.blocks.append(_Block(ids, self.d[ids], k, None, dense, None))
        self.top = max((b.k + 1 for b in self.blocks if b.cols is not None), default=0)

    def _block_rows(self, block, v, order, shift=None):
        """``(p, v, cols)`` of a block at ``v`` (``order``: the best states of ``v``, best
        first); ``shift`` (per ball row): values taken at ``v - shift``."""
        if block.cols is None:
            vr = np.broadcast_to(v, block.p.shape)
            if shift is not None:
                vr = v[None, :] - shift[block.ids][:, None]
            return block.p, vr, None
        S = self.n_states
        best = block.cols[:, 0].copy()  # stays only where v is NaN (the kernels say so)
        pending = np.arange(block.ids.size)
        for c in order[: block.k + 1]:  # loop over the k + 1 best states, not over rows
            query = pending * S + c
            pos = np.minimum(np.searchsorted(block.keys, query), block.keys.size - 1)
            member = block.keys[pos] == query
            best[pending[~member]] = c
            pending = pending[member]
            if not pending.size:
                break
        cols = np.column_stack([block.cols, best])
        vr = v[cols]
        if shift is not None:
            vr = vr - shift[block.ids][:, None]
        return block.p, vr, cols

    def _each(self, v, statuses, with_q, shift=None, exact=False):
        """Per block: ``(block, value, q, cols, status)`` at ``v``."""
        order = _best_states(v, self.top) if self.top else None
        for block in self.blocks:
            p, vr, cols = self._block_rows(block, v, order, shift)
            if exact:  # the batched index itself (the span certificate's call)
                res = self.index(p, vr, block.d, validate=False)
                yield block, res.value, None, cols, None
                continue
            value, q, status = self._index(p, vr, statuses or with_q, block.d)
            yield block, value, q, cols, status

    def values(self, v: np.ndarray, shift=None, exact: bool = False) -> np.ndarray:
        value = np.empty(self.rows.size)
        for block, val, _, _, _ in self._each(v, False, False, shift, exact):
            value[block.ids] = val
        return value

    def __call__(self, v: np.ndarray, statuses: bool = True):
        """``(value, kernel, status)``: the ball rows' values and statuses, and the whole
        kernel (ball rows' ``q``, the other rows' ``p_hat``) as a CSR ``(S·A, S)`` matrix."""
        import scipy.sparse as sp

        value = np.empty(self.rows.size)
        status = np.full(self.rows.size, OPTIMAL, dtype="<U20")
        r, c, x = [self.fixed[0]], [self.fixed[1]], [self.fixed[2]]
        for block, val, q, cols, st in self._each(v, True, True):
            value[block.ids] = val
            if st is not None:
                status[block.ids] = st
            rows = self.rows[block.ids]
            if cols is None:  # dense rows: their nonzero entries
                i, j = np.nonzero(q)
                r.append(rows[i]), c.append(j), x.append(q[i, j])
            else:
                r.append(np.repeat(rows, cols.shape[1])), c.append(cols.ravel())
                x.append(q.ravel())
        kernel = sp.csr_matrix(
            (np.concatenate(x), (np.concatenate(r), np.concatenate(c))),
            shape=(self.n_rows, self.n_states),
        )  # duplicates (padding slots) summed
        kernel.eliminate_zeros()
        return value, kernel, status


class _Block(NamedTuple):
    """Ball rows of one support-size class: positions ``ids`` among the ball rows, radii
    ``d``, width ``k``; compact: support columns ``cols`` (``(n, k)``), probabilities ``p``
    (``(n, k + 1)``, the last 0: the best zero-probability state's slot) and the sorted
    ``row * S + column`` keys of ``cols``; dense: ``p`` of shape ``(n, S)``, ``cols`` None."""

    ids: np.ndarray
    d: np.ndarray
    k: int
    cols: np.ndarray | None
    p: np.ndarray
    keys: np.ndarray | None


def _best_states(v: np.ndarray, m: int) -> np.ndarray:
    """The ``m`` states of largest ``v``, best first, ties by index (the order of a stable
    sort of ``-v``, so the first one off a support is the dense path's ``argmax`` over the
    zero-probability states) in ``O(S)``: a partition, then a sort of the ``m`` alone."""
    S = v.size
    if m >= S:
        return np.argsort(-v, kind="stable")
    t = v[np.argpartition(-v, m - 1)[:m]].min()  # the m-th largest value
    above = np.flatnonzero(v > t)  # fewer than m
    above = above[np.argsort(-v[above], kind="stable")]
    return np.concatenate([above, np.flatnonzero(v == t)[: m - above.size]])


def ball_rows(problem) -> _BallRows:
    """The problem's ball rows, for a dense or a sparse ``p_hat``."""
    return _SparseBallRows(problem) if problem.sparse else _BallRows(problem)


def optimistic_backup(
    problem, v: np.ndarray, rows: _BallRows | None = None, statuses: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``sigma[s, a] = max_{q in B} q . v``, the maximizing kernel ``q*[s, a, :]`` and the
    kernels' statuses, over all pairs in one batched call (``rows``: the problem's
    precomputed ball pairs, built here when not given; ``statuses=False``: the statuses may be
    None when every inner solve is known optimal, as in EVI's sweeps). A sparse ``p_hat``
    gives the kernel as a CSR matrix of shape ``(S·A, S)`` (row ``s·A + a``)."""
    rows = ball_rows(problem) if rows is None else rows
    S, A = problem.n_states, problem.n_actions
    if problem.sparse:
        sigma = (problem.p_hat @ v).reshape(S, A)
        if not rows.ball.any():
            return sigma, problem.p_hat, np.full((S, A), OPTIMAL, dtype="<U20")
        inner, kernel, kstat = rows(v, statuses)
        sigma[rows.ball] = inner
        status = np.full((S, A), OPTIMAL, dtype="<U20")
        status[rows.ball] = kstat
        return sigma, kernel, status
    P = problem.p_hat
    sigma = np.einsum("sat,t->sa", P, v)
    kernel = P.copy()
    if not rows.ball.any():
        return sigma, kernel, np.full((S, A), OPTIMAL, dtype="<U20")
    sigma[rows.ball], kernel[rows.ball], inner = rows(v, statuses)
    status = None
    if inner is not None:
        status = np.full((S, A), OPTIMAL, dtype="<U20")
        status[rows.ball] = inner
    return sigma, kernel, status


def optimistic_values(problem, v: np.ndarray, rows: _BallRows) -> np.ndarray:
    """``sigma[s, a] = max_{q in B} q . v`` alone (EVI's sweeps): the plain ``p_hat . v`` only
    on the pairs without a ball."""
    P = problem.p_hat
    if problem.sparse:
        sigma = (P @ v).reshape(rows.ball.shape)
        if rows.ball.any():
            sigma[rows.ball] = rows.values(v)
        return sigma
    if not rows.ball.any():
        return np.einsum("sat,t->sa", P, v)
    sigma = np.empty(rows.ball.shape)
    if not rows.all_ball:
        sigma[~rows.ball] = P[~rows.ball] @ v
    sigma[rows.ball] = rows.values(v)
    return sigma


def solve(problem, tol: float = 1e-6, max_iter: int | None = None) -> PlanResult:
    """Extended value iteration, then the exact finish.

    Parameters
    ----------
    tol : float
        EVI's span rule: ``span(T u - u) <= tol * scale`` (average reward, with the
        aperiodicity transform ``u <- u + (T u - u) / 2``) or ``<= tol * scale (1 - gamma) /
        gamma`` (discounted: the greedy policy is then ``tol * scale``-optimal, Puterman Thm
        6.6.6), ``scale = 1 + max |r + beta|``. EVI first sweeps only to ``max(tol,
        COARSE_TOL)`` and hands over to the finish: evaluate the greedy optimistic policy
        exactly on its optimistic kernel and improve it (optimistic policy iteration) until the
        Bellman residual of the evaluated values is below ``1e-12`` of the scale, at most 100
        steps. That residual, not EVI's tolerance, is what ``optimal`` certifies. Only when the
        finish cannot certify (a multichain optimistic policy, or 100 steps without the fixed
        point) does EVI sweep on to ``tol`` and try again; a multichain optimistic policy then
        gets EVI's gain estimate and the values of EVI's last backup, whose ``span(T h - h)``
        is at most ``tol * scale`` (the gain within half that; status ``optimal``, said in the
        message). Under average reward ``optimal`` always comes with ``span(T h - h) <= tol *
        scale`` at the returned bias (each state's backup taken at ``h - h(s)``, free of the
        bias's round-off); a finish whose answer misses it (a bias of ``1e11`` known only to
        its last digits) is ``optimal_inaccurate``, said in the message. A model that is not
        weakly communicating (:meth:`~optplan.OptimisticPlanning.communication`) is solved
        when its optimistic gain is constant (the balls can move mass out of its closed sets),
        proved by the same certificate; when EVI's ``T u - u`` settles on different values,
        or does not settle within ``max_iter``, the status is ``multichain``.
    max_iter : int, optional
        EVI sweeps (default 2,000); the finish starts from EVI's policy either way, and the
        status is ``max_iter`` only when EVI stopped at the cap and the finish fails too.
    """
    check_tol_iter(tol, max_iter)
    max_iter = 2_000 if max_iter is None else max_iter
    start = time.perf_counter()
    c = problem.r_hat + problem.reward_radius
    why = problem.communication() if problem.criterion == "average" else ""
    status, message, fields, iterations = _evi_and_finish(problem, c, tol, max_iter, why)
    return fast_result(
        f"evi-{problem.ball}",
        start,
        iterations,
        status=status,
        message=message,
        **fields,
    )


def _kernel_trouble(status: np.ndarray, mask: np.ndarray) -> str:
    bad = (status != OPTIMAL) & mask
    if not bad.any():
        return ""
    s, a = map(int, np.argwhere(bad)[0])
    return f"the inner {status[s, a]} at (s, a) = ({s}, {a})"


def _evi_and_finish(problem, c, tol, max_iter, why=""):
    """EVI to the coarse tolerance, the finish; EVI on to ``tol`` and the finish again only if
    the first finish could not certify its answer. ``why``: the reason the model is not weakly
    communicating (average reward), or ``""``: its optimistic gain may still be constant (the
    balls can move mass out of a closed set), which EVI's span rule or the finish then proves;
    when EVI's step settles on different values, the gain differs between states (status
    ``multichain``)."""
    mask, S = problem.action_mask, problem.n_states
    average = problem.criterion == "average"
    gamma = 1.0 if average else problem.discount
    scale = 1.0 + float(np.abs(np.where(mask, c, 0.0)).max())
    rows = ball_rows(problem)
    evi = dict(u=np.zeros(S), sweeps=0, gap=np.inf, why=why)
    targets = [tol] if tol >= COARSE_TOL else [COARSE_TOL, tol]
    for target in targets:
        converged = _sweeps(problem, rows, c, gamma, scale, target, max_iter, evi)
        if evi.get("split"):
            break
        outcome = _finish(problem, rows, c, gamma, scale, converged, evi)
        if outcome is not None:
            return _certified(outcome, problem, rows, c, tol * scale)
        if not converged:  # EVI is at max_iter: sweeping on is not allowed
            break
    return _multichain_estimate(problem, rows, converged, evi)


def _certified(outcome, problem, rows, c, limit):
    """The finish's ``optimal`` under average reward only when its answer satisfies the span
    certificate ``span(T h - h) <= tol * scale`` (then every state's optimal gain lies in
    ``[min, max] (T h - h)``); ``optimal_inaccurate`` when round-off in a huge bias keeps it
    above."""
    status, message, fields, sweeps = outcome
    if status != OPTIMAL or problem.criterion != "average":
        return outcome
    span = span_residual(problem, fields["bias"], rows)
    if span <= limit:
        return outcome
    top = float(np.abs(fields["bias"]).max())
    note = message.split("the exact finish")[0]  # EVI's own note, if any
    if 8 * np.finfo(float).eps * top > limit:  # the rounding of the bias alone exceeds it
        why = (
            f"the exact finish's bias reaches {top:.3g} (states that leave with probabilities "
            f"of order {1.0 / top:.0e}), so its Bellman residual is known only to its rounding"
        )
    else:
        why = "the exact finish's answer misses the span certificate"
    message = note + (
        f"{why}: span(T h - h) = {span:.3g} at the answer, above tol * scale = {limit:.3g}; "
        "the gain is that of the finish's policy, the bias is inaccurate"
    )
    return OPTIMAL_INACCURATE, message, fields, sweeps


def span_residual(problem, h: np.ndarray, rows: _BallRows | None = None) -> float:
    """``span(T h - h)`` of the optimistic average-reward operator, each state's backup taken
    at ``h - h(s)`` (both balls' maxima shift with ``v``): a bias of ``1e11`` (a state
    escaping with probability ``1e-12``) then costs no ``eps * 1e11`` of round-off in ``q . h
    - h(s)``, and the span is the certificate's, not the rounding's."""
    rows = ball_rows(problem) if rows is None else rows
    mask = problem.action_mask
    S, A = problem.n_states, problem.n_actions
    if problem.sparse:
        P = problem.p_hat
        entry_row = np.repeat(np.arange(S * A), np.diff(P.indptr))
        terms = P.data * (h[P.indices] - h[entry_row // A])
        sigma = np.bincount(entry_row, weights=terms, minlength=S * A).reshape(S, A)
        if rows.ball.any():
            sigma[rows.ball] = rows.values(h, shift=h[rows.state], exact=True)
    else:
        P = problem.p_hat
        own = np.broadcast_to(h[:, None], (S, A))
        sigma = np.einsum("sat,sat->sa", P, h[None, None, :] - own[..., None])
        if rows.ball.any():
            shifted = h[None, :] - own[rows.ball][:, None]
            sigma[rows.ball] = rows.index(rows.p, shifted, rows.d, validate=False).value
    c = problem.r_hat + problem.reward_radius
    return float(np.ptp(masked(c + sigma, mask).max(axis=1)))


def _sweeps(problem, rows, c, gamma, scale, target, max_iter, evi) -> bool:
    """EVI sweeps from ``evi["u"]`` until the span rule holds at ``target`` (True) or the
    sweep count reaches ``max_iter`` (False); updates ``evi`` in place."""
    mask, average = problem.action_mask, problem.criterion == "average"
    u, sweeps, gap = evi["u"], evi["sweeps"], evi["gap"]
    limit = target * scale if average else target * (1 - gamma) / max(gamma, 1e-300) * scale
    converged = gamma == 0 or gap <= limit
    previous = None
    while sweeps < max_iter and not converged:
        sweeps += 1
        Q = masked(c + gamma * optimistic_values(problem, u, rows), mask)
        step = Q.max(axis=1) - u
        gap = float(np.ptp(step))
        converged = gap <= limit  # span rule; discounted: Puterman Thm 6.6.6
        settle = evi["why"] and sweeps > 2 * problem.n_states + 10
        if settle and not converged and _settled(step, previous, scale):
            evi["split"] = True  # T u - u tends to the gain vector, and it is not constant
            evi.update(Q=Q, u_Q=u, step=step)
            break
        previous = step
        evi.update(Q=Q, u_Q=u, step=step)  # the kernel at u_Q: built once, when it is needed
        if average:
            u = u + 0.5 * step  # aperiodicity transform: converges on periodic chains too
            u -= u[0]
        else:
            u = u + step
    if "Q" not in evi:  # no sweep ran (gamma = 0, or max_iter reached before): one backup
        Q = masked(c + gamma * optimistic_values(problem, u, rows), mask)
        evi.update(Q=Q, u_Q=u, step=Q.max(axis=1) - u)
    evi.update(u=u, sweeps=sweeps, gap=gap)
    return converged


def _settled(step, previous, scale) -> bool:
    """EVI's step ``T u - u`` no longer moves (to ``1e-11`` of the scale over a sweep): with the
    aperiodicity transform it tends to the optimal gain vector, so a span that stays above the
    tolerance then shows a gain that differs between states."""
    return previous is not None and float(np.abs(step - previous).max()) <= 1e-11 * scale


def _evi_kernel(problem, rows, evi) -> np.ndarray:
    """The maximizing kernel of EVI's last backup (at ``evi["u_Q"]``)."""
    return optimistic_backup(problem, evi["u_Q"], rows, statuses=False)[1]


def _finish(problem, rows, c, gamma, scale, converged, evi):
    """Optimistic policy iteration from EVI's greedy policy: ``(status, message, fields,
    sweeps)``, or None when it cannot certify an answer here (a multichain optimistic policy
    under average reward, or no fixed point within ``FINISH_STEPS``) and EVI should go on."""
    mask, S = problem.action_mask, problem.n_states
    average = problem.criterion == "average"
    sweeps, gap = evi["sweeps"], evi["gap"]
    evi.pop("finish", None)
    note = "" if converged else f"EVI stopped at {sweeps} sweeps (gap {gap:.3g}); "
    Q, kernel = evi["Q"], _evi_kernel(problem, rows, evi)
    policy, idx = greedy(Q), np.arange(S)
    u = evi["u"]
    fields = _fields(problem, float(np.mean(u)) if not average else np.nan, u, Q, kernel)
    for step_no in range(1, FINISH_STEPS + 1):
        try:
            evaluated = _evaluate(problem, kernel, policy, c[idx, policy], gamma, scale)
        except EvaluationError as exc:
            return NUMERICAL_ERROR, str(exc), fields, sweeps
        if evaluated is None:
            return None
        g, v = evaluated
        sigma, kernel, kstat = optimistic_backup(problem, v, rows)
        Q = masked(c + gamma * sigma, mask)
        fields = _fields(problem, g, v, Q, kernel)
        if trouble := _kernel_trouble(kstat, mask):
            return NUMERICAL_ERROR, note + trouble, fields, sweeps
        residual = float(np.max(Q.max(axis=1) - v - (g if average else 0.0)))
        # the fixed point to 1e-12 of the scale, or to the rounding of the values when they
        # are that large: a state escaping with probability 1e-12 has a bias of -1e12, whose
        # Bellman residual cannot go below its last digit, 1.2e-4
        rounding = 8 * np.finfo(float).eps * float(np.abs(v).max())
        if residual <= 1e-12 * (scale if average else 1.0 + np.abs(v).max()) + rounding:
            fields["info"]["finish_steps"] = step_no
            message = note + "the exact finish reached the fixed point" if note else ""
            return OPTIMAL, message, fields, sweeps
        policy = greedy(Q, policy, 1e-14)
    evi["finish"] = (fields, residual, note)
    return None


def _evaluate(problem, kernel, policy, r_pi, gamma, scale):
    """``(gain, values)`` of ``policy`` on its optimistic ``kernel`` (gain NaN when
    discounted), or None when its chain has several recurrent classes (average reward). A
    sparse kernel's chain is a CSR row gather, evaluated sparse above
    :data:`~optplan.dp.SPARSE_DIRECT_MAX_STATES` states (up to it, dense: ``S x S`` is
    small, and the evaluation is the dense kernel's)."""
    S, A = problem.n_states, problem.n_actions
    idx = np.arange(S)
    if problem.sparse:
        K = kernel[idx * A + policy]
        if S <= SPARSE_DIRECT_MAX_STATES:
            K = K.toarray()
        elif problem.criterion == "average":
            if sparse_recurrent_classes(K) > 1:
                return None
            ev = evaluate_sparse_unichain(K, r_pi, 1e-13 * scale)
            return ev.gain, ev.bias - ev.bias[0]  # h[0] = 0, as the dense evaluation's
        else:
            return np.nan, evaluate_discounted(K, r_pi, gamma)
    else:
        K = kernel[idx, policy]
    if problem.criterion == "average":
        if n_recurrent_classes(K) > 1:
            return None
        return evaluate_average(K, r_pi)
    return np.nan, evaluate_discounted(K, r_pi, gamma)


def _multichain_estimate(problem, rows, converged, evi):
    """The last resort after EVI ran to ``tol``: a multichain optimistic policy (average
    reward; the gain is EVI's estimate, within its span gap) or a finish that did not reach
    the fixed point."""
    sweeps, gap, note = (
        evi["sweeps"],
        evi["gap"],
        "" if converged else (f"EVI stopped at {evi['sweeps']} sweeps (gap {evi['gap']:.3g}); "),
    )
    step = evi["step"]  # at u_Q, every state's optimal gain lies in [min step, max step]
    if evi["why"] and not converged:
        verdict = (
            "the optimistic gain differs between states"
            if evi.get("split")
            else "the optimistic gain is not shown constant"
        )
        message = (
            f"{evi['why']}, and {verdict}: after {sweeps} EVI sweeps T u - u spans "
            f"[{step.min():.6g}, {step.max():.6g}]"
        )
        return MULTICHAIN, message, {"value": np.nan}, sweeps
    if "finish" in evi:
        fields, residual, note = evi["finish"]
        message = (
            f"{note}the exact finish stopped after {FINISH_STEPS} steps at residual {residual:.3g}"
        )
        return (MAX_ITER if note else OPTIMAL_INACCURATE), message, fields, sweeps
    message = (
        f"{note}the optimistic policy's chain is multichain, so the gain is EVI's estimate "
        f"(within {gap / 2:.2g}; span(T h - h) = {gap:.2g} at the bias)"
    )
    fields = _fields(
        problem,
        float((step.max() + step.min()) / 2),
        evi["u_Q"],
        evi["Q"],
        _evi_kernel(problem, rows, evi),
    )
    return (OPTIMAL if converged else MAX_ITER), message, fields, sweeps


def _fields(problem, gain, v, Q, kernel) -> dict:
    if problem.criterion == "discounted":
        return dict(
            value=float(np.mean(v)), x=v, values=v, q=Q, policy=greedy(Q), info={"kernel": kernel}
        )
    return _fields_a(gain, v, Q, kernel)


def _fields_a(gain, h, Q, kernel) -> dict:
    h = h - h[0]
    return dict(
        value=gain,
        x=h,
        values=h,
        gain=gain,
        bias=h,
        q=Q,
        policy=greedy(Q),
        info={"kernel": kernel},
    )
