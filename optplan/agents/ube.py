r"""UBE Thompson sampling (uncertainty-bellman-equation Eq. 3) and its §3.2 count-bonus comparator.

Both agents keep one conjugate posterior (:class:`~optplan.posteriors.LayeredPosterior`):
Gaussian mean rewards with a known noise sd (one, or one per pair) and a Gaussian prior of
variance ``prior_var`` or the flat (improper) prior of the paper's §3.2 (``prior_var=None``:
posterior ``N(sum / n, sd^2 / n)``; an unvisited pair counts as one observation of 0, so its
uncertainty is finite, ``sd^2``); transitions either **known** (``known_transitions``, as in
§3.2) or ``Dirichlet(transition_prior + counts)``. Each plans on the posterior-mean model
``(Rbar, Pbar)``:

- :class:`UBE` (Eq. 3): ``Qbar`` of the mean model, the greedy policy ``pi`` of ``Qbar``, the
  local uncertainty ``nu`` and ``u`` from :class:`~optplan.problems.UncertaintyBellman`
  (``u = nu + gamma^2 Pbar_pi u``); in state ``s`` it plays
  ``argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``, ``eps_b ~ N(0, 1)`` drawn afresh at every step
  (no draw in a state with a single admissible action). With known transitions ``nu = Var mu``;
  otherwise a rule of :mod:`optplan.uncertainty` chosen by name (``local="tabular"``,
  ``"lemma1"``, ``"draft"``), with ``Q_max`` from a declared ``reward_bound``.
- :class:`CountBonus` (§3.2's comparator): the optimal policy of the mean model with the reward
  bonus ``beta log(t) sd_sa / sqrt(n_sa)`` (``n`` raised to 1 for unvisited pairs), so that the
  bonus compounds along the plan as in UCRL-style agents (``Qhat_i + beta log(t) bonus_i`` at
  §3.2's root). ``t`` is the number of the episode being planned (1 for the first) in episodic
  mode and the number of steps taken plus one in continuing mode.

Modes. **Episodic** (``n_layers = L``, the paper's DAG setting): one plan per episode, by the
discounted layered backup ``Q_l = R_l + gamma P_l V_{l+1}`` (``V_L = 0``) and the UBE's layered
form with the same ``gamma`` (``u_l = nu_l + gamma^2 P_l pi_{l+1} u_{l+1}``, ``gamma = 1``
allowed). **Continuing** (``n_layers=None``): a plan every ``update_every`` steps, by Howard
policy iteration (:func:`optplan.dp.policy_iteration`, warm-started from the last policy) and
the UBE's continuing form (``gamma < 1``).

Episodic re-planning is incremental and exact: an episode changes the posterior only in the
layers it visited, ``0 .. top``, so only those are backed up again (the continuation values of
layer ``top + 1`` are kept), and ``u`` is re-solved on layers ``0 .. top`` with
``nu_top + gamma^2 Pbar_top pi_{top+1} u_{top+1}`` as the last layer's local term (a one-layer
problem's solution is its local term, so a one-layer re-plan needs no solve). The count bonus's
scale ``beta log t`` changes every episode: the agent keeps the mean and the bonus parts of its
values apart (``Q = QA + beta log(t) QB`` under the current policy), checks in one vectorized
pass that the policy of every layer above ``top`` is still greedy at the new scale and re-plans
from the deepest layer where it is not. A full re-plan (:meth:`plan` without argument) gives the
same numbers.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from .._checks import (
    OptplanError,
    as_array,
    check_choice,
    check_distribution,
    check_positive,
    check_real,
)
from ..dp import backup, evaluate_discounted, masked, policy_iteration, policy_model
from ..posteriors import LayeredPosterior
from ..problems.ube import UncertaintyBellman
from ..result import OPTIMAL
from ..uncertainty import LOCAL_UNCERTAINTY, local_draft, local_lemma1, local_tabular, q_max
from .base import ConicFallback, LayerClock, check_agent_mask, check_count, check_rng

__all__ = ["UBE", "CountBonus", "LOCAL_RULES"]

#: Local-uncertainty rules for learned transitions (:mod:`optplan.uncertainty`).
LOCAL_RULES = tuple(LOCAL_UNCERTAINTY)


class _MeanModelAgent(ABC):
    """Posterior, modes and (incremental) planning on the posterior-mean model.

    Subclasses say whether they add a reward bonus (:meth:`_bonus`, :meth:`_bonus_scale`) and
    what they compute after the values (:meth:`_after_plan`).
    """

    _has_bonus = False

    def __init__(
        self,
        n_states,
        n_actions,
        n_layers=None,
        discount=0.9,
        sigma=1.0,
        prior_var=None,
        known_transitions=None,
        transition_prior=None,
        action_mask=None,
        update_every=1,
    ):
        S = check_count("n_states", n_states)
        A = check_count("n_actions", n_actions)
        L = None if n_layers is None else check_count("n_layers", n_layers)
        self.n_states, self.n_actions, self.n_layers = S, A, L
        self.discount = check_real("discount", discount, 0.0, 1.0, high_open=L is None)
        shape = (S, A) if L is None else (L, S, A)
        mask = check_agent_mask(action_mask, S, A)
        if L is None and mask.ndim == 3:
            raise OptplanError(
                f"action_mask has layers (shape {mask.shape}) but n_layers is None (continuing)"
            )
        if L is not None and mask.ndim == 3 and mask.shape[0] != L:
            raise OptplanError(f"action_mask has {mask.shape[0]} layers, n_layers is {L}")
        self.action_mask = np.broadcast_to(mask, shape)
        if prior_var is not None:
            prior_var = check_positive("prior_var", prior_var)
        self.posterior = LayeredPosterior(L, S, A, sigma, prior_var, transition_prior)
        self.prior_var = prior_var
        self._sd = np.broadcast_to(self.posterior.sigma, shape)
        self.known = known_transitions is not None
        if self.known:
            self._P = _check_transitions(known_transitions, shape, self.action_mask)
        self.update_every = check_count("update_every", update_every)
        if L is not None and self.update_every != 1:
            raise OptplanError(
                f"update_every applies to continuing mode (n_layers=None); episodic agents "
                f"re-plan once per episode, got update_every={update_every!r}"
            )
        counts = self.action_mask.sum(axis=-1)
        self._forced = np.where(counts == 1, self.action_mask.argmax(axis=-1), -1)
        # layers where some state has a choice (episodic): the others' policy cannot move
        self._choice_layers = np.flatnonzero((counts > 1).reshape(L, -1).any(axis=1)) if L else None
        self.clock = LayerClock(L)
        self.rng: np.random.Generator | None = None

    @property
    def episodic(self) -> bool:
        return self.n_layers is not None

    def reset(self, rng: np.random.Generator) -> None:
        """Forget the data, take the run's generator, plan the first episode (or steps)."""
        self.rng = check_rng(rng)
        self.posterior.reset()
        self.clock.reset()
        self.episode = 0
        self.steps = 0
        self.plans = 0
        self._top = -1
        S = self.n_states
        shape = self.action_mask.shape
        self.policy = np.zeros(shape[:-1], dtype=np.intp)
        self.q = np.zeros(shape)
        self.mean = np.zeros(shape)  # posterior means and variances of the mean rewards
        self.var = np.zeros(shape)
        self.P = self._P if self.known else np.zeros((*shape, S))  # posterior-mean transitions
        self.bonus = np.zeros(shape) if self._has_bonus else None
        if self.episodic:
            L = self.n_layers
            self._QA = np.zeros(shape)  # values of the mean rewards and of the bonus under
            self._QB = np.zeros(shape)  # the current policy: q = QA + scale * QB
            self._VA = np.zeros((L + 1, S))  # V_L = 0
            self._VB = np.zeros((L + 1, S))
        self._scale = 0.0
        self._planned = False
        self.plan()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if self.n_layers is None:
            self.posterior.update(None, state, action, reward, next_state)
            self.steps += 1
            if self.steps % self.update_every == 0:
                self.plan()
            return
        layer = self.clock.layer
        self.posterior.update(layer, state, action, reward, next_state)
        if layer > self._top:
            self._top = layer
        self.clock.tick(done)
        self.steps += 1
        if done:
            self.episode += 1
            self.plan(self._top)
            self._top = -1

    def _row(self, state: int):
        return (self.clock.current(), state) if self.n_layers is not None else state

    # --- planning ---------------------------------------------------------------------------

    def plan(self, top: int | None = None) -> None:
        """Plan on the current posterior. Episodic: only layers ``0 .. top`` have new data
        since the last plan (``None``: every layer); continuing: ``top`` is not used."""
        self.plans += 1
        scale = self._bonus_scale() if self._has_bonus else 0.0
        if self.n_layers is None:
            head = ()
            self._refresh(head)
            R = self.mean if self.bonus is None else self.mean + scale * self.bonus
            prev = self.policy if self._planned else None
            out = policy_iteration(self.P, R, self.action_mask, self.discount, prev)
            if out.status != OPTIMAL:  # pragma: no cover - discounted PI always stops
                raise RuntimeError(f"policy iteration on the posterior-mean model: {out.message}")
            self.policy = out.policy
            self.q = masked(out.q, self.action_mask)
        else:
            fresh = not self._planned
            top = self.n_layers - 1 if top is None or fresh else int(top)
            if self._has_bonus and not fresh:
                top = self._stale_layer(top, scale)
            head = slice(0, top + 1)
            self._refresh(head)
            self._backward(top, scale, fresh)
        self._scale = scale
        self._planned = True
        self._after_plan(top, head)

    def _refresh(self, head) -> None:
        """Posterior means (and the bonus) of the pairs in ``head`` (a slice of layers)."""
        post = self.posterior
        self.mean[head], self.var[head] = post.reward_posterior(head)
        if not self.known:
            self.P[head] = post.mean_transitions(head)
        if self.bonus is not None:
            self.bonus[head] = self._bonus(head)

    def _stale_layer(self, top: int, scale: float) -> int:
        """The deepest layer whose policy stops being greedy at the new bonus scale (or
        ``top``): the layers below ``top`` kept their data, only the scale moved."""
        layers = self._choice_layers[self._choice_layers > top]
        if layers.size == 0 or scale == self._scale:
            return top
        q = masked(self._QA[layers] + scale * self._QB[layers], self.action_mask[layers])
        kept = np.take_along_axis(q, self.policy[layers][..., None], -1)[..., 0]
        moved = (kept < q.max(axis=-1)).any(axis=-1)
        return int(layers[moved].max()) if moved.any() else top

    def _backward(self, top: int, scale: float, fresh: bool) -> None:
        """Layers ``top .. 0`` of the discounted backward pass (a loop over layers only). The
        policy keeps its action on ties (``fresh``: the first best action)."""
        g = self.discount
        rows = np.arange(self.n_states)
        QA, QB, VA, VB = self._QA, self._QB, self._VA, self._VB
        P, mean, bonus, mask = self.P, self.mean, self.bonus, self.action_mask
        for l in range(top, -1, -1):
            QA[l] = backup(P[l], mean[l], VA[l + 1], g)
            if bonus is None:
                q = QA[l]
            else:
                QB[l] = backup(P[l], bonus[l], VB[l + 1], g)
                q = QA[l] + scale * QB[l]
            qm = masked(q, mask[l])
            self.q[l] = qm
            pi = qm.argmax(axis=-1)
            if not fresh:
                prev = self.policy[l]
                pi = np.where(qm[rows, prev] >= qm[rows, pi], prev, pi)
            self.policy[l] = pi
            VA[l] = QA[l][rows, pi]
            if bonus is not None:
                VB[l] = QB[l][rows, pi]

    def _bonus(self, head=()) -> np.ndarray:
        """Reward bonus per pair of ``head`` before its scale: none (0) unless a subclass
        adds one (and sets ``_has_bonus``)."""
        return np.zeros(self.action_mask[head].shape)

    def _bonus_scale(self) -> float:
        """The bonus's scale at the current time: 0 without a bonus."""
        return 0.0

    @abstractmethod
    def _after_plan(self, top: int | None, head) -> None:
        """What the agent computes from the new values (``head``: the layers re-planned,
        ``0 .. top``; ``()`` in continuing mode)."""


