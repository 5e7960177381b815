"""Conic path of ``AverageRewardPlanning``: the LP of the optimality equations (two stages)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..dp import EvaluationError, backup, class_gains, greedy, masked
from ..result import MULTICHAIN, NUMERICAL_ERROR, PlanResult
from ._common import (
    NOT_FEASIBLE_OR_BOUNDED,
    admissible_pairs,
    bellman_matrix,
    conic_result,
    no_solution,
    run,
    scatter,
)

#: Stage 1 leaves ``v`` undetermined on states where no Bellman inequality is tight; a
#: residual above this (relative to the reward scale) triggers the second stage.
TIGHT_TOL = 1e-8


def _bellman(mdp):
    s_idx, a_idx = admissible_pairs(mdp.action_mask)
    A = bellman_matrix(mdp.P[s_idx, a_idx], s_idx, mdp.n_states, 1.0)
    return A, mdp.R[s_idx, a_idx], (s_idx, a_idx)


def formulate(problem) -> cp.Problem:
    """Stage 1: ``min phi  s.t.  phi + (E - P) v >= r`` (constraint 0; its dual is ``y``)."""
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
    mdp = problem.mdp
    prob = formulate(problem)
    result = run(prob, solver, solver_options).cannot_be(
        NOT_FEASIBLE_OR_BOUNDED,
        "a large gain is always feasible and the gain is bounded below by any policy's",
    )
    failed = no_solution(result)
    if failed:
        return failed
    phi, v = prob.var_dict["gain"].value, prob.var_dict["bias"].value
    gain = float(phi)
    pairs = admissible_pairs(mdp.action_mask)
    y = np.clip(prob.constraints[0].dual_value, 0.0, None)
    occupancy = scatter(y / y.sum(), pairs, mdp.R.shape)
    pi = occupancy.sum(axis=1)
    scale = 1.0 + np.abs(mdp.R).max()
    visited = pi > 1e-6 * pi.max()
    q_lp = masked(backup(mdp.P, mdp.R, v), mdp.action_mask)
    policy = np.where(visited, occupancy.argmax(axis=1), greedy(q_lp))
    try:
        gains = class_gains(mdp.P, mdp.R, policy)
    except EvaluationError as exc:
        return conic_result(
            result._replace(status=NUMERICAL_ERROR, message=f"the LP's policy: {exc}"),
            value=np.nan,
            policy=policy,
            occupancy=occupancy,
            info={"lp_gain": gain},
        )
    if gains.max() - gains.min() > TIGHT_TOL * scale:
        # the scalar-gain LP gives the best class's gain; in a multichain model that is not
        # the gain from every state, so it is not reported as the optimal gain
        message = (
            f"the LP's policy has {gains.size} recurrent classes with gains "
            f"{np.round(gains, 6).tolist()}: the model is multichain and the unichain "
            "LP (one scalar gain) does not apply"
        )
        return conic_result(
            result._replace(status=MULTICHAIN, message=message),
            value=np.nan,
            policy=policy,
            occupancy=occupancy,
            info={"lp_gain": gain},
        )
    residual = q_lp.max(axis=1) - v - gain
    stage2 = bool(np.abs(residual).max() > TIGHT_TOL * scale)
    if stage2:
        # phi = stage-1 gain plus stage 1's own largest constraint violation: (phi, v) of
        # stage 1 is then exactly feasible, so solver round-off cannot make stage 2 infeasible
        # (a fixed slack instead would loosen the bias by slack x the chain's hitting times)
        A, r, _ = _bellman(mdp)
        violation = max(0.0, float(np.max(r - A @ v - gain)))
        prob2 = formulate_bias(problem, gain + violation, pi)
        stage2_run = run(prob2, solver, solver_options).cannot_be(
            NOT_FEASIBLE_OR_BOUNDED, "stage 1's answer is feasible and the bias is bounded"
        )
        result = result.then(stage2_run, "stage 2 (bias)")
        failed = no_solution(result, occupancy=occupancy, info={"lp_gain": gain})
        if failed:
            return failed
        v = prob2.var_dict["bias"].value
    h = v - pi @ v
    q = masked(backup(mdp.P, mdp.R, h), mdp.action_mask)
    policy = np.where(visited, policy, greedy(q))
    bellman = float(np.max(np.abs(q.max(axis=1) - h - gain)))
    result = result.checked(bellman, scale, "Bellman residual")
    return conic_result(
        result,
        value=gain,
        x=h,
        multiplier=occupancy,
        values=h,
        q=q,
        policy=policy,
        gain=gain,
        bias=h,
        occupancy=occupancy,
        info={"stage2": stage2, "bellman_residual": bellman},
    )
