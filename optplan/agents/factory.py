"""One way to build an agent: :func:`make_agent` (name, environment or model, parameters).

Every agent optplan ships is registered here under the name sweeps, ``optplan run`` and the
figures use (``"mdp-ucb"``, ``"psrl"``, ``"ravi-ucb"`` ...), with its typed, documented
parameters (:class:`Param`). A builder reads from the environment only what the agent is
allowed to know: the sizes ``S``, ``A`` (and ``L`` for a layered model), the admissible
actions, and what the algorithm assumes known -- the mean-reward matrix ``R[s, a]`` for the
index agents (MDP-UCB, OLP, MDP-DMED, MDP-PS) and RAVI-UCB, the discount of a discounted
model, the start distribution of an episodic one. The environment is duck-typed (this layer
never imports :mod:`optplan.envs`): anything exposing its true model as ``.unwrapped.mdp``
or ``.mdp`` (every optplan environment), a Gymnasium toy-text environment (its table is
converted by :func:`~optplan.bridges.from_gymnasium`), or a
:class:`~optplan.mdp.TabularMDP` / :class:`~optplan.mdp.FiniteHorizonMDP` itself.

The experiments registry (:mod:`optplan.experiments.registry`) holds this same table
(:data:`AGENTS`): a sweep's agent and ``make_agent`` go through the same builder with the same
defaults. :class:`Param` and :class:`Component` are generic; the registry uses them for
environments too.

Examples
--------
>>> import optplan as op
>>> from optplan.agents import make_agent
>>> from optplan.generators import riverswim
>>> mdp = riverswim(6)
>>> make_agent("mdp-ucb", mdp)                      # rewards = mdp.R, the known means
MDPUCB(S=6, A=2, method='fast')
>>> type(make_agent("epsilon-greedy", mdp, epsilon=0.05)).__name__
'EpsilonGreedyQ'
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from .._checks import OptplanError, OptplanTypeError, check_choice, check_real
from .._params import Component, Param
from ..mdp import FiniteHorizonMDP, TabularMDP
from ..modelfile import load_counts
from .baselines import OracleAgent, RandomAgent
from .bayes_models import ContinuingPSRL, ContinuingUBE, MomentMatching
from .bql import BayesianQLearning
from .index_agents import MDPDMED, MDPPS, MDPUCB, OLP
from .k_learning import PSRL, KLearning
from .qlearning import EpsilonGreedyQ, SoftQ
from .ravi import RAVIUCB, RAVIUCBLinear, default_eta
from .ube import UBE, CountBonus
from .ucrl import KLUCRL, UCRL2

__all__ = [
    "Param",
    "Component",
    "AGENTS",
    "register_agent",
    "make_agent",
    "agent_names",
    "env_model",
    "env_shape",
]

AGENTS: dict[str, Component] = {}


def register_agent(name: str, build: Callable, params=(), doc: str = "") -> Component:
    """Add an agent builder ``build(env, criterion, **params) -> Agent``."""
    comp = Component(name, build, tuple(params), doc)
    AGENTS[name] = comp
    return comp


def agent_names() -> list[str]:
    """The registered agents' names, sorted."""
    return sorted(AGENTS)


