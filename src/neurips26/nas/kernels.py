"""Compiled sampling loop (numba when installed, plain Python otherwise: same results, slower).

``run_steps`` advances one identification trajectory by ``n`` online steps of MDP-NaS (any
exploration schedule, averaged or plug-in oracle) or of uniform exploration, with the oracle policy
held fixed over the chunk: ``identify`` cuts a run into chunks that end at every stopping check
(multiples of K_s) and before every step where the oracle schedule may fire, so the Python side
does exactly what the Python loop does between chunks. The uniforms come pre-drawn from the agent's
and the environment's ``numpy.random.Generator`` (``rng.random(n)`` draws the same doubles as ``n``
calls of ``rng.random()``) and every float operation is the Python loop's, in the same order, so the
trajectory is the same bit for bit (tested against ``identify(..., loop="python")``).

Cached on disk by numba (``cache=True``), so only the first run pays the compile time.
"""

from __future__ import annotations

import math

import numpy as np

from neurips26.harness.jit import HAVE_NUMBA, njit  # noqa: F401 (HAVE_NUMBA is re-exported)

#: codes of the sampling rule inside the kernel
UNIFORM, THEORY, ERGODIC, FIXED, PRACTICAL = 0, 1, 2, 3, 4
EXPLORATION_CODE = {"theory": THEORY, "ergodic": ERGODIC, "fixed": FIXED, "practical": PRACTICAL}
#: numpy's np.sum switches to 8-way pairwise accumulation at 8 terms; the kernel sums sequentially,
#: which equals numpy's result only below that: the compiled path needs A < MAX_A_BITWISE
MAX_A_BITWISE = 8


@njit(cache=True)
def _count_le(cdf, x):
    """Number of entries <= x of a non-decreasing vector (bisect_right / searchsorted 'right')."""
    k = 0
    for i in range(cdf.shape[0]):
        if cdf[i] <= x:
            k += 1
        else:
            break
    return k


@njit(cache=True)
def run_steps(code, s, t, n, u_agent, u_env, env_cdf, r, N_sas, N_sa, N_s, r_hat, r_seen,
              W, pi_o, t_last, averaging, exp_theory, epsilon):
    """Take steps t+1, ..., t+n from state s; update the counts in place.

    code: UNIFORM or an exploration code (NaS); W, pi_o, t_last: the NaS sampler's running sum of
    past oracle policies, the current oracle policy and when it was set. Returns (state after the
    last step, number of pairs visited for the first time).
    """
    S, A = pi_o.shape
    p = np.empty(A)
    cdf = np.empty(A)
    z = np.empty(A)
    new_pairs = 0
    for k in range(n):
        tt = t + k + 1
        u = u_agent[k]
        if code == UNIFORM:
            a = int(u * A)
        else:
            if code == THEORY:
                eps = float(tt) ** (-exp_theory)
            elif code == ERGODIC:
                eps = float(tt) ** -0.5
            elif code == FIXED:
                eps = epsilon
            else:
                eps = max(1e-3, float(max(1, N_s[s])) ** -0.99)
            if code == PRACTICAL:
                n_s = max(1, N_s[s])
                hi = N_sa[s, 0]
                lo = N_sa[s, 0]
                for b in range(1, A):
                    hi = max(hi, N_sa[s, b])
                    lo = min(lo, N_sa[s, b])
                beta = 0.01 * n_s * math.log(n_s) / max(1, hi - lo)
                zmax = -np.inf
                for b in range(A):
                    z[b] = -beta * N_sa[s, b] / n_s
                    zmax = max(zmax, z[b])
                tot = 0.0
                for b in range(A):
                    z[b] = math.exp(z[b] - zmax)
                    tot += z[b]
                for b in range(A):
                    z[b] = z[b] / tot
            else:
                for b in range(A):
                    z[b] = 1.0 / A
            acc = 0.0
            for b in range(A):
                if averaging:
                    pbar = (W[s, b] + (tt - t_last + 1) * pi_o[s, b]) / tt
                else:
                    pbar = pi_o[s, b]
                p[b] = eps * z[b] + (1 - eps) * pbar
                acc += p[b]
                cdf[b] = acc
            a = min(_count_le(cdf, u * cdf[A - 1]), A - 1)
        s2 = _count_le(env_cdf[s, a], u_env[k])
        if N_sa[s, a] == 0:
            new_pairs += 1
        N_sas[s, a, s2] += 1
        N_sa[s, a] += 1
        N_s[s] += 1
        if not r_seen[s, a]:
            r_hat[s, a] = r[s, a]
            r_seen[s, a] = True
        s = s2
    return s, new_pairs
