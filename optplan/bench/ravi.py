"""``optplan bench ravi``: RAVI-UCB's clipped optimistic fixed point
(:class:`~optplan.problems.ClippedOptimisticPlanning`), the exact fast path (clipped-set rounds
of Howard policy iteration) and RAVI's own frozen-data iteration vs the clipped-set LPs on each
conic solver; and the steps per second of the two agents (:class:`~optplan.agents.RAVIUCB` at
each ``S``, :class:`~optplan.agents.RAVIUCBLinear` at each ``(S, d)``).

Random instances as RAVI-UCB meets them (:func:`~optplan.bench.cases.random_clipped_optimistic`:
counts from ``N = 1``, bonus ``~ 1/sqrt(N)``, some states clipped at ``H``). Every ratio is
from timings of the same run, instance by instance; medians. Each conic solve runs in a forked
child killed at ``max_conic_seconds``; a solver cut off at one size is not run at larger ones.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass

import numpy as np

from .._checks import check_int, check_real
from ..agents.ravi import RAVIUCB, RAVIUCBLinear
from ..envs import DiscountedResets, LinearMixtureMDP, TabularEnv
from ..generators import random_dirichlet
from ..mdp import check_model_size
from ..problems import ClippedOptimisticPlanning
from ..result import OPTIMAL, SOLUTION_PRESENT
from ._common import Runs, check_choices, check_seconds, check_sizes, timed, timed_optimal
from ._options import (
    add_actions,
    add_choices,
    add_conic_cap,
    add_count,
    add_sizes,
    add_solvers,
    open_fraction,
    positive_float,
)
from ._rows import CappedConic, median, solver_entries, solvers_table, table_lines
from .cases import random_clipped_optimistic

__all__ = [
    "total",
    "HELP",
    "STEMS",
    "PARTS",
    "RUNS",
    "RaviAgents",
    "bench_ravi",
    "bench_ravi_agents",
    "format_table",
    "format_agent_table",
    "table",
    "header",
    "add_arguments",
]

HELP = "RAVI-UCB's clipped optimistic fixed point: exact DP and RAVI's iteration vs LPs"
STEMS = frozenset({ClippedOptimisticPlanning.stem})
#: What ``optplan bench ravi`` measures: the planning problem, the agents, or both.
PARTS = ("planning", "agents")
#: Actions of the agents' benchmark models.
AGENT_ACTIONS = 2


#: The planning part's default runs: sizes, actions, instances per size, solvers, seed.
RUNS = Runs(sizes=(10, 50, 200))


@dataclass(frozen=True)
class RaviAgents:
    """The agents part of ``optplan bench ravi``: :class:`RAVIUCB` at each of ``agent_sizes``
    states and :class:`RAVIUCBLinear` at each ``(S, d)`` of ``agent_sizes`` x ``dims``, each
    timed over ``agent_steps`` steps, median of ``agent_repeats`` runs, discounted resets at
    ``agent_discount``. The field names are the command line's (``--agent-sizes`` ...)."""

    agent_sizes: Sequence[int] = (6, 20, 100)
    dims: Sequence[int] = (2, 8, 32)
    agent_steps: int = 3000
    agent_repeats: int = 3
    agent_discount: float = 0.9

    def checked(self) -> RaviAgents:
        """The same settings, each checked (the largest linear model within
        :data:`optplan.mdp.MAX_MODEL_BYTES`)."""
        agent_sizes = check_sizes(self.agent_sizes, name="agent_sizes")
        dims = check_sizes(self.dims, name="dims")
        check_model_size(max(agent_sizes), AGENT_ACTIONS, max(dims), subject="agent_sizes x dims")
        return RaviAgents(
            agent_sizes,
            dims,
            check_int("agent_steps", self.agent_steps),
            check_int("agent_repeats", self.agent_repeats),
            check_real(
                "agent_discount", self.agent_discount, 0.0, 1.0, low_open=True, high_open=True
            ),
        )


