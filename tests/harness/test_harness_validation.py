"""The one validation vocabulary: types, bounds, choices, arrays; messages name the argument."""

import math

import numpy as np
import pytest

from neurips26.harness.validation import check_array, check_choice, check_scalar


@pytest.mark.parametrize("x, kind, out", [(3, int, 3), (np.int32(3), int, 3), (2, float, 2.0),
                                          (np.float32(0.5), float, 0.5), (True, bool, True)])
def test_check_scalar_accepts_and_converts(x, kind, out):
    got = check_scalar(x, "x", kind)
    assert got == out and type(got) is type(out)


@pytest.mark.parametrize("x, kind", [(True, int), (np.bool_(True), int), (1.5, int), ("3", int),
                                     (None, float), (True, float)])
def test_check_scalar_rejects_type_naming_argument(x, kind):
    with pytest.raises(TypeError, match=r"^n_items must be"):
        check_scalar(x, "n_items", kind)


@pytest.mark.parametrize("x, lo, hi, inc, ok", [
    (0, 0, 1, "both", True), (1, 0, 1, "both", True), (0, 0, 1, "neither", False),
    (1, 0, 1, "left", False), (0, 0, 1, "right", False), (0.5, 0, 1, "neither", True),
    (-1, 0, None, "both", False), (5, None, 4, "both", False)])
def test_check_scalar_bounds(x, lo, hi, inc, ok):
    if ok:
        assert check_scalar(x, "p", float, lo, hi, inc) == x
    else:
        with pytest.raises(ValueError, match=r"^p must be"):
            check_scalar(x, "p", float, lo, hi, inc)


def test_check_scalar_nan_and_inf():
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            check_scalar(bad, "lr", float)
    assert math.isinf(check_scalar(math.inf, "lr", float, finite=False))
    with pytest.raises(ValueError, match="inclusive"):
        check_scalar(1, "x", int, 0, 2, inclusive="sometimes")


def test_check_choice():
    assert check_choice("a", "mode", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"^mode must be one of 'a', 'b'; got 'c'"):
        check_choice("c", "mode", ("a", "b"))
    with pytest.raises(ValueError, match="mode"):
        check_choice(["a"], "mode", {"a"})  # unhashable against a set


def test_check_array_dtype_ndim_shape_finite():
    a = check_array([[1, 2], [3, 4]], "X", ndim=2, dtype=float, shape=(None, 2))
    assert a.dtype == np.float64 and a.shape == (2, 2)
    assert check_array([1.0, 2.0], "ids", dtype=int).dtype == np.int64
    with pytest.raises(TypeError, match="^ids must hold integers"):
        check_array([1.5], "ids", dtype=int)
    with pytest.raises(ValueError, match=r"^X must be 2-dimensional, got shape \(3,\)"):
        check_array([1, 2, 3], "X", ndim=2)
    with pytest.raises(ValueError, match=r"^X must have shape \(\*, 3\)"):
        check_array(np.zeros((2, 2)), "X", shape=(None, 3))
    with pytest.raises(ValueError, match="^X must be finite, got 1 NaN"):
        check_array([1.0, np.nan], "X")
    assert np.isnan(check_array([np.nan], "X", finite=False)[0])
    with pytest.raises(ValueError, match="at least 2"):
        check_array([1.0], "X", min_size=2)
    with pytest.raises((TypeError, ValueError), match="^X must be"):
        check_array([[1, 2], [3]], "X")
    with pytest.raises(TypeError, match="numeric"):
        check_array(["a", "b"], "X")
    with pytest.raises(TypeError, match="None"):
        check_array(None, "X")


def test_check_array_copy_is_independent():
    src = np.zeros(3)
    out = check_array(src, "x", copy=True)
    out[0] = 1
    assert src[0] == 0
