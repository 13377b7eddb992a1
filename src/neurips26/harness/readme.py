"""README tables generated from runs, never hand-copied (``neurips26 report --readme``).

A README holds generated blocks between markers::

    <!-- neurips26:claims -->            (a paper folder's README: its newest result.json)
    ...generated...
    <!-- /neurips26:claims -->
    <!-- neurips26:bench --> ... <!-- /neurips26:bench -->     (its newest bench.json)
    <!-- neurips26:papers --> ... <!-- /neurips26:papers -->   (the top README: every paper)

``update_readmes(root)`` rewrites each block from the newest results under ``root`` (with the
command and git sha that made them) and leaves everything outside the markers alone; a README
without a block, or a paper without a run, is left as it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from neurips26.harness.report import collect

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
BLOCKS = ("claims", "bench", "papers")


def _block_re(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- neurips26:{name} -->\n)(.*?)(<!-- /neurips26:{name} -->)", re.S)


def has_block(text: str, name: str) -> bool:
    return bool(_block_re(name).search(text))


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block ``name`` holding ``body``; ``ValueError`` when the markers are missing."""
    if name not in BLOCKS:
        raise ValueError(f"name must be one of {BLOCKS}, got {name!r}")
    rx = _block_re(name)
    if not rx.search(text):
        raise ValueError(f"no <!-- neurips26:{name} --> ... <!-- /neurips26:{name} --> markers")
    body = body if body.endswith("\n") else body + "\n"
    return rx.sub(lambda m: m.group(1) + body + m.group(3), text, count=1)


def _cell(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def _short_sha(sha: str | None) -> str:
    if not sha:
        return "unknown"
    dirty = sha.endswith("-dirty")
    return sha[:10] + ("-dirty" if dirty else "")


def run_command(result: Mapping[str, Any]) -> str:
    """The command that reproduces ``result``."""
    seeds = result.get("seeds") or [result.get("seed", 0)]
    seed_arg = f"--seed {seeds[0]}" if len(seeds) == 1 else "--seeds " + ",".join(str(s) for s in seeds)
    return f"neurips26 run {result['paper']} --scale {result['scale']} {seed_arg}"


def render_claims(result: Mapping[str, Any]) -> str:
    """The claims table of one result, with the command, seeds, time and git sha that made it."""
    prov = result.get("provenance", {})
    seeds = result.get("seeds") or [result.get("seed", 0)]
    lines = [f"From `{run_command(result)}` at git `{_short_sha(prov.get('git_sha'))}`, "
             f"{str(prov.get('utc', ''))[:10]}, {result['seconds']:.0f} s, "
             f"{len(seeds)} seed{'s' if len(seeds) > 1 else ''}:", "",
             "| claim | paper | ours | verdict |", "|---|---|---|---|"]
    for c in result["claims"]:
        lines.append(f"| {_cell(c['id'])} | {_cell(c['paper_figure'])} | {_cell(c['measured'])} "
                     f"| **{c['verdict']}** |")
    return "\n".join(lines) + "\n"


def render_bench(bench: Mapping[str, Any]) -> str:
    """The bench table of one bench.json."""
    prov = bench.get("provenance", {})
    scale = bench.get("scale", "quick")
    lines = [f"From `neurips26 bench {bench['paper']}{'' if scale == 'quick' else ' --scale ' + scale}` "
             f"at git `{_short_sha(prov.get('git_sha'))}`, {str(prov.get('utc', ''))[:10]}:", "",
             "| benchmark | ours | anchor | anchor value | unit | ratio (x better) | note |",
             "|---|---|---|---|---|---|---|"]
    for b in bench["rows"]:
        ratio = "—" if b["ratio"] is None else f"{b['ratio']:.3g}x"
        lines.append(f"| {_cell(b['name'])} | {_cell(b['ours'])} | {_cell(b['anchor_name'])} "
                     f"| {_cell(b['anchor'])} | {_cell(b['unit'])} | {ratio} | {_cell(b.get('note', ''))} |")
    return "\n".join(lines) + "\n"


def verdict_counts(result: Mapping[str, Any]) -> str:
    counts = {v: sum(c["verdict"] == v for c in result["claims"]) for v in ("holds", "fails", "inconclusive")}
    return ", ".join(f"{n} {v}" for v, n in counts.items())


def _previous_claims(table: str) -> dict[str, str]:
    """slug -> the claims cell of an existing papers table (what a paper without a run keeps)."""
    cells = {}
    for line in table.splitlines():
        m = re.match(r"\| \[?`([a-z0-9_]+)`\]?(?:\([^)]*\))? \|.*\| ([^|]*) \|$", line)
        if m:
            cells[m.group(1)] = m.group(2)
    return cells


def render_papers(rows: list[dict[str, Any]], previous: str = "") -> str:
    """The top README's table: every registered paper, its status and its newest verdicts.

    A paper with no run under the results root keeps its claims cell from ``previous`` (the table
    as it stands), so regenerating after rerunning some papers does not erase the others' rows.
    """
    kept = _previous_claims(previous)
    lines = ["| slug | paper | status | claims (newest run) |", "|---|---|---|---|"]
    for r in rows:
        p, res = r["paper"], r["result"]
        slug = f"[`{p.slug}`](src/neurips26/{p.slug}/README.md)" if p.implemented else f"`{p.slug}`"
        if res:
            seeds = res.get("seeds") or [res.get("seed", 0)]
            claims = (f"{verdict_counts(res)} ({res['scale']}, {len(seeds)} seed{'s' if len(seeds) > 1 else ''}, "
                      f"{res['seconds']:.0f} s, git `{_short_sha(res['provenance'].get('git_sha'))}`)")
        else:
            claims = kept.get(p.slug, "—")
        lines.append(f"| {slug} | {_cell(p.title)} | {p.status} | {claims} |")
    return "\n".join(lines) + "\n"


def update_readmes(root: Path | str = "runs", package_dir: Path | None = None,
                   top_readme: Path | None = None) -> list[Path]:
    """Rewrite the generated blocks of every README from the newest runs under ``root``.

    Returns the READMEs that changed. ``package_dir`` is ``src/neurips26`` (default: this package),
    ``top_readme`` the project's README (default: two folders above the package, when it exists).
    """
    package_dir = Path(package_dir) if package_dir is not None else _PACKAGE_DIR
    if top_readme is None:
        candidate = package_dir.parent.parent / "README.md"
        top_readme = candidate if candidate.is_file() else None
    rows = collect(root)
    changed = []
    for r in rows:
        path = package_dir / r["paper"].slug / "README.md"
        if not path.is_file():
            continue
        text = path.read_text()
        new = text
        if r["result"] and has_block(new, "claims"):
            new = replace_block(new, "claims", render_claims(r["result"]))
        if r["bench"] and has_block(new, "bench"):
            new = replace_block(new, "bench", render_bench(r["bench"]))
        if new != text:
            path.write_text(new)
            changed.append(path)
    if top_readme is not None:
        text = top_readme.read_text()
        if has_block(text, "papers"):
            current = _block_re("papers").search(text).group(2)
            new = replace_block(text, "papers", render_papers(rows, previous=current))
            if new != text:
                top_readme.write_text(new)
                changed.append(top_readme)
    return changed


__all__ = ["BLOCKS", "has_block", "replace_block", "render_claims", "render_bench", "render_papers",
           "run_command", "update_readmes"]
