"""``optplan bench index-agents``: agent steps per second, compiled vs Python loop vs conic.

Cases: the 3-state example of accelerating-ucb-indices-mdp (``models/cowan3.toml``, the model
of Fig. 3, plain start: what ``optplan sweep models/sweeps/cowan3-fig3.toml`` runs), then for
each ``|S|`` a random Dirichlet MDP with 4 actions (seeded) whose agents start from the same
pseudo-counts (20 transitions sampled from every pair), so every action has been tried and
every step computes a real index per action. Each of MDP-UCB, OLP, MDP-DMED and MDP-PS plays
each case three ways, for a fixed number of steps each:

- ``compiled``: ``method="fast"``, the run in the agent's compiled loop
  (``run(..., engine="compiled")``; from 200 states on the estimator's policy iteration
  runs in Python between compiled calls);
- ``python``: ``method="fast"`` in the generic loop (``engine="python"``: the same compiled
  steps, one Python call each, so the same results);
- ``conic``: ``method="conic"`` (fewer steps: every step solves ``|A|`` CVXPY programs).
  MDP-PS solves no optimization problem, so its python and conic rates differ only by noise.

A step is the whole agent step (estimator update, warm-started average-reward solve, indices,
action) plus the environment; each rate is steps over the wall time of one
:func:`~optplan.experiments.run` call (scoring included), after a warm-up call that loads (or
compiles) the loop or the kernels (for the Python loop, the same run: every kernel it
reaches). ``compile s``: the wall seconds numba spent compiling during the compiled loop's
warm-up call (:func:`optplan._jit.compile_seconds` before and after it; 0 where numba's cache
or an earlier row of the same run had the kernels). Rates are measured in this one run;
``x python`` and ``x conic`` are ratios.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .. import _jit
from .._checks import OptplanError, check_int
from ..agents.index_agents import MDPDMED, MDPPS, MDPUCB, OLP
from ..envs import TabularEnv
from ..experiments import run
from ..experiments.compiled import compiled_reason
from ..generators import random_dirichlet
from ..mdp import check_model_size
from ..modelfile import load_model
from ._common import check_sizes
from ._options import add_actions, add_count, add_sizes

__all__ = [
    "AGENT_CLASSES",
    "STEMS",
    "PAPER_MODEL",
    "bench_index_agents",
    "format_index_agents_table",
    "HELP",
    "table",
    "header",
    "total",
    "add_arguments",
]

HELP = "MDP-UCB / OLP / MDP-DMED / MDP-PS steps per second, fast vs conic"
AGENT_CLASSES = {"mdp-ucb": MDPUCB, "olp": OLP, "mdp-dmed": MDPDMED, "mdp-ps": MDPPS}
#: Problem stems timed on their own: none (the index problems are timed by ``indices``; here
#: they are inside whole agent steps).
STEMS: frozenset[str] = frozenset()
#: The paper's 3-state example, from the repository's ``models/`` (or the working directory's).
PAPER_MODEL = "models/cowan3.toml"


def _find(path: str) -> Path | None:
    here = Path(path)
    if here.is_file():
        return here
    repo = Path(__file__).resolve().parents[2] / path
    return repo if repo.is_file() else None


def _rate(cls, mdp, method, steps, seed, counts, engine="python"):
    agent = cls(mdp.R, method=method, initial_counts=counts)
    t0 = time.perf_counter()
    run(agent, TabularEnv(mdp), steps=steps, seed=seed, engine=engine)
    return steps / (time.perf_counter() - t0), (agent.fallbacks, sum(agent.statuses.values()))


def _cases(models, sizes, n_actions, seed):
    """``(label, mdp, counts)`` per case: the model files, then the random sizes."""
    for path in models:
        found = _find(path)
        if found is None:
            raise OptplanError(f"model file {path!r} not found (give --models PATH ...)")
        yield load_model(found).name or found.stem, load_model(found), None
    for S in sizes:
        mdp = random_dirichlet(S, n_actions, seed=seed)
        # Every pair already tried (20 sampled transitions each): every step computes an index
        # per action, as in the long run, instead of the closed form of untried actions.
        rng = np.random.default_rng(seed)
        P = mdp.dense_P()
        counts = np.stack(
            [[rng.multinomial(20, P[x, a]) for a in range(n_actions)] for x in range(S)]
        ).astype(float)
        yield f"dirichlet-{S}", mdp, counts


def bench_index_agents(
    sizes: Sequence[int] = (3, 30, 300),
    n_actions: int = 4,
    fast_steps: int = 2000,
    conic_steps: int = 20,
    compiled_steps: int = 20000,
    models: Sequence[str] = (PAPER_MODEL,),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (case, agent): compiled, Python-loop and conic steps per second, their
    ratios, conic fallbacks. Every argument is checked before any timing."""
    sizes = check_sizes(sizes)
    n_actions = check_int("n_actions", n_actions)
    check_model_size(max(sizes), n_actions)
    fast_steps = check_int("fast_steps", fast_steps)
    conic_steps = check_int("conic_steps", conic_steps)
    compiled_steps = check_int("compiled_steps", compiled_steps)
    seed = check_int("seed", seed, 0)
    models = [str(m) for m in models]
    for m in models:
        if _find(m) is None:
            raise OptplanError(f"model file {m!r} not found (give --models PATH ...)")
    rows = []
    for label, mdp, counts in _cases(models, sizes, n_actions, seed):
        for name, cls in AGENT_CLASSES.items():
            agent = cls(mdp.R, initial_counts=counts)
            reason = compiled_reason(agent, TabularEnv(mdp))
            compiled = compile_s = None
            if reason is None:
                before = _jit.compile_seconds()
                _rate(cls, mdp, "fast", 10, seed, counts, "compiled")  # load / compile
                compile_s = _jit.compile_seconds() - before
                compiled, _ = _rate(cls, mdp, "fast", compiled_steps, seed, counts, "compiled")
            # first calls compile the row kernels (numba) or import CVXPY: not timed. The
            # Python loop's warm-up plays the timed run's steps: a short one can miss a
            # kernel the run reaches later, which then compiles inside the timing
            _rate(cls, mdp, "fast", fast_steps, seed, counts)
            fast, _ = _rate(cls, mdp, "fast", fast_steps, seed, counts)
            _rate(cls, mdp, "conic", 1, seed, counts)
            conic, (fallbacks, instances) = _rate(cls, mdp, "conic", conic_steps, seed, counts)
            rows.append(
                {
                    "case": label,
                    "n_states": mdp.n_states,
                    "n_actions": mdp.n_actions,
                    "agent": name,
                    "compiled_steps_per_s": compiled,
                    "compiled_us_per_step": None if compiled is None else 1e6 / compiled,
                    "compiled_note": reason,
                    "compile_s": compile_s,
                    "fast_steps_per_s": fast,
                    "fast_us_per_step": 1e6 / fast,
                    "conic_steps_per_s": conic,
                    "compiled_ratio": None if compiled is None else compiled / fast,
                    "ratio": fast / conic,
                    "compiled_steps": compiled_steps,
                    "fast_steps": fast_steps,
                    "conic_steps": conic_steps,
                    "conic_fallbacks": fallbacks,
                    "conic_instances": instances,
                }
            )
            if progress:
                done = "-" if compiled is None else f"{compiled:.0f}/s"
                progress(
                    f"{label} {name}: compiled {done}, python {fast:.0f}/s, conic {conic:.1f}/s"
                )
    return rows