def make_agent(name: str, env, *, criterion: str | None = None, **params):
    """Build the registered agent ``name`` for ``env``: the one way to build any agent.

    Parameters
    ----------
    name : str
        A registered agent (:func:`agent_names`; ``optplan run --list`` prints them with
        their parameters): ``"random"``, ``"oracle"``, ``"epsilon-greedy"``, ``"soft-q"``,
        ``"k-learning"``, ``"psrl"``, ``"ube"``, ``"count-bonus"``, ``"mdp-ucb"``, ``"olp"``,
        ``"mdp-dmed"``, ``"mdp-ps"``, ``"ucrl2"``, ``"kl-ucrl"``, ``"ucrl2-discounted"``,
        ``"ravi-ucb"``, ``"ravi-ucb-linear"``, ``"bql"``, ``"psrl-continuing"``,
        ``"ube-continuing"``, ``"moment-matching"``, and any added by :func:`register_agent`.
    env : environment or model
        What the agent will act in: an optplan environment (or any environment exposing
        ``.unwrapped.mdp``), a Gymnasium toy-text environment, or a ``TabularMDP`` /
        ``FiniteHorizonMDP``. The agent reads its sizes, admissible actions and what its
        algorithm assumes known (e.g. the mean rewards ``R[s, a]`` of the index agents)
        from the model; environment attributes such as ``discount``, ``reward_sd`` or
        ``features`` are used where an agent's defaults come from them.
    criterion : str, optional
        Only the oracle uses it: the criterion whose optimal policy it follows (default:
        the model's own).
    **params
        The agent's parameters, by name, checked against its table (kind, known name);
        unset ones take their defaults. ``describe()`` in :mod:`optplan.experiments.registry`
        lists them.

    Returns
    -------
    Agent

    Raises
    ------
    ValueError
        Unknown agent name or parameter (the message lists the known ones), a parameter of
        the wrong kind, or an agent that does not fit the environment (e.g. an episodic agent
        on a continuing model).
    TypeError
        ``env`` is neither a model nor an environment exposing one.

    Examples
    --------
    >>> from optplan.agents import make_agent
    >>> from optplan.generators import riverswim
    >>> make_agent("olp", riverswim(6), method="conic", solver="CLARABEL")
    OLP(S=6, A=2, method='conic')
    """
    if not isinstance(name, str) or name not in AGENTS:
        raise OptplanError(f"unknown agent {name!r} (known: {', '.join(agent_names())})")
    comp = AGENTS[name]
    where = f"make_agent({name!r})"
    env_model(env)  # a clear TypeError before any builder looks at env
    return comp.build(env, criterion, **comp.resolve(params, where))


# --- what an agent may read from an environment -------------------------------------------

#: Toy-text environments converted once (agents' builders and the oracle ask for the model).
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def env_model(env) -> TabularMDP | FiniteHorizonMDP:
    """The true model of ``env``: ``env`` itself when it is a model, else what it exposes as
    ``env.unwrapped.mdp`` (or ``env.mdp``).

    An environment without one but with a toy-text transition table ``env.unwrapped.P``
    (Gymnasium's FrozenLake, Taxi, CliffWalking, or a user environment of that form) is
    converted by :func:`~optplan.bridges.from_gymnasium` with ``terminal="restart"``: the
    continuing view of a run loop that resets the environment when an episode terminates.

    Raises
    ------
    TypeError
        ``env`` is neither a model nor an environment exposing one (the message says what was
        expected and what was given).
    """
    if isinstance(env, (TabularMDP, FiniteHorizonMDP)):
        return env
    from ..bridges import from_gymnasium, table_of

    inner = getattr(env, "unwrapped", env)
    mdp = getattr(inner, "mdp", None)
    if mdp is None and table_of(env) is not None:
        try:
            mdp = _CONVERTED.get(inner)
        except TypeError:  # not weakly referenceable: convert each time
            return from_gymnasium(env, terminal="restart")
        if mdp is None:
            mdp = _CONVERTED[inner] = from_gymnasium(env, terminal="restart")
        return mdp
    if not isinstance(mdp, (TabularMDP, FiniteHorizonMDP)):
        what = (
            f"the {type(env).__name__} {env!r}"
            if isinstance(env, (int, float, str))
            else f"{type(env).__name__} wrapping {type(inner).__name__}"
        )
        raise OptplanTypeError(
            f"env must be a TabularMDP / FiniteHorizonMDP or expose its true model as .mdp "
            f"(an optplan environment) or a toy-text transition table as .unwrapped.P (dict "
            f"P[s][a] = [(prob, next_state, reward, terminated), ...]); got {what}"
        )
    return mdp


# --- shape of an environment, as an agent may see it ----------------------------------------


def env_shape(env):
    """``(n_layers, n_states, n_actions, action_mask)`` of an environment's (or a model's) model.

    ``n_layers`` is ``None`` for a continuing model (mask ``(S, A)``) and ``L`` for a
    finite-horizon one (mask ``(L, S, A)``): observations there are indices within a layer,
    so learning agents index their tables by ``(layer, state)``.
    """
    mdp = env_model(env)
    L = mdp.horizon if isinstance(mdp, FiniteHorizonMDP) else None
    return L, mdp.n_states, mdp.n_actions, mdp.action_mask


