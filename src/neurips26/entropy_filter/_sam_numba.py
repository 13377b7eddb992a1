"""numba kernels of ``match_lengths`` (imported lazily, on first use; compiled once and cached by numba).

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
