"""High-precision references (mpmath) for the property tests at extreme scales.

Written from the definitions, independent of optplan's fast paths: the KL-ball index
``C(p, v, d) = max { q.v : KL(p||q) <= d }`` by the root of ``g(s) = KL(p || q(s)) - d`` along
the optimal family ``q(s)`` (DESIGN.md "KL-ball index"), in 60 + log10(d) digits.
"""

import mpmath as mp
import numpy as np


def kl_ball_reference(p, v, d, dps: int = 60) -> float:
    """``C(p, v, d)`` in ``dps`` (+ log10 d) digits, rounded to a double."""
    dps = dps + max(0, int(np.log10(max(float(d), 1.0))))
    with mp.workdps(dps):
        p = [mp.mpf(float(x)) for x in p]
        total = sum(p)
        p = [x / total for x in p]  # a distribution up to round-off: exactly one here
        v = [mp.mpf(float(x)) for x in v]
        d = mp.mpf(float(d))
        S = len(p)
        I = [i for i in range(S) if p[i] > 0]
        VI = max(v[i] for i in I)
        V = max(v)
        delta = {i: VI - v[i] for i in I}
        Ptop = sum(p[i] for i in I if delta[i] == 0)
        if Ptop >= 1 - mp.mpf(10) ** (-15):  # constant on the support
            keep = mp.e ** (-d) if V > VI else mp.mpf(1)
            return float(V - keep * (V - VI))

        def parts(s):
            if s > 10_000:  # e^-s < 1e-4300: negligible against every double at this precision
                w = {i: mp.mpf(delta[i] == 0) for i in I}
                L = sum(p[i] * (s + mp.log(delta[i])) for i in I if delta[i] > 0)
                return w, Ptop, L
            z = mp.e**s
            w = {i: 1 / (1 + delta[i] * z) for i in I}
            a0 = sum(p[i] * w[i] for i in I)
            L = sum(p[i] * mp.log(1 + delta[i] * z) for i in I)
            return w, a0, L

        def g(s):
            w, a0, L = parts(s)
            return L + mp.log(a0) - d

        mean = sum(p[i] * delta[i] for i in I)
        lo = mp.log(mp.expm1(d)) - mp.log(mean)
        entropy_like = sum(p[i] * mp.log(delta[i]) for i in I if delta[i] > 0)
        hi = (d - mp.log(Ptop) - entropy_like) / (1 - Ptop) + 1
        lo = min(lo, hi - 1)
        smax = -mp.log(V - VI) if V > VI else mp.inf
        if smax < hi and g(smax) <= 0:
            s = smax
            w, a0, L = parts(s)
            lam = mp.e ** (L - s - d)
            q = {i: lam * mp.e**s * p[i] * w[i] for i in I}
            left = 1 - sum(q.values())
            return float(sum(q[i] * v[i] for i in I) + left * V)
        if smax < hi:
            hi = smax
        # g is exactly linear beyond s = 1e4 (parts() drops e^-s there): solve it directly
        s_lin = hi - 1
        if s_lin > 10_000 and s_lin < smax:
            w, a0, L = parts(s_lin)
            return float(V - sum(p[i] * w[i] / a0 * (V - v[i]) for i in I))
        glo, ghi = g(lo), g(hi)
        assert glo <= 0 <= ghi, (glo, ghi)
        # Illinois iteration, with bisection steps on huge brackets
        for it in range(2000):
            if hi - lo <= mp.mpf(10) ** (-dps + 10) * max(1, abs(hi)):
                break
            if it % 3 == 2 or hi - lo > 1e6:
                m = (lo + hi) / 2 if hi - lo <= 1e6 or lo <= 0 else mp.sqrt(lo * hi)
            else:
                m = hi - ghi * (hi - lo) / (ghi - glo)
            gm = g(m)
            if gm > 0:
                hi, ghi = m, gm
            else:
                lo, glo = m, gm
        s = (lo + hi) / 2
        w, a0, L = parts(s)
        return float(V - sum(p[i] * w[i] / a0 * (V - v[i]) for i in I))
