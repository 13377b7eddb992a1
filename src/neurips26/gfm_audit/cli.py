"""``neurips26 gfm-audit report --papers P --results R --aliases A --out DIR`` (and ``schema``, ``examples``).

``report`` validates both tables (every violation, with row and field, exit status 2), runs the
audit and writes ``summary.json``, ``disagreements.csv``, ``compliance.csv``, ``report.md`` and plots.
``schema {paper,result}`` prints the JSON Schema; ``examples DIR`` writes the shipped example files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from neurips26.gfm_audit.canon import load_aliases
from neurips26.gfm_audit.examples import write_examples
from neurips26.gfm_audit.report import audit, write_report
from neurips26.gfm_audit.schema import RecordValidationError, json_schema, load_papers, load_results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neurips26 gfm-audit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="audit a table of reported numbers")
    r.add_argument("--papers", required=True, type=Path, help="papers table (.jsonl/.csv/.parquet)")
    r.add_argument("--results", required=True, type=Path, help="results table (.jsonl/.csv/.parquet)")
    r.add_argument(
        "--aliases", type=Path, default=None, help="alias CSV raw,canonical,context (default: ours)"
    )
    r.add_argument("--out", required=True, type=Path, help="output folder")
    r.add_argument("--year-cap", type=int, default=2025)
    r.add_argument(
        "--extended-eval", action="store_true", help="extended eval normalisation (not paper mode)"
    )
    r.add_argument("--no-plots", action="store_true")
    s = sub.add_parser("schema", help="print the JSON Schema of a record")
    s.add_argument("kind", choices=("paper", "result"))
    e = sub.add_parser("examples", help="write the shipped example tables")
    e.add_argument("out", type=Path)
    c = sub.add_parser("convert-authors", help="convert your copies of the authors' files into our formats")
    c.add_argument("--extracted-info", type=Path, required=True, help="extracted_info.jsonl")
    c.add_argument("--reported-numbers", type=Path, default=None, help="reported_numbers.jsonl (optional)")
    c.add_argument("--aliases-py", type=Path, required=True, help="their src/aliases.py")
    c.add_argument("--analyses-py", type=Path, default=None, help="their src/critique_analyses.py (optional)")
    c.add_argument(
        "--out", type=Path, required=True, help="folder for papers.jsonl, results.jsonl, aliases.csv"
    )
    return p


def _convert(args) -> int:
    from neurips26.gfm_audit import authors
    from neurips26.gfm_audit.schema import read_rows, validate_papers, validate_results, write_records

    args.out.mkdir(parents=True, exist_ok=True)
    rows, nums = read_rows(args.extracted_info)
    papers = validate_papers(authors.papers_from_extracted_info(rows), nums)
    write_records(papers, args.out / "papers.jsonl")
    alias_rows = authors.aliases_from_module(args.aliases_py)
    if args.analyses_py is not None:
        alias_rows += authors.downstream_only_from_analyses(args.analyses_py)
    authors.write_alias_csv(alias_rows, args.out / "aliases.csv")
    print(f"papers.jsonl: {len(papers)} records; aliases.csv: {len(alias_rows)} rows")
    if args.reported_numbers is not None:
        rows, nums = read_rows(args.reported_numbers)
        results = validate_results(authors.results_from_reported_numbers(rows), papers, nums)
        write_records(results, args.out / "results.jsonl")
        print(f"results.jsonl: {len(results)} rows")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    if args.cmd == "schema":
        print(json.dumps(json_schema(args.kind), indent=2))
        return 0
    if args.cmd == "convert-authors":
        try:
            return _convert(args)
        except RecordValidationError as e:
            print(f"gfm-audit: invalid input\n{e}", file=sys.stderr)
            return 2
    if args.cmd == "examples":
        for name, path in write_examples(args.out).items():
            print(f"{name}: {path}")
        return 0
    try:
        papers = load_papers(args.papers)
        results = load_results(args.results, papers)
    except RecordValidationError as e:
        print(f"gfm-audit: invalid input\n{e}", file=sys.stderr)
        return 2
    summary = audit(
        papers, results, load_aliases(args.aliases), year_cap=args.year_cap, paper_mode=not args.extended_eval
    )
    files = write_report(summary, args.out, plots=not args.no_plots)
    d = summary["disagreements"]["strict_full"]
    wm = f"[{summary['watermark']}] " if summary["watermark"] else ""
    print(
        f"{wm}{d['n_groups']} strict groups; >=10 points: {d['n_ge_10']}; "
        f"wrote {len(files)} files to {args.out}"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
