"""The rehearsal-free class-incremental loop, its metrics, and the NCM floor.

Per task t: add classifier rows for C_t (no bias, N(0, 0.02^2)), create dW_t in every target layer,
keep the backbone in eval mode and frozen, train adapters/alphas/M and the new rows with Adam
(lr 1e-3 adapters, 1e-2 rows) on cross-entropy over the logits of C_t only; then freeze and record
``a[t, k]`` (accuracy on the classes of task k). Inference: argmax over all seen classes.

Metrics: ``A_t`` accuracy on all classes seen up to t, ``A_last = A_T``, ``A_avg = mean_t A_t``,
forgetting ``F = 1/(T-1) sum_{k<T} max_{t in [k, T-1]} (a[t,k] - a[T,k])``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.nota.adapters import AdaptedLinear, ModelScope, attach_adapters
from neurips26.nota.data import check_images

# method -> (adapter kind, rule, extra AdaptedLinear kwargs)
METHODS = {
    "seq_lora": ("lora", "plain", {"shared": True}),
    "lora_plain": ("lora", "plain", {}),
    "sd_lora": ("lora", "taskwise", {}),
    "lora_gn": ("lora", "global", {}),
    "mpo_plain": ("mpo", "plain", {}),
    "mpo_tw": ("mpo", "taskwise", {}),
    "nota": ("mpo", "global", {}),
    "hnota": ("mpo", "hier", {}),
}


def check_tasks(tasks: Sequence[Sequence[int]]) -> list[list[int]]:
    """Class sets per task: non-empty and pairwise disjoint."""
    out, seen = [], set()
    if not tasks:
        raise ValueError("tasks must hold at least one class set")
    for t, cs in enumerate(tasks):
        cs = [check_scalar(c, f"tasks[{t}][i]", int, min=0) for c in cs]
        if not cs:
            raise ValueError(f"tasks[{t}] is an empty class set")
        if len(set(cs)) != len(cs) or seen & set(cs):
            raise ValueError(f"tasks[{t}]={cs} overlaps an earlier task or repeats a class")
        seen |= set(cs)
        out.append(cs)
    return out


def task_split(classes, n_tasks: int, seed: int) -> list[list[int]]:
    """``classes`` permuted by ``seed`` (seed 0: identity order) and cut into ``n_tasks`` equal tasks."""
    cs = list(classes)
    if seed:
        cs = [cs[i] for i in np.random.default_rng(seed).permutation(len(cs))]
    if len(cs) % n_tasks:
        raise ValueError(f"{len(cs)} classes do not split into {n_tasks} equal tasks")
    k = len(cs) // n_tasks
    return [cs[i * k:(i + 1) * k] for i in range(n_tasks)]


@dataclass
class TrainSettings:
    epochs: int = 3
    batch: int = 64
    lr_adapter: float = 1e-3
    lr_rows: float = 1e-2
    hier_penalty: float = 0.0


class CILModel(nn.Module):
    """A frozen backbone with adapter stacks on ``targets`` and a growing per-task classifier."""

    def __init__(self, backbone: nn.Module, method: str = "nota", targets=("q", "v"), scope: str = "layer",
                 **adapter_kwargs):
        super().__init__()
        self.scope_kind = check_choice(scope, "scope", ("layer", "model"))
        self.method = check_choice(method, "method", tuple(METHODS))
        kind, rule, extra = METHODS[method]
        self.backbone = copy.deepcopy(backbone).eval()
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.layers: list[AdaptedLinear] = attach_adapters(self.backbone, targets, kind=kind, rule=rule,
                                                           **{**extra, **adapter_kwargs})
        self.rows = nn.ParameterList()
        self.classes: list[list[int]] = []
        self.scope = None
        if scope == "model":
            kw = {k: adapter_kwargs[k] for k in ("rho", "eps_rel") if k in adapter_kwargs}
            self.scope = ModelScope(self.layers, **kw)

    def train(self, mode: bool = True):          # the backbone stays in eval mode (BN/Dropout off)
        super().train(mode)
        self.backbone.eval()
        return self

    def new_task(self, classes: Sequence[int], generator: torch.Generator | None = None) -> None:
        for r in self.rows:
            r.requires_grad_(False)
        for layer in self.layers:
            layer.new_task(generator)
        dim = self.backbone.dim
        self.rows.append(nn.Parameter(torch.randn(len(classes), dim, generator=generator) * 0.02))
        self.classes.append(list(classes))

    def features(self, x: torch.Tensor, embedded: bool = False) -> torch.Tensor:
        """Pooled features of images ``x``, or of tokens from ``backbone.embed`` when ``embedded``."""
        run = self.backbone.encode if embedded else self.backbone.features
        if self.scope is None or not self.layers[0].adapters:
            return run(x)
        with self.scope:
            return run(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits over all seen classes, in the order of ``seen_classes``."""
        return self.features(x) @ torch.cat(list(self.rows)).T

    @property
    def seen_classes(self) -> list[int]:
        return [c for cs in self.classes for c in cs]

    def trainable_adapter_params(self) -> int:
        return sum(layer.trainable_params() for layer in self.layers)

    def stored_adapter_params(self) -> int:
        return sum(layer.stored_params() for layer in self.layers)


