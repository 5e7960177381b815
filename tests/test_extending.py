"""Adding an agent and an environment the way docs/architecture.md says: one module under
``agents/`` and its lines in ``agents/registry.py``, one module under ``envs/`` and its row in
``envs/registry.py``; then ``make_agent``, a sweep and ``gymnasium.make`` know both.

The test works on a copy of the package, changes only the places the page names, checks that
nothing else differs, and runs the new pieces in a fresh interpreter that imports the copy.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import optplan

PACKAGE = Path(optplan.__file__).resolve().parent

TOY_AGENT = '''\
"""A toy agent: the first admissible action, always."""

import numpy as np

from .._params import Component, Param
from ._env import continuing_shape


class FirstAction:
    """Play the lowest-numbered admissible action of every state."""

    def __init__(self, n_states, n_actions, *, action_mask=None, offset=0):
        mask = np.ones((n_states, n_actions), bool) if action_mask is None else action_mask
        self.n_states, self.n_actions = n_states, n_actions
        self.choice = (np.argmax(mask, axis=-1) + offset) % n_actions

    def reset(self, rng):
        pass

    def select_action(self, state):
        return int(self.choice[state])

    def update(self, state, action, reward, next_state, done):
        pass


def _first_action(env, criterion, offset):
    S, A, mask = continuing_shape(env, "first-action plays continuing models only")
    return FirstAction(S, A, action_mask=mask, offset=offset)


BUILDERS = (
    Component("first-action", _first_action,
              (Param("offset", "int", 0, "actions to skip past the first"),),
              "the first admissible action, always"),
)
'''

TOY_ENV = '''\
"""A toy environment: a two-state loop where action 1 pays."""

import numpy as np

from ..mdp import TabularMDP
from .tabular import TabularEnv


class TwoStateLoop(TabularEnv):
    """Two states, two actions; action ``a`` moves to state ``a`` and pays ``a * pay``."""

    def __init__(self, pay=1.0, reward_noise=0.0, render_mode=None):
        P = np.zeros((2, 2, 2))
        P[:, 0, 0] = P[:, 1, 1] = 1.0
        R = np.array([[0.0, pay], [0.0, pay]])
        super().__init__(TabularMDP(P, R), reward_noise=reward_noise)
'''

ENV_ROW = (
    '    EnvSpec("two-state-loop", TwoStateLoop, (Param("pay", "float", 1.0, "reward of action 1"),'
    ' _NOISE), False, "TwoStateLoop", "a two-state loop where action 1 pays"),\n'
)

SCRIPT = """
import json, sys
import gymnasium
import optplan
from optplan.agents import make_agent
from optplan.envs import ENVS
from optplan.sweeps import run_sweep, sweep_from_dict, load_results

