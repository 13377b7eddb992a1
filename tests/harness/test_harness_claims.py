import math

import pytest

from neurips26.harness.paper import (FAILS, HOLDS, INCONCLUSIVE, Claim, at_least, at_most, evaluate_all,
                                     verdict)


def test_verdict_maps_bool_and_none():
    assert verdict(True) == HOLDS
    assert verdict(False) == FAILS
    assert verdict(None) == INCONCLUSIVE


@pytest.mark.parametrize("value, expected", [(2.0, HOLDS), (1.0, HOLDS), (0.5, FAILS), (math.nan, INCONCLUSIVE)])
def test_at_least_threshold(value, expected):
    v, measured = at_least("x", 1.0)({"x": value})
    assert v == expected
    assert measured.startswith("x ")


@pytest.mark.parametrize("value, expected", [(0.5, HOLDS), (1.0, HOLDS), (2.0, FAILS), (math.nan, INCONCLUSIVE)])
def test_at_most_threshold(value, expected):
    assert at_most("x", 1.0)({"x": value})[0] == expected


def test_missing_metric_is_inconclusive_and_named():
    c = Claim("c", "s", "f", at_least("speedup", 2))
    r = c.evaluate({})
    assert r.verdict == INCONCLUSIVE
    assert "speedup" in r.measured


def test_invalid_verdict_is_rejected():
    c = Claim("c", "s", "f", lambda m: ("probably", "x"))
    with pytest.raises(ValueError, match="probably"):
        c.evaluate({})


def test_verdict_follows_the_measurement_not_the_claim():
    c = Claim("c", "s", "f", at_least("acc", 0.9))
    assert c.evaluate({"acc": 0.95}).verdict == HOLDS
    assert c.evaluate({"acc": 0.85}).verdict == FAILS


def test_duplicate_claim_ids_rejected():
    c = Claim("c", "s", "f", at_least("x", 0))
    with pytest.raises(ValueError, match="unique"):
        evaluate_all([c, c], {"x": 1})
