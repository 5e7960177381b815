"""The count-bonus agent's compiled continuing steps (optplan.agents._count_bonus_steps) against
its NumPy plan (``optplan.dp.policy_iteration`` on the posterior-mean model): after every
update of random posteriors (flat and proper priors, one or per-pair noise sd, learned or known
transitions, masks, discounts, bonus scales, ``update_every``) the same policy and scale, and
``q``, posterior means and variances, mean transitions and bonus within 1e-12 (products and
solves by other BLAS and LAPACK builds round otherwise in the last bits)."""

from __future__ import annotations

import numpy as np
import pytest

from optplan.agents._mean_model import MeanModelAgent
from optplan.agents.ube import CountBonus

PLANNED = ("policy", "q", "mean", "var", "P", "bonus")


def _random_agent_args(rng):
    S, A = int(rng.integers(1, 12)), int(rng.integers(1, 5))
    mask = rng.random((S, A)) < 0.8
    mask[np.arange(S), rng.integers(0, A, S)] = True
    kw = {
        "discount": float(rng.choice([0.0, 0.5, 0.9, 0.99])),
        "action_mask": mask,
        "beta": float(rng.choice([0.0, 0.1, 2.0])),
    }
    if rng.random() < 0.5:
        kw["prior_var"] = float(rng.choice([0.1, 1.0, 50.0]))
    kw["sigma"] = (
        float(rng.choice([0.3, 1.0])) if rng.random() < 0.6 else rng.uniform(0.1, 2, (S, A))
    )
    if rng.random() < 0.3:
        kw["transition_prior"] = float(rng.choice([0.01, 1.0]))
    if rng.random() < 0.2:
        kw["known_transitions"] = rng.dirichlet(np.ones(S), (S, A))
    if rng.random() < 0.3:
        kw["update_every"] = int(rng.integers(1, 4))
    return S, A, kw


@pytest.mark.parametrize("block", range(4))
def test_compiled_plan_equals_numpy_plan(block):
    """250 random agents (4 blocks), each compared after every one of up to 60 updates."""
    for seed in range(block * 63, block * 63 + 63):
        rng = np.random.default_rng(seed)
        S, A, kw = _random_agent_args(rng)
        fast, slow = CountBonus(S, A, **kw), CountBonus(S, A, **kw)
        fast.reset(np.random.default_rng(1))
        slow._compiled = False  # the NumPy plan: the base class's reset keeps it
        MeanModelAgent.reset(slow, np.random.default_rng(1))
        assert fast._compiled and fast.state is not None and slow.state is None
        for _ in range(int(rng.integers(1, 60))):
            mask = kw["action_mask"]
            s = int(rng.integers(S))
            a = int(rng.choice(np.flatnonzero(mask[s])))
            r, y = float(rng.normal()), int(rng.integers(S))
            fast.update(s, a, r, y, False)
            slow.update(s, a, r, y, False)
            np.testing.assert_array_equal(fast.policy, slow.policy, err_msg=str(seed))
            for name in PLANNED[1:]:
                x, z = getattr(fast, name), getattr(slow, name)
                assert x.dtype == z.dtype, (seed, name)
                np.testing.assert_allclose(x, z, rtol=1e-12, atol=1e-12, err_msg=f"{seed} {name}")
            assert fast._scale == slow._scale and fast.plans == slow.plans


def test_compiled_plan_not_used_where_it_does_not_apply():
    episodic = CountBonus(3, 2, n_layers=4)
    episodic.reset(np.random.default_rng(0))
    assert not episodic._compiled  # its plans are NumPy's, its steps the episodic ones
    deterministic = CountBonus(3, 2, transition_prior="deterministic")
    deterministic.reset(np.random.default_rng(0))
    assert not deterministic._compiled
    exact = CountBonus(3, 2, sigma=0.0, prior_var=1.0)
    exact.reset(np.random.default_rng(0))
    assert not exact._compiled
