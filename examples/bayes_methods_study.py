"""The Bayesian-methods study (bayesian-methods-tabular-rl): PSRL, BQL, UBE,
moment matching and epsilon-greedy Q-learning on DeepSea-chain, WideNarrow and PriorMDP, in two
settings.

Settings (``--setting``, default ``both``; docs/bayesian-methods.md, "The two settings"):

- ``optplan``: ``models/sweeps/bayes-<config>.toml``, optplan's setting: BQL's moment match by
  exact quadrature, the oracle run sharing the agent's environment stream (the reward noise
  cancels in the draft's regret), T steps, PriorMDPs from ``default_rng``, the correct
  Normal-Gamma batch update.
- ``published``: ``models/sweeps/bayes-published-<config>.toml``, the public code's setting:
  Monte-Carlo moment match with 1,000 draws, the oracle run with noise of its own, T + 1 steps,
  the public code's PriorMDPs (``sampler = "public-code"``) and its Normal-Gamma update.

One file per environment configuration (the horizon T, the agents' ``update_every`` and UBE's
``Q_max`` differ per environment), 13 configurations per setting: ``deepsea-n4`` ...
``deepsea-n12``, ``widenarrow-w6`` ... ``widenarrow-w12``, ``priormdp-s0`` ... ``priormdp-s3``.
Each sweep runs into ``results/<sweep name>`` (resumable: finished tasks are skipped); the script
prints the wall time of each sweep, the results tables of each setting (the draft's normalized
regret ``sum(r_oracle - r_agent) / sum(r_oracle)``, mean ± population sd over the 10 seeds as
the draft reports it, and optplan's exact discounted pseudo-regret), the draft's claims checked
one by one in each setting and, with ``--setting both``, the two settings side by side. It
writes into ``--out DIR`` (default ``results/figures/``, which git ignores; ``--out
examples/figures`` replaces the committed figures):

- ``bayes-normalized-regret.png`` (optplan's setting), ``bayes-normalized-regret-published.png``
  (the public code's): normalized regret per environment and agent, mean ± sd;
- ``bayes-regret-curves.png`` (optplan's setting): exact pseudo-regret curves, mean and 95% band;
- ``bayes-calibration.png``: UBE's ``u`` and moment matching's ``sigma~^2`` against the
  posterior variance of ``Q^pi`` estimated by Monte-Carlo over posterior draws (below).

Run from the repository root::

    python examples/bayes_methods_study.py --jobs 2                      # both settings
    python examples/bayes_methods_study.py --setting published --jobs 2  # the public code's
    python examples/bayes_methods_study.py --table      # tables and figures from results/
    python examples/bayes_methods_study.py --quick      # 2 seeds, T / 10: results/bayes-quick/
    python examples/bayes_methods_study.py --q-values   # exact Q* of DeepSeaChain(4), WN(1, 6)
    python examples/bayes_methods_study.py --models     # the PriorMDPs of both settings

Calibration (``--calibration-only`` runs only this part): on DeepSea-chain N = 8 (agent seed
0, update_every = 9, 10,000 steps) the UBE agent and the moment-matching agent each run once;
at log-spaced plans, on the agent's own posterior (Dirichlet transitions, Normal-Gamma mean
rewards per (s, a, s')), with ``pi`` the greedy policy of the posterior-mean model: UBE's ``u``
(the draft's local term, ``Q_max = 1 / (1 - gamma) = 10``), its part due to the ``Q_max`` term
alone (the UBE is linear in ``nu``), MM's ``sigma~^2`` and the "true" posterior variance of
``Q^pi(s, a)``: ``K = 2000`` draws ``P ~ Dirichlet``, ``mu ~ NG``, ``Q^pi`` of each draw solved
exactly (``V = (I - gamma P_pi)^-1 R_pi``, ``Q = R + gamma P V``), the sample variance.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import optplan as op
from optplan.envs import DeepSeaChain, PriorMDP, WideNarrow
from optplan.experiments.metrics import oracle_step_rewards
from optplan.experiments.oracle import solve_oracle
from optplan.experiments.stats import mean_ci
from optplan.modelfile import tomllib
from optplan.plots.plots import new_figure, save_figure
from optplan.problems.moment_matching import MomentMatchingVariance
from optplan.problems.ube import UncertaintyBellman
from optplan.sweeps import load_results, load_sweep, run_sweep
from optplan.sweeps.registry import check_params, get_agent, get_env
from optplan.sweeps.sweep import sweep_from_dict
from optplan.uncertainty import dirichlet_variance_ratio_sum, local_draft

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "models" / "sweeps"
DEFAULT_OUT = ROOT / "results" / "figures"
#: Environment configurations in table order.
CONFIGS = (
    [f"deepsea-n{n}" for n in (4, 6, 8, 10, 12)]
    + [f"widenarrow-w{w}" for w in (6, 8, 10, 12)]
    + [f"priormdp-s{s}" for s in range(4)]
)
#: Each setting's sweep-file prefix: ``<prefix>-<config>.toml``.
SETTINGS = {"optplan": "bayes", "published": "bayes-published"}
SETTING_TITLES = {
    "optplan": "optplan's setting (exact moment match, shared oracle noise, T steps)",
    "published": "the public code's setting (Monte-Carlo BQL, independent oracle noise, "
    "T + 1 steps, its PriorMDPs and NG update)",
}
#: The sweep files of optplan's setting, in table order.
NAMES = [f"bayes-{c}" for c in CONFIGS]


def sweep_names(setting: str, configs=CONFIGS) -> list[str]:
    """The sweep names of ``setting`` for ``configs``."""
    return [f"{SETTINGS[setting]}-{c}" for c in configs]


def config_of(name: str) -> str:
    """``deepsea-n4`` of ``bayes-deepsea-n4``, ``bayes-published-deepsea-n4`` (or itself)."""
    for prefix in ("quick-", "bayes-published-", "bayes-"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


FAMILIES = {
    "deepsea": "DeepSea-chain",
    "widenarrow": "WideNarrow (N = 1)",
    "priormdp": "PriorMDP 4x2",
}
BAYESIAN = ("PSRL", "BQL", "BQL (mu0 = 1.5)", "UBE (zeta = 0.1)", "MM (zeta = 1)")
EPS = "eps-greedy (0.5)"
GAMMA = 0.9


# --- running -----------------------------------------------------------------------------------


def quick_sweep(path: Path):
    """The sweep of ``path`` with 2 seeds and T / 10 (development runs)."""
    data = tomllib.loads(path.read_text())
    data["name"] = "quick-" + data["name"]
    data["seeds"] = 2
    data["steps"] = max(100, data["steps"] // 10)
    return sweep_from_dict(data, source=str(path))


def run_all(names, out_root: Path, jobs: int, quick: bool) -> dict:
    """Run (or resume) each sweep; returns ``{name: wall time in s}`` of those that ran."""
    log = out_root / "bayes-study-walltimes.json"
    times = json.loads(log.read_text()) if log.exists() else {}
    for name in names:
        path = SWEEPS / f"{name}.toml"
        sweep = quick_sweep(path) if quick else load_sweep(path)
        rep = run_sweep(sweep, out_root / name, jobs=jobs, quiet=True)
        print(f"  {name:<24} {rep}", file=sys.stderr)
        if rep.ran:
            prev = times.get(name, {"wall_s": 0.0, "ran": 0})
            times[name] = {
                "wall_s": round(prev["wall_s"] + rep.wall_time, 1),
                "ran": prev["ran"] + rep.ran,
                "total": rep.total,
            }
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(json.dumps(times, indent=1))
    return times


# --- tables ------------------------------------------------------------------------------------


def collect(names, out_root: Path) -> dict:
    """``{env label: {agent label: {metric: array over seeds}}}`` plus the env's family."""
    data = {}
    for name in names:
        d = out_root / name
        if not (d / "sweep.json").exists():
            continue
        res = load_results(d)
        for (agent, env), recs in res.groups().items():
            row = data.setdefault(env, {"_family": config_of(name).split("-")[0], "_name": name})
            ts = [res.curve_matrix([r], "regret") for r in recs]
            row[agent] = {
                "draft": np.array([r["summary"]["draft_normalized_regret"] for r in recs]),
                "regret": np.array([r["summary"]["regret"] for r in recs]),
                "normalized": np.array([r["summary"]["normalized_regret"] for r in recs]),
                "curves": (ts[0][0], np.vstack([y for _, y in ts])),
                "n": len(recs),
            }
    return data


