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
The curriculum stages (``GapGen.train_curriculum``) under DDP: ``make_curriculum_job(gg, virtuals,
real_level)`` snapshots a stage-0-trained ``GapGen`` (G, D, both Adam states, the generator state);
``train_curriculum_ddp`` (per rank) and ``train_curriculum_sharded`` (one process, the reference) then
run stages s = 1..S towards ``slerp(c_near(v), v, s/S)``. Every rank draws the same permutation, jitter
xi, real batch and noise for each global batch and takes slice ``[rank::world]``; per step::

    L_D = hinge_d(D([x_r; x_r]), D([G(e_r, z_r); G(g, z_g)]))      (one critic forward on all four)
    L_G = L_s(G(g, z_g)) + L_0(G(e_r, z_r))                        (L_s, L_0 as in gapgen.py)

with one G forward on ``[g; e_r]`` per slice (so batch norm sees gap and real rows together: a stated
difference from ``GapGen.train_curriculum``, which runs them through G separately) and the critic
scores for L_G from one more critic forward (its gradients are discarded at the next critic step). The advance rule reads rank
0's identity consistency (broadcast), so every rank advances together. With ``probe=True`` the first
step's all-reduced gradients of G and D are returned instead (the test compares them with the
one-process mean over slices). The allocator's scale-out is ``sharded.py``.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from neurips26.bip.encoder import FREncoder, check_images
from neurips26.bip.gallery import as_unit
from neurips26.bip.gapgen import GapGen, GapGenConfig, hinge_d, identity_consistency
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


def _check_world(job: dict, world: int, key: str = "images") -> int:
    """Every batch of ``job[key]`` (the last one too) splits into ``world`` equal slices."""
    world = check_scalar(world, "world", int, min=1)
    n, b = job[key].shape[0], job["cfg"].batch
    if b % world or n % b % world:
        raise ValueError(f"batch={b} and the last batch ({n % b} of {n} {key}) must be divisible by "
                         f"world={world} (equal slices)")
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


# ---- curriculum stages ---------------------------------------------------------------------------

def make_curriculum_job(gg: GapGen, virtuals, real_level: float, lambda_nc: float | None = None,
                        size: int | None = None) -> dict:
    """A picklable snapshot of a stage-0-trained ``gg`` for the curriculum stages under DDP."""
    if not hasattr(gg, "_x"):
        raise RuntimeError("train_stage0 must run before make_curriculum_job")
    V = as_unit(virtuals, "virtuals", dim=gg.R.shape[1])
    lam = gg.cfg.lambda_nc if lambda_nc is None else check_scalar(lambda_nc, "lambda_nc", float, min=0)

    def sd(m):
        return {k: v.clone() for k, v in m.state_dict().items()}

    return {"enc_state": sd(gg.f), "enc_dim": gg.f.dim, "reals": gg.R.clone(), "tau_m": gg.tau_m,
            "basis": gg.P.clone(), "cfg": gg.cfg, "size": size or gg.G.size, "seed": 0,
            "G": sd(gg.G), "D": sd(gg.D), "opt_g": gg.opt_g.state_dict(), "opt_d": gg.opt_d.state_dict(),
            "gen": gg.gen.get_state(), "images": gg._x.clone(), "emb": gg._e.clone(), "virtuals": V,
            "real_level": check_scalar(real_level, "real_level", float), "lambda_nc": lam, "probe": False}


def _build_curriculum(job: dict) -> GapGen:
    gg = _build(job)
    gg.G.load_state_dict(job["G"])
    gg.D.load_state_dict(job["D"])
    gg.opt_g.load_state_dict(copy.deepcopy(job["opt_g"]))     # Adam would update the job's tensors in place
    gg.opt_d.load_state_dict(copy.deepcopy(job["opt_d"]))
    gg.gen.set_state(job["gen"])
    gg._x, gg._e = job["images"], job["emb"]
    return gg



