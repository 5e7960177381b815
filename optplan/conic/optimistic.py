"""Conic path of ``OptimisticPlanning``: the optimistic MDP as one LP (L1 balls) or one
exponential-cone program (KL balls), the inner maximum replaced by its dual minimum.

A ball may move mass to any state, so the programs hold every column of a ball pair: a sparse
``p_hat`` is made dense first (:meth:`~optplan.OptimisticPlanning.dense_p_hat`, refused above
:data:`~optplan.problems.optimistic.DENSE_P_HAT_MAX_ENTRIES` entries, naming the size), and
the kernel in ``info["kernel"]`` is the ``(S, A, S)`` array either way (NaN where the program
does not determine it)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..result import MULTICHAIN, PlanResult
from ._common import admissible_pairs, conic_result, run_bias_stage, run_formulated


def _inner_dual(ball: str, P: np.ndarray, d: np.ndarray, V):
    """CVXPY expressions ``sigma[k] >= max_{q in B(P[k], d[k])} q . V`` (equal at the optimum
    over the auxiliary variables) for ``m`` pairs, with ``d > 0``; also the constraints they
    need."""
    m, S = P.shape
    if ball == "l1":
        mu = cp.Variable(m, name="mu")
        W = cp.Variable((m, S), name="w", nonneg=True)
        kappa = cp.Variable(m, name="kappa", nonneg=True)
        ones_m, ones_S = np.ones((m, 1)), np.ones((1, S))
        Z = (
            ones_m @ cp.reshape(V, (1, S), order="C")
            - cp.reshape(mu, (m, 1), order="C") @ ones_S
            + W
        )
        K = cp.reshape(kappa, (m, 1), order="C") @ ones_S
        cons = [Z <= K, -Z <= K]
        sigma = P @ V + cp.sum(cp.multiply(P, W), axis=1) + cp.multiply(d, kappa)
        return sigma, cons
    lam = cp.Variable(m, name="lam", nonneg=True)
    eta = cp.Variable(m, name="eta")
    k_idx, x_idx = np.nonzero(P > 0)
    t = cp.Variable(k_idx.size, name="t")
    sum_rows = sp.csr_matrix(
        (P[k_idx, x_idx], (k_idx, np.arange(k_idx.size))), shape=(m, k_idx.size)
    )
    # t >= rel_entr(lam, eta - V_x) = lam log(lam / (eta - V_x)), one exponential cone per
    # supported entry; its dual's third component is the kernel's flow into x
    cone = cp.constraints.ExpCone(-t, lam[k_idx], eta[k_idx] - V[x_idx])
    sigma = eta + cp.multiply(d, lam) - lam + sum_rows @ t
    # eta_k >= V_x on the zero-probability states; on the support the cone already forces
    # eta_k > V_x, so this is eta_k >= max V: one bound M >= V shared by all pairs (S + m
    # inequalities instead of one per zero entry), whose dual is the pair's leftover flow
    cons = [cone]
    if (P == 0).any():
        top = cp.Variable(name="max_v")
        cons += [eta[(P == 0).any(axis=1)] >= top, top >= V]
    return sigma, cons


def formulate(problem, gain: float | None = None, weights: np.ndarray | None = None) -> cp.Problem:
    """Discounted: ``min mean(V) s.t. V(s) >= r + beta + gamma sigma_k(V)``; average (stage 1):
    ``min g s.t. g + h(s) >= r + beta + sigma_k(h)``, ``h[0] = 0``. Constraint 0 holds the
    Bellman inequalities of the pairs with a ball (``d > 0``), constraint 1 those of the pairs
    with known transitions (``d = 0``), when each kind exists; then the inner duals'
    constraints.

    Average stage 2 (``gain`` and the stationary ``weights`` of stage 1 given): ``min sum h
    s.t. gain + h(s) >= r + beta + sigma_k(h)``, ``weights . h = 0``; every feasible ``h`` is
    at least the bias ``h*`` with ``weights . h* = 0``, which is feasible, so the minimizer is
    ``h*`` (as for the known-model LP, :func:`optplan.conic.average_reward.formulate_bias`).
    """
    S = problem.n_states
    s_idx, a_idx = admissible_pairs(problem.action_mask)
    P = problem.dense_p_hat()[s_idx, a_idx]
    c = problem.r_hat[s_idx, a_idx] + problem.reward_radius[s_idx, a_idx]
    d = problem.radius[s_idx, a_idx]
    average = problem.criterion == "average"
    V = cp.Variable(S, name="h" if average else "V")
    gamma = 1.0 if average else problem.discount
    lhs = V[s_idx]
    if average:
        g = cp.Variable(name="g") if gain is None else gain
        lhs = lhs + g
    ball, known = d > 0, d == 0
    constraints, extra = [], []
    if ball.any():
        sigma, extra = _inner_dual(problem.ball, P[ball], d[ball], V)
        constraints.append(lhs[np.flatnonzero(ball)] >= c[ball] + gamma * sigma)
    if known.any():
        constraints.append(lhs[np.flatnonzero(known)] >= c[known] + gamma * (P[known] @ V))
    constraints += extra
    if not average:
        return cp.Problem(cp.Minimize(cp.sum(V) / S), constraints)
    if gain is None:
        return cp.Problem(cp.Minimize(g), [*constraints, V[0] == 0])
    return cp.Problem(cp.Minimize(cp.sum(V)), [*constraints, weights @ V == 0])


def _bellman_violation(prob, problem) -> float:
    """Largest violation of the Bellman inequalities at the solver's point."""
    n = int((problem.radius > 0).any()) + int((problem.radius == 0).any())
    return max(float(np.max(c.violation(), initial=0.0)) for c in prob.constraints[:n])


