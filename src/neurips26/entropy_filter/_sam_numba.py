"""numba kernels of ``match_lengths`` (imported lazily, on first use; compiled once and cached by numba).

Two constructions of the same Λ: the suffix automaton (``_sam_lambdas_numba``, fastest while its arrays
fit in cache) and the suffix-array sweeps (``_sa_lambdas_numba`` after libdivsufsort and ``_plcp_numba``:
sequential passes only, so the cost per token stays flat to 10^6+ tokens).

Suffix automaton with flat arrays: per state [len, link, firstpos, len(link)] interleaved, each state's
outgoing characters in a linked edge list (to copy them when cloning) and all transitions in one
open-addressing table of interleaved (key = state·σ + char, target << 32 | firstpos(target)) pairs with
Fibonacci hashing and linear probing (N < 2^31 tokens).
"""

import numba as _numba
import numpy as np


@_numba.njit(inline="always", cache=True)
def _slot(key, shift):  # pragma: no cover - compiled
    # Fibonacci hashing: the top bits of key * 2^64/φ (uint64 arithmetic wraps)
    return np.int64((np.uint64(key) * np.uint64(11400714819323198485)) >> np.uint64(shift))


@_numba.njit(cache=True, nogil=True)
def _find(table, key, shift):  # pragma: no cover - compiled
    """Slot of ``key`` in the interleaved (key, target) table, or of the empty slot ending its probe."""
    mask = (table.shape[0] >> 1) - 1
    slot = _slot(key, shift)
    while table[2 * slot] != -1 and table[2 * slot] != key:
        slot = (slot + 1) & mask
    return slot


@_numba.njit(cache=True, nogil=True)
def _sam_lambdas_numba(x, sigma, overlap):  # pragma: no cover - compiled
    n = x.shape[0]
    max_states = 2 * n + 1
    max_edges = 3 * n + 4
    # per state, interleaved for locality: [len, link, firstpos, len(link)] (one record per 32 bytes;
    # len(link) spares the scan a dependent read of the link's record)
    st = np.empty(4 * max_states, np.int64)
    st[0] = 0
    st[1] = -1
    st[2] = -1
    st[3] = -1
    head = np.full(max_states, -1, np.int64)      # a state's edge list (chars only; targets hashed)
    edges = np.empty(2 * max_edges, np.int64)     # interleaved [next, char]
    cap = 16
    while cap < (4 * max_edges) // 3:  # load factor <= 0.75 at the 3n bound (~0.4 on text)
        cap *= 2
    shift = 64
    while (1 << (64 - shift)) < cap:
        shift -= 1
    # [key, payload] pairs, key = state * sigma + char, payload = target << 32 | firstpos(target):
    # a state's firstpos never changes (a clone takes q's), so one slot read answers the scan's test
    table = np.full(2 * cap, -1, np.int64)
    low = np.int64(0xFFFFFFFF)
    n_states = 1
    n_edges = 0
    last = 0
    for pos in range(n):
        c = x[pos]
        cur = n_states
        n_states += 1
        st[4 * cur] = st[4 * last] + 1
        st[4 * cur + 1] = 0
        st[4 * cur + 2] = pos                      # firstpos of a new state = current position
        st[4 * cur + 3] = 0
        p = last
        slot = 0
        while p != -1:
            slot = _find(table, p * sigma + c, shift)
            if table[2 * slot] != -1:
                break
            table[2 * slot] = p * sigma + c        # add p --c--> cur
            table[2 * slot + 1] = (cur << 32) | pos
            edges[2 * n_edges] = head[p]
            edges[2 * n_edges + 1] = c
            head[p] = n_edges
            n_edges += 1
            p = st[4 * p + 1]
        if p != -1:
            q = table[2 * slot + 1] >> 32
            if st[4 * p] + 1 == st[4 * q]:
                st[4 * cur + 1] = q
                st[4 * cur + 3] = st[4 * q]
            else:
                clone = n_states
                n_states += 1
                st[4 * clone] = st[4 * p] + 1
                st[4 * clone + 1] = st[4 * q + 1]
                st[4 * clone + 2] = st[4 * q + 2]  # a clone keeps q's firstpos
                st[4 * clone + 3] = st[4 * q + 3]
                fp_clone = st[4 * q + 2]
                e = head[q]
                while e != -1:                     # copy q's transitions to the clone
                    cc = edges[2 * e + 1]
                    payload = table[2 * _find(table, q * sigma + cc, shift) + 1]
                    s2 = _find(table, clone * sigma + cc, shift)
                    table[2 * s2] = clone * sigma + cc
                    table[2 * s2 + 1] = payload
                    edges[2 * n_edges] = head[clone]
                    edges[2 * n_edges + 1] = cc
                    head[clone] = n_edges
                    n_edges += 1
                    e = edges[2 * e]
                while p != -1:                     # redirect p --c--> q to the clone
                    s3 = _find(table, p * sigma + c, shift)
                    if table[2 * s3] == -1 or (table[2 * s3 + 1] >> 32) != q:
                        break
                    table[2 * s3 + 1] = (clone << 32) | fp_clone
                    p = st[4 * p + 1]
                st[4 * q + 1] = clone
                st[4 * q + 3] = st[4 * clone]
                st[4 * cur + 1] = clone
                st[4 * cur + 3] = st[4 * clone]
        last = cur
    lam = np.empty(max(n - 1, 0), np.int64)
    state = 0
    L = 0
    for i in range(1, n):
        if i >= 2:
            if L > 0:
                L -= 1
                if L <= st[4 * state + 3]:
                    state = st[4 * state + 1]
            else:
                state = 0
        limit0 = i - 1
        while i + L < n:
            s4 = _find(table, state * sigma + x[i + L], shift)
            if table[2 * s4] == -1:
                break
            payload = table[2 * s4 + 1]
            if (payload & low) > (limit0 + L if overlap else limit0):
                break
            state = payload >> 32
            L += 1
        lam[i - 1] = L + 1
    return lam


