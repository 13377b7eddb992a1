"""GapGen (spec §6; ASSUMPTION in architecture, faithful in intent): a feature-to-face generator
G(e, z) -> image, trained on reals (stage 0) and then, by a curriculum, towards the allocated gaps.

1. Stage 0 (reals, Vec2Face-style): e = f(x) of a real image x (per-image embedding), z ~ N(0, I)::

       L_0 = L1(G(e, z), x) + lambda_id (1 - cos(f(G(e, z)), e)) + lambda_adv L_adv

   with a PatchGAN critic D trained by the hinge loss
   ``L_D = E relu(1 - D(x)) + E relu(1 + D(G))`` and ``L_adv = -E D(G)``; f is frozen.
2. Curriculum stages s = 1..S, alpha_s = s / S: gap targets
   ``g = normalize(slerp(c_near(v), v, alpha_s) + sigma_intra P xi)`` for allocated virtuals v
   (c_near = nearest real center, P the realizable basis, xi ~ N(0, I_k)); no image ground truth, so::

       L_s = lambda_id (1 - cos(f(G(g, z)), g))
             + lambda_nc sum_{j in NN_R(g)} T softplus((cos(f(G(g, z)), c_j) - tau_nc) / T)
             + lambda_adv L_adv,     tau_nc = tau_m - nc_margin

   (the spec's hinge sits at tau_nc = tau_m, ``nc_margin`` = 0; ASSUMPTION knob ``nc_margin`` > 0 moves it
   below the allocation threshold so that the spread of generated embeddings around g, not only its
   mean, stays clear of tau_c)

   mixed 1:1 with stage-0 real batches. A stage advances after ``stage_epochs`` epochs (the final stage
   ``stage_epochs + final_extra_epochs``), or earlier once the mean identity consistency on its targets
   reaches ``advance`` x the real-level value. ASSUMPTION ``final_lr_decay``: over the final stage's T steps
   both learning rates follow ``lr_t = lr 0.5 (1 + cos(pi t / T))`` (constant lr in the earlier stages).
3. Provisioning: for each virtual v, K images ``G(normalize(v + sigma_intra P xi), z)``.

Metrics (``identity_consistency``, ``image_collisions``, ``frechet_distance``): cos(f(G(v, z)), v);
the fraction of generated images whose embedding reaches tau_c against a real center; the Frechet
distance between Gaussian fits of the frozen encoder's pre-normalisation features (a feature-space
distance of this toy encoder, NOT comparable to published FID numbers).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

from neurips26.bip.encoder import FREncoder, check_images
from neurips26.bip.gallery import as_unit, knn, maxcos
from neurips26.harness.validation import check_choice, check_scalar

NC_NEIGHBOURS = ("target", "generated", "both")


class Generator(nn.Module):
    """G(e, z): MLP to a (width, size/4, size/4) map, two nearest-upsample + conv + BN + ReLU blocks,
    a 1-channel conv and a sigmoid (images in [0, 1])."""

    def __init__(self, dim: int = 32, dz: int = 8, size: int = 24, width: int = 32):
        super().__init__()
        self.dim, self.dz = check_scalar(dim, "dim", int, min=1), check_scalar(dz, "dz", int, min=0)
        self.size = check_scalar(size, "size", int, min=8)
        if self.size % 4:
            raise ValueError(f"size must be a multiple of 4, got {size}")
        self.width, self.s0 = width, self.size // 4
        self.fc = nn.Sequential(nn.Linear(dim + dz, 128), nn.ReLU(),
                                nn.Linear(128, width * self.s0 ** 2), nn.ReLU())
        self.up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(width, width, 3, padding=1),
                                nn.BatchNorm2d(width), nn.ReLU(),
                                nn.Upsample(scale_factor=2), nn.Conv2d(width, width // 2, 3, padding=1),
                                nn.BatchNorm2d(width // 2), nn.ReLU(),
                                nn.Conv2d(width // 2, 1, 3, padding=1), nn.Sigmoid())

    def forward(self, e: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        h = self.fc(torch.cat([e, z], 1)).view(-1, self.width, self.s0, self.s0)
        return self.up(h)


class PatchCritic(nn.Module):
    """PatchGAN critic: strided 4x4 convs (spectral norm, LeakyReLU) to a (B, 1, H/4, W/4) score map."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.net = nn.Sequential(spectral_norm(nn.Conv2d(1, width, 4, 2, 1)), nn.LeakyReLU(0.2),
                                 spectral_norm(nn.Conv2d(width, 2 * width, 4, 2, 1)), nn.LeakyReLU(0.2),
                                 spectral_norm(nn.Conv2d(2 * width, 1, 3, 1, 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def hinge_d(d_real: torch.Tensor, d_fake: torch.Tensor) -> torch.Tensor:
    """L_D = E relu(1 - D(x)) + E relu(1 + D(G)) (per patch)."""
    return F.relu(1 - d_real).mean() + F.relu(1 + d_fake).mean()


def slerp(a: torch.Tensor, b: torch.Tensor, t: float) -> torch.Tensor:
    """Great-circle interpolation between unit rows: sin((1-t)w)/sin(w) a + sin(t w)/sin(w) b."""
    cos = (a * b).sum(1, keepdim=True).clamp(-1 + 1e-7, 1 - 1e-7)
    w = torch.acos(cos)
    out = (torch.sin((1 - t) * w) * a + torch.sin(t * w) * b) / torch.sin(w)
    return F.normalize(out, dim=1)


def nc_penalty(emb: torch.Tensor, reals: torch.Tensor, nn_idx: torch.Tensor, tau_m: float,
               T: float = 0.02, weight: torch.Tensor | None = None) -> torch.Tensor:
    """sum_{j in NN_R} T softplus((cos(f(G), c_j) - tau_m) / T), averaged over the batch (``weight``:
    per-neighbour weights, e.g. 0 for a real listed twice)."""
    cos = (emb[:, None, :] * reals[nn_idx]).sum(-1)
    h = T * F.softplus((cos - tau_m) / T)
    return (h if weight is None else h * weight).sum(1).mean()


DEADLINE = "deadline"   # sent to ``curriculum_batches`` past the time budget: stop now, whatever the stage


@dataclass(frozen=True)
class GapGenConfig:
    dz: int = 8
    width: int = 32
    lr: float = 2e-3
    batch: int = 32
    stage0_epochs: int = 4
    stages: int = 2               # S (quick: alpha_s = 1/2, 1)
    stage_epochs: int = 2         # epochs over the virtual targets per curriculum stage
    lambda_id: float = 1.0
    lambda_adv: float = 0.05
    lambda_nc: float = 1.0
    T: float = 0.02
    k_real: int = 8
    sigma_intra: float = 0.1      # ASSUMPTION: intra-class jitter of targets (in the realizable basis)
    # ASSUMPTION: the reals the non-collision term repels from: NN_R(g) of the target (the spec's rule),
    # NN_R(f(G(g, z))) of the generated embedding, or both (union)
    nc_neighbours: str = "target"
    # ASSUMPTION: the non-collision hinge threshold tau_nc = tau_m - nc_margin (the spec: 0, i.e. tau_m)
    nc_margin: float = 0.0
    advance: float = 0.8          # advance a stage once consistency >= advance x the real level
    # ASSUMPTION (training schedule, not in the spec): extra epochs in the final stage (alpha = 1) only
    final_extra_epochs: int = 0
    # ASSUMPTION: cosine decay of both learning rates over the final stage's steps (lr_t = lr 0.5 (1 +
    # cos(pi t / T))), restored when the curriculum ends; off = the constant lr of every stage
    final_lr_decay: bool = False


class GapGen:
    """Train and sample the gap-aware generator against a frozen ``encoder``.

    reals: (N, D) unit real centers (the enrolled gallery in the encoder's space); tau_m: the allocation
    threshold of the non-collision term; basis: (D, k) realizable basis P for intra-class jitter.
    """

    def __init__(self, encoder: FREncoder, reals: torch.Tensor, tau_m: float, basis: torch.Tensor,
                 cfg: GapGenConfig = GapGenConfig(), size: int = 24, seed: int = 0):
        self.f = encoder.eval()
        for p in self.f.parameters():
            p.requires_grad_(False)
        self.R = as_unit(reals, "reals")
        if basis.ndim != 2 or basis.shape[0] != self.R.shape[1]:
            raise ValueError(f"basis must be (D={self.R.shape[1]}, k), got {tuple(basis.shape)}")
        self.P = basis.float()
        self.tau_m = check_scalar(tau_m, "tau_m", float, min=-1, max=1)
        check_choice(cfg.nc_neighbours, "nc_neighbours", NC_NEIGHBOURS)
        check_scalar(cfg.nc_margin, "nc_margin", float, min=0, max=1 + self.tau_m)
        check_scalar(cfg.final_extra_epochs, "final_extra_epochs", int, min=0)
        self.cfg = cfg
        self.gen = torch.Generator().manual_seed(check_scalar(seed, "seed", int, min=0))
        torch.manual_seed(seed)
        self.G = Generator(self.R.shape[1], cfg.dz, size, cfg.width)
        self.D = PatchCritic()
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
        self.history: list[dict] = []

    # ---- pieces ---------------------------------------------------------------------------------
    def _z(self, n: int) -> torch.Tensor:
        return torch.randn(n, self.cfg.dz, generator=self.gen)

    def jitter(self, v: torch.Tensor) -> torch.Tensor:
        """normalize(v + sigma_intra P xi), xi ~ N(0, I_k)."""
        xi = torch.randn(v.shape[0], self.P.shape[1], generator=self.gen)
        return F.normalize(v + self.cfg.sigma_intra * xi @ self.P.T, dim=1)

    def _critic_step(self, real: torch.Tensor, fake: torch.Tensor) -> float:
        loss = hinge_d(self.D(real), self.D(fake.detach()))
        self.opt_d.zero_grad()
        loss.backward()
        self.opt_d.step()
        return float(loss.detach())

    def _real_loss(self, fake: torch.Tensor, x: torch.Tensor, e: torch.Tensor,
                   d_fake: torch.Tensor | None = None) -> torch.Tensor:
        """L_0 on a real batch and its fakes G(e, z) (after the critic's step); ``d_fake``: the critic's
        scores of ``fake`` when the caller already has them (default ``D(fake)``)."""
        c = self.cfg
        ident = (1 - (self.f(fake) * e).sum(1)).mean()
        adv = (self.D(fake) if d_fake is None else d_fake).mean()
        return F.l1_loss(fake, x) + c.lambda_id * ident - c.lambda_adv * adv

    def _gap_loss(self, fake: torch.Tensor, g: torch.Tensor, lambda_nc: float,
                  d_fake: torch.Tensor | None = None) -> torch.Tensor:
        """L_s on gap targets g and their fakes G(g, z) (after the critic's step); ``d_fake``: the
        critic's scores of ``fake`` when the caller already has them (default ``D(fake)``)."""
        c = self.cfg
        emb = self.f(fake)
        adv = (self.D(fake) if d_fake is None else d_fake).mean()
        loss = c.lambda_id * (1 - (emb * g).sum(1)).mean() - c.lambda_adv * adv
        if lambda_nc > 0:
            idx, w = self._nc_index(g, emb)
            # tau_nc = tau_m - nc_margin: the hinge threshold of the non-collision term
            loss = loss + lambda_nc * nc_penalty(emb, self.R, idx, self.tau_m - c.nc_margin, c.T, w)
        return loss

    def _nc_index(self, g: torch.Tensor, emb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(indices, weights) of the reals in the non-collision term (``cfg.nc_neighbours``); in ``both``
        a real that neighbours the target and the generated embedding counts once."""
        k, rule = self.cfg.k_real, self.cfg.nc_neighbours
        if rule == "target":
            return knn(g, self.R, k)[1], None
        with torch.no_grad():
            ie = knn(emb.detach(), self.R, k)[1]
        if rule == "generated":
            return ie, None
        it = knn(g, self.R, k)[1]
        dup = (ie[:, :, None] == it[:, None, :]).any(2)
        return torch.cat([it, ie], 1), torch.cat([torch.ones_like(it, dtype=emb.dtype), (~dup).to(emb.dtype)], 1)

    def _g_step(self, loss: torch.Tensor) -> None:
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()

    # ---- training -------------------------------------------------------------------------------
    def train_stage0(self, images: torch.Tensor, epochs: int | None = None, deadline: float | None = None,
                     clock: Callable[[], float] = time.perf_counter) -> "GapGen":
        """Stage 0 on real images (their per-image embeddings are the inputs); ``deadline`` (a value of
        ``clock``) stops after the epoch that passes it."""
        x = check_images(images)
        with torch.no_grad():
            e = self.f(x)
        self._x, self._e = x, e
        self.G.train()
        for ep in range(self.cfg.stage0_epochs if epochs is None else epochs):
            perm = torch.randperm(x.shape[0], generator=self.gen)
            for i in range(0, x.shape[0], self.cfg.batch):
                b = perm[i:i + self.cfg.batch]
                fake = self.G(e[b], self._z(b.numel()))
                self._critic_step(x[b], fake)
                loss = self._real_loss(fake, x[b], e[b])
                self._g_step(loss)
            self.history.append({"stage": 0, "epoch": ep, "loss": float(loss.detach())})
            if deadline is not None and clock() > deadline:
                break
        return self

    def train_curriculum(self, virtuals: torch.Tensor, real_level: float, lambda_nc: float | None = None,
                         deadline: float | None = None, clock: Callable[[], float] = time.perf_counter) -> "GapGen":
        """Stages s = 1..S towards slerp(c_near(v), v, s/S), each mixed 1:1 with stage-0 real batches.

        real_level: the mean identity consistency of real images (the advance rule's reference);
        deadline: a value of ``clock``; past it, the schedule stops at the end of the current epoch.
        """
        if not hasattr(self, "_x"):
            raise RuntimeError("train_stage0 must run before train_curriculum")
        V = as_unit(virtuals, "virtuals", dim=self.R.shape[1])
        c = self.cfg
        lam = c.lambda_nc if lambda_nc is None else check_scalar(lambda_nc, "lambda_nc", float, min=0)
        x, e = self._x, self._e
        batches = self.curriculum_batches(V)
        try:   # close() restores the learning rate also when a step raises
            step = next(batches)
            while True:
                s, ep, g, rb, z_g, z_r, target = step
                if target is not None:                                   # an epoch of stage s is over
                    ic = float(identity_consistency(self, target, k=1).mean())
                    self.history.append({"stage": s, "alpha": s / c.stages, "epoch": ep, "consistency": ic})
                    past = deadline is not None and clock() > deadline
                    try:
                        step = batches.send(DEADLINE if past else ic >= c.advance * real_level)
                    except StopIteration:
                        break
                    continue
                self.G.train()
                fake_g = self.G(g, z_g)
                fake_r = self.G(e[rb], z_r)
                self._critic_step(torch.cat([x[rb], x[rb]]), torch.cat([fake_r, fake_g]))
                self._g_step(self._gap_loss(fake_g, g, lam) + self._real_loss(fake_r, x[rb], e[rb]))
                step = next(batches)
        finally:
            batches.close()
        return self

    def curriculum_batches(self, V: torch.Tensor):
        """The curriculum's schedule and draws, for ``train_curriculum`` and the sharded / DDP trainers
        (``bip.scale``): stage s = 1..S aims at ``slerp(c_near(v), v, s/S)``; per step it yields
        ``(s, epoch, g, rb, z_g, z_r, None)`` (jittered gap targets, a real batch's indices, their noise,
        drawn from ``self.gen`` in that order); after each epoch it yields ``(s, epoch, ..., target)`` and
        the consumer sends True to move on to the next stage (the advance rule), False to stay, ``DEADLINE``
        to stop now. A final stage with a schedule of its own (``final_lr_decay`` or ``final_extra_epochs``)
        runs it to the end: there the advance rule would stop training part-way down the decay (it did in
        the quick run: after 5-6 of 12 epochs), so only ``DEADLINE`` ends it early."""
        c = self.cfg
        scheduled = c.final_lr_decay or c.final_extra_epochs > 0
        near = self.R[knn(V, self.R, 1)[1][:, 0]]
        per_epoch = -(-V.shape[0] // c.batch)
        try:
            for s in range(1, c.stages + 1):
                target = slerp(near, V, s / c.stages)
                final = s == c.stages
                n_ep = c.stage_epochs + (c.final_extra_epochs if final else 0)
                t = 0
                for ep in range(n_ep):
                    perm = torch.randperm(V.shape[0], generator=self.gen)
                    for i in range(0, V.shape[0], c.batch):
                        if final and c.final_lr_decay:
                            # lr_t = lr * 0.5 (1 + cos(pi t / T)), T = the final stage's steps
                            self._set_lr(0.5 * (1 + np.cos(np.pi * t / (n_ep * per_epoch))))
                            t += 1
                        g = self.jitter(target[perm[i:i + c.batch]])
                        rb = torch.randint(0, self._x.shape[0], (g.shape[0],), generator=self.gen)
                        yield s, ep, g, rb, self._z(g.shape[0]), self._z(rb.numel()), None
                    sent = yield s, ep, None, None, None, None, target
                    if sent is DEADLINE or (sent and not (final and scheduled)):
                        break
        finally:
            self._set_lr(1.0)

    def _set_lr(self, scale: float) -> None:
        """Both optimizers' learning rate = scale x cfg.lr."""
        for opt in (self.opt_g, self.opt_d):
            for group in opt.param_groups:
                group["lr"] = self.cfg.lr * scale

    # ---- sampling -------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, e: torch.Tensor, k: int = 1, jitter: bool = True) -> torch.Tensor:
        """k images per row of e: G(normalize(e + sigma_intra P xi), z); rows grouped per identity."""
        e = as_unit(e, "e", dim=self.R.shape[1]).repeat_interleave(check_scalar(k, "k", int, min=1), 0)
        self.G.eval()
        return self.G(self.jitter(e) if jitter else e, self._z(e.shape[0]))

    @torch.no_grad()
    def provision(self, v: torch.Tensor, k: int, tau_c: float, max_redraws: int = 3) -> dict:
        """Verified provisioning: k images ``G(normalize(v + sigma_intra P xi), z)`` per virtual, each
        accepted only if its embedding's maxcos to the real centers is < tau_c (the exact check of the
        allocator, at image level); a rejected image is redrawn (new xi, z) up to ``max_redraws`` times, and
        a virtual still short of k accepted images is retired. Returns the accepted images (grouped per
        kept virtual) and their embeddings, the kept-virtual mask, the number of draws and of rejected draws."""
        v = as_unit(v, "v", dim=self.R.shape[1])
        k = check_scalar(k, "k", int, min=1)
        max_redraws = check_scalar(max_redraws, "max_redraws", int, min=0)
        n = v.shape[0]
        imgs = torch.zeros(n, k, 1, self.G.size, self.G.size)
        embs = torch.zeros(n, k, self.R.shape[1])
        ok = torch.zeros(n, k, dtype=torch.bool)
        draws = rejected = 0
        for _ in range(max_redraws + 1):
            todo = (~ok).nonzero()
            if todo.numel() == 0:
                break
            x = self.sample(v[todo[:, 0]], 1)
            emb = self.f(x)
            good = maxcos(emb, self.R) < tau_c
            draws += x.shape[0]
            rejected += int((~good).sum())
            sel = todo[good]
            imgs[sel[:, 0], sel[:, 1]] = x[good]
            embs[sel[:, 0], sel[:, 1]] = emb[good]
            ok[sel[:, 0], sel[:, 1]] = True
        kept = ok.all(1)
        return {"images": imgs[kept].reshape(-1, 1, self.G.size, self.G.size),
                "embeddings": embs[kept].reshape(-1, self.R.shape[1]), "kept": kept,
                "draws": draws, "rejected": rejected}

    def copy(self) -> "GapGen":
        """An independent copy (the stage-0 generator baseline branches off here)."""
        return copy.deepcopy(self)


# ---- metrics ------------------------------------------------------------------------------------

@torch.no_grad()
def identity_consistency(gg: GapGen, targets: torch.Tensor, k: int = 4) -> torch.Tensor:
    """cos(f(G(v, z)), v) for k images per target (no jitter), shape (n * k,)."""
    imgs = gg.sample(targets, k, jitter=False)
    return (gg.f(imgs) * targets.repeat_interleave(k, 0)).sum(1)


def image_collisions(emb: torch.Tensor, reals: torch.Tensor, tau_c: float) -> dict:
    """Image-level collisions: generated-image embeddings whose maxcos to a real center is >= tau_c."""
    mc = maxcos(as_unit(emb, "emb"), as_unit(reals, "reals", dim=emb.shape[1]))
    return {"n": int(mc.numel()), "count": int((mc >= tau_c).sum()), "rate": float((mc >= tau_c).float().mean()),
            "mean_maxcos": float(mc.mean()), "max_maxcos": float(mc.max())}


def frechet_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^{1/2}) between Gaussian fits of feature rows.

    Computed on the toy encoder's pre-normalisation features: NOT comparable to published FID."""
    from scipy import linalg

    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.ndim != 2 or xb.ndim != 2 or xa.shape[1] != xb.shape[1] or min(len(xa), len(xb)) < 2:
        raise ValueError(f"a and b must be (n, d) feature arrays with the same d, got {xa.shape}, {xb.shape}")
    mu = xa.mean(0) - xb.mean(0)
    sa, sb = np.cov(xa, rowvar=False), np.cov(xb, rowvar=False)
    root = linalg.sqrtm(sa @ sb)
    root = root.real if np.iscomplexobj(root) else root
    return float(mu @ mu + np.trace(sa + sb - 2 * root))

