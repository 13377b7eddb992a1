"""Bench: Njord forecast step vs the deterministic twin's (target <= 2x), a 10-day ensemble of M
members vs the physics simulator (the anchor; members batched), mesh build K-means vs rectangular,
edges per step and scatter throughput. neural-lam and Ray are run only when importable; otherwise
their rows carry the reason (``neural_lam_status``, ``distributed.ray_available``)."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.harness.bench import BenchRow, compare
from neurips26.harness.run import RunContext
from neurips26.njord.data import build_dataset
from neurips26.njord.mesh import kmeans_mesh, rectangular_mesh
from neurips26.njord.models import DeterministicTwin, Njord
from neurips26.njord.simulator import DataConfig, OceanConfig, ShallowWater, generate

SIZES = {
    "smoke": dict(n=16, dx=60e3, d_h=8, levels=2, r1=6.0, r=4.0, M=2, days=2, rounds=2),
    "quick": dict(n=32, dx=30e3, d_h=32, levels=3, r1=9.0, r=5.0, M=8, days=10, rounds=5),
}


@torch.no_grad()
def count_calls(model: Njord, ds, starts: np.ndarray, leads: int, members: int) -> dict:
    """Forward calls of prior / encoder / decoder during one ensemble rollout (check 8)."""
    for mod in (model.prior, model.encoder, model.decoder):
        mod.calls.clear()
    k, t = starts[:, 0], starts[:, 1]
    f = torch.from_numpy(np.stack([ds.forcing[t + i] for i in range(leads)], 1))
    model.rollout(torch.from_numpy(ds.x[k, t - 2]), torch.from_numpy(ds.x[k, t - 1]), f, members=members)
    return dict(
        steps=leads,
        batch=len(starts),
        members=members,
        prior=len(model.prior.calls),
        encoder=len(model.encoder.calls),
        decoder=len(model.decoder.calls),
        rows=list(model.decoder.calls),
    )


def saved_activation_bytes(model: Njord, ds, batch: int, unroll: int) -> int:
    """Bytes autograd saves for backward in one unrolled ELBO + 2-member CRPS training step (the
    activation memory that dominates a training step's peak), via ``saved_tensors_hooks``."""
    from neurips26.njord.metrics import crps_fair
    from neurips26.njord.training import batch_tensors, windows

    x2, x1, fo, tgt = batch_tensors(ds, windows(ds, ds.train, unroll)[:batch], unroll)
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        a, b, loss = x2, x1, 0.0
        for t in range(unroll):
            pred, kl = model.posterior_step(a, b, fo[:, t], tgt[:, t])
            loss = loss + (pred - tgt[:, t]).pow(2).mean() + kl.mean()
            a, b = b, pred
        loss = loss + crps_fair(model.rollout(x2, x1, fo, members=2), tgt).mean()
    loss.backward()
    model.eval()
    return total


def _activation_memory_row(nj: Njord, ds, sz) -> BenchRow:
    batch, unroll = 4, 4 if sz["days"] >= 4 else 1
    on = saved_activation_bytes(nj.set_checkpointing(True), ds, batch, unroll)
    off = saved_activation_bytes(nj.set_checkpointing(False), ds, batch, unroll)
    return BenchRow(
        "activation memory per training step (checkpointing on vs off)",
        on / 2**20,
        off / 2**20,
        "no activation checkpointing",
        "MiB",
        "lower",
        f"tensors saved for backward in one {unroll}-step ELBO + 2-member CRPS step, batch {batch}, "
        f"d_h={sz['d_h']} (saved_tensors_hooks; a deterministic count, not a timing); gradients equal "
        "(test_activation_checkpointing_gives_equal_gradients)",
    )


# what the neural-lam 0.7.0 wheel declares (read from its METADATA, `pip download --no-deps neural-lam`):
# Graph-EFM is there (neural_lam/models/step_predictors/graph/graph_efm.py), but it pins these
NEURAL_LAM_PINS = ("torch>=2.12,<2.13 (cpu extra)", "torch-geometric==2.3.1", "pytorch-lightning", "mlflow",
                   "wandb", "mllam-data-prep", "weather-model-graphs", "cartopy")


def neural_lam_status() -> tuple[bool, str]:
    """(True, version) if neural-lam and its training stack import here, else (False, the reason)."""
    import importlib.util

    missing = [m for m in ("neural_lam", "pytorch_lightning", "mllam_data_prep") if importlib.util.find_spec(m) is None]
    if not missing:
        from importlib.metadata import version

        return True, version("neural-lam")
    return False, (
        f"neural-lam not run: {', '.join(missing)} not importable here (torch {torch.__version__}); the 0.7.0 "
        f"wheel (has GraphEFM) requires {', '.join(NEURAL_LAM_PINS)} -- installing it would replace this "
        "torch, and its datastore reads mllam-data-prep zarr described by a YAML config, not ours"
    )


def bench(ctx: RunContext) -> list[BenchRow]:
    sz = SIZES["smoke" if ctx.scale == "smoke" else "quick"]
    torch.manual_seed(0)
    ocean = OceanConfig(n=sz["n"], dx=sz["dx"])
    raw = generate(DataConfig(ocean, spinup_days=2, days=12))
    ds = build_dataset(raw)
    sizes = kmeans_mesh(ds.mask, sz["r1"], sz["r"], sz["levels"]).sizes
    rows = [
        compare(
            "mesh build (K-means vs rectangular)",
            lambda: kmeans_mesh(ds.mask, sz["r1"], sz["r"], sz["levels"]),
            lambda: rectangular_mesh(ds.mask, sizes),
            "rectangular lattice mesh at the same level sizes",
            unit="ms",
            rounds=2,
        )
    ]
    mesh = kmeans_mesh(ds.mask, sz["r1"], sz["r"], sz["levels"])
    args = (mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std)
    nj, tw = Njord(*args, d_h=sz["d_h"]).eval(), DeterministicTwin(*args, d_h=sz["d_h"]).eval()
    M, days = sz["M"], sz["days"]
    t = np.arange(2, 2 + 1)
    xp2, xp1 = torch.from_numpy(ds.x[0, t - 2]), torch.from_numpy(ds.x[0, t - 1])
    f1 = torch.from_numpy(ds.forcing[t][:, None])
    fd = torch.from_numpy(np.repeat(ds.forcing[t][:, None], days, axis=1))
    a2, a1, f = xp2.repeat(M, 1, 1), xp1.repeat(M, 1, 1), f1[:, 0].repeat(M, 1, 1)
    shape = f"M={M} members batched, d_h={sz['d_h']}, mesh {mesh.sizes}, {mesh.n_edges()} edges/member-step"
    with torch.no_grad():
        rows.append(
            compare(
                "forecast step, M members (Njord vs twin)",
                lambda: nj.predict_step(a2, a1, f),
                lambda: tw.predict_step(a2, a1, f),
                "deterministic twin (Graph-FM)",
                unit="ms",
                rounds=sz["rounds"],
                note=shape + "; target Njord <= 2x twin (ratio >= 0.5)",
            )
        )
        sim = ShallowWater(ocean, ds.mask)
        state = {
            k: np.repeat(raw["states"][0, 1][i][None], M, 0)
            for i, k in enumerate(("eta", "u", "v", "T", "xi"))
        }
        rng = np.random.default_rng(0)
        rows.append(
            compare(
                f"{days}-day ensemble of M={M} (Njord vs simulator)",
                lambda: nj.rollout(xp2, xp1, fd, members=M),
                lambda: sim.run_days(dict(state), 0.0, days, rng, ocean.namp),
                "physics simulator (oracle ensemble, members batched)",
                unit="ms",
                rounds=2,
                note=f"{sim.cfg.steps_per_day} RK3 steps/day; target simulator/Njord >= 10x",
            )
        )
    e = mesh.n_edges()
    bytes_per_step = e * M * sz["d_h"] * 4 * 2 * 6  # read+write, ~6 edge passes per edge set (rough)
    src = torch.ones(bytes_per_step // 8)  # a copy of src moves bytes_per_step (read + write)
    dst = torch.empty_like(src)
    with torch.no_grad():
        rows.append(
            compare(
                "scatter/gather throughput (Njord step)",
                lambda: nj.predict_step(a2, a1, f),
                lambda: dst.copy_(src),
                "memory-copy probe (torch copy_ of the same byte count)",
                unit="GB/s",
                work=bytes_per_step / 1e9,
                rounds=sz["rounds"],
                note="bytes are a rough model (E x M x d_h x 4 B x 2 x 6); the anchor is this machine's "
                "copy bandwidth at that working set, a stand-in for its peak",
            )
        )
    rows.append(_activation_memory_row(nj, ds, sz))
    ok, why = neural_lam_status()
    rows.append(
        BenchRow(
            "neural-lam Graph-EFM on the same graph",
            float(e),
            None,
            "neural-lam 0.7.0",
            "edges",
            "lower",
            ("neural-lam importable but no datastore adapter for our zarr yet" if ok else why)
            + "; ours = message-passing edges per member-step",
        )
    )
    rows.append(_ray_row(nj, ds, M))
    return rows


def _ray_row(model, ds, M: int) -> BenchRow:
    """A 10-member-day ensemble with members over 2 Ray tasks vs in one process, when Ray is here."""
    import time

    from neurips26.njord.distributed import ray_available, ray_member_ensemble
    from neurips26.njord.evaluation import model_ensemble

    ok, why = ray_available()
    name = f"ensemble of M={M} over 2 Ray tasks (vs one process)"
    if not ok:
        return BenchRow(name, 0.0, None, "one process", "ms", "lower", f"not run (0 = no value): {why}")
    starts = np.array([[0, 2]])
    t = time.perf_counter()
    model_ensemble(model, ds, starts, 5, M)
    one = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    ray_member_ensemble(model, ds, starts, 5, M, tasks=2)
    return BenchRow(name, (time.perf_counter() - t) * 1e3, one, "one process", "ms", "lower",
                    f"Ray {why}; one round, includes task start-up")
