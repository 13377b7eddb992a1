"""2D-to-3D Schroedinger-bridge lift: an exact testbed for KL(Pi_tau || P*) = O(N sigma^2).

    from neurips26.bridge import GaussianPrior, GaussianTargets, gaussian_ipf, AnnealedTilt, edm_sigmas, kl
    prior, targets = GaussianPrior.ar1(N=4, h=2, w=2, rho_z=0.5), GaussianTargets.default(4, 2, 2)
    pstar = gaussian_ipf(prior, targets)
    curve = [kl(p, pstar) for p in AnnealedTilt().laws(prior, targets, edm_sigmas(18))]  # KL(Pi_tau || P*)
"""

from neurips26.bridge.chain import ChainLaw, brute_force_ipf, chain_kl, chain_sinkhorn, chain_sweep
from neurips26.bridge.errors import ConvergenceError, InfeasibleError, NotPositiveDefiniteError
from neurips26.bridge.gaussian import DenseGaussian, TiltedGaussian, gaussian_ipf, gaussian_kl, tilt_sweep
from neurips26.bridge.metrics import (
    alignment_ratio,
    bound_ingredients,
    fit_slope,
    kl,
    kl_mc,
    pinsker,
    tv_exact,
    tv_mc,
)
from neurips26.bridge.priors import (
    ChainPrior,
    GaussianPrior,
    GaussianTargets,
    discrete_target,
    discrete_targets,
    separable_covariance,
)
from neurips26.bridge.schedule import edm_sigmas, smooth_gaussian, smoothing_matrix
from neurips26.bridge.surrogates import AnnealedTilt, EDMSampler, ProductTilt, SmoothedPotentials

__all__ = [
    "AnnealedTilt",
    "ChainLaw",
    "ChainPrior",
    "ConvergenceError",
    "DenseGaussian",
    "EDMSampler",
    "GaussianPrior",
    "GaussianTargets",
    "InfeasibleError",
    "NotPositiveDefiniteError",
    "ProductTilt",
    "SmoothedPotentials",
    "TiltedGaussian",
    "alignment_ratio",
    "bound_ingredients",
    "brute_force_ipf",
    "chain_kl",
    "chain_sinkhorn",
    "chain_sweep",
    "discrete_target",
    "discrete_targets",
    "edm_sigmas",
    "fit_slope",
    "gaussian_ipf",
    "gaussian_kl",
    "kl",
    "kl_mc",
    "pinsker",
    "separable_covariance",
    "smooth_gaussian",
    "smoothing_matrix",
    "tilt_sweep",
    "tv_exact",
    "tv_mc",
]
