"""Non-flow baselines: bicubic (``base.bicubic_sr``) and RealESRNet / RealESRGAN-lite.

RealESRGAN-lite: a small residual CNN (conv -> ``blocks`` residual blocks -> two x2 pixel-shuffle
upsamplers -> conv), trained with L1 (RealESRNet), then L1 + hinge GAN against a PatchGAN
(the Real-ESRGAN recipe, shrunk).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from neurips26.harness.validation import check_scalar
from neurips26.smfsr.base import check_image, upsample
from neurips26.smfsr.discriminator import PatchGAN, hinge_d_loss, hinge_g_loss
from neurips26.smfsr.training import TrainLog, draw_batch


class ResBlock(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(ch, ch, 3, padding=1), nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return x + 0.2 * self.c2(F.leaky_relu(self.c1(x), 0.2))


class RealESRGANLite(nn.Module):
    """x4 residual CNN; output = bicubic(lr) + learned residual."""

    def __init__(self, channels: int = 1, ch: int = 32, blocks: int = 4):
        super().__init__()
        self.channels = check_scalar(channels, "channels", int, min=1)
        self.head = nn.Conv2d(channels, ch, 3, padding=1)
        self.body = nn.Sequential(*[ResBlock(ch) for _ in range(blocks)])
        self.up = nn.Sequential(nn.Conv2d(ch, 4 * ch, 3, padding=1), nn.PixelShuffle(2), nn.LeakyReLU(0.2),
                                nn.Conv2d(ch, 4 * ch, 3, padding=1), nn.PixelShuffle(2), nn.LeakyReLU(0.2))
        self.tail = nn.Conv2d(ch, channels, 3, padding=1)

    def forward(self, lr: torch.Tensor) -> torch.Tensor:
        return upsample(lr) + self.tail(self.up(self.body(self.head(lr))))

    @torch.no_grad()
    def super_resolve(self, lr: torch.Tensor) -> torch.Tensor:
        lr = check_image(lr, "lr", channels=self.channels)
        return self.eval()(lr).clamp(0, 1)


def train_realesrgan(model: RealESRGANLite, pool, l1_steps: int, gan_steps: int, batch: int = 128,
                     lr: float = 2e-4, lam_adv: float = 0.1, seed: int = 0) -> TrainLog:
    """RealESRNet (L1) for ``l1_steps``, then RealESRGAN (L1 + lam_adv hinge GAN) for ``gan_steps``."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    disc = PatchGAN(model.channels)
    opt_d = torch.optim.Adam(disc.parameters(), lr=lr, betas=(0.0, 0.99))
    log = TrainLog()
    model.train()
    for step in range(l1_steps + gan_steps):
        hr, y = draw_batch(pool, batch, g)
        sr = model(y)
        loss = (sr - hr).abs().mean()
        if step >= l1_steps:
            loss = loss + lam_adv * hinge_g_loss(disc(sr))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= l1_steps:
            opt_d.zero_grad(set_to_none=True)
            hinge_d_loss(disc(hr), disc(sr.detach())).backward()
            opt_d.step()
        log.losses.append(float(loss))
        log.steps += 1
    model.eval()
    return log
