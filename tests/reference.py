"""High-precision references (mpmath) for the property tests at extreme scales.

Written from the definitions, independent of optplan's fast paths: the KL-ball index
``C(p, v, d) = max { q.v : KL(p||q) <= d }`` by the root of ``g(s) = KL(p || q(s)) - d`` along
the optimal family ``q(s)`` (docs/math.md "KL-ball index"), in 60 + log10(d) digits.
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


def k_temperature_derivative(tau, R, P, c, rho, dps: int = 50) -> float:
    """``f'(tau) = <lambda, H(pi)> - <lambda, c> / tau^2`` of K-learning's problem (11) in
    ``dps`` digits: backward soft recursion, Boltzmann policy, its occupancy (k-learning
    Eq. 6, 9, 14 and Appendix A.4), written from the definitions."""
    with mp.workdps(dps):
        tau = mp.mpf(float(tau))
        L, S, A = R.shape
        V_next = [mp.mpf(0)] * S
        pis = []
        for l in range(L - 1, -1, -1):
            V_l, pi_l = [], []
            for s in range(S):
                K = [
                    mp.mpf(float(R[l, s, a]))
                    + mp.mpf(float(c[l, s, a])) / tau
                    + sum(mp.mpf(float(P[l, s, a, t])) * V_next[t] for t in range(S))
                    for a in range(A)
                ]
                m = max(K)
                z = [mp.e ** ((k - m) / tau) for k in K]
                Z = sum(z)
                V_l.append(m + tau * mp.log(Z))
                pi = [x / Z for x in z]
                # H = log1p(Z - 1) + sum pi (m - K) / tau: equal to -sum pi log pi, and free of
                # the 1 - pi_best that rounds away even at 50 digits when pi_best = 1 - 1e-93
                z_minus_1 = sum(x for i, x in enumerate(z) if i != K.index(m))
                H = mp.log1p(z_minus_1) + sum(p * (m - k) / tau for p, k in zip(pi, K, strict=True))
                pi_l.append((pi, H))
            V_next = V_l
            pis.append(pi_l)
        pis.reverse()
        d = [mp.mpf(float(x)) for x in rho]
        ent, bonus = mp.mpf(0), mp.mpf(0)
        for l in range(L):
            nxt = [mp.mpf(0)] * S
            for s in range(S):
                pi, H = pis[l][s]
                ent += d[s] * H
                for a in range(A):
                    w = d[s] * pi[a]
                    bonus += w * mp.mpf(float(c[l, s, a]))
                    for t in range(S):
                        nxt[t] += w * mp.mpf(float(P[l, s, a, t]))
            d = nxt
        return float(ent - bonus / tau**2)
