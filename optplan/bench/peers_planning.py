"""pymdptoolbox (and, on sparse models, mdptoolbox-hiive and mdpsolver) as peers of
``optplan bench planning --peers``.

pymdptoolbox (S. Cordwell et al., https://github.com/sawcordwell/pymdptoolbox, the Python
port of INRA's MDPtoolbox) is run on the same instances as optplan's fast path, in the
same run, interleaved instance by instance:

- average reward: ``mdptoolbox.mdp.RelativeValueIteration`` with ``epsilon`` =
  :data:`RVI_EPSILON`. It stops when ``span(V_{k+1} - V_k) < epsilon`` and reports
  ``gain + min(V_{k+1} - V_k)``; the optimal gain lies between that minimum and the
  maximum, so its error is below ``epsilon``. Its default ``epsilon = 0.01`` stops after a
  few iterations with the gain far off optplan's: not a comparison of equals.
- discounted: ``mdptoolbox.mdp.PolicyIteration`` (exact evaluation by a linear solve, the
  default ``eval_type``), at the suite's discount. pymdptoolbox's policy iteration is for
  discounted models only (its evaluation solves ``(I - gamma P) V = R``, singular at
  ``gamma = 1``), so it has no average-reward row.

mdpsolver (:mod:`.mdpsolver_peer`, C++) joins PI on the discounted rows: its modified policy
iteration (its default algorithm), one thread, at :func:`.mdpsolver_peer.default_tolerance`
(the accuracy optplan certifies); its input lists are built once per instance and its model
from them before each run, untimed; only its ``solve`` is timed.

Only ``run()`` is timed: building the object (pymdptoolbox's input checks and its
conversion of ``P`` to per-action matrices) is not. pymdptoolbox's stochasticity check
wants row sums within 10 ulps of 1, which Dirichlet rows of 2,000 doubles can miss; the
check is then skipped (``TabularMDP`` has checked the same rows to 1e-9). Agreement is
``|gain_peer - gain_fast|`` (average) and ``max_s |V_peer - V_fast|`` (discounted).
"""

from __future__ import annotations

import time

import numpy as np

from .._checks import MissingDependency

__all__ = [
    "RVI_EPSILON",
    "VI_EPSILON",
    "PEERS",
    "MDPSOLVER",
    "SPARSE_PEERS",
    "PEER_LABELS",
    "PI_MAX_STATES",
    "MDPSOLVER_GRID_MAX_STATES",
    "VI_MAX_STATES",
    "require",
    "run_peer",
    "peer_input",
    "require_dense",
    "sparse_peer_skip",
    "run_sparse_peer",
]

#: pymdptoolbox's ``RelativeValueIteration(epsilon=)``: the gain it reports is within this of
#: the optimal gain, far below the 1e-9 agreement the planning rows check.
RVI_EPSILON = 1e-12