def solve(problem, solver: str, solver_options: dict | None = None) -> PlanResult:
    average = problem.criterion == "average"
    multichain = problem.communication() if average else ""
    result = _solve(problem, solver, solver_options)
    if multichain:
        return _constant_gain(problem, result, multichain, solver)
    return result


def _constant_gain(problem, result: PlanResult, why: str, solver: str) -> PlanResult:
    """A model that is not weakly communicating may still have a constant optimistic gain (the
    balls can move mass out of its closed sets): the programs' answer stands when its bias
    proves it, ``|T h - h - g| <= 1e-6 (1 + max |r + beta|)`` (every state's optimal gain then
    lies within that of ``g``); otherwise the gain differs between states, or the programs
    could not tell (status ``multichain``)."""
    c = problem.r_hat + problem.reward_radius
    scale = 1.0 + float(np.abs(np.where(problem.action_mask, c, 0.0)).max())
    if result.bias is not None and np.isfinite(result.value):
        certificate = problem.bias_residual(result.bias, result.value).get("x_alt")
        if certificate is not None and certificate[0] <= 1e-6 * scale:
            return result
        detail = (
            f"|T h - h - g| = {certificate[0]:.3g} at the programs' answer" if certificate else ""
        )
    else:
        detail = f"the programs ended {result.status}"
    message = f"{why}, and the optimistic gain is not shown constant ({detail})"
    return PlanResult(
        value=np.nan, status=MULTICHAIN, message=message, method="conic", solver=solver
    )