def agents_of(data) -> list[str]:
    out = []
    for row in data.values():
        out += [a for a in row if not a.startswith("_") and a not in out]
    return out


def msd(x) -> tuple[float, float]:
    """Mean and population sd (the draft's spread)."""
    return float(np.mean(x)), float(np.std(x))


def tied(a, b) -> bool:
    """Means within two standard errors of their difference (sample sds, Welch)."""
    se = np.sqrt(np.var(a, ddof=1) / len(a) + np.var(b, ddof=1) / len(b))
    return abs(np.mean(a) - np.mean(b)) <= 2 * se


def table(data, metric: str, fmt: str) -> list[str]:
    agents = agents_of(data)
    lines = [
        "| environment | " + " | ".join(agents) + " | best |",
        "|---|" + "---|" * (len(agents) + 1),
    ]
    for env, row in data.items():
        have = [a for a in agents if a in row]
        best = min(have, key=lambda a: np.mean(row[a][metric]))
        cells = []
        for a in agents:
            if a not in row:
                cells.append("-")
                continue
            m, s = msd(row[a][metric])
            c = f"{m:{fmt}} ± {s:{fmt}}"
            if a == best:
                c = f"**{c}**"
            elif tied(row[a][metric], row[best][metric]):
                c = f"*{c}*"
            cells.append(c)
        n = min(row[a]["n"] for a in have)
        lines.append(f"| {env} (n={n}) | " + " | ".join(cells) + f" | {best} |")
    return lines