@torch.no_grad()
def embed_frozen(backbone: nn.Module, xs: torch.Tensor, batch: int = 512) -> tuple[torch.Tensor, bool]:
    """``(backbone.embed(xs), True)`` when the backbone has a frozen ``embed`` (the stem), else ``(xs, False)``.

    The stem carries no adapter and runs in eval mode, so its tokens are computed once per task instead
    of once per epoch (a ~10-20% cheaper training step at the quick size; same model, same maths).
    """
    if not hasattr(backbone, "embed") or not hasattr(backbone, "encode"):
        return xs, False
    return torch.cat([backbone.embed(xs[i:i + batch]) for i in range(0, len(xs), batch)]), True


class TaskHead(nn.Module):
    """The current task's logits ``features(x) @ rows[-1]^T`` (the module DDP wraps): only the trainable
    adapter parameters and the new rows carry gradients, so DDP all-reduces just those."""

    def __init__(self, model: CILModel):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, embedded: bool = False) -> torch.Tensor:
        return self.model.features(x, embedded) @ self.model.rows[-1].T


def train_task(model: CILModel, x: np.ndarray, y: np.ndarray, settings: TrainSettings,
               generator: torch.Generator, ddp: bool = False, fsdp: bool = False) -> None:
    """Train the current task (the last class set of ``model``) on ``(x, y)``; CE over its logits only.

    ddp=True (inside an initialised ``torch.distributed`` group, e.g. under ``torchrun``): every rank
    draws the same permutation (same generator seed), takes the slice ``batch[rank::world]`` of each
    global batch and trains through ``DistributedDataParallel(TaskHead(model))``; the averaged gradient
    is that of the global batch's mean CE (exactly when the slices are equal), and the normalization
    is recomputed identically on every rank from the replicated parameters (no extra collective).

    fsdp=True (same process group, same batch slices): the task is trained through ``fsdp_head`` (torch
    FSDP2 ``fully_shard`` per transformer block, then the head), so every block's frozen weights and its
    MPO cores / LoRA factors are sharded and ``dW`` is materialised inside the block after its all-gather;
    the trained tensors are gathered back into ``model`` at the end of the task.
    """
    if ddp and fsdp:
        raise ValueError("ddp and fsdp are exclusive")
    x = check_images(x)
    cur = model.classes[-1]
    y = np.asarray(y)
    bad = sorted(set(y.tolist()) - set(cur))
    if bad:
        raise ValueError(f"labels {bad[:5]} lie outside the current task's classes {cur}")
    local = {c: i for i, c in enumerate(cur)}
    xs, embedded = embed_frozen(model.backbone, torch.from_numpy(x))
    ys = torch.tensor([local[int(c)] for c in y])
    rank, world = 0, 1
    if ddp or fsdp:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("ddp=True / fsdp=True need an initialised torch.distributed process group (torchrun)")
        rank, world = dist.get_rank(), dist.get_world_size()
        if settings.batch < world:
            raise ValueError(f"batch={settings.batch} is smaller than the world size {world}")
    head: nn.Module = fsdp_head(model) if fsdp else TaskHead(model)
    trained = head.model                  # the sharded copy under FSDP, else ``model`` itself
    adapter_params = [p for layer in trained.layers for p in layer.parameters() if p.requires_grad]
    groups = [{"params": [trained.rows[-1]], "lr": settings.lr_rows}]
    if adapter_params:
        groups.append({"params": adapter_params, "lr": settings.lr_adapter})
    opt = torch.optim.Adam(groups)
    if ddp:
        head = nn.parallel.DistributedDataParallel(head, broadcast_buffers=False)
    model.train()
    trained.train()
    for _ in range(settings.epochs):
        perm = torch.randperm(len(xs), generator=generator)
        for i in range(0, len(xs), settings.batch):
            idx = perm[i:i + settings.batch][rank::world]
            logits = head(xs[idx], embedded)
            loss = nn.functional.cross_entropy(logits, ys[idx])
            if settings.hier_penalty:
                loss = loss + settings.hier_penalty * sum(layer.hier_penalty() for layer in model.layers)
            opt.zero_grad()
            loss.backward()
            if fsdp:
                _average_replicated(head)
            opt.step()
    if fsdp:
        gather_trained(head, model)
    model.eval()


