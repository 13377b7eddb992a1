"""Suffix array by induced sorting (SA-IS; Nong, Zhang & Chan 2009) on integer token ids, in numba.

Used by ``match_lengths``' suffix-array backend on long inputs: it sorts the token ids themselves (any
alphabet up to 2^30), so there is no byte code and no filter of byte suffixes to token suffixes, and its
passes are sequential scans plus loops of independent random reads with software prefetch (the same
``llvm.prefetch`` intrinsic as the other suffix-array passes).

Definitions (the text x_0..x_{n-1} is followed by a virtual sentinel smaller than every id):
suffix i is S-type if x[i:] < x[i+1:] (x_i < x_{i+1}, or x_i = x_{i+1} and i+1 is S-type), else L-type
(the last one is L: the sentinel is smaller); i is LMS (leftmost S) if i is S-type and i−1 is L-type.
Induced sorting: with the LMS suffixes placed at the ends of their buckets in sorted order, one scan left to
right places every L-type suffix (x[j:] with j = SA[k] − 1 L-type goes to the next free slot of bucket
x_j), one scan right to left every S-type suffix (to the last free slot of bucket x_j). Placing the LMS
positions in any order sorts the LMS *substrings* (x[p..next LMS]); they are named by rank, the string of
names in text order is sorted recursively (it is at most n/2 long), and its suffix array gives the LMS
suffixes' order for the final induction. Each pass stores the text once as ``t[i] = x_i·2 + [i is S]``,
so the scans' one random read per step gives both the bucket and the type.
"""

import numba as _numba
import numpy as np

from neurips26.entropy_filter._sam_numba import _PF, _lcp_in_sa_order, _prefetch_r, _prefetch_w


@_numba.njit(cache=True, nogil=True)
def _types(x, t, sigma):  # pragma: no cover - compiled
    """``t[i] = x[i] << 1 | S(i)``; returns the bucket starts (σ + 1 int64: ``b[c]`` = #ids < c)."""
    n = x.shape[0]
    b = np.zeros(sigma + 1, np.int64)
    s_next = 0               # the last suffix is L-type (the sentinel is smaller)
    c_next = x[n - 1]
    t[n - 1] = x[n - 1] << 1
    b[x[n - 1] + 1] += 1
    for i in range(n - 2, -1, -1):
        c = x[i]
        s = 1 if c < c_next or (c == c_next and s_next == 1) else 0
        t[i] = (c << 1) | s
        b[c + 1] += 1
        s_next = s
        c_next = c
    for c in range(sigma):
        b[c + 1] += b[c]
    return b


@_numba.njit(cache=True, nogil=True)
def _lms_positions(t, out):  # pragma: no cover - compiled
    """The LMS positions in text order into ``out``; returns their number m (≤ n/2)."""
    m = 0
    for i in range(1, t.shape[0]):
        if (t[i] & 1) and not (t[i - 1] & 1):
            out[m] = i
            m += 1
    return m


@_numba.njit(cache=True, nogil=True)
def _induce(t, sa, lms, b):  # pragma: no cover - compiled
    """Induced sorting from the LMS positions ``lms`` (placed at the bucket ends in this order, so sorted
    LMS suffixes give the suffix array; any order sorts the LMS substrings). ``b``: bucket starts."""
    n = t.shape[0]
    sigma = b.shape[0] - 1
    for k in range(n):
        sa[k] = -1
    ptr = np.empty(sigma, np.int64)
    for c in range(sigma):
        ptr[c] = b[c + 1]
    for j in range(lms.shape[0] - 1, -1, -1):
        p = lms[j]
        c = t[p] >> 1
        ptr[c] -= 1
        sa[ptr[c]] = p
    # L-type suffixes, left to right (suffix n−1 first: it follows the sentinel)
    for c in range(sigma):
        ptr[c] = b[c]
    c = t[n - 1] >> 1
    sa[ptr[c]] = n - 1
    ptr[c] += 1
    for k in range(n):
        # two-stage prefetch: the text 2D steps ahead, the bucket slot it will be written to D steps ahead
        if k + 2 * _PF < n:
            v2 = sa[k + 2 * _PF]
            if v2 > 0:
                _prefetch_r(t, v2 - 1)
        if k + _PF < n:
            v2 = sa[k + _PF]
            if v2 > 0:
                t2 = t[v2 - 1]
                if (t2 & 1) == 0:
                    _prefetch_w(sa, ptr[t2 >> 1])
        v = sa[k]
        if v > 0:
            tv = t[v - 1]
            if (tv & 1) == 0:
                c = tv >> 1
                sa[ptr[c]] = v - 1
                ptr[c] += 1
    # S-type suffixes, right to left (each overwrites a placed LMS entry before the scan reads it)
    for c in range(sigma):
        ptr[c] = b[c + 1]
    for k in range(n - 1, -1, -1):
        if k >= 2 * _PF:
            v2 = sa[k - 2 * _PF]
            if v2 > 0:
                _prefetch_r(t, v2 - 1)
        if k >= _PF:
            v2 = sa[k - _PF]
            if v2 > 0:
                t2 = t[v2 - 1]
                if t2 & 1:
                    _prefetch_w(sa, ptr[t2 >> 1] - 1)
        v = sa[k]
        if v > 0:
            tv = t[v - 1]
            if tv & 1:
                c = tv >> 1
                ptr[c] -= 1
                sa[ptr[c]] = v - 1


