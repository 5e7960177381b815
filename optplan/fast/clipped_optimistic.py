"""Fast path of ``ClippedOptimisticPlanning``: Howard policy iteration per clipped set (exact),
value iteration on the clipped operator, or RAVI-UCB's own regularized iteration."""

from __future__ import annotations

import time

import numpy as np

from .._checks import check_real
from ..dp import greedy, masked, policy_iteration
from ..result import MAX_ITER, OPTIMAL, OPTIMAL_INACCURATE, PlanResult
from ..soft import ravi_step
from ._options import check_algorithm, check_tol_iter
from ._result import fast_result

ALGORITHMS = ("policy_iteration", "value_iteration", "ravi")

#: The exact path's certificate: the clipped Bellman residual of its answer, relative to
#: ``1 + H``, must be below this (a linear solve's round-off).
RESIDUAL_TOL = 1e-11


def solve(
    problem,
    algorithm: str = "policy_iteration",
    eta: float = 1.0,
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> PlanResult:
    """Solve ``V = min(H, T V)`` (``Q = Pi_H[r + CB + gamma P_hat V]``).

    Parameters
    ----------
    algorithm : {"policy_iteration", "value_iteration", "ravi"}
        ``"policy_iteration"`` (exact): clipped-set rounds, each an unclipped MDP with the
        clipped states fixed at ``H`` solved by Howard policy iteration (warm-started); from
        ``U = {}``, ``U <- U_prev & {T V > H}`` (after the first round, ``U`` only shrinks in
        exact arithmetic; the intersection keeps round-off from undoing that), until ``U``
        repeats: at most ``S + 1`` rounds. The answer's clipped Bellman residual is checked
        (``optimal`` below ``1e-11 (1 + H)``).
        ``"value_iteration"``: ``V <- min(H, T V)`` from 0 until ``|V' - V| < tol (1 - gamma) /
        (2 gamma)`` (then ``|V - V*| < tol``, Puterman Thm 6.3.1).
        ``"ravi"``: RAVI-UCB's regularized step with the data frozen
        (:func:`optplan.soft.ravi_step`: ``pi_0`` uniform over admissible actions, ``Q_1 = 0``)
        until ``|F(Q_k) - Q_k| <= tol (1 - gamma)``, ``F`` the clipped operator on ``Q``; then
        ``|Q_k - Q*| <= tol`` (``F`` is a ``gamma``-contraction). Returns the iterate ``Q_k``
        (``values = max_a Q_k``), ``info["log_policy"]`` and ``info["error_bound"]``.
    eta : float > 0
        The learning rate of ``"ravi"`` (ignored otherwise).
    tol : float
        Accuracy of ``"value_iteration"`` and ``"ravi"``.
    max_iter : int, optional
        Policy-iteration steps per round (default 1,000), value-iteration sweeps (default
        1,000,000) or RAVI steps (default 100,000).
    """
    check_algorithm(algorithm, ALGORITHMS)
    eta = check_real("eta", eta, 0.0, None, low_open=True)
    check_tol_iter(tol, max_iter)
    start = time.perf_counter()
    if algorithm == "policy_iteration":
        out = _clipped_set_rounds(problem, 1_000 if max_iter is None else max_iter)
    elif algorithm == "value_iteration":
        out = _value_iteration(problem, tol, 1_000_000 if max_iter is None else max_iter)
    else:
        out = _ravi(problem, eta, tol, 100_000 if max_iter is None else max_iter)
    status, message, V, Q, iterations, info = out
    info.setdefault("clipped", V >= problem.horizon)  # min(H, .) gives exactly H when it clips
    return fast_result(
        algorithm,
        start,
        iterations,
        value=float(np.mean(V)),
        x=V,
        status=status,
        message=message,
        values=V,
        q=Q,
        policy=greedy(Q),
        info=info,
    )


def _clipped_set_rounds(problem, max_iter):
    P, mask, gamma, H = problem.p_hat, problem.action_mask, problem.discount, problem.horizon
    S = problem.n_states
    c = problem.r + problem.bonus
    U = np.zeros(S, dtype=bool)
    policy = None
    iterations = 0
    for rounds in range(1, S + 2):  # loop over clipped sets (U shrinks after round 1)
        # the clipped states: no transition, reward H, so V = H there
        P_U = np.where(U[:, None, None], 0.0, P)
        c_U = np.where(U[:, None], H, c)
        status, message, policy, V, _, _, it = policy_iteration(
            P_U, c_U, mask, gamma, policy, max_iter
        )
        iterations += it
        if status != OPTIMAL:
            Q = problem.operator(V)
            return status, message, V, Q, iterations, {"rounds": rounds, "clipped": U}
        TV = problem.backup(V).max(axis=1)
        new = TV > H if rounds == 1 else U & (TV > H)
        if np.array_equal(new, U):
            break
        U = new
    Q = problem.operator(V)
    residual = problem.residual(V)
    status, message = OPTIMAL, ""
    if residual > RESIDUAL_TOL * (1.0 + H):
        status = OPTIMAL_INACCURATE
        message = f"clipped Bellman residual {residual:.3g} after {rounds} rounds"
    info = {"rounds": rounds, "residual": residual, "clipped": U}
    return status, message, V, Q, iterations, info


def _value_iteration(problem, tol, max_iter):
    gamma = problem.discount
    V = np.zeros(problem.n_states)
    limit = tol * (1.0 - gamma) / (2.0 * gamma)
    for sweep in range(1, max_iter + 1):
        new = problem.operator(V).max(axis=1)
        step = float(np.max(np.abs(new - V)))
        V = new
        if step < limit:
            return OPTIMAL, "", V, problem.operator(V), sweep, {}
    message = f"value iteration did not reach tol in {max_iter} sweeps (last step {step:.3g})"
    return MAX_ITER, message, V, problem.operator(V), max_iter, {}


def _ravi(problem, eta, tol, max_iter):
    mask, gamma = problem.action_mask, problem.discount
    log_pi = np.where(mask, -np.log(mask.sum(axis=1, keepdims=True)), -np.inf)
    Q = np.zeros(mask.shape)
    limit = tol * (1.0 - gamma)

    def residual_of(Q):
        F = problem.operator(masked(Q, mask).max(axis=1))
        return float(np.max(np.abs(F - Q)[mask]))

    converged, k = False, 0
    while k < max_iter:  # loop over epochs of the frozen-data iteration
        k += 1
        step = ravi_step(
            log_pi, Q, problem.p_hat, problem.bonus, problem.r, eta, gamma, validate=False
        )
        change = float(np.max(np.abs(step.q - Q)[mask]))
        log_pi, Q = step.log_policy, step.q
        if change <= limit:  # cheap trigger; the certificate is the residual of Q itself
            residual = residual_of(Q)
            converged = residual <= limit
            if converged:
                break
    if not converged:
        residual = residual_of(Q)
    Qm = masked(Q, mask)
    bound = residual / (1.0 - gamma)
    info = {"log_policy": log_pi, "error_bound": bound, "eta": eta}
    if converged:
        return OPTIMAL, "", Qm.max(axis=1), Qm, k, info
    message = (
        f"RAVI iteration (eta = {eta:g}) did not reach tol in {max_iter} steps (error bound "
        f"{bound:.3g})"
    )
    return MAX_ITER, message, Qm.max(axis=1), Qm, k, info
