"""NextLatForCausalLM: next-token loss plus the next-latent objective around a Hugging Face causal LM.

h = the final-norm hidden state (the ``lm_head`` input, ``model.base_model(...).last_hidden_state``),
e = the model's input embeddings. The d-step teacher-forced rollout from every position is
vectorised by shifting (spec M3)::

    h^(1)_{t+1} = psi(h_t, e(x_{t+1})),   h^(i)_{t+i} = psi(h^(i-1)_{t+i-1}, e(x_{t+i}))
    L = CE + lambda_h * (1/d) sum_i SmoothL1(h^(i), sg[h_{t+i}]) + lambda_kl * (1/d) sum_i KL_i

with KL_i = KL(softmax(sg[z_{t+i}]) || softmax(sg[W_out] h^(i)_{t+i})). Only targets are detached: the
input latent and the embeddings get the gradient that shapes the trunk; L_KL never reaches ``lm_head``.
Masks (official per-step rule): step i drops the pair whose fed token x_{t+i} is EOS or PAD, whose
origin x_t is PAD, or whose target position t+i is a context token (< context_length); KL also drops
the last position (its teacher predicts a token outside the window). CE drops PAD / context targets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nextlat.latent_dynamics import LatentDynamics


def tiny_llama(vocab: int, hidden: int = 64, layers: int = 2, heads: int = 4, ctx: int = 128,
               mlp: int | None = None, dtype: torch.dtype = torch.float32):
    """A small HF Llama (MLP width 4p, heads = KV heads, untied head) built from config: no download."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp or 4 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                      max_position_embeddings=ctx, tie_word_embeddings=False, attention_dropout=0.0,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(cfg).to(dtype)


def block_size(model) -> int:
    cfg = model.config
    return int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions"))


@dataclass
class NextLatOutput:
    loss: torch.Tensor
    ntp: torch.Tensor
    latent: torch.Tensor
    kl: torch.Tensor
    logits: torch.Tensor
    hidden: torch.Tensor


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp_min(1.0)


