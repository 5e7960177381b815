"""Fast path of ``HittingTimes``: stochastic-shortest-path policy iteration, one target at a
time (a loop over targets; each iteration is vectorized over states and actions)."""

from __future__ import annotations

import time

import numpy as np

from .._checks import OptplanError
from ..dp import EvaluationError, greedy, masked, solve_system
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL, PlanResult
from ._options import check_tol_iter
from ._result import fast_result


def steps_toward(P: np.ndarray, allowed: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """A proper policy towards ``goal``: states are settled in rounds, each taking the
    ``allowed`` action with the most probability on the states settled before it (``goal``
    first); every round settles the states whose best mass is at least half the round's
    largest. Each settled state moves to earlier ones with positive probability, so ``goal``
    is reached with probability 1 from every state that gets an action; ``-1`` where none
    does. Preferring large masses (a widest-path tree) keeps the first evaluation well
    conditioned: a breadth-first step along a mass of 1e-94 is proper too, but its system
    ``I - P_NN`` is singular in double precision."""
    edges = np.where(allowed[:, :, None], P, 0.0)
    return _settle(lambda settled: edges[:, :, settled].sum(axis=2), goal)


def _settle(mass_on, goal: np.ndarray) -> np.ndarray:
    """The rounds of :func:`steps_toward`; ``mass_on(settled)`` is the ``(S, A)`` mass of each
    allowed pair on the settled states (0 for a pair not allowed)."""
    S = goal.size
    settled = goal.copy()
    policy = np.full(S, -1)
    for _ in range(S):  # rounds (each settles at least one state)
        mass = mass_on(settled)
        best = np.where(settled, 0.0, mass.max(axis=1))
        top = best.max()
        if not top > 0:
            break
        pick = best >= 0.5 * top
        policy[pick] = mass[pick].argmax(axis=1)
        settled |= pick
    return policy


def escape_matrix(P_N: np.ndarray, P_out: np.ndarray, pol: np.ndarray) -> np.ndarray:
    """``I - P_NN`` of policy ``pol`` with its diagonal computed as the mass that leaves each
    state (to the other states of ``N`` and to the target), summed from the small entries:
    ``1 - P(s, a, s)`` cancels to 0 when ``P(s, a, s) = 1 - 1e-300`` rounds to 1, and the
    system turns singular although the policy is proper (Grassmann, Taksar and Heyman 1985
    use the same complement for stationary distributions)."""
    n = P_N.shape[0]
    rows = np.arange(n)
    M = -P_N[rows, pol]
    M[rows, rows] = 0.0
    M[rows, rows] = P_out[rows, pol] - M.sum(axis=1)
    return M


def solve(problem, max_iter: int = 1_000, tol: float = 1e-12) -> PlanResult:
    """Policy iteration per target ``t`` on the states ``N`` that reach ``t`` (``t``
    excluded): evaluate ``T_N = (I - P_NN)^{-1} 1``, improve to ``argmin_a 1 + P(s, a) T``
    over the actions that stay among the states reaching ``t``, keeping the incumbent on
    ties (``tol``, relative); stop when the policy repeats. The start (:func:`steps_toward`)
    is proper, and so is every improvement (Bertsekas and Tsitsiklis 1991)."""
    check_tol_iter(tol, max_iter)
    mdp = problem.mdp
    if mdp.sparse:
        return _solve_sparse(problem, max_iter, tol)
    P = mdp.P
    S = mdp.n_states
    start = time.perf_counter()
    reach, stays = problem.reach, problem.stays()
    T = np.full((S, S), np.inf)
    policy = np.full((S, S), -1)
    status, message, iterations = OPTIMAL, "", 0
    for t in range(S):  # loop over targets
        N = reach[t].copy()
        N[t] = False
        idx = np.flatnonzero(N)
        T[t, t] = 0.0
        if not idx.size:
            continue
        goal = np.zeros(S, dtype=bool)
        goal[t] = True
        pol = steps_toward(P, stays[t], goal)[idx]
        P_N = P[np.ix_(idx, np.arange(P.shape[1]), idx)]  # (n, A, n): mass to t drops out
        P_out = P[idx, :, t]  # (n, A): mass to the target
        allowed = stays[t][idx]

        def evaluate(pol, x, P_N=P_N, P_out=P_out):
            times = solve_system(
                escape_matrix(P_N, P_out, pol), np.ones(pol.size), "a hitting time"
            )
            return times, 1.0 + P_N @ times

        times, pol, it, st, msg = _improve(evaluate, pol, allowed, idx, t, max_iter, tol)
        if st != OPTIMAL:
            status, message = st, msg
        iterations = max(iterations, it)
        T[t, idx] = times
        policy[t, idx] = pol
    return _result(start, T, policy, iterations, status, message)


def _result(start: float, T: np.ndarray, policy: np.ndarray, iterations: int, status, message):
    """The ``PlanResult`` of the hitting times ``T[t, s]`` (value: the diameter, the largest
    off-diagonal time)."""
    S = T.shape[0]
    off = ~np.eye(S, dtype=bool)
    return fast_result(
        "policy_iteration",
        start,
        iterations,
        value=float(T[off].max()) if S > 1 else 0.0,
        x=T,
        status=status,
        message=message,
        values=T,
        policy=policy,
    )


def _improve(evaluate, pol, allowed, idx, t: int, max_iter: int, tol: float):
    """Policy iteration for the hitting times to target ``t`` from the states ``idx``:
    ``evaluate(pol, previous_times) -> (times, q)`` evaluates a policy (``q`` the one-step
    look-ahead over ``allowed`` actions). Returns ``(times, policy, iterations, status,
    message)``; a failed evaluation or a time below one step (rounding) gives NaN times and a
    ``numerical_error`` status."""
    status, message, it = OPTIMAL, "", 0
    times = None
    try:
        for it in range(1, max_iter + 1):  # noqa: B007 (it is reported)
            times, q = evaluate(pol, times)
            new = greedy(masked(-q, allowed), pol, tol=tol)
            if np.array_equal(new, pol):
                break
            pol = new
        else:
            status = MAX_ITER
            message = f"policy iteration for target {t} did not stop in {max_iter} iterations"
    except EvaluationError as err:
        return np.full(idx.size, np.nan), pol, it, NUMERICAL_ERROR, f"target {t}: {err}"
    if status == OPTIMAL and not (times >= 1.0 - 1e-9).all():
        # each time from s != t is at least one step: less is rounding, not an answer
        worst = int(idx[np.argmin(times)])
        message = (
            f"target {t}: the policy evaluation gave a hitting time of {times.min():.3g} < 1 "
            f"from state {worst}: the transition masses are too small for double precision"
        )
        return np.full(idx.size, np.nan), pol, it, NUMERICAL_ERROR, message
    return times, pol, it, status, message


#: Above this many states a sparse policy's hitting times come from restarted GMRES (a random
#: chain's LU fills in), below from SuperLU.
SPARSE_HIT_DIRECT_MAX = 2_000


def sparse_steps_toward(rows, allowed: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """:func:`steps_toward` on the CSR rows ``(S·A, S)``: each round's mass on the settled
    states is one sparse mat-vec."""
    S, A = allowed.shape
    return _settle(
        lambda settled: np.where(allowed, (rows @ settled.astype(np.float64)).reshape(S, A), 0.0),
        goal,
    )


def _sparse_evaluate(rows, idx: np.ndarray, pol: np.ndarray, t: int, A: int, x0, what: str):
    """``T_N = (I - P_NN)^{-1} 1`` of the policy ``pol`` on the states ``idx``, with the
    diagonal taken as the mass leaving each state (:func:`escape_matrix`): SuperLU up to
    :data:`SPARSE_HIT_DIRECT_MAX` states, restarted GMRES from ``x0`` above, its residual
    checked in the inf-norm."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import gmres, spsolve

    n = idx.size
    chain = rows[idx * A + pol]  # (n, S)
    P_out = np.asarray(chain[:, t].todense()).ravel()
    P_N = chain[:, idx].tocsr()
    diag = P_N.diagonal()
    off = P_N - sp.diags(diag)
    escape = P_out + np.asarray(off.sum(axis=1)).ravel()
    M = (sp.diags(escape) - off).tocsc()
    ones = np.ones(n)
    with np.errstate(all="ignore"):
        if n <= SPARSE_HIT_DIRECT_MAX:
            try:
                x = spsolve(M, ones)
            except RuntimeError as err:  # an exactly singular factor
                raise EvaluationError(f"{what}: {err}") from err
        else:
            x = x0.copy()
            for _ in range(4):
                res = ones - M @ x
                if float(np.abs(res).max()) <= 1e-10:
                    break
                # a 2-norm of 1e-11 sqrt(n) (each entry's share near 1e-11), above the
                # rounding floor of M x, where GMRES would restart without progress
                atol = 1e-11 * np.sqrt(n)
                dx, _ = gmres(M, res, rtol=0.0, atol=atol, restart=50, maxiter=50)
                x = x + dx
    if not np.isfinite(x).all() or float(np.abs(ones - M @ x).max()) > 1e-8 * max(
        1.0, float(np.abs(x).max())
    ):
        raise EvaluationError(f"{what}: the sparse system I - P_NN is singular or unsolved")
    return x


def target_times(mdp, t: int, max_iter: int = 1_000, tol: float = 1e-12, support=None):
    """Minimal expected hitting times to the one target ``t`` of a sparse (or dense) model,
    by policy iteration on its ``(S·A, S)`` rows: ``(times, policy, iterations, status,
    message)``, ``times`` of shape ``(S,)`` (``inf`` where ``t`` is not surely reachable),
    ``policy`` ``-1`` where undefined. Each improvement is one sparse mat-vec over all
    states and actions; each evaluation one sparse solve (:func:`_sparse_evaluate`)."""
    from ..problems.hitting_time import reaching, staying, support_rows

    check_tol_iter(tol, max_iter)
    S, A = mdp.n_states, mdp.n_actions
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < S:
        raise OptplanError(f"target t must be a state index in [0, {S}), got {t!r}")
    t = int(t)
    rows = mdp.P_rows
    if support is None:
        support = support_rows(mdp)
    mask = mdp.action_mask
    reach = reaching(support, mask, t)
    stays = staying(support, mask, reach)
    times = np.where(reach, 0.0, np.inf)
    policy = np.full(S, -1)
    N = reach.copy()
    N[t] = False
    idx = np.flatnonzero(N)
    if not idx.size:
        return times, policy, 0, OPTIMAL, ""
    goal = np.zeros(S, dtype=bool)
    goal[t] = True
    pol = sparse_steps_toward(rows, stays, goal)[idx]
    allowed = stays[idx]
    v = np.zeros(S)

    def evaluate(pol, x):
        x = _sparse_evaluate(
            rows, idx, pol, t, A, np.zeros(idx.size) if x is None else x, "a hitting time"
        )
        v[idx] = x
        return x, 1.0 + (rows @ v).reshape(S, A)[idx]

    x, pol, it, status, message = _improve(evaluate, pol, allowed, idx, t, max_iter, tol)
    times[idx] = x
    policy[idx] = pol
    return times, policy, it, status, message


def _solve_sparse(problem, max_iter: int, tol: float) -> PlanResult:
    """:func:`solve` for a sparse model: :func:`target_times` for every target (the loop over
    targets; each one's work is sparse and vectorized)."""
    from ..problems.hitting_time import support_rows

    mdp = problem.mdp
    S = mdp.n_states
    start = time.perf_counter()
    support = support_rows(mdp)
    T = np.empty((S, S))
    policy = np.empty((S, S), dtype=int)
    status, message, iterations = OPTIMAL, "", 0
    for t in range(S):  # loop over targets
        T[t], policy[t], it, st, msg = target_times(mdp, t, max_iter, tol, support)
        iterations = max(iterations, it)
        if st != OPTIMAL and status == OPTIMAL:
            status, message = st, msg
    return _result(start, T, policy, iterations, status, message)
