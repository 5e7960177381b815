"""``op.describe(mdp)``: the hardness report of a model, the quantities regret bounds depend on.

Each number is exact (linear algebra, policy iteration, graph algorithms) and, with
``method="both"``, cross-checked against the conic paths.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ._checks import OptplanError, OptplanTypeError, check_choice, check_int
from .crosscheck import cross_check
from .dp import (
    backup,
    classify,
    evaluate_multichain,
    limiting_matrix,
    masked,
    policy_model,
    sparse_recurrent_classes,
)
from .mdp import TabularMDP
from .problems import AverageRewardPlanning, HittingTimes, RegretLowerBound

#: Beyond this many states the diameter is not computed (S shortest-path problems of size S).
DIAMETER_MAX_STATES = 200
#: Beyond this many states the conic check of the diameter is skipped (an LP with S^2 variables).
CONIC_DIAMETER_MAX_STATES = 60
#: Beyond this many states the conic check of C(P) is skipped (one exponential-cone program per
#: critical pair).
CONIC_LOWER_BOUND_MAX_STATES = 60
#: A sparse model's parts that need dense arrays (the mixing of the optimal chain: matrix
#: powers and eigenvalues of an ``S x S`` array; ``C(P)``: the dense paths of
#: :class:`~optplan.RegretLowerBound`) are computed from dense copies up to this many states,
#: and reported as not computed, with the reason, above it.
SPARSE_DENSE_PARTS_MAX_STATES = 1000
#: Mixing times are searched up to this many steps.
MIXING_MAX_STEPS = 2**20
#: A gap at most this (times the reward scale) counts as zero: an optimal action.
GAP_TOL = 1e-9
QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass
class Description:
    """The report of :func:`describe`; ``to_dict()`` is JSON-ready."""

    name: str
    n_states: int
    n_actions: int
    structure: dict
    diameter: dict
    gain: dict
    bias_span: float
    gaps: dict
    mixing: dict
    checks: dict = field(default_factory=dict)
    lower_bound: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return _plain(asdict(self))

    def __str__(self) -> str:
        return format_description(self)


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    return x


def gap_stats(gaps: np.ndarray, tol: float) -> dict:
    """Count of zero gaps (``<= tol``), the smallest positive gap, and quantiles of the
    positive ones."""
    positive = gaps[gaps > tol]
    return {
        "pairs": int(gaps.size),
        "zero": int(gaps.size - positive.size),
        "min_positive": float(positive.min()) if positive.size else None,
        "quantiles": dict(
            zip(map(str, QUANTILES), np.quantile(positive, QUANTILES).tolist(), strict=True)
        )
        if positive.size
        else None,
    }


def mixing(P_pi: np.ndarray, eps: float = 0.25, max_steps: int = MIXING_MAX_STEPS) -> dict:
    """Mixing of a chain towards its limit ``P*`` (:func:`optplan.dp.limiting_matrix`):
    ``t_mix(eps) = min {t : max_s ||P^t(s, .) - P*(s, .)||_TV <= eps}`` (``None`` when above
    ``max_steps``: a periodic chain never mixes), found by doubling and bisection on matrix
    powers (the distance is non-increasing in ``t``); and the second largest eigenvalue
    modulus (the largest ``|lambda|`` over eigenvalues other than 1) with the relaxation time
    ``1 / (1 - slem)``."""
    S = P_pi.shape[0]
    star = limiting_matrix(P_pi)

    def distance(M):
        return 0.5 * float(np.abs(M - star).sum(axis=1).max())

    powers = [P_pi]  # P^(2^k)
    t, M = 1, P_pi
    t_mix = None
    if distance(np.eye(S)) <= eps:
        t_mix = 0
    else:
        while t <= max_steps:  # loop over doublings
            if distance(M) <= eps:
                lo, hi, base = t // 2, t, None
                # bisection: P^lo is known to be too far (or lo = 0 before the first power)
                base = np.linalg.matrix_power(P_pi, lo) if lo else np.eye(S)
                k = len(powers) - 2
                while hi - lo > 1:  # loop over halvings
                    mid_step = 2**k
                    trial = base @ powers[k]
                    if distance(trial) <= eps:
                        hi = lo + mid_step
                    else:
                        lo, base = lo + mid_step, trial
                    k -= 1
                t_mix = hi
                break
            M = M @ M
            powers.append(M)
            t *= 2
    eig = np.linalg.eigvals(P_pi)
    others = np.abs(eig[np.abs(eig - 1.0) > 1e-9])
    slem = float(others.max()) if others.size else 0.0
    return {
        "eps": eps,
        "t_mix": t_mix,
        "slem": slem,
        "relaxation_time": float(1.0 / (1.0 - slem)) if slem < 1.0 - 1e-12 else float("inf"),
    }


def describe(
    mdp: TabularMDP, method: str = "both", solver: str = "CLARABEL", max_policies: int = 4096
) -> Description:
    """The hardness report of a model.

    * ``structure``: :func:`optplan.dp.classify` (unichain / communicating / weakly
      communicating / multichain, closed sets of the transition graph, states transient under
      every policy);
    * ``diameter``: ``max_{s != t}`` of the shortest expected hitting time
      (:class:`optplan.HittingTimes`; ``inf`` when some state cannot reach another); skipped
      above :data:`DIAMETER_MAX_STATES` states;
    * ``gain``: the optimal gain per state (``AverageRewardPlanning(mdp, multichain="solve")``)
      with its min and max; ``bias_span``: ``max h* - min h*`` of the largest optimal bias;
    * ``gaps``: ``gain`` gaps ``g(s) - P(s, a) g`` over the admissible pairs and ``bias`` gaps
      ``g(s) + h*(s) - r(s, a) - P(s, a) h*`` over the pairs with no gain gap (the ``Delta``
      of gap-dependent regret bounds); zero within ``GAP_TOL`` times the reward scale;
    * ``mixing``: of the optimal policy's chain (:func:`mixing`), with its number of
      recurrent classes;
    * ``lower_bound``: Burnetas & Katehakis's regret lower bound ``C(P)``
      (:class:`optplan.RegretLowerBound`, the mean rewards known) with its numbers of
      critical pairs and of pairs that can never become optimal; ``None`` with the reason
      (``why``) where it is not defined (a model that is not ergodic, masked actions).

    A sparse model (:attr:`~optplan.TabularMDP.P_format` ``"csr"``): the classification reads
    the support of its rows (``scipy.sparse.csgraph``), the gaps and the diameter come from
    the sparse paths, the recurrent classes of the optimal chain from its strongly connected
    components. The parts whose computations are dense (the multichain gain and largest
    optimal bias, the mixing's matrix powers and eigenvalues, ``C(P)``) use dense copies up
    to :data:`SPARSE_DENSE_PARTS_MAX_STATES` states; above it nothing is densified: the gain
    and bias come from the sparse unichain path when the classification proves the model
    weakly communicating (its bias solves the optimality equations; a multichain model is
    refused, naming why), and the mixing times and ``C(P)`` are reported as not computed,
    with the reason (``why``).

    ``method="both"`` solves the gain, bias, diameter and ``C(P)`` by the conic paths too (the
    diameter and ``C(P)`` up to :data:`CONIC_DIAMETER_MAX_STATES` and
    :data:`CONIC_LOWER_BOUND_MAX_STATES` states) and records each ``cross_check`` in
    ``checks`` (``agree`` and the largest error).
    """
    if not isinstance(mdp, TabularMDP):
        raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    check_choice("method", method, ("fast", "both"))
    check_int("max_policies", max_policies, 0)
    S, A = mdp.R.shape
    scale = 1.0 + float(np.abs(mdp.R[mdp.action_mask]).max())
    checks = {}
    structure = _structure(mdp, max_policies)
    res, g, h = _gain_bias(mdp, method, solver, checks, structure)
    g, h = g + 0.0, h + 0.0  # + 0.0: no negative zeros in the report
    diameter = _diameter(mdp, method, solver, checks)
    gaps = _gaps(mdp, g, h, scale)
    mix = _mixing(mdp, res.policy)
    lower_bound = _lower_bound(mdp, method, solver, checks)
    return Description(
        name=mdp.name or "",
        n_states=S,
        n_actions=A,
        structure=structure,
        diameter=diameter,
        gain={
            "per_state": g,
            "min": float(g.min()),
            "max": float(g.max()),
            "constant": bool(g.max() - g.min() <= GAP_TOL * scale),
            "status": res.status,
        },
        bias_span=float(h.max() - h.min()),
        gaps=gaps,
        mixing=mix,
        checks=checks,
        lower_bound=lower_bound,
    )


def _mixing(mdp: TabularMDP, policy: np.ndarray) -> dict:
    """The report's ``mixing``: of the chain of ``policy``, with its recurrent classes (a
    sparse chain's from its strongly connected components)."""
    S = mdp.n_states
    P_pi, _ = policy_model(mdp.P_rows, mdp.R, policy)
    if not mdp.sparse:
        ev = evaluate_multichain(P_pi, np.zeros(S))
        return {"recurrent_classes": int(ev.labels.max() + 1), **mixing(P_pi)}
    classes = sparse_recurrent_classes(P_pi.tocsr())
    if S > SPARSE_DENSE_PARTS_MAX_STATES:
        return {
            "recurrent_classes": classes,
            "eps": 0.25,
            "t_mix": None,
            "slem": None,
            "relaxation_time": None,
            "why": f"not computed for a sparse model above {SPARSE_DENSE_PARTS_MAX_STATES} "
            "states (matrix powers and eigenvalues of a dense S x S chain)",
        }
    return {"recurrent_classes": classes, **mixing(P_pi.toarray())}


def _structure(mdp: TabularMDP, max_policies: int) -> dict:
    """The report's ``structure`` (:func:`optplan.dp.classify`, on a sparse model's rows)."""
    c = classify(mdp.P_rows, mdp.action_mask, max_policies)
    return {
        "kind": c.kind,
        "communicating": c.communicating,
        "weakly_communicating": c.weakly_communicating,
        "unichain": c.unichain,
        "closed_sets": [s.tolist() for s in c.closed_sets],
        "transient_under_every_policy": np.flatnonzero(c.transient).tolist(),
    }


def _solved(problem, method: str, solver: str, checks: dict, key: str):
    """The fast result of ``problem``; with ``method="both"`` cross-checked, the check recorded
    in ``checks[key]``."""
    if method == "both":
        chk = cross_check(problem, solver=solver)
        checks[key] = _check(chk)
        return chk.fast
    return problem.solve()


def _gain_bias(mdp: TabularMDP, method: str, solver: str, checks: dict, structure: dict):
    """The multichain gain per state and largest optimal bias (``AverageRewardPlanning``):
    ``(result, gain, bias)``. A sparse model above :data:`SPARSE_DENSE_PARTS_MAX_STATES`
    states whose classification proves a constant optimal gain (weakly communicating) is
    solved by the sparse unichain path instead of the multichain one, which is dense (its
    bias solves the optimality equations; the largest optimal bias when the optimal policy's
    bias is unique up to a constant); a larger sparse multichain model is refused, naming
    why."""
    if mdp.sparse and mdp.n_states > SPARSE_DENSE_PARTS_MAX_STATES:
        if not structure["weakly_communicating"]:
            raise OptplanError(
                f"describe: this sparse model (S={mdp.n_states}) is multichain "
                f"({len(structure['closed_sets'])} closed set(s)): its optimal gain per state "
                "needs the multichain solver, whose paths are dense, and sparse models above "
                f"{SPARSE_DENSE_PARTS_MAX_STATES} states are not densified "
                "(optplan.hardness.SPARSE_DENSE_PARTS_MAX_STATES)"
            )
        res = _solved(AverageRewardPlanning(mdp), method, solver, checks, "gain_bias")
        return res, np.full(mdp.n_states, float(res.gain)), res.bias
    res = _solved(
        AverageRewardPlanning(mdp, multichain="solve"), method, solver, checks, "gain_bias"
    )
    return res, res.gain, res.bias


def _diameter(mdp: TabularMDP, method: str, solver: str, checks: dict) -> dict:
    """The report's ``diameter`` (:class:`HittingTimes`), its conic check up to
    :data:`CONIC_DIAMETER_MAX_STATES` states."""
    S = mdp.n_states
    if S > DIAMETER_MAX_STATES:
        return {"value": None, "why": f"not computed above {DIAMETER_MAX_STATES} states"}
    conic = method == "both" and S <= CONIC_DIAMETER_MAX_STATES
    hit = _solved(HittingTimes(mdp), "both" if conic else "fast", solver, checks, "diameter")
    T = hit.values
    off = ~np.eye(S, dtype=bool)
    worst = np.unravel_index(np.where(off, T, -1.0).argmax(), T.shape)
    return {
        "value": hit.value,
        "worst_pair": {"from": int(worst[1]), "to": int(worst[0])},
        "status": hit.status,
    }


def _lower_bound(mdp: TabularMDP, method: str, solver: str, checks: dict) -> dict:
    """The report's ``lower_bound`` (:class:`RegretLowerBound`), its conic check up to
    :data:`CONIC_LOWER_BOUND_MAX_STATES` states."""
    if mdp.sparse and mdp.n_states > SPARSE_DENSE_PARTS_MAX_STATES:
        return {
            "value": None,
            "why": f"not computed for a sparse model above {SPARSE_DENSE_PARTS_MAX_STATES} "
            "states (C(P)'s paths are dense)",
        }
    try:
        problem = RegretLowerBound(mdp)
    except OptplanError as exc:
        return {"value": None, "why": str(exc).removeprefix("RegretLowerBound: ")}
    conic = method == "both" and mdp.n_states <= CONIC_LOWER_BOUND_MAX_STATES
    res = _solved(problem, "both" if conic else "fast", solver, checks, "lower_bound")
    if not res.success:
        return {"value": None, "why": f"{res.status}: {res.message}", "status": res.status}
    classes = res.info["classes"]
    return {
        "value": float(res.value),
        "critical_pairs": int((classes == 1).sum()),
        "never_optimal_pairs": int((classes == 2).sum()),
        "status": res.status,
    }


def _gaps(mdp: TabularMDP, g: np.ndarray, h: np.ndarray, scale: float) -> dict:
    """The report's ``gaps``: gain gaps over the admissible pairs, bias gaps over the pairs
    with no gain gap."""
    P, R, mask = mdp.P_rows, mdp.R, mdp.action_mask
    pg = masked(backup(P, np.zeros_like(R), g), mask)
    gain_gaps = (g[:, None] - pg)[mask]
    a1 = mask & (pg >= g[:, None] - GAP_TOL * scale)
    bias_gaps = (g + h)[:, None] - backup(P, R, h)
    return {
        "gain": gap_stats(gain_gaps, GAP_TOL * scale),
        "bias": gap_stats(bias_gaps[a1], GAP_TOL * scale),
    }


def _check(chk) -> dict:
    return {
        "agree": chk.agree,
        "solver": chk.conic.solver,
        "conic_status": chk.conic.status,
        "max_abs_err": max(chk.abs_err.values(), default=None),
    }


def _num(x, digits=6) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}g}"