# --- agents -----------------------------------------------------------------------------------


def _random(env, criterion):
    _, S, A, mask = env_shape(env)
    return RandomAgent(S, A, action_mask=mask)


def _oracle(env, criterion):
    return OracleAgent(env_model(env), criterion=criterion)


def _qlearning(cls, key):
    def build(env, criterion, discount, learning_rate, q_init, **kw):
        L, S, A, mask = env_shape(env)
        return cls(
            S,
            A,
            kw[key],
            discount=discount,
            learning_rate=learning_rate,
            q_init=q_init,
            action_mask=mask,
            n_layers=L,
        )

    return build


_Q_PARAMS = [
    Param("discount", "float", 0.99, "discount of the Q-learning target"),
    Param("learning_rate", "float", None, "constant step size; unset: 1/n(s, a)"),
    Param("q_init", "float", 0.0, "initial Q-values"),
]

register_agent("random", _random, [], "uniformly random admissible actions")
register_agent("oracle", _oracle, [], "optimal policy of the true model (regret ~ 0)")
register_agent(
    "epsilon-greedy",
    _qlearning(EpsilonGreedyQ, "epsilon"),
    [Param("epsilon", "float", 0.1, "exploration probability"), *_Q_PARAMS],
    "Q-learning with epsilon-greedy actions",
)
register_agent(
    "soft-q",
    _qlearning(SoftQ, "temperature"),
    [Param("temperature", "float", 0.05, "Boltzmann temperature"), *_Q_PARAMS],
    "Q-learning with Boltzmann (softmax) actions",
)


def _episodic_shape(env, who: str):
    L, S, A, mask = env_shape(env)
    if L is None:
        raise OptplanError(f"{who} is for episodic (finite-horizon) environments")
    if not mask.all():
        raise OptplanError(f"{who} assumes every action is admissible everywhere")
    return L, S, A, env_model(env).initial


def _transition_prior(prior: str, transition_prior):
    """The posterior's ``transition_prior`` from the sweep parameters ``prior`` and
    ``transition_prior`` (a pseudo-count, only with the Dirichlet prior)."""
    check_choice("prior", prior, ("dirichlet", "deterministic"))
    if prior == "deterministic":
        if transition_prior is not None:
            raise OptplanError(
                "transition_prior (a Dirichlet pseudo-count) does not apply with "
                f"prior = 'deterministic', got {transition_prior!r}"
            )
        return "deterministic"
    return transition_prior


def _k_learning(
    env,
    criterion,
    temperature,
    method,
    solver,
    sigma,
    prior_var,
    transition_prior,
    prior,
    bonus,
    span,
    unvisited,
):
    L, S, A, initial = _episodic_shape(env, "k-learning")
    return KLearning(
        L,
        S,
        A,
        temperature=temperature,
        method=method,
        solver=solver,
        sigma=sigma,
        prior_var=prior_var,
        transition_prior=_transition_prior(prior, transition_prior),
        initial=initial,
        bonus=bonus,
        span=span,
        unvisited=unvisited,
    )


def _psrl(env, criterion, sigma, prior_var, transition_prior, prior):
    L, S, A, initial = _episodic_shape(env, "psrl")
    return PSRL(
        L,
        S,
        A,
        sigma=sigma,
        prior_var=prior_var,
        transition_prior=_transition_prior(prior, transition_prior),
        initial=initial,
    )


_POSTERIOR = [
    Param("sigma", "float", 1.0, "reward noise scale (posterior and K-learning bonus)"),
    Param("prior_var", "float", 1.0, "prior variance of each mean reward (prior mean 0)"),
    Param("transition_prior", "float", None, "Dirichlet pseudo-count per next state; 1/S"),
    Param(
        "prior",
        "str",
        "dirichlet",
        "transitions: 'dirichlet' or 'deterministic' (one unknown next state per pair)",
    ),
]
register_agent(
    "k-learning",
    _k_learning,
    [
        Param("temperature", "str", "optimal", "'optimal' (problem 11) or 'schedule' (Eq. 10)"),
        Param("method", "str", "fast", "tau* by 'fast' or 'conic'"),
        Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
        *_POSTERIOR,
        Param("bonus", "str", "paper", "'paper' (Eq. 6 as printed) or 'posterior'"),
        Param("span", "float", None, "value span in the posterior bonus; unset: L - 1 - l"),
        Param("unvisited", "str", "hoeffding", "deterministic prior: 'hoeffding' or 'paper'"),
    ],
    "K-learning (k-learning Algorithm 1), episodic",
)
register_agent("psrl", _psrl, _POSTERIOR, "posterior sampling (PSRL), episodic")