def format_index_agents_table(rows: list[dict]) -> str:
    """One line per (case, agent): compiled and Python-loop steps per second and us per step,
    their ratio, conic steps per second, the Python/conic ratio, fallbacks."""
    head = (
        f"{'case':<13} {'|S|':>4} {'agent':<9} {'compiled/s':>11} {'us/step':>8} {'compile s':>9} "
        f"{'python/s':>9} {'us/step':>8} {'x python':>9} {'conic/s':>8} {'x conic':>8} "
        f"{'fallbacks':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["compiled_steps_per_s"] is None:
            comp = f"{'-':>11} {'-':>8} {'-':>9} "
            ratio = f"{'-':>9}"
        else:
            comp = (
                f"{r['compiled_steps_per_s']:>11.0f} {r['compiled_us_per_step']:>8.2f} "
                f"{r['compile_s']:>9.2f} "
            )
            ratio = f"{r['compiled_ratio']:>9.0f}"
        lines.append(
            f"{r['case']:<13} {r['n_states']:>4} {r['agent']:<9} {comp}"
            f"{r['fast_steps_per_s']:>9.0f} {r['fast_us_per_step']:>8.1f} {ratio} "
            f"{r['conic_steps_per_s']:>8.2f} {r['ratio']:>8.0f} "
            f"{r['conic_fallbacks']:>4}/{r['conic_instances']:<5}"
        )
    return "\n".join(lines)


def table(rows: list[dict], args: argparse.Namespace) -> str:
    """The text table of the rows for the command line."""
    return format_index_agents_table(rows)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    return (
        "Index agents (cases: the model files, cowan3 = accelerating-ucb-indices-mdp's 3-state "
        "example, plain start; dirichlet-S = random Dirichlet MDPs, every pair pre-tried): "
        "whole agent+env steps per second and us per step, measured in this run: compiled "
        f"loop ({args.compiled_steps} steps, results equal to the Python loop's; - where it "
        "does not apply; compile s = wall seconds numba spent compiling in the compiled loop's "
        "first, untimed call: 0 where its cache or an earlier row of this run had the "
        f"kernels), Python loop ({args.fast_steps} steps), conic index path "
        f"({args.conic_steps} steps); fallbacks = conic index instances not solved to optimal "
        "(recomputed fast) / conic instances"
    )


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_index_agents` reports (for the bar's ETA): one per
    case (each model file, then each size) and agent."""
    return (len(args.models) + len(args.sizes)) * len(AGENT_CLASSES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_index_agents`."""
    add_sizes(parser, [3, 30, 300], "numbers of states")
    add_actions(parser, 4)
    add_count(parser, "--fast-steps", 2000, "agent steps timed, fast index path in the Python loop")
    add_count(parser, "--compiled-steps", 20000, "agent steps timed, compiled loop")
    parser.add_argument(
        "--models",
        nargs="*",
        default=[PAPER_MODEL],
        metavar="PATH",
        help=f"model files timed as cases before the random sizes (default {PAPER_MODEL}, "
        "the paper's 3-state example; none: --models with no path)",
    )
    add_count(parser, "--conic-steps", 20, "agent steps timed, conic path")
