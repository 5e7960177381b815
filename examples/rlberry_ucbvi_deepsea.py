"""rlberry's UCBVI (``rlberry_scool.agents.UCBVIAgent``) on optplan's DeepSea models, as a peer
row of docs/peers-episodic.md. Needs only numpy, gymnasium and rlberry (no optplan): rlberry
0.7.3 pins ``gymnasium < 0.30`` (with Atari extras), so it runs in a separate environment::

    python -m venv /tmp/rlberry-venv
    /tmp/rlberry-venv/bin/pip install "gymnasium==0.29.1" numpy scipy dill pandas tqdm \\
        matplotlib adastop
    /tmp/rlberry-venv/bin/pip install --no-deps rlberry==0.7.3 rlberry-scool==0.7.3

    python examples/peers_episodic.py export results/peers-episodic-models   # optplan's venv
    /tmp/rlberry-venv/bin/python examples/rlberry_ucbvi_deepsea.py \\
        results/peers-episodic-models results/peers-episodic-rlberry --episodes 1000

Each model file ``deepsea-L{L}-m{mapping_seed}.npz`` (``P[l, s, a, s']``, ``R[l, s, a]``,
``initial[s]``) becomes a Gymnasium environment whose observation is the column within the
layer; the agent is ``UCBVIAgent(env, horizon=L, gamma=1, bonus_scale_factor=1,
bonus_type="simplified_bernstein", stage_dependent=True)`` (rlberry's only bonus,
``sqrt(1 / n) + v_max[h] / n``; estimates per step, as optplan's ``ucbvi``), with the
environment's ``reward_range = (0, 1)`` so that ``v_max[h] = H - h``. Every step's ``(layer,
state, action)`` is saved to ``OUT/deepsea-L{L}-m{mapping_seed}.npz``; ``peers_episodic.py
--rlberry OUT`` scores them against the true model.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from rlberry.spaces import Discrete  # rlberry's counters accept its own Discrete only

#: Every step's (layer, state, action), module-level: rlberry's agent works on a copy of the
#: environment it is given, whose attributes are not the original's.
LOG: list[tuple[int, int, int]] = []


class LayeredModelEnv(gym.Env):
    """A layered model ``(P, R, initial)`` as an episodic environment of ``L`` steps (expected
    rewards, which are DeepSea's exact rewards in its deterministic version)."""

    def __init__(self, P, R, initial, seed=0):
        self.P, self.R, self.initial = P, R, initial
        self.L, self.S, self.A = R.shape
        self.observation_space = Discrete(self.S)
        self.action_space = Discrete(self.A)
        self.reward_range = (0.0, 1.0)
        self.rng = np.random.default_rng(seed)

    def reset(self, *, seed=None, options=None):
        self.layer = 0
        self.state = int(self.rng.choice(self.S, p=self.initial))
        return self.state, {}

    def step(self, action):
        action = int(action)
        l, s = self.layer, self.state
        LOG.append((l, s, action))
        reward = float(self.R[l, s, action])
        self.state = int(self.rng.choice(self.S, p=self.P[l, s, action]))
        self.layer += 1
        return self.state, reward, self.layer >= self.L, False, {}


def main(argv=None) -> int:
    from rlberry_scool.agents import UCBVIAgent

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--episodes", type=int, default=1000)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in sorted(args.models.glob("deepsea-L*-m*.npz")):
        data = np.load(path)
        env = LayeredModelEnv(data["P"], data["R"], data["initial"])
        agent = UCBVIAgent(
            env,
            gamma=1.0,
            horizon=env.L,
            bonus_scale_factor=1.0,
            bonus_type="simplified_bernstein",
            stage_dependent=True,
        )
        LOG.clear()
        start = time.perf_counter()
        agent.fit(budget=args.episodes)
        log = np.array(LOG, dtype=np.int64)
        np.savez(args.out / path.name, layers=log[:, 0], states=log[:, 1], actions=log[:, 2])
        print(f"{path.name}: {len(log)} steps in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
