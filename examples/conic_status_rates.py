"""How often each conic solver ends with status ``optimal`` on the random instances of every
problem (the instances tests and benchmarks share, ``optplan.bench.cases``), and on the KL-ball
indices MDP-UCB computes on the paper's 3-state example.

Run from the repository root: ``python examples/conic_status_rates.py [--solver CLARABEL]``
(about 15 seconds; ``--quick`` for a fifth of the instances).
"""

import argparse
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

import optplan as op
from optplan.bench.cases import deepsea_instance, planning_cases, random_index_instance

MODELS = Path(__file__).resolve().parents[1] / "models"
INDEX = {"kl_ball": op.KLBallIndex, "kl_inf": op.KLInfRate, "l1_ball": op.L1BallIndex}


def instances(name: str, n: int):
    """``n`` seeded instances of the problem ``name``."""
    if name in ("discounted", "average", "finite_horizon"):
        make = {
            "discounted": op.DiscountedPlanning,
            "average": op.AverageRewardPlanning,
            "finite_horizon": op.FiniteHorizonPlanning,
        }[name]
        return [make(m) for m in planning_cases(len(name), n, name)]
    if name in INDEX:
        rng = np.random.default_rng(4)
        return [
            INDEX[name](*random_index_instance(rng, (3, 10, 100)[i % 3], name, 0.3 * (i % 2)))
            for i in range(n)
        ]
    rng = np.random.default_rng(5)
    return [deepsea_instance(int(L), rng) for L in rng.integers(3, 11, size=n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solver", default="CLARABEL", choices=op.SOLVERS)
    parser.add_argument("--quick", action="store_true", help="a fifth of the instances")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # solver warnings are what the statuses count
    scale = 5 if args.quick else 1
    plan = [("discounted", 100), ("average", 100), ("finite_horizon", 100)]
    plan += [("kl_ball", 120), ("kl_inf", 120), ("l1_ball", 120), ("k_temperature", 60)]
    print(f"{'problem':<16}{'optimal':>12}   statuses ({args.solver})")
    for name, n in plan:
        counts = Counter(
            p.solve("conic", solver=args.solver).status for p in instances(name, n // scale)
        )
        total = sum(counts.values())
        share = 100 * counts["optimal"] / total
        print(f"{name:<16}{counts['optimal']:>5}/{total:<4} ({share:3.0f}%)   {dict(counts)}")
    mdp = op.load_model(MODELS / "cowan3.toml")
    agent = op.agents.MDPUCB(mdp.R, method="conic", solver=args.solver)
    op.experiments.run(agent, op.envs.TabularEnv(mdp), steps=40 // scale, seed=0)
    print(f"MDP-UCB on cowan3, {40 // scale} steps: KL-ball statuses {agent.statuses}")


if __name__ == "__main__":
    main()
