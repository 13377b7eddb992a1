"""Acceptance check 1: generator determinism, blindness (logistic probes), mismatch rate; bad input."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from neurips26.obsalign.obsbench import (FULL_ETAS, FULL_LABEL_FRACTIONS, SourceSpec, Split, full_blind,
                                         full_sources, make_obsbench, quick_blind, validate_split)


def test_deterministic_per_seed():
    a, b, c = make_obsbench(3), make_obsbench(3), make_obsbench(4)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_layout_and_availability():
    b = make_obsbench(0)
    s1 = b.sources[1].train
    assert set(np.unique(s1.y)) <= set(range(6))
    assert np.all(~b.sources[4].train.mask[:, 1:])               # s4 is image-only
    for s in b.sources:
        assert s.train.mask.any(axis=1).all()
        for m in range(3):
            assert np.all(s.train.x[m][~s.train.mask[:, m]] == 0)
    assert abs(np.mean(b.sources[2].train.y_obs >= 0) - 0.1) < 0.06
    assert b.alignable.shape == (3, 3, 12) and np.array_equal(b.alignable, b.alignable.transpose(1, 0, 2))
    for m, blind in enumerate(quick_blind()):
        for c in blind:
            assert not b.alignable[m, :, c].any()


@pytest.mark.parametrize("delta", [0.0])
def test_blind_relations_are_blind(delta):
    # one modality per probe, >= 500 samples per class, one 70/30 split
    specs = [SourceSpec((m,), None, 500 * 12, missing=0.0, delta=delta) for m in range(3)]
    b = make_obsbench(1, specs)
    rng = np.random.default_rng(0)
    for m, blind in enumerate(quick_blind()):
        tr = b.sources[m].train
        for c in range(12):
            pc = (c + 3) % 12
            sel = (tr.y == c) | (tr.y == pc)
            X, y = tr.x[m][sel], (tr.y[sel] == c).astype(int)
            idx = rng.permutation(len(y))
            cut = int(0.7 * len(y))
            clf = LogisticRegression(max_iter=300).fit(X[idx[:cut]], y[idx[:cut]])
            acc = clf.score(X[idx[cut:]], y[idx[cut:]])
            if c in blind:
                assert acc <= 0.60, (m, c, acc)
            elif pc not in blind:
                assert acc >= 0.90, (m, c, acc)


def test_mismatch_rate():
    b = make_obsbench(2, [SourceSpec((0, 1), tuple(range(6)), 6000, eta=0.6)])
    tr = b.sources[0].train
    assert abs(tr.mismatch.mean() - 0.6) < 0.03


def test_noisy_relation_of_quick_layout_is_checked():
    b = make_obsbench(0)
    # img-txt on classes 0-5 mixes s0's clean and s1's noisy pairs; rate near 0.36 -> non-alignable
    assert not b.alignable[0, 1, [0, 2, 3, 5]].any()
    assert b.alignable[0, 1, [6, 9]].all()


@pytest.mark.parametrize("spec, msg", [
    (SourceSpec(()), "modalities is empty"),
    (SourceSpec((0, 3)), "modalities must be distinct"),
    (SourceSpec((0,), (12,)), "classes"),
    (SourceSpec((0,), n=0), "n must be"),
    (SourceSpec((0,), label_fraction=1.5), "label_fraction"),
])
def test_bad_source_specs(spec, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        make_obsbench(0, [spec])


def _split():
    b = make_obsbench(0, [SourceSpec((0, 1), None, 30)])
    return b, b.sources[0].train


def test_bad_split_inputs():
    b, sp = _split()
    validate_split(sp, b.dims, 12)
    bad = Split([sp.x[0][:, :5], sp.x[1], sp.x[2]], sp.mask, sp.y, sp.y_obs, sp.mismatch)
    with pytest.raises(ValueError, match=r"x\[0\] must have shape"):
        validate_split(bad, b.dims, 12)
    x0 = sp.x[0].copy()
    x0[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        validate_split(Split([x0, sp.x[1], sp.x[2]], sp.mask, sp.y, sp.y_obs, sp.mismatch), b.dims, 12)
    y = sp.y_obs.copy()
    y[0] = 12
    with pytest.raises(ValueError, match="y_obs"):
        validate_split(Split(sp.x, sp.mask, sp.y, y, sp.mismatch), b.dims, 12)
    y[0] = -1
    validate_split(Split(sp.x, sp.mask, sp.y, y, sp.mismatch), b.dims, 12)
    mask = sp.mask.copy()
    mask[0] = False
    with pytest.raises(ValueError, match="observe no modality"):
        validate_split(Split(sp.x, mask, sp.y, sp.y_obs, sp.mismatch), b.dims, 12)


# ---- full-scale layout -----------------------------------------------------------------------------


def test_full_layout_sources_cover_modalities_pairs_and_follow_the_grid():
    for seed in range(4):
        specs = full_sources(seed, eta=0.6, label_fraction=0.05)
        assert len(specs) == 12 and all(s.n == 300 for s in specs)
        mods = [s.modalities for s in specs]
        assert all(sum(m in s for s in mods) >= 2 for m in range(3))
        assert all(any(a in s and b in s for s in mods) for a, b in ((0, 1), (0, 2), (1, 2)))
        for s in specs:
            assert len(s.classes) >= 2 and all(0 <= c < 24 for c in s.classes)
            assert len(s.class_weights) == len(s.classes) and all(w > 0 for w in s.class_weights)
            assert all(300 * w >= 1 for w in s.class_weights) or len(s.classes) == 2
            assert s.label_fraction == (0.05 if 2 in s.modalities else 1.0)
            assert s.eta in (0.0, 0.6) and (s.eta == 0.0 or len(s.modalities) > 1)
    assert full_sources(3) == full_sources(3) and full_sources(3) != full_sources(4)
    assert FULL_ETAS == (0.0, 0.3, 0.6) and FULL_LABEL_FRACTIONS == (0.05, 0.1, 0.3)
    with pytest.raises(ValueError, match="alpha"):
        full_sources(0, alpha=0.0)
    with pytest.raises(ValueError, match="eta"):
        full_sources(0, eta=1.5)


def test_dirichlet_coverage_is_heterogeneous_and_weights_drive_sampling():
    specs = full_sources(0, n_sources=40)
    sizes = [len(s.classes) for s in specs]
    assert min(sizes) < 24 and np.mean(sizes) < 20          # Dirichlet(0.5) leaves classes out
    # a heavily weighted class dominates the generated labels
    spec = SourceSpec((0, 1), (0, 1, 2), 3000, class_weights=(0.8, 0.1, 0.1))
    b = make_obsbench(0, [spec], unimodal_per_class=2)
    frac = np.bincount(b.sources[0].train.y, minlength=12)[:3] / 3000
    np.testing.assert_allclose(frac, [0.8, 0.1, 0.1], atol=0.03)
    with pytest.raises(ValueError, match="class_weights"):
        make_obsbench(0, [SourceSpec((0,), (0, 1), 10, class_weights=(1.0,))])
    with pytest.raises(ValueError, match="class_weights"):
        make_obsbench(0, [SourceSpec((0,), (0, 1), 10, class_weights=(0.0, 0.0))])


def test_full_blind_repeats_the_quick_pattern_and_the_bench_builds():
    fb = full_blind(24)
    assert fb[0] == {1, 7, 13, 19} and fb[1] == {4, 10, 16, 22} and fb[2] == {2, 8, 14, 20}
    specs = full_sources(1, n=40)
    b = make_obsbench(1, specs, n_classes=24, blind=fb, unimodal_per_class=2)
    assert len(b.sources) == 12 and b.alignable.shape == (3, 3, 24)
    assert not b.alignable[0, 1, 1] and not b.alignable[1, 2, 16]   # blind classes never alignable
