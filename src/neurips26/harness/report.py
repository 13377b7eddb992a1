"""Results (result.json, bench.json under runs/) -> one report: Markdown and self-contained HTML."""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Any

from neurips26.harness import registry
from neurips26.harness.run import BENCH_FILE, RESULT_FILE, load_result

_VERDICT_COLOUR = {"holds": "#1a7f37", "fails": "#cf222e", "inconclusive": "#9a6700"}


def latest(root: Path, slug: str, filename: str) -> Path | None:
    """The newest ``filename`` under ``root/slug/*/`` (by modification time; any folder name)."""
    found = sorted((root / slug).glob(f"*/{filename}"), key=lambda p: (p.stat().st_mtime_ns, p.parent.name))
    return found[-1] if found else None


def collect(root: Path | str = "runs") -> list[dict[str, Any]]:
    """Per registered paper: its newest result and bench (either may be None)."""
    root = Path(root)
    rows = []
    for paper in registry.PAPERS:
        res = latest(root, paper.slug, RESULT_FILE)
        bench = latest(root, paper.slug, BENCH_FILE)
        rows.append({
            "paper": paper,
            "result": load_result(res) if res else None,
            "result_dir": res.parent if res else None,
            "bench": json.loads(bench.read_text()) if bench else None,
        })
    return rows


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _md_cell(x: Any) -> str:
    return _fmt(x).replace("|", "\\|").replace("\n", " ")


def to_markdown(rows: list[dict[str, Any]], where: Path | str = ".") -> str:
    """The report as Markdown; plot links are relative to the folder ``where`` it is written."""
    out = ["# neurips26 — reproduction report", "",
           "| paper | status | scale | claims holding | seconds |", "|---|---|---|---|---|"]
    for r in rows:
        p, res = r["paper"], r["result"]
        if res:
            held = sum(c["verdict"] == "holds" for c in res["claims"])
            out.append(f"| {p.slug} | {p.status} | {res['scale']} | {held}/{len(res['claims'])} "
                       f"| {res['seconds']:.0f} |")
        else:
            out.append(f"| {p.slug} | {p.status} | — | — | — |")
    for r in rows:
        p, res, bench = r["paper"], r["result"], r["bench"]
        if not res and not bench:
            continue
        out += ["", f"## {p.slug}: {p.title}", ""]
        if res:
            prov = res["provenance"]
            out += [f"scale `{res['scale']}`, seed {res['seed']}, {res['seconds']:.1f} s, "
                    f"git `{prov.get('git_sha')}`", "",
                    "| claim | statement | paper | ours | verdict |", "|---|---|---|---|---|"]
            for c in res["claims"]:
                out.append(f"| {c['id']} | {_md_cell(c['statement'])} | {_md_cell(c['paper_figure'])} "
                           f"| {_md_cell(c['measured'])} | **{c['verdict']}** |")
            for plot in prov.get("plots", []):
                link = os.path.relpath(Path(r["result_dir"]) / plot, where)
                out += ["", f"![{plot}]({link})"]
        if bench:
            out += ["", "| benchmark | ours | anchor | anchor value | unit | ratio (x better) |",
                    "|---|---|---|---|---|---|"]
            for b in bench["rows"]:
                out.append(f"| {_md_cell(b['name'])} | {_fmt(b['ours'])} | {_md_cell(b['anchor_name'])} "
                           f"| {_fmt(b['anchor'])} | {b['unit']} | {_fmt(b['ratio'])} |")
    return "\n".join(out) + "\n"


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">'


def to_html(rows: list[dict[str, Any]]) -> str:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>neurips26 report</title><style>",
             "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#1f2328}",
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #d0d7de;padding:4px 8px;"
             "vertical-align:top;text-align:left}th{background:#f6f8fa}",
             "img{max-width:48%;margin:4px;border:1px solid #d0d7de}.v{font-weight:bold}",
             "</style></head><body><h1>neurips26 — reproduction report</h1>",
             "<table><tr><th>paper</th><th>status</th><th>scale</th><th>claims</th><th>seconds</th></tr>"]
    for r in rows:
        p, res = r["paper"], r["result"]
        if res:
            counts = {v: sum(c["verdict"] == v for c in res["claims"]) for v in _VERDICT_COLOUR}
            summary = ", ".join(f"<span style='color:{_VERDICT_COLOUR[v]}'>{n} {v}</span>"
                                for v, n in counts.items() if n)
            link = f"<a href='#{p.slug}'>{e(p.slug)}</a>"
            parts.append(f"<tr><td>{link}</td><td>{p.status}</td><td>{res['scale']}</td><td>{summary}</td>"
                         f"<td>{res['seconds']:.0f}</td></tr>")
        else:
            parts.append(f"<tr><td>{e(p.slug)}</td><td>{p.status}</td><td>—</td><td>—</td><td>—</td></tr>")
    parts.append("</table>")
    for r in rows:
        p, res, bench = r["paper"], r["result"], r["bench"]
        if not res and not bench:
            continue
        parts.append(f"<h2 id='{p.slug}'>{e(p.slug)}: {e(p.title)}</h2>")
        if res:
            prov = res["provenance"]
            parts.append(f"<p>scale <code>{res['scale']}</code>, seed {res['seed']}, "
                         f"{res['seconds']:.1f} s, git <code>{e(str(prov.get('git_sha')))}</code></p>")
            parts.append("<table><tr><th>claim</th><th>statement</th><th>paper</th><th>ours</th>"
                         "<th>verdict</th></tr>")
            for c in res["claims"]:
                colour = _VERDICT_COLOUR.get(c["verdict"], "#000")
                parts.append(f"<tr><td>{e(c['id'])}</td><td>{e(c['statement'])}</td>"
                             f"<td>{e(c['paper_figure'])}</td><td>{e(c['measured'])}</td>"
                             f"<td class='v' style='color:{colour}'>{e(c['verdict'])}</td></tr>")
            parts.append("</table><div>")
            for plot in prov.get("plots", []):
                path = Path(r["result_dir"]) / plot
                if path.is_file():
                    parts.append(_img(path))
            parts.append("</div>")
        if bench:
            parts.append("<table><tr><th>benchmark</th><th>ours</th><th>anchor</th><th>anchor value</th>"
                         "<th>unit</th><th>ratio (x better)</th><th>note</th></tr>")
            for b in bench["rows"]:
                parts.append(f"<tr><td>{e(b['name'])}</td><td>{_fmt(b['ours'])}</td>"
                             f"<td>{e(str(b['anchor_name']))}</td><td>{_fmt(b['anchor'])}</td>"
                             f"<td>{e(b['unit'])}</td><td>{_fmt(b['ratio'])}</td>"
                             f"<td>{e(b.get('note', ''))}</td></tr>")
            parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(root: Path | str = "runs", out: Path | str | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (default: into ``root``); returns both paths."""
    root = Path(root)
    out_dir = Path(out) if out is not None else root
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = collect(root)
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(to_markdown(rows, out_dir))
    page.write_text(to_html(rows))
    return md, page
