"""Workload generators W1-W7 (seeded ``numpy.random.Generator``; nothing is downloaded).

W1 irm_zipf          IRM with p_i ∝ i^{-alpha} (Breslau et al.), one request per slot.
W2 bursty            i.i.d. slots, half the items steady (B ~ Bernoulli(λ)), half bursty
                     (B = b w.p. λ / b): same rate λ, different shadow value theta.
W3 piecewise_zipf    W1 with the popularity ranks re-permuted at B change points.
W4 shot_noise        Traverso et al. (CCR 2013) shot-noise model of CDN temporal locality.
W5 flow_packets      flows (objects) of Pareto sizes sent in back-to-back trains separated by RTTs.
W6 cyclic / freq_vs_burst / lfu_flip   adversarial instances for the linear-regret claims.
W7 stdlib_tokens     NAME tokens of the CPython stdlib: a real program reference stream (not a CDN
                     trace).  W8, Atre et al.'s anonymised 5K-request trace, is ``trace.load_atre_5k``.
Every generator returns (Trace, info dict).
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import sysconfig
import tokenize
from pathlib import Path

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.delayed_hits.shadow import theta
from neurips26.delayed_hits.trace import Trace, remap_first_seen


def _rng(seed) -> np.random.Generator:
    return np.random.default_rng(check_scalar(seed, "seed", int, min=0))


def zipf_probs(N: int, alpha: float) -> np.ndarray:
    N = check_scalar(N, "N", int, min=1)
    alpha = check_scalar(alpha, "alpha", float, min=0.0)
    p = np.arange(1, N + 1, dtype=np.float64) ** (-alpha)
    return p / p.sum()


def irm_zipf(N: int, T: int, alpha: float = 0.8, seed: int = 0) -> tuple[Trace, dict]:
    """W1: IRM-Zipf, one request per slot; item r (0-based rank) has probability p_r ∝ (r+1)^-alpha."""
    T = check_scalar(T, "T", int, min=1)
    p = zipf_probs(N, alpha)
    ids = _rng(seed).choice(N, size=T, p=p)
    return Trace(ids.astype(np.int64), None, N, f"W1 IRM-Zipf(alpha={alpha})"), {"p": p}


def irm(p, T: int, seed: int = 0, name: str = "IRM") -> tuple[Trace, dict]:
    """IRM with a given probability vector (one request per slot)."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("p must be a probability vector")
    T = check_scalar(T, "T", int, min=1)
    return Trace(_rng(seed).choice(p.size, size=T, p=p).astype(np.int64), None, p.size, name), {"p": p}


def _busy_slots(rng: np.random.Generator, q: float, T: int) -> np.ndarray:
    """Slots (1..T) of a Bernoulli(q) process, via geometric gaps (O(q T) work)."""
    if q <= 0:
        return np.zeros(0, dtype=np.int64)
    if q >= 1:
        return np.arange(1, T + 1, dtype=np.int64)
    n = int(q * T + 6 * math.sqrt(q * T) + 16)
    out = []
    pos = 0
    while pos <= T:
        g = np.cumsum(rng.geometric(q, size=n)) + pos
        out.append(g)
        pos = int(g[-1])
    s = np.concatenate(out)
    return s[s <= T]


def _slots_to_trace(slots: np.ndarray, items: np.ndarray, counts: np.ndarray, T: int, N: int,
                    rng: np.random.Generator, name: str) -> Trace:
    """Build a batched trace; requests inside a slot are in random order."""
    key = rng.random(slots.size)
    order = np.lexsort((key, slots))
    slots, items, counts = slots[order], items[order], counts[order]
    ids = np.repeat(items, counts)
    per_slot = np.bincount(np.repeat(slots, counts), minlength=T + 1)[1:]
    ptr = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(per_slot, out=ptr[1:])
    return Trace(ids.astype(np.int64), ptr, N, name)


def bursty(N: int = 1000, T: int = 50_000, b: int = 4, rate0: float = 0.2, rate_exp: float = 0.8,
           Z: int = 10, seed: int = 0) -> tuple[Trace, dict]:
    """W2: i.i.d. slots; rates λ_r = rate0 r^{-rate_exp} (rank r >= 1); odd ranks bursty (B = b
    w.p. λ/b), even ranks steady (B ~ Bernoulli(λ)). info has q, m, λ and theta (at Z)."""
    N, T = check_scalar(N, "N", int, min=2), check_scalar(T, "T", int, min=1)
    b = check_scalar(b, "b", int, min=1)
    rate0 = check_scalar(rate0, "rate0", float, min=0.0)
    lam = rate0 * np.arange(1, N + 1, dtype=np.float64) ** (-rate_exp)
    bursty_mask = (np.arange(1, N + 1) % 2) == 1
    q = np.where(bursty_mask, lam / b, lam)
    if np.any(q > 1):
        raise ValueError("rate0 too large: some q = P(B > 0) exceeds 1")
    m = np.where(bursty_mask, float(b), 1.0)
    rng = _rng(seed)
    S, Items, C = [], [], []
    for i in range(N):
        s = _busy_slots(rng, float(q[i]), T)
        S.append(s)
        Items.append(np.full(s.size, i, dtype=np.int64))
        C.append(np.full(s.size, int(m[i]), dtype=np.int64))
    tr = _slots_to_trace(np.concatenate(S), np.concatenate(Items), np.concatenate(C), T, N, rng,
                         f"W2 bursty(b={b})")
    return tr, {"q": q, "m": m, "rate": lam, "bursty": bursty_mask, "theta": theta(q, m, Z)}


