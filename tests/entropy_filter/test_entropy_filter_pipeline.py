"""Pipeline pieces: per-domain thresholds, the document filter (datatrove-style), batch scoring."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from neurips26.entropy_filter import (HKDocumentFilter, datatrove_filter, domain_thresholds, hk, hk_batch,
                                      select)

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def _doc(i, n=150):
    rng = np.random.default_rng(i)
    return " ".join(WORDS[k] + str(rng.integers(0, 2 + i % 7)) for k in rng.integers(0, len(WORDS), n))


def test_thresholds_reproduce_topk_selection():
    texts = [_doc(i) for i in range(40)]
    domains = [i % 3 for i in range(40)]
    scores = [hk(t) for t in texts]
    thr = domain_thresholds(scores, domains, 0.5)
    f = HKDocumentFilter(thr, domain_key="dom")
    kept = [i for i, t in enumerate(texts) if f.filter({"text": t, "dom": domains[i]}) is True]
    assert kept == select(texts, scores, domains, 0.5)  # no ties among these scores


def test_filter_datatrove_style_document_and_reasons():
    f = HKDocumentFilter(2.0)
    doc = SimpleNamespace(text=_doc(1), metadata={})
    assert f.filter(doc) is True and doc.metadata["hk"] == pytest.approx(hk(_doc(1)))
    assert f.filter({"text": "short text"}) == (False, "hk_too_short")
    assert HKDocumentFilter(2.0, keep_unscored=True).filter({"text": "short"}) is True
    assert f.filter({"text": "the cat sat " * 100}) == (False, "hk_below_threshold")
    assert f("the cat sat " * 100) is False and f(_doc(1)) is True


def test_thresholds_edge_cases_and_bad_input():
    thr = domain_thresholds([1.0, None, 3.0], ["a", "a", "b"], 0.4)  # k_a = 1 (0.8), k_b = 1 (at least one)
    assert thr == {"a": 1.0, "b": 3.0}
    assert domain_thresholds([1.0, None, 3.0], ["a", "a", "b"], 0.4, min_keep=0) == {"a": 1.0, "b": math.inf}
    assert domain_thresholds([None, None], ["a", "a"], 1.0) == {"a": math.inf}  # nothing scored: keep none
    with pytest.raises(ValueError, match="NaN"):
        domain_thresholds([1.0, float("nan")], None, 0.5)
    with pytest.raises(ValueError, match="keep_frac"):
        domain_thresholds([1.0], None, 0.0)
    with pytest.raises(ValueError, match="domains"):
        domain_thresholds([1.0, 2.0], ["a"], 0.5)
    with pytest.raises(ValueError, match="domain_key"):
        HKDocumentFilter({"a": 1.0})
    with pytest.raises(TypeError, match="thresholds"):
        HKDocumentFilter("high")
    with pytest.raises(ValueError, match="n_trunc"):
        HKDocumentFilter(1.0, n_trunc=1)


def test_hk_batch_dict_and_pandas():
    batch = {"text": [_doc(1), "tiny"], "id": [1, 2]}
    out = hk_batch(batch)
    assert out["id"] == [1, 2] and out["hk"][0] == pytest.approx(hk(_doc(1))) and out["hk"][1] is None
    pd = pytest.importorskip("pandas")
    df = hk_batch(pd.DataFrame(batch), score_column="s")
    assert list(df.columns) == ["text", "id", "s"]


def test_datatrove_step():
    try:
        import datatrove  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install datatrove"):
            datatrove_filter(2.0)
        pytest.skip("datatrove not installed: checked the install hint only")
    from datatrove.data import Document

    step = datatrove_filter(2.0)
    kept = list(step.run(iter([Document(text=_doc(1), id="a"), Document(text="the cat sat " * 100, id="b")])))
    assert [d.id for d in kept] == ["a"]


def test_one_null_policy_select_thresholds_filter_agree():
    """issue 30: select() filled a quota with unscorable documents while domain_thresholds +
    HKDocumentFilter dropped them; both now keep the same documents."""
    texts = [_doc(i) for i in range(12)] + ["too short"] * 8
    domains = [i % 2 for i in range(20)]
    scores = [hk(t) for t in texts]
    thr = domain_thresholds(scores, domains, 0.8)
    f = HKDocumentFilter(thr, domain_key="d")
    kept = [i for i, t in enumerate(texts) if f.filter({"text": t, "d": domains[i]}) is True]
    assert kept == select(texts, scores, domains, 0.8) and all(scores[i] is not None for i in kept)
    assert f.counts["unscored"] == 8


def test_filter_fields_fallback_floor_and_bad_records():
    """issue 30: HKDocumentFilter read only "text", and an unseen domain raised KeyError mid-run."""
    good = _doc(3)
    s = hk(good)
    f = HKDocumentFilter({"en": s - 1}, domain_key="meta.lang", text_key="body.content")
    assert f.filter({"body": {"content": good}, "meta": {"lang": "en"}}) is True
    assert f.filter({"body": {"content": good}, "meta": {"lang": "xx"}}) == (False, "hk_unknown_domain")
    assert f.filter({"body": {"content": None}, "meta": {"lang": "en"}}) == (False, "hk_bad_record")
    assert f.filter({"other": 1}) == (False, "hk_bad_record")
    assert f.counts["unknown_domain"] == 1 and f.counts["bad_record"] == 2
    keep = HKDocumentFilter({"en": s - 1}, domain_key="lang", fallback="keep")
    assert keep.filter({"text": good, "lang": "fr"}) is True
    num = HKDocumentFilter({"en": s - 1}, domain_key="lang", fallback=s + 1)
    assert num.filter({"text": good, "lang": "fr"}) == (False, "hk_below_threshold")
    with pytest.raises(ValueError, match="fallback"):
        HKDocumentFilter({"en": 1.0}, domain_key="lang", fallback="error").filter({"text": good, "lang": "fr"})
    with pytest.raises(ValueError, match="fallback"):
        HKDocumentFilter({"en": 1.0}, domain_key="lang", fallback="maybe")
    floor = HKDocumentFilter({"en": -1.0}, domain_key="lang", floor=s + 0.1)
    assert floor.filter({"text": good, "lang": "en"}) == (False, "hk_below_floor")
    doc = SimpleNamespace(text=good, metadata={"lang": "en"})
    assert HKDocumentFilter({"en": s - 1}, domain_key="lang").filter(doc) is True
