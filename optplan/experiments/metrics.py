r"""Regret and exploration metrics, computed exactly from the true model.

Every function here is a pure function of arrays, so the run loop, the result store and the
tests share one definition of each metric.

Settings (``criterion``)
------------------------
``"average"`` (continuing, undiscounted; accelerating-ucb-indices-mdp §2)
    The oracle earns the optimal gain ``g*`` per step. Pseudo-regret after ``T`` steps is
    ``sum_t (g* - R[s_t, a_t])``; realized regret is ``T g* - sum_t r_t``.
``"discounted"`` (continuing, discounted; bayesian-methods-tabular-rl)
    The oracle follows a discount-optimal policy ``pi*`` from the same initial distribution;
    its expected reward at step ``t`` is ``mu_0 P_pi*^t r_pi*`` (exact, by propagating the
    state distribution). Pseudo-regret is ``sum_t (E[oracle r_t] - R[s_t, a_t])``; realized
    regret uses the observed ``r_t`` instead.
``"finite_horizon"`` (episodic; k-learning Eq. 4)
    Pseudo-regret sums the action gaps ``V*_l(s_l) - Q*_l(s_l, a_l)``, whose expectation over
    an episode is that episode's value gap ``V*_0(s_0) - V^pi_0(s_0)``. The oracle's expected
    reward at layer ``l`` is ``d_l r_pi*,l`` with ``d_l`` its state distribution, so realized
    regret at the end of each episode is ``sum_episodes (V*_0 - return)``.

Normalized regret divides by the oracle's expected cumulative reward (``NaN`` where it is not
positive).

*Draft regret* (bayesian-methods-tabular-rl; its code's regret of an agent against
``run_oracle_experiment``; docs/sources.md §1 "Regret") uses realized rewards only: the oracle, the
true model's optimal policy for the run's criterion (for the draft's continuing environments,
discounted at their ``gamma = 0.9``), is *run* in the same environment from the same
environment seed for as many steps (``run(..., oracle_noise="shared")``, the default; with
``oracle_noise="independent"``, the public code's setting, the oracle's environment has its own
seed and its noise is not shared). Sharing, both runs read one random stream: step ``t`` of the two
uses the same draws whenever both made the same number of draws before it (always on
DeepSea-chain and PriorMDP, where every step draws one uniform and one normal; on WideNarrow
the exact reward of the way back to state 0 draws none). The draft's normalized regret is
``(sum_t r_oracle,t - sum_t r_t) / sum_t r_oracle,t`` (:func:`draft_normalized_regret`).

*Regret against the lower bound* (average criterion, accelerating-ucb-indices-mdp §2.2): every
uniformly fast agent has ``liminf Regret(T) / ln T >= C(P)`` (Burnetas & Katehakis 1997;
:class:`~optplan.problems.regret_lower_bound.RegretLowerBound`, the bound with the mean rewards
known; an agent that also learns the rewards faces at least as large a bound).
:func:`regret_lower_bound` gives ``C(P)`` of an ergodic model (``None`` elsewhere, with the
reason) and :func:`lower_bound_ratio` the ratio ``Regret(t) / (C(P) ln t)``, which tends to 1
for an asymptotically optimal agent.

DeepSea's *time to solve* (k-learning §4) is the first episode at which the goal
has been reached in at least 10% of the episodes so far.

*Occupancy regret* (ravi-ucb-optimistic-planning-regularized-dp §2, the regret ``R_T`` of
Theorem 4.1): ``R_T = sum_t <mu* - mu^{pi_t}, r>`` with ``mu^pi`` the *normalized* discounted
state-action occupancy of ``pi`` from ``nu_0`` under the true model, ``mu^pi(x, a) = (1 -
gamma) sum_k gamma^k Pr(x_k = x, a_k = a)``, and ``pi_t`` the policy the agent follows at step
``t`` (:class:`optplan.agents.base.PolicyAgent`). Each term lies in ``[0, max r - min r]``:
``<mu^pi, r> = (1 - gamma) nu_0 . V^pi``, so a term is ``(1 - gamma) nu_0 . (V* - V^pi)``, the
value gap of the policy scaled to one step. It scores the *policy*, not the visited pairs: its
expectation equals that of the realized discounted regret when the agent keeps its policy for a
whole reset episode (RAVI-UCB's epochs: an episode of geometric length ``H`` earns ``nu_0 .
V^pi`` in expectation), and it carries no noise of the state sequence or of the resets.
:func:`occupancy_gaps` solves one ``S x S`` system per distinct policy (batched).
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, check_int, check_real, first_bad, index_str
from ..dp import forward_occupancy, policy_iteration, policy_model
from ..mdp import CRITERIA, TabularMDP
from ..problems.regret_lower_bound import RegretLowerBound

__all__ = [
    "CRITERIA",
    "SOLVE_THRESHOLD",
    "oracle_step_rewards",
    "oracle_layer_rewards",
    "cumulative_regret",
    "normalized_regret",
    "draft_normalized_regret",
    "time_to_solve",
    "subsample_indices",
    "check_policies",
    "stochastic_policy_model",
    "discounted_policy_values",
    "occupancy_measures",
    "occupancy_gaps",
    "occupancy_regret",
    "regret_lower_bound",
    "lower_bound_ratio",
]


#: k-learning §4: solved once the goal was reached in at least 10% of the episodes so far.
SOLVE_THRESHOLD = 0.1

# Stop propagating a state distribution once a step changes it by less than this (L1).
_STATIONARY_TOL = 1e-15


def _dense_P(mdp) -> np.ndarray:
    """A model's transitions as a dense array: a sparse model's dense copy
    (:meth:`~optplan.mdp.TabularMDP.dense_P`, refused with an ``OptplanError`` naming the
    size when too large), a dense model's ``P``."""
    return mdp.dense_P()