def batched_iid(q, m_values, T: int, seed: int = 0, name: str = "iid slots") -> tuple[Trace, dict]:
    """Generic i.i.d.-slot model: item i busy w.p. q_i, then B = m_values[i] requests."""
    q = np.asarray(q, dtype=np.float64)
    m = np.asarray(m_values, dtype=np.int64)
    T = check_scalar(T, "T", int, min=1)
    rng = _rng(seed)
    S, Items, C = [], [], []
    for i in range(q.size):
        s = _busy_slots(rng, float(q[i]), T)
        S.append(s)
        Items.append(np.full(s.size, i, dtype=np.int64))
        C.append(np.full(s.size, int(m[i]), dtype=np.int64))
    tr = _slots_to_trace(np.concatenate(S), np.concatenate(Items), np.concatenate(C), T, q.size, rng, name)
    return tr, {"q": q, "m": m.astype(np.float64)}


def change_points(T: int, B: int) -> list[int]:
    """round(j T / (B + 1)) for j = 1..B."""
    return [int(round(j * T / (B + 1))) for j in range(1, B + 1)]


def piecewise_zipf(N: int, T: int, B: int = 4, alpha: float = 0.8, seed: int = 0) -> tuple[Trace, dict]:
    """W3: W1 whose popularity ranks are re-permuted at the B change points round(jT/(B+1))."""
    T = check_scalar(T, "T", int, min=1)
    B = check_scalar(B, "B", int, min=0)
    p = zipf_probs(N, alpha)
    rng = _rng(seed)
    ranks = rng.choice(N, size=T, p=p)
    cps = change_points(T, B)
    bounds = [0] + cps + [T]
    ids = np.empty(T, dtype=np.int64)
    perms = []
    for j in range(B + 1):
        perm = np.arange(N) if j == 0 else rng.permutation(N)
        perms.append(perm)
        ids[bounds[j]:bounds[j + 1]] = perm[ranks[bounds[j]:bounds[j + 1]]]
    return Trace(ids, None, N, f"W3 piecewise Zipf(B={B})"), {"change_points": cps, "p": p}


def shot_noise(T: int, rate: float = 0.05, tau: float = 2000.0, shape: float = 1.8,
               seed: int = 0) -> tuple[Trace, dict]:
    """W4 (Traverso et al. 2013): contents born by a Poisson process (``rate`` per slot), volume
    V ~ Pareto(shape, min 1) requests, lifetime ~ Exp(mean tau), requests uniform over the
    lifetime; merged, sorted by time and serialised one request per slot (first T requests)."""
    T = check_scalar(T, "T", int, min=1)
    rate, tau = check_scalar(rate, "rate", float, min=1e-12), check_scalar(tau, "tau", float, min=1e-12)
    rng = _rng(seed)
    times, items = [], []
    n_req, born, horizon = 0, 0, 0.0
    while n_req < 1.2 * T + 1000:
        n = max(1000, int(rate * T))
        birth = horizon + np.cumsum(rng.exponential(1 / rate, size=n))
        horizon = float(birth[-1])
        vol = np.floor(rng.pareto(shape, size=n) + 1).astype(np.int64)
        vol = np.minimum(vol, 100_000)
        life = rng.exponential(tau, size=n)
        owner = np.repeat(np.arange(born, born + n), vol)
        t = np.repeat(birth, vol) + rng.random(owner.size) * np.repeat(life, vol)
        times.append(t)
        items.append(owner)
        born += n
        n_req += owner.size
    t = np.concatenate(times)
    it = np.concatenate(items)
    order = np.argsort(t, kind="stable")[:T]
    ids, labels = remap_first_seen(it[order])
    return Trace(ids, None, int(labels.size), "W4 shot-noise"), {}


