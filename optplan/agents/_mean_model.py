r"""What the agents of uncertainty-bellman-equation share: :class:`~optplan.agents.UBE` (Eq. 3)
and its §3.2 count-bonus comparator :class:`~optplan.agents.CountBonus`
(:mod:`optplan.agents.ube`) plan on the posterior-mean model of one posterior.

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

from abc import ABC, abstractmethod

import numpy as np

from .._checks import OptplanError, as_array, check_distribution, check_positive, check_real
from .._params import Param
from ..dp import backup, masked, policy_iteration
from ..mdp import is_sparse
from ..posteriors import LayeredPosterior
from ..result import OPTIMAL
from . import _episodic_steps as ES
from ._env import env_model, env_shape, env_transitions
from .base import LayerClock, check_agent_mask, check_count, check_rng

__all__ = ["MeanModelAgent", "check_scale"]


class MeanModelAgent(ABC):
    """Posterior, modes and (incremental) planning on the posterior-mean model.

    Subclasses say whether they add a reward bonus (:meth:`_bonus`, :meth:`_bonus_scale`) and
    what they compute after the values (:meth:`_after_plan`).
    """

    _has_bonus = False

    def __init__(
        self,
        n_states,
        n_actions,
        *,
        n_layers=None,
        discount=0.9,
        sigma=1.0,
        prior_var=None,
        known_transitions=None,
        transition_prior=None,
        update_every=1,
        action_mask=None,
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
        self.state = None

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
        if self.episodic:
            zeta = getattr(self, "zeta", 0.0)
            self.state = ES.new_state(self, self._KIND, self._forced, zeta, ube=self._fused())
        self.plan()

    def update(self, state: int, action: int, reward: float, next_state: int, done: bool) -> None:
        if self.n_layers is None:
            self.posterior.update(None, state, action, reward, next_state)
            self.steps += 1
            if self.steps % self.update_every == 0:
                self.plan()
            return
        if ES.python_observe(self, int(state), int(action), float(reward), int(next_state),
                             bool(done)):  # fmt: skip
            self.plan_due()
        else:
            self._counted()

    # --- episodic mode: the compiled steps (:mod:`optplan.agents._episodic_steps`) ----------

    #: How the episodic steps act (:data:`optplan.agents._episodic_steps.POLICY`, ...).
    _KIND = ES.POLICY

    def plan_due(self) -> None:
        """The plan at an episode's end: layers ``0 .. top`` re-planned (continuing: a whole
        plan)."""
        if self.n_layers is None:
            self.plan()
            return
        ES.contradiction(self)
        self._counted()
        f = self.state.flags
        if f[ES.FAILED]:
            f[ES.FAILED] = 0
            self._failed()
        self.plan(self._top)
        self._top = -1
        f[ES.TOP] = -1

    def _fused(self):
        """The agent whose plan the episodic steps make compiled (the UBE's), or ``None``."""
        return None

    def _failed(self) -> None:  # noqa: B027 - only an agent with a compiled plan raises
        """Raise the error of a compiled plan that failed."""

    def _counted(self) -> None:
        """The counters of the episodic steps (steps, episodes, deepest layer updated, plans
        made compiled)."""
        f = self.state.flags
        self.steps, self.episode, self._top = int(f[ES.STEPS]), int(f[ES.EPISODES]), int(f[ES.TOP])
        if f[ES.PLANS]:
            self.plans += int(f[ES.PLANS])
            f[ES.PLANS] = 0

    def _play_episodic(self, env, steps, env_rng) -> int:
        """The episodic steps' compiled loop (:func:`optplan.agents._episodic_steps.run`)."""
        status = int(ES.run(self.state, env, steps, env_rng, self.rng))
        self._counted()
        return status

    def _act_episodic(self, state: int) -> int:
        return ES.python_act(self, int(state))

    def _load(self) -> None:
        """The plan the episodic steps act from, copied into their state."""
        s = self.state
        if self._KIND == ES.THOMPSON:
            s.params[ES.ZETA] = self.zeta
        if s.flags[ES.FUSED] >= 0:  # the steps act from the plan's own arrays
            return
        s.policy[:] = self.policy.reshape(-1)
        if self._KIND == ES.THOMPSON:
            s.qm[...] = self.q.reshape(s.qm.shape)
            s.sd[...] = self._sqrt_u.reshape(s.sd.shape)

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
        if self.n_layers is not None:
            self._load()

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
    if is_sparse(P):
        raise OptplanError(
            f"known_transitions must be a dense array of shape {(*shape, S)}, got a sparse "
            f"{type(P).__name__} of shape {P.shape}: pass mdp.dense_P() (TabularMDP.dense_P)"
        )
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


# --- registry parameters shared by ``ube`` and ``count-bonus`` (:mod:`optplan.agents.registry`)

MEAN_MODEL_PARAMS = (
    Param("mode", "str", "auto", "'episodic' (layered envs), 'continuing', 'auto' (by the env)"),
    Param(
        "discount",
        "float",
        None,
        "planning gamma; unset: the env's (ube-chain, a discounted "
        "model), else 1 episodic / 0.9 continuing",
    ),
    Param(
        "sigma",
        "float",
        None,
        "known reward noise sd; unset: the env's per-pair reward_sd (ube-chain), else 1",
    ),
    Param("prior_var", "float", None, "prior variance of each mean reward; unset: flat prior"),
    Param("transitions", "str", "dirichlet", "'dirichlet' (learned) or 'known' (the env's P)"),
    Param("transition_prior", "float", None, "Dirichlet pseudo-count per next state; 1/S"),
)
UPDATE_EVERY = Param("update_every", "int", 1, "continuing mode: steps between plans")


def mean_model_args(env, who: str, params: dict) -> dict:
    """The constructor arguments of the UBE and count-bonus agents on ``env`` from the registry
    ``params``: the mode from the model's shape, the discount and noise sd the environment
    declares (``discount``, ``reward_sd``) unless given, and known transitions on request; the
    parameters of :data:`MEAN_MODEL_PARAMS` are taken from ``params``, the rest passed on."""
    mode, discount, sigma, prior_var, transitions, transition_prior = (
        params.pop(p.name) for p in MEAN_MODEL_PARAMS
    )
    L, S, A, mask = env_shape(env)
    model = env_model(env)
    base = getattr(env, "unwrapped", model)
    if mode not in ("auto", "episodic", "continuing"):
        raise OptplanError(f"mode must be 'auto', 'episodic' or 'continuing', got {mode!r}")
    if mode == "episodic" and L is None:
        raise OptplanError(f"{who}: episodic mode needs a finite-horizon (layered) environment")
    if mode == "continuing" and L is not None:
        raise OptplanError(f"{who}: continuing mode needs a continuing environment")
    if transitions not in ("dirichlet", "known"):
        raise OptplanError(f"transitions must be 'dirichlet' or 'known', got {transitions!r}")
    if discount is None:
        discount = getattr(base, "discount", None)
        if discount is None:
            discount = model.discount if L is None else 1.0
        if discount is None:
            discount = 0.9
    if sigma is None:
        sigma = getattr(base, "reward_sd", 1.0)
    return {
        "n_states": S,
        "n_actions": A,
        "n_layers": L,
        "discount": discount,
        "sigma": sigma,
        "prior_var": prior_var,
        "known_transitions": env_transitions(model) if transitions == "known" else None,
        "transition_prior": transition_prior,
        "action_mask": mask,
        **params,
    }


def check_scale(name: str, value) -> float:
    """``zeta`` / ``beta``: a finite number >= 0."""
    return check_positive(name, value, allow_zero=True)
