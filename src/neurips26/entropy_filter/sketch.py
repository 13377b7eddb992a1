"""Scale-out thresholds: streaming, mergeable per-domain quantile sketches (KLL, Apache DataSketches).

Per-domain top-k over a corpus that lives in many files on many machines takes two passes:

1. **threshold pass** — every worker scores its shards and feeds each score into the KLL sketch of
   its domain (``DomainSketches.update``); the workers' sketches are serialised (``to_bytes``), merged
   (``merge``; KLL sketches merge exactly as if one sketch had seen all the data) and turned into one
   threshold per domain (``thresholds``). ``threshold_pass`` runs this over files with
   ``harness.parallel.map_tasks`` (process pool, or Ray on a cluster); ``HKSketchStep`` does the same
   as a datatrove pipeline step (one sketch file per task, ``merge_sketch_folder`` reads them).
2. **filter pass** — ``HKDocumentFilter(thresholds, domain_key=...)`` on every shard.

The null policy is the one of ``filters``: every document counts in n_d (the quota
k_d = quota(keep_frac, n_d, min_keep)), only scored documents enter the sketch and fill the quota.
The threshold is the k_d-th largest score: the smallest value v with rank(v) ≥ (n_s − k_d + ½)/n_s
among the n_s scored documents — exactly the ``domain_thresholds`` value while the sketch is exact
(n_s ≤ k items retained), within the sketch's normalised rank error ε (``rank_error``; ≈ 1.3% at
k = 200, 0.33% at k = 800, with 99% confidence) beyond.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from neurips26.entropy_filter.estimators import hk
from neurips26.entropy_filter.filters import _check_keep_frac, _check_min_keep, quota
from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_scalar

DEFAULT_K = 800


def _kll() -> Any:
    try:
        from datasketches import kll_doubles_sketch
    except ImportError as e:
        raise ImportError("quantile sketches need Apache DataSketches: pip install datasketches") from e
    return kll_doubles_sketch


def _key(domain: Any) -> str:
    """Domains are JSON values (str, int, None, ...); their JSON text keys the serialised form."""
    return json.dumps(domain, sort_keys=True)


class DomainSketches:
    """One KLL sketch of the scores per domain, plus each domain's document and unscored counts.

    k: the KLL accuracy parameter (normalised rank error ≈ 1.65/k·... ; DataSketches' own bound is
       reported by ``rank_error``). Mergeable (``merge``), serialisable (``to_bytes``/``from_bytes``).
    """

    def __init__(self, k: int = DEFAULT_K):
        self.k = check_scalar(k, "k", int, min=8, max=65535)
        self._cls = _kll()
        self.sketches: dict[str, Any] = {}
        self.n_docs: dict[str, int] = {}
        self.n_unscored: dict[str, int] = {}

    def update(self, domain: Any, score: float | None) -> None:
        """Count one document of ``domain``; its score (None: unscored, never fills a quota) enters
        the domain's sketch."""
        key = _key(domain)
        self.n_docs[key] = self.n_docs.get(key, 0) + 1
        if score is None:
            self.n_unscored[key] = self.n_unscored.get(key, 0) + 1
            return
        s = float(score)
        if math.isnan(s):
            raise ValueError(f"score of a document of domain {domain!r} is NaN; use None for no score")
        if key not in self.sketches:
            self.sketches[key] = self._cls(self.k)
        self.sketches[key].update(s)

    def update_many(
        self, scores: Sequence[float | None], domains: Sequence[Any] | None = None
    ) -> "DomainSketches":
        if domains is None:
            domains = [None] * len(scores)
        if len(domains) != len(scores):
            raise ValueError(f"domains must have one entry per score: got {len(domains)} for {len(scores)}")
        for s, d in zip(scores, domains):
            self.update(d, s)
        return self

    def merge(self, other: "DomainSketches") -> "DomainSketches":
        """Add ``other``'s documents (in place; returns self). Both must use the same k."""
        if not isinstance(other, DomainSketches):
            raise TypeError(f"other must be a DomainSketches, got {type(other).__name__}")
        if other.k != self.k:
            raise ValueError(f"cannot merge sketches with k = {other.k} into k = {self.k}")
        for key, n in other.n_docs.items():
            self.n_docs[key] = self.n_docs.get(key, 0) + n
        for key, n in other.n_unscored.items():
            self.n_unscored[key] = self.n_unscored.get(key, 0) + n
        for key, sk in other.sketches.items():
            if key in self.sketches:
                self.sketches[key].merge(sk)
            else:
                self.sketches[key] = self._cls.deserialize(sk.serialize())
        return self

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "k": self.k,
                "n_docs": self.n_docs,
                "n_unscored": self.n_unscored,
                "sketches": {
                    key: base64.b64encode(sk.serialize()).decode("ascii") for key, sk in self.sketches.items()
                },
            }
        ).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> "DomainSketches":
        try:
            obj = json.loads(data)
            out = cls(int(obj["k"]))
            out.n_docs = {k: int(v) for k, v in obj["n_docs"].items()}
            out.n_unscored = {k: int(v) for k, v in obj["n_unscored"].items()}
            out.sketches = {k: out._cls.deserialize(base64.b64decode(v)) for k, v in obj["sketches"].items()}
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"not a serialised DomainSketches ({e})") from None
        return out

    def domains(self) -> list[Any]:
        return [json.loads(k) for k in self.n_docs]

    def thresholds(self, keep_frac: float, min_keep: int = 1) -> dict[Any, float]:
        """Per domain, the k_d-th largest score (k_d = quota(keep_frac, n_d, min_keep), n_d counting
        unscored documents, capped at the scored ones); +inf for a domain with nothing to keep."""
        keep_frac = _check_keep_frac(keep_frac)
        min_keep = _check_min_keep(min_keep)
        out: dict[Any, float] = {}
        for key, n in self.n_docs.items():
            sk = self.sketches.get(key)
            n_s = 0 if sk is None else int(sk.n)
            kd = min(quota(keep_frac, n, min_keep), n_s)
            out[json.loads(key)] = (
                math.inf if kd == 0 else float(sk.get_quantile((n_s - kd + 0.5) / n_s, True))
            )
        return out

    def rank_error(self) -> float:
        """DataSketches' a-priori normalised rank error of one quantile at this k (99% confidence)."""
        return float(self._cls.get_normalized_rank_error(self.k, False))

    def summary(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "documents": sum(self.n_docs.values()),
            "unscored": sum(self.n_unscored.values()),
            "domains": len(self.n_docs),
            "estimation_mode": any(s.is_estimation_mode() for s in self.sketches.values()),
            "rank_error": self.rank_error(),
        }


