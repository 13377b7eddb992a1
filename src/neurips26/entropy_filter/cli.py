"""``neurips26 entropy-filter score|filter``: Ĥ_K over JSONL corpora (streaming, with a progress bar).

    neurips26 entropy-filter score  IN.jsonl -o OUT.jsonl [--text-field text] [--score-field hk]
    neurips26 entropy-filter filter IN.jsonl -o OUT.jsonl --keep-frac 0.5 [--domain-field domain]
    neurips26 entropy-filter filter IN.jsonl -o OUT.jsonl --threshold 2.5

``score`` copies every record with its score added (None/null for documents shorter than
--min-tokens). ``filter`` keeps, per domain, the round(keep_frac · n_d) highest-scoring records (two
passes over the file: scores first, then the rows) or, with --threshold, every record whose score is
at least the threshold (one streaming pass; IN may be ``-`` for stdin). Output is written to a
temporary file beside OUT and renamed only on success, so a failure leaves no partial file. User
errors (bad option, unreadable file, malformed JSON line, missing text field) print one line and
exit with code 2; a bad line is reported with its line number.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import deque
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

from neurips26.entropy_filter.corpus import iter_scores
from neurips26.entropy_filter.estimators import ESTIMATORS, hk
from neurips26.entropy_filter.filters import per_domain_k
from neurips26.entropy_filter.tokenize import TOKENIZERS
from neurips26.harness.cliutil import OneLineParser, UsageError, int_at_least, run_main


_positive_int = int_at_least(2, "expected an integer >= 2")


def _n_trunc(text: str) -> int | None:
    return None if text.lower() in ("none", "0") else _positive_int(text)


def _keep_frac(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return v


def _float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v != v:
        raise argparse.ArgumentTypeError("threshold must not be NaN")
    return v


def _jobs(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or -1, got {text!r}") from None
    if v == 0 or v < -1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or -1, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="neurips26 entropy-filter",
                description="Score or filter a JSONL corpus by the Ĥ_K match-length entropy rate "
                            "(bits/token; higher = less repetitive).")
    sub = p.add_subparsers(dest="cmd", metavar="{score,filter}", parser_class=OneLineParser)
    for name, help_ in (("score", "add an Ĥ_K score to every record"),
                        ("filter", "keep the highest-Ĥ_K records per domain (or above a threshold)")):
        s = sub.add_parser(name, help=help_, description=help_)
        s.add_argument("input", help="JSONL file, one JSON object per line ('-' = stdin)")
        s.add_argument("-o", "--output", required=True, type=Path, help="output JSONL file")
        s.add_argument("--text-field", default="text", help="field holding the text (default: text)")
        s.add_argument("--score-field", default="hk", help="field the score is written to (default: hk)")
        s.add_argument("--tokenizer", choices=TOKENIZERS, default="fast", help="default: fast")
        s.add_argument("--estimator", choices=ESTIMATORS, default="paper", help="default: paper")
        s.add_argument("--overlap", action="store_true", help="overlapping matches (LZ77 LPF)")
        s.add_argument("--n-trunc", type=_n_trunc, default=1500,
                       help="score the first N tokens (default 1500; 'none' = all)")
        s.add_argument("--min-tokens", type=_positive_int, default=50,
                       help="documents with fewer tokens get a null score (default 50)")
        s.add_argument("--jobs", type=_jobs, default=1, help="worker processes (default 1; -1 = all cores)")
        s.add_argument("--quiet", action="store_true", help="no progress bar")
        if name == "filter":
            g = s.add_mutually_exclusive_group(required=True)
            g.add_argument("--keep-frac", type=_keep_frac, help="keep round(f · n_d) per domain")
            g.add_argument("--threshold", type=_float, help="keep records with score >= threshold")
            s.add_argument("--domain-field", default=None,
                           help="field with the domain label for per-domain top-k (default: one domain)")
    return p


def _open_in(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    try:
        return open(path, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {path!r}: {e.strerror or e}") from None


def _records(path: str, text_field: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, raw line, record) for every non-blank line; errors name the line."""
    fh = _open_in(path)
    try:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{path}: line {lineno}: malformed JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise UsageError(f"{path}: line {lineno}: expected a JSON object, got {type(rec).__name__}")
            if text_field not in rec:
                raise UsageError(f"{path}: line {lineno}: missing text field {text_field!r}")
            if not isinstance(rec[text_field], str):
                raise UsageError(f"{path}: line {lineno}: field {text_field!r} must be a string, "
                               f"got {type(rec[text_field]).__name__}")
            yield lineno, line, rec
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason})") from None
    finally:
        if fh is not sys.stdin:
            fh.close()


