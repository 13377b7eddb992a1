"""Compiled kernels (numba when installed, plain Python otherwise: same results, slower).

* ``shadow_kernel``  per-item shadow loss L_T(i), snapshots of L at grid slots, number of
                     virtual windows per item and the realised C_B (spec §2).
Kernels are cached on disk by numba (``cache=True``: next to this module in ``__pycache__``, or
numba's user cache dir when that is not writable), so only the first run pays the compile time.

* ``lru_kernel``     fused delayed-hit LRU/FIFO simulation (spec §1), O(1) per request with an
                     intrusive doubly linked list over item ids; used by the bench and the
                     experiment. Equal to ``simulate(trace, LRU()/FIFO())`` (tested).
* ``remap_kernel``   first-seen id remap in O(n) with a hash table (``trace.remap_first_seen``).
* the slot-model helpers ``_serve`` / ``_pop_done`` / ``_window`` ... shared with the UCB-DH and
  LA-FTPL kernels in ``learner_kernels.py``.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.jit import njit  # numba where installed, else plain Python


# ---- the slot model shared by every policy kernel (spec §1) ---------------------------------
# Small helpers shared by the kernels: each takes the state arrays and returns the updated
# scalars, so a kernel only spells out what is specific to its policy. _serve and _window are
# plain njit functions (LLVM inlines them): numba's IR inlining (inline="always") of _serve made
# lru_kernel ~1.8x slower; lru_kernel keeps the serve step written out (a call costs it ~5%).

@njit(inline="always", cache=True)
def _n_slots(ids, ptr, one):
    """Number of slots T of the trace."""
    return ids.size if one else ptr.size - 1


@njit(inline="always", cache=True)
def _slot_range(ptr, one, t):
    """[lo, hi): the positions of slot t's requests in ids."""
    if one:
        return t - 1, t
    return ptr[t - 1], ptr[t]


@njit(cache=True, nogil=True)
def _window(vstart, i, t, Z):
    """Virtual "never cached" window step of item i at slot t (spec §2).

    Returns (cost, opened): Z and a new window starting at t when the open one has run out
    (t - vstart[i] >= Z), else Z - (t - vstart[i]).
    """
    d = t - vstart[i]
    if d >= Z:
        vstart[i] = t
        return Z, True
    return Z - d, False


@njit(inline="always", cache=True)
def _slot_state(N, Z):
    """(cached, fstart, vstart, q): cache membership, in-flight fetch start (-1: none), virtual
    window start, ring buffer of pending fetches (<= N outstanding, in completion order)."""
    cached = np.zeros(N, dtype=np.bool_)
    fstart = np.full(N, -1, dtype=np.int64)
    vstart = np.full(N, -Z, dtype=np.int64)
    q = np.empty(N, dtype=np.int64)
    return cached, fstart, vstart, q


@njit(cache=True, nogil=True)
def _serve(i, t, Z, hit, fstart, vstart, q, qh, qn, lat, hits, dh, miss, shadow):
    """Serve request i at slot t: a hit costs 0; otherwise the shadow cost of i's virtual window
    is charged and it is a delayed hit (Z - (t - s) for the fetch started at s) or a miss (Z; the
    fetch starts at t and is queued for completion). Returns (lat, hits, dh, miss, shadow, qn).
    """
    sc, _opened = _window(vstart, i, t, Z)
    if hit:
        return lat, hits + 1, dh, miss, shadow, qn
    s = fstart[i]
    if s >= 0:
        return lat + Z - (t - s), hits, dh + 1, miss, shadow + sc, qn
    fstart[i] = t
    q[(qh + qn) % q.size] = i
    return lat + Z, hits, dh, miss + 1, shadow + sc, qn + 1


