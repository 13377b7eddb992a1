"""Match-length entropy-rate estimators Ĥ (bits per token) and the document score ``hk``.

All four read the match lengths Λ_i of ``match_lengths`` (non-overlapping by default):

* ``paper`` (Eq. 1 of the paper, ProcessEntropy's ``self_entropy_rate``):
      Ĥ_K = N·log2(N) / Σ_{i=1}^{N-1} Λ_i
* ``increasing_window`` (Kontoyiannis–Algoet–Suhov–Wyner 1998):
      Ĥ = [ (1/(N-1)) Σ_{i=1}^{N-1} Λ_i / log2(i+1) ]^{-1}      (i+1 = past symbols + 1)
* ``sliding_window`` (KASW fixed window W, default N // 2), k = N − W positions with a full window:
      Ĥ = [ (1/k) Σ_{i=W}^{N-1} Λ_i^W / log2 W ]^{-1}
* ``gao`` (Gao–Kontoyiannis–Bienenstock 2008, average of reciprocals, universally consistent):
      Ĥ = (1/(N-1)) Σ_{i=1}^{N-1} log2(i+1) / Λ_i
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from neurips26.entropy_filter.match_lengths import (as_token_array, check_window, match_lengths,
                                                    window_lambdas)
from neurips26.entropy_filter.tokenize import check_text, check_tokenizer, token_ids, tokenize
from neurips26.harness.validation import check_choice, check_scalar

ESTIMATORS = ("paper", "increasing_window", "sliding_window", "gao")


def check_estimator(estimator: object) -> str:
    return check_choice(estimator, "estimator", ESTIMATORS)


def entropy_rate(x: object, estimator: str = "paper", overlap: bool = False, window: int | None = None,
                 backend: str = "auto") -> float:
    """Entropy-rate estimate in bits/token of the integer token sequence ``x`` (N ≥ 2).

    estimator: ``paper`` (default), ``increasing_window``, ``sliding_window`` or ``gao``.
    overlap:   allow the match to overlap position i (LZ77 longest previous factor); default False.
    window:    W of ``sliding_window`` (default N // 2; needs 2 ≤ W < N).
    """
    check_estimator(estimator)
    arr = as_token_array(x)
    n = arr.size
    if n < 2:
        raise ValueError(f"x must hold at least 2 tokens, got {n}")
    if window is not None and estimator != "sliding_window":
        raise ValueError(f"window is only used by estimator='sliding_window', got estimator={estimator!r}")
    if estimator == "sliding_window":
        if overlap:
            raise ValueError("overlap=True is not defined for estimator='sliding_window'")
        W = check_window(n // 2 if window is None else window, n)
        lam_w = window_lambdas(arr, W, backend=backend).astype(np.float64)
        # Ĥ = [ (1/k) Σ Λ_i^W / log2 W ]^{-1}, k = N − W
        return float(1.0 / (lam_w.mean() / math.log2(W)))
    lam = match_lengths(arr, overlap=overlap, backend=backend).astype(np.float64)
    if estimator == "paper":
        # Eq. 1: Ĥ_K = N log2 N / Σ_{i=1}^{N-1} Λ_i
        return float(n * math.log2(n) / lam.sum())
    log_past = np.log2(np.arange(2, n + 1, dtype=np.float64))  # log2(i + 1), i = 1..N-1
    if estimator == "increasing_window":
        # Ĥ = [ (1/(N-1)) Σ Λ_i / log2(i+1) ]^{-1}
        return float(1.0 / np.mean(lam / log_past))
    # gao: Ĥ = (1/(N-1)) Σ log2(i+1) / Λ_i
    return float(np.mean(log_past / lam))


def hk(text: str, tokenizer: Any = "unicode", n_trunc: int | None = 1500, min_tokens: int = 50,
       estimator: str = "paper", overlap: bool = False, window: int | None = None,
       backend: str = "auto") -> float | None:
    """The paper's document score Ĥ_K(text) in bits/token, or None for short documents.

    tokenize (``unicode`` by default, ``fast`` = the paper's ASCII path, ``reported``, or an HF
    ``tokenizers.Tokenizer`` / the path of its ``tokenizer.json``: its ids) the first ``n_trunc`` tokens
    (None: all; only a prefix of the text is ever normalised or encoded) → None if fewer than
    ``min_tokens`` → integer ids (dictionary for ``unicode``/``fast``, FNV hash for ``reported``, the
    tokenizer's own ids) → match lengths Λ → estimator (``paper`` by default).
    """
    check_text(text)
    tokenizer = check_tokenizer(tokenizer)
    n_trunc = None if n_trunc is None else check_scalar(n_trunc, "n_trunc", int, min=2)
    min_tokens = check_scalar(min_tokens, "min_tokens", int, min=2)
    check_estimator(estimator)
    if estimator == "sliding_window" and overlap:
        raise ValueError("overlap=True is not defined for estimator='sliding_window'")
    if window is not None and estimator != "sliding_window":
        raise ValueError(f"window is only used by estimator='sliding_window', got estimator={estimator!r}")
    toks = tokenize(text, tokenizer, limit=n_trunc)
    if len(toks) < min_tokens:
        return None
    if estimator == "sliding_window" and window is not None:
        check_window(window, len(toks))
    return entropy_rate(token_ids(toks, tokenizer), estimator=estimator, overlap=overlap, window=window,
                        backend=backend)


def hk_bits_per_word_and_count(text: str, tokenizer: str = "reported", n_trunc: int | None = 1500,
                               min_tokens: int = 10) -> tuple[float | None, int]:
    """(Ĥ_K, number of tokens used): helper for the bits/word -> bits/token conversion of the proxy."""
    toks = tokenize(text, tokenizer)
    if n_trunc is not None:
        toks = toks[:n_trunc]
    if len(toks) < min_tokens:
        return None, len(toks)
    return entropy_rate(token_ids(toks, tokenizer)), len(toks)
