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
from ..problems._hint import did_you_mean
from ..problems.base import Problem
from ..problems.stems import problem_class, stems
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
    draw : callable
        ``draw(settings)``: the hypothesis strategy of the inputs.
    make : callable, optional
        ``make(inputs, settings)``: the problem object; by default the stem's problem class
        called with the inputs of :attr:`args` in order (and ``action_mask=`` with ``masks``).
    options : dict
        Settings of the instances (``max_states`` ...) and their defaults.
    """

    name: str
    args: tuple[str, ...]
    quantities: dict[str, str]
    draw: Callable[[dict], Any]
    make: Callable[[dict, dict], Problem] | None = None
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

    def build(self, inputs: dict) -> Problem:
        """The problem object of ``inputs`` (used as they are)."""
        if self.make is not None:
            return self.make(inputs, self.settings)
        masks = {"action_mask": inputs.get("action_mask")} if self.masks else {}
        return self.make_class(*(inputs[a] for a in self.args), **masks)

    def prepare(self, inputs: dict) -> Problem:
        return self.build(_copies(inputs))

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
            out["x"] = np.shape(problem.answer_x(conic))
        if "multiplier" in self.quantities:
            out["multiplier"] = np.shape(conic.multiplier)
        return out

    @property
    def sqrt_tol(self) -> frozenset:
        return self.make_class.sqrt_tol_quantities

    @property
    def certified_by(self) -> dict:
        """The problem's certificates of a user's answer
        (:attr:`~optplan.problems.base.Problem.answer_certified_by`)."""
        cls = self.make_class
        extra = cls.answer_certified_by
        return dict(cls.certified_by) if extra is None else {**cls.certified_by, **extra}

    @property
    def make_class(self) -> type[Problem]:
        return problem_class(self.name)

    def compare(self, problem: Problem, answer, conic: PlanResult) -> dict:
        """The problem's rule (:meth:`~optplan.problems.base.Problem.compare_answer`)."""
        return problem.compare_answer(answer, conic)


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


# -- building the problem objects from drawn inputs -------------------------------------------


def _tabular(inputs: dict, discount: bool) -> TabularMDP:
    return TabularMDP(
        inputs["P"],
        inputs["R"],
        discount=inputs["discount"] if discount else None,
        action_mask=inputs.get("action_mask"),
    )


def _optimistic(inputs: dict, settings: dict) -> Problem:
    return problem_class("optimistic")(
        p_hat=inputs["p_hat"],
        r_hat=inputs["r_hat"],
        radius=inputs["radius"],
        reward_radius=inputs["reward_radius"],
        ball=settings["ball"],
        criterion=settings["criterion"],
        discount=inputs.get("discount"),
        action_mask=inputs.get("action_mask"),
    )


def _hitting(inputs: dict, settings: dict) -> Problem:
    P = inputs["P"]
    mdp = TabularMDP(P, np.zeros(P.shape[:2]), action_mask=inputs.get("action_mask"))
    return problem_class("hitting_time")(mdp)


def _without(key: str):
    return lambda inputs: {k: v for k, v in inputs.items() if k != key}


def _drawn(strategy: str, *keys: str, masks: bool = False):
    """Instances of ``strategies.<strategy>(*settings[keys])``; ``masks``: the strategy draws
    action masks, dropped when the user's function takes none."""

    def draw(settings):
        base = getattr(_strategies(), strategy)(*(settings[k] for k in keys))
        if not masks or settings["masks"]:
            return base
        return base.map(_without("action_mask"))

    return draw


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


def _draw_hitting(settings):
    return _draw_mdp(False, False)(settings).map(_without("R"))


def _index(name: str, param: str, value: str, multiplier: str, draw) -> BuiltinTarget:
    """The target of an index problem ``fn(p, v, param)``."""
    quantities = {
        "value": value,
        "x": "q*, the optimal distribution (S,)",
        "multiplier": multiplier,
    }
    return BuiltinTarget(name, ("p", "v", param), quantities, draw, options={"max_states": 500})


