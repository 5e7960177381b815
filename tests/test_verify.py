"""op.verify: a user's function against a problem's CVXPY formulation, shrunk counterexamples,
declared problems, optplan.testing, the verify-fn command, and bad input."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, find, settings

import optplan as op
from optplan._checks import MissingDependency, OptplanError, OptplanTypeError
from optplan.cli import main
from optplan.verification import (
    PROBLEMS,
    Box,
    DeclaredProblem,
    Nonnegative,
    Simplex,
    check_instance,
    optplan_fast,
    parse_answer,
)
from optplan.verification import strategies as S

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"


def mean_only(p, v, d):
    """Wrong: the KL-ball index without its bonus."""
    return float(np.dot(p, v))


def kl_exact(p, v, d):
    return op.kl_ball_index(p, v, d).value


# -- optplan's own problems -----------------------------------------------------------------


def test_wrong_function_is_found_and_shrunk_to_a_literal_that_fails_again():
    rep = op.verify(mean_only, "kl_ball", n=30, seed=0)
    assert not rep.ok and rep.disagreed > 0 and rep.kinds["value"] == rep.disagreed
    assert rep.tried == 30 and rep.compared == rep.agreed + rep.disagreed + rep.raised
    (ce,) = rep.counterexamples
    assert ce.kind == "value" and ce.shrunk and ce.outcome.compared
    # shrunk: a small instance (the unshrunk first failure is at least as large)
    assert ce.inputs["p"].size <= 3
    # the literal rebuilds the instance exactly, and it fails again
    namespace = {"np": np}
    exec(ce.literal, namespace)
    again = check_instance(mean_only, "kl_ball", {k: namespace[k] for k in ("p", "v", "radius")})
    assert not again.agree and again.failed == ("value",)
    assert ce.check(kl_exact).agree  # the right answer passes on it
    text = str(rep)
    assert "DISAGREE" in text and "counterexample [value]" in text
    assert all(f"  {line}\n" in text for line in ce.literal.splitlines())


def test_optplan_fast_path_agrees_and_instances_are_valid():
    rep = op.verify(optplan_fast("kl_ball"), "kl_ball", n=25, seed=1)
    assert rep.ok and rep.compared > 0 and rep.invalid == 0 and not rep.counterexamples
    assert {"value", "x", "multiplier"} <= set(rep.worst)
    assert all(w.ratio <= 1 for w in rep.worst.values())
    assert json.loads(json.dumps(rep.to_dict()))["ok"] is True


def test_progress_bar_counts_every_instance(capsys):
    quiet = op.verify(optplan_fast("l1_ball"), "l1_ball", n=12, seed=4)
    assert capsys.readouterr().err == ""  # no bar unless asked
    rep = op.verify(optplan_fast("l1_ball"), "l1_ball", n=12, seed=4, progress=True)
    err = capsys.readouterr().err
    assert "verify l1_ball" in err and f"{rep.tried}/12" in err
    assert rep.tried == quiet.tried and rep.compared == quiet.compared


@pytest.mark.parametrize(
    "name, options",
    [(name, None) for name in PROBLEMS if name != "optimistic"]
    + [("optimistic", {"ball": "kl", "criterion": "average"})],
)
def test_every_problem_draws_valid_instances_and_its_fast_path_agrees(name, options):
    rep = op.verify(optplan_fast(name, **(options or {})), name, n=6, seed=2, options=options)
    assert rep.invalid == 0 and rep.tried == 6
    assert rep.compared > 0 and rep.ok, rep.summary()


def test_same_seed_same_instances_other_seed_other_instances():
    a = op.verify(mean_only, "l1_ball", n=15, seed=3, shrink=1)
    b = op.verify(mean_only, "l1_ball", n=15, seed=3, shrink=1)
    c = op.verify(mean_only, "l1_ball", n=15, seed=4, shrink=0)
    assert a.statuses == b.statuses and a.kinds == b.kinds
    assert [x.literal for x in a.counterexamples] == [x.literal for x in b.counterexamples]
    assert a.failures != c.failures


def test_optimizer_and_multiplier_are_compared_when_returned():
    def wrong_x(p, v, d):
        res = op.kl_ball_index(p, v, d)
        return res.value, np.roll(res.x, 1)

    def wrong_multiplier(p, v, d):
        res = op.kl_ball_index(p, v, d)
        return res.value, res.x, 2.0 * res.multiplier + 1.0

    rx = op.verify(wrong_x, "kl_ball", n=20, seed=0, shrink=0)
    assert not rx.ok and "x" in rx.worst and rx.worst["x"].ratio > 1
    rm = op.verify(wrong_multiplier, "kl_ball", n=20, seed=0, shrink=0)
    assert not rm.ok and rm.worst["multiplier"].ratio > 1 and rm.worst["value"].ratio <= 1


def test_occupancy_multiplier_of_the_planning_problems_is_checked():
    def halved(P, R, discount):
        res = op.DiscountedPlanning(op.TabularMDP(P, R, discount)).solve()
        return res.value, res.values, 0.5 * res.occupancy

    rep = op.verify(halved, "discounted", n=10, seed=0, shrink=0)
    assert not rep.ok and rep.worst["multiplier_feasibility"].ratio > 1
    assert "no action masks drawn" in rep.notes[0]


def test_masks_are_drawn_when_fn_takes_action_mask():
    seen = []

    def fn(P, R, discount, action_mask=None):
        seen.append(action_mask is not None)
        mdp = op.TabularMDP(P, R, discount, action_mask=action_mask)
        return op.DiscountedPlanning(mdp).solve()

    rep = op.verify(fn, "discounted", n=20, seed=0)
    assert rep.ok and any(seen) and not any("no action masks" in n for n in rep.notes)


def test_hitting_times_infinite_entries_must_coincide():
    fast = optplan_fast("hitting_time")

    def capped(P, action_mask=None):  # 1e300 where the hitting time is infinite
        res = fast(P, action_mask=action_mask)
        return min(res.value, 1e300), np.minimum(res.values, 1e300)

    rep = op.verify(capped, "hitting_time", n=30, seed=0, shrink=0)
    assert not rep.ok and rep.worst["x"].abs_err == np.inf
    assert any("x" in f["kinds"] for f in rep.failures)


def test_warnings_of_fn_are_counted_not_failures():
    def noisy(p, v, d):
        import warnings

        warnings.warn("careful", RuntimeWarning, stacklevel=1)
        return op.l1_ball_index(p, v, d).value

    rep = op.verify(noisy, "l1_ball", n=8, seed=0)
    assert rep.ok and rep.fn_warnings["RuntimeWarning: careful"] == 8
    assert "fn warned on 8 instance(s): RuntimeWarning: careful" in str(rep)


# -- the return convention and malformed answers --------------------------------------------


def test_return_conventions():
    x, m = np.array([0.25, 0.75]), 0.5
    Result = namedtuple("Result", "value x multiplier")
    expected = {"x": (2,), "multiplier": ()}
    for out in (
        (1.5, x, m),
        [1.5, x, m],
        {"value": 1.5, "x": x, "multiplier": m},
        Result(1.5, x, m),
        op.PlanResult(1.5, x, m, status="optimal"),
    ):
        ans, kind, reason = parse_answer(out, expected)
        assert (ans.value, kind, reason) == (1.5, "", "")
        assert np.array_equal(ans.x, x) and ans.multiplier == m
    ans, _, _ = parse_answer(np.float64(2.0), expected)
    assert ans.value == 2.0 and ans.x is None and ans.multiplier is None
    ans, _, _ = parse_answer((2.0, x), {"multiplier": ()})  # x not compared: not read
    assert ans.x is None


@pytest.mark.parametrize(
    "out, kind, reason",
    [
        (np.nan, "bad output", "value is NaN"),
        ("1.0", "bad output", "value must be a real number"),
        (np.array([1.0, 2.0]), "bad output", r"return \(value, x\)"),
        ((1.0, np.zeros(3)), "bad output", r"x has shape \(3,\), expected \(2,\)"),
        ((1.0, np.array([0.5, np.nan])), "bad output", r"x is NaN at index \(1,\)"),
        ((1.0, None, np.array([1.0, 2.0])), "bad output", "multiplier has shape"),
        ((1.0, 2.0, 3.0, 4.0), "bad output", "4 items"),
        ({"x": 1.0}, "bad output", "without a 'value' key"),
        (op.PlanResult(1.0, status="max_iter"), "status", "max_iter"),
    ],
)
def test_malformed_answers_are_reported_with_a_reason(out, kind, reason):
    import re

    ans, got_kind, got_reason = parse_answer(out, {"x": (2,), "multiplier": ()})
    assert ans is None and got_kind == kind and re.search(reason, got_reason)


def test_nan_and_wrong_shape_are_disagreements_with_the_reason():
    rep = op.verify(lambda p, v, d: (np.nan, p), "kl_ball", n=10, seed=0, shrink=1)
    assert rep.disagreed == rep.compared > 0 and rep.kinds["bad output"] == rep.disagreed
    assert rep.counterexamples[0].outcome.reason == "value is NaN"
    rep = op.verify(lambda p, v, d: (p @ v, p[:-1]), "l1_ball", n=10, seed=0, shrink=1)
    assert "x has shape" in rep.counterexamples[0].outcome.reason


def test_exceptions_are_reported_per_instance_and_never_abort():
    def fragile(p, v, d):
        if p.size > 1:
            raise ZeroDivisionError("my bug")
        return float(v[0])

    rep = op.verify(fragile, "l1_ball", n=20, seed=0)
    assert rep.tried == 20 and rep.raised > 0 and rep.agreed > 0 and not rep.ok
    assert rep.n_exceptions >= rep.raised
    assert all(e["exception"].startswith("ZeroDivisionError: my bug") for e in rep.exceptions)
    ce = rep.counterexamples[0]
    assert ce.kind == "raises ZeroDivisionError" and ce.inputs["p"].size == 2  # shrunk to 2
    assert "fn raised   ZeroDivisionError: my bug" in str(ce)


# -- bad input -------------------------------------------------------------------------------


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(OptplanError, match=r"unknown problem 'kl_bal'; did you mean 'kl_ball'"):
        op.verify(kl_exact, "kl_bal")
    with pytest.raises(OptplanTypeError, match="problem must be the name"):
        op.verify(kl_exact, 3)
    with pytest.raises(OptplanError, match="n must be a positive integer, got 0"):
        op.verify(kl_exact, "kl_ball", n=0)
    with pytest.raises(OptplanTypeError, match="n must be an integer"):
        op.verify(kl_exact, "kl_ball", n=5.0)
    with pytest.raises(OptplanTypeError, match="fn must be callable"):
        op.verify("kl_exact", "kl_ball")
    with pytest.raises(OptplanError, match="has no option 'ball'"):
        op.verify(kl_exact, "kl_ball", options={"ball": "kl"})
    with pytest.raises(OptplanError, match=r"options\['ball'\] must be one of"):
        op.verify(kl_exact, "optimistic", options={"ball": "l2"})
    with pytest.raises(OptplanError, match="solver must be one of"):
        op.verify(kl_exact, "kl_ball", solver="MOSEK")
    with pytest.raises(OptplanError, match="rtol must be a finite number >= 0"):
        op.verify(kl_exact, "kl_ball", rtol=-1.0)


def test_empty_or_inconsistent_domains_are_refused():
    with pytest.raises(OptplanError, match="domain is empty: low = 2.0 > high = 1.0"):
        Box((), 2.0, 1.0)
    with pytest.raises(OptplanError, match="domain is empty: shape \\(0,\\)"):
        Box((0,))
    with pytest.raises(OptplanError, match="needs a last axis"):
        Simplex(())
    with pytest.raises(OptplanError, match="must be finite"):
        Nonnegative((), high=np.inf)
    formulation = entropic_max
    with pytest.raises(OptplanError, match=r"domain is empty: dims\['S'\] = \(3, 2\)"):
        DeclaredProblem(formulation, {"v": Box(("S",)), "tau": Box((), 1, 2)}, dims={"S": (3, 2)})
    with pytest.raises(OptplanError, match="dimension 'S' is used in a shape but has no range"):
        DeclaredProblem(formulation, {"v": Box(("S",)), "tau": Box((), 1, 2)})
    with pytest.raises(OptplanTypeError, match="domains must be a non-empty dict"):
        DeclaredProblem(formulation, {})
    v = cp.Parameter(3, name="v")
    q = cp.Variable(3, name="q", nonneg=True)
    prob = cp.Problem(cp.Maximize(q @ v), [cp.sum(q) == 1])
    with pytest.raises(OptplanError, match=r"no domain for \['v'\]; no parameter named \['w'\]"):
        DeclaredProblem(prob, {"w": Box((3,))})
    with pytest.raises(OptplanError, match=r"has shape \(4,\), but parameter 'v' has shape"):
        DeclaredProblem(prob, {"v": Box((4,))})
    with pytest.raises(OptplanError, match="x='r' names no variable"):
        DeclaredProblem(prob, {"v": Box((3,))}, x="r")


def test_missing_hypothesis_is_a_clear_import_error(monkeypatch):
    from optplan.verification import engine

    monkeypatch.setitem(sys.modules, "hypothesis", None)
    with pytest.raises(MissingDependency, match=r"pip install 'optplan\[verify\]'"):
        engine.require_hypothesis()
    with pytest.raises(ImportError, match="optplan.verify needs hypothesis"):
        op.verify(kl_exact, "kl_ball", n=1)


def test_import_optplan_and_the_cli_do_not_import_hypothesis():
    code = (
        "import sys, optplan, optplan.cli; optplan.cli.build_parser(); "
        "print('hypothesis' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- declared problems -----------------------------------------------------------------------


def entropic_max(v, tau):
    q = cp.Variable(v.size, name="q", nonneg=True)
    return cp.Problem(cp.Maximize(q @ v + tau * cp.sum(cp.entr(q))), [cp.sum(q) == 1])


ENTROPIC = DeclaredProblem(
    entropic_max,
    {"v": Box(("S",), -100.0, 100.0), "tau": Box((), 0.01, 100.0)},
    dims={"S": (1, 5)},
    x="q",
)


def soft_max(v, tau):
    z = v / tau
    e = np.exp(z - z.max())
    return tau * (z.max() + np.log(e.sum())), e / e.sum()


def test_declared_problem_passes_a_right_closed_form_and_fails_a_wrong_one():
    good = op.verify(soft_max, ENTROPIC, n=25, seed=0)
    assert good.ok and good.compared > 15 and set(good.worst) == {"value", "x"}
    bad = op.verify(lambda v, tau: soft_max(v, 2 * tau), ENTROPIC, n=25, seed=0)
    assert not bad.ok
    ce = bad.counterexamples[0]
    assert ce.shrunk and ce.inputs["v"].size <= 2 and "op.verify(fn, problem" in str(ce)
    assert not ce.check(lambda v, tau: soft_max(v, 2 * tau)).agree


def test_declared_problem_from_a_cvxpy_problem_with_parameters():
    p = cp.Parameter(4, name="p", nonneg=True)
    v = cp.Parameter(4, name="v")
    q = cp.Variable(4, name="q", nonneg=True)
    # the L1 ball of radius 0.5 as a declared problem (x compared at the tolerance: an LP)
    prob = cp.Problem(cp.Maximize(v @ q), [cp.sum(q) == 1, cp.norm1(q - p) <= 0.5])
    declared = DeclaredProblem(
        prob, {"p": Simplex(), "v": Box((4,), -1.0, 1.0)}, multiplier=1, sqrt_tol=(), name="l1"
    )
    right = op.verify(lambda p, v: op.l1_ball_index(p, v, 0.5).value, declared, n=20, seed=0)
    assert right.ok and right.compared > 10
    wrong = op.verify(lambda p, v: op.l1_ball_index(p, v, 0.4).value, declared, n=20, seed=0)
    assert not wrong.ok and wrong.counterexamples[0].kind == "value"


# -- strategies ------------------------------------------------------------------------------


def _found(strategy, condition):
    return find(
        strategy,
        condition,
        settings=settings(
            database=None, max_examples=2000, suppress_health_check=list(HealthCheck)
        ),
    )


def test_strategies_reach_the_hard_regions():
    p = _found(S.distributions(), lambda p: ((p > 0) & (p <= 1e-299)).any())
    assert p.sum() == pytest.approx(1.0)
    assert _found(S.radii(), lambda r: r == 0.0) == 0.0
    assert _found(S.radii(), lambda r: r >= 1e299) >= 1e299
    inst = _found(S.index_instances(), lambda d: np.abs(d["v"]).max() >= 1e5)
    assert np.abs(inst["v"]).max() <= 1e6
    assert _found(S.index_instances(), lambda d: d["p"].size == 1)["p"].tolist() == [1.0]
    assert _found(S.index_instances(), lambda d: d["p"].size >= 200)["p"].size >= 200
    ties = _found(S.index_instances(), lambda d: d["v"].size > 2 and np.unique(d["v"]).size == 1)
    assert ties["v"].size > 2
    m = _found(S.mdps(masks=True), lambda d: "action_mask" in d and not d["action_mask"].all())
    assert m["action_mask"].any(axis=1).all()  # every state keeps an action
    post = _found(S.k_learning_posteriors(), lambda d: (d["counts"] == 0).any())
    assert post["mean_rewards"].shape[2] >= 2


# -- optplan.testing -------------------------------------------------------------------------


def test_assert_agrees_passes_and_fails_with_the_counterexample_in_the_message():
    from optplan.testing import assert_agrees, distributions, mdps  # noqa: F401

    assert assert_agrees(kl_exact, "kl_ball", n=15).ok
    with pytest.raises(AssertionError, match=r"(?s)counterexample \[value\].*p = np\.array"):
        assert_agrees(mean_only, "kl_ball", n=15)


# -- the command -----------------------------------------------------------------------------


USER_MODULE = """
import numpy as np
import optplan as op

