"""Results of every solve: :class:`PlanResult`, the status constants and their groups.

Statuses are strings, grouped the way CVXPY groups its own (``SOLUTION_PRESENT``,
``INACCURATE``, ``ERROR``). The conic path maps CVXPY's statuses through the single table
:data:`CVXPY_STATUS_MAP`; the fast paths report the same strings for their own outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._checks import OptplanError

OPTIMAL = "optimal"
OPTIMAL_INACCURATE = "optimal_inaccurate"
INFEASIBLE = "infeasible"
INFEASIBLE_INACCURATE = "infeasible_inaccurate"
UNBOUNDED = "unbounded"
UNBOUNDED_INACCURATE = "unbounded_inaccurate"
MAX_ITER = "max_iter"
SOLVER_ERROR = "solver_error"
#: The average-reward fast path met a policy with several recurrent classes: the unichain
#: optimality equation (a scalar gain) does not describe the model.
MULTICHAIN = "multichain"
#: The numbers cannot be computed in double precision: an overflow, or a linear system that is
#: singular in floating point although not in exact arithmetic. The message says which.
NUMERICAL_ERROR = "numerical_error"

ALL_STATUSES = (
    OPTIMAL,
    OPTIMAL_INACCURATE,
    INFEASIBLE,
    INFEASIBLE_INACCURATE,
    UNBOUNDED,
    UNBOUNDED_INACCURATE,
    MAX_ITER,
    SOLVER_ERROR,
    MULTICHAIN,
    NUMERICAL_ERROR,
)
SOLUTION_PRESENT = frozenset({OPTIMAL, OPTIMAL_INACCURATE})
INACCURATE = frozenset({OPTIMAL_INACCURATE, INFEASIBLE_INACCURATE, UNBOUNDED_INACCURATE})
ERROR = frozenset({SOLVER_ERROR, MAX_ITER, MULTICHAIN, NUMERICAL_ERROR})

#: The one table from CVXPY's status strings to optplan's.
CVXPY_STATUS_MAP = {
    "optimal": OPTIMAL,
    "optimal_inaccurate": OPTIMAL_INACCURATE,
    "infeasible": INFEASIBLE,
    "infeasible_inaccurate": INFEASIBLE_INACCURATE,
    "unbounded": UNBOUNDED,
    "unbounded_inaccurate": UNBOUNDED_INACCURATE,
    "user_limit": MAX_ITER,
    "solver_error": SOLVER_ERROR,
    None: SOLVER_ERROR,
}


def overflow_checked(result: PlanResult, plus_inf_ok: bool = False) -> PlanResult:
    """``result``, or, when it claims a solution whose numbers are not finite (an input scale
    near the double range overflowed: rewards of 1e308, values of +-1e308), the same numbers
    with status ``numerical_error`` and a message naming them. ``plus_inf_ok``: ``+inf`` is a
    defined answer of the problem (an unreachable state's hitting time), only NaN and
    ``-inf`` are overflow."""
    if result.status not in SOLUTION_PRESENT:
        return result
    bad = []
    for name in ("value", "gain", "x", "values", "bias"):
        item = getattr(result, name)
        if item is None:
            continue
        arr = np.asarray(item)
        if arr.dtype.kind not in "fc":
            continue
        ok = np.isfinite(arr) | (plus_inf_ok & (arr == np.inf))
        if not ok.all():
            bad.append(name)
    if not bad:
        return result
    message = (
        f"{', '.join(bad)} not finite ({result.value!r}): the inputs' scale overflows double "
        "precision; rescale them (values and rewards well below 1e308)"
    )
    return result.replace(
        status=NUMERICAL_ERROR, message="; ".join(m for m in (result.message, message) if m)
    )


def map_cvxpy_status(status: str | None) -> str:
    """Map a CVXPY status (``problem.status``) to an optplan status."""
    return CVXPY_STATUS_MAP.get(status, SOLVER_ERROR)


@dataclass(frozen=True)
class PlanResult:
    """What every solve returns (scipy's ``OptimizeResult`` in spirit).

    Attributes
    ----------
    value : float
        The objective: an index, a rate; for MDPs ``initial @ V`` (discounted, finite horizon)
        or the gain (average reward).
    x : ndarray or None
        The optimizer: q*, or for MDPs the value vector (``V``, the bias ``h``, ``V[l, s]``).
    multiplier : ndarray, float or None
        The Lagrange multiplier(s) where the problem has them; for the MDP LPs the dual
        variables of the Bellman inequalities, i.e. the state-action occupancy measure.
    status : str
        One of :data:`ALL_STATUSES`.
    message : str
        Human-readable detail, always set when ``status`` is not ``optimal``.
    method : str
        ``"fast"`` or ``"conic"``.
    solver : str or None
        The conic solver (``"CLARABEL"``, ``"ECOS"``, ``"SCS"``) or the fast algorithm's name.
    iterations : int or None
    solve_time : float
        Wall seconds spent in the solve (for the conic path: formulation plus solver).
    values, q, policy, gain, bias, occupancy : optional
        Planning quantities of the MDP problems: ``values[s]`` (``[l, s]`` finite horizon),
        ``q[s, a]`` (masked actions are ``-inf``), deterministic ``policy[s]`` (``[l, s]``),
        ``gain`` and ``bias[s]`` (average reward; ``gain[s]`` per state with
        ``AverageRewardPlanning(mdp, multichain="solve")``), ``occupancy[s, a]``
        (``[l, s, a]``).
    info : dict
        Anything else a particular path reports (e.g. the stage-1 LP values).
    """

    value: float
    x: np.ndarray | None = None
    multiplier: Any = None
    status: str = field(kw_only=True)
    message: str = ""
    method: str = ""
    solver: str | None = None
    iterations: int | None = None
    solve_time: float = 0.0
    values: np.ndarray | None = None
    q: np.ndarray | None = None
    policy: np.ndarray | None = None
    gain: float | np.ndarray | None = None
    bias: np.ndarray | None = None
    occupancy: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in ALL_STATUSES:
            raise OptplanError(f"status must be one of {ALL_STATUSES}, got {self.status!r}")

    @property
    def success(self) -> bool:
        """``True`` when a solution is present (``optimal`` or ``optimal_inaccurate``)."""
        return self.status in SOLUTION_PRESENT

    def replace(self, **changes) -> PlanResult:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """A JSON-ready dict (arrays to lists, ``-inf``/``inf``/``nan`` to ``None``)."""
        out = {}
        for name in (
            "value",
            "status",
            "success",
            "message",
            "method",
            "solver",
            "iterations",
            "solve_time",
            "gain",
            "x",
            "multiplier",
            "values",
            "bias",
            "q",
            "policy",
            "occupancy",
        ):
            out[name] = _jsonable(getattr(self, name))
        if self.info:
            out["info"] = {k: _jsonable(v) for k, v in self.info.items()}
        return out

    def __repr__(self) -> str:
        parts = [f"value={self.value!r}", f"status={self.status!r}", f"method={self.method!r}"]
        if self.solver:
            parts.append(f"solver={self.solver!r}")
        if self.gain is not None:
            parts.append(f"gain={self.gain!r}")
        if self.iterations is not None:
            parts.append(f"iterations={self.iterations}")
        parts.append(f"solve_time={self.solve_time:.3g}")
        if self.message:
            parts.append(f"message={self.message!r}")
        return "PlanResult(" + ", ".join(parts) + ")"


def _jsonable(value):
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (np.ndarray, list, tuple)):
        arr = np.asarray(value)
        if arr.dtype.kind in "iub":
            return arr.tolist()
        arr = arr.astype(float)
        return np.where(np.isfinite(arr), arr, None).tolist()
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return str(value)


@dataclass(frozen=True)
class CrossCheck:
    """The outcome of :func:`optplan.cross_check`: one problem solved both ways and compared.

    Attributes
    ----------
    agree : bool
        Both paths report the same status group and every compared quantity is within
        ``atol + rtol * scale``.
    abs_err, rel_err : dict[str, float]
        Per compared quantity (``value``, ``x``, ``multiplier``, ``gain``, ``policy_value`` ...),
        the absolute error and ``abs_err / (1 + scale)``.
    rtol, atol : float
        The tolerances used (from the per-solver table unless given).
    fast, conic : PlanResult
    message : str
        Which quantities disagree, or why the comparison could not be made.
    """

    agree: bool
    abs_err: dict
    rel_err: dict
    rtol: float
    atol: float
    fast: PlanResult
    conic: PlanResult
    message: str = ""

    def __bool__(self) -> bool:
        return self.agree

    def to_dict(self) -> dict:
        return {
            "agree": self.agree,
            "abs_err": {k: _jsonable(v) for k, v in self.abs_err.items()},
            "rel_err": {k: _jsonable(v) for k, v in self.rel_err.items()},
            "rtol": self.rtol,
            "atol": self.atol,
            "message": self.message,
            "fast": self.fast.to_dict(),
            "conic": self.conic.to_dict(),
        }


@dataclass(frozen=True)
class BatchResult:
    """What a batched fast path returns: one entry per problem instance, leading batch shape.

    Attributes
    ----------
    value : ndarray, shape batch
    x : ndarray, shape batch + (S,)
        The optimizer per instance (``q*``); NaN rows where there is none (infeasible).
    multiplier : ndarray, shape batch
        Lagrange multiplier of the instance's main constraint (e.g. ``dC/d radius``).
    status : ndarray of str, shape batch
        One of :data:`ALL_STATUSES` per instance (scipy's ``elementwise`` style).
    iterations : ndarray of int, shape batch
        Root-finding iterations per instance (0 for closed forms and edge cases).
    solve_time : float
        Wall seconds of the whole batched call.
    method, solver : str
    """

    value: np.ndarray
    x: np.ndarray
    multiplier: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    solve_time: float
    method: str = "fast"
    solver: str = ""

    @property
    def success(self) -> np.ndarray:
        """Boolean array: a solution is present."""
        return np.isin(self.status, list(SOLUTION_PRESENT))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    def element(self, index) -> PlanResult:
        """Instance ``index`` as a :class:`PlanResult`."""
        status = str(self.status[index])
        x = self.x[index]
        return PlanResult(
            value=float(self.value[index]),
            x=None if np.isnan(x).all() else x,
            multiplier=float(self.multiplier[index]),
            status=status,
            message=_EDGE_MESSAGES.get(status, ""),
            method=self.method,
            solver=self.solver,
            iterations=int(self.iterations[index]),
            solve_time=self.solve_time,
        )


class _Lazy0d:
    """The 0-d ``multiplier`` or ``iterations`` of a one-instance :class:`BatchResult` from
    a compiled lane (:func:`optplan.fast._batch.single_result`), which stores the scalars as
    ``_scalars`` (``value`` is made at once): a non-data descriptor, so it runs only
    when the instance dict lacks the field, makes the 0-d array (``batch_result``'s dtype and
    value) on first access and puts it in the instance dict, where later lookups find it
    first. (A class attribute set after ``@dataclass``: not a field default.)"""

    __slots__ = ("name", "index")

    def __init__(self, name: str, index: int):
        self.name, self.index = name, index

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        d = obj.__dict__
        try:
            arr = np.array(d["_scalars"][self.index])
        except KeyError:
            raise AttributeError(
                f"{type(obj).__name__!r} object has no attribute {self.name!r}"
            ) from None
        d[self.name] = arr
        return arr


# The fields a one-instance ``BatchResult`` may hold as scalars until first accessed, at
# their place in its ``_scalars`` (``(value, multiplier, iterations)``).
for _i, _name in ((1, "multiplier"), (2, "iterations")):
    setattr(BatchResult, _name, _Lazy0d(_name, _i))
del _i, _name

_EDGE_MESSAGES = {
    NUMERICAL_ERROR: "the value is not finite: the inputs' scale overflows double precision",
    INFEASIBLE: "infeasible: no distribution q satisfies the constraint (see the problem's docs)",
    MAX_ITER: "root finding did not converge within the iteration limit",
}