assert optplan.__file__.startswith(sys.argv[1]), optplan.__file__
env = ENVS["two-state-loop"].build(0, pay=2.0, reward_noise=0.0)
agent = make_agent("first-action", env, offset=1)
gym_env = gymnasium.make("optplan/TwoStateLoop-v0", pay=3.0)
gym_env.reset(seed=0)
_, reward, *_ = gym_env.step(1)
sweep = sweep_from_dict({
    "name": "toy", "seed": 1, "seeds": 2, "steps": 50,
    "agents": [{"name": "first-action", "params": {"offset": 1}}, {"name": "random"}],
    "envs": [{"name": "two-state-loop", "params": {"pay": 1.0}}],
})
run_sweep(sweep, sys.argv[2], quiet=True)
rows = load_results(sys.argv[2]).rows
print(json.dumps({
    "agent": type(agent).__name__, "choice": agent.choice.tolist(), "gym_reward": reward,
    "tasks": sorted((r["agent"], r["seed_index"], r["status"], r["gap_regret"]) for r in rows),
}))
"""


def _add_lines(path: Path, after: str, lines: str) -> None:
    """Insert ``lines`` after the first line of ``path`` that starts with ``after``."""
    text = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(text) if line.lstrip().startswith(after))
    path.write_text("".join(text[: at + 1]) + lines + "".join(text[at + 1 :]))


def _changed_files(a: Path, b: Path) -> list[str]:
    """Files that differ between two trees, or stand in one only (``__pycache__`` left out)."""
    out = []
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    stack = [(cmp, Path())]
    while stack:
        node, rel = stack.pop()
        out += [str(rel / n) for n in node.left_only + node.right_only + node.diff_files]
        stack += [(sub, rel / name) for name, sub in node.subdirs.items()]
    return sorted(out)


def test_a_toy_agent_and_environment_added_as_the_architecture_page_says(tmp_path):
    copy = tmp_path / "src" / "optplan"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    # the agent: its module, then its import and its entry in the family tuple
    (copy / "agents" / "toy.py").write_text(TOY_AGENT)
    _add_lines(copy / "agents" / "registry.py", "from . import (", "    toy,\n")
    _add_lines(copy / "agents" / "registry.py", "for _family in (", "    toy,\n")
    # the environment: its module, then its import and its row of the table
    (copy / "envs" / "toy.py").write_text(TOY_ENV)
    _add_lines(
        copy / "envs" / "registry.py", "from .._params import", "from .toy import TwoStateLoop\n"
    )
    _add_lines(copy / "envs" / "registry.py", "ENV_TABLE: tuple[EnvSpec, ...] = (", ENV_ROW)

    assert _changed_files(PACKAGE, copy) == [
        "agents/registry.py",
        "agents/toy.py",
        "envs/registry.py",
        "envs/toy.py",
    ]
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(copy), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["agent"] == "FirstAction"
    assert got["choice"] == [1, 1]  # offset 1 past the first admissible action
    assert got["gym_reward"] == 3.0  # gymnasium.make passed pay=3.0 to the new row's builder
    tasks = got["tasks"]
    assert [t[:3] for t in tasks] == [
        ["first-action", 0, "ok"],
        ["first-action", 1, "ok"],
        ["random", 0, "ok"],
        ["random", 1, "ok"],
    ]
    # action 1 always is optimal (gain = pay = 1): no gap regret; random play has some
    assert [t[3] for t in tasks[:2]] == [0.0, 0.0]
    assert all(t[3] > 1.0 for t in tasks[2:])


TOY_COMPILED_AGENT = '''\
"""A toy agent at compiled speed: greedy on running means with optimistic starts."""

from typing import NamedTuple

import numpy as np

from .._jit import njit
from .._params import Component, Param
from ..envs.kernels import play
from ._env import continuing_shape
from .base import CompiledAgent


class MeansState(NamedTuple):
    total: np.ndarray
    count: np.ndarray
    initial: np.ndarray


@njit(inline="always")
def act(s, x, rng):
    mean = (s.total[x] + s.initial[0]) / (s.count[x] + 1.0)
    return np.argmax(mean)


@njit(inline="always")
def observe(s, x, a, r, y, done, rng):
    s.total[x, a] += r
    s.count[x, a] += 1.0
    return False


@njit
def run(s, env, steps, env_rng, agent_rng):
    return play(act, observe, s, env, steps, env_rng, agent_rng)


class OptimisticMeans(CompiledAgent):
    _run = staticmethod(run)

    def __init__(self, n_states, n_actions, *, initial=1.0):
        self.n_states, self.n_actions, self.initial = n_states, n_actions, initial

    def reset(self, rng):
        self.rng = rng
        shape = (self.n_states, self.n_actions)
        self.state = MeansState(np.zeros(shape), np.zeros(shape), np.array([self.initial]))

    def select_action(self, state):
        return int(act(self.state, state, self.rng))

    def update(self, state, action, reward, next_state, done):
        observe(self.state, state, action, reward, next_state, done, None)


def _build(env, criterion, initial):
    S, A, mask = continuing_shape(env, "optimistic-means plays continuing models only")
    return OptimisticMeans(S, A, initial=initial)


BUILDERS = (
    Component("optimistic-means", _build,
              (Param("initial", "float", 1.0, "starting value of every mean"),),
              "greedy on running means with optimistic starts"),
)
'''

COMPILED_SCRIPT = """
import json, sys
import numpy as np
import optplan
from optplan.agents import make_agent
from optplan.envs import ENVS
from optplan.experiments import run
from optplan.sweeps import run_sweep, sweep_from_dict, load_results

assert optplan.__file__.startswith(sys.argv[1]), optplan.__file__
traces = {}
for engine in ("python", "compiled"):
    env = ENVS["riverswim"].build(0, n_states=6)
    traces[engine] = run(make_agent("optimistic-means", env, initial=2.0), env, steps=3000,
                         seed=5, engine=engine)
sweep = sweep_from_dict({
    "name": "toy", "seed": 1, "seeds": 2, "steps": 500,
    "agents": [{"name": "optimistic-means", "params": {"initial": [0.5, 2.0]}}],
    "envs": [{"name": "riverswim", "params": {"n_states": 6}}],
})
run_sweep(sweep, sys.argv[2], quiet=True)
print(json.dumps({
    "same": bool(np.array_equal(traces["python"].actions, traces["compiled"].actions)),
    "regret": float(traces["compiled"].regret[-1]),
    "tasks": sorted(r["status"] for r in load_results(sys.argv[2]).rows),
}))
"""


def test_a_compiled_agent_added_in_two_files(tmp_path):
    """An agent at compiled speed (docs/architecture.md, "An agent at compiled speed"): one
    module and its lines in the registry; the compiled loop runs it with the generic loop's
    results, and a sweep runs it."""
    copy = tmp_path / "src" / "optplan"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "agents" / "toy_compiled.py").write_text(TOY_COMPILED_AGENT)
    _add_lines(copy / "agents" / "registry.py", "from . import (", "    toy_compiled,\n")
    _add_lines(copy / "agents" / "registry.py", "for _family in (", "    toy_compiled,\n")
    assert _changed_files(PACKAGE, copy) == ["agents/registry.py", "agents/toy_compiled.py"]
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "OPENBLAS_NUM_THREADS": "1",
           "NUMBA_CACHE_DIR": str(tmp_path / "numba")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(COMPILED_SCRIPT), str(copy), str(tmp_path / "o")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["same"] is True
    assert got["regret"] > 0
    assert got["tasks"] == ["ok"] * 4
