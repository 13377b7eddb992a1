"""The round loop (spec 6) with ObsAlign, its baselines and ablations as ``Method`` settings.

Each round: every source loads the broadcast parameters (+ its personal rows), trains E local epochs
with the latest guidance (none in warm-up), builds its sketch; the server pools sketches, updates omega
(calibration, EMA) and consolidates. All methods share encoders, classifier, optimiser and rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.obsalign.consolidation import consolidate, evidence_weights, fedavg_weights
from neurips26.obsalign import model as model_mod
from neurips26.obsalign.model import Guidance, ObsModel, forward, guided_tables, local_loss, predict
from neurips26.obsalign.obsbench import ObsBench, Split, validate_split
from neurips26.obsalign.observability import (ObservabilityTracker, OmegaParams, check_thresholds, kappa_neg,
                                              reliability, transfer_weight)
from neurips26.obsalign.sketch import Pooled, Sketch, build_sketch, pool


@dataclass(frozen=True)
class Method:
    """What differs between methods: alignment, transfer, consolidation and the omega settings."""

    name: str
    align: str = "none"          # none | always | omega | omega_nogate | omega_hard
    transfer: str = "none"       # none | always | omega
    consolidation: str = "fedavg"  # none | fedavg | evidence
    omega: OmegaParams = field(default_factory=OmegaParams)
    use_reliability: bool = True
    prox_mu: float = 0.0         # FedProx: (mu / 2) ||w - w_global||^2 added to the local loss

    def __post_init__(self) -> None:
        check_scalar(self.prox_mu, "prox_mu", float, min=0)
        check_choice(self.align, "align", ("none", "always", "omega", "omega_nogate", "omega_hard"))
        check_choice(self.transfer, "transfer", ("none", "always", "omega"))
        check_choice(self.consolidation, "consolidation", ("none", "fedavg", "evidence"))


FEDPROX_MU = 0.01  # the spec's FedProx baseline
OBS = dict(align="omega", transfer="omega", consolidation="evidence")
METHODS: dict[str, Method] = {
    "local": Method("local", consolidation="none"),
    "noalign": Method("noalign"),
    "alwaysalign": Method("alwaysalign", align="always", transfer="always"),
    "fedprox": Method("fedprox", prox_mu=FEDPROX_MU),
    "protoimpute": Method("protoimpute", transfer="always"),
    "evidence_always": Method("evidence_always", align="always", transfer="always", consolidation="evidence"),
    "obsalign": Method("obsalign", **OBS),
    "obsalign_nogate": Method("obsalign_nogate", align="omega_nogate", transfer="always",
                              consolidation="evidence"),
    "obsalign_hard": Method("obsalign_hard", align="omega_hard", transfer="omega", consolidation="evidence"),
    "obsalign_fedavg": Method("obsalign_fedavg", align="omega", transfer="omega"),
    "obsalign_raw": Method("obsalign_raw", omega=OmegaParams(calibrate=False), **OBS),
    **{f"obsalign_no_{s}": Method(f"obsalign_no_{s}", omega=OmegaParams(drop=(s,)), **OBS)
       for s in ("bridge", "side", "consistency", "uncertainty")},
}


@dataclass(frozen=True)
class FedConfig:
    d: int = 32
    regime: str = "encoder"
    rounds: int = 12
    epochs: int = 2
    lr: float = 3e-3
    batch: int = 64
    warmup: int = 2
    tau: float = 0.1              # InfoNCE temperature
    tau_lo: float = 0.1
    tau_hi: float = 0.5
    kappa: float = 1.0            # weak-regime exponent
    beta: float = 0.5             # omega EMA
    pseudo_threshold: float = 0.8
    sketch_noise_std: float = 0.0

    def __post_init__(self) -> None:
        check_scalar(self.d, "d", int, min=1)
        check_choice(self.regime, "regime", ("encoder", "vlm"))
        check_scalar(self.rounds, "rounds", int, min=1)
        check_scalar(self.epochs, "epochs", int, min=1)
        check_scalar(self.lr, "lr", float, min=0, inclusive="neither")
        check_scalar(self.batch, "batch", int, min=1)
        check_scalar(self.warmup, "warmup", int, min=0)
        check_scalar(self.tau, "tau", float, min=0, inclusive="neither")
        check_thresholds(self.tau_lo, self.tau_hi)
        check_scalar(self.kappa, "kappa", float, min=0)
        check_scalar(self.pseudo_threshold, "pseudo_threshold", float, min=0, max=1)


def tensors(split: Split) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    return ([torch.as_tensor(x, dtype=torch.float32) for x in split.x], torch.as_tensor(split.mask),
            torch.as_tensor(split.y_obs, dtype=torch.long))


def guidance_for(method: Method, p: Pooled, omega: np.ndarray | None, c_s: np.ndarray | None,
                 cfg: FedConfig) -> Guidance:
    """The server's broadcast for one source under ``method`` (omega / c_s may be overridden in tests)."""
    K, C = p.n.shape
    avail = (p.n > 0).astype(float)                              # n(m', c) > 0
    offdiag = 1.0 - np.eye(K)[:, :, None]
    ones = np.ones((K, K, C))
    w = omega if omega is not None else np.zeros((K, K, C))
    cs = c_s if (c_s is not None and method.use_reliability) else ones
    align = {"none": None, "always": ones,
             "omega": w * cs * (w >= cfg.tau_lo),
             "omega_nogate": ones * cs,
             "omega_hard": (w >= cfg.tau_lo).astype(float)}[method.align]
    if method.transfer == "none":
        tr = None
    else:
        base = ones if method.transfer == "always" else transfer_weight(w, cfg.tau_lo, cfg.tau_hi, cfg.kappa)
        tr = base * avail[None, :, :] * offdiag
    f = lambda a: None if a is None else torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return Guidance(torch.as_tensor(p.mu, dtype=torch.float32), f(align), f(tr))


