"""``optplan verify-fn MODULE:FUNCTION --problem NAME``: :func:`optplan.verify` from the shell.

``MODULE`` is a dotted module name (found on ``sys.path`` and in the current directory, as
``python -m`` finds it) or the path of a ``.py`` file; ``--problem`` is a stem of optplan's
problems or ``MODULE:OBJECT`` naming a :class:`~optplan.DeclaredProblem`. Exit status 0 when
the function agrees on every instance the solver calls optimal, 1 on a disagreement (or an
exception of the function there, or no instance compared; the counterexamples are printed),
2 when the input is refused.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path

from ..bench._options import nonneg_float, nonneg_int, positive_int, solver_name
from .solve import CLIError, key_values

__all__ = ["add_parser", "cmd_verify_fn", "load_object"]


def load_object(spec: str, what: str = "function"):
    """The object ``NAME`` of ``MODULE:NAME`` (a module name or a ``.py`` path).

    Loading the user's module by name is this command's purpose: with
    ``Problem.solve``'s stem dispatch it is one of the two places that do
    (``tests/test_structure.py``)."""
    module_part, sep, name = spec.rpartition(":")
    if not sep or not module_part or not name:
        raise CLIError(f"expected MODULE:{what.upper()}, got {spec!r}")
    path = Path(module_part)
    if module_part.endswith(".py") or path.is_file():
        if not path.is_file():
            raise CLIError(f"{module_part}: no such file")
        module_name = path.stem if path.stem not in sys.modules else f"_optplan_user_{path.stem}"
        loader = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module  # so pickling and dataclasses inside it work
        sys.path.insert(0, str(path.resolve().parent))  # its own sibling imports
        try:
            loader.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module: said in one line
            raise CLIError(_import_failure(module_part, exc)) from None
        finally:
            sys.path.pop(0)
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            raise CLIError(f"cannot import module {module_part!r}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the user's module: said in one line
            raise CLIError(_import_failure(module_part, exc)) from None
    if not hasattr(module, name):
        raise CLIError(f"module {module_part!r} has no {what} {name!r}")
    return getattr(module, name)


def _import_failure(module: str, exc: Exception) -> str:
    """One line for a user's module that raised while it was imported: the error and where
    (the file and line of the innermost frame, or of a syntax error)."""
    import traceback

    if isinstance(exc, SyntaxError):
        return f"{module} does not import: SyntaxError: {exc.msg} ({exc.filename}:{exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else module
    return f"{module} does not import: {type(exc).__name__}: {exc} ({where})"


def _options(pairs) -> dict | None:
    return key_values(pairs, "--option expects KEY=VALUE") or None


def cmd_verify_fn(args: argparse.Namespace) -> int:
    from ..verification import DeclaredProblem, verify

    fn = load_object(args.function, "function")
    if not callable(fn):
        raise CLIError(f"{args.function} is not callable (got {type(fn).__name__})")
    problem = args.problem
    if ":" in problem:
        problem = load_object(problem, "problem")
        if not isinstance(problem, DeclaredProblem):
            raise CLIError(
                f"{args.problem} is a {type(problem).__name__}, not an optplan.DeclaredProblem"
            )
    report = verify(
        fn,
        problem,
        n=args.n,
        seed=args.seed,
        solver=args.solver,
        rtol=args.rtol,
        atol=args.atol,
        options=_options(args.option),
        shrink=args.shrink,
        progress=args.progress,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.summary())
    return 0 if report.ok else 1


def add_parser(sub) -> None:
    """Add ``verify-fn`` to the ``optplan`` subparsers."""
    p = sub.add_parser(
        "verify-fn",
        help="check your own function against a problem's CVXPY formulation (hypothesis)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("function", metavar="MODULE:FUNCTION", help="the function to verify")
    p.add_argument(
        "--problem",
        required=True,
        help="a stem (kl_ball, kl_inf, l1_ball, discounted, ...) or MODULE:DECLARED_PROBLEM",
    )
    p.add_argument("--n", type=positive_int, default=1000, help="instances (default 1000)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="hypothesis seed (default 0)")
    p.add_argument(
        "--solver", type=solver_name, default="CLARABEL", help="solver of the CVXPY formulation"
    )
    p.add_argument("--rtol", type=nonneg_float, help="override the solver's tolerance")
    p.add_argument("--atol", type=nonneg_float, help="override the solver's tolerance")
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="an instance option, e.g. ball=kl, criterion=average, max_states=20 (repeatable)",
    )
    p.add_argument(
        "--shrink", type=nonneg_int, default=3, help="failure kinds to shrink (default 3)"
    )
    p.add_argument("--progress", action="store_true", help="a progress bar with ETA on stderr")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_verify_fn)