@njit(inline="always", cache=True)
def _pop_done(q, qh, qn, fstart, Z, t):
    """Pops the oldest pending fetch when it completes at the end of slot t (F[i] + Z - 1 == t)
    and clears its in-flight mark. Returns (i, qh, qn) with i = -1 when none completes."""
    if qn > 0:
        i = q[qh]
        if fstart[i] + Z - 1 == t:
            fstart[i] = -1
            return i, (qh + 1) % q.size, qn - 1
    return -1, qh, qn


@njit(inline="always", cache=True)
def _free_slot(citems, cached):
    """First slot of citems that holds no cached item (-1 if none)."""
    for k in range(citems.size):
        if citems[k] < 0 or not cached[citems[k]]:
            return k
    return -1


@njit(inline="always", cache=True)
def _checkpoint(checkpoints, c, t, cp, lat, shadow):
    """Records (latency, shadow cost) for every checkpoint at slot t; returns the next index."""
    while c < checkpoints.size and checkpoints[c] == t:
        cp[c, 0] = lat
        cp[c, 1] = shadow
        c += 1
    return c


@njit(inline="always", cache=True)
def _stats(lat, hits, dh, miss, adm, evi, shadow, n):
    """stats[8] = total latency, hits, delayed hits, misses, admissions, evictions, shadow cost,
    requests."""
    stats = np.empty(8, dtype=np.int64)
    stats[0] = lat
    stats[1] = hits
    stats[2] = dh
    stats[3] = miss
    stats[4] = adm
    stats[5] = evi
    stats[6] = shadow
    stats[7] = n
    return stats


@njit(inline="always", cache=True)
def _ll_unlink(nxt, prv, i):
    a = prv[i]
    b = nxt[i]
    nxt[a] = b
    prv[b] = a


@njit(inline="always", cache=True)
def _ll_push_front(nxt, prv, head, i):
    h = nxt[head]
    nxt[head] = i
    prv[i] = head
    nxt[i] = h
    prv[h] = i


@njit(cache=True, nogil=True)
def shadow_kernel(ids, ptr, one, Z, N, grid):
    """Virtual "never cached" windows per item (spec §2).

    ids: int64 requests; ptr: int64 slot offsets (ignored when one=True); grid: sorted slots at
    which L is snapshotted (end of slot). Returns (L, snaps[len(grid), N], windows, C_B).
    """
    L = np.zeros(N, dtype=np.int64)
    vstart = np.full(N, -Z, dtype=np.int64)
    wcost = np.zeros(N, dtype=np.int64)          # shadow cost of the open window minus Z
    windows = np.zeros(N, dtype=np.int64)
    snaps = np.zeros((grid.size, N), dtype=np.int64)
    cb = 0
    g = 0
    for t in range(1, _n_slots(ids, ptr, one) + 1):
        lo, hi = _slot_range(ptr, one, t)
        for p in range(lo, hi):
            i = ids[p]
            sc, opened = _window(vstart, i, t, Z)
            L[i] += sc
            if opened:
                if wcost[i] > cb:
                    cb = wcost[i]
                wcost[i] = 0
                windows[i] += 1
            else:
                wcost[i] += sc
        while g < grid.size and grid[g] == t:
            snaps[g, :] = L
            g += 1
    for i in range(N):
        if wcost[i] > cb:
            cb = wcost[i]
    return L, snaps, windows, cb


