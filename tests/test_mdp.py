"""Models validate at construction: every bad input raises, naming the field and the value."""

import numpy as np
import pytest

import optplan as op


def small(S=3, A=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(S), size=(S, A)), rng.random((S, A))


def test_valid_model_and_defaults():
    P, R = small()
    m = op.TabularMDP(P, R)
    assert m.criterion == "average" and m.discount is None
    np.testing.assert_allclose(m.initial, np.full(3, 1 / 3))
    assert m.action_mask.all() and m.shape == (3, 2)
    assert op.TabularMDP(P, R, discount=0.9).criterion == "discounted"
    assert not m.P.flags.writeable  # a model that exists stays valid
    P2 = P.copy()
    assert op.TabularMDP(P2, R) == m
    P2[0, 0] = [1, 0, 0]
    assert op.TabularMDP(P2, R) != m  # the model copied its input


@pytest.mark.parametrize(
    "change, exc, match",
    [
        (lambda P, R: (P[0], R), ValueError, r"P must have 3 dimensions, got shape \(2, 3\)"),
        (lambda P, R: (P, R[:2]), ValueError, r"R has shape \(2, 2\), expected \(3, 2\)"),
        (lambda P, R: (P[:, :, :2], R), ValueError, r"P has shape \(3, 2, 2\)"),
        (
            lambda P, R: (np.where(np.arange(3) == 1, -0.1, P) / 1.0, R),
            ValueError,
            r"negative entry -0\.1 at P\[s=0, a=0, s'=1\]",
        ),
        (lambda P, R: (P * 1.01, R), ValueError, r"row P\[s=0, a=0, :\] sums to 1\.01"),
        (
            lambda P, R: (np.where(np.isclose(P, P[2, 1, 2]), np.nan, P), R),
            ValueError,
            r"P has a non-finite entry nan at index \(2, 1, 2\)",
        ),
        (
            lambda P, R: (P, np.where(np.arange(2) == 1, np.inf, R)),
            ValueError,
            r"R has a non-finite entry inf at index \(0, 1\)",
        ),
        (lambda P, R: ("abc", R), TypeError, r"P must be a numeric array"),
    ],
)
def test_bad_arrays(change, exc, match):
    P, R = small()
    with pytest.raises(exc, match=match):
        op.TabularMDP(*change(P.copy(), R.copy()))


def test_row_sum_reports_pair():
    P, R = small()
    P[2, 1, 0] += 1e-6
    with pytest.raises(ValueError, match=r"row P\[s=2, a=1, :\] sums to 1\.000001"):
        op.TabularMDP(P, R)
    P[2, 1, 0] -= 1e-6 - 1e-12  # within 1e-9 is accepted
    op.TabularMDP(P, R)


@pytest.mark.parametrize("discount", [1.0, -0.1, 1.5, float("nan")])
def test_bad_discount(discount):
    with pytest.raises(ValueError, match=r"discount must lie in \[0, 1\), got"):
        op.TabularMDP(*small(), discount=discount)


def test_discount_type():
    with pytest.raises(TypeError, match="discount must be a float, got '0.9'"):
        op.TabularMDP(*small(), discount="0.9")


@pytest.mark.parametrize(
    "initial, match",
    [
        ([0.5, 0.5, 0.5], r"initial must sum to 1, sums to 1\.5"),
        ([1.2, -0.2, 0.0], r"initial has a negative entry -0\.2 at index 1"),
        ([0.5, 0.5], r"initial has shape \(2,\), expected \(3,\)"),
        ([0.5, np.nan, 0.5], r"initial has a non-finite entry nan"),
    ],
)
def test_bad_initial(initial, match):
    with pytest.raises(ValueError, match=match):
        op.TabularMDP(*small(), initial=initial)


def test_bad_masks():
    P, R = small()
    with pytest.raises(ValueError, match="action_mask leaves state 1 with no action"):
        op.TabularMDP(P, R, action_mask=[[True, False], [False, False], [True, True]])
    with pytest.raises(ValueError, match=r"action_mask has shape \(3, 3\), expected \(3, 2\)"):
        op.TabularMDP(P, R, action_mask=np.ones((3, 3), bool))
    with pytest.raises(TypeError, match="action_mask must be boolean, got dtype float64"):
        op.TabularMDP(P, R, action_mask=np.full((3, 2), 0.5))


