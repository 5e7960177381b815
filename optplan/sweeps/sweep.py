"""Declarative sweeps: agents x environments x parameter grids x seeds, from a TOML file.

A sweep file (``models/sweeps/*.toml``)::

    name = "smoke"
    seed = 0                 # root of every task's seed
    seeds = 5                # seed indices 0..4 (or a list, e.g. [0, 3, 7])
    steps = 2000             # horizon: steps = N or episodes = N (exactly one)
    stop_when_solved = false # end a run once the goal is solved (time-to-solve sweeps)
    oracle_noise = "shared"  # the oracle run's noise: "shared" with the agent's run or
                             # "independent" (optplan.experiments.run's oracle_noise)
    imports = ["mylab.agents"]  # optional: modules imported here and in every worker first

    [curves]                 # how the regret curves are stored
    points = 60
    scale = "log"            # or "linear"

    [[agents]]
    name = "epsilon-greedy"  # a registered agent (optplan run --list)
    label = "eps-greedy"     # optional
    params = { epsilon = [0.05, 0.1] }      # a list is a sweep axis

    [[envs]]
    name = "riverswim"
    criterion = "average"    # optional: "average" or "discounted" for continuing envs
    params = { n_states = { start = 4, stop = 10, step = 2 } }   # inclusive range

An agent's or environment's ``name`` is a registered name or an import path
``"package.module:factory"`` (a builder with the registered signature, see
:func:`~optplan.sweeps.registry.load_component`). Modules listed in ``imports`` are
imported before the names are looked up, here and in every worker process (joblib or Ray),
so their ``register_agent`` / ``register_env`` calls reach the workers; so are the modules
of every user component the sweep uses (:func:`~optplan.sweeps.execute.run_sweep`).

Every list (or range) of parameter values is a grid axis; each combination is one agent or
environment configuration. A task is one (agent configuration, environment configuration,
seed index). Its seed is derived from the sweep's ``seed`` and the task id, so a task's result
does not depend on the backend, the order or which other tasks exist.

Every error names the file and the key (``smoke.toml: agents[1].params.epsilon: ...``) and
is raised by :func:`load_sweep`, before any task runs: every configuration is built once.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import OptplanError
from ..experiments.run import ORACLE_NOISE
from ..mdp import CONTINUING
from ..modelfile import file_kind, tomllib, wrong_kind
from . import registry

__all__ = ["Sweep", "Config", "Task", "SweepError", "load_sweep", "sweep_from_dict"]

_TOP_KEYS = {
    "name",
    "description",
    "seed",
    "seeds",
    "steps",
    "episodes",
    "stop_when_solved",
    "oracle_noise",
    "curves",
    "agents",
    "envs",
    "imports",
}
_MAX_SEED = 2**63 - 1


class SweepError(OptplanError):
    """A sweep file or specification is invalid; the message names the file and key."""


@dataclass(frozen=True)
class Config:
    """One agent or environment configuration: registered name, label, resolved parameters."""

    name: str
    label: str
    params: dict
    criterion: str | None = None  # environments only

    def to_dict(self) -> dict:
        d = {"name": self.name, "label": self.label, "params": dict(self.params)}
        if self.criterion is not None:
            d["criterion"] = self.criterion
        return d


@dataclass(frozen=True)
class Task:
    """One run: agent configuration x environment configuration x seed index."""

    index: int
    task_id: str
    agent: Config
    env: Config
    seed_index: int
    seed: int
    steps: int | None
    episodes: int | None
    criterion: str | None
    stop_when_solved: bool
    curve_points: int
    curve_scale: str
    imports: tuple[str, ...] = ()
    oracle_noise: str = "shared"

    @property
    def file_stem(self) -> str:
        """A short file name for the task's records (a hash of its id)."""
        return hashlib.sha256(self.task_id.encode()).hexdigest()[:20]

    def to_dict(self) -> dict:
        """JSON-ready; what a worker needs to run the task."""
        return {
            "index": self.index,
            "task_id": self.task_id,
            "agent": self.agent.to_dict(),
            "env": self.env.to_dict(),
            "seed_index": self.seed_index,
            "seed": self.seed,
            "steps": self.steps,
            "episodes": self.episodes,
            "criterion": self.criterion,
            "stop_when_solved": self.stop_when_solved,
            "curve_points": self.curve_points,
            "curve_scale": self.curve_scale,
            "imports": list(self.imports),
            "oracle_noise": self.oracle_noise,
        }


