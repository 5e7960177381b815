"""The discounted criterion: policy evaluation, the discounted occupancy, value iteration and
policy iteration with an inexact, warm-started Krylov evaluation for large or sparse models
(Howard's exact policy iteration is :mod:`optplan.dp.policy_iteration`'s, shared with the
average reward).

Every function here takes the transition law either dense ``(S, A, S)`` or as the
``(S·A, S)`` matrix of rows ``s·A + a`` (dense or ``scipy.sparse`` CSR: a sparse
:class:`~optplan.mdp.TabularMDP`'s ``P_rows``); a policy's chain is then a row gather of it,
and nothing is densified.


The policy evaluations' linear solves and the policy chains are :mod:`optplan.dp._linear`'s;
the start of a slowly mixing sparse model, :mod:`optplan.dp._flow`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..mdp import is_sparse
from ..result import MAX_ITER, NUMERICAL_ERROR, OPTIMAL
from ._common import EvaluationError, backup, greedy, masked, policy_model, start_policy
from ._flow import FLOW_MAX_ITER, _flow_iteration, _kept, _kept_start, _structured
from ._linear import (
    SPARSE_DIRECT_MAX_STATES,
    _GatheredChains,
    _krylov,
    dense_chain,
    evaluate_discounted,
)
from ._sweeps import sweeps as compiled_sweeps

#: From this many states a dense model's policy iteration (in the discounted fast path)
#: evaluates each policy iteratively, warm-started, instead of factorizing
#: ``I - discount P_pi`` (O(S^3) per policy): on random dense models with A = 4, discount
#: 0.95, it is ahead of the factorization from S = 100 on (medians of 7 models: 0.46 ms
#: against 0.65 ms at S = 100, 0.75 ms against 1.40 ms at S = 150; 0.47 against 0.45 ms at
#: S = 80).
DENSE_ITERATIVE_MIN_STATES = 100
#: Value-iteration sweeps that pick policy iteration's first policy: at most this many, and
#: they stop once the greedy policy changed in at most :data:`WARM_FRACTION` of the states for
#: :data:`WARM_STABLE` sweeps in a row. A sweep is one mat-vec with ``P``; on Taxi (S = 501)
#: 18 of them leave one policy evaluation instead of 16; on random models with 10 successors
#: about 5 leave three or four.
WARM_SWEEPS = 50
WARM_FRACTION = 1e-2
WARM_STABLE = 2
#: First evaluation of the inexact policy iteration: residual ``LOOSE_EVAL`` times the reward
#: scale; later ones :data:`EVAL_SHRINK` times the last Bellman residual, down to what the
#: certificate needs.
LOOSE_EVAL = 1e-3
EVAL_SHRINK = 0.01


class DiscountedPolicyIteration(NamedTuple):
    """Outcome of :func:`discounted_policy_iteration`.

    ``bound`` certifies the answer: ``||values - V*||_inf <= bound`` and the policy's own
    values are within ``bound`` of ``values`` (both from Bellman residuals, Puterman Prop.
    6.6.1: ``||V - V*|| <= ||T V - V|| / (1 - gamma)``). ``evaluations`` counts the policy
    evaluations (more than the policies when an evaluation was tightened)."""

    status: str
    message: str
    policy: np.ndarray
    values: np.ndarray
    q: np.ndarray
    bound: float
    iterations: int
    evaluations: int
    iterative: bool
    #: The policy's chain as the evaluations used it (``None`` when it is not at hand): the
    #: discounted occupancy can reuse it.
    chain: object = None


def discounted_policy_iteration(
    P,
    R: np.ndarray,
    mask: np.ndarray,
    discount: float,
    policy: np.ndarray | None = None,
    max_iter: int = 1_000,
    tol: float = 1e-10,
    evaluation: str = "auto",
    warm_sweeps: int = WARM_SWEEPS,
) -> DiscountedPolicyIteration:
    """Policy iteration for the discounted criterion, on dense or sparse models.

    Each policy's chain ``P_pi`` is a row gather of ``P`` (no loop over states). It is
    evaluated exactly (``evaluation="direct"``: dense LU, or SuperLU for a sparse chain) or
    inexactly (``"iterative"``: restarted GMRES on ``I - discount P_pi``, warm-started from
    the last values, to a residual that starts at ``LOOSE_EVAL`` times the reward scale and
    follows a tenth of the last Bellman residual down: inexact policy iteration, as madupite
    does). ``"auto"``: direct below :data:`DENSE_ITERATIVE_MIN_STATES` states (dense) or up to
    :data:`SPARSE_DIRECT_MAX_STATES` (sparse), iterative above.

    The improvement is greedy, keeping the incumbent on relative ties (``1e-12``). Direct:
    stops when the policy repeats (Howard). Iterative: stops once the certificate ``bound``
    (see :class:`DiscountedPolicyIteration`) is at most ``tol * max |V|`` (``tol`` absolute
    when ``V = 0``) and the policy repeats; an evaluation that cannot get there (GMRES stalls)
    ends with status ``numerical_error``.

    Parameters
    ----------
    P : array (S, A, S), or (S·A, S) dense or scipy.sparse CSR (rows ``s·A + a``)
    R, mask : arrays (S, A)
    discount : float in [0, 1)
    policy : array (S,) of int, optional
        Warm start (ignored when it takes an inadmissible action). Without one, up to
        ``warm_sweeps`` sweeps of value iteration from ``V = 0`` choose the first policy
        (their greedy one, once it held for :data:`WARM_STABLE` sweeps) and the first
        evaluation starts from their values.
    max_iter : int
        Largest number of improvements.
    tol : float
        Relative accuracy certified by the iterative evaluation.
    evaluation : {"auto", "direct", "iterative"}
    """
    S, A = R.shape
    rows = P if P.ndim == 2 else P.reshape(S * A, S)
    sparse = is_sparse(rows)
    if evaluation == "auto":
        iterative = S > SPARSE_DIRECT_MAX_STATES if sparse else S >= DENSE_ITERATIVE_MIN_STATES
    else:
        iterative = evaluation == "iterative"
    values = np.zeros(S)
    every = bool(mask.all())
    r_scale = float(np.abs(np.where(mask, R, 0.0)).max()) or 1.0
    vi_sweeps, how = 0, "value iteration"
    if policy is None and warm_sweeps > 0:
        gauss_seidel = sparse and iterative and compiled_sweeps() is not None
        policy, values, vi_sweeps, how = _first_policy(
            rows, R, mask, discount, warm_sweeps, tol, gauss_seidel, r_scale
        )
    policy = start_policy(R, mask, policy)
    idx = np.arange(S)
    if vi_sweeps:
        done = _certified(rows, R, mask, discount, policy, values, tol)
        if isinstance(done, DiscountedPolicyIteration):
            return done._replace(message=how.format(vi_sweeps))
        policy = done
    eval_tol = LOOSE_EVAL * r_scale
    q = None
    bound = np.inf
    evaluations = 0
    P_pi = None
    kernels = compiled_sweeps() if sparse and iterative and rows.format == "csr" else None
    gathered = None if kernels is None else _GatheredChains(rows, R, mask, kernels)
    chain = dense_chain if iterative and not sparse else policy_model
    if gathered is not None:  # each policy's chain gathered into one set of arrays
        policy, P_pi, r_pi = gathered.first(policy)
    for it in range(1, max_iter + 1):
        if P_pi is None:
            P_pi, r_pi = chain(rows, R, policy)
        try:
            evaluations += 1
            if iterative:
                values = _krylov(P_pi, r_pi, discount, values, eval_tol, "policy evaluation", True)
            else:
                values = evaluate_discounted(P_pi, r_pi, discount)
                if not np.isfinite(values).all():
                    raise EvaluationError("the policy's linear system is singular")
        except EvaluationError as exc:
            message = f"discounted policy iteration, iteration {it}: {exc}"
            q = q if q is not None else np.full((S, A), np.nan)
            return DiscountedPolicyIteration(
                NUMERICAL_ERROR, message, policy, values, q, np.inf, it, evaluations, iterative
            )
        if gathered is not None:  # backup, greedy and both residuals in one pass
            policy, values, q, new, bellman, evaluation_residual = gathered.improve(
                discount, policy, values
            )
        else:
            q = backup(rows, R, values, discount)
            qm = q if every else masked(q, mask)
            new = greedy(qm, policy, tol=1e-12)
            top = qm.max(axis=1)
            own = q[idx, policy]
            bellman = float(np.abs(top - values).max())
            evaluation_residual = float(np.abs(own - values).max())
        span = 1.0 - discount
        bound = max(bellman, evaluation_residual) / span
        scale = float(np.abs(values).max()) or 1.0
        same = bool((new == policy).all())  # NaN residuals: never certified below
        if same and (not iterative or bound <= tol * scale):
            return DiscountedPolicyIteration(
                OPTIMAL, "", policy, values, q, bound, it, evaluations, iterative, P_pi
            )
        if iterative:
            target = 0.5 * tol * scale * span
            eval_tol = max(target, min(eval_tol, EVAL_SHRINK * bellman)) if not same else target
        if not same:
            policy = new
            P_pi = None
            if gathered is not None:
                P_pi, r_pi = gathered.next
    message = f"discounted policy iteration did not stop in {max_iter} iterations"
    return DiscountedPolicyIteration(
        MAX_ITER, message, policy, values, q, bound, max_iter, evaluations, iterative
    )


def _first_policy(rows, R, mask, discount, warm_sweeps, tol, gauss_seidel, r_scale):
    """:func:`discounted_policy_iteration`'s first policy and values: by
    :func:`_flow_iteration` (compiled, sparse) on a slowly mixing model (:func:`_structured`)
    or where the model keeps its start (:func:`_kept_start`), else ``warm_sweeps`` Jacobi
    sweeps of value iteration from 0. Returns ``(policy, values, iterations, how)``;
    ``iterations`` is 0 unless the values met their target."""
    every = bool(mask.all())
    if gauss_seidel:
        kept = _kept_start(rows, R, mask, discount)
        if kept or _structured(rows, R.shape[1]):
            # the certificate asks bound <= tol * max|V|, not known yet: aim at tol times
            # max(1, max |V|) as it goes (a sweep changing by delta leaves a Bellman
            # residual of at most discount * delta)
            target = 0.5 * tol * (1.0 - discount)
            start = _kept(R, mask, discount) if kept else np.zeros(R.shape[0])
            out = _flow_iteration(rows, R, mask, every, discount, start, FLOW_MAX_ITER, target)
            return (*out, "modified policy iteration (Gauss-Seidel, flow order): {} iterations")
    target = 0.5 * tol * r_scale * (1.0 - discount)
    return (
        *_warm_start(rows, R, mask, discount, warm_sweeps, target),
        "value iteration: {} sweeps",
    )


def _certified(rows, R, mask, discount, policy, values, tol):
    """Value iteration met its target: certify ``values`` (the Jacobi Bellman residual of
    their greedy policy). The optimal result (its message to be set) when the bound is at most
    ``tol * max |V|``, else the greedy policy to start policy iteration from."""
    q = backup(rows, R, values, discount)
    qm = q if bool(mask.all()) else masked(q, mask)
    new = greedy(qm, policy, tol=1e-12)
    bellman = float(np.abs(qm.max(axis=1) - values).max())
    own = float(np.abs(q[np.arange(R.shape[0]), new] - values).max())
    bound = max(bellman, own) / (1.0 - discount)
    if bound <= tol * (float(np.abs(values).max()) or 1.0):
        return DiscountedPolicyIteration(OPTIMAL, "", new, values, q, bound, 0, 0, True)
    return new


def _warm_start(rows, R, mask, discount, sweeps, target):
    """Value iteration from 0 for at most ``sweeps`` sweeps, stopped once its greedy policy
    changed in at most :data:`WARM_FRACTION` of the states for :data:`WARM_STABLE` sweeps in
    a row: ``(greedy policy, values, 0)``; or once a sweep changed the values by at most
    ``target`` (their Bellman residual): ``(greedy policy, values, sweeps)``, the values
    those before that sweep (the ones the residual certifies)."""
    S = R.shape[0]
    V = np.zeros(S)
    policy, held = None, 0
    every = bool(mask.all())
    table = compiled_sweeps() if is_sparse(rows) and rows.format == "csr" else None
    if table is not None:  # compiled: the whole loop in one call
        policy = np.full(S, -1, dtype=np.intp)
        R = np.ascontiguousarray(R, dtype=np.float64)
        k = table["_jacobi_loop"](
            (rows.indptr, rows.indices, rows.data),
            R,
            np.ascontiguousarray(mask),
            every,
            discount,
            V,
            policy,
            sweeps,
            target,
            int(WARM_FRACTION * S),
            WARM_STABLE,
        )
        return policy, V, int(k)
    for k in range(1, sweeps + 1):
        qm = backup(rows, R, V, discount)
        qm = qm if every else masked(qm, mask)
        new = qm.argmax(axis=1)
        top = qm.max(axis=1)
        if float(np.abs(top - V).max()) <= target:
            return new, V, k
        V = top
        quiet = policy is not None and np.count_nonzero(new != policy) <= WARM_FRACTION * S
        held = held + 1 if quiet else 0
        policy = new
        if held >= WARM_STABLE:
            break
    return policy, V, 0


def value_iteration(
    P, R: np.ndarray, mask: np.ndarray, discount: float, tol: float, max_iter: int
) -> tuple[str, str, np.ndarray, int]:
    """Discounted value iteration from ``V = 0``; ``(status, message, V, iterations)``.

    Stops when ``||V_{k+1} - V_k|| < tol (1 - gamma) / (2 gamma)``, which guarantees
    ``||V - V*||_inf < tol`` (Puterman Thm 6.3.1). ``P`` dense ``(S, A, S)`` or the
    ``(S·A, S)`` rows, dense or sparse.
    """
    V = np.zeros(R.shape[0])
    threshold = tol * (1.0 - discount) / (2.0 * discount) if discount > 0 else np.inf
    step = np.inf
    for it in range(1, max_iter + 1):
        V_new = masked(backup(P, R, V, discount), mask).max(axis=1)
        step = np.max(np.abs(V_new - V))
        V = V_new
        if step < threshold:
            return OPTIMAL, "", V, it
    message = (
        f"value iteration did not reach tol={tol} in {max_iter} iterations (last step {step:.3g})"
    )
    return MAX_ITER, message, V, max_iter


#: ``warm_sweeps`` of :func:`discounted_policy_iteration` that the discounted fast path
#: passes for a dense model (a sweep reads all of ``P``: at S = 6,000, A = 4, 1.15 GB,
#: 0.1 s). On random dense models (A = 4, discount 0.95, S = 200 to 6,000) two sweeps leave
#: two policy evaluations, as the three the stability rule of :data:`WARM_STABLE` needs do;
#: none or one leave three or four.
DENSE_WARM_SWEEPS = 2
