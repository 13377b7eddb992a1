"""Issue 30, item 5: length-bias correction, absolute floor (and ceiling) with the per-domain quantile,
exact-duplicate awareness, and what each keeps of the planted spam on real documents."""

import numpy as np
import pytest

from neurips26.entropy_filter import hk, select
from neurips26.entropy_filter.quality import (
    SPAM_KINDS,
    LengthCalibration,
    duplicate_mask,
    planted_spam_corpus,
    quality_selection,
    spam_kept,
    spam_table,
)


def test_length_calibration_removes_a_planted_trend():
    rng = np.random.default_rng(0)
    n = rng.integers(50, 1500, 300)
    scores = 6.0 - 0.5 * np.log2(n) + rng.normal(0, 0.05, n.size)
    cal = LengthCalibration.fit(scores.tolist(), n.tolist())
    assert cal.beta == pytest.approx(-0.5, abs=0.03) and cal.r2 > 0.9 and cal.n == 300
    adj = np.array([cal.adjust(s, m) for s, m in zip(scores, n)])
    assert abs(np.corrcoef(np.log2(n), adj)[0, 1]) < 0.05  # no length trend left
    assert cal.adjust(None, 10) is None
    with pytest.raises(ValueError, match="3 scored"):
        LengthCalibration.fit([1.0, None], [10, 20])


def test_duplicates_floor_and_ceiling():
    assert duplicate_mask(["A  b", "a b", "c", "A B\n"]) == [False, True, False, True]
    texts = ["x"] * 6
    scores = [0.5, 3.5, 4.0, 7.0, 4.2, None]
    rep = quality_selection(texts, None, 1.0, scores=scores, floor=3.0, ceiling=6.0)
    assert rep.selection.kept == [1, 2, 4] and rep.n_outside == 2
    assert quality_selection(texts, None, 1.0, scores=scores).selection.kept == [0, 1, 2, 3, 4]
    assert quality_selection(texts, None, 1.0, scores=scores, dedup=True).selection.kept == [0]
    base = quality_selection(texts, None, 0.5, scores=scores).selection.kept
    assert base == select(texts, scores, None, 0.5)


def test_spam_kept_on_the_planted_spam_corpus():
    """issue 30: the per-domain quota kept spam (30 of 60 there); a list of distinct numbers scores above
    all prose. Each quality option must keep no more spam than the quantile alone, and all together
    keep less, while keeping the real documents' share."""
    texts, domains, kinds = planted_spam_corpus(0, n_per_kind=4, max_per_source=40)
    assert set(kinds) == {"real", *SPAM_KINDS} and "scraped" in domains
    num = [hk(t) for t, k in zip(texts, kinds) if k == "numbers"]
    real = [s for s in (hk(t) for t, k in zip(texts, kinds) if k == "real") if s is not None]
    assert min(num) > np.percentile(real, 95)  # the reproduction: numbers score high
    res = spam_kept(texts, domains, kinds)
    rows = res["settings"]
    base = rows["quantile"]["spam"]
    assert base > 0
    for name, row in rows.items():
        assert row["spam"] <= base, name
        assert row["real"] >= 0.8 * rows["quantile"]["real"], name
    assert rows["all"]["spam"] < base and rows["quantile + dedup"]["duplicate"] == 0
    assert rows["quantile + floor + ceiling"]["numbers"] == 0
    table = spam_table(res)
    assert table.count("\n") == len(rows) + 1 and "| all |" in table