def _run_curriculum(job: dict, rank: int, world: int, G, D, gg: GapGen, sync) -> dict:
    """The curriculum loop shared by the DDP path (``world`` ranks, this one ``rank``) and, with
    ``world`` slices on one rank, the reference (``G`` / ``D`` then plain modules, ``sync`` None)."""
    x, e, lam = gg._x, gg._e, job["lambda_nc"]
    slices = [rank] if sync is not None else list(range(world))
    history, steps = [], gg.curriculum_batches(job["virtuals"])
    try:   # close() restores the learning rate on a raise and on the probe's early return
        out = next(steps)
        while True:
            s, ep, g, rb, zg, zr, target = out
            if target is not None:                                      # end of an epoch
                gg.G.eval()
                ic = float(identity_consistency(gg, target, k=1).mean())
                if sync is not None:
                    ic = sync(ic)
                history.append({"stage": s, "alpha": s / gg.cfg.stages, "epoch": ep, "consistency": ic})
                try:
                    out = steps.send(ic >= gg.cfg.advance * job["real_level"])
                except StopIteration:
                    break
                continue
            G.train()
            parts = [(g[r::world], rb[r::world], zg[r::world], zr[r::world]) for r in slices]
            fakes = [G(torch.cat([gs, e[rs]]), torch.cat([zgs, zrs])) for gs, rs, zgs, zrs in parts]
            k = parts[0][0].shape[0]
            reals_in = [t for (_, rs, _, _), fk in zip(parts, fakes) for t in (x[rs], x[rs], fk[k:].detach(),
                                                                              fk[:k].detach())]
            o = D(torch.cat(reals_in))
            loss_d = 0.0
            for i in range(len(parts)):
                oi = o[4 * i * k:(4 * i + 4) * k]
                loss_d = loss_d + hinge_d(oi[:2 * k], oi[2 * k:]) / len(parts)
            gg.opt_d.zero_grad()
            loss_d.backward()
            if job["probe"]:
                d_grads = {n: p.grad.clone() for n, p in gg.D.named_parameters()}
            gg.opt_d.step()
            d_fake = D(torch.cat(fakes))                                # the critic's grads from L_G are dropped
            loss_g = 0.0
            for i, ((gs, rs, _, _), fk) in enumerate(zip(parts, fakes)):
                dk = d_fake[2 * i * k:(2 * i + 2) * k]
                loss_g = loss_g + (gg._gap_loss(fk[:k], gs, lam, dk[:k])
                                   + gg._real_loss(fk[k:], x[rs], e[rs], dk[k:])) / len(parts)
            gg.opt_g.zero_grad()
            loss_g.backward()
            if job["probe"]:
                return {"G": {n: p.grad.clone() for n, p in gg.G.named_parameters()}, "D": d_grads}
            gg.opt_g.step()
            out = next(steps)
        return {"G": {n: p.detach().clone() for n, p in gg.G.named_parameters()}, "history": history}
    finally:
        steps.close()


def train_curriculum_sharded(job: dict, world: int) -> dict:
    """One process, ``world`` slices per global batch, slice losses averaged (the DDP reference).
    Returns {"G": G's parameters, "history": per-epoch consistency} (or the probe's gradients)."""
    world = _check_world(job, world, "virtuals")
    gg = _build_curriculum(job)
    return _run_curriculum(job, 0, world, gg.G, gg.D, gg, None)


def train_curriculum_ddp(job: dict) -> dict:
    """The curriculum stages on this rank's slices under an initialised process group."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    _check_world(job, world, "virtuals")
    gg = _build_curriculum(job)

    def sync(ic: float) -> float:                                  # rank 0's consistency everywhere
        box = [ic]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    return _run_curriculum(job, rank, world, DDP(gg.G), DDP(gg.D), gg, sync)


def launch_curriculum(job: dict, world: int = 2) -> dict:
    """``train_curriculum_ddp(job)`` on ``world`` local gloo processes; rank 0's result."""
    world = _check_world(job, world, "virtuals")
    return _launch(train_curriculum_ddp, job, world=world)[0]


def launch_local(job: dict, world: int = 2) -> dict:
    """``train_stage0_ddp(job)`` on ``world`` local gloo processes; rank 0's G parameters."""
    world = _check_world(job, world)
    return _launch(train_stage0_ddp, job, world=world)[0]


__all__ = ["launch_curriculum", "launch_local", "make_curriculum_job", "make_job", "train_curriculum_ddp",
           "train_curriculum_sharded", "train_stage0_ddp", "train_stage0_sharded"]
