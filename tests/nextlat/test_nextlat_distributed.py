"""DDP and FSDP2 data-parallel training: 2 gloo ranks reproduce the 1-process step (spec "Scale-out")."""

import pytest
import torch

from neurips26.harness.distributed import launch_local
from neurips26.nextlat.distributed import decoder_layers, rank_rows, train_data_parallel
from neurips26.nextlat.model import NextLatForCausalLM, tiny_llama
from neurips26.nextlat.training import train

V, B, T, STEPS = 20, 4, 16, 3


def _model(lam: float, d: int) -> NextLatForCausalLM:
    torch.manual_seed(0)
    base = tiny_llama(V, hidden=32, layers=2, heads=2, ctx=T, dtype=torch.float64)
    return NextLatForCausalLM(base, d=d, lambda_h=lam, lambda_kl=lam, proj_factor=2.0, eos_token_id=V - 1)


def _batches():
    g = torch.Generator().manual_seed(1)
    data = [torch.randint(0, V - 1, (B, T), generator=g) for _ in range(STEPS)]  # no EOS: equal counts per rank
    return lambda step: data[step]


def _rank(strategy: str, lam: float, d: int):
    import torch.distributed as dist

    m = _model(lam, d)
    seen = []
    batches = _batches()

    def loss_fn(mm, ids):
        seen.append(ids.clone())
        return mm(ids).loss

    losses = train_data_parallel(m, batches, STEPS, lr=1e-2, clip=0.5, loss_fn=loss_fn, strategy=strategy)
    return dist.get_rank(), losses, {k: v.detach().clone() for k, v in m.state_dict().items()}, seen


def _reference(lam: float, d: int):
    m = _model(lam, d)
    losses = train(m, _batches(), STEPS, lr=1e-2, clip=0.5)
    return losses, m.state_dict()


SLOW = pytest.mark.slow


@pytest.mark.parametrize("strategy,lam,d", [("ddp", 1.0, 2), pytest.param("ddp", 0.0, 1, marks=SLOW),
                                            pytest.param("fsdp2", 1.0, 2, marks=SLOW),
                                            pytest.param("fsdp2", 0.0, 1, marks=SLOW)])
def test_two_ranks_reproduce_the_one_process_steps(strategy, lam, d):
    ref_losses, ref_state = _reference(lam, d)
    res = launch_local(_rank, strategy, lam, d, world=2, start_method="fork", timeout=240)
    full = _batches()
    for rank, losses, state, seen in res:
        assert losses == pytest.approx(ref_losses, abs=1e-10)        # global loss = mean of the rank means
        for k, v in ref_state.items():
            assert torch.allclose(state[k], v, atol=1e-10, rtol=0), (strategy, rank, k)
        for step, ids in enumerate(seen):                             # each rank trained on its own rows
            assert torch.equal(ids, full(step)[rank::2])
    moved = max(float((ref_state[k] - _model(lam, d).state_dict()[k]).abs().max()) for k in ref_state)
    assert moved > 1e-3                                               # the steps did change the weights


def _rank_bf16(strategy: str):
    torch.manual_seed(0)
    base = tiny_llama(V, hidden=32, layers=2, heads=2, ctx=T)
    m = NextLatForCausalLM(base, d=2, lambda_h=1.0, lambda_kl=1.0, proj_factor=2.0, eos_token_id=V - 1)
    losses = train_data_parallel(m, _batches(), STEPS, lr=1e-2, clip=0.5, strategy=strategy, precision="bf16")
    return losses, {k: v.detach().clone() for k, v in m.state_dict().items()}


