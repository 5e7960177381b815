"""Bridges from the tabular models researchers already have: Gymnasium toy-text, pymdptoolbox.

* :func:`from_gymnasium` reads the transition table ``env.unwrapped.P`` that Gymnasium's
  toy-text environments (FrozenLake, Taxi, CliffWalking) and user environments of the same
  form expose: ``P[s][a] = [(prob, next_state, reward, terminated), ...]``.
* :func:`from_mdptoolbox` / :func:`to_mdptoolbox` convert pymdptoolbox's layout
  ``P[a, s, s']`` and ``R[s, a]`` (or ``R[a, s, s']``) to and from a
  :class:`~optplan.mdp.TabularMDP` (``P[s, a, s']``). The round trip is lossless:
  ``from_mdptoolbox(*to_mdptoolbox(mdp)) == mdp`` (:class:`MDPToolboxModel` carries the
  discount, start distribution and name beside pymdptoolbox's two arrays).

Rewards become expectations over the next state, ``R[s, a] = sum_k p_k r_k``; the sampled
reward law is not kept (a :class:`~optplan.mdp.TabularMDP` holds expected rewards only).
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from ._checks import ROW_SUM_TOL, OptplanError, OptplanTypeError, check_label
from .mdp import TabularMDP, check_model_size

__all__ = [
    "SPARSE_MAX_DENSITY",
    "SPARSE_MIN_STATES",
    "TERMINAL_MODES",
    "MDPToolboxModel",
    "from_gymnasium",
    "from_mdptoolbox",
    "to_mdptoolbox",
    "table_of",
]

#: Accepted values of ``from_gymnasium(terminal=...)``.
TERMINAL_MODES = ("absorbing", "restart")
#: The bridges return a sparse model (``P`` CSR) when the share of nonzero entries of ``P``
#: is below this and the model has at least :data:`SPARSE_MIN_STATES` states.
SPARSE_MAX_DENSITY = 0.05
#: See :data:`SPARSE_MAX_DENSITY`: smaller models stay dense (a dense solve is faster there).
SPARSE_MIN_STATES = 200


def _wants_sparse(sparse, nnz: int, S: int, A: int) -> bool:
    """The bridges' rule: ``sparse`` when given (True/False), else density of ``P`` below
    :data:`SPARSE_MAX_DENSITY` and ``S >= SPARSE_MIN_STATES``."""
    if sparse is not None:
        if not isinstance(sparse, (bool, np.bool_)):
            raise OptplanTypeError(f"sparse must be None, True or False, got {sparse!r}")
        return bool(sparse)
    return S >= SPARSE_MIN_STATES and nnz < SPARSE_MAX_DENSITY * S * A * S


def table_of(env):
    """``env.unwrapped.P`` (or ``env.P``), the dict-of-dicts transition table, or ``None``."""
    inner = getattr(env, "unwrapped", env)
    table = getattr(inner, "P", None)
    return table if isinstance(table, dict) else None


def _index(value, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise OptplanTypeError(f"{what} must be an integer, got {value!r}") from None


def from_gymnasium(
    env_or_id,
    terminal: str = "absorbing",
    discount: float | None = None,
    initial=None,
    name: str | None = None,
    sparse: bool | None = None,
    **make_kwargs,
) -> TabularMDP:
    """A :class:`~optplan.mdp.TabularMDP` from a Gymnasium environment's transition table.

    Parameters
    ----------
    env_or_id : gymnasium.Env or str
        An environment whose ``unwrapped.P`` is the toy-text table
        ``P[s][a] = [(prob, next_state, reward, terminated), ...]`` for every state
        ``s in range(S)`` and action ``a in range(A)``, or an id for ``gymnasium.make``
        (e.g. ``"FrozenLake-v1"``, ``"Taxi-v4"``, ``"CliffWalking-v1"``).
    terminal : {"absorbing", "restart"}, default "absorbing"
        What a transition flagged ``terminated`` leads to (its reward is always paid):

        * ``"absorbing"``: the episodic view. One state is appended, index ``S`` (the model
          has ``S + 1`` states); every terminating transition moves there and it loops on
          itself with reward 0 under every action. Discounted values of the first ``S``
          states are the episode's values. Without terminating transitions nothing is added.
        * ``"restart"``: the continuing view, what a run loop that resets the environment
          at the end of an episode sees. A terminating transition of probability ``p`` is
          replaced by ``p * initial`` (the initial distribution); ``S`` states.

        Truncation (a ``TimeLimit`` wrapper) is not part of the model.
    discount : float in [0, 1), optional
        The model's discount; ``None``: an average-reward model.
    initial : array_like, shape (S,), optional
        Start distribution. ``None``: ``unwrapped.initial_state_distrib`` when the
        environment has one (FrozenLake: the ``S`` cell; Taxi: uniform over its 300 start
        states; CliffWalking: state 36), normalized; otherwise uniform over the ``S`` states.
    name : str, optional
        The model's label; default: the environment's spec id (or its class name).
    sparse : bool, optional
        Hold ``P`` as a CSR ``(S·A, S)`` matrix (``True``) or a dense ``(S, A, S)`` array
        (``False``). ``None`` (default): sparse when that pays, i.e. when fewer than
        :data:`SPARSE_MAX_DENSITY` (5%) of the entries of ``P`` are nonzero and the model has
        at least :data:`SPARSE_MIN_STATES` (200) states (Taxi: 501 states, 0.2% nonzero,
        sparse; FrozenLake 8x8: 65 states, dense). A sparse model is built from the table's
        entries directly, never through a dense array.
    **make_kwargs
        Passed to ``gymnasium.make`` when ``env_or_id`` is a string (e.g.
        ``is_slippery=False``, ``map_name="8x8"``).

    Returns
    -------
    TabularMDP

    Raises
    ------
    TypeError
        ``env_or_id`` has no ``unwrapped.P`` table (the message says what is needed), or an
        entry is not a ``(prob, next_state, reward, terminated)`` tuple.
    ValueError
        An unknown ``terminal``; a state or action missing from the table; a next state out
        of range; a negative probability; probabilities of ``P[s][a]`` that do not sum to 1
        (naming ``s`` and ``a``); a dense model whose ``(S, A, S)`` array would exceed
        :data:`~optplan.mdp.MAX_MODEL_BYTES` (the size is stated before anything dense is
        allocated; ``sparse=True`` or the rule lifts this).

    Examples
    --------
    >>> mdp = from_gymnasium("FrozenLake-v1", discount=0.95)          # doctest: +SKIP
    >>> mdp = from_gymnasium(gym.make("Taxi-v4"), terminal="restart")  # doctest: +SKIP
    """
    if terminal not in TERMINAL_MODES:
        raise OptplanError(f"terminal must be one of {TERMINAL_MODES}, got {terminal!r}")
    env = _environment(env_or_id, make_kwargs)
    table = _table(env)
    inner = getattr(env, "unwrapped", env)
    S, A = _table_shape(table)
    if sparse is False:  # dense on request: its size checked before reading the table
        n = S + 1 if terminal == "absorbing" else S
        check_model_size(n, A, subject=f"the Gymnasium table of {S} states and {A} actions")
    outcomes = _checked_outcomes(table, S, A)
    rho = _initial(inner, initial, S)
    P, R, rho = _assemble(outcomes, S, A, rho, terminal)  # P: CSR (n·A, n)
    n = R.shape[0]
    if not _wants_sparse(sparse, P.nnz, n, A):
        check_model_size(n, A, subject=f"the Gymnasium table of {S} states and {A} actions")
        P = P.toarray().reshape(n, A, n)
    if name is None:
        name = getattr(getattr(env, "spec", None), "id", None) or type(inner).__name__
    return TabularMDP(P, R, discount, rho, name=check_label("name", name))


def _environment(env_or_id, make_kwargs: dict):
    """``env_or_id``, or ``gymnasium.make(env_or_id, **make_kwargs)`` for an id string."""
    if isinstance(env_or_id, str):
        import gymnasium as gym

        try:
            return gym.make(env_or_id, **make_kwargs)
        except (gym.error.UnregisteredEnv, gym.error.DeprecatedEnv) as exc:
            reason = str(exc).rstrip(".")
            raise OptplanError(
                f"env_or_id {env_or_id!r} is not a registered Gymnasium environment: {reason}"
                f"{_close_ids(env_or_id, gym.registry)}"
            ) from exc
    if make_kwargs:
        raise OptplanTypeError(
            f"keyword arguments {sorted(make_kwargs)} are for gymnasium.make and apply "
            f"only when env_or_id is an id string"
        )
    return env_or_id


def _close_ids(env_id: str, registry) -> str:
    """``"; close ids: ..."`` naming registered ids near ``env_id``, or ``""``."""
    import difflib

    close = difflib.get_close_matches(env_id, list(registry), n=3, cutoff=0.6)
    return f"; close ids: {', '.join(close)}" if close else ""


def _table(env) -> dict:
    """:func:`table_of`, or the ``TypeError`` saying what :func:`from_gymnasium` needs."""
    table = table_of(env)
    if table is None:
        raise OptplanTypeError(
            f"from_gymnasium needs an environment exposing its transition table as "
            f"env.unwrapped.P, a dict P[s][a] = [(prob, next_state, reward, terminated), ...] "
            f"(Gymnasium's toy-text FrozenLake, Taxi, CliffWalking have one); "
            f"{type(getattr(env, 'unwrapped', env)).__name__} has none"
        )
    return table


def _table_shape(table: dict) -> tuple[int, int]:
    """``(S, A)`` of the table (``A`` from ``P[0]``)."""
    S = len(table)
    if S == 0:
        raise OptplanError("env.unwrapped.P is empty: the model needs at least one state")
    first = table.get(0)
    if not isinstance(first, dict) or not first:
        raise OptplanError(f"env.unwrapped.P[0] must be a non-empty dict of actions, got {first!r}")
    return S, len(first)


def _outcomes(table: dict, S: int, A: int) -> tuple[np.ndarray, ...]:
    """One pass over the table into flat arrays ``(s, a, next_state, prob, reward,
    terminated)``, one entry per listed outcome; everything after is vectorized."""
    s_idx, a_idx, nxt, prob, rew, term = [], [], [], [], [], []
    for s in range(S):
        row = table.get(s)
        if not isinstance(row, dict):
            raise OptplanError(f"env.unwrapped.P has no state {s} (keys must be 0..{S - 1})")
        if len(row) != A:
            raise OptplanError(f"env.unwrapped.P[{s}] has {len(row)} actions, expected {A} as P[0]")
        for a in range(A):
            outcomes = row.get(a)
            if outcomes is None:
                raise OptplanError(f"env.unwrapped.P[{s}] has no action {a}")
            for k, item in enumerate(outcomes):
                try:
                    p, s2, r, done = item[:4]
                except (TypeError, ValueError):
                    raise OptplanTypeError(
                        f"env.unwrapped.P[{s}][{a}][{k}] must be a tuple (prob, next_state, "
                        f"reward, terminated), got {item!r}"
                    ) from None
                s_idx.append(s)
                a_idx.append(a)
                nxt.append(_index(s2, f"env.unwrapped.P[{s}][{a}][{k}] next_state"))
                prob.append(p)
                rew.append(r)
                term.append(bool(done))
    return (
        np.asarray(s_idx, dtype=np.intp),
        np.asarray(a_idx, dtype=np.intp),
        np.asarray(nxt, dtype=np.intp),
        np.asarray(prob, dtype=float),
        np.asarray(rew, dtype=float),
        np.asarray(term, dtype=bool),
    )


def _checked_outcomes(table: dict, S: int, A: int) -> tuple[np.ndarray, ...]:
    """:func:`_outcomes`, checked: next states in range, probabilities finite and ``>= 0``,
    rewards finite, and the probabilities of each ``P[s][a]`` summing to 1."""
    s_idx, a_idx, nxt, prob, rew, term = flat = _outcomes(table, S, A)
    bad = (nxt < 0) | (nxt >= S)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise OptplanError(
            f"env.unwrapped.P[{s_idx[i]}][{a_idx[i]}] moves to state {int(nxt[i])}, outside "
            f"[0, {S})"
        )
    bad = ~np.isfinite(prob) | (prob < 0) | ~np.isfinite(rew)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise OptplanError(
            f"env.unwrapped.P[{s_idx[i]}][{a_idx[i]}] has probability {float(prob[i])!r} and "
            f"reward {float(rew[i])!r}: probabilities must be finite and >= 0, rewards finite"
        )
    sums = np.zeros((S, A))
    np.add.at(sums, (s_idx, a_idx), prob)
    bad = np.abs(sums - 1.0) > ROW_SUM_TOL
    if bad.any():
        s, a = (int(x) for x in np.argwhere(bad)[0])
        raise OptplanError(
            f"the probabilities of env.unwrapped.P[{s}][{a}] (state {s}, action {a}) sum to "
            f"{float(sums[s, a])!r}, not 1 (tolerance {ROW_SUM_TOL})"
        )
    return flat


def _assemble(outcomes, S: int, A: int, rho: np.ndarray, terminal: str):
    """``(P, R, initial)`` of the model from the checked ``outcomes``, ``P`` a CSR matrix of
    shape ``(n·A, n)`` (row ``s·A + a``; ``n`` states): expected rewards, and the terminating
    transitions sent to the appended absorbing state or to ``rho``. Memory ``O(entries)``."""
    import scipy.sparse as sp

    s_idx, a_idx, nxt, prob, rew, term = outcomes
    keep = ~term
    rows, cols, vals = [s_idx[keep] * A + a_idx[keep]], [nxt[keep]], [prob[keep]]
    n = S
    if terminal == "restart":
        support = np.flatnonzero(rho)
        ends = s_idx[term] * A + a_idx[term]
        rows.append(np.repeat(ends, support.size))
        cols.append(np.tile(support, ends.size))
        vals.append(np.outer(prob[term], rho[support]).ravel())
    elif term.any():
        n = S + 1
        rows += [s_idx[term] * A + a_idx[term], S * A + np.arange(A)]
        cols += [np.full(int(term.sum()), S), np.full(A, S)]
        vals += [prob[term], np.ones(A)]
        rho = np.append(rho, 0.0)
    R = np.zeros((n, A))
    np.add.at(R, (s_idx, a_idx), prob * rew)
    P = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n * A, n)
    ).tocsr()  # duplicates summed
    P.eliminate_zeros()
    P.sort_indices()
    # Normalize rows exactly (sums checked above), so row sums are 1 to round-off.
    sums = np.asarray(P.sum(axis=1)).ravel()
    P.data /= np.repeat(sums, np.diff(P.indptr))
    return P, R, rho


def _initial(inner, initial, S: int) -> np.ndarray:
    """The start distribution: given, else ``initial_state_distrib`` normalized, else uniform."""
    source = "initial"
    if initial is None:
        initial = getattr(inner, "initial_state_distrib", None)
        source = f"{type(inner).__name__}.initial_state_distrib"
        if initial is None:
            return np.full(S, 1.0 / S)
    rho = np.asarray(initial, dtype=float)
    if rho.shape != (S,):
        raise OptplanError(f"{source} has shape {rho.shape}, expected ({S},)")
    if not np.isfinite(rho).all() or (rho < 0).any() or rho.sum() <= 0:
        raise OptplanError(f"{source} must be finite, >= 0 and not all zero, got {rho!r}")
    return rho / rho.sum()  # Taxi stores counts of its start states


def from_mdptoolbox(
    P,
    R,
    discount: float | None = None,
    initial=None,
    action_mask=None,
    name: str = "",
    *,
    sparse: bool | None = None,
) -> TabularMDP:
    """A :class:`~optplan.mdp.TabularMDP` from pymdptoolbox's arrays.

    The parameters after ``R`` are the fields of :class:`MDPToolboxModel` in order, so
    ``from_mdptoolbox(*to_mdptoolbox(mdp)) == mdp``.

    Parameters
    ----------
    P : array_like, shape (A, S, S), or a sequence of A (S, S) matrices
        ``P[a, s, s']`` (pymdptoolbox's layout), or a list of ``A`` scipy.sparse ``(S, S)``
        matrices as pymdptoolbox also takes (read without building a dense array when the
        model comes out sparse).
    R : array_like, shape (S, A), (S,) or (A, S, S)
        Rewards as pymdptoolbox accepts them: per state-action, per state (every action
        alike), or per transition ``R[a, s, s']``, whose expectation
        ``sum_s' P[a, s, s'] R[a, s, s']`` is taken.
    discount : float in [0, 1), optional
        ``None``: an average-reward model.
    initial : array_like, shape (S,), optional
        Start distribution; uniform if omitted (pymdptoolbox has none).
    action_mask : array_like of bool, shape (S, A), optional
        Admissible actions; all if omitted (pymdptoolbox has no masks).
    name : str, optional
    sparse : bool, optional
        Hold ``P`` as a CSR ``(S·A, S)`` matrix (``True``) or dense ``(S, A, S)``
        (``False``). ``None`` (default): sparse when that pays, i.e. when fewer than
        :data:`SPARSE_MAX_DENSITY` (5%) of the entries of ``P`` are nonzero and
        ``S >= SPARSE_MIN_STATES`` (200).

    Returns
    -------
    TabularMDP
        ``P[s, a, s'] = P_toolbox[a, s, s']``.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.array([[[0.5, 0.5], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])  # P[a, s, s']
    >>> R = np.array([[0.0, 1.0], [2.0, 0.0]])                            # R[s, a]
    >>> from_mdptoolbox(P, R, 0.9)
    TabularMDP(S=2, A=2, discount=0.9)
    """
    if isinstance(P, (list, tuple)) and any(hasattr(m, "tocsr") for m in P):
        return _from_sparse_toolbox(P, R, discount, initial, action_mask, name, sparse)
    mats = [_dense(m) for m in P] if isinstance(P, (list, tuple)) else None
    Pt = np.asarray(mats if mats is not None else _dense(P), dtype=float)
    S, A = _toolbox_shape(Pt.shape)
    Rsa = _toolbox_rewards(R, S, A, lambda Rt: np.einsum("ast,ast->sa", Pt, Rt))
    P_sas = np.transpose(Pt, (1, 0, 2))
    if _wants_sparse(sparse, int(np.count_nonzero(Pt)), S, A):
        import scipy.sparse as sp

        P_sas = sp.csr_matrix(P_sas.reshape(S * A, S))
    return TabularMDP(P_sas, Rsa, discount, initial, action_mask, name=name)


def _toolbox_shape(shape: tuple) -> tuple[int, int]:
    """``(S, A)`` of pymdptoolbox's ``P`` of ``shape`` (A, S, S), or the error naming it."""
    if len(shape) != 3 or shape[1] != shape[2]:
        hint = ""
        if len(shape) == 3 and shape[0] == shape[2]:
            hint = (
                f"; {shape} looks like optplan's own layout P[s, a, s'] (S, A, S), which "
                f"TabularMDP takes as it is"
            )
        raise OptplanError(
            f"P must have shape (A, S, S) (pymdptoolbox's layout P[a, s, s']), got {shape}{hint}"
        )
    return shape[1], shape[0]


def _toolbox_rewards(R, S: int, A: int, expect) -> np.ndarray:
    """``R[s, a]`` from pymdptoolbox's reward forms; ``expect(R[a, s, s'])`` gives the
    expectation over the next state of the per-transition form."""
    if isinstance(R, (list, tuple)) and len(R) == A and all(hasattr(m, "shape") for m in R):
        if all(tuple(m.shape) == (S, S) for m in R):
            return expect(R)
    Rt = np.asarray(
        [_dense(m) for m in R] if isinstance(R, (list, tuple)) else _dense(R), dtype=float
    )
    if Rt.shape == (S, A):
        return Rt
    if Rt.shape == (S,):
        return np.repeat(Rt[:, None], A, axis=1)
    if Rt.shape == (A, S, S):
        return expect(Rt)
    raise OptplanError(
        f"R has shape {Rt.shape}; pymdptoolbox's forms are (S, A) = {(S, A)}, (S,) = "
        f"{(S,)} or (A, S, S) = {(A, S, S)} (from P {(A, S, S)})"
    )


def _from_sparse_toolbox(P, R, discount, initial, action_mask, name, sparse) -> TabularMDP:
    """:func:`from_mdptoolbox` of a list of ``A`` scipy.sparse ``(S, S)`` matrices: the CSR
    ``(S·A, S)`` matrix built from them (rows ``a·S + s`` reordered to ``s·A + a``), never a
    dense ``(A, S, S)`` array unless the rule (or ``sparse=False``) asks for a dense model."""
    import scipy.sparse as sp

    mats = [sp.csr_matrix(m, dtype=float) for m in P]
    shape = (len(mats), *mats[0].shape)
    S, A = _toolbox_shape(shape)
    for a, m in enumerate(mats):
        if m.shape != (S, S):
            raise OptplanError(f"P[{a}] has shape {m.shape}, expected {(S, S)} as P[0]")

    def expect(Rt):
        cols = []
        for a in range(A):
            other = Rt[a]
            prod = mats[a].multiply(other if hasattr(other, "tocsr") else np.asarray(other))
            cols.append(np.asarray(prod.sum(axis=1), dtype=float).ravel())
        return np.stack(cols, axis=1)

    Rsa = _toolbox_rewards(R, S, A, expect)
    order = (np.arange(S)[:, None] + S * np.arange(A)[None, :]).ravel()  # row s·A + a
    P_rows = sp.vstack(mats, format="csr")[order]
    P_rows.sort_indices()
    if not _wants_sparse(sparse, P_rows.nnz, S, A):
        check_model_size(S, A, subject=f"pymdptoolbox's P of {S} states and {A} actions")
        P_rows = P_rows.toarray().reshape(S, A, S)
    return TabularMDP(P_rows, Rsa, discount, initial, action_mask, name=name)


def _dense(m):
    return m.toarray() if hasattr(m, "toarray") else m


class MDPToolboxModel(NamedTuple):
    """A :class:`~optplan.mdp.TabularMDP` in pymdptoolbox's layout, from :func:`to_mdptoolbox`.

    The first two fields are what pymdptoolbox's solvers take, the third its ``discount``
    argument; the rest is what pymdptoolbox has no place for. The fields are
    :func:`from_mdptoolbox`'s parameters in order, so ``from_mdptoolbox(*tb)`` rebuilds the
    model exactly::

        tb = op.to_mdptoolbox(mdp)
        mdptoolbox.mdp.PolicyIteration(tb.P, tb.R, tb.discount)   # or (*tb[:3]) when discounted
        assert op.from_mdptoolbox(*tb) == mdp

    Attributes
    ----------
    P : ndarray, shape (A, S, S)
        ``P[a, s, s']``.
    R : ndarray, shape (S, A)
        ``R[s, a]``.
    discount : float or None
        The model's discount (``None``: average reward).
    initial : ndarray, shape (S,)
        The model's start distribution.
    action_mask : ndarray of bool, shape (S, A), or None
        The admissible actions; ``None`` when every action is admissible.
    name : str
        The model's label.
    """

    P: np.ndarray
    R: np.ndarray
    discount: float | None
    initial: np.ndarray
    action_mask: np.ndarray | None
    name: str


def to_mdptoolbox(mdp: TabularMDP, *, allow_masked: bool = False) -> MDPToolboxModel:
    """The model in pymdptoolbox's layout, with what pymdptoolbox has no place for beside it.

    Parameters
    ----------
    mdp : TabularMDP
    allow_masked : bool, default False
        pymdptoolbox has no action masks: a solver given ``P`` and ``R`` of a model with
        inadmissible actions treats them as admissible. A masked model is therefore refused
        unless ``allow_masked=True``, which returns its arrays as they are (the rows of
        inadmissible pairs included) with the mask in ``action_mask``, for the round trip.

    Returns
    -------
    MDPToolboxModel
        ``(P, R, discount, initial, action_mask, name)``: ``P[a, s, s']`` (A, S, S) and
        ``R[s, a]`` (S, A) first, as pymdptoolbox takes them (``P, R, *_ =
        to_mdptoolbox(mdp)``, or ``tb.P``, ``tb.R``), then the rest of the model, so that
        ``from_mdptoolbox(*to_mdptoolbox(mdp)) == mdp``.

    Raises
    ------
    TypeError
        ``mdp`` is not a :class:`~optplan.mdp.TabularMDP`.
    ValueError
        ``mdp`` has an inadmissible action and ``allow_masked`` is False.
    """
    if not isinstance(mdp, TabularMDP):
        raise OptplanTypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    masked = not mdp.action_mask.all()
    if masked and not allow_masked:
        s, a = (int(x) for x in np.argwhere(~mdp.action_mask)[0])
        raise OptplanError(
            f"pymdptoolbox has no action masks, but action {a} is inadmissible in state {s} "
            f"(mdp.action_mask[{s}, {a}] is False); pass allow_masked=True for the arrays "
            f"with the mask beside them (pymdptoolbox would treat every action as admissible)"
        )
    return MDPToolboxModel(
        P=np.ascontiguousarray(np.transpose(mdp.dense_P(), (1, 0, 2))),
        R=np.array(mdp.R),
        discount=mdp.discount,
        initial=np.array(mdp.initial),
        action_mask=np.array(mdp.action_mask) if masked else None,
        name=mdp.name,
    )
