"""Scale-out of GapGen stage 0: data-parallel training (``torch.distributed`` DDP on gloo), launched by
``torchrun`` (every rank calls ``train_stage0_ddp(job)`` after ``init_process_group``) or, for CPU checks,
by ``launch_local`` (gloo processes on this machine).

Every rank draws the same permutation and the same noise z from the job's seeded generator and takes its
slice ``b[rank::world]`` of each global batch; G and the critic D are wrapped in
``DistributedDataParallel``, so the gradients are averaged over ranks. Per step (as in ``GapGen``)::

    L_D = E relu(1 - D(x)) + E relu(1 + D(G(e, z)))                 (one critic forward on [x; G])
    L_0 = L1(G(e, z), x) + lambda_id (1 - cos(f(G(e, z)), e)) - lambda_adv E D(G(e, z))

``train_stage0_sharded`` computes the same update in one process (each slice through G on its own, the
losses averaged over slices): it is the reference the DDP path is tested against. Both differ from
``GapGen.train_stage0`` in two stated ways: G's batch-norm statistics are per slice, and the critic
sees real and fake images in one forward (one spectral-norm power iteration per critic step).
Not implemented: the curriculum stages under DDP, Voronoi-cell sharding of the allocator, Ray.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from neurips26.bip.encoder import FREncoder, check_images
from neurips26.bip.gapgen import GapGen, GapGenConfig, hinge_d
from neurips26.harness.distributed import launch_local as _launch
from neurips26.harness.validation import check_scalar


def make_job(encoder: FREncoder, reals, tau_m: float, basis, images, cfg: GapGenConfig = GapGenConfig(),
             size: int = 24, seed: int = 0, epochs: int = 1) -> dict:
    """A picklable description of one stage-0 training (the encoder travels as its state dict)."""
    return {"enc_state": {k: v.clone() for k, v in encoder.state_dict().items()}, "enc_dim": encoder.dim,
            "reals": torch.as_tensor(reals).clone(), "tau_m": float(tau_m), "basis": torch.as_tensor(basis).clone(),
            "images": check_images(images).clone(), "cfg": cfg, "size": size, "seed": seed,
            "epochs": check_scalar(epochs, "epochs", int, min=1)}


def _build(job: dict) -> GapGen:
    enc = FREncoder(job["enc_dim"])
    enc.load_state_dict(job["enc_state"])
    return GapGen(enc, job["reals"], job["tau_m"], job["basis"], job["cfg"], size=job["size"], seed=job["seed"])


def _batches(gg: GapGen, n: int, epochs: int):
    """The global batches (indices, z) every rank draws identically."""
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gg.gen)
        for i in range(0, n, gg.cfg.batch):
            b = perm[i:i + gg.cfg.batch]
            yield b, gg._z(b.numel())


def _check_world(job: dict, world: int) -> int:
    world = check_scalar(world, "world", int, min=1)
    n = job["images"].shape[0]
    if job["cfg"].batch % world or n % job["cfg"].batch % world:
        raise ValueError(f"batch={job['cfg'].batch} and the last batch ({n % job['cfg'].batch} of {n} images) "
                         f"must be divisible by world={world} (equal slices)")
    return world


def train_stage0_sharded(job: dict, world: int) -> dict:
    """One process, ``world`` slices per batch, slice losses averaged: what DDP over ``world`` ranks
    computes. Returns G's parameters (name -> tensor)."""
    world = _check_world(job, world)
    gg = _build(job)
    x = job["images"]
    with torch.no_grad():
        e = gg.f(x)
    gg.G.train()
    for b, z in _batches(gg, x.shape[0], job["epochs"]):
        sl = [(b[r::world], z[r::world]) for r in range(world)]
        fakes = [gg.G(e[bs], zs) for bs, zs in sl]
        outs = gg.D(torch.cat([t for (bs, _), fk in zip(sl, fakes) for t in (x[bs], fk.detach())]))
        k, loss_d = sl[0][0].numel(), 0.0
        for r in range(world):
            o = outs[2 * r * k:(2 * r + 2) * k]
            loss_d = loss_d + hinge_d(o[:k], o[k:]) / world
        gg.opt_d.zero_grad()
        loss_d.backward()
        gg.opt_d.step()
        d_fake = gg.D(torch.cat(fakes))
        loss_g = 0.0
        for r, ((bs, _), fk) in enumerate(zip(sl, fakes)):
            loss_g = loss_g + gg._real_loss(fk, x[bs], e[bs], d_fake[r * k:(r + 1) * k]) / world
        gg.opt_g.zero_grad()
        loss_g.backward()
        gg.opt_g.step()
    return {n: p.detach().clone() for n, p in gg.G.named_parameters()}


def train_stage0_ddp(job: dict) -> dict:
    """Stage 0 on this rank's slices under an initialised process group; G's parameters afterwards."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    _check_world(job, world)
    gg = _build(job)
    G, D = DDP(gg.G), DDP(gg.D)
    x = job["images"]
    with torch.no_grad():
        e = gg.f(x)
    G.train()
    for b, z in _batches(gg, x.shape[0], job["epochs"]):
        bs, zs = b[rank::world], z[rank::world]
        k = bs.numel()
        fake = G(e[bs], zs)
        o = D(torch.cat([x[bs], fake.detach()]))
        loss_d = hinge_d(o[:k], o[k:])
        gg.opt_d.zero_grad()
        loss_d.backward()
        gg.opt_d.step()
        loss_g = gg._real_loss(fake, x[bs], e[bs], D(fake))
        gg.opt_g.zero_grad()
        loss_g.backward()
        gg.opt_g.step()
    return {n: p.detach().clone() for n, p in gg.G.named_parameters()}


def launch_local(job: dict, world: int = 2) -> dict:
    """``train_stage0_ddp(job)`` on ``world`` local gloo processes; rank 0's G parameters."""
    world = _check_world(job, world)
    return _launch(train_stage0_ddp, job, world=world)[0]


__all__ = ["launch_local", "make_job", "train_stage0_ddp", "train_stage0_sharded"]