def proximal_term(model: ObsModel, anchor: dict[str, torch.Tensor], mu: float) -> torch.Tensor:
    """FedProx's ``(mu / 2) sum_p ||w_p - w_global,p||^2`` over every trainable parameter of ``model``."""
    mu = check_scalar(mu, "mu", float, min=0)
    terms = [((p - anchor[k]) ** 2).sum() for k, p in model.named_parameters()]
    return 0.5 * mu * torch.stack(terms).sum()


def train_epochs(model: ObsModel, opt: torch.optim.Optimizer, split: Split, modalities: tuple[int, ...],
                 g: Guidance | None, cfg: FedConfig, gen: torch.Generator, prox_mu: float = 0.0) -> float:
    """E local epochs; with ``prox_mu > 0`` the loss gets FedProx's term about the round's start point."""
    x, mask, y = tensors(split)
    anchor = ({k: p.detach().clone() for k, p in model.named_parameters()} if prox_mu > 0 else None)
    # the torch path's lookup tables, once per round, not per step (the compiled path reads g directly)
    tables = guided_tables(g, mask, modalities) if g is not None and not model_mod.USE_KERNEL else None
    n, last = len(y), 0.0
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, cfg.batch):
            b = perm[i:i + cfg.batch]
            opt.zero_grad()
            loss = local_loss(model, [xm[b] for xm in x], mask[b], y[b], modalities, g, cfg.tau,
                              tables=tables, key=None if tables is None else tables.key[b])
            if anchor is not None:
                loss = loss + proximal_term(model, anchor, prox_mu)
            loss.backward()
            opt.step()
            last = float(loss.detach())
    return last


@torch.no_grad()
def source_sketch(model: ObsModel, split: Split, modalities: tuple[int, ...], g: Guidance | None,
                  cfg: FedConfig, rng: np.random.Generator | None = None) -> Sketch:
    """Sketch with labels, or confident pseudo-labels (max prob >= threshold) for unlabelled samples."""
    x, mask, y = tensors(split)
    z, logits, _, p0 = forward(model, x, mask, modalities, g)
    prob = p0 if g is None or g.transfer is None else torch.softmax(logits, dim=1)   # no imputation: same
    conf, arg = prob.max(dim=1)
    cls = torch.where(y >= 0, y, torch.where(conf >= cfg.pseudo_threshold, arg, torch.full_like(y, -1)))
    zs = [z[m].numpy().astype(float) if m in z else None for m in range(model.K)]
    return build_sketch(zs, split.mask, cls.numpy(), modalities, model.C, cfg.sketch_noise_std, rng)


