"""UCB-DH: optimistic delayed-hit shadow values for stochastic arrivals (spec §3; the exact index
is a reconstruction, ASSUMPTION).

State per item: c_i = #slots with >= 1 request of i, n_i = total requests, t = slots seen.

1. q_hat = c_i / t,   m_hat = n_i / max(c_i, 1)
2. q_ucb = min(1, q_hat + sqrt(2 q_hat (1 - q_hat) ln t / t) + 3 ln t / t)      (empirical Bernstein)
3. m_ucb = min(b_max, m_hat + (b_max - 1) sqrt(ln t / (2 max(c_i, 1))))        (Hoeffding),
   clipped below at 1 (a busy slot holds at least one request; = 1 when b_max = 1)
4. U_i = theta(q_ucb, m_ucb; Z); target S_t = top-K of U (ties: smaller id), recomputed every
   ``refresh`` slots with ``argpartition``.
5. At the completion of i: admit iff i in S_t; victim = the cached item with the smallest U among
   those not in S_t. No prefetching by default (ASSUMPTION); ``prefetch=True`` issues zero-request
   fetches for S_t minus (C and F) at the end of every slot (Python engine only).
6. ``index="generic"``: U_i = L_t(i)/t + (Z + C_B) sqrt(2 w_i ln t) / t, w_i = #virtual windows.
7. Restarted UCB-DH: reset all counts every H = ceil(sqrt(T ln T / max(B, 1))) slots (ASSUMPTION),
   keep the cache; ``restart_at`` gives oracle restart slots instead (ablation).
"""

from __future__ import annotations

import math

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.delayed_hits import kernels, learner_kernels
from neurips26.delayed_hits.base import Policy, SimResult, checkpoint_array, kernel_result
from neurips26.delayed_hits.shadow import c_b_bound, theta
from neurips26.delayed_hits.trace import Trace


def ucb_restart_period(T: int, B: int) -> int:
    """H = ceil(sqrt(T ln T / max(B, 1)))."""
    T = check_scalar(T, "T", int, min=2)
    B = check_scalar(B, "B", int, min=0)
    return int(math.ceil(math.sqrt(T * math.log(T) / max(B, 1))))


