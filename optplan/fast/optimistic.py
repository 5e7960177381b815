"""Fast path of ``OptimisticPlanning``: extended value iteration (EVI) with the batched index
kernels, then an exact finish (optimistic policy iteration: evaluate the optimistic policy on
its optimistic kernel exactly, improve, repeat)."""

from __future__ import annotations

import time

import numpy as np

from ..dp import (
    EvaluationError,
    evaluate_average,
    evaluate_discounted,
    greedy,
    masked,
    n_recurrent_classes,
)
from ..result import MAX_ITER, MULTICHAIN, NUMERICAL_ERROR, OPTIMAL, OPTIMAL_INACCURATE, PlanResult
from ._options import check_tol_iter
from .kl_ball import kl_ball_index
from .l1_ball import l1_ball_index

#: Optimistic-policy-iteration steps of the exact finish (L1: finite; KL: converges like Newton).
FINISH_STEPS = 100


def optimistic_backup(problem, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``sigma[s, a] = max_{q in B} q . v``, the maximizing kernel ``q*[s, a, :]`` and the
    kernels' statuses, over all pairs in one batched call per kind (ball / known)."""
    P, d = problem.p_hat, problem.radius
    S, A, _ = P.shape
    sigma = np.einsum("sat,t->sa", P, v)
    kernel = P.copy()
    status = np.full((S, A), OPTIMAL, dtype="<U20")
    ball = (d > 0) & problem.action_mask
    if ball.any():
        index = l1_ball_index if problem.ball == "l1" else kl_ball_index
        res = index(P[ball], v, d[ball], validate=False)
        sigma[ball], kernel[ball], status[ball] = res.value, res.x, res.status
    return sigma, kernel, status


def solve(problem, tol: float = 1e-6, max_iter: int | None = None) -> PlanResult:
    """Extended value iteration, then the exact finish.

    Parameters
    ----------
    tol : float
        EVI stops by the span rule: ``span(T u - u) <= tol * scale`` (average reward, with
        the aperiodicity transform ``u <- u + (T u - u) / 2``) or ``<= tol * scale (1 -
        gamma) / gamma`` (discounted: the greedy policy is then ``tol * scale``-optimal,
        Puterman Thm 6.6.6), ``scale = 1 + max |r + beta|``. The finish
        then evaluates the greedy optimistic policy exactly on its optimistic kernel and
        improves it (optimistic policy iteration) until the Bellman residual of the evaluated
        values is below ``1e-12`` of the scale, at most 100 steps: that residual, not EVI's
        tolerance, is what ``optimal`` certifies.
    max_iter : int, optional
        EVI sweeps (default 2,000); the finish starts from EVI's policy either way, and the
        status is ``max_iter`` only when EVI stopped at the cap and the finish fails too.
    """
    check_tol_iter(tol, max_iter)
    max_iter = 2_000 if max_iter is None else max_iter
    start = time.perf_counter()
    c = problem.r_hat + problem.reward_radius
    if problem.criterion == "average" and (why := problem.communication()):
        status, message, fields, iterations = MULTICHAIN, why, {"value": np.nan}, 0
    else:
        status, message, fields, iterations = _evi_and_finish(problem, c, tol, max_iter)
    return PlanResult(
        status=status,
        message=message,
        method="fast",
        solver=f"evi-{problem.ball}",
        iterations=iterations,
        solve_time=time.perf_counter() - start,
        **fields,
    )


def _kernel_trouble(status: np.ndarray, mask: np.ndarray) -> str:
    bad = (status != OPTIMAL) & mask
    if not bad.any():
        return ""
    s, a = map(int, np.argwhere(bad)[0])
    return f"the inner {status[s, a]} at (s, a) = ({s}, {a})"


def _evi_and_finish(problem, c, tol, max_iter):
    mask, S = problem.action_mask, problem.n_states
    average = problem.criterion == "average"
    gamma = 1.0 if average else problem.discount
    scale = 1.0 + float(np.abs(np.where(mask, c, 0.0)).max())
    u = np.zeros(S)
    sweeps, converged, gap = 0, False, np.inf
    while sweeps < max_iter and not converged:  # EVI sweeps
        sweeps += 1
        sigma, kernel, kstat = optimistic_backup(problem, u)
        Q = masked(c + gamma * sigma, mask)
        step = Q.max(axis=1) - u
        if average:
            gap = float(np.ptp(step))
            converged = gap <= tol * scale
            u = u + 0.5 * step  # aperiodicity transform: converges on periodic chains too
            u -= u[0]
        else:  # span rule (Puterman Thm 6.6.6): the greedy policy is then tol-optimal
            gap = float(np.ptp(step))
            converged = gamma == 0 or gap <= tol * (1 - gamma) / gamma * scale
            u = u + step
    note = "" if converged else f"EVI stopped at {max_iter} sweeps (gap {gap:.3g}); "
    policy, idx = greedy(Q), np.arange(S)
    fields = _fields(problem, float(np.mean(u)) if not average else np.nan, u, Q, kernel)
    for step_no in range(1, FINISH_STEPS + 1):  # exact finish: optimistic policy iteration
        K = kernel[idx, policy]
        if average:
            if n_recurrent_classes(K) > 1:
                # EVI's own estimate: the gain lies in [min step, max step]
                message = (
                    f"{note}the optimistic policy's chain is multichain, so the gain is EVI's "
                    f"estimate (within {gap:.2g})"
                )
                fields = _fields(problem, float((step.max() + step.min()) / 2), u, Q, kernel)
                status = OPTIMAL if converged else MAX_ITER
                return status, message, fields, sweeps
            try:
                g, v = evaluate_average(K, c[idx, policy])
            except EvaluationError as exc:
                return NUMERICAL_ERROR, str(exc), fields, sweeps
        else:
            g, v = np.nan, evaluate_discounted(K, c[idx, policy], gamma)
        sigma, kernel, kstat = optimistic_backup(problem, v)
        Q = masked(c + gamma * sigma, mask)
        fields = _fields(problem, g, v, Q, kernel)
        if trouble := _kernel_trouble(kstat, mask):
            return NUMERICAL_ERROR, note + trouble, fields, sweeps
        residual = float(np.max(Q.max(axis=1) - v - (g if average else 0.0)))
        if residual <= 1e-12 * (scale if average else 1.0 + np.abs(v).max()):
            fields["info"]["finish_steps"] = step_no
            message = note + "the exact finish reached the fixed point" if note else ""
            return OPTIMAL, message, fields, sweeps
        policy = greedy(Q, policy, 1e-14)
    message = (
        f"{note}the exact finish stopped after {FINISH_STEPS} steps at residual {residual:.3g}"
    )
    return (MAX_ITER if note else OPTIMAL_INACCURATE), message, fields, sweeps


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
