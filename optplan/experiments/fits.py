"""Checks :func:`~optplan.experiments.run` makes before its loop (whether an environment is
known never to end an episode, whether an agent was built for the environment's model), and
fits of regret curves: the growth exponent of a curve (:func:`growth_exponent`) and of the mean
curve over seeds with a bootstrap interval (:func:`mean_curve_exponent`)."""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError

__all__ = [
    "never_ends_episodes",
    "agent_shape",
    "check_agent_fits",
    "growth_exponent",
    "mean_curve_exponent",
]


#: Gymnasium wrappers that never end an episode themselves (what ``gymnasium.make`` adds).
_PASSTHROUGH_WRAPPERS = frozenset({"OrderEnforcing", "PassiveEnvChecker", "EnvChecker"})


def never_ends_episodes(env) -> bool:
    """Whether ``env`` is known never to end an episode: a :class:`~optplan.envs.TabularEnv`
    (or a subclass that keeps its ``step``) over a continuing ``TabularMDP`` with
    ``max_steps=None``, under no wrapper other than Gymnasium's pass-through checkers (a
    ``TimeLimit`` with a limit, :class:`~optplan.envs.DiscountedResets` or any unknown
    wrapper may end episodes, so ``False``). Environments it cannot vouch for give ``False``:
    :func:`run` then relies on its step limit."""
    from ..envs import TabularEnv
    from ..mdp import TabularMDP

    inner = env
    while hasattr(inner, "env") and inner is not getattr(inner, "unwrapped", inner):
        name = type(inner).__name__
        limited = name == "TimeLimit" and getattr(inner, "_max_episode_steps", None) is not None
        if limited or (name != "TimeLimit" and name not in _PASSTHROUGH_WRAPPERS):
            return False
        inner = inner.env
    return (
        isinstance(inner, TabularEnv)
        and type(inner).step is TabularEnv.step
        and inner.max_steps is None
        and isinstance(inner.mdp, TabularMDP)
    )


def agent_shape(agent) -> tuple[int | None, int | None, int | None | str]:
    """``(n_states, n_actions, n_layers)`` an agent was built for, as far as it says.

    Read from ``agent.n_states`` / ``agent.n_actions`` / ``agent.n_layers``, else from the
    model it holds (``agent.mdp``, e.g. :class:`~optplan.agents.OracleAgent`), else from its
    layer clock. ``None`` where the agent does not say; ``n_layers`` is ``"continuing"`` when
    the agent is known to be built for a continuing model.
    """
    from ..mdp import FiniteHorizonMDP, TabularMDP

    def count(name):
        value = getattr(agent, name, None)
        return (
            value if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None
        )

    S, A, L = count("n_states"), count("n_actions"), count("n_layers")
    model = getattr(agent, "mdp", None)
    if isinstance(model, (TabularMDP, FiniteHorizonMDP)):
        S = model.n_states if S is None else S
        A = model.n_actions if A is None else A
        if L is None:
            L = model.horizon if isinstance(model, FiniteHorizonMDP) else "continuing"
    if L is None:
        clock = getattr(agent, "_clock", getattr(agent, "clock", None))
        layers = getattr(clock, "n_layers", None)
        L = layers if isinstance(layers, (int, np.integer)) else None
    return S, A, L


def check_agent_fits(agent, mdp) -> None:
    """Refuse an agent built for another model size than ``mdp``'s, naming both.

    Compares :func:`agent_shape` with the model's states, actions and layers (what the agent
    does not state is not compared).

    Raises
    ------
    ValueError
        If the state count, the action count or the layer count differ, or a layered agent
        meets a continuing model (or the reverse).
    """
    from ..mdp import FiniteHorizonMDP

    S, A, L = agent_shape(agent)
    env_L = mdp.horizon if isinstance(mdp, FiniteHorizonMDP) else "continuing"
    wrong = []
    if S is not None and S != mdp.n_states:
        wrong.append("n_states")
    if A is not None and A != mdp.n_actions:
        wrong.append("n_actions")
    if L is not None and L != env_L:
        wrong.append("n_layers")
    if not wrong:
        return

    def describe(S, A, L):
        layers = "continuing" if L == "continuing" else f"n_layers={L}"
        return f"n_states={S}, n_actions={A}, {layers}"

    label = f" {mdp.name!r}" if mdp.name else ""
    own = getattr(getattr(agent, "mdp", None), "name", "")
    own = f" (its model {own!r})" if own else ""
    raise OptplanError(
        f"agent {type(agent).__name__} does not fit the environment: {' and '.join(wrong)} "
        f"differ. The agent was built for {describe(S, A, L)}{own}; the environment's "
        f"model{label} has {describe(mdp.n_states, mdp.n_actions, env_L)}. Build the agent "
        f"for this environment (e.g. from its env.unwrapped.mdp)"
    )


