"""The planning agents' re-plans (UBE, ube-continuing, moment-matching) build their problems
from their own valid arrays without re-checking them and solve them without the dual they never
read; their actions, traces and planned arrays equal, bit for bit, those of a reference agent
that plans through the public, checked constructors and the full fast solve. The public
constructors still refuse bad input, and the fast solve's ``multiplier=False`` leaves ``u``
unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from test_engines_exact import assert_same_trace

import optplan as op
from optplan import uncertainty
from optplan._checks import OptplanError
from optplan.agents import UBE, ContinuingUBE, MomentMatching
from optplan.agents import _posterior_agent as PA
from optplan.agents import _ube_kernels as UK
from optplan.agents import _ube_steps as US
from optplan.agents.registry import make_agent
from optplan.envs import TabularEnv
from optplan.envs.registry import ENVS
from optplan.experiments import run
from optplan.posteriors import dirichlet_covariance
from optplan.problems.k_temperature import KLearningTemperature
from optplan.problems.moment_matching import MomentMatchingVariance
from optplan.problems.ube import UncertaintyBellman
from optplan.uncertainty import local_draft, local_lemma1, local_tabular

# --- reference agents: every plan through the public, checked path ----------------------------


class CheckedContinuingUBE(ContinuingUBE):
    def local_uncertainty(self):
        alpha, mu0, var = self.transitions.alpha, self.rewards.mu0, self.rewards.variance
        if self.local_rule == "draft":
            nu = local_draft(alpha, mu0, var, self.q_max)
        else:
            pbar = self.transitions.mean
            reward_var = np.sum(pbar * var, axis=-1) + dirichlet_covariance(alpha, mu0, mu0)
            nu = local_lemma1(reward_var, alpha, self.q_max, self.discount)
        return np.where(self.action_mask, nu, 0.0)

    def _noise_sd(self, P):
        self.local = self.local_uncertainty()
        self.problem = UncertaintyBellman(
            mean_transitions=P, policy=self.policy, local=self.local, discount=self.discount
        )
        self.u = np.asarray(self.problem.solve("fast").x)
        return np.sqrt(self.u)


class CheckedMomentMatching(MomentMatching):
    def _noise_sd(self, P):
        self.problem = MomentMatchingVariance(
            alpha=self.transitions.alpha,
            reward_mean=self.rewards.mu0,
            reward_var=self.rewards.variance,
            policy=self.policy,
            discount=self.discount,
            values=self.values,
        )
        res = self.problem.solve("fast")
        assert res.multiplier is not None
        self.variance = np.where(self.action_mask, np.asarray(res.x), 0.0)
        sd = np.sqrt(self.variance)
        return sd / self.discount if self.std == "public-code" else sd


class CheckedUBE(UBE):
    def local_uncertainty(self, head=()):
        var = self.var[head]
        if self.known:
            nu = var
        else:
            post = self.posterior
            counts = post.counts[head]
            alpha = post.next_counts[head] + post.transition_prior
            g = self.discount
            if self.local_rule == "tabular":
                reward_term = np.square(self._sd[head]) / np.maximum(counts, 1.0)
                nu = local_tabular(counts, self._sd[head], self.q_max, g)
            elif self.local_rule == "lemma1":
                reward_term = var
                nu = local_lemma1(var, alpha, self.q_max, g)
            else:
                reward_term = var
                nu = local_draft(
                    alpha,
                    np.broadcast_to(self.mean[head][..., None], alpha.shape),
                    np.broadcast_to(var[..., None], alpha.shape),
                    self.q_max,
                )
            if self.n_layers is not None and len(nu) == self.n_layers:
                nu = np.array(nu)
                nu[-1] = reward_term[-1]
        return np.where(self.action_mask[head], nu, 0.0)

    def _solve(self, P, policy, nu):
        problem = UncertaintyBellman(
            mean_transitions=P, policy=policy, local=nu, discount=self.discount
        )
        return np.asarray(problem.solve("fast").x)


REFERENCE = {
    ContinuingUBE: CheckedContinuingUBE,
    MomentMatching: CheckedMomentMatching,
    UBE: CheckedUBE,
}

ENVIRONMENTS = {
    "riverswim-6": ("riverswim", {"n_states": 6}),
    "cowan3": (None, {}),
    "deepsea-chain-6": ("deepsea-chain", {"n": 6}),
    "wide-narrow": ("wide-narrow", {"n": 2}),
    "deepsea-8": ("deepsea", {"size": 8}),
}
CONTINUING = ("riverswim-6", "cowan3", "deepsea-chain-6", "wide-narrow")

CASES = [
    *[("ube-continuing", env, {}) for env in CONTINUING],
    ("ube-continuing", "wide-narrow", {"local": "lemma1", "update_every": 3}),
    *[("moment-matching", env, {}) for env in CONTINUING],
    ("moment-matching", "deepsea-chain-6", {"std": "paper", "update_every": 11}),
    ("ube", "riverswim-6", {}),
    ("ube", "cowan3", {"local": "lemma1"}),
    ("ube", "wide-narrow", {"local": "draft", "update_every": 2}),
    ("ube", "deepsea-8", {}),
    ("ube", "deepsea-8", {"local": "draft"}),
    ("ube", "deepsea-8", {"transitions": "known"}),
]


def python_plans(agent) -> bool:
    """Whether a posterior-mean Thompson agent plans in NumPy (its flag)."""
    return bool(agent.state.flags[PA.PYTHON_PLAN])


def count_compiled_plans(monkeypatch) -> dict:
    """Counts of the UBE agent's calls into its compiled steps (:func:`optplan.agents.
    _ube_steps.plan_now` and ``observe``, which plans): a reference agent, which overrides the
    NumPy plan's methods, makes none (the Thompson agents' plans are compiled into their
    steps: :func:`python_plans` says)."""
    calls = {"n": 0}
    for name in ("plan_now", "observe"):
        compiled = getattr(US, name)

        def counted(*args, _compiled=compiled, **kwargs):
            calls["n"] += 1
            return _compiled(*args, **kwargs)

        monkeypatch.setattr(US, name, counted)
    return calls


def make_env(name):
    reg, params = ENVIRONMENTS[name]
    if reg is None:
        return TabularEnv(op.load_model("models/cowan3.toml"))
    comp = ENVS[reg]
    return comp.build(0, **comp.resolve(params, name))


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize(("agent_name", "env_name", "params"), CASES)
def test_plans_equal_the_checked_reference(agent_name, env_name, params, seed, monkeypatch):
    """The agent's NumPy plans (the compiled plans switched off) equal the reference's, which
    plans in NumPy because it overrides the NumPy plan's methods (no compiled plan called)."""
    calls = count_compiled_plans(monkeypatch)
    out = []
    for checked in (False, True):
        with monkeypatch.context() as m:
            if not checked:
                m.setattr(UK, "available", lambda n_states: False)
                m.setattr(UK, "MAX_STATES", 0)
            env = make_env(env_name)
            agent = make_agent(agent_name, env, **params)
            if checked:
                agent.__class__ = REFERENCE[type(agent)]
            steps = 160 if env_name == "deepsea-8" else 250
            out.append((run(agent, env, steps=steps, seed=seed, engine="python"), agent))
    (trace, agent), (ref_trace, ref) = out
    assert type(ref) is not type(agent)
    assert calls["n"] == 0, "a plan was compiled"
    if isinstance(agent, PA.ThompsonMeanModel):
        assert python_plans(agent) and python_plans(ref)
    assert_same_trace(ref_trace, trace)
    for name in ("policy", "q", "u", "local", "variance", "noise_sd", "_sqrt_u"):
        if hasattr(ref, name):
            np.testing.assert_array_equal(getattr(agent, name), getattr(ref, name), err_msg=name)
    assert agent.rng.bit_generator.state == ref.rng.bit_generator.state


@pytest.mark.parametrize("agent_name", ["ube-continuing", "moment-matching"])
def test_compiled_engine_equals_the_checked_reference(agent_name, monkeypatch):
    """The compiled steps between plans plus the unchecked plans equal the generic loop with
    checked NumPy plans (update_every 5: steps between plans to compile)."""
    calls = count_compiled_plans(monkeypatch)
    out = []
    for checked, engine in ((False, "compiled"), (True, "python")):
        env = make_env("riverswim-6")
        agent = make_agent(agent_name, env, update_every=5)
        if checked:
            agent.__class__ = REFERENCE[type(agent)]
            calls["n"] = 0
        out.append((run(agent, env, steps=400, seed=2, engine=engine), agent))
    assert calls["n"] == 0
    assert not python_plans(out[0][1]) and python_plans(out[1][1])
    assert_same_trace(out[1][0], out[0][0])


def _same_method(method):
    """An override that does what ``method`` does (another function object)."""

    def same(self, *args, **kwargs):
        return method(self, *args, **kwargs)

    return same


@pytest.mark.parametrize("cls", [ContinuingUBE, MomentMatching])
def test_subclasses_that_change_the_numpy_plan_plan_in_numpy(cls):
    """A subclass that overrides one of the NumPy plan's methods plans in NumPy (the compiled
    plan would not see the override); one that keeps them all keeps the compiled plan."""
    names = ["_plan_numpy", "_optimal", "mean_model", "_noise_sd", "_solve"]
    if cls is ContinuingUBE:
        names.append("local_uncertainty")
    for name in [None, *names]:
        body = {} if name is None else {name: _same_method(getattr(cls, name))}
        sub = type("Sub", (cls,), body)
        agent = sub(6, 2)
        assert python_plans(agent) == (name is not None), name


# --- the unchecked constructors are internal; the public ones still refuse bad input -----------


def _ube_inputs(S=3, A=2, seed=0):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    return P, rng.integers(A, size=S), rng.random((S, A))


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("mean_transitions", lambda P, pi, nu: (P * 1.5, pi, nu)),
        ("local", lambda P, pi, nu: (P, pi, -nu)),
        ("local", lambda P, pi, nu: (P, pi, nu[:, :1])),
        ("policy", lambda P, pi, nu: (P, pi + 5, nu)),
        ("mean_transitions", lambda P, pi, nu: (np.where(P > 0, np.nan, P), pi, nu)),
    ],
)
def test_public_uncertainty_bellman_still_refuses_bad_input(field, bad):
    P, pi, nu = bad(*_ube_inputs())
    with pytest.raises(OptplanError, match=field):
        UncertaintyBellman(P, pi, nu, 0.9)


def test_public_moment_matching_still_refuses_bad_input():
    P, pi, _ = _ube_inputs()
    alpha, mean, var = P + 0.5, np.zeros(P.shape), np.ones(P.shape)
    with pytest.raises(OptplanError, match="alpha"):
        MomentMatchingVariance(-alpha, mean, var, pi, 0.9)
    with pytest.raises(OptplanError, match="reward_var"):
        MomentMatchingVariance(alpha, mean, -var, pi, 0.9)
    with pytest.raises(OptplanError, match="reward_mean"):
        MomentMatchingVariance(alpha, mean[:, :1], var, pi, 0.9)
    with pytest.raises(OptplanError, match="discount"):
        MomentMatchingVariance(alpha, mean, var, pi, 1.0)
    with pytest.raises(OptplanError, match="values"):
        MomentMatchingVariance(alpha, mean, var, pi, 0.9, values=np.ones(5))
    with pytest.raises(OptplanError, match="reward_var"):
        local_draft(alpha, mean, -var, 10.0)
    with pytest.raises(OptplanError, match="alpha"):
        local_lemma1(np.ones(pi.shape + (2,)), -alpha, 10.0, 0.9)


def test_unchecked_paths_are_not_public():
    public = set(op.__all__) | set(uncertainty.__all__)
    assert not any("trusted" in n or "unchecked" in n for n in public)
    assert UncertaintyBellman._trusted.__name__.startswith("_")
    assert MomentMatchingVariance._trusted.__name__.startswith("_")


def test_trusted_problems_equal_the_checked_ones():
    P, pi, nu = _ube_inputs(4, 3, seed=5)
    a = UncertaintyBellman(P, pi, nu, 0.95)
    b = UncertaintyBellman._trusted(P, pi, nu, 0.95)
    for name in ("mean_transitions", "policy", "local", "weights"):
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name))
        assert not getattr(b, name).flags.writeable
    assert b.discount == a.discount
    alpha = P * 3 + 0.25
    mean = np.random.default_rng(1).normal(size=P.shape)
    var = np.random.default_rng(2).random(P.shape)
    values = np.random.default_rng(3).normal(size=4)
    m = MomentMatchingVariance(alpha, mean, var, pi, 0.9, values=values)
    t = MomentMatchingVariance._trusted(alpha, mean, var, pi, 0.9, values)
    for x, y in zip(m.terms, t.terms, strict=True):
        np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(t.bellman.local, m.bellman.local)
    np.testing.assert_array_equal(t.bellman.policy, m.bellman.policy)
    np.testing.assert_array_equal(t.solve().x, m.solve().x)


# --- the fast solve without the dual ----------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["direct", "iteration"])
@pytest.mark.parametrize("layered", [False, True])
def test_fast_solve_without_multiplier_keeps_u(algorithm, layered):
    rng = np.random.default_rng(7)
    S, A = 5, 3
    shape = (4, S, A) if layered else (S, A)
    P = rng.dirichlet(np.ones(S), size=shape)
    problem = UncertaintyBellman(P, rng.integers(A, size=shape[:-1]), rng.random(shape), 0.9)
    full = problem.solve("fast", algorithm=algorithm)
    lean = problem.solve("fast", algorithm=algorithm, multiplier=False)
    assert full.success and lean.success and lean.status == full.status
    assert full.multiplier is not None and lean.multiplier is None
    np.testing.assert_array_equal(lean.x, full.x)
    assert lean.value == full.value
    if not layered:
        np.testing.assert_array_equal(lean.values, full.values)


def test_moment_matching_fast_solve_without_multiplier_keeps_sigma():
    rng = np.random.default_rng(8)
    S, A = 5, 3
    alpha = rng.dirichlet(np.ones(S), size=(S, A)) * 4 + 0.1
    mm = MomentMatchingVariance(
        alpha, rng.normal(size=alpha.shape), rng.random(alpha.shape), rng.integers(A, size=S), 0.9
    )
    full, lean = mm.solve(), mm.solve(multiplier=False)
    assert lean.multiplier is None and full.multiplier is not None
    np.testing.assert_array_equal(lean.x, full.x)
    assert lean.info["w"] is full.info["w"]


@pytest.mark.parametrize(
    "params",
    [{}, {"transitions": "deterministic"}, {"variant": "k-learning", "bonus": "posterior"}],
)
def test_k_learning_plans_equal_the_checked_reference(params, monkeypatch):
    """K-learning's tau* problem built unchecked equals the public constructor's plans."""
    env_params = {"size": 6, **({"variant": params.pop("variant")} if "variant" in params else {})}
    out = []
    for checked in (False, True):
        if checked:
            monkeypatch.setattr(
                KLearningTemperature, "_trusted", classmethod(lambda cls, *a: cls(*a))
            )
        comp = ENVS["deepsea"]
        env = comp.build(0, **comp.resolve(env_params, "deepsea"))
        agent = make_agent("k-learning", env, **params)
        out.append((run(agent, env, episodes=30, seed=4, engine="python"), agent))
    (trace, agent), (ref_trace, ref) = out
    assert_same_trace(ref_trace, trace)
    for name in ("K", "pi", "values", "tau"):
        np.testing.assert_array_equal(getattr(agent, name), getattr(ref, name), err_msg=name)


@pytest.mark.parametrize("seed", range(5))
def test_moment_matching_terms_equal_the_dirichlet_covariances(seed):
    """The local term's four parts, formed with one pbar, equal dirichlet_covariance's bits."""
    rng = np.random.default_rng(seed)
    S, A = 2 + seed, 3
    alpha = rng.gamma(0.5, 2.0, size=(S, A, S)) + (seed % 2) * 1e3
    mean = rng.normal(size=alpha.shape) * 10.0**seed
    var = rng.random(alpha.shape)
    values = rng.normal(size=S) * 10.0 ** (2 - seed)
    g = 0.9
    terms = uncertainty.moment_matching_local(alpha, mean, var, values, g)
    p = alpha / alpha.sum(axis=-1, keepdims=True)
    A_ = dirichlet_covariance(alpha, mean, mean)
    B_ = np.sum(p * var, axis=-1)
    C_ = dirichlet_covariance(alpha, mean, values)
    D_ = dirichlet_covariance(alpha, values, values)
    for got, want in zip(terms, (A_ + B_ + 2 * g * C_ + g**2 * D_, A_, B_, C_, D_), strict=True):
        np.testing.assert_array_equal(got, want)