def claims(data, calib) -> list[str]:
    out = []
    m = lambda env, a, k="draft": float(np.mean(data[env][a][k]))  # noqa: E731
    envs = list(data)
    # 1. PSRL best or tied
    bad = []
    for env in envs:
        row = data[env]
        best = min((a for a in row if not a.startswith("_")), key=lambda a: m(env, a))
        if best != "PSRL" and not tied(row["PSRL"]["draft"], row[best]["draft"]):
            bad.append(f"{env}: {best} {m(env, best):.3f} vs PSRL {m(env, 'PSRL'):.3f}")
    out.append(
        f"1. PSRL best or tied (2 SE of the difference) on {len(envs) - len(bad)}/{len(envs)} "
        f"environments" + (f"; not on: {'; '.join(bad)}" if bad else "")
    )
    # 2. every Bayesian method beats eps-greedy
    losses = []
    for env in envs:
        for a in BAYESIAN:
            if a in data[env] and m(env, a) >= m(env, EPS):
                losses.append(f"{env}: {a} {m(env, a):.3f} >= eps {m(env, EPS):.3f}")
    n_pairs = sum(a in data[e] for e in envs for a in BAYESIAN)
    close = [
        f"{env}: {a} {m(env, a):.3f} vs eps {m(env, EPS):.3f}"
        for env in envs
        for a in BAYESIAN
        if a in data[env] and tied(data[env][a]["draft"], data[env][EPS]["draft"])
    ]
    out.append(
        f"2. Bayesian method below eps-greedy (mean) in {n_pairs - len(losses)}/{n_pairs} "
        f"(environment, agent) pairs"
        + (f"; not: {'; '.join(losses)}" if losses else "")
        + f"; within 2 SE of eps-greedy: {len(close)}"
        + (f" ({'; '.join(close)})" if close else "")
    )
    # 3. BQL degrades with depth, depends on its prior
    ds = [e for e in envs if data[e]["_family"] == "deepsea"]
    out.append(
        "3. BQL on DeepSea-chain by N: "
        + ", ".join(f"{e.split('-')[-1]}: {m(e, 'BQL'):.3f}" for e in ds)
        + "; BQL (mu0 = 1.5): "
        + ", ".join(f"{e.split('-')[-1]}: {m(e, 'BQL (mu0 = 1.5)'):.3f}" for e in ds)
    )
    diffs = [
        f"{e}: {m(e, 'BQL'):.3f} vs {m(e, 'BQL (mu0 = 1.5)'):.3f}"
        + (" (tied)" if tied(data[e]["BQL"]["draft"], data[e]["BQL (mu0 = 1.5)"]["draft"]) else "")
        for e in envs
    ]
    out.append("   BQL prior (0, 4, 3, 3) vs mu0 = 1.5: " + "; ".join(diffs))
    if calib is not None:
        for run, rows in calib["runs"].items():
            last = rows[-1]
            out.append(
                f"4./5. calibration ({run} agent's posterior, step {last['step']}): "
                f"median over pairs of u / Var_MC = {last['ube_ratio_med']:.3g}, "
                f"of sigma~^2 / Var_MC = {last['mm_ratio_med']:.3g}; "
                f"Q_max term's share of u = {last['qmax_share']:.4f}; "
                "median |log10 ratio| over checkpoints: "
                f"UBE {calib['summary'][run]['ube_abslog']:.2f}, "
                f"MM {calib['summary'][run]['mm_abslog']:.2f}"
            )
    return out


