r"""K-learning (k-learning-variational-bayesian-rl Algorithm 1) on layered models, and the
episode bookkeeping it shares with the episodic PSRL (:mod:`optplan.agents.psrl`).

Both keep the same conjugate posterior (:class:`LayeredPosterior`), per layer ``l``, state
``s`` and action ``a``:

- rewards: ``mu_l(s, a) ~ N(0, prior_var)`` a priori, observed with Gaussian noise of
  standard deviation ``sigma``; posterior mean ``(sum r / sigma^2) / (1/prior_var + n/sigma^2)``
  and variance ``1 / (1/prior_var + n/sigma^2)``;
- transitions: ``P_l(. | s, a) ~ Dirichlet(transition_prior)`` (all ``S`` next states of layer
  ``l + 1``), posterior ``Dirichlet(transition_prior + next-state counts)``.

K-learning (k-learning-variational-bayesian-rl Algorithm 1) plans once per episode on the
posterior means and counts: a temperature from the schedule (Eq. 10) or the optimal ``tau*``
of problem (11) (:class:`~optplan.problems.k_learning.KLearningTemperature`, fast or conic),
K-values (Eq. 6), then acts by the Boltzmann policy (Eq. 9).

With ``transition_prior="deterministic"`` and ``bonus="posterior"`` (the bonus from the
posterior actually held: :func:`optplan.posteriors.k_bonus_numerators`), tau* K-learning
solves DeepSea up to L = 50 with every seed (median 1,529 episodes at L = 50, noise 0.1;
``models/sweeps/k-learning-fig2-deterministic.toml``). As printed (the Dirichlet 1/S prior and
Eq. 6's bonus) it does not; the rest of this paragraph is about that configuration.

Measured limitation: on DeepSea, Eq. 6 + Eq. 14 dilute the single rewarding
path among ``2^(L-1)`` soft-max paths. The goal raises ``V_0`` only by
``tau log(1 + (e^{1/tau} - 1) / 2^(L-1))``, so the agent exploits it only once
``tau < 1 / (L log 2)``, while ``tau* = sqrt(B / A)`` falls like ``1 / sqrt(n)``. With the true
transitions given, tau* K-learning still did not solve L = 10 or 20 within 3000 episodes
(tau 0.21 and 0.59), and PSRL with the same posterior solved L = 20 in 86 and 89 episodes.
In the Fig. 2 sweep (``models/sweeps/k-learning-fig2.toml``, cap 10^4 episodes) tau*
K-learning solves DeepSea up to L = 8 (median 2,666 episodes) and PSRL up to L = 50 (8,078).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .. import soft
from .._checks import OptplanError, as_numeric, check_choice, check_positive
from .._params import Component, Param
from ..posteriors import K_BONUSES, UNVISITED_TERMS, LayeredPosterior
from ..problems.k_temperature import KLearningTemperature
from . import _episodic_steps as ES
from . import _layered_kernels as LK
from ._env import env_model, env_reward_sd, env_shape
from .base import CompiledAgent, ConicFallback, LayerClock, check_count, check_rng

__all__ = ["LayeredPosterior", "KLearning", "TEMPERATURES"]  # LayeredPosterior: re-export

TEMPERATURES = ("optimal", "schedule")


class EpisodicAgent(CompiledAgent, ABC):
    """Posterior and layer bookkeeping shared by the episodic agents (K-learning, PSRL); a plan
    at each episode start. The steps are compiled functions of one state tuple
    (:mod:`optplan.agents._episodic_steps`), which both loops of
    :func:`~optplan.experiments.run` call; subclasses make the plan (:meth:`_plan`) and say
    how they act (``_KIND``) and what of the plan the steps read (:meth:`_load`)."""

    _run = staticmethod(ES.run)
    #: How the compiled steps act (:data:`optplan.agents._episodic_steps.BOLTZMANN`, ...).
    _KIND = ES.POLICY
    state = None

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        n_layers,
        sigma=1.0,
        prior_var=1.0,
        transition_prior=None,
        initial=None,
    ):
        for name, value in (
            ("n_layers", n_layers),
            ("n_states", n_states),
            ("n_actions", n_actions),
        ):
            check_count(name, value)  # an environment here: point to make_agent
        self.posterior = LayeredPosterior(
            n_layers, n_states, n_actions, sigma, prior_var, transition_prior
        )
        L, S, A = self.posterior.L, self.posterior.S, self.posterior.A
        if initial is None:
            initial = np.full(S, 1.0 / S)
        initial = as_numeric("initial", initial)
        if initial.shape != (S,) or (initial < 0).any() or abs(initial.sum() - 1) > 1e-9:
            raise OptplanError(f"initial must be a distribution over {S} states, got {initial!r}")
        self.initial = initial
        self.n_layers, self.n_states, self.n_actions = L, S, A
        self.clock = LayerClock(L)
        self.rng: np.random.Generator | None = None

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        self.posterior.reset()
        self.clock.reset()
        self.state = ES.new_state(self, self._KIND, psrl=self._fused_work())
        self._synced = 0
        self.plan()

    @property
    def episode(self) -> int:
        """Episodes ended since :meth:`reset`."""
        return 0 if self.state is None else int(self.state.flags[ES.EPISODES])

    def select_action(self, state: int) -> int:
        return ES.python_act(self, int(state))

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if ES.python_observe(self, int(state), int(action), float(reward), int(next_state),
                             bool(done)):  # fmt: skip
            self.plan()
        else:
            self._sync()

    def play(self, env, steps, env_rng) -> int:
        status = CompiledAgent.play(self, env, steps, env_rng)
        self._sync()
        return status

    def compiled_reason(self, env) -> str | None:
        return ES.compiled_reason(self, env)

    def plan(self) -> None:
        """Compute the policy of the episode that starts now (from :attr:`posterior`) and hand
        it to the compiled steps."""
        ES.contradiction(self)
        self._plan()
        self._load(self.state)

    @abstractmethod
    def _plan(self) -> None:
        """The plan of the episode that starts now, into the agent's attributes."""

    @abstractmethod
    def _load(self, s) -> None:
        """What the compiled steps act from, copied into their state ``s``."""

    def _fused_work(self):
        """The scratch of a plan the compiled steps make themselves (PSRL's), or ``None``."""
        return None

    def _sync(self) -> None:
        """The agent's attributes after plans its compiled steps made (none by default)."""


