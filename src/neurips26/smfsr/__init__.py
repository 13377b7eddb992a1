"""SMFSR: noise-started one-step real-world SR via LR-conditioned SplitMeanFlow + GAN/VSD refinement.

    from neurips26.smfsr import (build_backbone, make_student, super_resolve, train_splitmeanflow,
                                 train_teacher)
    teacher = build_backbone("mlp", channels=1, hr_size=16); train_teacher(teacher, pool, steps=1200)
    ema, _ = train_splitmeanflow(make_student(teacher), teacher, pool, 1200)
    sr = super_resolve(ema.model, lr)          # 1 NFE from noise
"""

from neurips26.smfsr.base import bicubic_sr, check_image, to_y, upsample
from neurips26.smfsr.baselines import RealESRGANLite, train_realesrgan
from neurips26.smfsr.data import PairPool, PoolConfig, build_pool, get_pool, load_image, load_split
from neurips26.smfsr.degradation import DegradationConfig, KernelConfig, degrade, jpeg, random_kernels
from neurips26.smfsr.discriminator import (DinoProjectedDiscriminator, PatchGAN, TinyViT, build_discriminator,
                                           diff_augment, hinge_d_loss, hinge_g_loss, save_backbone)
from neurips26.smfsr.flows import (adaptive_weight, cosine_grid, displace, interpolate, logit_normal,
                                   meanflow_target, sample_meanflow_intervals, sample_split_intervals,
                                   split_target, velocity)
from neurips26.smfsr.metrics import fid, gmsd, haarpsi, hf_ratio, kid, ms_ssim, psnr, ssim, swd
from neurips26.smfsr.models import (BACKBONES, IntervalEmbedding, MLPBackbone, TinyDiT4SR, UNetSR,
                                    build_backbone, make_student)
from neurips26.smfsr.oracle import GaussianOracle
from neurips26.smfsr.refine import RefineConfig, generate, refine, vsd_grad, vsd_loss
from neurips26.smfsr.sampler import (adain_color_fix, diversity, euler_sample, super_resolve,
                                     wavelet_color_fix)
from neurips26.smfsr.training import (EMA, meanflow_loss, splitmeanflow_loss, train_meanflow,
                                      train_splitmeanflow, train_teacher)

__all__ = ["bicubic_sr", "check_image", "to_y", "upsample", "RealESRGANLite", "train_realesrgan", "PairPool",
           "PoolConfig", "build_pool", "get_pool", "load_image", "load_split", "DegradationConfig",
           "KernelConfig", "degrade", "jpeg", "random_kernels", "DinoProjectedDiscriminator", "PatchGAN",
           "TinyViT", "build_discriminator", "diff_augment", "hinge_d_loss", "hinge_g_loss", "save_backbone",
           "adaptive_weight", "cosine_grid", "displace", "interpolate", "logit_normal", "meanflow_target",
           "sample_meanflow_intervals", "sample_split_intervals", "split_target", "velocity", "fid", "gmsd",
           "haarpsi", "hf_ratio", "kid", "ms_ssim", "psnr", "ssim", "swd", "BACKBONES", "IntervalEmbedding",
           "MLPBackbone", "TinyDiT4SR", "UNetSR", "build_backbone", "make_student", "GaussianOracle",
           "RefineConfig", "generate", "refine", "vsd_grad", "vsd_loss", "adain_color_fix", "diversity",
           "euler_sample", "super_resolve", "wavelet_color_fix", "EMA", "meanflow_loss", "splitmeanflow_loss",
           "train_meanflow", "train_splitmeanflow", "train_teacher"]
