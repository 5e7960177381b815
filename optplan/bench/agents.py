"""``optplan bench agents``: every registered agent's steps per second on its environments,
compiled engine and generic loop, with the ratio.

Cases: RiverSwim-6 and the 3-state example of accelerating-ucb-indices-mdp
(``models/cowan3.toml``) for the continuing agents, DeepSea L = 20 (bsuite's deterministic
grid) for the episodic ones; an agent that fits none of them plays RiverSwim-6 with
discounted resets (gamma 0.9) if it needs a discount, or the 20-state linear mixture MDP with
discounted resets if it needs a feature map. An agent is built on each case by the agent
table (:func:`optplan.agents.make_agent`, its default parameters; ``--param NAME=VALUE``
overrides one for every agent that has it) and a case it refuses is skipped.

Each (agent, case) is run twice by :func:`~optplan.experiments.run`: with the compiled engine
(``engine="compiled"``, when an engine of :data:`optplan.experiments.engines.RUN_ENGINES`
covers the run; ``-`` and the engine's reason otherwise) and with the generic loop
(``engine="python"``). A rate is ``steps`` over the CPU time (``time.process_time``) of one
whole ``run`` call (scoring and oracle run included) after a warm-up run of ``--warmup``
steps on the same case (numba compiles, or loads from its cache, there), under ``run``'s one
BLAS thread. ``compile s`` (beside each rate): the wall seconds numba spent compiling during
that warm-up (:func:`optplan._jit.compile_seconds` before and after it; 0 where numba's cache
or an earlier row of the same run had the kernels). One run each: on a shared machine, quote
the load beside the numbers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from .. import _jit
from .._checks import OptplanError, check_int
from ..agents.registry import AGENTS, make_agent
from ..envs.registry import ENVS
from ..experiments import engines, run
from ..modelfile import tomllib
from ._options import add_count

__all__ = [
    "STEMS",
    "CASES",
    "bench_agents",
    "format_agents_table",
    "HELP",
    "table",
    "header",
    "total",
    "add_arguments",
]

HELP = "every registered agent's steps per second, compiled engine vs generic loop"
#: Problem stems timed on their own: none (the agents' problems are inside whole steps).
STEMS: frozenset[str] = frozenset()
#: ``label -> (environment table name, parameters)``: the cases every agent is tried on.
CASES: dict[str, tuple[str, dict]] = {
    "riverswim-6": ("riverswim", {"n_states": 6}),
    "cowan3": ("model", {"path": "models/cowan3.toml"}),
    "deepsea-20": ("deepsea", {"size": 20}),
}
#: The cases of an agent that fits none of :data:`CASES`, tried in order until one fits: an
#: agent that needs a discount, then one that needs a feature map (RAVI-UCB-linear).
FALLBACK_CASES: tuple[tuple[str, str, dict], ...] = (
    ("riverswim-6-resets", "riverswim-resets", {"n_states": 6}),
    ("linear-mixture-20", "linear-mixture", {}),
)


def _env(name: str, params: dict):
    comp = ENVS[name]
    return comp.build(0, **comp.resolve(params, name))


def _agent(name: str, env, params: dict):
    """The agent ``name`` on ``env`` with the ``params`` it has, or the refusal's message
    (an agent with a ``horizon`` parameter, RAVI-UCB's ``T``, gets ``params["steps"]`` unless
    given one)."""
    known = AGENTS[name]._by_name
    own = {k: v for k, v in params.items() if k in known}
    if "horizon" in known and "horizon" not in own:
        own["horizon"] = params["steps"]
    try:
        return make_agent(name, env, **own), None
    except (OptplanError, TypeError) as exc:
        return None, str(exc)


def _rate(name, env_name, env_params, params, steps, seed, engine) -> float:
    """Steps per CPU second of one ``run`` (fresh agent and environment)."""
    env = _env(env_name, env_params)
    agent, _ = _agent(name, env, params)
    start = time.process_time()
    run(agent, env, steps=steps, seed=seed, engine=engine)
    return steps / max(time.process_time() - start, 1e-9)


def _cases_of(name: str, params: dict):
    """``(label, env name, env params, agent or None, refusal)`` of each case the agent
    fits; the fallback case when it fits none."""
    out = []
    for label, (env_name, env_params) in CASES.items():
        agent, why = _agent(name, _env(env_name, env_params), params)
        if agent is not None:
            out.append((label, env_name, env_params, agent))
    for label, env_name, env_params in FALLBACK_CASES:
        if out:
            break
        agent, why = _agent(name, _env(env_name, env_params), params)
        if agent is not None:
            out.append((label, env_name, env_params, agent))
    return out


def bench_agents(
    agents: Sequence[str] | None = None,
    steps: int = 5000,
    warmup: int = 1000,
    param: Sequence[str] = (),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (agent, case): compiled and generic steps per CPU second and their ratio.
    ``agents``: registered names (default: all); ``param``: ``NAME=VALUE`` overrides, given to
    every agent that has the parameter. Every argument is checked before any timing."""
    names = list(AGENTS) if not agents else list(agents)
    for name in names:
        if name not in AGENTS:
            raise OptplanError(f"unknown agent {name!r} (known: {', '.join(sorted(AGENTS))})")
    steps = check_int("steps", steps)
    warmup = check_int("warmup", warmup)
    seed = check_int("seed", seed, 0)
    params = {**_params(param, names), "steps": steps}
    rows = []
    for name in names:
        cases = _cases_of(name, params)
        if not cases:
            rows.append(_row(name, "-", None, None, "fits none of the cases", steps))
            rows[-1] |= {"compile_s": None, "generic_compile_s": None}
            if progress:
                progress(f"{name}: fits none of the cases")
            continue
        for label, env_name, env_params, agent in cases:
            env = _env(env_name, env_params)
            # the reason an engine gives when it does not cover the run (track: as run decides)
            chosen, reason = _engine(agent, env)
            compiled = compile_s = None
            if chosen is not None:
                before = _jit.compile_seconds()
                _rate(name, env_name, env_params, params, warmup, seed, "compiled")
                compile_s = _jit.compile_seconds() - before
                compiled = _rate(name, env_name, env_params, params, steps, seed, "compiled")
            before = _jit.compile_seconds()
            _rate(name, env_name, env_params, params, warmup, seed, "python")
            generic_compile_s = _jit.compile_seconds() - before
            generic = _rate(name, env_name, env_params, params, steps, seed, "python")
            rows.append(_row(name, label, compiled, generic, reason, steps))
            rows[-1] |= {"compile_s": compile_s, "generic_compile_s": generic_compile_s}
            if progress:
                done = "-" if compiled is None else f"{compiled:.0f}/s"
                progress(f"{name} on {label}: compiled {done}, generic {generic:.0f}/s")
    return rows


