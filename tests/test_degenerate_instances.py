"""Near-degenerate instances, each with the shrunk counterexample ``op.verify`` prints for it,
on which optplan's own fast and conic paths must agree or say why they cannot.

Tiny transition masses (1e-96 to 1e-300) for hitting times, where a fast path must still give
the right times with status ``optimal``; an optimistic average-reward bias of 1e12, which the
finish must certify; quantities that are not unique or are ill-conditioned (``q*`` under
near-ties, a multiplier where the dual is flat, ``tau*`` where the objective is flat, an
occupancy at rewards of 1e-6), which are proved optimal by a certificate
(:func:`optplan.crosscheck.judge`, ``Problem.certified_by``) rather than compared; LP answers
compared on their data's scale; and a conic L1 answer off the simplex, which is not called
``optimal``.
"""

from __future__ import annotations

import numpy as np
import pytest

import optplan as op
from optplan.crosscheck import judge
from optplan.problems import HittingTimes
from optplan.problems.kl_ball import kl_ball_dual

pytest.importorskip("hypothesis")  # op.verify's engine imports it
from optplan.verification import check_instance, optplan_fast  # noqa: E402

THIRD = [1 / 3, 1 / 3, 1 / 3]
#: 8 states, one action, rewards +-1e6: the stationary distribution is unique, Clarabel's is
#: off by 3.5e-6 (its value sum mu r by 4.95) while its gain is right to 2.5e-5.
AVERAGE_P = [
    [[0.9507961910363693, 0.0, 0.0, 0.0, 0.0, 0.0, 1.6614589111296875e-05, 0.04918719437451955]],
    [
        [
            0.0520285053917382,
            0.9479514567381289,
            0.0,
            1.224494199478333e-13,
            0.0,
            2.003787001057582e-05,
            0.0,
            0.0,
        ]
    ],
    [[0.009163007401252409, 0.0, 0.0, 0.019100077823354673, 0.0, 0.9717369147753929, 0.0, 0.0]],
    [
        [
            0.03660741735395646,
            0.05401579430895613,
            0.0,
            0.010398800208357064,
            0.0,
            0.0,
            0.0,
            0.8989779881287303,
        ]
    ],
    [
        [
            0.001190853031626988,
            0.0,
            0.09902124846759625,
            0.018843597870700255,
            1.8042306703344644e-15,
            0.8809443006300747,
            0.0,
            0.0,
        ]
    ],
    [
        [
            0.0023714698105616566,
            0.5619883874576233,
            0.0,
            0.0,
            0.43564014272913015,
            0.0,
            0.0,
            2.6848938671532885e-12,
        ]
    ],
    [
        [
            0.07413305745261552,
            0.0,
            0.011680756754232567,
            0.9141847358967407,
            0.0,
            1.7839342492178957e-11,
            0.0,
            1.4498785719041598e-06,
        ]
    ],
    [
        [
            0.00328522651394793,
            5.853897182100981e-08,
            0.0,
            0.0,
            0.0009777545964880672,
            0.9957369603505922,
            0.0,
            0.0,
        ]
    ],
]
AVERAGE_R = [
    [-0.0],
    [-1000000.0],
    [1000000.0],
    [1000000.0],
    [500000.0],
    [-1000000.0],
    [500000.0],
    [-1000000.0],
]
#: 5 states, 4 actions: each state can step towards state 2 only along masses of 1e-79 ..
#: 1e-267 unless it goes through state 1 (a breadth-first start made I - P_NN singular).
WIDEST = np.array(
    [
        [
            [0.0, 0.0, 0.0, 0.0, 1.0],
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [2.6283262281311557e-228, 4.3250483855287196e-175, 0.0, 1.0, 0.0],
            [0.0, 1.0, 0.0, 0.0, 7.724207290253321e-136],
        ],
        [
            [0.0, 0.0, 3.278089802633727e-79, 1.0, 0.0],
            [0.0, 0.0, 1.0, 0.0, 0.0],
            [
                4.407270307881146e-258,
                0.24199026951552122,
                0.31306198828475135,
                0.22396775369639726,
                0.22097998850333014,
            ],
            [0.0, 1.0, 0.0, 1.8948224287556088e-292, 0.0],
        ],
        [
            [
                4.4138476104274103e-243,
                0.09647589246416037,
                0.4805401149086935,
                0.42298399262714603,
                0.0,
            ],
            [0.0, 0.44234423707384973, 0.0, 0.5576557629261503, 0.0],
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0, 0.0],
        ],
        [
            [0.0, 1.0, 1.8330272460082102e-239, 0.0, 0.0],
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [
                0.2301970983304163,
                0.7698029016695838,
                2.4167222456791317e-94,
                0.0,
                1.9431053052267996e-57,
            ],
            [1.0, 0.0, 0.0, 0.0, 0.0],
        ],
        [
            [0.0, 2.3778220811381857e-194, 0.0, 1.0, 0.0],
            [0.3730774775331564, 0.0, 0.0, 0.3716522942196912, 0.25527022824715245],
            [0.0, 5.379598637758863e-269, 1.4823067187211388e-267, 1.0, 0.0],
            [2.690704814997165e-11, 0.0, 5.8075464565851955e-117, 0.0, 0.999999999973093],
        ],
    ]
)

