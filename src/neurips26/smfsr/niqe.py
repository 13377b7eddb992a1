"""NIQE (Mittal et al. 2013), re-implemented; pristine parameters from the ``basicsr==1.4.2`` sdist.

basicsr is never imported or installed: its sdist is fetched once with ``pip download --no-deps`` (the
harness's ``pip_download``), checked against its sha256 and ``basicsr/metrics/niqe_pris_params.npz``
(mu 1 x 36, cov 36 x 36, the 7 x 7 Gaussian window) is read from the tarball.

Per image (Y channel of BT.601 on the 0-255 scale, rounded; cropped to multiples of 96)::

    for scale in (1, 1/2):       mu = w * I, sigma = sqrt(|w * I^2 - mu^2|), I_hat = (I - mu) / (sigma + 1)
        per 96/scale block:      AGGD fit of I_hat -> (alpha, (beta_l + beta_r) / 2)
                                 for the 4 neighbour products I_hat * shift(I_hat):
                                     (alpha, mean, beta_l, beta_r)
        I <- bicubic x 1/2 (antialiased; MATLAB's imresize is approximated by torch's antialiased bicubic)
    NIQE = sqrt((mu_p - mu_d)^T pinv((C_p + C_d) / 2) (mu_p - mu_d))     (lower is better)

The AGGD fit is the moment-matching search over alpha in [0.2, 10] (step 0.001) of basicsr / MATLAB.
"""

from __future__ import annotations

import io
import inspect
import tarfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy.ndimage import convolve
from scipy.special import gamma

from neurips26.harness.cache import cache_dir
from neurips26.harness.sdist import pip_download, verify_sha256
from neurips26.smfsr.base import check_image, to_y

BASICSR_SDIST = "basicsr-1.4.2.tar.gz"
BASICSR_SHA256 = "b89b595a87ef964cda9913b4d99380ddb6554c965577c0c10cb7b78e31301e87"
PARAMS_MEMBER = "basicsr-1.4.2/basicsr/metrics/niqe_pris_params.npz"
BLOCK = 96
MIN_SIZE = 192  # two blocks at the half scale need 96 px: whole-image NIQE only (not 16 x 16 patches)


def fetch_sdist(folder: Path | str | None = None) -> Path:
    """The verified basicsr 1.4.2 sdist in ``folder`` (default: the smfsr cache), fetched once."""
    folder = Path(folder) if folder is not None else cache_dir("smfsr") / "sdist"
    path = folder / BASICSR_SDIST
    if not path.exists():
        # basicsr's setup.py imports torch: without build isolation pip can read its metadata offline
        # (the harness's pip_download gained that switch; an older harness lacks it)
        if "no_build_isolation" in inspect.signature(pip_download).parameters:
            pip_download("basicsr==1.4.2", folder, no_build_isolation=True)
        else:
            pip_download("basicsr==1.4.2", folder)
    if not path.exists():
        raise FileNotFoundError(f"pip download did not produce {str(path)!r}")
    verify_sha256(path, BASICSR_SHA256)
    return path


def load_pristine_params(sdist: Path | str | None = None) -> dict:
    """{"mu": (36,), "cov": (36, 36), "window": (7, 7)} from the sdist's ``niqe_pris_params.npz``."""
    path = Path(sdist) if sdist is not None else fetch_sdist()
    if not path.is_file():
        raise FileNotFoundError(f"NIQE parameter source not found: {str(path)!r}")
    verify_sha256(path, BASICSR_SHA256)
    with tarfile.open(path) as tar:
        data = np.load(io.BytesIO(tar.extractfile(PARAMS_MEMBER).read()))  # type: ignore[union-attr]
        return {"mu": np.asarray(data["mu_pris_param"], dtype=np.float64).reshape(-1),
                "cov": np.asarray(data["cov_pris_param"], dtype=np.float64),
                "window": np.asarray(data["gaussian_window"], dtype=np.float64)}


_GAM = np.arange(0.2, 10.001, 0.001)
_R_GAM = gamma(2 / _GAM) ** 2 / (gamma(1 / _GAM) * gamma(3 / _GAM))


def aggd_fit(x: np.ndarray) -> tuple[float, float, float]:
    """(alpha, beta_l, beta_r) of an asymmetric generalised Gaussian by moment matching."""
    x = x.ravel()
    left = np.sqrt(np.mean(x[x < 0] ** 2)) if np.any(x < 0) else 0.0
    right = np.sqrt(np.mean(x[x > 0] ** 2)) if np.any(x > 0) else 0.0
    gh = left / right if right > 0 else np.inf
    rhat = np.mean(np.abs(x)) ** 2 / np.mean(x ** 2)
    rnorm = rhat * (gh ** 3 + 1) * (gh + 1) / (gh ** 2 + 1) ** 2
    alpha = _GAM[np.argmin((_R_GAM - rnorm) ** 2)]
    c = np.sqrt(gamma(1 / alpha) / gamma(3 / alpha))
    return float(alpha), float(left * c), float(right * c)


def block_features(block: np.ndarray) -> list[float]:
    """The 18 NIQE features of one normalised block."""
    a, bl, br = aggd_fit(block)
    feat = [a, (bl + br) / 2]
    for shift in ((0, 1), (1, 0), (1, 1), (1, -1)):
        a, bl, br = aggd_fit(block * np.roll(block, shift, axis=(0, 1)))
        mean = (br - bl) * (gamma(2 / a) / gamma(1 / a))
        feat += [a, mean, bl, br]
    return feat


def niqe(img: torch.Tensor, params: dict, crop_border: int = 0) -> float:
    """NIQE of one image (1, C, H, W) or (C, H, W) in [0, 1]; both sides >= 192 px."""
    img = check_image(img, "img", min_size=MIN_SIZE)
    if img.shape[0] != 1:
        raise ValueError(f"niqe takes one image, got a batch of {img.shape[0]}")
    y = (to_y(img.double())[0, 0] * 255.0).round()
    if crop_border:
        y = y[crop_border:-crop_border, crop_border:-crop_border]
    h, w = (y.shape[0] // BLOCK) * BLOCK, (y.shape[1] // BLOCK) * BLOCK
    y = y[:h, :w].numpy()
    win = params["window"]
    feats = []
    for scale in (1, 2):
        mu = convolve(y, win, mode="nearest")
        sigma = np.sqrt(np.abs(convolve(y * y, win, mode="nearest") - mu * mu))
        norm = (y - mu) / (sigma + 1)
        bs = BLOCK // scale
        rows = [block_features(norm[i * bs:(i + 1) * bs, j * bs:(j + 1) * bs])
                for i in range(h // BLOCK) for j in range(w // BLOCK)]
        feats.append(np.array(rows))
        if scale == 1:
            t = torch.from_numpy(y / 255.0)[None, None]
            y = F.interpolate(t, scale_factor=0.5, mode="bicubic", antialias=True,
                              align_corners=False)[0, 0].numpy() * 255.0
    dist = np.concatenate(feats, axis=1)
    mu_d = np.nanmean(dist, axis=0)
    ok = dist[~np.isnan(dist).any(axis=1)]
    cov_d = np.cov(ok, rowvar=False)
    inv = np.linalg.pinv((params["cov"] + cov_d) / 2)
    diff = params["mu"] - mu_d
    return float(np.sqrt(diff @ inv @ diff))
