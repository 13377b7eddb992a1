"""NoTA benchmark: inference of the merged model vs the frozen backbone, NoTA vs LoRA-GN training steps,
the MPO contraction vs ``BA``, and parameter counts (all timings through ``harness.bench.compare``)."""
from __future__ import annotations

import copy

import torch
from torch import nn

from neurips26.harness.bench import BenchRow, compare
from neurips26.harness.run import RunContext
from neurips26.nota.accumulation import global_normalize
from neurips26.nota.backbone import HybridViT
from neurips26.nota.cil import CILModel
from neurips26.nota.coda import CODAPrompt
from neurips26.nota.ease import EASE
from neurips26.nota.l2p import L2P

SIZES = {
    "smoke": dict(dim=16, depth=1, heads=2, n_stem=3, batch=8, infer=16, tasks=2, rounds=3),
    "quick": dict(dim=64, depth=3, heads=4, n_stem=3, batch=64, infer=256, tasks=6, rounds=21),
    "full": dict(dim=192, depth=6, heads=8, n_stem=2, batch=64, infer=256, tasks=6, rounds=15),
}
LIMIT_INFER = 1.05      # merged NoTA / frozen backbone (full size)
LIMIT_STEP = 1.15       # NoTA step / LoRA-GN step (full size)
LIMIT_CONTRACT = 0.10   # contraction share of the NoTA step (full size)


def _model(sz: dict, method: str, tasks: int, seed: int = 0) -> CILModel:
    torch.manual_seed(seed)
    bb = HybridViT(sz["dim"], sz["depth"], sz["heads"], sz["n_stem"], 4).eval()
    m = CILModel(bb, method)
    g = torch.Generator().manual_seed(seed)
    for t in range(tasks):
        m.new_task([2 * t, 2 * t + 1], g)
        with torch.no_grad():                 # non-zero updates, as after training
            for lay in m.layers:
                for p in lay.adapters[-1].parameters():
                    p.normal_(0, 0.1, generator=g)
    return m.eval()


def _coda(frozen: nn.Module, tasks: int, g: torch.Generator) -> CODAPrompt:
    m = CODAPrompt(frozen)
    for t in range(tasks):
        m.new_task([2 * t, 2 * t + 1], g)
    return m.eval()


def _ease(frozen: nn.Module, tasks: int, x: torch.Tensor, g: torch.Generator) -> EASE:
    """EASE after ``tasks`` tasks: non-zero branches and prototypes in every subspace."""
    m = EASE(frozen)
    tok = frozen.embed(x)
    y = torch.arange(len(x)) % 2
    for t in range(tasks):
        m.new_task([2 * t, 2 * t + 1], g)
        with torch.no_grad():
            for ad in m.branches[-1]:
                ad.up.normal_(0, 0.1, generator=g)
        m.update_prototypes(tok, (y + 2 * t).numpy())
    return m.eval()


def merged_copy(model: CILModel) -> nn.Module:
    """The backbone with every adapted layer replaced by a plain ``nn.Linear`` holding ``W0 + dW^(T)``."""
    bb = copy.deepcopy(model.backbone)
    for parent in list(bb.modules()):
        for name, child in list(parent.named_children()):
            if hasattr(child, "merged_weight"):
                lin = nn.Linear(child.base.in_features, child.base.out_features)
                with torch.no_grad():
                    lin.weight.copy_(child.merged_weight())
                    lin.bias.copy_(child.base.bias)
                setattr(parent, name, lin)
    return bb.eval()


