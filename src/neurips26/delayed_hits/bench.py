"""Throughput of our simulator against the ``libcachesim`` Python package (C core), side by side.

Every timed row goes through ``harness.bench.compare``: ours and the anchor in interleaved rounds
after an uncounted warm-up round (numba compiles, or loads its cache, there), the median of each
reported, p90 and n in the row's note. Rows (one ``neurips26 bench delayed_hits`` run):

  * LRU at Z = 1 and Z = 100 (our numba kernel, requests/s) vs libcachesim LRU on the same
    1M-request trace read from an oracleGeneral binary (``TraceReader`` + ``process_trace``).
  * UCB-DH and LA-FTPL (fast path) slots/s at N = 1e5 items for two refresh periods; the anchor is
    again libcachesim LRU on that trace (the only like-for-like C baseline: libcachesim has neither
    delayed hits nor these policies), so the ratio reads "how close to a C LRU".
  * the pure-Python engine's LRU (generic policy-hook loop) for reference.
  * the streaming interface, one request at a time from Python: ``Cache(LRU(), K, Z, n_items=N)``
    ``.request(obj)`` vs libcachesim's ``LRU.get(req)`` on the same trace and capacity (both a
    Python loop over a C or Python core), and ``Cache.process(iterable)``; at Z = 1 the two give
    the same hits request by request (checked in the row's note).
  * byte capacities: our LRU with ``capacity="bytes"`` (Python engine) vs libcachesim LRU over the
    same sized oracleGeneral file (same hits at Z = 1, checked).
  * peak memory of one streaming LRU run vs the trace's own size (O(N + K) state; not a timing).
Targets (work order): >= 1 M req/s for LRU at any Z, >= 0.3 M slots/s for UCB-DH and LA-FTPL.

``ctx.scale == "smoke"``: the same rows on 20,000-request traces and fewer rounds (seconds).
"""

from __future__ import annotations

import tempfile
import tracemalloc
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import compare
from neurips26.delayed_hits.la_ftpl import LAFTPL
from neurips26.delayed_hits.policies import LRU
from neurips26.delayed_hits.simulator import Cache, simulate
from neurips26.delayed_hits.trace import Trace, write_oracle_general
from neurips26.delayed_hits.ucb_dh import UCBDH
from neurips26.delayed_hits.workloads import irm_zipf

LCS_NAME = "libcachesim 0.3.5 LRU (oracleGeneral)"
LCS_MISSING = "libcachesim not installed (pip install 'neurips26[delayed_hits]')"


@dataclass(frozen=True)
class Sizes:
    n_req: int = 1_000_000       # the LRU trace
    n_obj: int = 10_000
    cache: int = 500
    big_N: int = 100_000         # the UCB-DH / LA-FTPL trace
    big_T: int = 300_000
    big_K: int = 1000
    big_Z: int = 10
    refreshes: tuple = (1024, 4096)
    rounds: int = 5              # interleaved rounds of the fast rows
    slow_rounds: int = 3         # the pure-Python engine and the policies at N = 1e5
    stream_req: int = 200_000    # the per-request (streaming) rows
    warmup: int = 1              # uncounted rounds (libcachesim's reader costs ~0.5 s per call)


SIZES = {"smoke": Sizes(n_req=20_000, n_obj=2000, cache=100, big_N=5000, big_T=20_000, big_K=100,
                        refreshes=(64,), rounds=1, slow_rounds=1, warmup=0, stream_req=5000),
         "quick": Sizes(), "full": Sizes()}


def _lcs_lru(path: Path, K: int):
    """A call of libcachesim's LRU over the oracleGeneral file, or None when it is not installed."""
    try:
        import libcachesim as lcs
    except ImportError:
        return None

    def go():
        reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
        lcs.LRU(cache_size=K).process_trace(reader)

    return go


