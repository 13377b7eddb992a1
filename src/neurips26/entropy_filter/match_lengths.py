"""Match lengths Λ_i of a token sequence: the quantity behind every H_K estimate.

Definition (the paper's, and ProcessEntropy/LCSFinder's). For x_0..x_{N-1} and i = 1..N-1:

    ℓ_i = max{ L ≥ 0 : ∃ j ≥ 0, j + L ≤ i, x[j:j+L] = x[i:i+L] },  L ≤ N - i
    Λ_i = ℓ_i + 1

i.e. Λ_i is the length of the shortest prefix starting at i that does not occur inside the past
x[0:i] (the match lies entirely in the past: *non-overlapping*). With ``overlap=True`` the constraint
j + L ≤ i is dropped (only j < i): ℓ_i is then the LZ77 "longest previous factor" LPF[i].

Two exact constructions (equal Λ, tested against each other and the definition):

- suffix automaton (SAM) of the whole sequence whose states carry ``firstpos`` (the smallest end index
  of any occurrence), scanned once with the (state, L) of the current match; the carried match only
  ever shrinks by one per step (ℓ_{i+1} ≥ ℓ_i − 1), so the scan is amortised O(N). Backends: ``numba``
  (flat open-addressing transition table) and ``python`` (dict transitions, always available). Its
  pointer chasing leaves the caches beyond ~10^4 tokens (cost per token ×4-10 at 10^6).
- suffix array (``sa``): induced sorting (SA-IS, numba) on the ids, the Φ-method LCP, then
  two sequential sweeps of the LCP-interval tree: for a node v on the path to leaf i with string depth
  d_v and first occurrence m_v (smallest suffix start below v), every length h ≤ d_v above v's parent
  is feasible iff m_v + h ≤ i, so ℓ_i = max_v min(d_v, i − m_v) (binary search over the ancestors). No
  pointer chasing; the passes with random accesses (Φ, PLCP, the LCP gather, the Λ scatter) are loops of
  independent accesses with software prefetch, on numpy buffers (transparent huge pages); so are SA-IS's
  scans (``_sais_numba``; libdivsufsort on a byte code of the ids is the cross-check,
  ``suffix_array(x, "divsufsort")``, and grows ×2 per token from 1M to 10M: bench cost-per-token rows).

``auto`` takes ``sa`` from ``SA_MIN_N`` tokens when numba is installed, else the numba
SAM, else the pure-Python SAM. ``naive_lambdas`` is the direct definition, for tests and the benchmark.
"""

from __future__ import annotations

import gc
import importlib.util
from functools import lru_cache
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar

BACKENDS = ("auto", "numba", "python", "sa")

# optional accelerator, imported (and its kernels compiled) on first use only
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
HAVE_DIVSUFSORT = importlib.util.find_spec("pydivsufsort") is not None
# from this many tokens ``auto`` uses the suffix-array construction (bench: "SAM vs SA" rows; below it the
# in-cache SAM is as fast or faster: 1,500-token documents 37 vs 72 ns/token CPU with SA-IS, load ~8)
SA_MIN_N = 16384


# --------------------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------------------

def as_token_array(x: object, name: str = "x") -> np.ndarray:
    """Validate a 1-D array of non-negative integer token ids and return it as int64."""
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be a 1-D sequence of non-negative integer ids, got {type(x).__name__}")
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        if arr.dtype == object or np.issubdtype(arr.dtype, np.floating):
            try:
                as_int = arr.astype(np.int64)
            except (TypeError, ValueError, OverflowError):
                raise TypeError(f"{name} must hold integer token ids, got dtype {arr.dtype}") from None
            if not np.array_equal(as_int, arr):
                raise TypeError(f"{name} must hold integer token ids, got non-integral values")
            arr = as_int
        else:
            raise TypeError(f"{name} must hold integer token ids, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.unsignedinteger) and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds ids too large for int64")
    arr = arr.astype(np.int64, copy=False)
    if arr.min() < 0:
        raise ValueError(f"{name} must hold non-negative token ids, found {int(arr.min())}")
    return arr


