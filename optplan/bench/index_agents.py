"""``optplan bench index-agents``: agent steps per second, fast vs conic index path.

For each ``|S|`` a random Dirichlet MDP with 4 actions (seeded) is played by each of MDP-UCB,
OLP, MDP-DMED and MDP-PS, first with ``method="fast"``, then ``method="conic"``, for a fixed
number of steps each (the conic path gets fewer: every step solves ``|A|`` CVXPY programs).
Both start from the same pseudo-counts (20 transitions sampled from every pair), so every
action has been tried and every step computes a real index per action. MDP-PS solves no
optimization problem, so its two rates differ only by noise.
A step is the whole agent step (estimator update, warm-started average-reward solve, indices,
action) plus the environment. Rates are measured in this one run; ``x fast`` is the ratio.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import check_int
from ..agents.index_agents import MDPDMED, MDPPS, MDPUCB, OLP
from ..envs import TabularEnv
from ..experiments import run
from ..generators import random_dirichlet
from ..mdp import check_model_size
from ._common import check_sizes, positive_int

__all__ = [
    "AGENT_CLASSES",
    "STEMS",
    "bench_index_agents",
    "format_index_agents_table",
    "header",
    "add_arguments",
]

AGENT_CLASSES = {"mdp-ucb": MDPUCB, "olp": OLP, "mdp-dmed": MDPDMED, "mdp-ps": MDPPS}
#: Problem stems timed on their own: none (the index problems are timed by ``indices``; here
#: they are inside whole agent steps).
STEMS: frozenset[str] = frozenset()


def _rate(cls, mdp, method, steps, seed, counts):
    agent = cls(mdp.R, method=method, initial_counts=counts)
    t0 = time.perf_counter()
    run(agent, TabularEnv(mdp), steps=steps, seed=seed)
    return steps / (time.perf_counter() - t0), (agent.fallbacks, sum(agent.statuses.values()))


def bench_index_agents(
    sizes: Sequence[int] = (3, 30, 300),
    n_actions: int = 4,
    fast_steps: int = 2000,
    conic_steps: int = 20,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (|S|, agent): fast and conic steps per second, their ratio, fallbacks.
    Every argument is checked before any timing."""
    sizes = check_sizes(sizes)
    n_actions = check_int("n_actions", n_actions)
    check_model_size(max(sizes), n_actions)
    fast_steps = check_int("fast_steps", fast_steps)
    conic_steps = check_int("conic_steps", conic_steps)
    seed = check_int("seed", seed, 0)
    rows = []
    for S in sizes:
        mdp = random_dirichlet(S, n_actions, seed=seed)
        # Every pair already tried (20 sampled transitions each): every step computes an index
        # per action, as in the long run, instead of the closed form of untried actions.
        rng = np.random.default_rng(seed)
        counts = np.stack(
            [[rng.multinomial(20, mdp.P[x, a]) for a in range(n_actions)] for x in range(S)]
        ).astype(float)
        for name, cls in AGENT_CLASSES.items():
            fast, _ = _rate(cls, mdp, "fast", fast_steps, seed, counts)
            conic, (fallbacks, instances) = _rate(cls, mdp, "conic", conic_steps, seed, counts)
            rows.append(
                {
                    "n_states": S,
                    "n_actions": n_actions,
                    "agent": name,
                    "fast_steps_per_s": fast,
                    "conic_steps_per_s": conic,
                    "ratio": fast / conic,
                    "fast_steps": fast_steps,
                    "conic_steps": conic_steps,
                    "conic_fallbacks": fallbacks,
                    "conic_instances": instances,
                }
            )
            if progress:
                progress(f"|S|={S} {name}: fast {fast:.0f}/s, conic {conic:.1f}/s")
    return rows


def format_index_agents_table(rows: list[dict]) -> str:
    """One line per (|S|, agent): fast and conic steps per second, ratio, fallbacks."""
    head = (
        f"{'|S|':>4} {'agent':<9} {'fast steps/s':>13} {'conic steps/s':>14} "
        f"{'x fast':>8} {'fallbacks':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['n_states']:>4} {r['agent']:<9} {r['fast_steps_per_s']:>13.0f} "
            f"{r['conic_steps_per_s']:>14.2f} {r['ratio']:>8.0f} "
            f"{r['conic_fallbacks']:>4}/{r['conic_instances']:<5}"
        )
    return "\n".join(lines)


def header(args: argparse.Namespace) -> str:
    """The text printed above the table."""
    return (
        "Index agents on random Dirichlet MDPs: whole agent+env steps per second, fast vs "
        f"conic index path, measured in this run ({args.fast_steps} fast / "
        f"{args.conic_steps} conic steps per cell); fallbacks = conic index instances not "
        "solved to optimal (recomputed fast) / conic instances"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_index_agents`."""
    parser.add_argument(
        "--sizes", type=positive_int, nargs="+", default=[3, 30, 300], help="numbers of states"
    )
    parser.add_argument(
        "--actions",
        dest="n_actions",
        metavar="ACTIONS",
        type=positive_int,
        default=4,
        help="actions per state",
    )
    parser.add_argument(
        "--fast-steps", type=positive_int, default=2000, help="agent steps timed, fast path"
    )
    parser.add_argument(
        "--conic-steps", type=positive_int, default=20, help="agent steps timed, conic path"
    )