def _step_fn(model: CILModel, x: torch.Tensor, y: torch.Tensor):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-3)

    def step():
        loss = nn.functional.cross_entropy(model.features(x) @ model.rows[-1].T, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def bench(ctx: RunContext) -> list[BenchRow]:
    sz = SIZES["smoke" if ctx.scale == "smoke" else "quick"]
    torch.set_num_threads(1)
    rows = []
    rows += _rows_at(sz, ctx.scale if ctx.scale == "smoke" else "quick")
    if ctx.scale != "smoke":
        rows += _rows_at(SIZES["full"], "full", only_steps=True)
    return rows


def _rows_at(sz: dict, label: str, only_steps: bool = False) -> list[BenchRow]:
    rows: list[BenchRow] = []
    tokens = (32 // 2 ** sz["n_stem"]) ** 2
    shape = f"{label} size: D={sz['dim']}, {sz['depth']} blocks, {tokens} tokens, 1 thread"
    g = torch.Generator().manual_seed(0)
    r = sz["rounds"]
    if not only_steps:
        nota = _model(sz, "nota", sz["tasks"])
        merged = merged_copy(nota)
        frozen = copy.deepcopy(merged)
        x = torch.rand(sz["infer"], 32, 32, generator=g)
        for p in list(frozen.parameters()):
            p.data.normal_(0, 0.05, generator=g)   # weights differ, cost is what is compared
        w = torch.cat(list(nota.rows))
        with torch.no_grad():
            ours = lambda: merged.features(x) @ w.T  # noqa: E731
            anchor = lambda: frozen.features(x) @ w.T  # noqa: E731
            rows.append(compare(f"inference, {sz['infer']}-image batch (merged NoTA, T={sz['tasks']})", ours,
                                anchor, "frozen backbone", unit="ms", rounds=r, warmup=3,
                                note=f"{shape}; limit ratio >= {1 / LIMIT_INFER:.3f} at full size"))
            l2p = L2P(frozen, generator=g)
            two_pass = lambda: l2p.features(x) @ w.T  # noqa: E731
            rows.append(compare("inference, L2P (query pass + prompted pass)", two_pass, anchor,
                                "frozen backbone", unit="ms", rounds=r, warmup=3,
                                note=f"{shape}; pool 10, length 5, top-5 (25 prompt tokens); expected ~2x"))
            coda = _coda(frozen, sz["tasks"], g)
            rows.append(compare(f"inference, CODA-Prompt (query pass + prefix pass, T={sz['tasks']})",
                                lambda: coda(x), anchor, "frozen backbone", unit="ms", rounds=r, warmup=3,
                                note=f"{shape}; {len(coda.keys) * coda.components} components, prefix length "
                                f"{coda.length} in blocks {list(coda.layers)}; expected ~2x"))
            for t_e in sorted({2, sz["tasks"], 2 * sz["tasks"]}):
                ease = _ease(frozen, t_e, x, g)
                rows.append(compare(f"inference, EASE after T={t_e} tasks ({t_e} adapter branches)",
                                    lambda e=ease: e(x), anchor, "frozen backbone", unit="ms", rounds=r,
                                    warmup=3, note=f"{shape}; one block pass per branch (stem shared); "
                                    "grows with T"))
            unmerged = lambda: nota.features(x) @ w.T  # noqa: E731
            rows.append(compare("inference, adapters un-merged (dW^(T) recomputed)", unmerged, anchor,
                                "frozen backbone", unit="ms", rounds=r, warmup=3, note=shape))
    xb = torch.rand(sz["batch"], 32, 32, generator=g)
    yb = torch.randint(0, 2, (sz["batch"],), generator=g)
    m_nota, m_lora = _model(sz, "nota", 1), _model(sz, "lora_gn", 1)
    rows.append(compare(f"training step fwd+bwd+Adam, batch {sz['batch']} (NoTA vs LoRA-GN)",
                        _step_fn(m_nota, xb, yb), _step_fn(m_lora, xb, yb), "LoRA-GN (BA, same rule)",
                        unit="ms", rounds=r, warmup=2,
                        note=f"{shape}; {m_nota.trainable_adapter_params()} vs "
                        f"{m_lora.trainable_adapter_params()} adapter params; limit ratio >= "
                        f"{1 / LIMIT_STEP:.3f} at full size"))
    ln, ll = m_nota.layers[0], m_lora.layers[0]

    def contract_norm():
        return global_normalize(ln.raw_sum(), ln.gamma, ln.eps)

    def ba_norm():
        return global_normalize(ll.raw_sum(), ll.gamma, ll.eps)
    n_layers = len(m_nota.layers)
    rows.append(compare(f"dW of all {n_layers} layers: MPO contraction + global norm vs BA + norm",
                        lambda: [contract_norm() for _ in range(n_layers)],
                        lambda: [ba_norm() for _ in range(n_layers)], "LoRA BA + norm", unit="ms", rounds=r,
                        warmup=2, note=f"{shape}; compare with the NoTA step row: limit < "
                        f"{100 * LIMIT_CONTRACT:.0f}% of the step at full size"))
    if only_steps:
        return rows
    nota_t, lora_t = _model(sz, "nota", sz["tasks"]), _model(sz, "lora_gn", sz["tasks"])
    hier_t = _model(sz, "hnota", sz["tasks"])
    rows.append(compare(f"training step at task T={sz['tasks']} (H-NoTA vs NoTA)", _step_fn(hier_t, xb, yb),
                        _step_fn(nota_t, xb, yb), "NoTA (same t)", unit="ms", rounds=r, warmup=2,
                        note=f"{shape}; H-NoTA re-contracts every historical adapter with its modulations "
                        f"each step (grows with t); no limit"))
    per = n_layers
    rows.append(BenchRow("trainable adapter params per task per matrix",
                         m_nota.trainable_adapter_params() / per, m_lora.trainable_adapter_params() / per,
                         "LoRA r=3", "params", "lower", note="counted from requires_grad tensors"))
    rows.append(BenchRow(f"stored adapter params after T={sz['tasks']} tasks (whole model)",
                         nota_t.stored_adapter_params(), lora_t.stored_adapter_params(), "LoRA r=3", "params",
                         "lower", note=f"{per} adapted matrices; includes one alpha per task and matrix"))
    return rows
