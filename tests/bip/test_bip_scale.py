"""Scale-out: GapGen stage 0 and the curriculum stages under DDP (gloo, local processes) equal the
one-process sharded update."""

import pytest
import torch

from neurips26.bip.encoder import FREncoder
from neurips26.bip.gapgen import GapGenConfig
from neurips26.bip.renderer import N_ID, render
from neurips26.bip.scale import launch_local, make_job, train_stage0_sharded


def _toy(g):
    """Images of 20 identities x 4, a fresh encoder, 20 real embeddings and an 8-dim subspace."""
    X = render(torch.randn(20, N_ID, generator=g).repeat_interleave(4, 0), 24, g)
    torch.manual_seed(0)
    enc = FREncoder(32).eval()
    R = torch.nn.functional.normalize(torch.randn(20, 32, generator=g), dim=1)
    P = torch.linalg.qr(torch.randn(32, 8, generator=g))[0]
    return X, enc, R, P


def _job(batch=16):
    g = torch.Generator().manual_seed(0)
    X, enc, R, P = _toy(g)
    return make_job(enc, R, 0.5, P, X, GapGenConfig(batch=batch), seed=3, epochs=1)


@pytest.mark.slow
def test_ddp_two_ranks_equal_the_sharded_update_and_one_rank():
    job = _job()
    ref2, ref1 = train_stage0_sharded(job, 2), train_stage0_sharded(job, 1)
    ddp2, ddp1 = launch_local(job, 2), launch_local(job, 1)
    # the conv biases right before a batch norm have an exactly zero gradient (the norm removes them); Adam
    # turns float noise in it into lr-sized steps, so their values carry no information and are skipped
    pre_bn = {"up.1.bias", "up.5.bias"}
    for n in set(ref2) - pre_bn:
        assert torch.allclose(ddp1[n], ref1[n], atol=1e-5), n
        # 2 ranks: the all-reduce sums in another order than the one-process mean, and Adam magnifies
        # that for near-zero gradients; DDP must still be far closer to the sharded update than a
        # different slicing (1 slice, other batch-norm statistics) is
        assert (ddp2[n] - ref2[n]).norm() < 0.1 * (ref2[n] - ref1[n]).norm(), n


def test_sharded_update_trains_and_checks_world():
    job = _job()
    before = train_stage0_sharded(job | {"epochs": 1}, 2)
    assert all(torch.isfinite(v).all() for v in before.values())
    with pytest.raises(ValueError, match="world"):
        train_stage0_sharded(_job(batch=15), 2)


# ---- the curriculum stages under DDP ---------------------------------------------------------------

PRE_BN = {"up.1.bias", "up.5.bias"}        # zero true gradient (a batch norm follows): float noise only


def _curriculum_job(advance=2.0, stage_epochs=1, n_virtual=32):
    from neurips26.bip.gapgen import GapGen
    from neurips26.bip.scale import make_curriculum_job

    g = torch.Generator().manual_seed(0)
    X, enc, R, P = _toy(g)
    V = torch.nn.functional.normalize(torch.randn(n_virtual, 32, generator=g), dim=1)
    cfg = GapGenConfig(batch=16, stages=2, stage_epochs=stage_epochs, advance=advance)
    gg = GapGen(enc, R, 0.5, P, cfg, seed=3).train_stage0(X, epochs=1)
    return make_curriculum_job(gg, V, 0.5)


def test_curriculum_reference_advances_and_checks_world():
    from neurips26.bip.scale import train_curriculum_sharded

    job = _curriculum_job(advance=2.0, stage_epochs=2)              # never reaches 2x: every epoch runs
    out = train_curriculum_sharded(job, 2)
    assert [(h["stage"], h["epoch"]) for h in out["history"]] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(torch.isfinite(v).all() for v in out["G"].values())
    early = train_curriculum_sharded(job | {"real_level": -1.0}, 2)   # always reached: one epoch a stage
    assert [(h["stage"], h["epoch"]) for h in early["history"]] == [(1, 0), (2, 0)]
    again = train_curriculum_sharded(job, 2)                          # the job is not consumed
    assert all(torch.equal(again["G"][n], out["G"][n]) for n in out["G"])
    with pytest.raises(ValueError, match="world"):
        train_curriculum_sharded(_curriculum_job(n_virtual=33), 2)     # a last batch of 1 virtual
    with pytest.raises(ValueError, match="world"):
        train_curriculum_sharded(job, 3)                               # batch 16 in 3 slices


@pytest.mark.slow
def test_curriculum_ddp_all_reduced_gradient_equals_the_sharded_mean():
    from neurips26.bip.scale import launch_curriculum, train_curriculum_sharded

    job = _curriculum_job()
    probe = job | {"probe": True}
    ref2, ref1 = train_curriculum_sharded(probe, 2), train_curriculum_sharded(probe, 1)
    ddp2 = launch_curriculum(probe, 2)
    for part in ("G", "D"):                      # the first step's all-reduced gradients
        for n in set(ref2[part]) - PRE_BN:
            diff, scale = (ddp2[part][n] - ref2[part][n]).norm(), ref2[part][n].norm()
            assert diff <= 1e-4 * scale + 1e-7, (part, n, float(diff), float(scale))
            if (ref2[part][n] - ref1[part][n]).norm() > 1e-6:          # where slicing matters at all
                assert diff < 0.01 * (ref2[part][n] - ref1[part][n]).norm(), (part, n)
    # whole curriculum: 1 rank == 1 slice; 2 ranks far closer to 2 slices than 2 slices are to 1
    full2, full1 = train_curriculum_sharded(job, 2), train_curriculum_sharded(job, 1)
    d2, d1 = launch_curriculum(job, 2), launch_curriculum(job, 1)
    for n in full2["G"]:
        assert torch.allclose(d1["G"][n], full1["G"][n], atol=1e-6), n
        if n not in PRE_BN:
            assert (d2["G"][n] - full2["G"][n]).norm() < 0.01 * (full2["G"][n] - full1["G"][n]).norm(), n
    assert [(h["stage"], h["epoch"]) for h in d2["history"]] == [(h["stage"], h["epoch"]) for h in full2["history"]]
