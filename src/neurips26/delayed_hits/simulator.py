"""The delayed-hit cache simulator (exact slot semantics of Atre et al.'s simulator, with batches).

Model (spec §1). Slots t = 1..T, slot t carries requests R_t; cache C (|C| <= K); integer fetch
latency Z >= 1; in-flight table F: item -> start slot s of its outstanding fetch. Per slot t:

1. every request of item i in R_t, in arrival order (``policy.on_request(i, t)`` first):
     * i in C  -> **hit**, latency 0                              (``policy.on_hit``)
     * i in F  -> **delayed hit**, latency Z - (t - F[i])          (in [1, Z-1]; Z for same-slot mates)
     * else    -> **miss**, F[i] = t, latency Z                    (``policy.on_miss``)
2. completions: every i with F[i] + Z - 1 == t completes at the END of slot t: F[i] is deleted and
   ``policy.admit(i, t, ad)`` -> (admit, victim); if admitted and the cache is full the victim is
   evicted first. The item is usable from slot t + 1 (completion-time admission and eviction).

``ad`` is the aggregate delay (AD) of the window: Z plus the latencies of its delayed hits.

While serving, the engine also computes the action-independent **shadow loss** (spec §2): a virtual
"never cached" window of i opens at a request of i when none is open (it covers slots s..s+Z-1);
the request costs Z when it opens the window and Z - (t - s) otherwise. The *shadow cost* of the run
is sum_t sum_{i not in C_t} shadow_loss[t, i] (C_t = contents at the start of slot t), which is what
LA-FTPL's shadow-regret bound controls.

Two interfaces over one engine (:class:`Cache`, the reference): ``Cache(policy, K, Z,
n_items=N).request(obj, t)`` serves one request at a time like libCacheSim's ``cache.get(req)``
(``process(requests)`` feeds an iterable, ``result()`` closes the run), and ``simulate(trace, ...)``
feeds a whole trace through the same engine, or through the policy's compiled kernel (the fast path,
``Policy.run_kernel``, tested equal). ``capacity="bytes"``: K is a byte budget and objects have
sizes (``Trace.sizes`` or ``request(..., size=)``); the latency model is unchanged (Z slots per
fetch, whatever the size); an object larger than K is fetched and never admitted.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.delayed_hits.base import InvariantError, Policy, SimResult, check_cache_args
from neurips26.delayed_hits.trace import Trace, as_trace

__all__ = ["simulate", "Cache", "StreamInfo", "Policy", "SimResult", "InvariantError"]


class StreamInfo:
    """What a policy's ``reset`` may read about a stream that is not a whole trace: the number of
    items and b_max; the horizon is unknown (a restarted policy needs its ``T``) and offline
    policies (Belady, static OPT) refuse it."""

    def __init__(self, n_items: int, max_item_batch: int = 1, name: str = "stream") -> None:
        self.n_items = n_items
        self.max_item_batch = max_item_batch
        self.name = name

    @property
    def n_slots(self):
        raise ValueError("a stream has no known horizon T: give the policy its T (e.g. "
                         "RestartedLAFTPL(B, T=...)) or run simulate on the whole trace")


class Cache:
    """The delayed-hit slot model (module docstring), one request at a time.

    policy, K, Z:  the policy, the capacity (items, or bytes with ``capacity="bytes"``), the fetch
                   latency in slots.
    n_items:       the number of distinct objects (policies size their per-item state by it);
                   object ids are remapped to 0..N-1 in first-seen order (``labels``); a stream
                   with more distinct ids raises. An upper bound also works, but then policies that
                   rank every item (UCB-DH, LA-FTPL) see never-requested phantom items.
    trace:         instead of n_items: the whole :class:`Trace` (internal ids; what ``simulate``
                   uses, and what offline policies need).
    b_max:         the bound on one item's requests in one slot that UCB-DH / LA-FTPL read (streams).
    warmup, checkpoints, record_latencies, check_invariants, callback: as in :func:`simulate`.

    ``request(obj, t=None, size=None) -> latency``: t defaults to the next slot (one request per
    slot); several requests may share a slot (give the same t) and slots may be skipped (idle slots
    between). ``process(requests)`` takes ids, ``(obj, t)`` or ``(obj, t, size)`` tuples.
    ``result(T=None)`` closes the run (through slot T when given) and returns the ``SimResult``.
    """

    def __init__(self, policy: Policy, K: int, Z: int, *, n_items: int | None = None,
                 trace: Trace | None = None, capacity: str = "items", b_max: int = 1,
                 warmup: int = 0, checkpoints: Iterable[int] = (), record_latencies: bool = False,
                 check_invariants: bool = False,
                 callback: Callable[[int], None] | None = None) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a Policy instance, got {type(policy).__name__}")
        check_choice(capacity, "capacity", ("items", "bytes"))
        if trace is None:
            if n_items is None:
                raise ValueError("n_items (the number of distinct objects of the stream) is needed: "
                                 "the policies size their per-item state by it")
            n_items = check_scalar(n_items, "n_items", int, min=1)
            info = StreamInfo(n_items, check_scalar(b_max, "b_max", int, min=1))
            self._index: dict | None = {}
        else:
            n_items = trace.n_items
            info = trace
            self._index = None
        N = n_items
        K, Z, K_eff = check_cache_args(K, Z, N)
        self.policy, self.K, self.Z, self.N = policy, K, Z, N
        self.bytes = capacity == "bytes"
        self.warmup = check_scalar(warmup, "warmup", int, min=0)
        self._cps = sorted({check_scalar(c, "checkpoint", int, min=1) for c in checkpoints})
        self._check = bool(check_invariants)
        self._callback = callback
        # a byte budget bounds the object count only by N; policies keep O(K) state, so give them N
        policy.reset(info, N if self.bytes else K_eff, Z)
        self.cache: set[int] = set(int(i) for i in policy.initial_cache())
        if len(self.cache) > K_eff:
            raise ValueError(f"policy {policy.name}: initial cache holds {len(self.cache)} items > K={K}")
        self.inflight: dict[int, int] = {}      # item -> start slot
        self.adacc: dict[int, int] = {}         # item -> aggregate delay of its open window
        self.pending: deque = deque()           # (start, item) in start order == completion order
        self.vstart = [-Z] * N                  # start of the item's virtual (shadow) window
        self.L = [0] * N                        # cumulative shadow loss per item
        self.size: dict[int, int] = {}          # bytes of each cached or in-flight item
        self.used = 0                           # bytes cached
        if self.bytes and self.cache:
            raise ValueError("capacity='bytes': pre-loaded caches are not supported")
        p = policy
        self._on_request = p.on_request if p.uses_request else None
        self._on_hit = p.on_hit if p.uses_hit else None
        self._on_miss = p.on_miss if p.uses_miss else None
        self._on_slot_end = p.on_slot_end if p.uses_slot_end else None
        self._prefetch = p.prefetch if p.uses_prefetch else None
        self._horizon = trace.n_slots if trace is not None else None
        self.n_prefetch = 0
        self.lat_total = self.hits = self.dhits = self.misses = self.adm = self.evi = 0
        self.shadow = self.n_req = 0
        self.base = None
        self.cp_out: dict[int, tuple[int, int, int]] = {}
        self._cp_iter = iter(self._cps)
        self._next_cp = next(self._cp_iter, None)
        self.lats: list | None = [] if record_latencies else None
        self.t = 1                              # the open slot
        self._busy = False                      # the open slot has a request
        self._closed = False

    # ---- the slot model ------------------------------------------------------------------

    def _serve(self, i: int, t: int, size: int = 1) -> int:
        """One request of item i in slot t (spec §1); returns its latency."""
        if self._on_request is not None:
            self._on_request(i, t)
        Z = self.Z
        if i in self.cache:
            lat = 0
            self.hits += 1
            if self._on_hit is not None:
                self._on_hit(i, t)
        else:
            inflight = self.inflight
            s = inflight.get(i)
            if s is not None:
                lat = Z - (t - s)                     # delayed hit
                self.adacc[i] += lat
                self.dhits += 1
            else:
                lat = Z                               # miss: start a fetch
                self.inflight[i] = t
                self.adacc[i] = Z
                self.pending.append((t, i))
                self.misses += 1
                if self.bytes:
                    self.size[i] = size
                if self._on_miss is not None:
                    self._on_miss(i, t)
        self.lat_total += lat
        if self.lats is not None:
            self.lats.append(lat)
        if self._check and not (lat == 0 or 1 <= lat <= Z):
            raise InvariantError(f"slot {t}: latency {lat} outside {{0}} U [1, {Z}]")
        # shadow loss (action independent): virtual window of i covers vstart..vstart+Z-1
        vstart = self.vstart
        vs = vstart[i]
        if t - vs >= Z:
            vstart[i] = t
            sc = Z
        else:
            sc = Z - (t - vs)
        self.L[i] += sc
        if lat:                                       # i not in C_t: pays its shadow loss
            self.shadow += sc
        self.n_req += 1
        return lat

    def _complete(self, i: int, t: int, ad: int) -> None:
        """Fetch of i completes at the end of slot t: the policy admits it (or not)."""
        pol, cache = self.policy, self.cache
        if self.bytes:
            s = self.size[i]
            if s > self.K:                            # larger than the whole cache: never admitted
                del self.size[i]
                return
            ok, victims = pol.admit_bytes(i, t, ad, cache, self.used + s - self.K, self.size)
            if not ok:
                del self.size[i]
                return
            for v in victims:
                if v not in cache:
                    raise RuntimeError(f"policy {pol.name}: victim {v} is not cached (slot {t})")
                cache.discard(v)
                self.used -= self.size.pop(v)
                self.evi += 1
            if self.used + s > self.K:
                raise RuntimeError(f"policy {pol.name}: admitted {i} ({s} bytes) without freeing "
                                   f"room ({self.used} of {self.K} bytes used, slot {t})")
            cache.add(i)
            self.used += s
            self.adm += 1
            return
        ok, victim = pol.admit(i, t, ad, cache)
        if ok:
            if victim is not None and victim >= 0:
                if victim not in cache:
                    raise RuntimeError(f"policy {pol.name}: victim {victim} is not cached (slot {t})")
                cache.discard(victim)
                self.evi += 1
            if len(cache) >= min(self.K, self.N):
                raise RuntimeError(f"policy {pol.name}: admitted {i} into a full cache "
                                   f"without a victim (slot {t})")
            cache.add(i)
            self.adm += 1

    def _end_slot(self, t: int) -> None:
        """Completions at the end of slot t, then the policy's slot-end hook and bookkeeping."""
        pending = self.pending
        if pending:
            start_due = t - self.Z + 1
            while pending and pending[0][0] == start_due:
                _, i = pending.popleft()
                del self.inflight[i]
                self._complete(i, t, self.adacc.pop(i))
        if self._on_slot_end is not None:
            self._on_slot_end(t)
        if self._prefetch is not None and (self._horizon is None or t < self._horizon):
            for i in self._prefetch(t, self.cache, self.inflight):
                i = int(i)
                if i not in self.cache and i not in self.inflight:
                    self.inflight[i] = t + 1          # a zero-request fetch starting next slot
                    self.adacc[i] = 0
                    pending.append((t + 1, i))
                    self.n_prefetch += 1
                    if self.bytes:
                        self.size[i] = 1
        if self._callback is not None:
            self._callback(t)
        if self._check:
            _check(self.cache, self.inflight, min(self.K, self.N), t, self.used, self.K, self.bytes)
        if t == self.warmup:
            self.base = (self.lat_total, self.hits, self.dhits, self.misses, self.adm, self.evi,
                         self.shadow, self.n_req)
        while self._next_cp is not None and self._next_cp <= t:
            if self._next_cp == t:
                self.cp_out[t] = (self.lat_total, self.shadow, self.n_req)
            self._next_cp = next(self._cp_iter, None)

    # ---- the streaming interface ---------------------------------------------------------

    def _item(self, obj) -> int:
        idx = self._index
        if idx is None:                               # a whole trace: ids are already 0..N-1
            i = int(obj)
            if not 0 <= i < self.N:
                raise ValueError(f"obj must be an item id in [0, {self.N}), got {obj!r}")
            return i
        i = idx.get(obj)
        if i is None:
            i = len(idx)
            if i >= self.N:
                raise ValueError(f"obj {obj!r} is the {i + 1}-th distinct object of the stream, "
                                 f"more than n_items={self.N}")
            idx[obj] = i
        return i

    def _advance(self, t: int) -> None:
        """Close the open slot and every idle slot before slot t."""
        while self.t < t:
            self._end_slot(self.t)
            self.t += 1
            self._busy = False

    def request(self, obj, t: int | None = None, size: int | None = None) -> int:
        """Serve one request of ``obj`` in slot ``t`` (default: the next slot); returns its latency
        (0 hit, Z - (t - s) delayed hit, Z miss)."""
        if self._closed:
            raise RuntimeError("the run is closed (result() was called)")
        if t is None:
            t = self.t + 1 if self._busy else self.t
        else:
            t = check_scalar(t, "t", int, min=1)
            if t < self.t:
                raise ValueError(f"t must be non-decreasing: slot {t} after slot {self.t}")
        if self.bytes:
            if size is None:
                raise ValueError("capacity='bytes' needs the object's size (request(obj, t, size))")
            size = check_scalar(size, "size", int, min=1)
        self._advance(t)
        self._busy = True
        return self._serve(self._item(obj), t, size or 1)

    def process(self, requests: Iterable) -> "Cache":
        """Feed ``requests``: object ids (one per slot), ``(obj, t)`` or ``(obj, t, size)``.
        A bare id is ``request(obj)`` (the next slot), done here without the per-call checks."""
        if self._closed:
            raise RuntimeError("the run is closed (result() was called)")
        serve, end_slot, item, request = self._serve, self._end_slot, self._item, self.request
        for r in requests:
            if isinstance(r, tuple) or self.bytes:
                request(*r) if isinstance(r, tuple) else request(r)
                continue
            if self._busy:                            # close the open slot: r goes to the next
                end_slot(self.t)
                self.t += 1
            self._busy = True
            serve(item(r), self.t)
        return self

    @property
    def labels(self) -> list:
        """Original object ids in internal-id order (streams)."""
        return list(self._index) if self._index is not None else []

    def result(self, T: int | None = None) -> SimResult:
        """Close the run (through slot ``T`` when given; idle slots after the last request count as
        slots) and return its metrics (slots after the warm-up only)."""
        if not self._closed:
            last = self.t if T is None else check_scalar(T, "T", int, min=self.t)
            self._advance(last)
            self._end_slot(last)
            self.t = last
            self._closed = True
        if self.warmup and self.warmup >= self.t:
            raise ValueError(f"warmup must be < T ({self.t}), got {self.warmup}")
        base = self.base or (0,) * 8
        lats = None if self.lats is None else np.asarray(self.lats, dtype=np.int32)
        if self._check and lats is not None and int(lats.sum()) != self.lat_total:
            raise InvariantError("sum of per-request latencies != reported total")
        n_items = self.N if self._index is None else len(self._index)
        extra = {"prefetches": self.n_prefetch} if self._prefetch is not None else {}
        return SimResult(policy=self.policy.name, K=self.K, Z=self.Z, n_slots=self.t - self.warmup,
                         n_requests=self.n_req - base[7], total_latency=self.lat_total - base[0],
                         hits=self.hits - base[1], delayed_hits=self.dhits - base[2],
                         misses=self.misses - base[3], admissions=self.adm - base[4],
                         evictions=self.evi - base[5], shadow_cost=self.shadow - base[6],
                         shadow_loss_per_item=np.asarray(self.L[:n_items], dtype=np.int64),
                         checkpoints=self.cp_out, latencies=lats, extra=extra)


