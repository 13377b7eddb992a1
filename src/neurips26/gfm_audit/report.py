"""The audit report: ``summary.json``, ``disagreements.csv``, ``compliance.csv``, ``report.md`` and plots.

``audit(papers, results, aliases)`` computes every number (a dict); ``write_report(summary, out)``
writes the files. A corpus with any ``synthetic=True`` record is watermarked ``SYNTHETIC DEMO`` in
every file (JSON field, CSV first line, Markdown title, plot titles).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Sequence

from neurips26.gfm_audit.canon import AliasTable
from neurips26.gfm_audit.examples import SYNTHETIC_WATERMARK
from neurips26.gfm_audit.finder import (
    HEADLINE_THRESHOLD,
    THRESHOLDS,
    ResultTable,
    copy_chains,
    find_disagreements,
    naive_leaderboard,
    protocol_mismatches,
    provenance_split,
    spread_summary,
)
from neurips26.gfm_audit.schema import PaperRecord, ResultRecord
from neurips26.gfm_audit import stats

PLOTS = (
    "spread_histogram.png",
    "top10_dumbbell.png",
    "benchmark_concentration.png",
    "gini_by_year.png",
    "overlap_histogram.png",
)


def audit(
    papers: Sequence[PaperRecord],
    results: Sequence[ResultRecord],
    aliases: AliasTable,
    year_cap: int | None = 2025,
    paper_mode: bool = True,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """Every number of the audit. Corpus statistics need at least one non-citation-only paper."""
    if not results and not papers:
        raise ValueError("papers and results: empty corpus (nothing to audit)")
    table = ResultTable.from_records(results, aliases, papers, year_cap, paper_mode)
    strict = find_disagreements(table, "strict", "full")
    loose = find_disagreements(table, "loose", None)
    synthetic = any(r.synthetic for r in results) or any(p.synthetic for p in papers)
    out: dict[str, Any] = {
        "watermark": SYNTHETIC_WATERMARK if synthetic else None,
        "n_papers": len(papers),
        "n_results": len(results),
        "n_rows_grouped": len(table),
        "disagreements": {
            "strict_full": spread_summary(strict),
            "loose": spread_summary(loose),
            "headline_threshold": HEADLINE_THRESHOLD,
            "thresholds": list(THRESHOLDS),
            "protocol_mismatch": protocol_mismatches(table, loose=loose),
            "provenance": provenance_split(strict),
        },
        "copy_chains": copy_chains(results),
        "groups": [g.to_dict() for g in strict],
        "top10_groups": [
            {**g.to_dict(), "values": [(m["paper"], m["value"], m["provenance"]) for m in g.members]}
            for g in strict[:10]
        ],
        "naive_leaderboard": naive_leaderboard(table),
    }
    corpus = [p for p in papers if not p.citation_only]
    if corpus:
        out["benchmarks"] = stats.benchmark_concentration(papers, aliases, n_boot=n_boot)
        out["cherry_picking"] = stats.cherry_picking(papers, aliases, n_boot=n_boot)
        out["pretraining"] = {
            "ordered": stats.pretraining_uniqueness(papers, aliases, True),
            "unordered": stats.pretraining_uniqueness(papers, aliases, False),
        }
        out["release"] = stats.release_shares(papers)
        out["methods"] = stats.method_families(papers)
        out["compliance"] = stats.compliance(papers, results, aliases)
    else:
        out["corpus_statistics"] = "skipped: every paper record is citation-only (no model/dataset fields)"
    return out


def _write_csv(path: Path, rows: list[dict], watermark: str | None) -> None:
    cols = list(dict.fromkeys(k for r in rows for k in r)) or ["empty"]
    with path.open("w", newline="", encoding="utf-8") as f:
        if watermark:
            f.write(f"# {watermark}\n")
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()})


def _markdown(s: dict) -> str:
    wm = s["watermark"]
    d = s["disagreements"]["strict_full"]
    lines = [f"# {wm + ' — ' if wm else ''}GFM results audit", ""]
    if wm:
        lines += [
            f"**{wm}**: every number below comes from a seeded synthetic generator, not from papers.",
            "",
        ]
    lines += [
        f"{s['n_papers']} papers, {s['n_results']} result rows ({s['n_rows_grouped']} grouped).",
        "",
        "## Cross-paper disagreements (strict key, full labels)",
        "",
        f"{d['n_groups']} multi-paper groups; spread >= 5: {d['n_ge_5']}, >= 10: {d['n_ge_10']}, "
        f">= 20: {d['n_ge_20']}.",
        "",
        "| model | benchmark | metric | eval | spread | min | max | papers |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in s["top10_groups"]:
        lines.append(
            f"| {g['model']} | {g['benchmark']} | {g['metric']} | {g['eval']} | {g['spread']:.2f} | "
            f"{g['min']:.2f} | {g['max']:.2f} | {', '.join(g['papers'])} |"
        )
    pm = s["disagreements"]["protocol_mismatch"]
    lines += [
        "",
        f"Loose key (model, benchmark, metric): {pm['loose_ge']} groups >= 10, of which "
        f"{pm['protocol_mismatch']} are protocol mismatches (no strict group >= 10).",
        "",
    ]
    if s["copy_chains"]:
        lines += ["Copy chains: " + "; ".join(" <- ".join(c) for c in s["copy_chains"]), ""]
    if "benchmarks" in s:
        b, pr, rel = s["benchmarks"], s["pretraining"]["ordered"], s["release"]
        lines += [
            "## Corpus",
            "",
            f"- benchmarks: {b['n_unique_benchmarks']} unique over {b['n_total_uses']} uses; Gini "
            f"{b['gini']:.3f} (95% CI {b['gini_ci_95'][0]:.3f}-{b['gini_ci_95'][1]:.3f}), HHI {b['hhi']:.3f}",
            f"- top-10 overlap: mean {s['cherry_picking']['mean_overlap']:.3f} over "
            f"{s['cherry_picking']['n_total']} papers, {s['cherry_picking']['n_zero_overlap']} with none",
            f"- pretraining: {pr['unique']}/{pr['n_extractable']} papers use a configuration no other uses",
            f"- weights released: {rel['weights_available']['share']:.3f} of {rel['n_papers']} "
            f"({rel['weights_available']['null']} unknown, counted as not released)",
            "",
        ]
        comp = s["compliance"]["corpus"]
        lines += ["## Expectations E1-E6 (our operationalisation)", "", "| E | share | n |", "|---|---|---|"]
        lines += [
            f"| {e} | {'-' if v['share'] is None else format(v['share'], '.2f')} | {v['n']} |"
            for e, v in comp.items()
        ]
    else:
        lines += [s["corpus_statistics"]]
    return "\n".join(lines) + "\n"


def _plots(s: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wm = f"{s['watermark']}: " if s["watermark"] else ""
    written = []

    def save(fig, name):
        fig.savefig(out / name, dpi=90, bbox_inches="tight")
        plt.close(fig)
        written.append(name)

    spreads = [g["spread"] for g in s["groups"]]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.hist(spreads, bins=30, color="0.5")
    for t in s["disagreements"]["thresholds"]:
        ax.axvline(t, color="r", ls="--", lw=1)
    ax.set(xlabel="spread (points)", ylabel="groups", title=f"{wm}strict-group spreads")
    save(fig, PLOTS[0])
    fig, ax = plt.subplots(figsize=(6, 3))
    top = s["top10_groups"]
    for i, g in enumerate(top):
        ax.plot([g["min"], g["max"]], [i, i], "k-")
        ax.plot([g["min"], g["max"]], [i, i], "o")
    ax.set_yticks(range(len(top)), [f"{g['model']}/{g['benchmark']}" for g in top], fontsize=6)
    ax.set(xlabel="reported value (points)", title=f"{wm}largest disagreements")
    save(fig, PLOTS[1])
    if "benchmarks" in s:
        b = s["benchmarks"]
        fig, ax = plt.subplots(figsize=(6, 3))
        names, counts = zip(*b["top_20"]) if b["top_20"] else ((), ())
        ax.bar(range(len(counts)), counts)
        ax.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
        ax.set(ylabel="papers", title=f"{wm}benchmark uses")
        save(fig, PLOTS[2])
        fig, ax = plt.subplots(figsize=(5, 3))
        years = sorted(b["by_year"])
        ax.plot(years, [b["by_year"][y]["gini"] for y in years], "o-")
        ax.set(xlabel="year", ylabel="Gini", title=f"{wm}benchmark Gini by year")
        save(fig, PLOTS[3])
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.bar([i / 10 + 0.05 for i in range(10)], s["cherry_picking"]["histogram"], width=0.09)
        ax.set(xlabel="overlap with top-10", ylabel="papers", title=f"{wm}top-10 overlap")
        save(fig, PLOTS[4])
    return written


def write_report(summary: dict, out: Path | str, plots: bool = True) -> dict[str, Path]:
    """Write the report files into ``out`` (created); returns name -> path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wm = summary["watermark"]
    tmp = out / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary, default=str) + "\n")  # no indent: the C encoder (10x faster)
    tmp.replace(out / "summary.json")
    _write_csv(out / "disagreements.csv", summary["groups"], wm)
    comp = summary.get("compliance", {}).get("per_paper", [])
    _write_csv(out / "compliance.csv", comp, wm)
    (out / "report.md").write_text(_markdown(summary), encoding="utf-8")
    files = {n: out / n for n in ("summary.json", "disagreements.csv", "compliance.csv", "report.md")}
    if plots:
        files.update({n: out / n for n in _plots(summary, out)})
    return files