def shared_state(model: ObsModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def modality_counts(split: Split, modalities: tuple[int, ...]) -> np.ndarray:
    """(K,) samples observing each modality, counted only for the source's own modalities (public sizes)."""
    return (split.mask.sum(axis=0) * np.isin(np.arange(split.mask.shape[1]), modalities)).astype(float)


def server_step(method: Method, cfg: FedConfig, tracker: ObservabilityTracker, sketches: list[Sketch],
                mod_counts: np.ndarray, sizes: np.ndarray, n_classes: int):
    """The server's part of a round from the sources' sketches (in source order): pooled sketch, omega
    (``tracker`` updated), each source's guidance and the consolidation weights (None without consolidation)."""
    pooled = pool(sketches)
    omega = tracker.update(pooled)
    kneg = kappa_neg(pooled)
    guid = [guidance_for(method, pooled, omega, reliability(sk, pooled, kneg), cfg) for sk in sketches]
    w = None
    if method.consolidation == "fedavg":
        w = fedavg_weights(mod_counts, sizes, n_classes)
    elif method.consolidation == "evidence":
        w = evidence_weights(sketches, pooled, omega, mod_counts, cfg.tau_lo)
    return pooled, omega, guid, w


@dataclass
class FedResult:
    models: list[ObsModel]
    global_model: ObsModel
    guidance: list[Guidance | None]
    omega: np.ndarray | None
    pooled: Pooled | None
    round_acc: list[float]
    omega_history: list[np.ndarray]


def run_federation(bench: ObsBench, method: Method | str, cfg: FedConfig = FedConfig(), seed: int = 0,
                   eval_every_round: bool = True) -> FedResult:
    """Train all sources of ``bench`` for ``cfg.rounds`` rounds under ``method``."""
    method = METHODS[check_choice(method, "method", tuple(METHODS))] if isinstance(method, str) else method
    seed = check_scalar(seed, "seed", int, min=0)
    C = bench.n_classes
    for i, s in enumerate(bench.sources):
        validate_split(s.train, bench.dims, C, f"sources[{i}].train")
    torch.manual_seed(seed)
    init = ObsModel(bench.dims, C, cfg.d, regime=cfg.regime)
    models = [ObsModel(bench.dims, C, cfg.d, regime=cfg.regime) for _ in bench.sources]
    for m in models:
        m.load_state_dict(init.state_dict())
    opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr) for m in models]
    gens = [torch.Generator().manual_seed(seed * 1000 + i) for i in range(len(models))]
    rng = np.random.default_rng(seed)
    tracker = ObservabilityTracker(method.omega, cfg.beta)
    mod_counts = np.stack([modality_counts(s.train, s.spec.modalities) for s in bench.sources])
    sizes = np.array([len(s.train) for s in bench.sources], float)
    guid: list[Guidance | None] = [None] * len(models)
    pooled, omega, glob = None, None, init
    round_acc, hist = [], []
    for r in range(1, cfg.rounds + 1):
        sketches = []
        for i, (src, model) in enumerate(zip(bench.sources, models)):
            g = guid[i] if r > cfg.warmup else None
            train_epochs(model, opts[i], src.train, src.spec.modalities, g, cfg, gens[i], method.prox_mu)
            sketches.append(source_sketch(model, src.train, src.spec.modalities, guid[i], cfg, rng))
        pooled, omega, guid, w = server_step(method, cfg, tracker, sketches, mod_counts, sizes, C)
        hist.append(omega.copy())
        if w is not None:
            new, gstate = consolidate([shared_state(m) for m in models], w)
            for m, st in zip(models, new):
                m.load_state_dict(st)
            glob = ObsModel(bench.dims, C, cfg.d, regime=cfg.regime)
            glob.load_state_dict(gstate)
        if eval_every_round or r == cfg.rounds:
            round_acc.append(float(np.mean(source_accuracy(bench, models, guid))))
    if method.consolidation == "none":
        glob = models[0]
    return FedResult(models, glob, guid, omega, pooled, round_acc, hist)


