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
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL, OPTIMAL_INACCURATE, PlanResult
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


def solve(problem, tol: float = 1e-10, max_iter: int | None = None) -> PlanResult:
    """Extended value iteration, then the exact finish.

    Parameters
    ----------
    tol : float
        EVI stops when ``span(T u - u) <= tol * (1 + max |c|)`` (average reward; ``c = r +
        beta``) or ``||T V - V|| <= tol * (1 + max |V|) (1 - gamma) / gamma`` (discounted);
        the finish then evaluates the greedy optimistic policy exactly and improves it until
        its Bellman residual is below ``1e-12`` of the scale (at most 100 steps).
    max_iter : int, optional
        EVI sweeps (default 100,000).
    """
    check_tol_iter(tol, max_iter)
    max_iter = 100_000 if max_iter is None else max_iter
    start = time.perf_counter()
    c = problem.r_hat + problem.reward_radius
    mask = problem.action_mask
    if problem.criterion == "discounted":
        out = _discounted(problem, c, mask, tol, max_iter)
    else:
        out = _average(problem, c, mask, tol, max_iter)
    status, message, fields, iterations = out
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


def _discounted(problem, c, mask, tol, max_iter):
    gamma = problem.discount
    S = problem.n_states
    V = np.zeros(S)
    stop = tol * (1.0 - gamma) / gamma if gamma > 0 else np.inf
    for it in range(1, max_iter + 1):  # noqa: B007 (EVI sweeps; it is reported)
        sigma, kernel, kstat = optimistic_backup(problem, V)
        Q = masked(c + gamma * sigma, mask)
        new = Q.max(axis=1)
        done = np.max(np.abs(new - V)) <= stop * (1.0 + np.abs(new).max())
        V = new
        if done:
            break
    else:
        return (
            MAX_ITER,
            f"EVI did not reach tol={tol:g} in {max_iter} sweeps",
            _fields_d(problem, V, Q, kernel),
            max_iter,
        )
    policy = greedy(Q)
    idx = np.arange(S)
    for _ in range(FINISH_STEPS):  # exact finish: optimistic policy iteration
        V_pi = evaluate_discounted(kernel[idx, policy], c[idx, policy], gamma)
        sigma, kernel, kstat = optimistic_backup(problem, V_pi)
        Q = masked(c + gamma * sigma, mask)
        if trouble := _kernel_trouble(kstat, mask):
            return NUMERICAL_ERROR, trouble, _fields_d(problem, V_pi, Q, kernel), it
        residual = float(np.max(Q.max(axis=1) - V_pi))
        V = V_pi
        if residual <= 1e-12 * (1.0 + np.abs(V).max()):
            return OPTIMAL, "", _fields_d(problem, V, Q, kernel), it
        policy = greedy(Q, policy, 1e-14)
    return (
        OPTIMAL_INACCURATE,
        f"the exact finish stopped after {FINISH_STEPS} steps at Bellman residual {residual:.3g}",
        _fields_d(problem, V, Q, kernel),
        it,
    )


def _fields_d(problem, V, Q, kernel) -> dict:
    return dict(
        value=float(np.mean(V)), x=V, values=V, q=Q, policy=greedy(Q), info={"kernel": kernel}
    )


def _average(problem, c, mask, tol, max_iter):
    S = problem.n_states
    u = np.zeros(S)
    scale = 1.0 + float(np.abs(np.where(mask, c, 0.0)).max())
    tau = 0.5  # aperiodicity transform u <- u + tau (T u - u): EVI converges on periodic chains
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
        sigma, kernel, kstat = optimistic_backup(problem, u)
        Q = masked(c + sigma, mask)
        diff = Q.max(axis=1) - u
        if np.ptp(diff) <= tol * scale:
            break
        u = u + tau * diff
        u -= u[0]
    else:
        gain = float((diff.max() + diff.min()) / 2)
        return (
            MAX_ITER,
            f"EVI did not reach span tol={tol:g} in {max_iter} sweeps",
            _fields_a(gain, u, Q, kernel),
            max_iter,
        )
    gain_evi = float((diff.max() + diff.min()) / 2)  # the gain lies in [min diff, max diff]
    policy = greedy(Q)
    idx = np.arange(S)
    for _ in range(FINISH_STEPS):  # exact finish
        K = kernel[idx, policy]
        if n_recurrent_classes(K) > 1:
            note = (
                "the optimistic policy's chain is multichain, so the gain is EVI's estimate "
                f"(within {np.ptp(diff):.2g})"
            )
            return OPTIMAL, note, _fields_a(gain_evi, u, Q, kernel), it
        try:
            g, h = evaluate_average(K, c[idx, policy])
        except EvaluationError as exc:
            return NUMERICAL_ERROR, str(exc), _fields_a(gain_evi, u, Q, kernel), it
        sigma, kernel, kstat = optimistic_backup(problem, h)
        Q = masked(c + sigma, mask)
        if trouble := _kernel_trouble(kstat, mask):
            return NUMERICAL_ERROR, trouble, _fields_a(g, h, Q, kernel), it
        residual = float(np.max(Q.max(axis=1) - g - h))
        if residual <= 1e-12 * scale:
            return OPTIMAL, "", _fields_a(g, h, Q, kernel), it
        policy = greedy(Q, policy, 1e-14)
    return (
        OPTIMAL_INACCURATE,
        f"the exact finish stopped after {FINISH_STEPS} steps at Bellman residual {residual:.3g}",
        _fields_a(g, h, Q, kernel),
        it,
    )


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