def _dense(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Relabel ids to 0..σ-1 (order-preserving); returns the relabelled array and σ."""
    if x.size == 0:
        return x.astype(np.int64), 0
    uniq, inv = np.unique(x, return_inverse=True)
    return inv.astype(np.int64), int(uniq.size)


def _keyable(x: np.ndarray) -> tuple[np.ndarray, int]:
    """(ids, σ) with every id < σ such that the SAM's transition keys state·σ + id (state < 2N+1)
    fit in int64: the ids as they are when small enough (no sort), else relabelled by ``_dense``."""
    sigma = int(x.max()) + 1
    if sigma * (2 * x.size + 2) < 2**62:
        return x, sigma
    return _dense(x)


def _check_backend(backend: str, n: int = 0) -> str:
    """The backend that runs: ``auto`` resolved for a sequence of ``n`` tokens (``sa`` from ``SA_MIN_N``)."""
    check_choice(backend, "backend", BACKENDS)
    if backend == "numba" and not HAVE_NUMBA:
        raise ValueError("backend='numba' needs the numba package (pip install numba)")
    if backend == "sa" and not HAVE_NUMBA:
        raise ValueError("backend='sa' needs numba (pip install numba)")
    if backend == "auto":
        if HAVE_NUMBA and SA_MIN_N <= n < 2**30:
            return "sa"
        return "numba" if HAVE_NUMBA else "python"
    return backend


@lru_cache(maxsize=1)
def _omp() -> object:
    """The libgomp that libdivsufsort is bound to (ctypes), or None: libdivsufsort is run single-threaded (its
    OpenMP pool costs ~7 ms of spin-up per call, more than sorting 10^4 tokens, and would take both cores).

    pydivsufsort bundles libgomp under an auditwheel name (``libgomp-<hash>.so.1.0.0``, also its soname) that
    other wheels share (scikit-learn bundles the same file): when one of them is loaded first, the loader binds libdivsufsort to
    that copy by its soname, and opening pydivsufsort's file by path would give a second, unused copy whose
    thread limit libdivsufsort never sees (seen in the bench: ProcessEntropy imports scikit-learn, and every
    divsufsort call ran 2 threads, 1.9-3.8 ms CPU per 1,500-token document instead of 0.3). So the soname is
    opened first (the loaded copy, once libdivsufsort is loaded), the path only as a fallback."""
    import ctypes
    import glob
    import os

    import pydivsufsort  # loads libdivsufsort, and with it the libgomp it binds to

    libs = glob.glob(os.path.join(os.path.dirname(pydivsufsort.__file__), os.pardir, "pydivsufsort.libs",
                                  "libgomp*"))
    if not libs:
        return None
    for name in (os.path.basename(libs[0]), libs[0]):  # the soname (= the file name) first, then the path
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@contextmanager
def _one_omp_thread() -> Iterator[None]:
    """libdivsufsort's OpenMP pool at one thread for the duration (restored after)."""
    omp = _omp()
    if omp is None:
        yield
        return
    threads = omp.omp_get_max_threads()
    omp.omp_set_num_threads(1)
    try:
        yield
    finally:
        omp.omp_set_num_threads(threads)


def _prefix_free_code(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A prefix-free byte code of the ids of ``x`` (0 <= id < σ ≤ 65,281): the 256 − E most frequent ids
    one byte (0..255−E), the others two (a lead byte 256−E..255, then any byte), E = ⌈(σ−256)/255⌉.
    Returns per id the first byte and the second (-1 for one-byte codes). Byte order of the codewords
    is a total order of the ids, so the encoded suffixes that start on a token boundary sort exactly as
    the token suffixes do under that order (any alphabet order gives the same Λ)."""
    counts = np.bincount(x)
    sigma = counts.size
    lead = np.zeros(sigma, np.int64)
    second = np.full(sigma, -1, np.int64)
    if sigma <= 256:
        lead[:] = np.arange(sigma)
        return lead, second
    e = -(-(sigma - 256) // 255)
    order = np.argsort(-counts, kind="stable")
    one, rest = order[:256 - e], order[256 - e:]
    lead[one] = np.arange(one.size)
    k = np.arange(rest.size)
    lead[rest] = 256 - e + k // 256
    second[rest] = k % 256
    return lead, second


def _divsufsort_bytes(b: np.ndarray) -> np.ndarray:
    """libdivsufsort's suffix array (int32) of the C-contiguous uint8 array ``b``, written straight into a numpy
    buffer (transparent huge pages where the OS gives them: −8% at 16 MB; pydivsufsort's wrapper allocates a
    zeroed ctypes array); the wrapper when the library handle is not there or ``b`` needs the 64-bit build."""
    import ctypes

    from pydivsufsort import divsufsort

    try:
        from pydivsufsort.dll import libdivsufsort
    except ImportError:  # pragma: no cover - another pydivsufsort layout
        libdivsufsort = None
    if libdivsufsort is None or b.size >= 2**31 - 1:
        return divsufsort(b)
    out = np.empty(b.size, np.int32)
    rc = libdivsufsort.divsufsort(b.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
                                  ctypes.c_int32(b.size))
    if rc:
        raise RuntimeError(f"libdivsufsort failed with code {rc}")
    return out


SA_METHODS = ("sais", "divsufsort")


def suffix_array(x: np.ndarray, method: str = "sais", work: np.ndarray | None = None) -> np.ndarray:
    """Suffix array (int32) of the non-negative int32 ids ``x`` with every id < 2**31 (fewer than 2**30 ids),
    under some total order of the ids (every order gives the same Λ).

    ``sais`` (default): induced sorting on the ids themselves (``_sais_numba.sais``, numba; ids relabelled
    when they are sparse). ``divsufsort``: libdivsufsort (pydivsufsort) on their bytes under a prefix-free
    code (``_prefix_free_code``: ~1.25 bytes per token on text; a fixed 3-byte code when σ > 65,281), keeping
    the suffixes that start on a token boundary (found through a bit vector of the token starts with a rank
    directory, ~1 bit per byte, so the filter's lookups stay in cache); kept as the cross-check and the
    bench's anchor (the bench row "suffix array of 10M tokens" compares the two; the byte string grows to
    1.59 bytes/token there; at 1M libdivsufsort is ~5% faster, within a row's noise).
    ``work``: SA-IS's scratch buffer (int32, len(x); ``_sais_numba.sais``), for the caller to reuse after."""
    from neurips26.entropy_filter import _sam_numba

    check_choice(method, "method", SA_METHODS)
    n = x.size
    if n and int(x.min()) < 0:
        raise ValueError(f"x must hold non-negative ids, found {int(x.min())}")
    if work is not None and (work.dtype != np.int32 or work.shape != (n,)):
        raise ValueError(f"work must be an int32 array of shape ({n},), got {work.dtype} {work.shape}")
    if method == "sais":
        from neurips26.entropy_filter import _sais_numba

        if n and int(x.max()) >= n + 65_536:   # sparse ids: relabel so the bucket table stays O(N)
            x = _dense(x)[0]
        return _sais_numba.sais(np.ascontiguousarray(x, dtype=np.int32), int(x.max()) + 1 if n else 1, work)
    if not HAVE_DIVSUFSORT:
        raise ValueError("method='divsufsort' needs pydivsufsort (pip install 'neurips26[entropy_filter]')")
    if int(x.max()) >= 65_281:
        x = _dense(x)[0].astype(np.int32)
    sigma = int(x.max()) + 1
    if sigma <= 65_281:
        lead, second = _prefix_free_code(x)
        m = _sam_numba._code_size(x, second)
        b = np.empty(m, np.uint8)
        bits = np.zeros((m + 63) // 64, np.uint64)
        rank = _sam_numba._encode_bytes(x, lead, second, b, bits)
        with _one_omp_thread():
            sab = _divsufsort_bytes(b)
        del b
        if sab.size == n:
            return sab.astype(np.int32, copy=False)
        return _sam_numba._token_suffixes(sab, bits, rank, np.empty(n, np.int32))
    # big-endian fixed width 3 (σ ≤ n < 2**30): token starts are the offsets divisible by 3
    b = np.empty((n, 3), np.uint8)
    for j in range(3):
        b[:, j] = (x >> (8 * (2 - j))) & 0xFF
    with _one_omp_thread():
        sab = _divsufsort_bytes(b.reshape(-1))
    sab = sab[sab % 3 == 0]
    return (sab // 3).astype(np.int32, copy=False)


def _sa_lambdas(x: np.ndarray, overlap: bool, method: str = "sais") -> np.ndarray:
    """Λ by the suffix-array construction: ``suffix_array`` (``method``), the Φ-method PLCP (on uint16 ids when σ ≤ 2^16),
    the LCP gathered into suffix-array order, then ``_sam_numba._sa_lambdas_numba``'s two sweeps. Every
    pass but three (Φ's scatter, the LCP gather, the Λ scatter: each a loop of independent accesses) reads
    and writes sequentially, and no int64 array is touched before Λ itself."""
    from neurips26.entropy_filter import _sam_numba

    # ids relabelled (an order-preserving bijection: same Λ) only when they do not fit int32; suffix_array
    # relabels sparse ids for its own construction (astype copies: x32 is reused as the LCP buffer below)
    x32 = (x if int(x.max()) < 2**31 else _dense(x)[0]).astype(np.int32)
    n = x32.size
    # dead buffers are reused (SA-IS's scratch for PLCP, the ids for the LCP): fresh pages cost page faults
    work = np.empty(n, np.int32)
    sa = suffix_array(x32, method, work)
    xs = x32.astype(np.uint16) if int(x32.max()) < 2**16 else x32
    plcp = _sam_numba._plcp_numba(xs, sa, work)
    del xs
    lcp = _sam_numba._lcp_in_sa_order(plcp, sa, x32)   # x32 is a copy, dead once PLCP is done
    del plcp, work
    # every buffer from numpy (huge pages where the OS gives them: the random accesses then hit the TLB)
    stacks = [np.empty(n + 1, np.int32) for _ in range(4)]
    return _sam_numba._sa_lambdas_numba(sa, lcp, overlap, np.empty(4 * n, np.int32), *stacks,
                                        np.empty(n - 1, np.int64))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic GC makes the dict-based SAM build super-linear on 10^5 tokens; pause it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# --------------------------------------------------------------------------------------------------
# pure-Python suffix automaton
# --------------------------------------------------------------------------------------------------

def _sam_lambdas_python(x: list[int], overlap: bool) -> np.ndarray:
    n = len(x)
    # 1. online SAM construction; per state: len, link, transitions, firstpos (smallest end index)
    length = [0]
    link = [-1]
    firstpos = [-1]
    trans: list[dict[int, int]] = [{}]
    last = 0
    for pos, c in enumerate(x):
        cur = len(length)
        length.append(length[last] + 1)
        link.append(0)
        firstpos.append(pos)  # a new state ends first at the current position
        trans.append({})
        p = last
        while p != -1 and c not in trans[p]:
            trans[p][c] = cur
            p = link[p]
        if p != -1:
            q = trans[p][c]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(length)
                length.append(length[p] + 1)
                link.append(link[q])
                firstpos.append(firstpos[q])  # a clone keeps the first end position of q
                trans.append(dict(trans[q]))
                while p != -1 and trans[p].get(c) == q:
                    trans[p][c] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur
    # 2.-4. scan i = 1..N-1 carrying (state, L) of the match x[i:i+L]
    lam = np.empty(max(n - 1, 0), dtype=np.int64)
    state, L = 0, 0
    for i in range(1, n):
        if i >= 2:
            if L > 0:
                L -= 1  # drop the first token: x[i:i+L] is a suffix of the previous match
                if L <= length[link[state]]:
                    state = link[state]
            else:
                state = 0
        # non-overlapping: the occurrence must end by i-1 (j + L + 1 ≤ i);
        # overlapping: it must start before i (end ≤ i - 1 + L for the extended length L + 1)
        while i + L < n:
            t = trans[state].get(x[i + L])
            if t is None or firstpos[t] > (i - 1 + L if overlap else i - 1):
                break
            state = t
            L += 1
        lam[i - 1] = L + 1  # Λ_i = ℓ_i + 1
    return lam


# --------------------------------------------------------------------------------------------------
# numba suffix automaton (flat arrays; transitions in an open-addressing hash table of edges)
# --------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _kernels():  # pragma: no cover - depends on numba
    """The numba kernels (``_sam_numba``), imported on first use so ``import`` stays light."""
    from neurips26.entropy_filter import _sam_numba

    return _sam_numba._sam_lambdas_numba, _sam_numba._window_lambdas_numba


# --------------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------------

def match_lengths(x: object, overlap: bool = False, backend: str = "auto") -> np.ndarray:
    """Λ_1..Λ_{N-1} of the integer token sequence ``x`` (length N-1; empty for N < 2).

    overlap=False (default, the paper's): the match must lie inside the past x[0:i].
    overlap=True: LZ77 longest previous factor + 1 (the match must only *start* before i).
    backend: ``auto`` (the suffix array from ``SA_MIN_N`` tokens, else the numba SAM, else pure Python),
    ``sa``, ``numba`` or ``python``; all give the same Λ. Linear time (SAM) / O(N log N) worst case (SA).
    """
    arr = as_token_array(x)
    check_scalar(overlap, "overlap", (bool, np.bool_))
    be = _check_backend(backend, arr.size)
    if arr.size < 2:
        return np.empty(0, dtype=np.int64)
    if be == "sa":
        if arr.size >= 2**30:
            raise ValueError(f"backend='sa' handles up to 2**30 tokens, got {arr.size}")
        return _sa_lambdas(arr, bool(overlap))
    dense, sigma = _keyable(arr)
    if be == "numba" and arr.size < 2**31 - 1:  # the kernel packs state and position in 32 bits each
        return _kernels()[0](dense, max(sigma, 1), bool(overlap))
    with _gc_paused():
        return _sam_lambdas_python(dense.tolist(), bool(overlap))


def lpf_lambdas(x: object) -> np.ndarray:
    """Overlapping Λ via ``pydivsufsort.longest_previous_factor`` (suffix array + Kasai LCP): LPF[1:] + 1."""
    from pydivsufsort import divsufsort, kasai, longest_previous_factor

    arr = as_token_array(x)
    if arr.size < 2:
        return np.empty(0, dtype=np.int64)
    dense, _ = _dense(arr)
    with _one_omp_thread():  # every pydivsufsort call at one OpenMP thread: no spinning worker left behind
        sa = divsufsort(dense)
        lcp = kasai(dense, sa)
        lpf = longest_previous_factor(dense, sa, lcp)
    return np.asarray(lpf, dtype=np.int64)[1:] + 1


def naive_lambdas(x: object, overlap: bool = False) -> np.ndarray:
    """The direct definition with pure-Python loops (O(N^2)-O(N^3)); for tests and benchmarks only."""
    seq = as_token_array(x).tolist()
    n = len(seq)
    out = []
    for i in range(1, n):
        best = 0
        for j in range(i):
            cap = n - i if overlap else min(i - j, n - i)
            L = 0
            while L < cap and seq[j + L] == seq[i + L]:
                L += 1
            if L > best:
                best = L
        out.append(best + 1)
    return np.asarray(out, dtype=np.int64)


def check_window(window: object, n: int) -> int:
    """The window W of the sliding-window estimator: an int with 2 <= W < N (log2 of W=1 is 0)."""
    return check_scalar(window, f"window (N = {n})", int, min=2, max=n, inclusive="left")


def window_lambdas(x: object, window: int, backend: str = "auto") -> np.ndarray:
    """Sliding-window Λ_i^W for i = W..N-1: matches against x[i-W:i] only (j ≥ i − W, j + L ≤ i).

    A direct O(N·W) scan (the SAM does not give windowed matches); used by the KASW fixed-window
    estimator, which is a benchmark-only variant.
    """
    arr = as_token_array(x)
    W = check_window(window, arr.size)
    be = _check_backend(backend)
    if be in ("numba", "sa"):  # no suffix-array form of windowed matches: the numba scan
        return _kernels()[1](arr, W)
    # numpy: for each i, all W candidate starts at once, extended token by token
    n = arr.size
    lam = np.empty(n - W, dtype=np.int64)
    for i in range(W, n):
        alive = np.arange(i - W, i)
        L = 0
        while alive.size and i + L < n:
            keep = (L < np.minimum(i - alive, n - i)) & (arr[alive + L] == arr[i + L])
            alive = alive[keep]
            if alive.size:
                L += 1
        lam[i - W] = L + 1
    return lam
