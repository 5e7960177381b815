"""Probe: time to solve DeepSea for K-learning (tau* and schedule) and PSRL at a few depths.

Run: python examples/deepsea_probe.py  (about a minute). With the Dirichlet(1/S) transition
prior, K-learning solves depth 6 but not 10 or 20 within 3000 episodes; PSRL does.
"""

import time

from optplan.agents import PSRL, KLearning
from optplan.envs import DeepSea
from optplan.experiments import run

AGENTS = {
    "k-learning tau*": lambda L, init: KLearning(L, 2, n_layers=L, initial=init),
    "k-learning schedule": lambda L, init: KLearning(
        L, 2, n_layers=L, temperature="schedule", initial=init
    ),
    "psrl": lambda L, init: PSRL(L, 2, n_layers=L, initial=init),
}

for L in (6, 10, 20):
    env = DeepSea(L, mapping_seed=0)
    for name, make in AGENTS.items():
        out = []
        for seed in range(2):
            t0 = time.perf_counter()
            agent = make(L, env.mdp.initial)
            tr = run(agent, env, episodes=3000, seed=seed, stop_when_solved=True)
            tau = getattr(agent, "tau", float("nan"))
            out.append(f"solve={tr.time_to_solve} tau={tau:.3g} {time.perf_counter() - t0:.1f}s")
        print(f"L={L:>2} {name:<20} " + " | ".join(out))