@njit(cache=True, nogil=True)
def lru_kernel(ids, ptr, one, N, K, Z, fifo, checkpoints):
    """Fused delayed-hit LRU (fifo=False) or FIFO (fifo=True) with completion-time insertion.

    Returns (stats[8], cp[len(checkpoints), 2]) with stats = total latency, hits, delayed hits,
    misses, admissions, evictions, shadow cost, requests; cp rows = (latency, shadow cost).
    """
    nxt = np.full(N + 1, -1, dtype=np.int64)     # linked list, node N = sentinel (head side = MRU)
    prv = np.full(N + 1, -1, dtype=np.int64)
    nxt[N] = N
    prv[N] = N
    cached, fstart, vstart, q = _slot_state(N, Z)
    qh = 0
    qn = 0
    size = 0
    lat = 0
    hits = 0
    dh = 0
    miss = 0
    adm = 0
    evi = 0
    shadow = 0
    cp = np.zeros((checkpoints.size, 2), dtype=np.int64)
    c = 0
    for t in range(1, _n_slots(ids, ptr, one) + 1):
        lo, hi = _slot_range(ptr, one, t)
        for p in range(lo, hi):
            i = ids[p]
            hit = cached[i]
            if hit and not fifo:                  # move to MRU
                _ll_unlink(nxt, prv, i)
                _ll_push_front(nxt, prv, N, i)
            # the serve step of _serve, written out: a call costs this tightest loop ~5%
            if hit:
                hits += 1
                d = t - vstart[i]
                if d >= Z:
                    vstart[i] = t
            else:
                s = fstart[i]
                if s >= 0:
                    lat += Z - (t - s)
                    dh += 1
                else:
                    lat += Z
                    fstart[i] = t
                    miss += 1
                    q[(qh + qn) % N] = i
                    qn += 1
                d = t - vstart[i]
                if d >= Z:
                    vstart[i] = t
                    shadow += Z
                else:
                    shadow += Z - d
        # completions at the end of slot t
        while True:
            i, qh, qn = _pop_done(q, qh, qn, fstart, Z, t)
            if i < 0:
                break
            if size >= K:                         # evict the LRU/oldest (tail)
                v = prv[N]
                _ll_unlink(nxt, prv, v)
                cached[v] = False
                size -= 1
                evi += 1
            _ll_push_front(nxt, prv, N, i)
            cached[i] = True
            size += 1
            adm += 1
        c = _checkpoint(checkpoints, c, t, cp, lat, shadow)
    return _stats(lat, hits, dh, miss, adm, evi, shadow, ids.size), cp


@njit(cache=True, nogil=True)
def max_item_batch_kernel(ids, ptr, N):
    """Largest number of requests of one item inside one slot (streaming, O(N) state)."""
    last = np.full(N, -1, dtype=np.int64)
    cnt = np.zeros(N, dtype=np.int64)
    best = 0
    for t in range(1, ptr.size):
        for p in range(ptr[t - 1], ptr[t]):
            i = ids[p]
            if last[i] != t:
                last[i] = t
                cnt[i] = 0
            cnt[i] += 1
            if cnt[i] > best:
                best = cnt[i]
    return best


@njit(cache=True, nogil=True)
def remap_kernel(raw):
    """First-seen remap of int64 ids in O(n) time and O(n) memory (never O(max id)): an
    open-addressing hash table of 2^ceil(log2(2n)) slots (Fibonacci hashing, linear probing).
    Returns (ids in 0..N-1 by first appearance, labels[N] = the original ids)."""
    n = raw.size
    M = 2
    while M < 2 * n:
        M *= 2
    mask = np.uint64(M - 1)
    keys = np.empty(M, dtype=np.int64)
    vals = np.full(M, -1, dtype=np.int64)          # -1: empty slot
    out = np.empty(n, dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    mult = np.uint64(11400714819323198485)
    shift = np.uint64(32)
    N = 0
    for p in range(n):
        x = raw[p]
        h = ((np.uint64(x) * mult) >> shift) & mask
        while True:
            v = vals[h]
            if v < 0:
                vals[h] = N
                keys[h] = x
                labels[N] = x
                out[p] = N
                N += 1
                break
            if keys[h] == x:
                out[p] = v
                break
            h = (h + np.uint64(1)) & mask
    return out, labels[:N].copy()


def trace_arrays(trace) -> tuple[np.ndarray, np.ndarray, bool]:
    """(ids, ptr, one) for the kernels (ptr is a 1-element dummy when one request per slot)."""
    ptr = trace.slot_ptr
    if ptr is None:
        return trace.ids, np.zeros(1, dtype=np.int64), True
    return trace.ids, ptr, False
