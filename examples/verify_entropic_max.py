"""Bring your own problem: verify a closed form optplan does not ship against its CVXPY model.

The entropy-regularized maximum (the soft value of K-learning / RAVI-UCB's softmax step):

    max { q.v + tau H(q) : q in the simplex } = tau logsumexp(v / tau),  q* = softmax(v / tau).

We declare the problem to ``op.verify`` by its CVXPY formulation (a function of the named
parameters ``v`` and ``tau``) and the parameters' domains, then check two closed forms: the
max-shifted one passes; the textbook one without the shift (``log(sum(exp(v / tau)))``)
overflows, and hypothesis shrinks the failure to a one-line counterexample.

    python examples/verify_entropic_max.py            # n = 500 each
    python examples/verify_entropic_max.py --quick    # n = 100
"""

from __future__ import annotations

import argparse
import sys

import cvxpy as cp
import numpy as np

import optplan as op
from optplan.verification import Box


def entropic_max(v, tau):
    """The CVXPY formulation: ``max q.v + tau sum entr(q)`` over the simplex."""
    q = cp.Variable(v.size, name="q", nonneg=True)
    return cp.Problem(cp.Maximize(q @ v + tau * cp.sum(cp.entr(q))), [cp.sum(q) == 1])


#: ``v`` in [-100, 100]^S with S from 1 to 8, ``tau`` in [0.01, 100]: ``v / tau`` reaches
#: 1e4, far past where ``exp`` overflows (709.8).
PROBLEM = op.DeclaredProblem(
    entropic_max,
    {"v": Box(("S",), -100.0, 100.0), "tau": Box((), 0.01, 100.0)},
    dims={"S": (1, 8)},
    x="q",
)


def soft_max(v, tau):
    """The closed form with the max shift: ``(tau logsumexp(v / tau), softmax(v / tau))``."""
    z = v / tau
    top = z.max()
    e = np.exp(z - top)
    return tau * (top + np.log(e.sum())), e / e.sum()


def soft_max_naive(v, tau):
    """Deliberately broken: the same formula without the shift overflows for ``v / tau > 709``."""
    e = np.exp(v / tau)
    return tau * np.log(e.sum()), e / e.sum()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 100")
    parser.add_argument("--n", type=int, help="instances (default 500)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    args = parser.parse_args(argv)
    n = args.n or (100 if args.quick else 500)
    good = op.verify(soft_max, PROBLEM, n=n, seed=0, progress=not args.quiet)
    print(good, end="\n\n")
    bad = op.verify(
        soft_max_naive, PROBLEM, n=n, seed=0, progress=not args.quiet
    )  # its overflow warnings are counted
    print(bad)
    expected = good.ok and not bad.ok and bool(bad.counterexamples)
    print(f"\nthe shifted closed form passes and the naive one fails: {expected}")
    return 0 if expected else 1


if __name__ == "__main__":
    sys.exit(main())
