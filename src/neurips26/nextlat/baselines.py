"""Baseline objectives trained by the same trainer (spec M6): GPT is ``NextLatForCausalLM`` with
lambda = 0 (proved equal to plain next-token training); MTP (Gloeckle et al. 2024), JTP (Ahn, Lamb,
Langford 2025) and BST (Hu et al. 2025) are here.

MTP: the shared trunk's final-norm latent h feeds the usual head (x_{t+1}) and n - 1 extra heads, each one
transformer layer (the trunk's own decoder-layer class and rotary embeddings, causal mask) followed by
the shared final norm and the shared unembedding; head i predicts x_{t+i}; loss = sum of the CEs.
Self-speculative drafting uses heads 1..n from one trunk forward and one verification forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.harness.validation import check_scalar
from neurips26.nextlat.model import NextLatForCausalLM
from neurips26.nextlat.speculative import (
    SpecStats,
    _check_prompt,
    _sampling_args,
    normalize,
    speculative_accept,
)


@dataclass
class MTPOutput:
    loss: torch.Tensor
    ntp: torch.Tensor
    head_losses: list
    logits: torch.Tensor


class MTPForCausalLM(nn.Module):
    """Multi-token prediction around an HF Llama-family causal LM: ``n_future`` heads (1 = plain NTP)."""

    def __init__(self, model, n_future: int = 2, pad_token_id: int | None = None):
        super().__init__()
        self.n_future = check_scalar(n_future, "n_future", int, min=1)
        base = model.base_model
        if not (hasattr(base, "rotary_emb") and hasattr(base, "layers") and hasattr(base, "norm")):
            raise ValueError(
                "MTPForCausalLM needs a Llama-family trunk (base_model with layers, rotary_emb, norm)"
            )
        self.model = model
        self.vocab = int(model.config.vocab_size)
        layer_cls = type(base.layers[0])
        L = model.config.num_hidden_layers
        self.heads = nn.ModuleList(layer_cls(model.config, layer_idx=L + i) for i in range(n_future - 1))
        self.heads.to(next(model.parameters()).dtype)
        self.pad_token_id = pad_token_id

    check_ids = NextLatForCausalLM.check_ids  # same id/shape/block-size validation

    def hidden(self, input_ids: torch.Tensor, attention_mask=None) -> torch.Tensor:
        return self.model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits for x_{t+1} at every position (head 1: the plain causal LM)."""
        return self.model(input_ids=input_ids).logits

    def head_logits(self, h: torch.Tensor) -> list[torch.Tensor]:
        """Logits of heads 1..n at every position: head i predicts x_{t+i}."""
        from transformers.masking_utils import create_causal_mask

        base = self.model.base_model
        pos = torch.arange(h.shape[1], device=h.device)[None]
        mask = create_causal_mask(
            config=self.model.config, inputs_embeds=h, attention_mask=None, cache=None, position_ids=pos
        )
        pe = base.rotary_emb(h, position_ids=pos)
        out = [self.model.lm_head(h)]
        for layer in self.heads:
            z = layer(h, attention_mask=mask, position_embeddings=pe, position_ids=pos)
            out.append(self.model.lm_head(base.norm(z)))
        return out

    def forward(self, input_ids: torch.Tensor) -> MTPOutput:
        input_ids = self.check_ids(input_ids)
        logits = self.head_logits(self.hidden(input_ids))
        losses = []
        ignore = -100 if self.pad_token_id is None else self.pad_token_id
        for i, z in enumerate(logits, start=1):
            if input_ids.shape[1] - i < 1:
                break
            losses.append(
                F.cross_entropy(
                    z[:, :-i].reshape(-1, self.vocab), input_ids[:, i:].reshape(-1), ignore_index=ignore
                )
            )
        return MTPOutput(torch.stack(losses).sum(), losses[0], losses, logits[0])