#: pymdptoolbox's ``ValueIteration(epsilon=)`` on sparse rows: it stops when the span of
#: ``V_{k+1} - V_k`` is below ``epsilon (1 - gamma) / gamma``, or after the iterations its
#: constructor's bound allows, and reports ``V_k`` unshifted: within about ``epsilon`` of
#: the optimal values on terminating models (Taxi, FrozenLake), not on random ones, whose
#: span settles long before the values (3.3 off at 10^4 states, gamma 0.95): those rows
#: report the disagreement instead of a time.
VI_EPSILON = 1e-10
#: pymdptoolbox's ``PolicyIteration`` (and mdptoolbox-hiive's, the same code) builds each
#: policy's matrix ``P_pi`` as a dense ``S x S`` array (``_computePpolicyPRpolicy``:
#: ``np.empty((S, S))``, even from sparse ``P``) and solves it densely (``S^3 / 3`` flops a
#: policy): sparse rows above this many states skip it (the bench's cap: at 10^4 states
#: 0.8 GB and minutes of LAPACK per policy on one core).
PI_MAX_STATES = 5_000
#: ``ValueIteration`` runs on the sparse matrices, but its constructor bounds the number of
#: iterations (``_boundIter``) by a Python loop over the ``S`` columns of each action's
#: matrix, ``O(S^2 A)``: 17 s (untimed) at 10^4 random states, about half an hour at 10^5.
#: Sparse rows above this many states skip it (the bench's cap).
VI_MAX_STATES = 10_000
#: mdpsolver on the gridworld (:func:`optplan.bench.planning.gridworld_mdp`) above this many
#: states is skipped (the bench's cap): its modified policy iteration took 24 s at gamma 0.95
#: and 64 s at gamma 0.99 on the 300 x 300 grid (one run each, against optplan's 5.2 and
#: 3.6 s in the same processes, numba's compile included), and its sweeps over the
#: grid's slowly mixing chain grow faster than the state count.
MDPSOLVER_GRID_MAX_STATES = 90_000
#: Peers of the ``--sparse --peers`` rows (discounted only), in column order: pymdptoolbox's
#: ``PolicyIteration`` and ``ValueIteration``, mdptoolbox-hiive's (a maintained fork, the
#: same algorithms, ``hiive.mdptoolbox``), mdpsolver's modified policy iteration (its
#: default algorithm; :mod:`.mdpsolver_peer`), and QuantEcon's ``DiscreteDP`` modified
#: policy iteration and policy iteration (:func:`_quantecon`).
SPARSE_PEERS = ("PI", "VI", "hiive-PI", "hiive-VI", "mdpsolver", "QE-MPI", "QE-PI")
#: QuantEcon's ``solve(method="modified_policy_iteration", k=...)``: sweeps of the policy's
#: operator after each Bellman backup (its default, 20).
QE_MPI_SWEEPS = 20
#: QuantEcon's policy iteration evaluates each policy by ``scipy.sparse.linalg.spsolve``,
#: whose LU fills in on random and grid chains (a random model of 10^4 states ran for more
#: than 500 s; 3.8 s at 2,000): sparse rows above this many states skip it (the bench's cap).
QE_PI_MAX_STATES = 2_000
#: QuantEcon's ``max_iter`` here (modified policy iteration, policy iteration): its policy
#: iteration can cycle among tied policies (Taxi's did); a run that reaches it has no answer
#: (reported, not timed).
QE_MAX_ITER = {"QE-MPI": 100_000, "QE-PI": 1_000}
#: Column titles of :data:`SPARSE_PEERS` (and of the dense peers).
PEER_LABELS = {
    "RVI": "pymdp RVI",
    "PI": "pymdp PI",
    "VI": "pymdp VI",
    "hiive-PI": "hiive PI",
    "hiive-VI": "hiive VI",
    "mdpsolver": "mdpsolver",
    "QE-MPI": "QuantEcon MPI",
    "QE-PI": "QuantEcon PI",
}
#: The Python distribution of each optional sparse peer, for the skip reason when it does
#: not import.
_DISTRIBUTIONS = {
    "hiive-PI": "mdptoolbox-hiive",
    "hiive-VI": "mdptoolbox-hiive",
    "QE-MPI": "quantecon",
    "QE-PI": "quantecon",
}

#: The name of mdpsolver's column (its modified policy iteration, :mod:`.mdpsolver_peer`).
MDPSOLVER = "mdpsolver"
#: ``criterion -> peer names`` (pymdptoolbox classes and mdpsolver, see the module docstring).
PEERS: dict[str, tuple[str, ...]] = {"average": ("RVI",), "discounted": ("PI", MDPSOLVER)}


def require():
    """``mdptoolbox.mdp``, or :class:`MissingDependency` naming the ``bench`` extra."""
    try:
        import mdptoolbox.error
        import mdptoolbox.mdp
        import mdptoolbox.util
    except ImportError:
        raise MissingDependency(
            'optplan bench planning --peers needs pymdptoolbox: pip install "optplan[bench]"'
        ) from None
    return mdptoolbox


def _build(mdptoolbox, cls, *args, check: bool = True):
    try:
        if not check:
            raise mdptoolbox.error.StochasticError("the check is skipped")
        return cls(*args)
    except mdptoolbox.error.StochasticError:
        # rows off 1 by more than pymdptoolbox's 10 ulps (TabularMDP checked them to 1e-9)
        real = mdptoolbox.util.check
        mdptoolbox.util.check = lambda *a, **k: None
        try:
            return cls(*args)
        finally:
            mdptoolbox.util.check = real


def require_dense():
    """pymdptoolbox and mdpsolver, the peers of the dense rows, or :class:`MissingDependency`
    naming the ``bench`` extra."""
    from .mdpsolver_peer import require as require_mdpsolver

    require_mdpsolver()
    return require()


def peer_input(name: str, mdp):
    """What peer ``name`` reuses over its runs on ``mdp``, built untimed: mdpsolver's input
    lists (:func:`.mdpsolver_peer.build_input`); ``None`` for pymdptoolbox's peers."""
    if name == MDPSOLVER:
        from .mdpsolver_peer import build_input

        return build_input(mdp)
    return None