@SLOW
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_bf16_mixed_precision_keeps_fp32_masters_and_tracks_the_fp32_steps(strategy):
    torch.manual_seed(0)
    start = NextLatForCausalLM(tiny_llama(V, hidden=32, layers=2, heads=2, ctx=T), d=2, lambda_h=1.0,
                               lambda_kl=1.0, proj_factor=2.0, eos_token_id=V - 1)
    ref = NextLatForCausalLM(tiny_llama(V, hidden=32, layers=2, heads=2, ctx=T), d=2, lambda_h=1.0,
                             lambda_kl=1.0, proj_factor=2.0, eos_token_id=V - 1)
    ref.load_state_dict(start.state_dict())
    ref_losses = train(ref, _batches(), STEPS, lr=1e-2, clip=0.5)
    for losses, state in launch_local(_rank_bf16, strategy, world=2, start_method="fork", timeout=240):
        assert all(v.dtype == torch.float32 for v in state.values())          # masters stay float32
        assert losses == pytest.approx(ref_losses, rel=0.02) and losses != pytest.approx(ref_losses, abs=1e-6)
        moved = sum(float((ref.state_dict()[k] - start.state_dict()[k]).norm()) for k in state)
        off = sum(float((state[k] - ref.state_dict()[k]).norm()) for k in state)
        assert 0 < off < 0.1 * moved, (off, moved)                          # bf16 rounding, not a different run


def _rank_fit(parallel):
    from neurips26.nextlat.experiment import _fit

    m = _model(1.0, 2)
    losses = _fit(m, _batches(), STEPS, 1e-2, clip=0.5, parallel=parallel)
    return losses, {k: v.detach().clone() for k, v in m.state_dict().items()}


@SLOW
def test_the_runs_trainer_forwards_strategy_and_precision():
    """``experiment._fit`` (every task's trainer) under 2 ranks is ``train_data_parallel`` with the config's
    strategy and precision: fp32 DDP reproduces the 1-process float64 steps exactly; FSDP2 bf16 (parameters
    gathered as bf16) changes them, so a dropped precision would be seen."""
    a = launch_local(_rank_fit, {"strategy": "ddp", "precision": "fp32"}, world=2, start_method="fork", timeout=240)
    ref_losses, ref_state = _reference(1.0, 2)
    for losses, state in a:
        assert losses == pytest.approx(ref_losses, abs=1e-10)
        assert all(torch.allclose(state[k], v, atol=1e-10, rtol=0) for k, v in ref_state.items())
    b = launch_local(_rank_fit, {"strategy": "fsdp2", "precision": "bf16"}, world=2, start_method="fork",
                     timeout=240)
    for losses, _ in b:
        assert losses == pytest.approx(ref_losses, rel=0.05) and losses != pytest.approx(ref_losses, abs=1e-6)


def test_the_runs_trainer_passes_strategy_and_precision_through(monkeypatch):
    """``_fit`` hands the config's strategy and precision to ``train_data_parallel`` unchanged when a process
    group with more than one rank is up, and trains in one process otherwise."""
    import torch.distributed as dist

    from neurips26.nextlat import experiment

    seen = []
    monkeypatch.setattr(experiment, "train_data_parallel", lambda *a, **kw: seen.append(kw) or [0.0])
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    experiment._fit(_model(1.0, 1), _batches(), 1, 1e-2, parallel={"strategy": "fsdp2", "precision": "bf16"})
    assert seen[0]["strategy"] == "fsdp2" and seen[0]["precision"] == "bf16"
    monkeypatch.setattr(dist, "get_world_size", lambda: 1)
    assert len(experiment._fit(_model(1.0, 1), _batches(), 1, 1e-2, parallel={"strategy": "ddp"})) == 1
    assert len(seen) == 1


def test_rank_rows_and_layers_and_errors():
    ids = torch.arange(12).view(6, 2)
    assert torch.equal(rank_rows(ids, 1, 3), ids[[1, 4]])
    with pytest.raises(ValueError, match="split evenly"):
        rank_rows(ids, 0, 4)
    assert len(decoder_layers(_model(1.0, 1))) == 2
    with pytest.raises(RuntimeError, match="process group"):
        train_data_parallel(_model(1.0, 1), _batches(), 1)
    with pytest.raises(ValueError, match="precision"):
        train_data_parallel(_model(1.0, 1), _batches(), 1, precision="fp16")