# --------------------------------------------------------------------------------------------------
# the threshold pass over files (map_tasks: processes here, Ray on a cluster)
# --------------------------------------------------------------------------------------------------


def _records(path: str) -> Iterable[dict[str, Any]]:
    from neurips26.entropy_filter.cli import _open_in  # the CLI's decompression by extension

    fh = _open_in(path)
    try:
        for raw in fh:
            if raw.strip():
                try:
                    rec = json.loads(raw.decode("utf-8", errors="replace"))
                except json.JSONDecodeError:
                    continue  # a bad record never sinks the pass (the CLI's --on-error reports them)
                if isinstance(rec, dict):
                    yield rec
    finally:
        fh.close()


def sketch_records(
    records: Iterable[Any],
    text_key: str = "text",
    domain_key: str | None = None,
    k: int = DEFAULT_K,
    **hk_kwargs: Any,
) -> DomainSketches:
    """Score ``records`` (dicts or datatrove Documents) into a ``DomainSketches``; a record without a
    string text counts as unscored."""
    from neurips26.entropy_filter.pipeline import _get

    out = DomainSketches(k)
    for rec in records:
        try:
            text = _get(rec, text_key)
        except KeyError:
            text = None
        try:
            dom = _get(rec, domain_key) if domain_key else None
        except KeyError:
            dom = None
        out.update(dom, hk(text, **hk_kwargs) if isinstance(text, str) else None)
    return out


