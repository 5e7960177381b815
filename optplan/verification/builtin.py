"""optplan's own problems as verification targets: what a user's function receives, what it
returns, how it is compared with the conic path, and the instances drawn.

Each target is keyed by its problem stem. The user's function is called with the problem's
inputs as positional arguments, in the order of :attr:`BuiltinTarget.args` (plus
``action_mask=`` by keyword for the MDP problems, when the function accepts it), and returns
the value, or ``(value, x)``, or ``(value, x, multiplier)`` (see :mod:`optplan.verification`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import OptplanError, check_choice, check_int
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..problems import (
    AverageRewardPlanning,
    ClippedOptimisticPlanning,
    DiscountedPlanning,
    FiniteHorizonPlanning,
    HittingTimes,
    KLBallIndex,
    KLearningTemperature,
    KLInfRate,
    L1BallIndex,
    MomentMatchingVariance,
    OptimisticPlanning,
    UncertaintyBellman,
)
from ..problems._compare import diff, diff_up_to_constant, flow_residual, unique_argmax
from ..problems.base import Problem
from ..result import PlanResult

__all__ = ["BuiltinTarget", "BUILTIN", "builtin_target", "optplan_fast"]


def _strategies():
    from . import strategies  # imports hypothesis: only when instances are drawn

    return strategies


@dataclass(frozen=True)
class BuiltinTarget:
    """One of optplan's problems, as :func:`optplan.verify` sees it.

    Attributes
    ----------
    name : str
        The problem stem (``"kl_ball"`` ...).
    args : tuple of str
        The inputs passed to the user's function, positionally, in this order.
    quantities : dict
        What ``value``, ``x`` and ``multiplier`` of the user's answer mean (only the keys
        listed are compared).
    options : dict
        Settings of the instances (``max_states`` ...) and their defaults.
    """

    name: str
    args: tuple[str, ...]
    quantities: dict[str, str]
    make: Callable[[dict, dict], Problem]
    draw: Callable[[dict], Any]
    compare_fn: Callable | None = None
    options: dict = field(default_factory=dict)
    masks: bool = False  # ``action_mask=`` is passed by keyword when fn accepts it
    settings: dict = field(default_factory=dict)

    # -- the protocol of a verification target (shared with DeclaredProblem) --------------

    def configure(self, options: dict | None, fn=None) -> BuiltinTarget:
        """This target with ``options`` applied (validated) and masks drawn iff ``fn`` takes an
        ``action_mask`` keyword."""
        settings = dict(self.options)
        for key, value in (options or {}).items():
            if key not in self.options:
                raise OptplanError(
                    f"verify: problem {self.name!r} has no option {key!r} (its options: "
                    f"{', '.join(self.options) or 'none'})"
                )
            settings[key] = value
        for key, value in settings.items():
            if key.startswith("max_"):
                check_int(f"options[{key!r}]", value, 1)
        if "ball" in settings:
            check_choice("options['ball']", settings["ball"], ("l1", "kl"))
        if "criterion" in settings:
            check_choice("options['criterion']", settings["criterion"], ("discounted", "average"))
        settings["masks"] = self.masks and fn is not None and accepts_keyword(fn, "action_mask")
        return _replace(self, settings=settings)

    @property
    def label(self) -> str:
        extra = [f"{k}={v}" for k, v in self.settings.items() if k in ("ball", "criterion")]
        return self.name + (f" ({', '.join(extra)})" if extra else "")

    @property
    def call_args(self) -> tuple[str, ...]:
        if self.name == "optimistic" and self.settings.get("criterion") == "average":
            return tuple(a for a in self.args if a != "discount")
        return self.args

    def strategy(self):
        return self.draw(self.settings)

    def prepare(self, inputs: dict) -> Problem:
        return self.make(_copies(inputs), self.settings)

    def call(self, fn, inputs: dict):
        inputs = _copies(inputs)
        kwargs = {"action_mask": inputs["action_mask"]} if "action_mask" in inputs else {}
        return fn(*(_plain(inputs[a]) for a in self.call_args), **kwargs)

    def solve(self, problem: Problem, solver: str, solver_options: dict | None) -> PlanResult:
        opts = {"solver_options": solver_options} if solver_options else {}
        return problem.solve(method="conic", solver=solver, **opts)

    def reference(self, problem: Problem) -> PlanResult:
        return problem.solve(method="fast")

    def expected(self, problem: Problem, conic: PlanResult) -> dict[str, tuple]:
        """Shapes of the user's ``x`` and ``multiplier`` (``()`` for a scalar)."""
        out = {}
        if "x" in self.quantities:
            out["x"] = np.shape(_conic_x(self, problem, conic))
        if "multiplier" in self.quantities:
            out["multiplier"] = np.shape(conic.multiplier)
        return out

    @property
    def sqrt_tol(self) -> frozenset:
        return self.make_class.sqrt_tol_quantities

    @property
    def certified_by(self) -> dict:
        """The problem's (:attr:`Problem.certified_by`); for the LPs the occupancy passes
        when it is a feasible dual attaining the optimal value (with tiny rewards, 1e-6, the
        optimal occupancy is unique but Clarabel fixes it only to its absolute tolerance)."""
        out = dict(self.make_class.certified_by)
        if self.name in ("discounted", "average_reward"):
            out["multiplier"] = ("multiplier_feasibility", "multiplier_value")
        if self.name == "optimistic" and (self.settings or {}).get("criterion") == "average":
            out["x"] = ("x_alt",)
        return out

    @property
    def make_class(self) -> type[Problem]:
        return _CLASSES[self.name]

    def compare(self, problem: Problem, answer, conic: PlanResult) -> dict:
        if self.compare_fn is None:  # the index problems: the problem's own compare
            mult = np.nan if answer.multiplier is None else answer.multiplier
            if self.name == "l1_ball" and answer.multiplier is None:
                mult = None
            a = PlanResult(answer.value, answer.x, mult, status="optimal")
            return problem.compare(a, conic)
        return self.compare_fn(self, problem, answer, conic)


