"""Solve the 3-state example of accelerating-ucb-indices-mdp §5 both ways and run two agents.

Run from the repository root: ``python examples/plan_cowan3.py`` (about a second).
"""

from pathlib import Path

import optplan as op

MODELS = Path(__file__).resolve().parents[1] / "models"

mdp = op.load_model(MODELS / "cowan3.toml")  # P[s, a, s'], R[s, a], average reward
fast = op.solve_average_reward(mdp, method="fast")  # Howard policy iteration
conic = op.solve_average_reward(mdp, method="conic", solver="CLARABEL")  # the LP
print(f"gain  fast {fast.gain:.12f}  conic {conic.gain:.12f}")
print(f"bias  fast {fast.bias}  conic {conic.bias}")
print(f"policy {fast.policy} (the paper: a1, a2, a1); stationary frequencies:\n{fast.occupancy}")

check = op.cross_check(op.AverageRewardPlanning(mdp), solver="ECOS")
print(f"cross-check with ECOS: agree={check.agree}, worst error {max(check.abs_err.values()):.1e}")

env = op.envs.TabularEnv(mdp)
for agent in (op.agents.OracleAgent(mdp), op.agents.RandomAgent.for_mdp(mdp)):
    trace = op.experiments.run(agent, env, steps=10_000, seed=0)
    print(f"{type(agent).__name__:<12} pseudo-regret after 10,000 steps: {trace.regret[-1]:8.1f}")