@torch.no_grad()
def mtp_speculative_generate(
    model: MTPForCausalLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[list[torch.Tensor], SpecStats]:
    """Self-speculative decoding with the MTP heads as drafter (gamma = n_future); NextLat's accounting."""
    max_new_tokens = check_scalar(max_new_tokens, "max_new_tokens", int, min=1)
    temperature, top_k, top_p = _sampling_args(temperature, top_k, top_p)
    prompt = _check_prompt(model, prompt, max_new_tokens)
    model.eval()
    outs, stats = [], SpecStats()
    for row in prompt:
        s, n0, st = row[None].clone(), row.numel(), SpecStats()
        while s.shape[1] - n0 < max_new_tokens:
            remaining = max_new_tokens - (s.shape[1] - n0)
            g = min(model.n_future, remaining)
            qs = [
                normalize(z[0, -1], temperature, top_k, top_p) for z in model.head_logits(model.hidden(s))[:g]
            ]
            drafts = [int(torch.multinomial(q, 1, generator=generator)) for q in qs]
            logits = model.model(input_ids=torch.cat([s, s.new_tensor(drafts)[None]], 1)).logits[
                0, s.shape[1] - 1 :
            ]
            emitted, acc = speculative_accept(
                normalize(logits, temperature, top_k, top_p), torch.stack(qs), drafts, generator
            )
            emitted = emitted[:remaining]
            s = torch.cat([s, s.new_tensor(emitted)[None]], 1)
            st.rounds += 1
            st.trunk_forwards += 2
            st.emitted += len(emitted)
            st.accepted_beyond_first += max(acc - 1, 0)
            st.accepted_per_round.append(acc)
        outs.append(s[0, n0:])
        stats = stats.merge(st)
    return outs, stats


# ----------------------------------------------------------------------------- JTP


class RelativeSelfAttention(nn.Module):
    """Causal self-attention over a short planning sequence with a learned additive bias per (head, i, j)
    (official ``RelativeSelfAttention``: qkv and output projections without bias, bias init 0)."""

    def __init__(self, p: int, n_head: int, max_len: int):
        super().__init__()
        if p % n_head:
            raise ValueError(f"hidden size {p} must be divisible by the JTP heads n_head={n_head}")
        self.n_head, self.max_len = n_head, max_len
        self.c_attn = nn.Linear(p, 3 * p, bias=False)
        self.c_proj = nn.Linear(p, p, bias=False)
        self.rel_pos_bias = nn.Parameter(torch.zeros(n_head, max_len, max_len))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, p = x.shape
        q, k, v = (t.view(B, L, self.n_head, p // self.n_head).transpose(1, 2) for t in self.c_attn(x).split(p, -1))
        causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        bias = self.rel_pos_bias[:, :L, :L].masked_fill(~causal, float("-inf"))
        # softmax(q k^T / sqrt(d_h) + b_{ij}) v, causal over the planning slots
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None])
        return self.c_proj(y.transpose(1, 2).reshape(B, L, p))


@dataclass
class JTPOutput:
    loss: torch.Tensor
    ntp: torch.Tensor
    slot_losses: list
    logits: torch.Tensor


class JTPForCausalLM(nn.Module):
    """Joint multi-token prediction (Ahn, Lamb, Langford 2025) around an HF causal LM (official semantics).

    With h_t the trunk's final-norm latent, e = the input embeddings, D = ``horizon``::

        c(u, h) = LN(u + gamma h)                          (gamma init 0.1, LayerNorm with bias)
        planning sequence  P_t = [c(e(x_t), h_t), c(e(x_{t+1}), h_t), ..., c(e(x_{t+D}), h_t)]
        O_t = RelAttn(P_t)                                  (one causal layer, learned bias per slot pair)
        slot 0:  z_t^(0) = W_out Norm(O_t[0])               predicts x_{t+1} (also the inference path)
        slot k:  z_t^(k) = W_out Norm(O_t[k] + h_t)          predicts x_{t+k+1} (teacher-forced)
        L = CE(z^(0), x_{t+1}) + lambda * (1/D) sum_k CE(z^(k), x_{t+k+1})

    Slot k's target is dropped when it falls outside the window, when a fed token x_{t+j} (j <= k) is
    EOS (the plan crossed into the next document), or when it is PAD; the NTP target drops PAD.
    """

    def __init__(self, model, horizon: int = 2, lambda_jtp: float = 1.0, n_head: int | None = None,
                 eos_token_id: int | None = None, pad_token_id: int | None = None):
        super().__init__()
        self.horizon = check_scalar(horizon, "horizon", int, min=1)
        self.lambda_jtp = check_scalar(lambda_jtp, "lambda_jtp", float, min=0)
        if getattr(model.config, "tie_word_embeddings", False):
            raise ValueError("model has a tied head (config.tie_word_embeddings=True); build it untied")
        self.model = model
        self.vocab = int(model.config.vocab_size)
        p = int(model.config.hidden_size)
        n_head = min(4, int(model.config.num_attention_heads)) if n_head is None else n_head
        n_head = check_scalar(n_head, "n_head", int, min=1)
        for name, tok in (("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if tok is not None:
                check_scalar(tok, name, int, min=0, max=self.vocab - 1)
        self.eos_token_id, self.pad_token_id = eos_token_id, pad_token_id
        self.attn = RelativeSelfAttention(p, n_head, self.horizon + 1)
        self.gamma = nn.Parameter(torch.tensor(0.1))
        self.combine_ln = nn.LayerNorm(p)
        self.norm = nn.LayerNorm(p, bias=False)
        for mod in (self.attn.c_attn, self.attn.c_proj):
            nn.init.normal_(mod.weight, 0.0, 0.02)
        dtype = next(model.parameters()).dtype
        for mod in (self.attn, self.combine_ln, self.norm):
            mod.to(dtype)
        self.gamma.data = self.gamma.data.to(dtype)

    check_ids = NextLatForCausalLM.check_ids

    def hidden(self, input_ids: torch.Tensor, attention_mask=None) -> torch.Tensor:
        return self.model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)

    def combine(self, u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.combine_ln(u + self.gamma * h)          # c(u, h) = LN(u + gamma h)

    def plan(self, h: torch.Tensor, fed: torch.Tensor) -> torch.Tensor:
        """Logits of the planning slots: h [N, p], fed [N, L] = (x_t, x_{t+1}, ..., x_{t+L-1})."""
        P = self.combine(self.embed(fed), h[:, None])        # [N, L, p]
        O = self.attn(P)
        O = torch.cat([O[:, :1], O[:, 1:] + h[:, None]], 1)  # residual h on slots k >= 1 only
        return self.model.get_output_embeddings()(self.norm(O))

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Inference: slot 0 alone (a planning sequence of length 1), for x_{t+1} at every position."""
        h = self.hidden(input_ids)
        B, T, p = h.shape
        return self.plan(h.reshape(B * T, p), input_ids.reshape(B * T, 1)).view(B, T, -1)

    def targets(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(fed [B, T, D+1] = x_{t..t+D} (0 past the window), target [B, T, D+1] = x_{t+1..t+D+1} or -100)."""
        B, T = input_ids.shape
        D = self.horizon
        pos = torch.arange(T)[:, None] + torch.arange(D + 2)[None, :]          # [T, D+2]
        inside = pos < T
        ids = input_ids[:, pos.clamp(max=T - 1)].masked_fill(~inside[None], 0)
        fed, tgt = ids[..., : D + 1], ids[..., 1:].masked_fill(~inside[None, :, 1:], -100)
        if self.eos_token_id is not None:  # slot k >= 1 drops its target once a fed x_{t+j}, 1 <= j <= k, is EOS
            crossed = torch.cummax((fed[..., 1:] == self.eos_token_id).int(), -1).values.bool()
            tgt[..., 1:] = tgt[..., 1:].masked_fill(crossed, -100)
        if self.pad_token_id is not None:
            tgt = tgt.masked_fill(tgt == self.pad_token_id, -100)
        return fed, tgt

    def forward(self, input_ids: torch.Tensor) -> JTPOutput:
        input_ids = self.check_ids(input_ids)
        h = self.hidden(input_ids)
        B, T, p = h.shape
        fed, tgt = self.targets(input_ids)
        z = self.plan(h.reshape(B * T, p), fed.reshape(B * T, -1)).view(B, T, self.horizon + 1, -1)
        losses = []
        for k in range(self.horizon + 1):
            y = tgt[:, :, k].reshape(-1)
            ce = F.cross_entropy(z[:, :, k].reshape(-1, self.vocab), y, ignore_index=-100, reduction="sum")
            losses.append(ce / (y != -100).sum().clamp_min(1))
        jtp = torch.stack(losses[1:]).mean()
        return JTPOutput(losses[0] + self.lambda_jtp * jtp, losses[0], losses, z[:, :, 0])


def jtp_loss_reference(m: JTPForCausalLM, input_ids: torch.Tensor) -> torch.Tensor:
    """The JTP loss by an explicit loop over positions and slots (test reference for ``forward``)."""
    h = m.hidden(input_ids)
    B, T, _ = h.shape
    D = m.horizon
    sums, counts = [h.new_zeros(()) for _ in range(D + 1)], [0] * (D + 1)
    for b in range(B):
        for t in range(T):
            fed = [int(input_ids[b, t + j]) if t + j < T else 0 for j in range(D + 1)]
            z = m.plan(h[b, t][None], torch.tensor([fed]))[0]
            crossed = False
            for k in range(D + 1):
                if k >= 1 and fed[k] == m.eos_token_id:
                    crossed = True
                if t + k + 1 >= T or crossed:
                    continue
                y = int(input_ids[b, t + k + 1])
                if y == m.pad_token_id:
                    continue
                sums[k] = sums[k] + F.cross_entropy(z[k][None], torch.tensor([y]))
                counts[k] += 1
    losses = [s / max(c, 1) for s, c in zip(sums, counts)]
    return losses[0] + m.lambda_jtp * torch.stack(losses[1:]).mean()


# ----------------------------------------------------------------------------- BST


@dataclass
class BSTOutput:
    loss: torch.Tensor
    ntp: torch.Tensor          # CE of the next-token half over the sampled pairs
    prev: torch.Tensor         # CE of the previous-token half
    pairs: int


class BSTForCausalLM(nn.Module):
    """Belief State Transformer (Hu et al. 2025) from two HF causal LMs (official semantics, full only).

    F = forward encoder (the first model's trunk, causal), B = backward encoder (the second model's trunk
    run on the reversed sequence, i.e. anti-causal; token embeddings shared with F). For a pair of
    positions i < j in one document::

        u = [F_i; B_j],  u <- LN(u + MLP(u))        (MLP = SwiGLU(2p -> m) -> Linear(m -> 2p))
        [u_next; u_prev] = u,   next = W u_next predicts x_{i+1},  prev = W u_prev predicts x_{j-1}
        (j = i + 1: both targets are EOS, the official "eos" single-gap mode)
        L = (CE_next + CE_prev) / 2, mean over the sampled pairs

    All O(T^2) valid pairs are used when ``subsample = 1``; otherwise each non-EOS pair is kept with the
    probability that makes the expected count ``subsample`` x the valid pairs (pairs that touch EOS are
    always kept). Generation (``next_token_logits``) pairs F_t with B of a lone EOS (the empty suffix).
    """

    def __init__(self, forward_model, backward_model, eos_token_id: int, subsample: float = 1.0,
                 pad_token_id: int | None = None, generator: torch.Generator | None = None):
        super().__init__()
        self.vocab = int(forward_model.config.vocab_size)
        self.eos_token_id = check_scalar(eos_token_id, "eos_token_id", int, min=0, max=self.vocab - 1)
        self.subsample = check_scalar(subsample, "subsample", float, min=0, max=1, inclusive="right")
        if pad_token_id is not None:
            check_scalar(pad_token_id, "pad_token_id", int, min=0, max=self.vocab - 1)
        if int(backward_model.config.hidden_size) != int(forward_model.config.hidden_size):
            raise ValueError("forward_model and backward_model must have the same hidden_size")
        self.pad_token_id = pad_token_id
        self.model, self.backward = forward_model, backward_model
        self.backward.set_input_embeddings(forward_model.get_input_embeddings())   # shared embeddings
        p = int(forward_model.config.hidden_size)
        m = 128 * round(8 * 2 * p / 3 / 128)
        self.gate, self.up = nn.Linear(2 * p, m, bias=False), nn.Linear(2 * p, m, bias=False)
        self.down = nn.Linear(m, 2 * p, bias=False)
        self.norm = nn.LayerNorm(2 * p, bias=False)
        self.head = nn.Linear(p, self.vocab, bias=False)
        for lin in (self.gate, self.up, self.down, self.head):
            nn.init.normal_(lin.weight, 0.0, 0.02)
        dtype = next(forward_model.parameters()).dtype
        for mod in (self.gate, self.up, self.down, self.norm, self.head):
            mod.to(dtype)
        self.generator = generator

    check_ids = NextLatForCausalLM.check_ids

    def hidden(self, input_ids: torch.Tensor) -> torch.Tensor:
        """F: the forward encoder's final-norm latents [B, T, p]."""
        return self.model.base_model(input_ids=input_ids).last_hidden_state

    def backward_hidden(self, input_ids: torch.Tensor) -> torch.Tensor:
        """B_j (covers x_j..x_T): the backward trunk on the reversed sequence, flipped back."""
        return self.backward.base_model(input_ids=input_ids.flip(1)).last_hidden_state.flip(1)

    def text_head(self, f: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = torch.cat([f, b], -1)
        u = self.norm(u + self.down(F.silu(self.gate(u)) * self.up(u)))
        nxt, prv = u.chunk(2, -1)
        return self.head(nxt), self.head(prv)

    def pairs(self, seq: torch.Tensor) -> torch.Tensor:
        """The (i, j) pairs of one sequence [T] used in the loss: i < j, same document, no PAD, subsampled."""
        T = seq.numel()
        i, j = torch.triu_indices(T, T, offset=1)
        eos = seq == self.eos_token_id
        doc_f = torch.cumsum(eos.long(), 0)                 # EOS starts a new document (forward) ...
        doc_b = doc_f.roll(1)
        doc_b[0] = 0                                        # ... and ends its own (backward)
        ok = doc_f[i] == doc_b[j]
        if self.pad_token_id is not None:
            ok &= (seq[i] != self.pad_token_id) & (seq[j] != self.pad_token_id)
        i, j = i[ok], j[ok]
        if self.subsample < 1 and len(i):
            touch = eos[i] | eos[j]
            rest = int((~touch).sum())
            target = self.subsample * len(i)
            prob = 0.0 if rest == 0 else max(0.0, min(1.0, (target - int(touch.sum())) / rest))
            keep = touch | (torch.rand(len(i), generator=self.generator) < prob)
            i, j = i[keep], j[keep]
        return torch.stack([i, j], 1)

    def forward(self, input_ids: torch.Tensor) -> BSTOutput:
        input_ids = self.check_ids(input_ids)
        Fh, Bh = self.hidden(input_ids), self.backward_hidden(input_ids)
        nxt_l, prv_l, n = [], [], 0
        for b, seq in enumerate(input_ids):
            pr = self.pairs(seq)
            if not len(pr):
                continue
            i, j = pr[:, 0], pr[:, 1]
            y_next, y_prev = seq[i + 1].clone(), seq[j - 1].clone()
            single = j - i == 1
            y_next[single], y_prev[single] = self.eos_token_id, self.eos_token_id
            zn, zp = self.text_head(Fh[b, i], Bh[b, j])
            nxt_l.append(F.cross_entropy(zn, y_next, reduction="sum"))
            prv_l.append(F.cross_entropy(zp, y_prev, reduction="sum"))
            n += len(pr)
        if n == 0:
            raise ValueError("input_ids has no valid (prefix, suffix) pair: sequences too short or all PAD")
        ntp, prev = torch.stack(nxt_l).sum() / n, torch.stack(prv_l).sum() / n
        return BSTOutput((ntp + prev) / 2, ntp, prev, n)

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Generation: next-token logits from [F_t; B(EOS)] at every position."""
        Fh = self.hidden(input_ids)
        b_eos = self.backward_hidden(input_ids.new_full((1, 1), self.eos_token_id))[0, 0]
        return self.text_head(Fh, b_eos.expand_as(Fh))[0]


def bst_loss_reference(m: BSTForCausalLM, input_ids: torch.Tensor) -> torch.Tensor:
    """BST loss by a loop over all pairs (subsample = 1), each suffix encoded on its own (test reference)."""
    Fh = m.hidden(input_ids)
    tot, n = Fh.new_zeros(()), 0
    for b, seq in enumerate(input_ids):
        T = len(seq)
        docs = [0]
        for t in range(1, T):
            docs.append(docs[-1] + int(seq[t - 1] == m.eos_token_id))   # backward doc: EOS closes it
        for i in range(T):
            doc_i = sum(int(x == m.eos_token_id) for x in seq[: i + 1])
            for j in range(i + 1, T):
                if doc_i != docs[j] or int(seq[i]) == m.pad_token_id or int(seq[j]) == m.pad_token_id:
                    continue
                suffix = seq[j:][None]
                bj = m.backward.base_model(input_ids=suffix.flip(1)).last_hidden_state[0, -1]
                zn, zp = m.text_head(Fh[b, i], bj)
                yn = m.eos_token_id if j == i + 1 else int(seq[i + 1])
                yp = m.eos_token_id if j == i + 1 else int(seq[j - 1])
                tot = tot + (F.cross_entropy(zn[None], torch.tensor([yn]))
                             + F.cross_entropy(zp[None], torch.tensor([yp]))) / 2
                n += 1
    return tot / n
