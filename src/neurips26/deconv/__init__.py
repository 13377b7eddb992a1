"""convMMD density deconvolution and empirical-Bayes denoising (Vashistha, Sarkar, Farahi).

    from neurips26.deconv import NoiseModel, ConvMMDGMM
    est = ConvMMDGMM(n_components=6).fit(x, noise=NoiseModel("laplace", std=s[:, None]))
    est.pdf(grid[:, None]); est.sample(1000, random_state=0); est.posterior_mean(x, noise)
"""

from neurips26.deconv.baselines import NPMLE, DeconKDE, ExtremeDeconvolution, GModel, naive_kde
from neurips26.deconv.denoise import (ISResult, gmm_posterior, importance_posterior_mean,
                                      quadrature_posterior_mean, langevin_posterior_mean, posterior_mean,
                                      tweedie_gmm, tweedie_kde)
from neurips26.deconv.estimators import ConvMMDFlow, ConvMMDGMM, FlowConfig, TrainConfig
from neurips26.deconv.loss import bandwidth_heuristic, kernel_matrix, mmd2_unbiased
from neurips26.deconv.noise import NoiseModel

__all__ = ["NoiseModel", "ConvMMDGMM", "ConvMMDFlow", "TrainConfig", "FlowConfig", "mmd2_unbiased",
           "kernel_matrix", "bandwidth_heuristic", "gmm_posterior", "importance_posterior_mean",
           "langevin_posterior_mean", "quadrature_posterior_mean", "posterior_mean", "tweedie_gmm",
           "tweedie_kde", "ISResult",
           "DeconKDE", "NPMLE", "ExtremeDeconvolution", "GModel", "naive_kde"]
