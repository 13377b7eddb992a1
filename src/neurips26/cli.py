"""The ``neurips26`` command: list | run | bench | reproduce | report, plus paper sub-commands.

Errors a user can fix (unknown slug, bad scale or seed, unwritable output folder, missing extra)
print one line ``neurips26: error: ...`` and exit with code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Sequence

from neurips26 import __version__
from neurips26.harness import registry
from neurips26.harness.cliutil import EXIT_USAGE, OneLineParser, UsageError, int_at_least, run_main
from neurips26.harness.run import RunSetupError

_seed = int_at_least(0, "seed must be a non-negative integer")


def _seed_list(text: str) -> list[int]:
    """``0,1,2`` or a range ``0-4``: the seeds of a run."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if sep:
            a, b = _seed(lo), _seed(hi)
            if b < a:
                raise argparse.ArgumentTypeError(f"seed range must go up, got {part!r}")
            seeds.extend(range(a, b + 1))
        else:
            seeds.append(_seed(part))
    if not seeds:
        raise argparse.ArgumentTypeError(f"seeds must name at least one seed, got {text!r}")
    return seeds


def _slug(text: str) -> str:
    try:
        return registry.get(text).slug
    except registry.UnknownPaperError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _slug_list(text: str) -> list[str]:
    return [_slug(s.strip()) for s in text.split(",") if s.strip()]


def build_parser() -> argparse.ArgumentParser:
    commands = ", ".join(sorted(p.command for p in registry.PAPERS if p.command))
    parser = OneLineParser(
        prog="neurips26",
        description="NeurIPS 2026 papers as working software: run a paper's reproduction, "
                    "benchmark it against its anchor, or reproduce them all into one report.",
        epilog=f"Paper tools: neurips26 <tool> --help, with <tool> one of: {commands}.")
    parser.add_argument("--version", action="version", version=f"neurips26 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    sub.add_parser("list", help="list the 19 papers with their status")

    run = sub.add_parser("run", help="reproduce one paper's headline claims",
                         description="Reproduce SLUG's headline experiment; write DIR/result.json and "
                                     "the plots, print the claims table (paper figure, ours, verdict).")
    run.add_argument("slug", type=_slug, help="paper slug (see `neurips26 list`)")
    run.add_argument("--scale", default="quick",
                     help="a key of the paper's CONFIGS: smoke (seconds), quick (minutes on 2 CPU cores, "
                          "default), full (GPU or hours), and any the paper adds (nas: mid)")
    seeds = run.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=_seed, default=None, help="one random seed (default: the config's, else 0)")
    seeds.add_argument("--seeds", type=_seed_list, default=None,
                       help="several seeds, e.g. 0,1,2 or 0-4: verdicts then rest on paired standard errors")
    run.add_argument("--backend", choices=("serial", "process", "ray", "auto"), default=None,
                     help="how several seeds run (default: the config's seed_backend, else serial; auto: Ray "
                          "if a cluster runs, else processes)")
    run.add_argument("--out", type=Path, default=None, help="output folder (default runs/SLUG/run-<UTC time>/)")
    run.add_argument("--json", action="store_true", help="print result.json to stdout; no progress bars")

    bench = sub.add_parser("bench", help="benchmark one paper against its anchor",
                           description="Time SLUG's method against the best existing tool; write "
                                       "DIR/bench.json and print each row with its ratio.")
    bench.add_argument("slug", type=_slug, help="paper slug")
    bench.add_argument("--scale", choices=("smoke", "quick", "full"), default="quick", help="quick (default) or smoke (seconds; checks the rows)")
    bench.add_argument("--out", type=Path, default=None, help="output folder (default runs/SLUG/bench-<UTC time>/)")
    bench.add_argument("--json", action="store_true", help="print bench.json to stdout; no progress bars")

    rep = sub.add_parser("reproduce", help="run every implemented paper, then write the report",
                         description="Run each implemented paper at SCALE into runs/, then write "
                                     "runs/report.html and runs/report.md.")
    rep.add_argument("--scale", default="quick", help="smoke, quick (default) or full")
    rep.add_argument("--seed", type=_seed, default=None, help="random seed (default: each config's, else 0)")
    rep.add_argument("--only", type=_slug_list, default=None, help="comma-separated slugs to run")
    rep.add_argument("--bench", action="store_true", help="also run each paper's benchmark")
    rep.add_argument("--root", type=Path, default=Path("runs"), help="results folder (default runs/)")
    rep.add_argument("--readme", action="store_true", help="then regenerate the READMEs' claims/bench tables")
    rep.add_argument("--resume", action="store_true",
                     help="skip each run (and bench) that this exact, clean commit already wrote under ROOT at "
                          "this scale and seed: an interrupted reproduce goes on where it stopped")

    report = sub.add_parser("report", help="write report.html and report.md from the results in runs/")
    report.add_argument("--root", type=Path, default=Path("runs"), help="results folder (default runs/)")
    report.add_argument("--out", type=Path, default=None, help="where to write (default: the results folder)")
    report.add_argument("--readme", action="store_true",
                        help="also rewrite the generated claims/bench tables in the READMEs from the newest runs")
    return parser


