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
Data parallel (``data_parallel=True`` in a torch.distributed group, e.g. under ``torchrun``): ``sft`` and
            ``train_rl`` split each step's sequences / groups over the ranks and sum the gradients; W ranks
            reproduce the one-process run (see ``train_rl``).
Evaluation: ``n_eval`` sampled completions per problem (and greedy) judged against the exact solution set
            S(q); pass@k by the unbiased estimator. ASSUMPTION (known deviation): a 2-layer d = 64 model
            memorises per-problem answer distributions rather than learning arithmetic, so tinylm accuracy
            is measured on the RL problems themselves (the bandit's is on fresh test problems).
"""

from __future__ import annotations

import math
import os
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
    data_parallel: bool = False   # share sft / train_rl over the ranks of an initialised process group

    def __post_init__(self) -> None:
        if not isinstance(self.data_parallel, bool):
            raise TypeError(f"data_parallel must be a bool, got {type(self.data_parallel).__name__}")
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
    """cpu, or cuda (under torchrun with ``data_parallel``: the rank's ``cuda:LOCAL_RANK``)."""
    torch = _torch()
    kind = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    if kind == "cuda" and cfg.data_parallel and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return torch.device(kind)


# ---- data parallel ----------------------------------------------------------------------------------
def dp_world(cfg: TinyLMConfig) -> tuple[int, int]:
    """(rank, world) that ``sft`` / ``train_rl`` share their work over.

    ``cfg.data_parallel`` False: (0, 1). True: the default process group's rank and size when one is
    initialised (``launch_local``, or a script that called ``init_process_group``); under ``torchrun``
    without one (RANK / WORLD_SIZE / MASTER_ADDR in the environment) it is initialised here from ``env://``
    (gloo on CPU, nccl on CUDA); a lone process without either is one rank. The result does not depend on
    the world size (see ``train_rl``), so a lone process is the reference run.
    """
    if not cfg.data_parallel:
        return 0, 1
    import torch.distributed as dist

    if not dist.is_available():
        return 0, 1
    if not dist.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return 0, 1
        dist.init_process_group("nccl" if _device(cfg).type == "cuda" else "gloo", init_method="env://")
    return dist.get_rank(), dist.get_world_size()


def rank_slice(n: int, rank: int, world: int) -> tuple[int, int]:
    """[lo, hi) of this rank's contiguous share of n items (``np.array_split`` sizes; may be empty)."""
    q, r = divmod(n, world)
    lo = rank * q + min(rank, r)
    return lo, lo + q + (rank < r)


def _allsum(x: np.ndarray, world: int, device) -> np.ndarray:
    """Element-wise sum of ``x`` over the ranks (float64; identity on one rank)."""
    if world == 1:
        return x
    import torch.distributed as dist

    t = _torch().as_tensor(np.ascontiguousarray(x, dtype=np.float64), device=device)
    dist.all_reduce(t)
    return t.cpu().numpy()


def _allreduce_grads(model, world: int, extra=None):
    """Sum every parameter's gradient over the ranks (a rank without data contributes zeros) in one flat
    all-reduce; ``extra`` (a 1-D float tensor, e.g. loss sums) rides along and is returned summed."""
    torch = _torch()
    ps = [p for p in model.parameters() if p.requires_grad]
    parts = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in ps]
    dev = ps[0].device
    extra = torch.zeros(0, device=dev) if extra is None else extra.to(device=dev, dtype=parts[0].dtype)
    flat = torch.cat(parts + [extra])
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(flat)
    off = 0
    for p in ps:
        p.grad = flat[off:off + p.numel()].view_as(p).clone()
        off += p.numel()
    return flat[off:]


def _broadcast_params(model, world: int) -> None:
    """Every rank starts from rank 0's weights (equal anyway when each rank built the model from one seed)."""
    if world > 1:
        import torch.distributed as dist

        for t in model.state_dict().values():
            dist.broadcast(t, 0)


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


def generate(model, prompts, max_new: int, generator=None, greedy: bool = False, bf16: bool = False,
             uniforms=None):
    """Sample completions: (tokens [N, L], mask [N, L] incl. the EOS, sampler log-probs [N, L]).

    Sampling is by inverse CDF: token = the first index whose cumulative probability exceeds u * total, with
    one uniform u per (row, position), ``uniforms[:, t]`` when given ([N, >= max_new], in [0, 1)), else drawn
    from ``generator``. A row's tokens depend only on its own uniforms, so a rank that samples a slice of the
    global batch with the slice of the global uniforms gets the one-process tokens (data parallel).
    bf16: sample from bfloat16-rounded logits (the TIS sampler/trainer mismatch); the returned log-probs
    are the sampler's (mu).
    """
    torch = _torch()
    N = prompts.shape[0]
    if uniforms is not None and (uniforms.shape[0] != N or uniforms.shape[1] < max_new):
        raise ValueError(f"uniforms must have shape [{N}, >= {max_new}], got {tuple(uniforms.shape)}")
    if uniforms is None and generator is None and not greedy:
        raise ValueError("sampling needs a generator or uniforms")
    seq = prompts
    done = torch.zeros(N, dtype=torch.bool, device=prompts.device)
    toks, masks, lps = [], [], []
    with torch.no_grad():
        for t in range(max_new):
            logits = model(seq)[:, -1].float()
            if bf16:
                logits = logits.to(torch.bfloat16).float()
            logp = torch.log_softmax(logits, dim=-1)
            if greedy:
                tok = logp.argmax(-1)
            else:
                u = uniforms[:, t] if uniforms is not None else torch.rand(N, generator=generator)
                cdf = logp.exp().cumsum(-1)
                target = u.to(device=cdf.device, dtype=cdf.dtype)[:, None] * cdf[:, -1:]
                tok = (cdf <= target).sum(-1).clamp(max=logp.shape[-1] - 1)
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
    """Fit the base distribution by cross-entropy on completion tokens; returns the per-epoch mean loss.

    Data parallel (``cfg.data_parallel`` in a process group): every rank draws the same shuffled corpus,
    takes its share of each batch of ``sft_batch`` sequences, divides its token log-likelihood sum by the
    batch's global token count and the gradients are summed over the ranks: the one-process step.
    """
    torch = _torch()
    if len(problems) == 0:
        raise ValueError("problems must not be empty")
    rank, world = dp_world(cfg)
    dev = next(model.parameters()).device
    _broadcast_params(model, world)
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
            n_tok = float(M[b].sum())
            lo, hi = rank_slice(len(b), rank, world)
            opt.zero_grad(set_to_none=True)
            nll = torch.zeros(1)
            if hi > lo:
                mine = b[lo:hi]
                lp = completion_logp(model, prompts[Pi[mine]].to(dev), C[mine].to(dev))
                loss = -(lp * M[mine].to(dev)).sum() / n_tok
                loss.backward()
                nll = loss.detach().reshape(1)
            if world > 1:
                nll = _allreduce_grads(model, world, nll)
            opt.step()
            tot += float(nll[0]) * len(b)
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

    seed fixes the prompt order and the sampling uniforms (common random numbers across conditions): round r
    of step t draws its B prompts from one seeded stream and one uniform per (completion, position) from
    ``default_rng([seed, t, r])``, for the whole global batch.
    rho1: the FN rate given to PGFC / PGBC (share of wrong labels); PGBC's rho0 is measured on the fly from
    the ground truth (rewarded answers that are wrong).
    Data parallel (``cfg.data_parallel`` in a process group of W ranks; see ``dp_world``): rank k samples,
    decodes and scores only its contiguous slice of the B groups (with that slice of the uniforms, so its
    tokens are the one-process tokens), keeps their token tensors, and trains on them; the per-group
    rewards, lengths and ground-truth flags ([B, G] floats) are summed over the ranks so that every rank
    takes the same global decisions (dynamic sampling's keep/stop, the kept batch, PGBC's rho0, curves).
    Advantages are per group, and a group never straddles ranks. Each mini-batch's loss on a rank is its
    share of the global loss (GRPO / Dr. GRPO: x rows_k / rows; DAPO's token mean: x tokens_k / tokens),
    gradients are summed over the ranks in one flat all-reduce and every rank takes the same Adam step:
    W ranks reproduce the one-process run up to float summation order (tested, 2 gloo ranks).
    Returns per-step curves: reward, entropy (mean per-token, of the sampled completions), length, kept
    groups.
    """
    torch = _torch()
    n = len(problems)
    if n == 0:
        raise ValueError("empty dataset: no problems")
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels has {len(labels)} entries for {n} problems")
    rank, world = dp_world(cfg)
    dev = next(model.parameters()).device
    _broadcast_params(model, world)
    prompts_all = encode_prompts(problems)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    G, B, bf16 = cfg.group, cfg.batch, variant.samples_bf16
    lo, hi = rank_slice(B, rank, world)           # this rank's groups of every sampled batch
    ref_model = None
    if cfg.beta > 0:
        import copy

        ref_model = copy.deepcopy(model).eval()
    curves = {"reward": [], "entropy": [], "length": [], "kept_groups": []}
    steps = range(cfg.steps) if progress is None or rank != 0 else progress(range(cfg.steps))
    for step in steps:
        rounds = 1 + (variant.max_resample_rounds if variant.dynamic_sampling else 0)
        sampled, have = [], 0
        model.eval()
        for r in range(rounds):
            idx = rng.integers(n, size=B)
            U = np.random.default_rng([seed, step, r]).random((B * G, cfg.l_max), dtype=np.float32)
            local = np.zeros((3, hi - lo, G))     # rewards, lengths (incl. EOS), answer wrong (PGBC)
            tok = mask = mu = None
            if hi > lo:
                pr = prompts_all[np.repeat(idx[lo:hi], G)].to(dev)
                tok, mask, mu = generate(model, pr, cfg.l_max, uniforms=torch.from_numpy(U[lo * G:hi * G]),
                                         bf16=bf16)
                texts = decode_completions(tok, mask)
                R = score([problems[i] for i in idx[lo:hi]], None if labels is None else
                          [labels[i] for i in idx[lo:hi]], texts, G)
                ntok = mask.sum(1).cpu().numpy()
                if variant.name == "dapo":   # overlong shaping (tokens before EOS)
                    ended = (tok == EOS).any(1).cpu().numpy()
                    R = R + overlong_shaping(np.where(ended, ntok - ended, cfg.l_max + 1), cfg.l_max,
                                             cfg.l_cache).reshape(R.shape)
                local[0], local[1] = R, ntok.reshape(R.shape)
                if variant.advantage == "pgbc":   # ground truth only where the group can be kept: a group's
                    # rewards live on one rank, so dynamic sampling's filter is known here already
                    live = informative_groups(R) if variant.dynamic_sampling else np.ones(hi - lo, bool)
                    local[2] = np.array([live[j // G] and not is_correct(problems[idx[lo + j // G]], t)
                                         for j, t in enumerate(texts)]).reshape(R.shape)
            glob = np.zeros((3, B, G))
            glob[:, lo:hi] = local
            glob = _allsum(glob, world, dev)
            keep = informative_groups(glob[0]) if variant.dynamic_sampling else np.ones(B, bool)
            sampled.append((idx, glob, keep, tok, mask, mu))
            have += int(keep.sum())
            if have >= B:
                break
        picks = [(r, j) for r, smp in enumerate(sampled) for j in np.flatnonzero(smp[2])][:B]
        K = len(picks)
        idx = np.array([sampled[r][0][j] for r, j in picks], dtype=int)
        glob = np.stack([sampled[r][1][:, j] for r, j in picks], axis=1) if K else np.zeros((3, 0, G))
        R, lens, wrong = glob[0], glob[1], glob[2] > 0.5
        curves["reward"].append(float(R.mean()) if K else 0.0)
        curves["kept_groups"].append(K)
        curves["length"].append(float(lens.mean()) if K else float("nan"))
        if K == 0:
            curves["entropy"].append(curves["entropy"][-1] if curves["entropy"] else float("nan"))
            continue
        own = [p for p, (_, j) in enumerate(picks) if lo <= j < hi]   # kept positions this rank holds
        rho0 = 0.0
        if variant.advantage == "pgbc":
            rflat = R.reshape(-1)
            w = wrong.reshape(-1)
            rho0 = float(min(rflat[w].mean() if w.any() else 0.0, 0.999 - rho1))
        A_all = advantages(R, variant, rho0=rho0, rho1=rho1)
        ent = np.zeros(1)
        if own:
            pieces = [(sampled[picks[p][0]][3:], picks[p][1] - lo) for p in own]   # (tok, mask, mu), group
            width = max(t[0].shape[1] for t, _ in pieces)
            def cut(t, j, v):   # group j's G rows, right-padded to the common width
                return torch.nn.functional.pad(t[j * G:(j + 1) * G], (0, width - t.shape[1]), value=v)

            tok = torch.cat([cut(t[0], j, PAD) for t, j in pieces])
            mask = torch.cat([cut(t[1], j, 0.0) for t, j in pieces])
            mu = torch.cat([cut(t[2], j, 0.0) for t, j in pieces])
            A = torch.as_tensor(A_all[own].reshape(-1), dtype=torch.float32, device=dev)
            prompts = prompts_all[np.repeat(idx[own], G)].to(dev)
            with torch.no_grad():
                old = completion_logp(model, prompts, tok)
                ref = completion_logp(ref_model, prompts, tok) if ref_model is not None else None
            ent[0] = float((old * mask).sum())
        ent = _allsum(ent, world, dev)
        curves["entropy"].append(float(-ent[0] / lens.sum()))   # mean -log pi_old per sampled token
        model.train()
        pos = {p: i for i, p in enumerate(own)}
        mbs = np.array_split(np.arange(K), min(cfg.minibatches, K))
        for mb in (m for _ep in range(cfg.ppo_epochs) for m in mbs):
            mine = [pos[p] for p in mb if p in pos]
            opt.zero_grad(set_to_none=True)
            if mine:
                rows = torch.as_tensor(np.concatenate([np.arange(i * G, (i + 1) * G) for i in mine]),
                                       device=dev)
                logp = completion_logp(model, prompts[rows], tok[rows])
                loss = policy_loss(logp, old[rows], A[rows], mask[rows], variant, sampler_logp=mu[rows],
                                   l_max=cfg.l_max, ref_logp=None if ref is None else ref[rows],
                                   beta=cfg.beta)
                if world > 1:   # this rank's share of the global mini-batch loss
                    if variant.loss_agg == "token_mean":
                        share = float(mask[rows].sum()) / float(lens[mb].sum())
                    else:
                        share = len(mine) / len(mb)
                    loss = loss * share
                loss.backward()
            if world > 1:
                _allreduce_grads(model, world)
            opt.step()
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
