"""Ragged, empty and out-of-range inputs of every public constructor and function that takes
arrays are refused at the door with an ``OptplanError`` naming the argument: never numpy's own
``ValueError``, an ``IndexError`` or an ``AttributeError`` from deep inside a solve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import optplan as op
from optplan._checks import OptplanError

P1 = np.ones((1, 1, 1))


def _nested(shape, axis, fill):
    """A nested list of ``shape`` made ragged at depth ``axis``: its first item there is one
    entry longer than its siblings (a list where a number belongs on the last axis)."""

    def build(level, first):
        n = shape[level]
        if level == len(shape) - 1:
            row = [fill] * n
            if first and level == axis:
                row[0] = [fill, fill]
            return row
        rows = [build(level + 1, first and i == 0) for i in range(n)]
        if first and level == axis:
            rows[0] = rows[0] + [rows[0][-1]]
        return rows

    return build(0, True)


def _array_args():
    """``(name, call)``: a public entry point that takes one array argument ``x``, with the
    other arguments valid for the shape ``x`` should have."""
    S, A = 2, 2
    P = np.full((S, A, S), 0.5)
    R = np.zeros((S, A))
    pi = np.full((S, A), 0.5)
    P2, R2 = np.stack([P, P]), np.stack([R, R])
    pv = (np.array([0.5, 0.5]), np.array([0.0, 1.0]))
    return [
        ("TabularMDP.P", (S, A, S), 0.5, lambda x: op.TabularMDP(x, R)),
        ("TabularMDP.R", (S, A), 0.0, lambda x: op.TabularMDP(P, x)),
        ("FiniteHorizonMDP.P", (2, S, A, S), 0.5, lambda x: op.FiniteHorizonMDP(x, R2)),
        ("FiniteHorizonMDP.R", (2, S, A), 0.0, lambda x: op.FiniteHorizonMDP(P2, x)),
        ("KLBallIndex.p", (S,), 0.5, lambda x: op.KLBallIndex(x, pv[1], 0.1)),
        ("KLBallIndex.v", (S,), 0.0, lambda x: op.KLBallIndex(pv[0], x, 0.1)),
        ("KLInfRate.p", (S,), 0.5, lambda x: op.KLInfRate(x, pv[1], 0.5)),
        ("L1BallIndex.p", (S,), 0.5, lambda x: op.L1BallIndex(x, pv[1], 0.1)),
        ("L1BallIndex.v", (S,), 0.0, lambda x: op.L1BallIndex(pv[0], x, 0.1)),
        ("kl_ball_index.p", (3, S), 0.5, lambda x: op.kl_ball_index(x, pv[1], 0.1)),
        ("kl_ball_index.v", (3, S), 0.0, lambda x: op.kl_ball_index(pv[0], x, 0.1)),
        ("kl_inf_rate.p", (3, S), 0.5, lambda x: op.kl_inf_rate(x, pv[1], 0.5)),
        ("kl_inf_rate.v", (3, S), 0.0, lambda x: op.kl_inf_rate(pv[0], x, 0.5)),
        ("l1_ball_index.p", (3, S), 0.5, lambda x: op.l1_ball_index(x, pv[1], 0.1)),
        ("l1_ball_index.radius", (3,), 0.1, lambda x: op.l1_ball_index(pv[0], pv[1], x)),
        (
            "UncertaintyBellman.mean_transitions",
            (S, A, S),
            0.5,
            lambda x: op.UncertaintyBellman(x, pi, R, 0.9),
        ),
        ("UncertaintyBellman.local", (S, A), 0.0, lambda x: op.UncertaintyBellman(P, pi, x, 0.9)),
        ("UncertaintyBellman.policy", (S, A), 0.5, lambda x: op.UncertaintyBellman(P, x, R, 0.9)),
        (
            "OptimisticPlanning.p_hat",
            (S, A, S),
            0.5,
            lambda x: op.OptimisticPlanning(x, R, 0.1, discount=0.9),
        ),
        (
            "OptimisticPlanning.r_hat",
            (S, A),
            0.0,
            lambda x: op.OptimisticPlanning(P, x, 0.1, discount=0.9),
        ),
        (
            "OptimisticPlanning.radius",
            (S, A),
            0.1,
            lambda x: op.OptimisticPlanning(P, R, x, discount=0.9),
        ),
        (
            "ClippedOptimisticPlanning.p_hat",
            (S, A, S),
            0.5,
            lambda x: op.ClippedOptimisticPlanning(x, R),
        ),
        ("ClippedOptimisticPlanning.r", (S, A), 0.0, lambda x: op.ClippedOptimisticPlanning(P, x)),
        (
            "MomentMatchingVariance.alpha",
            (S, A, S),
            1.0,
            lambda x: op.MomentMatchingVariance(
                x, np.zeros((S, A, S)), np.zeros((S, A, S)), pi, 0.9
            ),
        ),
        (
            "KLearningTemperature.mean_rewards",
            (2, S, A),
            0.0,
            lambda x: op.KLearningTemperature(x, P2, np.ones((2, S, A)), 1.0),
        ),
        (
            "KLearningTemperature.mean_transitions",
            (2, S, A, S),
            0.5,
            lambda x: op.KLearningTemperature(R2, x, np.ones((2, S, A)), 1.0),
        ),
    ]


ENTRIES = _array_args()
BATCHED = ("kl_ball_index", "kl_inf_rate", "l1_ball_index")


@given(
    entry=st.sampled_from(ENTRIES),
    kind=st.sampled_from(["ragged", "empty"]),
    axis=st.integers(0, 3),
)
def test_ragged_and_empty_inputs_are_refused_by_name(entry, kind, axis):
    name, shape, fill, call = entry
    axis = axis % len(shape)
    # an empty batch of the batched functions is a valid (empty) batch
    assume(not (kind == "empty" and axis == 0 and name.split(".")[0] in BATCHED))
    if kind == "ragged":
        x = _nested(shape, axis, fill)
    else:
        x = np.full(tuple(0 if i == axis else n for i, n in enumerate(shape)), fill)
    with pytest.raises(OptplanError) as info:
        call(x)
    if kind == "ragged":
        assert str(info.value).startswith(f"{name.rsplit('.', 1)[1]} is ragged"), info.value


RAGGED_P = [[[1.0, 0.0]], [[1.0]]]
PV = ([0.5, 0.5], [0.0, 1.0])
RAGGED_PV = [[0.5, 0.5], [1.0]]
E = np.zeros

CASES = [
    ("mdp-P-ragged", lambda: op.TabularMDP(RAGGED_P, E((2, 1))), r"^P is ragged .*\[\[\[1\.0"),
    ("mdp-R-ragged", lambda: op.TabularMDP(P1, [[0.0, 1.0], [0.0]]), r"^R is ragged"),
    (
        "fh-P-ragged",
        lambda: op.FiniteHorizonMDP([RAGGED_P], E((1, 2, 1))),
        r"^P is ragged",
    ),
    (
        "fh-from-stationary-array",
        lambda: op.FiniteHorizonMDP.from_stationary(np.ones((1, 1, 1)), 3),
        r"^mdp must be a TabularMDP, got ndarray of shape \(1, 1, 1\)",
    ),
    ("klball-p-ragged", lambda: op.KLBallIndex(RAGGED_PV, PV[1], 0.1), r"^p is ragged"),
    ("klball-v-ragged", lambda: op.KLBallIndex(PV[0], RAGGED_PV, 0.1), r"^v is ragged"),
    ("klinf-p-ragged", lambda: op.KLInfRate(RAGGED_PV, PV[1], 0.5), r"^p is ragged"),
    ("l1-p-ragged", lambda: op.L1BallIndex(RAGGED_PV, PV[1], 0.1), r"^p is ragged"),
    ("kl_ball_index-p-ragged", lambda: op.kl_ball_index(RAGGED_PV, PV[1], 0.1), r"^p is ragged"),
    ("kl_inf_rate-v-ragged", lambda: op.kl_inf_rate(PV[0], RAGGED_PV, 0.5), r"^v is ragged"),
    ("l1_ball_index-p-ragged", lambda: op.l1_ball_index(RAGGED_PV, PV[1], 0.1), r"^p is ragged"),
    (
        "l1_ball_index-radius-ragged",
        lambda: op.l1_ball_index(PV[0], PV[1], [[0.1], [0.1, 0.2]]),
        r"^radius is ragged",
    ),
    (
        "ube-S0",
        lambda: op.UncertaintyBellman(E((0, 1, 0)), E((0, 1)), E((0, 1)), 0.9),
        r"mean_transitions needs at least one state .* shape \(0, 1, 0\)",
    ),
    (
        "ube-layered-L0",
        lambda: op.UncertaintyBellman(E((0, 1, 1, 1)), E((0, 1, 1)), E((0, 1, 1)), 0.9),
        r"mean_transitions needs at least one state .* shape \(0, 1, 1, 1\)",
    ),
    (
        "optimistic-S0",
        lambda: op.OptimisticPlanning(E((0, 1, 0)), E((0, 1)), 0.1, discount=0.9),
        r"p_hat needs at least one state and one action, got shape \(0, 1, 0\)",
    ),
    (
        "optimistic-A0",
        lambda: op.OptimisticPlanning(E((1, 0, 1)), E((1, 0)), 0.1, discount=0.9),
        r"p_hat needs at least one state and one action, got shape \(1, 0, 1\)",
    ),
    ("mdp-S0", lambda: op.TabularMDP(E((0, 1, 0)), E((0, 1))), r"at least one state"),
    ("mdp-A0", lambda: op.TabularMDP(E((1, 0, 1)), E((1, 0))), r"at least one state"),
    (
        "mdp-R-1e308-discounted",
        lambda: op.TabularMDP(P1, [[1e308]], discount=0.9),
        r"^R has an entry 1e\+308 at \(0, 0\) too large .*\(1/\(1 - discount\), discount 0\.9\)",
    ),
    (
        "mdp-R-minus-1e308-average",
        lambda: op.TabularMDP(P1, [[-1e308]]),
        r"^R has an entry -1e\+308 at \(0, 0\) too large",
    ),
    (
        "mdp-R-1e307-discount-0.99",
        lambda: op.TabularMDP(P1, [[1e307]], discount=0.99),
        r"^R has an entry 1e\+307 .* times 100 ",
    ),
    (
        "fh-R-1e307-horizon-100",
        lambda: op.FiniteHorizonMDP.from_stationary(op.TabularMDP(P1, [[1e307]]), 100),
        r"^R has an entry 1e\+307 at \(0, 0, 0\) .*\(the horizon 100\)",
    ),
    (
        "fh-from-sparse-stationary-huge-horizon",
        lambda: op.FiniteHorizonMDP.from_stationary(_sparse_model(), 10**9),
        r"^model too large: horizon=1000000000 over the sparse 6-row P .* budget \(this machine",
    ),
    (
        "optimistic-psrl-psi-huge",
        lambda: _agent("optimistic-psrl", psi=10**9),
        r"^model too large: psi=1000000000 with S=6, A=2 needs the samples .* GiB",
    ),
    (
        "prior-lam-zero",
        lambda: _agent("psrl-continuing", prior_lam=0),
        r"^prior_lam must be a finite number > 0, got 0.0",
    ),
    (
        "index-initial-counts-nan",
        lambda: op.agents.MDPUCB(np.zeros((2, 2)), initial_counts=np.full((2, 2, 2), np.nan)),
        r"initial_counts must be finite and >= 0, got nan at \[x, a, y\] = \[0, 0, 0\]",
    ),
    (
        "index-initial-counts-negative",
        lambda: op.agents.MDPUCB(np.zeros((2, 2)), initial_counts=_negative_counts()),
        r"initial_counts must be finite and >= 0, got -1\.0 at \[x, a, y\] = \[1, 0, 1\]",
    ),
]


def _sparse_model():
    import scipy.sparse as sp

    return op.TabularMDP(sp.csr_matrix(np.full((6, 3), 1 / 3)), np.zeros((3, 2)))


def _agent(name, **params):
    from optplan.agents import make_agent
    from optplan.envs.registry import ENVS

    return make_agent(name, ENVS["riverswim"].build(0, n_states=6), **params)


def _negative_counts():
    counts = np.ones((2, 2, 2))
    counts[1, 0, 1] = -1.0
    return counts


@pytest.mark.filterwarnings("error")  # no RuntimeWarning on the way
@pytest.mark.parametrize(
    ("call", "match"), [pytest.param(call, match, id=name) for name, call, match in CASES]
)
def test_refused_at_the_door(call, match):
    with pytest.raises(OptplanError, match=match):
        call()


def test_rewards_that_fit_are_accepted():
    """The bound is the values' overflow, not a round number: 1e307 at discount 0.9 has
    values of 1e308, finite, and stays accepted."""
    mdp = op.TabularMDP(P1, [[1e307]], discount=0.9)
    assert op.DiscountedPlanning(mdp).solve().status == "optimal"
    mdp = op.TabularMDP(P1, [[1e307]])
    assert op.AverageRewardPlanning(mdp).solve().status == "optimal"


def test_from_gymnasium_unknown_id():
    gym = pytest.importorskip("gymnasium")
    with pytest.raises(OptplanError, match=r"^env_or_id 'Nonexistent-v0' is not a regist") as info:
        op.from_gymnasium("Nonexistent-v0")
    assert isinstance(info.value.__cause__, gym.error.NameNotFound)
    with pytest.raises(OptplanError, match=r"close ids: FrozenLake-v1"):
        op.from_gymnasium("FrozenLake-v9")


def test_save_figure_unknown_suffix(tmp_path):
    pytest.importorskip("matplotlib")
    from optplan.plots.plots import new_figure, save_figure

    fig, _ = new_figure()
    out = tmp_path / "x.xyz"
    with pytest.raises(OptplanError, match=r"^figure file .*x\.xyz' has the suffix \.xyz.*\.png"):
        save_figure(fig, out)
    assert not out.exists()
    assert save_figure(fig, tmp_path / "x.PDF").exists()


def test_cli_plot_unknown_suffix_before_drawing(tmp_path, capsys, monkeypatch, tiny_results):
    pytest.importorskip("matplotlib")
    from optplan import cli
    from optplan.plots import figures

    def no_drawing(*args, **kwargs):
        raise AssertionError("drawn before --out was checked")

    res = tiny_results
    monkeypatch.setattr(figures, "regret_figure", no_drawing)
    code = cli.main(["plot", str(res), "--out", str(tmp_path / "x.xyz")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("optplan: error: --out ") and "has the suffix .xyz" in err
    assert ".png" in err and ".svg" in err


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sizes": (10**8,)}, r"--sizes 100000000 \(random sparse.* needs a CSR P, .* GiB budget"),
        ({"models": ("grid",), "grid": 200_000}, r"--grid 200000 \(40,000,000,000 states"),
    ],
)
def test_sparse_bench_sizes_refused_before_building(kwargs, match):
    from optplan.bench._common import Runs
    from optplan.bench.planning import bench_planning

    sizes = kwargs.pop("sizes", (10,))
    with pytest.raises(OptplanError, match=match):
        bench_planning(Runs(sizes=sizes, repeats=1), criteria=("discounted",), sparse=True,
                       **kwargs)  # fmt: skip


def test_the_error_classes_are_public():
    """``except op.OptplanError`` catches every refusal of bad input (a ``ValueError``)."""
    assert issubclass(op.OptplanError, ValueError)
    assert issubclass(op.OptplanTypeError, TypeError)
    assert issubclass(op.OptplanTypeError, op.OptplanError)
    assert issubclass(op.MissingDependency, ImportError)
    with pytest.raises(op.OptplanError, match="discount"):
        op.TabularMDP(P1, [[1.0]], discount=1.5)
    with pytest.raises(op.OptplanTypeError):
        op.FiniteHorizonMDP.from_stationary(np.ones((1, 1, 1)), 3)
