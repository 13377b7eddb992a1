"""Gaussian IPF, the block-tridiagonal fast path vs the dense oracle; acceptance checks 1, 2, 6, 11, 12."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.bridge import (
    ConvergenceError,
    GaussianPrior,
    GaussianTargets,
    NotPositiveDefiniteError,
    ProductTilt,
    TiltedGaussian,
    gaussian_ipf,
    gaussian_kl,
    kl,
    tilt_sweep,
)
from neurips26.bridge.gaussian import DenseGaussian, gaussian_kl_dense
from neurips26.bridge.priors import ar1_matrix, separable_covariance


def problem(N=4, h=2, w=2, rho_z=0.5, **kw):
    return GaussianPrior.ar1(N, h, w, rho_z=rho_z), GaussianTargets.default(N, h, w, **kw)


def test_prior_precision_blocks_invert_the_kronecker_covariance():
    prior = GaussianPrior.ar1(5, 2, 3, rho_z=0.7, mean=0.3)
    Lam, eta = TiltedGaussian.untilted(prior).dense_precision()
    S = prior.dense_covariance()
    assert np.allclose(Lam @ S, np.eye(30), atol=1e-10)
    assert np.allclose(np.linalg.solve(Lam, eta), 0.3, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(N=st.integers(1, 6), rho=st.floats(0, 0.95), seed=st.integers(0, 10_000))
def test_block_marginals_logdet_equal_dense(N, rho, seed):
    rng = np.random.default_rng(seed)
    prior = GaussianPrior.ar1(N, 1, 3, rho_z=rho, mean=rng.normal(size=3))
    A = np.stack([0.3 * np.eye(3) + 0.05 * (lambda B: B + B.T)(rng.normal(size=(3, 3))) for _ in range(N)])
    law = TiltedGaussian(prior, A, rng.normal(size=(N, 3)))
    u, V = law.marginals("block")
    ud, Vd = law.marginals("dense")
    assert np.allclose(u, ud, atol=1e-10) and np.allclose(V, Vd, atol=1e-10)
    Lam, _ = law.dense_precision()
    assert np.isclose(law.logdet_precision(), np.linalg.slogdet(Lam)[1], atol=1e-9)


@pytest.mark.parametrize("rho_z", [0.0, 0.5, 0.9])
def test_ipf_marginals_and_block_diagonal_tilt(rho_z):
    """Check 1: slice marginals to 1e-10; inv(Sigma*) - Sigma_R^-1 has off-diagonal blocks <= 1e-8."""
    prior, targets = problem(N=4, rho_z=rho_z)
    pstar = gaussian_ipf(prior, targets, method="dense")
    m, S = pstar.dense()
    u, V = m.reshape(4, 4), np.stack([S[4 * k : 4 * k + 4, 4 * k : 4 * k + 4] for k in range(4)])
    assert np.max(np.abs(V - targets.covs)) < 1e-10 and np.max(np.abs(u - targets.means)) < 1e-10
    diff = np.linalg.inv(S) - np.linalg.inv(prior.dense_covariance())
    off = diff.copy()
    for k in range(4):
        off[4 * k : 4 * k + 4, 4 * k : 4 * k + 4] = 0
    assert np.max(np.abs(off)) < 1e-8
    if rho_z == 0.0:
        assert pstar.info["sweeps"] <= 2


def test_block_and_dense_ipf_agree():
    prior, targets = problem(N=6, rho_z=0.6, slice_varying=True)
    a = gaussian_ipf(prior, targets, method="block")
    b = gaussian_ipf(prior, targets, method="dense")
    assert a.info["sweeps"] == b.info["sweeps"]
    assert np.allclose(a.A, b.A, atol=1e-10) and np.allclose(a.b, b.b, atol=1e-10)
    assert np.isclose(
        gaussian_kl(a, TiltedGaussian.untilted(prior)),
        gaussian_kl_dense(
            *DenseGaussian.of(a).__dict__.values(),
            *DenseGaussian.of(TiltedGaussian.untilted(prior)).__dict__.values(),
        ),
        rtol=1e-10,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pythagorean_identity(seed):
    """Check 2: KL(Q||R) = KL(Q||P*) + KL(P*||R) for feasible Q = N(1 (x) m_mu, K' (x) S_mu)."""
    prior, targets = problem(N=4, rho_z=0.5)
    pstar = gaussian_ipf(prior, targets)
    rng = np.random.default_rng(seed)
    if seed == 0:
        Kp = np.eye(4)
    else:
        X = rng.normal(size=(4, 8))
        C = X @ X.T
        Kp = C / np.sqrt(np.outer(np.diag(C), np.diag(C)))
    Q = DenseGaussian(np.tile(targets.means[0], 4), np.kron(Kp, targets.covs[0]))
    R = DenseGaussian.of(TiltedGaussian.untilted(prior))
    lhs = kl(Q, R)
    rhs = kl(Q, DenseGaussian.of(pstar)) + kl(pstar, TiltedGaussian.untilted(prior))
    assert abs(lhs - rhs) <= 1e-8 * abs(lhs)
    assert kl(Q, R) >= kl(pstar, TiltedGaussian.untilted(prior))


def test_rho_zero_gives_product_law_and_s2_at_zero_sigma_is_exact():
    """Check 6: rho_z = 0 -> P* = product of the mu_k; S2 at sigma = 0 equals P* (KL < 1e-12)."""
    prior, targets = problem(N=3, rho_z=0.0)
    pstar = gaussian_ipf(prior, targets)
    m, S = pstar.dense()
    assert np.allclose(S, np.kron(np.eye(3), targets.covs[0]), atol=1e-10)
    assert np.allclose(m, 0.5, atol=1e-10)
    s2 = ProductTilt().tilt_at(prior, targets, 0.0)
    assert abs(kl(s2, pstar)) < 1e-12


def test_reversal_permutes_pstar_and_keeps_kl():
    """Check 12: reversing the slice order permutes P* and leaves KL values unchanged."""
    prior, targets = problem(N=5, rho_z=0.5, slice_varying=True)
    pstar = gaussian_ipf(prior, targets)
    rev = gaussian_ipf(prior.reversed(), targets.reversed())
    assert np.allclose(rev.A, pstar.A[::-1], atol=1e-9) and np.allclose(rev.b, pstar.b[::-1], atol=1e-9)
    R, Rr = TiltedGaussian.untilted(prior), TiltedGaussian.untilted(rev.prior)
    assert abs(kl(pstar, R) - kl(rev, Rr)) < 1e-10
    s2, s2r = (
        ProductTilt().tilt_at(prior, targets, 0.3),
        ProductTilt().tilt_at(rev.prior, targets.reversed(), 0.3),
    )
    assert abs(kl(s2, pstar) - kl(s2r, rev)) < 1e-10


def test_tilt_update_that_breaks_positive_definiteness_raises():
    """Check 11: a tilt making the precision indefinite raises, never returns NaN."""
    prior, targets = problem(N=3)
    bad = TiltedGaussian(prior, np.stack([-10 * np.eye(4)] * 3), np.zeros((3, 4)))
    with pytest.raises(NotPositiveDefiniteError):
        bad.marginals()
    with pytest.raises(NotPositiveDefiniteError):
        tilt_sweep(bad, targets, 0.1)
    with pytest.raises(NotPositiveDefiniteError):
        bad.dense()


def test_ipf_reports_residual_at_max_iter():
    prior, targets = problem(N=4, rho_z=0.9)
    with pytest.raises(ConvergenceError) as e:
        gaussian_ipf(prior, targets, max_iter=2)
    assert e.value.residual > 1e-10 and e.value.iterations == 2 and "residual" in str(e.value)


def test_sampling_and_log_density_exact():
    from scipy.stats import multivariate_normal

    prior, targets = problem(N=3)
    pstar = gaussian_ipf(prior, targets)
    x = pstar.sample(5, np.random.default_rng(0))
    m, S = pstar.dense()
    assert np.allclose(pstar.log_density(x), multivariate_normal(m, S).logpdf(x.reshape(5, -1)), atol=1e-9)
    big = pstar.sample(100_000, np.random.default_rng(1)).reshape(100_000, -1)
    assert np.max(np.abs(np.cov(big.T) - S)) < 0.02


def test_bad_gaussian_inputs_name_the_argument():
    with pytest.raises(ValueError, match="rho_z"):
        GaussianPrior.ar1(4, 2, 2, rho_z=1.0)
    with pytest.raises(ValueError, match="rho_z"):
        GaussianPrior.ar1(4, 2, 2, rho_z=-0.1)
    with pytest.raises(ValueError, match="N"):
        GaussianPrior.ar1(0, 2, 2)
    with pytest.raises(ValueError, match="h"):
        GaussianPrior.ar1(2, 0, 2)
    with pytest.raises(ValueError, match="symmetric"):
        GaussianPrior.create(2, np.array([[1.0, 0.2], [0.1, 1.0]]))
    with pytest.raises(NotPositiveDefiniteError, match="C"):
        GaussianPrior.create(2, np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(NotPositiveDefiniteError, match="covs"):
        GaussianTargets.create(np.zeros((2, 2)), np.stack([np.eye(2), -np.eye(2)]))
    with pytest.raises(ValueError, match="dimension"):
        gaussian_ipf(GaussianPrior.ar1(4, 2, 2), GaussianTargets.default(4, 1, 3))
    with pytest.raises(ValueError, match="covs"):
        GaussianTargets.create(np.zeros((2, 3)), np.stack([np.eye(2)] * 2))


def test_separable_covariance_is_kronecker_of_ar1():
    assert np.allclose(
        separable_covariance(2, 3, 0.6, 2.0), 2.0 * np.kron(ar1_matrix(2, 0.6), ar1_matrix(3, 0.6))
    )
