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
