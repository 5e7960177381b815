"""Fast path of ``DiscountedPlanning``: policy iteration or value iteration (vectorized), on
dense or sparse models."""

from __future__ import annotations

import time

import numpy as np

from .._checks import OptplanError
from ..dp import (
    DENSE_ITERATIVE_MIN_STATES,
    EvaluationError,
    backup,
    discounted_occupancy,
    discounted_policy_iteration,
    greedy,
    masked,
    policy_iteration,
    policy_model,
    value_iteration,
)
from ..dp._linear import dense_chain, sparse_chain
from ..dp.discounted import DENSE_WARM_SWEEPS, WARM_SWEEPS
from ..result import NUMERICAL_ERROR, OPTIMAL, PlanResult
from ._options import check_algorithm, check_tol_iter
from ._result import fast_result

ALGORITHMS = ("policy_iteration", "value_iteration")
EVALUATIONS = ("auto", "direct", "iterative")


def solve(
    problem,
    algorithm: str = "policy_iteration",
    tol: float = 1e-10,
    max_iter: int | None = None,
    evaluation: str = "auto",
) -> PlanResult:
    """Solve a discounted MDP (``P`` dense or sparse; a sparse model is never densified).

    Parameters
    ----------
    algorithm : {"policy_iteration", "value_iteration"}
        Policy iteration (:func:`optplan.dp.discounted_policy_iteration` on sparse models and
        on dense ones from :data:`~optplan.dp.DENSE_ITERATIVE_MIN_STATES` states, Howard's
        :func:`optplan.dp.policy_iteration` on smaller dense ones) or value iteration
        stopped when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which guarantees
        ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1).
    tol : float
        Value iteration: absolute accuracy. Policy iteration with an iterative evaluation:
        the relative accuracy ``||V - V*||_inf <= tol * max |V|`` its Bellman residual
        certifies (exact evaluations: the tie tolerance ``1e-12`` only).
    max_iter : int, optional
        Default 1,000 (policy iteration) or 1,000,000 (value iteration).
    evaluation : {"auto", "direct", "iterative"}
        How policy iteration evaluates a policy: a factorization of ``I - gamma P_pi``
        (dense LU, or SuperLU on a sparse model), a warm-started GMRES solve (inexact policy
        iteration), or by size (``"auto"``: see :func:`optplan.dp.discounted_policy_iteration`).

    The result's ``message`` carries the certified bound ``||V - V*||_inf`` when an
    iterative evaluation was used; the occupancy is then solved by GMRES too (to 1e-13).
    """
    check_algorithm(algorithm, ALGORITHMS)
    if evaluation not in EVALUATIONS:
        raise OptplanError(f"evaluation must be one of {EVALUATIONS}, got {evaluation!r}")
    if max_iter is None:
        max_iter = 1_000 if algorithm == "policy_iteration" else 1_000_000
    check_tol_iter(tol, max_iter)
    mdp = problem.mdp
    R, mask, gamma = mdp.R, mdp.action_mask, mdp.discount
    S = mdp.n_states
    P = mdp.P_rows if mdp.sparse else mdp.P
    start = time.perf_counter()
    iterative = False
    evaluated = None
    if algorithm == "policy_iteration":
        howard = (
            not mdp.sparse
            and evaluation != "iterative"
            and (evaluation == "direct" or S < DENSE_ITERATIVE_MIN_STATES)
        )
        if howard:
            status, message, policy, V, Q, _, it = policy_iteration(
                P, R, mask, gamma, None, max_iter
            )
        else:
            warm = WARM_SWEEPS if mdp.sparse else DENSE_WARM_SWEEPS
            out = discounted_policy_iteration(
                P, R, mask, gamma, None, max_iter, tol, evaluation, warm_sweeps=warm
            )
            status, message, policy, V, Q, it = (
                out.status,
                out.message,
                out.policy,
                out.values,
                out.q,
                out.iterations,
            )
            iterative = out.iterative
            evaluated = out.chain  # the final policy's chain, when the evaluations had it
            if iterative and status == OPTIMAL:
                how = out.message or (
                    f"inexact policy iteration: {out.evaluations} iterative evaluations"
                )
                message = f"{how}, certified ||V - V*||_inf <= {out.bound:.3g}"
    else:
        status, message, V, it = value_iteration(P, R, mask, gamma, tol, max_iter)
        Q = backup(P, R, V, gamma)
        policy = greedy(masked(Q, mask))
    # an iterative solve reads the policy's rows in place (compiled, when numba is installed)
    chain = (sparse_chain if mdp.sparse else dense_chain) if iterative else policy_model
    if evaluated is None:
        P_pi, _ = chain(mdp.P_rows if mdp.sparse else P, R, policy)
    else:
        P_pi = evaluated
    try:
        d = discounted_occupancy(P_pi, problem.weights, gamma, iterative=iterative)
    except EvaluationError as exc:  # an iterative solve that stalled: a status, no number
        d = np.full(S, np.nan)
        status, message = NUMERICAL_ERROR, f"{message}; {exc}".strip("; ")
    occupancy = np.zeros_like(R)
    occupancy[np.arange(S), policy] = d
    return fast_result(
        algorithm,
        start,
        it,
        value=float(mdp.initial @ V),
        x=V,
        multiplier=occupancy,
        status=status,
        message=message,
        values=V,
        q=masked(Q, mask),
        policy=policy,
        occupancy=occupancy,
    )