def _print_claims(result: dict) -> None:
    rows = [("claim", "paper", "ours", "verdict")]
    rows += [(c["id"], c["paper_figure"], c["measured"], c["verdict"]) for c in result["claims"]]
    widths = [min(max(len(r[i]) for r in rows), cap) for i, cap in enumerate((28, 36, 60, 12))]
    for r in rows:
        print("  ".join(_clip(cell, w).ljust(w) for cell, w in zip(r, widths)).rstrip())


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_bench(result: dict) -> None:
    for row in result["rows"]:
        ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        anchor = "not run" if row["anchor"] is None else f"{row['anchor']:.4g}"
        note = f"  ({row['note']})" if row.get("note") else ""
        print(f"{row['name']}: ours {row['ours']:.4g} {row['unit']} | {row['anchor_name']} {anchor} "
              f"| ours better by {ratio} ({row['better']} is better){note}")


def _cmd_list(args: argparse.Namespace) -> int:
    for p in registry.PAPERS:
        print(f"{p.slug:<16} {p.status:<12} {p.title}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from neurips26.harness.distributed import launcher_rank
    from neurips26.harness.run import default_out_dir, run_paper

    out = args.out if args.out is not None else default_out_dir(args.slug)
    result = run_paper(args.slug, args.scale, args.seed, out, progress=not args.json, seeds=args.seeds,
                       backend=args.backend)
    if launcher_rank() != 0:  # under torchrun only rank 0 wrote the run folder, and only it reports
        return 0
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_claims(result)
        seeds = ",".join(str(s) for s in result["seeds"])
        print(f"{args.slug}: {result['seconds']:.1f} s, seeds {seeds}; result.json in {out}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from neurips26.harness.distributed import launcher_rank
    from neurips26.harness.run import bench_paper, default_out_dir

    out = args.out if args.out is not None else default_out_dir(args.slug, "bench")
    result = bench_paper(args.slug, out, progress=not args.json, scale=args.scale)
    if launcher_rank() != 0:
        return 0
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_bench(result)
        print(f"bench.json in {out}")
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from neurips26.harness.report import write_report
    from neurips26.harness.run import RESULT_FILE, bench_paper, default_out_dir, finished, load_result, run_paper

    slugs = args.only or [p.slug for p in registry.PAPERS if p.implemented]
    failed = []
    for slug in slugs:
        print(f"== {slug} ({args.scale})", flush=True)
        try:
            done = finished(slug, args.scale, args.seed, args.root) if args.resume else None
            if done is not None:
                print(f"(resumed: already run by this commit in {done})")
                result = load_result(done / RESULT_FILE)
            else:
                result = run_paper(slug, args.scale, args.seed, default_out_dir(slug, root=args.root))
            _print_claims(result)
            if args.bench:
                done = finished(slug, "quick", root=args.root, kind="bench") if args.resume else None
                if done is not None:
                    print(f"(resumed: bench already run by this commit in {done})")
                else:
                    _print_bench(bench_paper(slug, default_out_dir(slug, "bench", root=args.root)))
        except (registry.MissingExtraError, registry.PaperNotImplementedError, RunSetupError) as e:
            print(f"neurips26: skipped {slug}: {e}", file=sys.stderr)
            failed.append(slug)
        except Exception:  # one paper's crash must not cost the others their runs
            traceback.print_exc()
            print(f"neurips26: {slug} failed; continuing with the others", file=sys.stderr)
            failed.append(slug)
    md, page = write_report(args.root)
    print(f"report: {page} and {md}")
    if args.readme:
        _update_readmes(args.root)
    if failed:
        print(f"neurips26: error: not run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from neurips26.harness.report import write_report

    if not args.root.is_dir():
        raise UsageError(f"results folder {str(args.root)!r} does not exist; run `neurips26 run SLUG` first")
    md, page = write_report(args.root, args.out)
    print(f"report: {page} and {md}")
    if args.readme:
        _update_readmes(args.root)
    return 0


def _update_readmes(root: Path) -> None:
    from neurips26.harness.readme import update_readmes

    for path in update_readmes(root):
        print(f"updated {path}")


_COMMANDS = {"list": _cmd_list, "run": _cmd_run, "bench": _cmd_bench, "reproduce": _cmd_reproduce,
             "report": _cmd_report}
_USER_ERRORS = (RunSetupError, registry.UnknownPaperError, registry.PaperNotImplementedError,
                registry.MissingExtraError)


def _main(argv: list[str]) -> int:
    if argv and (paper := registry.by_command(argv[0])) is not None:
        return int(registry.load(paper.slug, "cli").main(argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return EXIT_USAGE
    return _COMMANDS[args.command](args)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run_main("neurips26", _main, argv, _USER_ERRORS)
    except KeyboardInterrupt:
        print("neurips26: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `neurips26 list | head`: the reader left; stay quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
