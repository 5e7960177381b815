"""optplan's environments registered with Gymnasium as ``optplan/...``."""

from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import optplan as op
from optplan.envs import GYMNASIUM_IDS
from optplan.experiments import run

#: Extra kwargs an id needs beyond its registered defaults.
NEEDS = {"optplan/Tabular-v0": lambda: {"mdp": op.generators.riverswim(4)}}
#: WideNarrow's narrow states admit one action of W (an action mask), and check_env steps
#: with unmasked samples of Discrete(W): an inadmissible action is an error by design.
MASKED = {"optplan/WideNarrow-v0"}


def make(env_id: str):
    return gym.make(env_id, **NEEDS.get(env_id, dict)())


def test_every_environment_is_registered():
    ids = set(GYMNASIUM_IDS)
    assert ids <= set(gym.registry)
    expected = {"DeepSea", "DeepSeaChain", "UBEChain", "WideNarrow", "PriorMDP", "RiverSwim"}
    assert {f"optplan/{n}-v0" for n in expected} <= ids


@pytest.mark.parametrize(
    "env_id",
    [
        pytest.param(
            i,
            marks=pytest.mark.skip(reason="WideNarrow has an action mask that check_env ignores"),
        )
        if i in MASKED
        else i
        for i in GYMNASIUM_IDS
    ],
)
def test_check_env(env_id):
    env = make(env_id)
    assert env.spec.id == env_id
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning fails the test
        check_env(env.unwrapped, skip_render_check=True)
    assert isinstance(env.unwrapped.mdp, (op.TabularMDP, op.FiniteHorizonMDP))


def test_wide_narrow_makes_and_steps_with_admissible_actions():
    env = gym.make("optplan/WideNarrow-v0")
    mask = env.unwrapped.mdp.action_mask
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        action = int(np.flatnonzero(mask[obs])[0])
        obs, _, terminated, truncated, _ = env.step(action)
        assert env.observation_space.contains(obs) and not (terminated or truncated)


def test_make_deepsea_and_run_through_the_wrappers():
    env = gym.make("optplan/DeepSea-v0", size=4)
    assert env.unwrapped.mdp.horizon == 4
    agent = op.agents.OracleAgent(env.unwrapped.mdp)
    trace = run(agent, env, episodes=3, seed=0)
    assert trace.episodes == 3 and trace.regret[-1] == pytest.approx(0.0, abs=1e-12)


#: Fresh interpreters: this process has imported gymnasium and optplan.envs already.
ORDERS = {
    "optplan-then-gymnasium": "import optplan\nimport gymnasium as gym\n",
    "gymnasium-then-optplan": "import gymnasium as gym\nimport optplan\n",
    "optplan-then-its-environments": (
        "import optplan\nimport optplan.envs\nimport gymnasium as gym\n"
    ),
    "optplan-then-gymnasium-submodule": (
        "import optplan\nfrom gymnasium import make\nimport gymnasium as gym\n"
    ),
}


@pytest.mark.parametrize("prelude", list(ORDERS.values()), ids=list(ORDERS))
def test_ids_after_a_plain_import_optplan_in_either_order(prelude):
    """``import optplan`` is enough: the ``optplan/`` ids exist whether Gymnasium is imported
    before or after it, and ``optplan.envs`` loads only once Gymnasium does."""
    code = prelude + (
        "env = gym.make('optplan/DeepSea-v0', size=4)\n"
        "assert env.unwrapped.mdp.horizon == 4\n"
        "assert set(__import__('optplan').envs.GYMNASIUM_IDS) <= set(gym.registry)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_import_optplan_alone_loads_neither_gymnasium_nor_the_environments():
    code = (
        "import sys, optplan\n"
        "print(sorted(m for m in ('gymnasium', 'optplan.envs', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]