def _mean_model_args(env, who, mode, discount, sigma, prior_var, transitions, transition_prior):
    """The shared arguments of the UBE and count-bonus agents on ``env``: the mode from the
    model's shape, the discount and noise sd the environment declares (``discount``,
    ``reward_sd``) unless given, and known transitions on request."""
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
        "known_transitions": model.P if transitions == "known" else None,
        "transition_prior": transition_prior,
        "action_mask": mask,
    }


def _ube(
    env,
    criterion,
    mode,
    zeta,
    discount,
    sigma,
    prior_var,
    transitions,
    transition_prior,
    local,
    reward_bound,
    update_every,
    method,
    solver,
):
    args = _mean_model_args(
        env, "ube", mode, discount, sigma, prior_var, transitions, transition_prior
    )
    if transitions == "known":
        reward_bound = None  # the local term is Var mu: no Q_max
    return UBE(
        zeta=zeta,
        local=local,
        reward_bound=reward_bound,
        update_every=update_every,
        method=method,
        solver=solver,
        **args,
    )


def _count_bonus(
    env,
    criterion,
    mode,
    beta,
    discount,
    sigma,
    prior_var,
    transitions,
    transition_prior,
    update_every,
):
    args = _mean_model_args(
        env, "count-bonus", mode, discount, sigma, prior_var, transitions, transition_prior
    )
    return CountBonus(beta=beta, update_every=update_every, **args)


_MEAN_MODEL = [
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
]
_UPDATE_EVERY = Param("update_every", "int", 1, "continuing mode: steps between plans")
register_agent(
    "ube",
    _ube,
    [
        _MEAN_MODEL[0],
        Param("zeta", "float", 1.0, "Thompson noise scale of Eq. 3"),
        *_MEAN_MODEL[1:],
        Param("local", "str", None, "local uncertainty rule (learned P): tabular, lemma1, draft"),
        Param("reward_bound", "float", 1.0, "declared |mean reward| bound, for Q_max (learned P)"),
        _UPDATE_EVERY,
        Param("method", "str", "fast", "the UBE by 'fast' or 'conic' (verification)"),
        Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
    ],
    "UBE Thompson sampling (uncertainty-bellman-equation Eq. 3)",
)
register_agent(
    "count-bonus",
    _count_bonus,
    [
        _MEAN_MODEL[0],
        Param("beta", "float", 0.1, "bonus scale: reward bonus beta log(t) sd / sqrt(n)"),
        *_MEAN_MODEL[1:],
        _UPDATE_EVERY,
    ],
    "count-bonus comparator of uncertainty-bellman-equation §3.2",
)


def _index_agent(cls):
    def build(env, criterion, method, solver, initial_counts):
        L, S, A, mask = env_shape(env)
        if L is not None:
            raise OptplanError(f"{cls.name} is for continuing (average-reward) environments")
        counts = load_counts(initial_counts, S, A) if initial_counts else None
        return cls(env_model(env).R, mask, initial_counts=counts, method=method, solver=solver)

    return build


_INDEX_PARAMS = [
    Param("method", "str", "fast", "index by 'fast' (closed form / root) or 'conic' (CVXPY)"),
    Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
    Param("initial_counts", "str", "", "TOML file with T[x][a][y] pseudo-counts (rigged start)"),
]
for _cls, _doc in (
    (MDPUCB, "MDP-UCB: KL-ball index (accelerating-ucb-indices-mdp Eq. 2)"),
    (OLP, "OLP: L1-ball index (Tewari & Bartlett)"),
    (MDPDMED, "MDP-DMED: KL-minimization discrepancies (Theorem 3 conventions)"),
    (MDPPS, "MDP-PS: Dirichlet posterior samples of the current state's rows"),
):
    register_agent(_cls.name, _index_agent(_cls), _INDEX_PARAMS, _doc)


