"""Reproduction of NextLat at laptop scale (spec "Reproduction at laptop scale").

City grid (Manhattan substitute): GPT vs NextLat(d=1) vs NextLat(d=3), same HF Llama init per seed,
same batches; legal-move rate, detour robustness (q = 0.25), effective rank of 4000 centred held-out
non-PAD latents, current-node probe accuracy. Shakespeare char LM (first seed only): NextLat(d=1),
greedy self-speculative decoding at gamma in {2, 4} on held-out prompts; tokens per trunk forward
(drafting and verification forwards both counted), drafts accepted beyond position 1, wall-clock vs
greedy AR (CPU, Python-bound). Verdicts over seeds use paired differences (``paired``/``judge``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from neurips26.harness import Claim
from neurips26.harness.paper import INCONCLUSIVE, fmt_se, judge, paired, seed_values, verdict
from neurips26.harness.run import RunContext
from neurips26.nextlat import data
from neurips26.nextlat.baselines import MTPForCausalLM
from neurips26.nextlat.metrics import effective_rank, probe_accuracy
from neurips26.nextlat.model import NextLatForCausalLM, tiny_llama
from neurips26.nextlat.speculative import greedy_generate, self_speculative_generate
from neurips26.nextlat.training import row_sampler, train, window_sampler
from neurips26.nextlat.world_model import latents, rollouts

RANK_RATIO = 0.8  # NextLat(d=1) effective rank < 0.8 x GPT's ...
RANK_SEEDS = 2  # ... in at least 2 of 3 seeds
LEGAL_FLOOR = 0.9  # GPT and NextLat(d=1) legal-move rate >= 0.9
TPF_MIN = 1.0  # greedy tokens per trunk forward at gamma = 4 must exceed 1
LM_TOL = 0.02  # LM held-out loss within 2 % of GPT (full)
K_SE = 2.0


@dataclass
class CityConfig:
    n: int = 5
    T: int = 24
    walks: int = 6000
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    steps: int = 500
    batch: int = 64
    lr: float = 3e-3
    prompts: int = 200
    latents: int = 4000
    detour_q: float = 0.25
    models: tuple[str, ...] = ("gpt", "nextlat_d1", "nextlat_d3")


@dataclass
class LMConfig:
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    ctx: int = 128
    steps: int = 300
    batch: int = 16
    lr: float = 3e-3
    prompts: int = 8
    prompt_len: int = 64
    new_tokens: int = 64
    gammas: tuple[int, ...] = (2, 4)
    eval_batches: int = 8
    gpt: bool = False  # also train GPT on the LM (the "within 2 %" claim; full)
    max_chars: int | None = None


@dataclass
class Config:
    city: CityConfig = field(default_factory=CityConfig)
    lm: LMConfig | None = field(default_factory=LMConfig)
    lm_seeds: tuple[int, ...] = (0,)
    seeds: tuple[int, ...] = (0, 1, 2)
    threads: int = 1


CONFIGS = {
    "smoke": Config(
        CityConfig(
            n=3, T=12, walks=200, hidden=64, layers=1, heads=2, steps=8, batch=16, prompts=16, latents=200
        ),
        LMConfig(
            hidden=64,
            layers=1,
            heads=2,
            ctx=32,
            steps=4,
            batch=4,
            prompts=2,
            prompt_len=8,
            new_tokens=8,
            eval_batches=2,
            max_chars=200_000,
        ),
        seeds=(0,),
    ),
    "quick": Config(),
    "full": Config(
        CityConfig(
            n=10,
            T=64,
            walks=100_000,
            hidden=384,
            layers=12,
            heads=6,
            steps=20_000,
            batch=256,
            lr=5e-4,
            prompts=2000,
            latents=4000,
            models=("gpt", "nextlat_d1", "nextlat_d3", "mtp"),
        ),
        LMConfig(
            hidden=384,
            layers=6,
            heads=6,
            ctx=256,
            steps=20_000,
            batch=64,
            lr=5e-4,
            prompts=16,
            prompt_len=128,
            new_tokens=128,
            gammas=(2, 4, 8),
            eval_batches=64,
            gpt=True,
        ),
        lm_seeds=(0, 1, 2),
        threads=8,
    ),
}
VOLATILE_METRICS = ("*.seconds", "lm.spec.*.wall_ratio", "lm.seconds", "city.*.seconds")

MTP_HEADS = 2
_D = {"gpt": (1, 0.0), "nextlat_d1": (1, 1.0), "nextlat_d3": (3, 1.0)}


def _wrap(base, name: str, eos=None, pad=None):
    if name == "mtp":
        return MTPForCausalLM(base, n_future=MTP_HEADS, pad_token_id=pad)
    d, lam = _D[name]
    return NextLatForCausalLM(
        base, d=d, lambda_h=lam, lambda_kl=lam, proj_factor=1.0, eos_token_id=eos, pad_token_id=pad
    )


def run_city(cfg: CityConfig, seed: int, ctx: RunContext) -> dict[str, Any]:
    grid = data.city_grid(cfg.n, seed=seed)
    train_ids, _ = data.city_walks(grid, cfg.walks, cfg.T, seed=1000 + seed)
    test_ids, test_states = data.city_walks(grid, max(cfg.prompts, cfg.latents // 8), cfg.T, seed=2000 + seed)
    out: dict[str, Any] = {"nodes": len(grid.nodes)}
    for name in ctx.track(cfg.models, desc="city models"):
        torch.manual_seed(seed)
        base = tiny_llama(grid.vocab, cfg.hidden, cfg.layers, cfg.heads, ctx=cfg.T)
        m = _wrap(base, name, grid.eos, grid.pad)
        t0 = time.perf_counter()
        losses = train(m, row_sampler(train_ids, cfg.batch, seed), cfg.steps, cfg.lr, clip=1.0)
        sec = time.perf_counter() - t0
        prompts = test_ids[: cfg.prompts]
        legal = rollouts(m, grid, prompts, cfg.T, q=0.0, seed=seed)
        detour = rollouts(m, grid, prompts, cfg.T, q=cfg.detour_q, seed=seed)
        H, s = latents(m, test_ids, test_states, grid.pad, cfg.latents)
        cut = int(0.75 * len(H))
        out[name] = {
            "train_loss": float(np.mean(losses[-20:])),
            "legal_rate": legal["legal_rate"],
            "goal_rate": legal["success"],
            "detour": detour["success"],
            "erank": effective_rank(H, center=True),
            "probe_node": probe_accuracy(H[:cut], s[:cut], H[cut:], s[cut:]),
            "seconds": sec,
        }
        ctx.log(
            f"city {name}: legal {out[name]['legal_rate']:.3f} erank {out[name]['erank']:.1f} "
            f"probe {out[name]['probe_node']:.3f} ({sec:.0f} s)"
        )
    return out


def run_lm(cfg: LMConfig, seed: int, ctx: RunContext) -> dict[str, Any]:
    text = data.shakespeare_text()
    if cfg.max_chars:
        text = text[: cfg.max_chars]
    cd = data.char_data(text)
    out: dict[str, Any] = {"vocab": cd.vocab}
    names = ("nextlat_d1", "gpt") if cfg.gpt else ("nextlat_d1",)
    g = np.random.default_rng(10_000 + seed)
    evals = torch.from_numpy(
        np.stack(
            [cd.test[s : s + cfg.ctx] for s in g.integers(0, len(cd.test) - cfg.ctx, cfg.eval_batches * 4)]
        )
    )
    starts = g.integers(0, len(cd.test) - cfg.prompt_len, cfg.prompts)
    prompts = torch.from_numpy(np.stack([cd.test[s : s + cfg.prompt_len] for s in starts]))
    t0 = time.perf_counter()
    for name in names:
        torch.manual_seed(seed)
        m = _wrap(tiny_llama(cd.vocab, cfg.hidden, cfg.layers, cfg.heads, ctx=cfg.ctx), name)
        losses = train(m, window_sampler(cd.train, cfg.batch, cfg.ctx, seed), cfg.steps, cfg.lr, clip=1.0)
        with torch.no_grad():
            val = float(np.mean([float(m(evals[i : i + 4]).ntp) for i in range(0, len(evals), 4)]))
        out[name] = {"train_loss": float(np.mean(losses[-20:])), "val_loss": val}
        if name == "nextlat_d1":
            out["spec"] = _spec_eval(m, prompts, cfg)
    out["seconds"] = time.perf_counter() - t0
    return out


def _spec_eval(m: NextLatForCausalLM, prompts: torch.Tensor, cfg: LMConfig) -> dict[str, Any]:
    t0 = time.perf_counter()
    ref = greedy_generate(m, prompts, cfg.new_tokens, use_cache=False)
    t_ar = time.perf_counter() - t0
    res = {}
    for gamma in cfg.gammas:
        per_prompt, acc, same = [], [], True
        t0 = time.perf_counter()
        for i in range(len(prompts)):
            toks, st = self_speculative_generate(m, prompts[i], cfg.new_tokens, gamma=gamma, top_k=1)
            same &= bool(torch.equal(toks[0], ref[i]))
            per_prompt.append(st.tokens_per_forward)
            acc.append(st.mean_accepted_beyond_first)
        t_spec = time.perf_counter() - t0
        res[f"gamma{gamma}"] = {
            "tokens_per_forward": float(np.mean(per_prompt)),
            "tokens_per_forward_prompts": [float(x) for x in per_prompt],
            "accepted_beyond_first": float(np.mean(acc)),
            "equals_greedy": same,
            "wall_ratio": t_ar / t_spec,
        }
    return res


def run(cfg: Config, ctx: RunContext) -> dict[str, Any]:
    torch.set_num_threads(cfg.threads)
    out: dict[str, Any] = {"city": run_city(cfg.city, ctx.seed, ctx)}
    if cfg.lm is not None and ctx.seed in cfg.lm_seeds:
        out["lm"] = run_lm(cfg.lm, ctx.seed, ctx)
    _plot(ctx, out)
    return out


def _plot(ctx: RunContext, out: Mapping[str, Any]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    city = out["city"]
    names = [k for k in ("gpt", "nextlat_d1", "nextlat_d3") if k in city]
    fig, ax = plt.subplots(1, 3 if "lm" in out else 2, figsize=(11, 3))
    ax[0].bar(names, [city[n]["erank"] for n in names])
    ax[0].set_title("effective rank (centred latents)")
    ax[1].bar(names, [city[n]["probe_node"] for n in names])
    ax[1].set_title("current-node probe accuracy")
    if "lm" in out:
        sp = out["lm"]["spec"]
        gs = sorted(int(k[5:]) for k in sp)
        ax[2].plot(gs, [sp[f"gamma{g}"]["accepted_beyond_first"] for g in gs], "o-")
        ax[2].set_xlabel("gamma")
        ax[2].set_title("accepted drafts beyond pos. 1 / round")
    fig.tight_layout()
    ctx.save_plot(fig, "nextlat")


# ----------------------------------------------------------------------------- claims


def _rank_check(m: Mapping[str, Any]) -> tuple[str, str]:
    nl = seed_values(m, "city.nextlat_d1.erank")
    gp = seed_values(m, "city.gpt.erank")
    ratios = [a / b for a, b in zip(nl, gp)]
    wins = sum(r < RANK_RATIO for r in ratios)
    text = (
        f"erank NextLat(d=1)/GPT = {', '.join(f'{r:.2f}' for r in ratios)} "
        f"({wins} of {len(ratios)} seeds < {RANK_RATIO}); mean {np.mean(nl):.1f} vs {np.mean(gp):.1f}"
    )
    if len(ratios) < 3:
        return (INCONCLUSIVE if wins < len(ratios) or len(ratios) < RANK_SEEDS else verdict(True)), text
    return verdict(wins >= RANK_SEEDS), text


def _legal_floor(m: Mapping[str, Any]) -> tuple[str, str]:
    g, n, n3 = (seed_values(m, f"city.{k}.legal_rate") for k in ("gpt", "nextlat_d1", "nextlat_d3"))
    ok = min(g) >= LEGAL_FLOOR and min(n) >= LEGAL_FLOOR
    return verdict(ok), (
        f"legal rate GPT {np.mean(g):.3f}, NextLat d=1 {np.mean(n):.3f}, d=3 {np.mean(n3):.3f} "
        f"(min over {len(g)} seeds {min(g):.3f} / {min(n):.3f}; needs >= {LEGAL_FLOOR})"
    )


def _paired_check(metric: str, label: str):
    def check(m: Mapping[str, Any]) -> tuple[str, str]:
        mean, se, n = paired(m, f"city.nextlat_d1.{metric}", f"city.gpt.{metric}")
        return judge(mean, se, n, 0.0, K_SE, "higher"), (
            f"{label} NextLat(d=1) - GPT = {fmt_se(mean, se, n)} (judged at {K_SE:g} s.e.)"
        )

    return check


def _spec_check(m: Mapping[str, Any]) -> tuple[str, str]:
    sp = m["lm"]["spec"]["gamma4"]
    xs = sp["tokens_per_forward_prompts"]
    mean, se = (
        float(np.mean(xs)),
        float(np.std(xs, ddof=1) / np.sqrt(len(xs))) if len(xs) > 1 else float("nan"),
    )
    v = judge(mean, se, len(xs), TPF_MIN, K_SE, "higher")
    if not sp["equals_greedy"]:
        v = "fails"
    sd = f"{mean:.3g} ± {se:.2g}"
    return v, (
        f"greedy tokens per trunk forward at gamma=4 = {sd} (s.e. over {len(xs)} prompts) "
        f"(needs > {TPF_MIN:g}); accepted beyond pos. 1 = {sp['accepted_beyond_first']:.2f}/round; "
        f"output == greedy: {sp['equals_greedy']}; 1 seed"
    )


def _lm_check(m: Mapping[str, Any]) -> tuple[str, str]:
    a, b = m["lm"]["nextlat_d1"]["val_loss"], m["lm"]["gpt"]["val_loss"]
    rel = a / b - 1
    return verdict(
        rel <= LM_TOL
    ), f"held-out CE NextLat {a:.3f} vs GPT {b:.3f} ({rel:+.1%}; needs <= {LM_TOL:.0%})"


def _growing_with_d(m: Mapping[str, Any]) -> tuple[str, str]:
    return INCONCLUSIVE, (
        "needs NextLat LMs trained at several d (full scale, GPU); quick trains d=1 only on the LM"
    )


CLAIMS = [
    Claim(
        "compression",
        f"NextLat(d=1) latents are more compressed: effective rank < {RANK_RATIO}x GPT's "
        f"in >= {RANK_SEEDS} of 3 seeds (city grid)",
        "> 3x smaller effective rank (secondary source)",
        _rank_check,
    ),
    Claim(
        "legal_moves",
        f"GPT and NextLat(d=1) learn the city's transition rules (legal-move rate >= {LEGAL_FLOOR})",
        "NextLat >= GPT on world-model metrics (Manhattan taxi)",
        _legal_floor,
    ),
    Claim(
        "legal_vs_gpt",
        "NextLat(d=1) legal-move rate >= GPT's (paired over seeds)",
        "NextLat >= GPT on world-model metrics",
        _paired_check("legal_rate", "legal rate"),
    ),
    Claim(
        "detour",
        "NextLat(d=1) detour robustness (q=0.25) >= GPT's (paired over seeds)",
        "NextLat more robust to detours (Manhattan taxi)",
        _paired_check("detour", "detour success"),
    ),
    Claim(
        "probe_state",
        "NextLat(d=1) latents linearly encode the current node at least as well as GPT's",
        "latents converge to belief states",
        _paired_check("probe_node", "probe accuracy"),
    ),
    Claim(
        "spec_decoding",
        f"greedy self-speculative decoding at gamma=4 emits > {TPF_MIN:g} token per trunk "
        "forward (drafting + verification counted) and equals greedy output",
        "up to 3.3x speed-up (FineWeb-Edu, GPU)",
        _spec_check,
    ),
    Claim(
        "lm_loss",
        f"NextLat's LM held-out loss within {LM_TOL:.0%} of GPT's",
        "LM quality matched or better (FineWeb-Edu / TinyStories)",
        _lm_check,
    ),
    Claim(
        "spec_grows_with_d",
        "tokens per trunk forward grows with the training horizon d",
        "speed-up grows with d",
        _growing_with_d,
    ),
]
