r"""The Burnetas–Katehakis regret lower bound ``C(P)`` of an ergodic MDP with known rewards
(accelerating-ucb-indices-mdp §2.2; Burnetas & Katehakis 1997).

Every uniformly fast policy has ``liminf_T Regret(T) / ln T >= C(P)`` with

.. math:: C(P) = \sum_x \sum_{a \notin O(x, P)} \frac{\Delta(x, a)}{K_{x,a}(P)},

``Delta(x, a) = L*(x) - r(x, a) - p_x^a . v`` the action gap under the optimal bias ``v`` and
``K_{x,a}(P) = inf {KL(p_x^a || q) : r(x, a) + q . v > L*(x)}`` the KL-minimization rate of
MDP-DMED (:class:`~optplan.problems.kl_inf.KLInfRate` with target ``L*(x) - r(x, a)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._checks import OptplanError, OptplanTypeError, check_positive
from ..mdp import TabularMDP
from ..result import OPTIMAL, OPTIMAL_INACCURATE, SOLUTION_PRESENT, PlanResult
from ._compare import diff, diff_up_to_constant, reward_scale
from .base import Problem

__all__ = ["RegretLowerBound", "not_ergodic", "classify_pairs", "bound_fields", "worst_status"]

#: The pair classes of :func:`classify_pairs`.
OPTIMAL_PAIR, CRITICAL_PAIR, NEVER_PAIR = 0, 1, 2


@dataclass(frozen=True, eq=False)
class RegretLowerBound(Problem):
    r"""The regret lower bound ``C(P)`` of an ergodic MDP whose mean rewards ``R`` are known
    and whose transitions are learned.

    With ``v`` the bias of the optimal policy (average reward), ``L*(x) = g* + v_x`` and
    ``Delta(x, a) = L*(x) - r(x, a) - p_x^a . v``:

    - a pair with ``Delta <= tie_tol * scale`` is optimal (``a in O(x)``) and adds nothing
      (``scale = max |R| + span(v)``, so the test is free of the reward scale and of ``v``'s
      additive constant);
    - a sub-optimal pair whose target ``rho = L*(x) - r(x, a)`` is at least ``max_y v_y`` can
      never become optimal (no ``q`` in the simplex has ``r + q . v > L*(x)``): ``K = +inf``,
      it adds nothing;
    - every other sub-optimal pair (*critical*) adds ``Delta / K`` with
      ``K = D(p_x^a, v, rho)`` (:class:`~optplan.problems.kl_inf.KLInfRate`; ``q`` may put
      mass outside the support of ``p_x^a``).

    ``C(P) ln T`` is the regret every asymptotically optimal agent approaches; a ratio
    ``Regret(T) / (C(P) ln T)`` near 1 at large ``T`` is what such an agent shows. Near a tie
    ``K ~ Delta^2 / (2 Var)``, so a contribution grows like ``1 / Delta``: C(P) jumps from a
    large number to 0 as a gap closes, and ``tie_tol`` says where that happens.

    Fast path: Howard policy iteration for ``v`` and the gaps
    (:class:`~optplan.problems.average_reward.AverageRewardPlanning`), then the batched
    KL-minimization rate of all critical pairs in one call. Conic path: the average-reward LP
    for ``v`` and the gaps, then one exponential-cone program per critical pair.

    Results: ``value = C(P)``; ``x = contributions[s, a]`` (``Delta / K``, 0 off the critical
    pairs); ``multiplier[s, a]`` = ``dK / d rho`` of each critical pair (0 elsewhere);
    ``gain``, ``bias``, ``q``, ``policy``, ``occupancy`` of the planning step;
    ``info["gaps"]``, ``info["rates"]`` (``K``: NaN on optimal pairs, ``+inf`` on pairs that
    can never become optimal), ``info["contributions"]``, ``info["targets"]`` (``rho``),
    ``info["critical"]`` (bool) and ``info["classes"]`` (0 optimal, 1 critical, 2 never).

    Parameters
    ----------
    mdp : TabularMDP
        Ergodic (every deterministic policy's chain irreducible, the setting of Burnetas &
        Katehakis 1997), every action admissible. Otherwise :class:`OptplanError` says why
        C(P) is not defined: the bias of the optimal policy, on which every gap and rate
        depends, is then not determined by the model alone, and the lower bound's
        change-of-measure argument needs every pair sampled.
    tie_tol : float in [0, 1), default 1e-7
        Relative tolerance of the optimal-action test (the conic path's bias is accurate to
        about 1e-9 relative: gaps within ``tie_tol`` are ties on both paths alike).
    """

    mdp: TabularMDP
    tie_tol: float = 1e-7
    stem = "regret_lower_bound"
    #: The rates' multipliers ``dK/drho`` are curvatures of the conic answers' duals.
    sqrt_tol_quantities = frozenset({"multiplier"})

    def __post_init__(self):
        if not isinstance(self.mdp, TabularMDP):
            raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(self.mdp).__name__}")
        # its paths are dense: a sparse model's dense copy (refused, naming the size, when large)
        object.__setattr__(self, "mdp", self.mdp.to_dense())
        tol = check_positive("tie_tol", self.tie_tol, allow_zero=True)
        if not tol < 1.0:
            raise OptplanError(f"tie_tol must lie in [0, 1), got {self.tie_tol!r}")
        object.__setattr__(self, "tie_tol", float(tol))
        mask = self.mdp.action_mask
        if not mask.all():
            s, a = np.argwhere(~mask)[0]
            raise OptplanError(
                f"RegretLowerBound: C(P) is defined for models whose every action is "
                f"admissible (the setting of Burnetas & Katehakis, where a learner samples "
                f"every pair), but action_mask excludes {int((~mask).sum())} pair(s), e.g. "
                f"(s, a) = ({s}, {a}): remove those actions from the model"
            )
        why = not_ergodic(self.mdp.P)
        if why is not None:
            raise OptplanError(f"RegretLowerBound: C(P) is not defined: {why}")

    # -- the comparison rule -------------------------------------------------------------

    def scale(self, bias: np.ndarray) -> float:
        """``max |R| + span(bias)``: the size of the action values, free of ``bias``'s constant
        (1 when both are 0)."""
        s = reward_scale(self.mdp.R) + float(np.ptp(bias))
        return s if s > 0 else 1.0

    def sensitivity(self, r: PlanResult) -> np.ndarray:
        """Per pair, how much ``Delta / K`` moves per relative error of the planning numbers:
        ``c (1 + sigma / Delta + 3 lam sigma / K)`` on the critical pairs (0 elsewhere), with
        ``sigma`` = :meth:`scale` and ``lam = dK/drho``. An error ``eps sigma`` in the bias
        moves ``Delta`` by about that much and each target and value of ``K``'s program by as
        much again, so ``K`` by ``2 lam eps sigma`` plus its own gap error; the sum of this
        array is the scale C(P) itself is compared at."""
        info = r.info
        crit = info["critical"]
        sigma = self.scale(r.bias)
        out = np.zeros(crit.shape)
        c, gap, k = r.x[crit], info["gaps"][crit], info["rates"][crit]
        lam = np.asarray(r.multiplier)[crit]
        out[crit] = c * (1.0 + sigma / gap + 3.0 * lam * sigma / k)
        return out

    def compare(self, a: PlanResult, b: PlanResult) -> dict[str, tuple[float, float]]:
        """Gain and bias (on the action-value scale), gaps, each pair's class (counted
        mismatches, which must be 0), the rates and contributions of the pairs critical on
        both (each relative to its own conditioning, :meth:`sensitivity`), the multipliers,
        and C(P) at the summed conditioning."""
        sigma = self.scale(b.bias)
        ia, ib = a.info, b.info
        both = ia["critical"] & ib["critical"]
        weight = self.sensitivity(b)
        lam_b = np.asarray(b.multiplier)
        k_scale = ib["rates"][both] + 3.0 * lam_b[both] * sigma
        out = {
            "value": (abs(float(a.value) - float(b.value)), float(b.value + weight.sum())),
            "gain": (abs(float(a.gain) - float(b.gain)), sigma),
            "bias": (diff_up_to_constant(a.bias, b.bias)[0], sigma),
            "gaps": (diff(ia["gaps"], ib["gaps"])[0], sigma),
            "classes": (float(np.sum(ia["classes"] != ib["classes"])), 1.0),
            "rates": (_max_ratio(np.abs(ia["rates"][both] - ib["rates"][both]), k_scale), 1.0),
            "x": (_max_ratio(np.abs(a.x[both] - b.x[both]), weight[both]), 1.0),
            "multiplier": diff(np.asarray(a.multiplier)[both], lam_b[both]),
        }
        return out

    def compare_answer(self, answer, reference: PlanResult) -> dict[str, tuple[float, float]]:
        """C(P) at its conditioning (:meth:`sensitivity`) and, where given, the contributions
        ``(S, A)`` pair by pair, each relative to its own."""
        weight = self.sensitivity(reference)
        out = {
            "value": (
                abs(float(answer.value) - float(reference.value)),
                float(reference.value + weight.sum()),
            )
        }
        if answer.x is not None:
            x = np.asarray(answer.x, dtype=float)
            err = np.abs(x - reference.x)
            crit = reference.info["critical"]
            # off the critical pairs the contribution is exactly 0
            out["x"] = (
                max(_max_ratio(err[crit], weight[crit]), float(err[~crit].max(initial=0))),
                1.0,
            )
        return out


def _max_ratio(err: np.ndarray, scale: np.ndarray) -> float:
    """``max err / scale`` (0 for empty arrays; an error over a zero scale counts in full)."""
    if err.size == 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(scale > 0, err / np.where(scale > 0, scale, 1.0), err)
    return float(r.max())


def not_ergodic(P: np.ndarray) -> str | None:
    """Why the model ``P[s, a, s']`` is not ergodic, or ``None`` when every deterministic
    policy's chain is irreducible.

    It is not when some policy keeps a non-empty set ``Z`` of states closed without some
    state ``t``: the largest such ``Z`` for each ``t`` is the greatest fixed point of
    ``Z -> {s in Z : some action's support lies in Z}`` from ``Z = S \\ {t}``. All ``t`` are
    peeled together: ``count[t, s, a]`` (the states of ``(s, a)``'s support outside ``Z_t``)
    grows by one sparse product per round with the states removed in it, so the work is
    ``O(S nnz(P))`` over all rounds; a model whose every row has full support is ergodic at
    once."""
    S, A, _ = P.shape
    supp = P > 0
    if supp.all():
        return None
    stay = np.argwhere((supp.sum(axis=2) == 1) & supp[np.arange(S), :, np.arange(S)])
    if S > 1 and stay.size:  # an action that never leaves its state: a closed set at once
        s, a = (int(i) for i in stay[0])
        return _not_ergodic_message([s], [a], (s + 1) % S)
    # count[t, (s, a)]: support states of (s, a) outside Z_t (at first only t itself)
    support_rows = sp.csr_matrix(supp.reshape(S * A, S).astype(np.int64))
    count = supp.reshape(S * A, S).T.astype(np.int64)  # (t, s*A + a)
    blocked = (count.reshape(S, S, A) > 0).sum(axis=2)  # actions of s leaving Z_t
    inside = ~np.eye(S, dtype=bool)
    t_out, s_out = np.nonzero(inside & (blocked == A))
    while t_out.size:  # rounds of peeling (each removes states; at most S rounds)
        inside[t_out, s_out] = False
        removed = sp.csr_matrix((np.ones(t_out.size, np.int64), (t_out, s_out)), shape=(S, S))
        delta = (removed @ support_rows.T).tocoo()
        t, sa = delta.row, delta.col
        fresh = count[t, sa] == 0  # actions that now leave Z_t for the first time
        count[t, sa] += delta.data
        touched_t, touched_s = t[fresh], sa[fresh] // A
        np.add.at(blocked, (touched_t, touched_s), 1)
        done = inside[touched_t, touched_s] & (blocked[touched_t, touched_s] == A)
        pairs = np.unique(touched_t[done] * S + touched_s[done])
        t_out, s_out = pairs // S, pairs % S
    if not inside.any():
        return None
    t = int(np.flatnonzero(inside.any(axis=1))[0])
    states = np.flatnonzero(inside[t])
    actions = (count.reshape(S, S, A)[t, states] == 0).argmax(axis=1)
    return _not_ergodic_message(states.tolist(), actions.tolist(), t)


def _not_ergodic_message(states: list, actions: list, t: int) -> str:
    """The reason :func:`not_ergodic` gives: the policy keeping ``states`` closed (first 8)."""
    shown = ", ".join(f"{s}: {a}" for s, a in zip(states[:8], actions[:8], strict=True))
    more = ", ..." if len(states) > 8 else ""
    return (
        f"the model is not ergodic: the policy taking {{state: action}} = {{{shown}{more}}} "
        f"never leaves the states {states[:8]}{more[1:]}, so state {t} is never "
        "reached from them (C(P) needs every deterministic policy's chain irreducible, as in "
        "Burnetas & Katehakis 1997: otherwise the optimal bias, on which every gap and rate "
        "depends, is not determined by the optimality equations)"
    )


def classify_pairs(problem: RegretLowerBound, q: np.ndarray, bias: np.ndarray):
    """``(gaps, targets, classes)`` from a planning answer's action values ``q = r + P v`` and
    bias ``v``: ``gaps = max_a q - q``; ``targets = P v + gaps`` (``rho = L*(x) - r``, formed
    so that ``rho - p . v`` is the gap to rounding); ``classes`` 0 (optimal: a gap within
    ``tie_tol`` times :meth:`RegretLowerBound.scale`), 2 (never optimal: ``rho >= max v``),
    1 (critical) otherwise. Both paths classify with this one rule."""
    mdp = problem.mdp
    S, A = mdp.R.shape
    gaps = q.max(axis=1, keepdims=True) - q
    pv = (mdp.P.reshape(S * A, S) @ bias).reshape(S, A)
    targets = pv + gaps
    classes = np.full((S, A), CRITICAL_PAIR)
    classes[targets >= bias.max()] = NEVER_PAIR
    optimal = gaps <= problem.tie_tol * problem.scale(bias)
    classes[optimal] = OPTIMAL_PAIR
    gaps = np.where(optimal, 0.0, gaps)
    return gaps, targets, classes


def bound_fields(planning: PlanResult, gaps, targets, classes, rates, multipliers) -> dict:
    """The result's fields (``value``, ``x``, ``multiplier`` and the rest) from the planning
    answer, :func:`classify_pairs`' output and the critical pairs' ``rates`` and
    ``multipliers`` (in C order of the critical pairs)."""
    crit = classes == CRITICAL_PAIR
    K = np.where(classes == NEVER_PAIR, np.inf, np.nan)
    K[crit] = rates
    lam = np.zeros(gaps.shape)
    lam[crit] = multipliers
    contributions = np.zeros(gaps.shape)
    contributions[crit] = gaps[crit] / K[crit]
    return {
        "value": float(contributions.sum()),
        "x": contributions,
        "multiplier": lam,
        "gain": planning.gain,
        "bias": planning.bias,
        "values": planning.bias,
        "q": planning.q,
        "policy": planning.policy,
        "occupancy": planning.occupancy,
        "info": {
            "gaps": gaps,
            "rates": K,
            "contributions": contributions,
            "targets": targets,
            "critical": crit,
            "classes": classes,
            "planning_status": planning.status,
        },
    }


def worst_status(statuses) -> str:
    """The worst of per-part statuses: the first without a solution, else
    ``optimal_inaccurate`` if any part is, else ``optimal``."""
    statuses = [str(s) for s in statuses]
    for s in statuses:
        if s not in SOLUTION_PRESENT:
            return s
    return OPTIMAL_INACCURATE if OPTIMAL_INACCURATE in statuses else OPTIMAL
