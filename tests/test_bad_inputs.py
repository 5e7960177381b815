"""Bad input is refused where it enters, before any work, with an
error that names the argument and the offending value: the Python API raises an
``OptplanError`` (a ``ValueError``; ``OptplanTypeError`` is also a ``TypeError``), the command
line exits with status 2 and a message naming the flag, never a traceback.

Each case is one row of a table; all are fast (no solve runs) and seeded.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import numpy as np
import pytest

import optplan as op
from optplan import cli
from optplan._checks import OptplanError, OptplanTypeError
from optplan.agents.index_agents import MDPUCB
from optplan.agents.k_learning import KLearning
from optplan.bench import Runs
from optplan.bench.index_agents import bench_index_agents
from optplan.bench.indices import bench_indices, plot_indices
from optplan.bench.k_temperature import bench_k_temperature
from optplan.bench.planning import bench_planning
from optplan.envs import DeepSea
from optplan.generators import random_dirichlet, riverswim

MODELS = Path(__file__).parents[1] / "models"
COWAN = str(MODELS / "cowan3.toml")

RNG = np.random.default_rng(2021)
P2 = np.full((2, 2, 2), 0.5)
R2 = RNG.random((2, 2))
PV = ([0.5, 0.5], [0.0, 1.0])
#: A K-learning posterior: L = 2 layers, S = 2 states, A = 2 actions.
KL_R = RNG.normal(size=(2, 2, 2))
KL_P = np.full((2, 2, 2, 2), 0.5)
KL_N = RNG.integers(0, 5, size=(2, 2, 2)).astype(float)


def discounted():
    return op.DiscountedPlanning(riverswim(4, discount=0.9))


def average():
    return op.AverageRewardPlanning(riverswim(4))


def k_problem():
    return op.KLearningTemperature(KL_R, KL_P, KL_N, 1.0)


def cx(a):
    """``a`` as a complex array with a zero imaginary part (a cast to float drops it)."""
    return np.asarray(a, dtype=float) + 0j


#: ``(id, call, exception, regex the message must match)``. The regex names the argument.
PYTHON_CASES = [
    # complex arrays: refused, not truncated to their real part
    ("mdp-P-complex", lambda: op.TabularMDP(cx(P2), R2), OptplanTypeError, "P must be real"),
    ("mdp-R-complex", lambda: op.TabularMDP(P2, cx(R2)), OptplanTypeError, "R must be real"),
    (
        "fh-P-complex",
        lambda: op.FiniteHorizonMDP(cx(P2[None]), R2[None]),
        OptplanTypeError,
        "P must be real",
    ),
    (
        "fh-R-complex",
        lambda: op.FiniteHorizonMDP(P2[None], cx(R2[None])),
        OptplanTypeError,
        "R must be real",
    ),
    ("klball-p-complex", lambda: op.KLBallIndex(cx(PV[0]), PV[1], 0.1), TypeError, "p must be"),
    ("klball-v-complex", lambda: op.KLBallIndex(PV[0], cx(PV[1]), 0.1), TypeError, "v must be"),
    (
        "klball-radius-complex",
        lambda: op.KLBallIndex(*PV, complex(0.1, 0)),
        TypeError,
        "radius must be real",
    ),
    ("klinf-target-complex", lambda: op.KLInfRate(*PV, 0.7 + 0j), TypeError, "target must be"),
    ("l1-radius-complex", lambda: op.L1BallIndex(*PV, 0.2 + 0j), TypeError, "radius must be"),
    (
        "kl_ball_index-p-complex",
        lambda: op.kl_ball_index(cx([PV[0]] * 3), PV[1], 0.1),
        TypeError,
        "p must be real",
    ),
    (
        "kl_inf_rate-target-complex",
        lambda: op.kl_inf_rate(*PV, cx([0.7, 0.8])),
        TypeError,
        "target must be real",
    ),
    (
        "l1_ball_index-v-complex",
        lambda: op.l1_ball_index(PV[0], cx(PV[1]), 0.2),
        TypeError,
        "v must be real",
    ),
    (
        "k-mean_rewards-complex",
        lambda: op.KLearningTemperature(cx(KL_R), KL_P, KL_N, 1.0),
        TypeError,
        "mean_rewards must be real",
    ),
    (
        "k-mean_transitions-complex",
        lambda: op.KLearningTemperature(KL_R, cx(KL_P), KL_N, 1.0),
        TypeError,
        "mean_transitions must be real",
    ),
    (
        "k_values-counts-complex",
        lambda: op.k_values(1.0, KL_R, KL_P, cx(KL_N), 1.0),
        TypeError,
        "counts must be real",
    ),
    (
        "boltzmann-K-complex",
        lambda: op.boltzmann_policy(cx(KL_R), 1.0),
        TypeError,
        "K must be real",
    ),
    (
        "mdp-ucb-rewards-complex",
        lambda: MDPUCB(cx(R2)),
        TypeError,
        "rewards must be real",
    ),
    (
        "mdp-ucb-initial_counts-complex",
        lambda: MDPUCB(R2, initial_counts=cx(np.ones((2, 2, 2)))),
        TypeError,
        "initial_counts must be real",
    ),
    (
        "k-learning-initial-complex",
        lambda: KLearning(2, 2, n_layers=2, initial=cx([0.5, 0.5])),
        TypeError,
        "initial must be real",
    ),
    # a model's name: a string (or None), so that save_model / load_model round-trip
    ("mdp-name-int", lambda: op.TabularMDP(P2, R2, name=5), OptplanTypeError, "name must be a"),
    (
        "fh-name-int",
        lambda: op.FiniteHorizonMDP(P2[None], R2[None], name=5),
        OptplanTypeError,
        "name must be a string.*got 5",
    ),
    # cross_check tolerances: finite and non-negative
    (
        "cross_check-rtol-negative",
        lambda: op.cross_check(discounted(), rtol=-1),
        OptplanError,
        "rtol must be a finite number >= 0, got -1",
    ),
    (
        "cross_check-atol-negative",
        lambda: op.cross_check(discounted(), atol=-1e-9),
        OptplanError,
        "atol must be a finite number >= 0",
    ),
    (
        "cross_check-rtol-nan",
        lambda: op.cross_check(discounted(), rtol=math.nan),
        OptplanError,
        "rtol must be a finite number >= 0, got nan",
    ),
    (
        "cross_check-atol-inf",
        lambda: op.cross_check(discounted(), atol=math.inf),
        OptplanError,
        "atol .* got inf",
    ),
    (
        "cross_check-rtol-str",
        lambda: op.cross_check(discounted(), rtol="abc"),
        OptplanTypeError,
        "rtol must be a finite number >= 0, got 'abc'",
    ),
    # K-learning's public helpers: finite K
    (
        "boltzmann-K-nan",
        lambda: op.boltzmann_policy([[0.0, 1.0], [math.nan, 0.0]], 1.0),
        OptplanError,
        r"K has a non-finite entry nan at index \(1, 0\)",
    ),
    (
        "boltzmann-K-inf",
        lambda: op.boltzmann_policy([0.0, math.inf], 1.0),
        OptplanError,
        "K has a non-finite entry inf at index 1",
    ),
    (
        "soft_values-K-nan",
        lambda: op.soft_values([math.nan, 0.0], 0.5),
        OptplanError,
        "K has a non-finite entry nan at index 0",
    ),
    (
        "soft_values-K--inf",
        lambda: op.soft_values([[0.0, -math.inf]], 0.5),
        OptplanError,
        r"K has a non-finite entry -inf at index \(0, 1\)",
    ),
    ("soft_values-K-scalar", lambda: op.soft_values(1.0, 0.5), OptplanError, "K must have"),
    # the bench functions (public API too)
    (
        "bench_planning-repeats-0",
        lambda: bench_planning(Runs(sizes=[10], repeats=0)),
        OptplanError,
        "repeats",
    ),
    (
        "bench_planning-sizes-0",
        lambda: bench_planning(Runs(sizes=[0])),
        OptplanError,
        r"sizes\[0\]",
    ),
    (
        "bench_planning-sizes--5",
        lambda: bench_planning(Runs(sizes=[3, -5])),
        OptplanError,
        r"sizes\[1\] must be a positive integer, got -5",
    ),
    (
        "bench_planning-criteria",
        lambda: bench_planning(criteria=["bogus"]),
        OptplanError,
        "criteria .* 'bogus'",
    ),
    (
        "bench_indices-zeros-1.5",
        lambda: bench_indices(zeros=1.5),
        OptplanError,
        r"zeros must lie in \[0, 1\), got 1.5",
    ),
    (
        "bench_indices-instances-0",
        lambda: bench_indices(instances=0),
        OptplanError,
        "instances must be a positive integer, got 0",
    ),
    (
        "bench_indices-batch--1",
        lambda: bench_indices(batch=-1),
        OptplanError,
        "batch must be a non-negative integer, got -1",
    ),
    (
        "bench_indices-sizes-1-kl_inf",
        lambda: bench_indices(sizes=[1], problems=["kl_inf"]),
        OptplanError,
        r"sizes\[0\] must be >= 2",
    ),
    (
        "bench_indices-solver",
        lambda: bench_indices(solvers=["MOSEK"]),
        OptplanError,
        "solver must be one of",
    ),
    (
        "bench_k-instances-0",
        lambda: bench_k_temperature(instances=0),
        OptplanError,
        "instances must be a positive integer",
    ),
    (
        "bench_k-max_conic_seconds",
        lambda: bench_k_temperature(max_conic_seconds=-1),
        OptplanError,
        "max_conic_seconds",
    ),
    (
        "bench_index_agents-fast_steps-0",
        lambda: bench_index_agents(fast_steps=0),
        OptplanError,
        "fast_steps must be a positive integer, got 0",
    ),
    (
        "bench_index_agents-conic_steps-0",
        lambda: bench_index_agents(conic_steps=0),
        OptplanError,
        "conic_steps must be a positive integer, got 0",
    ),
    # solver_options: keys checked per solver, before anything is formulated
    (
        "solver_options-bogus-clarabel",
        lambda: discounted().solve("conic", solver_options={"bogus": 1}),
        OptplanError,
        "solver_options: 'bogus' is not a setting of CLARABEL",
    ),
    (
        "solver_options-bogus-ecos",
        lambda: discounted().solve("conic", solver="ECOS", solver_options={"bogus": 1}),
        OptplanError,
        "solver_options: 'bogus' is not a setting of ECOS",
    ),
    (
        "solver_options-near-miss-scs",
        lambda: discounted().solve("conic", solver="SCS", solver_options={"max_iter": 5}),
        OptplanError,
        "'max_iter' is not a setting of SCS; did you mean 'max_iters'",
    ),
    (
        "solver_options-ecos-clarabel-name",
        lambda: average().solve("conic", solver="ECOS", solver_options={"tol_feas": 1e-8}),
        OptplanError,
        "'tol_feas' is not a setting of ECOS",
    ),
    (
        "solver_options-clarabel-bad-value",
        lambda: k_problem().solve("conic", solver_options={"max_iter": "ten"}),
        OptplanTypeError,
        "max_iter='ten' is not a valid value of the CLARABEL setting",
    ),
    (
        "solver_options-not-a-dict",
        lambda: discounted().solve("conic", solver_options=[("max_iter", 5)]),
        OptplanTypeError,
        "solver_options must be a dict",
    ),
    (
        "conic-unknown-option",
        lambda: discounted().solve("conic", max_iter=5),
        OptplanTypeError,
        r"has no option 'max_iter' \(its options: solver_options\)",
    ),
    # fast-path options
    (
        "discounted-max_iter-str",
        lambda: discounted().solve(max_iter="ten"),
        OptplanTypeError,
        "max_iter must be an integer, got 'ten'",
    ),
    (
        "discounted-tol-str",
        lambda: discounted().solve(tol="abc"),
        OptplanTypeError,
        r"tol must be a positive number \(finite\), got 'abc'",
    ),
    (
        "discounted-tol-negative",
        lambda: discounted().solve(algorithm="value_iteration", tol=-1),
        OptplanError,
        r"tol must be a positive number \(finite\), got -1",
    ),
    (
        "average-tol-nan",
        lambda: average().solve(tol=math.nan),
        OptplanError,
        r"tol must be a positive number \(finite\), got nan",
    ),
    (
        "average-tol-inf",
        lambda: average().solve(tol=math.inf),
        OptplanError,
        r"tol must be a positive number \(finite\), got inf",
    ),
    (
        "average-max_iter-0",
        lambda: average().solve(max_iter=0),
        OptplanError,
        "max_iter must be a positive integer, got 0",
    ),
    (
        "solve_average_reward-max_iter-str",
        lambda: op.solve_average_reward(riverswim(4), max_iter="ten"),
        OptplanTypeError,
        "max_iter must be an integer",
    ),
    (
        "fast-unknown-option",
        lambda: discounted().solve(bogus=1),
        OptplanTypeError,
        r"DiscountedPlanning.solve\(method='fast'\) has no option 'bogus'",
    ),
    (
        "klball-fast-bad-kernel",
        lambda: op.KLBallIndex(*PV, 0.1).solve(kernel="gpu"),
        OptplanError,
        r"kernel must be one of \('auto', 'numpy', 'numba'\), got 'gpu'",
    ),
    (
        "klball-fast-kernel-only",
        lambda: op.KLBallIndex(*PV, 0.1).solve(max_iter=3),
        OptplanTypeError,
        r"has no option 'max_iter' \(its options: kernel\)",
    ),
    (
        "k-temperature-xtol-str",
        lambda: k_problem().solve(xtol="abc"),
        OptplanTypeError,
        r"xtol must be a positive number \(finite\), got 'abc'",
    ),
    (
        "k-temperature-xtol-nan",
        lambda: k_problem().solve(xtol=math.nan),
        OptplanError,
        r"xtol must be a positive number \(finite\), got nan",
    ),
    (
        "k-temperature-max_iter-str",
        lambda: k_problem().solve(max_iter="ten"),
        OptplanTypeError,
        "max_iter must be an integer, got 'ten'",
    ),
    (
        "kl_ball_index-max_iter-str",
        lambda: op.kl_ball_index(*PV, 0.1, max_iter="ten"),
        OptplanTypeError,
        "max_iter must be an integer, got 'ten'",
    ),
    (
        "kl_inf_rate-max_iter-0",
        lambda: op.kl_inf_rate(*PV, 0.7, max_iter=0),
        OptplanError,
        "max_iter must be a positive integer, got 0",
    ),
    # model sizes: refused up front, naming the sizes and the bytes
    (
        "random_dirichlet-1e9-states",
        lambda: random_dirichlet(n_states=10**9),
        OptplanError,
        r"model too large: n_states=1000000000, n_actions=3 .* 24,000,000,000,000,000,000 bytes",
    ),
    (
        "riverswim-1e5-states",
        lambda: riverswim(n_states=100_000),
        OptplanError,
        r"n_states=100000, n_actions=2 .*160,000,000,000 bytes",
    ),
    (
        "from_stationary-horizon",
        lambda: op.FiniteHorizonMDP.from_stationary(riverswim(100), 10**6),
        OptplanError,
        "model too large: horizon=1000000, n_states=100",
    ),
    ("deepsea-size", lambda: DeepSea(1000), OptplanError, "model too large: size=1000"),
]


@pytest.mark.filterwarnings("error")  # no ComplexWarning, no RuntimeWarning on the way
@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [pytest.param(call, exc, match, id=name) for name, call, exc, match in PYTHON_CASES],
)
def test_python_api_refuses(call, exc, match):
    with pytest.raises(exc, match=match) as info:
        call()
    assert isinstance(info.value, OptplanError)


def test_model_name_none_round_trips(tmp_path):
    model = op.TabularMDP(P2, R2, 0.5, name=None)
    assert model.name == ""
    named = op.TabularMDP(P2, R2, 0.5, name="two")
    assert op.load_model(op.save_model(named, tmp_path / "two.toml")) == named


def _fail(*args, **kwargs):
    raise AssertionError("work started before the input was checked")


def test_solver_options_checked_before_formulating(monkeypatch):
    from optplan.conic import discounted as conic_discounted

    monkeypatch.setattr(conic_discounted, "formulate", _fail)
    with pytest.raises(OptplanError, match="'bogus' is not a setting of CLARABEL"):
        discounted().solve("conic", solver_options={"bogus": 1})


def test_cross_check_options_checked_before_either_path(monkeypatch):
    from optplan.conic import discounted as conic_discounted
    from optplan.fast import discounted as fast_discounted

    # same signatures (``check_options`` reads them), but any call fails the test
    for module in (conic_discounted, fast_discounted):
        monkeypatch.setattr(module, "solve", functools.wraps(module.solve)(lambda *a, **k: _fail()))
    with pytest.raises(OptplanError, match="'bogus' is not a setting of ECOS"):
        op.cross_check(discounted(), solver="ECOS", conic_options={"solver_options": {"bogus": 1}})
    with pytest.raises(OptplanError, match="tol must be a positive number"):
        op.cross_check(discounted(), fast_options={"tol": -1})
    with pytest.raises(OptplanError, match="rtol"):
        op.cross_check(discounted(), rtol=-1)


def test_valid_solver_options_still_pass():
    """Every solver's own spelling of its settings, and CVXPY's keywords, are accepted."""
    from optplan.problems.base import check_solver_options

    check_solver_options("CLARABEL", {"max_iter": 50, "tol_feas": 1e-8, "verbose": False})
    check_solver_options("ECOS", {"max_iters": 50, "abstol": 1e-8, "feastol_inacc": 1e-4})
    check_solver_options("SCS", {"max_iters": 50, "eps_abs": 1e-6, "eps": 1e-6})
    check_solver_options("SCS", {"warm_start": False, "acceleration_lookback": 0})


def test_model_file_paths(tmp_path):
    with pytest.raises(OptplanError, match="models: is a directory, not a model file"):
        op.load_model(MODELS)
    blocker = tmp_path / "file"
    blocker.write_text("a regular file\n")
    model = riverswim(3)
    # under a regular file: fails for every user, root included
    with pytest.raises(OptplanError, match=r"cannot write path '.*file/m.toml': '.*file' is not"):
        op.save_model(model, blocker / "m.toml")
    with pytest.raises(OptplanError, match="is a directory, not a file"):
        op.save_model(model, tmp_path)
    with pytest.raises(OptplanError, match="directory '.*missing' does not exist"):
        op.save_model(model, tmp_path / "missing" / "m.toml")
    big = tmp_path / "big.toml"
    big.write_text('generator = "random_dirichlet"\nn_states = 1_000_000_000\n')
    with pytest.raises(OptplanError, match=r"big.toml: generator .*model too large.*bytes"):
        op.load_model(big)


def test_figure_paths(tmp_path):
    pytest.importorskip("matplotlib")
    from optplan.plots.plots import new_figure, save_figure

    blocker = tmp_path / "file"
    blocker.write_text("a regular file\n")
    fig = new_figure()[0]
    with pytest.raises(OptplanError, match=r"cannot write figure file '.*file/sub/f.png'"):
        save_figure(fig, blocker / "sub" / "f.png")
    with pytest.raises(OptplanError, match="cannot write plot file '.*file/f.png'"):
        plot_indices([], blocker / "f.png", [])


def _cli(argv, capsys) -> tuple[int, str]:
    """Exit status and stderr of ``optplan argv`` (argparse's errors exit via SystemExit)."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


#: ``(id, argv, regex matched against stderr's last line)``: every one exits with status 2.
CLI_CASES = [
    ("solve-directory", ["solve", str(MODELS)], "is a directory, not a model file"),
    ("solve-directory-slash", ["solve", str(MODELS) + "/"], "is a directory"),
    ("verify-rtol-negative", ["verify", COWAN, "--rtol", "-1"], "argument --rtol: .*'-1'"),
    ("verify-atol-nan", ["verify", COWAN, "--atol", "nan"], "argument --atol: .*'nan'"),
    ("verify-rtol-str", ["verify", COWAN, "--rtol", "abc"], "argument --rtol: .*'abc'"),
    ("bench-repeats-0", ["bench", "planning", "--repeats", "0"], "argument --repeats: .*'0'"),
    ("bench-sizes-0", ["bench", "planning", "--sizes", "0"], "argument --sizes: .*'0'"),
    ("bench-sizes--5", ["bench", "planning", "--sizes", "-5"], "argument --sizes: .*'-5'"),
    ("bench-actions-0", ["bench", "planning", "--actions", "0"], "argument --actions"),
    ("bench-seed--1", ["bench", "planning", "--seed", "-1"], "argument --seed"),
    ("bench-zeros-1.5", ["bench", "indices", "--zeros", "1.5"], "argument --zeros: .*'1.5'"),
    ("bench-zeros-nan", ["bench", "indices", "--zeros", "nan"], "argument --zeros"),
    ("bench-instances-0", ["bench", "indices", "--instances", "0"], "argument --instances"),
    ("bench-batch--1", ["bench", "indices", "--batch", "-1"], "argument --batch: .*'-1'"),
    (
        "bench-max-conic-seconds",
        ["bench", "indices", "--max-conic-seconds", "-1"],
        "argument --max-conic-seconds",
    ),
    (
        "bench-kl_inf-size-1",
        ["bench", "indices", "--problems", "kl_inf", "--sizes", "1"],
        "--sizes must be >= 2 for problem kl_inf",
    ),
    (
        "bench-k-learning-instances-0",
        ["bench", "k-learning", "--instances", "0"],
        "argument --instances",
    ),
    (
        "bench-k-learning-too-deep",
        ["bench", "k-learning", "--sizes", "5", "1000"],
        "model too large: depth L=1000",
    ),
    (
        "bench-fast-steps-0",
        ["bench", "index-agents", "--fast-steps", "0"],
        "argument --fast-steps: .*'0'",
    ),
    (
        "bench-conic-steps-0",
        ["bench", "index-agents", "--conic-steps", "0"],
        "argument --conic-steps",
    ),
]


@pytest.mark.parametrize(
    ("argv", "match"), [pytest.param(argv, match, id=name) for name, argv, match in CLI_CASES]
)
def test_cli_refuses_with_status_2(argv, match, capsys):
    code, err = _cli(argv, capsys)
    assert code == 2, err
    assert "Traceback" not in err
    assert re.search(match, err.strip().splitlines()[-1]), err


def test_cli_paths(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a regular file\n")
    plot = str(blocker / "x.png")
    code, err = _cli(["bench", "indices", "--sizes", "5", "--plot", plot], capsys)
    assert code == 2 and err == f"optplan: error: cannot write --plot {plot!r}: " + (
        f"{str(blocker)!r} is not a directory\n"
    )
    big = tmp_path / "big.toml"
    big.write_text('generator = "random_dirichlet"\nn_states = 1_000_000_000\nn_actions = 3\n')
    code, err = _cli(["solve", str(big)], capsys)
    assert code == 2 and err.startswith(f"optplan: error: {big}: generator 'random_dirichlet'")
    assert "24,000,000,000,000,000,000 bytes" in err and err.count("\n") == 1


def test_cli_plot_out(tmp_path, capsys, tiny_results):
    pytest.importorskip("matplotlib")
    res = tiny_results
    blocker = tmp_path / "file"
    blocker.write_text("a regular file\n")
    out = str(blocker / "x.png")
    code, err = _cli(["plot", str(res), "--out", out], capsys)
    assert code == 2
    reason = f"{str(blocker)!r} is not a directory"
    assert err == f"optplan: error: cannot write figure file {out!r}: {reason}\n"
    code, err = _cli(["plot", str(res), "--out", str(res)], capsys)
    assert (
        code == 2
        and err == f"optplan: error: figure file {str(res)!r} is a directory, not a file\n"
    )