def _policy_rows(P: np.ndarray, R: np.ndarray, policy: np.ndarray):
    """``P_pi`` and ``r_pi`` of a deterministic policy (last axes ``(S, A, S)`` / ``(S, A)``)."""
    policy = np.asarray(policy, dtype=np.intp)
    idx = policy[..., None]
    r_pi = np.take_along_axis(R, idx, axis=-1)[..., 0]
    P_pi = np.take_along_axis(P, idx[..., None], axis=-2)[..., 0, :]
    return P_pi, r_pi


def oracle_step_rewards(mdp, policy, steps: int) -> np.ndarray:
    """Expected reward at steps ``0 .. steps-1`` of a deterministic ``policy`` of ``mdp``.

    Parameters
    ----------
    mdp : TabularMDP
        The true continuing model; the oracle starts from ``mdp.initial``.
    policy : array of int, shape (S,)
    steps : int

    Returns
    -------
    ndarray, shape (steps,)
        ``mu_0 P_pi^t r_pi``. Propagation stops once the distribution is stationary to
        ``1e-15`` (L1) and the last value is repeated, so long horizons cost little.
    """
    if getattr(mdp, "sparse", False):  # the chain as a row gather of the CSR rows
        P_pi, r_pi = policy_model(mdp.P_rows, mdp.R, np.asarray(policy, dtype=np.intp))
        P_pi = P_pi.T.tocsr()
    else:
        P_pi, r_pi = _policy_rows(mdp.P, mdp.R, policy)
    out = np.empty(steps)
    d = np.asarray(mdp.initial, dtype=float)
    for t in range(steps):
        out[t] = d @ r_pi
        nxt = P_pi @ d if getattr(mdp, "sparse", False) else d @ P_pi
        if np.abs(nxt - d).sum() < _STATIONARY_TOL:
            out[t + 1 :] = nxt @ r_pi
            break
        d = nxt
    return out


def oracle_layer_rewards(mdp, policy) -> np.ndarray:
    """Expected reward at each layer of an episode of a finite-horizon ``policy[l, s]``.

    Returns
    -------
    ndarray, shape (L,)
        ``d_l r_pi,l`` with ``d_0 = mdp.initial`` and ``d_{l+1} = d_l P_pi,l``; their sum is
        the policy's expected episode return.
    """
    # either format: forward_occupancy steps a sparse model's CSR layers without densifying
    occ = forward_occupancy(mdp.P, mdp.initial, np.asarray(policy, dtype=np.intp))
    return (occ * mdp.R).sum(axis=(1, 2))