def _sketch_task(task: Mapping[str, Any]) -> bytes:
    return sketch_records(
        _records(task["path"]), task["text_key"], task["domain_key"], task["k"], **task["hk"]
    ).to_bytes()


def threshold_pass(
    paths: Sequence[str | Path],
    keep_frac: float,
    text_key: str = "text",
    domain_key: str | None = None,
    k: int = DEFAULT_K,
    min_keep: int = 1,
    backend: str = "auto",
    workers: int | None = None,
    **hk_kwargs: Any,
) -> tuple[dict[Any, float], DomainSketches]:
    """Pass 1 over JSONL shards (any compression the CLI reads): one task per file on ``map_tasks``
    (``backend="process"`` locally, ``"ray"`` on a cluster), merged sketches, per-domain thresholds.
    Returns (thresholds, merged sketches) — feed the thresholds to ``HKDocumentFilter`` for pass 2."""
    if not paths:
        raise ValueError("paths must name at least one file")
    hk("", **hk_kwargs)  # validate the options before starting workers
    tasks = [
        {"path": str(p), "text_key": text_key, "domain_key": domain_key, "k": k, "hk": hk_kwargs}
        for p in paths
    ]
    parts = map_tasks(_sketch_task, tasks, backend=backend, workers=workers, desc="sketching", progress=False)
    merged = DomainSketches(k)
    for blob in parts:
        merged.merge(DomainSketches.from_bytes(blob))
    return merged.thresholds(keep_frac, min_keep), merged


def merge_sketch_folder(folder: str | Path) -> DomainSketches:
    """Merge every ``*.kll.json`` file of ``folder`` (what ``HKSketchStep`` writes, one per task)."""
    files = sorted(Path(folder).glob("*.kll.json"))
    if not files:
        raise ValueError(f"no sketch files (*.kll.json) in {str(folder)!r}")
    out = DomainSketches.from_bytes(files[0].read_bytes())
    for f in files[1:]:
        out.merge(DomainSketches.from_bytes(f.read_bytes()))
    return out


def hk_sketch_step(
    output_folder: str | Path, domain_key: str | None = None, k: int = DEFAULT_K, **hk_kwargs: Any
) -> Any:
    """A datatrove ``PipelineStep`` for pass 1: scores every document, passes it on unchanged (with
    ``metadata["hk"]``), and at the end of its task writes ``{output_folder}/{rank:05d}.kll.json``.
    Merge the folder with ``merge_sketch_folder``. Needs ``pip install datatrove``."""
    try:
        from datatrove.pipeline.base import PipelineStep
    except ImportError as e:
        raise ImportError("hk_sketch_step needs datatrove: pip install datatrove") from e
    hk("", **hk_kwargs)
    folder = str(output_folder)

    class HKSketchStep(PipelineStep):  # type: ignore[misc, valid-type]
        name = "Ĥ_K sketch (pass 1)"
        type = "📊 - STATS"

        def run(self, data: Any, rank: int = 0, world_size: int = 1) -> Any:
            from neurips26.entropy_filter.pipeline import _get

            sk = DomainSketches(k)
            for doc in data:
                s = hk(doc.text, **hk_kwargs) if isinstance(doc.text, str) else None
                if s is not None:
                    doc.metadata["hk"] = s
                try:
                    dom = _get(doc, domain_key) if domain_key else None
                except KeyError:
                    dom = None
                sk.update(dom, s)
                yield doc
            Path(folder).mkdir(parents=True, exist_ok=True)
            tmp = Path(folder) / f".{rank:05d}.kll.json.tmp"
            tmp.write_bytes(sk.to_bytes())
            tmp.replace(Path(folder) / f"{rank:05d}.kll.json")

    return HKSketchStep()