def _replace(target: BuiltinTarget, **changes) -> BuiltinTarget:
    from dataclasses import replace

    return replace(target, **changes)


def accepts_keyword(fn, name: str) -> bool:
    """``fn`` takes a keyword argument ``name`` (or ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in params
    )


def _copies(inputs: dict) -> dict:
    return {k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def _plain(value):
    """A 0-d value as a Python float (so a user's ``if radius == 0`` works as written)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return float(value)
    return value


def _conic_x(target: BuiltinTarget, problem: Problem, conic: PlanResult):
    name = target.name
    if name in ("discounted", "finite_horizon", "clipped_optimistic", "hitting_time"):
        return conic.values
    if name == "average_reward":
        return conic.bias
    if name == "optimistic":
        return conic.bias if problem.criterion == "average" else conic.values
    return conic.x


# -- comparisons of the MDP problems: value, x and (where listed) the occupancy ---------------


def _floor(pair: tuple[float, float], floor: float) -> tuple[float, float]:
    """``(err, max(scale, floor))``: an LP's answer is fixed only relative to its data (a
    conic solver's stopping tolerances are relative to the data's size), so values, biases
    and occupancy values are compared on the reward scale when the answer is smaller than it
    (found by op.verify: a finite-horizon value 0 at rewards of +-1e6, Clarabel -4.95e-7)."""
    return pair[0], max(pair[1], floor)


def _reward_scale(R, mask=None) -> float:
    R = np.asarray(R, dtype=float)
    if mask is not None:
        R = R[np.asarray(mask, dtype=bool)]
    return float(np.abs(R).max(initial=0.0))


def _occupancy(problem, answer, conic, source, discount, R, mask, scale) -> dict:
    occ = np.asarray(answer.multiplier, dtype=float)
    out = {}
    if unique_argmax(conic.q):
        out["multiplier"] = diff(occ, conic.occupancy)
    # with ties any optimal dual is right: check it is feasible (flow conservation, >= 0,
    # nothing on masked pairs) and attains the optimal objective
    P = problem.mdp.P
    residual = flow_residual(occ, P, source, discount)
    residual += max(-float(occ.min()), 0.0) + float(np.abs(occ[~mask]).sum())
    if discount == 1.0:
        residual += abs(float(occ.sum()) - 1.0)
    out["multiplier_feasibility"] = (residual, 1.0)
    # strong duality: the occupancy's value is the optimal value, which the solver fixes more
    # accurately than its own occupancy (rewards of 1e6: Clarabel's occupancy value was 4.95
    # off its value, the fast one's 1e-10)
    out["multiplier_value"] = _floor(
        diff(scale * float(np.sum(occ * R)), conic.value), scale * _reward_scale(R, mask)
    )
    return out


def _compare_discounted(target, problem, answer, conic):
    mdp = problem.mdp
    floor = _reward_scale(mdp.R, mdp.action_mask) / (1.0 - mdp.discount)
    out = {"value": _floor(diff(answer.value, conic.value), floor)}
    if answer.x is not None:
        out["x"] = _floor(diff(answer.x, conic.values), floor)
    if answer.multiplier is not None:
        mdp = problem.mdp
        gamma = mdp.discount
        out |= _occupancy(
            problem,
            answer,
            conic,
            (1.0 - gamma) * problem.weights,
            gamma,
            mdp.R,
            mdp.action_mask,
            1.0 / (1.0 - gamma),
        )
    return out


def _compare_average(target, problem, answer, conic):
    floor = _reward_scale(problem.mdp.R, problem.mdp.action_mask)
    out = {"value": _floor(diff(answer.value, conic.gain), floor)}
    if answer.x is not None:
        out["x"] = _floor(diff_up_to_constant(answer.x, conic.bias), floor)
    if answer.multiplier is not None:
        mdp = problem.mdp
        zero = np.zeros(mdp.n_states)
        out |= _occupancy(problem, answer, conic, zero, 1.0, mdp.R, mdp.action_mask, 1.0)
    return out


def _compare_hitting(target, problem, answer, conic):
    """The diameter and the finite hitting times; the infinite ones must coincide (as
    :meth:`HittingTimes.compare`)."""
    if np.isfinite(conic.value):
        out = {"value": diff(answer.value, conic.value)}
    else:
        out = {"value": (0.0 if answer.value == conic.value else np.inf, 0.0)}
    if answer.x is not None:
        finite = np.isfinite(conic.values)
        if not np.array_equal(np.isfinite(answer.x), finite):
            out["x"] = (np.inf, 0.0)
        else:
            out["x"] = diff(answer.x[finite], conic.values[finite])
    return out


def _compare_values(target, problem, answer, conic):
    """Value and ``x`` (``V``; the bias, up to a constant, under average reward); the
    finite-horizon LP's on the reward scale ``L max |R|`` (:func:`_floor`)."""
    floor = 0.0
    if target.name == "finite_horizon":
        mdp = problem.mdp
        floor = mdp.horizon * _reward_scale(mdp.R, mdp.action_mask)
    out = {"value": _floor(diff(answer.value, conic.value), floor)}
    if answer.x is not None:
        ref = _conic_x(target, problem, conic)
        average = target.name == "optimistic" and problem.criterion == "average"
        x = diff_up_to_constant(answer.x, ref) if average else diff(answer.x, ref)
        out["x"] = _floor(x, floor)
        if target.name == "k_temperature":
            out |= _tau_gap(problem, answer, conic)
        elif average:
            out |= _bias_residual(problem, answer, conic)
    if answer.multiplier is not None and "multiplier" in target.quantities:
        out["multiplier"] = diff(answer.multiplier, conic.multiplier)
    return out


def _tau_gap(problem, answer, conic) -> dict:
    """``x_alt``: the objective at the user's ``tau`` against the optimum (``tau*`` is not
    unique where the objective is flat; :attr:`KLearningTemperature.certified_by`)."""
    tau = float(np.asarray(answer.x, dtype=float).reshape(-1)[0])
    if not (np.isfinite(tau) and tau >= 0):
        return {}
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        f = problem.objective(max(tau, np.finfo(float).tiny))  # 0 stands for 0+
    return {"x_alt": (abs(f - conic.value) if np.isfinite(f) else np.inf, abs(conic.value))}


def _bias_residual(problem, answer, conic) -> dict:
    """``x_alt``: the residual of the user's bias ``h`` in the optimistic optimality equation
    ``g + h(s) = max_a r(s, a) + beta(s, a) + max_{q in B(s, a)} q . h`` at the solver's
    gain, on the scale of ``h``: with ``h`` unique up to a constant (a unichain optimistic
    MDP), a small residual proves it right where the solver's bias is not (a state escaping
    with probability 1e-12 has a bias of -1e12, and Clarabel's, reported optimal, was off by
    2e11). The inner maximum is optplan's index kernel, itself verified against the conic
    index problems."""
    from ..dp import masked
    from ..fast.optimistic import optimistic_backup

    h = np.asarray(answer.x, dtype=float)
    if h.shape != (problem.n_states,) or not np.isfinite(h).all():
        return {}
    sigma, _, _ = optimistic_backup(problem, h, statuses=False)
    Q = masked(problem.r_hat + problem.reward_radius + sigma, problem.action_mask)
    residual = float(np.abs(Q.max(axis=1) - h - conic.value).max())
    return {"x_alt": (residual, float(np.abs(h).max()) + abs(conic.value))}


# -- building the problem objects from drawn inputs -------------------------------------------


def _tabular(inputs: dict, discount: bool) -> TabularMDP:
    return TabularMDP(
        inputs["P"],
        inputs["R"],
        discount=inputs["discount"] if discount else None,
        action_mask=inputs.get("action_mask"),
    )


def _optimistic(inputs: dict, settings: dict) -> OptimisticPlanning:
    return OptimisticPlanning(
        p_hat=inputs["p_hat"],
        r_hat=inputs["r_hat"],
        radius=inputs["radius"],
        reward_radius=inputs["reward_radius"],
        ball=settings["ball"],
        criterion=settings["criterion"],
        discount=inputs.get("discount"),
        action_mask=inputs.get("action_mask"),
    )


def _hitting(inputs: dict, settings: dict) -> HittingTimes:
    P = inputs["P"]
    return HittingTimes(TabularMDP(P, np.zeros(P.shape[:2]), action_mask=inputs.get("action_mask")))


def _draw_hitting(settings):
    base = _strategies().mdps(
        settings["max_states"], settings["max_actions"], discount=False, masks=settings["masks"]
    )
    return base.map(lambda d: {k: v for k, v in d.items() if k != "R"})


def _draw_index(settings):
    return _strategies().index_instances(settings["max_states"])


def _draw_kl_inf(settings):
    return _strategies().kl_inf_instances(settings["max_states"])


def _draw_mdp(discount: bool, unichain: bool):
    def draw(settings):
        return _strategies().mdps(
            settings["max_states"],
            settings["max_actions"],
            discount=discount,
            masks=settings["masks"],
            unichain=unichain,
        )

    return draw


def _draw_layered(settings):
    return _strategies().layered_mdps(
        settings["max_layers"], settings["max_states"], settings["max_actions"], settings["masks"]
    )


def _draw_optimistic(settings):
    st = _strategies()
    base = st.optimistic_instances(
        settings["criterion"], settings["max_states"], settings["max_actions"]
    )
    if settings["masks"]:
        return base
    return base.map(lambda d: {k: v for k, v in d.items() if k != "action_mask"})


def _draw_clipped(settings):
    base = _strategies().clipped_optimistic_instances(
        settings["max_states"], settings["max_actions"]
    )
    if settings["masks"]:
        return base
    return base.map(lambda d: {k: v for k, v in d.items() if k != "action_mask"})


_INDEX_Q = {
    "x": "q*, the optimal distribution (S,)",
}

#: The targets, by stem.
BUILTIN: dict[str, BuiltinTarget] = {
    t.name: t
    for t in (
        BuiltinTarget(
            "kl_ball",
            ("p", "v", "radius"),
            {
                "value": "C(p, v, d) = max {q.v : KL(p||q) <= d}",
                **_INDEX_Q,
                "multiplier": "lam = dC/dd, the KL constraint's multiplier",
            },
            lambda d, s: KLBallIndex(d["p"], d["v"], d["radius"]),
            _draw_index,
            options={"max_states": 500},
        ),
        BuiltinTarget(
            "kl_inf",
            ("p", "v", "target"),
            {
                "value": "D(p, v, rho) = min {KL(p||q) : q.v >= rho}",
                **_INDEX_Q,
                "multiplier": "dD/drho, the multiplier of q.v >= rho",
            },
            lambda d, s: KLInfRate(d["p"], d["v"], d["target"]),
            _draw_kl_inf,
            options={"max_states": 500},
        ),
        BuiltinTarget(
            "l1_ball",
            ("p", "v", "radius"),
            {
                "value": "B(p, v, d) = max {q.v : ||q - p||_1 <= d}",
                **_INDEX_Q,
                "multiplier": "dB/dd (at a kink any value between the one-sided derivatives)",
            },
            lambda d, s: L1BallIndex(d["p"], d["v"], d["radius"]),
            _draw_index,
            options={"max_states": 500},
        ),
        BuiltinTarget(
            "discounted",
            ("P", "R", "discount"),
            {
                "value": "mean(V): the uniform start distribution's value",
                "x": "V (S,), the optimal values",
                "multiplier": "the normalized discounted occupancy (S, A) from the uniform start",
            },
            lambda d, s: DiscountedPlanning(_tabular(d, True)),
            _draw_mdp(True, False),
            _compare_discounted,
            options={"max_states": 40, "max_actions": 5},
            masks=True,
        ),
        BuiltinTarget(
            "average_reward",
            ("P", "R"),
            {
                "value": "the optimal gain",
                "x": "the bias h (S,), compared up to an additive constant",
                "multiplier": "the stationary state-action frequencies (S, A), summing to 1",
            },
            lambda d, s: AverageRewardPlanning(_tabular(d, False)),
            _draw_mdp(False, True),
            _compare_average,
            options={"max_states": 40, "max_actions": 5},
            masks=True,
        ),
        BuiltinTarget(
            "finite_horizon",
            ("P", "R"),
            {
                "value": "mean(V[0]): the uniform start distribution's value",
                "x": "V[l, s] (L, S)",
            },
            lambda d, s: FiniteHorizonPlanning(
                FiniteHorizonMDP(d["P"], d["R"], action_mask=d.get("action_mask"))
            ),
            _draw_layered,
            _compare_values,
            options={"max_layers": 8, "max_states": 15, "max_actions": 4},
            masks=True,
        ),
        BuiltinTarget(
            "hitting_time",
            ("P",),
            {
                "value": "the diameter max_{s != t} T[t, s] (inf when some state cannot reach "
                "another)",
                "x": "T[t, s] (S, S), the least expected steps from s to t (inf: unreachable)",
            },
            _hitting,
            _draw_hitting,
            _compare_hitting,
            options={"max_states": 15, "max_actions": 4},
            masks=True,
        ),
        BuiltinTarget(
            "k_temperature",
            ("mean_rewards", "mean_transitions", "counts", "sigma"),
            {"value": "the objective of problem (11) at tau*", "x": "tau*"},
            lambda d, s: KLearningTemperature(
                d["mean_rewards"], d["mean_transitions"], d["counts"], d["sigma"]
            ),
            lambda s: _strategies().k_learning_posteriors(
                s["max_layers"], s["max_states"], s["max_actions"]
            ),
            _compare_values,
            options={"max_layers": 6, "max_states": 5, "max_actions": 4},
        ),
        BuiltinTarget(
            "ube",
            ("mean_transitions", "policy", "local", "discount"),
            {
                "value": "sum(u)",
                "x": "u (S, A), the fixed point",
                "multiplier": "y (S, A), the gamma^2-discounted pair occupancy from all ones",
            },
            lambda d, s: UncertaintyBellman(
                d["mean_transitions"], d["policy"], d["local"], d["discount"]
            ),
            lambda s: _strategies().ube_instances(s["max_states"], s["max_actions"]),
            _compare_values,
            options={"max_states": 40, "max_actions": 5},
        ),
        BuiltinTarget(
            "moment_matching",
            ("alpha", "reward_mean", "reward_var", "policy", "discount"),
            {
                "value": "sum(sigma~^2)",
                "x": "sigma~^2 (S, A)",
                "multiplier": "y (S, A), as for the UBE",
            },
            lambda d, s: MomentMatchingVariance(
                d["alpha"], d["reward_mean"], d["reward_var"], d["policy"], d["discount"]
            ),
            lambda s: _strategies().moment_matching_instances(s["max_states"], s["max_actions"]),
            _compare_values,
            options={"max_states": 4, "max_actions": 3},
        ),
        BuiltinTarget(
            "optimistic",
            ("p_hat", "r_hat", "radius", "reward_radius", "discount"),
            {
                "value": "mean(V) (discounted) or the gain (average)",
                "x": "V (S,), or the bias h (S,) up to an additive constant (average)",
            },
            _optimistic,
            _draw_optimistic,
            _compare_values,
            options={"ball": "l1", "criterion": "discounted", "max_states": 12, "max_actions": 4},
            masks=True,
        ),
        BuiltinTarget(
            "clipped_optimistic",
            ("p_hat", "r", "bonus", "discount"),
            {"value": "mean(V)", "x": "V (S,), the clipped fixed point"},
            lambda d, s: ClippedOptimisticPlanning(
                d["p_hat"], d["r"], d["bonus"], d["discount"], d.get("action_mask")
            ),
            _draw_clipped,
            _compare_values,
            options={"max_states": 20, "max_actions": 4},
            masks=True,
        ),
    )
}

_CLASSES = {
    "kl_ball": KLBallIndex,
    "kl_inf": KLInfRate,
    "l1_ball": L1BallIndex,
    "discounted": DiscountedPlanning,
    "average_reward": AverageRewardPlanning,
    "finite_horizon": FiniteHorizonPlanning,
    "hitting_time": HittingTimes,
    "k_temperature": KLearningTemperature,
    "ube": UncertaintyBellman,
    "moment_matching": MomentMatchingVariance,
    "optimistic": OptimisticPlanning,
    "clipped_optimistic": ClippedOptimisticPlanning,
}


def builtin_target(name: str) -> BuiltinTarget:
    """The target of stem ``name``; an unknown name is an error listing the known ones."""
    if not isinstance(name, str) or name not in BUILTIN:
        import difflib

        close = difflib.get_close_matches(str(name), BUILTIN, n=2)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise OptplanError(
            f"verify: unknown problem {name!r}{hint} (optplan's problems: "
            f"{', '.join(BUILTIN)}; or declare your own with optplan.DeclaredProblem)"
        )
    return BUILTIN[name]


def optplan_fast(name: str, **options) -> Callable:
    """optplan's own fast path for problem ``name``, with the call convention of
    :func:`optplan.verify` (positional inputs, ``action_mask=`` by keyword), returning the
    :class:`~optplan.PlanResult`: ``op.verify(optplan_fast("kl_ball"), "kl_ball")`` is the
    self-check of the fast path. ``options`` are the target's (``ball``, ``criterion`` for
    ``"optimistic"``)."""
    target = builtin_target(name).configure(options)

    def fast(*args, action_mask=None):
        inputs = dict(zip(target.call_args, args, strict=True))
        if action_mask is not None:
            inputs["action_mask"] = action_mask
        if "discount" not in inputs and name == "optimistic":
            inputs["discount"] = None
        return target.make(inputs, target.settings).solve(method="fast")

    fast.__name__ = fast.__qualname__ = f"optplan_fast_{name}"
    return fast
