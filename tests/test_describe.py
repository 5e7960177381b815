"""``op.describe`` / ``optplan info`` and the ``HittingTimes`` problem:
hitting times and diameters against brute force over every deterministic policy, mixing
times against step-by-step powers, the report of the shipped models, the command line."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import optplan as op
from optplan.cli import main
from optplan.dp import closed_classes, limiting_matrix
from optplan.hardness import describe, mixing
from optplan.problems import HittingTimes


def random_model(rng, S, A, density=0.35, mask=False):
    P = rng.random((S, A, S)) * (rng.random((S, A, S)) < density)
    P[np.arange(S)[:, None], np.arange(A), rng.integers(S, size=(S, A))] += 0.1
    P /= P.sum(-1, keepdims=True)
    m = rng.random((S, A)) < 0.7 if mask else np.ones((S, A), bool)
    m[np.arange(S), rng.integers(A, size=S)] = True
    return op.TabularMDP(P, rng.normal(size=(S, A)), action_mask=m)


def brute_force_times(mdp):
    """``min`` over deterministic policies of the expected hitting time, ``inf`` where the
    policy reaches the target with probability below 1."""
    S = mdp.n_states
    best = np.full((S, S), np.inf)
    choices = [np.flatnonzero(m) for m in mdp.action_mask]
    for pol in itertools.product(*choices):  # every policy
        P_pi = mdp.P[np.arange(S), list(pol)]
        for t in range(S):  # every target
            Pm = P_pi.copy()
            Pm[t] = 0.0
            Pm[t, t] = 1.0
            n, labels, closed = closed_classes(Pm)
            # states that can reach a closed class other than {t} never surely hit t
            other = np.isin(labels, np.flatnonzero(closed)) & (labels != labels[t])
            reach = (Pm > 0) | np.eye(S, dtype=bool)
            for _ in range(S):
                reach = reach | ((reach.astype(float) @ reach.astype(float)) > 0)
            doomed = reach[:, other].any(axis=1)
            ok = ~doomed
            ok[t] = False
            T = np.full(S, np.inf)
            T[t] = 0.0
            idx = np.flatnonzero(ok)
            if idx.size:
                T[idx] = np.linalg.solve(np.eye(idx.size) - Pm[np.ix_(idx, idx)], np.ones(idx.size))
            best[t] = np.minimum(best[t], T)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_hitting_times_equal_brute_force_both_ways(seed):
    rng = np.random.default_rng(seed)
    mdp = random_model(rng, int(rng.integers(2, 6)), 2, density=0.3, mask=seed % 2 == 1)
    expected = brute_force_times(mdp)
    problem = HittingTimes(mdp)
    for res in (problem.solve(), problem.solve(method="conic")):
        assert res.status == "optimal", res.message
        np.testing.assert_array_equal(np.isinf(res.values), np.isinf(expected))
        finite = np.isfinite(expected)
        np.testing.assert_allclose(res.values[finite], expected[finite], rtol=1e-7, atol=1e-7)
        off = ~np.eye(mdp.n_states, dtype=bool)
        assert res.value == pytest.approx(expected[off].max(), rel=1e-7)


def test_hitting_times_cross_check_with_infinite_pairs():
    """Two absorbing states: neither reaches the other (diameter inf, both paths agree)."""
    mdp = op.TabularMDP(np.eye(2)[:, None, :], np.array([[0.0], [1.0]]))
    chk = op.cross_check(HittingTimes(mdp))
    assert chk.agree and chk.fast.value == chk.conic.value == np.inf
    assert chk.fast.status == "optimal"


def test_diameter_of_a_deterministic_cycle():
    S = 5
    P = np.zeros((S, 1, S))
    P[np.arange(S), 0, (np.arange(S) + 1) % S] = 1.0
    res = HittingTimes(op.TabularMDP(P, np.zeros((S, 1)))).solve()
    assert res.value == pytest.approx(S - 1)


def test_mixing_time_equals_step_by_step_distance():
    rng = np.random.default_rng(2)
    for _ in range(10):
        S = int(rng.integers(2, 7))
        P = rng.random((S, S)) * (rng.random((S, S)) < 0.5) + 0.05 * np.eye(S)
        P /= P.sum(1, keepdims=True)
        star = limiting_matrix(P)
        M, t = np.eye(S), 0
        while 0.5 * np.abs(M - star).sum(1).max() > 0.25:
            M, t = M @ P, t + 1
        assert mixing(P)["t_mix"] == t
    flip = np.array([[0.0, 1.0], [1.0, 0.0]])  # periodic: never mixes
    out = mixing(flip, max_steps=64)
    assert out["t_mix"] is None and out["slem"] == pytest.approx(1.0)


def test_describe_cowan3_and_riverswim():
    d = describe(op.load_model("models/cowan3.toml"))
    assert d.structure["kind"] == "unichain" and d.gain["constant"]
    assert d.diameter["value"] == pytest.approx(2.932298404484692, rel=1e-9)
    assert all(c["agree"] for c in d.checks.values())
    assert d.gaps["bias"]["min_positive"] == pytest.approx(0.15192, abs=1e-5)
    # C(P) beside the gaps: the fast value, cross-checked by the conic path
    assert d.lower_bound["value"] == pytest.approx(1.13213, abs=1e-5)
    assert d.lower_bound["critical_pairs"] == 2 and d.lower_bound["never_optimal_pairs"] == 1
    assert "lower_bound" in d.checks
    json.dumps(d.to_dict())
    r = describe(op.load_model("models/riverswim6.toml"), method="fast")
    assert r.checks == {} and r.mixing["recurrent_classes"] == 1 and r.mixing["t_mix"] >= 1
    # RiverSwim is communicating, not ergodic: "always left" never leaves state 0
    assert r.lower_bound["value"] is None and "not ergodic" in r.lower_bound["why"]
    assert "lower bound    C(P) is not defined: the model is not ergodic" in str(r)


def test_describe_multichain_model_per_state_gain():
    mdp = op.TabularMDP(np.eye(2)[:, None, :], np.array([[0.0], [1.0]]))
    d = describe(mdp)
    assert d.structure["kind"] == "multichain" and not d.gain["constant"]
    assert d.gain["per_state"].tolist() == pytest.approx([0.0, 1.0])
    assert d.diameter["value"] == np.inf and d.mixing["recurrent_classes"] == 2
    assert "inf" in json.dumps(d.to_dict())


def test_describe_refuses_bad_input():
    with pytest.raises(TypeError, match="mdp must be a TabularMDP, got str"):
        describe("models/cowan3.toml")
    with pytest.raises(ValueError, match=r"method must be one of \('fast', 'both'\), got 'conic'"):
        describe(op.load_model("models/cowan3.toml"), method="conic")


def test_cli_info_text_and_json(capsys):
    assert main(["info", "models/cowan3.toml"]) == 0
    out = capsys.readouterr().out
    assert "diameter       2.932298404" in out and "agree=True" in out
    assert "lower bound    C(P) 1.1321296" in out and "check lower_bound" in out
    assert main(["info", "FrozenLake-v1", "--env-arg", "is_slippery=false", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["structure"]["kind"] == "multichain" and report["diameter"]["value"] == "inf"
    assert all(c["agree"] for c in report["checks"].values())


@pytest.mark.parametrize(
    "argv, match",
    [
        (["info", "nothere.toml"], "no such model file: nothere.toml"),
        (["info", "Foo-v9"], "Foo-v9 is neither a model file nor a Gymnasium id"),
        (["info", "FrozenLake-v1", "--env-arg", "slippery"], "--env-arg must be key=value"),
    ],
)
def test_cli_info_errors(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err
