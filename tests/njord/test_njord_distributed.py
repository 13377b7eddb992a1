"""Scale-out: DDP over forecast start times == one process with the same global batch; member- and
start-sharded ensemble scores == the unsharded ``evaluation.scores``; shards cover without duplicates."""

import dataclasses

import numpy as np
import pytest
import torch

from neurips26.harness.distributed import launch_local
from neurips26.njord.distributed import (
    evaluate_sharded,
    member_sharded_scores,
    ray_available,
    shard,
    start_sharded_scores,
)
from neurips26.njord import evaluation as ev
from neurips26.njord.evaluation import model_ensemble, scores, truth
from neurips26.njord.models import DeterministicTwin, Njord
from neurips26.njord.training import TrainConfig, train

KEYS = ("rmse_lead", "crps_lead", "spread_lead", "ssr_lead", "rmse", "crps", "spread", "ssr")


@pytest.fixture(scope="module")
def ds(small_ds):
    return dataclasses.replace(small_ds[1], train=range(0, 12), val=range(12, 16), test=range(16, 20))


def _model(cls, ds, mesh):
    torch.manual_seed(0)
    return cls(mesh, 4, 3, ds.static, ds.norm.diff_mean, ds.norm.diff_std, d_h=8)


def test_shard_covers_once():
    for n in range(8):
        for world in range(1, 5):
            got = np.concatenate([np.arange(n)[shard(n, r, world)] for r in range(world)])
            assert got.tolist() == list(range(n))
    with pytest.raises(ValueError, match="rank"):
        shard(4, 2, 2)


def _rank_scores(ens, y):
    import torch.distributed as dist

    r, w = dist.get_rank(), dist.get_world_size()
    return (member_sharded_scores(ens[shard(len(ens), r, w)], y, len(ens)),
            start_sharded_scores(ens[:, shard(y.shape[0], r, w)], y[shard(y.shape[0], r, w)]))


def test_sharded_scores_equal_unsharded():
    """5 members over 2 ranks (3 + 2) and 3 starts over 2 ranks (2 + 1): every rank's all-reduced scores
    equal the single-process ``scores`` of the whole ensemble."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((3, 2, 7, 2))
    ens = y[None] + 0.7 * rng.standard_normal((5, 3, 2, 7, 2)) + 0.2
    ref = scores(ens, y)
    out = launch_local(_rank_scores, ens, y, world=2, start_method="fork", timeout=120)
    for by_member, by_start in out:
        for k in KEYS:
            np.testing.assert_allclose(by_member[k], ref[k], rtol=1e-10, err_msg=k)
            np.testing.assert_allclose(by_start[k], ref[k], rtol=1e-10, err_msg=k)
    # one process (no group) is a world of one
    one = member_sharded_scores(ens, y, 5)
    for k in KEYS:
        np.testing.assert_allclose(one[k], ref[k], rtol=1e-10)
    with pytest.raises(ValueError, match="members"):
        member_sharded_scores(ens[:3], y, 5)


def _rank_train(cls, ds, mesh, cfg):
    m = _model(cls, ds, mesh)
    h = train(m, ds, cfg, seed=3, distributed=True)
    return {k: v.detach().clone() for k, v in m.state_dict().items()}, h["loss"]


def test_ddp_training_equals_one_process(ds, small_mesh):
    """The twin (no sampling) trained by 2 DDP ranks on halves of each global batch of 4 start times ends
    at the parameters of a 1-process run on the whole batches: the averaged gradient is the full-batch
    gradient, Adam/clipping then act identically (float32 summation order only)."""
    cfg = TrainConfig(steps_1=3, steps_2=2, unroll=2, batch=4, lr=1e-2)
    ref = _model(DeterministicTwin, ds, small_mesh)
    h = train(ref, ds, cfg, seed=3)
    out = launch_local(_rank_train, DeterministicTwin, ds, small_mesh, cfg, world=2, start_method="fork",
                       timeout=300)
    moved = max(float((ref.state_dict()[k] - v).abs().max())
                for k, v in _model(DeterministicTwin, ds, small_mesh).state_dict().items())
    assert moved > 1e-3  # training changed the weights, so the equality below is informative
    for state, loss in out:
        for k, v in ref.state_dict().items():
            torch.testing.assert_close(state[k], v, rtol=1e-4, atol=1e-5, msg=k)
        np.testing.assert_allclose(loss, h["loss"], rtol=1e-4)


def test_ddp_njord_ranks_stay_identical(ds, small_mesh):
    """Njord under DDP (independent latent noise per rank): both ranks hold the same weights after
    training and log the same rank-mean loss."""
    cfg = TrainConfig(steps_1=2, steps_2=2, unroll=2, batch=2)
    (s0, l0), (s1, l1) = launch_local(_rank_train, Njord, ds, small_mesh, cfg, world=2, start_method="fork",
                                      timeout=300)
    for k in s0:
        torch.testing.assert_close(s0[k], s1[k], rtol=0, atol=0, msg=k)
    assert l0 == l1 and np.isfinite(l0).all()
    with pytest.raises(RuntimeError, match="process group"):
        train(_model(Njord, ds, small_mesh), ds, cfg, distributed=True)


def _rank_eval(model, ds, starts, by):
    return evaluate_sharded(model, ds, starts, 2, 3 if by == "members" else 1, shard_by=by, seed=5)


def test_evaluate_sharded_twin_equals_unsharded(ds, small_mesh):
    """Start-sharded evaluation of the (deterministic) twin over 2 ranks == the 1-process scores."""
    m = _model(DeterministicTwin, ds, small_mesh).eval()
    starts = ev.test_starts(ds, 2)
    ref = scores(model_ensemble(m, ds, starts, 2, 1), truth(ds, starts, 2))
    out = launch_local(_rank_eval, m, ds, starts, "starts", world=2, start_method="fork", timeout=120)
    for o in out:
        for k in ("rmse_lead", "crps_lead", "rmse", "crps"):
            np.testing.assert_allclose(o[k], ref[k], rtol=1e-6, err_msg=k)
    nj = _model(Njord, ds, small_mesh).eval()
    a, b = launch_local(_rank_eval, nj, ds, starts, "members", world=2, start_method="fork", timeout=120)
    assert a == b and a["members"] == 3 and a["spread"] > 0


def test_ray_reason():
    ok, why = ray_available()
    assert isinstance(why, str) and why
    if not ok:
        assert "ray" in why


def test_neural_lam_reason():
    import importlib.util

    from neurips26.njord.bench import neural_lam_status

    ok, why = neural_lam_status()
    if importlib.util.find_spec("neural_lam") is None:
        assert not ok and "neural_lam" in why and "torch" in why


def test_ray_member_ensemble_matches_per_shard_runs(ds, small_mesh):
    """Members over 2 Ray tasks == the two shards run in this process with the tasks' seeds, gathered."""
    ray = pytest.importorskip("ray")
    from neurips26.njord.distributed import ray_member_ensemble

    m = _model(Njord, ds, small_mesh).eval()
    starts = ev.test_starts(ds, 2)[:2]
    try:
        got = ray_member_ensemble(m, ds, starts, 2, 5, tasks=2, seed=7)
    finally:
        ray.shutdown()
    want = np.concatenate([model_ensemble(m, ds, starts, 2, 3, seed=7), model_ensemble(m, ds, starts, 2, 2, seed=8)])
    np.testing.assert_allclose(got, want, rtol=1e-6)