# --- calibration -------------------------------------------------------------------------------


def q_pi_samples(agent, policy, K, rng) -> np.ndarray:
    """``Q^pi`` of ``K`` models drawn from the agent's posterior, ``(K, S, A)``."""
    S = agent.n_states
    P = agent.transitions.sample(rng, size=K)
    mu, _ = agent.rewards.sample(rng, size=K)
    R = np.einsum("kijl,kijl->kij", P, mu)
    idx = np.arange(S)
    P_pi = P[:, idx, policy, :]  # (K, S, S)
    R_pi = R[:, idx, policy]  # (K, S)
    V = np.linalg.solve(np.eye(S)[None] - GAMMA * P_pi, R_pi[..., None])[..., 0]
    return R + GAMMA * np.einsum("kijl,kl->kij", P, V)


def calibration(K: int = 2000, steps: int = 10_000, n: int = 8, seed: int = 0) -> dict:
    env_comp = get_env("deepsea-chain")
    runs = {}
    for label, name, params in (
        ("UBE", "ube-continuing", {"zeta": 0.1, "reward_bound": 1.0, "update_every": n + 1}),
        ("MM", "moment-matching", {"zeta": 1.0, "update_every": n + 1}),
    ):
        env = env_comp.build(0, **check_params(env_comp, {"n": n}, "calibration env"))
        comp = get_agent(name)
        agent = comp.build(env, None, **check_params(comp, params, "calibration agent"))
        agent.reset(np.random.default_rng(seed))
        rng = np.random.default_rng(1000 + seed)
        s, _ = env.reset(seed=seed)
        checkpoints = set(
            (np.unique(np.geomspace(n + 1, steps, 16).astype(int) // (n + 1)) * (n + 1)).tolist()
        )
        checkpoints.add(0)
        rows = []
        qm = 1.0 / (1 - GAMMA)
        for t in range(steps + 1):
            if t in checkpoints:
                alpha = agent.transitions.alpha
                mu0, var = agent.rewards.mu0, agent.rewards.variance
                pbar = agent.transitions.mean
                R = np.einsum("ijk,ijk->ij", pbar, mu0)
                pi_res = op.dp.policy_iteration(pbar, R, agent.action_mask, GAMMA, None)
                pi, values = pi_res.policy, pi_res.values
                nu = local_draft(alpha, mu0, var, qm)
                u = UncertaintyBellman(pbar, pi, nu, GAMMA).solve("fast").x
                nu_q = qm**2 * dirichlet_variance_ratio_sum(alpha)
                u_q = UncertaintyBellman(pbar, pi, nu_q, GAMMA).solve("fast").x
                mm = (
                    MomentMatchingVariance(
                        alpha=alpha,
                        reward_mean=mu0,
                        reward_var=var,
                        policy=pi,
                        discount=GAMMA,
                        values=values,
                    )
                    .solve("fast")
                    .x
                )
                Q = q_pi_samples(agent, pi, K, rng)
                var_mc = Q.var(axis=0, ddof=1)
                r_u, r_m = u / var_mc, mm / var_mc
                rows.append(
                    {
                        "step": t,
                        "var_mc": float(var_mc.mean()),
                        "u": float(u.mean()),
                        "u_qmax": float(u_q.mean()),
                        "mm": float(mm.mean()),
                        "qmax_share": float((u_q / u).mean()),
                        "ube_ratio_med": float(np.median(r_u)),
                        "ube_ratio_lo": float(r_u.min()),
                        "ube_ratio_hi": float(r_u.max()),
                        "mm_ratio_med": float(np.median(r_m)),
                        "mm_ratio_lo": float(r_m.min()),
                        "mm_ratio_hi": float(r_m.max()),
                    }
                )
            if t == steps:
                break
            a = agent.select_action(s)
            s2, r, *_ = env.step(a)
            agent.update(s, a, r, s2, False)
            s = s2
        runs[label] = rows
    summary = {
        run: {
            "ube_abslog": float(np.median([abs(np.log10(r["ube_ratio_med"])) for r in rows])),
            "mm_abslog": float(np.median([abs(np.log10(r["mm_ratio_med"])) for r in rows])),
        }
        for run, rows in runs.items()
    }
    return {"runs": runs, "summary": summary, "K": K, "steps": steps, "n": n, "seed": seed}


def draw_calibration(calib, out: Path) -> None:
    fig, axes = new_figure(ncols=3, nrows=2, width=4.6, height=3.5)
    for i, (run, rows) in enumerate(calib["runs"].items()):
        ax, bx, cx = axes[3 * i : 3 * i + 3]
        t = np.array([max(r["step"], 1) for r in rows])
        g = lambda k, rows=rows: np.array([r[k] for r in rows])  # noqa: E731
        ax.plot(t, g("var_mc"), "k-o", ms=3, lw=2, label="Var[Q^pi] (Monte-Carlo, K draws)")
        ax.plot(t, g("u"), "C0-s", ms=3, label="UBE u")
        ax.plot(t, g("mm"), "C1-^", ms=3, label="MM sigma~^2")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("step (the prior drawn at 1)")
        ax.set_ylabel("mean over the 16 (s, a) pairs")
        ax.set_title(f"{run} agent's posterior: variances", fontsize=9)
        ax.legend(fontsize=7)
        for key, c, lab in (("ube", "C0", "UBE u / Var_MC"), ("mm", "C1", "MM sigma~^2 / Var_MC")):
            bx.plot(t, g(f"{key}_ratio_med"), f"{c}-o", ms=3, label=f"{lab} (median)")
            bx.fill_between(
                t,
                g(f"{key}_ratio_lo"),
                g(f"{key}_ratio_hi"),
                color=c,
                alpha=0.2,
                lw=0,
                label=f"{lab} (min to max)",
            )
        bx.axhline(1.0, color="k", lw=1, ls="--", label="calibrated")
        bx.set_xscale("log")
        bx.set_yscale("log")
        bx.set_xlabel("step (the prior drawn at 1)")
        bx.set_ylabel("ratio to Var_MC[Q^pi] per pair")
        bx.set_title(f"{run} agent's posterior: calibration ratio", fontsize=9)
        bx.set_ylim(0.3, 1e7)
        bx.legend(fontsize=7, loc="upper left")
        cx.plot(t, g("qmax_share"), "C0-o", ms=3)
        cx.set_xscale("log")
        share = g("qmax_share")
        cx.set_ylim(0.9, 1.002)
        cx.annotate(
            f"between {share.min():.4f} and {share.max():.4f}",
            (0.05, 0.5),
            xycoords="axes fraction",
            fontsize=8,
        )
        cx.set_xlabel("step (the prior drawn at 1)")
        cx.set_ylabel("u(Q_max term alone) / u, mean over pairs")
        cx.set_title(f"{run} agent's posterior: UBE's Q_max term", fontsize=9)
    fig.suptitle(
        f"Calibration on DeepSea-chain N = {calib['n']}, gamma = 0.9, agent seed {calib['seed']}: "
        f"Var[Q^pi] by Monte-Carlo over K = {calib['K']} posterior draws (P ~ Dirichlet, "
        "mu ~ NG, Q^pi solved exactly per draw)\nagainst UBE's u (draft local term, "
        "Q_max = 10) and MM's sigma~^2, on the same posterior and greedy pi of its mean model",
        fontsize=9,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


# --- figures -----------------------------------------------------------------------------------


def draw_bars(data, out: Path, n_seeds: str, title: str = SETTING_TITLES["optplan"]) -> None:
    agents = agents_of(data)
    fams = [f for f in FAMILIES if any(r["_family"] == f for r in data.values())]
    fig, axes = new_figure(ncols=len(fams), width=5.2, height=4.0)
    for ax, fam in zip(axes, fams, strict=True):
        envs = [e for e, r in data.items() if r["_family"] == fam]
        x = np.arange(len(envs))
        width = 0.8 / len(agents)
        for j, a in enumerate(agents):
            ms = [msd(data[e][a]["draft"]) if a in data[e] else (np.nan, np.nan) for e in envs]
            ax.errorbar(
                x + (j - (len(agents) - 1) / 2) * width,
                [m for m, _ in ms],
                yerr=[s for _, s in ms],
                fmt="o",
                ms=4,
                capsize=2,
                color=f"C{j}",
                label=a,
            )
        ax.set_xticks(x, [e.split("-")[-1] for e in envs])
        ax.set_xlabel({"deepsea": "N", "widenarrow": "W", "priormdp": "model seed"}[fam])
        ax.axhline(0, color="k", lw=0.5)
        ax.set_ylabel("normalized regret (mean ± sd over seeds)")
        ax.set_title(FAMILIES[fam], fontsize=10)
    fig.set_layout_engine("constrained")  # room for the legend below the panels
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(agents), fontsize=8)
    fig.suptitle(
        "The draft's normalized regret sum(r_oracle - r_agent) / sum(r_oracle), gamma = 0.9, "
        f"{n_seeds} seeds per point, bars = ± population sd\n{title}",
        fontsize=10,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


def draw_curves(data, out: Path) -> None:
    envs = list(data)
    agents = agents_of(data)
    fig, axes = new_figure(ncols=5, nrows=3, width=3.6, height=2.9)
    slots = {}
    for fi, fam in enumerate(FAMILIES):
        for k, e in enumerate([e for e in envs if data[e]["_family"] == fam]):
            slots[e] = axes[5 * fi + k]
    free = [ax for ax in axes if ax not in slots.values()]
    for ax in free:
        ax.set_visible(False)
    handles = []
    for e, ax in slots.items():
        for j, a in enumerate(agents):
            if a not in data[e]:
                continue
            t, Y = data[e][a]["curves"]
            mean, half = mean_ci(Y, axis=0)
            (line,) = ax.plot(t, mean, color=f"C{j}", lw=1.4, label=f"{a} (n={Y.shape[0]})")
            ax.fill_between(t, mean - half, mean + half, color=f"C{j}", alpha=0.12, lw=0)
            if len(handles) < len(agents):
                handles.append(line)
        ax.set_title(e, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.set_xlim(0, t[-1])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("pseudo-regret", fontsize=8)
    if free:
        free[0].set_visible(True)
        free[0].axis("off")
        free[0].legend(handles=handles, loc="center", fontsize=9, title="mean, 95% band")
    fig.suptitle(
        "Exact cumulative pseudo-regret (discounted oracle, gamma = 0.9: the oracle's expected "
        "reward minus R[s_t, a_t], summed); mean and 95% band over seeds",
        fontsize=10,
    )
    save_figure(fig, out)
    print(f"wrote {out}")


# --- exact Q-values ----------------------------------------------------------------------------


def print_q_values() -> None:
    np.set_printoptions(precision=10, suppress=True, linewidth=120)
    cases = (("DeepSeaChain(4)", DeepSeaChain(4)), ("WideNarrow(1, 6)", WideNarrow(1, 6)))
    for label, env in cases:
        res = op.solve_discounted(env.mdp, method="fast")
        print(
            f"{label}: optimal Q at gamma = {env.mdp.discount} (rows: states, columns: actions;"
            f" -inf = inadmissible), policy {res.policy.tolist()}"
        )
        print(res.q)


def side_by_side(by_setting: dict, metric: str, fmt: str) -> list[str]:
    """Both settings' ``metric`` (mean ± population sd over seeds), two rows per environment."""
    agents = []
    for data in by_setting.values():
        agents += [a for a in agents_of(data) if a not in agents]
    lines = [
        "| environment | setting | " + " | ".join(agents) + " |",
        "|---|---|" + "---|" * len(agents),
    ]
    envs = []
    for data in by_setting.values():
        envs += [e for e in data if e not in envs]
    for env in envs:
        for setting, data in by_setting.items():
            row = data.get(env)
            cells = []
            for a in agents:
                if row is None or a not in row:
                    cells.append("-")
                    continue
                m, sd = msd(row[a][metric])
                cells.append(f"{m:{fmt}} ± {sd:{fmt}}")
            n = "-" if row is None else min(v["n"] for k, v in row.items() if not k[0] == "_")
            lines.append(f"| {env} | {setting} (n={n}) | " + " | ".join(cells) + " |")
    return lines


def setting_contrasts(by_setting: dict) -> list[str]:
    """What changes from optplan's setting to the public code's, agent by agent."""
    ours, pub = by_setting["optplan"], by_setting["published"]
    envs = [e for e in ours if e in pub]
    out = []
    for a in agents_of(ours):
        have = [e for e in envs if a in ours[e] and a in pub[e]]
        if not have:
            continue
        sd_ratio = [np.std(pub[e][a]["draft"]) / np.std(ours[e][a]["draft"]) for e in have]
        mean_ratio = [np.mean(pub[e][a]["draft"]) / np.mean(ours[e][a]["draft"]) for e in have]
        out.append(
            f"{a}: sd published / optplan, median over {len(have)} environments "
            f"{np.median(sd_ratio):.2f} (range {min(sd_ratio):.2f} to {max(sd_ratio):.2f}); "
            f"mean published / optplan {min(mean_ratio):.2f} to {max(mean_ratio):.2f}"
        )
    for setting, data in by_setting.items():
        ds = [e for e in data if data[e]["_family"] == "deepsea" and "BQL" in data[e]]
        if len(ds) >= 2:
            first, last = (
                np.mean(data[ds[0]]["BQL"]["draft"]),
                np.mean(data[ds[-1]]["BQL"]["draft"]),
            )
            out.append(
                f"BQL on DeepSea-chain, {setting} setting: {first:.3f} ({ds[0]}) to {last:.3f} "
                f"({ds[-1]}), {last / first:.1f}x"
            )
    return out


def print_prior_mdps() -> None:
    """The four PriorMDP models of each setting: optimal policy at gamma = 0.9, its long-run
    average reward (the oracle's expected reward 2,000 steps in), V*(s0) and the largest true
    mean reward (UBE's reward_bound)."""
    print("PriorMDP 4x2: sampler, optimal policy (gamma = 0.9), its average reward, V*(s0), R_max")
    for seed in range(4):
        for sampler in ("generator", "public-code"):
            env = PriorMDP(4, 2, seed, sampler=sampler)
            oracle = solve_oracle(env.mdp, "discounted")
            avg = oracle_step_rewards(env.mdp, oracle.result.policy, 2000)[-1]
            print(
                f"  seed {seed} {sampler:<12} policy {oracle.result.policy.tolist()} "
                f"average reward {avg:.4f}  V*(s0) {oracle.optimal_value:.4f}  "
                f"R_max {env.transition_reward_mean.max():.4f}"
            )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--setting",
        choices=("optplan", "published", "both"),
        default="both",
        help="optplan's setting (bayes-*.toml), the public code's (bayes-published-*.toml), "
        "or both, side by side (default)",
    )
    ap.add_argument("--table", action="store_true", help="no runs: tables/figures from results/")
    ap.add_argument("--quick", action="store_true", help="2 seeds, T / 10, results/bayes-quick/")
    ap.add_argument("--q-values", action="store_true", help="print exact Q* and exit")
    ap.add_argument(
        "--models", action="store_true", help="print both settings' PriorMDP models and exit"
    )
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="configurations, e.g. deepsea-n4 priormdp-s0 (or their sweep names; default: all 13)",
    )
    ap.add_argument("--no-calibration", action="store_true")
    ap.add_argument("--calibration-only", action="store_true")
    ap.add_argument("--draws", type=int, default=2000, help="posterior draws K (calibration)")
    ap.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="directory for the figures (default: results/figures/, untracked; "
        "--out examples/figures replaces the committed ones)",
    )
    args = ap.parse_args(argv)
    if args.q_values:
        print_q_values()
        return 0
    if args.models:
        print_prior_mdps()
        return 0
    configs = list(dict.fromkeys(config_of(n) for n in args.only)) if args.only else CONFIGS
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configuration {unknown[0]!r}; choose from {', '.join(CONFIGS)}")
    settings = ["optplan", "published"] if args.setting == "both" else [args.setting]
    out_root = ROOT / "results" / ("bayes-quick" if args.quick else "")
    suffix = "-quick" if args.quick else ""
    calib = None
    if not args.no_calibration:
        t0 = time.perf_counter()
        K, steps = (200, 1000) if args.quick else (args.draws, 10_000)
        calib = calibration(K=K, steps=steps)
        print(f"calibration: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        (out_root / "bayes-calibration.json").parent.mkdir(parents=True, exist_ok=True)
        (out_root / f"bayes-calibration{suffix}.json").write_text(json.dumps(calib, indent=1))
        draw_calibration(calib, args.out / f"bayes-calibration{suffix}.png")
        if args.calibration_only:
            return 0
    if not args.table:
        for setting in settings:
            run_all(sweep_names(setting, configs), out_root, args.jobs, args.quick)
    log = out_root / "bayes-study-walltimes.json"
    if log.exists():
        print("\nwall time per sweep (run_sweep's, summed over the invocations that ran tasks):")
        wanted = {n for st in settings for n in sweep_names(st, configs)}
        for name, rec in json.loads(log.read_text()).items():
            if name in wanted:
                print(
                    f"  {name:<32} {rec['wall_s']:7.1f} s  ({rec['ran']} of {rec['total']} tasks)"
                )
    if calib is None:
        p = out_root / f"bayes-calibration{suffix}.json"
        calib = json.loads(p.read_text()) if p.exists() else None
    by_setting = {}
    for setting in settings:
        data = collect(sweep_names(setting, configs), out_root)
        if not data:
            print(f"\n{SETTING_TITLES[setting]}: no results yet")
            continue
        by_setting[setting] = data
        print(f"\n=== {SETTING_TITLES[setting]} ===")
        print(
            "\nthe draft's normalized regret, mean ± population sd (bold: best mean; italic: "
            "within 2 SE of the best)"
        )
        print("\n".join(table(data, "draft", ".3f")))
        print("\nexact cumulative pseudo-regret at T (discounted oracle), mean ± population sd")
        print("\n".join(table(data, "regret", ".1f")))
        print("\noptplan's exact normalized pseudo-regret (regret / the oracle's expected reward)")
        print("\n".join(table(data, "normalized", ".3f")))
        print("\nclaims:")
        print("\n".join(claims(data, calib if setting == "optplan" else None)))
        n_seeds = "/".join(
            sorted(
                {str(v["n"]) for r in data.values() for k, v in r.items() if not k.startswith("_")}
            )
        )
        tag = "" if setting == "optplan" else "-published"
        draw_bars(
            data,
            args.out / f"bayes-normalized-regret{tag}{suffix}.png",
            n_seeds,
            SETTING_TITLES[setting],
        )
        if setting == "optplan":
            draw_curves(data, args.out / f"bayes-regret-curves{suffix}.png")
    if not by_setting:
        print("no results yet")
        return 1
    if len(by_setting) == 2:
        print("\n=== both settings side by side ===")
        print("\nthe draft's normalized regret, mean ± population sd over seeds")
        print("\n".join(side_by_side(by_setting, "draft", ".3f")))
        print("\nexact cumulative pseudo-regret at T, mean ± population sd over seeds")
        print("\n".join(side_by_side(by_setting, "regret", ".1f")))
        print("\nfrom optplan's setting to the public code's:")
        print("\n".join(setting_contrasts(by_setting)))
    if calib is not None and "optplan" in by_setting:
        for run, rows in calib["runs"].items():
            print(f"\ncalibration rows ({run} agent's posterior):")
            print(
                "  step   Var_MC(mean)   u(mean)  u_Qmax(mean)  sigma2(mean)  u/Var med"
                "  s2/Var med  Qmax share"
            )
            for r in rows:
                print(
                    f"  {r['step']:5d} {r['var_mc']:12.4g} {r['u']:9.4g} {r['u_qmax']:12.4g} "
                    f"{r['mm']:12.4g} {r['ube_ratio_med']:10.3g} {r['mm_ratio_med']:10.3g} "
                    f"{r['qmax_share']:10.4f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