@_numba.njit(cache=True, nogil=True)
def _window_lambdas_numba(x, W):  # pragma: no cover - compiled
    n = x.shape[0]
    lam = np.empty(n - W, np.int64)
    for i in range(W, n):
        best = 0
        for j in range(i - W, i):
            cap = min(i - j, n - i)
            L = 0
            while L < cap and x[j + L] == x[i + L]:
                L += 1
            if L > best:
                best = L
        lam[i - W] = best + 1
    return lam


@_numba.njit(cache=True, nogil=True)
def _sa_lambdas_numba(sa, plcp, overlap):  # pragma: no cover - compiled
    """Λ_1..Λ_{N-1} from the suffix array ``sa`` and the permuted LCP (``plcp[sa[k]]`` = lcp of the
    suffixes ``sa[k]`` and ``sa[k+1]``, 0 for the last) by two
    sequential sweeps of the LCP-interval tree (the suffix tree's internal nodes), no suffix links.

    For a node v (string depth d_v, smallest suffix start m_v in its interval) on the path to leaf i, every
    match length h in (d_parent, d_v] has first occurrence m_v, so h is feasible iff m_v + h ≤ i
    (non-overlapping; m_v < i with overlap). Along the path d_v increases and m_v never decreases, so
    ℓ_i = max_v min(d_v, i − m_v) is found by a binary search over the ancestors:
    ℓ_i = max(d_{s*}, i − m_{s*+1}) with s* the deepest ancestor with d + m ≤ i.
    Sweep 1 (left to right) closes the nodes bottom-up and records (d, lb, rb, m) in post-order; sweep 2
    (right to left) opens them in reverse post-order, so the stack always holds leaf k's ancestors.
    """
    n = sa.shape[0]
    # sweep 1: post-order list of internal nodes
    nd_d = np.empty(n, np.int32)
    nd_lb = np.empty(n, np.int32)
    nd_rb = np.empty(n, np.int32)
    nd_m = np.empty(n, np.int32)
    s_d = np.empty(n + 1, np.int32)
    s_lb = np.empty(n + 1, np.int32)
    s_m = np.empty(n + 1, np.int32)
    top = 0
    s_d[0] = 0
    s_lb[0] = 0
    s_m[0] = n
    n_nodes = 0
    for k in range(n):
        cur = np.int64(sa[k])
        h = plcp[cur] if k < n - 1 else 0
        lb = k
        while s_d[top] > h:
            m = min(s_m[top], cur)
            nd_d[n_nodes] = s_d[top]
            nd_lb[n_nodes] = s_lb[top]
            nd_rb[n_nodes] = k
            nd_m[n_nodes] = m
            n_nodes += 1
            cur = m
            lb = s_lb[top]
            top -= 1
        if s_d[top] < h:
            top += 1
            s_d[top] = h
            s_lb[top] = lb
            s_m[top] = cur
        else:
            s_m[top] = min(s_m[top], cur)
    # sweep 2: ancestors of leaf k on a stack (depth and min increase upwards; root sentinel at 0)
    key = np.empty(n + 1, np.int32)   # d + m (non-overlapping test) or m (overlap test)
    a_d = np.empty(n + 1, np.int32)
    a_m = np.empty(n + 1, np.int32)
    a_lb = np.empty(n + 1, np.int32)
    a_d[0] = 0
    a_m[0] = 0
    a_lb[0] = -1
    key[0] = 0
    top = 0
    p = n_nodes - 1
    lam = np.empty(max(n - 1, 0), np.int32)
    for k in range(n - 1, -1, -1):
        while p >= 0 and nd_rb[p] == k:
            top += 1
            a_d[top] = nd_d[p]
            a_m[top] = nd_m[p]
            a_lb[top] = nd_lb[p]
            key[top] = nd_m[p] if overlap else nd_d[p] + nd_m[p]
            p -= 1
        i = np.int64(sa[k])
        if i > 0:
            # s* = last s with key[s] <= bound (key increases along the stack; key[0] = 0 <= bound)
            bound = i - 1 if overlap else i
            lo = 0
            hi = top
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if key[mid] <= bound:
                    lo = mid
                else:
                    hi = mid - 1
            ell = a_d[lo]
            if not overlap and lo < top:
                ell = max(ell, i - a_m[lo + 1])
            lam[i - 1] = ell + 1
        while top > 0 and a_lb[top] == k:
            top -= 1
    return lam