def _engine(agent, env):
    """``(engine or None, reason)``: the engine ``run(engine="auto")`` picks for this run."""
    from ..experiments.oracle import solve_oracle, true_model
    from ..experiments.run import _tracks_policies

    track = _tracks_policies(agent, solve_oracle(true_model(env), None))
    reasons = [e.reason(agent, env, None, track) for e in engines.RUN_ENGINES]
    for candidate, reason in zip(engines.RUN_ENGINES, reasons, strict=True):
        if reason is None:
            return candidate, None
    # the reason of an engine made for this agent class, else: no engine for the class
    own = [r for r in reasons if "is not one of" not in r and "has no compiled steps" not in r]
    return None, own[0] if own else f"no engine for {type(agent).__name__}"


def _params(param: Sequence[str], names) -> dict:
    """``NAME=VALUE`` strings as a dict, each name a parameter of at least one agent, each value
    checked by that agent's parameter."""
    out = {}
    for item in param:
        key, sep, value = str(item).partition("=")
        if not sep or not key:
            raise OptplanError(f"param must be NAME=VALUE, got {item!r}")
        owners = [AGENTS[n]._by_name[key] for n in names if key in AGENTS[n]._by_name]
        if not owners:
            raise OptplanError(f"param {key!r} is a parameter of none of the agents benched")
        out[key] = owners[0].check(_literal(value), f"param {key}")
    return out


def _literal(text: str):
    """A ``NAME=VALUE`` value: a TOML literal (``0.1``, ``true``, ``"x"``) or else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _row(name, label, compiled, generic, reason, steps) -> dict:
    return {
        "agent": name,
        "case": label,
        "compiled_steps_per_s": compiled,
        "generic_steps_per_s": generic,
        "ratio": None if compiled is None or generic is None else compiled / generic,
        "compiled_note": reason,
        "steps": steps,
    }


def format_agents_table(rows: list[dict]) -> str:
    """One line per (agent, case): compiled and generic steps per second, the ratio, and why
    no engine covers the run where none does."""
    head = (
        f"{'agent':<17} {'case':<19} {'compiled/s':>11} {'compile s':>9} {'generic/s':>10} "
        f"{'compile s':>9} {'x generic':>10}  engine"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        comp = "-" if r["compiled_steps_per_s"] is None else f"{r['compiled_steps_per_s']:.0f}"
        gen = "-" if r["generic_steps_per_s"] is None else f"{r['generic_steps_per_s']:.0f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.1f}"
        cs, gs = (
            "-" if r.get(k) is None else f"{r[k]:.2f}" for k in ("compile_s", "generic_compile_s")
        )
        note = r["compiled_note"] or ""
        lines.append(
            f"{r['agent']:<17} {r['case']:<19} {comp:>11} {cs:>9} {gen:>10} {gs:>9} {ratio:>10}  "
            f"{note}".rstrip()
        )
    return "\n".join(lines)


def table(rows: list[dict], args: argparse.Namespace) -> str:
    """The text table of the rows for the command line."""
    return format_agents_table(rows)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    return (
        f"Agents: steps per CPU second of one run of {args.steps} steps (after a "
        f"{args.warmup}-step warm-up), compiled engine (results equal to the generic loop's; - "
        "and the reason where no engine covers the run) and generic loop, one BLAS thread; "
        "compile s = wall seconds numba spent compiling in each one's warm-up (0 where numba's "
        "cache or an earlier row of this run had the kernels); "
        "cases: riverswim-6 and cowan3 (continuing), deepsea-20 (episodic)"
    )


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_agents` reports: one per (agent, case) it fits
    (found by building each agent on each case, which times nothing)."""
    names = list(AGENTS) if not args.agents else list(args.agents)
    params = {**_params(args.param, names), "steps": args.steps}
    return sum(max(1, len(_cases_of(name, params))) for name in names)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_agents`."""
    parser.add_argument(
        "--agents", nargs="*", default=None, metavar="NAME",
        help="registered agents to time (default: all)",
    )  # fmt: skip
    add_count(parser, "--steps", 5000, "agent steps timed per run")
    add_count(parser, "--warmup", 1000, "steps of the untimed warm-up run before each timing")
    parser.add_argument(
        "--param", nargs="*", default=[], metavar="NAME=VALUE",
        help="a parameter for every agent that has it (e.g. update_every=11)",
    )  # fmt: skip