@_numba.njit(cache=True, nogil=True)
def _name_lms(t, sa, names):  # pragma: no cover - compiled
    """After ``_induce`` from unsorted LMS positions: the LMS positions in sorted-substring order into
    ``sa[:m]``, and per LMS position in text order the rank of its LMS substring into ``names`` (equal
    substrings share a rank). Returns the number of distinct substrings."""
    n = t.shape[0]
    m = 0
    for k in range(n):
        if k + _PF < n:
            v2 = sa[k + _PF]
            if v2 > 0:
                _prefetch_r(t, v2 - 1)
        v = sa[k]
        if v > 0 and (t[v] & 1) and not (t[v - 1] & 1):
            sa[m] = v
            m += 1
    for k in range(m, n):
        sa[k] = -1
    name = 0
    prev = -1
    for k in range(m):
        if k + _PF < m:
            p2 = sa[k + _PF]
            _prefetch_r(t, p2)
            _prefetch_w(sa, m + (p2 >> 1))
        p = sa[k]
        diff = True
        if prev >= 0 and t[prev] == t[p]:
            # equal iff the same ids and types up to and including the next LMS position of both
            j = 1
            while True:
                if prev + j == n or p + j == n:   # one reaches the sentinel: different
                    break
                ta = t[prev + j]
                if ta != t[p + j]:
                    break
                if (ta & 1) and not (t[prev + j - 1] & 1):
                    diff = False
                    break
                j += 1
        if diff:
            name += 1
        prev = p
        sa[m + (p >> 1)] = name - 1   # LMS positions are ≥ 2 apart: distinct slots past the first m
    j = 0
    for k in range(m, n):
        if sa[k] >= 0:
            names[j] = sa[k]
            j += 1
    return name


def sais(x: np.ndarray, sigma: int, work: np.ndarray | None = None) -> np.ndarray:
    """Suffix array (int32) of the int32 ids ``x`` with 0 <= x < sigma <= 2**30 and len(x) < 2**31 − 1.
    ``work``: an int32 buffer of len(x) for the typed text (overwritten; the caller may reuse it after, so the
    pages it already touched are not faulted in again: first-touch page faults are ~20% of the CPU time of
    the suffix-array path at 10M tokens)."""
    n = x.shape[0]
    if n == 0:
        return np.empty(0, np.int32)
    if n == 1:
        return np.zeros(1, np.int32)
    t = np.empty(n, np.int32) if work is None else work
    b = _types(x, t, sigma)
    lms = np.empty(n // 2 + 1, np.int32)
    m = _lms_positions(t, lms)
    lms = lms[:m]
    sa = np.empty(n, np.int32)
    _induce(t, sa, lms, b)
    if m == 0:
        return sa
    names = np.empty(m, np.int32)
    k = _name_lms(t, sa, names)
    if k == m:  # every LMS substring distinct: their order is the LMS suffixes' order
        order = sa[:m].copy()
    else:
        order = _lcp_in_sa_order(lms, sais(names, k), np.empty(m, np.int32))  # out[k] = lms[sa_names[k]]
    del names
    _induce(t, sa, order, b)
    return sa