def fsdp_head(model: CILModel) -> nn.Module:
    """A ``TaskHead`` over a copy of ``model``, sharded with FSDP2: ``fully_shard`` on every transformer block
    (frozen q/k/v/proj/MLP weights together with the adapters that live inside the block: their cores are
    all-gathered with the block, so ``dW`` is materialised after the gather), then on the head (rows, norm).

    The copy keeps ``model`` an ordinary module for evaluation and the per-task snapshots; at ViT-B/L scale
    one would build the copy on the meta device instead (memory), the sharding plan is the same."""
    from torch.distributed.fsdp import fully_shard
    head = TaskHead(copy.deepcopy(model))
    ordered = [p for p in head.parameters() if p.ndim == 0]   # alphas, learned gamma: FSDP2 shards dim 0
    scalars = set(ordered)
    for blk in head.model.backbone.blocks:
        fully_shard(blk, ignored_params=scalars)
    fully_shard(head, ignored_params=scalars)
    # kept replicated; their gradients are all-reduced by hand, in the same (module) order on every rank
    head.replicated = [p for p in ordered if p.requires_grad]
    return head


def _average_replicated(head: nn.Module) -> None:
    """Mean over ranks of the gradients of the replicated (unsharded) scalars of an ``fsdp_head``."""
    import torch.distributed as dist
    world = dist.get_world_size()
    for p in getattr(head, "replicated", []):
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad.div_(world)


def gather_trained(head: nn.Module, model: CILModel) -> None:
    """Copy the trainable tensors of the FSDP-sharded ``head`` (full, all-gathered) back into ``model``."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    full = get_model_state_dict(head, options=StateDictOptions(full_state_dict=True))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.copy_(full[f"model.{name}"])


@torch.no_grad()
def predict(model: nn.Module, x: np.ndarray, batch: int = 512) -> np.ndarray:
    """Class ids (of ``model.seen_classes``) by argmax over all seen logits."""
    xs = torch.from_numpy(check_images(x))
    seen = np.asarray(model.seen_classes)
    out = [model(xs[i:i + batch]).argmax(1).numpy() for i in range(0, len(xs), batch)]
    return seen[np.concatenate(out)]


def task_accuracies(pred: np.ndarray, y: np.ndarray, tasks: Sequence[Sequence[int]]) -> list[float]:
    """Accuracy on the test images of each task's classes."""
    out = []
    for cs in tasks:
        m = np.isin(y, cs)
        out.append(float((pred[m] == y[m]).mean()) if m.any() else float("nan"))
    return out


