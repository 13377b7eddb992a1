"""Adapters for real EO data on local disk (nothing is downloaded; CI has none, so their tests skip).

- ``npz_task(path)``: a ``.npz`` with ``x`` (N, C, H, W), ``y`` (N,), optional ``lon`` (N,) and
  ``units`` (``"dn"`` or ``"unit"``); random or spatial splits by SHA-256 as for every task.
- ``torchgeo_task(name, root)``: a TorchGeo classification dataset already under ``root``
  (``download=False``: TorchGeo raises when the files are absent), materialised into a ``Task``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurips26.gfm_audit.harness.data import Task, random_split, spatial_split
from neurips26.harness.validation import check_choice


def npz_task(
    path: Path | str, name: str | None = None, split: str = "random", domain: str = "EO (local)"
) -> Task:
    check_choice(split, "split", ("random", "spatial"))
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"npz_task: no such file {str(path)!r} (EO data is never downloaded here)")
    d = np.load(path, allow_pickle=False)
    missing = {"x", "y"} - set(d.files)
    if missing:
        raise ValueError(f"npz_task: {str(path)!r} lacks arrays {sorted(missing)}")
    x, y = d["x"], d["y"]
    if split == "spatial":
        if "lon" not in d.files:
            raise ValueError("npz_task: split='spatial' needs a 'lon' array")
        sp = spatial_split(d["lon"])
    else:
        sp = random_split(len(x), salt=name or path.stem)
    units = str(d["units"]) if "units" in d.files else "unit"
    coords = np.c_[d["lon"], d["lat"]] if {"lon", "lat"} <= set(d.files) else None
    return Task(
        name or path.stem, x, y, sp, sp["train"], int(y.max()) + 1, domain, units=units, coords=coords
    )


def torchgeo_task(name: str, root: Path | str, limit: int | None = None, **kwargs) -> Task:
    """A TorchGeo dataset class by name (e.g. ``"EuroSAT"``) read from ``root`` without downloading."""
    try:
        import torchgeo.datasets as tgd
    except ImportError as e:  # optional: never a dependency of the package
        raise ImportError("torchgeo_task needs torchgeo (pip install torchgeo); it is optional") from e
    cls = getattr(tgd, name, None)
    if cls is None:
        raise ValueError(f"torchgeo has no dataset {name!r}")
    ds = cls(root=str(root), download=False, **kwargs)
    n = len(ds) if limit is None else min(limit, len(ds))
    xs, ys = [], []
    for i in range(n):
        s = ds[i]
        xs.append(np.asarray(s["image"], dtype=np.float32))
        ys.append(int(s["label"]))
    x, y = np.stack(xs), np.asarray(ys)
    sp = random_split(len(x), salt=name)
    return Task(name, x, y, sp, sp["train"], int(y.max()) + 1, f"EO (TorchGeo {name})", units="dn")
