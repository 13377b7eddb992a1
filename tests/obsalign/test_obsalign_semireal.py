"""Healthcare-tabular: feature groups as modalities, sources partition modalities and patients."""

import numpy as np
import pytest

from neurips26.obsalign.federation import FedConfig, run_federation, source_accuracy, unimodal_accuracy
from neurips26.obsalign.obsbench import validate_split
from neurips26.obsalign.semireal import make_healthcare


@pytest.mark.parametrize("name, dims, C", [("breast_cancer", (10, 10, 10), 2), ("wine", (6, 7), 3)])
def test_layout(name, dims, C):
    b = make_healthcare(0, name)
    assert b.dims == dims and b.n_classes == C
    seen = np.concatenate([np.concatenate([s.train.y, s.val.y, s.test.y]) for s in b.sources])
    assert len(seen) + len(b.unimodal_test[0][1]) == {"breast_cancer": 569, "wine": 178}[name]
    for i, s in enumerate(b.sources):
        validate_split(s.train, b.dims, C, f"s{i}")
    assert make_healthcare(0, name).fingerprint() == b.fingerprint()


def test_loop_learns_breast_cancer():
    b = make_healthcare(0)
    res = run_federation(b, "obsalign", FedConfig(rounds=8, epochs=2, warmup=1, d=8), seed=0)
    assert np.mean(source_accuracy(b, res.models, res.guidance)) > 0.8
    assert np.nanmean(unimodal_accuracy(b, res.models, res.guidance)) > 0.8


def test_bad_dataset():
    with pytest.raises(ValueError, match="dataset"):
        make_healthcare(0, "mimic")


def test_digits_tri_offline_and_learnable():
    pytest.importorskip("mnist1d")
    from neurips26.obsalign.semireal import make_digits_tri, text_features

    b = make_digits_tri(0, unimodal_per_class=5)
    assert b.dims == (64, 40, 24) and b.n_classes == 10
    assert b.fingerprint() == make_digits_tri(0, unimodal_per_class=5).fingerprint()
    t = text_features(np.array([7]), np.random.default_rng(0))
    assert t.sum() == t[0].sum() and 3 <= t.sum() <= 5
    res = run_federation(b, "obsalign", FedConfig(rounds=3, epochs=1, warmup=1, d=16), seed=0)
    assert np.mean(source_accuracy(b, res.models, res.guidance)) > 0.5
