"""LA-FTPL: latency-aware follow-the-perturbed-leader on the shadow loss (spec §4).

1. gamma ~ N(0, I_N) drawn once (and at every restart).
2. eta_t = c_eta sqrt(t (Z^2 + C_B Z) / (K ln N))          ("latency-scaled" perturbation)
3. P_t(i) = L_t(i) + eta_t gamma_i; perturbed leader S_t = top-K of P_t, scores compared as
   (P, -id) (ties go to the smaller id).
4. Requests are served by the delayed-hit model (hits, delayed hits, misses start fetches).
5. Completion-time admission: when i's fetch completes at the end of slot t, admit iff i is in
   top-K(P_t); if the cache is full evict argmin_{j in C} P_t(j), only if it ranks below i.
   (L_t includes slot t's requests: the decision applies from slot t + 1.)
6. Restarts (switching regret): every H = ceil((T sqrt(K ln N) / max(B, 1))^{2/3}) slots reset L,
   redraw gamma and restart t in eta_t; the cache contents are kept (ASSUMPTION).

Paths: ``refresh=1`` (default) is exact: O(N) vectorised work per completion. ``refresh=R > 1`` is
the fast path (ASSUMPTION, spec §4.5): eta is frozen for R slots, so only requested items' scores
move (upwards); top-K(P) and the cached scores live in lazy heaps (O(log K) per request) and are
rebuilt with ``argpartition`` at each refresh. With refresh=1 both paths give the same decisions.

Ablations: ``c_eta`` (0 = follow the leader on the shadow loss), ``fresh_gamma`` (redraw gamma at
every refresh), ``admission="request"`` (decide at the miss instead of at completion),
``z_agnostic`` (C_B = 0 and Z = 1 inside eta_t). ``loss="count"`` with ``z_agnostic=True`` is the
Z-agnostic hit-count FTPL baseline (Bhattacharjee et al.).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.delayed_hits import kernels, learner_kernels
from neurips26.delayed_hits.base import Policy, SimResult, checkpoint_array, kernel_result
from neurips26.delayed_hits.shadow import c_b_bound
from neurips26.delayed_hits.trace import Trace

MAX_GAMMA_VALUES = 1 << 25     # kernel path: 256 MB of pre-drawn perturbations (one N-vector per restart)


def ftpl_restart_period(T: int, K: int, N: int, B: int) -> int:
    """H = ceil((T sqrt(K ln N) / max(B, 1))^{2/3}) (spec §4.6)."""
    T = check_scalar(T, "T", int, min=1)
    B = check_scalar(B, "B", int, min=0)
    return int(math.ceil((T * math.sqrt(K * math.log(N)) / max(B, 1)) ** (2.0 / 3.0)))


class LAFTPL(Policy):
    """Latency-aware FTPL (see the module docstring for the equations).

    K/N/Z come from the simulation. Arguments:
      c_eta:        perturbation scale (>= 0).
      C_B:          delayed-hit penalty bound; None = the a-priori bound (b_max - 1) Z + b_max Z(Z-1)/2.
      refresh:      1 = exact path; R > 1 = fast path with eta frozen for R slots.
      restart_every: restart period H in slots (None: never).
      restart_at:   restart at the ends of these slots (given, or set by an adaptive-restart
                    subclass in ``restarts.py``); combined with restart_every like UCB-DH's.
      seed:         seed of gamma.
    """

    name = "LA-FTPL"
    uses_request = True
    uses_slot_end = True

    def __init__(self, c_eta: float = 1.0, C_B: float | None = None, refresh: int = 1,
                 restart_every: int | None = None, seed: int = 0, fresh_gamma: bool = False,
                 admission: str = "completion", z_agnostic: bool = False, loss: str = "shadow",
                 name: str | None = None, restart_at=None) -> None:
        self.c_eta = check_scalar(c_eta, "c_eta", float, min=0.0)
        self.C_B = None if C_B is None else check_scalar(C_B, "C_B", float, min=0.0)
        self.refresh = check_scalar(refresh, "refresh", int, min=1)
        self.restart_every = (None if restart_every is None
                              else check_scalar(restart_every, "restart_every", int, min=1))
        self.restart_at = None if restart_at is None else sorted(
            check_scalar(x, "restart_at", int, min=1) for x in restart_at)
        self.seed = check_scalar(seed, "seed", int, min=0)
        self.fresh_gamma = bool(fresh_gamma)
        self.admission = check_choice(admission, "admission", ("completion", "request"))
        self.z_agnostic = bool(z_agnostic)
        self.loss = check_choice(loss, "loss", ("shadow", "count"))
        if name is not None:
            self.name = name

    # -- set-up ---------------------------------------------------------------------------
    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        N = trace.n_items
        cb = c_b_bound(Z, trace.max_item_batch) if self.C_B is None else self.C_B
        if self.z_agnostic:
            self._scale = 1.0 / (K * math.log(N))                    # Z = 1, C_B = 0
        else:
            self._scale = (Z * Z + cb * Z) / (K * math.log(N))
        self.C_B_used = cb
        self.rng = np.random.default_rng(self.seed)
        self.L = np.zeros(N)                                          # L_t(i) since the last restart
        self._vstart = [-Z] * N
        self._cached: set = set()
        self._decided: dict[int, bool] = {}
        self._t0 = 0                                                 # slot of the last restart
        self._restarts = list(self.restart_at or [])
        self._draw()
        self.n_restarts = 0
        if self.refresh > 1:
            self._rebuild(1)

    def _draw(self) -> None:
        self.gamma = self.rng.standard_normal(self.N)

    def eta(self, t: int) -> float:
        """eta_t = c_eta sqrt(t (Z^2 + C_B Z) / (K ln N)), t counted from the last restart."""
        return self.c_eta * math.sqrt(max(t - self._t0, 1) * self._scale)

    # -- loss bookkeeping ---------------------------------------------------------------------
    def on_request(self, i: int, t: int) -> None:
        if self.loss == "count":
            sc = 1.0
        else:
            d = t - self._vstart[i]
            if d >= self.Z:
                self._vstart[i] = t
                sc = float(self.Z)
            else:
                sc = float(self.Z - d)
        self.L[i] += sc
        if self.refresh > 1:
            self._bump(i, sc)
        if self.admission == "request" and i not in self._cached and i not in self._decided:
            # a request that starts a fetch (or a delayed hit): decide now, apply at completion
            self._decided[i] = self._in_top(i, t)

    def on_slot_end(self, t: int) -> None:
        due = False
        if self._restarts and t >= self._restarts[0]:
            while self._restarts and t >= self._restarts[0]:
                self._restarts.pop(0)
            due = True
        elif self.restart_every is not None and (t - self._t0) >= self.restart_every:
            due = True
        if due:
            self._restart(t)
            return
        if self.refresh > 1 and (t - self._t0) % self.refresh == 0:
            self._rebuild(t + 1)

    def _restart(self, t: int) -> None:
        """Reset L, redraw gamma, restart the clock of eta; keep the cache (ASSUMPTION)."""
        self._t0 = t
        self.L = np.zeros(self.N)
        self._vstart = [-self.Z] * self.N
        self._draw()
        self.n_restarts += 1
        if self.refresh > 1:
            self._rebuild(t + 1)

    # -- exact path ---------------------------------------------------------------------------
    def _scores(self, t: int) -> np.ndarray:
        return self.L + self.eta(t) * self.gamma

    def _in_top(self, i: int, t: int) -> bool:
        if self.refresh > 1:
            return i in self._top
        P = self._scores(t)
        p = P[i]
        above = int(np.count_nonzero(P > p)) + int(np.count_nonzero(P[:i] == p))
        return above < self.K

    # -- fast path ----------------------------------------------------------------------------
    def _rebuild(self, t_next: int) -> None:
        """At a refresh point: freeze eta_{t_next}, recompute all scores and both heaps."""
        if self.fresh_gamma:
            self._draw()
        P = self.L + self.eta(t_next) * self.gamma
        self._P = P.tolist()
        N, K = self.N, self.K
        if K < N:
            # exact top-K under the (P, -id) order among a superset (ties at the boundary)
            kth = np.partition(-P, K - 1)[K - 1]
            cand = np.nonzero(-P <= kth)[0]
            order = np.lexsort((cand, -P[cand]))
            top = cand[order[:K]]
        else:
            top = np.arange(N)
        self._top = {int(j): (self._P[j], -int(j)) for j in top}
        self._top_heap = [(k, j) for j, k in self._top.items()]
        heapq.heapify(self._top_heap)
        self._c_heap = [((self._P[j], -j), j) for j in self._cached]
        heapq.heapify(self._c_heap)

    def _key(self, j: int) -> tuple:
        return (self._P[j], -j)

    def _bump(self, i: int, sc: float) -> None:
        """Score of i moved up by sc; keep the top-K set and the cached heap exact."""
        self._P[i] += sc
        k = (self._P[i], -i)
        top = self._top
        if i in top:
            top[i] = k
            heapq.heappush(self._top_heap, (k, i))
        else:
            h = self._top_heap
            while True:                                   # current minimum of the top set
                mk, j = h[0]
                if top.get(j) == mk:
                    break
                heapq.heappop(h)
            if k > mk:
                heapq.heappop(h)
                del top[j]
                top[i] = k
                heapq.heappush(h, (k, i))
        if i in self._cached:
            heapq.heappush(self._c_heap, (k, i))
        if len(self._top_heap) > 4 * self.K + 64:
            self._top_heap = [(kk, j) for j, kk in top.items()]
            heapq.heapify(self._top_heap)
        if len(self._c_heap) > 4 * self.K + 64:
            self._c_heap = [((self._P[j], -j), j) for j in self._cached]
            heapq.heapify(self._c_heap)

    def _min_cached(self) -> tuple[tuple, int]:
        h = self._c_heap
        while True:
            k, j = h[0]
            if j in self._cached and k == (self._P[j], -j):
                return k, j
            heapq.heappop(h)

    # -- admission ----------------------------------------------------------------------------
    def admit(self, i, t, ad, cache):
        if self.admission == "request":
            ok = self._decided.pop(i, False)
        else:
            ok = self._in_top(i, t)
        if not ok:
            return False, None
        victim = None
        if len(self._cached) >= self.K:
            if self.refresh > 1:
                kv, victim = self._min_cached()
                ki = (self._P[i], -i)
            else:
                P = self._scores(t)
                cached = np.fromiter(self._cached, dtype=np.int64, count=len(self._cached))
                pc = P[cached]
                m = pc.min()
                victim = int(cached[pc == m].max())         # lowest (P, -id): the largest id
                kv, ki = (m, -victim), (P[i], -i)
            if not kv < ki:
                return False, None
            self._cached.discard(victim)
        self._cached.add(i)
        if self.refresh > 1:
            heapq.heappush(self._c_heap, ((self._P[i], -i), i))
        return True, victim

    # -- compiled kernel ----------------------------------------------------------------------
    def run_kernel(self, tr, K, Z, checkpoints=()) -> SimResult | None:
        """The kernels take the same decisions for completion-time admission with one gamma per
        restart (``learner_kernels.ftpl_kernel`` for refresh = 1, ``ftpl_heap_kernel`` otherwise); None
        for the other options, or when the pre-drawn perturbations (one N-vector per restart)
        would exceed ``MAX_GAMMA_VALUES``."""
        if self.admission != "completion" or self.fresh_gamma:
            return None
        self.reset(tr, K, Z)
        N = tr.n_items
        H = self.restart_every or 0
        ra = np.asarray(self.restart_at or [], dtype=np.int64)
        n_rest = ((tr.n_slots // H + 1) if H else 0) + ra.size
        if (n_rest + 1) * N > MAX_GAMMA_VALUES:
            return None
        rng = np.random.default_rng(self.seed)
        gammas = np.stack([rng.standard_normal(N) for _ in range(n_rest + 1)])
        kern = learner_kernels.ftpl_kernel if self.refresh == 1 else learner_kernels.ftpl_heap_kernel
        ids, ptr, one = kernels.trace_arrays(tr)
        cps = checkpoint_array(checkpoints)
        stats, cp, nrest = kern(ids, ptr, one, N, K, Z, self.refresh, self.c_eta, self._scale,
                                self.loss == "count", int(H), ra, gammas, cps)
        return kernel_result(self.name, tr, K, Z, stats, cp, cps, {"restarts": int(nrest)})


class RestartedLAFTPL(LAFTPL):
    """LA-FTPL restarted every H = ceil((T sqrt(K ln N) / max(B, 1))^{2/3}) slots (spec §4.6);
    T defaults to the trace length. No restart when H >= T."""

    name = "LA-FTPL-restart"

    def __init__(self, B: int, T: int | None = None, **kw) -> None:
        self.B = check_scalar(B, "B", int, min=0)
        self.T = None if T is None else check_scalar(T, "T", int, min=1)
        super().__init__(**kw)

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        T = self.T or trace.n_slots
        H = ftpl_restart_period(T, K, trace.n_items, self.B)
        self.restart_every = H if H < T else None
        self.H = H
        super().reset(trace, K, Z)


def FTPLHitCount(c_eta: float = 1.0, refresh: int = 1, seed: int = 0) -> LAFTPL:
    """Z-agnostic FTPL on request counts (Bhattacharjee et al.): eta_t as in LA-FTPL with Z = 1,
    C_B = 0; admit iff in the perturbed top-K."""
    return LAFTPL(c_eta=c_eta, refresh=refresh, seed=seed, z_agnostic=True, loss="count",
                  name="FTPL")
