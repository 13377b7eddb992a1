"""numba kernels of ``match_lengths`` (imported lazily, on first use; compiled once and cached by numba).

Two constructions of the same Λ: the suffix automaton (``_sam_lambdas_numba``, fastest while its arrays
fit in cache) and the suffix-array sweeps (``_sa_lambdas_numba`` after the suffix array, ``_token_suffixes``,
``_plcp_numba`` and ``_lcp_in_sa_order``: sequential passes, and loops of independent random accesses with
software prefetch, so the cost per token grows little past the caches).

Suffix automaton with flat arrays: per state [len, link, firstpos, len(link)] interleaved, each state's
outgoing characters in a linked edge list (to copy them when cloning) and all transitions in one
open-addressing table of interleaved (key = state·σ + char, target << 32 | firstpos(target)) pairs with
Fibonacci hashing and linear probing (N < 2^31 tokens).
"""

import numba as _numba
import numpy as np
from llvmlite import binding as _llvm
from llvmlite import ir as _ir
from numba.core import cgutils as _cgutils
from numba.core import types as _types
from numba.extending import intrinsic as _intrinsic

# llvm.prefetch's name carries the pointer type: opaque pointers ("p0") from LLVM 15
_PREFETCH = "llvm.prefetch.p0" if _llvm.llvm_version_info >= (15,) else "llvm.prefetch.p0i8"


def _make_prefetch(write):
    """An intrinsic ``prefetch(arr, i)``: a cache hint for ``arr[i]`` (read or write; x86's prefetch never
    faults, and ``i`` is kept in bounds by the callers anyway). The suffix-array passes know the text
    positions they will touch D iterations ahead, so DRAM misses overlap instead of stalling one by one."""
    @_intrinsic
    def prefetch(typingctx, arr, idx):
        sig = _types.void(arr, idx)

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = _cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
            i8p = _ir.PointerType(_ir.IntType(8))
            i32 = _ir.IntType(32)
            fn = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(_ir.VoidType(),
                                                                                  [i8p, i32, i32, i32]), _PREFETCH)
            builder.call(fn, [builder.bitcast(ptr, i8p), _ir.Constant(i32, int(write)), _ir.Constant(i32, 3),
                              _ir.Constant(i32, 1)])
            return context.get_dummy_value()
        return sig, codegen
    return prefetch


_prefetch_r = _make_prefetch(False)
_prefetch_w = _make_prefetch(True)
_PF = 32  # prefetch distance (iterations)


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
def _sa_lambdas_numba(sa, lcp, overlap, nodes, s_d, s_lb, s_m, key, lam):  # pragma: no cover - compiled
    """Λ_1..Λ_{N-1} from the suffix array ``sa`` and the LCP array in suffix-array order (``lcp[k]`` = lcp of
    the suffixes ``sa[k]`` and ``sa[k+1]``, 0 for the last; ``_lcp_in_sa_order``) by two
    sequential sweeps of the LCP-interval tree (the suffix tree's internal nodes), no suffix links.

    For a node v (string depth d_v, smallest suffix start m_v in its interval) on the path to leaf i, every
    match length h in (d_parent, d_v] has first occurrence m_v, so h is feasible iff m_v + h ≤ i
    (non-overlapping; m_v < i with overlap). Along the path d_v increases and m_v never decreases, so
    ℓ_i = max_v min(d_v, i − m_v) is found by a binary search over the ancestors:
    ℓ_i = max(d_{s*}, i − m_{s*+1}) with s* the deepest ancestor with d + m ≤ i.
    Sweep 1 (left to right) closes the nodes bottom-up and records (d, lb, rb, m) in post-order, interleaved
    in one array (one sequential stream each way); sweep 2 (right to left) opens them in reverse post-order,
    so the stack always holds leaf k's ancestors. Both sweeps read ``sa`` and ``lcp`` sequentially; the one
    random access per token is sweep 2's write of Λ at text position ``sa[k]``.
    Buffers come from the caller (numpy allocations, which get transparent huge pages on Linux, so the random
    accesses do not also miss the TLB): ``nodes`` 4N int32, ``s_d``/``s_lb``/``s_m``/``key`` N+1 int32,
    ``lam`` N−1 int64 (the result).
    """
    n = sa.shape[0]
    # sweep 1: post-order list of internal nodes, 4 int32 per node [d, lb, rb, m]
    top = 0
    s_d[0] = 0
    s_lb[0] = 0
    s_m[0] = n
    n_nodes = 0
    for k in range(n):
        cur = np.int64(sa[k])
        h = lcp[k]
        lb = k
        while s_d[top] > h:
            m = min(s_m[top], cur)
            nodes[4 * n_nodes] = s_d[top]
            nodes[4 * n_nodes + 1] = s_lb[top]
            nodes[4 * n_nodes + 2] = k
            nodes[4 * n_nodes + 3] = m
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
    # sweep 2: ancestors of leaf k on a stack (depth and min increase upwards; root sentinel at 0);
    # the stacks of sweep 1 are reused ([d, m, lb] of sweep 2 in s_d, s_m, s_lb)
    # key: d + m (non-overlapping test) or m (overlap test)
    a_d, a_m, a_lb = s_d, s_m, s_lb
    a_d[0] = 0
    a_m[0] = 0
    a_lb[0] = -1
    key[0] = 0
    top = 0
    p = n_nodes - 1
    for k in range(n - 1, -1, -1):
        while p >= 0 and nodes[4 * p + 2] == k:
            top += 1
            d = nodes[4 * p]
            mm = nodes[4 * p + 3]
            a_d[top] = d
            a_m[top] = mm
            a_lb[top] = nodes[4 * p + 1]
            key[top] = mm if overlap else d + mm
            p -= 1
        if k >= _PF and sa[k - _PF] > 0:
            _prefetch_w(lam, sa[k - _PF] - 1)
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
            ell = np.int64(a_d[lo])
            if not overlap and lo < top:
                ell = max(ell, i - a_m[lo + 1])
            lam[i - 1] = ell + 1
        while top > 0 and a_lb[top] == k:
            top -= 1
    return lam


