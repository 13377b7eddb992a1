"""``neurips26 bench entropy_filter``: our SAM Ĥ_K against ProcessEntropy + LCSFinder, the naive
definition, ProcessEntropy's numba PythonOnly path, pydivsufsort (overlap), zlib and Gopher rules.

Data: 1,000 documents of 1,500 fast tokens sampled from the seeded generation-0 quick generator
(the pydoc_data corpus has only ~65.7k fast tokens), a 200k-token stream of distinct such documents
concatenated (never copies), and period-3 sequences for the periodic target. Every row is timed by
``harness.bench.time_interleaved`` (ours and the anchor in interleaved rounds after a warm-up round;
medians, p90 and n in the row's note); tokenisation is timed separately. Targets (work order): SAM ≥ 1×
LCSFinder on natural text, ≥ 5× on periodic text, ≥ 100× the naive definition (at N = 1,500),
time(200k)/time(20k) ≤ 15, cost per token at 1M ≤ 2× that at 10k and flat to 10M (issue 30). The scaling
rows are built for a loaded box: each value is the median of ratios computed within one interleaved round
(both sizes share that round's load), the short input repeated within a call, the process CPU time of the
same rounds in a row of its own, and the 1-minute load average in the note. ``ctx.scale == "smoke"``:
20 documents of 300 tokens, a 6k stream (seconds).

Resumable: each section's rows are logged as they complete and saved to ``out_dir/bench_rows.partial.json``
(keyed by git sha and scale); a rerun into the same folder on the same code reuses the finished sections.
The anchors that are pip packages come with ``pip install 'neurips26[bench]'``; a row whose anchor is
not installed names it.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from neurips26.entropy_filter.collapse import prompts
from neurips26.entropy_filter.corpus import N_DOMAINS, pydoc_topics
from neurips26.entropy_filter.count_lm import TrigramLM, pretraining_docs
from neurips26.entropy_filter.estimators import entropy_rate, hk
from neurips26.entropy_filter.filters import gopher_pass, zlib_ratio
from neurips26.entropy_filter.match_lengths import (HAVE_DIVSUFSORT, HAVE_NUMBA, SA_MIN_N, lpf_lambdas, match_lengths,
                                                    naive_lambdas, suffix_array)
from neurips26.entropy_filter.tokenize import (dense_ids, fast_tokenize, hashed_ids, reported_tokenize,
                                               unicode_tokenize)
from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import Timing, stat_note, time_interleaved
from neurips26.harness.run import git_sha

BENCH_EXTRA = "pip install 'neurips26[bench]'"
LCS_NAME = "ProcessEntropy+LCSFinder"


@dataclass(frozen=True)
class Sizes:
    """The bench's workload: documents, their length, the stream, periodic sequences, naive documents,
    the subset for the slower paths, and the timed rounds."""

    n_docs: int = 1000
    doc_tokens: int = 1500
    stream: int = 200_000
    periodic_n: int = 3000
    n_periodic: int = 100
    n_naive: int = 50
    n_sub: int = 200          # documents for the pure-Python SAM, overlap, tokenisation and scoring rows
    n_slow: int = 20          # documents / sequences for LCSFinder's periodic and the PythonOnly rows
    rounds: int = 3


QUICK = Sizes()
SMOKE = Sizes(n_docs=20, doc_tokens=300, stream=6000, periodic_n=300, n_periodic=5, n_naive=3, n_sub=10,
              n_slow=3, rounds=2)


def make_documents(n_docs: int = QUICK.n_docs, n_tokens: int = QUICK.doc_tokens, seed: int = 0) -> list[str]:
    """``n_docs`` texts of at least ``n_tokens`` fast tokens from the seeded generation-0 generator."""
    topics = pydoc_topics()
    vocab, docs = pretraining_docs(topics, 120, N_DOMAINS, 1500)
    lm = TrigramLM(vocab, N_DOMAINS).fit(docs)
    d, t = prompts(N_DOMAINS, 10, 1, len(topics))
    reps = -(-n_docs // d.size)
    d, t = np.tile(d, reps)[:n_docs], np.tile(t, reps)[:n_docs]
    ids = lm.sample(d, t, int(n_tokens * 1.6), 0.8, np.random.default_rng(seed))
    out = []
    for row in ids:
        text = vocab.decode(row)
        toks = fast_tokenize(text)
        while len(toks) < n_tokens:  # rare: too much punctuation; extend with the next document's text
            text += " " + vocab.decode(ids[(len(out) + 1) % len(ids)])
            toks = fast_tokenize(text)
        out.append(text)
    return out


# letter-for-letter maps of the generated English into other scripts (no multilingual corpus offline)
_SCRIPTS = {
    "cyrillic": dict(zip("abcdefghijklmnopqrstuvwxyz", "абцдефгхийклмнопярстувшxыз")),
    "greek": dict(zip("abcdefghijklmnopqrstuvwxyz", "αβψδεφγηιξκλμνοπϙρστθωςχυζ")),
    "devanagari": dict(zip("abcdefghijklmnopqrstuvwxyz", "अबचदएफगहइजकलमनओपक़रसतउवशक्षयज़")),
}


def multilingual(texts: list[str]) -> list[str]:
    """The generated documents transliterated letter for letter into Cyrillic, Greek and Devanagari, and
    into Han (each word -> one CJK character, no spaces: Japanese/Chinese-style), in turn: the same
    repetition structure in scripts the ASCII path cannot see."""
    out = []
    for k, t in enumerate(texts):
        kind = k % 4
        if kind == 3:
            out.append("".join(chr(0x4E00 + (hash_word(w) % 20000)) for w in t.split()))
        else:
            table = list(_SCRIPTS.values())[kind]
            out.append("".join(table.get(c, c) for c in t.lower()))
    return out


def hash_word(w: str) -> int:
    h = 0
    for ch in w:
        h = (h * 131 + ord(ch)) % 1_000_003
    return h


def _hf_tokenizer(texts: list[str]) -> Any:
    """A byte-level BPE (vocab 2,000) trained on the bench texts (offline), or None without tokenizers."""
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    except ImportError:
        return None
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def _lcsfinder() -> tuple[Any, str]:
    try:
        from ProcessEntropy.SelfEntropy import self_entropy_rate

        return self_entropy_rate, ""
    except Exception as e:  # ImportError, or LCSFinder's C++ build missing
        return None, (f"ProcessEntropy/LCSFinder not importable ({type(e).__name__}: {e}); {BENCH_EXTRA} "
                      f"(ProcessEntropy>=1.1, LCSFinder>=1.1; LCSFinder builds with CPPFLAGS='-include limits' "
                      f"on GCC 12+)")


def _python_only() -> tuple[Any, str]:
    try:
        from ProcessEntropy.CrossEntropyPythonOnly import get_all_lambdas

        return get_all_lambdas, ""
    except Exception as e:
        return None, (f"ProcessEntropy PythonOnly path not importable ({type(e).__name__}: {e}); "
                      f"{BENCH_EXTRA} (ProcessEntropy>=1.1)")


def _gopher() -> tuple[Callable[[str], Any], str, str]:
    """(scorer, anchor name, note): datatrove's GopherRepetitionFilter, or our rules when it is absent."""
    try:
        from datatrove.data import Document
        from datatrove.pipeline.filters import GopherRepetitionFilter

        f = GopherRepetitionFilter()
        f.filter(Document(text="a probe sentence for the word tokenizer.", id="0"))  # needs spacy
        return (lambda t: f.filter(Document(text=t, id="0"))), "datatrove GopherRepetitionFilter", ""
    except Exception as e:
        return gopher_pass, "Gopher repetition rules (our implementation)", \
            (f"datatrove's GopherRepetitionFilter not usable ({type(e).__name__}: {str(e)[:80]}; pip install "
             f"datatrove spacy): anchored on our own Gopher rules")


