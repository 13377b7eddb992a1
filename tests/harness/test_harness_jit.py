"""harness.jit: numba's njit where installed, and without numba a decorator that changes nothing."""

import importlib
import sys

import neurips26.harness.jit as jit


def test_without_numba_njit_returns_the_function_in_both_spellings(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `from numba import njit` raise ImportError
    plain = importlib.reload(jit)
    try:
        assert plain.HAVE_NUMBA is False

        def f(x):
            return x + 1

        assert plain.njit(f) is f
        assert plain.njit(cache=True, nogil=True)(f) is f
    finally:
        monkeypatch.undo()
        importlib.reload(jit)


def test_with_numba_the_kernel_compiles_and_agrees():
    if not jit.HAVE_NUMBA:
        return  # covered by the test above

    @jit.njit(cache=False)
    def total(n):
        s = 0
        for i in range(n):
            s += i
        return s

    assert total(100) == 4950 and hasattr(total, "py_func")



def test_cache_true_without_a_writable_cache_dir_compiles_uncached(monkeypatch):
    """numba raises 'cannot cache function' at decoration when no locator can write; the import must not fail."""
    if not jit.HAVE_NUMBA:
        return
    import warnings

    import numba
    import numba.core.caching as caching
    import pytest

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])  # no directory numba could write to
    monkeypatch.setattr(caching.config, "CACHE_LOCATOR_CLASSES", "", raising=False)

    def raw(n):
        s = 0
        for i in range(n):
            s += i * i
        return s

    with pytest.raises(RuntimeError, match="cannot cache function"):
        numba.njit(cache=True)(raw)  # what a paper module hit at import before the fallback
    monkeypatch.setattr(jit, "_warned_no_cache", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = jit.njit(cache=True, nogil=True)(raw)
        second = jit.njit(cache=True)(raw)
    assert kernel(10) == second(10) == raw(10) == 285
    assert kernel.py_func is raw and type(kernel._cache).__name__ == "NullCache"  # compiled, not cached
    assert kernel.targetoptions.get("nogil") is True  # the other options are kept
    assert sum("no writable cache directory" in str(w.message) for w in caught) == 1  # warned once


def test_other_numba_errors_are_not_swallowed():
    if not jit.HAVE_NUMBA:
        return
    import pytest

    with pytest.raises(TypeError, match="keyword options only"):
        jit.njit("int64(int64)")