def kl_forward(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) || softmax(student)) per position (sum over the vocabulary; >= 0)."""
    lt = F.log_softmax(teacher_logits, dim=-1)
    ls = F.log_softmax(student_logits, dim=-1)
    return (lt.exp() * (lt - ls)).sum(-1)


class NextLatForCausalLM(nn.Module):
    """A causal LM trained with CE + next-latent prediction; ``lambda_h = lambda_kl = 0`` is plain GPT.

    model:        a ``transformers`` causal LM with an UNTIED head (Llama, GPT-2 with
                  ``tie_word_embeddings=False``); a tied head raises ``ValueError``.
    d:            rollout horizon (official ``mtp_horizon``); lambda_h, lambda_kl: loss weights.
    proj_factor:  psi width rule (m >= 128); dropout, norm: psi options.
    eos_token_id, pad_token_id: tokens the masks use (None: no such token).
    aux_grad_to_trunk: True (the method): L_h and L_KL reach the trunk through the input latent h_t and the
                  embeddings e(x). False (an ABLATION, not the paper's method): psi is trained on detached h and
                  e, so the trunk's gradient is exactly the CE gradient; it isolates what the auxiliary
                  gradient does to the trunk (e.g. to the LM loss).
    """

    def __init__(self, model, d: int = 1, lambda_h: float = 1.0, lambda_kl: float = 1.0,
                 proj_factor: float = 1.0, dropout: float = 0.0, norm: str = "layernorm",
                 eos_token_id: int | None = None, pad_token_id: int | None = None, aux_grad_to_trunk: bool = True):
        super().__init__()
        self.d = check_scalar(d, "d", int, min=1)
        self.lambda_h = check_scalar(lambda_h, "lambda_h", float, min=0)
        self.lambda_kl = check_scalar(lambda_kl, "lambda_kl", float, min=0)
        norm = check_choice(norm, "norm", ("layernorm", "rms"))
        self.aux_grad_to_trunk = check_scalar(aux_grad_to_trunk, "aux_grad_to_trunk", bool)
        if getattr(model.config, "tie_word_embeddings", False):
            raise ValueError("model has a tied head (config.tie_word_embeddings=True): L_KL would update "
                             "lm_head through e(x); build it with tie_word_embeddings=False")
        self.model = model
        self.vocab = int(model.config.vocab_size)
        p = int(model.config.hidden_size)
        self.psi = LatentDynamics(p, proj_factor, dropout, norm)
        for name, tok in (("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if tok is not None:
                check_scalar(tok, name, int, min=0, max=self.vocab - 1)
        self.eos_token_id, self.pad_token_id = eos_token_id, pad_token_id
        self.psi.to(next(model.parameters()).dtype)
        self.nextlat_config = {"d": self.d, "lambda_h": self.lambda_h, "lambda_kl": self.lambda_kl,
                               "proj_factor": proj_factor, "dropout": dropout, "norm": norm,
                               "eos_token_id": eos_token_id, "pad_token_id": pad_token_id,
                               "aux_grad_to_trunk": aux_grad_to_trunk}

    # ----------------------------------------------------------------- save / load
    def save_pretrained(self, path: str | Path) -> Path:
        """Write ``path/lm`` (the wrapped model, HF format), ``path/psi.pt`` and ``path/nextlat.json``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path / "lm")
        torch.save(self.psi.state_dict(), path / "psi.pt")
        (path / "nextlat.json").write_text(json.dumps(self.nextlat_config, indent=1), encoding="utf-8")
        return path

    @classmethod
    def from_pretrained(cls, path: str | Path, **model_kwargs) -> "NextLatForCausalLM":
        """Inverse of ``save_pretrained``; ``model_kwargs`` go to ``AutoModelForCausalLM.from_pretrained``."""
        from transformers import AutoModelForCausalLM

        path = Path(path)
        if not (path / "nextlat.json").is_file():
            raise FileNotFoundError(f"path={str(path)!r} has no nextlat.json: not written by save_pretrained")
        cfg = json.loads((path / "nextlat.json").read_text(encoding="utf-8"))
        out = cls(AutoModelForCausalLM.from_pretrained(path / "lm", **model_kwargs), **cfg)
        out.psi.load_state_dict(torch.load(path / "psi.pt", weights_only=True))
        return out

    # ----------------------------------------------------------------- pieces
    @property
    def head(self) -> nn.Linear:
        return self.model.get_output_embeddings()

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)

    def check_ids(self, input_ids: torch.Tensor, name: str = "input_ids") -> torch.Tensor:
        if not torch.is_tensor(input_ids) or input_ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be an integer tensor")
        if input_ids.ndim != 2 or input_ids.shape[1] == 0:
            raise ValueError(f"{name} must be [batch, T] with T >= 1, got shape {tuple(input_ids.shape)}")
        if input_ids.shape[1] > block_size(self.model):
            raise ValueError(f"{name} has length {input_ids.shape[1]} > block size {block_size(self.model)}")
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= self.vocab:
            raise ValueError(f"{name} has token ids outside [0, {self.vocab})")
        return input_ids

    def hidden(self, input_ids: torch.Tensor, attention_mask=None, **kw) -> torch.Tensor:
        """h: the final-norm hidden states [B, T, p]."""
        out = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask, **kw)
        return out.last_hidden_state

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits for x_{t+1} at every position (the wrapped LM's own head: NextLat leaves inference alone)."""
        return self.model(input_ids=input_ids).logits

    def rollout(self, h: torch.Tensor, input_ids: torch.Tensor) -> list[torch.Tensor]:
        """[h^(1), ..., h^(d)]: h^(i)[:, t] predicts h_{t+i}, shape [B, T - i, p] (vectorised by shifting)."""
        e = self.embed(input_ids)
        if not self.aux_grad_to_trunk:  # ablation: psi sees sg[h], sg[e]
            h, e = h.detach(), e.detach()
        out, cur = [], h
        for i in range(1, self.d + 1):
            if h.shape[1] - i < 1:
                break
            cur = self.psi(cur[:, : h.shape[1] - i], e[:, i:])
            out.append(cur)
        return out

    def step_masks(self, input_ids: torch.Tensor, i: int, context_length: int = 0, teacher_at_end: bool = False):
        """(latent mask, KL mask) of rollout step i, each [B, T - i] (the official per-step rule).

        ``teacher_at_end``: the last position's logits have a target inside the window (sequence
        labelling, ``labels`` given), so KL keeps it."""
        B, T = input_ids.shape
        fed, origin = input_ids[:, i:], input_ids[:, : T - i]
        ok = torch.ones_like(fed, dtype=torch.bool)
        if self.eos_token_id is not None:
            ok &= fed != self.eos_token_id
        if self.pad_token_id is not None:
            ok &= (fed != self.pad_token_id) & (origin != self.pad_token_id)
        pos = torch.arange(i, T, device=input_ids.device)
        ok &= (pos >= context_length)[None, :]
        kl = ok if teacher_at_end else ok & (pos < T - 1)[None, :]
        return ok, kl

    # ----------------------------------------------------------------- loss
    def forward(self, input_ids: torch.Tensor, attention_mask=None, context_length: int = 0,
                labels: torch.Tensor | None = None) -> NextLatOutput:
        """Losses of one batch. ``labels`` [B, T] (optional): sequence labelling (the group word problem),
        z_t predicts labels_t instead of x_{t+1}; psi is still fed the next INPUT token x_{t+1}."""
        input_ids = self.check_ids(input_ids)
        context_length = check_scalar(context_length, "context_length", int, min=0)
        if labels is not None:
            labels = self.check_ids(labels, "labels")
            if labels.shape != input_ids.shape:
                raise ValueError(f"labels must have input_ids' shape {tuple(input_ids.shape)}, got {tuple(labels.shape)}")
        h = self.hidden(input_ids, attention_mask)
        logits = self.head(h)
        if labels is None:
            tgt, z, pos = input_ids[:, 1:], logits[:, :-1], torch.arange(1, input_ids.shape[1], device=h.device)
        else:
            tgt, z, pos = labels, logits, torch.arange(input_ids.shape[1], device=h.device)
        ntp_mask = (pos >= context_length)[None, :].expand_as(tgt)
        if self.pad_token_id is not None:
            ntp_mask = ntp_mask & (tgt != self.pad_token_id)
        ce = F.cross_entropy(z.reshape(-1, self.vocab), tgt.reshape(-1), reduction="none")
        ntp = masked_mean(ce.view_as(tgt), ntp_mask)
        zero = h.new_zeros(())
        lat, kl = zero, zero
        if self.lambda_h > 0 or self.lambda_kl > 0:
            steps = self.rollout(h, input_ids)
            w_sg = self.head.weight.detach()
            b_sg = None if self.head.bias is None else self.head.bias.detach()
            lat_terms, kl_terms = [], []
            for i, hh in enumerate(steps, start=1):
                m_h, m_kl = self.step_masks(input_ids, i, context_length, teacher_at_end=labels is not None)
                target = h[:, i:].detach()
                reg = F.smooth_l1_loss(hh, target, beta=1.0, reduction="none").mean(-1)
                lat_terms.append(masked_mean(reg, m_h))
                student = F.linear(hh, w_sg, b_sg)
                kl_terms.append(masked_mean(kl_forward(logits[:, i:].detach(), student), m_kl))
            if steps:
                lat = torch.stack(lat_terms).sum() / self.d
                kl = torch.stack(kl_terms).sum() / self.d
        loss = ntp
        if self.lambda_h > 0:
            loss = loss + self.lambda_h * lat
        if self.lambda_kl > 0:
            loss = loss + self.lambda_kl * kl
        return NextLatOutput(loss, ntp, lat, kl, logits, h)


def nextlat_loss_reference(m: NextLatForCausalLM, input_ids: torch.Tensor, context_length: int = 0):
    """The same (latent, KL) losses by an explicit per-position, per-step Python loop (test reference)."""
    h = m.hidden(input_ids)
    logits = m.head(h)
    B, T, _ = h.shape
    eos, pad = m.eos_token_id, m.pad_token_id
    lat_terms, kl_terms = [], []
    for i in range(1, m.d + 1):
        if T - i < 1:
            break
        lat_sum, lat_n, kl_sum, kl_n = h.new_zeros(()), 0, h.new_zeros(()), 0
        for b in range(B):
            for t in range(T - i):
                cur = h[b, t]
                for j in range(1, i + 1):
                    cur = m.psi(cur, m.embed(input_ids[b, t + j]))
                x_fed, x_org = int(input_ids[b, t + i]), int(input_ids[b, t])
                ok = x_fed != eos and x_fed != pad and x_org != pad and t + i >= context_length
                if ok:
                    lat_sum = lat_sum + F.smooth_l1_loss(cur, h[b, t + i].detach(), beta=1.0)
                    lat_n += 1
                if ok and t + i < T - 1:
                    kl_sum = kl_sum + kl_forward(logits[b, t + i].detach(), cur @ m.head.weight.detach().T)
                    kl_n += 1
        lat_terms.append(lat_sum / max(lat_n, 1))
        kl_terms.append(kl_sum / max(kl_n, 1))
    return torch.stack(lat_terms).sum() / m.d, torch.stack(kl_terms).sum() / m.d


def gpt_loss(model, input_ids: torch.Tensor) -> torch.Tensor:
    """Plain next-token CE of an HF causal LM (the GPT baseline and the bench anchor)."""
    logits = model(input_ids=input_ids).logits
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1))