_SCALE = {"s": 1.0, "ms": 1e3}


def _row(name: str, ours: Timing, anchor: Timing | None, anchor_name: str, unit: str, per: float = 1.0,
         throughput: bool = False, missing: str = "", note: str = "") -> BenchRow:
    """A row from interleaved Timings: ``per / median`` items/s (throughput) or ``median / per`` in
    ``unit`` (``s``/``ms`` per item); the statistic and n in the note, and why the anchor is missing."""
    def value(t: Timing | None) -> float | None:
        if t is None:
            return None
        return per / t.median if throughput else t.median / per * _SCALE.get(unit.split("/")[0], 1.0)

    text = stat_note(ours, anchor, "ms")
    if anchor is None and missing:
        text = f"{anchor_name} not run: {missing}; {text}"
    if note:
        text = f"{note}; {text}"
    return BenchRow(name, value(ours), value(anchor), anchor_name, unit,  # type: ignore[arg-type]
                    "higher" if throughput else "lower", text)


class _Sections:
    """Checkpointed sections: rows logged as they complete and saved after each section, so a killed
    bench rerun into the same folder on the same code (git sha, scale) redoes only unfinished sections."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.path = Path(ctx.out_dir) / "bench_rows.partial.json"
        self.key = f"{git_sha()}|{ctx.scale}"
        self.done: dict[str, list[dict[str, Any]]] = {}
        if self.path.exists() and not self.key.startswith("None") and "-dirty" not in self.key:
            try:
                saved = json.loads(self.path.read_text())
            except (OSError, ValueError):
                saved = {}
            if saved.get("key") == self.key:
                self.done = saved.get("sections", {})
        self.rows: list[BenchRow] = []

    def run(self, name: str, fn: Callable[[], list[BenchRow]]) -> None:
        if name in self.done:
            rows = [BenchRow(**{k: v for k, v in d.items() if k != "ratio"}) for d in self.done[name]]
            self.ctx.log(f"entropy_filter bench: section {name!r} reused from {self.path.name}")
        else:
            self.ctx.log(f"entropy_filter bench: section {name!r}")
            rows = fn()
            self.done[name] = [asdict(r) for r in rows]
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps({"key": self.key, "sections": self.done}, indent=1, default=float))
            tmp.replace(self.path)
        for r in rows:
            ratio = f"{r.ratio:.3g}x" if r.ratio is not None else "—"
            self.ctx.log(f"  {r.name}: {r.ours:.4g} vs {r.anchor if r.anchor is None else f'{r.anchor:.4g}'} "
                         f"{r.unit} ({ratio})")
        self.rows.extend(rows)


def _per_token_ns(t: Timing, n: int) -> float:
    return t.median / n * 1e9


def _load() -> float:
    """The 1-minute load average (what else the box is running while a row is timed)."""
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - not on Linux/macOS
        return float("nan")


class _CPU:
    """A callable for ``time_interleaved`` that also records the process CPU time of each of its calls
    (``reps`` calls of ``fn`` averaged), so a row reports CPU time from the same interleaved rounds as the
    wall time. On a loaded box the wall time of a long call includes the time slices given to other jobs,
    which a short call mostly escapes; CPU time does not (only cache and memory contention remain)."""

    def __init__(self, fn: Callable[[], Any], reps: int = 1) -> None:
        self.fn, self.reps, self.cpu = fn, reps, []  # type: list[float]

    def __call__(self) -> None:
        t0 = time.process_time()
        for _ in range(self.reps):
            self.fn()
        self.cpu.append((time.process_time() - t0) / self.reps)

    def timing(self, warmup: int = 1) -> Timing:
        return Timing(tuple(self.cpu[warmup:]))


def _pair_ratios(big: Timing, n_big: int, small: Timing, n_small: int, reps_small: int = 1) -> list[float]:
    """Per-token cost ratio big/small within each interleaved round (both calls of a round share its load)."""
    return [(b / n_big) / (s / reps_small / n_small) for b, s in zip(big.samples, small.samples)]


def per_token_rows(big: np.ndarray, docs: list[np.ndarray], z: Sizes, lcs: Any, lcs_note: str, backend: str,
                   have_sa: bool) -> list[BenchRow]:
    """Cost per token of the default backend from 10k to 1M and 10M tokens (issue 30: the 1M-token document
    within 2x the per-token cost of a 10k one, flat to 10M), robust to a loaded box: the sizes run in
    interleaved rounds (``time_interleaved``), the small input ``reps`` times per call so both calls of a
    round last long enough to share its load; each row's value is the median over rounds of the ratio
    computed within one round (wall clock), with the process-CPU-time ratio of the same rounds in a row of its
    own, and the 1-minute load average before and after. ``big``: the natural token stream (dense ids)."""
    auto = lambda d: entropy_rate(d)  # noqa: E731
    ns = _per_token_ns
    rows = []
    n_big = min(big.size, z.stream * 5)
    small_n = n_big // 100
    xb, xs = big[:n_big], big[:small_n]
    kb, ks = (f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1000:g}k" for n in (n_big, small_n))
    R5 = max(z.rounds, 5)  # the flatness ratios are the target: 5 interleaved rounds
    reps = 50             # the small input 50 times per call (0.5M tokens): comparable durations
    be_b = "suffix array" if have_sa and n_big >= SA_MIN_N else backend + " SAM"
    be_s = "suffix array" if have_sa and small_n >= SA_MIN_N else backend + " SAM"

    def flat_rows(label: str, n_far: int, fb: _CPU, fs: _CPU, tb: Timing, ts: Timing, load0: float, target: str,
                  anchor_wall: float | None = None, anchor_cpu: float | None = None, extra: str = "") -> list[BenchRow]:
        wall = _pair_ratios(tb, n_far, ts, small_n, reps)
        cb, cs = fb.timing(), fs.timing()
        cpu = _pair_ratios(cb, n_far, cs, small_n)  # _CPU already averages its reps
        common = (f"{ks}: {be_s}, {label}: {be_b}; {R5} interleaved rounds, the {ks} input {reps}x per call; "
                  f"load {load0:.1f} -> {_load():.1f} (1-min average, {os.cpu_count()} CPUs){extra}")
        return [
            BenchRow(f"cost per token: N = {label} vs N = {ks}, default backend (ns/token ratio, wall clock)",
                     statistics.median(wall), anchor_wall, LCS_NAME if anchor_wall else "—", "x per-token cost",
                     "lower", f"{target}; median of the per-round ratios {[round(r, 2) for r in wall]}; wall "
                              f"{ns(ts, small_n * reps):.0f} -> {ns(tb, n_far):.0f} ns/token (medians); {common}"),
            BenchRow(f"cost per token: N = {label} vs N = {ks}, default backend (ns/token ratio, process CPU time)",
                     statistics.median(cpu), anchor_cpu, LCS_NAME if anchor_cpu else "—", "x per-token cost",
                     "lower", f"{target}; the same rounds as the wall-clock row; median of the per-round ratios "
                              f"{[round(r, 2) for r in cpu]}; CPU {ns(cs, small_n):.0f} -> {ns(cb, n_far):.0f} "
                              f"ns/token (medians); {common}")]

    load0 = _load()
    fb, fs = _CPU(lambda: auto(xb)), _CPU(lambda: auto(xs), reps)
    tb, ts = time_interleaved(fb, fs, rounds=R5)
    lw = lc = None
    extra = f"; {LCS_NAME} not run: {lcs_note}"
    if lcs:  # LCSFinder at 1M takes ~25 s on a quiet box: one timed round, no warm-up
        gb, gs = _CPU(lambda: lcs(xb)), _CPU(lambda: lcs(xs), reps)
        lb, ls = time_interleaved(gb, gs, rounds=1, warmup=0)
        lw = _pair_ratios(lb, n_big, ls, small_n, reps)[0]
        lc = _pair_ratios(gb.timing(0), n_big, gs.timing(0), small_n)[0]
        extra = (f"; {LCS_NAME} (one round): wall {ns(ls, small_n * reps):.0f} -> {ns(lb, n_big):.0f} ns/token")
    rows += flat_rows(kb, n_big, fb, fs, tb, ts, load0, "target <= 2 (issue 30)", lw, lc, extra)
    rows.append(_row(f"Ĥ_K of a {kb}-token stream: default backend ({be_b}) vs LCSFinder", tb,
                     lb if lcs else None, LCS_NAME, "s", missing=lcs_note, note="LCSFinder one round"))
    # 10x further ("flat to 10M"): copies of the natural stream on disjoint id ranges, so no match crosses a
    # copy (each copy's statistics stay natural; the vocabulary grows with the copies)
    n_far = 10 * n_big
    shift = int(big.max()) + 1
    copies = -(-n_far // big.size)
    x_far = np.concatenate([big + r * shift for r in range(copies)])[:n_far]
    kf = f"{n_far / 1e6:g}M" if n_far >= 1_000_000 else f"{n_far / 1000:g}k"
    load0 = _load()
    ff, fs10 = _CPU(lambda: auto(x_far)), _CPU(lambda: auto(xs), reps)
    tf, ts10 = time_interleaved(ff, fs10, rounds=R5)
    rows += flat_rows(kf, n_far, ff, fs10, tf, ts10, load0, "target <= 2 (issue 30: flat to 10M)",
                      extra=f"; {copies} copies of the {big.size / 1e6:g}M-token stream on disjoint ids")
    if have_sa and HAVE_DIVSUFSORT:
        # the suffix-array construction alone at 10M: SA-IS on the ids (default) vs libdivsufsort on their bytes
        xf32 = x_far.astype(np.int32)
        ci, cd = _CPU(lambda: suffix_array(xf32, "sais")), _CPU(lambda: suffix_array(xf32, "divsufsort"))
        ti, td = time_interleaved(ci, cd, rounds=z.rounds)
        rows.append(_row(f"suffix array of {kf} tokens: SA-IS on the ids (ours, default) vs libdivsufsort on a "
                         f"byte code", ti, td, "pydivsufsort (1 OpenMP thread)", "s",
                         note=f"why SA-IS replaced libdivsufsort; CPU {ns(ci.timing(), n_far):.0f} vs "
                              f"{ns(cd.timing(), n_far):.0f} ns/token (medians), load {_load():.1f}"))
        del xf32
    del x_far
    if have_sa and backend == "numba":
        # each construction on its own over the same sizes, and the SA against the SAM at N = 1M
        sb, ss, mb, ms = time_interleaved(lambda: match_lengths(xb, backend="sa"),
                                          lambda: match_lengths(xs, backend="sa"),
                                          lambda: match_lengths(xb, backend="numba"),
                                          lambda: match_lengths(xs, backend="numba"), rounds=R5)
        rows.append(BenchRow(f"cost per token N = {kb} vs {ks}: suffix array (ours) vs SAM (ours)",
                             statistics.median(_pair_ratios(sb, n_big, ss, small_n)),
                             statistics.median(_pair_ratios(mb, n_big, ms, small_n)),
                             "numba SAM (previous default)", "x per-token cost", "lower",
                             f"medians of the per-round ratios; suffix array {ns(ss, small_n):.0f} -> "
                             f"{ns(sb, n_big):.0f} ns/token, SAM {ns(ms, small_n):.0f} -> {ns(mb, n_big):.0f} "
                             f"ns/token; {stat_note(sb, mb, 'ms')}"))
        rows.append(_row(f"match lengths of {kb} tokens: suffix array vs SAM", sb, mb,
                         "numba SAM (previous default)", "s",
                         note="SA-IS + Φ-PLCP + LCP gather + two LCP-interval sweeps"))
        d15 = docs[:z.n_sub]
        c_sa = _CPU(lambda: [match_lengths(d, backend="sa") for d in d15])
        c_sam = _CPU(lambda: [match_lengths(d, backend="numba") for d in d15])
        t_sa15, t_sam15 = time_interleaved(c_sa, c_sam, rounds=z.rounds)
        rows.append(_row(f"match lengths of {len(d15)} docs × {z.doc_tokens:,} tokens: suffix array vs SAM",
                         t_sa15, t_sam15, "numba SAM (the default below SA_MIN_N)", "docs/s", len(d15), True,
                         note=f"why the default keeps the in-cache SAM below {SA_MIN_N:,} tokens; CPU "
                              f"{c_sa.timing().median / len(d15) * 1e3:.3f} vs "
                              f"{c_sam.timing().median / len(d15) * 1e3:.3f} ms/doc (medians)"))
    return rows


def bench(ctx: RunContext) -> list[BenchRow]:
    z = SMOKE if ctx.scale == "smoke" else QUICK
    sec = _Sections(ctx)
    backend = "numba" if HAVE_NUMBA else "python"
    have_sa = HAVE_NUMBA   # the suffix-array backend: SA-IS in numba (pydivsufsort only for the anchor rows)
    ctx.log(f"entropy_filter bench: sampling {z.n_docs} documents (SAM backend: {backend}; suffix array: "
            f"{'yes' if have_sa else 'no'})")
    texts = make_documents(z.n_docs, z.doc_tokens)
    toks = [fast_tokenize(t, z.doc_tokens) for t in texts]
    docs = [dense_ids(tk) for tk in toks]
    n_tok = sum(d.size for d in docs)
    lcs, lcs_note = _lcsfinder()
    sub, slow = docs[:z.n_sub], docs[:z.n_slow]
    R = z.rounds

    def run_all(f: Callable[[Any], Any], xs: list[Any]) -> Callable[[], None]:
        return lambda: [f(x) for x in xs] and None

    sam = lambda d: entropy_rate(d, backend=backend)  # noqa: E731  (documents: below SA_MIN_N, auto = SAM)
    auto = lambda d: entropy_rate(d)  # noqa: E731

    def tokenisation() -> list[BenchRow]:
        rows = []
        t_fast, t_rep = time_interleaved(run_all(lambda t: dense_ids(fast_tokenize(t, z.doc_tokens)), texts[:z.n_sub]),
                                         run_all(lambda t: hashed_ids(reported_tokenize(t)[:z.doc_tokens]),
                                                 texts[:z.n_sub]), rounds=R)
        rows.append(_row("tokenisation: fast path vs reported path (TweetTokenizer + FNV)", t_fast, t_rep,
                         "reported tokenisation", "docs/s", z.n_sub, True,
                         note=f"per {z.doc_tokens:,}-token document; not included in the match-length rows"))
        # the Unicode path: on ASCII text it takes the fast path's code; on other scripts it normalises
        t_uni, t_fast2 = time_interleaved(run_all(lambda t: unicode_tokenize(t, z.doc_tokens), texts[:z.n_sub]),
                                          run_all(lambda t: fast_tokenize(t, z.doc_tokens), texts[:z.n_sub]), rounds=R)
        rows.append(_row("tokenisation of English text: unicode path vs fast (ASCII) path", t_uni, t_fast2,
                         "fast path ([a-z0-9] runs)", "docs/s", z.n_sub, True,
                         note="pure-ASCII text takes the fast path's code; these documents hold typographic "
                              "punctuation (’ “ — …), so they are NFKC-normalised and casefolded"))
        return rows

    def multilingual_rows() -> list[BenchRow]:
        rows = []
        multi = multilingual(texts[:z.n_sub])
        t_mu, t_mr = time_interleaved(run_all(lambda t: unicode_tokenize(t, z.doc_tokens), multi),
                                      run_all(lambda t: reported_tokenize(t)[:z.doc_tokens], multi), rounds=R)
        rows.append(_row("tokenisation of multilingual text (Cyrillic/Greek/Devanagari/Han): unicode path vs "
                         "reported path (TweetTokenizer)", t_mu, t_mr, "reported tokenisation", "docs/s", z.n_sub,
                         True, note="NFKC + casefold + every script; the fast path finds no token here"))
        multi_ids = [dense_ids(unicode_tokenize(t, z.doc_tokens)) for t in multi]
        t_ms, t_ml = time_interleaved(run_all(sam, multi_ids), run_all(lcs, multi_ids) if lcs else None, rounds=R)
        rows.append(_row(f"Ĥ_K of {len(multi_ids)} multilingual docs (unicode ids): SAM vs {LCS_NAME}", t_ms, t_ml,
                         LCS_NAME, "docs/s", len(multi_ids), True, lcs_note, "target >= 1x"))
        return rows

    def hf_rows() -> list[BenchRow]:
        tok = _hf_tokenizer(texts[:z.n_sub])
        if tok is None:
            return [BenchRow("Ĥ_K on HF tokenizer ids", 0.0, None, LCS_NAME, "docs/s", "higher",
                             "tokenizers not installed (pip install tokenizers)")]
        hf_texts = texts[:z.n_sub]

        def hf_anchor() -> None:  # what a ProcessEntropy user does: encode the document, score 1,500 ids
            for t in hf_texts:
                lcs(np.asarray(tok.encode(t).ids[:z.doc_tokens], dtype=np.int64))
        t_hf, t_hfa = time_interleaved(run_all(lambda t: hk(t, tokenizer=tok, n_trunc=z.doc_tokens, backend=backend),
                                               hf_texts), hf_anchor if lcs else None, rounds=R)
        return [_row("Ĥ_K on HF tokenizer ids (byte-level BPE, incl. encoding): hk(tokenizer=...) vs "
                     f"encode + {LCS_NAME}", t_hf, t_hfa, LCS_NAME, "docs/s", len(hf_texts), True, lcs_note,
                     f"first {z.doc_tokens:,} ids; hk encodes a prefix only")]

    def natural() -> list[BenchRow]:
        rows = []
        t_sam, t_lcs = time_interleaved(run_all(sam, docs), run_all(lcs, docs) if lcs else None, rounds=R)
        rows.append(_row(f"Ĥ_K of {z.n_docs:,} docs × {z.doc_tokens:,} tokens: SAM ({backend}) vs {LCS_NAME}",
                         t_sam, t_lcs, LCS_NAME, "docs/s", z.n_docs, True, lcs_note, "target >= 1x"))
        rows.append(_row("same, in tokens/s", t_sam, t_lcs, LCS_NAME, "tokens/s", n_tok, True, lcs_note))
        if backend == "numba":
            py = lambda d: entropy_rate(d, backend="python")  # noqa: E731
            t_py, t_lcs_sub = time_interleaved(run_all(py, sub), run_all(lcs, sub) if lcs else None, rounds=R)
            rows.append(_row(f"pure-Python SAM backend (no numba) vs {LCS_NAME}", t_py, t_lcs_sub, LCS_NAME,
                             "docs/s", len(sub), True, lcs_note,
                             f"the fallback when numba is absent; {len(sub)} documents"))
        return rows

    def periodic() -> list[BenchRow]:
        per = [np.tile(np.random.default_rng(k).permutation(3), z.periodic_n // 3) for k in range(z.n_periodic)]
        t_sam_p, t_lcs_p = time_interleaved(run_all(sam, per[:z.n_slow]),
                                            run_all(lcs, per[:z.n_slow]) if lcs else None, rounds=R)
        return [_row(f"Ĥ_K of period-3 sequences × {z.periodic_n} tokens: SAM vs LCSFinder", t_sam_p, t_lcs_p,
                     LCS_NAME, "ms/sequence", z.n_slow, missing=lcs_note, note=f"target >= 5x; {z.n_slow} sequences")]

    def naive() -> list[BenchRow]:
        # the naive definition on n_naive documents at N = doc_tokens (one timed round, no warm-up: slow)
        naive_docs = docs[:z.n_naive]
        t_ml, t_naive = time_interleaved(run_all(lambda d: match_lengths(d, backend=backend), naive_docs),
                                         run_all(naive_lambdas, naive_docs), rounds=1, warmup=0)
        return [_row(f"match lengths at N = {z.doc_tokens:,} ({z.n_naive} docs): SAM vs naive definition", t_ml,
                     t_naive, "naive pure-Python definition", "ms/doc", z.n_naive,
                     note="target >= 100x; one round (the naive definition is quadratic)")]

    def python_only() -> list[BenchRow]:
        po, po_note = _python_only()

        def run_po() -> None:
            for x in slow:
                n = x.size
                po(x, x, np.arange(n), np.zeros(n))
        t_sam_s, t_po = time_interleaved(run_all(sam, slow), run_po if po is not None else None, rounds=R)
        return [_row(f"Ĥ_K of {len(slow)} docs: SAM vs ProcessEntropy numba PythonOnly lambdas", t_sam_s, t_po,
                     "ProcessEntropy PythonOnly (numba)", "docs/s", len(slow), True, po_note)]

    big = dense_ids([w for tk in toks for w in tk])

    def stream_rows() -> list[BenchRow]:
        # the stream of distinct documents, and linear scaling (default backend: the SA from SA_MIN_N tokens)
        stream = big[:z.stream]
        if stream.size < z.stream:
            raise RuntimeError(f"bench stream has only {stream.size} tokens")
        s20, s100 = stream[:z.stream // 10], stream[:z.stream // 2]
        load0 = _load()
        c200, c20 = _CPU(lambda: auto(stream)), _CPU(lambda: auto(s20))
        t200, t20, l200, l20 = time_interleaved(
            c200, c20, (lambda: lcs(stream)) if lcs else None, (lambda: lcs(s20)) if lcs else None, rounds=R)
        pair = lambda a, b: statistics.median(x / y for x, y in zip(a.samples, b.samples))  # noqa: E731
        load_note = (f"CPU-time ratio {pair(c200.timing(), c20.timing()):.3g}; load {load0:.1f} -> {_load():.1f} "
                     f"(1-min average, {os.cpu_count()} CPUs)")
        k, k10, k2 = (f"{n / 1000:g}k" for n in (z.stream, z.stream // 10, z.stream // 2))
        rows = [_row(f"Ĥ_K of a {k}-token stream: default backend vs LCSFinder", t200, l200, LCS_NAME, "s",
                     missing=lcs_note, note=f"default = suffix array from {SA_MIN_N:,} tokens"
                     if have_sa else "default = pure-Python SAM (numba missing)")]
        ratio_note = stat_note(t200, l200, "ms")
        rows.append(BenchRow(f"linear scaling: time({k}) / time({k10})", pair(t200, t20),
                             pair(l200, l20) if l200 and l20 else None, LCS_NAME, "x time for 10x tokens",
                             "lower", (f"target <= 15 (10 = linear); median of the per-round ratios (wall); "
                                       f"{load_note}; {ratio_note}" if lcs else
                                       f"{LCS_NAME} not run: {lcs_note}; {load_note}; {ratio_note}")))
        # the SAM alone past its cache cliff (why the default switches to the suffix array)
        m200, m100 = time_interleaved(lambda: sam(stream), lambda: sam(s100), rounds=R)
        rows.append(BenchRow(f"SAM past the cache cliff: time({k}) / time({k2}), SAM only",
                             pair(m200, m100), None, "—", "x time for 2x tokens", "lower",
                             f"diagnostic, no anchor: 2 = linear; the SAM's hash table leaves L2 from ~16k tokens; "
                             f"median of the per-round ratios; {stat_note(m200, m100, 'ms')}"))
        return rows

    def per_token() -> list[BenchRow]:
        return per_token_rows(big, docs, z, lcs, lcs_note, backend, have_sa)

    def overlap() -> list[BenchRow]:
        try:
            lpf_lambdas(sub[0])
            lpf, lpf_missing = run_all(lpf_lambdas, sub), ""
        except ImportError as e:
            lpf, lpf_missing = None, f"pydivsufsort not installed ({e}); pip install 'neurips26[entropy_filter]'"
        t_ov, t_lpf = time_interleaved(run_all(lambda d: match_lengths(d, overlap=True, backend=backend), sub), lpf,
                                       rounds=R)
        return [_row("overlap=True: SAM vs pydivsufsort longest_previous_factor", t_ov, t_lpf, "pydivsufsort",
                     "docs/s", len(sub), True, lpf_missing,
                     f"overlapping matches (LZ77 longest previous factor), {len(sub)} documents; "
                     f"libdivsufsort at 1 OpenMP thread")]

    def scoring() -> list[BenchRow]:
        # model-free anchors on the same texts (tokenisation included for all three)
        tsub = texts[:z.n_sub]
        score = lambda t: entropy_rate(dense_ids(fast_tokenize(t, z.doc_tokens)), backend=backend)  # noqa: E731
        gopher, g_name, g_note = _gopher()
        t_hk, t_zlib, t_gop = time_interleaved(run_all(score, tsub), run_all(zlib_ratio, tsub), run_all(gopher, tsub),
                                               rounds=R)
        return [_row("document scoring incl. tokenisation: Ĥ_K vs zlib ratio", t_hk, t_zlib,
                     "zlib compression ratio (level 9)", "docs/s", len(tsub), True),
                _row("document scoring incl. tokenisation: Ĥ_K vs Gopher repetition rules", t_hk, t_gop, g_name,
                     "docs/s", len(tsub), True, note=g_note)]

    for name, fn in (("tokenisation", tokenisation), ("multilingual", multilingual_rows), ("hf", hf_rows),
                     ("natural", natural), ("periodic", periodic), ("naive", naive), ("python_only", python_only),
                     ("stream", stream_rows), ("per_token", per_token), ("overlap", overlap),
                     ("scoring", scoring)):
        sec.run(name, fn)
    return sec.rows
