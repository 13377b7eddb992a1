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
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.delayed_hits.base import InvariantError, Policy, SimResult, check_cache_args
from neurips26.delayed_hits.trace import as_trace

__all__ = ["simulate", "Policy", "SimResult", "InvariantError"]


def _chunks(arr: np.ndarray, size: int = 1 << 16):
    for lo in range(0, arr.size, size):
        yield lo, arr[lo: lo + size].tolist()


def simulate(trace, policy: Policy, K: int, Z: int, *, warmup: int = 0,
             checkpoints: Iterable[int] = (), record_latencies: bool = False,
             check_invariants: bool = False, callback: Callable[[int], None] | None = None,
             engine: str = "auto") -> SimResult:
    """Run ``policy`` on ``trace`` with cache size K and fetch latency Z (spec §1).

    trace:        a :class:`Trace` or a 1-D sequence of item ids (one request per slot).
    warmup:       slots 1..warmup are simulated but excluded from the metrics (Atre ``--warmup``).
    checkpoints:  slots t at which (total latency, shadow cost, requests) are recorded (prefix regret).
    record_latencies: keep the per-request latency array (int32, one entry per request).
    check_invariants: assert |C| <= K, C and F disjoint, and latency ranges after every slot.
    callback:     called as callback(t) at the end of every slot (after completions).
    engine:       "auto" (the policy's compiled kernel, ``policy.run_kernel``, when it has one and
                  no warm-up, callback, latency record or invariant check is asked for), "python"
                  or "kernel".
    Streaming: state is O(N + K); the trace is read in chunks of 65,536 requests.
    """
    tr = as_trace(trace)
    K, Z = check_cache_args(K, Z, tr.n_items)
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy instance, got {type(policy).__name__}")
    T = tr.n_slots
    warmup = check_scalar(warmup, "warmup", int, min=0, max=T - 1)
    cps = sorted({check_scalar(c, "checkpoint", int, min=1, max=T) for c in checkpoints})
    check_choice(engine, "engine", ("auto", "python", "kernel"))
    if engine != "python":
        plain = not (warmup or record_latencies or check_invariants or callback is not None)
        res = policy.run_kernel(tr, K, Z, cps) if plain else None   # the policy knows its kernel
        if res is not None:
            return res
        if engine == "kernel":
            raise ValueError(f"engine='kernel': no kernel for {policy.name} with these options")
    policy.reset(tr, K, Z)
    N = tr.n_items

    cache: set[int] = set(int(i) for i in policy.initial_cache())
    if len(cache) > K:
        raise ValueError(f"policy {policy.name}: initial cache holds {len(cache)} items > K={K}")
    inflight: dict[int, int] = {}          # item -> start slot
    adacc: dict[int, int] = {}             # item -> aggregate delay of its open window
    pending: deque = deque()               # (start, item) in start order == completion order
    vstart = [-Z] * N                      # start of the item's virtual (shadow) window
    L = [0] * N                            # cumulative shadow loss per item

    on_request = policy.on_request if policy.uses_request else None
    on_hit = policy.on_hit if policy.uses_hit else None
    on_miss = policy.on_miss if policy.uses_miss else None
    on_slot_end = policy.on_slot_end if policy.uses_slot_end else None
    prefetch = policy.prefetch if policy.uses_prefetch else None
    n_prefetch = [0]
    admit = policy.admit

    lat_total = hits = dhits = misses = adm = evi = shadow = 0
    base = None
    cp_out: dict[int, tuple[int, int, int]] = {}
    cp_iter = iter(cps)
    next_cp = next(cp_iter, None)
    lats = np.zeros(tr.n_requests, dtype=np.int32) if record_latencies else None
    ptr = tr.slot_ptr
    one = ptr is None
    req_seen = 0

    def end_slot(t: int) -> None:
        """Completions at the end of slot t, then the policy's slot-end hook and bookkeeping."""
        nonlocal adm, evi, base, next_cp
        start_due = t - Z + 1
        while pending and pending[0][0] == start_due:
            _, i = pending.popleft()
            del inflight[i]
            ok, victim = admit(i, t, adacc.pop(i), cache)
            if ok:
                if victim is not None and victim >= 0:
                    if victim not in cache:
                        raise RuntimeError(f"policy {policy.name}: victim {victim} is not cached "
                                           f"(slot {t})")
                    cache.discard(victim)
                    evi += 1
                if len(cache) >= K:
                    raise RuntimeError(f"policy {policy.name}: admitted {i} into a full cache "
                                       f"without a victim (slot {t})")
                cache.add(i)
                adm += 1
        if on_slot_end is not None:
            on_slot_end(t)
        if prefetch is not None and t < T:
            for i in prefetch(t, cache, inflight):
                i = int(i)
                if i not in cache and i not in inflight:
                    inflight[i] = t + 1                 # a zero-request fetch starting next slot
                    adacc[i] = 0
                    pending.append((t + 1, i))
                    n_prefetch[0] += 1
        if callback is not None:
            callback(t)
        if check_invariants:
            _check(cache, inflight, K, t)
        if t == warmup:
            base = (lat_total, hits, dhits, misses, adm, evi, shadow, req_seen)
        if t == next_cp:
            cp_out[t] = (lat_total, shadow, req_seen)
            next_cp = next(cp_iter, None)

    t = 1
    slot_end_at = 1 if one else int(ptr[1])
    for lo, chunk in _chunks(tr.ids):
        for k, i in enumerate(chunk):
            p = lo + k
            if one:
                t = p + 1
            else:
                while p >= slot_end_at:            # close slots (possibly idle ones) before request p
                    end_slot(t)
                    t += 1
                    slot_end_at = int(ptr[t])
            if on_request is not None:
                on_request(i, t)
            if i in cache:
                lat = 0
                hits += 1
                if on_hit is not None:
                    on_hit(i, t)
            else:
                s = inflight.get(i)
                if s is not None:
                    lat = Z - (t - s)                 # delayed hit
                    adacc[i] += lat
                    dhits += 1
                else:
                    lat = Z                           # miss: start a fetch
                    inflight[i] = t
                    adacc[i] = Z
                    pending.append((t, i))
                    misses += 1
                    if on_miss is not None:
                        on_miss(i, t)
            lat_total += lat
            if lats is not None:
                lats[p] = lat
            if check_invariants and not (lat == 0 or 1 <= lat <= Z):
                raise InvariantError(f"slot {t}: latency {lat} outside {{0}} U [1, {Z}]")
            # shadow loss (action independent): virtual window of i covers vstart..vstart+Z-1
            vs = vstart[i]
            if t - vs >= Z:
                vstart[i] = t
                sc = Z
            else:
                sc = Z - (t - vs)
            L[i] += sc
            if lat:                                   # i not in C_t: pays its shadow loss
                shadow += sc
            req_seen = p + 1
            if one:
                end_slot(t)
    if not one:                                       # the last busy slot and trailing idle slots
        while t <= T:
            end_slot(t)
            t += 1
    if check_invariants and lats is not None and int(lats.sum()) != lat_total:
        raise InvariantError("sum of per-request latencies != reported total")
    n_req = tr.n_requests
    if base is not None:
        lat_total -= base[0]
        hits -= base[1]
        dhits -= base[2]
        misses -= base[3]
        adm -= base[4]
        evi -= base[5]
        shadow -= base[6]
        n_req -= base[7]
    return SimResult(policy=policy.name, K=K, Z=Z, n_slots=T - warmup, n_requests=n_req,
                     total_latency=lat_total, hits=hits, delayed_hits=dhits, misses=misses,
                     admissions=adm, evictions=evi, shadow_cost=shadow,
                     shadow_loss_per_item=np.asarray(L, dtype=np.int64), checkpoints=cp_out,
                     latencies=lats, extra={"prefetches": n_prefetch[0]} if prefetch else {})


def _check(cache: set, inflight: dict, K: int, t: int) -> None:
    if len(cache) > K:
        raise InvariantError(f"slot {t}: |C| = {len(cache)} > K = {K}")
    both = cache & inflight.keys()
    if both:
        raise InvariantError(f"slot {t}: items both cached and in flight: {sorted(both)[:5]}")