def _ucrl_agent(cls):
    def build(env, criterion, delta, r_max, method, solver):
        L, S, A, mask = env_shape(env)
        if L is not None:
            raise OptplanError(f"{cls.name} is for continuing (average-reward) environments")
        return cls(S, A, delta=delta, r_max=r_max, action_mask=mask, method=method, solver=solver)

    return build


_UCRL_PARAMS = [
    Param("delta", "float", 0.05, "confidence level of the sets"),
    Param("r_max", "float", 1.0, "reward range the reward radius is scaled by"),
    Param("method", "str", "fast", "optimistic MDP by 'fast' (EVI) or 'conic' (CVXPY)"),
    Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
]
register_agent(
    UCRL2.name,
    _ucrl_agent(UCRL2),
    _UCRL_PARAMS,
    "UCRL2 (Jaksch et al.): L1 confidence sets, doubling episodes, EVI",
)
register_agent(
    KLUCRL.name,
    _ucrl_agent(KLUCRL),
    _UCRL_PARAMS,
    "KL-UCRL (Filippi et al.): KL confidence sets, doubling episodes, EVI",
)


def _env_discount(env, who: str, discount) -> float:
    """``discount`` if given, else the discount of the environment's model (the ``gamma`` of
    :class:`~optplan.envs.DiscountedResets`)."""
    if discount is None:
        discount = env_model(env).discount
        if discount is None:
            raise OptplanError(
                f"{who}: set discount (the environment's model has none; use an environment "
                "with discounted resets, e.g. riverswim-resets)"
            )
    return discount


def _ucrl2_discounted(env, criterion, delta, r_max, discount, known_rewards, method, solver):
    L, S, A, mask = env_shape(env)
    if L is not None:
        raise OptplanError("ucrl2-discounted is for continuing environments")
    return UCRL2(
        S,
        A,
        delta=delta,
        r_max=r_max,
        action_mask=mask,
        method=method,
        solver=solver,
        criterion="discounted",
        discount=_env_discount(env, "ucrl2-discounted", discount),
        rewards=env_model(env).R if known_rewards else None,
    )


_DISCOUNT_FROM_ENV = Param(
    "discount", "float", None, "planning gamma; unset: the environment's (its resets' gamma)"
)
register_agent(
    "ucrl2-discounted",
    _ucrl2_discounted,
    [
        *_UCRL_PARAMS[:2],
        _DISCOUNT_FROM_ENV,
        Param("known_rewards", "bool", True, "use the true mean rewards (no reward radius)"),
        *_UCRL_PARAMS[2:],
    ],
    "UCRL2-style discounted optimistic planning: UCRL2's L1 radii and doubling episodes, the "
    "discounted optimistic MDP (EVI + exact finish)",
)


# --- RAVI-UCB (ravi-ucb-optimistic-planning-regularized-dp; issue 16) ---------------------------


def _ravi_args(env, who, discount, horizon, eta, eta_scale, beta, beta_scale, delta):
    """The shared arguments of the RAVI-UCB agents: the discount (the environment's unless
    given), ``T``, ``eta = eta_scale * (eta or Theorem 4.1's)``."""
    L, S, A, mask = env_shape(env)
    if L is not None:
        raise OptplanError(f"{who} is for continuing environments (with discounted resets)")
    if horizon is None:
        raise OptplanError(
            f"{who}: set horizon, the T that the default eta and beta are tuned for (e.g. the "
            "run's steps)"
        )
    if horizon < 1:
        raise OptplanError(f"{who}: horizon must be a positive integer, got {horizon!r}")
    gamma = _env_discount(env, who, discount)
    gamma = check_real("discount", gamma, 0.0, 1.0, low_open=True, high_open=True)
    eta_scale = check_real("eta_scale", eta_scale, 0.0, None, low_open=True)
    if eta is None:
        eta = default_eta(A, 1.0 / (1.0 - gamma), horizon)
    else:
        eta = check_real("eta", eta, 0.0, None, low_open=True)
    return {
        "discount": gamma,
        "horizon": horizon,
        "eta": eta_scale * eta,
        "beta": beta,
        "beta_scale": beta_scale,
        "delta": delta,
        "action_mask": mask,
    }