def cumulative_regret(oracle_rewards, rewards) -> np.ndarray:
    """``cumsum(oracle_rewards - rewards)``: pseudo-regret with expected rewards, realized
    regret with observed ones."""
    return np.cumsum(np.asarray(oracle_rewards, dtype=float) - np.asarray(rewards, dtype=float))


def normalized_regret(regret, oracle_cumulative) -> np.ndarray:
    """``regret / oracle_cumulative``, ``NaN`` where the oracle's cumulative reward is <= 0."""
    regret = np.asarray(regret, dtype=float)
    oracle_cumulative = np.asarray(oracle_cumulative, dtype=float)
    out = np.full(np.broadcast(regret, oracle_cumulative).shape, np.nan)
    np.divide(regret, oracle_cumulative, out=out, where=oracle_cumulative > 0)
    return out


def draft_normalized_regret(oracle_rewards, rewards) -> np.ndarray:
    """The draft's normalized regret after each step, from realized rewards:
    ``cumsum(oracle_rewards - rewards) / cumsum(oracle_rewards)`` (``NaN`` where the oracle's
    cumulative reward is not positive, as :func:`normalized_regret`).

    Parameters
    ----------
    oracle_rewards : array, shape (steps,)
        Rewards the oracle received when run in the same environment from the same seed.
    rewards : array, shape (steps,)
        The agent's rewards.

    Returns
    -------
    ndarray, shape (steps,)
        The last entry is bayesian-methods-tabular-rl's
        ``sum(r_oracle - r_agent) / sum(r_oracle)``.
    """
    oracle = np.asarray(oracle_rewards, dtype=float)
    agent = np.asarray(rewards, dtype=float)
    if oracle.shape != agent.shape or oracle.ndim != 1:
        raise OptplanError(
            f"oracle_rewards and rewards must be 1-D of one length, got shapes {oracle.shape} "
            f"and {agent.shape}"
        )
    return normalized_regret(cumulative_regret(oracle, agent), np.cumsum(oracle))


def regret_lower_bound(mdp) -> tuple[float | None, str]:
    """``(C(P), "")`` of a continuing model with the bound defined, else ``(None, why)``:
    not a :class:`~optplan.mdp.TabularMDP`, not ergodic, masked actions (the problem's
    :class:`OptplanError`), or a solve without a solution (its status and message). The fast
    path (policy iteration and the batched KL-minimization rates)."""
    if not isinstance(mdp, TabularMDP):
        return None, f"C(P) is defined for continuing tabular models, not {type(mdp).__name__}"
    try:
        problem = RegretLowerBound(mdp)
    except OptplanError as exc:
        return None, str(exc)
    res = problem.solve()
    if not res.success:
        return None, f"C(P): {res.status}: {res.message}"
    return float(res.value), ""


def lower_bound_ratio(regret, lower_bound: float | None) -> np.ndarray | None:
    """``regret[t - 1] / (C ln t)`` for ``t = 1, 2, ...`` (``NaN`` at ``t = 1``, where
    ``ln t = 0``); ``None`` when ``C`` is ``None`` or 0 (no logarithmic rate to compare)."""
    if lower_bound is None or not lower_bound > 0:
        return None
    regret = np.asarray(regret, dtype=float)
    log_t = np.log(np.arange(1, regret.size + 1, dtype=float))
    out = np.full(regret.shape, np.nan)
    np.divide(regret, lower_bound * log_t, out=out, where=log_t > 0)
    return out


