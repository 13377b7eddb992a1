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
  * peak memory of one streaming LRU run vs the trace's own size (O(N + K) state; not a timing).
Targets (work order): >= 1 M req/s for LRU at any Z, >= 0.3 M slots/s for UCB-DH and LA-FTPL.

``ctx.scale == "smoke"``: the same rows on 20,000-request traces and fewer rounds (seconds).
"""

from __future__ import annotations

import tempfile
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import compare
from neurips26.delayed_hits.la_ftpl import LAFTPL
from neurips26.delayed_hits.policies import LRU
from neurips26.delayed_hits.simulator import simulate
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
    warmup: int = 1              # uncounted rounds (libcachesim's reader costs ~0.5 s per call)


SIZES = {"smoke": Sizes(n_req=20_000, n_obj=2000, cache=100, big_N=5000, big_T=20_000, big_K=100,
                        refreshes=(64,), rounds=1, slow_rounds=1, warmup=0),
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
