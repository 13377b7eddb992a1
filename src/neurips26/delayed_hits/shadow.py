"""Shadow loss, C_B, the static and switching comparators, regret, and the stochastic shadow value.

Shadow loss (spec §2). A virtual "never cached" process per item i: a virtual window opens at a
request of i when none of i is open (it covers slots s..s+Z-1); the request costs Z if it opens the
window, Z - (t - s) otherwise. shadow_loss[t, i] sums these costs over i's requests in slot t and
L_t(i) is the cumulative sum. It depends only on the request sequence, never on the policy.

Static comparator: a pre-loaded fixed set S (|S| = K) that admits nothing else has latency exactly
sum_{i not in S} L_T(i); the best one keeps the top-K of L_T:

    R_T = Lat_alg(T) - min_S sum_{i not in S} L_T(i)            (static regret)
    shadow regret = sum_t sum_{i not in C_t} shadow_loss[t, i] - the same minimum.

Switching comparator (ASSUMPTION: switches are free and instantaneous): S_1..S_T with <= B changes,
cost sum_t sum_{i not in S_t} shadow_loss[t, i]; the best one restricted to a grid of change times
is a DP over (grid point, #changes).

Stochastic shadow value (ASSUMPTION: per-slot request counts B_{i,t} i.i.d. over t, q = P(B > 0),
m = E[B | B > 0]). Renewal-reward over "window (Z slots) + geometric idle gap" cycles gives

    theta(q, m; Z) = q m Z (1 + q (Z - 1) / 2) / (1 + q (Z - 1))
    a_Z(q) = theta / (q m) = Z (1 + q (Z - 1) / 2) / (1 + q (Z - 1))   in [(Z + 1) / 2, Z].
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.delayed_hits.kernels import shadow_kernel, trace_arrays
from neurips26.delayed_hits.trace import as_trace


def shadow_losses(trace, Z: int, *, grid=None, return_windows: bool = False):
    """L_T(i) for every item (int64 array, length N).

    grid: optional sorted slots; then also returns the (len(grid), N) matrix of L at the end of
    each grid slot. return_windows: also return (#virtual windows per item, realised C_B).
    """
    tr = as_trace(trace)
    Z = check_scalar(Z, "Z", int, min=1)
    g = np.zeros(0, dtype=np.int64) if grid is None else np.asarray(grid, dtype=np.int64)
    if g.size and (np.any(np.diff(g) < 0) or g[0] < 1 or g[-1] > tr.n_slots):
        raise ValueError(f"grid must be sorted slots in [1, {tr.n_slots}]")
    ids, ptr, one = trace_arrays(tr)
    L, snaps, windows, cb = shadow_kernel(ids, ptr, one, Z, tr.n_items, g)
    out = [L]
    if grid is not None:
        out.append(snaps)
    if return_windows:
        out += [windows, int(cb)]
    return out[0] if len(out) == 1 else tuple(out)


def c_b_bound(Z: int, b_max: int = 1) -> int:
    """A-priori bound on C_B (max over virtual windows of window AD - Z).

    One request per slot: Z (Z - 1) / 2; batches of size <= b_max: (b_max - 1) Z + b_max Z (Z - 1) / 2.
    """
    Z = check_scalar(Z, "Z", int, min=1)
    b_max = check_scalar(b_max, "b_max", int, min=1)
    return (b_max - 1) * Z + b_max * Z * (Z - 1) // 2


def top_k(values, K: int) -> np.ndarray:
    """Indices of the K largest values, ties to the smaller index, sorted by index."""
    v = np.asarray(values)
    K = check_scalar(K, "K", int, min=0, max=v.size)
    if K == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(v.size), -v.astype(np.float64)))
    return np.sort(order[:K]).astype(np.int64)


def top_k_sum(values, K: int) -> float:
    v = np.asarray(values)
    if K <= 0:
        return 0
    if K >= v.size:
        return v.sum()
    return np.partition(v, v.size - K)[v.size - K:].sum()


def static_opt_cost(L, K: int) -> int:
    """min_{|S| = K} sum_{i not in S} L(i) = sum(L) - (sum of the K largest)."""
    L = np.asarray(L)
    return int(L.sum() - top_k_sum(L, K))


def static_cost(L, S) -> int:
    """sum_{i not in S} L(i) for a given set S."""
    L = np.asarray(L)
    S = np.asarray(S, dtype=np.int64)
    return int(L.sum() - L[S].sum())


def switching_opt(snaps: np.ndarray, K: int, B: int) -> tuple[float, list[int]]:
    """Best comparator with <= B changes whose change times lie on the grid (spec §2).

    snaps: (G + 1, N) cumulative shadow losses at the grid points, row 0 = zeros (start) and the
    last row = L_T. cost(a, b) = total interval loss - top-K of the per-item interval sums. DP over
    (grid point, #changes). Returns (cost, change grid indices).
    """
    P = np.asarray(snaps, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 2:
        raise ValueError("snaps must be a (G+1, N) matrix with G >= 1")
    K = check_scalar(K, "K", int, min=1)
    B = check_scalar(B, "B", int, min=0)
    G = P.shape[0] - 1
    cost = np.full((G + 1, G + 1), np.inf)
    for a in range(G):
        d = P[a + 1:] - P[a]                        # (G - a, N) interval sums
        tot = d.sum(axis=1)
        if K < d.shape[1]:
            top = np.partition(d, d.shape[1] - K, axis=1)[:, d.shape[1] - K:].sum(axis=1)
        else:
            top = tot
        cost[a, a + 1:] = tot - top
    Bm = min(B, G - 1)
    best = np.full((Bm + 1, G + 1), np.inf)
    arg = np.zeros((Bm + 1, G + 1), dtype=np.int64)
    best[0, 1:] = cost[0, 1:]
    for c in range(1, Bm + 1):
        for j in range(1, G + 1):
            cand = best[c - 1, :j] + cost[:j, j]
            k = int(np.argmin(cand))
            best[c, j] = cand[k]
            arg[c, j] = k
    c = int(np.argmin(best[:, G]))
    val = float(best[c, G])
    changes = []
    j = G
    while c > 0:
        k = int(arg[c, j])
        changes.append(k)
        j, c = k, c - 1
    return val, sorted(changes)


def theta(q, m=1.0, Z: int = 1):
    """Long-run shadow-loss rate of an item with P(B>0) = q and E[B | B>0] = m (spec §2):
    theta = q m Z (1 + q (Z - 1) / 2) / (1 + q (Z - 1))."""
    q = np.asarray(q, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    if np.any((q < 0) | (q > 1)):
        raise ValueError("q must lie in [0, 1]")
    if np.any(m < 1):
        raise ValueError("m must be >= 1 (a busy slot holds at least one request)")
    Z = check_scalar(Z, "Z", int, min=1)
    return q * m * Z * (1 + q * (Z - 1) / 2) / (1 + q * (Z - 1))


def amplification(q, Z: int):
    """Latency-amplification factor a_Z(q) = Z (1 + q (Z-1)/2) / (1 + q (Z-1)); a_1 = 1."""
    q = np.asarray(q, dtype=np.float64)
    Z = check_scalar(Z, "Z", int, min=1)
    return Z * (1 + q * (Z - 1) / 2) / (1 + q * (Z - 1))


def regret_slope(T_values, regrets) -> float:
    """Least-squares slope of log(max(regret, 1)) on log T (spec: values below 1 are set to 1)."""
    x = np.log(np.asarray(T_values, dtype=np.float64))
    y = np.log(np.maximum(np.asarray(regrets, dtype=np.float64), 1.0))
    if x.size < 2:
        raise ValueError("need at least two T values for a slope")
    return float(np.polyfit(x, y, 1)[0])


def slope_ci(slopes) -> tuple[float, float, float]:
    """Mean slope and its 95% t-interval over seeds (lo = hi = mean with one seed)."""
    from scipy import stats

    s = np.asarray(slopes, dtype=np.float64)
    mean = float(s.mean())
    if s.size < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, s.size - 1) * s.std(ddof=1) / np.sqrt(s.size))
    return mean, mean - half, mean + half