def flow_packets(T: int, Z: int = 10, flow_rate: float = 0.01, shape: float = 1.2, cap: int = 10_000,
                 train_mean: float = 8.0, seed: int = 0) -> tuple[Trace, dict]:
    """W5: flows arrive Poisson(``flow_rate`` per slot); size ~ Pareto(shape) packets (cap);
    packets in trains of Geom(mean ``train_mean``) back-to-back, trains separated by an RTT ~
    U[Z/2, 4Z]; serialised one packet per slot in time order. Flows are the objects."""
    T, Z = check_scalar(T, "T", int, min=1), check_scalar(Z, "Z", int, min=1)
    rng = _rng(seed)
    times, owner = [], []
    n, start, f = 0, 0.0, 0
    while n < T * 1.1 + 100:
        start += rng.exponential(1 / flow_rate)
        size = int(min(cap, math.floor(rng.pareto(shape) + 1)))
        t = start
        left = size
        while left > 0:
            train = min(left, int(rng.geometric(1 / train_mean)))
            times.append(t + np.arange(train))
            owner.append(np.full(train, f, dtype=np.int64))
            left -= train
            t += train + rng.uniform(Z / 2, 4 * Z)
            n += train
        f += 1
    t = np.concatenate(times)
    o = np.concatenate(owner)
    order = np.argsort(t, kind="stable")[:T]
    ids, labels = remap_first_seen(o[order])
    return Trace(ids, None, int(labels.size), "W5 flow packets"), {}


def cyclic(K: int, T: int) -> tuple[Trace, dict]:
    """W6a: items 0..K cycled (LRU/FIFO miss always; Marker misses ~H_K/K per request)."""
    K, T = check_scalar(K, "K", int, min=1), check_scalar(T, "T", int, min=1)
    return Trace(np.arange(T, dtype=np.int64) % (K + 1), None, K + 1, "W6a cyclic"), {}


def freq_vs_burst(T: int, Z: int = 10) -> tuple[Trace, dict]:
    """W6b (K = 1): per period P = 6 (Z + 1) + Z slots, item 0 (a) at offsets 0, Z+1, ..., 5 (Z+1)
    (AD 6Z per period), item 1 (b) in one burst at offsets 6 (Z+1) .. P-1 (AD Z + Z(Z-1)/2);
    all other slots idle. LFU keeps b, the static optimum keeps a (for Z < 11)."""
    T, Z = check_scalar(T, "T", int, min=1), check_scalar(Z, "Z", int, min=1)
    P = 6 * (Z + 1) + Z
    per = [[] for _ in range(P)]
    for j in range(6):
        per[j * (Z + 1)].append(0)
    for o in range(6 * (Z + 1), P):
        per[o].append(1)
    counts = np.array([len(x) for x in per] * (T // P + 1), dtype=np.int64)[:T]
    pattern = np.array([x[0] if x else -1 for x in per] * (T // P + 1), dtype=np.int64)[:T]
    ids = pattern[pattern >= 0]
    ptr = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return Trace(ids, ptr, 2, "W6b frequency vs burst"), {"period": P}


def lfu_flip(K: int, T: int) -> tuple[Trace, dict]:
    """W6c: LFU lock-in. Items 0..K-1 round robin in slots 1..T/2, items K..2K-1 round robin after
    the popularity flip at T/2. Global-count LFU never lets the new items in (their counts only tie
    the old ones at T), so it misses all of the second half while a comparator with one switch at
    the flip hits almost everything."""
    K, T = check_scalar(K, "K", int, min=1), check_scalar(T, "T", int, min=2)
    h = T // 2
    ids = np.concatenate([np.arange(h) % K, K + np.arange(T - h) % K]).astype(np.int64)
    return Trace(ids, None, 2 * K, "W6c LFU flip"), {"change_points": [h]}


_SKIP = {"site-packages", "test", "tests", "idlelib", "lib2to3"}


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        for f in filenames:
            if f.endswith(".py"):
                out.append(Path(dirpath) / f)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def stdlib_tokens(max_requests: int | None = None) -> tuple[Trace, dict]:
    """W7: NAME tokens of the stdlib ``.py`` files (sorted, skipping site-packages, test, tests,
    idlelib, lib2to3), ids by first appearance, one token per slot. A real program reference
    stream, not a CDN trace; the SHA-256 of the token list is in info (it depends on the Python
    patch version)."""
    if max_requests is not None:
        max_requests = check_scalar(max_requests, "max_requests", int, min=1)
    ids: list[int] = []
    vocab: dict[str, int] = {}
    h = hashlib.sha256()
    n_files = 0
    for path in stdlib_files():
        try:
            src = path.read_bytes()
            toks = [tok.string for tok in tokenize.tokenize(io.BytesIO(src).readline)
                    if tok.type == tokenize.NAME]
        except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, OSError):
            continue
        n_files += 1
        for s in toks:
            j = vocab.get(s)
            if j is None:
                j = vocab[s] = len(vocab)
            ids.append(j)
            h.update(s.encode() + b"\n")
            if max_requests is not None and len(ids) >= max_requests:
                break
        if max_requests is not None and len(ids) >= max_requests:
            break
    if not ids:
        raise RuntimeError("no stdlib tokens found")
    import platform

    return (Trace(np.asarray(ids, dtype=np.int64), None, len(vocab),
                  "W7 stdlib NAME tokens (real program reference stream)"),
            {"files": n_files, "requests": len(ids), "distinct": len(vocab), "sha256": h.hexdigest(),
             "python": platform.python_version()})
