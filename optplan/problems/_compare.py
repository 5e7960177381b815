"""Small helpers for ``Problem.compare``: each returns ``(abs_err, scale)``."""

from __future__ import annotations

import numpy as np


def diff(a, b) -> tuple[float, float]:
    """Largest absolute difference, and the size of ``b`` it is relative to."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b), initial=0.0)), float(np.max(np.abs(b), initial=0.0))


def diff_up_to_constant(a, b) -> tuple[float, float]:
    """``min_c max |a - b - c|`` (biases are defined up to an additive constant)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(d.max() - d.min()) / 2.0, float(b.max() - b.min())


def unique_argmax(q: np.ndarray, rel_gap: float = 1e-6) -> bool:
    """True when every state's best action beats the runner-up by ``rel_gap`` (scaled).

    Then the optimal policy, and so the occupancy measure (the LP's multiplier), is unique and
    the two paths' multipliers must agree entry by entry; under ties they need only both be
    optimal duals (feasible, with the optimal objective).
    """
    q = np.asarray(q, dtype=float)
    if q.shape[-1] < 2:
        return True
    top2 = -np.sort(-np.where(np.isfinite(q), q, -np.inf), axis=-1)[..., :2]
    finite = np.isfinite(top2[..., 1])
    gap = top2[..., 0] - top2[..., 1]
    scale = 1.0 + np.abs(top2[..., 0])
    return bool(np.all(~finite | (gap > rel_gap * scale)))


def flow_residual(
    occupancy: np.ndarray, P: np.ndarray, source: np.ndarray, discount: float = 1.0
) -> float:
    """Max violation of ``sum_a y[s', a] = source[s'] + discount * sum_{s,a} y[s, a] P[s, a, s']``.

    The dual feasibility (flow conservation) of an occupancy measure: with ``discount = gamma``
    and ``source = (1 - gamma) w`` for the discounted LP, with ``discount = 1`` and
    ``source = 0`` (plus ``sum y = 1``) for the average-reward LP.
    """
    S, A = occupancy.shape
    rows = P if P.ndim == 2 else P.reshape(S * A, S)  # (S·A, S): dense or a model's CSR rows
    inflow = source + discount * np.asarray(rows.T @ occupancy.reshape(-1)).reshape(-1)
    return float(np.max(np.abs(occupancy.sum(axis=1) - inflow)))


# -- a user's answer against the reference (Problem.compare_answer, op.verify) ----------------


def floored(pair: tuple[float, float], floor: float) -> tuple[float, float]:
    """``(err, max(scale, floor))``: an LP's answer is fixed only relative to its data (a
    conic solver's stopping tolerances are relative to the data's size), so values, biases
    and occupancy values are compared on the reward scale when the answer is smaller than it
    (a finite-horizon value 0 at rewards of +-1e6 is fixed by Clarabel only to -4.95e-7)."""
    return pair[0], max(pair[1], floor)


def reward_scale(R, mask=None) -> float:
    """``max |R|`` over the admissible pairs (all pairs without ``mask``)."""
    R = np.asarray(R, dtype=float)
    if mask is not None:
        R = R[np.asarray(mask, dtype=bool)]
    return float(np.abs(R).max(initial=0.0))


def answer_errors(
    problem, answer, reference, floor: float = 0.0, *, up_to_constant=False, multiplier=False
) -> dict[str, tuple[float, float]]:
    """Value and, where the answer gives them, ``x`` (against ``problem.answer_x(reference)``,
    up to an additive constant for a bias) and the ``multiplier``; value and ``x`` on the
    scale ``floor`` at least (:func:`floored`)."""
    out = {"value": floored(diff(answer.value, reference.value), floor)}
    if answer.x is not None:
        ref = problem.answer_x(reference)
        x = diff_up_to_constant(answer.x, ref) if up_to_constant else diff(answer.x, ref)
        out["x"] = floored(x, floor)
    if multiplier and answer.multiplier is not None:
        out["multiplier"] = diff(answer.multiplier, reference.multiplier)
    return out


def occupancy_errors(problem, answer, reference, source, discount, R, mask, scale) -> dict:
    """The answer's occupancy measure (its ``multiplier``) against the reference's: entry by
    entry where the optimal policy is unique (:func:`unique_argmax`); with ties any optimal
    dual is right, so ``multiplier_feasibility`` (flow conservation, ``>= 0``, nothing on
    masked pairs, ``sum = 1`` when ``discount = 1``) and ``multiplier_value`` (strong duality:
    the occupancy's value is the optimal value, which the solver fixes more accurately than
    its own occupancy) certify it."""
    occ = np.asarray(answer.multiplier, dtype=float)
    out = {}
    if unique_argmax(reference.q):
        out["multiplier"] = diff(occ, reference.occupancy)
    residual = flow_residual(occ, problem.mdp.P_rows, source, discount)
    residual += max(-float(occ.min()), 0.0) + float(np.abs(occ[~mask]).sum())
    if discount == 1.0:
        residual += abs(float(occ.sum()) - 1.0)
    out["multiplier_feasibility"] = (residual, 1.0)
    out["multiplier_value"] = floored(
        diff(scale * float(np.sum(occ * R)), reference.value), scale * reward_scale(R, mask)
    )
    return out
