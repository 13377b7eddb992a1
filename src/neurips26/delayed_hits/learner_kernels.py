"""Compiled kernels of the learning policies (numba when installed, plain Python otherwise): UCB-DH
(``ucb_kernel``) and LA-FTPL (``ftpl_kernel`` exact, ``ftpl_heap_kernel`` the O(log K) fast path),
on the slot model shared with the LRU kernel (``kernels.py``). Each takes the same decisions as its
Python policy (tested)."""

from __future__ import annotations

import numpy as np

from neurips26.harness.jit import njit  # numba where installed, else plain Python
from neurips26.delayed_hits.kernels import (_checkpoint, _free_slot, _n_slots, _pop_done, _serve,
                                            _slot_range, _slot_state, _stats, _window)


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


@njit(inline="always", cache=True)
def _restart_due(t, t0, ra, restart_at, restart_every):
    """Whether the learner restarts at the end of slot ``t``: a listed restart slot was reached
    (``restart_at``, sorted, read from index ``ra``) or ``restart_every`` slots passed since ``t0``.
    Returns (restart, the new ``ra``)."""
    if ra < restart_at.size and t >= restart_at[ra]:
        while ra < restart_at.size and t >= restart_at[ra]:
            ra += 1
        return True, ra
    return restart_every > 0 and t - t0 >= restart_every, ra


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
        restarted, ra = _restart_due(t, t0, ra, restart_at, restart_every)
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
        restarted, ra = _restart_due(t, t0, ra, restart_at, restart_every)
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
        restarted, ra = _restart_due(t, t0, ra, restart_at, restart_every)
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