#: The target of each stem of :mod:`optplan.problems.stems`.
_TARGETS = (
    _index(
        "kl_ball",
        "radius",
        "C(p, v, d) = max {q.v : KL(p||q) <= d}",
        "lam = dC/dd, the KL constraint's multiplier",
        _drawn("index_instances", "max_states"),
    ),
    _index(
        "kl_inf",
        "target",
        "D(p, v, rho) = min {KL(p||q) : q.v >= rho}",
        "dD/drho, the multiplier of q.v >= rho",
        _drawn("kl_inf_instances", "max_states"),
    ),
    _index(
        "l1_ball",
        "radius",
        "B(p, v, d) = max {q.v : ||q - p||_1 <= d}",
        "dB/dd (at a kink any value between the one-sided derivatives)",
        _drawn("index_instances", "max_states"),
    ),
    BuiltinTarget(
        "discounted",
        ("P", "R", "discount"),
        {
            "value": "mean(V): the uniform start distribution's value",
            "x": "V (S,), the optimal values",
            "multiplier": "the normalized discounted occupancy (S, A) from the uniform start",
        },
        _draw_mdp(True, False),
        lambda d, s: problem_class("discounted")(_tabular(d, True)),
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
        _draw_mdp(False, True),
        lambda d, s: problem_class("average_reward")(_tabular(d, False)),
        options={"max_states": 40, "max_actions": 5},
        masks=True,
    ),
    BuiltinTarget(
        "finite_horizon",
        ("P", "R"),
        {"value": "mean(V[0]): the uniform start distribution's value", "x": "V[l, s] (L, S)"},
        _drawn("layered_mdps", "max_layers", "max_states", "max_actions", "masks"),
        lambda d, s: problem_class("finite_horizon")(
            FiniteHorizonMDP(d["P"], d["R"], action_mask=d.get("action_mask"))
        ),
        options={"max_layers": 8, "max_states": 15, "max_actions": 4},
        masks=True,
    ),
    BuiltinTarget(
        "hitting_time",
        ("P",),
        {
            "value": "the diameter max_{s != t} T[t, s] (inf when some state cannot reach another)",
            "x": "T[t, s] (S, S), the least expected steps from s to t (inf: unreachable)",
        },
        _draw_hitting,
        _hitting,
        options={"max_states": 15, "max_actions": 4},
        masks=True,
    ),
    BuiltinTarget(
        "k_temperature",
        ("mean_rewards", "mean_transitions", "counts", "sigma"),
        {"value": "the objective of problem (11) at tau*", "x": "tau*"},
        _drawn("k_learning_posteriors", "max_layers", "max_states", "max_actions"),
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
        _drawn("ube_instances", "max_states", "max_actions"),
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
        _drawn("moment_matching_instances", "max_states", "max_actions"),
        options={"max_states": 4, "max_actions": 3},
    ),
    BuiltinTarget(
        "optimistic",
        ("p_hat", "r_hat", "radius", "reward_radius", "discount"),
        {
            "value": "mean(V) (discounted) or the gain (average)",
            "x": "V (S,), or the bias h (S,) up to an additive constant (average)",
        },
        _drawn("optimistic_instances", "criterion", "max_states", "max_actions", masks=True),
        _optimistic,
        options={"ball": "l1", "criterion": "discounted", "max_states": 12, "max_actions": 4},
        masks=True,
    ),
    BuiltinTarget(
        "clipped_optimistic",
        ("p_hat", "r", "bonus", "discount"),
        {"value": "mean(V)", "x": "V (S,), the clipped fixed point"},
        _drawn("clipped_optimistic_instances", "max_states", "max_actions", masks=True),
        options={"max_states": 20, "max_actions": 4},
        masks=True,
    ),
    BuiltinTarget(
        "regret_lower_bound",
        ("P", "R"),
        {
            "value": "C(P) = sum of Delta(x, a) / K_{x,a}(P) over the sub-optimal pairs",
            "x": "the contributions Delta / K (S, A), 0 on optimal pairs and on pairs that "
            "can never become optimal",
        },
        _drawn("ergodic_mdps", "max_states", "max_actions"),
        lambda d, s: problem_class("regret_lower_bound")(_tabular(d, False)),
        options={"max_states": 12, "max_actions": 4},
    ),
)
#: The targets, by stem, in the order of the stem table (every stem has one).
_BY_NAME = {t.name: t for t in _TARGETS}
BUILTIN: dict[str, BuiltinTarget] = {stem: _BY_NAME[stem] for stem in stems()}


def builtin_target(name: str) -> BuiltinTarget:
    """The target of stem ``name``; an unknown name is an error listing the known ones."""
    if not isinstance(name, str) or name not in BUILTIN:
        hint = did_you_mean(name, BUILTIN)
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
        return target.build(inputs).solve(method="fast")

    fast.__name__ = fast.__qualname__ = f"optplan_fast_{name}"
    return fast
