"""``neurips26 entropy-filter score|filter``: Ĥ_K over JSONL corpora (streaming, with a progress bar).

    neurips26 entropy-filter score  IN.jsonl[.gz|.bz2|.xz|.zst] -o OUT.jsonl[.gz|...] [--attributes]
    neurips26 entropy-filter filter IN.jsonl -o OUT.jsonl --keep-frac 0.5 [--domain-field domain]
    neurips26 entropy-filter filter IN.jsonl -o OUT.jsonl --threshold 2.5

``score`` copies every record with its score added (null for documents shorter than --min-tokens), or
with ``--attributes`` writes only ``{"id": ..., "attributes": {"hk": [[0, n_chars, score]]}}`` per line
(dolma's attribute format) so a corpus is not rewritten to score it. ``filter`` keeps, per domain, the
quota(keep_frac, n_d) highest-scoring records (two passes over the file: scores first, then the rows;
unscored records never fill a quota) or, with --threshold, every record whose score is at least the
threshold (one streaming pass; IN may be ``-`` for stdin). ``--floor`` adds an absolute floor.

Files are compressed by extension (gzip, bzip2, xz, zstd; zstd needs the ``zstandard`` package).
Output is written to a temporary file beside OUT and renamed only on success, so a failure leaves no
partial file. Bad records (malformed JSON, not an object, missing or non-string text field, invalid
UTF-8 or lone surrogates under ``--bad-unicode error``): ``--on-error raise`` (default) prints one line
``IN: line N: reason`` and exits with code 2, writing nothing; ``skip`` counts and skips them;
``quarantine`` writes each, with its line number and reason, to ``--quarantine FILE``.
``--bad-unicode``: ``error`` (a bad record), ``replace`` (invalid bytes and lone surrogates become
U+FFFD in the output), ``keep`` (the record is written back with its ``\\udXXX`` escapes as read; the
text is scored with U+FFFD in their place; invalid bytes become U+FFFD).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import io
import json
import lzma
import os
import re
import sys
import tempfile
from collections import deque
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

from neurips26.entropy_filter.corpus import iter_scores
from neurips26.entropy_filter.estimators import ESTIMATORS, hk
from neurips26.entropy_filter.filters import selection
from neurips26.entropy_filter.pipeline import _get
from neurips26.entropy_filter.tokenize import TOKENIZERS, check_tokenizer
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
        s.add_argument("--text-field", default="text",
                       help="field holding the text, dotted for nested fields (default: text)")
        s.add_argument("--id-field", default="id",
                       help="field holding the record id, for --attributes (default: id; missing: "
                            "the line number)")
        s.add_argument("--score-field", default="hk", help="field the score is written to (default: hk)")
        s.add_argument("--attributes", action="store_true",
                       help="write only id + score per line (dolma attributes), not the records")
        s.add_argument("--on-error", choices=("raise", "skip", "quarantine"), default="raise",
                       help="a bad record: stop with a one-line error (default), skip it, or quarantine it")
        s.add_argument("--quarantine", type=Path, default=None,
                       help="JSONL file for bad records (with --on-error quarantine)")
        s.add_argument("--bad-unicode", choices=("error", "replace", "keep"), default="error",
                       help="invalid UTF-8 and lone surrogates: a bad record (default), U+FFFD, or "
                            "kept escaped")
        s.add_argument("--tokenizer", default="unicode",
                       help=f"one of {', '.join(TOKENIZERS)} (default: unicode) or the path of an HF "
                            f"tokenizers JSON file (score on its ids)")
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
            g.add_argument("--keep-frac", type=_keep_frac,
                           help="keep max(1, round-half-up(f · n_d)) scored records per domain")
            g.add_argument("--threshold", type=_float, help="keep records with score >= threshold")
            s.add_argument("--domain-field", default=None,
                           help="field with the domain label for per-domain top-k (default: one domain)")
            s.add_argument("--min-keep", type=int, default=1,
                           help="least kept of a non-empty domain under --keep-frac (default 1; 0 allowed)")
            s.add_argument("--floor", type=_float, default=None,
                           help="absolute floor: never keep a record scoring below it")
    return p


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class BadRecord(Exception):
    """A record that cannot be used (reported with its line number under --on-error)."""


def _compression(path: str) -> str:
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        if path.endswith(ext):
            return ext
    return ""


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError:
        raise UsageError("a .zst file needs the zstandard package (pip install zstandard)") from None
    return zstandard


def _open_in(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    ext = _compression(path)
    try:
        if ext == ".zst":
            return io.BufferedReader(_zstd().ZstdDecompressor().stream_reader(open(path, "rb")))  # type: ignore
        opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(ext, open)
        return opener(path, "rb")  # type: ignore[operator, return-value]
    except OSError as e:
        raise UsageError(f"cannot read {path!r}: {e.strerror or e}") from None


def _fix_surrogates(x: Any) -> Any:
    """Every lone surrogate in the strings of ``x`` (recursively) replaced by U+FFFD."""
    if isinstance(x, str):
        return _SURROGATE.sub("\ufffd", x)
    if isinstance(x, list):
        return [_fix_surrogates(v) for v in x]
    if isinstance(x, dict):
        return {_fix_surrogates(k): _fix_surrogates(v) for k, v in x.items()}
    return x


class _Record:
    """One usable input record: line number, the parsed object, its text (as scored), and whether it
    must be written with ASCII escapes (``--bad-unicode keep`` with lone surrogates)."""

    __slots__ = ("lineno", "rec", "text", "escape")

    def __init__(self, lineno: int, rec: dict[str, Any], text: str, escape: bool):
        self.lineno, self.rec, self.text, self.escape = lineno, rec, text, escape


def _parse(raw: bytes, args: argparse.Namespace) -> tuple[dict[str, Any], str, bool]:
    """(record, text to score, escape on output) or BadRecord(reason)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if args.bad_unicode == "error":
            raise BadRecord(f"invalid UTF-8 at byte {e.start} ({e.reason}); --bad-unicode replace to "
                            f"substitute U+FFFD") from None
        line = raw.decode("utf-8", errors="replace")
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise BadRecord(f"malformed JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise BadRecord(f"expected a JSON object, got {type(rec).__name__}")
    escape = False
    if ("\\u" in line and _SURROGATE_ESCAPE.search(line)
            and _SURROGATE.search(json.dumps(rec, ensure_ascii=False))):
        if args.bad_unicode == "error":
            raise BadRecord("lone surrogate escape (e.g. \\ud800) in the record; --bad-unicode replace "
                            "or keep")
        if args.bad_unicode == "replace":
            rec = _fix_surrogates(rec)
        else:
            escape = True
    try:
        text = _get(rec, args.text_field)
    except KeyError:
        raise BadRecord(f"missing text field {args.text_field!r}") from None
    if not isinstance(text, str):
        raise BadRecord(f"field {args.text_field!r} must be a string, got {type(text).__name__}")
    if escape:
        text = _SURROGATE.sub("\ufffd", text)
    return rec, text, escape


class _Errors:
    """The --on-error policy: raise (one line), skip (count) or quarantine (count and write)."""

    def __init__(self, args: argparse.Namespace, enabled: bool = True):
        self.args, self.count, self.out, self._ctx = args, 0, None, None
        if args.on_error == "quarantine" and enabled:
            if args.quarantine is None:
                raise UsageError("--on-error quarantine needs --quarantine FILE")
            self._ctx = _AtomicOutput(args.quarantine)
            self.out = self._ctx.__enter__()
        elif args.quarantine is not None and args.on_error != "quarantine":
            raise UsageError("--quarantine FILE is only used with --on-error quarantine")

    def bad(self, lineno: int, raw: bytes, reason: str) -> None:
        if self.args.on_error == "raise":
            raise UsageError(f"{self.args.input}: line {lineno}: {reason} (--on-error skip or quarantine "
                             f"to go on)")
        self.count += 1
        if self.out is not None:
            self.out.write(json.dumps({"line": lineno, "error": reason,
                                       "raw": raw.decode("utf-8", errors="replace").rstrip("\n")},
                                      ensure_ascii=True) + "\n")

    def close(self, ok: bool) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(None if ok else RuntimeError, None, None)
            self._ctx = None


def _records(args: argparse.Namespace, errors: _Errors) -> Iterator[_Record]:
    """Every usable, non-blank line; bad ones go to the --on-error policy with their line number."""
    fh = _open_in(args.input)
    try:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                rec, text, escape = _parse(raw, args)
            except BadRecord as e:
                errors.bad(lineno, raw, str(e))
                continue
            yield _Record(lineno, rec, text, escape)
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise UsageError(f"{args.input}: cannot decompress ({e})") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def _hk_options(args: argparse.Namespace) -> dict[str, Any]:
    kw = dict(tokenizer=args.tokenizer, n_trunc=args.n_trunc, min_tokens=args.min_tokens,
              estimator=args.estimator, overlap=args.overlap)
    try:
        check_tokenizer(args.tokenizer)
        hk("", **kw)  # validate the options before reading anything
    except (ValueError, TypeError, ImportError) as e:
        raise UsageError(str(e)) from None
    return kw


def _scored(args: argparse.Namespace, errors: _Errors) -> Iterator[tuple[_Record, float | None]]:
    """Stream (record, score), in order, scoring in ``args.jobs`` processes."""
    kw = _hk_options(args)
    buf: deque[_Record] = deque()

    def texts() -> Iterator[str]:
        for r in _records(args, errors):
            buf.append(r)
            yield r.text

    for score in iter_scores(texts(), n_jobs=args.jobs, **kw):
        yield buf.popleft(), score


def _progress(it: Any, args: argparse.Namespace, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, unit=" docs", disable=args.quiet or not sys.stderr.isatty(), leave=False)


class _AtomicOutput:
    """Write text to a temporary file beside ``path`` (compressed by the extension of ``path``);
    rename on success, delete on failure."""

    def __init__(self, path: Path):
        self.path = path
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"output folder {str(parent)!r} does not exist")
        try:
            fd, self.tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as e:
            raise UsageError(f"cannot write to {str(parent)!r}: {e.strerror or e}") from None
        raw = os.fdopen(fd, "wb")
        ext = _compression(str(path))
        self._raw = raw
        if ext == ".zst":
            try:
                binary: Any = _zstd().ZstdCompressor().stream_writer(raw)
            except UsageError:
                raw.close()
                os.unlink(self.tmp)
                raise
        elif ext == ".gz":
            binary = gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0)
        elif ext == ".bz2":
            binary = bz2.BZ2File(raw, "wb")
        elif ext == ".xz":
            binary = lzma.LZMAFile(raw, "wb")
        else:
            binary = raw
        self.fh = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")

    def __enter__(self) -> IO[str]:
        return self.fh

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.fh.close()
        finally:
            if not self._raw.closed:
                self._raw.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            os.unlink(self.tmp)