def time_to_solve(successes, threshold: float = SOLVE_THRESHOLD) -> int | None:
    """First episode (1-based) at which the goal was reached in >= ``threshold`` of episodes.

    Parameters
    ----------
    successes : array of bool, shape (episodes,)
        Whether each finished episode reached the goal.
    threshold : float in (0, 1], default 0.1

    Returns
    -------
    int or None
        ``None`` if the fraction never reaches ``threshold``.
    """
    if not 0 < threshold <= 1:
        raise OptplanError(f"threshold must lie in (0, 1], got {threshold!r}")
    s = np.asarray(successes, dtype=bool)
    if s.ndim != 1:
        raise OptplanError(f"successes must be 1-D, got shape {s.shape}")
    episodes = np.arange(1, s.size + 1)
    # Integer comparison (count >= threshold * e) up to one ulp of the product: avoids the
    # rounding of count / e.
    hit = np.flatnonzero(np.cumsum(s) >= threshold * episodes * (1 - 1e-12))
    return int(hit[0]) + 1 if hit.size else None


def subsample_indices(n: int, points: int, scale: str = "log") -> np.ndarray:
    """Indices into a length-``n`` curve at which to store it.

    Parameters
    ----------
    n : int
        Curve length (positive).
    points : int
        Target number of stored points (>= 2); all ``n`` when ``n <= points``.
    scale : {"log", "linear"}
        ``"log"`` spaces the stored time steps ``t = index + 1`` geometrically (dense early,
        where regret curves bend); ``"linear"`` evenly.

    Returns
    -------
    ndarray of int
        Strictly increasing, always holding ``0`` and ``n - 1``. Log spacing can give fewer
        than ``points`` indices when rounding merges early ones.
    """
    check_int("n", n)
    check_int("points", points, 2)
    if scale not in ("log", "linear"):
        raise OptplanError(f"scale must be 'log' or 'linear', got {scale!r}")
    if n <= points:
        return np.arange(n)
    if scale == "log":
        t = np.geomspace(1, n, points)
    else:
        t = np.linspace(1, n, points)
    idx = np.unique(np.rint(t).astype(np.int64) - 1)
    idx[0], idx[-1] = 0, n - 1
    return np.unique(idx)


# --- occupancy regret (RAVI-UCB's R_T) ----------------------------------------------------------

#: Bytes of the ``(K, S, S)`` work array of one batched solve (policies are taken in chunks).
_CHUNK_BYTES = 32 * 2**20
#: Tolerance of a policy row's sum.
_POLICY_ROW_TOL = 1e-9


def check_policies(mdp, policies) -> np.ndarray:
    """``policies`` as a float array ``(K, S, A)`` (a single ``(S, A)`` policy gets ``K = 1``):
    finite, non-negative, rows summing to 1, no mass on inadmissible actions. Errors name the
    policy and the state."""
    pi = np.asarray(policies, dtype=float)
    S, A = mdp.n_states, mdp.n_actions
    if pi.ndim == 2:
        pi = pi[None]
    if pi.ndim != 3 or pi.shape[1:] != (S, A):
        raise OptplanError(f"policies must have shape (K, {S}, {A}) or ({S}, {A}), got {pi.shape}")
    bad = ~np.isfinite(pi) | (pi < 0)
    if bad.any():
        idx = first_bad(bad)
        raise OptplanError(
            f"policies has a negative or non-finite entry {float(pi[idx])!r} at {index_str(idx)}"
        )
    off = np.abs(pi.sum(axis=-1) - 1.0) > _POLICY_ROW_TOL
    if off.any():
        k, x = first_bad(off)
        raise OptplanError(
            f"policy {k} is not a distribution in state {x}: its row sums to "
            f"{float(pi[k, x].sum())!r}"
        )
    leak = (pi > 0) & ~mdp.action_mask
    if leak.any():
        k, x, a = first_bad(leak)
        raise OptplanError(
            f"policy {k} puts mass {float(pi[k, x, a])!r} on inadmissible ({x}, {a})"
        )
    return pi


def stochastic_policy_model(P, R, policies) -> tuple[np.ndarray, np.ndarray]:
    """``P_pi[k, s, s'] = sum_a pi_k(a|s) P[s, a, s']`` and ``r_pi[k, s]`` for a stack of
    stochastic policies ``(K, S, A)``."""
    R = np.where(policies > 0, R, 0.0)  # inadmissible pairs may hold anything
    return np.einsum("ksa,sat->kst", policies, P), np.einsum("ksa,ksa->ks", policies, R)


