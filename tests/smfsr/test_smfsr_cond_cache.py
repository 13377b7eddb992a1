"""The interval-conditioning cache of ``forward_at`` (one (r, t) for the whole batch): bitwise equal to the
uncached forward, recomputed whenever a parameter it reads changes, never used while autograd records."""

import copy

import pytest
import torch

from neurips26.smfsr.lora import lora_copy
from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.sampler import adain_color_fix, reference_stats, super_resolve

KW = {"mlp": {}, "dit": {"dim": 32, "depth": 2, "heads": 2}, "unet": {"ch": 8, "emb": 32}}


def _model(name, C, H, student=True):
    torch.manual_seed(0)
    m = build_backbone(name, C, H, **KW[name])
    for p in m.parameters():  # adaLN-Zero / zero-init layers: perturb so that every path matters
        p.data.add_(0.05 * torch.randn_like(p))
    if student:
        m = make_student(m)
        for p in m.temb.interval_mlp.parameters():
            p.data.add_(0.05 * torch.randn_like(p))
    return m.eval()


def _inputs(C, H, B=5):
    g = torch.Generator().manual_seed(1)
    return torch.randn(B, C, H, H, generator=g), torch.rand(B, C, H // 4, H // 4, generator=g)


def _count_conditioning(monkeypatch, model):
    calls = [0]
    orig = model.conditioning

    def counted(r, t):
        calls[0] += 1
        return orig(r, t)

    monkeypatch.setattr(model, "conditioning", counted)
    return calls


@pytest.mark.parametrize("name, C, H", [("mlp", 1, 16), ("dit", 3, 16), ("unet", 3, 16)])
@pytest.mark.parametrize("student", [True, False])
def test_forward_at_is_bitwise_the_uncached_forward(name, C, H, student):
    m = _model(name, C, H, student)
    z, lr = _inputs(C, H)
    B = z.shape[0]
    for r, t, dt in ((0.0, 1.0, torch.float32), (0.25, 0.6, torch.float64), (0.7, 0.7, torch.float32)):
        rr, tt = torch.tensor(r, dtype=dt), torch.tensor(t, dtype=dt)
        with torch.no_grad():
            ref = m(z, rr.expand(B), tt.expand(B), lr)
            first = m.forward_at(z, rr, tt, lr)   # computes and caches the conditioning
            again = m.forward_at(z, rr, tt, lr)   # from the cache
        assert ref.abs().max() > 0
        assert torch.equal(first, ref) and torch.equal(again, ref)


def test_cache_hits_and_misses(monkeypatch):
    m = _model("mlp", 1, 16)
    z, lr = _inputs(1, 16)
    calls = _count_conditioning(monkeypatch, m)
    with torch.no_grad():
        for _ in range(3):
            m.forward_at(z, 0.0, 1.0, lr)
        assert calls[0] == 1
        m.forward_at(z, 0.0, 0.5, lr)           # another interval
        m.forward_at(z[:3], 0.0, 1.0, lr[:3])   # another batch size
        assert calls[0] == 3
        m.forward_at(z, 0.0, 1.0, lr)
        assert calls[0] == 3
    m.forward_at(z, 0.0, 1.0, lr)               # autograd recording: never cached
    assert calls[0] == 4
    m.clear_interval_cache()
    with torch.no_grad():
        m.forward_at(z, 0.0, 1.0, lr)
    assert calls[0] == 5


def _fresh(m, z, lr, r=0.0, t=1.0):
    B = z.shape[0]
    with torch.no_grad():
        return m(z, torch.full((B,), r), torch.full((B,), t), lr)


@pytest.mark.parametrize("change", ["optimizer", "inplace", "load_state_dict", "ema_lerp", "double"])
def test_cache_is_invalidated_when_conditioning_weights_change(change):
    m = _model("mlp", 1, 16)
    z, lr = _inputs(1, 16)
    with torch.no_grad():
        stale = m.forward_at(z, 0.0, 1.0, lr)
    if change == "optimizer":
        opt = torch.optim.SGD(m.parameters(), lr=1e-1)
        B = z.shape[0]
        m(z, torch.zeros(B), torch.ones(B), lr).square().mean().backward()
        opt.step()
    elif change == "inplace":
        with torch.no_grad():
            m.blocks[1].film.bias.add_(0.1)     # a FiLM layer only: the trunk is unchanged
    elif change == "load_state_dict":
        other = _model("mlp", 1, 16)
        with torch.no_grad():
            other.temb.interval_mlp[2].weight.mul_(3)
        m.load_state_dict(other.state_dict())
    elif change == "ema_lerp":
        with torch.no_grad():
            m.temb.time_mlp[0].weight.lerp_(torch.zeros_like(m.temb.time_mlp[0].weight), 0.5)
    else:
        m.double()
        z, lr = z.double(), lr.double()
    with torch.no_grad():
        new = m.forward_at(z, 0.0, 1.0, lr)
    ref = _fresh(m, z, lr) if change != "double" else m(z, torch.zeros(5, dtype=torch.float64),
                                                        torch.ones(5, dtype=torch.float64), lr).detach()
    assert torch.equal(new, ref)
    assert not torch.allclose(new.float(), stale)


def test_cache_follows_a_lora_swap_and_is_not_copied():
    m = _model("mlp", 1, 16)
    z, lr = _inputs(1, 16)
    with torch.no_grad():
        m.forward_at(z, 0.0, 1.0, lr)
    lo = lora_copy(m)                           # every Linear replaced: other parameters
    for p in lo.parameters():
        if p.requires_grad:
            p.data.normal_(0, 0.1)
    with torch.no_grad():
        assert torch.equal(lo.forward_at(z, 0.0, 1.0, lr), _fresh(lo, z, lr))
    cp = copy.deepcopy(m)
    with torch.no_grad():
        cp.blocks[0].film.weight.data.normal_(0, 0.1)   # .data: no version bump, but a fresh copy has no cache
        assert torch.equal(cp.forward_at(z, 0.0, 1.0, lr), _fresh(cp, z, lr))


def test_forward_at_keeps_gradients_when_recording():
    m = _model("mlp", 1, 16).train()
    z, lr = _inputs(1, 16)
    m.forward_at(z, 0.0, 1.0, lr).square().mean().backward()
    assert m.temb.interval_mlp[0].weight.grad is not None and m.temb.interval_mlp[0].weight.grad.abs().max() > 0
    assert m.blocks[0].film.weight.grad.abs().max() > 0


def test_forward_at_bad_input():
    m = _model("mlp", 1, 16)
    z, lr = _inputs(1, 16)
    with pytest.raises(ValueError, match="r <= t"):
        m.forward_at(z, 0.8, 0.2, lr)
    with pytest.raises(ValueError, match="r <= t"):
        m.forward_at(z, 0.0, 1.5, lr)
    with pytest.raises(ValueError, match="finite"):
        m.forward_at(z, float("nan"), 1.0, lr)
    with pytest.raises(ValueError, match="one interval"):
        m.forward_at(z, torch.zeros(5), torch.ones(5), lr)
    with pytest.raises(ValueError, match="lr"):
        m.forward_at(z, 0.0, 1.0, lr[:, :, :2])


@pytest.mark.parametrize("steps", [1, 3])
def test_sampler_equals_the_uncached_sampler(steps):
    """super_resolve (forward_at, cached) == the plain Euler loop over forward with (B,) time vectors."""
    from neurips26.smfsr.flows import cosine_grid
    m = _model("mlp", 1, 16)
    z, lr = _inputs(1, 16)
    B = z.shape[0]
    for _ in range(2):  # second pass: every grid step from the cache
        out = super_resolve(m, lr, steps, noise=z, clamp=False)
    with torch.no_grad():
        x = z
        if steps == 1:
            x = z - m(z, torch.zeros(B), torch.ones(B), lr)
        else:
            grid = cosine_grid(steps)
            for i in range(steps, 0, -1):
                x = x - (grid[i] - grid[i - 1]) * m(x, grid[i - 1].expand(B), grid[i].expand(B), lr)
        ref = adain_color_fix(x, ref_stats=reference_stats(lr))
    assert torch.equal(out, ref)


@pytest.mark.parametrize("steps", [1, 4])
def test_sampler_passes_host_floats_to_forward_at(monkeypatch, steps):
    """The sampler hands ``forward_at`` Python floats (no 0-d device tensor to read back per grid step),
    the grid's values in the model's dtype."""
    from neurips26.smfsr.flows import cosine_grid
    m = _model("mlp", 1, 16)
    z, lr = _inputs(1, 16)
    seen = []
    orig = m.forward_at

    def spy(z_, r, t, lr_):
        seen.append((r, t))
        return orig(z_, r, t, lr_)

    monkeypatch.setattr(m, "forward_at", spy)
    super_resolve(m, lr, steps, noise=z)
    grid = cosine_grid(steps, dtype=z.dtype).tolist()
    assert seen == [(grid[i - 1], grid[i]) for i in range(steps, 0, -1)]
    assert all(type(r) is float and type(t) is float for r, t in seen)


@pytest.mark.parametrize("name, C, H", [("mlp", 1, 16), ("dit", 3, 16), ("unet", 3, 16)])
@pytest.mark.parametrize("student", [True, False])
def test_cache_key_lists_exactly_the_parameters_conditioning_reads(name, C, H, student):
    """conditioning_parameters() (the cache's validity key) == the parameters autograd reaches from the
    conditioning's outputs: none missing (a stale cache) and none extra."""
    m = _model(name, C, H, student)
    params = dict(m.named_parameters())
    cond = m.conditioning(torch.full((3,), 0.2), torch.full((3,), 0.9))
    flat = [x for mods in cond for x in mods]
    total = sum(x.sum() for x in flat)
    grads = torch.autograd.grad(total, list(params.values()), allow_unused=True)
    reached = {id(p) for p, g in zip(params.values(), grads) if g is not None}
    keyed = [id(p) for p in m.conditioning_parameters()]
    assert len(keyed) == len(set(keyed))
    assert set(keyed) == reached