def _scored(args: argparse.Namespace) -> Iterator[tuple[int, dict[str, Any], float | None]]:
    """Stream (line number, record, score), in order, scoring in ``args.jobs`` processes."""
    kw = dict(tokenizer=args.tokenizer, n_trunc=args.n_trunc, min_tokens=args.min_tokens,
              estimator=args.estimator, overlap=args.overlap)
    try:
        hk("", **kw)  # validate the options before reading anything
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    buf: deque[tuple[int, dict[str, Any]]] = deque()

    def texts() -> Iterator[str]:
        for lineno, _, rec in _records(args.input, args.text_field):
            buf.append((lineno, rec))
            yield rec[args.text_field]

    for score in iter_scores(texts(), n_jobs=args.jobs, **kw):
        lineno, rec = buf.popleft()
        yield lineno, rec, score


def _progress(it: Any, args: argparse.Namespace, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, unit=" docs", disable=args.quiet or not sys.stderr.isatty(), leave=False)


class _AtomicOutput:
    """Write to a temporary file beside ``path``; rename on success, delete on failure."""

    def __init__(self, path: Path):
        self.path = path
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"output folder {str(parent)!r} does not exist")
        try:
            fd, self.tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as e:
            raise UsageError(f"cannot write to {str(parent)!r}: {e.strerror or e}") from None
        self.fh = os.fdopen(fd, "w", encoding="utf-8")

    def __enter__(self) -> IO[str]:
        return self.fh

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.fh.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            os.unlink(self.tmp)


def _dump(rec: dict[str, Any]) -> str:
    return json.dumps(rec, ensure_ascii=False) + "\n"


def _cmd_score(args: argparse.Namespace) -> int:
    n = n_scored = 0
    with _AtomicOutput(args.output) as out:
        for _, rec, score in _progress(_scored(args), args, "scoring"):
            rec[args.score_field] = score
            out.write(_dump(rec))
            n += 1
            n_scored += score is not None
    print(f"entropy-filter: scored {n_scored}/{n} documents -> {args.output}", file=sys.stderr)
    return 0


def _cmd_filter(args: argparse.Namespace) -> int:
    if args.threshold is not None:
        n = kept = 0
        with _AtomicOutput(args.output) as out:
            for _, rec, score in _progress(_scored(args), args, "filtering"):
                n += 1
                if score is not None and score >= args.threshold:
                    rec[args.score_field] = score
                    out.write(_dump(rec))
                    kept += 1
        print(f"entropy-filter: kept {kept}/{n} documents (score >= {args.threshold}) -> {args.output}",
              file=sys.stderr)
        return 0
    if args.input == "-":
        raise UsageError("--keep-frac needs two passes over the input: give a file, not '-' (or use --threshold)")
    # pass 1: scores and domains only
    scores: list[float | None] = []
    domains: list[Any] = []
    for lineno, rec, score in _progress(_scored(args), args, "scoring"):
        if args.domain_field is not None:
            if args.domain_field not in rec:
                raise UsageError(f"{args.input}: line {lineno}: missing domain field {args.domain_field!r}")
            dom = rec[args.domain_field]
            domains.append(json.dumps(dom, sort_keys=True) if isinstance(dom, (dict, list)) else dom)
        else:
            domains.append(None)
        scores.append(score)
    # per-domain top-k: exact sort per domain (stable by position, null scores last)
    k = per_domain_k(domains, args.keep_frac)
    by_dom: dict[Any, list[int]] = {}
    for i, d in enumerate(domains):
        by_dom.setdefault(d, []).append(i)
    keep: set[int] = set()
    for d, idx in by_dom.items():
        order = sorted(idx, key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))
        keep.update(order[:k[d]])
    # pass 2: stream the kept rows
    with _AtomicOutput(args.output) as out:
        for i, (_, _, rec) in enumerate(_records(args.input, args.text_field)):
            if i in keep:
                rec[args.score_field] = scores[i]
                out.write(_dump(rec))
    print(f"entropy-filter: kept {len(keep)}/{len(scores)} documents "
          f"(keep_frac {args.keep_frac} per domain) -> {args.output}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("neurips26 entropy-filter", _main, argv)


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd is None:
        raise UsageError("a sub-command is required: score or filter")
    return _cmd_score(args) if args.cmd == "score" else _cmd_filter(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
