"""Online baseline policies (the offline ones are in ``offline.py``), all run in the same simulator with completion-time admission/eviction.

| name            | rule                                                                          |
| LRU, FIFO       | classical (admit always at completion; LRU moves to MRU on hits)              |
| LFU             | perfect LFU: global request counts; admit iff cache not full or count(i) >    |
|                 | min cached count, then evict the min (ties by LRU)                            |
| InCacheLFU      | always admit; counts since insertion; evict the min count (ties by LRU)       |
| Marker          | randomized marking: mark on hit; at completion if all cached are marked,      |
|                 | unmark all (new phase); evict a uniform random unmarked item; insert marked   |
| LRUMAD          | Atre et al.: evict min of mean AD per window / (t - last_request + 1)         |
| LHDMAD          | Atre et al.: evict min of mean AD x LHD hit density                           |
| ARCMAD          | Atre et al.: ARC's lists and target p, each list's victim = min MAD rank      |
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.delayed_hits import kernels
from neurips26.delayed_hits.base import Policy, SimResult, checkpoint_array, kernel_result
from neurips26.delayed_hits.trace import Trace


class FIFO(Policy):
    """First in, first out (insertion order at completion)."""

    name = "FIFO"

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self._od: OrderedDict[int, None] = OrderedDict()

    def admit(self, i, t, ad, cache):
        od = self._od
        victim = None
        if len(od) >= self.K:
            victim, _ = od.popitem(last=False)
        od[i] = None
        return True, victim

    def admit_bytes(self, i, t, ad, cache, need, size):
        """Evict from the FIFO/LRU end until the incoming object fits."""
        od = self._od
        victims, freed = [], 0
        while freed < need:
            v, _ = od.popitem(last=False)
            victims.append(v)
            freed += size[v]
        od[i] = None
        return True, victims

    def run_kernel(self, tr, K, Z, checkpoints=()) -> SimResult | None:
        """The fused O(1)-per-request LRU/FIFO kernel. Only for FIFO and LRU themselves: a
        subclass may change the rule the kernel hard-codes."""
        if type(self) not in (FIFO, LRU):
            return None
        ids, ptr, one = kernels.trace_arrays(tr)
        cps = checkpoint_array(checkpoints)
        stats, cp = kernels.lru_kernel(ids, ptr, one, tr.n_items, K, Z, type(self) is FIFO, cps)
        return kernel_result(self.name, tr, K, Z, stats, cp, cps)


class LRU(FIFO):
    """Least recently used; an item enters at MRU when its fetch completes."""

    name = "LRU"
    uses_hit = True

    def on_hit(self, i: int, t: int) -> None:
        self._od.move_to_end(i)


class _MinHeapCache:
    """Cached items keyed by a mutable priority with lazy deletion (min first)."""

    def __init__(self) -> None:
        self.key: dict[int, tuple] = {}
        self.heap: list = []

    def set(self, i: int, key: tuple) -> None:
        self.key[i] = key
        heapq.heappush(self.heap, (key, i))
        if len(self.heap) > 8 * len(self.key) + 64:
            self.heap = [(k, j) for j, k in self.key.items()]
            heapq.heapify(self.heap)

    def peek(self) -> tuple[tuple, int]:
        h, key = self.heap, self.key
        while True:
            k, j = h[0]
            if key.get(j) == k:
                return k, j
            heapq.heappop(h)

    def remove(self, i: int) -> None:
        del self.key[i]

    def __len__(self) -> int:
        return len(self.key)

    def __contains__(self, i: int) -> bool:
        return i in self.key


class LFU(Policy):
    """Perfect LFU (global counts over all requests) with count-based admission; ties by LRU."""

    name = "LFU"
    uses_request = True
    uses_hit = True

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self.count = [0] * trace.n_items
        self._c = _MinHeapCache()

    def on_request(self, i, t):
        self.count[i] += 1

    def on_hit(self, i, t):
        self._c.set(i, (self.count[i], t))

    def admit(self, i, t, ad, cache):
        c = self._c
        if len(c) < self.K:
            c.set(i, (self.count[i], t))
            return True, None
        (cnt, _), j = c.peek()
        if self.count[i] > cnt:
            c.remove(j)
            c.set(i, (self.count[i], t))
            return True, j
        return False, None


class InCacheLFU(Policy):
    """In-cache LFU: always admit; count since insertion; evict min count (ties by LRU)."""

    name = "LFU-incache"
    uses_hit = True

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self._n: dict[int, int] = {}
        self._c = _MinHeapCache()

    def on_hit(self, i, t):
        self._n[i] += 1
        self._c.set(i, (self._n[i], t))

    def admit(self, i, t, ad, cache):
        c = self._c
        victim = None
        if len(c) >= self.K:
            _, victim = c.peek()
            c.remove(victim)
            del self._n[victim]
        self._n[i] = 1
        c.set(i, (1, t))
        return True, victim


class Marker(Policy):
    """Randomized marking algorithm (Fiat et al.), completion-time insertion."""

    name = "Marker"
    uses_hit = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = check_scalar(seed, "seed", int, min=0)

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self.rng = np.random.default_rng(self.seed)
        self._marked: set = set()
        self._unmarked: list = []                     # swap-remove list
        self._pos: dict[int, int] = {}

    def _add_unmarked(self, i):
        self._pos[i] = len(self._unmarked)
        self._unmarked.append(i)

    def _remove_unmarked(self, i):
        k = self._pos.pop(i)
        last = self._unmarked.pop()
        if last != i:
            self._unmarked[k] = last
            self._pos[last] = k

    def on_hit(self, i, t):
        if i in self._pos:
            self._remove_unmarked(i)
            self._marked.add(i)

    def admit(self, i, t, ad, cache):
        victim = None
        if len(self._marked) + len(self._unmarked) >= self.K:
            if not self._unmarked:                    # new phase
                for j in self._marked:
                    self._add_unmarked(j)
                self._marked = set()
            victim = self._unmarked[int(self.rng.integers(len(self._unmarked)))]
            self._remove_unmarked(victim)
        self._marked.add(i)
        return True, victim


class _ArrayCache:
    """Cached items in dense slots so a per-item score can be minimised with numpy."""

    def __init__(self, K: int) -> None:
        self.items = np.full(K, -1, dtype=np.int64)
        self.slot: dict[int, int] = {}
        self.free = list(range(K - 1, -1, -1))

    def add(self, i: int) -> int:
        s = self.free.pop()
        self.items[s] = i
        self.slot[i] = s
        return s

    def remove(self, i: int) -> int:
        s = self.slot.pop(i)
        self.items[s] = -1
        self.free.append(s)
        return s

    def full(self) -> bool:
        return not self.free


class _VirtualAD:
    """Per-item aggregate delay of the virtual (shadow) windows, as Atre et al.'s simulator keeps it
    for every packet, cached or not (``recordPacketArrival``): a window opens at a request when
    none is open (t - start >= Z) and costs Z, later requests in it cost Z - (t - start)."""

    def __init__(self, n: int, Z: int) -> None:
        self.Z = Z
        self.vstart = [-Z] * n
        self.cum = np.zeros(n)           # cumulative AD over all windows (incl. the open one)
        self.cur = np.zeros(n)           # AD of the open window
        self.w = np.zeros(n)             # number of windows
        self.sq = np.zeros(n)            # sum of squared AD of the completed windows

    def record(self, i: int, t: int) -> None:
        d = t - self.vstart[i]
        if d >= self.Z:
            if self.w[i] > 0:
                self.sq[i] += self.cur[i] * self.cur[i]
            self.vstart[i] = t
            self.w[i] += 1
            self.cur[i] = self.Z
            self.cum[i] += self.Z
        else:
            self.cur[i] += self.Z - d
            self.cum[i] += self.Z - d

    def mean_all(self, items: np.ndarray) -> np.ndarray:
        """LRU-MAD's statistic: cumulative AD / number of windows."""
        return self.cum[items] / np.maximum(self.w[items], 1)

    def mean_past(self, items: np.ndarray) -> np.ndarray:
        """LHD-MAD's statistic: mean AD of the completed windows (the open one if it is the only one)."""
        w = self.w[items]
        past = (self.cum[items] - self.cur[items]) / np.maximum(w - 1, 1)
        return np.where(w <= 1, self.cur[items], past)