# --- growth exponents of regret curves --------------------------------------------------------


def _fit_window(t, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """``(t, mask)``: ``t`` checked (1-D, finite, positive, increasing) and the points in
    ``[lo, hi]``."""
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise OptplanError(f"t must be a 1-D array of positive finite steps, got shape {t.shape}")
    if np.any(np.diff(t) <= 0):
        raise OptplanError("t must be strictly increasing")
    if not (0 < lo < hi):
        raise OptplanError(f"the fit window must satisfy 0 < lo < hi, got lo={lo!r}, hi={hi!r}")
    return t, (t >= lo) & (t <= hi)


def _slopes(logt: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of ``log Y`` on ``logt``; ``NaN`` for a row with an entry
    ``<= 0`` (no logarithm)."""
    ok = np.all(Y > 0, axis=-1)
    logY = np.log(np.where(Y > 0, Y, 1.0))
    x = logt - logt.mean()
    k = (logY - logY.mean(axis=-1, keepdims=True)) @ x / (x @ x)
    return np.where(ok, k, np.nan)


def growth_exponent(t, y, lo: float, hi: float) -> float:
    """The growth exponent of a curve ``y(t)``: the least-squares slope of ``log y`` on
    ``log t`` over the points with ``lo <= t <= hi``.

    ``y ~ c t^k`` gives ``k``. ``NaN`` when fewer than 3 points lie in the window or ``y`` is
    not positive on all of them (a curve still at 0 has no exponent).

    Raises
    ------
    ValueError
        ``t`` is not 1-D, positive, finite and increasing, ``y`` has another length, or the
        window is not ``0 < lo < hi``.
    """
    t, keep = _fit_window(t, lo, hi)
    y = np.asarray(y, dtype=float)
    if y.shape != t.shape:
        raise OptplanError(f"y must have the shape of t {t.shape}, got {y.shape}")
    if keep.sum() < 3:
        return float("nan")
    return float(_slopes(np.log(t[keep]), y[keep]))


def mean_curve_exponent(
    t,
    Y,
    lo: float,
    hi: float,
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    rng=0,
) -> tuple[float, float, float]:
    """The growth exponent of the mean curve over seeds, with a bootstrap interval over seeds.

    ``Y`` holds one curve per seed (rows) at the steps ``t``. The estimate is
    :func:`growth_exponent` of the mean curve ``Y.mean(0)``; the interval is the percentile
    interval of the same exponent over ``n_boot`` resamples of the seeds (rows drawn with
    replacement, the mean curve of each resample fitted). This is the exponent of the expected
    regret, not the mean of per-seed exponents (which differ when seeds' curves differ in
    shape, e.g. some flat and some linear).

    Parameters
    ----------
    t : array (n,)
        Steps, positive and increasing.
    Y : array (seeds, n)
        One curve per seed.
    lo, hi : float
        The fit window ``lo <= t <= hi``.
    level : float in (0, 1)
        Coverage of the interval.
    n_boot : int >= 1
        Bootstrap resamples.
    rng : int or numpy.random.Generator
        Seed of the resampling.

    Returns
    -------
    (estimate, low, high) : tuple of float
        ``NaN`` where the mean curve is not positive on the window; resamples whose mean curve
        is not positive there are left out of the interval (``NaN`` if all are).

    Raises
    ------
    ValueError
        Bad ``t``, ``Y`` not of shape ``(seeds, len(t))`` with at least one seed, a window not
        ``0 < lo < hi``, ``level`` outside ``(0, 1)`` or ``n_boot < 1``.
    """
    t, keep = _fit_window(t, lo, hi)
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or Y.shape[1] != t.size or Y.shape[0] < 1:
        raise OptplanError(f"Y must have shape (seeds >= 1, {t.size}), got {Y.shape}")
    if not 0.0 < level < 1.0:
        raise OptplanError(f"level must lie in (0, 1), got {level!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise OptplanError(f"n_boot must be a positive integer, got {n_boot!r}")
    if keep.sum() < 3:
        return float("nan"), float("nan"), float("nan")
    logt, W = np.log(t[keep]), Y[:, keep]
    estimate = float(_slopes(logt, W.mean(axis=0)))
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = W.shape[0]
    boot = _slopes(logt, W[gen.integers(n, size=(n_boot, n))].mean(axis=1))
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return estimate, float("nan"), float("nan")
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return estimate, float(low), float(high)