def _check_transitions(P, shape: tuple[int, ...], mask: np.ndarray) -> np.ndarray:
    """Known transitions of the agent's shape; admissible rows are distributions, masked rows
    (which the model may leave empty) become uniform so that every row is one."""
    S = shape[-2]
    arr = as_array("known_transitions", P)
    if arr.shape != (*shape, S):
        raise OptplanError(
            f"known_transitions has shape {arr.shape}, expected {(*shape, S)} "
            "(as the agent's layers, states and actions, then next states)"
        )
    check_distribution("known_transitions", arr, rows=mask)
    empty = np.abs(arr.sum(axis=-1) - 1.0) > 1e-9
    arr[empty] = 1.0 / S
    arr.setflags(write=False)
    return arr


class UBE(ConicFallback, _MeanModelAgent):
    r"""Thompson sampling with the uncertainty Bellman equation (uncertainty-bellman-equation
    Eq. 3): ``a = argmax_b Qbar_sb + zeta eps_b sqrt(u_sb)``, ``eps_b ~ N(0, 1)``.

    Parameters
    ----------
    n_states, n_actions : int
    n_layers : int, optional
        ``L``: episodic mode (one plan per episode, layered UBE). ``None``: continuing mode.
    zeta : float >= 0, default 1.0
        Scale of the Thompson noise (0: greedy on ``Qbar``).
    discount : float, default 0.9
        ``gamma`` of planning and of the UBE: ``[0, 1]`` episodic, ``[0, 1)`` continuing.
    sigma : float >= 0 or array (S, A) / (L, S, A), default 1.0
        The known reward-noise sd, one or per pair.
    prior_var : float > 0, optional
        Prior variance of each mean reward; ``None`` (default): the flat prior of §3.2.
    known_transitions : array (S, A, S) / (L, S, A, S), optional
        The transition law, if known (then ``nu = Var mu``). ``None``: Dirichlet posterior.
    transition_prior : float > 0, optional
        Dirichlet pseudo-count per next state (default ``1 / S``).
    local : {"tabular", "lemma1", "draft"}, optional
        Local-uncertainty rule for learned transitions (default ``"tabular"``); must be unset
        with ``known_transitions``. In episodic mode the last layer has no future and keeps
        only the reward term (``sd^2 / n`` for ``"tabular"``, ``Var mu`` otherwise).
    reward_bound : float > 0, optional
        Declared ``|mu| <= reward_bound``; required with learned transitions (unused with
        known ones: the local term then needs no ``Q_max``). ``Q_max`` is
        ``reward_bound / (1 - gamma)`` (continuing) or ``min(L, 1 / (1 - gamma))
        reward_bound`` (episodic).
    action_mask : bool array (S, A) or (L, S, A), optional
    update_every : int >= 1, default 1
        Continuing mode: steps between plans.
    method : {"fast", "conic"}, default "fast"
        How the UBE is solved; ``"conic"`` solves it whole by CVXPY at every plan, falling back
        to the fast path (counted in :meth:`stats`) when the solver does not end optimal.
    solver : str, optional
        Conic solver.

    Attributes
    ----------
    q : ndarray (S, A) / (L, S, A)
        ``Qbar`` (inadmissible actions ``-inf``).
    policy : ndarray of int
        Greedy policy of ``Qbar``, the policy of the UBE.
    u, local : ndarray like ``q``
        The UBE's solution and its local term (0 on inadmissible pairs).
    """

    def __init__(
        self,
        n_states,
        n_actions,
        n_layers=None,
        zeta=1.0,
        discount=0.9,
        sigma=1.0,
        prior_var=None,
        known_transitions=None,
        transition_prior=None,
        local=None,
        reward_bound=None,
        action_mask=None,
        update_every=1,
        method="fast",
        solver=None,
    ):
        self.zeta = _check_scale("zeta", zeta)
        self.init_fallback(method, solver)
        _MeanModelAgent.__init__(
            self,
            n_states,
            n_actions,
            n_layers,
            discount,
            sigma,
            prior_var,
            known_transitions,
            transition_prior,
            action_mask,
            update_every,
        )
        if reward_bound is not None:
            reward_bound = check_positive("reward_bound", reward_bound)
        if self.known:
            if local is not None:
                raise OptplanError(
                    f"local={local!r} names a rule for learned transitions; with "
                    "known_transitions the local uncertainty is Var mu (leave local unset)"
                )
            self.local_rule = None
            self.q_max = None
        else:
            self.local_rule = check_choice(
                "local", "tabular" if local is None else local, LOCAL_RULES
            )
            if reward_bound is None:
                raise OptplanError(
                    "reward_bound is required with learned (Dirichlet) transitions: Q_max comes "
                    "from a declared bound on |mean reward|, never from the true model"
                )
            self.q_max = _q_max(reward_bound, self.discount, self.n_layers)
        self.reward_bound = reward_bound

    def reset(self, rng: np.random.Generator) -> None:
        self.reset_fallback()
        self.u = np.zeros(self.action_mask.shape)
        self.local = np.zeros(self.action_mask.shape)
        self._sqrt_u = np.zeros(self.action_mask.shape)
        _MeanModelAgent.reset(self, rng)

    def select_action(self, state: int) -> int:
        row = self._row(state)
        forced = self._forced[row]
        if forced >= 0:
            return int(forced)
        if self.zeta == 0.0:
            return int(self.policy[row])
        eps = self.rng.standard_normal(self.n_actions)
        return int(np.argmax(self.q[row] + self.zeta * eps * self._sqrt_u[row]))

    def local_uncertainty(self, head=()) -> np.ndarray:
        """``nu`` of the pairs in ``head`` (a slice of layers; all by default), 0 where
        inadmissible, from the current posterior."""
        var = self.var[head]
        if self.known:
            nu = var
        else:
            post = self.posterior
            counts = post.counts[head]
            alpha = post.next_counts[head] + post.transition_prior
            g = self.discount
            if self.local_rule == "tabular":
                reward_term = np.square(self._sd[head]) / np.maximum(counts, 1.0)
                nu = local_tabular(counts, self._sd[head], self.q_max, g)
            elif self.local_rule == "lemma1":
                reward_term = var
                nu = local_lemma1(var, alpha, self.q_max, g)
            else:  # "draft", whose rewards are per (s, a, s'): the same for every s' here
                reward_term = var
                nu = local_draft(
                    alpha,
                    np.broadcast_to(self.mean[head][..., None], alpha.shape),
                    np.broadcast_to(var[..., None], alpha.shape),
                    self.q_max,
                )
            if self.n_layers is not None and len(nu) == self.n_layers:  # no future after L
                nu = np.array(nu)
                nu[-1] = reward_term[-1]
        return np.where(self.action_mask[head], nu, 0.0)

    def _after_plan(self, top, head) -> None:
        self.local[head] = self.local_uncertainty(head)
        L = self.n_layers
        if L is None or self.method == "conic" or top == L - 1:
            self.u = self._solve(self.P, self.policy, self.local)
            self._sqrt_u = np.sqrt(self.u)
            return
        S, A = self.n_states, self.n_actions
        P = self.P
        v = self.u[top + 1][np.arange(S), self.policy[top + 1]]
        nu = self.local[head].copy()
        nu[top] += self.discount**2 * (P[top].reshape(S * A, S) @ v).reshape(S, A)
        if top == 0:  # a one-layer UBE's solution is its local term
            self.u[0] = nu[0]
        else:
            self.u[head] = self._solve(P[head], self.policy[head], nu)
        self._sqrt_u[head] = np.sqrt(self.u[head])

    def _solve(self, P, policy, nu) -> np.ndarray:
        problem = UncertaintyBellman(
            mean_transitions=P, policy=policy, local=nu, discount=self.discount
        )
        res = self.solve_conic(problem) if self.method == "conic" else None
        if res is None:
            res = problem.solve("fast")
        if not res.success:
            raise RuntimeError(
                f"the uncertainty Bellman equation of the posterior-mean model ended "
                f"{res.status!r}: {res.message}"
            )
        return np.asarray(res.x)

    def stats(self) -> dict:
        """Plans made and, with ``method="conic"``, the conic fallbacks and statuses."""
        out = {"plans": self.plans}
        out.update(ConicFallback.stats(self))
        return out

    def __repr__(self) -> str:
        mode = f"L={self.n_layers}" if self.n_layers is not None else "continuing"
        how = "known P" if self.known else f"Dirichlet P, local={self.local_rule!r}"
        return (
            f"UBE(S={self.n_states}, A={self.n_actions}, {mode}, zeta={self.zeta}, "
            f"discount={self.discount}, {how})"
        )


