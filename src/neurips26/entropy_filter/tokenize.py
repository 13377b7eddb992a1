"""Tokenisation for the H_K score: the ``fast`` path, the ProcessEntropy-compatible ``reported`` path
(NLTK TweetTokenizer + FNV-style 32-bit hash) and the whitespace words of the diversity metrics.

Three tokenisations live side by side, as in the paper's code:

* ``fast``      lowercase, every character outside ``[a-z0-9]`` becomes a space, split on whitespace;
                tokens map to dense integer ids (first occurrence order). Used for filtering decisions.
* ``reported``  ProcessEntropy's ``custom_tokenize`` (TweetTokenizer(strip_handles, reduce_len,
                lowercase); drop tokens containing ``http`` / ``pic.twitter``; split on ``-``; strip
                ``\\W+``; drop empties) and the package's hash ``fnv``. Every number in the paper's
                tables uses this path.
* ``words``     ``text.lower().split()`` for Distinct-n / Rep-4 / vocabulary / TTR.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import Iterable

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar

TOKENIZERS = ("fast", "reported")

_ALNUM_RUN = re.compile(r"[a-z0-9]+")
_NON_WORD = re.compile(r"\W+")

_FNV_PRIME = 0x100000001B3  # the 64-bit FNV prime, used modulo 2**32 by ProcessEntropy (= 435 mod 2**32)
_MASK32 = 2**32


def check_text(text: object, name: str = "text") -> str:
    return check_scalar(text, name, str)


def check_tokenizer(tokenizer: object) -> str:
    return check_choice(tokenizer, "tokenizer", TOKENIZERS)


def fast_tokenize(text: str, limit: int | None = None) -> list[str]:
    """Lowercase, replace every character not in ``[a-z0-9]`` by a space, split on whitespace
    (computed as the maximal ``[a-z0-9]`` runs of the lowercased text; the first ``limit`` only)."""
    low = check_text(text).lower()
    if limit is None:
        return _ALNUM_RUN.findall(low)
    return [m.group() for m in itertools.islice(_ALNUM_RUN.finditer(low), limit)]


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


def tokenize(text: str, tokenizer: str = "fast", limit: int | None = None) -> list[str]:
    """The first ``limit`` (None: all) tokens of ``text`` under ``tokenizer`` (``fast`` or ``reported``)."""
    check_tokenizer(tokenizer)
    if tokenizer == "fast":
        return fast_tokenize(text, limit)
    toks = reported_tokenize(text)
    return toks if limit is None else toks[:limit]


def token_ids(tokens: list[str], tokenizer: str = "fast") -> np.ndarray:
    """Integer ids of ``tokens``: dictionary ids for ``fast``, FNV hashes for ``reported``."""
    check_tokenizer(tokenizer)
    return dense_ids(tokens) if tokenizer == "fast" else hashed_ids(tokens)
