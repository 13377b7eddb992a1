"""Adapters for real EO data on local disk (nothing is downloaded; CI has none, so their tests skip).

- ``npz_task(path)``: a ``.npz`` with ``x`` (N, C, H, W), ``y`` (N,), optional ``lon`` (N,) and
  ``units`` (``"dn"`` or ``"unit"``); random or spatial splits by SHA-256 as for every task.
- ``torchgeo_task(name, root)``: a TorchGeo classification dataset already under ``root``
  (``download=False``: TorchGeo raises when the files are absent), materialised into a ``Task``.
- ``geobench_task(dataset_dir)``: a GEO-Bench classification dataset directory already on disk (e.g.
  ``$GEO_BENCH_DIR/classification_v1.0/m-eurosat``), read with the ``geobench`` package; GEO-Bench's own
  train / valid / test partition is kept (``partition``: ``default`` or a label-fraction partition such as
  ``0.10x_train``), each split SHA-256-hashed as for every task.
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


def geobench_task(
    dataset_dir: Path | str,
    partition: str = "default",
    band_names: tuple[str, ...] | None = None,
    units: str = "dn",
    limit: int | None = None,
    name: str | None = None,
) -> Task:
    """A GEO-Bench classification dataset read from ``dataset_dir`` (nothing downloaded).

    Samples are ``geobench`` ``Sample``s: ``pack_to_3d(band_names)`` gives (H, W, C) pixels, transposed
    here to (C, H, W); ``label`` is the class index. ``limit`` caps the samples read per split.
    """
    check_choice(units, "units", ("dn", "unit"))
    try:
        from geobench.dataset import GeobenchDataset
    except ImportError as e:  # optional: never a dependency of the package
        raise ImportError("geobench_task needs geobench (pip install geobench); it is optional") from e
    dataset_dir = Path(dataset_dir)
    if not dataset_dir.is_dir():
        raise FileNotFoundError(
            f"geobench_task: no such directory {str(dataset_dir)!r} (EO data is never downloaded here)"
        )
    xs, ys, splits = [], [], {}
    for ours, theirs in (("train", "train"), ("val", "valid"), ("test", "test")):
        ds = GeobenchDataset(str(dataset_dir), split=theirs, partition_name=partition)
        n = len(ds) if limit is None else min(limit, len(ds))
        start = len(ys)
        for i in range(n):
            sample = ds[i]
            names = list(band_names) if band_names is not None else list(sample.band_names)
            px, _ = sample.pack_to_3d(band_names=names)
            label = sample.label
            if not isinstance(label, (int, np.integer)):
                raise ValueError(
                    f"geobench_task: sample {i} of split {theirs!r} has a {type(label).__name__} label; "
                    "only single-label classification datasets are supported"
                )
            xs.append(np.moveaxis(np.asarray(px, dtype=np.float32), -1, 0))
            ys.append(int(label))
        splits[ours] = np.arange(start, len(ys))
    x, y = np.stack(xs), np.asarray(ys)
    name = name or dataset_dir.name
    return Task(
        name, x, y, splits, splits["train"], int(y.max()) + 1, f"EO (GEO-Bench {name}, {partition})", units=units
    )
