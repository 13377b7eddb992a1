"""Request traces: the slot-indexed container, validation, and the readers/writers.

A trace is a sequence of slots t = 1..T; slot t carries a (possibly empty) list R_t of item ids in
[0, N). It is stored in CSR form: one flat ``ids`` array (the only copy of the requests) and, when
some slot does not hold exactly one request, ``slot_ptr`` (T + 1 offsets, R_t = ids[ptr[t-1]:ptr[t]]).
With ``slot_ptr=None`` every slot holds exactly one request (Atre et al.'s convention, T = len(ids)).

Readers:
  * ``read_atre``          ``timestamp;object_id`` lines (Atre et al.'s simulator input, e.g. the
                            anonymised 5K trace); an empty line is an idle slot.
  * ``read_csv``           libCacheSim-style CSV (delimiter, header flag, 1-based time/obj-id columns
                            as in libCacheSim's ``ReaderInitParam``).
  * ``read_oracle_general``libCacheSim's oracleGeneral binary (24-byte ``<IQIq`` records).
Slot mapping (ASSUMPTION, argument ``slot_mapping``): ``"line"`` (default) = one line/record is one
slot, timestamps are only checked to be non-decreasing; ``"timestamp"`` = requests with the same
timestamp share a slot and idle timestamps become idle slots. Ids are remapped to 0..N-1 by first
appearance (the mapping is kept in ``Trace.labels``).
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.harness.jit import HAVE_NUMBA
from neurips26.delayed_hits.kernels import max_item_batch_kernel, remap_kernel

ORACLE_RECORD = struct.Struct("<IQIq")  # time, obj_id, size, next_access_vtime (-1: none)
ORACLE_DTYPE = np.dtype([("time", "<u4"), ("obj_id", "<u8"), ("size", "<u4"), ("next", "<i8")])
assert ORACLE_DTYPE.itemsize == ORACLE_RECORD.size == 24

BUNDLED_5K = "delayed_hits_5k.csv"
BUNDLED_5K_LICENSE = "delayed_hits_5k.LICENSE.txt"


@dataclass
class Trace:
    """Slot-indexed request trace (CSR). See the module docstring.

    ids:      int64 array of item ids in [0, n_items), all requests in slot order.
    slot_ptr: None (one request per slot) or int64 array of T + 1 non-decreasing offsets.
    n_items:  N; defaults to max(ids) + 1.
    name:     a label for reports.
    labels:   optional original object ids (labels[i] = original id of item i).
    sizes:    optional object sizes in bytes, one per request (``simulate(..., capacity="bytes")``;
              an object's size is the one of the request that starts its fetch).
    """

    ids: np.ndarray
    slot_ptr: np.ndarray | None = None
    n_items: int | None = None
    name: str = "trace"
    labels: np.ndarray | None = field(default=None, repr=False)
    sizes: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids)
        if ids.ndim != 1:
            raise ValueError(f"ids must be a 1-D array of item ids, got shape {ids.shape}")
        if ids.size and ids.dtype.kind == "f":
            if not np.all(np.isfinite(ids)):
                raise ValueError("ids must be finite integers, got NaN/inf")
            if not np.all(ids == np.floor(ids)):
                raise ValueError("ids must be integers, got non-integer values")
        elif ids.size and ids.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64, copy=False)
        if ids.size and ids.min() < 0:
            raise ValueError(f"ids must be >= 0, got {int(ids.min())}")
        if self.slot_ptr is None:
            if ids.size == 0:
                raise ValueError("trace is empty (ids has no requests and no slots): T must be >= 1")
        else:
            ptr = np.asarray(self.slot_ptr, dtype=np.int64)
            if ptr.ndim != 1 or ptr.size < 2:
                raise ValueError("slot_ptr must hold T + 1 >= 2 offsets (T = 0 slots given)")
            if ptr[0] != 0 or ptr[-1] != ids.size or np.any(np.diff(ptr) < 0):
                raise ValueError("slot_ptr must be non-decreasing from 0 to len(ids)")
            self.slot_ptr = ptr
        if self.n_items is None:
            if ids.size == 0:
                raise ValueError("trace has no requests; give n_items explicitly")
            self.n_items = int(ids.max()) + 1
        else:
            self.n_items = check_scalar(self.n_items, "n_items", int, min=1)
            if ids.size and ids.max() >= self.n_items:
                raise ValueError(f"ids must be < n_items={self.n_items}, got {int(ids.max())}")
        self.ids = ids
        if self.sizes is not None:
            sz = np.asarray(self.sizes)
            if sz.shape != ids.shape or (sz.size and sz.dtype.kind not in "iu"):
                raise ValueError(f"sizes must be one integer per request ({ids.size}), got "
                                 f"shape {sz.shape} dtype {sz.dtype}")
            if sz.size and sz.min() < 1:
                raise ValueError(f"sizes must be >= 1 byte, got {int(sz.min())}")
            self.sizes = sz.astype(np.int64, copy=False)

    @property
    def n_slots(self) -> int:
        """T."""
        return int(self.ids.size) if self.slot_ptr is None else int(self.slot_ptr.size - 1)

    @property
    def n_requests(self) -> int:
        return int(self.ids.size)

    @property
    def max_batch(self) -> int:
        """b_max: the largest number of requests in one slot."""
        if self.slot_ptr is None:
            return 1
        return int(np.diff(self.slot_ptr).max(initial=0))

    @property
    def max_item_batch(self) -> int:
        """b_max of one item: the largest number of requests of a single item in one slot (the
        bound on B_i used by C_B and UCB-DH's m_ucb). Streaming, O(N) state."""
        if self.slot_ptr is None or self.ids.size == 0:
            return 1 if self.ids.size else 0
        return int(max_item_batch_kernel(self.ids, self.slot_ptr, self.n_items))

    @property
    def one_per_slot(self) -> bool:
        return self.slot_ptr is None

    def slot_of_request(self) -> np.ndarray:
        """1-based slot of every request (int64 array, len(ids))."""
        if self.slot_ptr is None:
            return np.arange(1, self.ids.size + 1, dtype=np.int64)
        return np.repeat(np.arange(1, self.n_slots + 1, dtype=np.int64), np.diff(self.slot_ptr))

    def prefix(self, n_slots: int) -> "Trace":
        """The first ``n_slots`` slots (views, no copy)."""
        n_slots = check_scalar(n_slots, "n_slots", int, min=1, max=self.n_slots)
        n = n_slots if self.slot_ptr is None else int(self.slot_ptr[n_slots])
        ptr = None if self.slot_ptr is None else self.slot_ptr[: n_slots + 1]
        sizes = None if self.sizes is None else self.sizes[:n]
        return Trace(self.ids[:n], ptr, self.n_items, self.name, self.labels, sizes)

    def sha256(self) -> str:
        h = hashlib.sha256(self.ids.tobytes())
        if self.slot_ptr is not None:
            h.update(self.slot_ptr.tobytes())
        return h.hexdigest()


def as_trace(trace: "Trace | Sequence | np.ndarray", n_items: int | None = None) -> Trace:
    """A ``Trace`` as given, or a 1-D sequence of object ids (one request per slot, any integers
    or strings) remapped to 0..N-1 by first appearance (``Trace.labels`` keeps the originals; N is
    the number of distinct ids, so no phantom items)."""
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, (str, bytes, os.PathLike)):
        raise TypeError("trace must be a Trace or a sequence of item ids; read files with "
                        "read_atre/read_csv/read_oracle_general")
    try:
        arr = np.asarray(trace)
    except (TypeError, ValueError) as e:
        raise TypeError(f"trace must be a Trace or a sequence of integer item ids: {e}") from None
    if arr.dtype == object:
        raise TypeError("trace must be a sequence of integer item ids, got mixed/object values")
    if arr.ndim != 1:
        raise ValueError(f"ids must be a 1-D array of item ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("trace is empty (ids has no requests and no slots): T must be >= 1")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError("ids must be finite integers, got NaN/inf")
        if not np.all(arr == np.floor(arr)):
            raise ValueError("ids must be integers, got non-integer values")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "b":
        raise TypeError(f"ids must be integers or strings, got dtype {arr.dtype}")
    if arr.dtype.kind in "iu" and arr.min() < 0:
        raise ValueError(f"ids must be >= 0, got {int(arr.min())}")
    ids, labels = remap_first_seen(arr)
    if n_items is not None and n_items < labels.size:
        raise ValueError(f"n_items={n_items} < the {labels.size} distinct ids of the trace")
    return Trace(ids, None, n_items if n_items is not None else int(labels.size), labels=labels)


def from_slots(slots: Iterable[Sequence[int]], n_items: int | None = None, name: str = "trace") -> Trace:
    """Build a trace from a list of per-slot request lists (empty list = idle slot)."""
    lens, flat = [], []
    for s in slots:
        s = list(s)
        lens.append(len(s))
        flat.extend(s)
    if not lens:
        raise ValueError("slots is empty: T must be >= 1")
    ptr = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    return Trace(np.asarray(flat, dtype=np.int64), ptr, n_items, name)


def remap_first_seen(raw) -> tuple[np.ndarray, np.ndarray]:
    """Remap ids to 0..N-1 by first appearance in O(n), never allocating by the largest id;
    returns (ids, labels) with labels[k] = the original id of item k (ASSUMPTION 18).

    Integer ids go through ``kernels.remap_kernel`` (a hash table of ~2n slots, numba) or, without
    numba, a dict; any other hashable ids (strings) through a dict."""
    arr = raw if isinstance(raw, np.ndarray) else np.asarray(raw)
    if arr.ndim != 1:
        raise ValueError(f"ids must be a 1-D sequence of object ids, got shape {arr.shape}")
    if arr.dtype.kind in "iu" and (arr.dtype.kind == "i" or arr.size == 0
                                   or int(arr.max()) <= np.iinfo(np.int64).max):
        a64 = arr.astype(np.int64, copy=False)
        if HAVE_NUMBA:
            return remap_kernel(a64)
        vals = a64.tolist()
    else:
        vals = arr.tolist()
    index: dict = {}
    ids = np.fromiter((index.setdefault(x, len(index)) for x in vals), dtype=np.int64, count=len(vals))
    labels = np.asarray(list(index), dtype=arr.dtype if arr.dtype.kind in "iuU" else object)
    return ids, labels


def _build(times: list[int] | None, raw_ids: list, blank_after: list[int], slot_mapping: str,
           name: str, path: str) -> Trace:
    if not raw_ids:
        raise ValueError(f"{path}: trace is empty (no requests)")
    raw = np.asarray(raw_ids)
    ids, labels = remap_first_seen(raw)
    if slot_mapping == "line":
        if not blank_after:
            return Trace(ids, None, int(labels.size), name, labels)
        # idle slots: blank_after[k] = number of requests read before the k-th blank line
        counts = np.ones(len(raw_ids) + len(blank_after), dtype=np.int64)
        pos = np.asarray(blank_after, dtype=np.int64) + np.arange(len(blank_after))
        counts[pos] = 0
        ptr = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        return Trace(ids, ptr, int(labels.size), name, labels)
    if times is None:
        raise ValueError("slot_mapping='timestamp' needs a time column")
    ts = np.asarray(times, dtype=np.int64)
    rel = ts - ts[0]
    n_slots = int(rel[-1]) + 1
    counts = np.bincount(rel, minlength=n_slots)
    ptr = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return Trace(ids, ptr, int(labels.size), name, labels)


def _check_mapping(slot_mapping: str) -> None:
    check_choice(slot_mapping, "slot_mapping", ("line", "timestamp"))


def read_atre(path: str | os.PathLike, slot_mapping: str = "line", name: str | None = None) -> Trace:
    """Read Atre et al.'s ``timestamp;object_id`` format (no header; empty line = idle slot).

    Raises ``ValueError`` naming the line number for malformed lines and for decreasing timestamps.
    """
    return read_csv(path, delimiter=";", has_header=False, time_col=1, obj_id_col=2,
                    slot_mapping=slot_mapping, name=name, _blank_is_idle=True)


def read_csv(path: str | os.PathLike, delimiter: str = ",", has_header: bool = False,
             time_col: int | None = 1, obj_id_col: int = 2, slot_mapping: str = "line",
             name: str | None = None, _blank_is_idle: bool = False) -> Trace:
    """libCacheSim-style CSV reader (columns are 1-based like ``ReaderInitParam``).

    time_col=None: no time column (then timestamps are not checked). Object ids may be integers or
    strings (hashed labels are kept as given).
    """
    _check_mapping(slot_mapping)
    if len(check_scalar(delimiter, "delimiter", str)) != 1:
        raise ValueError(f"delimiter must be a single character, got {delimiter!r}")
    obj_id_col = check_scalar(obj_id_col, "obj_id_col", int, min=1)          # 1-based column
    if time_col is not None:
        time_col = check_scalar(time_col, "time_col", int, min=1)
    if slot_mapping == "timestamp" and time_col is None:
        raise ValueError("slot_mapping='timestamp' needs time_col")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trace file not found: {path}")
    times: list[int] = []
    raw: list = []
    blanks: list[int] = []
    need = max(obj_id_col, time_col or 0)
    last_t = None
    all_int = True
    with open(path, "r", encoding="utf-8", errors="strict") as f:
        for lineno, line in enumerate(f, start=1):
            if lineno == 1 and has_header:
                continue
            line = line.rstrip("\r\n")
            if not line.strip():
                if _blank_is_idle:
                    blanks.append(len(raw))
                continue
            parts = line.split(delimiter)
            if len(parts) < need:
                raise ValueError(f"{path}: line {lineno}: expected at least {need} "
                                 f"{delimiter!r}-separated fields, got {len(parts)}: {line[:80]!r}")
            oid = parts[obj_id_col - 1].strip()
            if not oid:
                raise ValueError(f"{path}: line {lineno}: empty object id")
            if all_int:
                try:
                    raw.append(int(oid))
                except ValueError:
                    all_int = False
                    raw = [str(x) for x in raw]
                    raw.append(oid)
            else:
                raw.append(oid)
            if time_col is not None:
                try:
                    tv = float(parts[time_col - 1])
                except ValueError:
                    raise ValueError(f"{path}: line {lineno}: timestamp {parts[time_col - 1]!r} "
                                     "is not a number") from None
                if not math.isfinite(tv) or tv != int(tv):
                    raise ValueError(f"{path}: line {lineno}: timestamp {tv!r} is not an integer")
                if last_t is not None and tv < last_t:
                    raise ValueError(f"{path}: line {lineno}: timestamps must be non-decreasing "
                                     f"({int(tv)} after {int(last_t)})")
                last_t = tv
                times.append(int(tv))
    return _build(times if time_col is not None else None, raw, blanks, slot_mapping,
                  name or path.name, str(path))


def read_oracle_general(path: str | os.PathLike, slot_mapping: str = "line",
                        name: str | None = None) -> Trace:
    """libCacheSim oracleGeneral binary: little-endian ``<IQIq`` records (time, id, size, next)."""
    _check_mapping(slot_mapping)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trace file not found: {path}")
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path}: trace is empty (0 bytes)")
    if size % ORACLE_DTYPE.itemsize:
        raise ValueError(f"{path}: file size {size} is not a multiple of the 24-byte oracleGeneral "
                         "record")
    rec = np.memmap(path, dtype=ORACLE_DTYPE, mode="r")
    t = np.asarray(rec["time"], dtype=np.int64)
    bad = np.nonzero(np.diff(t) < 0)[0]
    if bad.size:
        raise ValueError(f"{path}: record {int(bad[0]) + 2}: timestamps must be non-decreasing")
    ids, labels = remap_first_seen(np.asarray(rec["obj_id"]))
    sizes = np.asarray(rec["size"], dtype=np.int64)
    sizes = sizes if sizes.size and sizes.min() >= 1 else None     # size 0: not recorded
    if slot_mapping == "line":
        return Trace(ids, None, int(labels.size), name or path.name, labels, sizes)
    rel = t - t[0]
    counts = np.bincount(rel, minlength=int(rel[-1]) + 1)
    ptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return Trace(ids, ptr, int(labels.size), name or path.name, labels, sizes)


def next_access_positions(ids: np.ndarray) -> np.ndarray:
    """For every request position p, the position of the next request of the same id (-1: none)."""
    ids = np.asarray(ids, dtype=np.int64)
    n = ids.size
    order = np.lexsort((np.arange(n), ids))     # by id, then position
    nxt = np.full(n, -1, dtype=np.int64)
    same = ids[order[1:]] == ids[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def write_oracle_general(trace: "Trace | Sequence[int] | np.ndarray", path: str | os.PathLike) -> Path:
    """Write ``trace`` as oracleGeneral (time = slot, size = the trace's sizes or 1,
    next_access_vtime = next request index or -1) so that libCacheSim can read it."""
    tr = as_trace(trace)
    rec = np.empty(tr.n_requests, dtype=ORACLE_DTYPE)
    rec["time"] = tr.slot_of_request()
    rec["obj_id"] = tr.ids.astype(np.uint64) + 1     # libCacheSim treats id 0 like any other; +1 is harmless
    rec["size"] = 1 if tr.sizes is None else tr.sizes
    rec["next"] = next_access_positions(tr.ids)
    path = Path(path)
    rec.tofile(path)
    return path


def write_atre(trace: "Trace | Sequence[int] | np.ndarray", path: str | os.PathLike) -> Path:
    """Write ``timestamp;object_id`` lines (one per request; idle slots as empty lines)."""
    tr = as_trace(trace)
    path = Path(path)
    with open(path, "w") as f:
        if tr.slot_ptr is None:
            for k, i in enumerate(tr.ids.tolist()):
                f.write(f"{k};{i}\n")
        else:
            ptr = tr.slot_ptr.tolist()
            ids = tr.ids.tolist()
            for s in range(tr.n_slots):
                if ptr[s] == ptr[s + 1]:
                    f.write("\n")
                for p in range(ptr[s], ptr[s + 1]):
                    f.write(f"{s};{ids[p]}\n")
    return path


def bundled_trace_path() -> Path:
    """Path of the shipped copy of Atre et al.'s anonymised 5K-request trace (Clear BSD, CMU 2020;
    the licence file ``delayed_hits_5k.LICENSE.txt`` sits beside it)."""
    return Path(str(resources.files("neurips26.delayed_hits") / "data" / BUNDLED_5K))


def load_atre_5k() -> Trace:
    """W8: Atre et al. anonymised 5K-request trace (5,000 slots, 1,606 distinct ids)."""
    return read_atre(bundled_trace_path(), name="Atre et al. anonymised 5K-request trace")