def format_description(d: Description) -> str:
    """The report as text (``optplan info``)."""
    s = d.structure
    lines = [
        f"model {d.name or '(unnamed)'}: S = {d.n_states}, A = {d.n_actions}",
        f"class          {s['kind']} (communicating: {s['communicating']}, weakly communicating: "
        f"{s['weakly_communicating']}, unichain: "
        f"{'undecided' if s['unichain'] is None else s['unichain']}); "
        f"{len(s['closed_sets'])} closed set(s), "
        f"{len(s['transient_under_every_policy'])} state(s) transient under every policy",
    ]
    dia = d.diameter
    if dia["value"] is None:
        lines.append(f"diameter       - ({dia['why']})")
    else:
        wp = dia["worst_pair"]
        lines.append(
            f"diameter       {_num(dia['value'], 10)} (worst pair: from {wp['from']} to {wp['to']})"
        )
    g = d.gain
    per = np.array2string(np.asarray(g["per_state"]), precision=6, max_line_width=88, threshold=20)
    if g["constant"]:
        lines.append(f"optimal gain   constant {_num(g['min'], 10)}")
    else:
        lines.append(f"optimal gain   min {_num(g['min'], 10)}, max {_num(g['max'], 10)}")
    lines.append(f"  per state    {per}")
    lines.append(f"bias span      {_num(d.bias_span, 10)} (largest optimal bias h*)")
    for kind, label in (("gain", "gain gaps"), ("bias", "bias gaps")):
        st = d.gaps[kind]
        q = st["quantiles"]
        qs = " ".join(_num(v, 4) for v in q.values()) if q else "-"
        lines.append(
            f"{label:<14} {st['pairs']} pairs, {st['zero']} zero; min positive "
            f"{_num(st['min_positive'])}; quantiles 0/25/50/75/100%: {qs}"
        )
    lb = d.lower_bound
    if lb.get("value") is None:
        lines.append(f"lower bound    {lb.get('why', '-')}")
    else:
        lines.append(
            f"lower bound    C(P) {_num(lb['value'], 8)}: liminf Regret(T) / ln T >= C(P) "
            f"(Burnetas-Katehakis, rewards known; C ln 1e4 = {_num(lb['value'] * np.log(1e4), 4)}"
            f"); {lb['critical_pairs']} critical pair(s), {lb['never_optimal_pairs']} never optimal"
        )
    m = d.mixing
    if m.get("why"):
        lines.append(
            f"optimal policy {m['recurrent_classes']} recurrent class(es); mixing - ({m['why']})"
        )
    else:
        tmix = "never (periodic or > 2^20 steps)" if m["t_mix"] is None else str(m["t_mix"])
        lines.append(
            f"optimal policy {m['recurrent_classes']} recurrent class(es); t_mix({m['eps']}) = "
            f"{tmix}; slem {_num(m['slem'])}, relaxation time {_num(m['relaxation_time'])}"
        )
    for name, chk in d.checks.items():
        lines.append(
            f"check {name:<11} fast vs {chk['solver']}: agree={chk['agree']} "
            f"(conic {chk['conic_status']}, largest error {_num(chk['max_abs_err'], 3)})"
        )
    return "\n".join(lines)