def _ravi_ucb(
    env, criterion, discount, horizon, beta_scale, beta, eta_scale, eta, delta, known_rewards
):
    args = _ravi_args(env, "ravi-ucb", discount, horizon, eta, eta_scale, beta, beta_scale, delta)
    mdp = env_model(env)
    rewards = mdp.R if known_rewards else None
    return RAVIUCB(mdp.n_states, mdp.n_actions, rewards=rewards, **args)


def _ravi_ucb_linear(
    env,
    criterion,
    discount,
    horizon,
    beta_scale,
    beta,
    eta_scale,
    eta,
    delta,
    lam,
    theta_bound,
):
    args = _ravi_args(
        env, "ravi-ucb-linear", discount, horizon, eta, eta_scale, beta, beta_scale, delta
    )
    features = getattr(getattr(env, "unwrapped", env), "features", None)
    if features is None:
        raise OptplanError(
            "ravi-ucb-linear needs an environment with known features psi(x, a, x') "
            f"(e.g. linear-mixture), got {env!r}"
        )
    return RAVIUCBLinear(features, env_model(env).R, lam=lam, theta_bound=theta_bound, **args)


_RAVI_PARAMS = [
    _DISCOUNT_FROM_ENV,
    Param("horizon", "int", None, "T of Theorem 4.1's eta and the bonus's beta (required)"),
    Param("beta_scale", "float", 1.0, "multiplies beta"),
    Param("beta", "float", None, "bonus scale beta; unset: the paper's (Lemma 5.1 / Thm 5.6)"),
    Param("eta_scale", "float", 1.0, "multiplies eta"),
    Param("eta", "float", None, "learning rate; unset: Theorem 4.1's sqrt(2 log A / (H^2 T))"),
    Param("delta", "float", None, "confidence of the bonus; unset: 1 / T"),
]
register_agent(
    "ravi-ucb",
    _ravi_ucb,
    [
        *_RAVI_PARAMS,
        Param("known_rewards", "bool", True, "the true mean rewards (the paper); else learned"),
    ],
    "RAVI-UCB, tabular (Algorithm 2): one regularized optimistic step per reset epoch",
)
register_agent(
    "ravi-ucb-linear",
    _ravi_ucb_linear,
    [
        *_RAVI_PARAMS,
        Param("lam", "float", 1.0, "ridge regularization lambda"),
        Param("theta_bound", "float", 1.0, "bound B on ||theta||_2 (raised to the features')"),
    ],
    "RAVI-UCB for linear mixture MDPs (Algorithm 3); needs the env's features (linear-mixture)",
)


# --- the Bayesian-methods agents (bayesian-methods-tabular-rl; issue 14) ----------------------


def _continuing_shape(env, who: str):
    L, S, A, mask = env_shape(env)
    if L is not None:
        raise OptplanError(f"{who} is for continuing environments, got a finite-horizon one")
    return S, A, mask


def _ng_prior(prior_mu0, prior_lam, prior_alpha, prior_beta):
    return (prior_mu0, prior_lam, prior_alpha, prior_beta)


_NG_PRIOR = [
    Param("prior_mu0", "float", 0.0, "Normal-Gamma prior mu0 (draft App. A: 0)"),
    Param("prior_lam", "float", 4.0, "Normal-Gamma prior lambda (> 0; draft: 4)"),
    Param("prior_alpha", "float", 3.0, "Normal-Gamma prior alpha (> 0, > 1 for UBE/MM; draft: 3)"),
    Param("prior_beta", "float", 3.0, "Normal-Gamma prior beta (> 0; draft: 3)"),
]
_DRAFT_GAMMA = Param("discount", "float", 0.9, "planning gamma (the draft's 0.9)")
_MODEL_POSTERIOR = [
    Param("update_every", "int", 1, "steps between posterior updates and plans (>= 1)"),
    *_NG_PRIOR,
    Param("transition_prior", "float", 1.0, "Dirichlet pseudo-count per next state (all states)"),
    Param("sum_of_squares", "str", "correct", "NG batch update: 'correct' or 'public-code' slip"),
]
_CONIC = [
    Param("method", "str", "fast", "the uncertainty equation by 'fast' or 'conic' (verification)"),
    Param("solver", "str", None, "conic solver (CLARABEL, ECOS, SCS)"),
]


