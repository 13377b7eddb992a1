"""The only two example sets the package ships (the data rule: no audit number is ever invented).

(a) ``PUBLISHED``: the 21 published values of the spec's Claim section, as extracted by Corley et al.
    2026 (values, titles and raw strings from the authors' ``critique.json`` / ``extracted_info.jsonl``),
    ``provenance="unknown"``, each with the note ``PUBLISHED_NOTE``. SeCo's fifth value (89.64,
    SelectiveMAE paper, inside the range) is left out to keep the 21-row contract. One citation-only
    ``PaperRecord`` per reporting paper (title + year, nothing else).
(b) ``synthetic_demo(seed)``: a seeded generator with planted ground truth; every record
    ``synthetic=True``; every report built from it carries ``SYNTHETIC_WATERMARK``.

``examples/`` holds both written out (``write_examples`` regenerates them; a test checks the shipped
files equal these tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurips26.gfm_audit.schema import PaperRecord, ResultRecord, write_records
from neurips26.harness.validation import check_scalar

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
PUBLISHED_NOTE = (
    "as extracted by Corley et al. 2026; verify against the PDF. evaluation_strategy is the "
    "authors' normalised category, not the paper's verbatim wording"
)
SYNTHETIC_WATERMARK = "SYNTHETIC DEMO"

PUBLISHED_PAPERS = (
    (
        "scalemae",
        "Scale-MAE: A Scale-Aware Masked Autoencoder for Multiscale Geospatial Representation Learning",
        2023,
    ),
    ("dofa", "Neural Plasticity-Inspired Multimodal Foundation Model for Earth Observation", 2024),
    ("ma3e", "Masked Angle-Aware Autoencoder for Remote Sensing Images", 2024),
    ("olmoearth", "OlmoEarth: Stable Latent Image Modeling for Multimodal Earth Observation", 2025),
    ("ctxmim", "CtxMIM: Context-Enhanced Masked Image Modeling for Remote Sensing Image Understanding", 2023),
    ("gersp", "Generic Knowledge Boosted Pre-training For Remote Sensing Images", 2024),
    ("selectivemae", "Harnessing Massive Satellite Imagery with Efficient Masked Image Modeling", 2024),
    (
        "earthgpt",
        "EarthGPT: A Universal Multi-modal Large Language Model for Multi-sensor Image "
        "Comprehension in Remote Sensing Domain",
        2024,
    ),
    ("galileo", "Galileo: Learning Global & Local Features of Many Remote Sensing Modalities", 2025),
    ("terrafm", "TerraFM: A Scalable Foundation Model for Unified Multisensor Earth Observation", 2025),
    ("panopticon", "Panopticon: Advancing Any-Sensor Foundation Models for Earth Observation", 2025),
    (
        "satdifuser",
        "Can Generative Geospatial Diffusion Models Excel as Discriminative Geospatial Foundation Models?",
        2025,
    ),
)

_EVAL_SPELLING = {"linear": "linear probe", "finetune": "fine-tune", "knn": "kNN"}

# (paper_id, model raw, model canonical, benchmark raw, benchmark canonical, metric, eval, value)
PUBLISHED_ROWS = (
    ("scalemae", "Scale-MAE", "scalemae", "RESISC-45", "nwpuresisc45", "accuracy", "linear", 89.6),
    ("dofa", "Scale-MAE ViT-Large", "scalemae", "RESISC-45", "nwpuresisc45", "accuracy", "linear", 89.6),
    ("ma3e", "ScaleMAE", "scalemae", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "linear", 33.03),
    ("dofa", "AnySat ViT-Base", "anysat", "m-cashew-plant", "mcashewplantation", "miou", "finetune", 27.2),
    ("olmoearth", "Anysat", "anysat", "m-cashewplant", "mcashewplantation", "miou", "finetune", 80.4),
    ("ctxmim", "TOV", "tov", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "finetune", 46.74),
    ("gersp", "TOV", "tov", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "finetune", 92.59),
    ("selectivemae", "TOV", "tov", "RESISC-45", "nwpuresisc45", "accuracy", "finetune", 90.97),
    ("ctxmim", "SeCo", "seco", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "finetune", 61.52),
    ("earthgpt", "SeCo", "seco", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "finetune", 92.71),
    ("gersp", "SeCo", "seco", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "finetune", 90.4),
    ("ma3e", "SeCo", "seco", "NWPU-RESISC45", "nwpuresisc45", "accuracy", "finetune", 92.91),
    ("galileo", "AnySat", "anysat", "m-BigEarthNet", "mbigearthnet", "f1", "knn", 85.3),
    ("olmoearth", "Anysat", "anysat", "m-bigearthnet", "mbigearthnet", "f1", "knn", 54.5),
    ("terrafm", "AnySat", "anysat", "m-BigEarthNet", "mbigearthnet", "f1", "knn", 54.9),
    ("galileo", "Satlas", "satlas", "m-BigEarthNet", "mbigearthnet", "f1", "knn", 82.1),
    ("olmoearth", "Satlas", "satlas", "m-bigearthnet", "mbigearthnet", "f1", "knn", 52.3),
    ("terrafm", "Satlas", "satlas", "m-BigEarthNet", "mbigearthnet", "f1", "knn", 51.9),
    ("panopticon", "CROMA", "croma", "m-Cashew-Plantation", "mcashewplantation", "miou", "linear", 44.3),
    ("satdifuser", "CROMA", "croma", "m-Cashew-Plantation", "mcashewplantation", "miou", "linear", 62.2),
    ("terrafm", "CROMA", "croma", "m-Cashew-Plant", "mcashewplantation", "miou", "linear", 31.8),
)
# the spreads the authors' critique.json gives for the 7 strict groups
PUBLISHED_SPREADS = (56.57, 53.2, 45.85, 31.39, 30.8, 30.4, 30.2)


def published_papers() -> list[PaperRecord]:
    """One citation-only record per reporting paper (title + year; no numbers)."""
    return [PaperRecord(paper_id=p, title=t, year=y, citation=f"{t} ({y})") for p, t, y in PUBLISHED_PAPERS]


def published_results() -> list[ResultRecord]:
    """The 21 published values (see the module docstring)."""
    out = []
    for pid, mraw, m, braw, b, metric, ev, v in PUBLISHED_ROWS:
        out.append(
            ResultRecord(
                paper_id=pid,
                model_name_raw=mraw,
                model_name=m,
                benchmark_name_raw=braw,
                benchmark_name=b,
                metric_name=metric,
                metric_value=v,
                metric_scale="percent",
                evaluation_strategy=_EVAL_SPELLING[ev],
                train_regime="full",
                provenance="unknown",
                note=PUBLISHED_NOTE,
            )
        )
    return out


# ------------------------------------------------------------------------------------ synthetic demo


@dataclass(frozen=True)
class DemoSpec:
    n_papers: int = 40
    n_models: int = 12
    n_benchmarks: int = 8
    n_planted: int = 5
    spread_range: tuple = (12.0, 40.0)
    jitter: float = 2.0
    n_background: int = 25  # non-planted multi-paper strict groups (spread <= jitter)


@dataclass
class Demo:
    papers: list[PaperRecord]
    results: list[ResultRecord]
    planted: dict[tuple, float]  # strict key (model, benchmark, metric, eval, regime) -> spread
    decoys: dict[str, tuple]  # skip rule -> the key it plants
    loose_only: tuple  # (model, benchmark, metric) whose >= 10 spread is two protocols


def synthetic_demo(seed: int = 0, spec: DemoSpec = DemoSpec()) -> Demo:
    """A seeded corpus with planted ground truth; every record ``synthetic=True``.

    Planted: ``n_planted`` strict groups (2-4 papers) with spreads drawn in ``spread_range``;
    ``n_background`` other multi-paper groups with spread <= ``jitter``; one decoy per skip rule
    (baseline model, detection mAP, intra-paper double value, num_training_samples, single paper),
    each with a >= 10 spread the finder must ignore; one loose-only group (linear vs fine-tune).
    """
    seed = check_scalar(seed, "seed", int, min=0)
    rng = np.random.default_rng(seed)
    pids = [f"synth{p:03d}" for p in range(spec.n_papers)]
    models = [f"synthmodel{m:02d}" for m in range(spec.n_models)]
    benches = [f"synthbench{b:02d}" for b in range(spec.n_benchmarks)]
    papers = []
    for i, p in enumerate(pids):
        released = [True, False, None][i % 3]
        papers.append(
            PaperRecord(
                paper_id=p,
                title=f"Synthetic paper {i}",
                year=2019 + i % 7,
                citation=f"synthetic demo paper {i}",
                model_name=models[i % spec.n_models],
                pretraining={
                    "method": ["MAE", "contrastive", "CLIP-style vision-language", "distillation"][i % 4]
                },
                pretraining_data={
                    "datasets": [f"synthpre{(i * 7) % 13}"] + ([f"synthpre{i % 3}"] if i % 2 else [])
                },
                downstream_datasets=[
                    benches[j] for j in sorted({(i + k * k) % spec.n_benchmarks for k in range(1 + i % 4)})
                ],
                code_available=bool(i % 4),
                weights_available=released,
                weights_license=["MIT", "none", "unspecified", "Apache-2.0"][i % 4],
                synthetic=True,
            )
        )
    results: list[ResultRecord] = []
    used: set[tuple] = set()

    def add(pid, model, bench, metric, ev, value, regime="full", nts=None, table="Tab. 1"):
        results.append(
            ResultRecord(
                paper_id=pid,
                model_name_raw=model,
                model_name=model,
                benchmark_name_raw=bench,
                benchmark_name=bench,
                metric_name=metric,
                metric_value=round(float(value), 2),
                evaluation_strategy=ev,
                train_regime=regime,
                num_training_samples=nts,
                provenance="unknown",
                table_ref=table,
                synthetic=True,
            )
        )

    combos = [(m, b) for m in models for b in benches]
    rng.shuffle(combos)
    planted: dict[tuple, float] = {}
    it = iter(combos)
    for _ in range(spec.n_planted):
        m, b = next(it)
        used.add((m, b))
        spread = round(float(rng.uniform(*spec.spread_range)), 2)
        k = int(rng.integers(2, 5))
        ps = rng.choice(len(pids), size=k, replace=False)
        lo = round(float(rng.uniform(20, 100 - spec.spread_range[1] - 1)), 2)
        vals = [lo, lo + spread] + [lo + float(rng.uniform(0.1, spread - 0.1)) for _ in range(k - 2)]
        for p, v in zip(ps, vals):
            add(pids[p], m, b, "accuracy", "linear probe", v)
        vs = [round(v, 2) for v in vals]
        planted[(m, b, "accuracy", "linear", "full")] = max(vs) - min(vs)
    for _ in range(spec.n_background):
        m, b = next(it)
        used.add((m, b))
        base = float(rng.uniform(40, 90))
        ps = rng.choice(len(pids), size=int(rng.integers(2, 5)), replace=False)
        for p in ps:
            add(pids[p], m, b, "f1", "fine-tuning", base + rng.uniform(0, spec.jitter))
    decoys = {}
    p0, p1, p2 = pids[0], pids[1], pids[2]
    m, b = next(it)
    add(p0, "ImageNet", b, "accuracy", "linear probe", 40.0)
    add(p1, "ImageNet", b, "accuracy", "linear probe", 75.0)
    decoys["baseline_model"] = ("ImageNet", b, "accuracy", "linear", "full")
    add(p0, m, "DOTA", "map", "fine-tune", 30.0)
    add(p1, m, "DOTA", "map", "fine-tune", 70.0)
    decoys["detection_map"] = (m, "DOTA", "map", "finetune", "full")
    m, b = next(it)
    add(p0, m, b, "accuracy", "kNN", 50.0, table="Tab. 1")
    add(p0, m, b, "accuracy", "kNN", 52.0, table="Tab. 2")
    add(p1, m, b, "accuracy", "kNN", 80.0)
    decoys["intra_paper"] = (m, b, "accuracy", "knn", "full")
    m, b = next(it)
    add(p0, m, b, "accuracy", "kNN", 45.0, nts="1000")
    add(p2, m, b, "accuracy", "kNN", 70.0)
    decoys["num_training_samples"] = (m, b, "accuracy", "knn", "full")
    m, b = next(it)
    add(p0, m, b, "accuracy", "linear probe", 30.0, table="Tab. 5")
    decoys["single_paper"] = (m, b, "accuracy", "linear", "full")
    m, b = next(it)
    add(p1, m, b, "kappa", "linear probe", 50.0)
    add(p2, m, b, "kappa", "full fine-tuning", 75.0)
    loose_only = (m, b, "kappa")
    return Demo(papers, results, planted, decoys, loose_only)


def write_examples(root: Path | str = EXAMPLES_DIR) -> dict[str, Path]:
    """Regenerate the shipped example files under ``root``."""
    root = Path(root)
    demo = synthetic_demo(0)
    return {
        "published_disagreements": write_records(published_results(), root / "published_disagreements.jsonl"),
        "published_papers": write_records(published_papers(), root / "published_papers.jsonl"),
        "synthetic_papers": write_records(demo.papers, root / "synthetic_demo" / "papers.jsonl"),
        "synthetic_results": write_records(demo.results, root / "synthetic_demo" / "results.jsonl"),
    }
