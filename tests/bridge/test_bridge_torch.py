"""The batched torch path of the block recursion equals the numpy block path and the dense oracle."""

import numpy as np
import pytest

from neurips26.bridge import (
    GaussianPrior,
    GaussianTargets,
    NotPositiveDefiniteError,
    TiltedGaussian,
    gaussian_ipf,
)

torch_backend = pytest.importorskip("neurips26.bridge.torch_backend")
pytest.importorskip("torch")


def test_batched_torch_marginals_equal_numpy():
    laws = []
    for rho, seed in [(0.0, 0), (0.5, 1), (0.9, 2)]:
        prior = GaussianPrior.ar1(5, 2, 2, rho_z=rho)
        laws.append(gaussian_ipf(prior, GaussianTargets.default(5, 2, 2, slice_varying=bool(seed))))
    u, V, logdet = torch_backend.law_marginals(laws)
    for i, law in enumerate(laws):
        ub, Vb = law.marginals("block")
        assert np.allclose(u[i], ub, atol=1e-10) and np.allclose(V[i], Vb, atol=1e-10)
        assert logdet[i] == pytest.approx(law.logdet_precision(), abs=1e-9)
        ut, Vt = law.marginals("torch")
        ud, Vd = law.marginals("dense")
        assert np.allclose(ut, ud, atol=1e-10) and np.allclose(Vt, Vd, atol=1e-10)


def test_torch_path_raises_on_indefinite_precision():
    prior = GaussianPrior.ar1(3, 2, 2)
    bad = TiltedGaussian(prior, np.stack([-10 * np.eye(4)] * 3), np.zeros((3, 4)))
    with pytest.raises(NotPositiveDefiniteError, match="torch"):
        bad.marginals("torch")
