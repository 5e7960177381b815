"""The Bayesian-methods study in its public code's setting (``bayes-published-*.toml``): each
way it departs from optplan's own setting (``bayes-*.toml``) pinned.

- PriorMDP: ``sampler="public-code"`` rebuilds the public code's models. The reference here is
  derived independently: the public code's draw sequence (``np.random.seed(seed)``, then for
  each ``s``, each ``a``: one Dirichlet row, and for each ``s'`` a Gamma precision and a normal
  mean) re-run with NumPy's legacy ``RandomState``, and its policy iteration re-implemented.
- BQL: the Monte-Carlo moment match (1,000 draws) against the exact one.
- The oracle run's noise: shared with the agent's run in optplan's setting, its own in the
  published one.
- The step count: T + 1 in the published setting, T in optplan's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import optplan as op
from optplan.agents import OracleAgent, RandomAgent
from optplan.agents.bql import kl_projection, mixture_moments
from optplan.envs import DeepSeaChain, PriorMDP, WideNarrow
from optplan.experiments import metrics, run
from optplan.experiments.oracle import solve_oracle
from optplan.experiments.run import oracle_env_seed, oracle_run
from optplan.sweeps import execute, load_sweep
from optplan.sweeps.sweep import SweepError, sweep_from_dict

ROOT = Path(__file__).parents[1]
SWEEPS = ROOT / "models" / "sweeps"
CONFIGS = (
    [f"deepsea-n{n}" for n in (4, 6, 8, 10, 12)]
    + [f"widenarrow-w{w}" for w in (6, 8, 10, 12)]
    + [f"priormdp-s{s}" for s in range(4)]
)
GAMMA = 0.9


def horizon(config: str) -> int:
    """The study's T: 1250 N (DeepSea-chain), 1000 N W (WideNarrow, N = 1), 1250 Ns (PriorMDP,
    Ns = 4)."""
    family, size = config.split("-")
    k = int(size[1:])
    return {"deepsea": 1250 * k, "widenarrow": 1000 * k, "priormdp": 1250 * 4}[family]


# --- PriorMDP: the public code's models ----------------------------------------------------------


def public_code_prior_mdp(seed: int, S: int = 4, A: int = 2):
    """``(P, mu)`` as the public code's ``PriorMDP`` draws them: ``np.random.seed(seed)``; for
    ``s``, for ``a``: ``P(.|s, a) ~ dirichlet(ones(S))``; for ``s'``: ``normal_gamma(0., 1, 4,
    4)``, i.e. ``tau = gamma(shape=4, scale=1/4, size=(1,))``, ``mu = normal(loc=0., scale=(1
    tau)^-1/2, size=(1,))``."""
    np_random = np.random.RandomState(seed)  # the stream np.random.seed(seed) resets
    P = np.zeros((S, A, S))
    mu = np.zeros((S, A, S))
    for s in range(S):
        for a in range(A):
            P[s, a] = np_random.dirichlet(np.ones(S))
            for s2 in range(S):
                tau = np_random.gamma(shape=4.0, scale=4.0**-1, size=(1,))
                mu[s, a, s2] = np_random.normal(loc=0.0, scale=(1.0 * tau) ** -0.5, size=(1,))[0]
    return P, mu


def public_code_policy_iteration(P, Rsas, gamma, max_iter):
    """``solve_tabular_continuing_PI`` of the public code: ``pi = 0``, solve, greedy with the
    first maximum, stop when the policy repeats."""
    S = P.shape[0]
    idx = np.arange(S)
    pi = np.zeros(S, dtype=int)
    PR = np.einsum("ijk,ijk->ij", P, Rsas)
    for _ in range(max_iter):
        V = np.linalg.solve(np.eye(S) - gamma * P[idx, pi, :], PR[idx, pi])
        Q = PR + gamma * np.einsum("ijk,k->ij", P, V)
        new = Q.argmax(axis=1)
        if np.array_equal(new, pi):
            break
        pi = new
    return pi, PR


def long_run_average(P, R, pi) -> float:
    """Average reward per step of ``pi`` from state 0: ``lim (1/T) sum_t E r_t`` by the stationary
    distribution of ``P_pi`` (one recurrent class: the Dirichlet rows have full support)."""
    S = P.shape[0]
    P_pi = P[np.arange(S), pi]
    A_ = np.vstack([P_pi.T - np.eye(S), np.ones(S)])
    b = np.append(np.zeros(S), 1.0)
    d = np.linalg.lstsq(A_, b, rcond=None)[0]
    return float(d @ R[np.arange(S), pi])


@pytest.mark.parametrize("seed", range(4))
def test_prior_mdp_public_code_sampler_is_the_public_codes_model(seed):
    P, mu = public_code_prior_mdp(seed)
    pi, R = public_code_policy_iteration(P, mu, GAMMA, max_iter=2 * 4)
    env = PriorMDP(4, 2, seed, sampler="public-code")
    np.testing.assert_array_equal(env.mdp.P, P)
    np.testing.assert_array_equal(env.transition_reward_mean, mu)
    np.testing.assert_allclose(env.mdp.R, R, rtol=1e-14, atol=1e-15)
    # optimal policy at gamma = 0.9: optplan's oracle against the public code's PI
    oracle = solve_oracle(env.mdp, "discounted")
    np.testing.assert_array_equal(oracle.result.policy, pi)
    # its average reward: optplan's exact oracle reward, t steps in, against the stationary one
    avg = long_run_average(P, R, pi)
    tail = metrics.oracle_step_rewards(env.mdp, oracle.result.policy, 400)[-1]
    assert tail == pytest.approx(avg, rel=1e-9, abs=1e-12)
    # UBE's reward bound in the published sweep: this model's largest true mean reward
    (ube,) = [
        a
        for a in load_sweep(SWEEPS / f"bayes-published-priormdp-s{seed}.toml").agents
        if a.name == "ube-continuing"
    ]
    assert ube.params["reward_bound"] == mu.max()


def test_prior_mdp_seed0_public_code_differs_from_the_generator_model():
    """Seed 0 of the two samplers are two different MDPs (so the optplan-setting "seed 0" is
    not the study's)."""
    P, mu = public_code_prior_mdp(0)
    pi, R = public_code_policy_iteration(P, mu, GAMMA, max_iter=8)
    gen = PriorMDP(4, 2, 0)
    assert not np.allclose(gen.mdp.P, P)
    assert long_run_average(P, R, pi) != pytest.approx(
        long_run_average(gen.mdp.P, gen.mdp.R, solve_oracle(gen.mdp).result.policy), rel=1e-3
    )


# --- BQL: Monte-Carlo moment match against the exact one -----------------------------------------


@pytest.mark.parametrize(
    "current, reward, following",
    [
        ((0.0, 4.0, 3.0, 3.0), 0.7, (0.0, 4.0, 3.0, 3.0)),  # the draft's prior both sides
        ((0.3, 9.0, 5.5, 2.0), -0.4, (1.2, 6.0, 4.0, 1.5)),  # after some updates
    ],
)
def test_monte_carlo_moment_match_is_the_exact_one_within_its_error(current, reward, following):
    """R = 200 Monte-Carlo moment matches of 1,000 draws each (the public code's count): their
    mean lies within 4 standard errors of the exact (quadrature) moments, and so does a single
    estimate within 4 of its own sds; the NG projection of a single one is close to the exact."""
    exact = np.array(mixture_moments(current, reward, GAMMA, following, "quadrature"))
    rng = np.random.default_rng(12)
    mc = np.array(
        [
            mixture_moments(current, reward, GAMMA, following, "monte-carlo", rng, 1000)
            for _ in range(200)
        ]
    )
    sd = mc.std(axis=0, ddof=1)
    assert (sd > 0).all()
    assert np.all(np.abs(mc.mean(axis=0) - exact) <= 4 * sd / np.sqrt(len(mc)))
    assert np.all(np.abs(mc[0] - exact) <= 4 * sd)
    # and it is noise, not the exact value: the estimates differ from it and among themselves
    assert np.all(np.abs(mc - exact).max(axis=0) > 0)
    proj_mc, proj_exact = np.array(kl_projection(mc[0])), np.array(kl_projection(exact))
    np.testing.assert_allclose(proj_mc[0], proj_exact[0], atol=6 * np.sqrt(sd[1] ** 2 + sd[0] ** 2))


def test_published_bql_is_monte_carlo_with_1000_draws_and_optplans_exact():
    for config in CONFIGS:
        ours = {a.label: a for a in load_sweep(SWEEPS / f"bayes-{config}.toml").agents}
        pub = {a.label: a for a in load_sweep(SWEEPS / f"bayes-published-{config}.toml").agents}
        for label in ("BQL", "BQL (mu0 = 1.5)"):
            assert ours[label].params["moment_match"] == "quadrature"
            assert pub[label].params["moment_match"] == "monte-carlo"
            assert pub[label].params["n_samples"] == 1000


# --- the oracle run's noise ----------------------------------------------------------------------


def test_oracle_noise_shared_replays_the_agents_stream_and_independent_does_not():
    env = DeepSeaChain(4)
    shared = run(OracleAgent(env.mdp), env, steps=2000, seed=5)
    indep = run(OracleAgent(env.mdp), env, steps=2000, seed=5, oracle_noise="independent")
    # the agent's run is the same in both (the oracle's stream is a third child of the seed)
    np.testing.assert_array_equal(shared.rewards, indep.rewards)
    np.testing.assert_array_equal(shared.states, indep.states)
    # shared: the oracle's run is the agent's run, bit for bit; independent: other draws
    np.testing.assert_array_equal(shared.oracle_run_rewards, shared.rewards)
    assert shared.summary()["draft_regret"] == 0.0
    assert not np.any(indep.oracle_run_rewards == indep.rewards)
    assert indep.summary()["draft_regret"] != 0.0
    # the independent run is the oracle's policy run from its own seed
    expected = oracle_run(DeepSeaChain(4), solve_oracle(env.mdp), oracle_env_seed(5), 2000)
    np.testing.assert_array_equal(indep.oracle_run_rewards, expected)
    # pseudo-regret does not see the oracle run
    np.testing.assert_array_equal(shared.regret, indep.regret)


def test_independent_oracle_noise_widens_the_spread_of_the_drafts_regret():
    """On WideNarrow W = 6 the oracle against itself: per-seed draft regret exactly 0 with shared
    noise, a spread of about sqrt(2 T) reward sds with independent noise, centred on 0."""
    env = WideNarrow(1, 6)
    T = 600
    shared, indep = [], []
    for seed in range(12):
        shared.append(run(OracleAgent(env.mdp), env, steps=T, seed=seed).summary()["draft_regret"])
        tr = run(OracleAgent(env.mdp), env, steps=T, seed=seed, oracle_noise="independent")
        indep.append(tr.summary()["draft_regret"])
    assert np.std(shared) == 0.0
    # 2/3 of the steps draw N(., 1) rewards in each run: sd of the difference sqrt(2 * 400)
    sd = np.std(indep, ddof=1)
    assert 0.5 * np.sqrt(2 * 400) < sd < 1.6 * np.sqrt(2 * 400)
    assert abs(np.mean(indep)) < 4 * sd / np.sqrt(len(indep))


def test_oracle_noise_is_checked_and_reaches_the_run_from_a_sweep(monkeypatch):
    with pytest.raises(ValueError, match="oracle_noise"):
        run(RandomAgent(4, 2), DeepSeaChain(4), steps=10, oracle_noise="own")
    base = {
        "seeds": 1,
        "steps": 20,
        "agents": [{"name": "random"}],
        "envs": [{"name": "deepsea-chain", "criterion": "discounted"}],
    }
    with pytest.raises(SweepError, match=r"x\.toml: oracle_noise must be one of"):
        sweep_from_dict({**base, "oracle_noise": "own"}, source="x.toml")
    seen = []
    real = execute.run

    def spy(*args, **kwargs):
        seen.append(kwargs["oracle_noise"])
        return real(*args, **kwargs)

    monkeypatch.setattr(execute, "run", spy)
    for noise in ("shared", "independent"):
        sweep = sweep_from_dict({**base, "oracle_noise": noise})
        (task,) = sweep.tasks()
        record, _ = execute.execute_task(task.to_dict())
        assert record["status"] == "ok"
    assert seen == ["shared", "independent"]
    # the default leaves the fingerprint of a sweep without the key unchanged
    assert "oracle_noise" not in sweep_from_dict(base).to_dict()
    assert sweep_from_dict({**base, "oracle_noise": "shared"}).fingerprint() == (
        sweep_from_dict(base).fingerprint()
    )


@pytest.mark.parametrize("config", CONFIGS)
def test_the_settings_oracle_noise(config):
    assert load_sweep(SWEEPS / f"bayes-{config}.toml").oracle_noise == "shared"
    assert load_sweep(SWEEPS / f"bayes-published-{config}.toml").oracle_noise == "independent"


# --- T + 1 steps ---------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
def test_published_sweeps_take_t_plus_one_steps(config):
    assert load_sweep(SWEEPS / f"bayes-{config}.toml").steps == horizon(config)
    assert load_sweep(SWEEPS / f"bayes-published-{config}.toml").steps == horizon(config) + 1


def test_the_drafts_regret_sums_every_step_of_both_runs():
    """A run of T + 1 steps scores T + 1 agent rewards against T + 1 oracle rewards (the public
    code's ``range(num_time_steps + 1)`` in both loops)."""
    env = DeepSeaChain(4)
    T = 1250 * 4
    tr = run(RandomAgent(4, 2), env, steps=T + 1, seed=3, oracle_noise="independent")
    assert tr.rewards.shape == (T + 1,) and tr.oracle_run_rewards.shape == (T + 1,)
    expected = oracle_run(DeepSeaChain(4), solve_oracle(env.mdp), oracle_env_seed(3), T + 1)
    s = tr.summary()
    assert s["steps"] == T + 1
    assert s["draft_regret"] == pytest.approx(expected.sum() - tr.rewards.sum(), rel=1e-12)
    assert s["draft_normalized_regret"] == pytest.approx(
        (expected.sum() - tr.rewards.sum()) / expected.sum(), rel=1e-12
    )


# --- the rest of the published files: optplan's files with the listed changes only --------------


@pytest.mark.parametrize("config", CONFIGS)
def test_published_sweep_is_optplans_with_the_public_codes_settings_only(config):
    ours = load_sweep(SWEEPS / f"bayes-{config}.toml")
    pub = load_sweep(SWEEPS / f"bayes-published-{config}.toml")
    assert pub.seeds == ours.seeds and pub.seed == ours.seed
    assert [a.label for a in pub.agents] == [a.label for a in ours.agents]
    (e_ours,), (e_pub,) = ours.envs, pub.envs
    expected_env = dict(e_ours.params)
    if config.startswith("priormdp"):
        assert e_ours.params["sampler"] == "generator"
        expected_env["sampler"] = "public-code"
    assert e_pub.params == expected_env and e_pub.criterion == e_ours.criterion
    for a_ours, a_pub in zip(ours.agents, pub.agents, strict=True):
        expected = dict(a_ours.params)
        if a_ours.name == "bql":
            expected.update(moment_match="monte-carlo", n_samples=1000)
        if "sum_of_squares" in expected:
            expected["sum_of_squares"] = "public-code"
        if a_ours.name == "ube-continuing" and config.startswith("priormdp"):
            seed = int(config[-1])
            expected["reward_bound"] = float(
                PriorMDP(4, 2, seed, sampler="public-code").transition_reward_mean.max()
            )
        assert a_pub.params == expected, a_ours.label


def test_the_published_prior_mdp_is_solved_by_policy_iteration_alike():
    """op.solve_discounted on the public-code models agrees with the re-implemented PI's
    values (guards the comparison above against a shared mistake in the policy only)."""
    for seed in range(4):
        P, mu = public_code_prior_mdp(seed)
        pi, R = public_code_policy_iteration(P, mu, GAMMA, max_iter=8)
        V = np.linalg.solve(np.eye(4) - GAMMA * P[np.arange(4), pi], R[np.arange(4), pi])
        res = op.solve_discounted(PriorMDP(4, 2, seed, sampler="public-code").mdp)
        np.testing.assert_allclose(res.values, V, rtol=1e-9)
