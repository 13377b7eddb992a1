"""Dense action tokenizers of the baselines: 256-bin (OpenVLA / RT-2) and FAST (DCT-II + BPE, pi0-FAST).

Bins: per dimension, 256 uniform bins between the 1st and 99th percentile of the training actions;
value -> bin ``floor((x - lo) / (hi - lo) * 256)`` clipped to [0, 255]; bin -> its centre. Inside
[p1, p99] the round trip error is at most half a bin.
FAST: 16-step chunks, per-dimension quantile normalisation to [-1, 1] (p1 -> -1, p99 -> 1),
``scipy.fft.dct(type=2, norm="ortho")`` along time, ``round(10 c)``, flattened low frequency first
across dimensions, written as integer words and compressed by a byte-level BPE (``tokenizers``, vocab
512) trained on the training chunks; decoding inverts every step (``idct``).
"""

from __future__ import annotations

import numpy as np
import scipy.fft

from neurips26.harness.validation import check_array, check_scalar

N_BINS = 256
FAST_CHUNK = 16
FAST_SCALE = 10.0
FAST_VOCAB = 512
_OFFSET = 0x4E00 + 200   # coefficient v <-> one CJK character (a BPE alphabet of 2 * 81 + 1)
_MAX_COEF = 81


def _actions(a, name="actions") -> np.ndarray:
    a = check_array(a, name, ndim=2, dtype=float)
    if a.shape[1] != 4:
        raise ValueError(f"{name} must have width 4 (dx, dy, dz, grip), got shape {a.shape}")
    return a


class BinTokenizer:
    """256 uniform bins per dimension between the 1st and 99th percentile."""

    def __init__(self, n_bins: int = N_BINS):
        self.n_bins = check_scalar(n_bins, "n_bins", int, min=2)

    def fit(self, actions) -> "BinTokenizer":
        a = _actions(actions)
        self.lo, self.hi = np.percentile(a, 1, axis=0), np.percentile(a, 99, axis=0)
        self.hi = np.where(self.hi > self.lo, self.hi, self.lo + 1e-6)
        return self

    @property
    def width(self) -> np.ndarray:
        return (self.hi - self.lo) / self.n_bins

    def encode(self, actions) -> np.ndarray:
        a = _actions(actions)
        b = np.floor((a - self.lo) / self.width).astype(np.int64)
        return np.clip(b, 0, self.n_bins - 1)

    def decode(self, bins) -> np.ndarray:
        b = check_array(bins, "bins", ndim=2, dtype=int)
        return self.lo + (b + 0.5) * self.width


class FASTTokenizer:
    """pi0-FAST: quantile normalisation, orthonormal DCT-II over 16 steps, round(10 c), BPE."""

    def __init__(self, chunk: int = FAST_CHUNK, scale: float = FAST_SCALE, vocab_size: int = FAST_VOCAB):
        self.chunk = check_scalar(chunk, "chunk", int, min=2)
        self.scale = check_scalar(scale, "scale", float, min=0, inclusive="neither")
        self.vocab_size = check_scalar(vocab_size, "vocab_size", int, min=64)

    def normalise(self, a: np.ndarray) -> np.ndarray:
        return np.clip(2 * (a - self.lo) / (self.hi - self.lo) - 1, -1, 1)

    def coefficients(self, chunk) -> np.ndarray:
        """Integer DCT coefficients (chunk, 4) of one (chunk, 4) action chunk, low frequency first."""
        x = self.normalise(_actions(chunk, "chunk"))
        return np.round(self.scale * scipy.fft.dct(x, type=2, norm="ortho", axis=0)).astype(np.int64)

    def _words(self, coef: np.ndarray) -> str:
        """One character per integer coefficient (row-major: frequency k of dims 0..3), as pi0-FAST's BPE
        runs over the flattened coefficient sequence."""
        return "".join(chr(_OFFSET + int(c)) for c in coef.reshape(-1))

    def fit(self, chunks: list) -> "FASTTokenizer":
        from tokenizers import Tokenizer, models, trainers

        allx = np.concatenate([_actions(c, "chunks") for c in chunks])
        self.lo, self.hi = np.percentile(allx, 1, axis=0), np.percentile(allx, 99, axis=0)
        self.hi = np.where(self.hi > self.lo, self.hi, self.lo + 1e-6)
        texts = [self._words(self.coefficients(c)) for c in chunks]
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        alphabet = [chr(_OFFSET + v) for v in range(-_MAX_COEF, _MAX_COEF + 1)]
        trainer = trainers.BpeTrainer(vocab_size=self.vocab_size, special_tokens=["[UNK]"],
                                      show_progress=False, initial_alphabet=alphabet,
                                      limit_alphabet=len(alphabet))
        tok.train_from_iterator(texts, trainer)
        self.bpe = tok
        return self

    def encode(self, chunk) -> list[int]:
        return self.bpe.encode(self._words(self.coefficients(chunk))).ids

    def decode(self, ids: list[int]) -> np.ndarray:
        text = "".join(self.bpe.id_to_token(i) for i in ids)
        coef = np.array([ord(ch) - _OFFSET for ch in text], float)
        if coef.size != self.chunk * 4:
            raise ValueError(f"ids decode to {coef.size} coefficients, expected {self.chunk * 4}")
        coef = coef.reshape(self.chunk, 4) / self.scale
        x = scipy.fft.idct(coef, type=2, norm="ortho", axis=0)
        return self.lo + (x + 1) * (self.hi - self.lo) / 2
