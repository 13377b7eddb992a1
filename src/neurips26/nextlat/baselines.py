"""Baseline objectives trained by the same trainer (spec M6): GPT is ``NextLatForCausalLM`` with
lambda = 0 (proved equal to plain next-token training); MTP (Gloeckle et al. 2024) is here.

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
