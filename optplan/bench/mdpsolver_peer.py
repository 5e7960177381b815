"""mdpsolver as a peer of optplan's discounted planning.

mdpsolver (A. R. Andersen and J. F. Andersen, https://github.com/areenberg/MDPSolver) is a
C++ solver with a Python interface: value iteration, policy iteration and modified policy
iteration (its default) for the discounted criterion. Its input is nested Python lists, which
it copies into its own per-pair arrays of nonzero probabilities and their columns:

- a dense model (``P`` an ``(S, A, S)`` array) is given as ``tranMatWithZeros``, the
  ``(S, A, S)`` nested list (mdpsolver drops the zeros itself);
- a sparse model (``P`` CSR, rows ``s·A + a``) as ``tranMatProbs`` / ``tranMatColumns``,
  per state and admissible action the list of its nonzero probabilities and their next
  states: the CSR rows as they are, nothing densified.

Masked actions are left out: mdpsolver numbers the admissible actions of each state ``0, 1,
...`` in order, and :func:`solve` maps its policy back to the model's action indices.

:func:`build_input` (the lists) and building mdpsolver's model from them are not timed;
:func:`solve` times only ``model.solve``, each call on a freshly built model (a solve starts
from the policy and values the model's last solve left, so a model solved twice would be
timed warm).

Its stop: with standard updates mdpsolver iterates until ``span(v_{n+1} - v_n) <
tolerance (1 - gamma) / gamma`` and then shifts ``v`` by ``gamma / (1 - gamma)`` times the
last smallest increment (Puterman, Eq. 6.6.12), so its values are within ``tolerance`` of
the optimal ones. :func:`default_tolerance` asks for :data:`RELATIVE_TOLERANCE` times the
largest possible ``|V|``, ``max(1, max |r|) / (1 - gamma)``: the accuracy optplan's
certificate gives by default (``1e-10`` times ``max |V|``), so both solve to the same
accuracy and agree far below ``1e-8``.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from .._checks import MissingDependency, OptplanError

__all__ = [
    "ALGORITHMS",
    "ALGORITHM",
    "RELATIVE_TOLERANCE",
    "PARALLEL",
    "MdpsolverInput",
    "MdpsolverRun",
    "available",
    "require",
    "build_input",
    "default_tolerance",
    "solve",
]

#: mdpsolver's algorithms: modified policy iteration, policy iteration, value iteration.
ALGORITHMS = ("mpi", "pi", "vi")
#: The algorithm :func:`solve` runs unless told: mdpsolver's own default.
ALGORITHM = "mpi"
#: :func:`default_tolerance`: this times ``max(1, max |r|) / (1 - gamma)``.
RELATIVE_TOLERANCE = 1e-10
#: mdpsolver's ``parallel`` (an OpenMP loop over states) unless told: off, so it runs on one
#: thread as optplan's timed paths do (``OPENBLAS_NUM_THREADS=1``); on random dense models
#: with S = 1,000, A = 4 and two cores it was slower on: 0.044 s against 0.019 s.
PARALLEL = False


def available() -> bool:
    """Whether mdpsolver can be imported."""
    try:
        import mdpsolver  # noqa: F401
    except ImportError:
        return False
    return True


def require():
    """The ``mdpsolver`` module, or :class:`MissingDependency` naming the ``bench`` extra."""
    try:
        import mdpsolver
    except ImportError:
        raise MissingDependency(
            "mdpsolver is not installed (a peer of optplan bench planning --peers): "
            'pip install "optplan[bench]"'
        ) from None
    return mdpsolver


class MdpsolverInput(NamedTuple):
    """mdpsolver's input for one model: ``kwargs`` of ``model.mdp`` (``discount``,
    ``rewards`` and the transition lists), and ``actions``, the ``(S, A)`` array whose row
    ``s`` starts with the admissible actions of ``s`` in order (mdpsolver's action ``k`` in
    ``s`` is the model's ``actions[s, k]``)."""

    kwargs: dict
    actions: np.ndarray
    n_states: int


class MdpsolverRun(NamedTuple):
    """One :func:`solve`: wall ``seconds`` of ``model.solve`` alone, mdpsolver's ``values``
    and ``policy`` (the model's action indices), and ``setup_seconds`` (building the lists,
    unless given, and mdpsolver's model from them: not timed in ``seconds``)."""

    seconds: float
    values: np.ndarray
    policy: np.ndarray
    setup_seconds: float


def _discount(mdp) -> float:
    gamma = mdp.discount
    if gamma is None or not 0.0 < gamma < 1.0:
        raise OptplanError(
            f"mdpsolver solves discounted models with a discount in (0, 1), got discount {gamma!r}"
        )
    return float(gamma)


def build_input(mdp) -> MdpsolverInput:
    """mdpsolver's input lists for the discounted :class:`~optplan.mdp.TabularMDP` ``mdp``,
    dense or sparse (see the module docstring). The lists take about 32 bytes per stored
    probability (a dense model with S = 6,000, A = 4: 4.6 GB) until dropped."""
    gamma = _discount(mdp)
    S, A = mdp.shape
    mask = mdp.action_mask
    every = bool(mask.all())
    actions = np.argsort(~mask, axis=1, kind="stable")  # admissible actions first, in order
    counts = mask.sum(axis=1)
    if every:
        rewards = mdp.R.tolist()
    else:
        ordered = mdp.R[np.arange(S)[:, None], actions].tolist()
        rewards = [row[:k] for row, k in zip(ordered, counts.tolist(), strict=True)]
    kwargs = {"discount": gamma, "rewards": rewards}
    if not mdp.sparse:
        if every:
            kwargs["tranMatWithZeros"] = mdp.P.tolist()
        else:
            kwargs["tranMatWithZeros"] = [
                [row for row, ok in zip(block, keep, strict=True) if ok]
                for block, keep in zip(mdp.P.tolist(), mask.tolist(), strict=True)
            ]
        return MdpsolverInput(kwargs, actions, S)
    rows = mdp.P_rows
    ptr = rows.indptr.tolist()
    data, cols = rows.data.tolist(), rows.indices.tolist()
    pairs = np.flatnonzero(mask.ravel()).tolist()  # admissible rows s·A + a, in order
    probs = [data[ptr[i] : ptr[i + 1]] for i in pairs]
    columns = [cols[ptr[i] : ptr[i + 1]] for i in pairs]
    ends = np.cumsum(counts).tolist()
    starts = [0] + ends[:-1]
    kwargs["tranMatProbs"] = [probs[i:j] for i, j in zip(starts, ends, strict=True)]
    kwargs["tranMatColumns"] = [columns[i:j] for i, j in zip(starts, ends, strict=True)]
    return MdpsolverInput(kwargs, actions, S)


def default_tolerance(mdp) -> float:
    """mdpsolver's ``tolerance`` for ``mdp``: :data:`RELATIVE_TOLERANCE` times
    ``max(1, max |r|) / (1 - gamma)`` (rewards of admissible pairs)."""
    gamma = _discount(mdp)
    r = float(np.abs(np.where(mdp.action_mask, mdp.R, 0.0)).max())
    return RELATIVE_TOLERANCE * max(1.0, r) / (1.0 - gamma)


def solve(
    mdp,
    *,
    algorithm: str = ALGORITHM,
    tolerance: float | None = None,
    parallel: bool = PARALLEL,
    built: MdpsolverInput | None = None,
) -> MdpsolverRun:
    """Solve the discounted ``mdp`` with mdpsolver on a freshly built model, timing only
    ``model.solve``.

    Parameters
    ----------
    mdp : TabularMDP
        Dense or sparse, with a discount in ``(0, 1)``.
    algorithm : {"mpi", "pi", "vi"}
    tolerance : float, optional
        mdpsolver's ``tolerance`` (its values are within it of the optimal ones);
        :func:`default_tolerance` when omitted.
    parallel : bool
        mdpsolver's OpenMP loop over states.
    built : MdpsolverInput, optional
        :func:`build_input`'s lists of ``mdp``, to reuse over runs (not built again).
    """
    mdpsolver = require()
    if algorithm not in ALGORITHMS:
        raise OptplanError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if tolerance is None:
        tolerance = default_tolerance(mdp)
    elif isinstance(tolerance, bool) or not (
        isinstance(tolerance, (int, float)) and np.isfinite(tolerance) and tolerance > 0
    ):
        raise OptplanError(f"tolerance must be a positive number, got {tolerance!r}")
    start = time.perf_counter()
    if built is None:
        built = build_input(mdp)
    elif built.n_states != mdp.n_states:
        raise OptplanError(
            f"built is the input of a model with {built.n_states} states, not {mdp.n_states}"
        )
    model = mdpsolver.model()
    model.mdp(**built.kwargs)
    setup = time.perf_counter() - start
    start = time.perf_counter()
    model.solve(algorithm=algorithm, tolerance=float(tolerance), parallel=bool(parallel))
    seconds = time.perf_counter() - start
    values = np.asarray(model.getValueVector(), dtype=float)
    chosen = np.asarray(model.getPolicy(), dtype=np.intp)
    policy = built.actions[np.arange(built.n_states), chosen]
    return MdpsolverRun(seconds, values, policy, setup)
