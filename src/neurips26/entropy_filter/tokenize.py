"""Tokenisation for the H_K score: the ``fast`` path, the ProcessEntropy-compatible ``reported`` path
(NLTK TweetTokenizer + FNV-style 32-bit hash) and the whitespace words of the diversity metrics.

Tokenisations side by side:

* ``unicode``   (the default of ``hk``, the CLI and the pipeline filters) NFKC, casefold, tokens = maximal
                runs of word characters of every script (letters, digits, combining marks; not ``_``),
                and every character of a script written without spaces (Han, kana, Thai, Lao, Khmer,
                Myanmar) a token of its own. On ASCII text it is exactly ``fast`` (tested), and ASCII
                text takes ``fast``'s code path, so it costs the same there.
* ``fast``      the paper's literal definition: lowercase, every character outside ``[a-z0-9]`` becomes
                a space, split on whitespace (ASCII only: "Größe" -> ["gr", "e"]); tokens map to dense
                integer ids (first occurrence order). Used for the loop's filtering decisions.
* an HF ``tokenizers.Tokenizer`` (or a path to its ``tokenizer.json``): the score is computed on the
                tokenizer's ids (``tokenizer.encode(text).ids``), e.g. the ids the model will train on.
* ``reported``  ProcessEntropy's ``custom_tokenize`` (TweetTokenizer(strip_handles, reduce_len,
                lowercase); drop tokens containing ``http`` / ``pic.twitter``; split on ``-``; strip
                ``\\W+``; drop empties) and the package's hash ``fnv``. Every number in the paper's
                tables uses this path.
* ``words``     ``text.lower().split()`` for Distinct-n / Rep-4 / vocabulary / TTR.
"""

from __future__ import annotations

import os
import re
import unicodedata
from functools import lru_cache
from typing import Any, Callable, Iterable

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar

TOKENIZERS = ("unicode", "fast", "reported")

_ALNUM_RUN = re.compile(r"[a-z0-9]+")
_NON_WORD = re.compile(r"\W+")

_FNV_PRIME = 0x100000001B3  # the 64-bit FNV prime, used modulo 2**32 by ProcessEntropy (= 435 mod 2**32)
_MASK32 = 2**32


def check_text(text: object, name: str = "text") -> str:
    return check_scalar(text, name, str)


def is_hf_tokenizer(tokenizer: object) -> bool:
    """True for an object with an HF-style ``encode`` (``tokenizers.Tokenizer``, a transformers tokenizer)."""
    return not isinstance(tokenizer, str) and callable(getattr(tokenizer, "encode", None))


