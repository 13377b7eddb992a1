"""SMFSR's performance rows (every timing through ``harness.bench.compare``; interleaved medians).

1. SR throughput (images/s) on the same LR batch and noise: teacher-50, SMFSR-1, direct LR -> HR and
   RealESRGAN-lite against the teacher-20 anchor (ratio = speed-up). Every sampler runs through
   ``super_resolve`` with the same code path: each grid step is ``forward_at`` with the step's interval
   conditioning cached (teacher-20 reuses its 20 cached step embeddings exactly as SMFSR-1 reuses its one
   (0, 1) embedding, so the anchor pays no per-step cost the student does not). SMFSR-1 with AdaIN
   against one teacher forward (the floor; ratio >= 1 / 1.1 is the spec's target), twice: a bare
   ``teacher(z, t, t, lr)`` call (time embedding and FiLM computed in the call, as the earlier benches
   measured it) and ``teacher.forward_at`` with its conditioning cached (the stricter floor: only the
   sampler's own work, AdaIN and input checks, separates the two). Each timed sample is ``number``
   calls (short calls are otherwise at the mercy of the scheduler on the shared box).
2. Training step, SplitMeanFlow (2 no-grad + 1 grad forward) vs MeanFlow-JVP (forward + JVP + backward)
   at equal batch: time, and the bytes autograd saves for backward (the activation memory; CPU has
   no ``max_memory_allocated``).
3. Real-ESRGAN degradation throughput (pairs/s at 64 x 64 RGB) with and without JPEG; the anchor
   (basicsr) cannot run here (its import needs torchvision). The FFT blur against the grouped-conv reference.

Also ``stand_in_features`` (the frozen stand-in backbone features of the local FID/KID), a leaf used by
``experiment``.
"""

from __future__ import annotations

import functools

import torch

from neurips26.harness.bench import BenchRow, compare
from neurips26.smfsr.baselines import RealESRGANLite
from neurips26.smfsr.degradation import (DegradationConfig, KernelConfig, degrade, filter2d, filter2d_direct,
                                         random_kernels)
from neurips26.smfsr.discriminator import DinoProjectedDiscriminator
from neurips26.smfsr.models import build_backbone, make_student
from neurips26.smfsr.sampler import super_resolve
from neurips26.smfsr.training import meanflow_loss, splitmeanflow_loss


@functools.lru_cache(maxsize=4)
def _feature_net(img: int) -> DinoProjectedDiscriminator:
    return DinoProjectedDiscriminator.tiny(img=img, seed=1234).eval()