def _dump(r: _Record, args: argparse.Namespace, score: float | None) -> str:
    if args.attributes:
        try:
            rid = _get(r.rec, args.id_field)
        except KeyError:
            rid = r.lineno
        out = {"id": rid, "attributes": {args.score_field: [[0, len(r.text), score]]}}
        return json.dumps(out, ensure_ascii=r.escape) + "\n"
    r.rec[args.score_field] = score
    return json.dumps(r.rec, ensure_ascii=r.escape) + "\n"


def _summary(args: argparse.Namespace, errors: _Errors, what: str) -> None:
    bad = ""
    if errors.count:
        bad = f"; {errors.count} bad record(s) " + ("quarantined -> " + str(args.quarantine)
                                                    if args.on_error == "quarantine" else "skipped")
    print(f"entropy-filter: {what}{bad} -> {args.output}", file=sys.stderr)


def _with_errors(args: argparse.Namespace, body: Any, enabled: bool = True) -> int:
    errors = _Errors(args, enabled)
    ok = False
    try:
        body(errors)
        ok = True
    finally:
        errors.close(ok)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    def body(errors: _Errors) -> None:
        n = n_scored = 0
        with _AtomicOutput(args.output) as out:
            for r, score in _progress(_scored(args, errors), args, "scoring"):
                out.write(_dump(r, args, score))
                n += 1
                n_scored += score is not None
        _summary(args, errors, f"scored {n_scored}/{n} documents ({n - n_scored} too short: null)")
    return _with_errors(args, body)


