"""Spec §1-§2 semantics: worked example, invariants, static identity, shadow loss, kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.delayed_hits import (FIFO, LAFTPL, LRU, UCBDH, Belady, InCacheLFU, LFU, LHDMAD, LRUMAD,
                                    Marker, RestartedLAFTPL, RestartedUCBDH, StaticPolicy, c_b_bound,
                                    from_slots, shadow_losses, simulate, static_cost)
from neurips26.delayed_hits.shadow import static_opt_cost
from neurips26.delayed_hits.workloads import bursty, irm_zipf

A, B = 0, 1


def test_worked_example_latencies_and_admission_slot():
    """Check 1: Z=3, K=1, LRU, R = [a, a, a, a, b, a] -> latencies 3,2,1,0,3,0 (total 9)."""
    admitted = []

    class Spy(LRU):
        def admit(self, i, t, ad, cache):
            admitted.append((i, t, ad))
            return super().admit(i, t, ad, cache)

    # one more idle-free slot pair so b's completion (end of slot 7) is inside the trace
    tr = from_slots([[A], [A], [A], [A], [B], [A], []])
    r = simulate(tr, Spy(), K=1, Z=3, record_latencies=True, check_invariants=True)
    assert r.latencies.tolist() == [3, 2, 1, 0, 3, 0]
    assert r.total_latency == 9
    assert (r.hits, r.delayed_hits, r.misses) == (2, 2, 2)
    # a completes at the end of slot 3 with AD 3+2+1; b at the end of slot 7 (evicting a)
    assert admitted == [(A, 3, 6), (B, 7, 3)]
    assert r.evictions == 1
    # shadow losses L(a) = 3+2+1+3+1 = 10, L(b) = 3
    assert shadow_losses(tr, 3).tolist() == [10, 3]
    assert r.shadow_loss_per_item.tolist() == [10, 3]


def test_z1_is_classical_caching():
    tr, _ = irm_zipf(50, 3000, 0.9, seed=3)
    r = simulate(tr, LRU(), K=5, Z=1, record_latencies=True, engine="python")
    assert set(np.unique(r.latencies).tolist()) <= {0, 1}
    assert r.delayed_hits == 0
    assert r.total_latency == r.misses


def test_same_slot_mates_pay_full_z_and_batch_semantics():
    # slot 1: a, a, a (miss + two delayed hits of latency Z); slot 2: a (Z-1); Z=4
    tr = from_slots([[A, A, A], [A], [], [], [A], [B]])
    r = simulate(tr, LRU(), K=1, Z=4, record_latencies=True, check_invariants=True)
    assert r.latencies.tolist() == [4, 4, 4, 3, 0, 4]
    assert shadow_losses(tr, 4).tolist() == [4 + 4 + 4 + 3 + 4, 4]


ALL_POLICIES = [LRU, FIFO, LFU, InCacheLFU, Belady, lambda: Marker(seed=1), LRUMAD,
                lambda: LHDMAD(reconfig=64), lambda: LHDMAD(mad=False, reconfig=64),
                lambda: LAFTPL(refresh=1, seed=2), lambda: LAFTPL(refresh=4, seed=2),
                lambda: LAFTPL(admission="request"), lambda: LAFTPL(fresh_gamma=True, refresh=3),
                lambda: UCBDH(refresh=1), lambda: UCBDH(index="generic", refresh=2),
                lambda: RestartedUCBDH(B=2), lambda: RestartedLAFTPL(B=2)]


@pytest.mark.parametrize("make", ALL_POLICIES)
def test_slot_invariants_every_policy(make):
    """Check 9: |C| <= K, C and F disjoint, latency in {0} U [1, Z], sum of latencies == total."""
    tr, _ = bursty(N=60, T=1500, b=3, rate0=0.5, Z=5, seed=4)
    r = simulate(tr, make(), K=7, Z=5, record_latencies=True, check_invariants=True)
    lat = r.latencies
    assert lat.min() >= 0 and lat.max() <= 5
    assert int(lat.sum()) == r.total_latency
    assert r.hits + r.delayed_hits + r.misses == r.n_requests == tr.n_requests
    assert r.hits == int((lat == 0).sum())


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_static_identity_property(data):
    """Check 3: a pre-loaded static set S has total latency == sum_{i not in S} L_T(i) exactly."""
    Z = data.draw(st.integers(1, 20))
    K = data.draw(st.integers(1, 8))
    N = data.draw(st.integers(K + 1, 14))
    slots = data.draw(st.lists(st.lists(st.integers(0, N - 1), max_size=3), min_size=1, max_size=80))
    S = data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=K, unique=True))
    tr = from_slots(slots, n_items=N)
    r = simulate(tr, StaticPolicy(S), K=K, Z=Z, check_invariants=True)
    L = shadow_losses(tr, Z)
    assert r.total_latency == static_cost(L, S)
    assert r.shadow_cost == r.total_latency
    # C_B realised <= the a-priori bound with b_max
    _, _, cb = shadow_losses(tr, Z, return_windows=True)
    assert cb <= c_b_bound(Z, max(tr.max_item_batch, 1))


def test_c_b_bound_is_tight_for_full_batches():
    Z, b = 5, 3
    tr = from_slots([[A] * b] * Z)
    _, _, cb = shadow_losses(tr, Z, return_windows=True)
    assert cb == c_b_bound(Z, b) == 40


def test_static_opt_is_top_k_and_lower_bounds_static_sets():
    tr, _ = irm_zipf(40, 2000, 1.0, seed=0)
    L = shadow_losses(tr, 4)
    best = static_opt_cost(L, 5)
    rng = np.random.default_rng(0)
    for _ in range(20):
        S = rng.choice(40, 5, replace=False)
        assert static_cost(L, S) >= best


@pytest.mark.parametrize("make", [LRU, FIFO, lambda: LAFTPL(refresh=1, seed=5),
                                  lambda: LAFTPL(refresh=16, seed=5, c_eta=0.3),
                                  lambda: RestartedLAFTPL(B=3, refresh=8),
                                  lambda: UCBDH(refresh=1), lambda: UCBDH(refresh=16),
                                  lambda: UCBDH(index="generic", refresh=4),
                                  lambda: RestartedUCBDH(B=3, refresh=4)])
@pytest.mark.parametrize("Z", [1, 7])
def test_kernels_equal_python_engine(make, Z):
    """The compiled kernels take exactly the decisions of the Python policies."""
    for tr in (irm_zipf(120, 6000, 0.8, seed=1)[0], bursty(N=80, T=2000, Z=Z, seed=2)[0]):
        a = simulate(tr, make(), K=12, Z=Z, engine="python", checkpoints=[500, 1500])
        b = simulate(tr, make(), K=12, Z=Z, engine="kernel", checkpoints=[500, 1500])
        for f in ("total_latency", "hits", "delayed_hits", "misses", "admissions", "evictions",
                  "shadow_cost"):
            assert getattr(a, f) == getattr(b, f), f
        assert a.checkpoints[1500][:2] == b.checkpoints[1500][:2]
        assert np.array_equal(a.shadow_loss_per_item, b.shadow_loss_per_item)


def test_the_policy_chooses_its_kernel():
    """The compiled path is a method of the policy: a subclass that changes the rule the LRU kernel
    hard-codes gets the Python engine, and options a kernel cannot express say None."""

    class MRU(LRU):                                   # evicts the most recently used instead
        def admit(self, i, t, ad, cache):
            od = self._od
            victim = od.popitem(last=True)[0] if len(od) >= self.K else None
            od[i] = None
            return True, victim

    tr, _ = irm_zipf(60, 3000, 0.8, seed=3)
    assert MRU().run_kernel(tr, 6, 4) is None
    lat = {name: simulate(tr, make(), K=6, Z=4, engine=e).total_latency
           for name, make, e in (("LRU py", LRU, "python"), ("MRU", MRU, "auto"), ("MRU py", MRU, "python"),
                                 ("LRU", LRU, "auto"))}
    assert LRU().run_kernel(tr, 6, 4).total_latency == lat["LRU py"] == lat["LRU"]
    assert lat["MRU"] == lat["MRU py"] != lat["LRU"]
    with pytest.raises(ValueError, match="engine='kernel'"):
        simulate(tr, MRU(), K=6, Z=4, engine="kernel")
    assert LAFTPL(admission="request").run_kernel(tr, 6, 4) is None
    assert LAFTPL(fresh_gamma=True, refresh=4).run_kernel(tr, 6, 4) is None
    assert LFU().run_kernel(tr, 6, 4) is None       # the base Policy: no kernel


def test_warmup_excludes_slots():
    tr, _ = irm_zipf(50, 4000, 0.8, seed=1)
    full = simulate(tr, LRU(), K=5, Z=3, record_latencies=True)
    warm = simulate(tr, LRU(), K=5, Z=3, warmup=1000)
    assert warm.n_requests == 3000
    assert warm.total_latency == int(full.latencies[1000:].sum())


def test_determinism_same_seed_bit_identical():
    """Check 6 (second half): a fixed seed gives bit-identical runs."""
    tr, _ = irm_zipf(200, 5000, 0.8, seed=0)
    for make in (lambda: LAFTPL(seed=3, refresh=1), lambda: Marker(seed=3), lambda: UCBDH(refresh=4)):
        a = simulate(tr, make(), K=10, Z=5, record_latencies=True)
        b = simulate(tr, make(), K=10, Z=5, record_latencies=True)
        assert np.array_equal(a.latencies, b.latencies)
    a = simulate(tr, LAFTPL(seed=1), K=10, Z=5)
    b = simulate(tr, LAFTPL(seed=2), K=10, Z=5)
    assert a.total_latency != b.total_latency or a.admissions != b.admissions


def test_topk_mask_kernel_matches_top_k_with_ties():
    from neurips26.delayed_hits.learner_kernels import _topk_mask
    from neurips26.delayed_hits.shadow import top_k

    rng = np.random.default_rng(0)
    for N, K in ((5, 4), (50, 7), (400, 50)):
        for _ in range(50):
            U = rng.integers(0, 4, N).astype(float)          # many ties: smaller ids win
            out = np.zeros(N, dtype=np.bool_)
            _topk_mask(U, K, out)
            assert np.array_equal(np.nonzero(out)[0], top_k(U, K))


def test_max_item_batch_counts_one_item_per_slot():
    tr = from_slots([[0, 1, 1], [2, 2, 2, 0], [], [1]])
    assert tr.max_batch == 4 and tr.max_item_batch == 3


def test_many_restarts_fall_back_to_python_engine(monkeypatch):
    from neurips26.delayed_hits import la_ftpl

    tr, _ = irm_zipf(100, 3000, 0.8, seed=0)
    ref = simulate(tr, LAFTPL(restart_every=10, refresh=4), K=5, Z=3, engine="python")
    monkeypatch.setattr(la_ftpl, "MAX_GAMMA_VALUES", 1000)
    got = simulate(tr, LAFTPL(restart_every=10, refresh=4), K=5, Z=3)
    assert got.total_latency == ref.total_latency