class KLearning(ConicFallback, EpisodicAgent):
    """K-learning for episodic layered MDPs (k-learning-variational-bayesian-rl Algorithm 1).

    Parameters
    ----------
    n_states, n_actions : int
        States per layer, actions.
    n_layers : int
        ``L``.
    temperature : {"optimal", "schedule"}, default "optimal"
        How the temperature is set each episode: ``"optimal"``, ``tau*`` of problem (11);
        ``"schedule"``, Eq. 10 with ``S`` the total number of states ``L * n_states``.
    sigma, prior_var, transition_prior :
        The posterior (:class:`LayeredPosterior`); ``sigma`` is also the bonus's noise scale.
        ``transition_prior="deterministic"``: each pair has one unknown next state (DeepSea).
    initial : array (S,), optional
        Start distribution ``rho`` (uniform by default).
    bonus : {"paper", "posterior"}
        The bonus numerators (:func:`optplan.posteriors.k_bonus_numerators`): ``"paper"``, Eq. 6
        as printed; ``"posterior"``, from the posterior held (exact reward variance, Lemma 2's
        transition term with the prior's actual pseudo-counts).
    span : float > 0, optional
        The value span in the posterior bonus's transition term (default ``L - 1 - l``).
    unvisited : {"hoeffding", "paper"}
        Under the deterministic prior, an unvisited pair's transition term: ``Span^2 / 4`` or
        ``Span^2``.
    method : {"fast", "conic"}, default "fast"
        How ``tau*`` is computed. A conic failure (any status but optimal) falls back to the
        fast path for that episode; :attr:`fallbacks` counts them and :attr:`statuses` keeps
        the conic statuses.
    solver : {"CLARABEL", "ECOS", "SCS"}, optional

    Attributes
    ----------
    tau, K, values, pi :
        The current episode's temperature, K-values (L, S, A), Eq. 14 values (L, S) and
        Boltzmann policy (L, S, A).
    """

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        n_layers,
        temperature="optimal",
        bonus="paper",
        span=None,
        unvisited="hoeffding",
        method="fast",
        solver=None,
        **posterior,
    ):
        check_choice("bonus", bonus, K_BONUSES)
        check_choice("unvisited", unvisited, UNVISITED_TERMS)
        self.bonus, self.unvisited = bonus, unvisited
        self.span = None if span is None else check_positive("span", span)
        if temperature not in TEMPERATURES:
            raise OptplanError(f"temperature must be one of {TEMPERATURES}, got {temperature!r}")
        self.temperature = temperature
        self.init_fallback(method, solver)
        EpisodicAgent.__init__(self, n_states, n_actions, n_layers=n_layers, **posterior)
        if self.n_actions < 2:
            raise OptplanError("KLearning needs at least 2 actions")

    def reset(self, rng: np.random.Generator) -> None:
        self.reset_fallback()
        self._guess = None  # the last tau* > 0: where the next search starts
        self._compiled = self._compiled_plan()
        self._work = None
        if self._compiled:
            post = self.posterior
            self._work = LK.KWork(post, self.initial, self.bonus, self.span, self.unvisited)
        super().reset(rng)

    def _compiled_plan(self) -> bool:
        """Whether :meth:`plan` is one compiled call: ``tau*`` by the fast method
        (:func:`optplan.agents._layered_kernels.k_plan`) or the schedule
        (:func:`~optplan.agents._layered_kernels.k_schedule_plan`, at least 2 states), one
        scalar ``sigma``; else :meth:`_plan_numpy` (a per-pair ``sigma``, the conic method)."""
        if np.ndim(self.posterior.sigma) != 0:
            return False
        if self.temperature == "schedule":
            return self.n_states >= 2
        return self.method == "fast"

    _run = staticmethod(ES.run)
    _KIND = ES.BOLTZMANN

    def _load(self, s) -> None:
        s.cdf[...] = self._cdf.reshape(s.cdf.shape)

    def _plan(self) -> None:
        """The temperature, K-values, Boltzmann policy and values of the episode that starts
        now: for ``tau*`` by the fast method one compiled call
        (:func:`optplan.agents._layered_kernels.k_plan`: the posterior's means, the bonus and
        the search, started around the last episode's ``tau*``) and the policy
        (:func:`~optplan.agents._layered_kernels.k_policy`, NumPy's ``exp`` and ``log``); for
        the schedule one compiled call
        (:func:`~optplan.agents._layered_kernels.k_schedule_plan`: the means, the bonus,
        the K-values and the policy); else :meth:`_plan_numpy`
        (``tests/test_episodic_steps.py`` compares the two)."""
        work = getattr(self, "_work", None)
        if work is not None and self.temperature == "schedule":
            self.tau = self._schedule_tau()
            self.K, c, self.pi, self.values, self._cdf = LK.k_schedule_plan(work, self.tau)
            c.setflags(write=False)
            self.c = c
            return
        guess = getattr(self, "_guess", None)
        got = None if work is None else LK.k_plan(work, guess)
        if got is None:  # no compiled plan, or its search handed over to SciPy's
            self._plan_numpy()
            return
        self.tau, self.K, c = got
        self._guess = self.tau
        c.setflags(write=False)
        self.c = c
        self.pi, self.values, self._cdf = LK.k_policy(work, self.tau)

    def _plan_numpy(self) -> None:
        """:meth:`plan` in NumPy: the posterior's means and bonus numerators, the temperature
        (``KLearningTemperature.solve``, or the schedule and :func:`optplan.soft.k_values`)."""
        post = self.posterior
        R, _ = post.reward_posterior()
        P = post.mean_transitions()
        c = post.bonus_numerators(self.bonus, self.span, self.unvisited)
        self.c = c
        if self.temperature == "schedule":
            self.tau = self._schedule_tau()
            self.K = soft.k_values(self.tau, R, P, post.counts, post.sigma, c)
        else:
            # the agent's own posterior: valid by construction, so built unchecked (a per-pair
            # sigma goes through the public constructor, which names it)
            build = KLearningTemperature._trusted if np.ndim(post.sigma) == 0 else None
            build = build or KLearningTemperature
            for fresh in (R, P, c):  # the plan's own arrays: handed over without a copy
                fresh.setflags(write=False)
            problem = build(R, P, post.counts, post.sigma, self.initial, c)
            res = self.solve_planned(problem, guess=getattr(self, "_guess", None))
            self.tau = float(res.x)
            if self.tau > 0:
                self._guess = self.tau
            if self.tau > 0 and self.method == "fast":
                self.K = res.q
            elif self.tau > 0:  # conic K is pinned only where visited: recompute exactly
                self.K = soft.k_values(self.tau, R, P, post.counts, post.sigma, c)
            else:
                self.K = np.array(res.q)
        self._policy()

    def _schedule_tau(self) -> float:
        """Eq. 10's temperature of the episode that starts now (``S`` all layers' states)."""
        L, S = self.n_layers, self.n_states
        return soft.temperature_schedule(
            self.episode + 1, self.posterior.sigma, L, L * S, self.n_actions
        )

    def _policy(self) -> None:
        """The Boltzmann policy (greedy at ``tau = 0``), its values and cumulative rows."""
        if self.tau > 0:
            self.pi, self.values = soft.boltzmann_policy_and_values(self.K, self.tau)
        else:  # tau* = 0: greedy
            best = self.K == self.K.max(axis=-1, keepdims=True)
            self.pi = best / best.sum(axis=-1, keepdims=True)
            self.values = self.K.max(axis=-1)
        self._cdf = np.cumsum(self.pi, axis=-1)

    def __repr__(self) -> str:
        return (
            f"KLearning(L={self.n_layers}, S={self.n_states}, A={self.n_actions}, "
            f"temperature={self.temperature!r}, method={self.method!r}, bonus={self.bonus!r})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------

TRANSITIONS = ("dirichlet", "deterministic")


def episodic_shape(env, who: str):
    """``(L, S, A, initial)`` of an episodic environment whose every action is admissible."""
    L, S, A, mask = env_shape(env)
    if L is None:
        raise OptplanError(f"{who} is for episodic (finite-horizon) environments")
    if not mask.all():
        raise OptplanError(f"{who} assumes every action is admissible everywhere")
    return L, S, A, env_model(env).initial


def posterior_args(
    env, who: str, transitions: str, transition_prior, sigma=None, scalar_sigma: bool = False
) -> dict:
    """The sizes, start distribution, reward noise and transition prior of an episodic agent
    on ``env``: ``transitions`` is ``"dirichlet"`` (pseudo-count ``transition_prior``) or
    ``"deterministic"`` (one unknown next state per pair, no pseudo-count); ``sigma`` unset
    is the noise sd the environment declares (:func:`~optplan.agents._env.env_reward_sd`:
    its ``reward_sd`` or ``reward_noise``), 1 with a warning when it declares none (a model
    alone, or an environment without either attribute); ``scalar_sigma``: one
    number, the largest per-pair sd (K-learning's temperature problem takes one)."""
    L, S, A, initial = episodic_shape(env, who)
    check_choice("transitions", transitions, TRANSITIONS)
    if transitions == "deterministic":
        if transition_prior is not None:
            raise OptplanError(
                "transition_prior (a Dirichlet pseudo-count) does not apply with "
                f"transitions = 'deterministic', got {transition_prior!r}"
            )
        transition_prior = "deterministic"
    return {
        "n_states": S,
        "n_actions": A,
        "n_layers": L,
        "initial": initial,
        "sigma": env_reward_sd(env, sigma, scalar=scalar_sigma, who=who),
        "transition_prior": transition_prior,
    }


#: The posterior's parameters, shared with ``psrl``.
POSTERIOR_PARAMS = (
    Param(
        "sigma",
        "float",
        None,
        "reward noise sd (posterior, K-learning bonus); unset: the env's "
        "(reward_sd / reward_noise), else 1",
    ),
    Param("prior_var", "float", 1.0, "prior variance of each mean reward (prior mean 0)"),
    Param("transition_prior", "float", None, "Dirichlet pseudo-count per next state; 1/S"),
    Param(
        "transitions",
        "str",
        "dirichlet",
        "'dirichlet' (learned) or 'deterministic' (one unknown next state per pair)",
    ),
)


def _k_learning(env, criterion, transitions, transition_prior, sigma, **params):
    args = posterior_args(env, "k-learning", transitions, transition_prior, sigma, True)
    return KLearning(**args, **params)


BUILDERS = (
    Component(
        "k-learning",
        _k_learning,
        (
            Param("temperature", "str", "optimal", "'optimal' (problem 11) or 'schedule' (Eq. 10)"),
            Param("method", "str", "fast", "tau* by 'fast' or 'conic'"),
            Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
            *POSTERIOR_PARAMS,
            Param("bonus", "str", "paper", "'paper' (Eq. 6 as printed) or 'posterior'"),
            Param("span", "float", None, "value span in the posterior bonus; unset: L - 1 - l"),
            Param("unvisited", "str", "hoeffding", "deterministic prior: 'hoeffding' or 'paper'"),
        ),
        "K-learning (k-learning Algorithm 1), episodic",
    ),
)