def _cmd_filter(args: argparse.Namespace) -> int:
    floor = args.floor
    if args.min_keep < 0:
        raise UsageError("--min-keep: expected an integer >= 0")
    if args.threshold is not None:
        def body(errors: _Errors) -> None:
            n = kept = unscored = 0
            with _AtomicOutput(args.output) as out:
                for r, score in _progress(_scored(args, errors), args, "filtering"):
                    n += 1
                    unscored += score is None
                    if score is not None and score >= args.threshold and (floor is None or score >= floor):
                        out.write(_dump(r, args, score))
                        kept += 1
            _summary(args, errors, f"kept {kept}/{n} documents (score >= {args.threshold}; {unscored} "
                                   f"unscored, never kept)")
        return _with_errors(args, body)
    if args.input == "-":
        raise UsageError("--keep-frac needs two passes over the input: give a file, not '-' "
                         "(or use --threshold)")

    def body2(errors: _Errors) -> None:
        # pass 1: scores and domains only (bad records go to the policy here, once)
        scores: list[float | None] = []
        domains: list[Any] = []
        lines: list[int] = []
        for r, score in _progress(_scored(args, errors), args, "scoring"):
            if args.domain_field is not None:
                try:
                    dom = _get(r.rec, args.domain_field)
                except KeyError:
                    raise UsageError(f"{args.input}: line {r.lineno}: missing domain field "
                                     f"{args.domain_field!r}") from None
                domains.append(json.dumps(dom, sort_keys=True) if isinstance(dom, (dict, list)) else dom)
            else:
                domains.append(None)
            scores.append(None if score is not None and floor is not None and score < floor else score)
            lines.append(r.lineno)
        # per-domain top-k, the library's null policy (unscored records never fill a quota)
        sel = selection(scores, scores, domains, args.keep_frac, min_keep=args.min_keep)
        keep = {lines[i]: scores[i] for i in sel.kept}
        # pass 2: stream the kept rows (bad records were reported in pass 1)
        quiet = _Errors(argparse.Namespace(**{**vars(args), "on_error": "skip", "quarantine": None}), False)
        with _AtomicOutput(args.output) as out:
            for r in _records(args, quiet):
                if r.lineno in keep:
                    out.write(_dump(r, args, keep[r.lineno]))
        what = "unscored or below the floor" if floor is not None else "unscored"
        _summary(args, errors, f"kept {len(sel.kept)}/{len(scores)} documents (keep_frac {args.keep_frac} "
                               f"per domain; {sel.n_unscored} {what}, never kept)")
    return _with_errors(args, body2)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("neurips26 entropy-filter", _main, argv)


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd is None:
        raise UsageError("a sub-command is required: score or filter")
    return _cmd_score(args) if args.cmd == "score" else _cmd_filter(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
