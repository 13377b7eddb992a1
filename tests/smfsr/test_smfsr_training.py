"""Training loops: EMA arithmetic, losses go down, time-matched stopping, SplitMeanFlow loss parts."""

import torch

from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.training import (EMA, PoolLike, splitmeanflow_loss, train_meanflow, train_splitmeanflow,
                                      train_teacher)


def _pool(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    lr = torch.rand(n, 1, 4, 4, generator=g)
    hr = torch.nn.functional.interpolate(lr, scale_factor=4, mode="nearest")  # a learnable relation
    return PoolLike(hr, lr)


def test_ema_is_the_decayed_average():
    m = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(1.0)
    ema = EMA(m, 0.9)
    with torch.no_grad():
        m.weight.fill_(3.0)
    ema.update(m)
    assert torch.allclose(ema.model.weight, torch.full((1, 2), 0.9 * 1.0 + 0.1 * 3.0))
    assert not any(p.requires_grad for p in ema.model.parameters())


def test_ema_warmup_schedule():
    m = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(0.0)
    ema = EMA(m, 0.999, warmup=True)
    assert ema.current_decay() == 2 / 11  # d_1 = (1 + 1) / (10 + 1)
    with torch.no_grad():
        m.weight.fill_(1.0)
    ema.update(m)
    assert torch.allclose(ema.model.weight, torch.full((1, 1), 9 / 11))
    for _ in range(20000):
        ema.updates += 1
    assert ema.current_decay() == 0.999  # capped at the decay
    assert EMA(m, 0.999).current_decay() == 0.999  # no warm-up: the plain decay from the first update


def test_teacher_and_student_losses_go_down():
    torch.manual_seed(0)
    pool = _pool()
    teacher = build_backbone("mlp")
    log = train_teacher(teacher, pool, 60, 32)
    assert sum(log.losses[-10:]) < sum(log.losses[:10])
    ema, slog = train_splitmeanflow(make_student(teacher), teacher, pool, 5, 32, ema_decay=0.5)
    assert slog.steps == 5 and all(torch.isfinite(torch.tensor(slog.losses)))


def test_time_matched_meanflow_stops_by_wall_clock():
    torch.manual_seed(0)
    pool = _pool(64)
    teacher = build_backbone("mlp")
    _, log = train_meanflow(make_student(teacher), pool, seconds=0.3, batch=16)
    assert log.steps >= 1 and log.seconds >= 0.3 and log.seconds < 60


def test_boundary_only_loss_is_teacher_regression_at_init():
    """With p_bnd = 1 every target is the frozen teacher's v; the residual student starts equal to it."""
    torch.manual_seed(0)
    pool = _pool(32)
    teacher = build_backbone("mlp")
    student = make_student(teacher)
    g = torch.Generator().manual_seed(0)
    loss = splitmeanflow_loss(student, teacher, pool.hr, pool.lr, g, p_bnd=1.0, p_one=0.0)
    assert loss.item() < 1e-12
    data = splitmeanflow_loss(student, teacher, pool.hr, pool.lr, g, p_bnd=1.0, p_one=0.0, boundary="data")
    assert data.item() > 1e-3