def run_peer(name: str, mdp, fast, built=None) -> tuple[float, float]:
    """``(wall seconds of run(), agreement with the fast result)`` for peer ``name`` on the
    model ``mdp`` that optplan's fast path solved to ``fast`` (a ``PlanResult``); ``built``:
    :func:`peer_input`'s (mdpsolver's lists, built here when omitted)."""
    if name == MDPSOLVER:
        from .mdpsolver_peer import solve

        run = solve(mdp, built=built)
        return run.seconds, float(np.abs(run.values - np.asarray(fast.values)).max())
    mdptoolbox = require()
    if name not in ("RVI", "PI"):
        raise ValueError(f"peer must be one of ('RVI', 'PI', {MDPSOLVER!r}), got {name!r}")
    if not mdp.action_mask.all():
        raise ValueError("pymdptoolbox has no admissible-action sets: the model masks actions")
    P = np.ascontiguousarray(np.transpose(mdp.dense_P(), (1, 0, 2)))  # pymdptoolbox: P[a, s, s']
    R = np.array(mdp.R)
    if name == "RVI":
        peer = _build(mdptoolbox, mdptoolbox.mdp.RelativeValueIteration, P, R, RVI_EPSILON)
    else:
        peer = _build(mdptoolbox, mdptoolbox.mdp.PolicyIteration, P, R, mdp.discount)
    start = time.perf_counter()
    peer.run()
    seconds = time.perf_counter() - start
    if name == "RVI":
        return seconds, abs(float(peer.average_reward) - float(fast.gain))
    return seconds, float(np.abs(np.asarray(peer.V) - np.asarray(fast.values)).max())


def _hiive():
    """``hiive.mdptoolbox.mdp``, or ``None`` when mdptoolbox-hiive does not import."""
    try:
        import hiive.mdptoolbox.mdp as mdp
    except Exception:  # noqa: BLE001 - an import failure of any kind: the peer is skipped
        return None
    return mdp


def sparse_peer_skip(name: str, n_states: int, model: str = "random") -> str | None:
    """Why peer ``name`` of :data:`SPARSE_PEERS` is not run on a sparse model of ``n_states``
    states (``model``: the bench's model name, ``"random"`` or one of its named models), or
    ``None`` when it is."""
    label = PEER_LABELS[name]
    if name.startswith("hiive") and _hiive() is None:
        return f"{label} skipped: mdptoolbox-hiive does not import (pip install mdptoolbox-hiive)"
    if name.startswith("QE"):
        if _quantecon() is None:
            return f"{label} skipped: quantecon does not import (pip install quantecon)"
        if name == "QE-PI" and n_states > QE_PI_MAX_STATES:
            return (
                f"{label} skipped above {QE_PI_MAX_STATES} states (the bench's cap: its "
                "evaluations are scipy's spsolve, whose LU fills in)"
            )
        return None
    if name == "mdpsolver":
        from .mdpsolver_peer import available

        if not available():
            return f"{label} skipped: mdpsolver does not import (pip install mdpsolver)"
        if model == "grid" and n_states > MDPSOLVER_GRID_MAX_STATES:
            return (
                f"{label} skipped on the gridworld above {MDPSOLVER_GRID_MAX_STATES} states "
                "(the bench's cap: 24 s at gamma 0.95 and 64 s at gamma 0.99 on the 300 x 300 "
                "grid already)"
            )
        return None
    if name.endswith("PI") and n_states > PI_MAX_STATES:
        return (
            f"{label} skipped above {PI_MAX_STATES} states: it builds each policy's P_pi as a "
            f"dense S x S array ({8 * n_states**2 / 2**30:.3g} GiB here) and solves it densely"
        )
    if name.endswith("VI") and n_states > VI_MAX_STATES:
        return (
            f"{label} skipped above {VI_MAX_STATES} states (the bench's cap: its constructor's "
            "iteration bound loops over the S columns of each action's matrix, O(S^2 A): "
            "17 s at 10^4 states)"
        )
    return None


def _quantecon():
    """``quantecon.markov.DiscreteDP``, or ``None`` when quantecon does not import."""
    try:
        from quantecon.markov import DiscreteDP
    except Exception:  # noqa: BLE001 - an import failure of any kind: the peer is skipped
        return None
    return DiscreteDP