def cil_metrics(acc: np.ndarray, counts: Sequence[int] | None = None) -> dict:
    """From ``acc[t, k]`` (accuracy on task k after task t; NaN for k > t): A_t, A_last, A_avg, F.

    ``counts`` (test images per task) weights A_t; equal weights by default.
    """
    acc = np.asarray(acc, dtype=float)
    t_n = acc.shape[0]
    w = np.ones(t_n) if counts is None else np.asarray(counts, dtype=float)
    a_t = [float(np.average(acc[t, :t + 1], weights=w[:t + 1])) for t in range(t_n)]
    if t_n > 1:
        f = float(np.mean([np.max(acc[k:t_n - 1, k]) - acc[t_n - 1, k] for k in range(t_n - 1)]))
    else:
        f = 0.0
    return {"A_t": a_t, "A_last": a_t[-1], "A_avg": float(np.mean(a_t)), "F": f}


def run_cil(backbone: nn.Module, method: str, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
            settings: TrainSettings | None = None, seed: int = 0, ddp: bool = False, fsdp: bool = False,
            **adapter_kwargs) -> dict:
    """The whole CIL sequence for one method; returns metrics, the accuracy matrix and parameter counts.

    ddp=True / fsdp=True train each task data-parallel / fully sharded over the initialised process group
    (``train_task``)."""
    tasks = check_tasks(tasks)
    settings = settings or TrainSettings()
    if method == "ncm":
        return run_ncm(backbone, tasks, train, test)
    if method == "joint":
        return run_joint(backbone, tasks, train, test, settings, seed, **adapter_kwargs)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = CILModel(backbone, method, **adapter_kwargs)
    xtr, ytr = train
    xte, yte = test
    t_n = len(tasks)
    acc = np.full((t_n, t_n), np.nan)
    per_task, snaps = [], []
    for t, cs in enumerate(tasks):
        model.new_task(cs, g)
        per_task.append(model.trainable_adapter_params())
        m = np.isin(ytr, cs)
        train_task(model, xtr[m], ytr[m], settings, g, ddp=ddp, fsdp=fsdp)
        with torch.no_grad():
            snaps.append([layer.delta().detach().clone() for layer in model.layers])
        seen_m = np.isin(yte, model.seen_classes)
        pred = predict(model, xte[seen_m])
        acc[t, :t + 1] = task_accuracies(pred, yte[seen_m], tasks[:t + 1])
    counts = [int(np.isin(yte, cs).sum()) for cs in tasks]
    return {**cil_metrics(acc, counts), "acc": acc.tolist(), "trainable_per_task": per_task[-1],
            "stored_adapter_params": model.stored_adapter_params(), "drift": relative_drift(model, snaps),
            "model": model}


