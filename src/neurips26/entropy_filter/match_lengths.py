"""Match lengths Λ_i of a token sequence: the quantity behind every H_K estimate.

Definition (the paper's, and ProcessEntropy/LCSFinder's). For x_0..x_{N-1} and i = 1..N-1:

    ℓ_i = max{ L ≥ 0 : ∃ j ≥ 0, j + L ≤ i, x[j:j+L] = x[i:i+L] },  L ≤ N - i
    Λ_i = ℓ_i + 1

i.e. Λ_i is the length of the shortest prefix starting at i that does not occur inside the past
x[0:i] (the match lies entirely in the past: *non-overlapping*). With ``overlap=True`` the constraint
j + L ≤ i is dropped (only j < i): ℓ_i is then the LZ77 "longest previous factor" LPF[i].

Fast algorithm: a suffix automaton (SAM) of the whole sequence whose states carry ``firstpos`` (the
smallest end index of any occurrence), scanned once with the (state, L) of the current match; the
carried match only ever shrinks by one per step (ℓ_{i+1} ≥ ℓ_i − 1), so the scan is amortised O(N).
Two backends compute it: a numba kernel with a flat open-addressing transition table (used when numba
is installed) and a pure-Python one with dict transitions (always available). ``naive_lambdas`` is the
direct definition, for tests and the benchmark only.
"""

from __future__ import annotations

import gc
import importlib.util
from functools import lru_cache
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar

BACKENDS = ("auto", "numba", "python")

# optional accelerator, imported (and its kernels compiled) on first use only
HAVE_NUMBA = importlib.util.find_spec("numba") is not None


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


def _check_backend(backend: str) -> str:
    check_choice(backend, "backend", BACKENDS)
    if backend == "numba" and not HAVE_NUMBA:
        raise ValueError("backend='numba' needs the numba package (pip install numba)")
    if backend == "auto":
        return "numba" if HAVE_NUMBA else "python"
    return backend


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
    backend: ``auto`` (numba when installed), ``numba`` or ``python``. Linear time via the SAM.
    """
    arr = as_token_array(x)
    check_scalar(overlap, "overlap", (bool, np.bool_))
    be = _check_backend(backend)
    if arr.size < 2:
        return np.empty(0, dtype=np.int64)
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
    sa = divsufsort(dense)
    lcp = kasai(dense, sa)
    return np.asarray(longest_previous_factor(dense, sa, lcp), dtype=np.int64)[1:] + 1


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
    if be == "numba":
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
