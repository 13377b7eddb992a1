"""Scale-out under torch.distributed (2 gloo processes; slow): synchronous DDP keeps phi identical on ranks
with K reducer rounds per outer step (accumulation under no_sync: 1); sync="delta" (local variant) lets phi
differ on ranks and all-reduces Delta once, so theta is identical again after the step."""

import numpy as np
import pytest
import torch

from neurips26.harness.distributed import launch_local
from neurips26.nexus import GradAccumulation, Nexus, SourceSampler, lm_loss, tiny_llama
from neurips26.nexus.data import Source

pytestmark = pytest.mark.slow
K = 3


def _worker(mode):
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = dist.get_rank()
    torch.manual_seed(0)
    model = tiny_llama(20, hidden=16, layers=1, heads=2, mlp=32, ctx=8)
    ddp = DDP(model)
    rounds = [0]

    def hook(state, bucket):
        rounds[0] += 1
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, hook)
    rng = np.random.default_rng(0)
    srcs = [Source(n, rng.integers(0, 20, 3000), rng.integers(0, 20, 300)) for n in ("a", "b", "c")]
    sampler = SourceSampler(srcs, k=K, micro_batch=2, ctx=8, seed=0, rank=rank)
    phis, per_step = [], []

    def loss_fn(b):
        phis.append(float(sum(p.detach().double().sum() for p in model.parameters())))
        return lm_loss(ddp, b)

    if mode == "acc":  # accumulation: no_sync for the first K - 1 micro-batches
        opt = GradAccumulation(list(ddp.parameters()), torch.optim.AdamW(ddp.parameters(), lr=1e-3), ddp=ddp)
    else:
        opt = Nexus(ddp.parameters(), outer=torch.optim.AdamW(ddp.parameters(), lr=1e-3),
                    sync="delta" if mode == "delta" else None)
    for _ in range(2):
        before = rounds[0]
        mbs = sampler.next_step()
        if mode == "delta":
            with ddp.no_sync():
                opt.step(mbs, loss_fn)
        else:
            opt.step(mbs, loss_fn)
        per_step.append(rounds[0] - before)
    theta = float(sum(p.detach().double().sum() for p in model.parameters()))
    return rank, phis, per_step, theta, [m.source for m in mbs]


def _run(mode):
    return launch_local(_worker, mode, world=2, start_method="fork", timeout=120)


def test_synchronous_ddp_keeps_phi_identical_with_k_reductions():
    (_, phi0, n0, th0, src0), (_, phi1, n1, th1, src1) = _run("sync")
    assert src0 == src1                       # source-synchronised sampler
    assert phi0 == pytest.approx(phi1, abs=1e-9, rel=0)  # phi identical on both ranks at every micro-batch
    assert th0 == pytest.approx(th1, abs=1e-9, rel=0)
    assert n0[0] >= K and n0[0] % K == 0      # K reducer rounds (x buckets) per outer step


def test_accumulation_reduces_once_per_step():
    (_, _, n0, th0, _), (_, _, _, th1, _) = _run("acc")
    sync = _run("sync")[0][2]
    assert n0[0] * K == sync[0]
    assert th0 == pytest.approx(th1, abs=1e-9, rel=0)


def test_local_variant_all_reduces_delta_once():
    (_, phi0, n0, th0, _), (_, phi1, _, th1, _) = _run("delta")
    assert n0 == [0, 0]                       # no DDP reducer rounds: the one all-reduce is of Delta
    assert phi0[1] != phi1[1]                 # inner steps saw only local data
    assert th0 == pytest.approx(th1, abs=1e-9, rel=0)  # theta identical after the Delta all-reduce


def _fsdp_worker():
    import copy

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from neurips26.nexus import MicroBatch

    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ref = copy.deepcopy(model)
    fully_shard(model[0])
    fully_shard(model[2])
    fully_shard(model)
    g = torch.Generator().manual_seed(1)
    mbs = [MicroBatch(s, (torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g))) for s in "abc"]
    errs = []
    opt = Nexus(model.parameters(), outer=torch.optim.AdamW(model.parameters(), lr=1e-2), log_cos=False)
    ropt = Nexus(ref.parameters(), outer=torch.optim.AdamW(ref.parameters(), lr=1e-2), log_cos=False)
    for _ in range(3):
        opt.step(mbs, lambda d: ((model(d[0]) - d[1]) ** 2).mean())
        ropt.step(mbs, lambda d: ((ref(d[0]) - d[1]) ** 2).mean())
        full = [p.full_tensor().detach() for p in model.parameters()]
        errs.append(max(float((a - b.detach()).abs().max()) for a, b in zip(full, ref.parameters())))
    local = sum(t.to_local().numel() for t in opt._theta)
    total = sum(p.numel() for p in ref.parameters())
    return rank, errs, type(opt._theta[0]).__name__, local, total


def test_fsdp2_sharded_snapshot_matches_the_unsharded_step():
    res = launch_local(_fsdp_worker, world=2, start_method="fork", timeout=120)
    for rank, errs, kind, local, total in res:
        assert max(errs) < 1e-5                 # fully_shard: same steps as one unsharded process
        assert kind == "DTensor"                # theta is kept sharded: no unsharded copy exists
        assert local < total                    # each rank holds only its shard of the snapshot
    assert sum(r[3] for r in res) == res[0][4]


def test_reducer_rounds_counter_of_the_bench():
    from neurips26.nexus.distributed import reducer_rounds

    assert reducer_rounds("nexus", 3) == 3
    assert reducer_rounds("adamw", 3) == 1
    with pytest.raises(ValueError, match="method"):
        reducer_rounds("sgd", 3)
