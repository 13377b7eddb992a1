"""Acceptance checks 3-4: sketch invariants, omega properties (hypothesis), reliability, transfer weights."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.obsalign.observability import (ObservabilityTracker, OmegaParams, calibrate, omega_raw,
                                              reliability, signals, transfer_weight, kappa_neg)
from neurips26.obsalign.sketch import build_sketch, pool

K, C, D = 3, 4, 5


def _data(rng, n, mods=(0, 1, 2), shift=0.0, shuffle=False):
    cls = rng.integers(C, size=n)
    centres = rng.normal(size=(C, D)) * 3
    z = []
    for m in range(K):
        zm = centres[cls] + rng.normal(size=(n, D)) * 0.3 + shift
        z.append(zm / np.linalg.norm(zm, axis=1, keepdims=True))
    if shuffle:
        z[1] = z[1][rng.permutation(n)]
    mask = np.zeros((n, K), bool)
    mask[:, list(mods)] = True
    mask[rng.random((n, K)) < 0.2] = False
    mask[~mask.any(axis=1), mods[0]] = True
    return z, mask, cls


def test_sketch_counts_and_pooled_prototypes_match_concatenated_data():
    rng = np.random.default_rng(0)
    parts = [_data(rng, n, shift=s) for n, s in ((40, 0.0), (70, 0.3), (25, -0.2))]
    sks = [build_sketch(z, mask, cls, (0, 1, 2), C) for z, mask, cls in parts]
    p = pool(sks)
    zc = [np.concatenate([pt[0][m] for pt in parts]) for m in range(K)]
    mc = np.concatenate([pt[1] for pt in parts])
    cc = np.concatenate([pt[2] for pt in parts])
    for m in range(K):
        for c in range(C):
            sel = mc[:, m] & (cc == c)
            assert p.n[m, c] == sel.sum()
            assert np.allclose(p.mu[m, c], zc[m][sel].mean(axis=0), atol=1e-6)
            disp = np.mean(np.sum((zc[m][sel] - p.mu[m, c]) ** 2, axis=1))
            assert np.isclose(p.v[m, c] + p.b[m, c], disp, atol=1e-9)
    both = mc[:, 0] & mc[:, 1] & (cc == 2)
    assert p.n_pair[0, 1, 2] == p.n_pair[1, 0, 2] == both.sum()


def test_sketch_size_independent_of_n():
    rng = np.random.default_rng(1)
    small = build_sketch(*_data(rng, 30), (0, 1, 2), C)
    big = build_sketch(*_data(rng, 3000), (0, 1, 2), C)
    assert small.n_floats() == big.n_floats() == K * C * (D + 2) + K * (K - 1) * C
    assert small.shape == big.shape
    two = build_sketch(*_data(rng, 30, mods=(0, 2)), (0, 2), C)
    assert two.n_floats() == 2 * C * (D + 2) + 2 * C


def test_sketch_noise_and_mismatched_pool():
    rng = np.random.default_rng(2)
    z, mask, cls = _data(rng, 50)
    a = build_sketch(z, mask, cls, (0, 1, 2), C)
    b = build_sketch(z, mask, cls, (0, 1, 2), C, noise_std=0.1, rng=np.random.default_rng(0))
    assert np.array_equal(a.counts, b.counts) and not np.allclose(a.proto, b.proto)
    other = build_sketch([x[:, :3] for x in z], mask, cls, (0, 1, 2), C)
    with pytest.raises(ValueError, match="mismatched d or C"):
        pool([a, other])
    with pytest.raises(ValueError, match="at least one"):
        pool([])


def _pooled(seed=0, shuffle=False, mods=(0, 1, 2), n=200):
    rng = np.random.default_rng(seed)
    return pool([build_sketch(*_data(rng, n, mods=mods, shuffle=shuffle), mods, C)])


def test_omega_range_symmetry_and_unobserved_side():
    p = _pooled(mods=(0, 1))            # modality 2 never observed
    w = calibrate(omega_raw(signals(p)))
    assert np.all((w >= 0) & (w <= 1))
    assert np.allclose(w, w.transpose(1, 0, 2))
    assert np.all(w[0, 2] == 0) and np.all(w[2, 1] == 0)
    assert np.all(w[[0, 1, 2], [0, 1, 2]] == 0)


def test_omega_drops_when_pairs_are_shuffled():
    good = omega_raw(signals(_pooled(shuffle=False)))
    bad = omega_raw(signals(_pooled(shuffle=True)))
    assert bad[0, 1].mean() < good[0, 1].mean()
    assert np.all(bad[0, 1] <= good[0, 1] + 1e-12)


def test_calibration_quantile_and_tracker_ema():
    raw = np.zeros((2, 2, 3))
    raw[0, 1] = raw[1, 0] = [0.02, 0.04, 0.0]
    w = calibrate(raw)
    q = np.quantile([0.02, 0.04], 0.9)
    assert np.allclose(w[0, 1], np.clip(np.array([0.02, 0.04, 0]) / q, 0, 1))
    assert np.all(calibrate(np.zeros((2, 2, 3))) == 0)
    p1, p2 = _pooled(0), _pooled(0, shuffle=True)
    tr = ObservabilityTracker(OmegaParams(), beta=0.5)
    w1 = tr.update(p1)
    w2_fresh = calibrate(omega_raw(signals(p2)))
    assert np.allclose(tr.update(p2), 0.5 * w1 + 0.5 * w2_fresh)


@settings(max_examples=60, deadline=None)
@given(k1=st.floats(-1, 1), k2=st.floats(-1, 1), n1=st.integers(0, 200), n2=st.integers(0, 200),
       seed=st.integers(0, 50))
def test_omega_raw_monotone_in_kappa_and_agreeing_pairs(k1, k2, n1, n2, seed):
    p = _pooled(seed, n=60)
    lo, hi = sorted((k1, k2))
    def w(kappa, npair):
        q = dataclasses.replace(p, kappa=p.kappa.copy(), n_pair=p.n_pair.copy())
        q.kappa[0, 1, 0] = q.kappa[1, 0, 0] = kappa
        q.n_pair[0, 1, 0] = q.n_pair[1, 0, 0] = npair
        return omega_raw(signals(q))[0, 1, 0], signals(q)
    assert w(lo, n1)[0] <= w(hi, n1)[0] + 1e-12
    a, b = sorted((n1, n2))
    sig = signals(dataclasses.replace(p, kappa=p.kappa.copy()))
    kneg = kappa_neg(p)[0, 1, 0]
    kpair = np.clip((hi - kneg) / max(1 - kneg, 1e-6), 0, 1)
    n0 = OmegaParams().n0
    kproto = (sig["consistency"][0, 1, 0] * (p.n_pair[0, 1, 0] + n0) - p.n_pair[0, 1, 0] * np.clip(
        (p.kappa[0, 1, 0] - kneg) / max(1 - kneg, 1e-6), 0, 1)) / n0
    if kpair >= kproto - 1e-12:
        assert w(hi, a)[0] <= w(hi, b)[0] + 1e-9


def test_signal_ablation_and_params_validation():
    p = _pooled()
    s = signals(p)
    base = omega_raw(s)
    no_u = omega_raw(s, OmegaParams(drop=("uncertainty",)))
    assert np.all(no_u >= base - 1e-12)
    with pytest.raises(ValueError, match="n0"):
        OmegaParams(n0=0)
    with pytest.raises(ValueError, match="tau_K"):
        OmegaParams(tau_K=-1)
    with pytest.raises(ValueError, match="drop"):
        OmegaParams(drop=("nope",))


def test_transfer_weight_regimes_and_thresholds():
    w = transfer_weight(np.array([0.05, 0.1, 0.3, 0.4999, 0.5, 0.9]))
    assert w[0] == 0 and np.isclose(w[1], 0.02) and np.isclose(w[2], 0.18)
    assert np.isclose(w[3], 0.4999 ** 2 / 0.5) and w[4] == 0.5 and w[5] == 0.9
    with pytest.raises(ValueError, match="tau_lo must be <= tau_hi"):
        transfer_weight(np.ones(2), tau_lo=0.6, tau_hi=0.5)


def test_reliability_flags_the_noisy_source():
    rng = np.random.default_rng(5)
    clean = build_sketch(*_data(rng, 300), (0, 1, 2), C)
    noisy = build_sketch(*_data(rng, 300, shuffle=True), (0, 1, 2), C)
    p = pool([clean, noisy])
    kn = kappa_neg(p)
    rc, rn = reliability(clean, p, kn), reliability(noisy, p, kn)
    assert np.all((rc >= 0) & (rc <= 1))
    assert rn[0, 1].mean() < rc[0, 1].mean()