class _RecencyMAD(Policy):
    """Shared state of the rank-by-recency MAD policies (LRU-MAD, VA-CDH): virtual-window
    aggregate delays, last request slot per item and per cache slot; always admit, evict the
    minimum of ``_rank(t)`` over the cache slots (ties: the lowest cache slot) at completion."""

    uses_request = True

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self.ad = _VirtualAD(trace.n_items, Z)
        self._last = [0] * trace.n_items
        self._c = _ArrayCache(K)
        self._last_slot = np.zeros(K, dtype=np.int64)

    def on_request(self, i, t):
        s = self._c.slot.get(i)
        if s is not None:
            self._last_slot[s] = t
        self._last[i] = t
        self.ad.record(i, t)

    def _rank(self, t) -> np.ndarray:
        """Rank of the items in the cache slots (``self._c.items``) at slot t."""
        raise NotImplementedError

    def admit(self, i, t, ad, cache):
        c = self._c
        victim = None
        if c.full():
            s = int(np.argmin(self._rank(t)))         # ties: the lowest cache slot
            victim = int(c.items[s])
            c.remove(victim)
        s = c.add(i)
        self._last_slot[s] = self._last[i]
        return True, victim

    def admit_bytes(self, i, t, ad, cache, need, size):
        """Evict the minimum rank repeatedly until the incoming object fits."""
        c = self._c
        victims, freed = [], 0
        if need > 0:
            rank = self._rank(t).astype(np.float64)
            rank[c.items < 0] = np.inf
            for s in np.argsort(rank, kind="stable"):  # ties: the lowest cache slot
                if freed >= need:
                    break
                v = int(c.items[s])
                victims.append(v)
                freed += size[v]
            for v in victims:
                c.remove(v)
        s = c.add(i)
        self._last_slot[s] = self._last[i]
        return True, victims


