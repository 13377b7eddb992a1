"""The quick generator: a word-level interpolated trigram LM with numpy/scipy vectorised lookups.

Tokens: ``[a-z0-9]+`` or one punctuation character of the lowercased text. Vocabulary: the 1,500 most
frequent tokens + ``<unk>``, plus ``<s>`` (padding) and one token per topic (the prompt); neither
special is ever sampled. Per-domain trigram counts, shared bigram and unigram counts:

    p(c | a, b, d) = 0.25 · p_lo(c | b) + 0.75 · p_tri(c | a, b, d)
    p_lo(c | b)    = 0.3 · p_uni(c) + 0.7 · p_bi(c | b)
    p_uni(c)       ∝ max(count(c) / total, 1e-3)        (unigram floor)

a context without trigram (bigram) counts falls back to p_lo (p_uni). Sampling at temperature τ
draws from p^{1/τ} (renormalised). "Fine-tuning" re-estimates every count from the selected
synthetic documents: counts ← (1 − η)·counts + η·counts(selected) (η = 1: full replacement).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import entr

_LM_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")

BOS, UNK = "<s>", "<unk>"


def lm_tokenize(text: str) -> list[str]:
    """The LM's tokens: runs of ``[a-z0-9]`` or single punctuation characters of the lowercased text."""
    return _LM_TOKEN.findall(text.lower())


@dataclass(frozen=True)
class CountLMConfig:
    vocab_size: int = 1500
    lam_tri: float = 0.75      # weight of p_tri (1 − lam_tri on p_lo)
    lam_bi: float = 0.7        # weight of p_bi inside p_lo (1 − lam_bi on p_uni)
    uni_floor: float = 1e-3
    eta: float = 1.0           # fine-tuning: counts ← (1 − η)·old + η·new


class Vocab:
    """Token <-> id. Ids: 0 = <s>, 1 = <unk>, 2.. = words, then one id per topic."""

    def __init__(self, words: list[str], topics: list[str]):
        self.itos = [BOS, UNK] + list(words) + [f"<topic:{t}>" for t in topics]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.n_words = 2 + len(words)
        self.topic_base = self.n_words
        self.size = len(self.itos)
        mask = np.ones(self.size, dtype=bool)
        mask[[0, 1]] = False
        mask[self.n_words:] = False
        self.sampleable = mask  # <s>, <unk> and topic tokens are never generated

    @classmethod
    def build(cls, token_lists: list[list[str]], topics: list[str], size: int) -> "Vocab":
        counts = Counter(t for toks in token_lists for t in toks)
        words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]]
        return cls(words, topics)

    def encode(self, toks: list[str]) -> np.ndarray:
        return np.array([self.stoi.get(t, 1) for t in toks], dtype=np.int64)

    def decode(self, ids: np.ndarray) -> str:
        return " ".join(self.itos[i] for i in ids)

    def topic_id(self, topic_index: int) -> int:
        return self.topic_base + topic_index


@dataclass
class Doc:
    """A training/generated sequence: domain, topic index and token ids (without the 2-token prompt)."""

    domain: int
    topic: int
    ids: np.ndarray