def _chunks(arr: np.ndarray, size: int = 1 << 16):
    for lo in range(0, arr.size, size):
        yield lo, arr[lo: lo + size].tolist()


def simulate(trace, policy: Policy, K: int, Z: int, *, warmup: int = 0,
             checkpoints: Iterable[int] = (), record_latencies: bool = False,
             check_invariants: bool = False, callback: Callable[[int], None] | None = None,
             engine: str = "auto", capacity: str = "items") -> SimResult:
    """Run ``policy`` on ``trace`` with cache size K and fetch latency Z (spec §1).

    trace:        a :class:`Trace` or a 1-D sequence of object ids (one request per slot; remapped
                  to 0..N-1 in first-seen order in O(n), N = the number of distinct ids).
    K:            capacity in items (K >= N: every item fits, only first requests miss), or in bytes
                  with ``capacity="bytes"`` (then the trace needs ``sizes``).
    warmup:       slots 1..warmup are simulated but excluded from the metrics (Atre ``--warmup``).
    checkpoints:  slots t at which (total latency, shadow cost, requests) are recorded (prefix regret).
    record_latencies: keep the per-request latency array (int32, one entry per request).
    check_invariants: assert |C| <= K, C and F disjoint, and latency ranges after every slot.
    callback:     called as callback(t) at the end of every slot (after completions).
    engine:       "auto" (the policy's compiled kernel, ``policy.run_kernel``, when it has one and
                  no warm-up, callback, latency record, invariant check or byte capacity is asked
                  for), "python" (the :class:`Cache` engine) or "kernel".
    Streaming: state is O(N + K); the trace is read in chunks of 65,536 requests.
    """
    tr = as_trace(trace)
    K, Z, K_eff = check_cache_args(K, Z, tr.n_items)
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy instance, got {type(policy).__name__}")
    check_choice(capacity, "capacity", ("items", "bytes"))
    T = tr.n_slots
    warmup = check_scalar(warmup, "warmup", int, min=0, max=T - 1)
    cps = sorted({check_scalar(c, "checkpoint", int, min=1, max=T) for c in checkpoints})
    check_choice(engine, "engine", ("auto", "python", "kernel"))
    if capacity == "bytes" and tr.sizes is None:
        raise ValueError("capacity='bytes' needs a trace with sizes (Trace(..., sizes=...) or an "
                         "oracleGeneral file)")
    if engine != "python":
        plain = not (warmup or record_latencies or check_invariants or callback is not None
                     or capacity == "bytes")
        res = policy.run_kernel(tr, K_eff, Z, cps) if plain else None   # the policy knows its kernel
        if res is not None:
            res.K = K
            return res
        if engine == "kernel":
            raise ValueError(f"engine='kernel': no kernel for {policy.name} with these options")
    c = Cache(policy, K, Z, trace=tr, capacity=capacity, warmup=warmup, checkpoints=cps,
              record_latencies=record_latencies, check_invariants=check_invariants,
              callback=callback)
    serve, end_slot = c._serve, c._end_slot
    sizes = tr.sizes if capacity == "bytes" else None
    ptr = tr.slot_ptr
    if ptr is None:                                   # one request per slot
        for lo, chunk in _chunks(tr.ids):
            if sizes is None:
                for k, i in enumerate(chunk, start=lo + 1):
                    serve(i, k)
                    end_slot(k)
            else:
                szs = sizes[lo: lo + len(chunk)].tolist()
                for k, i in enumerate(chunk, start=lo + 1):
                    serve(i, k, szs[k - lo - 1])
                    end_slot(k)
    else:
        t = 1
        slot_end_at = int(ptr[1])
        for lo, chunk in _chunks(tr.ids):
            szs = None if sizes is None else sizes[lo: lo + len(chunk)].tolist()
            for k, i in enumerate(chunk):
                p = lo + k
                while p >= slot_end_at:               # close slots (possibly idle ones) before p
                    end_slot(t)
                    t += 1
                    slot_end_at = int(ptr[t])
                serve(i, t, 1 if szs is None else szs[k])
        while t <= T:                                 # the last busy slot and trailing idle slots
            end_slot(t)
            t += 1
    c.t = T
    c._closed = True
    return c.result()


def _check(cache: set, inflight: dict, K: int, t: int, used: int = 0, cap: int = 0,
           by_bytes: bool = False) -> None:
    if by_bytes:
        if used > cap:
            raise InvariantError(f"slot {t}: {used} bytes cached > capacity {cap}")
    elif len(cache) > K:
        raise InvariantError(f"slot {t}: |C| = {len(cache)} > K = {K}")
    both = cache & inflight.keys()
    if both:
        raise InvariantError(f"slot {t}: items both cached and in flight: {sorted(both)[:5]}")
