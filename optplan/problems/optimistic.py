r"""Optimistic planning over confidence sets (UCRL2 / KL-UCRL): the optimistic MDP that extended
value iteration approximates, as one convex program."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    check_choice,
    check_distribution,
    check_real,
    first_bad,
    index_str,
)
from .._model_checks import _sparse_transitions, is_sparse
from ..dp import closed_classes, masked
from ..mdp import check_action_mask
from ..result import OPTIMAL, PlanResult
from . import stems
from ._compare import answer_errors, diff, diff_up_to_constant
from .base import EstimatedKernel, Problem, store_readonly

BALLS = ("l1", "kl")
OPTIMISTIC_CRITERIA = ("discounted", "average")
#: The largest dense ``(S, A, S)`` copy (entries; 4e6 is 32 MB: S = 1,000 with A = 4) that
#: :meth:`OptimisticPlanning.dense_p_hat` makes of a sparse ``p_hat``: the conic path needs
#: every column of a ball pair, the fast path never densifies.
DENSE_P_HAT_MAX_ENTRIES = 4_000_000


@dataclass(frozen=True, eq=False)
class OptimisticPlanning(EstimatedKernel, Problem):
    r"""The optimistic MDP over L1 or KL confidence sets around ``p_hat``:

    .. math:: V(s) = \max_a \Big[\hat r(s,a) + \beta(s,a)
              + \gamma \max_{q \in B(\hat p_{sa}, d_{sa})} q \cdot V\Big]

    (discounted; average reward: ``g + h(s) = max_a [r + beta + max_q q . h]``), with
    ``B`` the L1 ball ``||q - p||_1 <= d`` (UCRL2) or the KL ball ``KL(p||q) <= d``
    (KL-UCRL) intersected with the simplex, and ``beta`` the reward radius.

    The inner maximum is convex in ``V`` and equals its dual minimum,

    - L1: ``p.V + min { w.p + kappa d : w >= 0, |V - mu 1 + w| <= kappa }`` (an LP);
    - KL: ``min_{lam >= 0, eta >= max V} eta + lam d - lam + sum_x p_x rel_entr(lam, eta - V_x)``
      (exponential cones),

    so the optimistic MDP is one convex program: ``min w.V s.t. V(s) >= r + beta + gamma
    [dual](V)`` for every admissible pair (discounted) or ``min g s.t. g + h(s) >= r + beta +
    [dual](h)`` (average). Its least feasible point is the fixed point extended value iteration
    approximates. Fast path: EVI with the batched index kernels, then an exact finish.

    Parameters
    ----------
    p_hat : array (S, A, S), or scipy.sparse matrix (S·A, S)
        Empirical transitions; rows of admissible pairs are distributions (zeros allowed),
        rows of masked-out pairs anything finite and non-negative. A ``scipy.sparse`` matrix
        (any format; held as a canonical, read-only CSR copy) has row ``s·A + a`` =
        ``p_hat[s, a, :]``, as a sparse :class:`~optplan.TabularMDP`'s ``P``; its errors name
        ``(s, a)``, ``s'`` and the value. The fast path then runs sparse throughout (each
        ball row on its support plus the one state outside it the ball may move mass to);
        the conic path makes a dense copy, refused above :data:`DENSE_P_HAT_MAX_ENTRIES`.
    r_hat : array (S, A)
        Empirical mean rewards.
    radius : float or array (S, A)
        Ball radius per pair, ``>= 0`` (0: the pair's transitions are known).
    reward_radius : float or array (S, A), optional
        Reward bonus ``beta >= 0`` (default 0).
    ball : {"l1", "kl"}
    criterion : {"discounted", "average"}
    discount : float in [0, 1), required for ``"discounted"``
    action_mask : bool array (S, A), optional

    Notes
    -----
    Results: ``value`` (``initial . V`` with uniform initial weights, discounted; the gain,
    average); ``x = values`` (``V``, or the bias ``h`` with ``h[0] = 0``); ``q``; ``policy``;
    ``gain``/``bias`` (average); ``info["kernel"]`` the optimistic ``q*(. | s, a)`` (S, A, S)
    at the answer's values; for a sparse ``p_hat``, the fast path's kernel is a CSR matrix of
    shape ``(S·A, S)`` (row ``s·A + a``; the support of ``p_hat``'s row plus at most one
    state), the conic path's the dense array (NaN where the program leaves it free).
    """

    p_hat: np.ndarray
    r_hat: np.ndarray
    radius: np.ndarray
    reward_radius: np.ndarray | float = 0.0
    ball: str = "l1"
    criterion: str = "discounted"
    discount: float | None = None
    action_mask: np.ndarray | None = None
    stem = "optimistic"
    sizes_from = "r_hat"  # p_hat may be the (S·A, S) matrix

    def __post_init__(self):
        check_choice("ball", self.ball, BALLS)
        check_choice("criterion", self.criterion, OPTIMISTIC_CRITERIA)
        if is_sparse(self.p_hat):
            R = as_array("r_hat", self.r_hat, 2)
            S, A = R.shape
            if S == 0 or A == 0:
                raise OptplanError(
                    f"r_hat needs at least one state and one action, got shape {R.shape}"
                )
            mask = check_action_mask(self.action_mask, (S, A))
            P = _sparse_transitions(
                self.p_hat,
                S,
                A,
                mask,
                False,
                name="p_hat",
                sizes_from="r_hat",
                offer_normalize=False,
            )
        else:
            P = as_array("p_hat", self.p_hat, 3)
            S, A, S2 = P.shape
            if S2 != S:
                raise OptplanError(f"p_hat must have shape (S, A, S), got {P.shape}")
            if S == 0 or A == 0:
                raise OptplanError(
                    f"p_hat needs at least one state and one action, got shape {P.shape}"
                )
            R = as_array("r_hat", self.r_hat, 2)
            if R.shape != (S, A):
                raise OptplanError(f"r_hat has shape {R.shape}, expected {(S, A)}")
            mask = check_action_mask(self.action_mask, (S, A))
            check_distribution("p_hat", P, rows=mask)
        radius = _per_pair("radius", self.radius, (S, A))
        beta = _per_pair("reward_radius", self.reward_radius, (S, A))
        if self.criterion == "discounted":
            if self.discount is None:
                raise OptplanError("discount is required for criterion='discounted', got None")
            gamma = check_real("discount", self.discount, 0.0, 1.0, high_open=True)
        else:
            gamma = None if self.discount is None else check_real("discount", self.discount, 0, 1)
        if is_sparse(P):  # validated: its arrays are read-only already
            object.__setattr__(self, "p_hat", P)
            store_readonly(self, r_hat=R, radius=radius, reward_radius=beta, action_mask=mask)
        else:
            store_readonly(
                self, p_hat=P, r_hat=R, radius=radius, reward_radius=beta, action_mask=mask
            )
        object.__setattr__(self, "discount", gamma)

    @property
    def sparse(self) -> bool:
        """Whether ``p_hat`` is held sparse: a CSR matrix of shape ``(S·A, S)``, row ``s·A +
        a``."""
        return is_sparse(self.p_hat)

    @property
    def p_rows(self):
        """``p_hat`` as the ``(S·A, S)`` matrix of rows ``s·A + a``, in its own format (a view
        of the dense array, or the CSR matrix)."""
        if self.sparse:
            return self.p_hat
        S, A = self.r_hat.shape
        return self.p_hat.reshape(S * A, S)

    def dense_p_hat(self, max_entries: int | None = None) -> np.ndarray:
        """``p_hat`` as an ``(S, A, S)`` array: itself when dense, a read-only copy when sparse,
        refused (naming the size) when that copy would hold more than ``max_entries`` numbers
        (default :data:`DENSE_P_HAT_MAX_ENTRIES`)."""
        if not self.sparse:
            return self.p_hat
        S, A = self.r_hat.shape
        limit = DENSE_P_HAT_MAX_ENTRIES if max_entries is None else max_entries
        if S * A * S > limit:
            raise OptplanError(
                f"a dense p_hat of this sparse problem (S={S}, A={A}) would hold S*A*S = "
                f"{S * A * S:,} entries ({S * A * S * 8 / 2**20:.3g} MiB), above the "
                f"{limit:,} this computation allows: it needs every column of p_hat (a ball "
                "may move mass to any state); method='fast' runs sparse"
            )
        out = self.p_hat.toarray().reshape(S, A, S)
        out.setflags(write=False)
        return out

    sqrt_tol_quantities = frozenset({"kernel"})
    #: a user's bias (average reward) passes when its residual in the optimality equation
    #: proves it right (:meth:`bias_residual`)
    answer_certified_by = {"x": ("x_alt",)}

    def communication(self) -> str:
        """Why the optimistic MDP is not weakly communicating, or ``""`` when it is.

        A pair with ``radius > 0`` can reach every state (both balls may move mass anywhere);
        one with ``radius = 0`` reaches ``supp p_hat``. The model is weakly communicating iff
        the union graph of the admissible pairs has exactly one closed strongly connected
        class ``C`` and no policy can keep a nonempty set of states outside ``C`` closed (the
        greatest such set, found by peeling off states none of whose admissible pairs has a
        kernel in its ball that stays in the set, is empty). Otherwise some policy has a
        recurrent class of its own and the optimal gain may depend on the start. Both paths
        still solve such a model when its optimistic gain is constant (the balls can move mass
        out of its closed sets), proved by the answer's Bellman residual; otherwise their
        status is ``multichain``. A sparse ``p_hat`` is read as its support graph
        (``scipy.sparse.csgraph``; the ball pairs' edges to every state through one hub node)
        and its peeling as sparse mat-vecs: no dense ``S x S`` array.
        """
        mask, d = self.action_mask, self.radius
        anywhere = ((d > 0) & mask).any(axis=1)
        if anywhere.all():  # every state has a ball pair: one class, nothing can stay outside
            return ""
        if self.sparse:
            n_closed, labels, closed = _support_classes(self.p_hat, mask, anywhere)
        else:
            reach = ((self.p_hat > 0) & mask[..., None]).any(axis=1) | anywhere[:, None]
            n_closed, labels, closed = closed_classes(reach.astype(float))
        if n_closed != 1:
            return (
                f"the optimistic model has {n_closed} closed classes of states (no action of "
                "either can leave it): it is multichain under every policy"
            )
        outside = labels != int(np.flatnonzero(closed)[0])
        keep = outside.copy()
        if self.sparse:  # the admissible rows, and their supports as 0/1 entries (KL)
            pairs = np.flatnonzero(mask.reshape(-1))
            rows, s_pair, d_pair = self.p_hat[pairs], pairs // self.n_actions, d.reshape(-1)[pairs]
            if self.ball == "kl":
                rows.data = np.ones_like(rows.data)
        while True:  # loop over peeling rounds (at most S)
            # a pair can keep its state inside `keep` iff some q in its ball lives there: the
            # L1 ball moves up to d/2 of mass; the KL ball keeps supp p_hat
            if self.sparse:
                out = rows @ (~keep).astype(float)  # mass (L1) or support (KL) outside `keep`
                stays = out <= d_pair / 2 if self.ball == "l1" else out == 0
                inside = np.zeros(self.n_states, dtype=bool)
                inside[s_pair[stays]] = True
                new = keep & inside
            else:
                leaving = np.where(keep[None, None, :], 0.0, self.p_hat)
                if self.ball == "l1":
                    inside = mask & (leaving.sum(axis=2) <= d / 2)
                else:
                    inside = mask & ~(leaving > 0).any(axis=2)
                new = keep & inside.any(axis=1)
            if (new == keep).all():
                break
            keep = new
        if keep.any():
            states = np.flatnonzero(keep)[:5].tolist()
            return (
                f"a policy can keep states {states} closed outside the main class: the "
                "optimistic model is not weakly communicating"
            )
        return ""

    def policy_values(self, policy: np.ndarray) -> PlanResult:
        """The optimistic values of a deterministic ``policy``: this problem with only the
        policy's actions admissible (the inner maximum still chooses the kernel)."""
        mask = np.zeros_like(self.action_mask)
        mask[np.arange(self.n_states), policy] = True
        return replace(self, action_mask=mask).solve(method="fast")

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Value (gain); values (bias up to a constant, on the states ``b``'s occupancy
        carries, where the program determines it); each policy's own optimistic value; the
        optimistic kernel on the pairs where ``b`` determines it and the values have no
        near-ties (then ``q*`` is unique)."""
        out = {"value": diff(a.value, b.value)}
        average = self.criterion == "average"
        if not average:
            out["x"] = diff(a.values, b.values)
        else:
            out["x"] = diff_up_to_constant(a.bias, b.bias)
        policies = [r.policy for r in (a, b) if r.policy is not None and (r.policy >= 0).all()]
        if len(policies) == 2:
            own = [self.policy_values(pi) for pi in policies]
            if all(r.status == OPTIMAL for r in own):
                out["policy_value"] = diff(own[0].value, own[1].value)
        ka, kb = a.info.get("kernel"), b.info.get("kernel")
        if ka is not None and kb is not None:
            v = np.sort(np.asarray(b.values))
            gaps = np.diff(v)
            distinct = gaps[gaps > 0]
            scale = 1.0 + float(np.abs(v).max())
            if distinct.size == gaps.size and (distinct.size == 0 or distinct.min() > 1e-6 * scale):
                if is_sparse(ka) and is_sparse(kb):  # two fast answers: every row determined
                    gap = abs(ka - kb)
                    out["kernel"] = (float(gap.max()) if gap.nnz else 0.0, float(abs(kb).max()))
                else:  # a dense kernel exists at this size: the other one densified
                    ka, kb = (self._kernel_array(k) for k in (ka, kb))
                    known = ~np.isnan(kb[..., 0]) & ~np.isnan(ka[..., 0])
                    if known.any():
                        out["kernel"] = diff(ka[known], kb[known])
        return out

    def _kernel_array(self, kernel) -> np.ndarray:
        """A kernel as an ``(S, A, S)`` array (a CSR one of rows ``s·A + a`` densified)."""
        if not is_sparse(kernel):
            return np.asarray(kernel)
        S, A = self.r_hat.shape
        return kernel.toarray().reshape(S, A, S)

    def answer_x(self, result: PlanResult):
        return result.bias if self.criterion == "average" else result.values

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """Value and ``V`` (discounted), or the gain and the bias up to a constant, certified
        by :meth:`bias_residual` (average)."""
        average = self.criterion == "average"
        out = answer_errors(self, answer, reference, up_to_constant=average)
        if answer.x is not None and average:
            out |= self.bias_residual(answer.x, reference.value)
        return out

    def bias_residual(self, h, gain: float) -> dict[str, tuple[float, float]]:
        """``{"x_alt": (residual, scale)}``: the residual of a bias ``h`` in the optimistic
        optimality equation ``g + h(s) = max_a r(s, a) + beta(s, a) + max_{q in B(s, a)} q .
        h`` at the gain ``g``, on the scale of ``h``; empty for an ``h`` of another shape or
        not finite. With ``h`` unique up to a constant (a unichain optimistic MDP), a small
        residual proves it right where a solver's bias is not (a state escaping with
        probability 1e-12 has a bias of -1e12, and Clarabel's, reported optimal, was off by
        2e11). The inner maximum is the fast path's index kernel (reached through the stem
        table, as :meth:`solve` reaches it), itself verified against the conic index
        problems."""
        h = np.asarray(h, dtype=float)
        if h.shape != (self.n_states,) or not np.isfinite(h).all():
            return {}
        backup = stems.fast_module(self.stem).optimistic_backup
        sigma, _, _ = backup(self, h, statuses=False)
        Q = masked(self.r_hat + self.reward_radius + sigma, self.action_mask)
        residual = float(np.abs(Q.max(axis=1) - h - gain).max())
        return {"x_alt": (residual, float(np.abs(h).max()) + abs(gain))}


def _support_classes(P, mask: np.ndarray, anywhere: np.ndarray):
    """:func:`optplan.dp.closed_classes` of the optimistic model's union graph from a sparse
    ``p_hat`` (CSR, rows ``s·A + a``) without a dense ``S x S`` graph: ``s -> t`` for ``t`` in
    the support of an admissible pair of ``s``, and ``s -> every state`` where ``anywhere[s]``
    (a ball pair), the latter through one extra hub node (``s -> hub -> t``: the same
    reachability with ``S`` edges instead of ``S^2``). The hub joins the component of the
    ball states (it reaches them and they reach it), so the classes and which are closed are
    the union graph's. Returns ``(count, labels[s], closed[label])``."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    S, A = mask.shape
    row = np.repeat(np.arange(S * A), np.diff(P.indptr))
    keep = mask.reshape(-1)[row]
    src, dst = row[keep] // A, P.indices[keep]
    hub = np.flatnonzero(anywhere)
    n = S + 1 if hub.size else S
    if hub.size:
        src = np.concatenate([src, hub, np.full(S, S)])
        dst = np.concatenate([dst, np.full(hub.size, S), np.arange(S)])
    graph = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    n_comp, labels = connected_components(graph, directed=True, connection="strong")
    leaving = labels[src] != labels[dst]
    closed = np.ones(n_comp, dtype=bool)
    closed[labels[src[leaving]]] = False
    return int(closed.sum()), labels[:S], closed


def _per_pair(name: str, value, shape) -> np.ndarray:
    arr = as_array(name, value, (0, 2))
    if arr.ndim == 2 and arr.shape != shape:
        raise OptplanError(f"{name} has shape {arr.shape}, expected {shape} or a scalar")
    arr = np.broadcast_to(arr, shape).copy()
    if (arr < 0).any():
        idx = first_bad(arr < 0)
        raise OptplanError(
            f"{name} must be >= 0, got {float(arr[idx])!r} at (s, a) = {index_str(idx)}"
        )
    return arr