class VACDH(_RecencyMAD):
    """VA-CDH (variance-aware MAD, arXiv 2504.20335, as summarised in the spec): rank =
    (E[D] + omega sigma[D]) / (t - last_request + 1) over the completed virtual windows' aggregate
    delays D (the open window alone while it is the only one); always admit, evict the minimum.
    omega = 1 is our ASSUMPTION (argument ``omega``)."""

    name = "VA-CDH"

    def __init__(self, omega: float = 1.0) -> None:
        self.omega = check_scalar(omega, "omega", float, min=0.0)

    def _rank(self, t):
        items = self._c.items
        mean = self.ad.mean_past(items)
        done = np.maximum(self.ad.w[items] - 1, 1)
        var = np.where(self.ad.w[items] <= 1, 0.0,
                       np.maximum(self.ad.sq[items] / done - mean * mean, 0.0))
        return (mean + self.omega * np.sqrt(var)) / (t - self._last_slot + 1)


class LRUMAD(_RecencyMAD):
    """LRU-MAD (Atre et al., ``cache_lru_aggdelay.cpp``): rank = (cumulative virtual-window AD /
    number of windows) / (t - last_request + 1); always admit, evict the minimum rank at completion.
    At Z = 1 every window's AD is 1, so it is LRU."""

    name = "LRU-MAD"

    def _rank(self, t):
        return self.ad.mean_all(self._c.items) / (t - self._last_slot + 1)


