"""Conic path of ``AverageRewardPlanning``: the LP of the optimality equations (two stages)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from ..dp import backup, class_gains, greedy, masked
from ..result import MULTICHAIN, PlanResult
from ._common import (
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
    mdp = problem.mdp
    prob = formulate(problem)
    status, message, iterations, seconds = run(prob, solver, solver_options)
    failed = no_solution(status, message, solver, iterations, seconds)
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
    gains = class_gains(mdp.P, mdp.R, policy)
    if gains.max() - gains.min() > TIGHT_TOL * scale:
        # the scalar-gain LP gives the best class's gain; in a multichain model that is not
        # the gain from every state, so it is not reported as the optimal gain
        message = (
            f"the LP's policy has {gains.size} recurrent classes with gains "
            f"{np.round(gains, 6).tolist()}: the model is multichain and the unichain "
            "LP (one scalar gain) does not apply"
        )
        return conic_result(
            MULTICHAIN,
            message,
            solver,
            iterations,
            seconds,
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
        status, message2, it2, sec2 = run(prob2, solver, solver_options)
        seconds += sec2
        iterations = (iterations or 0) + (it2 or 0)
        message = "; ".join(m for m in (message, message2) if m)
        failed = no_solution(
            status,
            "stage 2 (bias): " + message,
            solver,
            iterations,
            seconds,
            occupancy=occupancy,
            info={"lp_gain": gain},
        )
        if failed:
            return failed
        v = prob2.var_dict["bias"].value
    h = v - pi @ v
    q = masked(backup(mdp.P, mdp.R, h), mdp.action_mask)
    policy = np.where(visited, policy, greedy(q))
    return conic_result(
        status,
        message,
        solver,
        iterations,
        seconds,
        value=gain,
        x=h,
        multiplier=occupancy,
        values=h,
        q=q,
        policy=policy,
        gain=gain,
        bias=h,
        occupancy=occupancy,
        info={"stage2": stage2},
    )
