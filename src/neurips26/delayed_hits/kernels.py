"""Compiled kernels (numba when installed, plain Python otherwise: same results, slower).

* ``shadow_kernel``  per-item shadow loss L_T(i), snapshots of L at grid slots, number of
                     virtual windows per item and the realised C_B (spec §2).
Kernels are cached on disk by numba (``cache=True``: next to this module in ``__pycache__``, or
numba's user cache dir when that is not writable), so only the first run pays the compile time.

* ``lru_kernel``     fused delayed-hit LRU/FIFO simulation (spec §1), O(1) per request with an
                     intrusive doubly linked list over item ids; used by the bench and the
                     experiment. Equal to ``simulate(trace, LRU()/FIFO())`` (tested).
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


@njit(cache=True, nogil=True)
def _sift_down_plain(h, n, U, k):
    """Min-heap sift-down of h[:n] keyed by (U[item], -item) (the worst member at the root)."""
    x = h[k]
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        y = h[c]
        if c + 1 < n:
            z = h[c + 1]
            if U[z] < U[y] or (U[z] == U[y] and z > y):
                c += 1
                y = z
        if U[y] < U[x] or (U[y] == U[x] and y > x):
            h[k] = y
            k = c
        else:
            break
    h[k] = x


@njit(cache=True, nogil=True)
def _topk_mask(U, K, out):
    """out[j] = True iff j is in the top-K of U under the order (U desc, id asc).

    One pass with a size-K min-heap of the current top set (root = its worst member); items are
    scanned in id order, so an equal score never displaces a smaller id. O(N + r log K) for r
    replacements (r ~ K log(N/K) for scores in random order).
    """
    N = U.size
    if K >= N:
        for j in range(N):
            out[j] = True
        return
    h = np.empty(K, dtype=np.int64)
    for j in range(K):
        h[j] = j
    for k in range((K >> 1) - 1, -1, -1):
        _sift_down_plain(h, K, U, k)
    for j in range(K, N):
        r = h[0]
        if U[j] > U[r]:                # j ranks above the worst member (ties keep the smaller id)
            h[0] = j
            _sift_down_plain(h, K, U, 0)
    for j in range(N):
        out[j] = False
    for k in range(K):
        out[h[k]] = True


@njit(cache=True, nogil=True)
def ucb_kernel(ids, ptr, one, N, K, Z, refresh, generic, bmax, CB, restart_every, restart_at,
               checkpoints, ref_set, track_from):
    """Fused delayed-hit simulation of UCB-DH (same decisions as ``ucb_dh.UCBDH``).

    restart_every = 0: no periodic restarts; restart_at: sorted oracle restart slots (may be empty).
    ref_set: bool[N] reference set (or empty); counts slots t >= track_from with S_t != ref_set.
    Returns (stats[8], cp[len(checkpoints), 2], mismatch_slots, n_restarts).
    """
    cached, fstart, vstart, q = _slot_state(N, Z)
    citems = np.full(K, -1, dtype=np.int64)
    cpos = np.full(N, -1, dtype=np.int64)
    size = 0
    qh = 0
    qn = 0
    c = np.zeros(N)
    n = np.zeros(N)
    w = np.zeros(N)
    Lsh = np.zeros(N)
    last = np.full(N, -1, dtype=np.int64)
    pv = np.full(N, -Z, dtype=np.int64)
    U = np.zeros(N)
    inS = np.zeros(N, dtype=np.bool_)
    for j in range(min(K, N)):
        inS[j] = True
    t0 = 0
    ra = 0
    nrest = 0
    lat = 0
    hits = 0
    dh = 0
    miss = 0
    adm = 0
    evi = 0
    shadow = 0
    mism = 0
    track = ref_set.size == N
    cp = np.zeros((checkpoints.size, 2), dtype=np.int64)
    cc = 0
    T = _n_slots(ids, ptr, one)
    for t in range(1, T + 1):
        lo, hi = _slot_range(ptr, one, t)
        for p in range(lo, hi):
            i = ids[p]
            # policy statistics (on every request)
            n[i] += 1.0
            if last[i] != t:
                last[i] = t
                c[i] += 1.0
            if generic:
                sc2, opened = _window(pv, i, t, Z)
                if opened:
                    w[i] += 1.0
                Lsh[i] += sc2
            lat, hits, dh, miss, shadow, qn = _serve(i, t, Z, cached[i], fstart, vstart, q, qh, qn,
                                                     lat, hits, dh, miss, shadow)
        # completions
        while True:
            i, qh, qn = _pop_done(q, qh, qn, fstart, Z, t)
            if i < 0:
                break
            if not inS[i]:
                continue
            slot = -1
            if size >= K:
                best = np.inf
                bid = -1
                for k in range(K):
                    j = citems[k]
                    if not inS[j]:
                        u = U[j]
                        if u < best or (u == best and j > bid):
                            best = u
                            bid = j
                            slot = k
                if bid < 0:
                    continue
                cached[bid] = False
                cpos[bid] = -1
                size -= 1
                evi += 1
            else:
                slot = _free_slot(citems, cached)
            citems[slot] = i
            cpos[i] = slot
            cached[i] = True
            size += 1
            adm += 1
        # slot end: restarts, then refresh of the target set
        restarted = False
        if ra < restart_at.size and t >= restart_at[ra]:
            while ra < restart_at.size and t >= restart_at[ra]:
                ra += 1
            restarted = True
        elif restart_every > 0 and t - t0 >= restart_every:
            restarted = True
        if restarted:
            t0 = t
            nrest += 1
            for j in range(N):
                c[j] = 0.0
                n[j] = 0.0
                w[j] = 0.0
                Lsh[j] = 0.0
                last[j] = -1
                pv[j] = -Z
                U[j] = 0.0
                inS[j] = j < K
        if (t - t0) % refresh == 0 and t > t0:
            tt = t - t0
            lt = np.log(tt)
            # items never requested since the (re)start share one index value
            qu0 = 3.0 * lt / tt
            if qu0 > 1.0:
                qu0 = 1.0
            mu0 = (bmax - 1) * np.sqrt(lt / 2.0)
            if mu0 > bmax:
                mu0 = bmax
            if mu0 < 1.0:
                mu0 = 1.0
            u0 = qu0 * mu0 * Z * (1.0 + qu0 * (Z - 1) / 2.0) / (1.0 + qu0 * (Z - 1))
            for j in range(N):
                if not generic and c[j] == 0.0:
                    U[j] = u0
                    continue
                if generic:
                    U[j] = Lsh[j] / tt + (Z + CB) * np.sqrt(2.0 * w[j] * lt) / tt
                else:
                    qh_ = c[j] / tt
                    qu = qh_ + np.sqrt(2.0 * qh_ * (1.0 - qh_) * lt / tt) + 3.0 * lt / tt
                    if qu > 1.0:
                        qu = 1.0
                    cj = c[j] if c[j] > 1.0 else 1.0
                    mu = n[j] / cj
                    if bmax > 1:
                        mu += (bmax - 1) * np.sqrt(lt / (2.0 * cj))
                    if mu > bmax:
                        mu = bmax
                    if mu < 1.0:
                        mu = 1.0
                    U[j] = qu * mu * Z * (1.0 + qu * (Z - 1) / 2.0) / (1.0 + qu * (Z - 1))
            _topk_mask(U, K, inS)
        if track and t >= track_from:
            for j in range(N):
                if inS[j] != ref_set[j]:
                    mism += 1
                    break
        cc = _checkpoint(checkpoints, cc, t, cp, lat, shadow)
    return _stats(lat, hits, dh, miss, adm, evi, shadow, ids.size), cp, mism, nrest


@njit(cache=True, nogil=True)
def ftpl_kernel(ids, ptr, one, N, K, Z, refresh, c_eta, scale, count_loss, restart_every, restart_at, gammas,
                checkpoints):
    """Fused delayed-hit simulation of LA-FTPL / hit-count FTPL (same decisions as
    ``la_ftpl.LAFTPL`` with completion-time admission and a fixed gamma per restart).

    P(j) = L(j) + eta gamma_j with eta = c_eta sqrt(max(t - t0, 1) scale), frozen for ``refresh``
    slots (refresh = 1: eta_t at every slot, the exact path). gammas: (n_restarts + 1, N) rows
    drawn in order. Rank test and victim are O(N) and O(K) scans.
    Returns (stats[8], cp[len(checkpoints), 2], n_restarts).
    """
    cached, fstart, vstart, q = _slot_state(N, Z)
    citems = np.full(K, -1, dtype=np.int64)
    size = 0
    pv = np.full(N, -Z, dtype=np.int64)
    L = np.zeros(N)
    qh = 0
    qn = 0
    g = 0
    gamma = gammas[0]
    t0 = 0
    ra = 0
    eta = c_eta * np.sqrt(1.0 * scale)
    lat = 0
    hits = 0
    dh = 0
    miss = 0
    adm = 0
    evi = 0
    shadow = 0
    cp = np.zeros((checkpoints.size, 2), dtype=np.int64)
    cc = 0
    T = _n_slots(ids, ptr, one)
    for t in range(1, T + 1):
        if refresh == 1:
            eta = c_eta * np.sqrt(max(t - t0, 1) * scale)
        lo, hi = _slot_range(ptr, one, t)
        for p in range(lo, hi):
            i = ids[p]
            if count_loss:
                L[i] += 1.0
            else:
                L[i] += _window(pv, i, t, Z)[0]
            lat, hits, dh, miss, shadow, qn = _serve(i, t, Z, cached[i], fstart, vstart, q, qh, qn,
                                                     lat, hits, dh, miss, shadow)
        while True:
            i, qh, qn = _pop_done(q, qh, qn, fstart, Z, t)
            if i < 0:
                break
            pi = L[i] + eta * gamma[i]
            above = 0
            for j in range(N):
                pj = L[j] + eta * gamma[j]
                if pj > pi or (pj == pi and j < i):
                    above += 1
                    if above >= K:
                        break
            if above >= K:
                continue
            slot = -1
            if size >= K:
                best = np.inf
                bid = -1
                for k in range(K):
                    j = citems[k]
                    pj = L[j] + eta * gamma[j]
                    if pj < best or (pj == best and j > bid):
                        best = pj
                        bid = j
                        slot = k
                if not (best < pi or (best == pi and -bid < -i)):
                    continue
                cached[bid] = False
                size -= 1
                evi += 1
            else:
                slot = _free_slot(citems, cached)
            citems[slot] = i
            cached[i] = True
            size += 1
            adm += 1
        # slot end: restart (periodic or at the given slots), then refresh of the frozen eta
        restarted = False
        if ra < restart_at.size and t >= restart_at[ra]:
            while ra < restart_at.size and t >= restart_at[ra]:
                ra += 1
            restarted = True
        elif restart_every > 0 and t - t0 >= restart_every:
            restarted = True
        if restarted:
            t0 = t
            g += 1
            gamma = gammas[g]
            for j in range(N):
                L[j] = 0.0
                pv[j] = -Z
            if refresh > 1:
                eta = c_eta * np.sqrt(1.0 * scale)
        elif refresh > 1 and (t - t0) % refresh == 0:
            eta = c_eta * np.sqrt(max(t + 1 - t0, 1) * scale)
        cc = _checkpoint(checkpoints, cc, t, cp, lat, shadow)
    return _stats(lat, hits, dh, miss, adm, evi, shadow, ids.size), cp, g


# ---- indexed binary min-heaps keyed by (P[item], -item) (for the LA-FTPL fast path) ---------

@njit(inline="always", cache=True)
def _less(P, a, b):
    """(P[a], -a) < (P[b], -b)."""
    return P[a] < P[b] or (P[a] == P[b] and a > b)


@njit(cache=True, nogil=True)
def _sift_up(h, pos, P, k):
    x = h[k]
    while k > 0:
        par = (k - 1) >> 1
        y = h[par]
        if _less(P, x, y):
            h[k] = y
            pos[y] = k
            k = par
        else:
            break
    h[k] = x
    pos[x] = k


@njit(cache=True, nogil=True)
def _sift_down(h, n, pos, P, k):
    x = h[k]
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and _less(P, h[c + 1], h[c]):
            c += 1
        y = h[c]
        if _less(P, y, x):
            h[k] = y
            pos[y] = k
            k = c
        else:
            break
    h[k] = x
    pos[x] = k


@njit(cache=True, nogil=True)
def _heapify(h, n, pos, P):
    for k in range(n):
        pos[h[k]] = k
    for k in range((n >> 1) - 1, -1, -1):
        _sift_down(h, n, pos, P, k)


@njit(cache=True, nogil=True)
def ftpl_heap_kernel(ids, ptr, one, N, K, Z, refresh, c_eta, scale, count_loss, restart_every,
                     restart_at, gammas, checkpoints):
    """LA-FTPL fast path (refresh > 1) with O(log K) work per request (spec §4.5).

    eta is frozen between refresh points, so between them only requested items' scores move
    (upwards): the top-K of P and the cached items live in indexed min-heaps keyed by (P, -id);
    both are rebuilt at each refresh in O(N). Same decisions as ``la_ftpl.LAFTPL(refresh=R)``.
    Returns (stats[8], cp[len(checkpoints), 2], n_restarts).
    """
    cached, fstart, vstart, q = _slot_state(N, Z)
    size = 0
    pv = np.full(N, -Z, dtype=np.int64)
    L = np.zeros(N)
    P = np.zeros(N)
    qh = 0
    qn = 0
    th = np.zeros(K, dtype=np.int64)               # heap of the top-K set
    tpos = np.full(N, -1, dtype=np.int64)
    inTop = np.zeros(N, dtype=np.bool_)
    ch = np.zeros(K, dtype=np.int64)               # heap of the cached items
    cpos = np.full(N, -1, dtype=np.int64)
    g = 0
    gamma = gammas[0]
    t0 = 0
    ra = 0
    lat = 0
    hits = 0
    dh = 0
    miss = 0
    adm = 0
    evi = 0
    shadow = 0
    cp = np.zeros((checkpoints.size, 2), dtype=np.int64)
    cc = 0
    T = _n_slots(ids, ptr, one)
    rebuild_eta = c_eta * np.sqrt(1.0 * scale)
    rebuild = True
    for t in range(1, T + 1):
        if rebuild:
            for j in range(N):
                P[j] = L[j] + rebuild_eta * gamma[j]
            _topk_mask(P, K, inTop)
            k = 0
            for j in range(N):
                tpos[j] = -1
                if inTop[j]:
                    th[k] = j
                    k += 1
            _heapify(th, K, tpos, P)
            _heapify(ch, size, cpos, P)
            rebuild = False
        lo, hi = _slot_range(ptr, one, t)
        for p in range(lo, hi):
            i = ids[p]
            if count_loss:
                sc2 = 1.0
            else:
                sc2 = 1.0 * _window(pv, i, t, Z)[0]
            L[i] += sc2
            P[i] += sc2
            if inTop[i]:
                _sift_down(th, K, tpos, P, tpos[i])
            else:
                r = th[0]
                if _less(P, r, i):
                    inTop[r] = False
                    tpos[r] = -1
                    inTop[i] = True
                    th[0] = i
                    tpos[i] = 0
                    _sift_down(th, K, tpos, P, 0)
            if cached[i]:
                _sift_down(ch, size, cpos, P, cpos[i])
            lat, hits, dh, miss, shadow, qn = _serve(i, t, Z, cached[i], fstart, vstart, q, qh, qn,
                                                     lat, hits, dh, miss, shadow)
        while True:
            i, qh, qn = _pop_done(q, qh, qn, fstart, Z, t)
            if i < 0:
                break
            if not inTop[i]:
                continue
            if size >= K:
                v = ch[0]
                if not _less(P, v, i):
                    continue
                cached[v] = False
                cpos[v] = -1
                evi += 1
                ch[0] = i
                cpos[i] = 0
                cached[i] = True
                _sift_down(ch, size, cpos, P, 0)
            else:
                ch[size] = i
                cpos[i] = size
                size += 1
                cached[i] = True
                _sift_up(ch, cpos, P, size - 1)
            adm += 1
        restarted = False
        if ra < restart_at.size and t >= restart_at[ra]:
            while ra < restart_at.size and t >= restart_at[ra]:
                ra += 1
            restarted = True
        elif restart_every > 0 and t - t0 >= restart_every:
            restarted = True
        if restarted:
            t0 = t
            g += 1
            gamma = gammas[g]
            for j in range(N):
                L[j] = 0.0
                pv[j] = -Z
            rebuild_eta = c_eta * np.sqrt(1.0 * scale)
            rebuild = True
        elif (t - t0) % refresh == 0:
            rebuild_eta = c_eta * np.sqrt(max(t + 1 - t0, 1) * scale)
            rebuild = True
        cc = _checkpoint(checkpoints, cc, t, cp, lat, shadow)
    return _stats(lat, hits, dh, miss, adm, evi, shadow, ids.size), cp, g
