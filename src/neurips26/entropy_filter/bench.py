"""``neurips26 bench entropy_filter``: our SAM Ĥ_K against ProcessEntropy + LCSFinder, the naive
definition, ProcessEntropy's numba PythonOnly path, pydivsufsort (overlap), zlib and Gopher rules.

Data: 1,000 documents of 1,500 fast tokens sampled from the seeded generation-0 quick generator
(the pydoc_data corpus has only ~65.7k fast tokens), a 200k-token stream of distinct such documents
concatenated (never copies), and period-3 sequences for the periodic target. Every row is timed by
``harness.bench.time_interleaved`` (ours and the anchor in interleaved rounds after a warm-up round;
medians, p90 and n in the row's note); tokenisation is timed separately. Targets (work order): SAM ≥ 1×
LCSFinder on natural text, ≥ 5× on periodic text, ≥ 100× the naive definition (at N = 1,500),
time(200k)/time(20k) ≤ 15. ``ctx.scale == "smoke"``: 20 documents of 300 tokens, a 6k stream (seconds).
The anchors that are pip packages come with ``pip install 'neurips26[bench]'``; a row whose anchor is
not installed names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from neurips26.entropy_filter.collapse import prompts
from neurips26.entropy_filter.corpus import N_DOMAINS, pydoc_topics
from neurips26.entropy_filter.count_lm import TrigramLM, pretraining_docs
from neurips26.entropy_filter.estimators import entropy_rate, hk
from neurips26.entropy_filter.filters import gopher_pass, zlib_ratio
from neurips26.entropy_filter.match_lengths import HAVE_NUMBA, lpf_lambdas, match_lengths, naive_lambdas
from neurips26.entropy_filter.tokenize import (dense_ids, fast_tokenize, hashed_ids, reported_tokenize,
                                               unicode_tokenize)
from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import Timing, stat_note, time_interleaved

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


def bench(ctx: RunContext) -> list[BenchRow]:
    z = SMOKE if ctx.scale == "smoke" else QUICK
    rows: list[BenchRow] = []
    backend = "numba" if HAVE_NUMBA else "python"
    ctx.log(f"entropy_filter bench: sampling {z.n_docs} documents (SAM backend: {backend})")
    texts = make_documents(z.n_docs, z.doc_tokens)
    toks = [fast_tokenize(t, z.doc_tokens) for t in texts]
    docs = [dense_ids(tk) for tk in toks]
    n_tok = sum(d.size for d in docs)
    lcs, lcs_note = _lcsfinder()
    sub, slow = docs[:z.n_sub], docs[:z.n_slow]
    R = z.rounds

    def run_all(f: Callable[[Any], Any], xs: list[Any]) -> Callable[[], None]:
        return lambda: [f(x) for x in xs] and None

    # tokenisation (reported separately: it can dominate)
    t_fast, t_rep = time_interleaved(run_all(lambda t: dense_ids(fast_tokenize(t, z.doc_tokens)), texts[:z.n_sub]),
                                     run_all(lambda t: hashed_ids(reported_tokenize(t)[:z.doc_tokens]),
                                             texts[:z.n_sub]), rounds=R)
    rows.append(_row("tokenisation: fast path vs reported path (TweetTokenizer + FNV)", t_fast, t_rep,
                     "reported tokenisation", "docs/s", z.n_sub, True,
                     note=f"per {z.doc_tokens:,}-token document; not included in the match-length rows"))

    sam = lambda d: entropy_rate(d, backend=backend)  # noqa: E731
    # the Unicode path: on ASCII text it takes the fast path's code; on other scripts it normalises
    t_uni, t_fast2 = time_interleaved(run_all(lambda t: unicode_tokenize(t, z.doc_tokens), texts[:z.n_sub]),
                                      run_all(lambda t: fast_tokenize(t, z.doc_tokens), texts[:z.n_sub]), rounds=R)
    rows.append(_row("tokenisation of English text: unicode path vs fast (ASCII) path", t_uni, t_fast2,
                     "fast path ([a-z0-9] runs)", "docs/s", z.n_sub, True,
                     note="pure-ASCII text takes the fast path's code; these documents hold typographic "
                          "punctuation (’ “ — …), so they are NFKC-normalised and casefolded"))
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
    tok = _hf_tokenizer(texts[:z.n_sub])
    if tok is not None:
        hf_texts = texts[:z.n_sub]

        def hf_anchor() -> None:  # what a ProcessEntropy user does: encode the document, score 1,500 ids
            for t in hf_texts:
                lcs(np.asarray(tok.encode(t).ids[:z.doc_tokens], dtype=np.int64))
        t_hf, t_hfa = time_interleaved(run_all(lambda t: hk(t, tokenizer=tok, n_trunc=z.doc_tokens, backend=backend),
                                               hf_texts), hf_anchor if lcs else None, rounds=R)
        rows.append(_row("Ĥ_K on HF tokenizer ids (byte-level BPE, incl. encoding): hk(tokenizer=...) vs "
                         f"encode + {LCS_NAME}", t_hf, t_hfa, LCS_NAME, "docs/s", len(hf_texts), True, lcs_note,
                         f"first {z.doc_tokens:,} ids; hk encodes a prefix only"))
    else:
        rows.append(BenchRow("Ĥ_K on HF tokenizer ids", 0.0, None, LCS_NAME, "docs/s", "higher",
                             "tokenizers not installed (pip install tokenizers)"))

    # (a) vs (c): natural documents
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

    # periodic text
    per = [np.tile(np.random.default_rng(k).permutation(3), z.periodic_n // 3) for k in range(z.n_periodic)]
    t_sam_p, t_lcs_p = time_interleaved(run_all(sam, per[:z.n_slow]), run_all(lcs, per[:z.n_slow]) if lcs else None,
                                        rounds=R)
    rows.append(_row(f"Ĥ_K of period-3 sequences × {z.periodic_n} tokens: SAM vs LCSFinder", t_sam_p, t_lcs_p,
                     LCS_NAME, "ms/sequence", z.n_slow, missing=lcs_note,
                     note=f"target >= 5x; {z.n_slow} sequences"))

    # (b) the naive definition on n_naive documents at N = doc_tokens (one warm-up, one timed round: slow)
    ctx.log(f"entropy_filter bench: naive definition on {z.n_naive} documents")
    naive_docs = docs[:z.n_naive]
    t_ml, t_naive = time_interleaved(run_all(lambda d: match_lengths(d, backend=backend), naive_docs),
                                     run_all(naive_lambdas, naive_docs), rounds=1, warmup=0)
    rows.append(_row(f"match lengths at N = {z.doc_tokens:,} ({z.n_naive} docs): SAM vs naive definition", t_ml,
                     t_naive, "naive pure-Python definition", "ms/doc", z.n_naive,
                     note="target >= 100x; one round (the naive definition is quadratic)"))

    # (d) ProcessEntropy's numba PythonOnly path
    po, po_note = _python_only()

    def run_po() -> None:
        for x in slow:
            n = x.size
            po(x, x, np.arange(n), np.zeros(n))
    t_sam_s, t_po = time_interleaved(run_all(sam, slow), run_po if po is not None else None, rounds=R)
    rows.append(_row(f"Ĥ_K of {len(slow)} docs: SAM vs ProcessEntropy numba PythonOnly lambdas", t_sam_s, t_po,
                     "ProcessEntropy PythonOnly (numba)", "docs/s", len(slow), True, po_note))

    # the stream of distinct documents, and linear scaling
    stream = dense_ids([w for tk in toks[:z.stream // z.doc_tokens + 1] for w in tk])[:z.stream]
    if stream.size < z.stream:
        raise RuntimeError(f"bench stream has only {stream.size} tokens")
    s20, s100 = stream[:z.stream // 10], stream[:z.stream // 2]
    t200, t20, t100, l200, l20 = time_interleaved(
        lambda: sam(stream), lambda: sam(s20), lambda: sam(s100),
        (lambda: lcs(stream)) if lcs else None, (lambda: lcs(s20)) if lcs else None, rounds=R)
    k, k10, k2 = (f"{n / 1000:g}k" for n in (z.stream, z.stream // 10, z.stream // 2))
    rows.append(_row(f"Ĥ_K of a {k}-token stream: SAM vs LCSFinder", t200, l200, LCS_NAME, "s", missing=lcs_note))
    ratio_note = stat_note(t200, l200, "ms")
    rows.append(BenchRow(f"linear scaling: time({k}) / time({k10})", t200.median / t20.median,
                         l200.median / l20.median if l200 and l20 else None, LCS_NAME, "x time for 10x tokens",
                         "lower", (f"target <= 15 (10 = linear); ratio of medians; {ratio_note}" if lcs else
                                   f"{LCS_NAME} not run: {lcs_note}; {ratio_note}")))
    rows.append(BenchRow(f"scaling past the cache cliff: time({k}) / time({k2}), SAM only",
                         t200.median / t100.median, None, "—", "x time for 2x tokens", "lower",
                         f"diagnostic, no anchor: 2 = linear; the 20k working set (~2 MB) fits in L2, 100k/200k "
                         f"do not; ratio of medians; {stat_note(t200, t100, 'ms')}"))

    # cost per token from 10k to 1M tokens (issue 30: target 1M within 2x the per-token cost of 10k)
    big = dense_ids([w for tk in toks for w in tk])
    n_big = min(big.size, z.stream * 5)
    small_n = n_big // 100
    if n_big >= 1000:
        xb, xs = big[:n_big], big[:small_n]
        tb, ts, lb, ls = time_interleaved(lambda: sam(xb), lambda: sam(xs), (lambda: lcs(xb)) if lcs else None,
                                          (lambda: lcs(xs)) if lcs else None, rounds=R)
        per = lambda t, n: t.median / n * 1e9  # noqa: E731
        rows.append(BenchRow(f"cost per token: N = {n_big / 1000:g}k vs N = {small_n / 1000:g}k (ns/token ratio)",
                             per(tb, n_big) / per(ts, small_n),
                             per(lb, n_big) / per(ls, small_n) if lb and ls else None, LCS_NAME,
                             "x per-token cost", "lower",
                             f"target <= 2 (flat); SAM {per(ts, small_n):.0f} -> {per(tb, n_big):.0f} ns/token"
                             + (f", LCSFinder {per(ls, small_n):.0f} -> {per(lb, n_big):.0f} ns/token" if lb and ls
                                else f"; {LCS_NAME} not run: {lcs_note}") + f"; {stat_note(tb, lb, 'ms')}"))
        rows.append(_row(f"Ĥ_K of a {n_big / 1000:g}k-token stream: SAM vs LCSFinder", tb, lb, LCS_NAME, "s",
                         missing=lcs_note))

    # overlap variant vs pydivsufsort (SA + Kasai LCP + LPF)
    try:
        lpf_lambdas(sub[0])
        lpf, lpf_missing = run_all(lpf_lambdas, sub), ""
    except ImportError as e:
        lpf, lpf_missing = None, f"pydivsufsort not installed ({e}); pip install 'neurips26[entropy_filter]'"
    t_ov, t_lpf = time_interleaved(run_all(lambda d: match_lengths(d, overlap=True, backend=backend), sub), lpf,
                                   rounds=R)
    rows.append(_row("overlap=True: SAM vs pydivsufsort longest_previous_factor", t_ov, t_lpf, "pydivsufsort",
                     "docs/s", len(sub), True, lpf_missing,
                     f"overlapping matches (LZ77 longest previous factor), {len(sub)} documents"))

    # model-free anchors on the same texts (tokenisation included for all three)
    tsub = texts[:z.n_sub]
    score = lambda t: entropy_rate(dense_ids(fast_tokenize(t, z.doc_tokens)), backend=backend)  # noqa: E731
    gopher, g_name, g_note = _gopher()
    t_hk, t_zlib, t_gop = time_interleaved(run_all(score, tsub), run_all(zlib_ratio, tsub), run_all(gopher, tsub),
                                           rounds=R)
    rows.append(_row("document scoring incl. tokenisation: Ĥ_K vs zlib ratio", t_hk, t_zlib,
                     "zlib compression ratio (level 9)", "docs/s", len(tsub), True))
    rows.append(_row("document scoring incl. tokenisation: Ĥ_K vs Gopher repetition rules", t_hk, t_gop, g_name,
                     "docs/s", len(tsub), True, note=g_note))
    return rows