class CountBonus(_MeanModelAgent):
    r"""The count-bonus comparator of uncertainty-bellman-equation §3.2: the optimal policy of
    the posterior-mean model with reward bonus ``beta log(t) sd_sa / sqrt(max(n_sa, 1))``.

    At §3.2's root this is ``Qhat_i + beta log(t) bonus_i`` with ``bonus_i`` the reward sd over
    ``sqrt(n)`` compounded (discounted) along the chain. ``t``: the number of the episode being
    planned (episodic mode) or the steps taken plus one (continuing mode).

    Parameters
    ----------
    n_states, n_actions, n_layers, discount, sigma, prior_var, known_transitions,
    transition_prior, action_mask, update_every :
        As :class:`UBE` (learned transitions get their Dirichlet mean, no transition bonus).
    beta : float >= 0, default 0.1
        Bonus scale (0: greedy on the mean model).

    Attributes
    ----------
    q : ndarray
        The optimistic ``Qhat + beta log(t) bonus`` of the last plan (``-inf`` inadmissible).
    policy : ndarray of int
        Its greedy policy, which the agent plays.
    """

    _has_bonus = True

    def __init__(
        self,
        n_states,
        n_actions,
        n_layers=None,
        beta=0.1,
        discount=0.9,
        sigma=1.0,
        prior_var=None,
        known_transitions=None,
        transition_prior=None,
        action_mask=None,
        update_every=1,
    ):
        self.beta = _check_scale("beta", beta)
        super().__init__(
            n_states,
            n_actions,
            n_layers,
            discount,
            sigma,
            prior_var,
            known_transitions,
            transition_prior,
            action_mask,
            update_every,
        )

    def select_action(self, state: int) -> int:
        return int(self.policy[self._row(state)])

    def _bonus(self, head=()) -> np.ndarray:
        counts = np.maximum(self.posterior.counts[head], 1.0)
        return np.where(self.action_mask[head], self._sd[head] / np.sqrt(counts), 0.0)

    def _bonus_scale(self) -> float:
        t = self.episode + 1 if self.n_layers is not None else self.steps + 1
        return self.beta * math.log(t)

    def _after_plan(self, top, head) -> None:
        pass

    def compounded_bonus(self) -> np.ndarray:
        """The bonus per unit scale compounded along the current policy, ``QB`` with
        ``q = Qhat + beta log(t) QB`` (§3.2's ``bonus_i`` at the root)."""
        if self.n_layers is not None:
            return self._QB.copy()
        P, bonus = self.P, self.bonus
        v = evaluate_discounted(*policy_model(P, bonus, self.policy), self.discount)
        return backup(P, bonus, v, self.discount)

    def __repr__(self) -> str:
        mode = f"L={self.n_layers}" if self.n_layers is not None else "continuing"
        return (
            f"CountBonus(S={self.n_states}, A={self.n_actions}, {mode}, beta={self.beta}, "
            f"discount={self.discount})"
        )


def _check_scale(name: str, value) -> float:
    """``zeta`` / ``beta``: a finite number >= 0."""
    return check_positive(name, value, allow_zero=True)


def _q_max(reward_bound, discount: float, n_layers: int | None) -> float:
    if n_layers is None:
        return q_max(reward_bound, discount=discount)
    bound = q_max(reward_bound, horizon=n_layers)
    return bound if discount >= 1.0 else min(bound, q_max(reward_bound, discount=discount))
