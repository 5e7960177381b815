"""rlberry's UCBVI (``rlberry_scool.agents.UCBVIAgent``) on optplan's DeepSea models, as a peer
row of docs/peers-episodic.md. Needs only numpy, gymnasium and rlberry (no optplan): rlberry
0.7.3 pins ``gymnasium < 0.30`` (with Atari extras), so it runs in a separate environment::

    python -m venv /tmp/rlberry-venv
    /tmp/rlberry-venv/bin/pip install "gymnasium==0.29.1" numpy scipy dill pandas tqdm \\
        matplotlib adastop
    /tmp/rlberry-venv/bin/pip install --no-deps rlberry==0.7.3 rlberry-scool==0.7.3

    python examples/peers_episodic.py --export results/peers-episodic-models   # optplan's venv
    /tmp/rlberry-venv/bin/python examples/rlberry_ucbvi_deepsea.py \\
        results/peers-episodic-models results/peers-episodic-rlberry --episodes 1000
    /tmp/rlberry-venv/bin/python examples/rlberry_ucbvi_deepsea.py \\
        results/peers-episodic-models results/peers-episodic-rlberry-paper --episodes 1000 \\
        --bonus-scale-factor paper

Each model file ``deepsea-L{L}-m{mapping_seed}.npz`` (``P[l, s, a, s']``, ``R[l, s, a]``,
``initial[s]``) becomes a Gymnasium environment whose observation is the column within the
layer, with ``reward_range = (0, 1)`` so that rlberry's ``v_max[h] = H - h``. The agent is
``UCBVIAgent(env, horizon=L, gamma=1, bonus_scale_factor=..., bonus_type=
"simplified_bernstein", stage_dependent=True)``: rlberry's only bonus, ``bonus_scale_factor
sqrt(1 / n) + v_max[h] / n``, with estimates per step as optplan's ``ucbvi``;
``bonus_scale_factor`` is rlberry's default 1, or UCBVI-CH's ``7 H L`` with
``--bonus-scale-factor paper``. Every step's ``(layer, state, action)`` is saved to
``OUT/deepsea-L{L}-m{mapping_seed}.npz`` and the row's label to ``OUT/label.txt``;
``peers_episodic.py --rlberry OUT`` scores them against the true model.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from rlberry.spaces import Discrete  # rlberry's counters accept its own Discrete only

ROOT = Path(__file__).resolve().parents[1]

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
    ap.add_argument(
        "out",
        type=Path,
        nargs="?",
        default=ROOT / "results" / "rlberry-ucbvi",
        help="where the runs go (default results/rlberry-ucbvi/)",
    )
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument(
        "--bonus-scale-factor",
        default="1",
        help="a number (rlberry's default: 1), or 'paper': UCBVI-CH's 7 H L on the sqrt(1/n) "
        "term, L = ln(5 S A T / delta) with T = episodes x H and delta = 0.1",
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    paper = args.bonus_scale_factor == "paper"
    if paper:
        label = "rlberry UCBVI (bonus_scale_factor 7 H L: UCBVI-CH's constant)"
    else:
        label = (
            f"rlberry UCBVI (simplified Bernstein, bonus_scale_factor {args.bonus_scale_factor})"
        )
    (args.out / "label.txt").write_text(label + "\n")
    for path in sorted(args.models.glob("deepsea-L*-m*.npz")):
        data = np.load(path)
        env = LayeredModelEnv(data["P"], data["R"], data["initial"])
        H, S, A = env.L, env.S, env.A
        if paper:
            scale = 7 * H * math.log(5 * S * A * args.episodes * H / 0.1)
        else:
            scale = float(args.bonus_scale_factor)
        agent = UCBVIAgent(
            env,
            gamma=1.0,
            horizon=H,
            bonus_scale_factor=scale,
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