def _solve(problem, solver: str, solver_options: dict | None) -> PlanResult:
    average = problem.criterion == "average"
    why = (
        "g = max(r + beta) with h = 0 is feasible and g >= min r"
        if average
        else "the optimistic fixed point is feasible and bounded below"
    )
    prob, result, failed = run_formulated(formulate, problem, solver, solver_options, why)
    if failed:
        return failed
    y, kernel = _duals_and_kernel(problem, prob)
    V = prob.var_dict["h" if average else "V"].value
    if average:
        g = float(prob.var_dict["g"].value)
        stationary = y.sum(axis=1) / max(y.sum(), 1e-300)
        # stage 1's point is exactly feasible at g + its own violation, so round-off cannot make
        # stage 2 infeasible
        prob2 = formulate(problem, g + _bellman_violation(prob, problem), stationary)
        result, failed = run_bias_stage(
            prob2, solver, solver_options, result, multiplier=y, info={"lp_gain": g}
        )
        if failed:
            return failed
        V = prob2.var_dict["h"].value
        y2, kernel2 = _duals_and_kernel(problem, prob2)
        kernel = np.where(np.isnan(kernel2), kernel, kernel2)
        V = V - V[0]
    # the policy: the action carrying the state's occupancy (every state has one in the
    # discounted program, whose weights cover all states; under average reward a transient
    # state may carry none, and its action is not determined by the program: -1)
    carried = y.sum(axis=1) > 0
    policy = np.where(carried, y.argmax(axis=1), -1)
    fields = dict(values=V, x=V, multiplier=y, policy=policy, info={"kernel": kernel})
    if average:
        fields.update(value=g, gain=g, bias=V)
    else:
        fields.update(value=float(np.mean(V)))
    return conic_result(result, **fields)


def _duals_and_kernel(problem, prob) -> tuple[np.ndarray, np.ndarray]:
    """The Bellman inequalities' duals ``y[s, a]`` (the optimistic occupancy) and the
    optimistic kernel ``q*[s, a, :]`` where the program determines it (pairs with ``y > 0``;
    NaN elsewhere): L1 ``q = p + (alpha - beta) / (gamma y)`` from the duals of
    ``+-(V - mu + w) <= kappa``; KL ``q = lam p / (eta - V)`` from the cones' duals, with the
    flow through ``eta >= max V`` (the leftover mass) on the best state;
    ``q = p`` for known pairs."""
    S, A = problem.n_states, problem.n_actions
    s_idx, a_idx = admissible_pairs(problem.action_mask)
    P = problem.dense_p_hat()[s_idx, a_idx]
    d = problem.radius[s_idx, a_idx]
    ball, known = d > 0, d == 0
    average = problem.criterion == "average"
    gamma = 1.0 if average else problem.discount
    cons = iter(prob.constraints)
    y = np.zeros(s_idx.size)
    if ball.any():
        y[ball] = next(cons).dual_value
    if known.any():
        y[known] = next(cons).dual_value
    y = np.clip(y, 0.0, None)
    q = np.full(P.shape, np.nan)
    q[known] = P[known]
    # a pair's kernel is determined where its inequality carries occupancy; an interior-point
    # solver leaves y ~ 1e-12 / slack on slack pairs, and q = flow / y is noise there
    tight = ball & (y > 1e-6 * y.max(initial=0.0))
    if tight.any() and gamma > 0:
        at = tight[ball]  # tight pairs among the ball pairs
        if problem.ball == "l1":
            alpha, beta = next(cons).dual_value, next(cons).dual_value
            qb = P[ball][at] + (alpha[at] - beta[at]) / (gamma * y[tight])[:, None]
        else:
            Pb = P[ball]
            k_idx, x_idx = np.nonzero(Pb > 0)
            flow = np.zeros(Pb.shape)
            flow[k_idx, x_idx] = next(cons).dual_value[2]
            has_zero = (Pb == 0).any(axis=1)
            if has_zero.any():
                # the flow through eta_k >= max V (positive only where eta_k = max V) goes to
                # the best state: the leftover mass when it has probability 0, all of q when
                # it is the pair's only reachable best (lam = 0, q = p on a best state)
                V = prob.var_dict["h" if average else "V"].value
                k0 = np.flatnonzero(has_zero)
                flow[k0, int(np.argmax(V))] += next(cons).dual_value
            qb = np.clip(flow[at], 0.0, None) / (gamma * y[tight])[:, None]
        # a kernel off the simplex (beyond the solver's accuracy) is not determined either
        qb[np.abs(qb.sum(axis=1) - 1.0) > 1e-6] = np.nan
        q[tight] = qb
    occupancy = np.zeros((S, A))
    occupancy[s_idx, a_idx] = y
    kernel = np.full((S, A, S), np.nan)
    kernel[s_idx, a_idx] = q
    return occupancy, kernel