def ucb_index(c, n, t: int, Z: int, b_max: int = 1) -> np.ndarray:
    """The parametric UCB-DH index U_i = theta(q_ucb, m_ucb; Z) (steps 1-4)."""
    c = np.asarray(c, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    t = max(int(t), 1)
    lt = math.log(t)
    q_hat = c / t
    q_ucb = np.minimum(1.0, q_hat + np.sqrt(2 * q_hat * (1 - q_hat) * lt / t) + 3 * lt / t)
    cc = np.maximum(c, 1.0)
    m_hat = n / cc
    m_ucb = np.clip(m_hat + (b_max - 1) * np.sqrt(lt / (2 * cc)), 1.0, max(b_max, 1))
    return theta(q_ucb, m_ucb, Z)


class UCBDH(Policy):
    """UCB-DH (see the module docstring).

    refresh: slots between recomputations of S_t (1 = every slot).
    index:   "parametric" (theta of optimistic (q, m)) or "generic" (shadow-loss mean + bonus).
    b_max:   largest batch size (None: the trace's).
    C_B:     for the generic index (None: the a-priori bound).
    restart_every / restart_at: periodic or oracle restarts (counts reset, cache kept).
    """

    name = "UCB-DH"
    uses_request = True
    uses_slot_end = True

    def __init__(self, refresh: int = 1, index: str = "parametric", b_max: int | None = None,
                 C_B: float | None = None, restart_every: int | None = None,
                 restart_at=None, prefetch: bool = False, name: str | None = None) -> None:
        self.refresh = check_scalar(refresh, "refresh", int, min=1)
        self.index = check_choice(index, "index", ("parametric", "generic"))
        self.b_max = None if b_max is None else check_scalar(b_max, "b_max", int, min=1)
        self.C_B = None if C_B is None else check_scalar(C_B, "C_B", float, min=0.0)
        self.restart_every = (None if restart_every is None
                              else check_scalar(restart_every, "restart_every", int, min=1))
        self.restart_at = None if restart_at is None else sorted(
            check_scalar(x, "restart_at", int, min=1) for x in restart_at)
        self.prefetch_enabled = bool(prefetch)
        self.uses_prefetch = self.prefetch_enabled
        if name is not None:
            self.name = name

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self._bmax = self.b_max or trace.max_item_batch
        self.C_B_used = c_b_bound(Z, self._bmax) if self.C_B is None else self.C_B
        self._restarts = list(self.restart_at or [])
        self.n_restarts = 0
        self._clear(0)
        self._cached: set = set()

    def _clear(self, t: int) -> None:
        N = self.N
        self.c = np.zeros(N)
        self.n = np.zeros(N)
        self.w = np.zeros(N)
        self.Lsh = np.zeros(N)
        self._last = [-1] * N
        self._vstart = [-self.Z] * N
        self._t0 = t
        self.U = np.zeros(N)
        self.in_S = np.zeros(N, dtype=bool)
        self.in_S[: self.K] = True                   # all indices equal: ties to the smaller id

    def on_request(self, i: int, t: int) -> None:
        self.n[i] += 1
        if self._last[i] != t:
            self._last[i] = t
            self.c[i] += 1
        if self.index == "generic":
            d = t - self._vstart[i]
            if d >= self.Z:
                self._vstart[i] = t
                self.w[i] += 1
                self.Lsh[i] += self.Z
            else:
                self.Lsh[i] += self.Z - d

    def indices(self, t: int) -> np.ndarray:
        """U_i at slot t (t counted from the last restart)."""
        tt = max(t - self._t0, 1)
        if self.index == "parametric":
            return ucb_index(self.c, self.n, tt, self.Z, self._bmax)
        lt = math.log(tt)
        return self.Lsh / tt + (self.Z + self.C_B_used) * np.sqrt(2 * self.w * lt) / tt

    def on_slot_end(self, t: int) -> None:
        if self._restarts and t >= self._restarts[0]:
            while self._restarts and t >= self._restarts[0]:
                self._restarts.pop(0)
            self._restart(t)
        elif self.restart_every is not None and t - self._t0 >= self.restart_every:
            self._restart(t)
        if (t - self._t0) % self.refresh == 0 and t > self._t0:
            self._refresh(t)

    def _restart(self, t: int) -> None:
        self._clear(t)
        self.n_restarts += 1

    def _refresh(self, t: int) -> None:
        U = self.indices(t)
        self.U = U
        K, N = self.K, self.N
        kth = np.partition(U, N - K)[N - K]
        cand = np.nonzero(U >= kth)[0]
        top = cand[np.lexsort((cand, -U[cand]))[:K]]
        self.in_S = np.zeros(N, dtype=bool)
        self.in_S[top] = True

    def prefetch(self, t: int, cache: set, inflight: dict) -> list:
        """S_t minus (C and F): fetch the target items that are neither cached nor in flight."""
        return [int(j) for j in np.flatnonzero(self.in_S) if j not in cache and j not in inflight]

    def target(self) -> np.ndarray:
        """The current target set S_t (sorted ids)."""
        return np.nonzero(self.in_S)[0]

    def admit(self, i, t, ad, cache):
        if not self.in_S[i]:
            return False, None
        victim = None
        if len(self._cached) >= self.K:
            cached = np.fromiter(self._cached, dtype=np.int64, count=len(self._cached))
            out = cached[~self.in_S[cached]]
            if out.size == 0:                          # cannot happen with |S| = K; stay safe
                return False, None
            u = self.U[out]
            victim = int(out[u == u.min()].max())
            self._cached.discard(victim)
        self._cached.add(i)
        return True, victim

    def run_kernel(self, tr, K, Z, checkpoints=(), ref_set=None, track_from: int = 0) -> SimResult | None:
        """``learner_kernels.ucb_kernel``: the same decisions without prefetching (None with it).

        ref_set / track_from: also count the slots >= track_from whose target S_t differs from
        ``ref_set`` (``extra["mismatch_slots"]``; spec check 7)."""
        if self.prefetch_enabled:
            return None
        self.reset(tr, K, Z)
        N = tr.n_items
        ref = np.zeros(0, dtype=np.bool_)
        if ref_set is not None:
            ref = np.zeros(N, dtype=np.bool_)
            ref[np.asarray(ref_set, dtype=np.int64)] = True
        ra = np.asarray(self.restart_at or [], dtype=np.int64)
        ids, ptr, one = kernels.trace_arrays(tr)
        cps = checkpoint_array(checkpoints)
        stats, cp, mism, nrest = learner_kernels.ucb_kernel(
            ids, ptr, one, N, K, Z, self.refresh, self.index == "generic", float(self._bmax),
            float(self.C_B_used), int(self.restart_every or 0), ra, cps, ref, int(track_from))
        return kernel_result(self.name, tr, K, Z, stats, cp, cps,
                             {"mismatch_slots": int(mism), "restarts": int(nrest)})


class RestartedUCBDH(UCBDH):
    """UCB-DH with counts reset every H = ceil(sqrt(T ln T / max(B, 1))) slots."""

    name = "UCB-DH-restart"

    def __init__(self, B: int, T: int | None = None, **kw) -> None:
        self.B = check_scalar(B, "B", int, min=0)
        self.T = None if T is None else check_scalar(T, "T", int, min=2)
        super().__init__(**kw)

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        T = self.T or max(trace.n_slots, 2)
        self.H = ucb_restart_period(T, self.B)
        self.restart_every = self.H if self.H < T else None
        super().reset(trace, K, Z)
