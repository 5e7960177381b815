"""The stem table: each problem stem, its problem class, and the modules that solve it.

One row per problem: the class that says *what* is solved (``optplan.problems.<stem>``), the
fast path and the conic path that say *how* (``optplan.fast.<stem>``, ``optplan.conic.<stem>``).
Every fast module defines ``solve(problem, **options) -> PlanResult``; every conic module
defines ``solve(problem, solver=..., **options)`` and ``formulate(problem) -> cvxpy.Problem``.

The table names classes and modules by their dotted names, so reading it imports nothing: a
path's module (and with it numba or CVXPY) is imported on first use. This is the one place of
``optplan.problems`` that imports modules by name; :meth:`Problem.solve
<optplan.problems.base.Problem.solve>`, :func:`optplan.verify`'s built-in targets, the
benchmark suites and the structure test all read it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .._checks import OptplanError
from ._hint import did_you_mean

__all__ = [
    "Stem",
    "STEMS",
    "stems",
    "row",
    "problem_class",
    "fast_module",
    "conic_module",
    "path_module",
]


@dataclass(frozen=True)
class Stem:
    """One row of the stem table.

    Attributes
    ----------
    name : str
        The stem (``"kl_ball"`` ...), also the problem class's ``stem`` attribute.
    problem : str
        Dotted name of the problem class (``"optplan.problems.kl_ball.KLBallIndex"``).
    fast : str
        Dotted name of the fast path's module.
    conic : str
        Dotted name of the conic path's module.
    """

    name: str
    problem: str
    fast: str
    conic: str


#: The stems, in the order optplan lists its problems (indices, planning, posteriors, the
#: regret lower bound).
STEMS: dict[str, Stem] = {
    r.name: r
    for r in (
        Stem(
            "kl_ball",
            "optplan.problems.kl_ball.KLBallIndex",
            "optplan.fast.kl_ball",
            "optplan.conic.kl_ball",
        ),
        Stem(
            "kl_inf",
            "optplan.problems.kl_inf.KLInfRate",
            "optplan.fast.kl_inf",
            "optplan.conic.kl_inf",
        ),
        Stem(
            "l1_ball",
            "optplan.problems.l1_ball.L1BallIndex",
            "optplan.fast.l1_ball",
            "optplan.conic.l1_ball",
        ),
        Stem(
            "discounted",
            "optplan.problems.discounted.DiscountedPlanning",
            "optplan.fast.discounted",
            "optplan.conic.discounted",
        ),
        Stem(
            "average_reward",
            "optplan.problems.average_reward.AverageRewardPlanning",
            "optplan.fast.average_reward",
            "optplan.conic.average_reward",
        ),
        Stem(
            "finite_horizon",
            "optplan.problems.finite_horizon.FiniteHorizonPlanning",
            "optplan.fast.finite_horizon",
            "optplan.conic.finite_horizon",
        ),
        Stem(
            "hitting_time",
            "optplan.problems.hitting_time.HittingTimes",
            "optplan.fast.hitting_time",
            "optplan.conic.hitting_time",
        ),
        Stem(
            "k_temperature",
            "optplan.problems.k_temperature.KLearningTemperature",
            "optplan.fast.k_temperature",
            "optplan.conic.k_temperature",
        ),
        Stem(
            "ube",
            "optplan.problems.ube.UncertaintyBellman",
            "optplan.fast.ube",
            "optplan.conic.ube",
        ),
        Stem(
            "moment_matching",
            "optplan.problems.moment_matching.MomentMatchingVariance",
            "optplan.fast.moment_matching",
            "optplan.conic.moment_matching",
        ),
        Stem(
            "optimistic",
            "optplan.problems.optimistic.OptimisticPlanning",
            "optplan.fast.optimistic",
            "optplan.conic.optimistic",
        ),
        Stem(
            "clipped_optimistic",
            "optplan.problems.clipped_optimistic.ClippedOptimisticPlanning",
            "optplan.fast.clipped_optimistic",
            "optplan.conic.clipped_optimistic",
        ),
        Stem(
            "regret_lower_bound",
            "optplan.problems.regret_lower_bound.RegretLowerBound",
            "optplan.fast.regret_lower_bound",
            "optplan.conic.regret_lower_bound",
        ),
    )
}


def stems() -> tuple[str, ...]:
    """Every problem stem, in table order."""
    return tuple(STEMS)


def row(stem: str) -> Stem:
    """The table row of ``stem``; an unknown stem is an :class:`OptplanError` naming the known
    ones."""
    try:
        return STEMS[stem]
    except (KeyError, TypeError):
        known = ", ".join(STEMS)
        hint = did_you_mean(stem, STEMS)
        raise OptplanError(f"unknown problem stem {stem!r}{hint} (stems: {known})") from None


def problem_class(stem: str) -> type:
    """The problem class of ``stem`` (imports its module on first use)."""
    module, _, name = row(stem).problem.rpartition(".")
    return getattr(importlib.import_module(module), name)


def fast_module(stem: str):
    """The fast path's module of ``stem`` (imported on first use)."""
    return importlib.import_module(row(stem).fast)


def conic_module(stem: str):
    """The conic path's module of ``stem`` (imported on first use; imports CVXPY)."""
    return importlib.import_module(row(stem).conic)


def path_module(stem: str, method: str):
    """The module of ``stem``'s path ``method`` (``"fast"`` or ``"conic"``)."""
    return fast_module(stem) if method == "fast" else conic_module(stem)