@dataclass(frozen=True)
class Sweep:
    """A validated sweep. :meth:`tasks` lists its runs; :meth:`fingerprint` identifies it."""

    name: str
    description: str
    seed: int
    seeds: tuple[int, ...]
    steps: int | None
    episodes: int | None
    stop_when_solved: bool
    curve_points: int
    curve_scale: str
    agents: tuple[Config, ...]
    envs: tuple[Config, ...]
    source: str = "<dict>"
    imports: tuple[str, ...] = ()
    oracle_noise: str = "shared"

    def to_dict(self) -> dict:
        """The normalized specification (grids expanded, defaults filled)."""
        out = {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "seeds": list(self.seeds),
            "steps": self.steps,
            "episodes": self.episodes,
            "stop_when_solved": self.stop_when_solved,
            "curves": {"points": self.curve_points, "scale": self.curve_scale},
            "agents": [a.to_dict() for a in self.agents],
            "envs": [e.to_dict() for e in self.envs],
        }
        if self.imports:  # only then: older sweeps keep their fingerprints
            out["imports"] = list(self.imports)
        if self.oracle_noise != "shared":  # likewise
            out["oracle_noise"] = self.oracle_noise
        return out

    def fingerprint(self) -> str:
        """SHA-256 of the normalized specification: equal iff the sweeps run the same tasks."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def tasks(self) -> list[Task]:
        """Every task, ordered by environment, agent, seed."""
        out = []
        for env, agent, s in itertools.product(self.envs, self.agents, self.seeds):
            task_id = f"{agent.label} @ {env.label} # seed {s}"
            out.append(
                Task(
                    index=len(out),
                    task_id=task_id,
                    agent=agent,
                    env=env,
                    seed_index=s,
                    seed=task_seed(self.seed, task_id),
                    steps=self.steps,
                    episodes=self.episodes,
                    criterion=env.criterion,
                    stop_when_solved=self.stop_when_solved,
                    curve_points=self.curve_points,
                    curve_scale=self.curve_scale,
                    imports=self.imports,
                    oracle_noise=self.oracle_noise,
                )
            )
        return out

    def __len__(self) -> int:
        return len(self.agents) * len(self.envs) * len(self.seeds)


def task_seed(sweep_seed: int, task_id: str) -> int:
    """A 63-bit seed from the sweep seed and the task id (``SeedSequence`` mixing)."""
    words = np.frombuffer(hashlib.sha256(task_id.encode()).digest(), dtype="<u4")
    ss = np.random.SeedSequence(entropy=sweep_seed, spawn_key=tuple(int(w) for w in words))
    lo, hi = (int(x) for x in ss.generate_state(2, dtype=np.uint32))
    return ((hi << 32) | lo) >> 1


def _int(value, where: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SweepError(f"{where} must be an integer, got {value!r}")
    if value < low:
        raise SweepError(f"{where} must be >= {low}, got {value!r}")
    return int(value)


def _axis(value, where: str) -> list:
    """A parameter's values: a scalar, a list, or an inclusive {start, stop, step} range."""
    if isinstance(value, dict):
        extra = set(value) - {"start", "stop", "step"}
        if extra or not {"start", "stop"} <= set(value):
            raise SweepError(
                f"{where}: a range needs keys start, stop (and optional step), got {sorted(value)}"
            )
        start = _int(value["start"], f"{where}.start", low=-(2**62))
        stop = _int(value["stop"], f"{where}.stop", low=-(2**62))
        step = _int(value.get("step", 1), f"{where}.step", low=1)
        if stop < start:
            raise SweepError(f"{where}: stop {stop} is below start {start}")
        return list(range(start, stop + 1, step))
    if isinstance(value, list):
        if not value:
            raise SweepError(f"{where}: an empty list gives no configuration")
        return list(value)
    return [value]


def _fmt(v) -> str:
    return repr(v) if isinstance(v, (str, float)) else str(v)


