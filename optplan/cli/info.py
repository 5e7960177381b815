"""``optplan info MODEL``: the hardness report of a model (:func:`optplan.hardness.describe`)."""

from __future__ import annotations

import json
from pathlib import Path

from ..bench import solver_name
from ..bridges import from_gymnasium
from ..hardness import describe
from ..mdp import TabularMDP
from ..modelfile import load_model
from .solve import CLIError, key_values

__all__ = ["add_parser", "cmd_info", "load_any_model"]


def load_any_model(model: str, terminal: str = "absorbing", env_args=()) -> TabularMDP:
    """A model file (TOML) when ``model`` is an existing path, else a Gymnasium id with a
    toy-text table (``FrozenLake-v1``), converted by :func:`optplan.from_gymnasium` with
    ``env_args`` (``key=value`` strings) passed to ``gym.make``."""
    if Path(model).exists():
        if env_args:
            raise CLIError(f"--env-arg applies to Gymnasium ids, not to the model file {model}")
        mdp = load_model(model)
        if not isinstance(mdp, TabularMDP):
            raise CLIError(f"{model} is a finite-horizon model; info needs a stationary model")
        return mdp
    if model.endswith(".toml") or "/" in model and not model.startswith("optplan/"):
        raise CLIError(f"no such model file: {model}")
    kwargs = key_values(env_args, "--env-arg must be key=value", booleans=True)
    try:
        import gymnasium as gym
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        raise CLIError(f"{model} is not a file, and gymnasium is not installed") from None
    try:
        gym.spec(model)
    except gym.error.Error as exc:
        raise CLIError(f"{model} is neither a model file nor a Gymnasium id ({exc})") from None
    return from_gymnasium(model, terminal=terminal, **kwargs)


def cmd_info(args) -> int:
    mdp = load_any_model(args.model, args.terminal, args.env_arg or ())
    report = describe(mdp, method=args.method, solver=args.solver)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    return 0


def add_parser(sub) -> None:
    """Add ``info`` to the ``optplan`` subparsers."""
    p = sub.add_parser("info", help="hardness report: class, diameter, gains, gaps, C(P), mixing")
    p.add_argument("model", help="model file (TOML) or a Gymnasium toy-text id (FrozenLake-v1)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--method",
        choices=("fast", "both"),
        default="both",
        help="both (default): cross-check gain, bias, diameter and C(P) against a conic solver",
    )
    p.add_argument("--solver", type=solver_name, default="CLARABEL", help="conic solver")
    p.add_argument(
        "--terminal",
        choices=("absorbing", "restart"),
        default="absorbing",
        help="Gymnasium ids: terminal transitions absorb or restart (op.from_gymnasium)",
    )
    p.add_argument(
        "--env-arg",
        action="append",
        metavar="KEY=VALUE",
        help="Gymnasium ids: a gym.make keyword, repeatable (is_slippery=false)",
    )
    p.set_defaults(func=cmd_info)