class LHDMAD(Policy):
    """LHD-MAD (Atre et al., ``cache_lhd_aggdelay.cpp``): rank = mean AD of the completed
    virtual windows x LHD hit density.

    LHD (Beckmann et al., NSDI 2018) as configured in the spec and Atre's code: 16 classes from
    the (last hit age + previous hit age) with Atre's ``hitAgeClass`` (log2 distance to the maximum
    age); ages coarsened by ``age_shift``; hit and eviction counters per (class, age) with EWMA
    decay 0.9 every ``reconfig`` accesses; density(a) = sum_{x>=a} hits[x] /
    sum_{x>=a} sum_{y>=x} (hits[y] + evictions[y]); initial density (class + 1) / (age + 1) (~GDSF,
    as in Atre's code); items at the maximum age are evicted first; a 1% explorer budget keeps
    randomly chosen items until they reach the maximum age.
    Differences to Atre's code (ASSUMPTION): max_age 256 instead of 20,000 and a fixed
    age-coarsening shift chosen from K instead of the adaptive one. ``mad=False``: plain LHD.
    """

    name = "LHD-MAD"
    uses_request = True

    def __init__(self, n_classes: int = 16, max_age: int = 256, age_shift: int | None = None,
                 reconfig: int = 1 << 20, decay: float = 0.9, explorer_budget: float = 0.01,
                 mad: bool = True, seed: int = 0) -> None:
        self.n_classes = check_scalar(n_classes, "n_classes", int, min=1)
        self.max_age = check_scalar(max_age, "max_age", int, min=2)
        self.age_shift = (None if age_shift is None
                          else check_scalar(age_shift, "age_shift", int, min=0))
        self.reconfig = check_scalar(reconfig, "reconfig", int, min=1)
        self.decay = check_scalar(decay, "decay", float, min=0.0)
        self.explorer_budget = check_scalar(explorer_budget, "explorer_budget", float, min=0.0)
        self.mad = bool(mad)
        self.seed = check_scalar(seed, "seed", int, min=0)
        if not self.mad:
            self.name = "LHD"

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        n = trace.n_items
        # age coarsening: ages are measured in units of 2^shift slots so that ~max_age bins span
        # a few cache lifetimes (K slots per lifetime at one request per slot)
        self.shift = self.age_shift if self.age_shift is not None else max(
            0, int(math.ceil(math.log2(max(4 * K, 1) / self.max_age))))
        self.hits = np.zeros((self.n_classes, self.max_age))
        self.evs = np.zeros((self.n_classes, self.max_age))
        # before the first reconfiguration: (class + 1) / (age + 1), as in Atre's code (~GDSF)
        self.density = (np.arange(1, self.n_classes + 1)[:, None]
                        / np.arange(1, self.max_age + 1)[None, :])
        self.last = [0] * n                           # last access slot
        self.prev_age = [0] * n                       # age at the last access (reuse distance)
        self.cls = [0] * n
        self.ad = _VirtualAD(n, Z)
        self._c = _ArrayCache(K)
        self._last_slot = np.zeros(K, dtype=np.int64)
        self._cls = np.zeros(K, dtype=np.int64)
        self._explorer = np.zeros(K, dtype=bool)
        self._accesses = 0
        self.rng = np.random.default_rng(self.seed)
        self._max_explorers = int(self.explorer_budget * K)

    def on_request(self, i, t):
        age_raw = t - self.last[i]
        s = self._c.slot.get(i)
        if s is not None:                             # a hit: count it at its (class, age)
            self.hits[self._cls[s], min(age_raw >> self.shift, self.max_age - 1)] += 1
            self._last_slot[s] = t
        c = self._class((age_raw + self.prev_age[i]) >> self.shift)
        self.prev_age[i] = age_raw
        self.last[i] = t
        self.cls[i] = c
        if s is not None:
            self._cls[s] = c
            self._explorer[s] = False
        self._accesses += 1
        if self.mad:
            self.ad.record(i, t)
        if self._accesses % self.reconfig == 0:
            self._reconfigure()

    def _class(self, age: int) -> int:
        """Atre's hitAgeClass: the number of doublings that take ``age`` past the maximum age."""
        if age == 0:
            return self.n_classes - 1
        log = 0
        while age < self.max_age and log < self.n_classes - 1:
            age <<= 1
            log += 1
        return log

    def _reconfigure(self) -> None:
        h, e = self.hits, self.evs
        tot = h + e
        # sum_{x>=a} hits[x]
        hit_tail = np.cumsum(h[:, ::-1], axis=1)[:, ::-1]
        # sum_{x>=a} sum_{y>=x} (hits[y]+evs[y]) = sum_{y>=a} (y - a + 1) tot[y]
        ev_tail = np.cumsum(tot[:, ::-1], axis=1)[:, ::-1]
        life = np.cumsum(ev_tail[:, ::-1], axis=1)[:, ::-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            dens = np.where(life > 0, hit_tail / life, 0.0)
        self.density = dens
        self.hits *= self.decay
        self.evs *= self.decay

    def admit(self, i, t, ad, cache):
        c = self._c
        victim = None
        if c.full():
            ages = np.minimum((t - self._last_slot) >> self.shift, self.max_age - 1)
            dens = self.density[self._cls, ages]
            rank = dens * self.ad.mean_past(c.items) if self.mad else dens.copy()
            rank[self._explorer] = np.inf             # explorers are kept ...
            rank[ages >= self.max_age - 1] = -np.inf  # ... until they reach the maximum age
            s = int(np.argmin(rank))                  # ties: the lowest cache slot
            victim = int(c.items[s])
            self.evs[self._cls[s], ages[s]] += 1
            self._explorer[s] = False
            c.remove(victim)
        s = c.add(i)
        self._last_slot[s] = self.last[i]
        self._cls[s] = self.cls[i]
        self._explorer[s] = (self._max_explorers > 0 and int(self._explorer.sum()) < self._max_explorers
                             and self.rng.random() < self.explorer_budget)
        return True, victim


class ARCMAD(Policy):
    """ARC-MAD (Atre et al., ``cache_arc_aggdelay.cpp``): ARC's lists T1/T2 (cached), ghosts B1/B2
    and target p (Megiddo & Modha), with the victim of a list chosen as the minimum of the MAD rank
    (mean AD of the completed virtual windows) / (t - last_request + 1) instead of the list's LRU
    end. As in Atre's code: a hit moves the item to T2; a completed fetch that served delayed hits
    (its window had more than one request) enters T2 directly, otherwise T1; a ghost hit in B1
    (B2) raises (lowers) p by max(1, |B2|/|B1|) (max(1, |B1|/|B2|)) and enters T2; with Z > 100 an
    item seen at most twice has rank 0. ``mad=False``: plain ARC (Atre's ``cache_arc.cpp``), the
    victim = the list's LRU end in write order (admission at completion, hits); at Z = 1 a write
    is a request, so ARC-MAD, whose AD is then 1 for every window, is ARC. Differences to Atre's code (ASSUMPTION): ties go to the smaller item id (Atre: hash
    order); the T1-full branch ranks with (t, Z) where Atre's passes them swapped (``popRank(records_,
    z, clk)``), which we read as a slip."""

    name = "ARC-MAD"
    uses_request = True
    uses_hit = True

    def __init__(self, mad: bool = True) -> None:
        self.mad = bool(mad)
        if not self.mad:
            self.name = "ARC"

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        self.ad = _VirtualAD(trace.n_items, Z)
        self._last = np.zeros(trace.n_items, dtype=np.int64)
        self._count = np.zeros(trace.n_items, dtype=np.int64)
        self.t1: dict[int, None] = {}
        self.t2: dict[int, None] = {}
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()
        self.p = 0
        self._window_reqs: dict[int, int] = {}       # requests served by the open fetch of i
        self._wseq = np.zeros(trace.n_items, dtype=np.int64)   # order of the last write (ARC)
        self._tick = 0

    def on_request(self, i, t):
        self._last[i] = t
        self._count[i] += 1
        if self.mad:
            self.ad.record(i, t)
        if i not in self.t1 and i not in self.t2:
            self._window_reqs[i] = self._window_reqs.get(i, 0) + 1

    def on_hit(self, i, t):
        if i in self.t1:                              # a hit moves the item to T2
            del self.t1[i]
            self.t2[i] = None
        self._tick += 1
        self._wseq[i] = self._tick

    def _pop_rank(self, lst: dict, t: int) -> int:
        """Remove and return the list's victim: the minimum rank, ties to the smaller id."""
        items = np.fromiter(lst, dtype=np.int64, count=len(lst))
        if self.mad:
            rank = self.ad.mean_past(items) / (t - self._last[items] + 1)
            if self.Z > 100:
                rank = np.where(self._count[items] <= 2, 0.0, rank)
        else:
            rank = self._wseq[items].astype(np.float64)              # least recently written
        m = rank.min()
        v = int(items[rank == m].min())
        del lst[v]
        return v

    def _replace(self, i: int, t: int) -> int | None:
        """ARC's REPLACE: evict from T1 (to ghost B1) or T2 (to ghost B2)."""
        n1 = len(self.t1)
        if n1 and (n1 > self.p or (i in self.b2 and n1 == self.p)):
            v = self._pop_rank(self.t1, t)
            self.b1[v] = None
            return v
        if self.t2:
            v = self._pop_rank(self.t2, t)
            self.b2[v] = None
            return v
        return None

    def admit(self, i, t, ad, cache):
        K = self.K
        reqs = self._window_reqs.pop(i, 1)
        victim = None
        if i in self.b1:
            nb1, nb2 = len(self.b1), len(self.b2)
            self.p = min(self.p + (1 if nb1 >= nb2 else int(round(nb2 / nb1))), K)
            victim = self._replace(i, t)
            del self.b1[i]
            self.t2[i] = None
        elif i in self.b2:
            nb1, nb2 = len(self.b1), len(self.b2)
            delta = 1 if nb2 >= nb1 else int(round(nb1 / nb2))
            self.p = max(self.p - delta, 0)
            victim = self._replace(i, t)
            del self.b2[i]
            self.t2[i] = None
        else:
            n1 = len(self.t1)
            if n1 + len(self.b1) == K:
                if n1 < K:
                    self.b1.popitem(last=False)
                    victim = self._replace(i, t)
                else:
                    victim = self._pop_rank(self.t1, t)              # no ghost
            else:
                total = n1 + len(self.b1) + len(self.t2) + len(self.b2)
                if total >= K:
                    if total == 2 * K:
                        self.b2.popitem(last=False)
                    victim = self._replace(i, t)
            (self.t2 if reqs > 1 else self.t1)[i] = None
        self._tick += 1
        self._wseq[i] = self._tick
        return True, victim