def bench_ravi(
    runs: Runs = RUNS,
    discount: float = 0.95,
    eta: float = 10.0,
    max_conic_seconds: float = 60.0,
    parts: Sequence[str] = PARTS,
    agents: RaviAgents = RaviAgents(),
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """The planning rows (``part = "planning"``) and the agent rows (``part = "agents"``,
    :func:`bench_ravi_agents` with ``agents`` and ``runs.seed``), as ``parts`` asks. Every
    argument is checked before any timing.

    A planning row holds the median wall time of the exact fast path, of the RAVI iteration
    (``eta``, to ``tol = 1e-8``) and of each conic solver at one size ``S`` of ``runs.sizes``
    (``runs.repeats`` instances with ``runs.n_actions`` actions): ``part``, ``S``, ``A``,
    ``instances``, ``fast_s``, ``rounds`` and ``clipped`` (medians of clipped-set rounds and
    clipped states), ``ravi_s``, ``ravi_steps`` (median), ``ravi_err`` (max ``|V_ravi - V|``);
    per solver ``<SOLVER>_s``, ``_ratio`` (conic / fast), ``_optimal``, ``_err`` (max
    ``|V_conic - V|``), ``_skipped``.
    """
    parts = check_choices("parts", parts, PARTS)
    if "agents" in parts:
        agents = agents.checked()
    seed = check_int("seed", runs.seed, 0)
    rows = []
    if "planning" in parts:
        runs = runs.checked()
        discount = check_real("discount", discount, 0.0, 1.0, low_open=True, high_open=True)
        eta = check_real("eta", eta, 0.0, None, low_open=True)
        conic = CappedConic(runs.solvers, check_seconds("max_conic_seconds", max_conic_seconds))
        rows += _planning_rows(runs, discount, eta, conic, progress)
    if "agents" in parts:
        rows += _agent_rows(agents, seed, progress)
    return rows


def _planning_rows(runs: Runs, discount, eta, conic, progress) -> list[dict]:
    """The planning rows of :func:`bench_ravi`, its arguments checked."""
    n_actions = runs.n_actions
    small = random_clipped_optimistic(np.random.default_rng(12345), 3, n_actions, discount)
    small.solve(method="fast")  # warm-up, untimed
    for solver in conic.solvers:
        small.solve(method="conic", solver=solver)
    rows = []
    for S in runs.sizes:
        make = functools.partial(
            random_clipped_optimistic, np.random.default_rng([runs.seed, S]), S, n_actions, discount
        )
        row = {"part": "planning", "S": S, "A": n_actions, "instances": runs.repeats}
        _planning_size(row, make, eta, conic, small)
        rows.append(row)
        if progress:
            progress(f"S={S}: fast {row['fast_s']:.2e}s, RAVI {row['ravi_s']:.2e}s")
    return rows


def _planning_size(row: dict, make: Callable, eta: float, conic: CappedConic, small) -> None:
    """Fill the planning row of one size (``row`` holds its ``S`` and ``instances``): that
    many instances of ``make()``, each solved exactly, by RAVI's iteration and by every conic
    solver still running."""
    solvers, S = conic.solvers, row["S"]
    times = {"fast": [], "ravi": []} | {s: [] for s in solvers}
    rounds, clipped, steps = [], [], []
    ravi_err, optimal, errs = 0.0, dict.fromkeys(solvers, 0), dict.fromkeys(solvers, 0.0)
    for _ in range(row["instances"]):
        problem = make()
        fast, t = timed_optimal(problem, "fast path")
        times["fast"].append(t)
        rounds.append(fast.info["rounds"])
        clipped.append(int(fast.info["clipped"].sum()))
        ravi, t = timed(lambda p=problem: p.solve(algorithm="ravi", eta=eta, tol=1e-8))
        times["ravi"].append(t)
        steps.append(ravi.iterations)
        ravi_err = max(ravi_err, float(np.abs(ravi.values - fast.values).max()))
        for solver, res, _ in conic.solves(problem, small, S, times):
            optimal[solver] += res.status == OPTIMAL
            if res.status in SOLUTION_PRESENT:
                err = float(np.abs(res.values - fast.values).max())
                errs[solver] = max(errs[solver], err)
    row["fast_s"] = float(np.median(times["fast"]))
    row["rounds"] = int(np.median(rounds))
    row["clipped"] = int(np.median(clipped))
    row["ravi_s"] = float(np.median(times["ravi"]))
    row["ravi_steps"] = int(np.median(steps))
    row["ravi_err"] = ravi_err
    for solver in solvers:
        if not conic.skipped(row, solver):
            solver_entries(
                row, solver, median(times[solver]), optimal=optimal[solver], err=errs[solver]
            )


def _agent_rates(agent, env, steps: int, seed: int) -> tuple[float, float, int]:
    """``(agent steps/s, agent + environment steps/s, epochs)`` over ``steps`` steps: the
    agent's time is that spent in ``select_action`` and ``update`` (an epoch's planning runs
    inside the ``update`` that ends the previous one)."""
    clock = time.perf_counter
    state, _ = env.reset(seed=seed)
    agent.reset(np.random.default_rng(seed))
    inside = 0.0
    start = clock()
    for _ in range(steps):
        t0 = clock()
        action = agent.select_action(state)
        t1 = clock()
        next_state, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        t2 = clock()
        agent.update(state, action, reward, next_state, done)
        inside += t1 - t0 + clock() - t2
        state = env.reset()[0] if done else next_state
    total = clock() - start
    return steps / inside, steps / total, agent.epochs


def _agent(name: str, env, horizon: int):
    """A fresh agent with the paper's defaults for ``T = horizon``."""
    mdp = env.mdp
    if name == "ravi-ucb":
        return RAVIUCB(
            mdp.n_states, mdp.n_actions, discount=env.discount, horizon=horizon, rewards=mdp.R
        )
    return RAVIUCBLinear(env.features, mdp.R, discount=env.discount, horizon=horizon)


def bench_ravi_agents(
    agents: RaviAgents = RaviAgents(),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Steps per second of :class:`RAVIUCB` on a random Dirichlet MDP with ``S`` states and
    :class:`RAVIUCBLinear` on a random linear mixture (``LinearMixtureMDP.random``) with ``S``
    states and ``d`` features (``agents``: :class:`RaviAgents`), both with 2 actions and
    discounted resets at ``agent_discount`` (an epoch, so one planning step, every
    ``1 / (1 - gamma)`` steps on average), the paper's defaults for ``T = agent_steps``;
    medians over ``agent_repeats`` runs (seeds ``seed``, ``seed + 1``, ...).

    Row keys: ``part`` (``"agents"``), ``agent``, ``S``, ``A``, ``d`` (``None`` for the tabular
    agent), ``steps``, ``repeats``, ``agent_steps_per_s`` (time in ``select_action`` and
    ``update``), ``loop_steps_per_s`` (agent and environment), ``epochs`` (median).
    """
    return _agent_rows(agents.checked(), check_int("seed", seed, 0), progress)


def _agent_rows(agents: RaviAgents, seed: int, progress) -> list[dict]:
    """The rows of :func:`bench_ravi_agents`, its arguments checked."""
    agent_sizes, dims, steps, repeats, gamma = astuple(agents)
    A = AGENT_ACTIONS
    cases = []
    for S in agent_sizes:
        cases.append(("ravi-ucb", S, None, TabularEnv(random_dirichlet(S, A, seed=seed))))
        cases += [("ravi-ucb-linear", S, d, LinearMixtureMDP.random(S, A, d, seed)) for d in dims]
    rows = []
    for name, S, d, inner in cases:
        env = DiscountedResets(inner, gamma)
        runs = [
            _agent_rates(_agent(name, env, steps), env, steps, seed + k) for k in range(repeats)
        ]
        agent_rate, loop_rate, epochs = (np.median(col) for col in zip(*runs, strict=True))
        rows.append(
            {
                "part": "agents",
                "agent": name,
                "S": S,
                "A": A,
                "d": d,
                "steps": steps,
                "repeats": repeats,
                "agent_steps_per_s": float(agent_rate),
                "loop_steps_per_s": float(loop_rate),
                "epochs": int(epochs),
            }
        )
        if progress:
            where = f"S={S}" + ("" if d is None else f", d={d}")
            progress(f"{name} {where}: {agent_rate:,.0f} agent steps/s")
    return rows


def format_agent_table(rows: list[dict]) -> str:
    """One line per agent configuration: median agent and loop steps per second."""
    head = f"{'agent':<16}{'S':>5}{'d':>5}{'agent steps/s':>15}{'with env':>11}{'epochs':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        d = "-" if r["d"] is None else str(r["d"])
        lines.append(
            f"{r['agent']:<16}{r['S']:>5}{d:>5}{r['agent_steps_per_s']:>15,.0f}"
            f"{r['loop_steps_per_s']:>11,.0f}{r['epochs']:>8}"
        )
    return "\n".join(lines)


def format_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """The planning table, then the agents' table (for the parts that were run)."""
    planning = [r for r in rows if r.get("part", "planning") == "planning"]
    agents = [r for r in rows if r.get("part") == "agents"]
    out = []
    if planning:
        out.append(format_planning_table(planning, solvers))
    if agents:
        out.append(format_agent_table(agents))
    return "\n\n".join(out)


def format_planning_table(rows: list[dict], solvers: Sequence[str]) -> str:
    """One line per S: the exact path's median, rounds and clipped states, RAVI's median,
    steps and largest error, then per solver its median, ratio, optimal count and error."""
    head = (
        f"{'S':>5}{'fast s':>10}{'rounds':>7}{'clip':>6}{'RAVI s':>10}{'steps':>7}{'RAVI err':>10}"
    )
    lines = table_lines(head, solvers, CappedConic.head)
    for r in rows:
        line = (
            f"{r['S']:>5}{r['fast_s']:>10.2e}{r['rounds']:>7}{r['clipped']:>6}"
            f"{r['ravi_s']:>10.2e}{r['ravi_steps']:>7}{r['ravi_err']:>10.1e}"
        )
        for s in solvers:
            line += f"{'over cap':>35}" if r.get(f"{s}_skipped") else CappedConic.cells(r, s)
        lines.append(line)
    return "\n".join(lines)


#: The text table of the rows for the command line.
table = solvers_table(format_table)


def total(args: argparse.Namespace) -> int:
    """How many progress lines :func:`bench_ravi` reports (for the bar's ETA): one per planning
    size, one per agent case (the tabular agent and one linear agent per ``d``, per size)."""
    n = len(args.sizes) if "planning" in args.parts else 0
    if "agents" in args.parts:
        n += len(args.agent_sizes) * (1 + len(args.dims))
    return n


def header(args: argparse.Namespace) -> str:
    lines = []
    if "planning" in args.parts:
        lines.append(
            f"RAVI-UCB clipped optimistic fixed point: empirical models (A={args.n_actions}, "
            f"gamma={args.discount}), bonus ~ 1/sqrt(N), {args.repeats} instances per size, "
            "median wall seconds; fast = clipped-set rounds of policy iteration (exact); RAVI = "
            f"the frozen-data regularized iteration (eta={args.eta}, tol 1e-8); ratio = conic / "
            "fast"
        )
    if "agents" in args.parts:
        lines.append(
            f"RAVI-UCB agents: steps per second, median of {args.agent_repeats} runs of "
            f"{args.agent_steps} steps; A={AGENT_ACTIONS}, discounted resets at gamma="
            f"{args.agent_discount} (one planning step per epoch), the paper's beta and eta; "
            "ravi-ucb on a random Dirichlet MDP, ravi-ucb-linear on a random linear mixture; "
            "agent = time in select_action + update, with env = the whole loop"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options; each ``dest`` is a keyword of :func:`bench_ravi` or a field
    of its :class:`Runs` or :class:`RaviAgents`."""
    add_sizes(parser, list(RUNS.sizes), "numbers of states (planning part)")
    add_actions(parser, RUNS.n_actions)
    add_count(parser, "--repeats", RUNS.repeats, "random instances per size (medians)")
    parser.add_argument(
        "--discount", type=open_fraction, default=0.95, help="discount gamma (planning part)"
    )
    parser.add_argument("--eta", type=positive_float, default=10.0, help="RAVI's learning rate")
    add_solvers(parser)
    add_conic_cap(
        parser,
        60.0,
        "each conic solve is killed after this long; that solver is skipped at larger sizes",
    )
    add_choices(parser, "--parts", PARTS, "what to measure")
    agents = RaviAgents()
    add_sizes(parser, list(agents.agent_sizes), "numbers of states (agents part)", "--agent-sizes")
    add_sizes(parser, list(agents.dims), "ravi-ucb-linear's d", "--dims")
    add_count(parser, "--agent-steps", agents.agent_steps, "agent steps per timed run")
    add_count(
        parser, "--agent-repeats", agents.agent_repeats, "timed runs per agent and size (medians)"
    )
    parser.add_argument(
        "--agent-discount",
        type=open_fraction,
        default=agents.agent_discount,
        help="discount gamma (agents part)",
    )
