r"""Linear mixture MDPs (ravi-ucb-optimistic-planning-regularized-dp Assumption 5.3; Modi et
al. 2020, Ayoub et al. 2020): ``P(x' | x, a) = sum_i theta_i psi_i(x, a, x')`` with a known
feature map ``psi`` and an unknown ``theta``.

The generator builds ``psi`` from ``d`` random base kernels ``P_i`` (``psi_i = P_i``), so every
``theta`` in the simplex gives a valid kernel, ``||theta||_2 <= 1`` and ``||sum_x' psi(x, a, x')
V(x')||_2 <= sqrt(d) H`` for ``V`` in ``[0, H]``: Assumption 5.3 holds with ``B = sqrt(d)``.
"""

from __future__ import annotations

import numpy as np

from .._checks import OptplanError, as_array, check_distribution, check_int, check_positive
from ..mdp import TabularMDP, check_model_size
from .tabular import TabularEnv

__all__ = ["LinearMixtureMDP", "mixture_features"]


def mixture_features(
    n_states: int, n_actions: int, dim: int, rng: np.random.Generator, concentration: float = 0.5
) -> np.ndarray:
    """``psi[x, a, x', i]`` (S, A, S, d): ``d`` base kernels, each row ``psi[x, a, :, i] ~
    Dirichlet(concentration)`` (small concentrations: sparse, distinguishable kernels)."""
    return np.moveaxis(
        rng.dirichlet(np.full(n_states, concentration), (dim, n_states, n_actions)), 0, -1
    )


class LinearMixtureMDP(TabularEnv):
    r"""A linear mixture MDP simulated through the Gymnasium API (a :class:`TabularEnv`).

    Parameters
    ----------
    features : array (S, A, S, d)
        The known feature map ``psi(x, a, x')``.
    theta : array (d,)
        The mixture weights; ``P[x, a, x'] = features[x, a, x'] @ theta``.
    rewards : array (S, A)
        Known expected rewards ``r(x, a)`` (RAVI-UCB assumes them in ``[0, 1]``).
    mixture : bool, default True
        Require the mixture form: each ``features[..., i]`` a transition kernel and ``theta`` in
        the simplex (then ``P`` is a kernel). ``False``: any ``features`` and ``theta`` whose
        ``P`` is a kernel (the general Assumption 5.3).
    discount : float in [0, 1), optional
        The model's discount (``None``: average reward); wrap in
        :class:`~optplan.envs.DiscountedResets` for RAVI-UCB's resets.
    initial : array (S,), optional
        ``nu_0`` (uniform by default).
    reward_noise : float >= 0
        Gaussian noise on the observed rewards.
    name : str

    Attributes
    ----------
    mdp : TabularMDP
        The true model, for exact regret.
    features : ndarray (S, A, S, d), read-only
    theta : ndarray (d,), read-only
    dim : int
    """

    def __init__(
        self,
        features,
        theta,
        rewards,
        *,
        mixture: bool = True,
        discount: float | None = None,
        initial=None,
        reward_noise: float = 0.0,
        name: str = "linear-mixture",
    ) -> None:
        psi = as_array("features", features, 4)
        S, A, S2, d = psi.shape
        if S2 != S:
            raise OptplanError(f"features must have shape (S, A, S, d), got {psi.shape}")
        theta = as_array("theta", theta, 1)
        if theta.shape != (d,):
            raise OptplanError(
                f"theta has shape {theta.shape}, expected ({d},) (the last axis of features)"
            )
        if mixture:
            for i in range(d):
                check_distribution(f"features[..., {i}] (base kernel {i})", psi[..., i])
            check_distribution("theta (mixture weights, in the simplex)", theta)
        R = as_array("rewards", rewards, 2)
        if R.shape != (S, A):
            raise OptplanError(f"rewards has shape {R.shape}, expected {(S, A)}")
        P = psi @ theta
        if mixture:  # a convex combination of kernels: only round-off to remove
            P = np.clip(P, 0.0, None)
            P /= P.sum(axis=-1, keepdims=True)
        else:
            check_distribution("features @ theta", P)
        mdp = TabularMDP(P, R, discount=discount, initial=initial, name=name)
        super().__init__(mdp, reward_noise=reward_noise)
        psi.setflags(write=False)
        theta.setflags(write=False)
        self.features, self.theta, self.dim = psi, theta, d

    @classmethod
    def random(
        cls,
        n_states: int = 20,
        n_actions: int = 2,
        dim: int = 4,
        seed: int = 0,
        *,
        theta=None,
        concentration: float = 0.5,
        discount: float | None = None,
        reward_noise: float = 0.0,
    ) -> LinearMixtureMDP:
        """A random mixture: ``features = mixture_features(...)``, ``theta ~ Dirichlet(1)``
        unless given (then it must lie in the simplex), rewards ``U(0, 1)``, uniform ``nu_0``;
        all drawn from ``np.random.default_rng(seed)`` in that order."""
        S = check_int("n_states", n_states)
        A = check_int("n_actions", n_actions)
        d = check_int("dim", dim)
        check_model_size(S, A, d, subject=f"n_states={S}, n_actions={A}, dim={d} (features)")
        seed = check_int("seed", seed, 0)
        concentration = check_positive("concentration", concentration)
        rng = np.random.default_rng(seed)
        psi = mixture_features(S, A, d, rng, concentration)
        draw = rng.dirichlet(np.ones(d))
        rewards = rng.random((S, A))
        return cls(
            psi,
            draw if theta is None else theta,
            rewards,
            discount=discount,
            reward_noise=reward_noise,
            name=f"linear-mixture-{S}x{A}-d{d}-seed{seed}",
        )

    def __repr__(self) -> str:
        S, A = self.mdp.n_states, self.mdp.n_actions
        return f"LinearMixtureMDP(S={S}, A={A}, d={self.dim}, theta={np.round(self.theta, 3)})"