@_numba.njit(inline="always", cache=True)
def _popcount(v):  # pragma: no cover - compiled
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((v * np.uint64(0x0101010101010101)) >> np.uint64(56))


@_numba.njit(cache=True, nogil=True)
def _code_size(x, second):  # pragma: no cover - compiled
    """Bytes of ``x`` under the prefix-free code (``_encode_bytes``)."""
    m = 0
    for i in range(x.shape[0]):
        m += 1 if second[x[i]] < 0 else 2
    return m


@_numba.njit(cache=True, nogil=True)
def _encode_bytes(x, lead, second, b, bits):  # pragma: no cover - compiled
    """The ids ``x`` as a byte string under a prefix-free code (id c -> ``lead[c]``, then ``second[c]``
    when it is >= 0), the token starts as a bit vector over the byte offsets (uint64 words) and, per word,
    the number of token starts before it (rank directory, returned): 1.5 bits per byte instead of an int32
    per byte, so the token-suffix filter's lookups stay in cache."""
    n = x.shape[0]
    nw = bits.shape[0]   # (len(b) + 63) // 64 zeroed words; b: _code_size(x, second) bytes
    o = 0
    for i in range(n):
        c = x[i]
        bits[o >> 6] |= np.uint64(1) << np.uint64(o & 63)
        b[o] = lead[c]
        o += 1
        if second[c] >= 0:
            b[o] = second[c]
            o += 1
    rank = np.empty(nw, np.int32)
    r = 0
    for w in range(nw):
        rank[w] = r
        r += _popcount(bits[w])
    return rank


@_numba.njit(cache=True, nogil=True)
def _token_suffixes(sa_bytes, bits, rank, sa):  # pragma: no cover - compiled
    """The byte suffix array restricted to token starts, as token indices (the token suffix array, written
    to ``sa``): a byte offset o starts token rank[o // 64] + popcount(bits below o in its word) when its
    bit is set."""
    k = 0
    one = np.uint64(1)
    for j in range(sa_bytes.shape[0]):
        o = sa_bytes[j]
        w = bits[o >> 6]
        sh = np.uint64(o & 63)
        if (w >> sh) & one:
            sa[k] = rank[o >> 6] + _popcount(w & ((one << sh) - one))
            k += 1
    return sa


@_numba.njit(cache=True, nogil=True)
def _plcp_numba(x, sa, phi):  # pragma: no cover - compiled
    """Permuted LCP by the Φ method (Kärkkäinen, Manzini & Puglisi 2009): ``plcp[i]`` = longest common
    prefix of suffix i and the suffix after it in ``sa`` (0 for the last), computed in text order
    (plcp[i+1] ≥ plcp[i] − 1): one dependent random read per position instead of Kasai's two. Φ and PLCP
    share one array (Φ[i] is read before PLCP[i] is written); ``x`` may be uint16 (half the random reads'
    footprint); ``phi`` is the caller's int32 buffer of N."""
    n = x.shape[0]
    for k in range(n - 1):
        if k + _PF < n:
            _prefetch_w(phi, sa[k + _PF])
        phi[sa[k]] = sa[k + 1]
    phi[sa[n - 1]] = -1
    plcp = phi
    h = 0
    for i in range(n):
        if i + _PF < n and phi[i + _PF] >= 0:
            _prefetch_r(x, phi[i + _PF])
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


@_numba.njit(cache=True, nogil=True)
def _lcp_in_sa_order(plcp, sa, out):  # pragma: no cover - compiled
    """``out[k] = plcp[sa[k]]``: the LCP array in suffix-array order, gathered in a loop of its own (no
    control flow between the independent loads, so many cache misses are in flight at once)."""
    n = sa.shape[0]
    for k in range(n):
        if k + _PF < n:
            _prefetch_r(plcp, sa[k + _PF])
        out[k] = plcp[sa[k]]
    return out
