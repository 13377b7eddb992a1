"""Self-speculative decoding with the model's own head + psi as the drafter (spec M5, official scheme).

One round from prefix s: a trunk forward on s gives h and q_1 = p_1; drafts y_i ~ q_i with
h <- psi(h, e(y_i)); one verification trunk forward on s + y gives p_1..p_{gamma+1}; standard
speculative sampling (Leviathan et al. 2023) accepts y_i with prob min(1, p_i(y_i)/q_i(y_i)), samples
the first rejection from norm(max(p_i - q_i, 0)) and adds a bonus token from p_{gamma+1} if all pass.
A round costs two trunk forwards; ``tokens per trunk forward`` counts both (greedy AR = 1.0).
With ``use_cache=True`` the HF KV cache holds the accepted prefix (cropped after each round), so the
drafting forward only feeds the tokens emitted last round; the forward count is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from neurips26.harness.validation import check_scalar
from neurips26.nextlat.model import NextLatForCausalLM, block_size


def normalize(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
              top_p: float = 1.0) -> torch.Tensor:
    """Probabilities from logits with temperature, top-k and nucleus (top-p) filtering (last dim)."""
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sp, idx = torch.sort(probs, dim=-1, descending=True)
        drop = sp.cumsum(-1) - sp > top_p
        sp = sp.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, idx, sp)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def _sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(probs, 1, generator=generator))


def speculative_accept(p: torch.Tensor, q: torch.Tensor, drafts, generator: torch.Generator | None = None,
                       residual: bool = True) -> tuple[list[int], int]:
    """Standard speculative sampling of one round: (emitted tokens, number of drafts accepted).

    p: [gamma + 1, V] target probabilities, q: [gamma, V] drafter probabilities, drafts: gamma ids.
    ``residual=False`` resamples rejections from p_i (the wrong rule; the negative control of check 8).
    """
    out: list[int] = []
    for i, y in enumerate(drafts):
        y = int(y)
        ratio = float(p[i, y]) / max(float(q[i, y]), 1e-300)
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if u < min(1.0, ratio):
            out.append(y)
            continue
        r = torch.clamp(p[i] - q[i], min=0.0) if residual else p[i]
        r = p[i] if float(r.sum()) <= 0 else r / r.sum()
        out.append(_sample(r, generator))
        return out, i
    out.append(_sample(p[len(drafts)], generator))
    return out, len(drafts)


@dataclass
class SpecStats:
    rounds: int = 0
    trunk_forwards: int = 0
    emitted: int = 0
    accepted_beyond_first: int = 0
    accepted_per_round: list[int] = field(default_factory=list)

    @property
    def tokens_per_forward(self) -> float:
        return self.emitted / max(self.trunk_forwards, 1)

    @property
    def mean_accepted_beyond_first(self) -> float:
        return self.accepted_beyond_first / max(self.rounds, 1)

    def merge(self, other: "SpecStats") -> "SpecStats":
        return SpecStats(self.rounds + other.rounds, self.trunk_forwards + other.trunk_forwards,
                         self.emitted + other.emitted,
                         self.accepted_beyond_first + other.accepted_beyond_first,
                         self.accepted_per_round + other.accepted_per_round)


def _check_prompt(model: NextLatForCausalLM, prompt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    if not torch.is_tensor(prompt):
        raise TypeError("prompt must be an integer tensor")
    if prompt.ndim == 1:
        prompt = prompt[None]
    if prompt.ndim != 2 or prompt.shape[1] == 0 or prompt.shape[0] == 0:
        raise ValueError(f"prompt must be a non-empty [T] or [batch, T] tensor, "
                         f"got shape {tuple(prompt.shape)}")
    if prompt.shape[1] + max_new_tokens > block_size(model.model):
        raise ValueError(f"prompt length {prompt.shape[1]} + max_new_tokens {max_new_tokens} exceeds "
                         f"the block size {block_size(model.model)}")
    model.check_ids(prompt, "prompt")
    return prompt


def _sampling_args(temperature, top_k, top_p):
    temperature = check_scalar(temperature, "temperature", float, min=0, inclusive="neither")
    if top_k is not None:
        top_k = check_scalar(top_k, "top_k", int, min=1)
    top_p = check_scalar(top_p, "top_p", float, min=0, max=1, inclusive="right")
    return temperature, top_k, top_p


@torch.no_grad()
def greedy_rows(model, prompts: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n`` greedy tokens after every row of ``prompts`` [B, c] (equal-length prompts, no stop), [B, n]:
    batched full forwards through ``model.next_token_logits`` (any of the package's LMs: GPT, NextLat,
    MTP, BST), no cache; what the planning / Countdown evaluations decode with."""
    n = check_scalar(n, "n", int, min=1)
    seq = prompts
    for _ in range(n):
        seq = torch.cat([seq, model.next_token_logits(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    return seq[:, prompts.shape[1]:]


@torch.no_grad()
def greedy_generate(model: NextLatForCausalLM, prompt: torch.Tensor, max_new_tokens: int,
                    use_cache: bool = True, eos_token_id: int | None = None) -> list[torch.Tensor]:
    """Plain greedy autoregressive decoding (one trunk forward per token), per sample."""
    max_new_tokens = check_scalar(max_new_tokens, "max_new_tokens", int, min=1)
    prompt = _check_prompt(model, prompt, max_new_tokens)
    outs = []
    for row in prompt:
        s = row[None].clone()
        cache = _new_cache() if use_cache else None
        feed = s
        for _ in range(max_new_tokens):
            o = model.model(input_ids=feed, cache=cache, use_cache=use_cache)
            y = int(o.logits[0, -1].argmax())
            s = torch.cat([s, s.new_tensor([[y]])], dim=1)
            if use_cache:
                feed = s[:, -1:]
            else:
                feed = s
            if eos_token_id is not None and y == eos_token_id:
                break
        outs.append(s[0, row.numel():])
    return outs


@torch.no_grad()
def self_speculative_generate(model: NextLatForCausalLM, prompt: torch.Tensor, max_new_tokens: int,
                              gamma: int = 4, temperature: float = 1.0, top_k: int | None = None,
                              top_p: float = 1.0, use_cache: bool = False, eos_token_id: int | None = None,
                              early_stop: float | None = None, generator: torch.Generator | None = None
                              ) -> tuple[list[torch.Tensor], SpecStats]:
    """Decode ``max_new_tokens`` per prompt with head + psi drafts verified by the same trunk.

    prompt: [T] or [batch, T] ids (batch > 1 is looped per sample, as the official code does).
    ``top_k=1`` is greedy (the output equals plain greedy decoding). ``early_stop=tau`` (ASSUMPTION,
    off by default) stops drafting once max q_i < tau. Returns (new tokens per sample, stats).
    """
    max_new_tokens = check_scalar(max_new_tokens, "max_new_tokens", int, min=1)
    gamma = check_scalar(gamma, "gamma", int, min=1)
    temperature, top_k, top_p = _sampling_args(temperature, top_k, top_p)
    if early_stop is not None:
        early_stop = check_scalar(early_stop, "early_stop", float, min=0, max=1)
    prompt = _check_prompt(model, prompt, max_new_tokens)
    was_training = model.training
    model.eval()
    outs, stats = [], SpecStats()
    try:
        for row in prompt:
            toks, st = _generate_one(model, row, max_new_tokens, gamma, temperature, top_k, top_p,
                                     use_cache, eos_token_id, early_stop, generator)
            outs.append(toks)
            stats = stats.merge(st)
    finally:
        model.train(was_training)
    return outs, stats


def _new_cache():
    from transformers import DynamicCache

    return DynamicCache()


def _crop(cache, keep: int) -> None:
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)


def _generate_one(model, row, max_new, gamma, temperature, top_k, top_p, use_cache, eos, early_stop, gen):
    norm = lambda z: normalize(z, temperature, top_k, top_p)  # noqa: E731
    s = row[None].clone()
    n0 = s.shape[1]
    st = SpecStats()
    cache = _new_cache() if use_cache else None
    cached = 0  # tokens of s whose keys/values are in the cache
    while s.shape[1] - n0 < max_new:
        remaining = max_new - (s.shape[1] - n0)
        g = min(gamma, remaining)
        # 1. drafting: a trunk forward on s, then the latent rollout
        feed = s[:, cached:] if use_cache else s
        o = model.model.base_model(input_ids=feed, cache=cache, use_cache=use_cache)
        st.trunk_forwards += 1
        h = o.last_hidden_state[0, -1]
        if use_cache:
            cached = s.shape[1]
        p1 = norm(model.head(h))
        qs, drafts = [], []
        for i in range(g):
            q = p1 if i == 0 else norm(model.head(h))
            if i > 0 and early_stop is not None and float(q.max()) < early_stop:
                break
            y = _sample(q, gen)
            qs.append(q)
            drafts.append(y)
            if i + 1 < g:
                h = model.psi(h, model.embed(s.new_tensor(y)))
        # 2. verification: one trunk forward on s + drafts
        d = s.new_tensor(drafts)[None]
        if use_cache:
            logits = model.model(input_ids=d, cache=cache, use_cache=True).logits[0]
            p = torch.cat([p1[None], norm(logits)], dim=0)
        else:
            logits = model.model(input_ids=torch.cat([s, d], dim=1)).logits[0, s.shape[1] - 1:]
            p = norm(logits)
        st.trunk_forwards += 1
        # 3. speculative sampling
        emitted, acc = speculative_accept(p, torch.stack(qs), drafts, gen)
        if use_cache:
            _crop(cache, cached + acc)
            cached += acc
        emitted = emitted[:remaining]
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        s = torch.cat([s, s.new_tensor(emitted)[None]], dim=1)
        st.rounds += 1
        st.emitted += len(emitted)
        st.accepted_beyond_first += max(acc - 1, 0)
        st.accepted_per_round.append(acc)
        if eos is not None and int(s[0, -1]) == eos:
            break
    return s[0, n0:], st