def mean_only(p, v, d):
    return float(np.dot(p, v))

def exact(p, v, d):
    return op.kl_ball_index(p, v, d).value

not_callable = 3
"""


def test_cli_verify_fn(tmp_path, capsys, monkeypatch):
    user = tmp_path / "user_kl.py"
    user.write_text(USER_MODULE)
    assert main(["verify-fn", f"{user}:exact", "--problem", "kl_ball", "--n", "10"]) == 0
    assert "AGREE" in capsys.readouterr().out
    assert main(["verify-fn", f"{user}:mean_only", "--problem", "kl_ball", "--n", "10"]) == 1
    out = capsys.readouterr().out
    assert "DISAGREE" in out and "counterexample [value]" in out
    monkeypatch.chdir(tmp_path)  # MODULE as a module name, found in the current directory
    code = main(["verify-fn", "user_kl:mean_only", "--problem", "l1_ball", "--n", "8", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False and report["counterexamples"][0]["literal"]
    for argv, message in (
        (["verify-fn", "user_kl:exact", "--problem", "kl_bal"], "unknown problem 'kl_bal'"),
        (["verify-fn", "user_kl", "--problem", "kl_ball"], "expected MODULE:FUNCTION"),
        (["verify-fn", "no_such_mod:f", "--problem", "kl_ball"], "cannot import module"),
        (["verify-fn", "user_kl:nothing", "--problem", "kl_ball"], "has no function 'nothing'"),
        (["verify-fn", "user_kl:not_callable", "--problem", "kl_ball"], "is not callable"),
        (["verify-fn", "user_kl:exact", "--problem", "user_kl:exact"], "not an optplan.Declared"),
        (["verify-fn", "user_kl:exact", "--problem", "kl_ball", "--option", "x"], "KEY=VALUE"),
    ):
        assert main(argv) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: n < 1
        main(["verify-fn", "user_kl:exact", "--problem", "kl_ball", "--n", "0"])


def test_cli_verify_fn_declared_problem():
    code = main(
        [
            "verify-fn",
            f"{EXAMPLES / 'verify_entropic_max.py'}:soft_max_naive",
            "--problem",
            f"{EXAMPLES / 'verify_entropic_max.py'}:PROBLEM",
            "--n",
            "100",
            "--shrink",
            "0",
        ]
    )
    assert code == 1


# -- the examples ----------------------------------------------------------------------------


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_kl_ucb_example_loose_newton_fails_and_tight_newton_passes():
    ex = _load("verify_kl_ucb")
    loose = op.verify(ex.kl_ucb_loose, "kl_ball", n=40, seed=0)
    assert not loose.ok and loose.counterexamples[0].kind == "value"
    assert op.verify(ex.kl_ucb, "kl_ball", n=40, seed=0).ok


@pytest.mark.slow
def test_entropic_max_example_runs():
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "verify_entropic_max.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the shifted closed form passes and the naive one fails: True" in out.stdout


@pytest.mark.slow
def test_kl_ucb_example_runs():
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "verify_kl_ucb.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "counterexample [value]" in out.stdout
    assert "the loose Newton fails and the tight one passes: True" in out.stdout
    assert "fast paths agree on every optimal instance" in out.stdout


# -- edge cases of optplan's own fast paths -----------------------------------------------------


def test_kl_ball_multiplier_at_radius_zero_is_a_range():
    """At p = [1], v = [0], d = 0 the fast path's multiplier 0 and Clarabel's 1.21 are both
    right: at d = 0 every lam >= max v - max_{p>0} v is a KKT multiplier."""
    assert op.cross_check(op.KLBallIndex([1.0], [0.0], 0.0)).agree
    prob = op.KLBallIndex([0.5, 0.5, 0.0], [1.0, 1.0, 2.0], 0.0)  # the bound is 2 - 1 = 1
    chk = op.cross_check(prob)
    assert chk.agree and chk.fast.multiplier == 1.0 and "multiplier" not in chk.abs_err
    below = chk.fast.replace(multiplier=0.5)  # below the range: flagged
    assert prob.compare(below, chk.conic)["multiplier_range"] == (0.5, 1.0)
    assert prob.compare(chk.fast.replace(multiplier=7.0), chk.conic)["multiplier_range"][0] == 0


def test_instances_depend_on_the_seed_only_not_on_constants_in_local_modules(tmp_path):
    """hypothesis mixes constants read from local source files into its draws; op.verify
    turns that off, so a seed reproduces its instances whatever the project's files say."""
    import hashlib

    from optplan.verification.engine import _key, _run_hypothesis

    def digest():
        h = hashlib.sha256()
        _run_hypothesis(
            S.index_instances(50), lambda d: h.update(repr(_key(d)).encode()), 300, 7, False
        )
        return h.hexdigest()

    before = digest()
    floats = ", ".join(repr(float(x)) for x in np.linspace(0.001, 0.999, 400))
    (tmp_path / "local_constants_mod.py").write_text(f"VALUES = [{floats}, 12345, -7, 2e-300]\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import local_constants_mod  # noqa: F401  (a local module full of constants)
    finally:
        sys.path.remove(str(tmp_path))
    assert digest() == before


def test_a_failing_reference_is_reported_not_fatal_and_non_dcp_is_refused():
    def fragile(v, tau):
        if v.size == 2:
            raise RuntimeError("the reference broke")
        return entropic_max(v, tau)

    declared = DeclaredProblem(
        fragile, {"v": Box(("S",), -1.0, 1.0), "tau": Box((), 0.5, 2.0)}, dims={"S": (1, 3)}
    )
    rep = op.verify(soft_max, declared, n=20, seed=0)
    assert rep.tried == 20 and rep.n_conic_exceptions > 0 and rep.compared > 0 and rep.ok
    assert rep.statuses["solver_error"] == rep.n_conic_exceptions
    assert "RuntimeError: the reference broke" in rep.conic_exceptions[0]["exception"]
    assert "the conic path raised on" in str(rep)

    def concave_min(v, tau):
        q = cp.Variable(v.size, nonneg=True)
        return cp.Problem(cp.Minimize(cp.sum(cp.entr(q))), [cp.sum(q) == 1])

    not_dcp = DeclaredProblem(concave_min, {"v": Box((2,)), "tau": Box((), 1.0, 2.0)})
    with pytest.raises(OptplanError, match="does not follow CVXPY's DCP rules"):
        op.verify(soft_max, not_dcp, n=3)