@torch.no_grad()
def stand_in_features(x: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """(N, 4 * 64) features: token means of the 4 taps of a fixed random-init tiny ViT (seed 1234).
    Local FID/KID only; not comparable to Inception features or published FID."""
    net = _feature_net(x.shape[-1])
    out = []
    for i in range(0, x.shape[0], batch):
        fs = net.features(x[i:i + batch].float())
        out.append(torch.cat([f.mean((2, 3)) for f in fs], dim=1))
    return torch.cat(out).double()


def _saved_bytes(fn) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn()`` builds its graph."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn()
    loss.backward()
    return total[0]


def bench(ctx) -> list[BenchRow]:
    """Every row on one torch thread (the quick run's setting: on the shared 2-core box a second
    intra-op thread makes these small models ~30x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _bench(ctx)
    finally:
        torch.set_num_threads(before)


def _bench(ctx) -> list[BenchRow]:
    smoke = ctx.scale == "smoke"
    rounds = 2 if smoke else 7
    number = 1 if smoke else 5  # calls per timed sample (both sides alike)
    n = 16 if smoke else 128  # the quick batch
    torch.manual_seed(0)
    teacher = build_backbone("mlp", 1, 16).eval()
    student = make_student(teacher).eval()
    direct = make_student(teacher).eval()
    esr = RealESRGANLite(1).eval()
    lr = torch.rand(n, 1, 4, 4)
    noise = torch.randn(n, 1, 16, 16)
    o = torch.ones(n)
    t20 = lambda: super_resolve(teacher, lr, 20, noise=noise)  # noqa: E731
    rows = []
    for name, fn, nfe in (("teacher-50", lambda: super_resolve(teacher, lr, 50, noise=noise), 50),
                          ("SMFSR-1 (AdaIN)", lambda: super_resolve(student, lr, 1, noise=noise), 1),
                          ("direct LR->HR", lambda: super_resolve(direct, lr, 1, start="lr"), 1),
                          ("RealESRGAN-lite", lambda: esr.super_resolve(lr), 1)):
        rows.append(compare(f"SR 16x16 grey, {name} (NFE {nfe}) vs teacher-20 (NFE 20)", fn, t20,
                            "teacher-20", unit="images/s", work=n, rounds=rounds, number=number,
                            note=f"batch {n}"))

    def one_forward():
        with torch.no_grad():
            return teacher(noise, o, o, lr)

    def one_forward_cached():
        with torch.no_grad():
            return teacher.forward_at(noise, 1.0, 1.0, lr)

    rows.append(compare("SMFSR-1 incl. AdaIN vs one bare teacher forward (floor)",
                        lambda: super_resolve(student, lr, 1, noise=noise), one_forward, "1 teacher forward",
                        unit="images/s", work=n, rounds=rounds, number=number,
                        note=f"batch {n}; target ratio >= 1/1.1; the forward computes its time embedding"))
    rows.append(compare("SMFSR-1 incl. AdaIN vs one teacher forward_at, conditioning cached (strict floor)",
                        lambda: super_resolve(student, lr, 1, noise=noise), one_forward_cached,
                        "1 teacher forward_at (cached)", unit="images/s", work=n, rounds=rounds, number=number,
                        note=f"batch {n}; target ratio >= 1/1.1; both sides skip the time embedding"))

    b = 16 if smoke else 128
    hr_b, lr_b = torch.rand(b, 1, 16, 16), torch.rand(b, 1, 4, 4)
    train_student = make_student(teacher).train()
    g = torch.Generator().manual_seed(0)

    def smf_step():
        train_student.zero_grad(set_to_none=True)
        splitmeanflow_loss(train_student, teacher, hr_b, lr_b, g).backward()

    def jvp_step():
        train_student.zero_grad(set_to_none=True)
        meanflow_loss(train_student, hr_b, lr_b, g).backward()

    rows.append(compare(f"train step, batch {b}: SplitMeanFlow vs MeanFlow-JVP", smf_step, jvp_step,
                        "MeanFlow-JVP (torch.func.jvp)", unit="ms", rounds=rounds))
    m_smf = _saved_bytes(lambda: splitmeanflow_loss(train_student, teacher, hr_b, lr_b, g))
    m_jvp = _saved_bytes(lambda: meanflow_loss(train_student, hr_b, lr_b, g))
    rows.append(BenchRow(f"train step memory, batch {b}: SplitMeanFlow vs MeanFlow-JVP", m_smf / 2 ** 20,
                         m_jvp / 2 ** 20, "MeanFlow-JVP (torch.func.jvp)", "MiB", "lower",
                         "bytes autograd saves for backward (saved_tensors_hooks), one step"))

    nd = 32 if smoke else 512
    hr64 = torch.rand(nd, 3, 64, 64)
    for jpeg in (True, False):
        cfg = DegradationConfig(jpeg=jpeg)
        gd = torch.Generator().manual_seed(0)
        rows.append(compare(f"Real-ESRGAN degradation 64x64 RGB, {'with' if jpeg else 'without'} JPEG",
                            lambda: degrade(hr64, gd, cfg), None, "basicsr 1.4.2", unit="pairs/s", work=nd,
                            rounds=max(1, rounds // 2),
                            missing="basicsr cannot be imported here (its import needs torchvision)",
                            note="target >= 700 pairs/s"))
    ks = random_kernels(nd, KernelConfig(), torch.Generator().manual_seed(1))
    rows.append(compare("21x21 per-sample blur, 64x64 RGB: FFT vs grouped conv2d", lambda: filter2d(hr64, ks),
                        lambda: filter2d_direct(hr64, ks), "grouped conv2d (reference)", unit="ms",
                        rounds=rounds))
    return rows
