"""numba's ``njit`` where numba is installed, else a no-op decorator (the kernel then runs as Python).

One rule for every paper with compiled kernels (delayed_hits, nas):
``from neurips26.harness.jit import HAVE_NUMBA, njit``; callers that need the speed check ``HAVE_NUMBA`` and
say so; the answers are the same either way.
"""

from __future__ import annotations

try:
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only without numba
    HAVE_NUMBA = False

    def njit(*args, **kwargs):
        """``@njit`` and ``@njit(cache=True, ...)`` both return the function unchanged."""
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


__all__ = ["HAVE_NUMBA", "njit"]