def _configs(entries, kind: str, where: str) -> list[Config]:
    get = registry.get_agent if kind == "agents" else registry.get_env
    if not isinstance(entries, list) or not entries:
        raise SweepError(f"{where}: [[{kind}]] must list at least one entry")
    out: list[Config] = []
    for i, entry in enumerate(entries):
        at = f"{where}: {kind}[{i}]"
        if not isinstance(entry, dict):
            raise SweepError(f"{at} must be a table, got {entry!r}")
        allowed = {"name", "label", "params"} | ({"criterion"} if kind == "envs" else set())
        extra = sorted(set(entry) - allowed)
        if extra:
            raise SweepError(f"{at}: unknown key {extra[0]!r} (allowed: {sorted(allowed)})")
        try:
            comp = get(entry.get("name"))
        except ValueError as exc:
            raise SweepError(f"{at}.name: {exc}") from None
        params = entry.get("params", {})
        if not isinstance(params, dict):
            raise SweepError(f"{at}.params must be a table, got {params!r}")
        axes = {k: _axis(v, f"{at}.params.{k}") for k, v in params.items()}
        label = entry.get("label", comp.name)
        if not isinstance(label, str) or not label or "@" in label or "#" in label:
            raise SweepError(
                f"{at}.label must be a non-empty string without '@' or '#' (they separate the "
                f"parts of a task id), got {label!r}"
            )
        criterion = entry.get("criterion")
        if criterion is not None and criterion not in CONTINUING:
            raise SweepError(f"{at}.criterion must be 'average' or 'discounted', got {criterion!r}")
        varying = [k for k, vals in axes.items() if len(vals) > 1]
        for combo in itertools.product(*axes.values()):
            given = dict(zip(axes, combo, strict=True))
            try:
                resolved = comp.resolve(given, f"{at}.params")
            except (TypeError, ValueError) as exc:
                raise SweepError(str(exc)) from None
            lab = label
            if varying:
                lab += "(" + ", ".join(f"{k}={_fmt(given[k])}" for k in varying) + ")"
            out.append(Config(comp.name, lab, resolved, criterion))
    labels = [c.label for c in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise SweepError(f"{where}: {kind} label {dup[0]!r} is used twice; give each a label")
    return out


def sweep_from_dict(data: dict, source: str = "<dict>", validate: bool = True) -> Sweep:
    """Validate a sweep specification (the parsed TOML) and expand its grids.

    ``validate`` builds every environment configuration and every agent on it once (cheap),
    so that a bad value (``epsilon = 2``) fails here, naming the key, not inside a task.
    """
    where = source if source.startswith("<") else Path(source).name
    if not isinstance(data, dict):
        raise SweepError(f"{where}: a sweep must be a table, got {type(data).__name__}")
    top = _top_level(data, source, where)
    imports = _imports(data.get("imports", []), where)
    agents = _configs(data.get("agents"), "agents", where)
    envs = _configs(data.get("envs"), "envs", where)
    _check_horizons(envs, top["episodes"], where)
    sweep = Sweep(
        **top, agents=tuple(agents), envs=tuple(envs), source=str(source), imports=imports
    )
    if validate:
        _build_once(sweep, where)
    return sweep


def _top_level(data: dict, source: str, where: str) -> dict:
    """The sweep's scalar fields (name, description, seeds, horizon, curves), checked."""
    extra = sorted(set(data) - _TOP_KEYS)
    if extra:
        raise SweepError(f"{where}: unknown key {extra[0]!r} (allowed: {sorted(_TOP_KEYS)})")
    name = data.get("name", "sweep" if source.startswith("<") else Path(source).stem)
    if not isinstance(name, str) or not name:
        raise SweepError(f"{where}: name must be a non-empty string, got {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SweepError(f"{where}: description must be a string, got {description!r}")
    seed = _int(data.get("seed", 0), f"{where}: seed")
    if seed > _MAX_SEED:
        raise SweepError(f"{where}: seed must be < 2**63, got {seed}")
    seeds_raw = data.get("seeds", 1)
    if isinstance(seeds_raw, list):
        seeds = tuple(_int(s, f"{where}: seeds[{i}]") for i, s in enumerate(seeds_raw))
        if not seeds or len(set(seeds)) != len(seeds):
            raise SweepError(f"{where}: seeds must be a non-empty list of distinct integers")
    else:
        seeds = tuple(range(_int(seeds_raw, f"{where}: seeds", low=1)))
    if ("steps" in data) == ("episodes" in data):
        raise SweepError(f"{where}: give exactly one horizon, steps = N or episodes = N")
    steps = _int(data["steps"], f"{where}: steps", low=1) if "steps" in data else None
    episodes = _int(data["episodes"], f"{where}: episodes", low=1) if "episodes" in data else None
    stop = data.get("stop_when_solved", False)
    if not isinstance(stop, bool):
        raise SweepError(f"{where}: stop_when_solved must be true or false, got {stop!r}")
    oracle_noise = data.get("oracle_noise", "shared")
    if oracle_noise not in ORACLE_NOISE:
        raise SweepError(
            f"{where}: oracle_noise must be one of {list(ORACLE_NOISE)}, got {oracle_noise!r}"
        )
    curves = data.get("curves", {})
    if not isinstance(curves, dict) or set(curves) - {"points", "scale"}:
        raise SweepError(f"{where}: [curves] takes keys points and scale, got {curves!r}")
    points = _int(curves.get("points", 100), f"{where}: curves.points", low=2)
    scale = curves.get("scale", "log")
    if scale not in ("log", "linear"):
        raise SweepError(f"{where}: curves.scale must be 'log' or 'linear', got {scale!r}")
    return {
        "name": name,
        "description": description,
        "seed": seed,
        "seeds": seeds,
        "steps": steps,
        "episodes": episodes,
        "stop_when_solved": stop,
        "oracle_noise": oracle_noise,
        "curve_points": points,
        "curve_scale": scale,
    }


def _check_horizons(envs: list[Config], episodes: int | None, where: str) -> None:
    """Episodes need episodic environments; an episodic one takes no criterion."""
    for env in envs:
        episodic = registry.env_is_episodic(env.name, env.params)
        if episodes is not None and not episodic:
            raise SweepError(
                f"{where}: envs {env.label!r} is continuing, so the horizon must be "
                f"steps, not episodes"
            )
        if episodic and env.criterion is not None:
            raise SweepError(
                f"{where}: envs {env.label!r} is episodic; its regret is finite_horizon, "
                f"criterion {env.criterion!r} does not apply"
            )


def _imports(value, where: str) -> tuple[str, ...]:
    """The sweep's ``imports``: module names, each imported now (errors name the key)."""
    if not isinstance(value, list):
        raise SweepError(f"{where}: imports must be a list of module names, got {value!r}")
    out = []
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name or ":" in name:
            raise SweepError(f"{where}: imports[{i}] must be a module name, got {name!r}")
        try:
            registry.import_user_module(name)
        except Exception as exc:  # ImportError or an error in the user's module
            raise SweepError(
                f"{where}: imports[{i}]: cannot import {name!r}: {type(exc).__name__}: {exc}"
            ) from None
        out.append(name)
    return tuple(dict.fromkeys(out))


def _build_once(sweep: Sweep, where: str) -> None:
    """Build each environment (seed index of the first seed) and each agent on it once."""
    for env_cfg in sweep.envs:
        try:
            env = registry.get_env(env_cfg.name).build(sweep.seeds[0], **env_cfg.params)
        except (TypeError, ValueError, OSError) as exc:
            raise SweepError(f"{where}: envs {env_cfg.label!r}: {exc}") from None
        criterion = env_cfg.criterion
        if criterion == "discounted" and registry.true_model(env).discount is None:
            raise SweepError(
                f"{where}: envs {env_cfg.label!r}: criterion 'discounted' needs a model with "
                f"a discount"
            )
        for agent_cfg in sweep.agents:
            try:
                registry.make_agent(agent_cfg.name, env, criterion, **agent_cfg.params)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise SweepError(
                    f"{where}: agents {agent_cfg.label!r} on {env_cfg.label!r}: {exc}"
                ) from None


def load_sweep(path, validate: bool = True) -> Sweep:
    """Read and validate a sweep file (TOML). Errors name the file and the key."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SweepError(f"cannot read sweep file {str(path)!r}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path.name}: not valid TOML: {exc}") from None
    kind = file_kind(data)
    if kind == "counts" or (kind == "model" and ("P" in data or "generator" in data)):
        raise SweepError(str(wrong_kind(path, data, "sweep")))  # say what it is instead
    return sweep_from_dict(data, source=str(path), validate=validate)


def single_sweep(
    agent: str,
    env: str,
    agent_params: dict[str, Any],
    env_params: dict[str, Any],
    seeds: int,
    steps: int | None = None,
    episodes: int | None = None,
    criterion: str | None = None,
    seed: int = 0,
    stop_when_solved: bool = False,
) -> Sweep:
    """One agent on one environment over ``seeds`` seeds (``optplan run``)."""
    data: dict[str, Any] = {
        "name": f"{agent}-{env}",
        "seed": seed,
        "seeds": seeds,
        "stop_when_solved": stop_when_solved,
        "agents": [{"name": agent, "params": agent_params}],
        "envs": [{"name": env, "params": env_params}],
    }
    if criterion is not None:
        data["envs"][0]["criterion"] = criterion
    if steps is not None:
        data["steps"] = steps
    if episodes is not None:
        data["episodes"] = episodes
    return sweep_from_dict(data, source="<command line>")
