"""numba's ``njit`` where numba is installed, else a no-op decorator (the kernel then runs as Python).

One rule for every paper with compiled kernels (delayed_hits, nas, obsalign):
``from neurips26.harness.jit import HAVE_NUMBA, njit``; callers that need the speed check ``HAVE_NUMBA`` and
say so; the answers are the same either way.

``cache=True`` asks numba to keep the compiled machine code on disk. numba raises at decoration time (that is,
at import of the paper's module) when it finds nowhere to write that cache (a read-only install with no writable
home or ``NUMBA_CACHE_DIR``); here the kernel is then compiled without the disk cache instead, with one warning:
the answers are the same, only the first call of each process pays the compile.
"""

from __future__ import annotations

import warnings

try:
    from numba import njit as _numba_njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only without numba
    HAVE_NUMBA = False
    _numba_njit = None

_warned_no_cache = False


def _compile_without_cache_on_no_locator(kwargs: dict, func):
    """``numba.njit(**kwargs)(func)``; when ``cache=True`` finds no cache locator, the same without the cache."""
    global _warned_no_cache
    try:
        return _numba_njit(**kwargs)(func)
    except RuntimeError as err:
        if not kwargs.get("cache") or "cannot cache function" not in str(err):
            raise
        if not _warned_no_cache:
            _warned_no_cache = True
            warnings.warn(
                f"numba found no writable cache directory ({err}); compiling without the disk cache "
                "(set NUMBA_CACHE_DIR to a writable directory to keep compiled kernels between processes)",
                RuntimeWarning,
                stacklevel=3,
            )
        return _numba_njit(**{**kwargs, "cache": False})(func)


def njit(*args, **kwargs):
    """``@njit`` and ``@njit(cache=True, ...)``: numba's, or the function unchanged where numba is missing."""
    if args and callable(args[0]):
        func = args[0]
        return func if not HAVE_NUMBA else _compile_without_cache_on_no_locator(kwargs, func)
    if args:
        raise TypeError("njit takes keyword options only (njit(cache=True, ...)); numba signatures are not used here")
    if not HAVE_NUMBA:
        return lambda f: f
    return lambda f: _compile_without_cache_on_no_locator(kwargs, f)


__all__ = ["HAVE_NUMBA", "njit"]