def _lcs_get_loop(ids: list, sizes: list | None, K: int):
    """libcachesim LRU driven one request at a time from Python (``cache.get(req)``); returns the
    per-request hit flags of the last call, or None when libcachesim is not installed."""
    try:
        import libcachesim as lcs
    except ImportError:
        return None
    last: dict = {}

    def go():
        cache, req = lcs.LRU(cache_size=K), lcs.Request()
        hits = []
        if sizes is None:
            for i in ids:
                req.obj_id = i
                hits.append(cache.get(req))
        else:
            for i, sz in zip(ids, sizes):
                req.obj_id, req.obj_size = i, sz
                hits.append(cache.get(req))
        last["hits"] = hits

    go.last = last
    return go


def _stream_rows(sz: Sizes, tr) -> list[BenchRow]:
    """Per-request interface rows: ours (``Cache.request`` / ``process``) vs libcachesim ``get``."""
    rows = []
    n = min(sz.stream_req, tr.n_requests)
    raw = (tr.ids[:n] + 1).tolist()                   # original ids (libcachesim ids start at 1)
    N = len(set(raw))
    anchor = _lcs_get_loop(raw, None, sz.cache)
    got: dict = {}

    def ours_request():
        c = Cache(LRU(), K=sz.cache, Z=1, n_items=N)
        got["lat"] = [c.request(x) for x in raw]

    def ours_process():
        Cache(LRU(), K=sz.cache, Z=1, n_items=N).process(raw).result()

    same = ""
    for name, fn in (("Cache.request(obj) per request", ours_request),
                     ("Cache.process(iterable)", ours_process)):
        row = compare(f"LRU Z=1 streaming {name}, {n:.0e} req, K={sz.cache}", fn, anchor,
                      "libcachesim 0.3.5 LRU.get(req) per request (Python loop)", unit="req/s",
                      work=n, rounds=sz.slow_rounds, warmup=sz.warmup, missing=LCS_MISSING,
                      note="per-request interface on both sides")
        if anchor is not None and "lat" in got and "hits" in anchor.last and not same:
            eq = [x == 0 for x in got["lat"]] == anchor.last["hits"]
            same = f"hits equal request by request: {eq}"
        if same:
            row = replace(row, note=f"{same}; {row.note}")
        rows.append(row)
    # Z = 100 through the same interface (no anchor has delayed hits; the C LRU is the reference)
    def ours_z100():
        c = Cache(LRU(), K=sz.cache, Z=100, n_items=N)
        for x in raw:
            c.request(x)

    rows.append(compare(f"LRU Z=100 streaming Cache.request(obj), {n:.0e} req, K={sz.cache}",
                        ours_z100, anchor, "libcachesim 0.3.5 LRU.get(req) per request (Python loop)",
                        unit="req/s", work=n, rounds=sz.slow_rounds, warmup=sz.warmup,
                        missing=LCS_MISSING, note="delayed hits on; the anchor has none"))
    return rows


def _bytes_row(sz: Sizes, tr, d: Path) -> BenchRow:
    """Byte-capacity LRU (Python engine) vs libcachesim LRU on the same sized oracleGeneral file."""
    n = min(sz.stream_req, tr.n_requests)
    rng = np.random.default_rng(0)
    obj_size = rng.integers(1, 4096, tr.n_items)
    ids = tr.ids[:n]
    sized = Trace(ids, None, tr.n_items, sizes=obj_size[ids])
    cap = int(obj_size.mean() * sz.cache)
    anchor = _lcs_lru(write_oracle_general(sized, d / "sized.oracleGeneral"), cap)
    ours = simulate(sized, LRU(), K=cap, Z=1, capacity="bytes")
    note = "target: same hits as the anchor at Z = 1"
    try:
        import libcachesim as lcs

        c, req, hits = lcs.LRU(cache_size=cap), lcs.Request(), 0
        for i, s in zip((ids + 1).tolist(), sized.sizes.tolist()):
            req.obj_id, req.obj_size = i, s
            hits += bool(c.get(req))
        note = f"hits ours {ours.hits} vs libcachesim {hits} (equal: {ours.hits == hits})"
    except ImportError:
        pass
    return compare(f"LRU Z=1 byte capacity {cap} B (Python engine), {n:.0e} req, sizes 1-4095 B",
                   lambda: simulate(sized, LRU(), K=cap, Z=1, capacity="bytes"), anchor,
                   "libcachesim 0.3.5 LRU, same sized oracleGeneral", unit="req/s", work=n,
                   rounds=sz.slow_rounds, warmup=sz.warmup, missing=LCS_MISSING, note=note)