class TrigramLM:
    """Interpolated trigram LM over a fixed ``Vocab`` with per-domain trigram counts."""

    def __init__(self, vocab: Vocab, n_domains: int, cfg: CountLMConfig = CountLMConfig()):
        self.vocab, self.n_domains, self.cfg = vocab, n_domains, cfg
        V = vocab.size
        self.uni = np.zeros(V)
        self.bi = sp.csr_matrix((V, V))
        self.tri_keys = np.zeros(0, dtype=np.int64)   # sorted (domain*V + a)*V + b
        self.tri = sp.csr_matrix((0, V))
        self._cache()

    # ---- counting -------------------------------------------------------------------------------
    def _counts(self, docs: list[Doc]) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, sp.csr_matrix]:
        V = self.vocab.size
        a_l, b_l, c_l, d_l = [], [], [], []
        for doc in docs:
            full = np.concatenate([[0, self.vocab.topic_id(doc.topic)], doc.ids])
            a_l.append(full[:-2])
            b_l.append(full[1:-1])
            c_l.append(full[2:])
            d_l.append(np.full(full.size - 2, doc.domain, dtype=np.int64))
        a, b, c, d = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (a_l, b_l, c_l, d_l))
        uni = np.bincount(c, minlength=V).astype(np.float64)
        bi = sp.csr_matrix((np.ones(c.size), (b, c)), shape=(V, V))
        bi.sum_duplicates()
        ctx = (d * V + a) * V + b
        keys, inv = np.unique(ctx, return_inverse=True)
        tri = sp.csr_matrix((np.ones(c.size), (inv.ravel(), c)), shape=(keys.size, V))
        tri.sum_duplicates()
        return uni, bi, keys, tri

    def fit(self, docs: list[Doc]) -> "TrigramLM":
        """Estimate all counts from ``docs`` (pre-training: full replacement)."""
        self.uni, self.bi, self.tri_keys, self.tri = self._counts(docs)
        self._cache()
        return self

    def finetune(self, docs: list[Doc], eta: float | None = None) -> "TrigramLM":
        """counts ← (1 − η)·counts + η·counts(docs); returns a new model (the old one is kept)."""
        eta = self.cfg.eta if eta is None else eta
        uni, bi, keys, tri = self._counts(docs)
        new = TrigramLM.__new__(TrigramLM)
        new.vocab, new.n_domains, new.cfg = self.vocab, self.n_domains, self.cfg
        if eta >= 1.0:
            new.uni, new.bi, new.tri_keys, new.tri = uni, bi, keys, tri
        else:
            new.uni = (1 - eta) * self.uni + eta * uni
            new.bi = ((1 - eta) * self.bi + eta * bi).tocsr()
            all_keys = np.union1d(self.tri_keys, keys)
            V = self.vocab.size

            def embed(k: np.ndarray, m: sp.csr_matrix) -> sp.csr_matrix:
                rows = np.searchsorted(all_keys, k)
                perm = sp.csr_matrix((np.ones(k.size), (rows, np.arange(k.size))), shape=(all_keys.size, k.size))
                return (perm @ m).tocsr()

            new.tri_keys = all_keys
            new.tri = ((1 - eta) * embed(self.tri_keys, self.tri) + eta * embed(keys, tri)).tocsr()
            new.tri.resize((all_keys.size, V))
        new._cache()
        return new

    def _cache(self) -> None:
        cfg, mask = self.cfg, self.vocab.sampleable
        total = self.uni[mask].sum()
        p = np.where(mask, np.maximum(self.uni / total if total > 0 else 0.0, cfg.uni_floor), 0.0)
        self.p_uni = p / p.sum()
        # dense p_lo(· | b) for every b: 0.3 p_uni + 0.7 p_bi, p_bi → p_uni for an unseen b
        bi = self.bi.toarray() * mask
        bsum = bi.sum(axis=1, keepdims=True)
        p_bi = np.where(bsum > 0, bi / np.maximum(bsum, 1e-300), self.p_uni)
        self.p_lo = (1 - cfg.lam_bi) * self.p_uni + cfg.lam_bi * p_bi
        tri = self.tri.multiply(mask[None, :]).tocsr() if self.tri.shape[0] else self.tri
        tsum = np.asarray(tri.sum(axis=1)).ravel()
        self.tri_norm = sp.diags(1.0 / np.maximum(tsum, 1e-300)) @ tri  # p_tri rows
        self.tri_ok = tsum > 0

    # ---- distributions --------------------------------------------------------------------------
    def probs(self, domain: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """p(· | a, b, domain) for a batch of contexts: array (n, V), rows sum to 1."""
        cfg, V = self.cfg, self.vocab.size
        n = a.size
        p_lo = self.p_lo[b]
        # p = 0.25 p_lo + 0.75 p_tri  (p_tri falls back to p_lo for an unseen context)
        keys = (domain * V + a) * V + b
        if self.tri_keys.size:
            pos = np.minimum(np.searchsorted(self.tri_keys, keys), self.tri_keys.size - 1)
            found = self.tri_keys[pos] == keys
            found &= self.tri_ok[pos]
        else:
            found = np.zeros(n, dtype=bool)
        out = p_lo
        if found.any():
            out = p_lo * np.where(found, 1.0 - cfg.lam_tri, 1.0)[:, None]
            rows = np.flatnonzero(found)
            out[rows] += cfg.lam_tri * self.tri_norm[pos[rows]].toarray()
        return out / out.sum(axis=1, keepdims=True)

    def sample(self, domains: np.ndarray, topics: np.ndarray, length: int, temperature: float,
               rng: np.random.Generator) -> np.ndarray:
        """Generate one document per (domain, topic) prompt: ids array (n, length)."""
        return sample_tokens(self.probs, self.vocab, domains, topics, length, temperature, rng)

    def rephraser(self, previous: list[Doc], lam: float = 0.5, kind: str = "bag") -> "CacheMixtureLM":
        """This frozen model rephrasing ``previous`` documents (no weight update).

        kind="bag" (default): mixed with the *bag of words* of each previous version (a unigram cache: it
        keeps the content words but cannot copy a phrase); kind="trigram": mixed with a trigram model of
        the previous version (copies phrases, so the lineage copies and collapses itself)."""
        if kind == "bag":
            return BagOfWordsRephraser(self, previous, lam)
        if kind == "trigram":
            return CacheMixtureLM(self, previous, lam)
        raise ValueError(f"kind must be 'bag' or 'trigram', got {kind!r}")

    def token_stats(self, docs: list[Doc], chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Teacher-forced per-document means of the next-token entropy H_L (bits) and surprisal (bits).

        H_L = mean_t −Σ_v p(v|x_<t) log2 p(v|x_<t);  surprisal = mean_t −log2 p(x_t|x_<t).
        """
        dom, a, b, c, owner = [], [], [], [], []
        for k, doc in enumerate(docs):
            full = np.concatenate([[0, self.vocab.topic_id(doc.topic)], doc.ids])
            a.append(full[:-2])
            b.append(full[1:-1])
            c.append(full[2:])
            dom.append(np.full(full.size - 2, doc.domain, dtype=np.int64))
            owner.append(np.full(full.size - 2, k, dtype=np.int64))
        dom_a, a_a, b_a, c_a, own = (np.concatenate(x) for x in (dom, a, b, c, owner))
        ent = np.empty(c_a.size)
        sur = np.empty(c_a.size)
        for s in range(0, c_a.size, chunk):
            p = self.probs(dom_a[s:s + chunk], a_a[s:s + chunk], b_a[s:s + chunk])
            ent[s:s + chunk] = entr(p).sum(axis=1) / np.log(2.0)  # −Σ p log2 p
            pc = p[np.arange(p.shape[0]), c_a[s:s + chunk]]
            sur[s:s + chunk] = -np.log2(np.maximum(pc, 1e-300))
        n = len(docs)
        cnt = np.bincount(own, minlength=n)
        return (np.bincount(own, weights=ent, minlength=n) / np.maximum(cnt, 1),
                np.bincount(own, weights=sur, minlength=n) / np.maximum(cnt, 1))


def sample_tokens(probs_fn, vocab: Vocab, domains: np.ndarray, topics: np.ndarray, length: int,
                  temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Ancestral sampling at temperature τ from ``probs_fn(domain, a, b) -> (n, V)``, prompt (<s>, topic)."""
    n = domains.size
    a = np.zeros(n, dtype=np.int64)
    b = np.array([vocab.topic_id(int(t)) for t in topics], dtype=np.int64)
    out = np.empty((n, length), dtype=np.int64)
    for t in range(length):
        p = probs_fn(domains, a, b)
        if temperature != 1.0:  # p^{1/τ}, renormalised
            with np.errstate(divide="ignore"):
                logp = np.log(p) / temperature
            logp -= logp.max(axis=1, keepdims=True)
            p = np.exp(logp)
            p /= p.sum(axis=1, keepdims=True)
        u = rng.random(n)
        c = np.minimum((p.cumsum(axis=1) < u[:, None]).sum(axis=1), p.shape[1] - 1)
        bad = p[np.arange(n), c] == 0  # cumulative-sum edge: never emit a zero-probability token
        if bad.any():
            c[bad] = p[bad].argmax(axis=1)
        out[:, t] = c
        a, b = b, c
    return out


class CacheMixtureLM:
    """A fixed model rephrasing given texts, without any weight update (the rephrasing lineage):

        p(c | a, b, doc k) = (1 − λ)·p_base(c | a, b, domain_k) + λ·p_cache(c | a, b, k)

    where p_cache is a trigram model of document k's previous version (its "domain" is k)."""

    def __init__(self, base: TrigramLM, previous: list[Doc], lam: float = 0.5):
        self.base, self.lam, self.vocab = base, lam, base.vocab
        self.cache = TrigramLM(base.vocab, len(previous), base.cfg).fit(
            [Doc(k, d.topic, d.ids) for k, d in enumerate(previous)])
        self.domains = np.array([d.domain for d in previous], dtype=np.int64)
        self._topics = np.array([d.topic for d in previous], dtype=np.int64)

    def probs_for(self, doc_index: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return ((1 - self.lam) * self.base.probs(self.domains[doc_index], a, b)
                + self.lam * self.cache.probs(doc_index, a, b))

    def rephrase(self, length: int, temperature: float, rng: np.random.Generator) -> np.ndarray:
        k = np.arange(self.domains.size)  # prompts carry each document's own topic
        return sample_tokens(self.probs_for, self.vocab, k, self._topics, length, temperature, rng)


class BagOfWordsRephraser:
    """A fixed model rephrasing given texts from their words only (the default rephrasing lineage):

        p(c | a, b, doc k) = (1 − λ)·p_base(c | a, b, domain_k) + λ·u_k(c)

    where u_k is the unigram distribution of document k's previous version: the rewrite keeps the
    content words, in the base model's phrasing, and cannot copy a phrase (no n-gram of the previous
    version is carried over except by the base model's own statistics)."""

    def __init__(self, base: TrigramLM, previous: list[Doc], lam: float = 0.5):
        self.base, self.lam, self.vocab = base, lam, base.vocab
        V = base.vocab.size
        self.unigram = np.zeros((len(previous), V))
        for k, d in enumerate(previous):
            self.unigram[k] = np.bincount(d.ids, minlength=V)[:V]
        self.unigram *= base.vocab.sampleable
        tot = self.unigram.sum(axis=1, keepdims=True)
        self.unigram = np.where(tot > 0, self.unigram / np.maximum(tot, 1e-300), base.p_uni)
        self.domains = np.array([d.domain for d in previous], dtype=np.int64)
        self._topics = np.array([d.topic for d in previous], dtype=np.int64)

    def probs_for(self, doc_index: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (1 - self.lam) * self.base.probs(self.domains[doc_index], a, b) + self.lam * self.unigram[doc_index]

    def rephrase(self, length: int, temperature: float, rng: np.random.Generator) -> np.ndarray:
        k = np.arange(self.domains.size)
        return sample_tokens(self.probs_for, self.vocab, k, self._topics, length, temperature, rng)


def pretraining_docs(topics: list[tuple[str, str]], window: int, n_domains: int,
                     vocab_size: int) -> tuple[Vocab, list[Doc]]:
    """Vocabulary and consecutive ``window``-token pre-training windows of every topic."""
    toks = [lm_tokenize(text) for _, text in topics]
    vocab = Vocab.build(toks, [name for name, _ in topics], vocab_size)
    docs = []
    for i, tk in enumerate(toks):
        ids = vocab.encode(tk)
        for s in range(0, max(len(ids) - 1, 1), window):
            piece = ids[s:s + window]
            if piece.size >= 2:
                docs.append(Doc(i % n_domains, i, piece))
    return vocab, docs