class FrozenBackboneCIL(nn.Module):
    """Base of the baselines that keep the whole backbone frozen and add their own parts (L2P, CODA-Prompt,
    EASE): the backbone in eval mode, one classifier-row block per task (no bias, N(0, 0.02^2)), seen classes.

    A subclass defines ``new_task`` (its own parts, then ``add_rows``), ``task_params`` (what this task
    trains besides its rows), ``task_loss(tokens, local_labels)``, ``all_logits(tokens)`` (over every seen
    class), optionally ``end_task(tokens, labels)``, and ``trainable_params``/``stored_params``;
    ``run_frozen_cil`` is the one class-incremental loop they share.
    """

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone.eval()
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.rows = nn.ParameterList()
        self.classes: list[list[int]] = []

    def train(self, mode: bool = True):          # the backbone stays in eval mode (BN/Dropout off)
        super().train(mode)
        self.backbone.eval()
        return self

    @property
    def seen_classes(self) -> list[int]:
        return [c for cs in self.classes for c in cs]

    def add_rows(self, classes: Sequence[int], generator: torch.Generator | None = None) -> None:
        """Rows of the new task's classes (the earlier rows are frozen by the subclass's ``new_task``)."""
        self.rows.append(nn.Parameter(torch.randn(len(classes), self.backbone.dim, generator=generator) * 0.02))
        self.classes.append(list(classes))

    def task_params(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def task_loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def all_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits over every seen class of images ``x`` (``all_logits`` of their stem tokens)."""
        return self.all_logits(self.backbone.embed(x))

    def end_task(self, tokens: torch.Tensor, labels: np.ndarray) -> None:
        """After a task's training (EASE: its prototypes); nothing by default."""


def run_frozen_cil(model: FrozenBackboneCIL, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
                   settings: TrainSettings, generator: torch.Generator) -> dict:
    """The class-incremental loop of the frozen-backbone baselines (L2P, CODA-Prompt, EASE).

    Per task: ``model.new_task``, the stem tokens of the task's training images once (``embed_frozen``),
    Adam on ``task_params`` (``lr_adapter``) and the new rows (``lr_rows``) minimising ``task_loss`` (CE over
    the current task's logits plus the method's regulariser) for ``settings.epochs`` epochs, ``end_task``,
    then the accuracy on every seen task's test images by argmax of ``all_logits``. Returns the metrics,
    the accuracy matrix, per-task loss curves, parameter counts and the model.
    """
    xtr, ytr = train
    xte, yte = test
    t_n = len(tasks)
    acc = np.full((t_n, t_n), np.nan)
    losses = []
    for t, cs in enumerate(tasks):
        model.new_task(cs, generator)
        m = np.isin(ytr, cs)
        tok, _ = embed_frozen(model.backbone, torch.from_numpy(check_images(xtr[m])))
        local = {c: i for i, c in enumerate(cs)}
        ys = torch.tensor([local[int(c)] for c in ytr[m]])
        opt = torch.optim.Adam([{"params": model.task_params(), "lr": settings.lr_adapter},
                                {"params": [model.rows[-1]], "lr": settings.lr_rows}])
        model.train()
        task_losses = []
        for _ in range(settings.epochs):
            perm = torch.randperm(len(tok), generator=generator)
            for i in range(0, len(tok), settings.batch):
                idx = perm[i:i + settings.batch]
                loss = model.task_loss(tok[idx], ys[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                task_losses.append(float(loss.detach()))
        losses.append(task_losses)
        model.eval()
        model.end_task(tok, ytr[m])
        sel = np.isin(yte, model.seen_classes)
        with torch.no_grad():
            tte, _ = embed_frozen(model.backbone, torch.from_numpy(check_images(xte[sel])))
            logits = model.all_logits(tte)
        pred = np.asarray(model.seen_classes)[logits.argmax(1).numpy()]
        acc[t, :t + 1] = task_accuracies(pred, yte[sel], tasks[:t + 1])
    counts = [int(np.isin(yte, cs).sum()) for cs in tasks]
    return {**cil_metrics(acc, counts), "acc": acc.tolist(), "trainable_per_task": model.trainable_params(),
            "stored_adapter_params": model.stored_params(), "drift": None, "losses": losses, "model": model}


def relative_drift(model: CILModel, snaps: list[list[torch.Tensor]]) -> dict:
    """Measured drift in units of each layer's budget gamma_l = rho ||W0_l||_F (max over layers).

    ``from_first[t]`` = max_l ||dW^(t) - dW^(1)|| / gamma_l (how far the model moves from task 1's as
    tasks are added), ``max_final`` = max_{k, l} ||dW^(T) - dW^(k)|| / gamma_l (the global rule: <= 2).
    """
    gam = [layer.gamma0 for layer in model.layers]
    first, last = snaps[0], snaps[-1]
    from_first = [max(float((w - w1).norm()) / g for w, w1, g in zip(s, first, gam)) for s in snaps]
    max_final = max(float((w - wk).norm()) / g for s in snaps for w, wk, g in zip(last, s, gam))
    return {"from_first": from_first, "max_final": max_final}


@torch.no_grad()
def run_ncm(backbone: nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple) -> dict:
    """SimpleCIL: class-mean prototypes of frozen features, cosine classifier."""
    backbone = backbone.eval()
    xtr, ytr = train
    xte, yte = test
    feats = lambda x: nn.functional.normalize(  # noqa: E731
        torch.cat([backbone.features(torch.from_numpy(check_images(x[i:i + 512])))
                   for i in range(0, len(x), 512)]), dim=1)
    ftr, fte = feats(xtr), feats(xte)
    t_n = len(tasks)
    acc = np.full((t_n, t_n), np.nan)
    protos, seen = [], []
    for t, cs in enumerate(tasks):
        for c in cs:
            protos.append(nn.functional.normalize(ftr[torch.from_numpy(ytr == c)].mean(0), dim=0))
            seen.append(c)
        m = np.isin(yte, seen)
        pred = np.asarray(seen)[(fte[torch.from_numpy(m)] @ torch.stack(protos).T).argmax(1).numpy()]
        acc[t, :t + 1] = task_accuracies(pred, yte[m], tasks[:t + 1])
    counts = [int(np.isin(yte, cs).sum()) for cs in tasks]
    return {**cil_metrics(acc, counts), "acc": acc.tolist(), "trainable_per_task": 0,
            "stored_adapter_params": 0, "drift": None, "model": None}


def save_adapters(model: CILModel) -> dict:
    """The trained adapter stacks and classifier rows with their layout (task count, factorization)."""
    lay = model.layers[0]
    return {"method": model.method, "n_tasks": len(model.classes), "classes": model.classes,
            "out_factors": lay.out_factors, "in_factors": lay.in_factors, "bond": lay.bond, "rank": lay.rank,
            "state": {k: v.detach().clone() for k, v in model.state_dict().items() if _is_adapter_key(k)}}


ADAPTER_KEYS = (".adapters.", ".alphas.", ".mods.", "gamma_param")


def _is_adapter_key(k: str) -> bool:
    return not k.startswith("backbone.") or any(s in k for s in ADAPTER_KEYS)


def load_adapters(model: CILModel, ckpt: dict) -> None:
    """Load ``save_adapters`` output into ``model`` (same method, task count and factorization)."""
    lay = model.layers[0]
    for key, have in (("method", model.method), ("n_tasks", len(model.classes)),
                      ("out_factors", lay.out_factors), ("in_factors", lay.in_factors), ("bond", lay.bond),
                      ("rank", lay.rank)):
        if ckpt.get(key) != have:
            raise ValueError(f"checkpoint {key}={ckpt.get(key)!r} differs from the model's {have!r}")
    missing, unexpected = model.load_state_dict(ckpt["state"], strict=False)
    bad = [k for k in missing if not k.startswith("backbone.") or ".adapters." in k] + list(unexpected)
    if bad:
        raise ValueError(f"checkpoint does not match the model's adapter layout: {bad[:4]}")


def run_joint(backbone: nn.Module, tasks: Sequence[Sequence[int]], train: tuple, test: tuple,
              settings: TrainSettings | None = None, seed: int = 0, **adapter_kwargs) -> dict:
    """Joint upper bound: one LoRA and all rows trained on all CIL classes at once (one task)."""
    tasks = check_tasks(tasks)
    settings = settings or TrainSettings()
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = CILModel(backbone, "lora_plain", **adapter_kwargs)
    every = [c for cs in tasks for c in cs]
    model.new_task(every, g)
    m = np.isin(train[1], every)
    train_task(model, train[0][m], train[1][m], settings, g)
    xte, yte = test
    sel = np.isin(yte, every)
    accs = task_accuracies(predict(model, xte[sel]), yte[sel], tasks)
    counts = [int(np.isin(yte, cs).sum()) for cs in tasks]
    a = float(np.average(accs, weights=counts))
    return {"A_t": [a], "A_last": a, "A_avg": a, "F": 0.0, "acc": [accs],
            "trainable_per_task": model.trainable_adapter_params(),
            "stored_adapter_params": model.stored_adapter_params(), "drift": None, "model": model}
