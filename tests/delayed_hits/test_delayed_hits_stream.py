"""The issue's three ``simulate`` reproductions, the streaming ``Cache`` interface against the
batch engine, and byte capacities (golden values from libcachesim at Z = 1)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from neurips26.delayed_hits import (FIFO, LAFTPL, LFU, LRU, LRUMAD, UCBDH, Belady, Cache, InCacheLFU,
                                    LHDMAD, Marker, StaticOPT, Trace, VACDH, as_trace, from_slots,
                                    make_policy, simulate)
from neurips26.delayed_hits.trace import remap_first_seen
from neurips26.delayed_hits.workloads import bursty, irm_zipf

ONLINE = [LRU, FIFO, LFU, InCacheLFU, lambda: Marker(seed=1), LRUMAD, VACDH, lambda: LHDMAD(seed=0),
          lambda: UCBDH(refresh=4), lambda: LAFTPL(refresh=4, seed=0), Belady,
          lambda: Belady(admission="bypass", next_request="atre")]


def test_huge_ids_are_remapped_without_allocating_by_max_id():
    """Issue: ``simulate([20_000_000, 5, 20_000_000, 7], LRUMAD(), 1, 2)`` peaked at 1.44 GB."""
    simulate([3, 1, 3], LRUMAD(), 1, 2)                     # warm imports / kernels
    tracemalloc.start()
    r = simulate([20_000_000, 5, 20_000_000, 7], LRUMAD(), 1, 2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2_000_000, peak                           # bytes; was ~1.4e9
    assert r.shadow_loss_per_item.size == 3                 # N = 3 distinct ids
    # miss (2), miss (2), hit (20M completed at the end of slot 2), miss (2)
    assert (r.total_latency, r.hits, r.misses) == (6, 1, 3)


def test_remap_is_first_seen_and_linear():
    ids, labels = remap_first_seen(np.array([9, 2 ** 62, 9, 4, 2 ** 62, 0]))
    assert ids.tolist() == [0, 1, 0, 2, 1, 3]
    assert labels.tolist() == [9, 2 ** 62, 4, 0]
    ids, labels = remap_first_seen(np.array(["b", "a", "b"]))
    assert ids.tolist() == [0, 1, 0] and labels.tolist() == ["b", "a"]
    big = np.random.default_rng(0).integers(0, 2 ** 40, 200_000)
    ids, labels = remap_first_seen(big)
    assert np.array_equal(labels[ids], big)
    u, first = np.unique(big, return_index=True)
    first_of = dict(zip(u.tolist(), first.tolist()))
    order = [first_of[x] for x in labels.tolist()]
    assert order == sorted(order) and len(order) == u.size   # labels in first-appearance order


@pytest.mark.parametrize("make", ONLINE)
def test_k_at_least_n_is_the_all_hit_case(make):
    """Issue: ``simulate([1, 2, 3, 1], LRU(), 5, 2)`` raised "K must be < N (4)": it is the case
    where every item fits, so only the first request of each item misses."""
    r = simulate([1, 2, 3, 1], make(), 5, 2)
    assert (r.total_latency, r.hits, r.misses, r.evictions) == (6, 1, 3, 0)
    assert r.K == 5 and r.shadow_loss_per_item.size == 3    # no phantom id 0
    tr, _ = irm_zipf(30, 3000, 0.8, seed=2)
    for K in (30, 31, 100):
        r = simulate(tr, make(), K=K, Z=7)
        assert r.misses == 30 and r.evictions == 0
        assert r.total_latency == simulate(tr, LRU(), K=K, Z=7).total_latency


def test_k_at_least_n_static_opt_is_all_hits():
    r = simulate([1, 2, 3, 1], StaticOPT(), 5, 2)
    assert r.total_latency == 0 and r.static_opt() == 0


def test_no_phantom_item_zero():
    r = simulate([1, 2, 3, 1], LRU(), 2, 2)
    assert r.shadow_loss_per_item.tolist() == [2 + 2, 2, 2]  # items 1, 2, 3 (no id 0)
    assert as_trace([1, 2, 3, 1]).labels.tolist() == [1, 2, 3]


@pytest.mark.parametrize("make", ONLINE[:10])
def test_stream_equals_batch_one_request_per_slot(make):
    tr, _ = irm_zipf(80, 4000, 0.9, seed=5)
    raw = (tr.ids * 1_000_003 + 17).tolist()                 # arbitrary original ids
    want = simulate(raw, make(), K=10, Z=6, engine="python")  # remapped first-seen, as the stream
    c = Cache(make(), K=10, Z=6, n_items=tr.n_items)
    lats = [c.request(x) for x in raw]
    got = c.result()
    assert sum(lats) == got.total_latency
    for f in ("total_latency", "hits", "delayed_hits", "misses", "admissions", "evictions",
              "shadow_cost", "n_slots", "n_requests"):
        assert getattr(got, f) == getattr(want, f), f
    assert np.array_equal(got.shadow_loss_per_item, want.shadow_loss_per_item)
    assert c.labels == list(dict.fromkeys(raw))
    fed = Cache(make(), K=10, Z=6, n_items=tr.n_items).process(iter(raw)).result()
    assert (fed.total_latency, fed.shadow_cost, fed.n_slots) == (want.total_latency, want.shadow_cost,
                                                                 want.n_slots)
    fast = simulate(raw, make(), K=10, Z=6)                  # the kernel where the policy has one
    assert fast.total_latency == want.total_latency


@pytest.mark.parametrize("make", [LRU, LRUMAD, lambda: UCBDH(refresh=1, b_max=4),
                                  lambda: LAFTPL(refresh=1, seed=3, C_B=6.0)])
def test_stream_equals_batch_with_batches_and_idle_slots(make):
    tr, _ = bursty(N=60, T=1500, b=4, Z=5, seed=1)
    slots = [tr.ids[tr.slot_ptr[s]: tr.slot_ptr[s + 1]].tolist() for s in range(tr.n_slots)]
    slots[10:14] = [[], [], [], []]                          # idle slots
    trb = from_slots(slots)
    ids, labels = remap_first_seen(trb.ids)                  # the stream's first-seen ids
    trb = Trace(ids, trb.slot_ptr, labels.size)
    want = simulate(trb, make(), K=8, Z=5, engine="python", checkpoints=[100, 1500])
    c = Cache(make(), K=8, Z=5, n_items=labels.size, b_max=4, checkpoints=[100, 1500])
    c.process((f"o{i}", t) for t, s in enumerate(slots, start=1) for i in s)
    got = c.result(T=trb.n_slots)
    assert (got.total_latency, got.hits, got.delayed_hits, got.misses, got.shadow_cost,
            got.n_slots) == (want.total_latency, want.hits, want.delayed_hits, want.misses,
                             want.shadow_cost, want.n_slots)
    assert got.checkpoints == want.checkpoints


def test_stream_validation():
    c = Cache(LRU(), K=2, Z=3, n_items=2)
    c.request("a", 1)
    c.request("b", 5)
    with pytest.raises(ValueError, match="non-decreasing"):
        c.request("a", 2)
    with pytest.raises(ValueError, match="n_items"):
        c.request("c")
    with pytest.raises(ValueError, match="n_items"):
        Cache(LRU(), K=2, Z=3)
    with pytest.raises(ValueError, match="horizon"):
        Cache(make_policy("LA-FTPL-restart"), K=2, Z=3, n_items=5)
    with pytest.raises(TypeError, match="offline"):
        Cache(Belady(), K=2, Z=3, n_items=5)


def _sized_trace(n=6000, N=120, seed=0):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, N + 1) ** 0.9
    ids = rng.choice(N, size=n, p=p / p.sum())
    obj_size = rng.integers(1, 40, N)                        # one size per object
    return Trace(ids.astype(np.int64), None, N, sizes=obj_size[ids])


def test_bytes_with_unit_sizes_equals_items():
    tr = _sized_trace()
    unit = Trace(tr.ids, None, tr.n_items, sizes=np.ones_like(tr.ids))
    for make in (LRU, FIFO, LRUMAD):
        a = simulate(unit, make(), K=15, Z=9, capacity="bytes")
        b = simulate(tr, make(), K=15, Z=9, engine="python")
        assert (a.total_latency, a.misses, a.evictions) == (b.total_latency, b.misses, b.evictions)


def test_bytes_capacity_invariants_and_stream():
    tr = _sized_trace(seed=1)
    r = simulate(tr, LRUMAD(), K=200, Z=9, capacity="bytes", check_invariants=True)
    c = Cache(LRUMAD(), K=200, Z=9, n_items=tr.n_items, capacity="bytes")
    for i, s in zip(tr.ids.tolist(), tr.sizes.tolist()):
        c.request(i, size=s)
    assert c.result().total_latency == r.total_latency
    with pytest.raises(NotImplementedError, match="byte"):
        simulate(tr, LFU(), K=200, Z=9, capacity="bytes")
    with pytest.raises(ValueError, match="sizes"):
        simulate(tr.ids, LRU(), K=200, Z=9, capacity="bytes")


def test_bytes_lru_matches_libcachesim_at_z1():
    """Golden values: at Z = 1 a fetch completes before the next slot, so our byte-capacity LRU
    is libCacheSim's LRU (evict from the LRU end until the object fits; an object larger than the
    cache is never inserted): the same misses request by request."""
    lcs = pytest.importorskip("libcachesim")
    tr = _sized_trace(seed=2)
    for cap in (60, 300):
        ours = simulate(tr, LRU(), K=cap, Z=1, capacity="bytes", record_latencies=True)
        cache = lcs.LRU(cache_size=cap)
        req = lcs.Request()
        theirs = []
        for i, s in zip(tr.ids.tolist(), tr.sizes.tolist()):
            req.obj_id, req.obj_size = i + 1, s
            theirs.append(0 if cache.get(req) else 1)
        assert ours.latencies.tolist() == theirs
