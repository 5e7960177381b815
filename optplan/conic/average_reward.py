"""Conic path of ``AverageRewardPlanning``: the LP of the optimality equations (two stages)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..dp import (
    EvaluationError,
    backup,
    class_gains,
    evaluate_multichain,
    greedy,
    masked,
    policy_model,
    sparse_recurrent_classes,
)
from ..problems.average_reward import settle_multichain
from ..problems.base import SOLVER_TOL
from ..result import MULTICHAIN, NUMERICAL_ERROR, SOLUTION_PRESENT, PlanResult
from ._common import (
    ConicRun,
    admissible_pairs,
    bellman_rows,
    conic_result,
    no_solution,
    planning_result,
    run_bias_stage,
    run_bounded,
    run_formulated,
    scatter,
)

#: Stage 1 leaves ``v`` undetermined on states where no Bellman inequality is tight; a
#: residual above this (relative to the reward scale) triggers the second stage.
TIGHT_TOL = 1e-8


def _bellman(mdp):
    """The Bellman inequalities of the admissible pairs (:func:`bellman_rows`, no discount;
    a sparse model's constraint matrix built from its CSR rows)."""
    return bellman_rows(mdp.P_rows, mdp.R, mdp.action_mask)


def _dense_problem(problem):
    """``problem`` on its model with ``P`` dense: the multichain LP and its post-processing
    are dense (``mdp.dense_P()`` refuses, naming the size, a large sparse model)."""
    if not problem.mdp.sparse:
        return problem
    import dataclasses

    return dataclasses.replace(problem, mdp=problem.mdp.to_dense())


def _refused(run: ConicRun, status: str, message: str, **fields) -> PlanResult:
    """A result without a value: ``status`` with ``message`` (the LP's policy cannot be
    evaluated, or is multichain), the rest of ``run`` kept."""
    return conic_result(run._replace(status=status, message=message), value=np.nan, **fields)


def formulate(problem) -> cp.Problem:
    """The multichain LP (:func:`formulate_multichain`) when ``problem.multichain == "solve"``.

    Stage 1: ``min phi  s.t.  phi + (E - P) v >= r`` (constraint 0; its dual is ``y``)."""
    if problem.multichain == "solve":
        return formulate_multichain(problem)
    A, r, _ = _bellman(problem.mdp)
    phi = cp.Variable(name="gain")
    v = cp.Variable(problem.mdp.n_states, name="bias")
    return cp.Problem(cp.Minimize(phi), [phi + A @ v >= r])


def formulate_bias(problem, gain: float, pi: np.ndarray) -> cp.Problem:
    """Stage 2: ``min sum v  s.t.  (E - P) v >= r - gain,  pi @ v = 0``.

    With ``gain`` optimal and ``pi`` a stationary distribution of an optimal policy, every
    feasible ``v`` is ``>= h*`` where ``h*`` solves Eq. (1) with ``pi @ h* = 0``, and ``h*`` is
    feasible, so the minimizer is ``h*``.
    """
    A, r, _ = _bellman(problem.mdp)
    v = cp.Variable(problem.mdp.n_states, name="bias")
    return cp.Problem(cp.Minimize(cp.sum(v)), [A @ v >= r - gain, pi @ v == 0])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    """Stage 1, stage 2 where needed, then the answer checked by its own Bellman residual.

    The status is the worse of the two stages'; an ``optimal`` answer whose residual
    ``max |max_a (r + P h) - h - g|`` exceeds the solver's tolerance times the reward scale is
    reported ``optimal_inaccurate`` with the residual in the message.
    """
    if problem.multichain == "solve":
        return solve_multichain(_dense_problem(problem), solver, solver_options)
    mdp = problem.mdp
    why = "a large gain is always feasible and the gain is bounded below by any policy's"
    prob, result, failed = run_formulated(formulate, problem, solver, solver_options, why)
    if failed:
        return failed
    gain, v = float(prob.var_dict["gain"].value), prob.var_dict["bias"].value
    y = np.clip(prob.constraints[0].dual_value, 0.0, None)
    occupancy = scatter(y / y.sum(), admissible_pairs(mdp.action_mask), mdp.R.shape)
    pi = occupancy.sum(axis=1)
    visited = pi > 1e-6 * pi.max()
    q_lp = masked(backup(mdp.P_rows, mdp.R, v), mdp.action_mask)
    policy = np.where(visited, occupancy.argmax(axis=1), greedy(q_lp))
    refused = _refuse_multichain(result, mdp, policy, occupancy, gain)
    if refused is not None:
        if refused.status != MULTICHAIN:
            return refused
        dense = _dense_problem(problem)
        return settle_multichain(refused, solve_multichain(dense, solver, solver_options), mdp)
    scale = 1.0 + np.abs(mdp.R).max()
    stage2 = bool(np.abs(q_lp.max(axis=1) - v - gain).max() > TIGHT_TOL * scale)
    if stage2:
        stage1, fields = (result, gain, v), {"occupancy": occupancy, "info": {"lp_gain": gain}}
        result, failed, v = _solve_bias(problem, stage1, pi, solver, solver_options, **fields)
        if failed:
            return failed
    h = v - pi @ v
    q = masked(backup(mdp.P_rows, mdp.R, h), mdp.action_mask)
    policy = np.where(visited, policy, greedy(q))
    bellman = float(np.max(np.abs(q.max(axis=1) - h - gain)))
    result = result.checked(bellman, scale, "Bellman residual")
    info = {"stage2": stage2, "bellman_residual": bellman}
    return planning_result(
        result,
        gain,
        h,
        occupancy,
        q=q,
        policy=policy,
        gain=gain,
        bias=h,
        occupancy=occupancy,
        info=info,
    )


def _refuse_multichain(result: ConicRun, mdp, policy, occupancy, gain: float):
    """The result refusing stage 1's answer, or ``None`` when its policy is unichain:
    ``numerical_error`` when the policy's class gains cannot be computed, ``multichain`` when
    it has several recurrent classes (the scalar-gain LP gives the best class's gain, not the
    gain from every state, and its stage 2 cannot pin the bias of several classes: the
    multichain LP decides)."""
    fields = {"policy": policy, "occupancy": occupancy, "info": {"lp_gain": gain}}
    if mdp.sparse and sparse_recurrent_classes(policy_model(mdp.P_rows, mdp.R, policy)[0]) == 1:
        return None
    try:
        gains = class_gains(mdp.dense_P(), mdp.R, policy)
    except EvaluationError as exc:
        return _refused(result, NUMERICAL_ERROR, f"the LP's policy: {exc}", **fields)
    if gains.size == 1:
        return None
    message = (
        f"the LP's policy has {gains.size} recurrent classes with gains "
        f"{np.round(gains, 6).tolist()}: the model is multichain and the unichain "
        "LP (one scalar gain) does not apply"
    )
    return _refused(result, MULTICHAIN, message, **fields)


def _solve_bias(problem, stage1, pi, solver, solver_options, **fields):
    """Stage 2 after ``stage1 = (run, gain, v)``: ``(run, failed, bias)``, with ``failed``
    as :func:`run_stage`'s (``fields`` in it) and the bias ``None`` then.

    Its gain is stage 1's plus stage 1's own largest constraint violation: ``(gain, v)`` of
    stage 1 is then exactly feasible, so solver round-off cannot make stage 2 infeasible (a
    fixed slack instead would loosen the bias by slack x the chain's hitting times)."""
    result, gain, v = stage1
    A, r, _ = _bellman(problem.mdp)
    violation = max(0.0, float(np.max(r - A @ v - gain)))
    prob2 = formulate_bias(problem, gain + violation, pi)
    result, failed = run_bias_stage(prob2, solver, solver_options, result, **fields)
    return result, failed, None if failed else prob2.var_dict["bias"].value


def formulate_multichain(problem) -> cp.Problem:
    """The multichain LP (Puterman §9.3): ``min alpha @ g  s.t.  (E - P) g >= 0``
    (constraint 0, dual ``y``) and ``g[s] + (E - P) h >= r`` (constraint 1, dual ``x``) over the
    admissible pairs, ``alpha`` uniform. Its ``g`` is the optimal gain (Thm 9.3.2)."""
    mdp = problem.mdp
    A, r, (s_idx, _) = _bellman(mdp)
    g = cp.Variable(mdp.n_states, name="gain")
    h = cp.Variable(mdp.n_states, name="bias")
    alpha = np.full(mdp.n_states, 1.0 / mdp.n_states)
    return cp.Problem(cp.Minimize(alpha @ g), [A @ g >= 0, g[s_idx] + A @ h >= r])


def formulate_multichain_bias(problem, gain, keep, big_m: float) -> cp.Problem:
    """The bias LP: the largest bias ``h*`` of a gain-optimal policy (bias optimality,
    Puterman §10.3) as the smallest ``h`` of

    ``min sum h  s.t.  g*_s + h_s - P(s, a) h >= r(s, a)`` and
    ``h_s + w_s - P(s, a) w + M (g*_s + h_s - r(s, a) - P(s, a) h) >= 0``

    over the pairs in ``keep`` (``A1``: ``P(s, a) g* = g*_s``), variables ``h, w``.

    Every feasible ``h >= h_d`` for every gain-optimal ``d`` (``u = h - h_d``: the first
    constraint gives ``u >= P_d u``, so ``u >= P*_d u``; applying ``P*_d`` to the second gives
    ``P*_d h >= 0``, i.e. ``P*_d u >= 0``), so ``h >= h*``. With ``(h*, w*)`` solving the
    nested equations ``g* + h* = max_{A1} (r + P h*)``, ``h* + w* = max_{A2} P w*``, the pair
    is feasible once ``M`` exceeds ``(P w* - h* - w*) / (g* + h* - r - P h*)`` on the pairs of
    ``A1`` outside ``A2``: then the minimizer is ``h*``. The caller certifies it: ``h`` must
    equal the bias of a gain-optimal policy (linear algebra), which is ``<= h*``.
    """
    mdp = _dense_problem(problem).mdp
    A, r, (s_idx, _) = bellman_rows(mdp.P, mdp.R, keep)
    h = cp.Variable(mdp.n_states, name="bias")
    w = cp.Variable(mdp.n_states, name="w")
    slack = gain[s_idx] + A @ h - r
    # w has a free constant (rows of P sum to 1); pinning it by sum w = 0 cut Clarabel's
    # optimal_inaccurate from 8 to 2 of tests/test_multichain.py's 300 models, but one bias
    # then came out 1.4e-7 off (1.9e-8 at most without): left free
    cons = [slack >= 0, h[s_idx] + A @ w + big_m * slack >= 0]
    return cp.Problem(cp.Minimize(cp.sum(h)), cons)


#: The bias LP's ``M``, tried in turn until the certificate holds.
BIG_M = (1e2, 1e4)

#: Actions whose ``P(s, a) g`` is within this (times the reward scale) of ``g_s`` count as
#: gain-optimal in the bias LP. Clarabel's gain is accurate to ~1e-11 at the default settings
#: (largest error 2.4e-10 over 300 random multichain models); at 1e-7 an action 3e-7 short of
#: the optimal gain was kept and its larger bias returned (tests/test_multichain.py, seed 1234).
KEEP_TOL = 1e-9


def lp_policy(P, keep, x, y, rel=1e-6) -> np.ndarray:
    """A gain-optimal policy from the multichain LP's duals, robust to the non-vertex duals an
    interior-point solver returns (where Thm 9.3.8's ``argmax x`` / ``argmax y`` may pick a
    losing action among tied ``y``).

    Only gain-optimal actions (``keep``: ``P(s, a) g = g_s``) are used. On ``S_x`` (states
    with ``x`` mass, closed under the actions with ``x > 0`` by the dual's flow balance)
    take ``argmax x``: those actions are tight in ``g + h >= r + P h``, so each recurrent class
    ``C`` of the policy there earns ``mu_C r = mu_C g = g_C`` (``g`` is harmonic under kept
    actions, so constant on ``C``). Elsewhere take a kept action with positive probability
    of moving one step closer to ``S_x`` in the graph of kept actions (ties by ``argmax y``):
    ``S_x`` is then reached with probability 1, and as ``g`` is harmonic under the policy,
    every state earns ``g``. Every state reaches ``S_x``: ``S_x`` holds the recurrent classes
    of the optimal policies of the vertices the dual ``x`` mixes, reachable by their kept
    actions from every state (``alpha > 0``).
    """
    S = P.shape[0]
    x = np.where(keep, x, 0.0)
    x_mass = x.sum(axis=1)
    on_x = x_mass > rel * max(x_mass.max(), 1e-300)
    reach = (P > 0) & keep[:, :, None]
    dist = np.where(on_x, 0, S + 1)
    for d in range(1, S + 1):  # breadth-first layers (loop over distances)
        near = dist < d
        step = (reach & near[None, None, :]).any(axis=2).any(axis=1) & (dist > d)
        if not step.any():
            break
        dist[step] = d
    closer = (reach & (dist[None, None, :] < dist[:, None, None])).any(axis=2)
    toward = np.where(closer, y + 1.0, -np.inf)  # +1: a zero y still beats a non-candidate
    return np.where(on_x, np.where(keep, x, -np.inf).argmax(axis=1), toward.argmax(axis=1))


def solve_multichain(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    """The multichain LP (the gain ``g``), then the bias LP (``h*``, tried at each ``M`` of
    :data:`BIG_M` until certified) and a policy from its duals (:func:`lp_policy` on the bias
    LP's tight pairs). Certificate: the policy's exact gain and bias (linear algebra) equal
    ``g`` and ``h`` within the solver's tolerance; as every feasible ``h >= h*`` and a
    gain-optimal policy's bias is ``<= h*``, that proves ``h = h*`` up to the tolerance.
    Otherwise, or when the residual in the optimality equations is larger, the status is
    ``optimal_inaccurate`` with the reason."""
    problem = _dense_problem(problem)  # a sparse model's dense copy (its size limit)
    mdp = problem.mdp
    S = mdp.n_states
    why = "a large constant gain is feasible and g >= every policy's gain"
    nan = {"gain": np.full(S, np.nan), "bias": np.full(S, np.nan)}
    prob, result, failed = run_formulated(
        formulate_multichain, problem, solver, solver_options, why, **nan
    )
    if failed:
        return failed
    g = prob.var_dict["gain"].value
    pairs = admissible_pairs(mdp.action_mask)
    y = scatter(np.clip(prob.constraints[0].dual_value, 0.0, None), pairs, mdp.R.shape)
    x = scatter(np.clip(prob.constraints[1].dual_value, 0.0, None), pairs, mdp.R.shape)
    scale = 1.0 + np.abs(mdp.R).max()
    pg = masked(backup(mdp.P, np.zeros_like(mdp.R), g), mdp.action_mask)
    keep = mdp.action_mask & (pg >= g[:, None] - KEEP_TOL * scale)
    policy = lp_policy(mdp.P, keep, x, y)
    try:
        ev = evaluate_multichain(*policy_model(mdp.P, mdp.R, policy))
    except EvaluationError as exc:
        message = f"the LP's policy: {exc}"
        return _refused(result, NUMERICAL_ERROR, message, gain=g, policy=policy, occupancy=x)
    # g raised by stage 1's own largest violation of g + h >= r + P h: stage 1's h is then
    # exactly feasible in the bias LP's first constraint (on a recurrent class that
    # constraint sums to mu (g - r) >= 0, which a g 1e-11 low from the solver makes infeasible)
    h1 = prob.var_dict["bias"].value
    q1 = masked(backup(mdp.P, mdp.R, h1), keep)
    g2 = g + max(0.0, float(np.max(q1.max(axis=1) - g - h1)))
    stage2, h, policy, ev, info = _certified_bias(
        problem, (g, g2, keep, scale), (policy, ev), solver, solver_options
    )
    result = result.then(stage2, "stage 2 (bias)")
    info.update(recurrent=ev.recurrent, stationary=ev.stationary)
    failed = no_solution(
        result, gain=g, bias=np.full(S, np.nan), policy=policy, occupancy=x, info=info
    )
    if failed:
        return failed
    q = masked(backup(mdp.P, mdp.R, h), mdp.action_mask)
    residual = float(
        max(
            np.abs(masked(q, keep).max(axis=1) - g - h).max(),
            (pg.max(axis=1) - g).max(),
            np.abs(ev.gain - g).max(),  # the returned policy earns g
        )
    )
    result = result.checked(residual, scale, "residual in the multichain optimality equations")
    result = result.checked(
        info.get("bias_certificate", np.inf), scale, "bias certificate |h - h_d| (d its policy)"
    )
    info["optimality_residual"] = residual
    return planning_result(
        result,
        float(mdp.initial @ g),
        h,
        x,
        q=q,
        policy=policy,
        gain=g,
        bias=h,
        occupancy=x,
        info=info,
    )


def _certified_bias(problem, gains, start, solver: str, solver_options: dict | None):
    """The bias LP at each ``M`` of :data:`BIG_M` in turn until the exact bias of its dual
    policy certifies it (a larger ``M`` only if the certificate fails), given ``gains = (g,
    g2, keep, scale)`` (the gain, the bias LP's raised gain, the gain-optimal pairs and the
    reward scale): ``(run, h, policy, ev, info)`` of the last attempt. ``h`` is ``None`` when
    no attempt found one; ``policy`` and its evaluation ``ev`` are ``start``'s until an
    attempt replaces them."""
    mdp = problem.mdp
    g, g2, keep, scale = gains
    policy, ev = start
    h, info = None, {}
    why = "feasible for M large enough, and h >= h* when feasible"
    for big_m in BIG_M:  # loop over attempts
        prob2 = formulate_multichain_bias(problem, g2, keep, big_m)
        stage2 = run_bounded(prob2, solver, solver_options, why)
        if stage2.status not in SOLUTION_PRESENT:
            continue
        h = prob2.var_dict["bias"].value
        q = masked(backup(mdp.P, mdp.R, h), keep)
        a2 = keep & (q >= (g2 + h)[:, None] - KEEP_TOL * scale)
        z = scatter(
            np.clip(prob2.constraints[1].dual_value, 0.0, None), np.nonzero(keep), mdp.R.shape
        )
        policy = lp_policy(mdp.P, a2, z, z)
        try:
            ev = evaluate_multichain(*policy_model(mdp.P, mdp.R, policy))
        except EvaluationError:
            continue
        certificate = float(max(np.abs(ev.bias - h).max(), np.abs(ev.gain - g).max()))
        info = {"big_m": big_m, "bias_certificate": certificate}
        rtol, atol = SOLVER_TOL[solver]
        if certificate <= atol + rtol * scale:
            break
    return stage2, h, policy, ev, info