def _bql(
    env,
    criterion,
    discount,
    prior_mu0,
    prior_lam,
    prior_alpha,
    prior_beta,
    moment_match,
    n_samples,
    action,
    quantile,
):
    S, A, mask = _continuing_shape(env, "bql")
    return BayesianQLearning(
        S,
        A,
        discount=discount,
        prior=_ng_prior(prior_mu0, prior_lam, prior_alpha, prior_beta),
        moment_match=moment_match,
        n_samples=n_samples,
        action=action,
        quantile=quantile,
        action_mask=mask,
    )


def _model_args(env, who: str, kw: dict) -> dict:
    """The posterior and shape arguments shared by the model-based agents (from ``kw``)."""
    S, A, mask = _continuing_shape(env, who)
    prior = _ng_prior(*(kw.pop(p.name) for p in _NG_PRIOR))
    return {"n_states": S, "n_actions": A, "prior": prior, "action_mask": mask, **kw}


def _psrl_continuing(env, criterion, discount, planning, **kw):
    if planning not in ("discounted", "average"):
        raise OptplanError(f"planning must be 'discounted' or 'average', got {planning!r}")
    args = _model_args(env, "psrl-continuing", kw)
    return ContinuingPSRL(discount=None if planning == "average" else discount, **args)


def _ube_continuing(env, criterion, **kw):
    return ContinuingUBE(**_model_args(env, "ube-continuing", kw))


def _moment_matching(env, criterion, **kw):
    return MomentMatching(**_model_args(env, "moment-matching", kw))


register_agent(
    "bql",
    _bql,
    [
        _DRAFT_GAMMA,
        *_NG_PRIOR,
        Param("moment_match", "str", "quadrature", "'quadrature' (exact) or 'monte-carlo' (draft)"),
        Param("n_samples", "int", 1000, "draws of the Monte-Carlo moment match"),
        Param("action", "str", "sample", "'sample' (Thompson, the draft) or 'quantile'"),
        Param(
            "quantile", "float", 0.9, "upper quantile of each action's marginal (action=quantile)"
        ),
    ],
    "Bayesian Q-learning (Dearden et al.; bayesian-methods-tabular-rl App. BQL), continuing",
)
register_agent(
    "psrl-continuing",
    _psrl_continuing,
    [
        _DRAFT_GAMMA,
        Param("planning", "str", "discounted", "'discounted' (gamma) or 'average' reward"),
        *_MODEL_POSTERIOR,
    ],
    "continuing PSRL on Dirichlet / Normal-Gamma (s, a, s') posteriors (bayesian-methods)",
)
register_agent(
    "ube-continuing",
    _ube_continuing,
    [
        Param("zeta", "float", 0.1, "Thompson noise scale (the draft's summary: 0.1)"),
        _DRAFT_GAMMA,
        Param("local", "str", "draft", "local uncertainty: 'draft' (Q_max^2 Var/E) or 'lemma1'"),
        Param("reward_bound", "float", 1.0, "declared |mean reward| bound: Q_max = it / (1 - g)"),
        *_MODEL_POSTERIOR,
        *_CONIC,
    ],
    "UBE without unrolling on the Normal-Gamma / Dirichlet posterior (bayesian-methods App. UBE)",
)
register_agent(
    "moment-matching",
    _moment_matching,
    [
        Param("zeta", "float", 1.0, "Thompson noise scale (the draft: 1)"),
        Param("std", "str", "public-code", "noise sd: 'public-code' (sigma/gamma) or 'paper'"),
        _DRAFT_GAMMA,
        *_MODEL_POSTERIOR,
        *_CONIC,
    ],
    "moment matching across the Bellman equation (bayesian-methods App. MM / write-up A.4)",
)