@lru_cache(maxsize=8)
def load_hf_tokenizer(path: str) -> Any:
    """``tokenizers.Tokenizer.from_file(path)`` (a ``tokenizer.json``), cached per path."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - tokenizers is a dependency of the extra
        raise ImportError("scoring on tokenizer ids needs the tokenizers package: "
                          "pip install tokenizers") from e
    try:
        return Tokenizer.from_file(path)
    except Exception as e:
        raise ValueError(f"tokenizer: cannot load a tokenizers JSON file from {path!r} ({e})") from None


def check_tokenizer(tokenizer: object) -> Any:
    """A tokenizer name (``unicode``, ``fast``, ``reported``), an HF tokenizer object, or the path of a
    ``tokenizer.json`` (loaded, cached)."""
    if is_hf_tokenizer(tokenizer):
        return tokenizer
    if isinstance(tokenizer, str) and tokenizer not in TOKENIZERS and (
            tokenizer.endswith(".json") or os.path.sep in tokenizer):
        if not os.path.isfile(tokenizer):
            raise ValueError(f"tokenizer: no tokenizer file at {tokenizer!r} (or use one of {TOKENIZERS})")
        return load_hf_tokenizer(tokenizer)
    return check_choice(tokenizer, "tokenizer", TOKENIZERS)


def prefix_tokens(text: str, limit: int | None, tokenize_all: Callable[[str], list[Any]],
                  chars_per_token: int = 8) -> list[Any]:
    """The first ``limit`` tokens of ``text`` without transforming the whole document: tokenise a
    character prefix, doubling it until it yields more than ``limit`` tokens (then the first ``limit``
    end before the prefix does, so they are the whole document's) or covers the text."""
    if limit is None:
        return tokenize_all(text)
    size = max(64, chars_per_token * (limit + 1))
    while True:
        if size >= len(text):
            return tokenize_all(text)[:limit]
        toks = tokenize_all(text[:size])
        if len(toks) > limit:
            return toks[:limit]
        size *= 2


def _fast_all(text: str) -> list[str]:
    return _ALNUM_RUN.findall(text.lower())


def fast_tokenize(text: str, limit: int | None = None) -> list[str]:
    """Lowercase, replace every character not in ``[a-z0-9]`` by a space, split on whitespace
    (computed as the maximal ``[a-z0-9]`` runs of the lowercased text; the first ``limit`` only,
    lowercasing only a prefix of the text)."""
    return prefix_tokens(check_text(text), limit, _fast_all)


# scripts written without spaces between words: one token per character
_NO_SPACE = ("\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
             "\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f")


@lru_cache(maxsize=1)
def _unicode_pattern() -> "re.Pattern[str]":
    """[no-space char] | (word char | combining mark)+ ; the marks (Mn, Mc, Me) from ``unicodedata``
    (``re``'s ``\\w`` has no combining marks: "हिन्दी" would fall apart at its vowel signs)."""
    ranges: list[list[int]] = []
    for cp in range(0x30000):
        if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    marks = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
    return re.compile(f"[{_NO_SPACE}]|(?:[^\\W_{_NO_SPACE}]|[{marks}])+")


# every block holding combining marks or a script without spaces, and everything beyond the BMP: only
# text with such a character needs the (slower) exact pattern; other text is split by ``[^\W_]+``
_NEEDS_EXACT = re.compile("[\u0300-\u036f\u0483-\u0489\u0591-\u08ff\u0900-\u109f\u1700-\u17ff"
                          "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\u3000-\u9fff\uf900-\ufaff"
                          "\ufe00-\ufe2f\U00010000-\U0010ffff]")
_WORD_RUN = re.compile(r"[^\W_]+")


def _unicode_all(text: str) -> list[str]:
    if text.isascii():  # NFKC and casefold are the identity / lower() on ASCII: the fast path
        return _ALNUM_RUN.findall(text.lower())
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if _NEEDS_EXACT.search(text) is None:
        return _WORD_RUN.findall(text)
    return _unicode_pattern().findall(text)


def unicode_tokenize(text: str, limit: int | None = None) -> list[str]:
    """NFKC + casefold, then word-character runs of every script (letters, digits, combining marks;
    ``_`` splits) with one token per Han/kana/Thai/Lao/Khmer/Myanmar character; the first ``limit``
    tokens only, normalising only a prefix of the text. Equal to ``fast_tokenize`` on ASCII text."""
    return prefix_tokens(check_text(text), limit, _unicode_all)


def hf_ids(text: str, tokenizer: Any, limit: int | None = None) -> list[int]:
    """The first ``limit`` ids of ``tokenizer.encode(text)`` (no special tokens), encoding a prefix only."""
    check_text(text)

    def enc(t: str) -> list[int]:
        try:
            out = tokenizer.encode(t, add_special_tokens=False)
        except TypeError:  # an encode without that keyword
            out = tokenizer.encode(t)
        return list(getattr(out, "ids", out))

    return prefix_tokens(text, limit, enc, chars_per_token=16)


@lru_cache(maxsize=1)
def _tweet_tokenizer():
    from nltk.tokenize import TweetTokenizer

    return TweetTokenizer(strip_handles=True, reduce_len=True, preserve_case=False)


def reported_tokenize(text: str) -> list[str]:
    """ProcessEntropy's ``custom_tokenize`` (the tokenisation of every number in the paper's tables)."""
    out: list[str] = []
    for w in _tweet_tokenizer().tokenize(check_text(text)):
        if "http" in w or "pic.twitter" in w:
            continue
        for part in w.split("-"):
            part = _NON_WORD.sub("", part)
            if part:
                out.append(part)
    return out


def words(text: str) -> list[str]:
    """The diversity metrics' tokenisation: ``text.lower().split()`` (punctuation kept)."""
    return check_text(text).lower().split()


def fnv(token: str | bytes) -> int:
    """ProcessEntropy's 32-bit hash of a token.

    h = 0; for byte in utf8(token): h = (h * 0x100000001b3) mod 2**32; h ^= byte.
    Offset basis 0 and the 64-bit prime taken mod 2**32: not textbook FNV-1, reproduced exactly.
    """
    data = token if isinstance(token, bytes) else str(token).encode("utf-8")
    h = 0
    for byte in data:
        h = (h * _FNV_PRIME) % _MASK32
        h ^= byte
    return h


def dense_ids(tokens: Iterable[str]) -> np.ndarray:
    """Map tokens to dense ids 0, 1, 2, ... in order of first occurrence (the ``fast`` path)."""
    vocab: dict[str, int] = {}
    return np.fromiter((vocab.setdefault(t, len(vocab)) for t in tokens), dtype=np.int64)


def hashed_ids(tokens: Iterable[str]) -> np.ndarray:
    """Map tokens to their 32-bit ``fnv`` hash (the ``reported`` path)."""
    return np.fromiter((fnv(t) for t in tokens), dtype=np.int64)


def tokenize(text: str, tokenizer: Any = "unicode", limit: int | None = None) -> list[Any]:
    """The first ``limit`` (None: all) tokens of ``text`` under ``tokenizer`` (``unicode``, ``fast``,
    ``reported``; an HF tokenizer gives its ids)."""
    tok = check_tokenizer(tokenizer)
    if not isinstance(tok, str):
        return hf_ids(text, tok, limit)
    if tok == "unicode":
        return unicode_tokenize(text, limit)
    if tok == "fast":
        return fast_tokenize(text, limit)
    # TweetTokenizer's reduce_len and handle stripping look a few characters ahead: generous prefix
    return prefix_tokens(check_text(text), limit, reported_tokenize, chars_per_token=16)


def token_ids(tokens: list[Any], tokenizer: Any = "unicode") -> np.ndarray:
    """Integer ids of ``tokens``: dictionary ids for ``unicode``/``fast``, FNV hashes for ``reported``,
    the ids themselves for an HF tokenizer."""
    tok = check_tokenizer(tokenizer)
    if not isinstance(tok, str):
        return np.asarray(tokens, dtype=np.int64)
    return hashed_ids(tokens) if tok == "reported" else dense_ids(tokens)
