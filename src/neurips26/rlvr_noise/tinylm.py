"""The ``tinylm`` policy (spec §5): a char-level GPT-2-shaped transformer, SFT on the bandit's base
distribution rendered as text, then RL with the package's objectives on real token sequences.

Model (GPT-2 shape, nanoGPT style): token + learned position embeddings, ``n_layer`` pre-LayerNorm blocks
(causal self-attention, 4x GELU MLP), final LayerNorm, LM head tied to the token embedding.
Defaults: 2 layers, d = 64, 4 heads, context 64 (spec).

Sequences:  [<pad> ... <pad>] <family tag> problem text <ans> | completion <eos>
            prompts are left-padded to one length P (pad tokens are ordinary inputs, in SFT and RL alike);
            completion = ``\\boxed{v}`` in one of the renderer's formats, or the bare value (malformed).
Base (SFT): ``sft_samples`` completions per training problem drawn from the bandit's base distribution
            pi_0(k | q) * pi_0(f) and rendered as text, so the prior holds the same typed bugs and format
            failures; cross-entropy on the completion tokens.
RL step:    sample G completions per prompt from pi_old (temperature 1; bfloat16 logits for TIS so that the
            sampler mu differs from the float32 trainer), score the decoded text with ``math_reward`` (or
            ``format_reward``), advantages from ``objectives.advantages`` (+ DAPO's overlong shaping and
            dynamic sampling), then one epoch of ``minibatches`` Adam steps on
            ``objectives.policy_loss(logp, old_logp, A, mask, variant, sampler_logp, l_max)`` with
            per-token log-probs from the model. Lengths vary, so the aggregations of GRPO (1/(G|o_i|)),
            DAPO (1/sum|o_i|) and Dr. GRPO (1/(G L_max)) really differ here.
Evaluation: ``n_eval`` sampled completions per problem (and greedy) judged against the exact solution set
            S(q); pass@k by the unbiased estimator. ASSUMPTION (known deviation): a 2-layer d = 64 model
            memorises per-problem answer distributions rather than learning arithmetic, so tinylm accuracy
            is measured on the RL problems themselves (the bandit's is on fresh test problems).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.rlvr_noise.mathgen import FAMILIES, MALFORMED, N_FORMATS, N_SKILLS, label_is_correct, render_value
from neurips26.rlvr_noise.objectives import (Variant, advantages, informative_groups, overlong_shaping,
                                             pass_at_k, policy_loss)
from neurips26.rlvr_noise.verifiers import format_reward, last_boxed, math_reward

SPECIALS = ("<pad>", "<ans>", "<eos>") + tuple(f"<{f}>" for f in FAMILIES)
MULTI_CHAR = ("\\boxed{", "\\frac{", "}{", "\\%", "\\{", "\\}")
CHARS = tuple("0123456789 -+*/=|x^%.,of}")
VOCAB = SPECIALS + MULTI_CHAR + CHARS
PAD, ANS, EOS = 0, 1, 2


class CharTokenizer:
    """Char-level tokenizer with the few multi-char LaTeX tokens (greedy longest match)."""

    def __init__(self, vocab=VOCAB):
        self.vocab = tuple(vocab)
        self.index = {t: i for i, t in enumerate(self.vocab)}
        self._multi = sorted((t for t in self.vocab if len(t) > 1 and not t.startswith("<")), key=len,
                             reverse=True)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            for t in self._multi:
                if text.startswith(t, i):
                    out.append(self.index[t])
                    i += len(t)
                    break
            else:
                ch = text[i]
                if ch not in self.index:
                    raise ValueError(f"text has a character outside the tinylm vocabulary: {ch!r} in {text!r}")
                out.append(self.index[ch])
                i += 1
        return out

    def decode(self, ids) -> str:
        return "".join(self.vocab[int(i)] for i in ids if int(i) not in (PAD, ANS, EOS))

    def prompt(self, problem) -> list[int]:
        return [self.index[f"<{problem.family}>"]] + self.encode(problem.text) + [ANS]


TOKENIZER = CharTokenizer()


def lm_completion(value, fmt: int) -> str:
    """The tinylm completion of ``value`` in format ``fmt``: ``\\boxed{body}``, or the bare body if malformed."""
    body = render_value(value, fmt)
    return body if fmt == MALFORMED else f"\\boxed{{{body}}}"


@dataclass(frozen=True)
class TinyLMConfig:
    """Model shape, SFT and RL settings (ASSUMPTIONs: Adam, the learning rates, sft_samples/epochs)."""

    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    block_size: int = 64
    l_max: int = 24           # completion tokens (DAPO's L_max)
    l_cache: int = 8          # DAPO's overlong buffer
    sft_samples: int = 16     # base-policy completions per training problem
    sft_epochs: int = 10
    sft_batch: int = 32
    sft_lr: float = 3e-3
    steps: int = 300
    batch: int = 64           # prompts per step
    group: int = 16           # G
    minibatches: int = 2      # PPO: each epoch in this many Adam steps (later ones see rho != 1)
    ppo_epochs: int = 1
    beta: float = 0.0         # KL coefficient (ASSUMPTION: 0); > 0 keeps a frozen copy of the SFT base as pi_ref
    lr: float = 2e-4          # RL (1e-3 degenerated to max-length outputs in a smoke run)
    n_eval: int = 8           # sampled completions per evaluation problem
    max_eval: int = 256       # evaluation problems (a seeded subset of the RL problems)
    device: str = "auto"      # "auto": cuda when available, else cpu

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_embd", "n_head", "block_size", "l_max", "l_cache", "sft_samples", "sft_batch",
                     "batch", "n_eval", "max_eval"):
            check_scalar(getattr(self, name), name, int, min=1)
        check_scalar(self.sft_epochs, "sft_epochs", int, min=0)
        check_scalar(self.steps, "steps", int, min=0)
        check_scalar(self.group, "group", int, min=2)
        check_scalar(self.minibatches, "minibatches", int, min=1, max=self.batch)
        check_scalar(self.ppo_epochs, "ppo_epochs", int, min=1)
        check_scalar(self.beta, "beta", float, min=0)
        check_scalar(self.l_cache, "l_cache", int, min=1, max=self.l_max)
        check_scalar(self.lr, "lr", float, min=0, inclusive="neither")
        check_scalar(self.sft_lr, "sft_lr", float, min=0, inclusive="neither")
        check_choice(self.device, "device", ("auto", "cpu", "cuda"))
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")


def _torch():
    import torch

    return torch


def _device(cfg: TinyLMConfig):
    torch = _torch()
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def build_model(cfg: TinyLMConfig, vocab_size: int = len(VOCAB), seed: int = 0):
    """A freshly initialised GPT-2-shaped ``TinyLM`` (GPT-2's N(0, 0.02) init, scaled residual projections)."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.n_embd
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            heads = lambda t: t.view(B, T, cfg.n_head, d // cfg.n_head).transpose(1, 2)  # noqa: E731
            y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = cfg
            self.wte = nn.Embedding(vocab_size, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.h = nn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(cfg.n_embd)

        def forward(self, idx):
            T = idx.shape[1]
            if T > cfg.block_size:
                raise ValueError(f"sequence length {T} exceeds the context block_size={cfg.block_size}")
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for blk in self.h:
                x = blk(x)
            return self.ln_f(x) @ self.wte.weight.T   # tied LM head

    g = torch.Generator().manual_seed(seed)
    model = TinyLM()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                std = 0.02 / math.sqrt(2 * cfg.n_layer) if name.endswith("proj.weight") else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("bias"):
                p.zero_()
    return model.to(_device(cfg))


# ---- sequences --------------------------------------------------------------------------------------
def encode_prompts(problems, length: int | None = None):
    """Left-padded prompt ids [N, P] (P = the longest prompt unless ``length`` is given)."""
    torch = _torch()
    ids = [TOKENIZER.prompt(p) for p in problems]
    P = length or max(map(len, ids))
    if max(map(len, ids)) > P:
        raise ValueError(f"a prompt is longer than length={P}")
    return torch.tensor([[PAD] * (P - len(x)) + x for x in ids], dtype=torch.long)


def completion_logp(model, prompts, completions):
    """Per-token log pi(o_t | q, o_<t) [N, L] of ``completions`` [N, L] after ``prompts`` [N, P]."""
    torch = _torch()
    P = prompts.shape[1]
    seq = torch.cat([prompts, completions], dim=1)
    logits = model(seq[:, :-1])[:, P - 1:].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, completions[..., None])[..., 0]


def generate(model, prompts, max_new: int, generator, greedy: bool = False, bf16: bool = False):
    """Sample completions: (tokens [N, L], mask [N, L] incl. the EOS, sampler log-probs [N, L]).

    bf16: sample from bfloat16-rounded logits (the TIS sampler/trainer mismatch); the returned log-probs
    are the sampler's (mu).
    """
    torch = _torch()
    N = prompts.shape[0]
    seq = prompts
    done = torch.zeros(N, dtype=torch.bool, device=prompts.device)
    toks, masks, lps = [], [], []
    with torch.no_grad():
        for _ in range(max_new):
            logits = model(seq)[:, -1].float()
            if bf16:
                logits = logits.to(torch.bfloat16).float()
            logp = torch.log_softmax(logits, dim=-1)
            if greedy:
                tok = logp.argmax(-1)
            else:
                tok = torch.multinomial(logp.exp().cpu(), 1, generator=generator)[:, 0].to(prompts.device)
            masks.append(~done)
            tok = torch.where(done, torch.full_like(tok, PAD), tok)
            lps.append(logp.gather(-1, tok[:, None])[:, 0])
            toks.append(tok)
            done = done | (tok == EOS)
            seq = torch.cat([seq, tok[:, None]], dim=1)
            if bool(done.all()):
                break
    return torch.stack(toks, 1), torch.stack(masks, 1).to(torch.float32), torch.stack(lps, 1)


def decode_completions(tokens, mask) -> list[str]:
    return [TOKENIZER.decode(t[m > 0].tolist()) for t, m in zip(tokens.cpu(), mask.cpu())]


def is_correct(problem, completion: str) -> bool:
    """Ground truth: the completion's boxed answer denotes a member of S(q)."""
    ans = last_boxed(completion)
    return ans is not None and label_is_correct(problem, ans)


# ---- SFT: the base policy ---------------------------------------------------------------------------
def sft_corpus(problems, skill_probs, format_probs, n_samples: int, seed: int = 0) -> list[tuple[int, str]]:
    """(problem index, completion text) pairs drawn from pi_0(k | q) * pi_0(f), ``n_samples`` per problem."""
    sp = np.asarray(skill_probs, dtype=float)
    if sp.shape != (len(problems), N_SKILLS):
        raise ValueError(f"skill_probs must have shape ({len(problems)}, {N_SKILLS}), got {sp.shape}")
    rng = np.random.default_rng(seed)
    ks = (rng.random((len(problems), n_samples))[:, :, None] > np.cumsum(sp, 1)[:, None, :]).sum(2).clip(0, 5)
    pf = np.asarray(format_probs, dtype=float)
    fs = rng.choice(N_FORMATS, size=(len(problems), n_samples), p=pf / pf.sum())
    return [(i, lm_completion(p.skill_answers[ks[i, j]], int(fs[i, j])))
            for i, p in enumerate(problems) for j in range(n_samples)]


def sft(model, problems, skill_probs, format_probs, cfg: TinyLMConfig, seed: int = 0) -> list[float]:
    """Fit the base distribution by cross-entropy on completion tokens; returns the per-epoch mean loss."""
    torch = _torch()
    if len(problems) == 0:
        raise ValueError("problems must not be empty")
    dev = next(model.parameters()).device
    corpus = sft_corpus(problems, skill_probs, format_probs, cfg.sft_samples, seed)
    prompts = encode_prompts(problems)
    comp = [TOKENIZER.encode(c) + [EOS] for _, c in corpus]
    L = max(map(len, comp))
    if prompts.shape[1] + L > cfg.block_size:
        raise ValueError(f"prompt ({prompts.shape[1]}) + completion ({L}) exceed block_size={cfg.block_size}")
    C = torch.tensor([c + [PAD] * (L - len(c)) for c in comp], dtype=torch.long)
    M = torch.tensor([[1.0] * len(c) + [0.0] * (L - len(c)) for c in comp])
    Pi = torch.tensor([i for i, _ in corpus], dtype=torch.long)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.sft_lr)
    g = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    for _ in range(cfg.sft_epochs):
        perm = torch.randperm(len(comp), generator=g)
        tot = 0.0
        for s in range(0, len(perm), cfg.sft_batch):
            b = perm[s:s + cfg.sft_batch]
            lp = completion_logp(model, prompts[Pi[b]].to(dev), C[b].to(dev))
            m = M[b].to(dev)
            loss = -(lp * m).sum() / m.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(b)
        losses.append(tot / len(perm))
    return losses


# ---- RL ---------------------------------------------------------------------------------------------
def score(problems, labels, texts: list[str], group: int) -> np.ndarray:
    """Rewards [B, G]: ``math_reward(label, text)``, or ``format_reward`` where ``labels`` is None."""
    r = [format_reward(t) if labels is None else math_reward(labels[i // group], t) for i, t in enumerate(texts)]
    return np.asarray(r, dtype=float).reshape(len(problems), group)


def train_rl(model, problems, labels, variant: Variant, cfg: TinyLMConfig, seed: int = 0, rho1: float = 0.0,
             progress=None) -> dict:
    """RL on ``problems`` with reward labels ``labels`` (None: format reward); trains ``model`` in place.

    seed fixes the prompt order and the sampling generator (common random numbers across conditions).
    rho1: the FN rate given to PGFC / PGBC (share of wrong labels); PGBC's rho0 is measured on the fly from
    the ground truth (rewarded answers that are wrong).
    Returns per-step curves: reward, entropy (mean per-token, of the sampled completions), length, kept groups.
    """
    torch = _torch()
    n = len(problems)
    if n == 0:
        raise ValueError("empty dataset: no problems")
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels has {len(labels)} entries for {n} problems")
    dev = next(model.parameters()).device
    prompts_all = encode_prompts(problems)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    G, bf16 = cfg.group, variant.tis_cap is not None
    ref_model = None
    if cfg.beta > 0:
        import copy

        ref_model = copy.deepcopy(model).eval()
    curves = {"reward": [], "entropy": [], "length": [], "kept_groups": []}
    steps = range(cfg.steps) if progress is None else progress(range(cfg.steps))
    for _ in steps:
        rounds = 1 + (variant.max_resample_rounds if variant.dynamic_sampling else 0)
        keep_idx, keep_tok, keep_mask, keep_mu, keep_R = [], [], [], [], []
        have = 0
        model.eval()
        for _r in range(rounds):
            idx = rng.integers(n, size=cfg.batch)
            pr = prompts_all[np.repeat(idx, G)].to(dev)
            tok, mask, mu = generate(model, pr, cfg.l_max, gen, bf16=bf16)
            texts = decode_completions(tok, mask)
            R = score([problems[i] for i in idx], None if labels is None else [labels[i] for i in idx], texts, G)
            if variant.name == "dapo":   # overlong shaping (tokens before EOS)
                ended = (tok == EOS).any(1).cpu().numpy()
                lens = mask.sum(1).cpu().numpy() - ended
                R = R + overlong_shaping(np.where(ended, lens, cfg.l_max + 1), cfg.l_max, cfg.l_cache).reshape(R.shape)
            keep = informative_groups(R) if variant.dynamic_sampling else np.ones(cfg.batch, bool)
            rows = np.flatnonzero(np.repeat(keep, G))
            keep_idx.append(idx[keep]); keep_R.append(R[keep])                      # noqa: E702
            keep_tok.append(tok[rows]); keep_mask.append(mask[rows]); keep_mu.append(mu[rows])  # noqa: E702
            have += int(keep.sum())
            if have >= cfg.batch:
                break
        idx = np.concatenate(keep_idx)[: cfg.batch]
        R = np.concatenate(keep_R)[: cfg.batch]
        width = max(t.shape[1] for t in keep_tok)
        pad = lambda ts, v: torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=v) for t in ts])[: len(idx) * G]  # noqa: E731
        tok, mask, mu = pad(keep_tok, PAD), pad(keep_mask, 0.0), pad(keep_mu, 0.0)
        curves["reward"].append(float(R.mean()) if R.size else 0.0)
        curves["kept_groups"].append(int(len(idx)))
        curves["length"].append(float(mask.sum(1).mean()) if len(idx) else float("nan"))
        if len(idx) == 0:
            curves["entropy"].append(curves["entropy"][-1] if curves["entropy"] else float("nan"))
            continue
        rho0 = 0.0
        if variant.advantage == "pgbc":
            texts = decode_completions(tok, mask)
            wrong = np.array([not is_correct(problems[idx[j // G]], t) for j, t in enumerate(texts)])
            rflat = R.reshape(-1)
            rho0 = float(min(rflat[wrong].mean() if wrong.any() else 0.0, 0.999 - rho1))
        A = torch.as_tensor(advantages(R, variant, rho0=rho0, rho1=rho1).reshape(-1), dtype=torch.float32, device=dev)
        prompts = prompts_all[np.repeat(idx, G)].to(dev)
        with torch.no_grad():
            old = completion_logp(model, prompts, tok)
            ref = completion_logp(ref_model, prompts, tok) if ref_model is not None else None
        model.train()
        mbs = np.array_split(np.arange(len(idx)), min(cfg.minibatches, len(idx)))
        for mb in (m for _ep in range(cfg.ppo_epochs) for m in mbs):
            rows = torch.as_tensor(np.concatenate([np.arange(i * G, (i + 1) * G) for i in mb]), device=dev)
            logp = completion_logp(model, prompts[rows], tok[rows])
            loss = policy_loss(logp, old[rows], A[rows], mask[rows], variant, sampler_logp=mu[rows], l_max=cfg.l_max,
                               ref_logp=None if ref is None else ref[rows], beta=cfg.beta)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        curves["entropy"].append(float(-(old * mask).sum() / mask.sum()))   # mean -log pi_old per sampled token
    return curves


def evaluate_lm(model, problems, cfg: TinyLMConfig, seed: int = 0, ks=(1, 2, 4, 8)) -> dict:
    """Accuracy over ``n_eval`` samples per problem, greedy accuracy, pass@k (unbiased), format failures,
    mean completion length and mean per-token -log pi of the samples (entropy estimate)."""
    torch = _torch()
    dev = next(model.parameters()).device
    model.eval()
    n = cfg.n_eval
    prompts = encode_prompts(problems).to(dev)
    gen = torch.Generator().manual_seed(seed)
    tok, mask, lp = generate(model, prompts.repeat_interleave(n, 0), cfg.l_max, gen)
    texts = decode_completions(tok, mask)
    c = np.array([is_correct(problems[j // n], t) for j, t in enumerate(texts)]).reshape(len(problems), n)
    gt, gm, _ = generate(model, prompts, cfg.l_max, gen, greedy=True)
    greedy = [is_correct(p, t) for p, t in zip(problems, decode_completions(gt, gm))]
    return {
        "acc": float(c.mean()),
        "greedy_acc": float(np.mean(greedy)),
        "pass_at_k": {str(k): float(np.mean([pass_at_k(n, int(ci), k) for ci in c.sum(1)])) for k in ks if k <= n},
        "entropy": float(-(lp * mask).sum() / mask.sum()),
        "p_malformed": float(np.mean([format_reward(t) == 0 for t in texts])),
        "length": float(mask.sum(1).mean()),
    }
