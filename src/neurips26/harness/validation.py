"""The one validation vocabulary of the project: scalars, choices and arrays, checked at the API boundary.

Every check raises before any work starts, with a message that names the argument, says what was
expected and shows what was given::

    n = check_scalar(n, "n", int, min=1)                     # TypeError / ValueError naming "n"
    p = check_scalar(p, "p", float, min=0, max=1, inclusive="neither")
    kind = check_choice(kind, "kind", ("gaussian", "laplace"))
    X = check_array(X, "X", ndim=2, dtype=float)             # finite float64, 2-D

``bool`` is never accepted as an integer, integers are accepted where floats are, numpy scalars are
accepted as the Python type they hold, and floats must be finite unless ``finite=False``.
"""

from __future__ import annotations

import builtins
import math
import numbers
from typing import Any, Collection, Sequence

import numpy as np

_INCLUSIVE = ("both", "neither", "left", "right")


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return " or ".join(x.__name__ for x in t)
    return t.__name__


def _is_instance(x: Any, target: type) -> bool:
    if isinstance(x, (bool, np.bool_)) and target is not bool:
        return False
    if target is int:
        return isinstance(x, numbers.Integral)
    if target is float:
        return isinstance(x, numbers.Real)
    return isinstance(x, target)


def check_scalar(x: Any, name: str, type: type | tuple[type, ...], min: float | None = None,
                 max: float | None = None, inclusive: str = "both", finite: bool = True) -> Any:
    """``x`` as a scalar of ``type`` within ``[min, max]``; returns it (ints as ``int``, reals as ``float``).

    ``inclusive`` says which bounds are allowed: ``"both"`` (default), ``"neither"``, ``"left"``
    (``min <= x < max``) or ``"right"`` (``min < x <= max``). ``TypeError`` for a wrong type,
    ``ValueError`` for a value out of range or not finite.
    """
    if inclusive not in _INCLUSIVE:
        raise ValueError(f"inclusive must be one of {_INCLUSIVE}, got {inclusive!r}")
    targets = type if isinstance(type, tuple) else (type,)
    if not any(_is_instance(x, t) for t in targets):
        raise TypeError(f"{name} must be {_type_name(type)}, got {x!r} ({builtins.type(x).__name__})")
    if isinstance(x, numbers.Integral) and int in targets:
        x = int(x)
    elif isinstance(x, numbers.Real) and float in targets:
        x = float(x)
    if isinstance(x, float) and finite and not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    lo_ok = min is None or (x >= min if inclusive in ("both", "left") else x > min)
    hi_ok = max is None or (x <= max if inclusive in ("both", "right") else x < max)
    if not (lo_ok and hi_ok):
        raise ValueError(f"{name} must be {_range_text(min, max, inclusive)}, got {x!r}")
    return x



def _range_text(lo: float | None, hi: float | None, inclusive: str) -> str:
    left = inclusive in ("both", "left")
    right = inclusive in ("both", "right")
    if hi is None:
        return f"{'>=' if left else '>'} {lo}"
    if lo is None:
        return f"{'<=' if right else '<'} {hi}"
    return f"in {'[' if left else '('}{lo}, {hi}{']' if right else ')'}"


def check_choice(x: Any, name: str, choices: Collection[Any]) -> Any:
    """``x`` if it is one of ``choices``; ``ValueError`` listing them otherwise."""
    try:
        ok = x in choices
    except TypeError:  # unhashable x against a set
        ok = False
    if not ok:
        shown = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {shown}; got {x!r}")
    return x


_DTYPES = {float: np.float64, int: np.int64, bool: np.bool_}


def check_array(x: Any, name: str, ndim: int | Sequence[int] | None = None, dtype: Any = None,
                finite: bool = True, shape: Sequence[int | None] | None = None,
                min_size: int = 0, copy: bool = False) -> np.ndarray:
    """``x`` as a numpy array, checked; returns it.

    ndim:     the number of dimensions, or a collection of allowed ones.
    dtype:    ``float`` (float64), ``int`` (int64; floats with integral values are refused unless
              exactly integral), ``bool``, a numpy dtype, or None (kept as given, must be numeric).
    finite:   refuse NaN and inf (numeric arrays only).
    shape:    expected shape with None as a wildcard, e.g. ``(None, 3)``.
    min_size: the least number of elements.
    """
    if x is None:
        raise TypeError(f"{name} must be an array, got None")
    try:
        arr = np.array(x, copy=True) if copy else np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged nested lists
        raise ValueError(f"{name} must be a rectangular array: {e}") from None
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got an array of Python objects "
                        f"(ragged or mixed input?)")
    if dtype is not None:
        target = np.dtype(_DTYPES.get(dtype, dtype))
        if target.kind in "iu" and arr.dtype.kind == "f":
            if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
                raise TypeError(f"{name} must hold integers, got non-integral floats")
        elif target.kind in "iuf" and arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(target, copy=False)
    elif arr.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(str(d) for d in allowed)
            raise ValueError(f"{name} must be {want}-dimensional, got shape {arr.shape}")
    if shape is not None:
        if len(shape) != arr.ndim or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if arr.size < min_size:
        raise ValueError(f"{name} must have at least {min_size} elements, got {arr.size}")
    if finite and arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must be finite, got {bad} NaN/inf value(s)")
    return arr
