"""Verify your own solver: a KL-UCB index written by a user, checked by ``op.verify``.

The index is MDP-UCB's / KL-UCRL's ``C(p, v, d) = max { q.v : q in the simplex, KL(p||q) <=
d }``. Below is the kind of code a researcher writes for it (Filippi, Cappe & Garivier 2010:
``q ~ p / (nu - v)`` with the dual variable ``nu`` found by Newton's method), first with a
loose stopping tolerance, as many implementations ship it, then corrected. ``op.verify``
draws 2,000 instances from the hard regions (zeros and masses down to 1e-300 in ``p``, ties,
values up to 1e6, radii from 0 to 1e300, one state to 500), solves each with Clarabel, and
shrinks what fails to a minimal counterexample. Finally the same run checks optplan's own
fast path of every problem (the self-check).

    python examples/verify_kl_ucb.py              # n = 2000 for the user's code, 200 per problem
    python examples/verify_kl_ucb.py --quick      # n = 200 and 20 (a few minutes)
    python examples/verify_kl_ucb.py --self-check-n 2000 --json self-check.json   # 31 min

Exit status 0 when the loose version fails and the tight one passes (the example's claim);
the self-check's findings are printed, docs/tutorials/verify.md lists them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

import optplan as op
from optplan.verification import PROBLEMS, optplan_fast


def kl_ucb(p, v, d, tol=1e-12, max_iter=200):
    """``max q.v s.t. KL(p||q) <= d`` by Newton's method (the user's code).

    With ``nu = max_{p>0} v + w`` and ``q_x ~ p_x / (nu - v_x)``, the KL constraint is active
    where ``f(w) = sum p log(nu - v) + log sum p / (nu - v) = d``. Newton runs on ``F(u) =
    f(e^u) - d`` in ``u = log w`` (in log space throughout: ``w`` may be far below 1e-300),
    kept inside a bisection bracket, until ``|F| < tol``. A state with ``p = 0`` and a larger
    ``v`` takes the leftover mass when the budget reaches it (the boundary case).
    """
    p, v = np.asarray(p, dtype=float), np.asarray(v, dtype=float)
    lo, span = float(v.min()), float(np.ptp(v))
    if d <= 0 or span == 0:
        return float(p @ v)
    x = (v - lo) / span  # KL is invariant under affine maps of v: work in [0, 1]
    supp = p > 0
    ps, xs = p[supp], x[supp]
    top, best = float(xs.max()), float(x.max())
    with np.errstate(divide="ignore"):
        log_gap, log_p = np.log(top - xs), np.log(ps)  # log(0) = -inf at the top states

    def f(u):  # KL(p || q(u)) with log(nu - v) = logaddexp(u, log(top - v))
        log_w = np.logaddexp(u, log_gap)
        return float(ps @ log_w + logsumexp(log_p - log_w)), log_w

    if best > top:  # nu may stop at max v: the leftover goes to a zero-probability state
        if f(np.log(best - top))[0] <= d:
            return float(lo + span * (best - np.exp(ps @ np.log(best - xs) - d)))
    if not (xs < top).any():  # v constant on the support and nothing better outside
        return float(lo + span * top)
    var = max(float(ps @ (top - xs) ** 2 - (ps @ (top - xs)) ** 2), 0.0)
    if d < 1e-10:  # C = p.v + sqrt(2 Var d) + O(d): f cancels below 1e-16 here
        return float(lo + span * (p @ x + np.sqrt(2.0 * var * d)))
    a, b = -1.0, 1.0  # bracket the root: F(a) > 0 > F(b)
    while f(a)[0] <= d:
        a *= 2.0
        if a < -1e300:  # w below every double: all the mass on the top support states
            return float(lo + span * top)
    while f(b)[0] > d:
        b *= 2.0
    u = 0.5 * (a + b)
    for _ in range(max_iter):
        value, log_w = f(u)
        F = value - d
        if abs(F) < tol:
            break
        a, b = (u, b) if F > 0 else (a, u)
        t = np.exp(u - log_w)  # w / (nu - v_x), in (0, 1]
        q = np.exp(log_p - log_w - logsumexp(log_p - log_w))
        slope = ps @ t - q @ t  # dF/du = w f'(w) <= 0
        step = u - F / slope if slope < 0 else np.nan
        u = step if a < step < b else 0.5 * (a + b)
    log_w = np.logaddexp(u, log_gap)
    q = np.exp(log_p - log_w - logsumexp(log_p - log_w))
    return float(lo + span * (q @ xs))


def kl_ucb_loose(p, v, d):
    """The same Newton iteration stopped as many implementations ship it: ``|KL - d| < 1e-3``."""
    return kl_ucb(p, v, d, tol=1e-3)


def self_check(n: int, seed: int, done=lambda reports: None, progress: bool = False) -> list:
    """``op.verify`` on optplan's own fast path of every problem (and optimistic variants);
    ``done(reports)`` after each. ``certified``: agreeing instances where some quantity
    differs from Clarabel's beyond tolerance but is proved optimal (``Problem.certified_by``);
    the worst ratio is over the quantities judged by themselves."""
    runs = [(name, None) for name in PROBLEMS if name != "optimistic"]
    runs += [
        ("optimistic", {"ball": ball, "criterion": crit})
        for ball in ("l1", "kl")
        for crit in ("discounted", "average")
    ]
    reports = []
    print(f"\nself-check: optplan's fast paths against Clarabel, n = {n} each")
    head = f"{'problem':<44}{'tried':>6}{'optimal':>8}{'agree':>7}{'disagree':>9}"
    print(head + " certified  worst ratio (quantity)   time")
    for name, options in runs:
        rep = op.verify(
            optplan_fast(name, **(options or {})),
            name,
            n=n,
            seed=seed,
            options=options,
            progress=progress,
        )
        reports.append(rep)
        done(reports)
        worst = max(rep.worst.values(), key=lambda w: w.ratio, default=None)
        w = f"{worst.ratio:.2g} ({worst.quantity})" if worst else "-"
        print(
            f"{rep.problem:<44}{rep.tried:>6}{rep.compared:>8}{rep.agreed:>7}"
            f"{rep.disagreed + rep.raised:>9}{sum(rep.certified.values()):>10}  {w:<24}"
            f"{rep.seconds:>5.0f} s"
        )
    for rep in reports:
        if not rep.ok:
            print()
            print(rep)
    return reports


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 200 and 20 per problem")
    parser.add_argument("--n", type=int, help="instances for the user's KL-UCB (default 2000)")
    parser.add_argument("--self-check-n", type=int, help="instances per problem (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every report's to_dict() here")
    parser.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    args = parser.parse_args(argv)
    bar = not args.quiet
    n = args.n or (200 if args.quick else 2000)
    n_self = args.self_check_n or (20 if args.quick else 200)
    start = time.perf_counter()
    print(f"1. the user's KL-UCB, Newton stopped at |KL - d| < 1e-3, n = {n}:\n")
    loose = op.verify(kl_ucb_loose, "kl_ball", n=n, seed=args.seed, progress=bar)
    print(loose)
    print(f"\n2. the same code stopped at |KL - d| < 1e-12, n = {n}:\n")
    fixed = op.verify(kl_ucb, "kl_ball", n=n, seed=args.seed, progress=bar)
    print(fixed)

    def save(reports):  # after every report: a long run keeps what it has
        if args.json:
            out = {
                "loose": loose.to_dict(),
                "fixed": fixed.to_dict(),
                "self_check": [r.to_dict() for r in reports],
            }
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=1))

    reports = self_check(n_self, args.seed, save, progress=bar)
    agree = sum(r.ok for r in reports)
    print(f"\nself-check: {agree} of {len(reports)} fast paths agree on every optimal instance")
    print(f"the loose Newton fails and the tight one passes: {not loose.ok and fixed.ok}")
    print(f"total {time.perf_counter() - start:.0f} s")
    # the example's claim is about the user's code; the self-check's findings are printed above
    return 0 if not loose.ok and fixed.ok else 1


if __name__ == "__main__":
    sys.exit(main())
