"""The timing helper: interleaving, medians, units, rows."""

import time

import pytest

from neurips26.harness.bench import BenchRow, compare, quantile, time_interleaved


def test_quantile_matches_numpy_rule():
    import numpy as np

    xs = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0]
    for q in (0, 0.1, 0.5, 0.9, 1):
        assert quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))


def test_interleaved_order_alternates_and_warmup_not_counted():
    calls = []
    a = lambda: calls.append("a")  # noqa: E731
    b = lambda: calls.append("b")  # noqa: E731
    ta, tb = time_interleaved(a, b, rounds=3, warmup=1)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert ta.n == tb.n == 3


def test_compare_ratio_direction_and_note():
    fast = lambda: time.sleep(0.001)  # noqa: E731
    slow = lambda: time.sleep(0.02)  # noqa: E731
    row = compare("sleep", fast, slow, anchor_name="slow", rounds=3, warmup=0)
    assert row.unit == "ms" and row.better == "lower"
    assert row.ours >= 1.0 and row.anchor >= 20.0 and row.ratio > 3
    assert "median of 3 interleaved rounds" in row.note and "p90" in row.note
    thr = compare("rate", fast, slow, anchor_name="slow", work=100, unit="items/s", rounds=3, warmup=0)
    assert thr.better == "higher" and thr.ratio > 3 and thr.ours > thr.anchor


def test_compare_missing_anchor_names_why():
    row = compare("x", lambda: None, None, anchor_name="lcsfinder", missing="pip install lcsfinder", rounds=2)
    assert row.anchor is None and row.ratio is None
    assert "lcsfinder not run: pip install lcsfinder" in row.note


def test_compare_rejects_unknown_time_unit():
    with pytest.raises(ValueError, match="unit"):
        compare("x", lambda: None, None, anchor_name="a", unit="req/s")


def test_benchrow_ratio():
    assert BenchRow("t", 2.0, 4.0, "a", "s").ratio == 2.0
    assert BenchRow("r", 10.0, 5.0, "a", "1/s", "higher").ratio == 2.0
    assert BenchRow("r", 10.0, None, "a", "1/s", "higher").ratio is None
    with pytest.raises(ValueError):
        BenchRow("t", 1.0, 1.0, "a", "s", "sideways")