def _run_quantecon(name: str, mdp, cache: dict, tol: float, scale: float):
    """QuantEcon's ``DiscreteDP`` in state-action-pair form (``R`` and ``s_indices``,
    ``a_indices`` of the admissible pairs, ``Q`` their CSR rows of ``P``), built untimed
    (kept in ``cache``): modified policy iteration (``k`` = :data:`QE_MPI_SWEEPS`, ``epsilon
    = tol * scale``, ``scale = max(1, max |V|)`` of optplan's answer: its stop ``span(T v -
    v) < epsilon (1 - gamma) / gamma`` then the midrange shift leave ``v`` within ``epsilon
    / 2``, the accuracy optplan certifies) or policy iteration; ``(seconds of solve,
    values)``."""
    if "qe" not in cache:
        A = mdp.n_actions
        pairs = np.flatnonzero(np.asarray(mdp.action_mask).ravel())
        s_idx, a_idx = np.divmod(pairs, A)
        R = np.asarray(mdp.R, dtype=np.float64).ravel()[pairs]
        Q = mdp.P_rows[pairs].tocsr()
        cache["qe"] = _quantecon()(R, Q, mdp.discount, s_idx, a_idx)
        cache["epsilon"] = tol * scale
    ddp = cache["qe"]
    start = time.perf_counter()
    if name == "QE-MPI":
        res = ddp.solve(method="modified_policy_iteration", epsilon=cache["epsilon"],
                        max_iter=QE_MAX_ITER[name], k=QE_MPI_SWEEPS)  # fmt: skip
    else:
        res = ddp.solve(method="policy_iteration", max_iter=QE_MAX_ITER[name])
    seconds = time.perf_counter() - start
    if res.num_iter >= QE_MAX_ITER[name]:  # no answer: NaN values, reported as not converged
        return seconds, np.full(mdp.n_states, np.nan)
    return seconds, np.asarray(res.v)


def run_sparse_peer(
    name: str, mdp, fast, cache: dict | None = None, tol: float = 1e-10
) -> tuple[float, float]:
    """``(wall seconds of the solve, max |V_peer - V_fast|)`` for peer ``name`` of
    :data:`SPARSE_PEERS` on the discounted model ``mdp`` that optplan's fast path solved to
    ``fast``.

    pymdptoolbox and mdptoolbox-hiive: ``PolicyIteration`` (``"PI"``, ``"hiive-PI"``) or
    ``ValueIteration`` (``"VI"``, ``"hiive-VI"``, epsilon :data:`VI_EPSILON`) given the
    model as a list of ``A`` scipy.sparse ``S x S`` matrices (their sparse input), built
    untimed from ``mdp.P_rows``; ``run()`` timed. mdpsolver: :func:`.mdpsolver_peer.solve`
    (modified policy iteration, its default, on one thread, at its default tolerance), its
    input lists built untimed (kept in ``cache`` across runs of the same model), a fresh
    model each run, ``model.solve`` timed. QuantEcon: :func:`_run_quantecon` at ``tol``."""
    if name not in SPARSE_PEERS:
        raise ValueError(f"peer must be one of {SPARSE_PEERS}, got {name!r}")
    cache = {} if cache is None else cache
    if name.startswith("QE"):
        scale = max(1.0, float(np.abs(np.asarray(fast.values)).max()))
        seconds, values = _run_quantecon(name, mdp, cache, tol, scale)
        return seconds, float(np.abs(values - np.asarray(fast.values)).max())
    if name == "mdpsolver":
        from . import mdpsolver_peer

        if "mdpsolver" not in cache:
            cache["mdpsolver"] = mdpsolver_peer.build_input(mdp)
        run = mdpsolver_peer.solve(mdp, built=cache["mdpsolver"])
        return run.seconds, float(np.abs(run.values - np.asarray(fast.values)).max())
    if not mdp.action_mask.all():
        raise ValueError(
            f"{PEER_LABELS[name]} has no admissible-action sets: the model masks actions"
        )
    if "matrices" not in cache:
        import scipy.sparse as sp

        rows = sp.csr_matrix(mdp.P_rows)
        A = mdp.n_actions
        cache["matrices"] = [rows[a::A].tocsr() for a in range(A)]  # P[a][s, s'] = rows[s·A + a]
    P = cache["matrices"]
    R = np.array(mdp.R)
    if name.startswith("hiive"):
        hiive = _hiive()
        if name == "hiive-PI":
            peer = hiive.PolicyIteration(P, R, mdp.discount, skip_check=True)
        else:
            peer = hiive.ValueIteration(
                P, R, mdp.discount, epsilon=VI_EPSILON, max_iter=10**7, skip_check=True
            )
    else:
        mdptoolbox = require()
        # pymdptoolbox's input check of a sparse matrix subtracts a vector from the (S, 1) row
        # sums, broadcasting to a dense S x S array (S = 90,000: 60 GiB): it is skipped here
        # (TabularMDP has checked the same rows to 1e-9); build time is not timed either way
        if name == "PI":
            peer = _build(
                mdptoolbox, mdptoolbox.mdp.PolicyIteration, P, R, mdp.discount, check=False
            )
        else:
            peer = _build(
                mdptoolbox,
                mdptoolbox.mdp.ValueIteration,
                P,
                R,
                mdp.discount,
                VI_EPSILON,
                10**7,
                check=False,
            )
    start = time.perf_counter()
    peer.run()
    seconds = time.perf_counter() - start
    return seconds, float(np.abs(np.asarray(peer.V) - np.asarray(fast.values)).max())