def pooled_split(splits: list[Split]) -> Split:
    """All sources' samples in one split (labels and masks as each source has them)."""
    if not splits:
        raise ValueError("splits must be non-empty")
    K = len(splits[0].x)
    return Split([np.concatenate([s.x[m] for s in splits]) for m in range(K)],
                 np.concatenate([s.mask for s in splits]), np.concatenate([s.y for s in splits]),
                 np.concatenate([s.y_obs for s in splits]), np.concatenate([s.mismatch for s in splits]))


def run_centralised(bench: ObsBench, cfg: FedConfig = FedConfig(), seed: int = 0,
                    eval_every_round: bool = True) -> FedResult:
    """The centralised reference: one model trained on the pooled training data of every source.

    Same model, loss (CE, no alignment), optimiser and number of passes over the data as the round
    loop (``cfg.rounds`` x ``cfg.epochs`` epochs); every source is evaluated with this one model.
    """
    seed = check_scalar(seed, "seed", int, min=0)
    K, C = bench.n_modalities, bench.n_classes
    for i, s in enumerate(bench.sources):
        validate_split(s.train, bench.dims, C, f"sources[{i}].train")
    torch.manual_seed(seed)
    model = ObsModel(bench.dims, C, cfg.d, regime=cfg.regime)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed * 1000)
    data, mods = pooled_split([s.train for s in bench.sources]), tuple(range(K))
    guid: list[Guidance | None] = [None] * len(bench.sources)
    models, round_acc = [model] * len(bench.sources), []
    for r in range(1, cfg.rounds + 1):
        train_epochs(model, opt, data, mods, None, cfg, gen)
        if eval_every_round or r == cfg.rounds:
            round_acc.append(float(np.mean(source_accuracy(bench, models, guid))))
    return FedResult(models, model, guid, None, None, round_acc, [])


def source_accuracy(bench: ObsBench, models: list[ObsModel], guid: list[Guidance | None],
                    split: str = "test") -> list[float]:
    out = []
    for src, model, g in zip(bench.sources, models, guid):
        sp = getattr(src, split)
        x, mask, _ = tensors(sp)
        pred = predict(model, x, mask, src.spec.modalities, g).numpy()
        out.append(float(np.mean(pred == sp.y)))
    return out


def unimodal_accuracy(bench: ObsBench, models: list[ObsModel], guid: list[Guidance | None],
                      split: str = "test") -> np.ndarray:
    """``acc(m, c)`` (K, C) on the unimodal tests, averaged over the sources with ``m`` in ``O_s``.

    ``split="val"`` uses the generator's unimodal validation sets (tuning only; never the test sets).
    """
    check_choice(split, "split", ("test", "val"))
    sets = bench.unimodal_test if split == "test" else bench.unimodal_val
    if sets is None:
        raise ValueError("split='val' needs a bench with unimodal_val (make_obsbench builds one)")
    K, C = bench.n_modalities, bench.n_classes
    acc = np.full((K, C), np.nan)
    for m in range(K):
        xs, y = sets[m]
        per = []
        for src, model, g in zip(bench.sources, models, guid):
            if m not in src.spec.modalities:
                continue
            x = [torch.zeros((len(y), dm)) for dm in bench.dims]
            x[m] = torch.as_tensor(xs, dtype=torch.float32)
            mask = torch.zeros((len(y), K), dtype=torch.bool)
            mask[:, m] = True
            pred = predict(model, x, mask, (m,), g).numpy()
            per.append([np.mean(pred[y == c] == c) for c in range(C)])
        if per:
            acc[m] = np.mean(per, axis=0)
    return acc
