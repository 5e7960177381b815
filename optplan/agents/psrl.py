r"""Posterior sampling (PSRL): the episodic agent of the k-learning study on layered models
(:class:`PSRL`) and the continuing agent of bayesian-methods-tabular-rl (:class:`ContinuingPSRL`).

- :class:`PSRL` (Osband et al. 2013): the Gaussian / Dirichlet posterior of
  :class:`~optplan.posteriors.LayeredPosterior` (shared with K-learning,
  :mod:`optplan.agents.k_learning`); one model drawn per episode, then the greedy policy of
  that model by backward induction. Registered ``psrl``.
- :class:`ContinuingPSRL` (bayesian-methods-tabular-rl App. PSRL): the Dirichlet /
  Normal-Gamma posterior per ``(s, a, s')`` of :mod:`optplan.agents._posterior_agent`, updated
  in batches of ``update_every`` steps; one model ``P ~ Dirichlet``, ``mu ~ NG`` drawn per
  batch, ``R[s, a] = sum_s' P mu``, its optimal policy by Howard policy iteration
  (:func:`optplan.dp.policy_iteration`, warm-started from the last policy), discounted at
  ``gamma = 0.9`` (the draft) or for average reward (``discount=None``); greedy until the next
  update. Its state is a tuple of arrays and its steps, batch update and plan compiled
  functions of it (:mod:`optplan.agents._psrl_steps`, :mod:`optplan.agents._psrl_kernels`),
  which both loops of :func:`~optplan.experiments.run` call. Registered ``psrl-continuing``.
- :class:`OptimisticPSRL` (Agrawal & Jia, NeurIPS 2017): average reward, doubling epochs,
  ``psi`` Dirichlet samples per pair and extended value iteration that takes, per pair, the
  most optimistic sample. Registered ``optimistic-psrl``.

Rewards follow the continuing agents' convention: learned by the Normal-Gamma posterior of every
``mu(s, a, s')`` (:class:`ContinuingPSRL`, :class:`OptimisticPSRL` by default), or given as the
known mean-reward matrix (``OptimisticPSRL(rewards=R)``, registry ``known_rewards=true``).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import OptplanError, as_array, check_int, check_positive
from .._model_checks import check_bytes
from .._params import Component, Param
from ..dp import backward_induction, masked
from ..posteriors import DRAFT_REWARD_PRIOR, Dirichlet, NormalGamma
from . import _episodic_steps as ES
from . import _layered_kernels as LK
from . import _psrl_kernels as K
from ._env import continuing_shape, env_model
from ._posterior_agent import (
    CLASSES,
    DRAFT_GAMMA,
    DUE,
    ITERATIONS,
    MODEL_POSTERIOR_PARAMS,
    NG_PRIOR_PARAMS,
    PLANNED,
    STATUS,
    TRACK,
    VERSION,
    PosteriorAgent,
    model_args,
    new_flags,
    ng_prior,
    posterior_arrays,
)
from ._psrl_steps import PSRLState, plan_failure, psrl_observe, psrl_plan_now, psrl_run
from .base import CompiledAgent, check_normal_gamma, check_rng, continuing_mask, one_hot_policy
from .k_learning import POSTERIOR_PARAMS, EpisodicAgent, posterior_args

__all__ = ["PSRL", "ContinuingPSRL", "OptimisticPSRL"]


class PSRL(EpisodicAgent):
    """Posterior sampling for episodic layered MDPs (Osband et al. 2013; the k-learning paper's
    main comparator): one model drawn from :class:`LayeredPosterior` per episode, then the
    greedy policy of that model by backward induction.

    Parameters
    ----------
    n_states, n_actions : int
        States per layer, actions (counts, not an environment: to build from one use
        ``make_agent("psrl", env)``, which reads them, ``n_layers`` and ``initial`` from its
        model).
    n_layers : int
        ``L``.
    sigma : float >= 0 or array (L, S, A) of such, default 1.0
        Known reward noise sd of the Gaussian reward posterior (0: exact rewards).
        ``make_agent("psrl", env)`` takes the environment's declared noise (its
        ``reward_sd`` or ``reward_noise``: 0 on bsuite's deterministic DeepSea) unless
        ``sigma`` is given, 1 when it declares none.
    prior_var : float > 0, default 1.0
        Prior variance of each mean reward (prior mean 0).
    transition_prior : float > 0 or "deterministic", optional
        Dirichlet pseudo-count per next state (default ``1 / S``); ``"deterministic"``: each
        pair has one unknown next state (DeepSea). See :class:`LayeredPosterior`.
    initial : array (S,), optional
        Start distribution (uniform by default).
    """

    _run = staticmethod(ES.run)

    def reset(self, rng: np.random.Generator) -> None:
        self._work = self._compiled_work()
        super().reset(rng)

    def _compiled_work(self):
        """The compiled plan's scratch (:mod:`optplan.agents._layered_kernels`), or
        ``None`` where the plan runs in NumPy (the deterministic transition prior)."""
        if self.posterior.deterministic:
            return None
        return LK.PsrlWork(self.n_layers, self.n_states, self.n_actions)

    def _fused_work(self):
        return self._work

    def _plan(self) -> None:
        """Draw a model from the posterior, solve it by backward induction and keep its greedy
        policy: one compiled call (:func:`optplan.agents._layered_kernels.psrl_plan`, which the
        compiled steps also make at an episode's end when the reward posterior needs no NumPy)
        where it applies, else :meth:`_plan_numpy`."""
        work = getattr(self, "_work", None)
        if work is None:
            self._plan_numpy()
            return
        self.Q, self.policy = LK.psrl_plan(self.rng, self.posterior, work)

    def _plan_numpy(self) -> None:
        """:meth:`plan` in NumPy: :meth:`LayeredPosterior.sample
        <optplan.posteriors.LayeredPosterior.sample>`, :func:`optplan.dp.backward_induction`
        and the first maximum of each ``Q`` row."""
        R, P = self.posterior.sample(self.rng)
        self.Q, _ = backward_induction(P, R)
        self.policy = self.Q.argmax(axis=-1)

    def _load(self, s) -> None:
        s.policy[:] = self.policy.reshape(-1)
        self._synced = int(s.flags[ES.PLANS])

    def _sync(self) -> None:
        s = self.state
        if s.flags[ES.PLANS] != self._synced:
            self._synced = int(s.flags[ES.PLANS])
            self.Q = s.Q.copy()
            self.policy = s.policy.reshape(self.n_layers, self.n_states).copy()

    def __repr__(self) -> str:
        return f"PSRL(L={self.n_layers}, S={self.n_states}, A={self.n_actions})"


class ContinuingPSRL(CompiledAgent, PosteriorAgent):
    r"""Posterior sampling for continuing tabular MDPs (bayesian-methods-tabular-rl App. PSRL,
    Algorithm psrl; the public code's ``PSRLAgent``): every ``update_every`` steps, fold the
    batch into the posterior, draw ``P ~ Dirichlet`` and ``mu ~ NG`` per ``(s, a, s')``, plan
    ``R[s, a] = sum_s' P mu`` by policy iteration and act greedily until the next update.

    The episodic PSRL of the k-learning study is :class:`optplan.agents.PSRL`.

    Parameters
    ----------
    n_states, n_actions : int
    discount : float in [0, 1) or None, default 0.9
        Planning ``gamma`` (the draft's 0.9); ``None``: average-reward policy iteration (a
        sampled model has full support, so every policy is unichain).
    update_every : int >= 1, default 1
        Steps between posterior updates and plans (the draft: ``N + 1`` on DeepSea-chain,
        ``2N + 1`` on WideNarrow, 3 on PriorMDP).
    reward_prior : (mu0, lam, alpha, beta), default ``DRAFT_REWARD_PRIOR``
        Normal-Gamma prior of every ``mu(s, a, s')``.
    transition_prior : float > 0, default 1.0
        Dirichlet pseudo-count of every next state.
    sum_of_squares : {"correct", "public-code"}, default "correct"
        The Normal-Gamma batch update (:func:`~optplan.posteriors.normal_gamma_update`).
    action_mask : bool array (S, A), optional

    Attributes
    ----------
    transitions : Dirichlet, rewards : NormalGamma
        The current posterior.
    model : (P, mu)
        The last sampled model.
    policy : ndarray (S,) of int, q : ndarray (S, A)
        Its optimal policy and values (``-inf`` on inadmissible pairs).
    policy_version : int
        Bumped when a plan changes ``policy``; ``current_policy()`` is its one-hot ``(S, A)``
        matrix (:class:`~optplan.agents.base.PolicyAgent`).
    state : PSRLState
        All of the above as arrays, and the batch buffer; ``observe`` updates it.
    """

    _average_ok = True
    _run = staticmethod(psrl_run)
    POLICY_CHANGES_IN_PLAN = True
    compiled_reason = PosteriorAgent.compiled_reason

    def __init__(self, n_states, n_actions, **posterior):
        PosteriorAgent.__init__(self, n_states, n_actions, **posterior)
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        """Back to the prior, take the run's generator, make the first plan."""
        self.rng = check_rng(rng)
        S, A = self.n_states, self.n_actions
        work = K.Work(S, A)
        self.state = PSRLState(
            *posterior_arrays(self), np.ascontiguousarray(self.action_mask, dtype=np.bool_),
            np.asarray(self.action_mask.argmax(axis=1), dtype=np.int64),
            np.zeros(S, dtype=np.int64), *work.out(), work.scratch,
            np.array([1.0 if self.discount is None else float(self.discount)]),
            new_flags(self, S >= K.MAX_STATES),
        )  # fmt: skip
        K._compiled()  # the plan's compiled functions, bound before a step compiles
        if psrl_plan_now(self.state, self.rng):
            self.plan()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        """Store the transition; every ``update_every`` steps fold the batch into the
        posterior and re-plan (continuing: ``done`` is not used)."""
        if psrl_observe(self.state, int(state), int(action), float(reward), int(next_state),
                        bool(done), self.rng):  # fmt: skip
            self.plan()

    def plan(self) -> None:
        """What ``observe`` handed to Python: a plan of a model with :data:`MAX_STATES
        <optplan.agents._psrl_kernels.MAX_STATES>` states or more (:meth:`_plan_numpy`), or
        the error of a compiled plan that failed (a tracked run also comes here when the
        policy changed)."""
        flags = self.state.flags
        if flags[DUE]:
            flags[DUE] = 0
            self._plan_numpy()
        if flags[STATUS] != K.OK:
            raise RuntimeError(plan_failure(*(int(flags[i]) for i in (STATUS, ITERATIONS,
                                                                     CLASSES))))  # fmt: skip

    def track(self, on: bool) -> None:
        self.state.flags[TRACK] = on

    def _plan_numpy(self) -> None:
        """The plan of a large model: :meth:`sample_model`, ``np.einsum`` and
        :func:`optplan.dp.policy_iteration` (iterative evaluation from
        :data:`optplan.dp.ITERATIVE_MIN_STATES` states)."""
        st = self.state
        P, mu = self.sample_model()
        st.P[...], st.mu[...] = P, mu
        out = self._optimal(P, np.einsum("ijk,ijk->ij", P, mu), "sampled model")
        if not (st.flags[PLANNED] and np.array_equal(out.policy, st.policy)):
            st.flags[VERSION] += 1
        st.policy[...] = out.policy
        st.q[...] = out.q
        st.flags[PLANNED] = 1

    q = property(
        lambda self: masked(self.state.q, self.action_mask),
        doc="The sampled model's optimal ``q`` (``-inf`` where inadmissible).",
    )
    model = property(lambda self: (self.state.P.copy(), self.state.mu.copy()),
                     doc="The last sampled model ``(P, mu)``.")  # fmt: skip
    policy_version = property(lambda self: int(self.state.flags[VERSION]))

    def current_policy(self) -> np.ndarray:
        """The greedy policy of the last sampled model, one-hot ``(S, A)``."""
        return one_hot_policy(self.policy, self.n_actions)

    def sample_model(self) -> tuple[np.ndarray, np.ndarray]:
        """One draw ``(P, mu)`` from the current posterior, each ``(S, A, S)``."""
        P = self.transitions.sample(self.rng)
        mu, _ = self.rewards.sample(self.rng)
        return P, mu

    def select_action(self, state: int) -> int:
        return int(self.state.policy[state])

    def __repr__(self) -> str:
        crit = "average" if self.discount is None else f"discount={self.discount}"
        return (
            f"ContinuingPSRL(S={self.n_states}, A={self.n_actions}, {crit}, "
            f"update_every={self.update_every})"
        )


class OptimisticPSRL:
    r"""Optimistic posterior sampling for continuing (average-reward) MDPs (Agrawal & Jia,
    NeurIPS 2017, Algorithm 1), as Colosseum's ``PSRLContinuous`` runs it.

    **Epochs.** The counts ``N[s, a]`` at the start of epoch ``k`` are kept (``N_k = max(1,
    N)``); the epoch ends when some pair's visits within it reach ``N_k[s, a]`` (the doubling
    rule of UCRL2, :class:`~optplan.agents.UCRL2`). The first epoch starts before any step.

    **Samples.** At an epoch's start, for every pair, ``psi`` independent draws ``p~_j(. | s,
    a) ~ Dirichlet(transition_prior + N[s, a, .])`` (one ``(psi, S, A, S)`` draw) and, unless the
    rewards are known, one draw ``mu ~ NG`` of every ``(s, a, s')`` mean reward from the
    Normal-Gamma posterior (the convention of :class:`ContinuingPSRL`; shared by the ``psi``
    transition samples, as in Colosseum). With known rewards ``mu[s, a, s'] = R[s, a]``.

    **Under-visited pairs** (``N[s, a] < min_visits``) get the paper's "simple optimistic
    sampling" instead: ``p^-(y) = max(0, p_hat(y) - sqrt(3 p_hat(y) ln(4S) / N) - 3 ln(4S) /
    N)`` (``p_hat = N[s, a, .] / max(1, N[s, a])``), with the remaining mass ``1 - sum p^-`` put
    on one state ``z``. The paper and Colosseum draw ``z`` uniformly; here ``z`` is the state
    the extended MDP prefers (``argmax_y mu[s, a, y] + u(y)``, chosen inside every sweep of the
    value iteration), i.e. the best of all ``S`` such samples: the limit of many uniform draws,
    deterministic, and for an untried pair the plain optimism ``max_y mu + u`` of an
    unknown row.

    **Planning.** Extended value iteration (average reward): ``u <- u + (T u - u) / 2`` (the
    aperiodicity transform) with ``(T u)(s) = max_a max_j sum_y p~_j(y) (mu[s, a, y] + u(y))``,
    vectorized over states, actions and samples, until ``span(T u - u) <= tol * scale``
    (``scale = 1 + max |mu|``) or ``max_sweeps`` sweeps; the agent then follows the greedy
    policy of the last backup (ties: lowest action) until the epoch ends. The paper plans
    exactly on the extended MDP; ``tol = 1e-6`` is close to that (UCRL2's ``1 / sqrt(t_k)``
    would leave early epochs' policies far from the sampled optimum).
    :attr:`chosen` records the sample each pair's backup took (``-1``: the optimistic sample).

    Parameters
    ----------
    n_states, n_actions : int
        Sizes (counts, not an environment: to build from one use
        ``make_agent("optimistic-psrl", env)``).
    psi : int >= 1, optional
        Posterior samples per pair. Default ``max(2, min(60, floor(S ln(S A / 0.05))))``: the
        paper's ``psi = O(S log(S A / rho))`` with constant 1 and ``rho = 0.05`` (Colosseum's
        ``psi_weight = 1``, ``p = 0.05``), capped at Colosseum's 60 so that the ``psi S A S``
        samples stay small (RiverSwim-6: 32; cowan3: 14).
    min_visits : int >= 0, optional
        The paper's ``eta``: pairs with fewer visits use the optimistic sample. Default
        ``max(5, 10 S)``, Colosseum's (its ``min(10 S, eta)``: the paper's ``eta =
        sqrt(T S / A) + 12 omega S^4`` is above ``10 S`` at every run length of interest);
        ``0``: posterior samples for every pair (each pair's first epoch included), which
        measured far lower regret on RiverSwim-6 and cowan3 (docs/peers-continuing.md).
    rewards : array (S, A), optional
        Known mean rewards (no reward posterior); learned when omitted.
    reward_prior : (mu0, lam, alpha, beta), default ``DRAFT_REWARD_PRIOR``
        Normal-Gamma prior of every ``mu(s, a, s')`` (learned rewards).
    transition_prior : float > 0, default 1.0
        Dirichlet pseudo-count of every next state.
    action_mask : bool array (S, A), optional
    tol : float > 0, default 1e-6
        The value iteration's span tolerance, relative to ``scale``.
    max_sweeps : int >= 1, default 10,000
        Cap on the value iteration's sweeps per epoch (reaching it is counted in
        :meth:`stats` as ``evi_capped``).

    Attributes
    ----------
    policy : ndarray (S,) of int
        The epoch's greedy policy; ``current_policy()`` its one-hot ``(S, A)`` matrix,
        ``policy_version`` bumped when an epoch's plan changes it.
    samples : ndarray (psi, S, A, S)
        The epoch's transition samples; ``mu`` the rewards they are scored with.
    reward_posterior : NormalGamma
        The epoch's reward posterior (learned rewards).
    q : ndarray (S, A)
        The extended action values of the last backup (``-inf`` on inadmissible pairs).
    """

    name = "optimistic-psrl"
    policy_version = 0

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        psi=None,
        min_visits=None,
        rewards=None,
        reward_prior=DRAFT_REWARD_PRIOR,
        transition_prior=1.0,
        action_mask=None,
        tol=1e-6,
        max_sweeps=10_000,
    ):
        from .base import check_count

        S = self.n_states = check_count("n_states", n_states)
        A = self.n_actions = check_count("n_actions", n_actions)
        if psi is None:
            psi = max(2, min(60, int(S * math.log(S * A / 0.05))))
        self.psi = check_int("psi", psi, 1)
        check_bytes(
            2 * self.psi * S * A * S * 8, f"psi={self.psi} with S={S}, A={A}",
            "the samples (psi, S, A, S) and their draw's gamma variates",
        )  # fmt: skip
        self.min_visits = check_int(
            "min_visits", max(5, 10 * S) if min_visits is None else min_visits, 0
        )
        if rewards is not None:
            rewards = as_array("rewards", rewards, 2)
            if rewards.shape != (S, A) or not np.isfinite(rewards).all():
                raise OptplanError(
                    f"rewards must be a finite ({S}, {A}) array of mean rewards, got shape "
                    f"{rewards.shape}"
                )
        self.rewards = rewards
        self.reward_prior = check_normal_gamma("reward_prior", reward_prior)
        self.transition_prior = check_positive("transition_prior", transition_prior)
        self.action_mask, _ = continuing_mask(action_mask, S, A)
        self.tol = check_positive("tol", tol)
        self.max_sweeps = check_int("max_sweeps", max_sweeps, 1)
        self.rng: np.random.Generator | None = None

    # --- the run protocol ------------------------------------------------------------------

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)
        S, A = self.n_states, self.n_actions
        self.N_next = np.zeros((S, A, S))
        self.N = np.zeros((S, A))
        self.reward_sums = np.zeros((S, A, S))
        self.reward_squares = np.zeros((S, A, S))
        self.nu = np.zeros((S, A))
        self.t = 1
        self.epochs = 0
        self.sweeps = 0
        self.evi_capped = 0
        self.policy = np.asarray(self.action_mask.argmax(axis=1), dtype=np.intp)
        self.policy_version = 0
        self._new_epoch()

    def select_action(self, state: int) -> int:
        return int(self.policy[state])

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        self.N[state, action] += 1
        self.N_next[state, action, next_state] += 1
        self.reward_sums[state, action, next_state] += reward
        self.reward_squares[state, action, next_state] += reward * reward
        self.nu[state, action] += 1
        self.t += 1
        if self.nu[state, action] >= self.N_k[state, action]:
            self._new_epoch()

    def current_policy(self) -> np.ndarray:
        """The epoch's deterministic policy as a one-hot ``(S, A)`` matrix."""
        return one_hot_policy(self.policy, self.n_actions)

    def stats(self) -> dict:
        """Epochs, value-iteration sweeps and sweeps capped, for the experiment record."""
        return {"epochs": self.epochs, "sweeps": self.sweeps, "evi_capped": self.evi_capped}

    # --- one epoch ---------------------------------------------------------------------------

    def _new_epoch(self) -> None:
        self.epochs += 1
        self.nu[:] = 0.0
        self.N_k = np.maximum(self.N, 1.0)
        self.sample()
        policy = self.plan(self.tol)
        if not np.array_equal(policy, self.policy):
            self.policy_version += 1
        self.policy = policy

    def sample(self) -> None:
        """Draw the epoch's ``psi`` transition samples per pair and (learned rewards) one reward
        sample per ``(s, a, s')``; mark the under-visited pairs and their ``p^-``."""
        S = self.n_states
        posterior = Dirichlet(self.transition_prior + self.N_next)
        self.samples = posterior.sample(self.rng, size=self.psi)
        if self.rewards is None:
            ng = NormalGamma(*self.reward_prior, shape=self.N_next.shape)
            self.reward_posterior = ng.update(self.N_next, self.reward_sums, self.reward_squares)
            self.mu, _ = self.reward_posterior.sample(self.rng)
        else:
            self.mu = np.broadcast_to(self.rewards[..., None], self.N_next.shape)
        self.under = self.action_mask & (self.N < self.min_visits)
        n = np.maximum(self.N, 1.0)[..., None]
        p_hat = self.N_next / n
        c = math.log(4.0 * S)
        self.p_minus = np.maximum(0.0, p_hat - np.sqrt(3.0 * p_hat * c / n) - 3.0 * c / n)
        self.leftover = 1.0 - self.p_minus.sum(axis=-1)

    def backup(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(q, chosen)``: per pair the largest ``sum_y p~_j(y) (mu + u)(y)`` over the samples
        (``chosen`` its ``j``), or the optimistic sample's value (``chosen = -1``) for an
        under-visited pair; ``q`` is ``-inf`` on inadmissible pairs."""
        W = self.mu + u  # (S, A, S)
        values = np.einsum("jsay,say->jsa", self.samples, W)
        chosen = values.argmax(axis=0)
        q = np.take_along_axis(values, chosen[None], axis=0)[0]
        shifted = np.einsum("say,say->sa", self.p_minus, W) + self.leftover * W.max(axis=-1)
        q = np.where(self.under, shifted, q)
        chosen = np.where(self.under, -1, chosen)
        return masked(q, self.action_mask), chosen

    def plan(self, tol: float) -> np.ndarray:
        """Extended value iteration to ``span(T u - u) <= tol * scale``; the greedy policy of
        the last backup."""
        mu = np.where(self.action_mask[..., None], self.mu, 0.0)
        scale = 1.0 + float(np.abs(mu).max())
        u = np.zeros(self.n_states)
        sweeps = 0
        while True:
            sweeps += 1
            q, chosen = self.backup(u)
            step = q.max(axis=1) - u
            if float(np.ptp(step)) <= tol * scale:
                break
            if sweeps == self.max_sweeps:
                self.evi_capped += 1
                break
            u = u + 0.5 * step
            u -= u[0]
        self.sweeps += sweeps
        self.u, self.q, self.chosen = u, q, chosen
        self.gain_estimate = float(0.5 * (step.max() + step.min()))
        return np.asarray(q.argmax(axis=1), dtype=np.intp)

    def __repr__(self) -> str:
        known = "known" if self.rewards is not None else "learned"
        return (
            f"OptimisticPSRL(S={self.n_states}, A={self.n_actions}, psi={self.psi}, "
            f"min_visits={self.min_visits}, rewards={known})"
        )


# --- the registry's entries (:mod:`optplan.agents.registry`) -------------------------------


def _psrl(env, criterion, transitions, transition_prior, sigma, **params):
    return PSRL(**posterior_args(env, "psrl", transitions, transition_prior, sigma), **params)


def _psrl_continuing(env, criterion, discount, planning, **params):
    if planning not in ("discounted", "average"):
        raise OptplanError(f"planning must be 'discounted' or 'average', got {planning!r}")
    args = model_args(env, "psrl-continuing", params)
    return ContinuingPSRL(discount=None if planning == "average" else discount, **args)


def _optimistic_psrl(env, criterion, known_rewards, psi, min_visits, transition_prior, **prior):
    S, A, mask = continuing_shape(
        env,
        "optimistic-psrl is for continuing (average-reward) environments, got a finite-horizon "
        "(episodic) one; use psrl there",
    )
    return OptimisticPSRL(
        S,
        A,
        psi=psi,
        min_visits=min_visits,
        rewards=env_model(env).R if known_rewards else None,
        reward_prior=ng_prior(**prior),
        transition_prior=transition_prior,
        action_mask=mask,
    )


BUILDERS = (
    Component("psrl", _psrl, POSTERIOR_PARAMS, "posterior sampling (PSRL), episodic"),
    Component(
        "psrl-continuing",
        _psrl_continuing,
        (
            DRAFT_GAMMA,
            Param("planning", "str", "discounted", "'discounted' (gamma) or 'average' reward"),
            *MODEL_POSTERIOR_PARAMS,
        ),
        "continuing PSRL on Dirichlet / Normal-Gamma (s, a, s') posteriors (bayesian-methods)",
    ),
    Component(
        "optimistic-psrl",
        _optimistic_psrl,
        (
            Param(
                "psi",
                "int",
                None,
                "posterior samples per pair; unset: max(2, min(60, floor(S ln(S A / 0.05))))",
            ),
            Param(
                "min_visits",
                "int",
                None,
                "visits below which a pair is sampled optimistically (the paper's eta); unset: "
                "max(5, 10 S)",
            ),
            Param("known_rewards", "bool", False, "use the true mean rewards (else learn them)"),
            *NG_PRIOR_PARAMS,
            Param("transition_prior", "float", 1.0, "Dirichlet pseudo-count per next state"),
        ),
        "optimistic PSRL (Agrawal & Jia): doubling epochs, psi Dirichlet samples per pair, EVI",
    ),
)