def _chunks(K: int, S: int):
    step = max(1, _CHUNK_BYTES // (8 * S * S))
    return (slice(i, min(i + step, K)) for i in range(0, K, step))


def _discount(mdp, discount) -> float:
    gamma = mdp.discount if discount is None else discount
    if gamma is None:
        raise OptplanError("the model has no discount: give discount= (the occupancy's gamma)")
    return check_real("discount", gamma, 0.0, 1.0, high_open=True)


def discounted_policy_values(mdp, policies, discount: float | None = None) -> np.ndarray:
    """``V^pi = (I - gamma P_pi)^{-1} r_pi`` of each policy, shape ``(K, S)`` (batched solves,
    ``gamma`` the model's discount unless given)."""
    gamma = _discount(mdp, discount)
    pi = check_policies(mdp, policies)
    K, S = pi.shape[0], mdp.n_states
    out = np.empty((K, S))
    eye = np.eye(S)
    for part in _chunks(K, S):
        P_pi, r_pi = stochastic_policy_model(_dense_P(mdp), mdp.R, pi[part])
        out[part] = np.linalg.solve(eye - gamma * P_pi, r_pi[..., None])[..., 0]
    return out


def occupancy_measures(mdp, policies, discount: float | None = None) -> np.ndarray:
    """Normalized discounted state-action occupancies ``mu^pi[k, s, a] = d_k(s) pi_k(a|s)``,
    ``d_k = (1 - gamma) nu_0^T (I - gamma P_pi)^{-1}`` from ``nu_0 = mdp.initial``; each
    ``mu`` sums to 1. Shape ``(K, S, A)``."""
    gamma = _discount(mdp, discount)
    pi = check_policies(mdp, policies)
    K, S = pi.shape[0], mdp.n_states
    out = np.empty(pi.shape)
    eye = np.eye(S)
    start = (1.0 - gamma) * np.asarray(mdp.initial, dtype=float)
    for part in _chunks(K, S):
        P_pi, _ = stochastic_policy_model(_dense_P(mdp), mdp.R, pi[part])
        M = np.swapaxes(eye - gamma * P_pi, -1, -2)
        d = np.linalg.solve(M, np.broadcast_to(start, (M.shape[0], S))[..., None])[..., 0]
        out[part] = d[..., None] * pi[part]
    return out


def occupancy_gaps(
    mdp, policies, optimal_value: float | None = None, discount: float | None = None
) -> np.ndarray:
    """``<mu* - mu^pi, r> = (1 - gamma) (nu_0 . V* - nu_0 . V^pi)`` for each policy, shape
    ``(K,)``.

    Parameters
    ----------
    mdp : TabularMDP
        The true model (``initial`` is ``nu_0``).
    policies : array (K, S, A) or (S, A)
    optimal_value : float, optional
        ``nu_0 . V*`` (e.g. :attr:`optplan.experiments.oracle.Oracle.optimal_value`); solved by
        policy iteration when omitted.
    discount : float, optional
        Default the model's.
    """
    gamma = _discount(mdp, discount)
    if optimal_value is None:
        out = policy_iteration(_dense_P(mdp), mdp.R, mdp.action_mask, gamma)
        optimal_value = float(mdp.initial @ out.values)
    values = discounted_policy_values(mdp, policies, gamma) @ np.asarray(mdp.initial, float)
    return (1.0 - gamma) * (optimal_value - values)


def occupancy_regret(gaps, policy_index) -> np.ndarray:
    """``R_t = sum_{u <= t} gaps[policy_index[u]]``: the cumulative occupancy regret after each
    step, with ``policy_index[u]`` the policy (a row of :func:`occupancy_gaps`) of step ``u``."""
    gaps = np.asarray(gaps, dtype=float)
    idx = np.asarray(policy_index, dtype=np.intp)
    if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= gaps.size)):
        raise OptplanError(f"policy_index must be 1-D indices into {gaps.size} gaps")
    return np.cumsum(gaps[idx])