#: (stem, options, inputs): the shrunk counterexamples of the n = 2,000 self-check.
FOUND = {
    "kl_ball multiplier, d = 1e-16": (
        "kl_ball",
        None,
        dict(p=np.array([1.0]), v=np.array([1.0]), radius=1e-16),
    ),
    "kl_ball x, near-tie": (
        "kl_ball",
        None,
        dict(
            p=np.array([0.0, 1 / 3, 1 / 3, 1 / 3, 0.0]),
            v=np.array([1.0, 0.0, 0.0, 0.0, 0.999999999999]),
            radius=1.0,
        ),
    ),
    "kl_ball stationarity, p = 5e-201": (
        "kl_ball",
        None,
        dict(p=np.array([0.5, 0.5, 5e-201]), v=np.array([1e6, 1e6, 0.0]), radius=1e-12),
    ),
    "kl_inf x, near-tie": (
        "kl_inf",
        None,
        dict(
            p=np.array([0.25, 0.0, 0.0, 0.25, 0.25, 0.25]),
            v=np.array([0.0, 1.0, 0.999999999999, 0.0, 0.0, 0.0]),
            target=0.5,
        ),
    ),
    "discounted occupancy, rewards 1e-6": (
        "discounted",
        None,
        dict(
            P=np.array([[[0.0, 1.0], [0.5, 0.5]], [[0.5, 0.5], [0.0, 1.0]]]),
            R=np.array([[0.0, 1e-06], [0.0, -1e-06]]),
            discount=0.9,
        ),
    ),
    "average bias, rewards 1e6": (
        "average_reward",
        None,
        dict(
            P=np.array([[[0.5, 0.5], [0.5, 0.5]], [[0.5, 0.5], [1 / 3, 2 / 3]]]),
            R=np.array([[0.0, 999999.999999], [1e6, 1e6]]),
        ),
    ),
    "average occupancy, rewards 1e6 (Clarabel's 4.95 off its value)": (
        "average_reward",
        None,
        dict(P=np.array(AVERAGE_P), R=np.array(AVERAGE_R)),
    ),
    "finite-horizon value 0, rewards 1e6": (
        "finite_horizon",
        None,
        dict(
            P=np.ones((3, 1, 2, 1)),
            R=np.array([[[-1e6, 1e6]], [[1e6, 999999.999999]], [[1e6, 0.0]]]),
            action_mask=np.array([[[True, False]], [[True, True]], [[False, True]]]),
        ),
    ),
    "hitting time, masses 1e-96 and 1e-226": (
        "hitting_time",
        None,
        dict(
            P=np.array(
                [
                    [[1.0, 2.7109346410646233e-96], [0.0, 1.0]],
                    [[1.0, 3.50205972082562e-226], [0.0, 1.0]],
                ]
            )
        ),
    ),
    "hitting time, masses 1e-300": (
        "hitting_time",
        None,
        dict(
            P=np.array([[THIRD, THIRD], [THIRD, THIRD], [[1e-300, 1e-300, 1.0], [0.5, 0.0, 0.5]]])
        ),
    ),
    "hitting time, steps along masses of 1e-94": (
        "hitting_time",
        None,
        dict(P=np.array(WIDEST)),
    ),
    "k_temperature, flat objective": (
        "k_temperature",
        None,
        dict(
            mean_rewards=np.array([[[1.0, 0.0]]]),
            mean_transitions=np.ones((1, 1, 2, 1)),
            counts=np.ones((1, 1, 2)),
            sigma=0.0,
        ),
    ),
    "optimistic L1 average, escape 1e-12": (
        "optimistic",
        {"ball": "l1", "criterion": "average"},
        dict(
            p_hat=np.array(
                [
                    [THIRD] * 3,
                    [THIRD] * 3,
                    [[0.0, 9.99999999999e-13, 0.9999999999989999], THIRD, THIRD],
                ]
            ),
            r_hat=np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]),
            radius=np.array([[0.1, 0.1, 0.1], [0.1, 0.1, 2.0], [0.0, 0.1, 0.1]]),
            reward_radius=np.zeros((3, 3)),
            action_mask=np.array(
                [[True, False, False], [False, False, True], [True, False, False]]
            ),
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_counterexamples_agree(name):
    stem, options, inputs = FOUND[name]
    fn = optplan_fast(stem, **(options or {}))
    out = check_instance(fn, stem, inputs, options=options)
    assert out.status == "optimal", out.reason
    assert out.agree, out.reason


@pytest.mark.parametrize(
    "name", ["hitting time, masses 1e-96 and 1e-226", "hitting time, masses 1e-300"]
)
def test_hitting_times_with_tiny_masses_are_right(name):
    """Times of at least one step, equal to Clarabel's: before, -1e300 with status optimal,
    or an EvaluationError (``1 - P(s, a, s)`` rounded to 0 for a proper policy)."""
    P = FOUND[name][2]["P"]
    problem = HittingTimes(op.TabularMDP(P, np.zeros(P.shape[:2])))
    fast, conic = problem.solve(), problem.solve(method="conic")
    assert fast.status == conic.status == "optimal", fast.message
    off = ~np.eye(P.shape[0], dtype=bool)
    assert (fast.values[off] >= 1.0).all()
    np.testing.assert_allclose(fast.values, conic.values, rtol=1e-7, atol=1e-7)


def test_hitting_time_of_a_1e300_escape_is_1e300_not_a_wrong_number():
    """The only way out has probability 1e-300: the time is 1e300, finite and positive."""
    P = np.array([[[1.0 - 1e-300, 1e-300]], [[0.0, 1.0]]])
    P[0, 0] = [1.0, 1e-300]  # the row as a user would store it: 1 - 1e-300 rounds to 1
    res = HittingTimes(op.TabularMDP(P, np.zeros((2, 1)))).solve()
    assert res.status == "optimal"
    assert res.values[1, 0] == pytest.approx(1e300, rel=1e-12)


def test_hitting_time_conic_is_not_optimal_when_its_residual_cannot_certify_it():
    """T = 1 / 2e-12 = 5e11 + 1: Clarabel's 5.0001e11 passed a residual check on the scale
    max T; on the scale 1 it is downgraded, and the fast path is exact."""
    P = np.array([[[0.5, 0.5]], [[1.999999999996e-12, 0.999999999998]]])
    problem = HittingTimes(op.TabularMDP(P, np.zeros((2, 1))))
    fast, conic = problem.solve(), problem.solve(method="conic")
    assert fast.status == "optimal"
    assert fast.values[0, 1] == pytest.approx(1 / 1.999999999996e-12, rel=1e-12)
    assert conic.status == "optimal_inaccurate" and "Bellman residual" in conic.message


def test_l1_conic_point_off_the_simplex_is_not_called_optimal():
    """d = 1e13: Clarabel's q summed to 1 - 1.3e-6 while it said optimal."""
    res = op.L1BallIndex(np.array([1.0]), np.array([-0.8836948420374655]), 1e13).solve(
        method="conic"
    )
    assert res.status == "optimal_inaccurate"
    assert "distance from the simplex" in res.message


@pytest.mark.parametrize("seed", range(20))
def test_kl_ball_dual_is_tight_at_the_fast_multiplier_and_above_elsewhere(seed):
    rng = np.random.default_rng(seed)
    S = int(rng.integers(1, 7))
    p = rng.dirichlet(np.ones(S)) * (rng.random(S) < 0.7)
    p[int(rng.integers(S))] += 1e-200 if seed % 3 == 0 else 0.5
    p /= p.sum()
    v = rng.normal(size=S) * 10.0 ** float(rng.integers(-3, 4))
    d = 10.0 ** rng.uniform(-12, 1)
    res = op.KLBallIndex(p, v, d).solve()
    scale = 1.0 + abs(res.value)
    assert abs(kl_ball_dual(p, v, d, res.multiplier) - res.value) <= 1e-12 * scale
    for f in (0.8, 1.25):  # weak duality: every other multiplier gives a larger dual value
        assert kl_ball_dual(p, v, d, res.multiplier * f) >= res.value - 1e-12 * scale


def test_kl_ball_dual_at_radius_1e_300():
    p, v = np.array([0.5, 0.5, 0.0]), np.array([1.0, 0.0, 0.0])
    res = op.KLBallIndex(p, v, 1e-300).solve()
    assert res.multiplier == pytest.approx(np.sqrt(0.125 / 1e-300), rel=1e-9)
    assert kl_ball_dual(p, v, 1e-300, res.multiplier) == pytest.approx(0.5, abs=1e-15)
    assert kl_ball_dual(p, v, 1e-300, 1.0) > 0.5 + 0.1  # a multiplier of 1 is far off


def test_judge_certified_quantity_passes_only_with_its_certificate():
    compared = {"value": (0.0, 1.0), "x": (0.3, 1.0), "x_certificate": (1e-12, 1.0)}
    verdict = judge(compared, 1e-7, 1e-7, certified_by={"x": ("x_certificate",)})
    assert verdict.failed == [] and verdict.certified == ["x"]
    compared["x_certificate"] = (1e-3, 1.0)
    verdict = judge(compared, 1e-7, 1e-7, certified_by={"x": ("x_certificate",)})
    assert verdict.failed == ["x", "x_certificate"] and verdict.certified == []
    verdict = judge({"x": (0.3, 1.0), "x_alt": (1.0, 1.0)}, 1e-7, 1e-7)
    assert verdict.failed == ["x"]  # no certificate listed for x
    verdict = judge({"x": (0.0, 1.0), "x_alt": (1.0, 1.0)}, 1e-7, 1e-7)
    assert verdict.failed == []  # an alternative alone never fails