def test_masked_rows_may_be_zero():
    P, R = small()
    P[1, 1] = 0.0  # inadmissible pair: its row is ignored
    m = op.TabularMDP(P, R, action_mask=[[True, True], [True, False], [True, True]])
    assert not m.action_mask[1, 1]
    with pytest.raises(ValueError, match=r"row P\[s=1, a=1, :\] sums to 0\.0"):
        op.TabularMDP(P, R)


def test_finite_horizon_model_validation():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(3), size=(4, 3, 2))
    R = rng.random((4, 3, 2))
    m = op.FiniteHorizonMDP(P, R, action_mask=[[True, False], [True, True], [False, True]])
    assert m.horizon == 4 and m.action_mask.shape == (4, 3, 2)
    with pytest.raises(ValueError, match=r"P has shape \(4, 3, 2, 3\), expected \(3, 3, 2, 3\) = "):
        op.FiniteHorizonMDP(P, R[:3])
    P[2, 0, 1, 0] = -0.5
    with pytest.raises(ValueError, match=r"negative entry -0\.5 at P\[l=2, s=0, a=1, s'=0\]"):
        op.FiniteHorizonMDP(P, R)
    with pytest.raises(ValueError, match="horizon must be a positive integer, got 0"):
        op.FiniteHorizonMDP.from_stationary(op.TabularMDP(*small()), 0)


def test_with_mask_and_discount_keep_the_rest():
    P, R = small()
    m = op.TabularMDP(P, R, discount=0.5, initial=[1, 0, 0], name="x")
    m2 = m.with_mask([[True, False]] * 3).with_discount(None)
    assert m2.discount is None and m2.name == "x" and m2.initial[0] == 1.0
    assert m2.action_mask.sum() == 3


# --- shape errors name the argument at fault ------------------------------------------------


def test_a_wrongly_shaped_R_is_reported_as_R():
    P, R = small()  # P (3, 2, 3) is consistent with itself: S = 3, A = 2
    with pytest.raises(ValueError) as err:
        op.TabularMDP(P, R.T)
    msg = str(err.value)
    assert msg.startswith("R has shape (2, 3), expected (3, 2) = (S, A) from P of shape (3, 2, 3)")
    assert "transposed" in msg
    with pytest.raises(ValueError, match=r"^R has shape \(3, 4\), expected \(3, 2\) = \(S, A\) "):
        op.TabularMDP(P, np.zeros((3, 4)))
    # P inconsistent with itself: P is at fault, whatever R says
    with pytest.raises(ValueError, match=r"^P has shape \(3, 2, 2\), expected \(3, 2, 3\) = "):
        op.TabularMDP(P[:, :, :2], R)


def test_a_pymdptoolbox_layout_gets_a_hint_towards_from_mdptoolbox():
    P, R = small(S=3, A=2)
    P_tb = np.transpose(P, (1, 0, 2))  # (A, S, S) = (2, 3, 3)
    with pytest.raises(ValueError) as err:
        op.TabularMDP(P_tb, R)
    msg = str(err.value)
    assert msg.startswith("P has shape (2, 3, 3), expected (3, 2, 3) = (S, A, S) from R")
    assert "pymdptoolbox's layout P[a, s, s']" in msg and "op.from_mdptoolbox(P, R" in msg
    assert op.from_mdptoolbox(P_tb, R) == op.TabularMDP(P, R)


def test_finite_horizon_shape_errors_name_the_argument_at_fault():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(3), size=(4, 3, 2))  # (L, S, A, S) = (4, 3, 2, 3)
    R = rng.random((4, 3, 2))
    with pytest.raises(ValueError, match=r"^R has shape \(4, 2, 3\), expected \(4, 3, 2\) = "):
        op.FiniteHorizonMDP(P, np.swapaxes(R, 1, 2))
    with pytest.raises(ValueError, match=r"np\.transpose\(P, \(0, 2, 1, 3\)\)"):
        op.FiniteHorizonMDP(np.swapaxes(P, 1, 2), R)
    with pytest.raises(ValueError, match=r"FiniteHorizonMDP\.from_stationary"):
        op.FiniteHorizonMDP(P[0], R[0])
