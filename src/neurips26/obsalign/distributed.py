"""Scale-out with ``torch.distributed``: one rank per source (spec "Scale-out").

Each rank holds one source's data and model and runs the same round as ``federation.run_federation``:

1. local epochs with the latest guidance (none in warm-up), then the source's sketch;
2. ``all_gather_object`` of the sketches (small: ``|O_s| C (d + 2) + |O_s|(|O_s| - 1) C`` floats);
3. every rank pools the sketches and computes omega, its own guidance and the consolidation weights --
   the same deterministic numpy code on the same inputs, so every rank gets the same values;
4. a weighted ``all_reduce`` (SUM) per parameter group: ``sum_s a_s(m) theta_s`` for the encoder of
   modality ``m``; for the classifier, the shared-row average and the count-weighted copy for sources that
   never saw a class, each rank then keeping its own unshared rows (``consolidation.consolidate``).

The only data a rank sends are its sketch and its weighted parameters. Launch with ``spawn_sources``
(``torch.multiprocessing``, gloo on CPU) or under ``torchrun`` by calling ``run_rank`` in each process
after ``init_process_group``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from neurips26.harness.distributed import launch_local
from neurips26.harness.validation import check_choice, check_scalar
from neurips26.obsalign.federation import (METHODS, FedConfig, Method, modality_counts, server_step,
                                           source_sketch, train_epochs)
from neurips26.obsalign.model import ObsModel
from neurips26.obsalign.obsbench import ObsBench, validate_split
from neurips26.obsalign.observability import ObservabilityTracker


@dataclass
class RankResult:
    rank: int
    omega: np.ndarray                 # (K, K, C) after the last round, identical on every rank
    omega_history: list[np.ndarray]
    state: dict[str, torch.Tensor]    # this source's model after the last consolidation


@torch.no_grad()
def _all_reduce_consolidate(model: ObsModel, rank: int, w) -> None:
    """This rank's share of ``consolidation.consolidate``: weighted sums over ranks, then its own rows."""
    state = model.state_dict()
    new = {}
    for key, val in state.items():
        if key.startswith("enc."):
            m = int(key.split(".")[1])
            t = val * float(w.enc[rank, m])                          # a_s(m) theta_s
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            new[key] = t
    W = state["cls"]
    wr = torch.as_tensor(w.rows[:, :], dtype=W.dtype)                 # (S, C) shared-row weights
    has = torch.as_tensor(w.has_row, dtype=W.dtype)
    cnt = has / has.sum(dim=0).clamp(min=1)                           # count weights for the copies
    shared_avg = wr[rank][:, None] * W
    copy_avg = cnt[rank][:, None] * W
    dist.all_reduce(shared_avg, op=dist.ReduceOp.SUM)
    dist.all_reduce(copy_avg, op=dist.ReduceOp.SUM)
    shared = torch.as_tensor(w.shared)
    keep = ~shared & torch.as_tensor(w.has_row[rank])
    new["cls"] = torch.where(shared[:, None], shared_avg, torch.where(keep[:, None], W, copy_avg))
    model.load_state_dict(new)


def run_rank(bench: ObsBench, method: Method | str, cfg: FedConfig = FedConfig(), seed: int = 0) -> RankResult:
    """The round loop for the source ``dist.get_rank()`` (the process group must be initialised, one rank
    per source of ``bench``)."""
    if not dist.is_initialized():
        raise RuntimeError("run_rank needs an initialised process group (dist.init_process_group)")
    method = METHODS[check_choice(method, "method", tuple(METHODS))] if isinstance(method, str) else method
    seed = check_scalar(seed, "seed", int, min=0)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != len(bench.sources):
        raise ValueError(f"world size {world} != number of sources {len(bench.sources)}: one rank per source")
    if method.consolidation == "none" or method.prox_mu > 0:
        raise ValueError("run_rank covers the consolidating methods without FedProx")
    C = bench.n_classes
    src = bench.sources[rank]
    validate_split(src.train, bench.dims, C, f"sources[{rank}].train")
    torch.manual_seed(seed)
    model = ObsModel(bench.dims, C, cfg.d, regime=cfg.regime)        # same init on every rank
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed * 1000 + rank)          # as run_federation's source ``rank``
    tracker = ObservabilityTracker(method.omega, cfg.beta)
    mod_counts = np.stack([modality_counts(s.train, s.spec.modalities) for s in bench.sources])  # public sizes
    sizes = np.array([len(s.train) for s in bench.sources], float)
    guid, hist, omega = None, [], None
    for r in range(1, cfg.rounds + 1):
        g = guid if r > cfg.warmup else None
        train_epochs(model, opt, src.train, src.spec.modalities, g, cfg, gen, method.prox_mu)
        mine = source_sketch(model, src.train, src.spec.modalities, guid, cfg)
        sketches: list = [None] * world
        dist.all_gather_object(sketches, mine)                       # the only upload besides parameters
        _, omega, guids, w = server_step(method, cfg, tracker, sketches, mod_counts, sizes, C)
        hist.append(omega.copy())
        guid = guids[rank]
        _all_reduce_consolidate(model, rank, w)
    return RankResult(rank, omega, hist, {k: v.clone() for k, v in model.state_dict().items()})


def _rank_result(bench: ObsBench, method, cfg: FedConfig, seed: int) -> dict:
    res = run_rank(bench, method, cfg, seed)
    return {"omega": res.omega, "hist": res.omega_history, "state": res.state}


def spawn_sources(bench: ObsBench, method: Method | str = "obsalign", cfg: FedConfig = FedConfig(),
                  seed: int = 0) -> list[RankResult]:
    """Run the federation with one process per source (gloo, CPU) and collect every rank's result."""
    out = launch_local(_rank_result, bench, method, cfg, seed, world=len(bench.sources))
    return [RankResult(r, d["omega"], d["hist"], d["state"]) for r, d in enumerate(out)]
