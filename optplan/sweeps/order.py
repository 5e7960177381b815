"""The order a sweep dispatches its tasks in: longest expected first.

A sweep's grid order (environments, agents, seeds) often ends with its largest environments
(``size = [4, ..., 50]``), so the last tasks to start are the longest and, on ``N`` workers,
``N - 1`` of them idle while the last one finishes. :func:`dispatch_order` starts the tasks it
expects to be longest first (the longest-processing-time-first rule), from an estimate that
needs no run (:func:`task_costs`):

    cost = (state-action pairs of the environment's true model, times the horizon ``L`` of a
    finite-horizon model) x (the sweep's ``steps``, or ``episodes`` x ``L``)

that is, the size of the tables an agent updates times the number of steps it runs. It knows
nothing of the agents (their relative speed is left in grid order) nor of
``stop_when_solved`` (the run's length is the cap). Each environment configuration is built
once in the driver to read its model: once per (name, parameters) for optplan's own
environments, whose size does not depend on the seed index (it only draws the model), once
per (name, parameters, seed index) for a user's. An environment that cannot be built (or
has no readable model) in the driver does not stop the sweep: its tasks' cost is unknown
(``None``) and they start first, in grid order among themselves, as a task of unknown
length is the one that must not be left to the end.

Ties keep grid order (a stable sort), and the order changes only when tasks start: each
task's seed, record and the summary (ordered by task index) do not depend on it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..experiments.oracle import true_model
from ..mdp import FiniteHorizonMDP
from . import registry
from .sweep import Task

__all__ = ["task_costs", "dispatch_order"]


def _model_size(task: Task) -> tuple[int, int | None] | None:
    """``(pairs, L)`` of the task's true model (``L`` ``None`` for a continuing model; pairs
    counted over the ``L`` layers), or ``None`` if the environment cannot be built here."""
    env = None
    try:
        env = registry.get_env(task.env.name).build(task.seed_index, **task.env.params)
        model = true_model(env)
        shape = (model.n_states, model.n_actions)
        horizon = model.horizon if isinstance(model, FiniteHorizonMDP) else None
    except Exception:  # a user's environment that only builds in the workers: unknown
        return None
    finally:
        _close(env)
    pairs = int(shape[0]) * int(shape[1]) * (horizon or 1)
    return pairs, None if horizon is None else int(horizon)


def _close(env) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # the estimate never fails the sweep
            pass


def _size_key(task: Task) -> tuple:
    """What the model's size can depend on: the seed index only for a user's environment."""
    params = json.dumps(task.env.params, sort_keys=True, default=repr)
    comp = registry.get_env(task.env.name)
    if registry.is_builtin(comp):
        return (task.env.name, params)
    return (task.env.name, params, task.seed_index)


def task_costs(tasks: Sequence[Task]) -> list[int | None]:
    """Each task's expected cost (see the module docstring; ``None``: unknown), building each
    distinct environment configuration once."""
    sizes: dict[tuple, tuple[int, int | None] | None] = {}
    out: list[int | None] = []
    for task in tasks:
        try:
            key = _size_key(task)
        except Exception:  # an unknown name: the worker records the error
            out.append(None)
            continue
        if key not in sizes:
            sizes[key] = _model_size(task)
        size = sizes[key]
        if size is None:
            out.append(None)
            continue
        pairs, horizon = size
        if task.steps is not None:
            length = task.steps
        elif horizon is not None:
            length = task.episodes * horizon
        else:  # episodes of a continuing model (refused when the sweep loads)
            out.append(None)
            continue
        out.append(pairs * length)
    return out


def dispatch_order(tasks: Sequence[Task]) -> list[Task]:
    """``tasks`` longest expected first (:func:`task_costs`): tasks of unknown cost, then the
    others by decreasing cost, ties (and the unknown ones) in their given order."""
    costs = task_costs(tasks)
    order = sorted(
        range(len(tasks)),
        key=lambda i: (costs[i] is not None, -costs[i] if costs[i] is not None else 0),
    )
    return [tasks[i] for i in order]