@_numba.njit(cache=True, nogil=True)
def _encode_bytes(x, lead, second):  # pragma: no cover - compiled
    """The ids ``x`` as a byte string under a prefix-free code (id c -> ``lead[c]``, then ``second[c]``
    when it is >= 0) and, per byte offset, the index of the token starting there (-1 inside a code)."""
    n = x.shape[0]
    m = 0
    for i in range(n):
        m += 1 if second[x[i]] < 0 else 2
    b = np.empty(m, np.uint8)
    start = np.full(m, -1, np.int32)
    o = 0
    for i in range(n):
        c = x[i]
        start[o] = i
        b[o] = lead[c]
        o += 1
        if second[c] >= 0:
            b[o] = second[c]
            o += 1
    return b, start


@_numba.njit(cache=True, nogil=True)
def _token_suffixes(sa_bytes, start, n):  # pragma: no cover - compiled
    """The byte suffix array restricted to token starts, as token indices (the token suffix array)."""
    sa = np.empty(n, np.int32)
    k = 0
    for j in range(sa_bytes.shape[0]):
        t = start[sa_bytes[j]]
        if t >= 0:
            sa[k] = t
            k += 1
    return sa


@_numba.njit(cache=True, nogil=True)
def _plcp_numba(x, sa):  # pragma: no cover - compiled
    """Permuted LCP by the Φ method (Kärkkäinen, Manzini & Puglisi 2009): ``plcp[i]`` = longest common
    prefix of suffix i and the suffix after it in ``sa`` (0 for the last), computed in text order
    (plcp[i+1] ≥ plcp[i] − 1): one dependent random read per position instead of Kasai's two."""
    n = x.shape[0]
    phi = np.empty(n, np.int32)
    for k in range(n - 1):
        phi[sa[k]] = sa[k + 1]
    phi[sa[n - 1]] = -1
    plcp = np.empty(n, np.int32)
    h = 0
    for i in range(n):
        j = phi[i]
        if j < 0:
            h = 0
            plcp[i] = 0
            continue
        while i + h < n and j + h < n and x[i + h] == x[j + h]:
            h += 1
        plcp[i] = h
        if h > 0:
            h -= 1
    return plcp