def bench(ctx: RunContext) -> list[BenchRow]:
    sz = SIZES.get(ctx.scale, SIZES["quick"])
    rows: list[BenchRow] = []
    tr, _ = irm_zipf(sz.n_obj, sz.n_req, 0.8, seed=0)
    with tempfile.TemporaryDirectory() as d:
        anchor = _lcs_lru(write_oracle_general(tr, Path(d) / "bench.oracleGeneral"), sz.cache)
        simulate(Trace(tr.ids[:1000], None, tr.n_items), LRU(), K=sz.cache, Z=1)   # compile
        for Z in (1, 100):
            rows.append(compare(
                f"LRU Z={Z} (numba kernel), {sz.n_req:.0e} req, {sz.n_obj} objects, K={sz.cache}",
                lambda Z=Z: simulate(tr, LRU(), K=sz.cache, Z=Z), anchor, LCS_NAME, unit="req/s",
                work=sz.n_req, rounds=sz.rounds, warmup=sz.warmup, missing=LCS_MISSING,
                note="target >= 1e6 req/s"))
        rows += _stream_rows(sz, tr)
        rows.append(_bytes_row(sz, tr, Path(d)))
        rows.append(compare(
            "LRU Z=100 (pure-Python engine, generic policy hooks)",
            lambda: simulate(tr, LRU(), K=sz.cache, Z=100, engine="python"), anchor, LCS_NAME,
            unit="req/s", work=sz.n_req, rounds=sz.slow_rounds, warmup=0, missing=LCS_MISSING,
            note="reference: the generic hook loop"))

    # memory: one streaming run's peak Python allocations vs the trace array itself (not a timing)
    tracemalloc.start()
    simulate(tr, LRU(), K=sz.cache, Z=100)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows.append(BenchRow("peak extra memory of an LRU run (bytes, tracemalloc)", float(peak),
                         float(tr.ids.nbytes), "size of the trace's id array", "bytes",
                         better="lower", note="one run, tracemalloc peak; state is O(N + K), no copy "
                                              "of the trace"))

    # UCB-DH and LA-FTPL at N = 1e5
    big, _ = irm_zipf(sz.big_N, sz.big_T, 0.8, seed=1)
    small = Trace(big.ids[: min(5000, sz.big_T)], None, sz.big_N)
    with tempfile.TemporaryDirectory() as d:
        anchor_big = _lcs_lru(write_oracle_general(big, Path(d) / "big.oracleGeneral"), sz.big_K)
        for R in sz.refreshes:
            for name, make in (("UCB-DH", lambda R=R: UCBDH(refresh=R)),
                               ("LA-FTPL", lambda R=R: LAFTPL(refresh=R, seed=0))):
                simulate(small, make(), K=sz.big_K, Z=sz.big_Z)          # compile
                rows.append(compare(
                    f"{name} refresh={R}, N={sz.big_N:.0e}, K={sz.big_K}, Z={sz.big_Z}, "
                    f"T={sz.big_T:.0e} slots",
                    lambda make=make: simulate(big, make(), K=sz.big_K, Z=sz.big_Z), anchor_big,
                    "libcachesim 0.3.5 LRU on the same trace (req/s)", unit="slots/s", work=sz.big_T,
                    rounds=sz.slow_rounds, warmup=sz.warmup, missing=LCS_MISSING,
                    note=f"target >= 3e5 slots/s; refresh costs O(N) every {R} slots"))
    for r in rows:
        ctx.log(f"{r.name}: ours {r.ours:.4g} {r.unit}, anchor {r.anchor}")
    return rows
